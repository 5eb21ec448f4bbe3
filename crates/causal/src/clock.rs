//! Event timestamps: read cheaply on the reporting thread, turned into `CLOCK_MONOTONIC` ns on
//! the reporter thread.
//!
//! Where the kernel's `CLOCK_MONOTONIC` counts with the CPU's time-stamp counter
//! ([`crate::sys::tsc_is_monotonic_clock`]), an event's stamp is the raw TSC (a few ns instead of
//! the vDSO's ~19); elsewhere it is `CLOCK_MONOTONIC` itself. The reporter thread turns TSC
//! stamps into ns with [`Converter`]: pairs of (TSC, `CLOCK_MONOTONIC`) read together at least
//! [`MIN_SEGMENT_NS`] apart, and each stamp placed on the line through the two pairs around it
//! (or the nearest two). The result is continuous and increasing in the stamp, follows the
//! kernel's own rate (NTP slewing included) segment by segment, and is within the pairs' read
//! jitter (tens of ns) of what `clock_gettime` would have said. Reports keep `HRT` in
//! `CLOCK_MONOTONIC` ns (docs/causal-wire.md).

use std::sync::atomic::{AtomicU8, Ordering};

/// How stamps are read: not decided yet, the TSC, or `CLOCK_MONOTONIC`.
static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);
const UNDECIDED: u8 = 0;
const TSC: u8 = 1;
const MONOTONIC: u8 = 2;

/// This event's stamp: TSC ticks or `CLOCK_MONOTONIC` ns ([`Converter::to_ns`] tells which).
#[inline(always)]
pub(crate) fn stamp() -> u64 {
    match MODE.load(Ordering::Relaxed) {
        TSC => crate::sys::tsc(),
        MONOTONIC => crate::sys::monotonic_ns(),
        _ => stamp_first(),
    }
}

#[cold]
#[inline(never)]
fn stamp_first() -> u64 {
    decide();
    stamp()
}

/// Decides how stamps are read (once per process; a race decides the same twice).
fn decide() -> u8 {
    let m = MODE.load(Ordering::Acquire);
    if m != UNDECIDED {
        return m;
    }
    let m = if crate::sys::tsc_is_monotonic_clock() {
        TSC
    } else {
        MONOTONIC
    };
    MODE.store(m, Ordering::Release);
    m
}

/// The shortest TSC interval between two calibration pairs, in ns: over shorter ones the pairs'
/// read jitter would make the rate noisy.
pub(crate) const MIN_SEGMENT_NS: u64 = 1_000_000;

/// One calibration pair: a TSC value and the `CLOCK_MONOTONIC` ns read with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pair {
    pub(crate) tsc: u64,
    pub(crate) ns: u64,
}

/// Reads a pair: the TSC between two `CLOCK_MONOTONIC` reads, paired with their midpoint; the
/// closest of three tries (a try interrupted by the scheduler has reads far apart).
fn read_pair() -> Pair {
    let mut best: Option<(u64, Pair)> = None;
    for _ in 0..3 {
        let a = crate::sys::monotonic_ns();
        let tsc = crate::sys::tsc();
        let b = crate::sys::monotonic_ns();
        let spread = b.saturating_sub(a);
        let p = Pair {
            tsc,
            ns: a + spread / 2,
        };
        if best.is_none_or(|(s, _)| spread < s) {
            best = Some((spread, p));
        }
    }
    best.map(|(_, p)| p).unwrap_or(Pair { tsc: 0, ns: 0 })
}

/// Turns stamps into `CLOCK_MONOTONIC` ns on the reporter thread (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Converter {
    tsc: bool,
    /// The two latest pairs, older first (`prev.tsc < last.tsc`).
    prev: Pair,
    last: Pair,
}

impl Converter {
    /// A converter for this process's stamps; with the TSC, takes two pairs
    /// [`MIN_SEGMENT_NS`] apart (the reporter thread waits that long once, at its start).
    pub(crate) fn new() -> Converter {
        let tsc = decide() == TSC;
        let first = if tsc {
            read_pair()
        } else {
            Pair { tsc: 0, ns: 0 }
        };
        let mut c = Converter {
            tsc,
            prev: first,
            last: first,
        };
        if tsc {
            std::thread::sleep(std::time::Duration::from_nanos(MIN_SEGMENT_NS));
            c.push(read_pair());
        }
        c
    }

