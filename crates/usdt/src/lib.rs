//! Typed statically defined probes (USDT) for Rust programs.
//!
//! A program declares a *provider* and its *probes* with [`provider!`]; each probe fires with typed
//! arguments through its `fire` function or the lazy [`probe!`] macro. On Linux x86-64 and aarch64
//! every probe site is a nop described by a SystemTap v3 `.note.stapsdt` note (the format of
//! sys/sdt.h), so `sightline probe`, bpftrace, SystemTap, `readelf -n` and gdb's `info probes` all
//! see it. On other targets the macros compile to code that never fires.
//!
//! The main items:
//! - [`provider!`]: declares `mod PROVIDER { SEMAPHORES, mod PROBE { semaphore(), is_enabled(), fire(..) } }`;
//! - [`probe!`]: fires a probe, evaluating its arguments only when the probe is enabled;
//! - [`Semaphore`]: the per-probe `u16` a tracer makes non-zero to enable a probe;
//! - [`Arg`]: how a Rust value becomes an SDT argument (integers, `bool`, `char`, pointers, `&str`,
//!   `&CStr`, [`Json`]); byte slices `&[u8]` are passed as pointer and length.
//!
//! ```
//! sightline_usdt::provider! {
//!     /// Probes of a cache.
//!     pub mod cache {
//!         /// A lookup: key, hit or miss.
//!         fn lookup(key: &str, hit: bool);
//!     }
//! }
//! # let key = "k";
//! sightline_usdt::probe!(cache::lookup, || (key, true));
//! ```
//!
//! # Cost
//!
//! A disabled probe is one relaxed 16-bit load of its semaphore and a not-taken branch; arguments,
//! string copies and JSON are built only behind that branch. An enabled probe executes a 5-byte
//! nop that the kernel turns into a uprobe trap.
//!
//! # Semaphores
//!
//! Each probe's semaphore lives in the `.probes` section and its link-time address is in the note.
//! A tracer enables the probe by incrementing it, either through the kernel's uprobe reference
//! counter (`perf_event_open` with a `ref_ctr_offset`, Linux 4.20+) or by writing the process's
//! memory (`/proc/PID/mem`, `process_vm_writev`); the probe reads it afresh at every site, so both
//! work, and several tracers can count it up and down. See `docs/usdt.md` for the lld layout in
//! which the kernel's counter lands on the wrong mapping, and how Sightline copes.
//!
//! Sources: sys/sdt.h of systemtap-sdt-dev (`_SDT_ASM_BODY`, `_SDT_ARGFMT`), the SystemTap wiki
//! page "UserSpaceProbeImplementation", and DTrace's USDT chapter (Dynamic Tracing Guide,
//! "Statically Defined Tracing for User Applications") for the provider/probe model and the
//! `__`-for-`-` naming.
#![deny(missing_docs)]

mod arg;
mod macros;
mod site;

pub use arg::{Arg, STR_MAX, Staged, StrCopy};
#[cfg(feature = "json")]
pub use arg::{Json, JsonText};

use core::sync::atomic::{AtomicU16, Ordering};

/// True when this target gets real probe sites and notes (Linux on x86-64 or aarch64); elsewhere
/// probes compile to code that never fires.
pub const SUPPORTED: bool = cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
));

/// A probe's semaphore: an unsigned 16-bit counter, non-zero while at least one tracer has the
/// probe enabled (sys/sdt.h's `provider_name_semaphore`, an `unsigned short` in `.probes`).
///
/// Tracers change it from outside the process (the kernel's uprobe reference counter or a write
/// to the process's memory), so it is read with an atomic load at every check and never cached.
/// The program itself only reads it.
#[repr(transparent)]
pub struct Semaphore(AtomicU16);

impl Semaphore {
    /// A semaphore at zero (probe disabled). Used by [`provider!`] for each probe's static.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Semaphore(AtomicU16::new(0))
    }

    /// True while the counter is non-zero. One relaxed 16-bit load.
    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }

    /// The counter's current value: how many tracers enabled the probe (as far as they counted).
    pub fn count(&self) -> u16 {
        self.0.load(Ordering::Relaxed)
    }

    /// The semaphore's run-time address in this process (link-time address in the note plus the
    /// load bias of a PIE). For diagnostics and tests.
    pub fn addr(&self) -> usize {
        self.0.as_ptr() as usize
    }
}

impl core::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Semaphore")
            .field("count", &self.count())
            .field("addr", &format_args!("{:#x}", self.addr()))
            .finish()
    }
}

