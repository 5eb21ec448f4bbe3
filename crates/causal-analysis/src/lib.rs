//! Causal graph reconstruction, critical path and views (pure: no I/O, no system calls).
//!
//! The main types:
//! - [`Event`] (with its incoming edges, [`Parent`]): one X-Trace report or one OTLP span boundary;
//! - [`TaskGraph`]: one task rebuilt from its events, with the structural [`Problem`]s found
//!   (cycles, edges from unknown events, several roots, clock skew between hosts);
//! - [`CriticalPath`]: Jaeger's rule for span trees and happened-before for DAGs with joins
//!   ([`Rule`], `docs/critical-path.md`), with time per agent, host and process;
//! - [`SkewAdjustment`]: per-host clock corrections estimated from RPC pairs and edges between
//!   hosts (Jaeger's and Zipkin's adjusters), applied before analysis and display;
//! - [`layout::layered`]: a layered drawing of the DAG ([`layout::DagLayout`]) for the web UI;
//! - the views in [`render`]: indented text that shows forks and joins, Graphviz DOT, JSON;
//! - [`Comparison`] of two tasks (per agent and per operation) and [`Accounting`] of a task's
//!   thread time and reported resources per process and agent.
//!
//! The model follows X-Trace (Fonseca, Porter, Katz, Shenker, Stoica, "X-Trace: A Pervasive
//! Network Tracing Framework", NSDI 2007) and its Report ver 1.0 fields.
#![deny(missing_docs)]

pub mod accounting;
pub mod compare;
pub mod critical;
pub mod graph;
pub mod layout;
pub mod model;
pub mod render;
pub mod skew;

pub use accounting::{Accounting, Usage};
pub use compare::Comparison;
pub use critical::{CriticalPath, Rule, Share, Step};
pub use graph::{Edge, Problem, TaskGraph, fmt_duration};
pub use model::{AttrValue, EdgeKind, Event, Parent, infer_span_nesting, parse_pid};
pub use skew::{HostSkew, SkewAdjustment};
