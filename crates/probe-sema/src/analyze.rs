//! The analysis pass: probe matching, name resolution, type inference and checks.
//!
//! Order of work, as DTrace's compiler (dt_cc.c) but with one addition:
//!
//! 1. options (`#pragma D option`, then `-x`, which win);
//! 2. declarations (`int x;`, `self string s;`);
//! 3. a *pre-pass* over all clauses that fixes the types of variables and aggregations from their
//!    first assignment in program order, with diagnostics discarded. DTrace is strictly one-pass: a
//!    clause that reads `self->ts` before the clause that assigns it fails there; we accept it (the
//!    reference lists this difference);
//! 4. the checking pass: each clause's probe descriptions are matched against the catalog, then its
//!    predicate and statements are typed, with every error reported.
//!
//! The `Analyzer` state lives here; its methods are split by subject: `options`, `decls`,
//! `clauses` (probe matching, the pre-pass, statements), `aggs`, `actions`, `expr` (operators and
//! constants), `vars` (assignment, indexing, probe arguments), `member` (`->`/`.` and BTF places),
//! `calls` (subroutines), and `names` (the known names and "did you mean" suggestions).

use crate::SemaOptions;
use crate::catalog::{ProbeArgs, ProbeCatalog, ProbeDescPattern, ProbeInfo};
use crate::checked::*;
use crate::types::{SymKind, Type, usual_arithmetic};
use probe_format::agg::{AggError, AggFunc};
use probe_format::printf::{self, ArgKind, ArgSlot};
use probe_syntax::ast::{
    self, BaseType, BinaryOp, Expr, ExprKind, MacroVar, Stmt, StmtKind, UnaryOp,
};
use probe_syntax::{Diagnostic, ErrTag, Span};
use std::collections::HashMap;

mod actions;
mod aggs;
mod bitfields;
mod calls;
mod clauses;
mod decls;
mod expr;
mod member;
mod names;
mod options;
mod procfs;
pub use options::{parse_rate, parse_size};
mod typedefs;
mod vars;
mod xlate;

pub use clauses::PROBE_FIELD_LIMITS;
pub use options::{STACKFRAMES_MAX, STRSIZE_MAX};

use self::{expr::*, names::*};

/// A failure already reported as a diagnostic.
#[derive(Debug)]
struct Reported;

type R<T> = Result<T, Reported>;

/// Analyzes a parsed program against a probe catalog.
///
/// Returns the checked program (with any warnings in [`CheckedProgram::warnings`]), or every
/// diagnostic (errors and warnings, in source order of discovery) when there is at least one error.
/// Sources: DTrace guide chapters "Types, Operators, and Expressions", "Variables", "Actions and
/// Subroutines", "Aggregations", "Program Structure", "Options and Tunables".
pub fn analyze(
    program: &ast::Program,
    catalog: &dyn ProbeCatalog,
    opts: &SemaOptions,
) -> Result<CheckedProgram, Vec<Diagnostic>> {
    let mut a = Analyzer::new(catalog, opts);
    a.options(program);
    if procfs::needs_procfs(program) {
        a.load_procfs();
    }
    for item in &program.items {
        match item {
            ast::Item::Decl(d) => a.declaration(d),
            ast::Item::Inline(d) => a.inline_definition(d),
            ast::Item::Depends(d) => a.depends_on(d),
            ast::Item::Type(t) => a.type_definition(t),
            ast::Item::Translator(t) => a.translator_definition(t),
            _ => {}
        }
    }
    // Pre-pass: fix variable and aggregation types from first assignments, twice so that a chain
    // `a = b; ... b = 1;` resolves. Diagnostics and probe matching are off.
    a.quiet = true;
    let matched: Vec<Option<Vec<ProbeInfo>>> = program
        .clauses()
        .map(|c| a.match_probes(c).ok().map(|(p, _)| p))
        .collect();
    for _ in 0..2 {
        for (c, probes) in program.clauses().zip(&matched) {
            let cx = ClauseCx {
                prepass: probes.is_none(),
                probes: probes.clone().unwrap_or_default(),
                locals: Vec::new(),
                in_predicate: false,
            };
            a.prepass_stmts(&c.body, &cx);
        }
    }
    a.quiet = false;

    let mut clauses = Vec::new();
    for (index, c) in program.clauses().enumerate() {
        if let Some(cc) = a.clause(index, c) {
            clauses.push(cc);
        }
    }
    a.check_extraneous_args();
    let has_errors = a.diags.iter().any(|d| d.is_error());
    if has_errors {
        return Err(a.diags);
    }
    Ok(CheckedProgram {
        clauses,
        variables: a.vars,
        aggregations: a.aggs,
        options: a.options,
        warnings: a.diags,
    })
}