/// True when `s` is a full stability triple `Name/Data/Class` (DTrace guide, "Stability"): the
/// first two of `Internal`, `Private`, `Obsolete`, `External`, `Unstable`, `Evolving`, `Stable`,
/// `Standard`, the class one of `Unknown`, `CPU`, `Platform`, `Group`, `ISA`, `Common`, spelled so.
/// [`provider!`] checks a declared stability with it at compile time.
#[doc(hidden)]
pub const fn __valid_stability(s: &str) -> bool {
    const LEVELS: [&str; 8] = [
        "Internal", "Private", "Obsolete", "External", "Unstable", "Evolving", "Stable", "Standard",
    ];
    const CLASSES: [&str; 6] = ["Unknown", "CPU", "Platform", "Group", "ISA", "Common"];
    /// True when `b[from..to]` is one of `names`.
    const fn one_of(b: &[u8], from: usize, to: usize, names: &[&str]) -> bool {
        let mut k = 0;
        while k < names.len() {
            let n = names[k].as_bytes();
            if n.len() == to - from {
                let mut i = 0;
                while i < n.len() && n[i] == b[from + i] {
                    i += 1;
                }
                if i == n.len() {
                    return true;
                }
            }
            k += 1;
        }
        false
    }
    let b = s.as_bytes();
    // The positions of the two slashes.
    let (mut first, mut second, mut i) = (usize::MAX, usize::MAX, 0);
    while i < b.len() {
        if b[i] == b'/' {
            if first == usize::MAX {
                first = i;
            } else if second == usize::MAX {
                second = i;
            } else {
                return false;
            }
        }
        i += 1;
    }
    second != usize::MAX
        && one_of(b, 0, first, &LEVELS)
        && one_of(b, first + 1, second, &LEVELS)
        && one_of(b, second + 1, b.len(), &CLASSES)
}

#[cfg(test)]
mod tests {
    use super::*;

    provider! {
        /// A provider declaring its stability.
        mod stable_unit {
            #![stability = "Evolving/Evolving/Common"]
            /// One string.
            fn one(s: &str);
        }
    }

    provider! {
        /// A provider for unit tests.
        mod unit {
            /// Every argument kind.
            fn all(a: u8, b: i16, c: u32, d: i64, e: bool, f: &str, g: &[u8], h: char);
            /// None.
            fn none();
            /// sys/sdt.h's maximum, 12 note arguments (here 10 declared, two of them slices).
            fn twelve(a: u64, b: i64, c: u32, d: &[u8], e: i8, f: &str, g: u16, h: &[u8], i: bool, j: usize);
        }
    }

    #[test]
    fn declared_shapes() {
        assert_eq!(unit::PROVIDER, "unit");
        assert_eq!(unit::all::NAME, "all");
        assert_eq!(unit::all::ARG_SIZES, &[1, -2, 4, -8, 1, 8, 8, 8, 4]);
        assert_eq!(unit::all::ARGS[6], ("g", "&[u8]"));
        assert_eq!(unit::all::ARGS[5], ("f", "&str"));
        assert!(unit::none::ARG_SIZES.is_empty());
        assert_eq!(unit::twelve::ARG_SIZES.len(), 12);
        probe!(unit::twelve(1, -2, 3, b"ab", -5, "six", 7, b"", true, 10));
    }

    #[test]
    fn stability_is_declared_or_private() {
        assert_eq!(stable_unit::STABILITY, "Evolving/Evolving/Common");
        assert_eq!(unit::STABILITY, "Private/Private/Unknown");
        assert!(__valid_stability("Stable/Evolving/ISA"));
        assert!(!__valid_stability("Stable/Evolving"));
        assert!(!__valid_stability("stable/Evolving/ISA"));
        assert!(!__valid_stability("Stable/Evolving/ISA/"));
        assert!(!__valid_stability("Stable/Solid/ISA"));
        assert!(!__valid_stability(""));
    }

    #[test]
    fn disabled_probes_do_not_evaluate_arguments() {
        assert!(!unit::none::is_enabled());
        let mut evaluated = false;
        probe!(unit::all, || {
            evaluated = true;
            (1u8, -2i16, 3u32, -4i64, true, "s", &b"xy"[..], 'c')
        });
        probe!(unit::all(
            {
                evaluated = true;
                1
            },
            2,
            3,
            4,
            false,
            "s",
            b"",
            'c'
        ));
        assert!(!evaluated);
        unit::none::fire();
        assert_eq!(unit::none::semaphore().count(), 0);
    }
}
