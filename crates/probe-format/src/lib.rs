//! DTrace output formats for `sightline probe` (pure: no system calls).
//!
//! - [`value`]: [`Value`], one decoded record field or aggregation key ([`Int`] with its C width and
//!   signedness, strings, [`Symbol`]s, [`Stack`]s).
//! - [`printf`]: [`printf::parse`] a format into [`printf::Piece`]s (sema checks argument kinds with
//!   [`printf::arg_slots`]) and [`printf::format`] / [`printf::format_printa`] with DTrace's
//!   conversions.
//! - [`agg`]: the aggregating functions ([`agg::AggFunc`]), the BPF value layout and its decoding
//!   ([`agg::AggData`]), the bucket index functions the code generator mirrors
//!   ([`agg::quantize_bucket`], [`agg::lquantize_bucket`], [`agg::llquantize_bucket`]), the
//!   consumer's model ([`agg::Aggregation`]) with normalize/denormalize/trunc/clear, and DTrace's
//!   sort order ([`agg::SortOptions`]).
//! - [`output`]: DTrace's text layouts byte for byte: the `CPU ID FUNCTION:NAME` lines,
//!   `trace()` data, keys, distribution tables, `printa()` and the print at exit.
//! - [`event`]: the typed events of a run ([`event::Event`]: records, aggregation snapshots,
//!   drops, errors, the exit), with `serde`; their JSON is the `--json` schema.
//! - [`json`]: strict JSON Lines records (`--json`), the serialization of [`event::Event`]s.
//! - [`civil`]: days since 1970 to and from civil dates (printf's `%Y`/`%T`, and the binary's
//!   causal views).
//!
//! Sources: the DTrace guide (chapters "Output Formatting", "Aggregations", "Data Recording
//! Actions", "Options and Tunables") and, for byte-level layout, libdtrace's consumer
//! (`dt_consume.c`, `dt_printf.c`, `dt_aggregate.c`, `dt_handle.c`) and the DTrace kernel's
//! aggregating functions. Text layouts are documented in `docs/probe-output.md`, JSON records in
//! `docs/probe-json.md`.
#![deny(missing_docs)]

pub mod agg;
pub mod civil;
pub mod event;
pub mod json;
pub mod output;
pub mod print;
pub mod printf;
pub mod value;

pub use value::{Int, Stack, Symbol, Value};
