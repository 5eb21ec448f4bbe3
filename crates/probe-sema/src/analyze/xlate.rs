//! Translators: `translator OUT < IN NAME > { member = expr; ... };` definitions and the
//! `xlate < OUT > (e)` operator (DTrace guide, "Translators"; the lookup follows Oracle
//! DTrace's `dt_xlator_lookup`, libdtrace/dt_xlator.c).
//!
//! A translation is expanded where it is used: `xlate < OUT > (e).m` is the member expression
//! of `m` with the input name standing for `e` (an AST substitution, typed in the clause where
//! it is used), converted to the member's type. `xlate < OUT * > (e)->m` is the same member.
//! `v = xlate < OUT > (e)` (a struct variable `v` of type OUT) stores each member: the
//! translated ones with their expressions, the integer and pointer members the translator does
//! not define with 0. Each member's expression is also typed once at the definition with the
//! input standing for a value of the input type, so a definition's errors are reported even
//! when nothing uses it (as DTrace, which cooks the members there).

use super::*;
use crate::btf::BtfType;
use probe_syntax::ErrTag;

/// A translator the program defines.
#[derive(Clone, Debug)]
pub(super) struct Translator {
    /// The output struct's or union's name (its tag).
    out_name: String,
    /// The input type.
    input: Type,
    /// The name of the input in the member expressions.
    param: String,
    /// Member definitions: name and expression, in order.
    members: Vec<(String, Expr)>,
}

/// Rebuilds `e` bottom-up, replacing each sub-expression for which `f` gives a replacement.
pub(super) fn map_expr(e: &Expr, f: &dyn Fn(&Expr) -> Option<Expr>) -> Expr {
    if let Some(r) = f(e) {
        return r;
    }
    let m = |x: &Expr| Box::new(map_expr(x, f));
    let kind = match &e.kind {
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, m(x)),
        ExprKind::Binary(op, a, b) => ExprKind::Binary(*op, m(a), m(b)),
        ExprKind::Assign(op, a, b) => ExprKind::Assign(*op, m(a), m(b)),
        ExprKind::IncDec {
            increment,
            prefix,
            expr,
        } => ExprKind::IncDec {
            increment: *increment,
            prefix: *prefix,
            expr: m(expr),
        },
        ExprKind::Ternary(a, b, c) => ExprKind::Ternary(m(a), m(b), m(c)),
        ExprKind::Cast(t, x) => ExprKind::Cast(t.clone(), m(x)),
        ExprKind::SizeofExpr(x) => ExprKind::SizeofExpr(m(x)),
        ExprKind::Stringof(x) => ExprKind::Stringof(m(x)),
        ExprKind::Xlate(t, x) => ExprKind::Xlate(t.clone(), m(x)),
        ExprKind::Call {
            func,
            func_span,
            args,
        } => ExprKind::Call {
            func: func.clone(),
            func_span: *func_span,
            args: args.iter().map(|a| map_expr(a, f)).collect(),
        },
        ExprKind::Index(b, k) => ExprKind::Index(m(b), k.iter().map(|a| map_expr(a, f)).collect()),
        ExprKind::Member {
            base,
            field,
            field_span,
            arrow,
        } => ExprKind::Member {
            base: m(base),
            field: field.clone(),
            field_span: *field_span,
            arrow: *arrow,
        },
        other => other.clone(),
    };
    Expr { kind, span: e.span }
}

/// `e` with every `param` replaced by `input`; a cast of `param` to the struct type the input
/// already has (`((struct in)ivar).i` where the input is a `struct in` value) is the input
/// itself (D allows the identity cast of a struct value; Sightline's struct values are
/// variables, which take no cast).
fn substitute(e: &Expr, param: &str, input: &Expr, input_struct: Option<&str>) -> Expr {
    map_expr(e, &|x| match &x.kind {
        ExprKind::Ident(n) if n == param => Some(input.clone()),
        ExprKind::Cast(tn, inner)
            if tn.pointer == 0
                && matches!(&inner.kind, ExprKind::Ident(n) if n == param)
                && matches!((&tn.base, input_struct), (BaseType::Struct(s), Some(i)) if s == i) =>
        {
            Some(input.clone())
        }
        _ => None,
    })
}

