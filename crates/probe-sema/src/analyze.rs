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

use crate::SemaOptions;
use crate::catalog::{ProbeArgs, ProbeCatalog, ProbeDescPattern, ProbeInfo};
use crate::checked::*;
use crate::types::{SymKind, Type, usual_arithmetic};
use probe_format::agg::AggFunc;
use probe_format::printf::{self, ArgKind, ArgSlot};
use probe_syntax::ast::{
    self, BaseType, BinaryOp, Expr, ExprKind, MacroVar, Stmt, StmtKind, UnaryOp,
};
use probe_syntax::{Diagnostic, Span};
use std::collections::HashMap;

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
    for item in &program.items {
        match item {
            ast::Item::Decl(d) => a.declaration(d),
            ast::Item::Inline(d) => a.inline_definition(d),
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
            ExprKind::Ident(n) => n == "curthread",
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
        &|e| matches!(&e.kind, ExprKind::Call { func, .. } if matches!(func.as_str(), "ustack" | "usym" | "ufunc" | "umod" | "uaddr")),
        &|_| false,
    )
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
            ExprKind::Cast(t, x) => ty(t) || w(x),
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
        ast::Item::Option(_) => false,
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
}

/// Names of actions (statement-level calls that record or act).
const ACTIONS: &[&str] = &[
    "trace",
    "printf",
    "printa",
    "exit",
    "clear",
    "trunc",
    "normalize",
    "denormalize",
    "speculate",
    "commit",
    "discard",
    "tracemem",
    "system",
    "raise",
    "stop",
];
/// Names of subroutines (calls with a value).
const SUBROUTINES: &[&str] = &[
    "copyinstr",
    "copyin",
    "strlen",
    "strjoin",
    "stringof",
    "basename",
    "dirname",
    "substr",
    "strchr",
    "strrchr",
    "strstr",
    "index",
    "rindex",
    "lltostr",
    "rand",
    "progenyof",
    "speculation",
    "htons",
    "ntohs",
    "htonl",
    "ntohl",
    "htonll",
    "ntohll",
    "stack",
    "ustack",
    "sym",
    "func",
    "mod",
    "usym",
    "ufunc",
    "umod",
    "uaddr",
];
/// Aggregating functions.
const AGG_FUNCS: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "stddev",
    "quantize",
    "lquantize",
    "llquantize",
];
/// Built-in variable names (for suggestions).
const BUILTINS: &[&str] = &[
    "pid",
    "tid",
    "ppid",
    "uid",
    "gid",
    "execname",
    "cpu",
    "timestamp",
    "vtimestamp",
    "walltimestamp",
    "probeprov",
    "probemod",
    "probefunc",
    "probename",
    "arg0",
    "arg1",
    "arg2",
    "arg3",
    "arg4",
    "arg5",
    "arg6",
    "arg7",
    "arg8",
    "arg9",
    "args",
    "errno",
    "curthread",
    "epid",
    "id",
    "caller",
    "ucaller",
    "stackdepth",
    "ustackdepth",
];

/// Edit distance with adjacent transpositions (optimal string alignment), for "did you mean":
/// `pdi` is one edit from `pid`.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[n][m]
}

/// The closest candidates to `name` (distance at most a third of its length, at least 1), best first.
fn nearest<'c>(
    name: &str,
    candidates: impl IntoIterator<Item = &'c str>,
    max: usize,
) -> Vec<String> {
    let limit = (name.chars().count() / 3).max(1);
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, c)| *d <= limit && *c != name)
        .collect();
    scored.sort();
    scored.dedup();
    keep_best(scored)
        .into_iter()
        .take(max)
        .map(|(_, c)| c.to_string())
        .collect()
}

/// Keeps the candidates close to the best one: an exact-but-one match hides the weaker ones
/// (`opn` → `open`, not also `bpf`); otherwise one more edit than the best is tolerated.
fn keep_best<T>(sorted: Vec<(usize, T)>) -> Vec<(usize, T)> {
    let Some(best) = sorted.first().map(|(d, _)| *d) else {
        return sorted;
    };
    let slack = if best <= 1 { 0 } else { 1 };
    sorted
        .into_iter()
        .filter(|(d, _)| *d <= best + slack)
        .collect()
}

