//! Probe providers, BPF load/attach, ring-buffer and map consumers.
//!
//! Kernel calls go through probe-sys (the one chokepoint for bpf(2) and perf_event_open(2)).
//!
//! Main modules: [`compile`] (the compile driver: parse → kernel BTF → analysis → code
//! generation, [`compile::compile`]), [`ringbuf`] (the mmap'd ring-buffer consumer), [`catalog`] ([`catalog::KernelCatalog`], the providers
//! `dtrace`, `profile`, `syscall`, `proc` and tracefs tracepoints as probe-sema's `ProbeCatalog`),
//! [`session`] ([`session::Session`]: maps created, programs loaded and attached, records and
//! aggregations read), [`run`] ([`run::Consumer`]: the dtrace(1M)-style life cycle and printing
//! through probe-format), [`spec`] (speculative records held until their commit or discard),
//! [`user`] (the pid and USDT providers of probe-user in the catalog, their
//! attachment, user-space symbols).
#![deny(missing_docs)]

pub mod catalog;
pub mod compile;
pub mod ringbuf;
pub mod run;
pub mod session;
pub mod spec;
pub mod syscalls;
pub mod user;
