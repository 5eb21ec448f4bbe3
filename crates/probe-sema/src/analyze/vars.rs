//! Variable access: assignment targets, assignments, indexing of associative arrays, and probe
//! arguments (`argN`, `args[N]`).

use super::decls::thread_assoc_name;
use super::*;
use probe_syntax::ErrTag;

impl Analyzer<'_> {
    /// Resolves an assignment target. A variable not yet known is created with type `new_ty`
    /// (and the key types of `keys_hint` or of the written keys).
    pub(super) fn lvalue(
        &mut self,
        e: &Expr,
        cx: &mut ClauseCx,
        new_ty: Option<Type>,
    ) -> R<VarAccess> {
        let thread_keys: Vec<Expr>;
        let thread_name: String;
        let (scope, name, keys): (VarScope, &str, &[Expr]) = match &e.kind {
            ExprKind::Ident(n) => (VarScope::Global, n, &[]),
            ExprKind::SelfVar(n) => (VarScope::Thread, n, &[]),
            ExprKind::ThisVar(n) => (VarScope::Clause, n, &[]),
            ExprKind::Index(base, keys) => match &base.kind {
                ExprKind::Ident(n) if n != "args" => (VarScope::Global, n, keys.as_slice()),
                ExprKind::SelfVar(n) => {
                    // `self->a[k]`: the global array `self->a` keyed by (tid, k).
                    thread_name = thread_assoc_name(n);
                    let tid = Expr {
                        kind: ExprKind::Ident("tid".into()),
                        span: base.span,
                    };
                    thread_keys = std::iter::once(tid).chain(keys.iter().cloned()).collect();
                    (
                        VarScope::Global,
                        thread_name.as_str(),
                        thread_keys.as_slice(),
                    )
                }
                ExprKind::ThisVar(_) => {
                    return Err(self.err_at(
                        ErrTag::D_ARR_LOCAL,
                        "clause-local variables cannot be associative arrays",
                        e.span,
                    ));
                }
                _ => {
                    return Err(self.err_at(
                        ErrTag::D_OP_WRITE,
                        "this cannot be assigned to",
                        e.span,
                    ));
                }
            },
            ExprKind::AggRef(_) => {
                return Err(self.report(
                    Diagnostic::tagged(
                        ErrTag::D_AGG_FUNC,
                        "an aggregation must be assigned an aggregating function",
                        e.span,
                    )
                    .with_hint("@a[keys] = count(); or sum(x), avg(x), quantize(x) ..."),
                ));
            }
            _ => {
                return Err(self.err_at(
                    ErrTag::D_OP_LVAL,
                    "the left side of an assignment must be a variable",
                    e.span,
                ));
            }
        };
        if scope == VarScope::Global && (Builtin::from_name(name).is_some() || name == "args") {
            let mut d = Diagnostic::tagged(
                ErrTag::D_OP_WRITE,
                format!("`{name}` is a built-in variable and cannot be assigned"),
                e.span,
            );
            if cx.in_predicate {
                d = d.with_hint(format!("to compare, write `==`: /{name} == .../"));
            }
            return Err(self.report(d));
        }
        if scope == VarScope::Global && self.inlines.contains_key(name) {
            return Err(self.err_at(
                ErrTag::D_OP_WRITE,
                format!("`{name}` is an inline and cannot be assigned"),
                e.span,
            ));
        }
        if scope == VarScope::Global
            && (crate::consts::named_constant(name).is_some() || name == "NULL")
            && self.lookup(scope, name).is_none()
        {
            return Err(self.err_at(
                ErrTag::D_OP_WRITE,
                format!("`{name}` is a constant and cannot be assigned"),
                e.span,
            ));
        }
        let mut tkeys = Vec::new();
        for k in keys {
            let t = self.expr(k, cx)?;
            if matches!(
                t.ty,
                Type::Void | Type::Array(..) | Type::Stack { .. } | Type::Struct { .. }
            ) {
                return Err(self.err_at(
                    ErrTag::D_KEY_TYPE,
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
                    return Err(self.err_at(
                        ErrTag::D_IDENT_UNDEF,
                        format!("unknown variable `{name}`"),
                        e.span,
                    ));
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
            return Err(self.report(
                Diagnostic::tagged(ErrTag::D_PROTO_LEN, msg, e.span)
                    .with_label(v.span, "first assigned here"),
            ));
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

    pub(super) fn assign(
        &mut self,
        op: Option<BinaryOp>,
        lhs: &Expr,
        rhs: &Expr,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        if let ExprKind::Index(base, idx) = &lhs.kind {
            self.xlate_index_bounds(base, idx, cx)?;
        }
        if let Some(p) = self.bitfield_place(lhs, cx)? {
            return self.bitfield_store(p, op, rhs, lhs.span, span, cx);
        }
        let lvalue = self.classify_lvalue(lhs);
        if lvalue == Lvalue::ThroughPointer
            && let Some(t) = self.assign_through_pointer(op, lhs, rhs, span, cx)?
        {
            return Ok(t);
        }
        if let ExprKind::Index(base, idx) = &lhs.kind
            && let Some((target, index, elem, len, at)) = self.member_elem_parts(base, idx, cx)?
        {
            return self.assign_elem(op, target, index, elem, (len, at), rhs, span, cx);
        }
        if lvalue == Lvalue::StructMember {
            return self.assign_member(op, lhs, rhs, span, cx);
        }
        if let ExprKind::Index(base, idx) = &lhs.kind
            && let Some((target, index, elem, len)) = self.array_elem(base, idx, cx)?
        {
            return self.assign_elem(op, target, index, elem, (len, 0), rhs, span, cx);
        }
        // `v = *(struct s *)p`: the struct at an address (kernel or copyin() memory) is copied
        // into `v` whole (DTrace's `v = *(struct s *)copyin(addr, sizeof (struct s))`).
        let r = match &rhs.kind {
            ExprKind::Unary(UnaryOp::Deref, x) => {
                let t = self.expr(x, cx)?;
                match &t.ty {
                    Type::Ptr(inner) if matches!(**inner, Type::Struct { .. }) => {
                        let ty = (**inner).clone();
                        mk(TExprKind::Deref(Box::new(t)), ty, rhs.span)
                    }
                    _ => self.unary_typed(UnaryOp::Deref, t, rhs.span)?,
                }
            }
            _ => self.expr(rhs, cx)?,
        };
        if let Type::Struct { .. } = &r.ty {
            return self.assign_struct(op, lhs, r, span, cx);
        }
        if matches!(r.ty, Type::Void | Type::Stack { .. } | Type::Array(..)) {
            return Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_OP_INCOMPAT,
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
            let mut d = Diagnostic::tagged(
                ErrTag::D_OP_INCOMPAT,
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
                // DTrace (dt_node_is_argcompat): a pointer variable takes pointers, and an integer
                // one integers; only the constant 0 (a null pointer) crosses over.
                let is_ptr = |t: &Type| matches!(t, Type::Ptr(_));
                let null = matches!(r.kind, TExprKind::Int(0));
                if is_ptr(&v.ty) != is_ptr(&r.ty) && !null && v.ty != r.ty {
                    return Err(mismatch(self, &r));
                }
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
                            Diagnostic::tagged(
                                ErrTag::D_OP_ARITH,
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
                self.compound_value(bop, load, r, &v.ty, span)?
            }
        };
        Ok(mk(
            TExprKind::Assign(target, Box::new(value)),
            v.ty.clone(),
            span,
        ))
    }

    /// The value `old OP r` of a compound assignment `x OP= r` to a location of type `ty`, converted
    /// back to `ty`: the usual arithmetic conversions (C11 6.5.16.2), or each operand promoted on
    /// its own for shifts. A constant zero divisor is D_DIV_ZERO.
    pub(super) fn compound_value(
        &mut self,
        bop: BinaryOp,
        old: TExpr,
        r: TExpr,
        ty: &Type,
        span: Span,
    ) -> R<TExpr> {
        let (common, rt) = if matches!(bop, BinaryOp::Shl | BinaryOp::Shr) {
            (
                ty.promoted().unwrap_or(Type::I64),
                r.ty.promoted().unwrap_or(Type::I64),
            )
        } else {
            let c = usual_arithmetic(ty, &r.ty).unwrap_or(Type::I64);
            (c.clone(), c)
        };
        let r = convert(r, &rt);
        if matches!(bop, BinaryOp::Div | BinaryOp::Mod) && const_eval(&r) == Some(0) {
            return Err(self.err_at(ErrTag::D_DIV_ZERO, "division by zero", r.span));
        }
        let bin = mk(
            TExprKind::Binary(bop, Box::new(convert(old, &common)), Box::new(r)),
            common,
            span,
        );
        Ok(convert(bin, ty))
    }

    /// True when `e` is a member (or element of an array member) of a variable of struct type:
    /// `var.a`, `self->s.inner.b`, `this->r.arr[2]`, `a[k].x`.
    pub(super) fn struct_var_root(&mut self, e: &Expr) -> bool {
        let mut e = e;
        let mut through_member = false;
        loop {
            match &e.kind {
                ExprKind::Member {
                    base, arrow: false, ..
                } => {
                    through_member = true;
                    e = base;
                }
                ExprKind::Index(base, _)
                    if through_member || matches!(base.kind, ExprKind::Member { .. }) =>
                {
                    if !matches!(base.kind, ExprKind::Member { .. } | ExprKind::Index(..)) {
                        // `a[k]` of an associative array: the variable itself.
                        break;
                    }
                    e = base;
                }
                _ => break,
            }
        }
        through_member && self.struct_var(e).is_some()
    }

    /// True when `e` is `a[i]` of a fixed-size array variable.
    pub(super) fn is_array_elem(&mut self, e: &Expr) -> bool {
        let ExprKind::Index(base, _) = &e.kind else {
            return false;
        };
        self.scalar_var_type(base)
            .is_some_and(|ty| matches!(ty, Type::Array(..)))
    }

    /// The type of the scalar (not associative) variable `e` names, a global, a thread-local or a
    /// clause-local one (`x`, `self->x`, `this->x`); `None` for any other expression.
    fn scalar_var_type(&mut self, e: &Expr) -> Option<&Type> {
        let (scope, name) = match &e.kind {
            ExprKind::Ident(n) => (VarScope::Global, n),
            ExprKind::SelfVar(n) => (VarScope::Thread, n),
            ExprKind::ThisVar(n) => (VarScope::Clause, n),
            _ => return None,
        };
        let id = self.lookup(scope, name)?;
        let v = &self.vars[id.0 as usize];
        (!v.is_assoc()).then_some(&v.ty)
    }

    /// The variable `e` names (`x`, `self->x`, `this->x`, `a[...]`) when it has struct type:
    /// its id and the struct's BTF id and name.
    pub(super) fn struct_var(&mut self, e: &Expr) -> Option<(VarId, u32, String)> {
        let (scope, name) = match &e.kind {
            ExprKind::Ident(n) => (VarScope::Global, n),
            ExprKind::SelfVar(n) => (VarScope::Thread, n),
            ExprKind::ThisVar(n) => (VarScope::Clause, n),
            ExprKind::Index(base, _) => match &base.kind {
                ExprKind::Ident(n) => (VarScope::Global, n),
                _ => return None,
            },
            _ => return None,
        };
        let id = self.lookup(scope, name)?;
        match &self.vars[id.0 as usize].ty {
            Type::Struct { id: tid, name, .. } => Some((id, *tid, name.clone())),
            _ => None,
        }
    }

    /// `var.member = value` (and `op=`) on a variable of struct type: a store at the member's
    /// constant offset.
    #[inline(never)]
    fn assign_member(
        &mut self,
        op: Option<BinaryOp>,
        lhs: &Expr,
        rhs: &Expr,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        let Some((addr, tid)) = self.place(lhs, cx)? else {
            return Err(self.err_at(
                ErrTag::D_OP_LVAL,
                "this member cannot be assigned",
                lhs.span,
            ));
        };
        let Some(btf) = self.btf.clone() else {
            return Err(self.err_at(ErrTag::D_TYPE_ERR, "no type information", lhs.span));
        };
        let (target, offset) = match split_var_addr(&addr) {
            Some(x) => x,
            None => {
                return Err(self.report(
                    Diagnostic::tagged(
                        ErrTag::D_ARR_BADREF,
                        "an array member of a struct variable is assigned with a constant subscript only",
                        lhs.span,
                    )
                    .with_hint("write the element with a constant index: v.a[2] = x"),
                ));
            }
        };
        let mty = btf.d_type(tid);
        if !mty.is_integral() {
            return Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_OP_INCOMPAT,
                    format!("a member of type `{mty}` cannot be assigned"),
                    lhs.span,
                )
                .with_hint("assign integer and pointer members one at a time"),
            ));
        }
        let r = self.expr(rhs, cx)?;
        if !r.ty.is_integral() {
            return Err(self.err_at(
                ErrTag::D_OP_INCOMPAT,
                format!(
                    "type mismatch: the member has type `{mty}`, the value has type `{}`",
                    r.ty
                ),
                r.span,
            ));
        }
        let value = match op {
            None => convert(r, &mty),
            Some(bop) => {
                let old = self.load(addr, tid, lhs.span)?;
                self.compound_value(bop, old, r, &mty, span)?
            }
        };
        Ok(mk(
            TExprKind::StoreMember {
                target,
                offset,
                value: Box::new(value),
            },
            mty,
            span,
        ))
    }

    /// `a[i]` where `a` is a fixed-size array variable (`int a[5];`): the variable, the
    /// subscript (as `uint64_t`; a constant one checked here, `D_ARR_BOUNDS`), the element type
    /// and the length. `None` when `base` is not such a variable.
    #[inline(never)]
    pub(super) fn array_elem(
        &mut self,
        base: &Expr,
        idx: &[Expr],
        cx: &mut ClauseCx,
    ) -> R<Option<(VarAccess, TExpr, Type, u32)>> {
        let (scope, name) = match &base.kind {
            ExprKind::Ident(n) => (VarScope::Global, n),
            ExprKind::SelfVar(n) => (VarScope::Thread, n),
            ExprKind::ThisVar(n) => (VarScope::Clause, n),
            _ => return Ok(None),
        };
        let Some(id) = self.lookup(scope, name) else {
            return Ok(None);
        };
        let v = self.vars[id.0 as usize].clone();
        let Type::Array(elem, len) = &v.ty else {
            return Ok(None);
        };
        if v.is_assoc() {
            return Ok(None);
        }
        if idx.len() != 1 {
            return Err(self.err_at(
                ErrTag::D_ARR_BADREF,
                format!("array `{}` takes one subscript", Self::var_display(&v)),
                base.span.to(idx.last().map_or(base.span, |e| e.span)),
            ));
        }
        let i = self.int_expr(&idx[0], cx, "an array subscript")?;
        if let Some(k) = const_eval(&i)
            && (k < 0 || k >= *len as i128)
        {
            return Err(self.err_at(
                ErrTag::D_ARR_BOUNDS,
                format!(
                    "index {k} is out of bounds of array `{}` ({len} elements)",
                    Self::var_display(&v)
                ),
                i.span,
            ));
        }
        let target = self.lvalue(base, cx, None)?;
        Ok(Some((
            target,
            convert(i, &Type::U64),
            (**elem).clone(),
            *len,
        )))
    }

    /// `a[i] = value` (and `op=`) on a fixed-size array variable.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn assign_elem(
        &mut self,
        op: Option<BinaryOp>,
        target: VarAccess,
        index: TExpr,
        elem: Type,
        (len, base): (u32, u32),
        rhs: &Expr,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        let r = self.expr(rhs, cx)?;
        if !r.ty.is_integral() {
            return Err(self.err_at(
                ErrTag::D_OP_INCOMPAT,
                format!(
                    "type mismatch: the element has type `{elem}`, the value has type `{}`",
                    r.ty
                ),
                r.span,
            ));
        }
        let value = match op {
            None => convert(r, &elem),
            Some(bop) => {
                let old = mk(
                    TExprKind::ElemLoad {
                        target: target.clone(),
                        index: Box::new(index.clone()),
                        len,
                        base,
                    },
                    elem.clone(),
                    span,
                );
                self.compound_value(bop, old, r, &elem, span)?
            }
        };
        Ok(mk(
            TExprKind::ElemStore {
                target,
                index: Box::new(index),
                len,
                base,
                value: Box::new(value),
            },
            elem,
            span,
        ))
    }

    /// `v.m++`, `--v.m` ... on a member of a struct variable: `v.m += 1`, whose value is the new
    /// one; postfix gives back the old one (the new one minus the step, in the member's type).
    #[inline(never)]
    pub(super) fn incdec_member(
        &mut self,
        increment: bool,
        prefix: bool,
        target: &Expr,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        let one = Expr {
            kind: ExprKind::Int(ast::IntLit {
                value: 1,
                unsigned_suffix: false,
                long_suffix: false,
                decimal: true,
                char_lit: false,
            }),
            span,
        };
        let op = if increment {
            BinaryOp::Add
        } else {
            BinaryOp::Sub
        };
        let store = self.assign(Some(op), target, &one, span, cx)?;
        if prefix {
            return Ok(store);
        }
        let ty = store.ty.clone();
        let back = if increment {
            BinaryOp::Sub
        } else {
            BinaryOp::Add
        };
        let common = ty.promoted().unwrap_or(Type::I64);
        let step = mk(TExprKind::Int(1), common.clone(), span);
        let bin = mk(
            TExprKind::Binary(back, Box::new(convert(store, &common)), Box::new(step)),
            common,
            span,
        );
        Ok(convert(bin, &ty))
    }

    /// `x = y` where `y` has struct type `r.ty`: `x` (created with that type if new) gets a copy.
    #[inline(never)]
    fn assign_struct(
        &mut self,
        op: Option<BinaryOp>,
        lhs: &Expr,
        r: TExpr,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        if let Some(bop) = op {
            return Err(self.err_at(
                ErrTag::D_OP_ARITH,
                format!(
                    "operator `{}=` needs integers, not `{}`",
                    bop.as_str(),
                    r.ty
                ),
                span,
            ));
        }
        let src = match &r.kind {
            TExprKind::Var(src) => mk(TExprKind::VarAddr(src.clone()), Type::U64, r.span),
            TExprKind::Deref(p) => convert((**p).clone(), &Type::U64),
            _ => {
                return Err(self.err_at(
                    ErrTag::D_OP_INCOMPAT,
                    format!(
                        "a `{}` value can only be copied from a variable or through a pointer (`*(struct s *)p`)",
                        r.ty
                    ),
                    r.span,
                ));
            }
        };
        let target = self.lvalue(lhs, cx, Some(r.ty.clone()))?;
        let v = self.vars[target.var.0 as usize].clone();
        if v.ty != r.ty {
            return Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_OP_INCOMPAT,
                    format!(
                        "type mismatch: `{}` has type `{}`, the value has type `{}`",
                        Self::var_display(&v),
                        v.ty,
                        r.ty
                    ),
                    r.span,
                )
                .with_label(v.span, "its type was fixed here"),
            ));
        }
        Ok(mk(
            TExprKind::CopyStruct {
                target,
                src: Box::new(src),
            },
            r.ty,
            span,
        ))
    }

    /// `v.arr[i]` with a computed `i`: an integer or pointer element of an array member of a
    /// struct variable, read as [`TExprKind::ElemLoad`] at the member's offset (bounds checked
    /// when the probe fires). `None` for anything else (a constant subscript reads as a member).
    fn member_elem(
        &mut self,
        base: &Expr,
        idx: &[Expr],
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<Option<TExpr>> {
        let Some((target, index, ety, len, at)) = self.member_elem_parts(base, idx, cx)? else {
            return Ok(None);
        };
        Ok(Some(mk(
            TExprKind::ElemLoad {
                target,
                index: Box::new(index),
                len,
                base: at,
            },
            ety,
            span,
        )))
    }

    /// The parts of `v.arr[i]` with a computed `i` (see [`Self::member_elem`]): the variable,
    /// the subscript (`uint64_t`), the element type, the element count and the member's byte
    /// offset in the variable.
    fn member_elem_parts(
        &mut self,
        base: &Expr,
        idx: &[Expr],
        cx: &mut ClauseCx,
    ) -> R<Option<MemberElem>> {
        let ([i], ExprKind::Member { arrow: false, .. }) = (idx, &base.kind) else {
            return Ok(None);
        };
        if const_eval_ast(i) || !self.struct_var_root(base) {
            return Ok(None);
        }
        let Some(btf) = self.btf.clone() else {
            return Ok(None);
        };
        let Some((addr, tid)) = self.place(base, cx)? else {
            return Ok(None);
        };
        let Some((target, off)) = split_var_addr(&addr) else {
            return Ok(None);
        };
        let crate::btf::BtfType::Array { elem, len } = btf.get(btf.resolve(tid)).clone() else {
            return Ok(None);
        };
        let ety = btf.d_type(elem);
        if !(ety.is_int() || matches!(ety, Type::Ptr(_)))
            || !matches!(btf.size_of(elem), 1 | 2 | 4 | 8)
        {
            return Ok(None);
        }
        let index = self.int_expr(i, cx, "an array subscript")?;
        Ok(Some((target, convert(index, &Type::U64), ety, len, off)))
    }

    /// `uregs[index]` (DTrace guide, "User Process Tracing" > "uregs[] Array"): one subscript, an
    /// integer; a constant one must name a saved register ([`crate::consts::uregs_word`]).
    fn uregs(&mut self, idx: &[Expr], span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        let [i] = idx else {
            return Err(self.err_at(
                ErrTag::D_ARR_BADREF,
                format!("uregs[] takes one subscript, not {}", idx.len()),
                span,
            ));
        };
        let t = self.expr(i, cx)?;
        if !t.ty.is_integral() {
            return Err(self.err_at(
                ErrTag::D_ARR_BADREF,
                format!("uregs[] subscript must be an integer, not `{}`", t.ty),
                t.span,
            ));
        }
        if let Some(k) = const_eval(&t)
            && crate::consts::uregs_word(k as i64).is_none()
        {
            return Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_ARR_BADREF,
                    format!("uregs[{}] names no register x86-64 saves", k as i64),
                    t.span,
                )
                .with_hint(
                    "use R_PC, R_SP, R_FP, R_RAX .. R_R15, R_RIP, R_RSP, R_RFL, R_ERR, R_CS, \
                     R_SS or the 32-bit names (x86-64 does not save R_DS, R_ES, R_FS, R_GS)",
                ),
            ));
        }
        Ok(mk(
            TExprKind::Call(Subr::Uregs, vec![convert(t, &Type::I64)]),
            Type::U64,
            span,
        ))
    }

    pub(super) fn index(
        &mut self,
        base: &Expr,
        idx: &[Expr],
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        self.xlate_index_bounds(base, idx, cx)?;
        if let Some(e) = self.member_elem(base, idx, span, cx)? {
            return Ok(e);
        }
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
        if let Some((target, index, elem, len)) = self.array_elem(base, idx, cx)? {
            return Ok(mk(
                TExprKind::ElemLoad {
                    target,
                    index: Box::new(index),
                    len,
                    base: 0,
                },
                elem,
                span,
            ));
        }
        if idx.len() == 1 && self.scalar_string_var(base) {
            let s = self.expr(base, cx)?;
            return self.string_char(s, &idx[0], span, cx);
        }
        if let ExprKind::SelfVar(n) = &base.kind {
            // `self->a[k]`, a thread-local associative array.
            if self
                .lookup(VarScope::Global, &thread_assoc_name(n))
                .is_none()
            {
                return Err(self.report(
                    Diagnostic::tagged(
                        ErrTag::D_IDENT_UNDEF,
                        format!("unknown thread-local associative array `self->{n}`"),
                        base.span,
                    )
                    .with_hint(format!("assign an element first: self->{n}[key] = value;")),
                ));
            }
            let whole = Expr {
                kind: ExprKind::Index(Box::new(base.clone()), idx.to_vec()),
                span,
            };
            let acc = self.lvalue(&whole, cx, None)?;
            let ty = self.vars[acc.var.0 as usize].ty.clone();
            return Ok(mk(TExprKind::Var(acc), ty, span));
        }
        if let ExprKind::Ident(name) = &base.kind {
            if name == "args" {
                return self.probe_arg(idx, span, cx);
            }
            if name == "uregs" && self.lookup(VarScope::Global, name).is_none() {
                return self.uregs(idx, span, cx);
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
                        Diagnostic::tagged(
                            ErrTag::D_IDENT_UNDEF,
                            format!("unknown associative array `{name}`"),
                            base.span,
                        )
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
                    return Err(self.err_at(
                        ErrTag::D_ARR_BADREF,
                        "an array takes one subscript",
                        span,
                    ));
                }
                let i = self.int_expr(&idx[0], cx, "an array subscript")?;
                let Some(k) = const_eval(&i) else {
                    return Err(self.err_at(
                        ErrTag::D_ARR_BADREF,
                        "an array subscript must be an integer constant",
                        i.span,
                    ));
                };
                if k < 0 || k >= len as i128 {
                    return Err(self.err_at(
                        ErrTag::D_ARR_BADREF,
                        format!("subscript {k} is out of range for an array of {len}"),
                        i.span,
                    ));
                }
                Ok(mk(TExprKind::ArrayElem(Box::new(b), k as u32), *elem, span))
            }
            Type::String if idx.len() == 1 => self.string_char(b, &idx[0], span, cx),
            // `p[i]` is `*(p + i)` (guide, "Pointers and Arrays" → "Pointer and Array Relationship").
            Type::Ptr(inner) if inner.is_integral() => {
                if idx.len() != 1 {
                    return Err(self.err_at(
                        ErrTag::D_ARR_BADREF,
                        "a pointer takes one subscript",
                        span,
                    ));
                }
                let i = self.int_expr(&idx[0], cx, "a subscript")?;
                let elem = *inner.clone();
                let size = elem.size(self.options.strsize).max(1) as u64;
                let off = scaled_index(i, size);
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
            other => Err(self.err_at(
                ErrTag::D_ARR_BADREF,
                format!("a value of type `{other}` cannot be subscripted"),
                span,
            )),
        }
    }

    fn probe_arg(&mut self, idx: &[Expr], span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        if idx.len() != 1 {
            return Err(self.err_at(ErrTag::D_ARGS_IDX, "args[] takes one subscript", span));
        }
        let i = self.int_expr(&idx[0], cx, "an args[] subscript")?;
        let Some(n) = const_eval(&i).filter(|n| (0..10).contains(n)) else {
            return Err(self.err_at(
                ErrTag::D_ARGS_IDX,
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
                        return Err(self.report(Diagnostic::tagged(
                            ErrTag::D_ARGS_IDX,
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
                        return Err(self.err_at(ErrTag::D_ARGS_IDX, format!("args[{n}] is out of range at {}: a return probe has args[0] and args[1]", p.full_name()), span));
                    }
                    Type::I64
                }
                ProbeArgs::Uprobe { ret: false } => {
                    if n > 5 {
                        return Err(self.err_at(
                            ErrTag::D_ARGS_IDX,
                            format!(
                                "args[{n}] is out of range at {}: uprobes have args[0]..args[5]",
                                p.full_name()
                            ),
                            span,
                        ));
                    }
                    Type::I64
                }
                ProbeArgs::Usdt { args, .. } => match args.get(n as usize) {
                    Some(a) => a.d_type(),
                    None => {
                        return Err(self.err_at(
                            ErrTag::D_ARGS_IDX,
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
                        Diagnostic::tagged(
                            ErrTag::D_ARGS_NONE,
                            format!("{} is a tracepoint: its arguments are named", p.full_name()),
                            span,
                        )
                        .with_hint("use args->field (see the fields with `sightline probe -lv`)"),
                    ));
                }
                ProbeArgs::None | ProbeArgs::Profile | ProbeArgs::DtraceError => {
                    // Oracle's dt_cc: every index is out of range for a probe without
                    // arguments (D_ARGS_IDX).
                    return Err(self.err_at(
                        ErrTag::D_ARGS_IDX,
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
                        Diagnostic::tagged(ErrTag::D_ARGS_MULTI, format!("args[{n}] has different types at the clause's probes (`{prev}` and `{t}`)"), span)
                            .with_hint("split the clause, or use arg0..arg9 (int64_t)"),
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(mk(TExprKind::ProbeArg(n), ty.unwrap_or(Type::I64), span))
    }
}

/// Splits the address of a member of a struct-typed variable, `VarAddr(v) + c1 + c2 ...` with
/// constant offsets, into the variable and the total offset (`None` for a non-constant offset).
pub(super) fn split_var_addr(addr: &TExpr) -> Option<(VarAccess, u32)> {
    match &addr.kind {
        TExprKind::VarAddr(va) => Some((va.clone(), 0)),
        TExprKind::Binary(BinaryOp::Add, a, b) => {
            let (va, off) = split_var_addr(a)?;
            let k = const_eval(b)?;
            let total = i128::from(off) + k;
            Some((va, u32::try_from(total).ok()?))
        }
        _ => None,
    }
}

/// `v.arr[i]`'s parts: the variable, the subscript (`uint64_t`), the element type, the element
/// count and the array's byte offset in the variable.
type MemberElem = (VarAccess, TExpr, Type, u32, u32);

/// True for a subscript written as an integer literal (possibly negated): those read as a
/// constant-offset member; a computed one goes through [`TExprKind::ElemLoad`].
fn const_eval_ast(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(_) => true,
        ExprKind::Unary(_, x) => const_eval_ast(x),
        _ => false,
    }
}

impl Analyzer<'_> {
    /// What the left side of an assignment names (see [`Lvalue`]).
    fn classify_lvalue(&mut self, lhs: &Expr) -> Lvalue {
        if self.struct_var_root(lhs) {
            return Lvalue::StructMember;
        }
        let through = match &lhs.kind {
            ExprKind::Unary(UnaryOp::Deref, _) => true,
            ExprKind::Member {
                arrow: true, base, ..
            } => !matches!(&base.kind, ExprKind::Ident(n) if n == "args"),
            ExprKind::Member { arrow: false, .. } => pointer_rooted(lhs),
            ExprKind::Index(base, _) => {
                matches!(base.kind, ExprKind::Member { .. }) || self.scalar_pointer_var(base)
            }
            _ => false,
        };
        if through {
            Lvalue::ThroughPointer
        } else {
            Lvalue::Other
        }
    }

    /// `*p = v`, `p->m = v`, `p->m.n[i] = v` (and `op=`), whose left side
    /// [`Analyzer::classify_lvalue`] found to be [`Lvalue::ThroughPointer`]: a store through a
    /// pointer, allowed into scratch memory (`alloca()`, `copyin()`; checked at run time).
    /// `None` when no address can be formed for it (the caller
    /// goes on with the other kinds of place).
    fn assign_through_pointer(
        &mut self,
        op: Option<BinaryOp>,
        lhs: &Expr,
        rhs: &Expr,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<Option<TExpr>> {
        // `p[i] = v` with a pointer variable `p` is `*(p + i) = v` (guide, "Pointers and
        // Arrays"); the subscript is scaled by the element size as in a load.
        if let ExprKind::Index(base, idx) = &lhs.kind
            && self.scalar_pointer_var(base)
        {
            let load = self.index(base, idx, lhs.span, cx)?;
            let TExprKind::Deref(addr) = load.kind else {
                return Ok(None);
            };
            return self.store_through(op, lhs, rhs, convert(*addr, &Type::U64), load.ty, span, cx);
        }
        let (addr, ty) = match &lhs.kind {
            ExprKind::Unary(UnaryOp::Deref, x) => {
                let p = self.expr(x, cx)?;
                match &p.ty {
                    Type::Ptr(inner) => {
                        let inner = (**inner).clone();
                        (convert(p, &Type::U64), inner)
                    }
                    _ => {
                        return Err(self.err_at(
                            ErrTag::D_DEREF_NONPTR,
                            format!("cannot dereference a value of type `{}`", p.ty),
                            x.span,
                        ));
                    }
                }
            }
            _ => match self.place(lhs, cx)? {
                Some((addr, tid)) => {
                    let ty = self.btf.as_ref().map_or(Type::Void, |b| b.d_type(tid));
                    (addr, ty)
                }
                None => return Ok(None),
            },
        };
        self.store_through(op, lhs, rhs, addr, ty, span, cx)
    }

    /// True when `e` names a scalar `string` variable (`s`, `self->s`, `this->s`) and no
    /// associative array of that name exists: `s[i]` is then a character of it.
    fn scalar_string_var(&mut self, e: &Expr) -> bool {
        let (scope, name) = match &e.kind {
            ExprKind::Ident(n) => (VarScope::Global, n),
            ExprKind::SelfVar(n) => (VarScope::Thread, n),
            ExprKind::ThisVar(n) => (VarScope::Clause, n),
            _ => return false,
        };
        if matches!(e.kind, ExprKind::SelfVar(_))
            && self
                .lookup(VarScope::Global, &thread_assoc_name(name))
                .is_some()
        {
            return false;
        }
        self.lookup(scope, name).is_some_and(|id| {
            let v = &self.vars[id.0 as usize];
            !v.is_assoc() && v.ty == Type::String
        })
    }

    /// `s[i]` of the string `s`: its character at `i` ([`Subr::StrChar`]).
    fn string_char(&mut self, s: TExpr, idx: &Expr, span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        let i = self.int_expr(idx, cx, "a string subscript")?;
        Ok(mk(
            TExprKind::Call(Subr::StrChar, vec![s, convert(i, &Type::U64)]),
            Type::CHAR,
            span,
        ))
    }

    /// True when `e` names a scalar (not associative) variable of pointer type: a global, a
    /// thread-local or a clause-local one (`p`, `self->p`, `this->p`).
    pub(super) fn scalar_pointer_var(&mut self, e: &Expr) -> bool {
        self.scalar_var_type(e)
            .is_some_and(|ty| matches!(ty, Type::Ptr(_)))
    }

    /// The store of `rhs` (or `place op rhs`) as a `ty` at the address `addr` (`uint64_t`),
    /// whose place is written `lhs`: a [`TExprKind::StorePtr`].
    #[allow(clippy::too_many_arguments)]
    fn store_through(
        &mut self,
        op: Option<BinaryOp>,
        lhs: &Expr,
        rhs: &Expr,
        addr: TExpr,
        ty: Type,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<Option<TExpr>> {
        if !matches!(ty, Type::Int { .. } | Type::Ptr(_)) {
            return Err(self.err_at(
                ErrTag::D_OP_INCOMPAT,
                format!("a value of type `{ty}` cannot be assigned through a pointer"),
                lhs.span,
            ));
        }
        // `p->m op= v` is `p->m = p->m op v`.
        let value = match op {
            None => self.expr(rhs, cx)?,
            Some(op) => {
                let e = Expr {
                    kind: ExprKind::Binary(op, Box::new(lhs.clone()), Box::new(rhs.clone())),
                    span,
                };
                self.expr(&e, cx)?
            }
        };
        if !(value.ty.is_int() || matches!(value.ty, Type::Ptr(_))) {
            return Err(self.err_at(
                ErrTag::D_OP_INCOMPAT,
                format!("a value of type `{}` cannot be stored as `{ty}`", value.ty),
                rhs.span,
            ));
        }
        let value = convert(value, &ty);
        Ok(Some(mk(
            TExprKind::StorePtr {
                addr: Box::new(addr),
                value: Box::new(value),
            },
            ty,
            span,
        )))
    }
}

/// What the left side of an assignment names, classified once by
/// [`Analyzer::classify_lvalue`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lvalue {
    /// A member, or an element of an array member, of a variable of struct type: `v.a`,
    /// `self->s.b[2]`.
    StructMember,
    /// A place in memory reached through a pointer: `*p`, `p->m`, `p->m.n[i]`, `(*p).a`
    /// (allowed into `alloca()` and `copyin()` scratch memory).
    ThroughPointer,
    /// A variable, an associative array element or an element of an array variable.
    Other,
}

/// True when the chain of `.` members of `e` starts at a `->` or a `*` (`p->a.b`, `(*p).a`).
fn pointer_rooted(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Member { arrow: true, .. } | ExprKind::Unary(UnaryOp::Deref, _) => true,
        ExprKind::Member { base, .. } | ExprKind::Index(base, _) => pointer_rooted(base),
        _ => false,
    }
}
