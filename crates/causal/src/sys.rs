//! The only module that calls the C library directly: clocks, the thread id, `atexit`.
//!
//! # Why is this needed?
//! `std` exposes neither the kernel thread id nor `CLOCK_MONOTONIC`/`CLOCK_REALTIME` as
//! nanosecond integers (`Instant` is opaque), and has no exit hook; reports need all three.

use std::io;

/// A clock read through `clock_gettime(2)`, in ns.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call; the clock ids passed
    // (CLOCK_MONOTONIC, CLOCK_REALTIME) exist on every Linux kernel, so the call cannot fail
    // (clock_gettime(2): EINVAL only for unknown clocks, EFAULT only for bad pointers).
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime({clock})");
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// `CLOCK_MONOTONIC` in ns (vDSO, no system call on x86-64).
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME` in ns since the Unix epoch.
pub(crate) fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// The calling thread's kernel thread id (`gettid(2)`, available since Linux 2.4.11).
pub(crate) fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments, cannot fail and touches no memory (gettid(2)).
    let tid = unsafe { libc::gettid() };
    tid as u32
}

/// Registers `f` to run at a normal process exit (return from `main` or `std::process::exit`),
/// through `atexit(3)`.
///
/// # Errors
/// The `atexit` failure (it fails only when its table is full).
pub(crate) fn at_exit(f: extern "C" fn()) -> io::Result<()> {
    // SAFETY: `f` is a plain `extern "C" fn()` with static lifetime, as atexit(3) requires; it is
    // called once, on the exiting thread, after `main` returns or `exit` is called.
    let rc = unsafe { libc::atexit(f) };
    if rc != 0 {
        return Err(io::Error::other("atexit(3) failed: its handler table is full"));
    }
    Ok(())
}
