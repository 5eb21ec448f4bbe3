//! Typestate ptrace, tracee memory and seccomp filters: the unsafe boundary of record/replay.
#![deny(missing_docs)]