fn did_you_mean(list: &[String]) -> Option<String> {
    match list {
        [] => None,
        [one] => Some(format!("did you mean `{one}`?")),
        many => Some(format!(
            "did you mean {}?",
            many.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The type of an integer constant: the first of int, unsigned int, long, unsigned long that holds
/// it, skipping the signed ones for a `u` suffix and the 4-byte ones for an `l` suffix (DTrace's
/// dt_node_int ladder; DTrace does not distinguish decimal from hex here).
fn int_lit_type(lit: &ast::IntLit) -> Type {
    if lit.char_lit {
        return Type::INT;
    }
    let v = lit.value;
    let ladder: [(u8, bool, u64); 4] = [
        (4, true, i32::MAX as u64),
        (4, false, u32::MAX as u64),
        (8, true, i64::MAX as u64),
        (8, false, u64::MAX),
    ];
    for (bytes, signed, limit) in ladder {
        if lit.unsigned_suffix && signed {
            continue;
        }
        if lit.long_suffix && bytes == 4 {
            continue;
        }
        if v <= limit {
            return Type::Int { bytes, signed };
        }
    }
    Type::U64
}

/// Parses a macro argument as D would lex it as an integer constant (decimal, 0x hex, 0 octal,
/// optional leading `-`).
fn parse_int_arg(s: &str) -> Option<i64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let v = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if body.len() > 1 && body.starts_with('0') {
        u64::from_str_radix(&body[1..], 8).ok()?
    } else {
        body.parse::<u64>().ok()?
    } as i64;
    Some(if neg { v.wrapping_neg() } else { v })
}

fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn mk(kind: TExprKind, ty: Type, span: Span) -> TExpr {
    TExpr { kind, ty, span }
}

/// Converts `e` to `ty`, inserting a cast when the types differ. An integer constant converted to
/// another integer type is folded into a constant of that type (C's conversion: truncate, then
/// extend by the target's signedness), so the code generator sees `0:uint64_t`, not a cast.
fn convert(e: TExpr, ty: &Type) -> TExpr {
    if &e.ty == ty {
        return e;
    }
    if let (TExprKind::Int(_), Some(_), Type::Int { .. }) = (&e.kind, e.ty.as_int(), ty) {
        let span = e.span;
        let probe = mk(TExprKind::Cast(Box::new(e)), ty.clone(), span);
        if let Some(v) = const_eval(&probe) {
            return mk(TExprKind::Int(v as u64), ty.clone(), span);
        }
        return probe;
    }
    let span = e.span;
    mk(TExprKind::Cast(Box::new(e)), ty.clone(), span)
}

/// Evaluates an integer constant expression (literals, casts, unary and binary operators,
/// conditionals). `None` if it is not constant or divides by zero.
pub(crate) fn const_eval(e: &TExpr) -> Option<i128> {
    let wrap = |v: i128, ty: &Type| -> i128 {
        match ty.as_int() {
            Some((bytes, signed)) => {
                let bits = bytes as u32 * 8;
                let m = if bits == 64 {
                    v as u64 as u128
                } else {
                    (v as u128) & ((1u128 << bits) - 1)
                };
                if signed && bits < 128 && (m >> (bits - 1)) & 1 == 1 {
                    (m as i128) - (1i128 << bits)
                } else {
                    m as i128
                }
            }
            None => v,
        }
    };
    let v = match &e.kind {
        TExprKind::Int(bits) => {
            let (bytes, signed) = e.ty.as_int()?;
            if signed && bytes == 8 {
                *bits as i64 as i128
            } else {
                *bits as i128
            }
        }
        TExprKind::Cast(x) => const_eval(x)?,
        TExprKind::Unary(op, x) => {
            let v = const_eval(x)?;
            match op {
                UnaryOp::Neg => -v,
                UnaryOp::Plus => v,
                UnaryOp::Not => i128::from(v == 0),
                UnaryOp::BitNot => !v,
                _ => return None,
            }
        }
        TExprKind::Binary(op, a, b) => {
            let (x, y) = (const_eval(a)?, const_eval(b)?);
            use BinaryOp::*;
            match op {
                Add => x + y,
                Sub => x - y,
                Mul => x.checked_mul(y)?,
                Div => x.checked_div(y)?,
                Mod => x.checked_rem(y)?,
                Shl => x.checked_shl(u32::try_from(y).ok()?)?,
                Shr => x >> u32::try_from(y).ok()?.min(127),
                Lt => i128::from(x < y),
                Le => i128::from(x <= y),
                Gt => i128::from(x > y),
                Ge => i128::from(x >= y),
                Eq => i128::from(x == y),
                Ne => i128::from(x != y),
                BitAnd => x & y,
                BitXor => x ^ y,
                BitOr => x | y,
                LogAnd => i128::from(x != 0 && y != 0),
                LogXor => i128::from((x != 0) != (y != 0)),
                LogOr => i128::from(x != 0 || y != 0),
            }
        }
        TExprKind::Ternary(c, a, b) => {
            if const_eval(c)? != 0 {
                const_eval(a)?
            } else {
                const_eval(b)?
            }
        }
        _ => return None,
    };
    Some(wrap(v, &e.ty))
}

/// Parses an option size (`4m`, `512k`, `1g`, plain bytes).
fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()?.to_ascii_lowercase() {
        'k' => (&v[..v.len() - 1], 1u64 << 10),
        'm' => (&v[..v.len() - 1], 1 << 20),
        'g' => (&v[..v.len() - 1], 1 << 30),
        't' => (&v[..v.len() - 1], 1 << 40),
        _ => (v, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// Parses an option rate into a period in ns: `10hz`, `100ms`, `1s`, `500us`, `50ns`, suffixes in
/// any case; a bare number is nanoseconds (DTrace's dt_options.c `dt_opt_rate`: the multiplier
/// defaults to 1 and `hz` alone converts a frequency).
fn parse_rate(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let ns_per = match unit.to_ascii_lowercase().as_str() {
        "hz" => return 1_000_000_000u64.checked_div(n),
        "" | "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        _ => return None,
    };
    n.checked_mul(ns_per)
}

enum OptKind {
    Bool,
    Size,
    Count,
    Rate,
    Text,
}

fn option_kind(name: &str) -> Option<OptKind> {
    use OptKind::*;
    Some(match name {
        "quiet" | "aggsortkey" | "aggsortrev" | "destructive" | "flowindent" | "rawbytes"
        | "defaultargs" | "argref" | "zdefs" | "aggzoom" | "aggpack" | "agghist" | "nolibs"
        | "verbose" | "empty" | "grabanon" | "temporal" => Bool,
        "bufsize" | "aggsize" | "dynvarsize" | "specsize" => Size,
        "strsize" | "nspec" | "stackframes" | "ustackframes" | "aggsortpos" | "aggsortkeypos"
        | "jstackframes" | "jstackstrsize" | "cpu" | "stackindent" => Count,
        "switchrate" | "aggrate" | "statusrate" | "cleanrate" => Rate,
        "bufpolicy" | "bufresize" | "dynvarpolicy" => Text,
        _ => return None,
    })
}

const OPTION_NAMES: &[&str] = &[
    "quiet",
    "aggsortkey",
    "aggsortrev",
    "destructive",
    "flowindent",
    "rawbytes",
    "defaultargs",
    "argref",
    "zdefs",
    "aggzoom",
    "aggpack",
    "bufsize",
    "aggsize",
    "dynvarsize",
    "specsize",
    "strsize",
    "nspec",
    "stackframes",
    "ustackframes",
    "aggsortpos",
    "aggsortkeypos",
    "switchrate",
    "aggrate",
    "statusrate",
    "cleanrate",
    "bufpolicy",
    "bufresize",
    "dynvarpolicy",
    "cpu",
    "verbose",
    "stackindent",
    "empty",
    "nolibs",
    "jstackframes",
    "jstackstrsize",
    "agghist",
    "grabanon",
    "temporal",
];

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
        }
    }

    fn report(&mut self, d: Diagnostic) -> Reported {
        if !self.quiet {
            self.diags.push(d);
        }
        Reported
    }

    fn err(&mut self, msg: impl Into<String>, span: Span) -> Reported {
        self.report(Diagnostic::error(msg, span))
    }

    // ----- options -----

    fn options(&mut self, program: &ast::Program) {
        let pragmas: Vec<(String, Option<String>, Span)> = program
            .options()
            .map(|o| (o.name.clone(), o.value.clone(), o.span))
            .collect();
        for (n, v, s) in pragmas {
            self.set_option(&n, v.as_deref(), s);
        }
        let cli = self.opts.options.clone();
        for (n, v) in cli {
            self.set_option(&n, v.as_deref(), Span::DETACHED);
        }
    }

    fn set_option(&mut self, name: &str, value: Option<&str>, span: Span) {
        let where_ = if span == Span::DETACHED {
            " (from -x)"
        } else {
            ""
        };
        let Some(kind) = option_kind(name) else {
            let mut d = Diagnostic::error(format!("unrecognized option `{name}`{where_}"), span);
            if let Some(h) = did_you_mean(&nearest(name, OPTION_NAMES.iter().copied(), 3)) {
                d = d.with_hint(h);
            }
            self.report(d);
            return;
        };
        let bad = |this: &mut Self, what: &str| {
            this.report(Diagnostic::error(
                format!("option `{name}` needs {what}{where_}"),
                span,
            ));
        };
        let o = &mut self.options;
        match kind {
            OptKind::Bool => {
                let on = match value {
                    None => true,
                    Some("1" | "true" | "on" | "yes") => true,
                    Some("0" | "false" | "off" | "no") => false,
                    Some(_) => return bad(self, "no value (or 0/1)"),
                };
                match name {
                    "quiet" => o.quiet = on,
                    "aggsortkey" => o.aggsortkey = on,
                    "aggsortrev" => o.aggsortrev = on,
                    "destructive" => o.destructive = on,
                    "defaultargs" => self.defaultargs = on,
                    "argref" => self.argref = on,
                    _ => o
                        .other
                        .push((name.to_string(), if on { "1" } else { "0" }.to_string())),
                }
            }
            OptKind::Size => {
                let Some(v) = value.and_then(parse_size) else {
                    return bad(self, "a size such as 4m, 512k or 65536");
                };
                match name {
                    "bufsize" => o.bufsize = Some(v),
                    "aggsize" => o.aggsize = Some(v),
                    "dynvarsize" => o.dynvarsize = Some(v),
                    _ => o.specsize = Some(v),
                }
            }
            OptKind::Count => {
                let Some(v) = value
                    .and_then(parse_size)
                    .and_then(|v| u32::try_from(v).ok())
                else {
                    return bad(self, "a number");
                };
                match name {
                    "strsize" => {
                        if v == 0 {
                            return bad(self, "a size greater than 0");
                        }
                        o.strsize = v;
                    }
                    "nspec" => o.nspec = Some(v as u64),
                    "stackframes" => o.stackframes = v,
                    "ustackframes" => o.ustackframes = v,
                    "aggsortpos" => o.aggsortpos = Some(v),
                    "aggsortkeypos" => o.aggsortkeypos = Some(v),
                    _ => o.other.push((name.to_string(), v.to_string())),
                }
            }
            OptKind::Rate => {
                let Some(v) = value.and_then(parse_rate) else {
                    return bad(self, "a rate such as 10hz, 100ms or 1s");
                };
                match name {
                    "switchrate" => o.switchrate = Some(v),
                    "aggrate" => o.aggrate = Some(v),
                    "statusrate" => o.statusrate = Some(v),
                    _ => o.other.push((name.to_string(), v.to_string())),
                }
            }
            OptKind::Text => {
                let Some(v) = value else {
                    return bad(self, "a value");
                };
                o.other.push((name.to_string(), v.to_string()));
            }
        }
    }

    /// DTrace rejects macro arguments the program never references (a mistyped `$N` or a stray
    /// word on the command line), unless `defaultargs` or `argref` is set (dt_cc.c
    /// `dt_compile`: "extraneous argument ... ($N is not referenced)").
    fn check_extraneous_args(&mut self) {
        if self.defaultargs || self.argref {
            return;
        }
        for (i, value) in self.opts.macro_args.clone().iter().enumerate() {
            let n = i + 1;
            if !self.args_used.contains(&n) {
                self.report(
                    Diagnostic::error(
                        format!("extraneous argument `{value}` (${n} is not referenced)"),
                        Span::DETACHED,
                    )
                    .with_hint(
                        "remove the argument, or set `-x argref` (or `defaultargs`) to allow it",
                    ),
                );
            }
        }
    }

    // ----- declarations and variables -----

    fn type_of_name(&mut self, t: &ast::TypeName) -> R<Type> {
        let base = match &t.base {
            BaseType::Int { bytes, signed } => Type::Int {
                bytes: *bytes,
                signed: *signed,
            },
            BaseType::String => Type::String,
            BaseType::Void => Type::Void,
            BaseType::Struct(name) => {
                let Some(btf) = self.btf.clone() else {
                    return Err(self.report(
                        Diagnostic::error(
                            format!("unknown type `{}`: no kernel type information", t.text),
                            t.span,
                        )
                        .with_hint(
                            "structure types come from the kernel's BTF (/sys/kernel/btf/vmlinux)",
                        ),
                    ));
                };
                match btf.struct_id(name) {
                    Some(id) => btf.d_type(id),
                    None => {
                        return Err(
                            self.err(format!("the kernel has no type `{}`", t.text), t.span)
                        );
                    }
                }
            }
        };
        if matches!(base, Type::Struct { .. }) && t.pointer == 0 {
            return Err(self.report(
                Diagnostic::error(format!("a `{}` cannot be used as a value", t.text), t.span)
                    .with_hint(format!("use a pointer: ({} *)", t.text)),
            ));
        }
        Ok((0..t.pointer).fold(base, |acc, _| Type::Ptr(Box::new(acc))))
    }

    fn inline_definition(&mut self, d: &ast::InlineDef) {
        let Ok(ty) = self.type_of_name(&d.ty) else {
            return;
        };
        if matches!(ty, Type::Void) {
            self.err(
                format!("inline `{}` cannot have type void", d.name),
                d.ty.span,
            );
            return;
        }
        if self.inlines.contains_key(&d.name) || Builtin::from_name(&d.name).is_some() {
            self.err(format!("`{}` is already defined", d.name), d.span);
            return;
        }
        self.inlines.insert(d.name.clone(), (ty, d.value.clone()));
    }

    /// Expands a use of inline `name`: the definition typed here and converted to its type.
    fn expand_inline(&mut self, name: &str, span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        let (ty, value) = self.inlines[name].clone();
        if self.expanding.iter().any(|n| n == name) {
            return Err(self.err(
                format!("inline `{name}` is defined in terms of itself"),
                span,
            ));
        }
        self.expanding.push(name.to_string());
        let t = self.expr(&value, cx);
        self.expanding.pop();
        let t = t?;
        let ok = (t.ty.is_integral() && ty.is_integral()) || t.ty == ty;
        if !ok {
            return Err(self.report(
                Diagnostic::error(
                    format!(
                        "inline `{name}` is declared `{ty}` but its value has type `{}`",
                        t.ty
                    ),
                    value.span,
                )
                .with_label(span, "used here"),
            ));
        }
        Ok(TExpr {
            span,
            ..convert(t, &ty)
        })
    }

    fn declaration(&mut self, d: &ast::VarDecl) {
        let Ok(ty) = self.type_of_name(&d.ty) else {
            return;
        };
        if ty == Type::Void {
            self.err(
                format!("variable `{}` cannot have type void", d.name),
                d.ty.span,
            );
            return;
        }
        let mut keys: Vec<Type> = Vec::new();
        for k in &d.keys {
            let Ok(t) = self.type_of_name(k) else { return };
            keys.push(t);
        }
        let scope = match d.scope {
            ast::DeclScope::Global => VarScope::Global,
            ast::DeclScope::Thread => VarScope::Thread,
            ast::DeclScope::Clause => VarScope::Clause,
        };
        if scope != VarScope::Global && !keys.is_empty() {
            self.err("only global variables can be associative arrays", d.span);
            return;
        }
        if scope == VarScope::Global && BUILTINS.contains(&d.name.as_str()) {
            self.err(
                format!(
                    "`{}` is a built-in variable and cannot be redeclared",
                    d.name
                ),
                d.span,
            );
            return;
        }
        if self.lookup(scope, &d.name).is_some() {
            self.err(format!("variable `{}` is declared twice", d.name), d.span);
            return;
        }
        self.new_var(scope, &d.name, keys, ty, d.span);
    }

    fn table(&mut self, scope: VarScope) -> &mut HashMap<String, VarId> {
        match scope {
            VarScope::Global => &mut self.globals,
            VarScope::Thread => &mut self.threads,
            VarScope::Clause => &mut self.locals,
        }
    }

    fn lookup(&mut self, scope: VarScope, name: &str) -> Option<VarId> {
        self.table(scope).get(name).copied()
    }

    fn new_var(
        &mut self,
        scope: VarScope,
        name: &str,
        keys: Vec<Type>,
        ty: Type,
        span: Span,
    ) -> VarId {
        let id = VarId(self.vars.len() as u32);
        self.vars.push(Variable {
            id,
            name: name.to_string(),
            scope,
            keys,
            ty,
            span,
        });
        self.table(scope).insert(name.to_string(), id);
        id
    }

    fn var_display(v: &Variable) -> String {
        match v.scope {
            VarScope::Global => v.name.clone(),
            VarScope::Thread => format!("self->{}", v.name),
            VarScope::Clause => format!("this->{}", v.name),
        }
    }

    // ----- clauses -----

    fn substitute_macros(&mut self, field: &ast::PatField) -> R<String> {
        let text = &field.text;
        if !text.contains('$') {
            return Ok(text.clone());
        }
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find('$') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            let name = &after[..len];
            let value = if let Ok(n) = name.parse::<usize>() {
                self.args_used.insert(n);
                match n {
                    0 => self.opts.script_name.clone(),
                    _ => self.opts.macro_args.get(n - 1).cloned(),
                }
            } else {
                match name {
                    "target" => self.opts.target_pid.map(|p| p.to_string()),
                    "pid" => self.opts.pid.map(|p| p.to_string()),
                    _ => {
                        return Err(self.err(
                            format!("unknown macro variable `${name}` in probe description"),
                            field.span,
                        ));
                    }
                }
            };
            let Some(value) = value else {
                let hint = if name == "target" {
                    "give a process with -p PID or a command with -c CMD"
                } else {
                    "pass the macro argument after the script"
                };
                return Err(self.report(
                    Diagnostic::error(
                        format!("macro variable `${name}` is not defined"),
                        field.span,
                    )
                    .with_hint(hint),
                ));
            };
            out.push_str(&value);
            rest = &after[len..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn match_probes(&mut self, c: &ast::Clause) -> R<(Vec<ProbeInfo>, Vec<String>)> {
        let mut probes: Vec<ProbeInfo> = Vec::new();
        // Full names already in `probes`: `syscall:::entry` matches hundreds, and a linear search
        // per probe made matching quadratic (most of the start-up time).
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut descs = Vec::new();
        let mut failed = false;
        for d in &c.probes {
            let fields = [&d.provider, &d.module, &d.function, &d.name];
            let mut subst = Vec::new();
            for f in fields {
                match self.substitute_macros(f) {
                    Ok(s) => subst.push(s),
                    Err(Reported) => failed = true,
                }
            }
            if subst.len() != 4 {
                continue;
            }
            let pat = ProbeDescPattern::new(&subst[0], &subst[1], &subst[2], &subst[3]);
            let text = if d.text.contains('$') {
                pat.to_string()
            } else {
                d.text.clone()
            };
            let found = self.catalog.matching(&pat);
            if found.is_empty() && self.opts.allow_zero_matches {
                continue;
            }
            if found.is_empty() {
                failed = true;
                if self.quiet {
                    // The pre-pass: the checking pass reports it (listing names can be costly).
                    continue;
                }
                let names = self.catalog.names();
                let sugg = nearest_probes(&pat, &names);
                let mut diag = Diagnostic::error(
                    format!("probe description `{text}` does not match any probes"),
                    d.span,
                );
                if let Some(h) = did_you_mean(&sugg) {
                    diag = diag.with_hint(h);
                } else {
                    diag = diag.with_hint("`sightline probe -l` lists the available probes");
                }
                self.report(diag);
                continue;
            }
            for p in found {
                if seen.insert(p.full_name()) {
                    probes.push(p);
                }
            }
            descs.push(text);
        }
        if failed {
            return Err(Reported);
        }
        Ok((probes, descs))
    }

    fn clause(&mut self, index: usize, c: &ast::Clause) -> Option<CheckedClause> {
        let matched = self.match_probes(c);
        let (probes, descriptions, matched_ok) = match matched {
            Ok((p, d)) => (p, d, true),
            Err(Reported) => (Vec::new(), Vec::new(), false),
        };
        // Type the clause even when matching failed (prepass mode for args), to report its errors.
        let mut cx = ClauseCx {
            probes,
            locals: Vec::new(),
            prepass: !matched_ok,
            in_predicate: false,
        };
        cx.in_predicate = true;
        let typed_predicate = c.predicate.as_ref().map(|p| self.expr(p, &mut cx));
        cx.in_predicate = false;
        let predicate = match (&c.predicate, typed_predicate) {
            (Some(p), Some(typed)) => match typed {
                Ok(t) => {
                    if !t.ty.is_integral() {
                        let msg = format!(
                            "a predicate must be an integer or pointer expression, not `{}`",
                            t.ty
                        );
                        let mut d = Diagnostic::error(msg, p.span);
                        if t.ty == Type::String {
                            d = d.with_hint("compare the string: /execname == \"bash\"/");
                        }
                        self.report(d);
                        None
                    } else {
                        Some(t)
                    }
                }
                Err(Reported) => None,
            },
            _ => None,
        };
        let body = self.stmts(&c.body, &mut cx);
        self.check_speculation(&body);
        if !matched_ok || cx.probes.is_empty() {
            // Failed matching was reported; an empty match is allowed only with `-Z`: drop it.
            return None;
        }
        Some(CheckedClause {
            index,
            probes: cx.probes,
            predicate,
            body,
            clause_locals: cx.locals,
            descriptions,
            span: c.span,
        })
    }

    /// DTrace's rules for speculative clauses (guide, "Speculative Tracing" → "Using a
    /// Speculation", "Committing a Speculation"): one `speculate()` per clause, before any
    /// data-recording action; no aggregations, `exit()` or destructive actions in a speculative
    /// clause; no `speculate()` and `commit()` in the same clause; no data recording before or
    /// after `commit()`.
    fn check_speculation(&mut self, body: &[TStmt]) {
        fn flatten<'t>(body: &'t [TStmt], out: &mut Vec<&'t TStmt>) {
            for s in body {
                match s {
                    TStmt::If { then, els, .. } => {
                        flatten(then, out);
                        flatten(els, out);
                    }
                    other => out.push(other),
                }
            }
        }
        let mut flat = Vec::new();
        flatten(body, &mut flat);
        let mut speculate: Option<Span> = None;
        let mut commit: Option<Span> = None;
        let mut recorded: Option<Span> = None;
        let mut not_speculative: Vec<(Span, &str)> = Vec::new();
        for s in flat {
            match s {
                TStmt::Action(a, span) => match a {
                    Action::Speculate(_) => {
                        if let Some(first) = speculate {
                            self.report(
                                Diagnostic::error(
                                    "only one speculate() is allowed per clause",
                                    *span,
                                )
                                .with_label(first, "first speculate() here"),
                            );
                        } else if let Some(rec) = recorded {
                            self.report(
                                Diagnostic::error("speculate() must come before any data-recording action", *span)
                                    .with_label(rec, "data recorded here")
                                    .with_hint("a clause traces either speculatively or not: move speculate() first"),
                            );
                        }
                        if let Some(c) = commit {
                            self.report(
                                Diagnostic::error(
                                    "speculate() and commit() cannot be in the same clause",
                                    *span,
                                )
                                .with_label(c, "commit() here"),
                            );
                        }
                        speculate.get_or_insert(*span);
                    }
                    Action::Commit(_) => {
                        if let Some(sp) = speculate {
                            self.report(
                                Diagnostic::error(
                                    "speculate() and commit() cannot be in the same clause",
                                    *span,
                                )
                                .with_label(sp, "speculate() here"),
                            );
                        } else if let Some(rec) = recorded {
                            // "A clause containing a commit() cannot contain a data recording
                            // action" (guide, "Committing a Speculation"; dt_cc.c D_COMM_DREC).
                            self.report(
                                Diagnostic::error(
                                    "commit() may not follow data-recording actions",
                                    *span,
                                )
                                .with_label(rec, "data recorded here")
                                .with_hint("record the data in another clause"),
                            );
                        }
                        commit.get_or_insert(*span);
                    }
                    Action::Trace(_)
                    | Action::Printf { .. }
                    | Action::Printa { .. }
                    | Action::Tracemem { .. } => {
                        if let Some(c) = commit {
                            self.report(
                                Diagnostic::error(
                                    "data-recording actions may not follow commit()",
                                    *span,
                                )
                                .with_label(c, "commit() here")
                                .with_hint("record the data in another clause"),
                            );
                        }
                        recorded.get_or_insert(*span);
                    }
                    Action::Exit(_) => not_speculative.push((*span, "exit()")),
                    Action::System { .. } | Action::Raise(_) | Action::Stop => {
                        not_speculative.push((*span, "a destructive action"))
                    }
                    _ => {}
                },
                TStmt::Aggregate { span, .. } => not_speculative.push((*span, "an aggregation")),
                _ => {}
            }
        }
        if let Some(sp) = speculate {
            for (span, what) in not_speculative {
                self.report(
                    Diagnostic::error(format!("{what} cannot be speculative"), span)
                        .with_label(sp, "this clause speculates here")
                        .with_hint("aggregations, exit() and destructive actions go in a clause without speculate()"),
                );
            }
        }
    }

    // ----- pre-pass -----

    fn prepass_stmts(&mut self, stmts: &[Stmt], cx: &ClauseCx) {
        for s in stmts {
            match &s.kind {
                StmtKind::Expr(e) => {
                    let mut cx2 = ClauseCx {
                        probes: cx.probes.clone(),
                        locals: Vec::new(),
                        prepass: cx.prepass,
                        in_predicate: false,
                    };
                    let _ = self.expr(e, &mut cx2);
                }
                StmtKind::Aggregate(a) => {
                    let mut cx2 = ClauseCx {
                        probes: cx.probes.clone(),
                        locals: Vec::new(),
                        prepass: cx.prepass,
                        in_predicate: false,
                    };
                    let _ = self.aggregate(a, s.span, &mut cx2);
                }
                StmtKind::If { then, els, .. } => {
                    self.prepass_stmts(then, cx);
                    if let Some(e) = els {
                        self.prepass_stmts(e, cx);
                    }
                }
                StmtKind::Empty => {}
            }
        }
    }

    // ----- statements -----

    fn stmts(&mut self, stmts: &[Stmt], cx: &mut ClauseCx) -> Vec<TStmt> {
        let mut out = Vec::new();
        for s in stmts {
            if let Ok(Some(t)) = self.stmt(s, cx) {
                out.push(t);
            }
        }
        out
    }

    fn stmt(&mut self, s: &Stmt, cx: &mut ClauseCx) -> R<Option<TStmt>> {
        Ok(Some(match &s.kind {
            StmtKind::Empty => return Ok(None),
            StmtKind::If { cond, then, els } => {
                let c = self.expr(cond, cx);
                let then = self.stmts(then, cx);
                let els = els.as_ref().map(|e| self.stmts(e, cx)).unwrap_or_default();
                let c = c?;
                if !c.ty.is_integral() {
                    return Err(self.err(
                        format!(
                            "an `if` condition must be an integer or pointer, not `{}`",
                            c.ty
                        ),
                        cond.span,
                    ));
                }
                TStmt::If { cond: c, then, els }
            }
            StmtKind::Aggregate(a) => self.aggregate(a, s.span, cx)?,
            StmtKind::Expr(e) => {
                if let ExprKind::Call {
                    func,
                    func_span,
                    args,
                } = &e.kind
                {
                    if ACTIONS.contains(&func.as_str()) {
                        let act = self.action(func, *func_span, args, e.span, cx)?;
                        return Ok(Some(TStmt::Action(act, s.span)));
                    }
                    if matches!(
                        func.as_str(),
                        "stack"
                            | "ustack"
                            | "sym"
                            | "func"
                            | "mod"
                            | "usym"
                            | "ufunc"
                            | "umod"
                            | "uaddr"
                    ) {
                        // As a statement these record their value, like trace().
                        let t = self.expr(e, cx)?;
                        return Ok(Some(TStmt::Action(Action::Trace(t), s.span)));
                    }
                }
                let t = self.expr(e, cx)?;
                let effect = matches!(
                    t.kind,
                    TExprKind::Assign(..) | TExprKind::IncDec { .. } | TExprKind::Call(..)
                );
                if !effect {
                    self.report(
                        Diagnostic::warning("statement has no effect", e.span)
                            .with_hint("to print a value use trace(expr) or printf()"),
                    );
                }
                TStmt::Expr(t)
            }
        }))
    }

    // ----- aggregations -----

    fn agg_func(&mut self, a: &ast::AggStmt, args: &[TExpr]) -> R<(AggFunc, usize)> {
        // Returns the function with constants and the number of leading value arguments (0 or 1).
        let n = args.len();
        let arity = |this: &mut Self, want: &str| {
            this.report(
                Diagnostic::error(format!("{}() takes {want}, {n} given", a.func), a.func_span)
                    .with_hint(format!("usage: {}", agg_usage(&a.func))),
            )
        };
        let konst = |this: &mut Self, i: usize, what: &str| -> R<i64> {
            let e = &args[i];
            match const_eval(e) {
                Some(v) if v >= i64::MIN as i128 && v <= i64::MAX as i128 => Ok(v as i64),
                _ => Err(this.report(
                    Diagnostic::error(
                        format!("{}() {what} must be an integer constant", a.func),
                        e.span,
                    )
                    .with_hint(format!("usage: {}", agg_usage(&a.func))),
                )),
            }
        };
        let func = match a.func.as_str() {
            "count" => {
                if n != 0 {
                    return Err(arity(self, "no arguments"));
                }
                return Ok((AggFunc::Count, 0));
            }
            "sum" | "avg" | "min" | "max" | "stddev" => {
                if n != 1 {
                    return Err(arity(self, "one argument"));
                }
                let f = match a.func.as_str() {
                    "sum" => AggFunc::Sum,
                    "avg" => AggFunc::Avg,
                    "min" => AggFunc::Min,
                    "max" => AggFunc::Max,
                    _ => AggFunc::Stddev,
                };
                return Ok((f, 1));
            }
            "quantize" => {
                if !(1..=2).contains(&n) {
                    return Err(arity(self, "1 or 2 arguments"));
                }
                AggFunc::Quantize
            }
            "lquantize" => {
                if !(3..=5).contains(&n) {
                    return Err(arity(self, "3 to 5 arguments"));
                }
                let base = konst(self, 1, "base")?;
                let limit = konst(self, 2, "limit")?;
                let step = if n >= 4 { konst(self, 3, "step")? } else { 1 };
                AggFunc::Lquantize { base, limit, step }
            }
            "llquantize" => {
                if !(5..=6).contains(&n) {
                    return Err(arity(self, "5 or 6 arguments"));
                }
                let mut v = [0u16; 4];
                for (i, what) in ["factor", "low", "high", "nsteps"].iter().enumerate() {
                    let k = konst(self, i + 1, what)?;
                    v[i] = u16::try_from(k).map_err(|_| {
                        self.report(Diagnostic::error(
                            format!("llquantize() {what} must be between 0 and 65535"),
                            args[i + 1].span,
                        ))
                    })?;
                }
                AggFunc::Llquantize {
                    factor: v[0],
                    low: v[1],
                    high: v[2],
                    nsteps: v[3],
                }
            }
            other => {
                let mut d = Diagnostic::error(
                    format!("`{other}` is not an aggregating function"),
                    a.func_span,
                );
                let sugg = nearest(other, AGG_FUNCS.iter().copied(), 2);
                d = d.with_hint(did_you_mean(&sugg).unwrap_or_else(|| {
                    "aggregating functions are count, sum, avg, min, max, stddev, quantize, lquantize, llquantize".into()
                }));
                return Err(self.report(d));
            }
        };
        if let Err(e) = func.validate() {
            let msg = e.to_string();
            return Err(self.report(
                Diagnostic::error(
                    format!(
                        "invalid {}() parameters: {}",
                        a.func,
                        msg.split(": ").last().unwrap_or(&msg)
                    ),
                    a.func_span.to(args[n - 1].span),
                )
                .with_hint(format!("usage: {}", agg_usage(&a.func))),
            ));
        }
        Ok((func, 1))
    }

    fn aggregate(&mut self, a: &ast::AggStmt, span: Span, cx: &mut ClauseCx) -> R<TStmt> {
        let mut keys = Vec::new();
        let mut failed = false;
        for k in &a.keys {
            match self.expr(k, cx) {
                Ok(t) => {
                    if matches!(t.ty, Type::Void | Type::Array(..)) {
                        self.err(
                            format!("an aggregation key cannot have type `{}`", t.ty),
                            k.span,
                        );
                        failed = true;
                    }
                    keys.push(t)
                }
                Err(Reported) => failed = true,
            }
        }
        let mut args = Vec::new();
        for x in &a.args {
            match self.expr(x, cx) {
                Ok(t) => args.push(t),
                Err(Reported) => failed = true,
            }
        }
        if failed {
            return Err(Reported);
        }
        let (func, nvalue) = self.agg_func(a, &args)?;
        // The value argument: integral, converted to int64_t/uint64_t.
        let mut value = None;
        let mut arg_ty = Type::I64;
        if nvalue == 1 {
            let v = args[0].clone();
            let Some((_, signed)) = v.ty.promoted().and_then(|t| t.as_int()) else {
                return Err(self.report(
                    Diagnostic::error(
                        format!("{}() needs an integer argument, not `{}`", a.func, v.ty),
                        v.span,
                    )
                    .with_hint("aggregating functions take integer values"),
                ));
            };
            arg_ty = if signed { Type::I64 } else { Type::U64 };
            value = Some(convert(v, &arg_ty));
        }
        let incr_index = match func {
            AggFunc::Quantize => 1,
            AggFunc::Lquantize { .. } => 4,
            AggFunc::Llquantize { .. } => 5,
            _ => usize::MAX,
        };
        let incr = match args.get(incr_index) {
            Some(i) if i.ty.is_integral() => Some(convert(i.clone(), &Type::I64)),
            Some(i) => {
                return Err(self.err(
                    format!("{}() increment must be an integer, not `{}`", a.func, i.ty),
                    i.span,
                ));
            }
            None => None,
        };
        let key_types: Vec<Type> = keys.iter().map(|k| k.ty.clone()).collect();
        let id = match self.agg_names.get(&a.name).copied() {
            Some(id) => {
                let existing = self.aggs[id.0 as usize].clone();
                let disp = if a.name.is_empty() {
                    "@".to_string()
                } else {
                    format!("@{}", a.name)
                };
                if existing.func != func {
                    return Err(self.report(
                        Diagnostic::error(
                            format!("{disp} is used with {} here but with {} before", describe_agg(&func), describe_agg(&existing.func)),
                            a.func_span,
                        )
                        .with_label(existing.span, "first used here")
                        .with_hint("an aggregation has one aggregating function with the same parameters everywhere"),
                    ));
                }
                if existing.keys.len() != keys.len() {
                    return Err(self.report(
                        Diagnostic::error(
                            format!(
                                "{disp} has {} key(s) here but {} before",
                                keys.len(),
                                existing.keys.len()
                            ),
                            a.name_span,
                        )
                        .with_label(existing.span, "first used here"),
                    ));
                }
                let mut converted = Vec::new();
                for (k, want) in keys.into_iter().zip(existing.keys.iter()) {
                    converted.push(self.convert_key(k, want, &disp, existing.span)?);
                }
                keys = converted;
                if existing.arg_ty != arg_ty {
                    // Mixed signedness across uses: keep the first; convert.
                    value = value.map(|v| convert(v, &existing.arg_ty));
                }
                id
            }
            None => {
                let id = AggId(self.aggs.len() as u32);
                self.aggs.push(Aggregation {
                    id,
                    name: a.name.clone(),
                    func,
                    keys: key_types,
                    arg_ty,
                    span: a.name_span,
                });
                self.agg_names.insert(a.name.clone(), id);
                id
            }
        };
        Ok(TStmt::Aggregate {
            agg: id,
            keys,
            value,
            incr,
            span,
        })
    }

    /// Converts a key to the type fixed at first use: integers to the key's integer type; strings
    /// must stay strings; stacks and symbols must match.
    fn convert_key(&mut self, k: TExpr, want: &Type, what: &str, first: Span) -> R<TExpr> {
        if &k.ty == want {
            return Ok(k);
        }
        if k.ty.is_integral() && want.is_integral() {
            return Ok(convert(k, want));
        }
        Err(self.report(
            Diagnostic::error(
                format!("{what} key has type `{}` here but `{want}` before", k.ty),
                k.span,
            )
            .with_label(first, "first used here"),
        ))
    }

    fn agg_ref(&mut self, e: &Expr) -> R<AggId> {
        match &e.kind {
            ExprKind::AggRef(name) => match self.agg_names.get(name) {
                Some(id) => Ok(*id),
                None => {
                    let names: Vec<String> =
                        self.agg_names.keys().map(|n| format!("@{n}")).collect();
                    let sugg = nearest(&format!("@{name}"), names.iter().map(|s| s.as_str()), 3);
                    let mut d = Diagnostic::error(format!("unknown aggregation `@{name}`"), e.span);
                    if let Some(h) = did_you_mean(&sugg) {
                        d = d.with_hint(h);
                    }
                    Err(self.report(d))
                }
            },
            _ => Err(self.report(Diagnostic::error(
                "expected an aggregation such as `@a`",
                e.span,
            ))),
        }
    }

    // ----- actions -----

    fn action(
        &mut self,
        func: &str,
        func_span: Span,
        args: &[Expr],
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<Action> {
        let n = args.len();
        let arity = |this: &mut Self, want: &str, usage: &str| -> Reported {
            this.report(
                Diagnostic::error(
                    format!("{func}() takes {want}, {n} given"),
                    func_span.to(span),
                )
                .with_hint(format!("usage: {usage}")),
            )
        };
        match func {
            "trace" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "trace(expression)"));
                }
                let t = self.expr(&args[0], cx)?;
                if matches!(t.ty, Type::Void | Type::Array(..)) {
                    return Err(self.err(
                        format!("trace() cannot record a value of type `{}`", t.ty),
                        t.span,
                    ));
                }
                Ok(Action::Trace(t))
            }
            "printf" | "system" => {
                if n == 0 {
                    return Err(arity(
                        self,
                        "a format string and its arguments",
                        &format!("{func}(\"format\", args...)"),
                    ));
                }
                let format = self.format_string(&args[0], func)?;
                let mut targs = Vec::new();
                let mut failed = false;
                for a in &args[1..] {
                    match self.expr(a, cx) {
                        Ok(t) => targs.push(t),
                        Err(Reported) => failed = true,
                    }
                }
                if failed {
                    return Err(Reported);
                }
                let targs = self.check_printf(&format, &args[0], targs, func, span)?;
                if func == "system" {
                    self.require_destructive(func, func_span);
                    return Ok(Action::System {
                        format,
                        args: targs,
                    });
                }
                Ok(Action::Printf {
                    format,
                    args: targs,
                })
            }
            "printa" => {
                if n == 0 {
                    return Err(arity(
                        self,
                        "aggregations",
                        "printa(@a) or printa(\"format\", @a, ...)",
                    ));
                }
                let (format, rest) = match &args[0].kind {
                    ExprKind::Str(_) => (Some(self.format_string(&args[0], func)?), &args[1..]),
                    _ => (None, args),
                };
                if rest.is_empty() {
                    return Err(arity(
                        self,
                        "at least one aggregation",
                        "printa(\"format\", @a, ...)",
                    ));
                }
                let mut aggs: Vec<AggId> = Vec::new();
                for a in rest {
                    let id = self.agg_ref(a)?;
                    // DTrace prints several aggregations side by side, joined on their keys: the
                    // key types must agree.
                    if let Some(&first) = aggs.first() {
                        let (f, g) = (&self.aggs[first.0 as usize], &self.aggs[id.0 as usize]);
                        if f.keys != g.keys {
                            let fk = f
                                .keys
                                .iter()
                                .map(|k| k.to_string())
                                .collect::<Vec<_>>()
                                .join(", ");
                            let gk = g
                                .keys
                                .iter()
                                .map(|k| k.to_string())
                                .collect::<Vec<_>>()
                                .join(", ");
                            let (fs, gs) = (f.span, g.span);
                            return Err(self.report(
                                Diagnostic::error(
                                    format!("printa() aggregations must have the same keys: [{fk}] and [{gk}]"),
                                    a.span,
                                )
                                .with_label(fs, "first aggregation used here")
                                .with_label(gs, "this one used here"),
                            ));
                        }
                    }
                    aggs.push(id);
                }
                if let Some(f) = &format {
                    self.check_printa(f, &args[0], &aggs)?;
                }
                Ok(Action::Printa { format, aggs })
            }
            "exit" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "exit(status)"));
                }
                let t = self.int_expr(&args[0], cx, "exit() status")?;
                Ok(Action::Exit(convert(t, &Type::INT)))
            }
            "clear" | "denormalize" => {
                if n != 1 {
                    return Err(arity(self, "one aggregation", &format!("{func}(@a)")));
                }
                let id = self.agg_ref(&args[0])?;
                Ok(if func == "clear" {
                    Action::Clear(id)
                } else {
                    Action::Denormalize(id)
                })
            }
            "trunc" => {
                if !(1..=2).contains(&n) {
                    return Err(arity(
                        self,
                        "one or two arguments",
                        "trunc(@a) or trunc(@a, n)",
                    ));
                }
                let agg = self.agg_ref(&args[0])?;
                let keep = match args.get(1) {
                    Some(k) => Some(convert(self.int_expr(k, cx, "trunc() count")?, &Type::I64)),
                    None => None,
                };
                Ok(Action::Trunc { agg, keep })
            }
            "normalize" => {
                if n != 2 {
                    return Err(arity(self, "two arguments", "normalize(@a, n)"));
                }
                let agg = self.agg_ref(&args[0])?;
                let f = self.int_expr(&args[1], cx, "normalize() factor")?;
                Ok(Action::Normalize {
                    agg,
                    factor: convert(f, &Type::I64),
                })
            }
            "speculate" | "commit" | "discard" => {
                if n != 1 {
                    return Err(arity(self, "one argument", &format!("{func}(id)")));
                }
                let id = convert(self.int_expr(&args[0], cx, "speculation id")?, &Type::INT);
                Ok(match func {
                    "speculate" => Action::Speculate(id),
                    "commit" => Action::Commit(id),
                    _ => Action::Discard(id),
                })
            }
            "tracemem" => {
                if n != 2 {
                    return Err(arity(self, "two arguments", "tracemem(address, size)"));
                }
                let addr = self.int_expr(&args[0], cx, "tracemem() address")?;
                let size = self.int_expr(&args[1], cx, "tracemem() size")?;
                let Some(sz) = const_eval(&size).and_then(|v| u32::try_from(v).ok()) else {
                    return Err(self.err(
                        "tracemem() size must be a non-negative integer constant",
                        size.span,
                    ));
                };
                Ok(Action::Tracemem {
                    addr: convert(addr, &Type::U64),
                    size: sz,
                })
            }
            "raise" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "raise(signal)"));
                }
                self.require_destructive(func, func_span);
                let s = self.int_expr(&args[0], cx, "raise() signal")?;
                Ok(Action::Raise(convert(s, &Type::INT)))
            }
            "stop" => {
                if n != 0 {
                    return Err(arity(self, "no arguments", "stop()"));
                }
                self.require_destructive(func, func_span);
                Ok(Action::Stop)
            }
            _ => Err(self.err(format!("unknown action `{func}`"), func_span)),
        }
    }

    fn require_destructive(&mut self, func: &str, span: Span) {
        if !self.options.destructive {
            self.report(
                Diagnostic::error(format!("{func}() is a destructive action"), span).with_hint(
                    "allow destructive actions with `#pragma D option destructive` or -w",
                ),
            );
        }
    }

    fn int_expr(&mut self, e: &Expr, cx: &mut ClauseCx, what: &str) -> R<TExpr> {
        let t = self.expr(e, cx)?;
        if !t.ty.is_integral() {
            return Err(self.err(format!("{what} must be an integer, not `{}`", t.ty), e.span));
        }
        Ok(t)
    }

    fn format_string(&mut self, e: &Expr, func: &str) -> R<String> {
        match &e.kind {
            ExprKind::Str(s) => Ok(s.clone()),
            _ => Err(self.report(
                Diagnostic::error(format!("{func}() format must be a string constant"), e.span)
                    .with_hint(format!("write {func}(\"%d\\n\", x)")),
            )),
        }
    }

    /// Checks printf arguments against the format (DTrace's dt_printf_validate): count and kinds.
    fn check_printf(
        &mut self,
        fmt: &str,
        fmt_expr: &Expr,
        args: Vec<TExpr>,
        func: &str,
        span: Span,
    ) -> R<Vec<TExpr>> {
        let pieces = match printf::parse(fmt) {
            Ok(p) => p,
            Err(e) => return Err(self.err(format!("{func}() format: {e}"), fmt_expr.span)),
        };
        if printf::has_aggregation_conversion(&pieces) {
            return Err(self.report(Diagnostic::error(
                format!("{func}() format uses `%@`, which only printa() accepts"),
                fmt_expr.span,
            )));
        }
        let slots = printf::arg_slots(&pieces);
        if slots.len() != args.len() {
            let d = Diagnostic::error(
                format!(
                    "{func}() format needs {} argument{}, {} given",
                    slots.len(),
                    if slots.len() == 1 { "" } else { "s" },
                    args.len()
                ),
                if args.len() > slots.len() { args[slots.len()].span } else { span },
            )
            .with_label(fmt_expr.span, "format")
            .with_hint(if args.len() < slots.len() {
                "give one argument per conversion (`*` width/precision take one more each); write `%%` for a literal `%`"
            } else {
                "remove the extra arguments or add conversions for them"
            });
            return Err(self.report(d));
        }
        let convs: Vec<&printf::Conversion> = printf::conversions(&pieces).collect();
        let mut out = Vec::new();
        for (i, (slot, arg)) in slots.iter().zip(args).enumerate() {
            let (kind, name) = match *slot {
                ArgSlot::Width { conv } | ArgSlot::Precision { conv } => {
                    (ArgKind::Int, format!("*{}", convs[conv].name))
                }
                ArgSlot::Value { conv, kind } => (kind, convs[conv].name.clone()),
            };
            out.push(self.check_arg_kind(arg, kind, &name, i + 2, fmt_expr.span)?);
        }
        Ok(out)
    }

    fn check_arg_kind(
        &mut self,
        arg: TExpr,
        kind: ArgKind,
        conv: &str,
        argno: usize,
        fmt_span: Span,
    ) -> R<TExpr> {
        let ok = match kind {
            ArgKind::Int | ArgKind::Port => arg.ty.is_integral(),
            // dt_printf.c pfcheck_time: a 64-bit integer (walltimestamp, timestamp).
            ArgKind::Time => matches!(arg.ty, Type::Int { bytes: 8, .. }),
            ArgKind::SmallInt => matches!(arg.ty, Type::Int { bytes, .. } if bytes <= 4),
            ArgKind::Addr => arg.ty.is_integral() || matches!(arg.ty, Type::Symbol(_)),
            ArgKind::Str => arg.ty == Type::String,
            ArgKind::Stack => matches!(arg.ty, Type::Stack { .. }),
            ArgKind::Float => false,
            ArgKind::None => true,
        };
        if ok {
            return Ok(arg);
        }
        let proto = match kind {
            ArgKind::Int => "char, short, int, long or long long",
            ArgKind::SmallInt => "char, short or int",
            ArgKind::Addr => "pointer or integer",
            ArgKind::Str => "string",
            ArgKind::Stack => "stack",
            ArgKind::Time => "a 64-bit integer such as walltimestamp",
            ArgKind::Port => "uint16_t",
            ArgKind::Float => "floating point (not supported: D on BPF has no floating point)",
            ArgKind::None => "none",
        };
        let mut d = Diagnostic::error(
            format!("argument #{argno} has type `{}`, incompatible with conversion %{conv} (expects {proto})", arg.ty),
            arg.span,
        )
        .with_label(fmt_span, "format");
        if kind == ArgKind::Str && arg.ty.is_integral() {
            d = d.with_hint("for a user-space string address use copyinstr(addr); for a kernel `char *` use stringof(p)");
        } else if matches!(kind, ArgKind::Int) && arg.ty == Type::String {
            d = d.with_hint("use %s for strings");
        } else if kind == ArgKind::SmallInt {
            d = d.with_hint("cast the argument: (char)x or (int)x");
        }
        Err(self.report(d))
    }

    fn check_printa(&mut self, fmt: &str, fmt_expr: &Expr, aggs: &[AggId]) -> R<()> {
        let pieces = match printf::parse(fmt) {
            Ok(p) => p,
            Err(e) => return Err(self.err(format!("printa() format: {e}"), fmt_expr.span)),
        };
        let slots = printf::arg_slots(&pieces);
        let convs: Vec<&printf::Conversion> = printf::conversions(&pieces).collect();
        let first = self.aggs[aggs[0].0 as usize].clone();
        if slots.len() > first.keys.len() {
            let disp = if first.name.is_empty() {
                "@".to_string()
            } else {
                format!("@{}", first.name)
            };
            return Err(self.report(
                Diagnostic::error(
                    format!(
                        "printa() format has {} key conversion(s) but {disp} has {} key(s)",
                        slots.len(),
                        first.keys.len()
                    ),
                    fmt_expr.span,
                )
                .with_label(first.span, "aggregation first used here")
                .with_hint("use %@d (or %@u, %@x ...) for the aggregation's value"),
            ));
        }
        for (i, (slot, kt)) in slots.iter().zip(first.keys.iter()).enumerate() {
            let (kind, name) = match *slot {
                ArgSlot::Width { conv } | ArgSlot::Precision { conv } => {
                    (ArgKind::Int, convs[conv].name.clone())
                }
                ArgSlot::Value { conv, kind } => (kind, convs[conv].name.clone()),
            };
            let probe = mk(TExprKind::Int(0), kt.clone(), first.span);
            self.check_arg_kind(probe, kind, &name, i + 1, fmt_expr.span)?;
        }
        Ok(())
    }

    // ----- expressions -----

    fn expr(&mut self, e: &Expr, cx: &mut ClauseCx) -> R<TExpr> {
        let span = e.span;
        match &e.kind {
            ExprKind::Int(lit) => Ok(mk(TExprKind::Int(lit.value), int_lit_type(lit), span)),
            ExprKind::Str(s) => Ok(mk(TExprKind::Str(s.clone()), Type::String, span)),
            ExprKind::Ident(name) => self.ident(name, span, cx),
            ExprKind::Macro(m) => self.macro_var(m, span, cx),
            ExprKind::SelfVar(name) => self.read_var(VarScope::Thread, name, span, cx),
            ExprKind::ThisVar(name) => self.read_var(VarScope::Clause, name, span, cx),
            ExprKind::AggRef(name) => Err(self.report(
                Diagnostic::error(format!("aggregation `@{name}` cannot be used in an expression"), span)
                    .with_hint("aggregations are updated with `@a[keys] = func(x)` and printed with printa(@a)"),
            )),
            ExprKind::Unary(op, x) => self.unary(*op, x, span, cx),
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, span, cx),
            ExprKind::Assign(op, lhs, rhs) => self.assign(*op, lhs, rhs, span, cx),
            ExprKind::IncDec { increment, prefix, expr } => {
                let target = self.lvalue(expr, cx, Some(Type::I64))?;
                let ty = self.vars[target.var.0 as usize].ty.clone();
                if !ty.is_integral() {
                    let op = if *increment { "++" } else { "--" };
                    return Err(self.err(format!("`{op}` needs an integer variable, not `{ty}`"), expr.span));
                }
                Ok(mk(TExprKind::IncDec { target, increment: *increment, prefix: *prefix }, ty, span))
            }
            ExprKind::Ternary(c, a, b) => {
                let c = self.expr(c, cx)?;
                if !c.ty.is_integral() {
                    return Err(self.err(format!("the condition of `?:` must be an integer, not `{}`", c.ty), c.span));
                }
                let a = self.expr(a, cx)?;
                let b = self.expr(b, cx)?;
                let ty = if a.ty.is_integral() && b.ty.is_integral() {
                    usual_arithmetic(&a.ty, &b.ty).unwrap_or(Type::I64)
                } else if a.ty == b.ty {
                    a.ty.clone()
                } else {
                    return Err(self.report(
                        Diagnostic::error(format!("the branches of `?:` have types `{}` and `{}`", a.ty, b.ty), span)
                            .with_label(a.span, format!("`{}`", a.ty))
                            .with_label(b.span, format!("`{}`", b.ty)),
                    ));
                };
                let (a, b) = (convert(a, &ty), convert(b, &ty));
                Ok(mk(TExprKind::Ternary(Box::new(c), Box::new(a), Box::new(b)), ty, span))
            }
            ExprKind::Cast(tn, x) => {
                let target = self.type_of_name(tn)?;
                let x = self.expr(x, cx)?;
                match &target {
                    // `(string)x` is `stringof(x)` (guide, "Strings" → "String Conversion").
                    Type::String => self.stringof(x, span),
                    Type::Void => Err(self.err("cannot cast to void", tn.span)),
                    _ if !x.ty.is_integral() => {
                        Err(self.err(format!("cannot cast `{}` to `{}`", x.ty, tn.text), span))
                    }
                    _ if x.ty == target => Ok(TExpr { span, ..x }),
                    _ => Ok(TExpr { span, ..convert(x, &target) }),
                }
            }
            ExprKind::SizeofType(tn) => {
                let ty = match &tn.base {
                    // sizeof(struct foo) is fine even though a struct is not a value.
                    BaseType::Struct(name) if tn.pointer == 0 => match self.btf.as_ref().and_then(|b| b.struct_id(name)) {
                        Some(id) => self.btf.as_ref().map(|b| b.d_type(id)).unwrap_or(Type::Void),
                        None => self.type_of_name(tn)?,
                    },
                    _ => self.type_of_name(tn)?,
                };
                let size = ty.size(self.options.strsize);
                if ty == Type::Void {
                    return Err(self.err("sizeof(void) is not defined", span));
                }
                Ok(mk(TExprKind::Int(size as u64), Type::U64, span))
            }
            ExprKind::SizeofExpr(x) => {
                let t = self.expr(x, cx)?;
                Ok(mk(TExprKind::Int(t.ty.size(self.options.strsize) as u64), Type::U64, span))
            }
            ExprKind::Stringof(x) => {
                let t = self.expr(x, cx)?;
                self.stringof(t, span)
            }
            ExprKind::Offsetof(tn, member) => {
                let (BaseType::Struct(name), 0) = (&tn.base, tn.pointer) else {
                    return Err(self.err(format!("offsetof() needs a structure type, not `{}`", tn.text), tn.span));
                };
                let Some(btf) = self.btf.clone() else {
                    return Err(self.type_of_name(tn).err().unwrap_or(Reported));
                };
                let Some(id) = btf.struct_id(name) else {
                    return Err(self.err(format!("the kernel has no type `{}`", tn.text), tn.span));
                };
                let (addr, _) = self.member_place(&btf, mk(TExprKind::Int(0), Type::U64, tn.span), id, name, member, span)?;
                let off = const_eval(&addr).unwrap_or(0) as u64;
                Ok(mk(TExprKind::Int(off), Type::U64, span))
            }
            ExprKind::Call { func, func_span, args } => self.call(func, *func_span, args, span, cx),
            ExprKind::Index(base, idx) => self.index(base, idx, span, cx),
            ExprKind::Member { base, field, field_span, arrow } => self.member(base, field, *field_span, *arrow, span, cx),
        }
    }

    /// `stringof(x)` / `(string)x` (guide, "Strings" → "String Conversion"): a string stays; any
    /// scalar (pointer or integer) is the kernel address of the characters to read.
    fn stringof(&mut self, t: TExpr, span: Span) -> R<TExpr> {
        match &t.ty {
            Type::String => Ok(t),
            Type::Ptr(inner) if **inner == Type::CHAR => Ok(mk(
                TExprKind::Call(Subr::Stringof, vec![t]),
                Type::String,
                span,
            )),
            Type::Ptr(_) | Type::Int { .. } => {
                let p = convert(t, &Type::Ptr(Box::new(Type::CHAR)));
                Ok(mk(
                    TExprKind::Call(Subr::Stringof, vec![p]),
                    Type::String,
                    span,
                ))
            }
            other => Err(self.report(
                Diagnostic::error(
                    format!("stringof() needs a string, a pointer or an address, not `{other}`"),
                    span,
                )
                .with_hint("for a user-space address use copyinstr(addr)"),
            )),
        }
    }

    fn ident(&mut self, name: &str, span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        if self.inlines.contains_key(name) {
            return self.expand_inline(name, span, cx);
        }
        if let Some(b) = Builtin::from_name(name) {
            let mut ty = b.ty();
            if b == Builtin::Curthread
                && let Some(btf) = &self.btf
                && let Some(id) = btf.struct_id("task_struct")
            {
                // DTrace's curthread is a `kthread_t *`; ours is the kernel's task.
                ty = Type::Ptr(Box::new(btf.d_type(id)));
            }
            return Ok(mk(TExprKind::Builtin(b), ty, span));
        }
        if name == "args" {
            return Err(self.report(
                Diagnostic::error("`args` must be used as `args[N]` or `args->field`", span)
                    .with_hint(
                        "args[0] is the first typed argument; args->name a tracepoint field",
                    ),
            ));
        }
        if let Some(id) = self.lookup(VarScope::Global, name) {
            let v = &self.vars[id.0 as usize];
            if v.is_assoc() {
                let n = v.keys.len();
                return Err(self.err(
                    format!("associative array `{name}` needs {n} key(s): {name}[...]"),
                    span,
                ));
            }
            let ty = v.ty.clone();
            return Ok(mk(
                TExprKind::Var(VarAccess {
                    var: id,
                    keys: Vec::new(),
                }),
                ty,
                span,
            ));
        }
        if let Some(v) = crate::consts::named_constant(name) {
            return Ok(mk(TExprKind::Int(v as u64), Type::INT, span));
        }
        if ACTIONS.contains(&name) || SUBROUTINES.contains(&name) || AGG_FUNCS.contains(&name) {
            return Err(self.report(Diagnostic::error(
                format!("`{name}` is a function; call it as {name}(...)"),
                span,
            )));
        }
        let mut cands: Vec<&str> = BUILTINS.to_vec();
        let globals: Vec<String> = self.globals.keys().cloned().collect();
        cands.extend(globals.iter().map(|s| s.as_str()));
        let sugg = nearest(name, cands, 3);
        let mut d = Diagnostic::error(format!("unknown variable `{name}`"), span);
        d = d.with_hint(did_you_mean(&sugg).unwrap_or_else(|| {
            format!("a variable must be assigned somewhere, e.g. `{name} = 0;`")
        }));
        Err(self.report(d))
    }

    fn macro_var(&mut self, m: &MacroVar, span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        let int_const = |v: i64| -> TExpr {
            let lit = ast::IntLit {
                value: v as u64,
                unsigned_suffix: false,
                long_suffix: false,
                decimal: true,
                char_lit: false,
            };
            let ty = if v < 0 {
                if v >= i32::MIN as i64 {
                    Type::INT
                } else {
                    Type::I64
                }
            } else {
                int_lit_type(&lit)
            };
            mk(TExprKind::Int(v as u64), ty, span)
        };
        match m {
            MacroVar::Arg(n) | MacroVar::ArgString(n) => {
                self.args_used.insert(*n as usize);
                let as_string = matches!(m, MacroVar::ArgString(_));
                let value = if *n == 0 {
                    self.opts.script_name.clone()
                } else {
                    self.opts.macro_args.get(*n as usize - 1).cloned()
                };
                let shown = if as_string {
                    format!("$${n}")
                } else {
                    format!("${n}")
                };
                let Some(value) = value else {
                    if self.defaultargs {
                        return Ok(if as_string {
                            mk(TExprKind::Str(String::new()), Type::String, span)
                        } else {
                            int_const(0)
                        });
                    }
                    return Err(self.report(
                        Diagnostic::error(format!("macro argument `{shown}` is not defined"), span)
                            .with_hint(format!("pass it after the script, or set `-x defaultargs` to make missing arguments 0 or \"\" ({} given)", self.opts.macro_args.len())),
                    ));
                };
                if as_string {
                    return Ok(mk(TExprKind::Str(value), Type::String, span));
                }
                if let Some(v) = parse_int_arg(&value) {
                    return Ok(int_const(v));
                }
                if is_identifier(&value) {
                    // DTrace substitutes the argument as a token: an identifier names a variable.
                    let known =
                        Builtin::from_name(&value).is_some() || self.globals.contains_key(&value);
                    if known {
                        return self.ident(&value, span, cx);
                    }
                    return Err(self.report(
                        Diagnostic::error(
                            format!("macro argument `{shown}` is \"{value}\": not an integer, and no variable is named `{value}`"),
                            span,
                        )
                        .with_hint(format!("use `$${n}` to use the argument as a string")),
                    ));
                }
                Err(self.report(
                    Diagnostic::error(format!("macro argument `{shown}` (\"{value}\") is neither an integer nor an identifier"), span)
                        .with_hint(format!("use `$${n}` to use the argument as a string")),
                ))
            }
            MacroVar::Named(name) => {
                let v = match name.as_str() {
                    "target" => self.opts.target_pid,
                    "pid" => self.opts.pid,
                    _ => {
                        return Err(self.report(
                            Diagnostic::error(format!("unknown macro variable `${name}`"), span)
                                .with_hint("supported: $1..$9, $$1.., $target, $pid"),
                        ));
                    }
                };
                match v {
                    Some(p) => Ok(mk(TExprKind::Int(p as u64), Type::INT, span)),
                    None => {
                        let hint = if name == "target" {
                            "`$target` is the process given with -p PID or started with -c CMD"
                        } else {
                            "the consumer did not set `$pid`"
                        };
                        Err(self.report(
                            Diagnostic::error(
                                format!("macro variable `${name}` is not defined"),
                                span,
                            )
                            .with_hint(hint),
                        ))
                    }
                }
            }
        }
    }

    fn read_var(&mut self, scope: VarScope, name: &str, span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        match self.lookup(scope, name) {
            Some(id) => {
                if scope == VarScope::Clause && !cx.locals.contains(&id) {
                    cx.locals.push(id);
                }
                let ty = self.vars[id.0 as usize].ty.clone();
                Ok(mk(
                    TExprKind::Var(VarAccess {
                        var: id,
                        keys: Vec::new(),
                    }),
                    ty,
                    span,
                ))
            }
            None => {
                let (prefix, kind) = if scope == VarScope::Thread {
                    ("self", "thread-local")
                } else {
                    ("this", "clause-local")
                };
                let names: Vec<String> = self.table(scope).keys().cloned().collect();
                let sugg: Vec<String> = nearest(name, names.iter().map(|s| s.as_str()), 3)
                    .into_iter()
                    .map(|s| format!("{prefix}->{s}"))
                    .collect();
                let hint = did_you_mean(&sugg).unwrap_or_else(|| {
                    format!("assign it first, e.g. `{prefix}->{name} = timestamp;`, or declare it")
                });
                Err(self.report(
                    Diagnostic::error(
                        format!("{kind} variable `{prefix}->{name}` is never assigned"),
                        span,
                    )
                    .with_hint(hint),
                ))
            }
        }
    }

    fn unary(&mut self, op: UnaryOp, x: &Expr, span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        let t = self.expr(x, cx)?;
        match op {
            UnaryOp::Neg | UnaryOp::Plus | UnaryOp::BitNot => {
                let Some(ty) = t.ty.promoted().filter(|_| t.ty.is_int()) else {
                    return Err(self.err(
                        format!(
                            "operator `{}` needs an integer operand, not `{}`",
                            op.as_str(),
                            t.ty
                        ),
                        span,
                    ));
                };
                let t = convert(t, &ty);
                if op == UnaryOp::Plus {
                    return Ok(TExpr { span, ..t });
                }
                if let TExprKind::Int(_) = t.kind {
                    // Fold `-1`, `~0u`: a constant, as C's constant expressions.
                    let e = mk(TExprKind::Unary(op, Box::new(t)), ty.clone(), span);
                    if let Some(v) = const_eval(&e) {
                        return Ok(mk(TExprKind::Int(v as u64), ty, span));
                    }
                    return Ok(e);
                }
                Ok(mk(TExprKind::Unary(op, Box::new(t)), ty, span))
            }
            UnaryOp::Not => {
                if !t.ty.is_integral() {
                    let mut d = Diagnostic::error(
                        format!(
                            "operator `!` needs an integer or pointer operand, not `{}`",
                            t.ty
                        ),
                        span,
                    );
                    if t.ty == Type::String {
                        d = d.with_hint("compare strings explicitly: s == \"\"");
                    }
                    return Err(self.report(d));
                }
                Ok(mk(TExprKind::Unary(op, Box::new(t)), Type::INT, span))
            }
            UnaryOp::Deref => match t.ty.clone() {
                Type::Ptr(inner) if inner.is_int() || matches!(*inner, Type::Ptr(_)) => {
                    Ok(mk(TExprKind::Deref(Box::new(t)), *inner, span))
                }
                Type::Ptr(inner) => {
                    Err(self.err(format!("cannot dereference a `{inner} *`"), span))
                }
                other => Err(self.report(
                    Diagnostic::error(format!("operator `*` needs a pointer, not `{other}`"), span)
                        .with_hint("cast an address to a pointer type first: *(int *)addr"),
                )),
            },
            UnaryOp::AddrOf => Err(self.report(
                Diagnostic::error("operator `&` (address of) is not supported", span)
                    .with_hint("Sightline has no kernel type information for symbols yet"),
            )),
        }
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        a: &Expr,
        b: &Expr,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        let ta = self.expr(a, cx);
        let tb = self.expr(b, cx);
        let (ta, tb) = (ta?, tb?);
        use BinaryOp::*;
        if op.is_logical() {
            for t in [&ta, &tb] {
                if !t.ty.is_integral() {
                    return Err(self.err(
                        format!(
                            "operator `{}` needs integer or pointer operands, not `{}`",
                            op.as_str(),
                            t.ty
                        ),
                        t.span,
                    ));
                }
            }
            return Ok(mk(
                TExprKind::Binary(op, Box::new(ta), Box::new(tb)),
                Type::INT,
                span,
            ));
        }
        if op.is_comparison() {
            if ta.ty == Type::String && tb.ty == Type::String {
                return Ok(mk(
                    TExprKind::StrCmp(op, Box::new(ta), Box::new(tb)),
                    Type::INT,
                    span,
                ));
            }
            if ta.ty.is_integral() && tb.ty.is_integral() {
                let common = usual_arithmetic(&ta.ty, &tb.ty).unwrap_or(Type::I64);
                let (ta, tb) = (convert(ta, &common), convert(tb, &common));
                return Ok(mk(
                    TExprKind::Binary(op, Box::new(ta), Box::new(tb)),
                    Type::INT,
                    span,
                ));
            }
            let mut d = Diagnostic::error(
                format!(
                    "cannot compare `{}` with `{}` using `{}`",
                    ta.ty,
                    tb.ty,
                    op.as_str()
                ),
                span,
            )
            .with_label(ta.span, format!("`{}`", ta.ty))
            .with_label(tb.span, format!("`{}`", tb.ty));
            if ta.ty == Type::String || tb.ty == Type::String {
                d = d.with_hint("both sides of a string comparison must be strings (use copyinstr() or stringof() to get one)");
            }
            return Err(self.report(d));
        }
        // Arithmetic and bitwise.
        if !ta.ty.is_integral() || !tb.ty.is_integral() {
            let bad = if ta.ty.is_integral() { &tb } else { &ta };
            let mut d = Diagnostic::error(
                format!(
                    "operator `{}` needs integer operands, not `{}`",
                    op.as_str(),
                    bad.ty
                ),
                bad.span,
            );
            if op == Add && (ta.ty == Type::String || tb.ty == Type::String) {
                d = d.with_hint("join strings with strjoin(a, b)");
            }
            return Err(self.report(d));
        }
        // Pointer arithmetic: p + n and p - n scale by the pointee size; p - q is a count.
        if let Type::Ptr(inner) = &ta.ty {
            let elem = (inner.size(self.options.strsize).max(1)) as u64;
            if matches!(op, Add | Sub) && tb.ty.is_int() {
                let pty = ta.ty.clone();
                let n = convert(tb, &Type::I64);
                let scaled = if elem == 1 {
                    n
                } else {
                    let s = n.span;
                    mk(
                        TExprKind::Binary(
                            Mul,
                            Box::new(n),
                            Box::new(mk(TExprKind::Int(elem), Type::I64, s)),
                        ),
                        Type::I64,
                        s,
                    )
                };
                let a64 = convert(ta, &Type::U64);
                let sum = mk(
                    TExprKind::Binary(op, Box::new(a64), Box::new(convert(scaled, &Type::U64))),
                    Type::U64,
                    span,
                );
                return Ok(convert(sum, &pty));
            }
            if op == Sub && matches!(tb.ty, Type::Ptr(_)) {
                let d = mk(
                    TExprKind::Binary(
                        Sub,
                        Box::new(convert(ta, &Type::I64)),
                        Box::new(convert(tb, &Type::I64)),
                    ),
                    Type::I64,
                    span,
                );
                if elem == 1 {
                    return Ok(d);
                }
                return Ok(mk(
                    TExprKind::Binary(
                        Div,
                        Box::new(d),
                        Box::new(mk(TExprKind::Int(elem), Type::I64, span)),
                    ),
                    Type::I64,
                    span,
                ));
            }
        }
        if matches!(op, Shl | Shr) {
            let lt = ta.ty.promoted().unwrap_or(Type::I64);
            let rt = tb.ty.promoted().unwrap_or(Type::I64);
            let (ta, tb) = (convert(ta, &lt), convert(tb, &rt));
            if let Some(sh) = const_eval(&tb) {
                let bits = lt.size(0) as i128 * 8;
                if sh < 0 || sh >= bits {
                    self.report(Diagnostic::warning(
                        format!("shift count {sh} is out of range for `{lt}`"),
                        tb.span,
                    ));
                }
            }
            return Ok(mk(
                TExprKind::Binary(op, Box::new(ta), Box::new(tb)),
                lt,
                span,
            ));
        }
        let ty = usual_arithmetic(&ta.ty, &tb.ty).unwrap_or(Type::I64);
        let (ta, tb) = (convert(ta, &ty), convert(tb, &ty));
        if matches!(op, Div | Mod) && const_eval(&tb) == Some(0) {
            return Err(self.err("division by zero", tb.span));
        }
        Ok(mk(
            TExprKind::Binary(op, Box::new(ta), Box::new(tb)),
            ty,
            span,
        ))
    }

    /// Resolves an assignment target. A variable not yet known is created with type `new_ty`
    /// (and the key types of `keys_hint` or of the written keys).
    fn lvalue(&mut self, e: &Expr, cx: &mut ClauseCx, new_ty: Option<Type>) -> R<VarAccess> {
        let (scope, name, keys): (VarScope, &str, &[Expr]) = match &e.kind {
            ExprKind::Ident(n) => (VarScope::Global, n, &[]),
            ExprKind::SelfVar(n) => (VarScope::Thread, n, &[]),
            ExprKind::ThisVar(n) => (VarScope::Clause, n, &[]),
            ExprKind::Index(base, keys) => match &base.kind {
                ExprKind::Ident(n) if n != "args" => (VarScope::Global, n, keys.as_slice()),
                ExprKind::SelfVar(_) | ExprKind::ThisVar(_) => {
                    return Err(self.err(
                        "thread-local and clause-local variables cannot be associative arrays",
                        e.span,
                    ));
                }
                _ => return Err(self.err("this cannot be assigned to", e.span)),
            },
            ExprKind::AggRef(_) => {
                return Err(self.report(
                    Diagnostic::error(
                        "an aggregation must be assigned an aggregating function",
                        e.span,
                    )
                    .with_hint("@a[keys] = count(); or sum(x), avg(x), quantize(x) ..."),
                ));
            }
            _ => return Err(self.err("the left side of an assignment must be a variable", e.span)),
        };
        if scope == VarScope::Global && (Builtin::from_name(name).is_some() || name == "args") {
            let mut d = Diagnostic::error(
                format!("`{name}` is a built-in variable and cannot be assigned"),
                e.span,
            );
            if cx.in_predicate {
                d = d.with_hint(format!("to compare, write `==`: /{name} == .../"));
            }
            return Err(self.report(d));
        }
        if scope == VarScope::Global && self.inlines.contains_key(name) {
            return Err(self.err(
                format!("`{name}` is an inline and cannot be assigned"),
                e.span,
            ));
        }
        if scope == VarScope::Global
            && crate::consts::named_constant(name).is_some()
            && self.lookup(scope, name).is_none()
        {
            return Err(self.err(
                format!("`{name}` is a constant and cannot be assigned"),
                e.span,
            ));
        }
        let mut tkeys = Vec::new();
        for k in keys {
            let t = self.expr(k, cx)?;
            if matches!(t.ty, Type::Void | Type::Array(..) | Type::Stack { .. }) {
                return Err(self.err(
                    format!("an associative array key cannot have type `{}`", t.ty),
                    t.span,
                ));
            }
            tkeys.push(t);
        }
        let id = match self.lookup(scope, name) {
            Some(id) => id,
            None => {
                let Some(ty) = new_ty else {
                    return Err(self.err(format!("unknown variable `{name}`"), e.span));
                };
                let key_tys = tkeys.iter().map(|k| k.ty.clone()).collect();
                self.new_var(scope, name, key_tys, ty, e.span)
            }
        };
        if scope == VarScope::Clause && !cx.locals.contains(&id) {
            cx.locals.push(id);
        }
        let v = self.vars[id.0 as usize].clone();
        let disp = Self::var_display(&v);
        if v.keys.len() != tkeys.len() {
            let msg = if v.keys.is_empty() {
                format!("`{disp}` is a scalar variable, not an associative array")
            } else if tkeys.is_empty() {
                format!("associative array `{disp}` needs {} key(s)", v.keys.len())
            } else {
                format!(
                    "associative array `{disp}` has {} key(s), {} given",
                    v.keys.len(),
                    tkeys.len()
                )
            };
            return Err(self
                .report(Diagnostic::error(msg, e.span).with_label(v.span, "first assigned here")));
        }
        let mut conv_keys = Vec::new();
        for (k, want) in tkeys.into_iter().zip(v.keys.iter()) {
            conv_keys.push(self.convert_key(k, want, &format!("`{disp}`"), v.span)?);
        }
        Ok(VarAccess {
            var: id,
            keys: conv_keys,
        })
    }

    fn assign(
        &mut self,
        op: Option<BinaryOp>,
        lhs: &Expr,
        rhs: &Expr,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        let r = self.expr(rhs, cx)?;
        if matches!(r.ty, Type::Void | Type::Stack { .. } | Type::Array(..)) {
            return Err(self.report(
                Diagnostic::error(
                    format!("a value of type `{}` cannot be stored in a variable", r.ty),
                    rhs.span,
                )
                .with_hint(
                    "stacks can be aggregation keys (@[stack()] = count()) or traced (stack();)",
                ),
            ));
        }
        // A new variable takes the right side's type; `x += e` on a new variable: e's promoted type.
        let new_ty = match op {
            None => r.ty.clone(),
            Some(_) => r.ty.promoted().unwrap_or(r.ty.clone()),
        };
        let target = self.lvalue(lhs, cx, Some(new_ty))?;
        let v = self.vars[target.var.0 as usize].clone();
        let disp = Self::var_display(&v);
        let mismatch = |this: &mut Self, r: &TExpr| -> Reported {
            let mut d = Diagnostic::error(
                format!(
                    "type mismatch: `{disp}` has type `{}`, the value has type `{}`",
                    v.ty, r.ty
                ),
                r.span,
            )
            .with_label(v.span, format!("`{disp}` got type `{}` here", v.ty));
            if v.ty == Type::String && r.ty.is_integral() {
                d = d.with_hint("for a user-space string use copyinstr(addr); for a kernel `char *` use stringof(p)");
            } else if v.ty.is_integral() && r.ty == Type::String {
                d = d.with_hint("a variable's type is fixed by its first assignment; use another variable for strings");
            }
            this.report(d)
        };
        let value = match op {
            None => {
                if (v.ty.is_integral() && r.ty.is_integral())
                    || v.ty == r.ty
                    || (matches!(v.ty, Type::Symbol(_)) && r.ty.is_integral())
                {
                    convert(r, &v.ty)
                } else {
                    return Err(mismatch(self, &r));
                }
            }
            Some(bop) => {
                if !v.ty.is_integral() || !r.ty.is_integral() {
                    if v.ty == Type::String {
                        return Err(self.report(
                            Diagnostic::error(
                                format!(
                                    "operator `{}=` needs integers; `{disp}` is a string",
                                    bop.as_str()
                                ),
                                span,
                            )
                            .with_hint("join strings with strjoin(a, b)"),
                        ));
                    }
                    return Err(mismatch(self, &r));
                }
                let load = mk(TExprKind::Var(target.clone()), v.ty.clone(), lhs.span);
                let (common, rt) = if matches!(bop, BinaryOp::Shl | BinaryOp::Shr) {
                    (
                        v.ty.promoted().unwrap_or(Type::I64),
                        r.ty.promoted().unwrap_or(Type::I64),
                    )
                } else {
                    let c = usual_arithmetic(&v.ty, &r.ty).unwrap_or(Type::I64);
                    (c.clone(), c)
                };
                let r = convert(r, &rt);
                if matches!(bop, BinaryOp::Div | BinaryOp::Mod) && const_eval(&r) == Some(0) {
                    return Err(self.err("division by zero", r.span));
                }
                let bin = mk(
                    TExprKind::Binary(bop, Box::new(convert(load, &common)), Box::new(r)),
                    common,
                    span,
                );
                convert(bin, &v.ty)
            }
        };
        Ok(mk(
            TExprKind::Assign(target, Box::new(value)),
            v.ty.clone(),
            span,
        ))
    }

    fn index(&mut self, base: &Expr, idx: &[Expr], span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        if self.btf.is_some() && matches!(base.kind, ExprKind::Member { .. } | ExprKind::Index(..))
        {
            let whole = Expr {
                kind: ExprKind::Index(Box::new(base.clone()), idx.to_vec()),
                span,
            };
            if let Some((addr, tid)) = self.place(&whole, cx)? {
                return self.load(addr, tid, span);
            }
        }
        if let ExprKind::Ident(name) = &base.kind {
            if name == "args" {
                return self.probe_arg(idx, span, cx);
            }
            let scalar_pointer = self.lookup(VarScope::Global, name).is_some_and(|id| {
                !self.vars[id.0 as usize].is_assoc()
                    && matches!(self.vars[id.0 as usize].ty, Type::Ptr(_))
            });
            if Builtin::from_name(name).is_none()
                && !scalar_pointer
                && !self.inlines.contains_key(name)
            {
                let Some(id) = self.lookup(VarScope::Global, name) else {
                    let names: Vec<String> = self
                        .vars
                        .iter()
                        .filter(|v| v.is_assoc())
                        .map(|v| v.name.clone())
                        .collect();
                    let sugg = nearest(name, names.iter().map(|s| s.as_str()), 3);
                    let hint = did_you_mean(&sugg).unwrap_or_else(|| {
                        format!("assign an element first: {name}[key] = value;")
                    });
                    return Err(self.report(
                        Diagnostic::error(format!("unknown associative array `{name}`"), base.span)
                            .with_hint(hint),
                    ));
                };
                let fake = Expr {
                    kind: ExprKind::Index(Box::new(base.clone()), idx.to_vec()),
                    span,
                };
                let acc = self.lvalue(&fake, cx, None)?;
                let ty = self.vars[id.0 as usize].ty.clone();
                return Ok(mk(TExprKind::Var(acc), ty, span));
            }
        }
        let b = self.expr(base, cx)?;
        match b.ty.clone() {
            Type::Array(elem, len) => {
                if idx.len() != 1 {
                    return Err(self.err("an array takes one subscript", span));
                }
                let i = self.int_expr(&idx[0], cx, "an array subscript")?;
                let Some(k) = const_eval(&i) else {
                    return Err(self.err("an array subscript must be an integer constant", i.span));
                };
                if k < 0 || k >= len as i128 {
                    return Err(self.err(
                        format!("subscript {k} is out of range for an array of {len}"),
                        i.span,
                    ));
                }
                Ok(mk(TExprKind::ArrayElem(Box::new(b), k as u32), *elem, span))
            }
            // `p[i]` is `*(p + i)` (guide, "Pointers and Arrays" → "Pointer and Array Relationship").
            Type::Ptr(inner) if inner.is_integral() => {
                if idx.len() != 1 {
                    return Err(self.err("a pointer takes one subscript", span));
                }
                let i = self.int_expr(&idx[0], cx, "a subscript")?;
                let elem = *inner.clone();
                let size = elem.size(self.options.strsize).max(1) as u64;
                let ispan = i.span;
                let off = mk(
                    TExprKind::Binary(
                        BinaryOp::Mul,
                        Box::new(convert(i, &Type::U64)),
                        Box::new(mk(TExprKind::Int(size), Type::U64, ispan)),
                    ),
                    Type::U64,
                    ispan,
                );
                let ptr_ty = b.ty.clone();
                let sum = mk(
                    TExprKind::Binary(
                        BinaryOp::Add,
                        Box::new(convert(b, &Type::U64)),
                        Box::new(off),
                    ),
                    Type::U64,
                    span,
                );
                Ok(mk(
                    TExprKind::Deref(Box::new(convert(sum, &ptr_ty))),
                    elem,
                    span,
                ))
            }
            other => Err(self.err(
                format!("a value of type `{other}` cannot be subscripted"),
                span,
            )),
        }
    }

    fn probe_arg(&mut self, idx: &[Expr], span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        if idx.len() != 1 {
            return Err(self.err("args[] takes one subscript", span));
        }
        let i = self.int_expr(&idx[0], cx, "an args[] subscript")?;
        let Some(n) = const_eval(&i).filter(|n| (0..10).contains(n)) else {
            return Err(self.err(
                "args[] subscript must be an integer constant from 0 to 9",
                i.span,
            ));
        };
        let n = n as u8;
        if cx.prepass {
            return Ok(mk(TExprKind::ProbeArg(n), Type::I64, span));
        }
        let mut ty: Option<Type> = None;
        for p in &cx.probes {
            let t = match &p.args {
                ProbeArgs::SyscallEntry { nargs, args } => {
                    if n >= *nargs {
                        return Err(self.report(Diagnostic::error(
                            format!(
                                "args[{n}] is out of range: {} has {nargs} argument(s)",
                                p.full_name()
                            ),
                            span,
                        )));
                    }
                    args.get(n as usize)
                        .map(|f| f.d_type())
                        .unwrap_or(Type::I64)
                }
                ProbeArgs::SyscallReturn | ProbeArgs::Uprobe { ret: true } => {
                    if n > 1 {
                        return Err(self.err(format!("args[{n}] is out of range at {}: a return probe has args[0] and args[1]", p.full_name()), span));
                    }
                    Type::I64
                }
                ProbeArgs::Uprobe { ret: false } => {
                    if n > 5 {
                        return Err(self.err(
                            format!(
                                "args[{n}] is out of range at {}: uprobes have args[0]..args[5]",
                                p.full_name()
                            ),
                            span,
                        ));
                    }
                    Type::I64
                }
                ProbeArgs::Usdt { args } => match args.get(n as usize) {
                    Some(a) => Type::Int {
                        bytes: a.size.clamp(1, 8),
                        signed: a.signed,
                    },
                    None => {
                        return Err(self.err(
                            format!(
                                "args[{n}] is out of range: {} has {} argument(s)",
                                p.full_name(),
                                args.len()
                            ),
                            span,
                        ));
                    }
                },
                ProbeArgs::Tracepoint { .. } => {
                    return Err(self.report(
                        Diagnostic::error(
                            format!("{} is a tracepoint: its arguments are named", p.full_name()),
                            span,
                        )
                        .with_hint("use args->field (see the fields with `sightline probe -lv`)"),
                    ));
                }
                ProbeArgs::None | ProbeArgs::Profile | ProbeArgs::DtraceError => {
                    return Err(self.err(
                        format!("probe {} has no typed arguments (args[])", p.full_name()),
                        span,
                    ));
                }
            };
            match &ty {
                None => ty = Some(t),
                // Probe arguments are 64-bit slots: integers and pointers of different C types
                // (`syscall:::entry` with `args[0]`) meet as the slot's `int64_t`, like `arg0`.
                Some(prev) if *prev != t && prev.is_integral() && t.is_integral() => {
                    ty = Some(Type::I64)
                }
                Some(prev) if *prev != t => {
                    return Err(self.report(
                        Diagnostic::error(format!("args[{n}] has different types at the clause's probes (`{prev}` and `{t}`)"), span)
                            .with_hint("split the clause, or use arg0..arg9 (int64_t)"),
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(mk(TExprKind::ProbeArg(n), ty.unwrap_or(Type::I64), span))
    }

    fn member(
        &mut self,
        base: &Expr,
        field: &str,
        field_span: Span,
        arrow: bool,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        let is_args = matches!(&base.kind, ExprKind::Ident(n) if n == "args");
        if !is_args {
            if self.btf.is_some() {
                let whole = Expr {
                    kind: ExprKind::Member {
                        base: Box::new(base.clone()),
                        field: field.to_string(),
                        field_span,
                        arrow,
                    },
                    span,
                };
                if let Some((addr, tid)) = self.place(&whole, cx)? {
                    return self.load(addr, tid, span);
                }
            }
            // Type the base for its own errors (an unknown variable is the likelier mistake).
            self.expr(base, cx)?;
            let d = if self.btf.is_some() {
                Diagnostic::error(
                    format!("cannot access member `{field}` of a value that is not a structure"),
                    span,
                )
                .with_hint("members are read through pointers to kernel structures: p->member")
            } else {
                Diagnostic::error(format!("cannot access member `{field}`: no kernel type information"), span)
                    .with_hint("structure layouts come from the kernel's BTF (/sys/kernel/btf/vmlinux), which was not loaded")
            };
            return Err(self.report(d));
        }
        if !arrow {
            return Err(self.report(Diagnostic::error(
                "tracepoint fields are accessed with `args->field`",
                span,
            )));
        }
        if cx.prepass {
            return Ok(mk(TExprKind::TpField(field.to_string()), Type::I64, span));
        }
        let mut ty: Option<Type> = None;
        for p in &cx.probes {
            let f = match &p.args {
                ProbeArgs::Tracepoint { fields } | ProbeArgs::SyscallEntry { args: fields, .. } => {
                    match fields.iter().find(|f| f.name == field) {
                        Some(f) => f.clone(),
                        None => {
                            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                            let sugg = nearest(field, names.iter().copied(), 3);
                            let hint = did_you_mean(&sugg).unwrap_or_else(|| {
                                if names.is_empty() {
                                    "this probe has no fields".to_string()
                                } else {
                                    format!("its fields are: {}", names.join(", "))
                                }
                            });
                            return Err(self.report(
                                Diagnostic::error(
                                    format!("{} has no field `{field}`", p.full_name()),
                                    field_span,
                                )
                                .with_hint(hint),
                            ));
                        }
                    }
                }
                _ => {
                    return Err(self.report(
                        Diagnostic::error(
                            format!("probe {} has no named arguments (args->)", p.full_name()),
                            span,
                        )
                        .with_hint("use arg0..arg9 or args[N]"),
                    ));
                }
            };
            let t = self.upgrade_pointer(&f.c_type, f.d_type());
            match &ty {
                None => ty = Some(t),
                Some(prev) if *prev != t => {
                    return Err(self.report(
                        Diagnostic::error(format!("args->{field} has different types at the clause's probes (`{prev}` and `{t}`)"), span)
                            .with_hint("split the clause by probe"),
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(mk(
            TExprKind::TpField(field.to_string()),
            ty.unwrap_or(Type::I64),
            span,
        ))
    }

    /// The address and BTF type of a kernel memory *place* written with `->`, `.` and `[]`:
    /// `p->a` (p a struct pointer), `place.a` (an embedded struct), `place[i]` (an array member).
    /// `None` when `e` is not such a place (e.g. `args->field` on a tracepoint).
    fn place(&mut self, e: &Expr, cx: &mut ClauseCx) -> R<Option<(TExpr, u32)>> {
        let Some(btf) = self.btf.clone() else {
            return Ok(None);
        };
        match &e.kind {
            ExprKind::Member {
                base,
                field,
                field_span,
                arrow: true,
            } => {
                if matches!(&base.kind, ExprKind::Ident(n) if n == "args") {
                    // args->field: a tracepoint field, unless it is itself a pointer (`args->p->x`
                    // arrives here with base `args->p`, not `args`).
                    return Ok(None);
                }
                let b = self.expr(base, cx)?;
                let Type::Ptr(inner) = &b.ty else {
                    return Err(self.report(
                        Diagnostic::error(
                            format!(
                                "operator `->` needs a pointer to a structure, not `{}`",
                                b.ty
                            ),
                            base.span,
                        )
                        .with_hint("cast an address: ((struct task_struct *)addr)->pid"),
                    ));
                };
                let Type::Struct { id, name, .. } = inner.as_ref() else {
                    return Err(self.err(
                        format!(
                            "operator `->` needs a pointer to a structure, not `{}`",
                            b.ty
                        ),
                        base.span,
                    ));
                };
                let (id, name) = (*id, name.clone());
                let addr = convert(b, &Type::U64);
                self.member_place(&btf, addr, id, &name, field, *field_span)
                    .map(Some)
            }
            ExprKind::Member {
                base,
                field,
                field_span,
                arrow: false,
            } => {
                let Some((addr, tid)) = self.place(base, cx)? else {
                    return Ok(None);
                };
                let Type::Struct { id, name, .. } = btf.d_type(tid) else {
                    return Err(self.err(
                        format!("operator `.` needs a structure, not `{}`", btf.d_type(tid)),
                        base.span,
                    ));
                };
                self.member_place(&btf, addr, id, &name, field, *field_span)
                    .map(Some)
            }
            ExprKind::Index(base, idx)
                if matches!(base.kind, ExprKind::Member { .. } | ExprKind::Index(..)) =>
            {
                let Some((addr, tid)) = self.place(base, cx)? else {
                    return Ok(None);
                };
                let rid = btf.resolve(tid);
                let crate::btf::BtfType::Array { elem, len } = btf.get(rid).clone() else {
                    return Err(self.err(
                        format!(
                            "a value of type `{}` cannot be subscripted",
                            btf.d_type(tid)
                        ),
                        base.span,
                    ));
                };
                if idx.len() != 1 {
                    return Err(self.err("an array takes one subscript", e.span));
                }
                let i = self.int_expr(&idx[0], cx, "an array subscript")?;
                if let Some(k) = const_eval(&i)
                    && (k < 0 || k >= len as i128)
                {
                    return Err(self.err(
                        format!("subscript {k} is out of range for an array of {len}"),
                        i.span,
                    ));
                }
                let size = btf.size_of(elem) as u64;
                let span = i.span;
                let scaled = mk(
                    TExprKind::Binary(
                        BinaryOp::Mul,
                        Box::new(convert(i, &Type::U64)),
                        Box::new(mk(TExprKind::Int(size), Type::U64, span)),
                    ),
                    Type::U64,
                    span,
                );
                let sum = mk(
                    TExprKind::Binary(BinaryOp::Add, Box::new(addr), Box::new(scaled)),
                    Type::U64,
                    e.span,
                );
                Ok(Some((sum, elem)))
            }
            _ => Ok(None),
        }
    }

    fn member_place(
        &mut self,
        btf: &crate::btf::Btf,
        addr: TExpr,
        id: u32,
        sname: &str,
        field: &str,
        field_span: Span,
    ) -> R<(TExpr, u32)> {
        let Some((m, bit_off)) = btf.member(id, field) else {
            let names = btf.member_names(id);
            let sugg = nearest(field, names.iter().map(|s| s.as_str()), 3);
            let mut d = Diagnostic::error(
                format!("struct {sname} has no member `{field}`"),
                field_span,
            );
            if let Some(h) = did_you_mean(&sugg) {
                d = d.with_hint(h);
            }
            return Err(self.report(d));
        };
        if m.bitfield_size != 0 || bit_off % 8 != 0 {
            return Err(self.err(
                format!("`{field}` is a bitfield member, which D cannot read yet"),
                field_span,
            ));
        }
        let off = (bit_off / 8) as u64;
        let span = addr.span.to(field_span);
        let a = if off == 0 {
            TExpr { span, ..addr }
        } else {
            mk(
                TExprKind::Binary(
                    BinaryOp::Add,
                    Box::new(addr),
                    Box::new(mk(TExprKind::Int(off), Type::U64, field_span)),
                ),
                Type::U64,
                span,
            )
        };
        Ok((a, m.ty))
    }

    /// A tracepoint field declared `struct NAME *` points to a kernel structure: with BTF, type it
    /// as such so that `args->field->member` works.
    fn upgrade_pointer(&self, c_type: &str, ty: Type) -> Type {
        let Some(btf) = &self.btf else { return ty };
        let t = c_type.trim().trim_start_matches("const ").trim();
        let Some(name) = t
            .strip_prefix("struct ")
            .and_then(|r| r.strip_suffix('*'))
            .map(str::trim)
        else {
            return ty;
        };
        match btf.struct_id(name) {
            Some(id) if !name.contains(['*', ' ']) => Type::Ptr(Box::new(btf.d_type(id))),
            _ => ty,
        }
    }

    /// Reads the value of BTF type `tid` at kernel address `addr` (a `uint64_t`): integers and
    /// pointers by `*`, char arrays as strings (`stringof`).
    fn load(&mut self, addr: TExpr, tid: u32, span: Span) -> R<TExpr> {
        let Some(btf) = self.btf.clone() else {
            return Err(self.err("no kernel type information", span));
        };
        let ty = btf.d_type(tid);
        match &ty {
            Type::Int { .. } | Type::Ptr(_) => {
                let p = mk(
                    TExprKind::Cast(Box::new(addr)),
                    Type::Ptr(Box::new(ty.clone())),
                    span,
                );
                Ok(mk(TExprKind::Deref(Box::new(p)), ty, span))
            }
            Type::String => {
                let p = mk(
                    TExprKind::Cast(Box::new(addr)),
                    Type::Ptr(Box::new(Type::CHAR)),
                    span,
                );
                Ok(mk(
                    TExprKind::Call(Subr::Stringof, vec![p]),
                    Type::String,
                    span,
                ))
            }
            Type::Struct { name, .. } => Err(self.report(
                Diagnostic::error(format!("a `struct {name}` cannot be used as a value"), span)
                    .with_hint("read one of its members with `.member`"),
            )),
            Type::Array(..) => Err(self.report(
                Diagnostic::error(
                    format!("an array of type `{ty}` cannot be used as a value"),
                    span,
                )
                .with_hint("read an element: a[i]"),
            )),
            _ => Err(self.err(
                format!("members of this type (`{ty}`) cannot be read"),
                span,
            )),
        }
    }

    fn call(
        &mut self,
        func: &str,
        func_span: Span,
        args: &[Expr],
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        if ACTIONS.contains(&func) {
            return Err(self.report(
                Diagnostic::error(
                    format!("`{func}()` is an action and has no value"),
                    func_span,
                )
                .with_hint(format!("call {func}() as a statement of its own")),
            ));
        }
        if AGG_FUNCS.contains(&func) {
            return Err(self.report(
                Diagnostic::error(format!("`{func}()` is an aggregating function"), func_span)
                    .with_hint(format!(
                        "assign it to an aggregation: @name[keys] = {func}(...);"
                    )),
            ));
        }
        let n = args.len();
        let mut targs = Vec::new();
        for a in args {
            targs.push(self.expr(a, cx)?);
        }
        let arity = |this: &mut Self, want: &str, usage: &str| -> Reported {
            this.report(
                Diagnostic::error(format!("{func}() takes {want}, {n} given"), span)
                    .with_hint(format!("usage: {usage}")),
            )
        };
        let need_int = |this: &mut Self, t: &TExpr, what: &str| -> R<()> {
            if t.ty.is_integral() {
                Ok(())
            } else {
                Err(this.report(Diagnostic::error(
                    format!("{func}() {what} must be an integer, not `{}`", t.ty),
                    t.span,
                )))
            }
        };
        let need_str = |this: &mut Self, t: &TExpr, what: &str| -> R<()> {
            if t.ty == Type::String {
                Ok(())
            } else {
                Err(this.report(Diagnostic::error(
                    format!("{func}() {what} must be a string, not `{}`", t.ty),
                    t.span,
                )))
            }
        };
        let call = |s: Subr, args: Vec<TExpr>, ty: Type| mk(TExprKind::Call(s, args), ty, span);
        match func {
            "copyinstr" => {
                if !(1..=2).contains(&n) {
                    return Err(arity(
                        self,
                        "one or two arguments",
                        "copyinstr(address [, maxlen])",
                    ));
                }
                need_int(self, &targs[0], "address")?;
                if n == 2 {
                    need_int(self, &targs[1], "length")?;
                }
                let v = targs.into_iter().map(|t| convert(t, &Type::U64)).collect();
                Ok(call(Subr::Copyinstr, v, Type::String))
            }
            "copyin" => {
                if n != 2 {
                    return Err(arity(self, "two arguments", "copyin(address, size)"));
                }
                need_int(self, &targs[0], "address")?;
                need_int(self, &targs[1], "size")?;
                let v = targs.into_iter().map(|t| convert(t, &Type::U64)).collect();
                Ok(call(Subr::Copyin, v, Type::Ptr(Box::new(Type::Void))))
            }
            "strlen" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "strlen(string)"));
                }
                need_str(self, &targs[0], "argument")?;
                Ok(call(Subr::Strlen, targs, Type::U64))
            }
            "stringof" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "stringof(expr)"));
                }
                let [t] = <[TExpr; 1]>::try_from(targs).map_err(|_| Reported)?;
                self.stringof(t, span)
            }
            "strjoin" | "strstr" => {
                if n != 2 {
                    return Err(arity(
                        self,
                        "two arguments",
                        &format!("{func}(string, string)"),
                    ));
                }
                need_str(self, &targs[0], "first argument")?;
                need_str(self, &targs[1], "second argument")?;
                Ok(call(
                    if func == "strjoin" {
                        Subr::Strjoin
                    } else {
                        Subr::Strstr
                    },
                    targs,
                    Type::String,
                ))
            }
            "basename" | "dirname" => {
                if n != 1 {
                    return Err(arity(self, "one argument", &format!("{func}(string)")));
                }
                need_str(self, &targs[0], "argument")?;
                Ok(call(
                    if func == "basename" {
                        Subr::Basename
                    } else {
                        Subr::Dirname
                    },
                    targs,
                    Type::String,
                ))
            }
            "substr" => {
                if !(2..=3).contains(&n) {
                    return Err(arity(
                        self,
                        "two or three arguments",
                        "substr(string, index [, length])",
                    ));
                }
                need_str(self, &targs[0], "first argument")?;
                need_int(self, &targs[1], "index")?;
                if n == 3 {
                    need_int(self, &targs[2], "length")?;
                }
                // The string stays; index and length are int64_t.
                let v = targs
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| if i == 0 { t } else { convert(t, &Type::I64) })
                    .collect();
                Ok(call(Subr::Substr, v, Type::String))
            }
            "strchr" | "strrchr" => {
                if n != 2 {
                    return Err(arity(
                        self,
                        "two arguments",
                        &format!("{func}(string, char)"),
                    ));
                }
                need_str(self, &targs[0], "first argument")?;
                need_int(self, &targs[1], "character")?;
                let [s, c] = <[TExpr; 2]>::try_from(targs).map_err(|_| Reported)?;
                let subr = if func == "strchr" {
                    Subr::Strchr
                } else {
                    Subr::Strrchr
                };
                Ok(call(subr, vec![s, convert(c, &Type::CHAR)], Type::String))
            }
            "index" | "rindex" => {
                // DTrace's `int index(const char *s, const char *subs [, int start])` (and rindex):
                // the position is converted to `int64_t` as dtrace_dif_subr reads it.
                if !(2..=3).contains(&n) {
                    return Err(arity(
                        self,
                        "two or three arguments",
                        &format!("{func}(string, string [, start])"),
                    ));
                }
                need_str(self, &targs[0], "first argument")?;
                need_str(self, &targs[1], "second argument")?;
                if n == 3 {
                    need_int(self, &targs[2], "start position")?;
                }
                let v = targs
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| if i < 2 { t } else { convert(t, &Type::I64) })
                    .collect();
                Ok(call(
                    if func == "index" {
                        Subr::Index
                    } else {
                        Subr::Rindex
                    },
                    v,
                    Type::INT,
                ))
            }
            "lltostr" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "lltostr(integer)"));
                }
                need_int(self, &targs[0], "argument")?;
                let v = targs.into_iter().map(|t| convert(t, &Type::I64)).collect();
                Ok(call(Subr::Lltostr, v, Type::String))
            }
            "rand" | "speculation" => {
                if n != 0 {
                    return Err(arity(self, "no arguments", &format!("{func}()")));
                }
                Ok(call(
                    if func == "rand" {
                        Subr::Rand
                    } else {
                        Subr::Speculation
                    },
                    targs,
                    Type::INT,
                ))
            }
            "progenyof" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "progenyof(pid)"));
                }
                need_int(self, &targs[0], "pid")?;
                let v = targs.into_iter().map(|t| convert(t, &Type::INT)).collect();
                Ok(call(Subr::Progenyof, v, Type::INT))
            }
            "htons" | "ntohs" | "htonl" | "ntohl" | "htonll" | "ntohll" => {
                if n != 1 {
                    return Err(arity(self, "one argument", &format!("{func}(integer)")));
                }
                need_int(self, &targs[0], "argument")?;
                let (s, ty) = match func {
                    "htons" | "ntohs" => (
                        Subr::Htons,
                        Type::Int {
                            bytes: 2,
                            signed: false,
                        },
                    ),
                    "htonl" | "ntohl" => (Subr::Htonl, Type::UINT),
                    _ => (Subr::Htonll, Type::U64),
                };
                let v = targs.into_iter().map(|t| convert(t, &ty)).collect();
                Ok(call(s, v, ty))
            }
            "stack" | "ustack" => {
                let user = func == "ustack";
                let max = if user { 2 } else { 1 };
                if n > max {
                    return Err(arity(
                        self,
                        if user {
                            "at most two arguments"
                        } else {
                            "at most one argument"
                        },
                        &format!("{func}([frames])"),
                    ));
                }
                let frames = match targs.first() {
                    Some(t) => match const_eval(t) {
                        Some(v) if (1..=1024).contains(&v) => v as u32,
                        _ => return Err(self.err(
                            format!(
                                "{func}() frame count must be an integer constant from 1 to 1024"
                            ),
                            t.span,
                        )),
                    },
                    None => {
                        if user {
                            self.options.ustackframes
                        } else {
                            self.options.stackframes
                        }
                    }
                };
                Ok(mk(
                    TExprKind::Stack { user, frames },
                    Type::Stack { user, frames },
                    span,
                ))
            }
            "sym" | "func" | "mod" | "usym" | "ufunc" | "umod" | "uaddr" => {
                if n != 1 {
                    return Err(arity(self, "one argument", &format!("{func}(address)")));
                }
                need_int(self, &targs[0], "address")?;
                let kind = match func {
                    "sym" | "func" => SymKind::Sym,
                    "mod" => SymKind::Mod,
                    "usym" | "ufunc" => SymKind::Usym,
                    "umod" => SymKind::Umod,
                    _ => SymKind::Uaddr,
                };
                let [a] = <[TExpr; 1]>::try_from(targs).map_err(|_| Reported)?;
                let a = convert(a, &Type::U64);
                Ok(mk(
                    TExprKind::Symbol(kind, Box::new(a)),
                    Type::Symbol(kind),
                    span,
                ))
            }
            _ => {
                let mut all: Vec<&str> = SUBROUTINES.to_vec();
                all.extend_from_slice(ACTIONS);
                all.extend_from_slice(AGG_FUNCS);
                let sugg = nearest(func, all, 3);
                let mut d = Diagnostic::error(format!("unknown function `{func}`"), func_span);
                if let Some(h) = did_you_mean(&sugg) {
                    d = d.with_hint(h);
                }
                Err(self.report(d))
            }
        }
    }
}

