//! cargo-fuzz target: `fuzz_targets::xtrace_report` (what it checks is documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::xtrace_report(data));
