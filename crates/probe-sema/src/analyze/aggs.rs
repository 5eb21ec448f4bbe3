//! Aggregations: the aggregating functions and their constant parameters, keys and the checks
//! between uses of one aggregation (DTrace guide, "Aggregations").

use super::*;
use probe_syntax::ErrTag;

impl Analyzer<'_> {
    fn agg_func(&mut self, a: &ast::AggStmt, args: &[TExpr]) -> R<(AggFunc, usize)> {
        // Returns the function with constants and the number of leading value arguments (0 or 1).
        let n = args.len();
        let arity = |this: &mut Self, want: &str| {
            this.arity_error(&a.func, want, n, a.func_span, agg_usage(&a.func))
        };
        let konst = |this: &mut Self, i: usize, what: &str| -> R<i64> {
            let e = &args[i];
            match const_eval(e) {
                Some(v) if v >= i64::MIN as i128 && v <= i64::MAX as i128 => Ok(v as i64),
                _ => Err(this.report(
                    Diagnostic::tagged(
                        ErrTag::D_QUANT_PROTO,
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
                // Oracle's dt_cg_agg_lquantize: base and limit are 32-bit values
                // (D_LQUANT_BASEVAL, D_LQUANT_LIMVAL), the limit above the base, then the
                // step a positive constant (D_LQUANT_STEPTYPE).
                for (i, tag, what) in [
                    (1, ErrTag::D_LQUANT_BASETYPE, "base"),
                    (2, ErrTag::D_LQUANT_LIMTYPE, "limit"),
                ] {
                    if const_eval(&args[i]).is_none() {
                        return Err(self.err_at(
                            tag,
                            format!(
                                "lquantize( ) {what} (argument #{}) must be an integer constant",
                                i + 1
                            ),
                            args[i].span,
                        ));
                    }
                }
                let base = konst(self, 1, "base")?;
                let limit = konst(self, 2, "limit")?;
                let int32 = |v: i64| (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&v);
                if !int32(base) {
                    return Err(self.err_at(
                        ErrTag::D_LQUANT_BASEVAL,
                        format!("lquantize( ) base ({base}) must be a 32-bit quantity"),
                        args[1].span,
                    ));
                }
                if !int32(limit) {
                    return Err(self.err_at(
                        ErrTag::D_LQUANT_LIMVAL,
                        format!("lquantize( ) limit ({limit}) must be a 32-bit quantity"),
                        args[2].span,
                    ));
                }
                // A limit not above the base is reported first (D_LQUANT_MISMATCH, below).
                if n >= 4 && limit > base && const_eval(&args[3]).is_none_or(|k| k <= 0) {
                    return Err(self.err_at(
                        ErrTag::D_LQUANT_STEPTYPE,
                        "lquantize( ) argument #4 must be a non-zero positive integer constant",
                        args[3].span,
                    ));
                }
                let step = if n >= 4 { konst(self, 3, "step")? } else { 1 };
                if limit > base && step > i64::from(u16::MAX) {
                    return Err(self.err_at(
                        ErrTag::D_LQUANT_STEPVAL,
                        "lquantize( ) argument #4 must be a 16-bit quantity",
                        args[3].span,
                    ));
                }
                AggFunc::Lquantize { base, limit, step }
            }
            "llquantize" => {
                if !(5..=6).contains(&n) {
                    return Err(arity(self, "5 or 6 arguments"));
                }
                // Oracle's dt_cg_agg_llquantize: a tag per argument and kind of error.
                use ErrTag::*;
                let mut v = [0u16; 4];
                let params = [
                    ("factor", D_LLQUANT_FACTORTYPE, D_LLQUANT_FACTORVAL, 2),
                    ("low", D_LLQUANT_LMAGTYPE, D_LLQUANT_LMAGVAL, 0),
                    ("high", D_LLQUANT_HMAGTYPE, D_LLQUANT_HMAGVAL, 0),
                    ("nsteps", D_LLQUANT_STEPTYPE, D_LLQUANT_STEPVAL, 1),
                ];
                for (i, (what, type_tag, val_tag, min)) in params.into_iter().enumerate() {
                    let e = &args[i + 1];
                    let Some(k) = const_eval(e) else {
                        return Err(self.report(
                            Diagnostic::tagged(
                                type_tag,
                                format!("llquantize() {what} must be an integer constant"),
                                e.span,
                            )
                            .with_hint(format!("usage: {}", agg_usage(&a.func))),
                        ));
                    };
                    if i == 3 && k <= 0 {
                        return Err(self.err_at(
                            type_tag,
                            "llquantize() nsteps must be a positive integer constant",
                            e.span,
                        ));
                    }
                    v[i] = match u16::try_from(k) {
                        Ok(x) if x >= min => x,
                        _ => {
                            return Err(self.err_at(
                                val_tag,
                                format!("llquantize() {what} must be between {min} and 65535"),
                                e.span,
                            ));
                        }
                    };
                }
                AggFunc::Llquantize {
                    factor: v[0],
                    low: v[1],
                    high: v[2],
                    nsteps: v[3],
                }
            }
            other
                if !(SUBROUTINES.contains(&other)
                    || ACTIONS.contains(&other)
                    || self.inlines.contains_key(other)) =>
            {
                // Oracle's dt_parser: a function D does not know at all is D_FUNC_UNDEF.
                let mut d = Diagnostic::tagged(
                    ErrTag::D_FUNC_UNDEF,
                    format!("`{other}` is not a function"),
                    a.func_span,
                );
                let sugg = nearest(other, AGG_FUNCS.iter().copied(), 2);
                d = d.with_hint(did_you_mean(&sugg).unwrap_or_else(|| {
                    "aggregating functions are count, sum, avg, min, max, stddev, quantize, lquantize, llquantize".into()
                }));
                return Err(self.report(d));
            }
            other => {
                let mut d = Diagnostic::tagged(
                    ErrTag::D_AGG_FUNC,
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
            let tag = match e {
                AggError::BadLlquantize { arg: 1, .. } => ErrTag::D_LLQUANT_FACTORVAL,
                AggError::BadLlquantize { arg: 2, .. } => ErrTag::D_LLQUANT_LMAGVAL,
                AggError::BadLlquantize { arg: 3, .. } => ErrTag::D_LLQUANT_HMAGVAL,
                AggError::BadLlquantize { .. } => ErrTag::D_LLQUANT_STEPVAL,
                _ => ErrTag::D_LQUANT_MISMATCH,
            };
            // The diagnostic's span shows the parameters: only the reason is said.
            let reason = match e {
                AggError::BadLquantize { reason, .. } | AggError::BadLlquantize { reason, .. } => {
                    reason.to_string()
                }
                other => other.to_string(),
            };
            return Err(self.report(
                Diagnostic::tagged(
                    tag,
                    format!("invalid {}() parameters: {reason}", a.func),
                    a.func_span.to(args[n - 1].span),
                )
                .with_hint(format!("usage: {}", agg_usage(&a.func))),
            ));
        }
        Ok((func, 1))
    }

    pub(super) fn aggregate(
        &mut self,
        a: &ast::AggStmt,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TStmt> {
        let mut keys = Vec::new();
        let mut failed = false;
        for k in &a.keys {
            if matches!(k.kind, ExprKind::AggRef(_)) || super::actions::is_action_call(k) {
                // Oracle's dt_parser: an aggregation is not a key (D_KEY_TYPE).
                self.err_at(
                    ErrTag::D_KEY_TYPE,
                    "an aggregation or an action cannot be an aggregation key",
                    k.span,
                );
                failed = true;
                continue;
            }
            match self.expr(k, cx) {
                Ok(t) => {
                    if matches!(t.ty, Type::Void | Type::Array(..) | Type::Struct { .. }) {
                        self.err_at(
                            ErrTag::D_KEY_TYPE,
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
                    Diagnostic::tagged(
                        ErrTag::D_AGG_SCALAR,
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
                return Err(self.err_at(
                    ErrTag::D_PROTO_ARG,
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
                    // Oracle's dt_cg_agg_llquantize names the first parameter that differs.
                    let tag = match (existing.func, func) {
                        (
                            AggFunc::Llquantize {
                                factor: f0,
                                low: l0,
                                high: h0,
                                ..
                            },
                            AggFunc::Llquantize {
                                factor: f1,
                                low: l1,
                                high: h1,
                                ..
                            },
                        ) => {
                            if f0 != f1 {
                                ErrTag::D_LLQUANT_MATCHFACTOR
                            } else if l0 != l1 {
                                ErrTag::D_LLQUANT_MATCHLMAG
                            } else if h0 != h1 {
                                ErrTag::D_LLQUANT_MATCHHMAG
                            } else {
                                ErrTag::D_LLQUANT_MATCHSTEPS
                            }
                        }
                        _ => ErrTag::D_AGG_REDEF,
                    };
                    return Err(self.report(
                        Diagnostic::tagged(tag,
                            format!("{disp} is used with {} here but with {} before", describe_agg(&func), describe_agg(&existing.func)),
                            a.func_span,
                        )
                        .with_label(existing.span, "first used here")
                        .with_hint("an aggregation has one aggregating function with the same parameters everywhere"),
                    ));
                }
                if existing.keys.len() != keys.len() {
                    return Err(self.report(
                        Diagnostic::tagged(
                            ErrTag::D_PROTO_LEN,
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
    pub(super) fn convert_key(
        &mut self,
        k: TExpr,
        want: &Type,
        what: &str,
        first: Span,
    ) -> R<TExpr> {
        if &k.ty == want {
            return Ok(k);
        }
        if k.ty.is_integral() && want.is_integral() {
            return Ok(convert(k, want));
        }
        Err(self.report(
            Diagnostic::tagged(
                ErrTag::D_PROTO_ARG,
                format!("{what} key has type `{}` here but `{want}` before", k.ty),
                k.span,
            )
            .with_label(first, "first used here"),
        ))
    }

    /// [`Self::agg_ref`] where an argument that is no aggregation has tag `tag` (DTrace's
    /// D_NORMALIZE_AGGARG for normalize()/denormalize(), D_TRUNC_AGGARG for trunc()).
    pub(super) fn agg_ref_tagged(&mut self, e: &Expr, tag: ErrTag) -> R<AggId> {
        if matches!(e.kind, ExprKind::AggRef(_)) {
            return self.agg_ref(e);
        }
        Err(self.err_at(tag, "expected an aggregation such as `@a`", e.span))
    }

    pub(super) fn agg_ref(&mut self, e: &Expr) -> R<AggId> {
        match &e.kind {
            ExprKind::AggRef(name) => match self.agg_names.get(name) {
                Some(id) => Ok(*id),
                None => {
                    let names: Vec<String> =
                        self.agg_names.keys().map(|n| format!("@{n}")).collect();
                    let sugg = nearest(&format!("@{name}"), names.iter().map(|s| s.as_str()), 3);
                    let mut d = Diagnostic::tagged(
                        ErrTag::D_PRINTA_AGGBAD,
                        format!("unknown aggregation `@{name}`"),
                        e.span,
                    );
                    if let Some(h) = did_you_mean(&sugg) {
                        d = d.with_hint(h);
                    }
                    Err(self.report(d))
                }
            },
            _ => Err(self.report(Diagnostic::tagged(
                ErrTag::D_PRINTA_AGGARG,
                "expected an aggregation such as `@a`",
                e.span,
            ))),
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
