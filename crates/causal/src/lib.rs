//! X-Trace instrumentation library: metadata, context propagation, reports and the reporter.
//!
//! The main types:
//! - [`metadata::Metadata`] (with [`metadata::TaskId`] and [`metadata::OpId`]): X-Trace v1
//!   metadata, binary and text forms.
//! - [`report::Report`]: one event's report, with the X-Trace Report 1.0 text codec and the native
//!   binary codec; [`wire`] frames reports on a stream (4-byte big-endian length prefix).
//!
//! Formats are specified in `docs/causal-metadata.md` and `docs/causal-wire.md`.
#![deny(missing_docs)]

mod ids;
pub mod metadata;
pub mod report;
pub mod wire;

pub use metadata::{Metadata, MetadataError, OpId, TaskId};
pub use report::{Report, ReportError};
pub use wire::WireFormat;
