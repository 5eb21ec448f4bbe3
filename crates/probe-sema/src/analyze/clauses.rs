//! Clauses and probe matching: each clause's probe descriptions against the catalog (with the
//! nearest probes for a description that matches nothing), the pre-pass that fixes variable and
//! aggregation types, and statements.

use super::*;
use probe_syntax::ErrTag;

/// The longest probe-description fields, in bytes after macro substitution (field name, limit):
/// DTrace's `DTRACE_PROVNAMELEN` and `DTRACE_NAMELEN` (64) for provider and name; for the module,
/// which Sightline's `pid` and USDT providers take as a path, `PATH_MAX` (4096); for the function
/// 1024, twice Linux's `KSYM_NAME_LEN` (512) to leave room for mangled user-space symbols.
/// docs/d-reference.md § 11a.
pub const PROBE_FIELD_LIMITS: [(&str, usize); 4] = [
    ("provider", 64),
    ("module", 4096),
    ("function", 1024),
    ("name", 64),
];

/// A clause's matched probes, and each description as written with its pattern.
type Matched = (Vec<ProbeInfo>, Vec<(String, ProbeDescPattern)>);

impl Analyzer<'_> {
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
                        return Err(self.err_at(
                            ErrTag::D_MACRO_UNDEF,
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
                    Diagnostic::tagged(
                        ErrTag::D_MACRO_UNDEF,
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

    pub(super) fn match_probes(&mut self, c: &ast::Clause) -> R<Matched> {
        let mut probes: Vec<ProbeInfo> = Vec::new();
        // Full names already in `probes`: `syscall:::entry` matches hundreds, and a linear search
        // per probe made matching quadratic (most of the start-up time).
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut descs = Vec::new();
        let mut failed = false;
        for d in &c.probes {
            let fields = [&d.provider, &d.module, &d.function, &d.name];
            let mut subst = Vec::new();
            for (f, (what, limit)) in fields.into_iter().zip(PROBE_FIELD_LIMITS) {
                match self.substitute_macros(f) {
                    Ok(s) if s.len() > limit => {
                        failed = true;
                        self.report(
                            Diagnostic::tagged(
                                ErrTag::D_PDESC_INVAL,
                                format!(
                                    "probe {what} is {} bytes long, above the limit of {limit}",
                                    s.len()
                                ),
                                f.span,
                            )
                            .with_hint(format!(
                                "no {what} is that long; use a glob (`*`) for part of the name"
                            )),
                        );
                    }
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
            // Matched once per distinct description: the pre-pass and the checking pass, and the
            // 5,000 `BEGIN` clauses of issue 22, each scanned the whole catalog.
            let found = match self.matched.get(&pat) {
                Some(found) => found.clone(),
                None => {
                    let found = self.catalog.matching(&pat);
                    self.matched.insert(pat.clone(), found.clone());
                    found
                }
            };
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
                let mut diag = Diagnostic::tagged(
                    ErrTag::D_PDESC_ZERO,
                    format!("probe description `{text}` does not match any probes"),
                    d.span,
                );
                if let Some(why) = self.catalog.why_no_match(&pat) {
                    diag = diag.with_hint(why);
                } else if let Some(h) = did_you_mean(&sugg) {
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
            descs.push((text, pat));
        }
        if failed {
            return Err(Reported);
        }
        Ok((probes, descs))
    }

    pub(super) fn clause(&mut self, index: usize, c: &ast::Clause) -> Option<CheckedClause> {
        let matched = self.match_probes(c);
        self.clause_strtok = false;
        self.clause_scratch = false;
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
                        let mut d = Diagnostic::tagged(ErrTag::D_PRED_SCALAR, msg, p.span);
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
            strtok: self.clause_strtok,
            scratch_memory: self.clause_scratch,
            descriptions: descriptions.iter().map(|(t, _)| t.clone()).collect(),
            patterns: descriptions.into_iter().map(|(_, p)| p).collect(),
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
                                Diagnostic::tagged(
                                    ErrTag::D_SPEC_SPEC,
                                    "only one speculate() is allowed per clause",
                                    *span,
                                )
                                .with_label(first, "first speculate() here"),
                            );
                        } else if let Some(rec) = recorded {
                            self.report(
                                Diagnostic::tagged(ErrTag::D_SPEC_DREC, "speculate() must come before any data-recording action", *span)
                                    .with_label(rec, "data recorded here")
                                    .with_hint("a clause traces either speculatively or not: move speculate() first"),
                            );
                        }
                        if let Some(c) = commit {
                            self.report(
                                Diagnostic::tagged(
                                    ErrTag::D_SPEC_COMM,
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
                                Diagnostic::tagged(
                                    ErrTag::D_SPEC_COMM,
                                    "speculate() and commit() cannot be in the same clause",
                                    *span,
                                )
                                .with_label(sp, "speculate() here"),
                            );
                        } else if let Some(rec) = recorded {
                            // "A clause containing a commit() cannot contain a data recording
                            // action" (guide, "Committing a Speculation"; dt_cc.c D_COMM_DREC).
                            self.report(
                                Diagnostic::tagged(
                                    ErrTag::D_COMM_DREC,
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
                    | Action::Print { .. }
                    | Action::Tracemem { .. } => {
                        if let Some(c) = commit {
                            self.report(
                                Diagnostic::tagged(
                                    ErrTag::D_DREC_COMM,
                                    "data-recording actions may not follow commit()",
                                    *span,
                                )
                                .with_label(c, "commit() here")
                                .with_hint("record the data in another clause"),
                            );
                        }
                        recorded.get_or_insert(*span);
                    }
                    Action::Exit(_) => {
                        // exit() records its status: D_DREC_COMM in Oracle's dt_cg.c.
                        if let Some(c) = commit {
                            self.after_commit(
                                ErrTag::D_DREC_COMM,
                                "data-recording actions may not follow commit()",
                                *span,
                                c,
                            );
                        }
                        recorded.get_or_insert(*span);
                        not_speculative.push((*span, "exit()"))
                    }
                    Action::System { .. }
                    | Action::Raise(_)
                    | Action::Stop
                    | Action::Copyout { .. }
                    | Action::Copyoutstr { .. }
                    | Action::Chill(_) => not_speculative.push((*span, "a destructive action")),
                    _ => {}
                },
                TStmt::Aggregate { span, .. } => {
                    // dt_cc.c D_AGG_COMM: the commit's buffer would be drained with an
                    // aggregation of the same firing between.
                    if let Some(c) = commit {
                        self.after_commit(
                            ErrTag::D_AGG_COMM,
                            "aggregating actions may not follow commit()",
                            *span,
                            c,
                        );
                    }
                    recorded.get_or_insert(*span);
                    not_speculative.push((*span, "an aggregation"))
                }
                _ => {}
            }
        }
        if let Some(sp) = speculate {
            for (span, what) in not_speculative {
                self.report(
                    Diagnostic::error(format!("{what} cannot be speculative"), span)
                        .with_code(match what {
                            "exit()" => ErrTag::D_EXIT_SPEC,
                            "an aggregation" => ErrTag::D_AGG_SPEC,
                            _ => ErrTag::D_ACT_SPEC,
                        })
                        .with_label(sp, "this clause speculates here")
                        .with_hint("aggregations, exit() and destructive actions go in a clause without speculate()"),
                );
            }
        }
    }

    /// Reports `message` at `span`, an action that a `commit()` at `commit` earlier in the
    /// clause forbids (DTrace's D_AGG_COMM and the exit() rule of dt_cc.c).
    fn after_commit(&mut self, tag: ErrTag, message: &str, span: Span, commit: Span) {
        self.report(
            Diagnostic::tagged(tag, message, span)
                .with_label(commit, "commit() here")
                .with_hint("put it in another clause"),
        );
    }

    /// `#pragma D depends_on provider|module NAME` (DTrace's `dt_pragma_depends`): an error
    /// "program requires provider NAME" when no probe of that provider exists (a `pid`
    /// provider is always there), "program requires module NAME" when the kernel has no such
    /// module (`/sys/module/NAME`; `vmlinux`, `kernel`, `unix` and `genunix` name the kernel).
    pub(super) fn depends_on(&mut self, d: &ast::DependsPragma) {
        let (what, found) = match d.class {
            ast::DependsClass::Provider => {
                let any = d.name == "pid"
                    || !self
                        .catalog
                        .matching(&ProbeDescPattern::new(&d.name, "", "", ""))
                        .is_empty();
                ("provider", any)
            }
            ast::DependsClass::Module => {
                let kernel = matches!(d.name.as_str(), "vmlinux" | "kernel" | "unix" | "genunix");
                let safe = !d.name.is_empty() && !d.name.contains(['/', '.']);
                (
                    "module",
                    kernel || (safe && std::path::Path::new("/sys/module").join(&d.name).exists()),
                )
            }
        };
        if !found {
            self.report(Diagnostic::tagged(
                ErrTag::D_PRAGMA_DEPEND,
                format!("program requires {what} {}", d.name),
                d.span,
            ));
        }
    }

    // ----- pre-pass -----

    pub(super) fn prepass_stmts(&mut self, stmts: &[Stmt], cx: &ClauseCx) {
        for s in stmts {
            let mut cx2 = ClauseCx {
                probes: cx.probes.clone(),
                locals: Vec::new(),
                prepass: cx.prepass,
                in_predicate: false,
            };
            if let Some(expanded) = self.expand_xlate_assignment(s, &mut cx2) {
                self.prepass_stmts(&expanded, cx);
                continue;
            }
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
            if let Some(expanded) = self.expand_xlate_assignment(s, cx) {
                out.extend(self.stmts(&expanded, cx));
                continue;
            }
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
                    return Err(self.err_at(
                        ErrTag::D_OP_SCALAR,
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
                if let Some(x) = self.peel_xlate_inline(e)
                    && let ExprKind::Xlate(tn, input) = &x.kind
                {
                    return Err(self.xlate_statement(tn, input, cx));
                }
                if let ExprKind::Ternary(c, a, b) = &e.kind {
                    // DTrace folds a conditional whose condition is a constant, so the arm that
                    // stays is the statement: the toolkit's `OPT_x ? printf(...) : 1;` may put an
                    // action there, and a constant arm is no statement (and no warning).
                    let quiet = std::mem::replace(&mut self.quiet, true);
                    let cond = self.expr(c, cx).ok().as_ref().and_then(const_eval);
                    self.quiet = quiet;
                    if let Some(v) = cond {
                        let arm = if v != 0 { a } else { b };
                        if matches!(arm.kind, ExprKind::Int(_)) {
                            return Ok(None);
                        }
                        let stmt = Stmt {
                            kind: StmtKind::Expr((**arm).clone()),
                            span: s.span,
                        };
                        return self.stmt(&stmt, cx);
                    }
                }
                if let ExprKind::Call {
                    func,
                    func_span,
                    args,
                } = &e.kind
                {
                    if AGG_FUNCS.contains(&func.as_str()) {
                        // Oracle's dt_parser: an aggregating function outside an aggregation
                        // assignment, as a statement, is D_CG_EXPR.
                        return Err(self.report(
                            Diagnostic::tagged(
                                ErrTag::D_CG_EXPR,
                                format!(
                                    "`{func}()` is an aggregating function and is no statement"
                                ),
                                *func_span,
                            )
                            .with_hint(format!(
                                "assign it to an aggregation: @name[keys] = {func}(...);"
                            )),
                        ));
                    }
                    if ACTIONS.contains(&func.as_str()) {
                        let act = self.action(func, *func_span, args, e.span, cx)?;
                        return Ok(Some(TStmt::Action(act, s.span)));
                    }
                    if func == "bcopy" {
                        // `void bcopy(...)`: a statement; as a value it is an error (below).
                        let t = self.call(func, *func_span, args, e.span, cx)?;
                        return Ok(Some(TStmt::Expr(t)));
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
                if let ExprKind::AggRef(name) = &e.kind {
                    // Oracle's dt_parser: `@a;` names an aggregation without a function
                    // (D_AGG_NULL), or an unknown one (D_IDENT_UNDEF).
                    let known = self.agg_names.contains_key(name);
                    return Err(self.err_at(
                        if known {
                            ErrTag::D_AGG_NULL
                        } else {
                            ErrTag::D_IDENT_UNDEF
                        },
                        if known {
                            format!("`@{name};` applies no aggregating function")
                        } else {
                            format!("unknown aggregation `@{name}`")
                        },
                        e.span,
                    ));
                }
                let t = self.expr(e, cx)?;
                let effect = stores_member(&t)
                    || matches!(
                        t.kind,
                        TExprKind::Assign(..)
                            | TExprKind::IncDec { .. }
                            | TExprKind::Call(..)
                            | TExprKind::StoreMember { .. }
                            | TExprKind::StorePtr { .. }
                            | TExprKind::ElemStore { .. }
                            | TExprKind::CopyStruct { .. }
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
}

/// The probes nearest to a description that matched nothing: field-wise edit distance (an empty
/// pattern field costs nothing), at most 3, best first. A field longer than
/// [`names::SUGGEST_MAX_CHARS`] that is not a glob matching the probe's rules the probe out.
fn nearest_probes(pat: &ProbeDescPattern, names: &[String]) -> Vec<String> {
    let pf = [&pat.provider, &pat.module, &pat.function, &pat.name];
    // Each differing field may be off by a third of its length (at least 2 edits).
    let near: Vec<Option<names::Near>> = pf
        .iter()
        .map(|p| {
            let n = p.chars().take(names::SUGGEST_MAX_CHARS + 1).count();
            names::Near::new(p, (n / 3).max(2))
        })
        .collect();
    let mut scored: Vec<(usize, &String)> = names
        .iter()
        .filter_map(|n| {
            let parts: Vec<&str> = n.splitn(4, ':').collect();
            if parts.len() != 4 {
                return None;
            }
            let mut total = 0;
            for ((p, f), near) in pf.iter().zip(parts.iter()).zip(&near) {
                if p.is_empty() || crate::catalog::glob_match(p, f) {
                    continue;
                }
                total += near.as_ref()?.distance(f)?;
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

/// True when `t` is, or converts the value of, a store to a member of a struct variable (`v.m++`
/// is the store and a subtraction).
fn stores_member(t: &TExpr) -> bool {
    match &t.kind {
        TExprKind::StoreMember { .. }
        | TExprKind::StorePtr { .. }
        | TExprKind::ElemStore { .. } => true,
        TExprKind::Cast(x) => stores_member(x),
        TExprKind::Binary(_, a, _) => stores_member(a),
        _ => false,
    }
}
