//! Probe providers, BPF load/attach, ring-buffer and map consumers, aggregation printing, output formats.
#![deny(missing_docs)]
