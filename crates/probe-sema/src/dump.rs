//! A compact text dump of a [`CheckedProgram`], for golden tests and debugging.
//!
//! Every expression node prints as `(op operands...)` or a leaf, followed by `:type`; implicit and
//! explicit conversions appear as `(cast x:T1):T2`. Variables print as `name#id`, aggregations as
//! `@name#id`.

use crate::checked::*;
use crate::types::Type;
use std::fmt::Write as _;

/// Dumps the whole program: options that differ from the defaults, variables, aggregations, then
/// each clause with its probes, predicate and statements.
pub fn program(p: &CheckedProgram) -> String {
    let mut out = String::new();
    let d = Options::default();
    if p.options != d {
        let _ = writeln!(out, "options {:?}", OptionsDiff(&p.options));
    }
    for v in &p.variables {
        let keys = if v.keys.is_empty() {
            String::new()
        } else {
            format!(
                "[{}]",
                v.keys
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let _ = writeln!(
            out,
            "var {}#{} {:?}{keys}: {}",
            v.name, v.id.0, v.scope, v.ty
        );
    }
    for a in &p.aggregations {
        let keys = a
            .keys
            .iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "agg @{}#{} {:?} keys [{keys}] arg {}",
            a.name, a.id.0, a.func, a.arg_ty
        );
    }
    for c in &p.clauses {
        let probes: Vec<String> = c.probes.iter().map(|p| p.full_name()).collect();
        let _ = writeln!(out, "clause {} {}", c.index, probes.join(" "));
        if let Some(pr) = &c.predicate {
            let _ = writeln!(out, "  pred {}", expr(p, pr));
        }
        for s in &c.body {
            stmt(&mut out, p, s, 1);
        }
    }
    out
}

struct OptionsDiff<'a>(&'a Options);

impl std::fmt::Debug for OptionsDiff<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = self.0;
        let d = Options::default();
        let mut l = f.debug_map();
        macro_rules! field {
            ($($name:ident),*) => {$(
                if o.$name != d.$name { l.entry(&stringify!($name), &o.$name); }
            )*};
        }
        field!(
            quiet,
            bufsize,
            aggsize,
            dynvarsize,
            strsize,
            nspec,
            specsize,
            scratchsize,
            stackframes,
            ustackframes,
            aggsortkey,
            aggsortrev,
            aggsortpos,
            aggsortkeypos,
            switchrate,
            aggrate,
            statusrate,
            destructive,
            other
        );
        l.finish()
    }
}

fn stmt(out: &mut String, p: &CheckedProgram, s: &TStmt, depth: usize) {
    let ind = "  ".repeat(depth);
    match s {
        TStmt::Expr(e) => {
            let _ = writeln!(out, "{ind}{}", expr(p, e));
        }
        TStmt::Action(a, _) => {
            let _ = writeln!(out, "{ind}{}", action(p, a));
        }
        TStmt::Aggregate {
            agg,
            keys,
            value,
            incr,
            ..
        } => {
            let a = p.agg(*agg);
            let keys: Vec<String> = keys.iter().map(|k| expr(p, k)).collect();
            let mut s = format!(
                "{ind}@{}#{}[{}] <- {}",
                a.name,
                agg.0,
                keys.join(", "),
                a.func.name()
            );
            if let Some(v) = value {
                let _ = write!(s, " {}", expr(p, v));
            }
            if let Some(i) = incr {
                let _ = write!(s, " incr {}", expr(p, i));
            }
            let _ = writeln!(out, "{s}");
        }
        TStmt::If { cond, then, els } => {
            let _ = writeln!(out, "{ind}if {}", expr(p, cond));
            for t in then {
                stmt(out, p, t, depth + 1);
            }
            if !els.is_empty() {
                let _ = writeln!(out, "{ind}else");
                for t in els {
                    stmt(out, p, t, depth + 1);
                }
            }
        }
    }
}

fn aggname(p: &CheckedProgram, id: AggId) -> String {
    format!("@{}#{}", p.agg(id).name, id.0)
}

