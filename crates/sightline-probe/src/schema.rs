//! The shapes of a program's records and aggregations, known when it is compiled.

use probe_codegen::layout::{FieldKind, Layout, RecordAction};
use probe_sema::CheckedProgram;
use probe_sema::checked::{Action, TExpr, TStmt};
use probe_syntax::SourceMap;
use serde::{Deserialize, Serialize};

/// Per clause, the fields its records carry; per aggregation, its function and key types.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// One entry per clause, in program order ([`crate::Record::clause`] indexes it).
    pub clauses: Vec<ClauseSchema>,
    /// One entry per aggregation variable, in program order.
    pub aggregations: Vec<AggregationSchema>,
}

/// What one clause's records hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClauseSchema {
    /// The clause's index (0-based, program order).
    pub index: usize,
    /// Its probe descriptions as written (after macro substitution).
    pub descriptions: Vec<String>,
    /// How many probes they matched.
    pub probes: usize,
    /// The recorded values in order: each `trace()` value and each `printf()`/`system()`
    /// argument, as [`crate::Record::values`] lists them. A value under an `if` whose branch
    /// did not run is absent from that record.
    pub fields: Vec<FieldSchema>,
}

/// One recorded value of a clause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldSchema {
    /// The expression as written (`execname`, `args[0]`, `copyinstr(arg1)`).
    pub name: String,
    /// The action recording it: `trace`, `printf` or `system`.
    pub action: String,
    /// Its D type (`string`, `pid_t`, `uint64_t`, `stack`, ...).
    pub ty: String,
    /// How it is stored: `int` (with `bytes` and `signed`), `string`, `stack`, `symbol`, `bytes`
    /// (raw memory: a struct value or `tracemem()`).
    pub kind: String,
    /// Integers: width in bytes of the C type.
    pub bytes: Option<u8>,
    /// Integers: whether the C type is signed.
    pub signed: Option<bool>,
}

/// One aggregation variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggregationSchema {
    /// Its name without `@` (`""` for `@`).
    pub name: String,
    /// Its function (`count`, `quantize`, ...).
    pub function: String,
    /// The D types of its keys, in order (empty when unkeyed).
    pub keys: Vec<String>,
}

impl Schema {
    /// The schema of `checked`, compiled into `layout`, with names from `map`.
    pub(crate) fn of(checked: &CheckedProgram, layout: &Layout, map: &SourceMap) -> Schema {
        let clauses = checked
            .clauses
            .iter()
            .map(|c| {
                let mut exprs = Vec::new();
                collect(&c.body, &mut exprs);
                // The layout's field kinds for this clause's recording actions, in order.
                let kinds: Vec<FieldKind> = layout
                    .records
                    .iter()
                    .find(|r| r.clause == c.index)
                    .map(|r| {
                        r.actions
                            .iter()
                            .filter(|a| {
                                matches!(
                                    a.action,
                                    RecordAction::Trace
                                        | RecordAction::Stack
                                        | RecordAction::Printf { .. }
                                        | RecordAction::System { .. }
                                )
                            })
                            .flat_map(|a| a.fields.iter().map(|f| f.kind.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                let same = kinds.len() == exprs.len();
                let fields = exprs
                    .iter()
                    .enumerate()
                    .map(|(i, (action, e))| {
                        let kind = if same { kinds.get(i) } else { None };
                        field(action, e, kind, map)
                    })
                    .collect();
                ClauseSchema {
                    index: c.index,
                    descriptions: c.descriptions.clone(),
                    probes: c.probes.len(),
                    fields,
                }
            })
            .collect();
        let aggregations = checked
            .aggregations
            .iter()
            .map(|a| AggregationSchema {
                name: a.name.clone(),
                function: a.func.name().to_string(),
                keys: a.keys.iter().map(ToString::to_string).collect(),
            })
            .collect();
        Schema {
            clauses,
            aggregations,
        }
    }
}

/// The recorded expressions of `body` in order, with their action's name.
fn collect<'a>(body: &'a [TStmt], out: &mut Vec<(&'static str, &'a TExpr)>) {
    for s in body {
        match s {
            TStmt::Action(Action::Trace(e), _) => out.push(("trace", e)),
            TStmt::Action(Action::Printf { args, .. }, _) => {
                out.extend(args.iter().map(|e| ("printf", e)))
            }
            TStmt::Action(Action::System { args, .. }, _) => {
                out.extend(args.iter().map(|e| ("system", e)))
            }
            TStmt::If { then, els, .. } => {
                collect(then, out);
                collect(els, out);
            }
            _ => {}
        }
    }
}

fn field(action: &str, e: &TExpr, kind: Option<&FieldKind>, map: &SourceMap) -> FieldSchema {
    let (k, bytes, signed) = match kind {
        Some(FieldKind::Int { bytes, signed }) => ("int", Some(*bytes), Some(*signed)),
        Some(FieldKind::Str { .. }) => ("string", None, None),
        Some(FieldKind::Stack { .. }) => ("stack", None, None),
        Some(FieldKind::Sym(_)) => ("symbol", None, None),
        Some(FieldKind::Bytes { .. }) => ("bytes", None, None),
        None => ("unknown", None, None),
    };
    FieldSchema {
        name: map.slice(e.span).trim().to_string(),
        action: action.to_string(),
        ty: e.ty.to_string(),
        kind: k.to_string(),
        bytes,
        signed,
    }
}
