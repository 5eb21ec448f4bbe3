//! Declarations and variables: `int x;`, `self string s;`, `this` locals, `inline` definitions
//! (DTrace guide, "Variables" and "Type and Constant Definitions").

use super::*;
use probe_syntax::ErrTag;

/// The name under which thread-local associative array `self->NAME[...]` is kept: a global
/// associative array (its first key the thread id), named so that no D identifier can clash
/// with it and messages show it as written.
pub(super) fn thread_assoc_name(name: &str) -> String {
    format!("self->{name}")
}

/// Largest fixed-size array variable (`int a[N];`), in bytes: it lives in one BPF map value.
pub const ARRAY_MAX_BYTES: u32 = 32 * 1024;

impl Analyzer<'_> {
    pub(super) fn type_of_name(&mut self, t: &ast::TypeName) -> R<Type> {
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
                        Diagnostic::tagged(
                            ErrTag::D_TYPE_ERR,
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
                        return Err(self.err_at(
                            ErrTag::D_TYPE_ERR,
                            format!("the kernel has no type `{}`", t.text),
                            t.span,
                        ));
                    }
                }
            }
        };
        if matches!(base, Type::Struct { .. }) && t.pointer == 0 {
            return Err(self.report(
                Diagnostic::tagged(
                    ErrTag::D_OP_SOU,
                    format!("a `{}` cannot be used as a value", t.text),
                    t.span,
                )
                .with_hint(format!("use a pointer: ({} *)", t.text)),
            ));
        }
        Ok((0..t.pointer).fold(base, |acc, _| Type::Ptr(Box::new(acc))))
    }

    /// The type of a variable declared with `t`: as [`Self::type_of_name`], and a struct or union
    /// itself (not only a pointer to one) when it is complete (`struct rec var;`).
    pub(super) fn value_type_of_name(&mut self, t: &ast::TypeName) -> R<Type> {
        if let (BaseType::Struct(name), 0) = (&t.base, t.pointer) {
            let found = self
                .btf
                .as_ref()
                .and_then(|b| b.struct_id(name).map(|id| b.d_type(id)));
            return match found {
                Some(ty @ Type::Struct { size, .. }) if size > 0 => Ok(ty),
                _ => Err(self.err_at(
                    ErrTag::D_DECL_INCOMPLETE,
                    format!("`{}` is not a complete type", t.text),
                    t.span,
                )),
            };
        }
        self.type_of_name(t)
    }

    pub(super) fn inline_definition(&mut self, d: &ast::InlineDef) {
        // A struct type is a value type only for a translation (`inline psinfo_t p = xlate<...>`).
        let ty = if matches!(d.value.kind, ExprKind::Xlate(..)) {
            self.value_type_of_name(&d.ty)
        } else {
            self.type_of_name(&d.ty)
        };
        let Ok(ty) = ty else {
            return;
        };
        if matches!(ty, Type::Void) {
            self.err_at(
                ErrTag::D_DECL_VOIDOBJ,
                format!("inline `{}` cannot have type void", d.name),
                d.ty.span,
            );
            return;
        }
        if self.inlines.contains_key(&d.name) || Builtin::from_name(&d.name).is_some() {
            self.err_at(
                ErrTag::D_DECL_IDRED,
                format!("`{}` is already defined", d.name),
                d.span,
            );
            return;
        }
        // Checked at the definition as DTrace does (dt_cc.c cooks the value there), not only
        // where the inline is used: a value naming the inline itself, and a literal of the
        // wrong kind (a string for an integer type or an integer for `string`).
        let only = ast::Program {
            items: vec![ast::Item::Inline(d.clone())],
        };
        let name = d.name.as_str();
        if any_node(
            &only,
            &|e| matches!(&e.kind, ExprKind::Ident(n) if n == name),
            &|_| false,
        ) {
            self.err_at(
                ErrTag::D_IDENT_UNDEF,
                format!("inline `{name}` is defined in terms of itself"),
                d.value.span,
            );
            self.inlines
                .insert(d.name.clone(), (ty.clone(), stand_in(&ty, d.value.span)));
            return;
        }
        let literal = match &d.value.kind {
            ExprKind::Str(_) => Some("string"),
            ExprKind::Int(_) => Some("int"),
            _ => None,
        };
        let mistyped = match literal {
            Some("string") => ty.is_integral(),
            Some(_) => ty.is_string(),
            None => false,
        };
        if mistyped {
            self.err_at(
                ErrTag::D_OP_INCOMPAT,
                format!(
                    "inline `{name}` is declared `{ty}` but its value has type `{}`",
                    literal.unwrap_or_default()
                ),
                d.value.span,
            );
            // Uses stand for a value of the declared type, so the error is not repeated at
            // each use and no "unknown variable" follows from it.
            let value = stand_in(&ty, d.value.span);
            self.inlines.insert(d.name.clone(), (ty, value));
            return;
        }
        self.inlines.insert(d.name.clone(), (ty, d.value.clone()));
    }

    /// Expands a use of inline `name`: the definition typed here and converted to its type.
    pub(super) fn expand_inline(&mut self, name: &str, span: Span, cx: &mut ClauseCx) -> R<TExpr> {
        let (ty, value) = self.inlines[name].clone();
        if self.expanding.iter().any(|n| n == name) {
            return Err(self.err_at(
                ErrTag::D_IDENT_UNDEF,
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
                Diagnostic::tagged(
                    ErrTag::D_OP_INCOMPAT,
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

    pub(super) fn declaration(&mut self, d: &ast::VarDecl) {
        let Ok(ty) = self.value_type_of_name(&d.ty) else {
            return;
        };
        if ty == Type::Void {
            self.err_at(
                ErrTag::D_DECL_VOIDOBJ,
                format!("variable `{}` cannot have type void", d.name),
                d.ty.span,
            );
            return;
        }
        let ty = match d.array {
            None => ty,
            Some(n) => {
                if !ty.is_integral() {
                    self.err_at(
                        ErrTag::D_DECL_ARRSUB,
                        format!(
                            "an array of `{ty}` is not supported; arrays hold integers and pointers"
                        ),
                        d.ty.span,
                    );
                    return;
                }
                let bytes = (n as u128) * ty.size(self.options.strsize) as u128;
                if bytes > ARRAY_MAX_BYTES as u128 {
                    self.err_at(
                        ErrTag::D_DECL_ARRBIG,
                        format!(
                            "array `{}` of {n} elements is larger than {ARRAY_MAX_BYTES} bytes",
                            d.name
                        ),
                        d.span,
                    );
                    return;
                }
                Type::Array(Box::new(ty), n as u32)
            }
        };
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
        if scope == VarScope::Thread && !keys.is_empty() {
            // `self int a[string];`: a thread-local associative array, kept as a global one with
            // the thread id as its first key (see `thread_assoc_name`).
            let name = thread_assoc_name(&d.name);
            if self.lookup(VarScope::Global, &name).is_some() {
                self.err_at(
                    ErrTag::D_DECL_IDRED,
                    format!("variable `{name}` is declared twice"),
                    d.span,
                );
                return;
            }
            keys.insert(0, Builtin::Tid.ty());
            self.new_var(VarScope::Global, &name, keys, ty, d.span);
            return;
        }
        if scope != VarScope::Global && !keys.is_empty() {
            self.err_at(
                ErrTag::D_DECL_LOCASSC,
                "only global variables can be associative arrays",
                d.span,
            );
            return;
        }
        if scope == VarScope::Global && BUILTINS.contains(&d.name.as_str()) {
            self.err_at(
                ErrTag::D_DECL_IDRED,
                format!(
                    "`{}` is a built-in variable and cannot be redeclared",
                    d.name
                ),
                d.span,
            );
            return;
        }
        if self.lookup(scope, &d.name).is_some() {
            self.err_at(
                ErrTag::D_DECL_IDRED,
                format!("variable `{}` is declared twice", d.name),
                d.span,
            );
            return;
        }
        self.new_var(scope, &d.name, keys, ty, d.span);
    }

    pub(super) fn table(&mut self, scope: VarScope) -> &mut HashMap<String, VarId> {
        match scope {
            VarScope::Global => &mut self.globals,
            VarScope::Thread => &mut self.threads,
            VarScope::Clause => &mut self.locals,
        }
    }

    pub(super) fn lookup(&mut self, scope: VarScope, name: &str) -> Option<VarId> {
        self.table(scope).get(name).copied()
    }

    pub(super) fn new_var(
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

    pub(super) fn var_display(v: &Variable) -> String {
        match v.scope {
            VarScope::Global => v.name.clone(),
            VarScope::Thread => format!("self->{}", v.name),
            VarScope::Clause => format!("this->{}", v.name),
        }
    }
}

/// A constant of type `ty` (`""` or `0`) that uses of a rejected inline stand for.
fn stand_in(ty: &Type, span: Span) -> ast::Expr {
    let kind = if ty.is_string() {
        ExprKind::Str(String::new())
    } else {
        ExprKind::Int(ast::IntLit {
            value: 0,
            unsigned_suffix: false,
            long_suffix: false,
            decimal: true,
            char_lit: false,
        })
    };
    ast::Expr { kind, span }
}
