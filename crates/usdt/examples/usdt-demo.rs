//! A program with one USDT probe per argument kind, fired with known values.
//!
//! Used by the crate's tests (its notes are parsed back; bpftrace and `sightline probe` trace it)
//! and by the README's walkthrough. Every iteration fires, in order: `tick(i)`, `unsigned`,
//! `signed`, `flags`, `text`, `bytes`, `json`, `empty`, `iteration__done(i)` (declared in `shared/demo_probes.rs`).
//!
//! ```text
//! usdt-demo [--iterations N] [--interval-ms MS] [--semaphores]
//! ```
//! `--iterations 0` runs until killed. `--semaphores` prints each probe's semaphore (address and
//! count) and exits.

use std::time::Duration;

include!("shared/demo_probes.rs");

fn main() {
    let mut iterations: u64 = 1;
    let mut interval = Duration::from_millis(0);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut number = |what: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{what} needs a number"))
        };
        match a.as_str() {
            "--iterations" => iterations = number("--iterations"),
            "--interval-ms" => interval = Duration::from_millis(number("--interval-ms")),
            "--semaphores" => {
                println!(
                    "provider {} semaphores at {:p}",
                    demo::PROVIDER,
                    &demo::SEMAPHORES
                );
                println!("tick {:?}", demo::tick::semaphore());
                println!("empty {:?}", demo::empty::semaphore());
                return;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let mut i = 0;
    while iterations == 0 || i < iterations {
        fire_all(i);
        i += 1;
        if !interval.is_zero() {
            std::thread::sleep(interval);
        }
    }
    println!(
        "fired {i} iterations; tick semaphore {}",
        demo::tick::semaphore().count()
    );
}
