//! X-Trace instrumentation library: metadata, context propagation, reports and the reporter.
#![deny(missing_docs)]
