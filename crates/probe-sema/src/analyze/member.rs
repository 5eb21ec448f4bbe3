//! Member access: `->` and `.` on tracepoint arguments and on kernel types from BTF, places in
//! kernel memory and their loads.

use super::*;
use probe_syntax::ErrTag;

impl Analyzer<'_> {
    pub(super) fn member(
        &mut self,
        base: &Expr,
        field: &str,
        field_span: Span,
        arrow: bool,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        if let Some(x) = self.peel_xlate_inline(base)
            && let ExprKind::Xlate(tn, input) = &x.kind
        {
            return self.xlate_member(tn, input, field, field_span, arrow, span, cx);
        }
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
                if let Some(p) = self.bitfield_place(&whole, cx)? {
                    return Ok(self.bitfield_load(&p, span));
                }
                if let Some((addr, tid)) = self.place(&whole, cx)? {
                    return self.load(addr, tid, span);
                }
            }
            // Type the base for its own errors (an unknown variable is the likelier mistake).
            self.expr(base, cx)?;
            let d = if self.btf.is_some() {
                Diagnostic::tagged(
                    ErrTag::D_OP_SOU,
                    format!("cannot access member `{field}` of a value that is not a structure"),
                    span,
                )
                .with_hint("members are read through pointers to kernel structures: p->member")
            } else {
                Diagnostic::tagged(ErrTag::D_TYPE_ERR, format!("cannot access member `{field}`: no kernel type information"), span)
                    .with_hint("structure layouts come from the kernel's BTF (/sys/kernel/btf/vmlinux), which was not loaded")
            };
            return Err(self.report(d));
        }
        if !arrow {
            return Err(self.report(Diagnostic::tagged(
                ErrTag::D_ARGS_TYPE,
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
                                Diagnostic::tagged(
                                    ErrTag::D_TYPE_MEMBER,
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
                        Diagnostic::tagged(
                            ErrTag::D_ARGS_NONE,
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
                        Diagnostic::tagged(ErrTag::D_ARGS_MULTI, format!("args->{field} has different types at the clause's probes (`{prev}` and `{t}`)"), span)
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
    pub(super) fn place(&mut self, e: &Expr, cx: &mut ClauseCx) -> R<Option<(TExpr, u32)>> {
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
                        Diagnostic::tagged(
                            ErrTag::D_OP_PTR,
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
                    return Err(self.err_at(
                        ErrTag::D_OP_PTR,
                        format!(
                            "operator `->` needs a pointer to a structure, not `{}`",
                            b.ty
                        ),
                        base.span,
                    ));
                };
                let (id, name) = (*id, name.clone());
                if let crate::btf::BtfType::Fwd { .. } = btf.get(btf.resolve(id)) {
                    return Err(self.err_at(
                        ErrTag::D_OP_INCOMPLETE,
                        format!("operator -> cannot be applied to a forward declaration: no struct {name} definition is available"),
                        base.span,
                    ));
                }
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
                if let Some((_, sid, sname)) = self.struct_var(base) {
                    // A member of a variable of struct type: its storage is the place.
                    let va = self.lvalue(base, cx, None)?;
                    let addr = mk(TExprKind::VarAddr(va), Type::U64, base.span);
                    return self
                        .member_place(&btf, addr, sid, &sname, field, *field_span)
                        .map(Some);
                }
                let Some((addr, tid)) = self.place(base, cx)? else {
                    return Ok(None);
                };
                let Type::Struct { id, name, .. } = btf.d_type(tid) else {
                    return Err(self.err_at(
                        ErrTag::D_OP_SOU,
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
                    return Err(self.err_at(
                        ErrTag::D_ARR_BADREF,
                        format!(
                            "a value of type `{}` cannot be subscripted",
                            btf.d_type(tid)
                        ),
                        base.span,
                    ));
                };
                if idx.len() != 1 {
                    return Err(self.err_at(
                        ErrTag::D_ARR_BADREF,
                        "an array takes one subscript",
                        e.span,
                    ));
                }
                let i = self.int_expr(&idx[0], cx, "an array subscript")?;
                if const_eval(&i).is_none() && super::vars::split_var_addr(&addr).is_some() {
                    return Err(self.report(
                        Diagnostic::tagged(
                            ErrTag::D_ARR_BADREF,
                            "an array member of a struct variable whose elements are not integers or pointers takes a constant subscript",
                            i.span,
                        )
                        .with_hint("a computed subscript works on integer or pointer elements: v.arr[i]"),
                    ));
                }
                // A flexible array member (`struct upid numbers[]`, length 0) takes any index.
                if let Some(k) = const_eval(&i)
                    && (k < 0 || (len > 0 && k >= len as i128))
                {
                    return Err(self.err_at(
                        ErrTag::D_ARR_BADREF,
                        format!("subscript {k} is out of range for an array of {len}"),
                        i.span,
                    ));
                }
                let size = btf.size_of(elem) as u64;
                let scaled = scaled_index(i, size);
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

    pub(super) fn member_place(
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
            let mut d = Diagnostic::tagged(
                ErrTag::D_TYPE_MEMBER,
                format!("struct {sname} has no member `{field}`"),
                field_span,
            );
            if let Some(h) = did_you_mean(&sugg) {
                d = d.with_hint(h);
            }
            return Err(self.report(d));
        };
        if m.bitfield_size != 0 || bit_off % 8 != 0 {
            return Err(self.err_at(
                ErrTag::D_TYPE_MEMBER,
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
    pub(super) fn load(&mut self, addr: TExpr, tid: u32, span: Span) -> R<TExpr> {
        let Some(btf) = self.btf.clone() else {
            return Err(self.err_at(ErrTag::D_TYPE_ERR, "no kernel type information", span));
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
                Diagnostic::tagged(
                    ErrTag::D_OP_SOU,
                    format!("a `struct {name}` cannot be used as a value"),
                    span,
                )
                .with_hint("read one of its members with `.member`"),
            )),
            Type::Array(..) => Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_OP_ARRFUN,
                    format!("an array of type `{ty}` cannot be used as a value"),
                    span,
                )
                .with_hint("read an element: a[i]"),
            )),
            _ => Err(self.err_at(
                ErrTag::D_TYPE_ERR,
                format!("members of this type (`{ty}`) cannot be read"),
                span,
            )),
        }
    }
}
