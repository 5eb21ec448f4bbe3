//! Issue 22: a bounded fuzz run of every target on stable Rust, so CI keeps what the fuzzing
//! campaign established (no panic, no hang, bounded output on any input). Each target runs on its
//! seeds (real inputs: `fuzz_targets::seeds`) and on 3,000 deterministic mutations of them; a
//! failure prints the target and saves the input. Longer, coverage-guided runs: docs/fuzzing.md.

use fuzz_targets::{TARGETS, Target, run_smoke, seeds};

/// Mutated inputs per target; a few seconds each in a debug build.
const MUTATIONS: usize = 3000;
/// Largest mutated input, in bytes.
const MAX_LEN: usize = 64 << 10;

fn smoke(name: &str, min_seeds: usize, needs_shared: bool) {
    let shared = if needs_shared {
        match test_support::shared_data("") {
            Some(p) => Some(p),
            None => return,
        }
    } else {
        None
    };
    let target: Target = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .expect("a target of that name");
    let seeds = seeds::for_target(name, shared.as_deref());
    assert!(
        seeds.len() >= min_seeds,
        "{name}: {} seeds, expected at least {min_seeds}",
        seeds.len()
    );
    // The seed depends on the name so each target explores differently, but reproducibly.
    let seed = name.bytes().fold(0x5eed_u64, |h, b| {
        h.wrapping_mul(31).wrapping_add(u64::from(b))
    });
    run_smoke(
        name,
        target,
        &seeds,
        seeds::dict(name),
        MUTATIONS,
        MAX_LEN,
        seed,
    );
}

#[test]
fn d_program() {
    smoke("d_program", 100, false);
}

#[test]
fn printf_format() {
    smoke("printf_format", 30, false);
}

#[test]
fn xtrace_metadata() {
    smoke("xtrace_metadata", 50, true);
}

#[test]
fn xtrace_report() {
    smoke("xtrace_report", 50, true);
}

#[test]
fn otlp() {
    smoke("otlp", 2, true);
}

#[test]
fn recording() {
    smoke("recording", 2, false);
}

#[test]
fn every_target_has_a_smoke_test_and_a_cargo_fuzz_target() {
    let here = include_str!("fuzz_smoke.rs");
    let root = seeds::workspace_root();
    for (name, _) in TARGETS {
        assert!(
            here.contains(&format!("fn {name}()")),
            "{name} has no smoke test"
        );
        let f = root.join("fuzz/fuzz_targets").join(format!("{name}.rs"));
        assert!(f.is_file(), "{} is missing", f.display());
    }
}

/// The seeds are real inputs that the decoders accept (so mutations start from deep states, not
/// from rejected garbage): most X-Trace seeds decode, both OTLP bodies decode, the recording opens.
#[test]
fn seeds_reach_the_decoders() {
    let Some(shared) = test_support::shared_data("") else {
        return;
    };
    let reports = seeds::for_target("xtrace_report", Some(&shared));
    let ok = reports
        .iter()
        .filter(|r| causal::Report::decode(r).is_ok())
        .count();
    assert!(
        ok * 10 >= reports.len() * 9,
        "{ok} of {} reports decode",
        reports.len()
    );
    let mds = seeds::for_target("xtrace_metadata", Some(&shared));
    let ok = mds
        .iter()
        .filter(|m| {
            causal::Metadata::parse_binary(m).is_ok()
                || std::str::from_utf8(m).is_ok_and(|t| causal::Metadata::parse_text(t).is_ok())
        })
        .count();
    assert!(
        ok * 10 >= mds.len() * 9,
        "{ok} of {} metadata decode",
        mds.len()
    );
    let bodies = seeds::for_target("otlp", Some(&shared));
    assert_eq!(bodies.len(), 2);
    assert!(causal_collector::otlp::decode_json(&bodies[0]).is_ok());
    assert!(causal_collector::otlp::decode_protobuf(&bodies[1]).is_ok());
    let recs = seeds::for_target("recording", None);
    let rec = &recs[1];
    assert!(rec.starts_with(replay::format::STREAM_MAGIC));
}

/// Enough D seeds get through the analysis and the code generator for mutations to exercise them.
#[test]
fn d_seeds_reach_the_code_generator() {
    let seeds = seeds::for_target("d_program", None);
    let ok = seeds.iter().filter(|s| fuzz_targets::d_compiles(s)).count();
    eprintln!("{ok} of {} D seeds compile", seeds.len());
    assert!(ok >= 20, "{ok} of {} D seeds compile", seeds.len());
}