    /// Takes a new pair when [`MIN_SEGMENT_NS`] have passed since the last (call it before
    /// converting a batch, so that the batch's stamps lie before the last pair).
    pub(crate) fn refresh(&mut self) {
        if self.tsc && crate::sys::monotonic_ns() >= self.last.ns + MIN_SEGMENT_NS {
            self.push(read_pair());
        }
    }

    /// Adds pair `p` as the latest (ignored unless later than the last in both clocks).
    pub(crate) fn push(&mut self, p: Pair) {
        if p.tsc > self.last.tsc && p.ns > self.last.ns {
            self.prev = self.last;
            self.last = p;
        }
    }

    /// `stamp` in `CLOCK_MONOTONIC` ns: on the line through the two latest pairs (a stamp read
    /// before `prev` takes the same line, backwards; one after `last`, forwards); a
    /// `CLOCK_MONOTONIC` stamp as it is.
    pub(crate) fn to_ns(&self, stamp: u64) -> u64 {
        if !self.tsc {
            return stamp;
        }
        Converter::on_line(self.prev, self.last, stamp)
    }

    /// `stamp` on the line through `a` and `b` (`a.tsc < b.tsc`; with `a == b`, `b.ns`).
    pub(crate) fn on_line(a: Pair, b: Pair, stamp: u64) -> u64 {
        let dt = b.tsc.wrapping_sub(a.tsc);
        if dt == 0 {
            return b.ns;
        }
        let dns = b.ns.saturating_sub(a.ns) as i128;
        // Exact integer arithmetic: ticks from `b` scaled by dns / dt.
        let ticks = stamp as i128 - b.tsc as i128;
        let ns = b.ns as i128 + ticks * dns / dt as i128;
        ns.clamp(0, u64::MAX as i128) as u64
    }

    /// The converter of stamps that are `CLOCK_MONOTONIC` ns already (tests).
    #[cfg(test)]
    pub(crate) fn monotonic() -> Converter {
        let zero = Pair { tsc: 0, ns: 0 };
        Converter {
            tsc: false,
            prev: zero,
            last: zero,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_on_the_line_through_two_pairs() {
        // 3 ticks per ns (a 3 GHz TSC).
        let a = Pair {
            tsc: 3_000_000,
            ns: 5_000_000,
        };
        let b = Pair {
            tsc: 9_000_000,
            ns: 7_000_000,
        };
        assert_eq!(Converter::on_line(a, b, 9_000_000), 7_000_000);
        assert_eq!(Converter::on_line(a, b, 6_000_000), 6_000_000);
        assert_eq!(Converter::on_line(a, b, 9_000_300), 7_000_100, "after b");
        assert_eq!(Converter::on_line(a, b, 2_999_700), 4_999_900, "before a");
        assert_eq!(Converter::on_line(a, a, 1), 5_000_000, "one pair only");
        // Increasing in the stamp, however long the extrapolation.
        let mut last = 0;
        for s in (0..20_000_000u64).step_by(999_983) {
            let ns = Converter::on_line(a, b, s);
            assert!(ns >= last, "{s} -> {ns} after {last}");
            last = ns;
        }
    }

    #[test]
    fn pushes_keep_the_latest_two_increasing_pairs() {
        let mut c = Converter::monotonic();
        c.tsc = true;
        let p = |tsc, ns| Pair { tsc, ns };
        c.push(p(10, 100));
        c.push(p(20, 110));
        c.push(p(15, 120)); // TSC went back: ignored
        c.push(p(30, 110)); // ns did not advance: ignored
        assert_eq!((c.prev, c.last), (p(10, 100), p(20, 110)));
        c.push(p(40, 130));
        assert_eq!((c.prev, c.last), (p(20, 110), p(40, 130)));
        assert_eq!(c.to_ns(30), 120);
        assert_eq!(Converter::monotonic().to_ns(12_345), 12_345);
    }

    #[test]
    fn converted_stamps_match_the_monotonic_clock() {
        // On a machine whose monotonic clock counts with the TSC, a stamp converted with pairs
        // read around it lies between clock reads taken before and after it, give or take the
        // pairs' read jitter; elsewhere stamps are the clock itself.
        let before = crate::sys::monotonic_ns();
        let s = stamp();
        let after = crate::sys::monotonic_ns();
        let mut c = Converter::new();
        c.refresh();
        let ns = c.to_ns(s);
        let slack = 20_000;
        assert!(
            ns + slack >= before && ns <= after + slack,
            "{before} <= {ns} <= {after} (tsc: {})",
            c.tsc
        );
    }
}
