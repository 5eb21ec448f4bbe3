//! The program behind `bench/usdt-bench.sh`: the cost of a probe site, sightline-usdt's against
//! the crates.io `usdt` crate's (oxidecomputer), disabled and traced.
//!
//! ```text
//! usdt-compare disabled ITERATIONS REPEATS   # loop with no probe / a disabled probe of each crate
//! usdt-compare traced ITERATIONS REPEATS     # fire each crate's probe (run under bpftrace -c)
//! ```
//! Prints `key value` lines: `ns_per_iter.<loop> <ns>` (the best of REPEATS runs) and, for
//! `traced`, the semaphore values seen.

use std::hint::black_box;
use std::time::Instant;

sightline_usdt::provider! {
    /// Sightline's probe.
    mod sightline_bench {
        /// One hit, its loop index.
        fn hit(i: u64);
        /// A probe whose argument is expensive to build (a formatted string).
        fn text(s: &str);
    }
}

/// The `usdt` crate's probe (same shape: one u64).
#[usdt::provider]
mod oxide_bench {
    fn hit(i: u64) {}
}

#[inline(never)]
fn loop_none(n: u64) -> f64 {
    let t = Instant::now();
    for i in 0..n {
        black_box(i);
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

#[inline(never)]
fn loop_sightline(n: u64) -> f64 {
    let t = Instant::now();
    for i in 0..n {
        black_box(i);
        sightline_usdt::probe!(sightline_bench::hit, || (i,));
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

#[inline(never)]
fn loop_sightline_lazy(n: u64) -> f64 {
    let t = Instant::now();
    for i in 0..n {
        black_box(i);
        // Disabled: the format! never runs.
        sightline_usdt::probe!(sightline_bench::text(&format!("item {i}")));
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

#[inline(never)]
fn loop_oxide(n: u64) -> f64 {
    let t = Instant::now();
    for i in 0..n {
        black_box(i);
        oxide_bench::hit!(|| i);
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: usdt-compare disabled|traced ITERATIONS REPEATS";
    let mode = args.get(1).expect(usage).as_str();
    let n: u64 = args.get(2).and_then(|v| v.parse().ok()).expect(usage);
    let reps: u32 = args.get(3).and_then(|v| v.parse().ok()).expect(usage);
    // Registration is a no-op on Linux (the notes are all there is) but part of the crate's contract.
    usdt::register_probes().expect("usdt::register_probes");

    let mut best = [f64::INFINITY; 4];
    let loops: &[(&str, fn(u64) -> f64)] = match mode {
        "disabled" => &[
            ("none", loop_none),
            ("sightline", loop_sightline),
            ("sightline_lazy", loop_sightline_lazy),
            ("usdt", loop_oxide),
        ],
        "traced" => &[("sightline", loop_sightline), ("usdt", loop_oxide)],
        _ => panic!("{usage}"),
    };
    // Interleave the loops so that machine noise hits each alike; keep the best run of each.
    for _ in 0..reps {
        for (k, (_, f)) in loops.iter().enumerate() {
            best[k] = best[k].min(f(n));
        }
    }
    for (k, (name, _)) in loops.iter().enumerate() {
        println!("ns_per_iter.{name} {:.4}", best[k]);
    }
    println!("sightline_semaphore {}", sightline_bench::hit::semaphore().count());
}