/// Input types that a translator for `want` accepts from a value of type `have` beyond the
/// exact type (dt_xlator_lookup's second and third passes: the resolved type, then argument
/// compatibility): integers of any width, pointers to structs of one name, `void *` with any
/// pointer, structs of one name.
fn input_compatible(want: &Type, have: &Type) -> bool {
    match (want, have) {
        (Type::Int { .. }, Type::Int { .. }) => true,
        (Type::Ptr(a), Type::Ptr(b)) => match (a.as_ref(), b.as_ref()) {
            (Type::Void, _) | (_, Type::Void) => true,
            (Type::Struct { name: x, .. }, Type::Struct { name: y, .. }) => x == y,
            (x, y) => x == y,
        },
        (Type::Struct { name: x, .. }, Type::Struct { name: y, .. }) => x == y,
        _ => want == have,
    }
}

/// Can a value of type `value` be the value of a member of type `member` (dt_xlator.c checks
/// each member as an assignment, `dt_node_is_argcompat`)? Integers with integers, pointers with
/// pointers, strings with strings.
fn member_compatible(member: &Type, value: &Type) -> bool {
    match (member, value) {
        (Type::Int { .. }, Type::Int { .. }) => true,
        (Type::Ptr(_), Type::Ptr(_)) => true,
        (Type::String, Type::String) => true,
        (m, v) => m == v,
    }
}