/// True when the program reads kernel structures, so the caller should load BTF into
/// [`SemaOptions::kernel_types`] (parsing `/sys/kernel/btf/vmlinux` costs a few milliseconds, which
/// a `BEGIN { exit(0); }` should not pay): it uses `curthread`, a `struct`/`union` type, `.` member
/// access, or `->` on anything but `args`.
pub fn needs_kernel_types(program: &ast::Program) -> bool {
    any_node(
        program,
        &|e| match &e.kind {
            ExprKind::Ident(n) => n == "curthread" || procfs::NAMES.contains(&n.as_str()),
            ExprKind::Member { base, arrow, .. } => {
                !*arrow || !matches!(&base.kind, ExprKind::Ident(n) if n == "args")
            }
            _ => false,
        },
        &|t| matches!(t.base, BaseType::Struct(_)),
    )
}

/// True when the program prints user-space symbols or stacks (`ustack`, `usym`, `ufunc`, `umod`,
/// `uaddr`), so the caller should keep the target's mappings for symbolization even after it exits.
pub fn needs_user_symbols(program: &ast::Program) -> bool {
    any_node(
        program,
        &|e| match &e.kind {
            ExprKind::Call { func, args, .. } => {
                matches!(
                    func.as_str(),
                    "ustack" | "usym" | "ufunc" | "umod" | "uaddr"
                ) || (matches!(func.as_str(), "printf" | "printa")
                    && args.first().is_some_and(
                        |f| matches!(&f.kind, ExprKind::Str(s) if has_user_addr_conversion(s)),
                    ))
            }
            _ => false,
        },
        &|_| false,
    )
}

/// True when printf format `fmt` has a `%A` conversion (a user address printed as
/// `module`symbol+offset`, DTrace guide "Output Formatting"): flags, width, precision and size
/// prefixes may stand between the `%` and the `A`; `%%` is a literal percent sign.
fn has_user_addr_conversion(fmt: &str) -> bool {
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        for d in chars.by_ref() {
            if d.is_ascii_digit() || "-+ #0.*?lhLzjt@".contains(d) {
                continue;
            }
            if d == 'A' {
                return true;
            }
            break;
        }
    }
    false
}

/// True when the program reads `ppid` or `vtimestamp`, which the code generator reads from the
/// current `struct task_struct`: the caller should take the member offsets from kernel BTF.
pub fn needs_task_offsets(program: &ast::Program) -> bool {
    any_node(
        program,
        &|e| matches!(&e.kind, ExprKind::Ident(n) if n == "ppid" || n == "vtimestamp"),
        &|_| false,
    )
}

/// True when the program calls `chill()`, whose spin loop the code generator builds on the
/// kernel's `bpf_iter_num_*` kfuncs: the caller should take their BTF ids from kernel BTF.
pub fn needs_kfuncs(program: &ast::Program) -> bool {
    any_node(
        program,
        &|e| matches!(&e.kind, ExprKind::Call { func, .. } if func == "chill"),
        &|_| false,
    )
}

