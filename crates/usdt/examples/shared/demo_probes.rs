// The demo's provider, its values and the function that fires them: shared by
// `examples/usdt-demo.rs` and the crate's tests (`include!`d by both), so the tests compare the
// notes and the traced values against exactly what the program declares and fires.
use std::ffi::CStr;
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
        /// No arguments.
        fn empty();
        /// End of iteration `i`; DTrace-style tools show the name as `iteration-done`.
        fn iteration__done(i: u64);
    }
}

/// The string, C string and byte values the probes fire.
const TEXT: &str = "héllo, usdt";
const CTEXT: &CStr = c"c-string";
const BYTES: &[u8] = b"\x00\x01\xfe\xffAB";

/// The JSON text the `json` probe carries in iteration `i`.
#[allow(dead_code)]
fn json_text(i: u64) -> String {
    format!(r#"{{"id":{},"name":"quoted \"name\"","tags":["a","b"]}}"#, 42 + i)
}

/// Fires every probe once, in declaration order, with the values above (`i` is the iteration).
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
    demo::iteration__done::fire(i);
}

