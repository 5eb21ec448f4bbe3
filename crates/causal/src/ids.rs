//! Event and task id generation: a per-thread xorshift generator seeded from the OS.
//!
//! # Why not `rand`?
//! An event id is made on every reported event, on the instrumented thread; it must cost a few
//! nanoseconds and never allocate or lock. A per-thread `xorshift64*` (Vigna, "An experimental
//! exploration of Marsaglia's xorshift generators, scrambled", 2016) seeded once per thread from
//! std's randomly keyed SipHash is enough: ids need to be unique with high probability, not secret.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

thread_local! {
    static STATE: Cell<u64> = const { Cell::new(0) };
}

fn seed() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    let addr = &h as *const _ as usize as u64;
    h.write_u64(addr);
    h.finish() | 1
}

/// A random 64-bit value from this thread's generator (never the same state twice in a row).
#[inline]
pub(crate) fn random_u64() -> u64 {
    STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            x = seed();
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// Makes this thread's generator reseed on its next use. Called in the child of a `fork(2)`, whose
/// copy of the state would otherwise give the same ids as the parent.
pub(crate) fn reseed_after_fork() {
    let _ = STATE.try_with(|s| s.set(0));
}

/// A random non-zero 64-bit value, for OpIds (an all-zero OpId means "no parent" in old reports).
#[inline]
pub(crate) fn random_nonzero_u64() -> u64 {
    loop {
        let v = random_u64();
        if v != 0 {
            return v;
        }
    }
}