fn action(p: &CheckedProgram, a: &Action) -> String {
    let list = |v: &[TExpr]| v.iter().map(|e| expr(p, e)).collect::<Vec<_>>().join(" ");
    match a {
        Action::Trace(e) => format!("trace {}", expr(p, e)),
        Action::Printf { format, args } => format!("printf {format:?} {}", list(args)),
        Action::System { format, args } => format!("system {format:?} {}", list(args)),
        Action::Printa { format, aggs } => format!(
            "printa {}{}",
            format
                .as_ref()
                .map(|f| format!("{f:?} "))
                .unwrap_or_default(),
            aggs.iter()
                .map(|a| aggname(p, *a))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Action::Exit(e) => format!("exit {}", expr(p, e)),
        Action::Clear(a) => format!("clear {}", aggname(p, *a)),
        Action::Denormalize(a) => format!("denormalize {}", aggname(p, *a)),
        Action::Trunc { agg, keep } => {
            format!(
                "trunc {}{}",
                aggname(p, *agg),
                keep.as_ref()
                    .map(|k| format!(" {}", expr(p, k)))
                    .unwrap_or_default()
            )
        }
        Action::Normalize { agg, factor } => {
            format!("normalize {} {}", aggname(p, *agg), expr(p, factor))
        }
        Action::Speculate(e) => format!("speculate {}", expr(p, e)),
        Action::Commit(e) => format!("commit {}", expr(p, e)),
        Action::Discard(e) => format!("discard {}", expr(p, e)),
        Action::Tracemem { addr, size } => format!("tracemem {} {size}", expr(p, addr)),
        Action::Setopt { name, value } => match value {
            Some(v) => format!("setopt {} {}", expr(p, name), expr(p, v)),
            None => format!("setopt {}", expr(p, name)),
        },
        Action::Print { addr, ty, size } => {
            format!("print {} ({}) {size}", expr(p, addr), ty.name)
        }
        Action::Raise(e) => format!("raise {}", expr(p, e)),
        Action::Stop => "stop".into(),
        Action::Copyout { buf, addr, size } => {
            format!("copyout {} {} {size}", expr(p, buf), expr(p, addr))
        }
        Action::Copyoutstr { s, addr, maxlen } => format!(
            "copyoutstr {} {} {}",
            expr(p, s),
            expr(p, addr),
            expr(p, maxlen)
        ),
        Action::Chill(e) => format!("chill {}", expr(p, e)),
    }
}

fn access(p: &CheckedProgram, a: &VarAccess) -> String {
    let v = p.var(a.var);
    let prefix = match v.scope {
        VarScope::Global => "",
        VarScope::Thread => "self->",
        VarScope::Clause => "this->",
    };
    if a.keys.is_empty() {
        format!("{prefix}{}#{}", v.name, v.id.0)
    } else {
        let keys: Vec<String> = a.keys.iter().map(|k| expr(p, k)).collect();
        format!("{prefix}{}#{}[{}]", v.name, v.id.0, keys.join(", "))
    }
}

/// Dumps one typed expression.
pub fn expr(p: &CheckedProgram, e: &TExpr) -> String {
    let body = match &e.kind {
        TExprKind::Int(v) => match e.ty.as_int() {
            Some((8, true)) => (*v as i64).to_string(),
            Some((4, true)) => (*v as i64 as i32 as i64).to_string(),
            _ => v.to_string(),
        },
        TExprKind::Str(s) => format!("{s:?}"),
        TExprKind::Builtin(b) => format!("{b:?}").to_lowercase().replace(['(', ')'], ""),
        TExprKind::ProbeArg(n) => format!("args[{n}]"),
        TExprKind::TpField(f) => format!("args->{f}"),
        TExprKind::Var(a) => access(p, a),
        TExprKind::Unary(op, x) => format!("({} {})", op.as_str(), expr(p, x)),
        TExprKind::Binary(op, a, b) => format!("({} {} {})", op.as_str(), expr(p, a), expr(p, b)),
        TExprKind::StrCmp(op, a, b) => {
            format!("(str{} {} {})", op.as_str(), expr(p, a), expr(p, b))
        }
        TExprKind::Ternary(c, a, b) => format!("(?: {} {} {})", expr(p, c), expr(p, a), expr(p, b)),
        TExprKind::Cast(x) => format!("(cast {})", expr(p, x)),
        TExprKind::Assign(t, v) => format!("(= {} {})", access(p, t), expr(p, v)),
        TExprKind::IncDec {
            target,
            increment,
            prefix,
        } => format!(
            "({}{} {})",
            if *prefix { "pre" } else { "post" },
            if *increment { "++" } else { "--" },
            access(p, target)
        ),
        TExprKind::Call(s, args) => {
            let mut out = format!("({s:?}").to_lowercase();
            for a in args {
                out.push(' ');
                out.push_str(&expr(p, a));
            }
            out.push(')');
            out
        }
        TExprKind::Stack { user, frames } => {
            format!("({} {frames})", if *user { "ustack" } else { "stack" })
        }
        TExprKind::Symbol(k, a) => format!("({k:?} {})", expr(p, a)).to_lowercase(),
        TExprKind::Deref(x) => format!("(* {})", expr(p, x)),
        TExprKind::ArrayElem(x, i) => format!("(elem {} {i})", expr(p, x)),
        TExprKind::VarAddr(va) => format!("(& {})", access(p, va)),
        TExprKind::StorePtr { addr, value } => {
            format!("(store-ptr {} {})", expr(p, addr), expr(p, value))
        }
        TExprKind::StoreMember {
            target,
            offset,
            value,
        } => format!("(store {}+{offset} {})", access(p, target), expr(p, value)),
        TExprKind::ElemLoad {
            target,
            index,
            len,
            base: 0,
        } => format!("(elem {}[{len}] {})", access(p, target), expr(p, index)),
        TExprKind::ElemLoad {
            target,
            index,
            len,
            base,
        } => format!(
            "(elem {}+{base}[{len}] {})",
            access(p, target),
            expr(p, index)
        ),
        TExprKind::ElemStore {
            target,
            index,
            len,
            base,
            value,
        } => format!(
            "(store-elem {}{}[{len}] {} {})",
            access(p, target),
            if *base == 0 {
                String::new()
            } else {
                format!("+{base}")
            },
            expr(p, index),
            expr(p, value)
        ),
        TExprKind::CopyStruct { target, src } => {
            format!("(copy {} {})", access(p, target), expr(p, src))
        }
    };
    format!("{body}:{}", short_type(&e.ty))
}

/// Short type names for dumps (`i32`, `u64`, `str`, ...).
fn short_type(t: &Type) -> String {
    match t {
        Type::Int { bytes, signed } => {
            format!("{}{}", if *signed { "i" } else { "u" }, *bytes as u32 * 8)
        }
        Type::String => "str".into(),
        Type::Ptr(inner) => format!("{}*", short_type(inner)),
        Type::Stack { user, frames } => format!("{}stack{frames}", if *user { "u" } else { "" }),
        Type::Symbol(k) => format!("{k:?}").to_lowercase(),
        Type::Array(inner, n) => format!("{}[{n}]", short_type(inner)),
        Type::Struct { name, .. } => format!("struct:{name}"),
        Type::Void => "void".into(),
    }
}
