//! Bit-field members (`int a : 3;` in a D struct, and the kernel's bit-fields in BTF): reads
//! shift and mask the integer that holds the field, stores into a struct variable read, merge
//! and write it back (DTrace's `dt_cg_field_get` / `dt_cg_field_set`, libdtrace/dt_cg.c,
//! little-endian).

use super::*;
use probe_syntax::ErrTag;

/// Where a bit-field lives: the integer that holds it and the field's bits in it.
pub(super) struct BitPlace {
    /// Address of the holding integer (a `uint64_t`; a variable's storage or kernel memory).
    pub addr: TExpr,
    /// Size of the holding integer in bytes (1, 2, 4 or 8).
    pub bytes: u8,
    /// The field's lowest bit in the holding integer (little-endian bit numbering).
    pub shift: u32,
    /// The field's width in bits.
    pub bits: u32,
    /// The field's D type: its declared integer type.
    pub ty: Type,
}

impl BitPlace {
    /// The holding integer's D type.
    fn word(&self) -> Type {
        Type::Int {
            bytes: self.bytes,
            signed: false,
        }
    }

    /// The field's bits at their place, as a mask of the holding integer.
    fn mask(&self) -> u64 {
        let ones = if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        };
        ones << self.shift
    }
}

impl Analyzer<'_> {
    /// The bit-field `e` names (`v.f`, `p->f`, `v.inner.f` where `f` is a bit-field member),
    /// or `None` when `e` is not a member access or the member is not a bit-field.
    pub(super) fn bitfield_place(&mut self, e: &Expr, cx: &mut ClauseCx) -> R<Option<BitPlace>> {
        let ExprKind::Member {
            base, field, arrow, ..
        } = &e.kind
        else {
            return Ok(None);
        };
        let Some(btf) = self.btf.clone() else {
            return Ok(None);
        };
        if matches!(&base.kind, ExprKind::Ident(n) if n == "args")
            || self.peel_xlate_inline(base).is_some()
        {
            return Ok(None);
        }
        // Only a name some struct has as a bit-field can be one: other accesses skip typing
        // their base here (it would be typed again by the usual path, at every level of an
        // `a->b->c` chain). The set is rebuilt when the program's definitions grew the table.
        if self
            .bitfield_names
            .as_ref()
            .is_none_or(|(n, _)| *n != btf.len())
        {
            self.bitfield_names = Some((btf.len(), btf.bitfield_member_names()));
        }
        if !self
            .bitfield_names
            .as_ref()
            .is_some_and(|(_, names)| names.contains(field))
        {
            return Ok(None);
        }
        // The struct's address and type id, without reporting anything: the usual member path
        // reports the errors when this is not a bit-field.
        let quiet = std::mem::replace(&mut self.quiet, true);
        let found = self.struct_place(base, *arrow, cx);
        self.quiet = quiet;
        let Some((addr, sid)) = found else {
            return Ok(None);
        };
        let Some((m, bit_off)) = btf.member(sid, field) else {
            return Ok(None);
        };
        if m.bitfield_size == 0 {
            return Ok(None);
        }
        let bits = m.bitfield_size;
        let shift = bit_off % 8;
        let bytes = (shift + bits).div_ceil(8).next_power_of_two();
        if bytes > 8 {
            return Err(self.err_at(
                ErrTag::D_TYPE_MEMBER,
                format!("bit-field `{field}` spans more than 8 bytes, which D cannot read"),
                e.span,
            ));
        }
        let off = (bit_off / 8) as u64;
        let addr = if off == 0 {
            addr
        } else {
            mk(
                TExprKind::Binary(
                    BinaryOp::Add,
                    Box::new(addr),
                    Box::new(mk(TExprKind::Int(off), Type::U64, e.span)),
                ),
                Type::U64,
                e.span,
            )
        };
        let ty = match btf.d_type(m.ty) {
            t @ Type::Int { .. } => t,
            _ => Type::INT,
        };
        Ok(Some(BitPlace {
            addr,
            bytes: bytes as u8,
            shift,
            bits,
            ty,
        }))
    }

    /// The address (`uint64_t`) and BTF id of the struct `base` names: `base` a pointer to it
    /// (`arrow`), or a struct variable or a struct place in memory.
    fn struct_place(
        &mut self,
        base: &Expr,
        arrow: bool,
        cx: &mut ClauseCx,
    ) -> Option<(TExpr, u32)> {
        let btf = self.btf.clone()?;
        if arrow {
            let b = self.expr(base, cx).ok()?;
            let Type::Ptr(inner) = &b.ty else {
                return None;
            };
            let Type::Struct { id, .. } = inner.as_ref() else {
                return None;
            };
            let id = *id;
            return Some((convert(b, &Type::U64), id));
        }
        if let Some((_, sid, _)) = self.struct_var(base) {
            let va = self.lvalue(base, cx, None).ok()?;
            return Some((mk(TExprKind::VarAddr(va), Type::U64, base.span), sid));
        }
        let (addr, tid) = self.place(base, cx).ok()??;
        match btf.d_type(tid) {
            Type::Struct { id, .. } => Some((addr, id)),
            _ => None,
        }
    }

    /// The value of the bit-field at `p`: its bits shifted down, sign-extended when its type is
    /// signed, as its declared type.
    pub(super) fn bitfield_load(&mut self, p: &BitPlace, span: Span) -> TExpr {
        let word = p.word();
        let ptr = mk(
            TExprKind::Cast(Box::new(p.addr.clone())),
            Type::Ptr(Box::new(word.clone())),
            span,
        );
        let w = mk(TExprKind::Deref(Box::new(ptr)), word, span);
        let signed = matches!(p.ty, Type::Int { signed: true, .. });
        let wide = if signed { Type::I64 } else { Type::U64 };
        let up = mk(
            TExprKind::Binary(
                BinaryOp::Shl,
                Box::new(convert(w, &wide)),
                Box::new(mk(
                    TExprKind::Int((64 - p.shift - p.bits) as u64),
                    wide.clone(),
                    span,
                )),
            ),
            wide.clone(),
            span,
        );
        let down = mk(
            TExprKind::Binary(
                BinaryOp::Shr,
                Box::new(up),
                Box::new(mk(TExprKind::Int((64 - p.bits) as u64), wide.clone(), span)),
            ),
            wide,
            span,
        );
        convert(down, &p.ty)
    }

    /// `v.f = r` (or `v.f op= r`) for a bit-field of a struct variable: the holding integer with
    /// the field's bits replaced by the low bits of the value.
    pub(super) fn bitfield_store(
        &mut self,
        p: BitPlace,
        op: Option<BinaryOp>,
        rhs: &Expr,
        lhs_span: Span,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        let Some((target, offset)) = super::vars::split_var_addr(&p.addr) else {
            return Err(self.err_at(
                ErrTag::D_OP_LVAL,
                "only a bit-field of a struct variable can be assigned",
                lhs_span,
            ));
        };
        let r = self.expr(rhs, cx)?;
        if !r.ty.is_integral() {
            return Err(self.err_at(
                ErrTag::D_OP_INCOMPAT,
                format!(
                    "type mismatch: the bit-field has type `{}`, the value has type `{}`",
                    p.ty, r.ty
                ),
                r.span,
            ));
        }
        let value = match op {
            None => convert(r, &Type::U64),
            Some(bop) => {
                let old = self.bitfield_load(&p, lhs_span);
                let v = self.compound_value(bop, old, r, &p.ty, span)?;
                convert(v, &Type::U64)
            }
        };
        let word = p.word();
        let ptr = mk(
            TExprKind::Cast(Box::new(p.addr.clone())),
            Type::Ptr(Box::new(word.clone())),
            span,
        );
        let old = convert(
            mk(TExprKind::Deref(Box::new(ptr)), word.clone(), span),
            &Type::U64,
        );
        let int = |v: u64| mk(TExprKind::Int(v), Type::U64, span);
        let bin = |op, a: TExpr, b: TExpr| {
            mk(
                TExprKind::Binary(op, Box::new(a), Box::new(b)),
                Type::U64,
                span,
            )
        };
        let kept = bin(BinaryOp::BitAnd, old, int(!p.mask()));
        let placed = bin(
            BinaryOp::BitAnd,
            bin(BinaryOp::Shl, value, int(p.shift as u64)),
            int(p.mask()),
        );
        let merged = convert(bin(BinaryOp::BitOr, kept, placed), &word);
        Ok(mk(
            TExprKind::StoreMember {
                target,
                offset,
                value: Box::new(merged),
            },
            word,
            span,
        ))
    }
}
