//! Expressions: literals, identifiers, macro variables, unary and binary operators with the usual
//! arithmetic conversions, constant folding (DTrace guide, "Types, Operators, and Expressions").

use super::*;
use probe_syntax::ErrTag;

/// The type of an integer constant: the first of int, unsigned int, long, unsigned long that holds
/// it, skipping the signed ones for a `u` suffix, the 4-byte ones for an `l` suffix and the
/// unsigned ones for a decimal constant without `u` (C99; Oracle's dt_node_int ladder).
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
        // C99 (and Oracle's dt_node_int): a decimal constant without `u` takes only the signed
        // types, `2147483648` is a `long`; hex and octal ones may be unsigned.
        if lit.decimal && !lit.unsigned_suffix && !signed {
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

pub(super) fn mk(kind: TExprKind, ty: Type, span: Span) -> TExpr {
    TExpr { kind, ty, span }
}

/// Converts `e` to `ty`, inserting a cast when the types differ. An integer constant converted to
/// another integer type is folded into a constant of that type (C's conversion: truncate, then
/// extend by the target's signedness), so the code generator sees `0:uint64_t`, not a cast.
pub(super) fn convert(e: TExpr, ty: &Type) -> TExpr {
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

/// `(uint64_t)i * size`: the byte offset of element `i` of `size`-byte elements.
pub(super) fn scaled_index(i: TExpr, size: u64) -> TExpr {
    let span = i.span;
    mk(
        TExprKind::Binary(
            BinaryOp::Mul,
            Box::new(convert(i, &Type::U64)),
            Box::new(mk(TExprKind::Int(size), Type::U64, span)),
        ),
        Type::U64,
        span,
    )
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

impl Analyzer<'_> {
    pub(super) fn expr(&mut self, e: &Expr, cx: &mut ClauseCx) -> R<TExpr> {
        let span = e.span;
        match &e.kind {
            ExprKind::Int(lit) => Ok(mk(TExprKind::Int(lit.value), int_lit_type(lit), span)),
            ExprKind::Str(s) => Ok(mk(TExprKind::Str(s.clone()), Type::String, span)),
            ExprKind::Ident(name) => self.ident(name, span, cx),
            ExprKind::Macro(m) => self.macro_var(m, span, cx),
            ExprKind::SelfVar(name) => self.read_var(VarScope::Thread, name, span, cx),
            ExprKind::ThisVar(name) => self.read_var(VarScope::Clause, name, span, cx),
            ExprKind::AggRef(name) => Err(self.report(
                Diagnostic::tagged(ErrTag::D_AGG_SCALAR, format!("aggregation `@{name}` cannot be used in an expression"), span)
                    .with_hint("aggregations are updated with `@a[keys] = func(x)` and printed with printa(@a)"),
            )),
            ExprKind::Unary(op, x) => self.unary(*op, x, span, cx),
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, span, cx),
            ExprKind::Assign(op, lhs, rhs) => self.assign(*op, lhs, rhs, span, cx),
            ExprKind::IncDec { increment, prefix, expr } if self.struct_var_root(expr) || self.is_array_elem(expr) => self.incdec_member(*increment, *prefix, expr, span, cx),
            ExprKind::IncDec { increment, prefix, expr } => {
                let target = self.lvalue(expr, cx, Some(Type::I64))?;
                let ty = self.vars[target.var.0 as usize].ty.clone();
                if !ty.is_integral() {
                    let op = if *increment { "++" } else { "--" };
                    return Err(self.err_at(ErrTag::D_OP_SCALAR, format!("`{op}` needs an integer variable, not `{ty}`"), expr.span));
                }
                Ok(mk(TExprKind::IncDec { target, increment: *increment, prefix: *prefix }, ty, span))
            }
            ExprKind::Ternary(c, a, b) if actions::is_action_call(a) || actions::is_action_call(b) => {
                // Oracle's dt_parser: an action's own arguments are checked first (its
                // D_PROTO_LEN), then a void operand of `?:` is D_OP_ACT.
                for x in [a, b] {
                    if let ExprKind::Call { func, func_span, args } = &x.kind
                        && actions::is_action_call(x)
                    {
                        self.action(func, *func_span, args, x.span, cx)?;
                    }
                }
                Err(self.err_at(ErrTag::D_OP_ACT, "an action has no value and cannot be an operand of `?:`", span))
            }
            ExprKind::Ternary(c, a, b) => {
                let c = self.expr(c, cx)?;
                if !c.ty.is_integral() {
                    return Err(self.err_at(ErrTag::D_OP_SCALAR, format!("the condition of `?:` must be an integer, not `{}`", c.ty), c.span));
                }
                let a = self.expr(a, cx)?;
                let b = self.expr(b, cx)?;
                let ty = if matches!(a.ty, Type::Ptr(_)) && a.ty == b.ty {
                    // Two pointers of one type keep it (`p != NULL ? p : (T *)-1`).
                    a.ty.clone()
                } else if a.ty.is_integral() && b.ty.is_integral() {
                    usual_arithmetic(&a.ty, &b.ty).unwrap_or(Type::I64)
                } else if a.ty == b.ty {
                    a.ty.clone()
                } else {
                    return Err(self.report(
                        Diagnostic::tagged(ErrTag::D_OP_INCOMPAT, format!("the branches of `?:` have types `{}` and `{}`", a.ty, b.ty), span)
                            .with_label(a.span, format!("`{}`", a.ty))
                            .with_label(b.span, format!("`{}`", b.ty)),
                    ));
                };
                let (a, b) = (convert(a, &ty), convert(b, &ty));
                Ok(mk(TExprKind::Ternary(Box::new(c), Box::new(a), Box::new(b)), ty, span))
            }
            ExprKind::Cast(tn, x) if matches!(&x.kind, ExprKind::Xlate(t, _) if t.pointer > 0) => Err(self.err_at(
                ErrTag::D_CAST_INVAL,
                format!("invalid cast expression: \"pointer to translated data\" to \"{}\"", tn.text),
                span,
            )),
            ExprKind::Xlate(tn, x) => self.xlate_value(tn, x, span, cx),
            ExprKind::Cast(tn, _) if matches!(tn.base, BaseType::Struct(_)) && tn.pointer == 0 => Err(self.err_at(
                ErrTag::D_CAST_INVAL,
                format!("invalid cast expression: a value cannot be cast to `{}`", tn.text),
                span,
            )),
            ExprKind::Cast(tn, x) => {
                let target = self.type_of_name(tn)?;
                let x = self.expr(x, cx)?;
                match &target {
                    // `(string)x` is `stringof(x)` (guide, "Strings" → "String Conversion").
                    Type::String => self.stringof(x, span),
                    Type::Void => Err(self.err_at(ErrTag::D_CAST_INVAL, "cannot cast to void", tn.span)),
                    _ if !x.ty.is_integral() => {
                        Err(self.err_at(ErrTag::D_CAST_INVAL, format!("cannot cast `{}` to `{}`", x.ty, tn.text), span))
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
                    return Err(self.err_at(ErrTag::D_SIZEOF_TYPE, "sizeof(void) is not defined", span));
                }
                Ok(mk(TExprKind::Int(size as u64), Type::U64, span))
            }
            ExprKind::SizeofExpr(x) => {
                // A string constant's size is its length and the NUL, as in C and DTrace
                // (`sizeof ("hi")` is 3); a string variable's is `strsize`.
                if let ExprKind::Str(lit) = &x.kind {
                    return Ok(mk(TExprKind::Int(lit.len() as u64 + 1), Type::U64, span));
                }
                if self.bitfield_place(x, cx)?.is_some() {
                    return Err(self.err_at(ErrTag::D_SIZEOF_BITFIELD, "cannot apply sizeof to a bit-field", span));
                }
                let t = self.expr(x, cx)?;
                Ok(mk(TExprKind::Int(t.ty.size(self.options.strsize) as u64), Type::U64, span))
            }
            ExprKind::Stringof(x) => {
                let t = self.expr(x, cx)?;
                self.stringof(t, span)
            }
            ExprKind::Offsetof(tn, member) => {
                let (BaseType::Struct(name), 0) = (&tn.base, tn.pointer) else {
                    return Err(self.err_at(ErrTag::D_OFFSETOF_TYPE, format!("offsetof() needs a structure type, not `{}`", tn.text), tn.span));
                };
                let Some(btf) = self.btf.clone() else {
                    return Err(self.type_of_name(tn).err().unwrap_or(Reported));
                };
                let Some(id) = btf.struct_id(name) else {
                    return Err(self.err_at(ErrTag::D_TYPE_ERR, format!("the kernel has no type `{}`", tn.text), tn.span));
                };
                if btf.member(id, member).is_some_and(|(m, _)| m.bitfield_size != 0) {
                    return Err(self.err_at(ErrTag::D_OFFSETOF_BITFIELD, format!("cannot take offset of a bit-field: {member}"), span));
                }
                let (addr, _) = self.member_place(&btf, mk(TExprKind::Int(0), Type::U64, tn.span), id, name, member, span)?;
                let off = const_eval(&addr).unwrap_or(0) as u64;
                Ok(mk(TExprKind::Int(off), Type::U64, span))
            }
            ExprKind::Call { func, func_span, .. } if func == "bcopy" => Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_CG_EXPR,
                    "`bcopy()` returns void and has no value",
                    *func_span,
                )
                .with_hint("call bcopy(src, dest, size) as a statement of its own"),
            )),
            ExprKind::Call { func, func_span, args } => self.call(func, *func_span, args, span, cx),
            ExprKind::Index(base, idx) => self.index(base, idx, span, cx),
            ExprKind::Member { base, field, field_span, arrow } => self.member(base, field, *field_span, *arrow, span, cx),
        }
    }

    /// `stringof(x)` / `(string)x` (guide, "Strings" → "String Conversion"): a string stays; any
    /// scalar (pointer or integer) is the kernel address of the characters to read.
    pub(super) fn stringof(&mut self, t: TExpr, span: Span) -> R<TExpr> {
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
                Diagnostic::tagged(
                    ErrTag::D_STRINGOF_TYPE,
                    format!("stringof() needs a string, a pointer or an address, not `{other}`"),
                    span,
                )
                .with_hint("for a user-space address use copyinstr(addr)"),
            )),
        }
    }

    fn ident(&mut self, name: &str, span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        if name.contains('`') {
            // A kernel variable's value: the bytes at its address, with its BTF type.
            let (addr, ty) = self.kernel_symbol(name, span)?;
            if matches!(ty, Type::Void | Type::Struct { .. } | Type::Array(..)) {
                return Err(self.err_at(
                    ErrTag::D_TYPE_ERR,
                    format!("kernel symbol `{name}` of type `{ty}` cannot be used as a value"),
                    span,
                ));
            }
            let p = mk(TExprKind::Int(addr), Type::Ptr(Box::new(ty.clone())), span);
            return Ok(mk(TExprKind::Deref(Box::new(p)), ty, span));
        }
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
            // Oracle's dt_parser: `args` without a subscript is D_IDENT_BADREF.
            return Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_IDENT_BADREF,
                    "`args` must be used as `args[N]` or `args->field`",
                    span,
                )
                .with_hint("args[0] is the first typed argument; args->name a tracepoint field"),
            ));
        }
        if let Some(id) = self.lookup(VarScope::Global, name) {
            let v = &self.vars[id.0 as usize];
            if v.is_assoc() {
                let n = v.keys.len();
                return Err(self.err_at(
                    ErrTag::D_IDENT_BADREF,
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
        if name == "zonename" && self.lookup(VarScope::Global, name).is_none() {
            // Linux has no zones: every process is in DTrace's "global" zone.
            return Ok(mk(TExprKind::Str("global".into()), Type::String, span));
        }
        if name == "NULL" {
            // DTrace's NULL: the constant 0 as a `void *` (the guide, "Pointers and Arrays").
            return Ok(mk(TExprKind::Int(0), Type::Ptr(Box::new(Type::Void)), span));
        }
        if let Some(v) = crate::consts::named_constant(name) {
            return Ok(mk(TExprKind::Int(v as u64), Type::INT, span));
        }
        if ACTIONS.contains(&name) || SUBROUTINES.contains(&name) || AGG_FUNCS.contains(&name) {
            return Err(self.report(Diagnostic::tagged(
                ErrTag::D_IDENT_BADREF,
                format!("`{name}` is a function; call it as {name}(...)"),
                span,
            )));
        }
        let mut cands: Vec<&str> = BUILTINS.to_vec();
        let globals: Vec<String> = self.globals.keys().cloned().collect();
        cands.extend(globals.iter().map(|s| s.as_str()));
        let sugg = nearest(name, cands, 3);
        let mut d = Diagnostic::tagged(
            ErrTag::D_IDENT_UNDEF,
            format!("unknown variable `{name}`"),
            span,
        );
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
                        Diagnostic::tagged(ErrTag::D_MACRO_UNDEF, format!("macro argument `{shown}` is not defined"), span)
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
                        Diagnostic::tagged(ErrTag::D_IDENT_UNDEF,
                            format!("macro argument `{shown}` is \"{value}\": not an integer, and no variable is named `{value}`"),
                            span,
                        )
                        .with_hint(format!("use `$${n}` to use the argument as a string")),
                    ));
                }
                Err(self.report(
                    Diagnostic::tagged(ErrTag::D_SYNTAX, format!("macro argument `{shown}` (\"{value}\") is neither an integer nor an identifier"), span)
                        .with_hint(format!("use `$${n}` to use the argument as a string")),
                ))
            }
            MacroVar::Named(name) => {
                let v = match name.as_str() {
                    "target" => self.opts.target_pid,
                    "pid" => self.opts.pid,
                    _ => {
                        return Err(self.report(
                            Diagnostic::tagged(
                                ErrTag::D_MACRO_UNDEF,
                                format!("unknown macro variable `${name}`"),
                                span,
                            )
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
                            Diagnostic::tagged(
                                ErrTag::D_MACRO_UNDEF,
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
                    Diagnostic::tagged(
                        ErrTag::D_IDENT_UNDEF,
                        format!("{kind} variable `{prefix}->{name}` is never assigned"),
                        span,
                    )
                    .with_hint(hint),
                ))
            }
        }
    }

    fn unary(&mut self, op: UnaryOp, x: &Expr, span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        if matches!(op, UnaryOp::Neg | UnaryOp::Plus | UnaryOp::BitNot)
            && actions::is_action_call(x)
        {
            // Oracle's dt_parser: an arithmetic operator's void operand is D_OP_ARITH.
            return Err(self.err_at(
                ErrTag::D_OP_ARITH,
                format!(
                    "operator `{}` needs an arithmetic operand, not an action",
                    op.as_str()
                ),
                span,
            ));
        }
        if op == UnaryOp::AddrOf
            && let ExprKind::Ident(name) = &x.kind
            && name.contains('`')
        {
            // `&`sym`: the kernel symbol's address, a pointer to its type.
            let (addr, ty) = self.kernel_symbol(name, x.span)?;
            return Ok(mk(TExprKind::Int(addr), Type::Ptr(Box::new(ty)), span));
        }
        let variable = |e: &Expr| {
            matches!(
                e.kind,
                ExprKind::Ident(_)
                    | ExprKind::SelfVar(_)
                    | ExprKind::ThisVar(_)
                    | ExprKind::AggRef(_)
            )
        };
        if op == UnaryOp::AddrOf && self.bitfield_place(x, cx)?.is_some() {
            return Err(self.err_at(
                ErrTag::D_ADDROF_BITFIELD,
                "cannot take address of bit-field",
                span,
            ));
        }
        // `&p[i]` with a pointer variable `p` is `p + i`, not the address of a variable.
        let pointer_elem = matches!(&x.kind, ExprKind::Index(b, _) if self.scalar_pointer_var(b));
        let of_variable = variable(x)
            || (!pointer_elem
                && matches!(&x.kind, ExprKind::Index(b, _) | ExprKind::Member { base: b, arrow: false, .. } if variable(b)));
        if op == UnaryOp::AddrOf && of_variable {
            if !matches!(x.kind, ExprKind::AggRef(_)) {
                // An undefined name is reported as such first.
                self.expr(x, cx)?;
            }
            // D variables live in maps the program cannot point into (DTrace's D_ADDROF_VAR).
            return Err(self.err_at(
                ErrTag::D_ADDROF_VAR,
                "cannot take address of dynamic variable",
                span,
            ));
        }
        let t = self.expr(x, cx)?;
        self.unary_typed(op, t, span)
    }

    /// [`Self::unary`] of an operand already analyzed.
    pub(super) fn unary_typed(&mut self, op: UnaryOp, t: TExpr, span: Span) -> R<TExpr> {
        match op {
            UnaryOp::Neg | UnaryOp::Plus | UnaryOp::BitNot => {
                let Some(ty) = t.ty.promoted().filter(|_| t.ty.is_int()) else {
                    return Err(self.err_at(
                        ErrTag::D_OP_INT,
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
                    let mut d = Diagnostic::tagged(
                        ErrTag::D_OP_SCALAR,
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
                    let tag = if *inner == Type::Void {
                        ErrTag::D_DEREF_VOID
                    } else {
                        ErrTag::D_OP_SOU
                    };
                    Err(self.err_at(tag, format!("cannot dereference a `{inner} *`"), span))
                }
                other => Err(self.report(
                    Diagnostic::tagged(
                        ErrTag::D_DEREF_NONPTR,
                        format!("operator `*` needs a pointer, not `{other}`"),
                        span,
                    )
                    .with_hint("cast an address to a pointer type first: *(int *)addr"),
                )),
            },
            // `&*p`, `&p[i]`: the address the load would read, as a pointer to its type.
            UnaryOp::AddrOf if matches!(t.kind, TExprKind::Deref(_)) => {
                let ty = Type::Ptr(Box::new(t.ty.clone()));
                let TExprKind::Deref(addr) = t.kind else {
                    unreachable!()
                };
                Ok(convert(*addr, &ty))
            }
            UnaryOp::AddrOf => Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_ADDROF_LVAL,
                    "operator `&` (address of) is not supported",
                    span,
                )
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
        if let Some(x) = [a, b]
            .into_iter()
            .find(|x| matches!(x.kind, ExprKind::AggRef(_)))
        {
            // Oracle's dt_parser: an aggregation as an operand is D_OP_INCOMPAT.
            return Err(self.err_at(
                ErrTag::D_OP_INCOMPAT,
                format!(
                    "operator `{}` cannot take an aggregation as an operand",
                    op.as_str()
                ),
                x.span,
            ));
        }
        let ta = self.expr(a, cx);
        let tb = self.expr(b, cx);
        let (ta, tb) = (ta?, tb?);
        self.binary_typed(op, ta, tb, span)
    }

    /// [`Self::binary`] once both operands are analyzed. Out of line: `binary` recurses once per
    /// nesting level, and this part's many temporaries made its frame 12 KB in debug builds (the
    /// deepest accepted nesting overflowed a 2 MiB thread stack).
    #[inline(never)]
    pub(super) fn binary_typed(
        &mut self,
        op: BinaryOp,
        ta: TExpr,
        tb: TExpr,
        span: Span,
    ) -> R<TExpr> {
        use BinaryOp::*;
        if op.is_logical() {
            for t in [&ta, &tb] {
                if !t.ty.is_integral() {
                    // Oracle's dt_parser: the operands of `&&`, `||`, `^^` must be scalars.
                    return Err(self.err_at(
                        ErrTag::D_OP_SCALAR,
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
            // `s == NULL`, `s != NULL`: a string value is NULL when it is empty. Strings are
            // values here, not pointers, and the subroutines' NULL results (strtok(), strstr())
            // are "" (see docs/d-reference.md, "Strings").
            if matches!(op, Eq | Ne)
                && let Some(left) = string_null_side(&ta, &tb)
            {
                let (s, null) = if left { (ta, tb.span) } else { (tb, ta.span) };
                let empty = mk(TExprKind::Str(String::new()), Type::String, null);
                return Ok(mk(
                    TExprKind::StrCmp(op, Box::new(s), Box::new(empty)),
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
            let mut d = Diagnostic::tagged(
                ErrTag::D_OP_INCOMPAT,
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
            let mut d = Diagnostic::tagged(
                ErrTag::D_OP_INT,
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
            return Err(self.err_at(ErrTag::D_DIV_ZERO, "division by zero", tb.span));
        }
        Ok(mk(
            TExprKind::Binary(op, Box::new(ta), Box::new(tb)),
            ty,
            span,
        ))
    }
}

/// For `s == NULL` / `s != NULL` with `s` a string: `Some(true)` when the string is the left
/// operand and the right one the integer constant 0, `Some(false)` the other way round, `None`
/// for any other comparison.
fn string_null_side(ta: &TExpr, tb: &TExpr) -> Option<bool> {
    let is_null = |t: &TExpr| matches!(t.kind, TExprKind::Int(0)) && t.ty.is_integral();
    if ta.ty == Type::String && is_null(tb) {
        Some(true)
    } else if tb.ty == Type::String && is_null(ta) {
        Some(false)
    } else {
        None
    }
}

impl Analyzer<'_> {
    /// The address (from `/proc/kallsyms`) and D type (from the BTF `VAR` of that name; `int`
    /// when BTF has none, as for a function) of the kernel symbol written `` `sym `` or
    /// `` module`sym `` (`vmlinux` is the kernel itself). Errors: `D_IDENT_UNDEF` for a symbol
    /// the kernel does not have; `D_TYPE_ERR` when the kernel hides addresses (not root).
    fn kernel_symbol(&mut self, written: &str, span: Span) -> R<(u64, Type)> {
        let (module, name) = match written.split_once('`') {
            Some(("", n)) | Some(("vmlinux", n)) => (None, n),
            Some((m, n)) => (Some(m), n),
            None => (None, written),
        };
        let kallsyms = self.kallsyms.get_or_insert_with(|| {
            std::fs::read_to_string("/proc/kallsyms")
                .map_err(|e| format!("reading /proc/kallsyms: {e}"))
        });
        let found = match kallsyms {
            Ok(text) => kallsyms_address(text, module, name),
            Err(why) => Err(why.clone()),
        };
        let addr = match found {
            Ok(Some(a)) => a,
            Ok(None) => {
                return Err(self.report(
                    Diagnostic::tagged(
                        ErrTag::D_IDENT_UNDEF,
                        format!("failed to resolve {written}: Unknown symbol name"),
                        span,
                    )
                    .with_hint(
                        "kernel symbols come from /proc/kallsyms, which lists variables only when the kernel has CONFIG_KALLSYMS_ALL",
                    ),
                ));
            }
            Err(why) => {
                return Err(self.err_at(
                    ErrTag::D_TYPE_ERR,
                    format!("cannot resolve kernel symbol {written}: {why}"),
                    span,
                ));
            }
        };
        let ty = match self
            .btf
            .as_ref()
            .and_then(|b| b.var_type(name).map(|t| (b, t)))
        {
            Some((b, t)) => b.d_type(t),
            None => Type::INT,
        };
        Ok((addr, ty))
    }
}

/// The address of `name` (in `module`, or the kernel itself when `None`) in `text`, the
/// contents of `/proc/kallsyms` (`ADDRESS KIND NAME [MODULE]` lines). `Err` when the file
/// lists zero addresses (`kptr_restrict`, not root).
fn kallsyms_address(text: &str, module: Option<&str>, name: &str) -> Result<Option<u64>, String> {
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(addr), Some(_kind), Some(sym)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if sym != name {
            continue;
        }
        let owner = f
            .next()
            .map(|m| m.trim_start_matches('[').trim_end_matches(']'));
        if owner != module {
            continue;
        }
        let a = u64::from_str_radix(addr, 16).map_err(|e| e.to_string())?;
        if a == 0 {
            return Err("/proc/kallsyms hides addresses (run as root)".into());
        }
        return Ok(Some(a));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_lines_resolve_by_module_and_hidden_addresses_are_an_error() {
        let text = "ffffffff81000000 T _stext\nffffffffc0a01230 t init_fn\t[ext4]\n\
                    ffffffff81001230 T init_fn\n";
        assert_eq!(
            kallsyms_address(text, None, "init_fn"),
            Ok(Some(0xffff_ffff_8100_1230))
        );
        assert_eq!(
            kallsyms_address(text, Some("ext4"), "init_fn"),
            Ok(Some(0xffff_ffff_c0a0_1230))
        );
        assert_eq!(kallsyms_address(text, Some("xfs"), "init_fn"), Ok(None));
        assert!(kallsyms_address("0000000000000000 T _stext\n", None, "_stext").is_err());
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
        let hex = |value| ast::IntLit {
            decimal: false,
            ..lit(value, false, false)
        };
        assert_eq!(int_lit_type(&lit(1, false, false)), Type::INT);
        // C99: a decimal constant skips the unsigned types, a hex one does not.
        assert_eq!(int_lit_type(&lit(3_000_000_000, false, false)), Type::I64);
        assert_eq!(int_lit_type(&hex(3_000_000_000)), Type::UINT);
        assert_eq!(int_lit_type(&lit(3_000_000_000, true, false)), Type::UINT);
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
