//! Typed statically defined probes (USDT) for Rust programs: SystemTap v3 notes, semaphores, 5-byte nop sites.
#![deny(missing_docs)]
