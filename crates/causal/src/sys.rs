//! The only module that calls the C library directly: clocks, the thread id, `atexit`,
//! `pthread_atfork`, and the one per-process pointer that a fork resets.
//!
//! # Why is this needed?
//! `std` exposes neither the kernel thread id nor `CLOCK_MONOTONIC`/`CLOCK_REALTIME` as
//! nanosecond integers (`Instant` is opaque), and has no exit hook; reports need all three.

use std::io;

/// A clock read through `clock_gettime(2)`, in ns.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call; the clock ids passed
    // (CLOCK_MONOTONIC, CLOCK_REALTIME) exist on every Linux kernel, so the call cannot fail
    // (clock_gettime(2): EINVAL only for unknown clocks, EFAULT only for bad pointers).
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime({clock})");
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
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
        return Err(io::Error::other(
            "atexit(3) failed: its handler table is full",
        ));
    }
    Ok(())
}

/// Registers `f` to run in the child after every `fork(2)`, on the child's only thread, through
/// `pthread_atfork(3)`.
///
/// # Why is this needed?
/// A forked child (without `exec`) inherits the parent's memory but only the forking thread: the
/// reporter thread, and any lock it held, are copies with no thread behind them, and every
/// thread-local id generator would repeat the parent's ids.
///
/// # Errors
/// The `pthread_atfork` error (ENOMEM).
pub(crate) fn at_fork_child(f: unsafe extern "C" fn()) -> io::Result<()> {
    // SAFETY: `f` has static lifetime and takes no arguments, as pthread_atfork(3) requires; the
    // null prepare and parent handlers mean "none".
    let rc = unsafe { libc::pthread_atfork(None, None, Some(f)) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// A value belonging to one process: set once, leaked (it lives as long as the process), and
/// emptied in a forked child, which keeps only a pointer to its parent's for reading.
pub(crate) struct PerProcess<T: 'static> {
    current: std::sync::atomic::AtomicPtr<T>,
    parent: std::sync::atomic::AtomicPtr<T>,
}

impl<T: Sync + 'static> PerProcess<T> {
    pub(crate) const fn new() -> PerProcess<T> {
        PerProcess {
            current: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            parent: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// This process's value, if set.
    #[inline]
    pub(crate) fn get(&self) -> Option<&'static T> {
        let p = self.current.load(std::sync::atomic::Ordering::Acquire);
        // SAFETY: only `set` stores a non-null pointer here, and it comes from a `&'static T`
        // (a leaked box), so it is valid, aligned and never freed; `T: Sync` makes sharing it
        // between threads sound.
        unsafe { p.as_ref() }
    }

    /// Publishes this process's value (replacing none: callers check `get` under their lock).
    pub(crate) fn set(&self, v: &'static T) {
        self.current.store(
            std::ptr::from_ref(v).cast_mut(),
            std::sync::atomic::Ordering::Release,
        );
    }

    /// The value the parent had at the fork, in a forked child that has not set its own yet.
    pub(crate) fn before_fork(&self) -> Option<&'static T> {
        let p = self.parent.load(std::sync::atomic::Ordering::Acquire);
        // SAFETY: as in `get`: the pointer was `current`'s, a leaked `&'static T`.
        unsafe { p.as_ref() }
    }

    /// In a fork child: empties the value, keeping it readable through `before_fork`. Only atomic
    /// operations (async-signal-safe).
    pub(crate) fn forget_in_child(&self) {
        let p = self
            .current
            .swap(std::ptr::null_mut(), std::sync::atomic::Ordering::AcqRel);
        if !p.is_null() {
            self.parent.store(p, std::sync::atomic::Ordering::Release);
        }
    }
}

/// The CPU's time-stamp counter (`RDTSC`), in ticks; 0 on other architectures (where
/// [`tsc_is_monotonic_clock`] is false, so it is never used).
///
/// # Why is this needed?
/// `clock_gettime(CLOCK_MONOTONIC)` through the vDSO reads this same counter and then scales it
/// under a sequence lock, about 19 ns here; the event path needs only the raw read (a few ns),
/// and the reporter thread scales the ticks to `CLOCK_MONOTONIC` ns (`crate::clock`).
#[inline(always)]
pub(crate) fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC reads a register and touches no memory; every x86-64 CPU has it (the
        // TSD flag of CR4, which would make it fault outside ring 0, is clear under Linux unless
        // a process asks for it with `prctl(PR_SET_TSC, PR_TSC_SIGSEGV)`, which this library
        // never does, and `tsc_is_monotonic_clock` runs before the first read).
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Whether the TSC is what `CLOCK_MONOTONIC` counts with: the kernel's current clocksource is
/// `tsc` (`/sys/devices/system/clocksource/clocksource0/current_clocksource`, which the kernel
/// leaves only when its checks find the TSC unsynchronised between CPUs or unstable) and the CPU
/// flags in `/proc/cpuinfo` include `constant_tsc` (a fixed rate whatever the CPU frequency) and
/// `nonstop_tsc` (it counts in deep idle states too). Linux's `arch/x86/kernel/tsc.c` decides
/// the clocksource; `Documentation/admin-guide/clocksource.rst` names the file. False on other
/// architectures and when a file cannot be read.
pub(crate) fn tsc_is_monotonic_clock() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    if source.as_deref().map(str::trim).ok() != Some("tsc") {
        return false;
    }
    let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| {
            let has = |f: &str| l.split_whitespace().any(|x| x == f);
            has("constant_tsc") && has("nonstop_tsc")
        })
}