fn agg_usage(func: &str) -> &'static str {
    match func {
        "count" => "@a[keys] = count()",
        "sum" => "@a[keys] = sum(value)",
        "avg" => "@a[keys] = avg(value)",
        "min" => "@a[keys] = min(value)",
        "max" => "@a[keys] = max(value)",
        "stddev" => "@a[keys] = stddev(value)",
        "quantize" => "@a[keys] = quantize(value [, increment])",
        "lquantize" => "@a[keys] = lquantize(value, base, limit [, step [, increment]])",
        "llquantize" => "@a[keys] = llquantize(value, factor, low, high, nsteps [, increment])",
        _ => "@a[keys] = count()",
    }
}

fn describe_agg(f: &AggFunc) -> String {
    match f {
        AggFunc::Lquantize { base, limit, step } => {
            format!("lquantize(.., {base}, {limit}, {step})")
        }
        AggFunc::Llquantize {
            factor,
            low,
            high,
            nsteps,
        } => format!("llquantize(.., {factor}, {low}, {high}, {nsteps})"),
        other => format!("{}()", other.name()),
    }
}

/// The probes nearest to a description that matched nothing: field-wise edit distance (an empty
/// pattern field costs nothing), at most 3, best first.
fn nearest_probes(pat: &ProbeDescPattern, names: &[String]) -> Vec<String> {
    let pf = [&pat.provider, &pat.module, &pat.function, &pat.name];
    let mut scored: Vec<(usize, &String)> = names
        .iter()
        .filter_map(|n| {
            let parts: Vec<&str> = n.splitn(4, ':').collect();
            if parts.len() != 4 {
                return None;
            }
            // Each differing field may be off by a third of its length (at least 2 edits).
            let mut total = 0;
            for (p, f) in pf.iter().zip(parts.iter()) {
                if p.is_empty() || crate::catalog::glob_match(p, f) {
                    continue;
                }
                let d = edit_distance(p, f);
                if d > (p.chars().count() / 3).max(2) {
                    return None;
                }
                total += d;
            }
            Some((total, n))
        })
        .collect();
    scored.sort();
    keep_best(scored)
        .into_iter()
        .take(3)
        .map(|(_, n)| n.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("read", "read"), 0);
        assert_eq!(edit_distance("raed", "read"), 1);
        assert_eq!(edit_distance("pdi", "pid"), 1);
        assert_eq!(edit_distance("opn", "open"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn rates_and_sizes() {
        assert_eq!(parse_rate("10hz"), Some(100_000_000));
        assert_eq!(parse_rate("10"), Some(10));
        assert_eq!(parse_rate("97Hz"), Some(1_000_000_000 / 97));
        assert_eq!(parse_rate("100ms"), Some(100_000_000));
        assert_eq!(parse_rate("1s"), Some(1_000_000_000));
        assert_eq!(parse_rate("x"), None);
        assert_eq!(parse_size("4m"), Some(4 << 20));
        assert_eq!(parse_size("512K"), Some(512 << 10));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("4q"), None);
    }

    #[test]
    fn int_literal_ladder() {
        let lit = |value, u, l| ast::IntLit {
            value,
            unsigned_suffix: u,
            long_suffix: l,
            decimal: true,
            char_lit: false,
        };
        assert_eq!(int_lit_type(&lit(1, false, false)), Type::INT);
        assert_eq!(int_lit_type(&lit(3_000_000_000, false, false)), Type::UINT);
        assert_eq!(int_lit_type(&lit(5_000_000_000, false, false)), Type::I64);
        assert_eq!(int_lit_type(&lit(u64::MAX, false, false)), Type::U64);
        assert_eq!(int_lit_type(&lit(1, true, false)), Type::UINT);
        assert_eq!(int_lit_type(&lit(1, false, true)), Type::I64);
        assert_eq!(int_lit_type(&lit(1, true, true)), Type::U64);
    }

    #[test]
    fn macro_int_args() {
        assert_eq!(parse_int_arg("42"), Some(42));
        assert_eq!(parse_int_arg("0x10"), Some(16));
        assert_eq!(parse_int_arg("010"), Some(8));
        assert_eq!(parse_int_arg("-5"), Some(-5));
        assert_eq!(parse_int_arg("bash"), None);
    }
}
