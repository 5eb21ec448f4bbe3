//! X-Trace/OTLP collector: ingest, embedded SQLite store, queries.
#![deny(missing_docs)]
