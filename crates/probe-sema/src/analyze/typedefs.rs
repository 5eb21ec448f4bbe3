//! The types a D program defines: `struct`, `union` and `enum` (DTrace guide, "Structs and
//! Unions" and "Type and Constant Definitions" → "Enumerations").
//!
//! Structures and unions join the kernel's BTF types (a copy of the table, extended), laid out as
//! C lays them out, so every use of a type (`sizeof`, `offsetof`, casts, `->` and `.` through
//! pointers) treats a program's type like a kernel one. An enum's constants become `int`
//! constants, as in DTrace; `enum NAME` is `int`.

use super::*;
use crate::btf::{Btf, BtfType};

impl Analyzer<'_> {
    /// Checks and records one definition.
    pub(super) fn type_definition(&mut self, t: &ast::TypeDef) {
        match &t.kind {
            ast::TypeDefKind::Struct { union, members } => {
                self.struct_definition(t, *union, members)
            }
            ast::TypeDefKind::Enum(consts) => self.enum_definition(&t.name, consts),
        }
    }

    fn struct_definition(&mut self, t: &ast::TypeDef, union: bool, members: &[ast::MemberDecl]) {
        let kw = if union { "union" } else { "struct" };
        if !self.d_types.insert(t.name.clone()) {
            self.err_at(
                ErrTag::D_DECL_TYPERED,
                format!("{kw} {} is already defined", t.name),
                t.span,
            );
            return;
        }
        let mut fields: Vec<(String, u32, u32)> = Vec::new();
        for m in members {
            if !m.name.is_empty() && fields.iter().any(|(n, _, _)| *n == m.name) {
                // DTrace's CTF library refuses it: "failed to define member", D_UNKNOWN.
                self.err_at(
                    ErrTag::D_UNKNOWN,
                    format!("failed to define member '{}' of {kw} {}: Duplicate member or variable name", m.name, t.name),
                    m.span,
                );
                return;
            }
            let Ok(id) = self.member_type(&m.ty, m.array, &m.name) else {
                return;
            };
            let bits = match &m.bits {
                None => 0,
                Some(w) => match self.bit_field_width(m, w, id) {
                    Ok(Some(b)) => b,
                    // `int : 0;` ends the storage unit; DTrace (and its CTF layout) ignore it.
                    Ok(None) => continue,
                    Err(_) => return,
                },
            };
            fields.push((m.name.clone(), id, bits));
        }
        let btf = self.btf_mut();
        btf.define_struct_bits(&t.name, union, &fields);
    }

    /// The width of bit-field member `m` (`TYPE name : w`) of type id `id`, checked as DTrace's
    /// dt_decl_member does: a positive integer constant (`D_DECL_BFCONST`), an integer base type
    /// (`D_DECL_BFTYPE`), no wider than the base type (`D_DECL_BFSIZE`). `None` for an unnamed
    /// zero-width bit-field.
    fn bit_field_width(&mut self, m: &ast::MemberDecl, w: &Expr, id: u32) -> R<Option<u32>> {
        let mut cx = ClauseCx {
            prepass: false,
            probes: Vec::new(),
            locals: Vec::new(),
            in_predicate: false,
        };
        let t = self.expr(w, &mut cx)?;
        let k = const_eval(&t).filter(|_| t.ty.is_int());
        if m.name.is_empty() && k == Some(0) {
            return Ok(None);
        }
        let shown = if m.name.is_empty() {
            "(anon)"
        } else {
            m.name.as_str()
        };
        let Some(k) = k.filter(|k| *k > 0) else {
            return Err(self.err_at(
                ErrTag::D_DECL_BFCONST,
                "positive integral constant expression expected as bit-field size",
                w.span,
            ));
        };
        let base = self.btf.as_ref().map(|b| (b.d_type(id), b.size_of(id)));
        let Some((Type::Int { .. }, bytes)) = base else {
            return Err(self.err_at(
                ErrTag::D_DECL_BFTYPE,
                format!("invalid type for bit-field: {shown}"),
                m.ty.span,
            ));
        };
        if k > bytes as i128 * 8 {
            return Err(self.err_at(
                ErrTag::D_DECL_BFSIZE,
                format!("bit-field too big for type: {shown}"),
                w.span,
            ));
        }
        Ok(Some(k as u32))
    }

    /// The kernel type table, made writable (a copy the first time a program defines a type;
    /// an empty table without kernel types).
    pub(super) fn btf_mut(&mut self) -> &mut Btf {
        std::sync::Arc::make_mut(
            self.btf
                .get_or_insert_with(|| std::sync::Arc::new(Btf::default())),
        )
    }

    /// The type id of a member declared `ty name[array]`.
    fn member_type(&mut self, ty: &ast::TypeName, array: Option<u64>, name: &str) -> R<u32> {
        let d_enum = ty
            .text
            .strip_prefix("enum ")
            .map(|n| n.trim_end_matches(['*', ' ']))
            .and_then(|n| self.d_enums.get(n).copied());
        let mut id = match &ty.base {
            BaseType::Int { .. } if d_enum.is_some() => d_enum.unwrap_or_default(),
            BaseType::Int { bytes, signed } => self.btf_mut().push(BtfType::Int {
                name: ty.text.clone(),
                size: *bytes as u32,
                signed: *signed,
                bool_: false,
            }),
            BaseType::String => {
                let strsize = self.options.strsize;
                let btf = self.btf_mut();
                let c = btf.push(BtfType::Int {
                    name: "char".into(),
                    size: 1,
                    signed: true,
                    bool_: false,
                });
                btf.push(BtfType::Array {
                    elem: c,
                    len: strsize,
                })
            }
            BaseType::Void if ty.pointer == 0 => {
                return Err(self.err_at(
                    ErrTag::D_DECL_VOIDOBJ,
                    format!("member `{name}` cannot be of type void"),
                    ty.span,
                ));
            }
            BaseType::Void => 0,
            BaseType::Struct(sname) => {
                let known = self.btf.as_ref().and_then(|b| b.struct_id(sname));
                match known {
                    Some(id)
                        if ty.pointer > 0
                            || self.btf.as_ref().is_some_and(|b| b.size_of(id) > 0) =>
                    {
                        id
                    }
                    // A pointer to a type not (yet) defined: resolved by name when used, as C's
                    // incomplete types (`struct node { struct node *next; }`).
                    None if ty.pointer > 0 => self.btf_mut().push(BtfType::Fwd {
                        name: sname.clone(),
                    }),
                    _ => {
                        return Err(self.err_at(
                            ErrTag::D_DECL_INCOMPLETE,
                            format!("member `{name}` has the incomplete type `{}`", ty.text),
                            ty.span,
                        ));
                    }
                }
            }
        };
        for _ in 0..ty.pointer {
            id = self.btf_mut().push(BtfType::Ptr(id));
        }
        if let Some(n) = array {
            let Ok(len) = u32::try_from(n) else {
                return Err(self.err_at(
                    ErrTag::D_DECL_ARRBIG,
                    format!("array member `{name}` is too large"),
                    ty.span,
                ));
            };
            id = self.btf_mut().push(BtfType::Array { elem: id, len });
        }
        Ok(id)
    }

    /// `enum { A, B = 5, C }`: each name an `int` constant (the previous value plus one, from 0),
    /// kept as an inline of its value. A named enum also becomes a 4-byte enum type of the table,
    /// so members declared `enum NAME` print their enumerators' names (`print()`).
    fn enum_definition(&mut self, name: &str, consts: &[ast::EnumConst]) {
        let mut values: Vec<(String, i64)> = Vec::new();
        self.enum_constants(consts, &mut values);
        if !name.is_empty() && !name.starts_with('<') {
            let id = self.btf_mut().push(BtfType::Enum {
                name: name.to_string(),
                size: 4,
                signed: true,
                values,
            });
            self.d_enums.insert(name.to_string(), id);
        }
    }

    fn enum_constants(&mut self, consts: &[ast::EnumConst], values: &mut Vec<(String, i64)>) {
        let mut next: i128 = 0;
        for c in consts {
            if values.iter().any(|(n, _)| *n == c.name) {
                // Twice in one enum: DTrace's CTF library refuses the enumerator (D_UNKNOWN).
                self.err_at(
                    ErrTag::D_UNKNOWN,
                    format!(
                        "failed to define enumerator '{}': Duplicate member or variable name",
                        c.name
                    ),
                    c.span,
                );
                continue;
            }
            if self.inlines.contains_key(&c.name)
                || Builtin::from_name(&c.name).is_some()
                || self.globals.contains_key(&c.name)
            {
                self.err_at(
                    ErrTag::D_DECL_IDRED,
                    format!("`{}` is already defined", c.name),
                    c.span,
                );
                continue;
            }
            if let Some(v) = &c.value {
                let mut cx = ClauseCx {
                    prepass: false,
                    probes: Vec::new(),
                    locals: Vec::new(),
                    in_predicate: false,
                };
                let Ok(t) = self.expr(v, &mut cx) else {
                    continue;
                };
                // A negated literal is its negative value (DTrace folds constants in 64 bits:
                // `-2147483648` is INT_MIN, though `2147483648` alone is an unsigned int).
                let folded = match &v.kind {
                    ExprKind::Unary(UnaryOp::Neg, x) => match &x.kind {
                        ExprKind::Int(lit) => Some(-(lit.value as i128)),
                        _ => const_eval(&t),
                    },
                    _ => const_eval(&t),
                };
                match folded {
                    Some(k)
                        if t.ty.is_int() && (i32::MIN as i128..=i32::MAX as i128).contains(&k) =>
                    {
                        next = k
                    }
                    Some(_) if t.ty.is_int() => {
                        self.err_at(
                            ErrTag::D_DECL_ENOFLOW,
                            format!(
                                "the value of enumerator `{}` does not fit in an int",
                                c.name
                            ),
                            v.span,
                        );
                        continue;
                    }
                    _ => {
                        self.err_at(
                            ErrTag::D_DECL_ENCONST,
                            format!(
                                "the value of enumerator `{}` is not an integer constant",
                                c.name
                            ),
                            v.span,
                        );
                        continue;
                    }
                }
            }
            let lit = ast::Expr {
                kind: ExprKind::Int(ast::IntLit {
                    value: next as i64 as u64,
                    unsigned_suffix: false,
                    long_suffix: next < 0,
                    decimal: true,
                    char_lit: false,
                }),
                span: c.span,
            };
            self.inlines.insert(c.name.clone(), (Type::INT, lit));
            values.push((c.name.clone(), next as i64));
            next += 1;
            if next > i32::MAX as i128 {
                next = i32::MIN as i128;
            }
        }
    }
}
