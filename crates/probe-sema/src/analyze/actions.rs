//! Actions: `trace`, `printf`, `printa`, `exit`, speculations and the other statement-level
//! calls (DTrace guide, "Actions and Subroutines").

use super::*;
use probe_syntax::ErrTag;

impl Analyzer<'_> {
    pub(super) fn action(
        &mut self,
        func: &str,
        func_span: Span,
        args: &[Expr],
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<Action> {
        let n = args.len();
        let arity = |this: &mut Self, want: &str, usage: &str| -> Reported {
            this.arity_error(func, want, n, func_span.to(span), usage)
        };
        match func {
            "trace" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "trace(expression)"));
                }
                if is_action_call(&args[0]) {
                    return Err(self.err_at(
                        ErrTag::D_TRACE_VOID,
                        "trace( ) may not be applied to a void expression",
                        args[0].span,
                    ));
                }
                let t = self.expr(&args[0], cx)?;
                // A struct variable is recorded as its bytes (DTrace prints them as a hex dump).
                let struct_var =
                    matches!(t.ty, Type::Struct { .. }) && matches!(t.kind, TExprKind::Var(_));
                if !struct_var && matches!(t.ty, Type::Void | Type::Array(..) | Type::Struct { .. })
                {
                    let tag = if t.ty == Type::Void {
                        ErrTag::D_TRACE_VOID
                    } else {
                        ErrTag::D_TRACE_DYN
                    };
                    return Err(self.err_at(
                        tag,
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
                for (i, a) in args[1..].iter().enumerate() {
                    if is_action_call(a) {
                        self.err_at(
                            ErrTag::D_PRINTF_ARG_TYPE,
                            format!("{func}( ) argument #{} is incompatible with its conversion: the argument is void (an action has no value)", i + 2),
                            a.span,
                        );
                        failed = true;
                        continue;
                    }
                    if matches!(a.kind, ExprKind::AggRef(_)) {
                        // Oracle's dt_printf_validate: an aggregation fits no conversion.
                        self.err_at(
                            ErrTag::D_PRINTF_ARG_TYPE,
                            format!("{func}( ) argument #{} is incompatible with its conversion: an aggregation has no value (print it with printa())", i + 2),
                            a.span,
                        );
                        failed = true;
                        continue;
                    }
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
                if rest.is_empty() && format.is_some() {
                    // A format and no aggregation: DTrace's printa( ) prototype mismatch.
                    return Err(self.err_at(
                        ErrTag::D_PRINTA_PROTO,
                        "printa( ) prototype mismatch: 1 args passed, 2 expected",
                        span,
                    ));
                }
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
                                Diagnostic::tagged(ErrTag::D_PRINTA_AGGKEY,
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
                if is_action_call(&args[0]) {
                    return Err(self.err_at(
                        ErrTag::D_PROTO_ARG,
                        "exit( ) argument #1 is incompatible with prototype:\n\tprototype: int\n\t argument: void",
                        args[0].span,
                    ));
                }
                let t = self.int_expr(&args[0], cx, "exit() status")?;
                Ok(Action::Exit(convert(t, &Type::INT)))
            }
            "clear" | "denormalize" => {
                if n != 1 {
                    return Err(arity(self, "one aggregation", &format!("{func}(@a)")));
                }
                let id = if func == "clear" {
                    self.agg_ref_tagged(&args[0], ErrTag::D_CLEAR_AGGARG)?
                } else {
                    self.agg_ref_tagged(&args[0], ErrTag::D_NORMALIZE_AGGARG)?
                };
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
                let agg = self.agg_ref_tagged(&args[0], ErrTag::D_TRUNC_AGGARG)?;
                if let Some(k) = args
                    .get(1)
                    .filter(|k| matches!(k.kind, ExprKind::AggRef(_)))
                {
                    return Err(self.err_at(
                        ErrTag::D_PROTO_ARG,
                        "trunc()'s count must be an integer, not an aggregation",
                        k.span,
                    ));
                }
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
                let agg = self.agg_ref_tagged(&args[0], ErrTag::D_NORMALIZE_AGGARG)?;
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
            "print" => {
                if n != 1 {
                    return Err(self.err_at(
                        ErrTag::D_PROTO_LEN,
                        format!("print( ) prototype mismatch: {n} args passed, 1 expected"),
                        func_span.to(span),
                    ));
                }
                let t = self.expr(&args[0], cx)?;
                let Type::Ptr(to) = &t.ty else {
                    return Err(self.err_at(
                        ErrTag::D_PROTO_ARG,
                        format!(
                            "print( ) argument #1 is incompatible with prototype:\n\tprototype: void *\n\t argument: {}",
                            t.ty
                        ),
                        t.span,
                    ));
                };
                let ty = self.print_type_of(to);
                if ty.size == 0 {
                    return Err(self.err_at(
                        ErrTag::D_PRINT_SIZE,
                        format!(
                            "print( ) argument #1 reference has type '{}' with size 0; cannot print( ) it.",
                            ty.name
                        ),
                        t.span,
                    ));
                }
                let size = ty.size.min(crate::checked::PRINT_RECORD_MAX);
                Ok(Action::Print {
                    addr: convert(t, &Type::U64),
                    ty: Box::new(ty),
                    size,
                })
            }
            "setopt" => {
                if n == 0 || n > 2 {
                    let bound = if n == 0 { "at least 1" } else { "at most 2" };
                    return Err(self.err_at(
                        ErrTag::D_PROTO_LEN,
                        format!("setopt( ) prototype mismatch: {n} args passed, {bound} expected"),
                        func_span.to(span),
                    ));
                }
                let mut strs = Vec::new();
                for (i, a) in args.iter().enumerate() {
                    let t = self.expr(a, cx)?;
                    if !t.ty.is_string() {
                        return Err(self.err_at(
                            ErrTag::D_PROTO_ARG,
                            format!(
                                "setopt( ) argument #{} is incompatible with prototype:\n\tprototype: char *\n\t argument: {}",
                                i + 1,
                                t.ty
                            ),
                            t.span,
                        ));
                    }
                    strs.push(t);
                }
                let mut strs = strs.into_iter();
                Ok(Action::Setopt {
                    name: strs.next().expect("one argument"),
                    value: strs.next(),
                })
            }
            "tracemem" => {
                if n != 2 {
                    return Err(arity(self, "two arguments", "tracemem(address, size)"));
                }
                let addr = self.int_expr(&args[0], cx, "tracemem() address")?;
                let size = self.int_expr(&args[1], cx, "tracemem() size")?;
                // Oracle's dt_cg: "tracemem( ) argument #2 must be a non-zero positive integer
                // constant".
                let Some(sz) = const_eval(&size)
                    .and_then(|v| u32::try_from(v).ok())
                    .filter(|&v| v > 0)
                else {
                    return Err(self.err_at(
                        ErrTag::D_TRACEMEM_SIZE,
                        "tracemem() size must be a positive integer constant",
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
            "copyout" => {
                if n != 3 {
                    return Err(arity(self, "three arguments", "copyout(buf, addr, nbytes)"));
                }
                self.require_destructive(func, func_span);
                let buf = self.int_expr(&args[0], cx, "copyout() buffer")?;
                let addr = self.int_expr(&args[1], cx, "copyout() address")?;
                let size = self.int_expr(&args[2], cx, "copyout() size")?;
                let Some(sz) = const_eval(&size).and_then(|v| u32::try_from(v).ok()) else {
                    return Err(self.err_at(
                        ErrTag::D_PROTO_ARG,
                        "copyout() size must be a non-negative integer constant",
                        size.span,
                    ));
                };
                Ok(Action::Copyout {
                    buf: convert(buf, &Type::U64),
                    addr: convert(addr, &Type::U64),
                    size: sz,
                })
            }
            "copyoutstr" => {
                if n != 3 {
                    return Err(arity(
                        self,
                        "three arguments",
                        "copyoutstr(str, addr, maxlen)",
                    ));
                }
                self.require_destructive(func, func_span);
                let s = self.expr(&args[0], cx)?;
                if !s.ty.is_string() {
                    return Err(self.err_at(
                        ErrTag::D_PROTO_ARG,
                        "copyoutstr() first argument must be a string",
                        s.span,
                    ));
                }
                let addr = self.int_expr(&args[1], cx, "copyoutstr() address")?;
                let maxlen = self.int_expr(&args[2], cx, "copyoutstr() maximum length")?;
                Ok(Action::Copyoutstr {
                    s,
                    addr: convert(addr, &Type::U64),
                    maxlen: convert(maxlen, &Type::U64),
                })
            }
            "chill" => {
                if n != 1 {
                    return Err(arity(self, "one argument", "chill(nanoseconds)"));
                }
                self.require_destructive(func, func_span);
                let ns = self.int_expr(&args[0], cx, "chill() nanoseconds")?;
                Ok(Action::Chill(convert(ns, &Type::I64)))
            }
            "panic" | "breakpoint" => Err(self.err_at(
                ErrTag::D_UNKNOWN,
                format!("{func}() is refused: sightline never panics or stops the kernel"),
                func_span,
            )),
            _ => Err(self.err_at(
                ErrTag::D_FUNC_UNDEF,
                format!("unknown action `{func}`"),
                func_span,
            )),
        }
    }

    fn require_destructive(&mut self, func: &str, span: Span) {
        if !self.options.destructive {
            self.report(
                Diagnostic::tagged(
                    ErrTag::EDT_DESTRUCTIVE,
                    format!("destructive actions not allowed: {func}() is a destructive action"),
                    span,
                )
                .with_hint("allow destructive actions with `#pragma D option destructive` or -w"),
            );
        }
    }

    pub(super) fn int_expr(&mut self, e: &Expr, cx: &mut ClauseCx, what: &str) -> R<TExpr> {
        let t = self.expr(e, cx)?;
        if !t.ty.is_integral() {
            return Err(self.err_at(
                ErrTag::D_PROTO_ARG,
                format!("{what} must be an integer, not `{}`", t.ty),
                e.span,
            ));
        }
        Ok(t)
    }

    fn format_string(&mut self, e: &Expr, func: &str) -> R<String> {
        match &e.kind {
            ExprKind::Str(s) => Ok(s.clone()),
            _ => Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_PRINTF_ARG_FMT,
                    format!("{func}() format must be a string constant"),
                    e.span,
                )
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
            Err(e) => {
                let at = format_error_span(fmt, fmt_expr.span, &e);
                return Err(self.report(format_diagnostic(
                    format!("{func}() format: {e}"),
                    at,
                    &e,
                )));
            }
        };
        if printf::has_aggregation_conversion(&pieces) {
            return Err(self.report(Diagnostic::tagged(
                ErrTag::D_PRINTF_AGG_CONV,
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
            .with_code(if args.len() < slots.len() {
                // A missing `*` width or precision is DTrace's D_PRINTF_DYN_PROTO.
                match slots[args.len()] {
                    printf::ArgSlot::Width { .. } | printf::ArgSlot::Precision { .. } => {
                        ErrTag::D_PRINTF_DYN_PROTO
                    }
                    _ => ErrTag::D_PRINTF_ARG_PROTO,
                }
            } else {
                ErrTag::D_PRINTF_ARG_EXTRA
            })
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
            if let ArgSlot::Width { conv } | ArgSlot::Precision { conv } = *slot
                && !arg.ty.is_integral()
            {
                // DTrace's dt_printf_validate: a `*` argument must be an integer.
                let which = if matches!(slot, ArgSlot::Width { .. }) {
                    "*"
                } else {
                    ".*"
                };
                return Err(self.err_at(
                    ErrTag::D_PRINTF_DYN_TYPE,
                    format!(
                        "{func}( ) argument #{} is incompatible with conversion #{} prototype: \"{which}\" needs an integer, not `{}`",
                        i + 2,
                        conv + 1,
                        arg.ty
                    ),
                    arg.span,
                ));
            }
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
        let mut d = Diagnostic::tagged(ErrTag::D_PRINTF_ARG_TYPE,
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
            Err(e) => {
                let at = format_error_span(fmt, fmt_expr.span, &e);
                return Err(self.report(format_diagnostic(
                    format!("printa() format: {e}"),
                    at,
                    &e,
                )));
            }
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
                Diagnostic::tagged(
                    ErrTag::D_PRINTA_AGGPROTO,
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
}

/// The diagnostic for a format that does not parse: `D_SYNTAX`, as DTrace's dt_printf_create
/// reports a malformed conversion; a width or precision over the limit (Sightline's own bound)
/// is `D_PRINTF_ARG_FMT` with a hint.
fn format_diagnostic(message: String, at: Span, e: &printf::FormatError) -> Diagnostic {
    match e {
        printf::FormatError::CountTooLarge { limit, .. } => Diagnostic::tagged(
            ErrTag::D_PRINTF_ARG_FMT,
            message,
            at,
        )
        .with_hint(format!(
            "widths and precisions are at most {limit} characters (a `*` value above it is clamped)"
        )),
        _ => Diagnostic::tagged(ErrTag::D_SYNTAX, message, at),
    }
}

/// Where a format error points: at the offending part of the string literal when decoded offsets
/// can be proven to equal source offsets there, else at the whole literal.
///
/// The analysis sees the literal's value, not its source text. Every character that needs an escape
/// (control characters, `\`, `"`) takes at least one more source byte than its value, and so does
/// any other escaped character; so when the source is longer than the value by exactly the number of
/// such characters after the error, nothing before the error was escaped.
fn format_error_span(fmt: &str, literal: Span, e: &printf::FormatError) -> Span {
    let Some(r) = e.span() else {
        return literal;
    };
    let needs_escape = |c: char| c.is_control() || c == '\\' || c == '"';
    let extra =
        u64::from(literal.end.saturating_sub(literal.start)).checked_sub(fmt.len() as u64 + 2);
    let after = fmt
        .get(r.end..)
        .map(|t| t.chars().filter(|&c| needs_escape(c)).count() as u64);
    let before_clean = fmt
        .get(..r.end)
        .is_some_and(|t| !t.chars().any(needs_escape));
    match (extra, after, u32::try_from(r.start), u32::try_from(r.end)) {
        (Some(x), Some(a), Ok(start), Ok(end)) if x == a && before_clean && end > start => Span {
            start: literal.start + 1 + start,
            end: literal.start + 1 + end,
        },
        _ => literal,
    }
}

/// True when `e` is a call of an action (`trace()`, `printf()`, `exit()`, ...): a void value.
pub(super) fn is_action_call(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Call { func, .. } if super::names::ACTIONS.contains(&func.as_str()))
}

impl Analyzer<'_> {
    /// What `print()` shows for a value of D type `ty`: a BTF type (kernel or the program's own)
    /// described from the type table, anything else from the D type alone.
    fn print_type_of(&self, ty: &Type) -> probe_format::print::PrintType {
        use probe_format::print::{PrintKind, PrintType};
        if let (&Type::Struct { id, .. }, Some(btf)) = (ty, self.btf.as_ref()) {
            return btf.print_type(id);
        }
        let name = ty.to_string();
        match ty {
            Type::Int { bytes, signed } => PrintType {
                kind: PrintKind::Int {
                    signed: *signed,
                    char_: name == "char",
                },
                size: u32::from(*bytes),
                name,
            },
            Type::Ptr(_) | Type::Symbol(_) => PrintType {
                name,
                size: 8,
                kind: PrintKind::Pointer,
            },
            Type::Array(elem, len) => {
                let elem = self.print_type_of(elem);
                PrintType {
                    name,
                    size: elem.size.saturating_mul(*len),
                    kind: PrintKind::Array {
                        elem: Box::new(elem),
                        len: *len,
                    },
                }
            }
            Type::String => {
                let strsize = self.options.strsize;
                PrintType {
                    name: format!("char [{strsize}]"),
                    size: strsize,
                    kind: PrintKind::Array {
                        elem: Box::new(PrintType {
                            name: "char".into(),
                            size: 1,
                            kind: PrintKind::Int {
                                signed: true,
                                char_: true,
                            },
                        }),
                        len: strsize,
                    },
                }
            }
            Type::Struct { size, .. } => PrintType {
                name,
                size: *size,
                kind: PrintKind::Opaque,
            },
            Type::Stack { .. } | Type::Void => PrintType {
                name,
                size: 0,
                kind: PrintKind::Opaque,
            },
        }
    }
}
