//! Typed D program to eBPF instructions and map layout (pure).
#![deny(missing_docs)]