/// True when `expr` holds for some expression of the program, or `ty` for some type it names
/// (casts, `sizeof`, `offsetof`, declarations, inlines). Walks the whole AST.
fn any_node(
    program: &ast::Program,
    expr: &dyn Fn(&Expr) -> bool,
    ty: &dyn Fn(&ast::TypeName) -> bool,
) -> bool {
    fn walk(e: &Expr, expr: &dyn Fn(&Expr) -> bool, ty: &dyn Fn(&ast::TypeName) -> bool) -> bool {
        if expr(e) {
            return true;
        }
        let w = |x: &Expr| walk(x, expr, ty);
        match &e.kind {
            ExprKind::Member { base, .. } => w(base),
            ExprKind::Cast(t, x) | ExprKind::Xlate(t, x) => ty(t) || w(x),
            ExprKind::SizeofType(t) | ExprKind::Offsetof(t, _) => ty(t),
            ExprKind::Unary(_, x) | ExprKind::SizeofExpr(x) | ExprKind::Stringof(x) => w(x),
            ExprKind::IncDec { expr: x, .. } => w(x),
            ExprKind::Binary(_, a, b) | ExprKind::Assign(_, a, b) => w(a) || w(b),
            ExprKind::Ternary(a, b, c) => w(a) || w(b) || w(c),
            ExprKind::Call { args, .. } => args.iter().any(w),
            ExprKind::Index(b, k) => w(b) || k.iter().any(w),
            ExprKind::Ident(_)
            | ExprKind::Int(_)
            | ExprKind::Str(_)
            | ExprKind::Macro(_)
            | ExprKind::SelfVar(_)
            | ExprKind::ThisVar(_)
            | ExprKind::AggRef(_) => false,
        }
    }
    fn stmts(
        s: &[Stmt],
        expr: &dyn Fn(&Expr) -> bool,
        ty: &dyn Fn(&ast::TypeName) -> bool,
    ) -> bool {
        let w = |x: &Expr| walk(x, expr, ty);
        s.iter().any(|s| match &s.kind {
            StmtKind::Expr(e) => w(e),
            StmtKind::Aggregate(a) => a.keys.iter().chain(&a.args).any(w),
            StmtKind::If { cond, then, els } => {
                w(cond)
                    || stmts(then, expr, ty)
                    || els.as_deref().is_some_and(|e| stmts(e, expr, ty))
            }
            StmtKind::Empty => false,
        })
    }
    program.items.iter().any(|i| match i {
        ast::Item::Clause(c) => {
            c.predicate.as_ref().is_some_and(|p| walk(p, expr, ty)) || stmts(&c.body, expr, ty)
        }
        ast::Item::Decl(d) => ty(&d.ty) || d.keys.iter().any(ty),
        ast::Item::Inline(d) => ty(&d.ty) || walk(&d.value, expr, ty),
        ast::Item::Type(t) => match &t.kind {
            ast::TypeDefKind::Struct { members, .. } => members.iter().any(|m| ty(&m.ty)),
            ast::TypeDefKind::Enum(cs) => cs
                .iter()
                .any(|c| c.value.as_ref().is_some_and(|v| walk(v, expr, ty))),
        },
        ast::Item::Translator(t) => {
            ty(&t.output) || ty(&t.input) || t.members.iter().any(|m| walk(&m.value, expr, ty))
        }
        ast::Item::Option(_) | ast::Item::Depends(_) => false,
    })
}

struct ClauseCx {
    probes: Vec<ProbeInfo>,
    locals: Vec<VarId>,
    /// In the pre-pass no probes are known: `args[N]`/`args->f` type as `int64_t`.
    prepass: bool,
    /// The predicate is being typed (an assignment there is most likely a mistyped `==`).
    in_predicate: bool,
}

