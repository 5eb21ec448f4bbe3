//! Typed D program to eBPF instructions and map layout (pure: no system calls).
//!
//! Main types: [`insn::Asm`] (the instruction encoder with labels, per the kernel's
//! `Documentation/bpf/standardization/instruction-set.rst`), [`lower::compile`] (probe-sema's
//! `CheckedProgram` to a [`layout::Layout`]: maps, programs with their attach points, ring-buffer
//! record layouts and aggregation layouts; documented in `docs/probe-internals.md`), and
//! [`layout::ArgAccess`] (how `argN` is read per probe kind: raw tracepoint context, `pt_regs`,
//! USDT argument specs).
#![deny(missing_docs)]

pub mod disasm;
pub mod insn;
pub mod layout;
pub mod lower;

pub use layout::Layout;
pub use lower::{
    CodegenError, CodegenOptions, MAX_MAPS_PER_PROGRAM, MAX_PENDING_BRANCHES, MAX_PROCESSED_INSNS,
    compile,
};
