//! cargo-fuzz target: `fuzz_targets::printf_format` (what it checks is documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::printf_format(data));
