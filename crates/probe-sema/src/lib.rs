//! D semantic analysis: name resolution, types, probe-description matching, checks (pure, no system
//! calls).
//!
//! Main types: [`Catalog`] (the [`Provider`]s the runtime plugs in, seen by the analysis as a
//! [`ProbeCatalog`]: which probes exist and what their arguments are, [`ProbeInfo`], [`ProbeArgs`], [`ProbeKind`]), [`SemaOptions`] (macro arguments,
//! `$target`, `-x` options), and the output [`CheckedProgram`] (typed clauses, resolved variables and
//! aggregations, see [`checked`]). [`parse_tracepoint_format`] reads tracefs `format` files;
//! [`glob_match`] is DTrace's probe-description field matching. [`argspec::ArgSpec`] is a USDT
//! argument's typed location, shared by probe-user, the catalog and probe-codegen.
#![deny(missing_docs)]

pub mod analyze;
pub mod argspec;
pub mod btf;
pub mod catalog;
pub mod checked;
pub mod consts;
pub mod dump;
pub mod tracefs;
pub mod types;

pub use analyze::{
    PROBE_FIELD_LIMITS, STACKFRAMES_MAX, STRSIZE_MAX, analyze, needs_kernel_types, needs_kfuncs,
    needs_task_offsets, needs_user_symbols,
};
pub use catalog::{
    Catalog, DtraceProbe, ProbeArgs, ProbeCatalog, ProbeDescPattern, ProbeInfo, ProbeKind,
    Provider, StaticCatalog, TpField, UsdtArg, UsdtArgType, field_matches, glob_match,
};
pub use checked::{
    Action, AggFunc, AggId, Aggregation, Builtin, CheckedClause, CheckedProgram, Options, Subr,
    TExpr, TExprKind, TStmt, VarAccess, VarId, VarScope, Variable,
};
pub use tracefs::{
    FormatFileError, TracepointFormat, parse_tracepoint_format, parse_tracepoint_format_full,
};
pub use types::{SymKind, Type, usual_arithmetic};

/// Inputs to the analysis besides the program and the catalog.
#[derive(Clone, Debug, Default)]
pub struct SemaOptions {
    /// Macro arguments `$1`, `$2`, ... (index 0 is `$1`). `$0` is [`SemaOptions::script_name`].
    pub macro_args: Vec<String>,
    /// The script name for `$0` (e.g. the `-s` path).
    pub script_name: Option<String>,
    /// `$target` (from `-c` or `-p`); using `$target` without it is an error.
    pub target_pid: Option<u32>,
    /// The consumer's own pid, for `$pid`.
    pub pid: Option<u32>,
    /// Options given with `-x name[=value]` (they override `#pragma D option`).
    pub options: Vec<(String, Option<String>)>,
    /// Accept probe descriptions that match no probes (DTrace's `-Z`); such clauses are dropped.
    pub allow_zero_matches: bool,
    /// Kernel types from BTF (`btf::Btf::parse` of `/sys/kernel/btf/vmlinux`): enables structure
    /// member access (`curthread->comm`, `((struct task_struct *)p)->pid`, pointer fields of
    /// tracepoints). `None`: member access is an error saying so.
    pub kernel_types: Option<std::sync::Arc<btf::Btf>>,
}
