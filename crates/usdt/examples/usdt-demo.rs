//! A program with one USDT probe per argument kind, fired with known values.
//!
//! Used by the crate's tests (its notes are parsed back; bpftrace and `sightline probe` trace it)
//! and by the README's walkthrough. Every iteration fires, in order: `tick(i)`, `unsigned`,
//! `signed`, `flags`, `text`, `bytes`, `json`, `empty`, with the values printed by `--values`.
//!
//! ```text
//! usdt-demo [--iterations N] [--interval-ms MS] [--values] [--semaphores]
//! ```
//! `--iterations 0` runs until killed. `--semaphores` prints each probe's semaphore address and
//! count (at run time) and exits.

use std::ffi::CStr;
use std::time::Duration;

use sightline_usdt::{Json, probe};

/// A value passed to the `json` probe.
#[derive(serde::Serialize)]
struct Event<'a> {
    id: u64,
    name: &'a str,
    tags: [&'a str; 2],
}

sightline_usdt::provider! {
    /// The demo's probes: one per argument kind.
    mod demo {
        /// Start of iteration `i` (0-based).
        fn tick(i: u64);
        /// Unsigned integers of every width.
        fn unsigned(a: u8, b: u16, c: u32, d: u64, e: usize);
        /// Signed integers of every width.
        fn signed(a: i8, b: i16, c: i32, d: i64, e: isize);
        /// Booleans and a char.
        fn flags(yes: bool, no: bool, c: char);
        /// A Rust string (copied, NUL-terminated) and a C string (passed as is).
        fn text(s: &str, c: &CStr);
        /// A byte slice: pointer and length.
        fn bytes(data: &[u8]);
        /// A serde value as JSON text.
        fn json(event: Json<&Event<'_>>);
        /// No arguments; last of each iteration.
        fn empty();
    }
}

/// The values fired, in the order of the probes' arguments (shared with the tests through the
/// `--values` output).
const TEXT: &str = "héllo, usdt";
const CTEXT: &CStr = c"c-string";
const BYTES: &[u8] = b"\x00\x01\xfe\xffAB";

fn fire_all(i: u64) {
    demo::tick::fire(i);
    demo::unsigned::fire(u8::MAX, u16::MAX, u32::MAX, u64::MAX, 12345);
    probe!(demo::signed, || (i8::MIN, i16::MIN, i32::MIN, i64::MIN, -1isize));
    probe!(demo::flags(true, false, 'é'));
    probe!(demo::text(TEXT, CTEXT));
    probe!(demo::bytes(BYTES));
    let event = Event { id: 42 + i, name: "quoted \"name\"", tags: ["a", "b"] };
    probe!(demo::json, || (Json(&event),));
    demo::empty::fire();
}

fn main() {
    let mut iterations: u64 = 1;
    let mut interval = Duration::from_millis(0);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--iterations" => iterations = args.next().and_then(|v| v.parse().ok()).expect("--iterations N"),
            "--interval-ms" => {
                interval = Duration::from_millis(args.next().and_then(|v| v.parse().ok()).expect("--interval-ms MS"))
            }
            "--values" => {
                println!("tick i");
                println!("unsigned {} {} {} {} {}", u8::MAX, u16::MAX, u32::MAX, u64::MAX, 12345);
                println!("signed {} {} {} {} {}", i8::MIN, i16::MIN, i32::MIN, i64::MIN, -1);
                println!("flags 1 0 {}", 'é' as u32);
                println!("text {TEXT} {}", CTEXT.to_str().unwrap());
                println!("bytes {:?}", BYTES);
                println!("json {}", serde_json_text(42));
                return;
            }
            "--semaphores" => {
                for (name, s) in [
                    ("tick", demo::tick::semaphore()),
                    ("unsigned", demo::unsigned::semaphore()),
                    ("empty", demo::empty::semaphore()),
                ] {
                    println!("{name} {s:?}");
                }
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
    println!("fired {i} iterations; tick semaphore {}", demo::tick::semaphore().count());
}

/// The JSON text of the `json` probe in iteration 0 (as the `--values` line shows it).
fn serde_json_text(id: u64) -> String {
    format!(r#"{{"id":{id},"name":"quoted \"name\"","tags":["a","b"]}}"#)
}