impl Analyzer<'_> {
    /// Checks and records a translator definition.
    pub(super) fn translator_definition(&mut self, d: &ast::TranslatorDef) {
        // The output: a defined struct or union.
        let out = match (&d.output.base, d.output.pointer) {
            (BaseType::Struct(name), 0) => {
                match self.btf.as_ref().and_then(|b| {
                    let id = b.struct_id(name)?;
                    matches!(b.get(b.resolve(id)), BtfType::Struct { .. })
                        .then(|| (name.clone(), b.resolve(id)))
                }) {
                    Some(o) => o,
                    None => {
                        self.err_at(
                            ErrTag::D_XLATE_SOU,
                            format!("incomplete struct/union/enum {}", d.output.text),
                            d.output.span,
                        );
                        return;
                    }
                }
            }
            _ => {
                self.err_at(
                    ErrTag::D_XLATE_SOU,
                    format!(
                        "translator output type must be a struct or union, not `{}`",
                        d.output.text
                    ),
                    d.output.span,
                );
                return;
            }
        };
        let (out_name, out_id) = out;
        let Ok(input) = self.translator_input(&d.input) else {
            return;
        };
        if self
            .translators
            .iter()
            .any(|t| t.out_name == out_name && t.input == input)
        {
            self.err_at(
                ErrTag::D_XLATE_REDECL,
                format!(
                    "translator from {} to {} has already been declared",
                    d.input.text, d.output.text
                ),
                d.span,
            );
            return;
        }
        let Some(btf) = self.btf.clone() else {
            return;
        };
        let input_struct = match &input {
            Type::Struct { name, .. } => Some(name.clone()),
            _ => None,
        };
        let mut ok = true;
        for m in &d.members {
            let Some((member, _)) = btf.member(out_id, &m.name) else {
                self.err_at(
                    ErrTag::D_XLATE_MEMB,
                    format!(
                        "translator member {} is not a member of {}",
                        m.name, d.output.text
                    ),
                    m.name_span,
                );
                ok = false;
                continue;
            };
            // A value of the input type stands for the input: `(IN)0` for an integer or
            // pointer. A struct input is a variable only where it is used.
            if input_struct.is_some() {
                continue;
            }
            let stand_in = Expr {
                kind: ExprKind::Cast(
                    d.input.clone(),
                    Box::new(Expr {
                        kind: ExprKind::Int(ast::IntLit {
                            value: 0,
                            unsigned_suffix: false,
                            long_suffix: false,
                            decimal: true,
                            char_lit: false,
                        }),
                        span: d.param_span,
                    }),
                ),
                span: d.param_span,
            };
            let value = substitute(&m.value, &d.param, &stand_in, None);
            let mut cx = ClauseCx {
                probes: Vec::new(),
                locals: Vec::new(),
                prepass: true,
                in_predicate: false,
            };
            let Ok(t) = self.expr(&value, &mut cx) else {
                ok = false;
                continue;
            };
            let mty = btf.d_type(member.ty);
            if !member_compatible(&mty, &t.ty) {
                self.err_at(
                    ErrTag::D_XLATE_INCOMPAT,
                    format!(
                        "translator member {} definition uses incompatible types: \"{}\" = \"{}\"",
                        m.name, mty, t.ty
                    ),
                    m.value.span,
                );
                ok = false;
            }
        }
        if ok {
            self.translators.push(Translator {
                out_name,
                input,
                param: d.param.clone(),
                members: d
                    .members
                    .iter()
                    .map(|m| (m.name.clone(), m.value.clone()))
                    .collect(),
            });
        }
    }

    /// The type of a translator's input: any value type, a complete struct or union, or a
    /// pointer to a struct or union that nothing defines (a forward declaration, as DTrace's
    /// declarations make one: `->` on it is then `D_OP_INCOMPLETE`).
    fn translator_input(&mut self, t: &ast::TypeName) -> R<Type> {
        if let (BaseType::Struct(name), 1..) = (&t.base, t.pointer)
            && self.btf.as_ref().and_then(|b| b.struct_id(name)).is_none()
        {
            self.btf_mut().declare_forward(name);
        }
        self.value_type_of_name(t)
    }

    /// The translator from a value of type `have` to struct or union `out` (by name), if the
    /// program defines one: the exact input type first, then a compatible one.
    fn find_translator(&self, have: &Type, out: &str) -> Option<Translator> {
        let outs = || self.translators.iter().filter(|t| t.out_name == out);
        outs()
            .find(|t| t.input == *have)
            .or_else(|| outs().find(|t| input_compatible(&t.input, have)))
            .cloned()
    }

    /// `e` with inline names that stand for an `xlate` expression replaced by it, so that
    /// `inline lwpsinfo_t *p = xlate < lwpsinfo_t * > (curthread);` works as `p->member`.
    pub(super) fn peel_xlate_inline(&self, e: &Expr) -> Option<Expr> {
        let mut cur = e.clone();
        for _ in 0..16 {
            match &cur.kind {
                ExprKind::Xlate(..) => return Some(cur),
                ExprKind::Ident(n) => match self.inlines.get(n) {
                    Some((_, v)) => cur = v.clone(),
                    None => return None,
                },
                _ => return None,
            }
        }
        None
    }

    /// The output struct named by `xlate`'s type (`struct s` or `struct s *`) and whether it is
    /// the pointer form.
    fn xlate_output(&mut self, tn: &ast::TypeName) -> R<(String, u32, bool)> {
        let found = match (&tn.base, tn.pointer) {
            (BaseType::Struct(name), 0 | 1) => self.btf.as_ref().and_then(|b| {
                let id = b.resolve(b.struct_id(name)?);
                matches!(b.get(id), BtfType::Struct { .. }).then(|| (name.clone(), id))
            }),
            _ => None,
        };
        match found {
            Some((name, id)) => Ok((name, id, tn.pointer == 1)),
            None => Err(self.err_at(
                ErrTag::D_XLATE_SOU,
                format!(
                    "xlate needs a struct or union type (or a pointer to one), not `{}`",
                    tn.text
                ),
                tn.span,
            )),
        }
    }

    /// The translator `xlate < tn > (input)` uses, with the output's name and id and whether
    /// `tn` is a pointer. `D_XLATE_NONE` when there is none.
    fn xlate_lookup(
        &mut self,
        tn: &ast::TypeName,
        input: &Expr,
        cx: &mut ClauseCx,
    ) -> R<(Translator, String, u32, bool)> {
        let (out, out_id, ptr) = self.xlate_output(tn)?;
        let have = self.expr(input, cx)?.ty;
        match self.find_translator(&have, &out) {
            Some(t) => Ok((t, out, out_id, ptr)),
            None => {
                let shown = if ptr {
                    tn.text.trim_end_matches(['*', ' ']).to_string()
                } else {
                    tn.text.clone()
                };
                Err(self.err_at(
                    ErrTag::D_XLATE_NONE,
                    format!("cannot translate from \"{have}\" to \"{shown}\""),
                    input.span,
                ))
            }
        }
    }

    /// `xlate < tn > (input).field` or `xlate < tn * > (input)->field`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn xlate_member(
        &mut self,
        tn: &ast::TypeName,
        input: &Expr,
        field: &str,
        field_span: Span,
        arrow: bool,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        let (tr, out, out_id, ptr) = self.xlate_lookup(tn, input, cx)?;
        if ptr && !arrow {
            return Err(self.err_at(
                ErrTag::D_OP_SOU,
                format!(
                    "operator `.` needs a structure; `{}` is a pointer: use `->`",
                    tn.text
                ),
                span,
            ));
        }
        if !ptr && arrow {
            return Err(self.err_at(
                ErrTag::D_OP_PTR,
                format!(
                    "operator `->` needs a pointer; `{}` is a structure: use `.`",
                    tn.text
                ),
                span,
            ));
        }
        let Some(btf) = self.btf.clone() else {
            return Err(self.err_at(ErrTag::D_TYPE_ERR, "no type information", span));
        };
        let Some((member, _)) = btf.member(out_id, field) else {
            return Err(self.err_at(
                ErrTag::D_TYPE_MEMBER,
                format!("{field} is not a member of struct {out}"),
                field_span,
            ));
        };
        let Some((_, value)) = tr.members.iter().rev().find(|(n, _)| n == field) else {
            return Err(self.err_at(
                ErrTag::D_XLATE_NOCONV,
                format!("translator does not define conversion for member: {field}"),
                field_span,
            ));
        };
        let key = format!("xlate<{out}>.{field}");
        if self.expanding.contains(&key) {
            return Err(self.err_at(
                ErrTag::D_XLATE_NONE,
                format!("member {field} of {out} is translated in terms of itself"),
                span,
            ));
        }
        let input_struct = match &tr.input {
            Type::Struct { name, .. } => Some(name.as_str()),
            _ => None,
        };
        let value = substitute(value, &tr.param, input, input_struct);
        self.expanding.push(key);
        let t = self.expr(&value, cx);
        self.expanding.pop();
        let t = t?;
        let mty = btf.d_type(member.ty);
        if !member_compatible(&mty, &t.ty) {
            return Err(self.err_at(
                ErrTag::D_XLATE_INCOMPAT,
                format!(
                    "translator member {field} definition uses incompatible types: \"{mty}\" = \"{}\"",
                    t.ty
                ),
                value.span,
            ));
        }
        let t = if mty.is_integral() && t.ty.is_integral() {
            convert(t, &mty)
        } else {
            t
        };
        Ok(TExpr { span, ..t })
    }

    /// `xlate < T > (e).m[k]` (or `->m[k]`) with a constant `k` outside the array member `m`
    /// of T: DTrace's `D_ARR_BOUNDS`, checked against the member's declared length.
    pub(super) fn xlate_index_bounds(
        &mut self,
        base: &Expr,
        idx: &[Expr],
        cx: &mut ClauseCx,
    ) -> R<()> {
        let ExprKind::Member { base: b, field, .. } = &base.kind else {
            return Ok(());
        };
        let Some(x) = self.peel_xlate_inline(b) else {
            return Ok(());
        };
        let ExprKind::Xlate(tn, _) = &x.kind else {
            return Ok(());
        };
        let (Ok((_, out_id, _)), [k], Some(btf)) = (self.xlate_output(tn), idx, self.btf.clone())
        else {
            return Ok(());
        };
        let Some((m, _)) = btf.member(out_id, field) else {
            return Ok(());
        };
        let BtfType::Array { len, .. } = btf.get(btf.resolve(m.ty)) else {
            return Ok(());
        };
        let len = *len;
        let quiet = std::mem::replace(&mut self.quiet, true);
        let kv = self.expr(k, cx).ok().as_ref().and_then(const_eval);
        self.quiet = quiet;
        match kv {
            Some(v) if v < 0 || v >= i128::from(len) => Err(self.err_at(
                ErrTag::D_ARR_BOUNDS,
                format!("index outside array bounds: {v}, max is {len}"),
                k.span,
            )),
            _ => Ok(()),
        }
    }

    /// `xlate < ... > (e)` used as a value by itself (not `.member`, `->member` or the right
    /// side of a struct assignment): the translation is checked, then refused.
    pub(super) fn xlate_value(
        &mut self,
        tn: &ast::TypeName,
        input: &Expr,
        span: Span,
        cx: &mut ClauseCx,
    ) -> R<TExpr> {
        let (_, out, _, ptr) = self.xlate_lookup(tn, input, cx)?;
        let what = if ptr {
            format!("a pointer to translated data (struct {out} *) is only used with `->`")
        } else {
            format!(
                "a translated struct {out} is only read with `.member` or assigned to a struct variable"
            )
        };
        Err(self.err_at(ErrTag::D_OP_SOU, what, span))
    }

    /// `xlate < ... > (e);` as a statement: DTrace's code generator refuses a clause-level
    /// expression of a translated (dynamic) type, `D_CG_DYN`, once the translation is found.
    pub(super) fn xlate_statement(
        &mut self,
        tn: &ast::TypeName,
        input: &Expr,
        cx: &mut ClauseCx,
    ) -> Reported {
        if let Err(r) = self.xlate_lookup(tn, input, cx) {
            return r;
        }
        self.err_at(
            ErrTag::D_CG_DYN,
            "expression cannot evaluate to result of dynamic type",
            input.span,
        )
    }

    /// The statements that stand for statement `s` when it assigns a translated struct,
    /// `v = xlate < struct out > (e);`: one member store `v.m = xlate < ... > (e).m` per member
    /// the translator defines, `v.m = 0` for the other integer and pointer members (a
    /// translated struct's untranslated members are zero). `None` for any other statement, or
    /// when the translation is wrong (the statement is then typed as it is, which reports it).
    pub(super) fn expand_xlate_assignment(
        &mut self,
        s: &Stmt,
        cx: &mut ClauseCx,
    ) -> Option<Vec<Stmt>> {
        let StmtKind::Expr(e) = &s.kind else {
            return None;
        };
        let ExprKind::Assign(None, lhs, rhs) = &e.kind else {
            return None;
        };
        let x = self.peel_xlate_inline(rhs)?;
        let ExprKind::Xlate(tn, input) = &x.kind else {
            return None;
        };
        if tn.pointer != 0 {
            return None;
        }
        let quiet = std::mem::replace(&mut self.quiet, true);
        let found = self.xlate_lookup(tn, input, cx);
        self.quiet = quiet;
        let (tr, _, out_id, _) = found.ok()?;
        let btf = self.btf.clone()?;
        let out_ty = btf.d_type(out_id);
        if matches!(
            lhs.kind,
            ExprKind::Ident(_) | ExprKind::SelfVar(_) | ExprKind::ThisVar(_)
        ) {
            // Creates the variable with the struct type when it is new.
            let quiet = std::mem::replace(&mut self.quiet, true);
            let _ = self.lvalue(lhs, cx, Some(out_ty.clone()));
            self.quiet = quiet;
        }
        self.struct_var(lhs)?;
        let BtfType::Struct { members, .. } = btf.get(out_id).clone() else {
            return None;
        };
        let zero = Expr {
            kind: ExprKind::Int(ast::IntLit {
                value: 0,
                unsigned_suffix: false,
                long_suffix: false,
                decimal: true,
                char_lit: false,
            }),
            span: rhs.span,
        };
        let mut out = Vec::new();
        for m in members.iter().filter(|m| !m.name.is_empty()) {
            let value = if tr.members.iter().any(|(n, _)| *n == m.name) {
                Expr {
                    kind: ExprKind::Member {
                        base: Box::new(x.clone()),
                        field: m.name.clone(),
                        field_span: rhs.span,
                        arrow: false,
                    },
                    span: rhs.span,
                }
            } else if btf.d_type(m.ty).is_integral() {
                zero.clone()
            } else {
                continue;
            };
            let target = Expr {
                kind: ExprKind::Member {
                    base: lhs.clone(),
                    field: m.name.clone(),
                    field_span: lhs.span,
                    arrow: false,
                },
                span: lhs.span,
            };
            out.push(Stmt {
                kind: StmtKind::Expr(Expr {
                    kind: ExprKind::Assign(None, Box::new(target), Box::new(value)),
                    span: e.span,
                }),
                span: s.span,
            });
        }
        Some(out)
    }
}
