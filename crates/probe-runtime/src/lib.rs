//! Probe providers, BPF load/attach, ring-buffer and map consumers.
//!
//! Main modules: [`sys`] (every kernel call: bpf(2), perf_event_open(2), mount(2)), [`ringbuf`]
//! (the mmap'd ring-buffer consumer).
#![deny(missing_docs)]

pub mod ringbuf;
pub mod sys;
