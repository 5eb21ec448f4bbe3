//! A compact S-expression dump of the AST, for golden tests and `--dump-ast`-style debugging.
//!
//! Shape: one top-level item per line group; statements indented by two spaces. Expressions are
//! prefix forms: `(+ a (* b c))`, `(= x 1)`, `(+= x 1)`, `(?: c a b)`, `(cast int x)`,
//! `(call printf "%d" x)`, `(index a k1 k2)`, `(-> args field)`, `(self x)`, `(this x)`,
//! `(pre++ x)`, `(post-- x)`, `(sizeof-type int)`, `(stringof x)`, `$1`, `$$1`, `$target`, `@a`.
//! Integers print their value with a suffix marker (`42`, `42u`, `42l`, `'a'=97`); strings print
//! Rust-escaped in double quotes.

use crate::ast::*;
use std::fmt::Write as _;

/// Dumps a whole program.
pub fn program(p: &Program) -> String {
    let mut out = String::new();
    for item in &p.items {
        match item {
            Item::Option(o) => {
                let _ = writeln!(
                    out,
                    "(option {}{})",
                    o.name,
                    o.value
                        .as_ref()
                        .map(|v| format!(" {v}"))
                        .unwrap_or_default()
                );
            }
            Item::Decl(d) => {
                let scope = match d.scope {
                    DeclScope::Global => "",
                    DeclScope::Thread => "self ",
                    DeclScope::Clause => "this ",
                };
                let keys = if d.keys.is_empty() {
                    String::new()
                } else {
                    format!(
                        " [{}]",
                        d.keys
                            .iter()
                            .map(|k| k.text.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                let dim = d.array.map(|n| format!("[{n}]")).unwrap_or_default();
                let _ = writeln!(out, "(decl {scope}{} {}{dim}{keys})", d.ty.text, d.name);
            }
            Item::Type(t) => match &t.kind {
                TypeDefKind::Struct { union, members } => {
                    let ms: Vec<String> = members
                        .iter()
                        .map(|m| match (m.array, &m.bits) {
                            (Some(n), _) => format!("({} {}[{n}])", m.ty.text, m.name),
                            (None, Some(w)) => format!("({} {} : {})", m.ty.text, m.name, expr(w)),
                            (None, None) => format!("({} {})", m.ty.text, m.name),
                        })
                        .collect();
                    let kw = if *union { "union" } else { "struct" };
                    let _ = writeln!(out, "({kw} {} {})", t.name, ms.join(" "));
                }
                TypeDefKind::Enum(cs) => {
                    let cs: Vec<String> = cs
                        .iter()
                        .map(|c| match &c.value {
                            Some(v) => format!("({} {})", c.name, expr(v)),
                            None => c.name.clone(),
                        })
                        .collect();
                    let _ = writeln!(out, "(enum {} {})", t.name, cs.join(" "));
                }
            },
            Item::Depends(d) => {
                let _ = writeln!(out, "(depends_on {:?} {})", d.class, d.name);
            }
            Item::Inline(d) => {
                let _ = writeln!(out, "(inline {} {} {})", d.ty.text, d.name, expr(&d.value));
            }
            Item::Translator(t) => {
                let ms: Vec<String> = t
                    .members
                    .iter()
                    .map(|m| format!("({} {})", m.name, expr(&m.value)))
                    .collect();
                let _ = writeln!(
                    out,
                    "(translator {} ({} {}) {})",
                    t.output.text,
                    t.input.text,
                    t.param,
                    ms.join(" ")
                );
            }
            Item::Clause(c) => {
                let probes: Vec<String> = c
                    .probes
                    .iter()
                    .map(|p| {
                        format!(
                            "{}:{}:{}:{}",
                            p.provider.text, p.module.text, p.function.text, p.name.text
                        )
                    })
                    .collect();
                let _ = writeln!(out, "(clause {}", probes.join(" "));
                if let Some(pred) = &c.predicate {
                    let _ = writeln!(out, "  (pred {})", expr(pred));
                }
                for s in &c.body {
                    stmt(&mut out, s, 1);
                }
                let _ = writeln!(out, ")");
            }
        }
    }
    out
}

fn stmt(out: &mut String, s: &Stmt, depth: usize) {
    let ind = "  ".repeat(depth);
    match &s.kind {
        StmtKind::Empty => {
            let _ = writeln!(out, "{ind}(empty)");
        }
        StmtKind::Expr(e) => {
            let _ = writeln!(out, "{ind}{}", expr(e));
        }
        StmtKind::Aggregate(a) => {
            let keys = if a.keys.is_empty() {
                String::new()
            } else {
                format!(
                    "[{}] ",
                    a.keys.iter().map(expr).collect::<Vec<_>>().join(" ")
                )
            };
            let args: Vec<String> = a.args.iter().map(expr).collect();
            let args = if args.is_empty() {
                String::new()
            } else {
                format!(" {}", args.join(" "))
            };
            let _ = writeln!(out, "{ind}(agg @{} {keys}({}{args}))", a.name, a.func);
        }
        StmtKind::If { cond, then, els } => {
            let _ = writeln!(out, "{ind}(if {}", expr(cond));
            for t in then {
                stmt(out, t, depth + 1);
            }
            if let Some(els) = els {
                let _ = writeln!(out, "{ind} else");
                for t in els {
                    stmt(out, t, depth + 1);
                }
            }
            let _ = writeln!(out, "{ind})");
        }
    }
}

/// Dumps one expression.
pub fn expr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Int(i) => {
            if i.char_lit {
                format!("'c'={}", i.value as i64)
            } else {
                format!(
                    "{}{}{}",
                    i.value,
                    if i.unsigned_suffix { "u" } else { "" },
                    if i.long_suffix { "l" } else { "" }
                )
            }
        }
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Ident(n) => n.clone(),
        ExprKind::Macro(MacroVar::Arg(n)) => format!("${n}"),
        ExprKind::Macro(MacroVar::ArgString(n)) => format!("$${n}"),
        ExprKind::Macro(MacroVar::Named(n)) => format!("${n}"),
        ExprKind::SelfVar(n) => format!("(self {n})"),
        ExprKind::ThisVar(n) => format!("(this {n})"),
        ExprKind::AggRef(n) => format!("@{n}"),
        ExprKind::Unary(op, x) => format!("({} {})", op.as_str(), expr(x)),
        ExprKind::Binary(op, a, b) => format!("({} {} {})", op.as_str(), expr(a), expr(b)),
        ExprKind::Assign(op, a, b) => {
            format!(
                "({}= {} {})",
                op.map(|o| o.as_str()).unwrap_or(""),
                expr(a),
                expr(b)
            )
        }
        ExprKind::IncDec {
            increment,
            prefix,
            expr: x,
        } => {
            format!(
                "({}{} {})",
                if *prefix { "pre" } else { "post" },
                if *increment { "++" } else { "--" },
                expr(x)
            )
        }
        ExprKind::Ternary(c, a, b) => format!("(?: {} {} {})", expr(c), expr(a), expr(b)),
        ExprKind::Cast(t, x) => format!("(cast {} {})", t.text, expr(x)),
        ExprKind::SizeofType(t) => format!("(sizeof-type {})", t.text),
        ExprKind::SizeofExpr(x) => format!("(sizeof {})", expr(x)),
        ExprKind::Stringof(x) => format!("(stringof {})", expr(x)),
        ExprKind::Offsetof(t, m) => format!("(offsetof {} {m})", t.text),
        ExprKind::Xlate(t, x) => format!("(xlate {} {})", t.text, expr(x)),
        ExprKind::Call { func, args, .. } => {
            let mut s = format!("(call {func}");
            for a in args {
                s.push(' ');
                s.push_str(&expr(a));
            }
            s.push(')');
            s
        }
        ExprKind::Index(b, idx) => {
            let mut s = format!("(index {}", expr(b));
            for a in idx {
                s.push(' ');
                s.push_str(&expr(a));
            }
            s.push(')');
            s
        }
        ExprKind::Member {
            base, field, arrow, ..
        } => {
            format!(
                "({} {} {})",
                if *arrow { "->" } else { "." },
                expr(base),
                field
            )
        }
    }
}
