//! Probe providers, BPF load/attach, ring-buffer and map consumers.
//!
//! Kernel calls go through probe-sys (the one chokepoint for bpf(2) and perf_event_open(2)).
//!
//! Main modules, in pipeline order: [`compile`] (the compile driver: parse → kernel BTF →
//! analysis → code generation, [`compile::compile`]), [`catalog`] (the kernel providers `dtrace`,
//! `profile`, `syscall`, `proc` and tracefs tracepoints, and [`catalog::system`]: one probe-sema
//! `Catalog` with probe-user's pid and USDT providers), [`session`] ([`session::Session`]: maps
//! created, programs loaded and attached, records and aggregations read), [`ringbuf`] (the
//! mmap'd ring-buffer consumer), [`run`] ([`run::Consumer`]: the dtrace(1M)-style life cycle and
//! printing through probe-format), [`spec`] (speculative records held until their commit or
//! discard), [`user`] (uprobe attachment, the held command's entry snapshot, user-space symbols), [`pin`] (objects pinned under bpffs: anonymous
//! enablings and postmortem run directories, with their JSON manifest).
#![deny(missing_docs)]

pub mod catalog;
pub mod compile;
pub mod pin;
pub mod ringbuf;
pub mod run;
pub mod session;
pub mod spec;
pub mod user;
