//! DTrace output formats for `sightline probe` (pure: no system calls).
//!
//! - [`value`]: [`Value`], one decoded record field or aggregation key ([`Int`] with its C width and
//!   signedness, strings, symbols, stacks).
//! - [`printf`]: [`printf::parse`] a format into [`printf::Piece`]s (sema checks argument kinds with
//!   [`printf::arg_slots`]) and [`printf::format`] / [`printf::format_printa`] with DTrace's
//!   conversions.
//!
//! Sources: the DTrace guide (chapters "Output Formatting", "Aggregations", "Data Recording
//! Actions", "Options and Tunables") and, for byte-level layout, libdtrace's consumer
//! (`dt_consume.c`, `dt_printf.c`, `dt_aggregate.c`). Text layouts are documented in
//! `docs/probe-output.md`, JSON records in `docs/probe-json.md`.
#![deny(missing_docs)]

pub mod agg;
pub mod output;
pub mod printf;
pub mod value;

pub use value::{Int, Stack, Symbol, Value};
