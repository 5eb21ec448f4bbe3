//! Typed D program to eBPF instructions and map layout (pure: no system calls).
//!
//! Main types: [`insn::Asm`] (the instruction encoder with labels, per the kernel's
//! `Documentation/bpf/standardization/instruction-set.rst`).
#![deny(missing_docs)]

pub mod insn;