struct Analyzer<'a> {
    catalog: &'a dyn ProbeCatalog,
    opts: &'a SemaOptions,
    options: Options,
    defaultargs: bool,
    vars: Vec<Variable>,
    globals: HashMap<String, VarId>,
    threads: HashMap<String, VarId>,
    locals: HashMap<String, VarId>,
    aggs: Vec<Aggregation>,
    agg_names: HashMap<String, AggId>,
    diags: Vec<Diagnostic>,
    /// Discard diagnostics (pre-pass).
    quiet: bool,
    /// Kernel types, when the caller gave them.
    btf: Option<std::sync::Arc<crate::btf::Btf>>,
    /// `inline` definitions by name: type and expression, expanded at each use.
    inlines: HashMap<String, (Type, Expr)>,
    /// Inline expansions in progress (a definition that uses itself is an error, not a loop).
    expanding: Vec<String>,
    /// Macro arguments (`$N`, 1-based) the program references.
    args_used: std::collections::BTreeSet<usize>,
    /// Option `argref`: unreferenced macro arguments are not an error.
    argref: bool,
    /// The catalog's answer for each probe description seen so far.
    matched: HashMap<ProbeDescPattern, Vec<ProbeInfo>>,
    /// Names of the structs and unions the program defines (a second definition is an error).
    d_types: std::collections::HashSet<String>,
    /// Enums the program names (`enum eh { ... }`): their type ids in the type table.
    d_enums: HashMap<String, u32>,
    /// The clause being checked calls `strtok()` (see [`CheckedClause::strtok`]).
    clause_strtok: bool,
    /// The clause being checked calls `alloca()` or `copyin()` (see
    /// [`CheckedClause::scratch_memory`]).
    clause_scratch: bool,
    /// The text of `/proc/kallsyms` (or why it could not be read), read at the first kernel
    /// symbol the program names and kept for the others.
    kallsyms: Option<Result<String, String>>,
    /// The program's translators, in definition order.
    translators: Vec<xlate::Translator>,
    /// Names of the bit-field members of the type table, computed at the first member access
    /// (so an access to any other name is not typed twice); see `bitfields.rs`.
    bitfield_names: Option<(usize, std::collections::HashSet<String>)>,
}

impl<'a> Analyzer<'a> {
    fn new(catalog: &'a dyn ProbeCatalog, opts: &'a SemaOptions) -> Analyzer<'a> {
        Analyzer {
            catalog,
            opts,
            options: Options::default(),
            defaultargs: false,
            vars: Vec::new(),
            globals: HashMap::new(),
            threads: HashMap::new(),
            locals: HashMap::new(),
            aggs: Vec::new(),
            agg_names: HashMap::new(),
            diags: Vec::new(),
            quiet: false,
            btf: opts.kernel_types.clone(),
            inlines: HashMap::new(),
            expanding: Vec::new(),
            args_used: std::collections::BTreeSet::new(),
            argref: false,
            matched: HashMap::new(),
            d_types: std::collections::HashSet::new(),
            d_enums: HashMap::new(),
            clause_strtok: false,
            clause_scratch: false,
            kallsyms: None,
            translators: Vec::new(),
            bitfield_names: None,
        }
    }

    /// Records `d`; an error without DTrace's tag gets `D_UNKNOWN`, so every error has one.
    fn report(&mut self, d: Diagnostic) -> Reported {
        if !self.quiet {
            self.diags.push(d.or_code(ErrTag::D_UNKNOWN));
        }
        Reported
    }

    /// Reports an error with no finer tag than `D_UNKNOWN` (prefer [`Analyzer::err_at`]).
    #[allow(dead_code)]
    fn err(&mut self, msg: impl Into<String>, span: Span) -> Reported {
        self.report(Diagnostic::error(msg, span))
    }

    /// Reports an error with DTrace's tag `tag`.
    fn err_at(&mut self, tag: ErrTag, msg: impl Into<String>, span: Span) -> Reported {
        self.report(Diagnostic::tagged(tag, msg, span))
    }

    /// Reports a call of `func` with the wrong number of arguments ("`func`() takes `want`,
    /// `given` given"), with `usage` as the hint.
    fn arity_error(
        &mut self,
        func: &str,
        want: &str,
        given: usize,
        span: Span,
        usage: &str,
    ) -> Reported {
        self.report(
            Diagnostic::tagged(
                ErrTag::D_PROTO_LEN,
                format!("{func}() takes {want}, {given} given"),
                span,
            )
            .with_hint(format!("usage: {usage}")),
        )
    }
}

#[cfg(test)]
mod user_addr_tests {
    use super::has_user_addr_conversion;

    #[test]
    fn finds_a_user_address_conversion_past_flags_and_width() {
        assert!(has_user_addr_conversion("%A\n"));
        assert!(has_user_addr_conversion("pc=%-20A|"));
        assert!(!has_user_addr_conversion("%a %d %s"));
        // `%%A` is a percent sign and the letter A.
        assert!(!has_user_addr_conversion("100%%A"));
        assert!(has_user_addr_conversion("%%%A"));
    }
}
