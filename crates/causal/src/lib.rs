//! X-Trace instrumentation library: metadata, context propagation, reports and the reporter.
//!
//! X-Trace (Fonseca, Porter, Katz, Shenker, Stoica, NSDI 2007) makes a task's causality explicit:
//! every event is reported with the task's id, its own id, and edges to the events that caused it,
//! and a collector rebuilds the task as a graph across threads, processes and machines. Unlike a
//! span tree, an event can have several parents (a join after parallel work).
//!
//! The main types and entry points:
//! - [`Metadata`] ([`TaskId`], [`OpId`]): X-Trace v1 metadata, binary and text forms
//!   ([`metadata`]); [`w3c::TraceParent`]: W3C Trace Context, mapped to and from TaskIds.
//! - [`Context`]: a task and the event(s) the next event follows; the thread's current context
//!   ([`current`], [`Context::attach`]); [`report()`], [`event()`], [`start_task`], [`Context::join`].
//! - Propagation: [`thread::spawn`], [`future::InContextExt::in_context`], HTTP headers and child
//!   processes ([`propagation`]).
//! - [`layer::CausalLayer`]: a `tracing` layer reporting spans and events.
//! - [`Report`]: one event's report, with the X-Trace Report 1.0 text codec and the native binary
//!   codec; [`wire`] frames reports on a stream; [`reporter`] sends them from a background thread
//!   (bounded queue, batching, drop counters, [`reporter::flush`]).
//!
//! Tests of instrumented code check reports with the expectation-based mock collector of the
//! `causal-mock` crate (a dev-dependency, apart from this library as `tracing-mock` is).
//!
//! Formats: `docs/causal-metadata.md`, `docs/causal-wire.md`.
//!
//! ```no_run
//! let ctx = causal::start_task("request", [("path", "/index".into())]);
//! let a = causal::thread::spawn(|| { causal::report("backend a", []); });
//! let b = causal::thread::spawn(|| { causal::report("backend b", []); });
//! a.join().unwrap();
//! b.join().unwrap();
//! causal::report("joined", []); // two parents: "backend a" and "backend b"
//! # let _ = ctx;
//! ```
#![deny(missing_docs)]

mod clock;
mod context;
pub mod future;
mod ids;
pub mod layer;
pub mod metadata;
mod probes;
pub mod propagation;
pub mod publish;
pub mod report;
pub mod reporter;
mod sys;
mod text;
pub mod thread;
pub mod w3c;
pub mod wire;

pub use context::{
    Context, ContextGuard, EventBuilder, Value, current, event, join_current, report, set_activity,
    set_baggage_item, set_current, start_task, take_current,
};
pub use future::InContextExt;
pub use metadata::{Metadata, MetadataError, OpId, TaskId};
pub use report::{Report, ReportError};
pub use reporter::{Config, Sink, Stats, dropped, flush, stats};
pub use wire::WireFormat;
