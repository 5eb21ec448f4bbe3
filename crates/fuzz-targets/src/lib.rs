//! Fuzz targets of Sightline's pure decoders, and a small deterministic mutator to run them on stable
//! Rust.
//!
//! Each target takes arbitrary bytes and feeds them to one decoder, checking the properties that
//! must hold for any input (no panic, bounded output, decode(encode(x)) == x where both exist):
//!
//! | target | decoder |
//! |---|---|
//! | [`d_program`] | the D front end: lexer, parser, analysis (a fixed probe catalog), code generator, diagnostics |
//! | [`printf_format`] | `probe_format::printf::parse` and the renderer |
//! | [`xtrace_metadata`] | `causal::Metadata::parse_binary` / `parse_text` |
//! | [`xtrace_report`] | `causal::Report::decode` (X-Trace 1.0 text and the binary format) |
//! | [`otlp`] | `causal_collector::otlp::decode_protobuf` / `decode_json`, `to_events`, and `server::decode_cost` |
//! | [`recording`] | `replay::format::Recording::open` over a `meta.json` and an `events.slr` |
//!
//! The same functions run under cargo-fuzz (`fuzz/`, nightly, coverage-guided) and in this crate's
//! `fuzz_smoke` test (stable: every seed of [`seeds`] plus a few thousand [`mutate`]d variants per
//! target, deterministic). docs/fuzzing.md says how to run them longer.
#![deny(missing_docs)]

pub mod seeds;

use probe_format::printf::{self, MAX_COUNT};
use probe_format::value::Value;
use probe_sema::{
    DtraceProbe, ProbeArgs, ProbeInfo, ProbeKind, SemaOptions, StaticCatalog, TpField, analyze,
};
use probe_syntax::lexer::{Lexer, Tok};
use probe_syntax::{SourceFile, SourceMap, parse, render_all};

/// A target: one decoder over arbitrary bytes. It returns normally for any input; a panic is a bug.
pub type Target = fn(&[u8]);

/// Every target by name (the names of `fuzz/fuzz_targets/*.rs` and of [`seeds::for_target`]).
pub const TARGETS: &[(&str, Target)] = &[
    ("d_program", d_program),
    ("printf_format", printf_format),
    ("xtrace_metadata", xtrace_metadata),
    ("xtrace_report", xtrace_report),
    ("otlp", otlp),
    ("recording", recording),
];

/// The probe catalog D programs are analyzed against: the dtrace provider, a tick, `read`/`write`
/// system calls and a tracepoint with a string field.
fn catalog() -> StaticCatalog {
    let probe = |provider: &str, function: &str, name: &str, args, kind| ProbeInfo {
        provider: provider.into(),
        module: String::new(),
        function: function.into(),
        name: name.into(),
        args,
        kind,
    };
    let mut probes = vec![
        probe(
            "dtrace",
            "",
            "BEGIN",
            ProbeArgs::None,
            ProbeKind::Dtrace(DtraceProbe::Begin),
        ),
        probe(
            "dtrace",
            "",
            "END",
            ProbeArgs::None,
            ProbeKind::Dtrace(DtraceProbe::End),
        ),
        probe(
            "dtrace",
            "",
            "ERROR",
            ProbeArgs::DtraceError,
            ProbeKind::Dtrace(DtraceProbe::Error),
        ),
        probe(
            "profile",
            "",
            "tick-1s",
            ProbeArgs::Profile,
            ProbeKind::Profile {
                period_ns: 1_000_000_000,
                every_cpu: false,
            },
        ),
    ];
    for (nr, name) in [(0, "read"), (1, "write")] {
        probes.push(probe(
            "syscall",
            name,
            "entry",
            ProbeArgs::SyscallEntry {
                nargs: 3,
                args: Vec::new(),
            },
            ProbeKind::Syscall { nr, entry: true },
        ));
        probes.push(probe(
            "syscall",
            name,
            "return",
            ProbeArgs::SyscallReturn,
            ProbeKind::Syscall { nr, entry: false },
        ));
    }
    let fields = probe_sema::parse_tracepoint_format(
        "name: sched_process_exec\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n",
    )
    .unwrap_or_default();
    probes.push(probe(
        "sched",
        "",
        "sched_process_exec",
        ProbeArgs::Tracepoint {
            fields: fields.into_iter().collect::<Vec<TpField>>(),
        },
        ProbeKind::Tracepoint {
            category: "sched".into(),
            event: "sched_process_exec".into(),
        },
    ));
    StaticCatalog { probes }
}

/// True when `data` is a D program that the analysis (against the targets' catalog) and the code
/// generator accept: what [`d_program`] reaches for it.
pub fn d_compiles(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let file = SourceFile::new("fuzz.d", text.as_ref());
    let (program, diags) = parse(&file);
    !diags.iter().any(|d| d.is_error())
        && analyze(&program, &catalog(), &SemaOptions::default())
            .is_ok_and(|c| probe_codegen::compile(&c, &Default::default()).is_ok())
}

/// The D front end on `data` (as UTF-8, invalid sequences replaced): every token of the lexer, the
/// parser, the analysis, and for a valid program the code generator; diagnostics are rendered.
pub fn d_program(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    // The lexer alone, to its end (a lexer that stops advancing is a hang: bounded by the length).
    let mut lexer = Lexer::new(&text, 0);
    let mut diags = Vec::new();
    for _ in 0..=text.len() + 1 {
        let before = lexer.offset();
        let tok = lexer.next_token(&mut diags);
        if tok.tok == Tok::Eof {
            break;
        }
        assert!(
            lexer.offset() > before,
            "the lexer made no progress at {before}"
        );
    }
    let file = SourceFile::new("fuzz.d", text.as_ref());
    let (program, mut diags) = parse(&file);
    let map: SourceMap = file.into();
    if !diags.iter().any(|d| d.is_error()) {
        match analyze(&program, &catalog(), &SemaOptions::default()) {
            Ok(checked) => {
                if let Err(e) = probe_codegen::compile(&checked, &Default::default()) {
                    diags.push(e.diagnostic());
                }
            }
            Err(d) => diags.extend(d),
        }
    }
    let rendered = render_all(&diags, &map);
    // The renderer quotes source lines: its output is bounded by a multiple of the input per
    // diagnostic, never more.
    assert!(rendered.len() <= (diags.len() + 1) * (4 * text.len() + 1024));
}

/// The printf parser on `data` (as UTF-8), and for a format that parses the renderer with integer
/// and string arguments: its output stays within the width/precision limit per conversion.
pub fn printf_format(data: &[u8]) {
    let fmt = String::from_utf8_lossy(data);
    let Ok(pieces) = printf::parse(&fmt) else {
        return;
    };
    let slots = printf::arg_slots(&pieces);
    let values = [
        Value::i64(i64::MAX),
        Value::i64(-1),
        Value::str("fuzz"),
        Value::i64(i64::MIN),
        Value::u64(u64::MAX),
    ];
    let args: Vec<Value> = (0..slots.len())
        .map(|i| values[i % values.len()].clone())
        .collect();
    let convs = printf::conversions(&pieces).count();
    for args in [&args[..], &[]] {
        if let Ok(out) = printf::format(&pieces, args) {
            assert!(
                out.len() <= fmt.len() + convs * (MAX_COUNT as usize + 256),
                "{} bytes for a {}-byte format",
                out.len(),
                fmt.len()
            );
        }
    }
}

/// X-Trace metadata in both encodings; whatever parses prints as text that parses to the same.
pub fn xtrace_metadata(data: &[u8]) {
    for md in [
        causal::Metadata::parse_binary(data).ok(),
        causal::Metadata::parse_binary_prefix(data)
            .ok()
            .map(|(m, _)| m),
        std::str::from_utf8(data)
            .ok()
            .and_then(|s| causal::Metadata::parse_text(s).ok()),
    ]
    .into_iter()
    .flatten()
    {
        let text = md.to_text();
        assert_eq!(
            causal::Metadata::parse_text(&text).as_ref(),
            Ok(&md),
            "{text}"
        );
        assert_eq!(
            causal::Metadata::parse_binary(&md.to_binary()).as_ref(),
            Ok(&md)
        );
    }
}

/// An X-Trace report payload (text or binary); a report that decodes survives the binary format.
pub fn xtrace_report(data: &[u8]) {
    if let Ok(r) = causal::Report::decode(data) {
        let bin = r.to_binary();
        assert_eq!(causal::Report::decode(&bin).as_ref(), Ok(&r));
        let _ = causal::Report::parse_xtrace_text(&r.to_xtrace_text());
    }
}

/// An OTLP/HTTP request body as protobuf and as JSON; a decoded request converts to events.
pub fn otlp(data: &[u8]) {
    // The collector's decode-cost scan runs on every body before it is decoded: it must finish
    // on any input and charge at least the body's own copies.
    let n = data.len() as u64;
    assert!(causal_collector::server::decode_cost(data, false) >= 2 * n);
    assert!(causal_collector::server::decode_cost(data, true) >= 3 * n);
    for req in [
        causal_collector::otlp::decode_protobuf(data).ok(),
        causal_collector::otlp::decode_json(data).ok(),
    ]
    .into_iter()
    .flatten()
    {
        let _ = causal_collector::otlp::to_events(&req);
    }
}

/// A recording directory: when `data` starts with `{` it is `meta.json` up to the first NUL byte,
/// then `events.slr`; otherwise all of it is `events.slr` beside [`seeds::RECORDING_META`]. Opening
/// it either fails with an error or reads the whole `events.slr`.
pub fn recording(data: &[u8]) {
    let split = if data.first() == Some(&b'{') {
        data.iter().position(|&b| b == 0)
    } else {
        None
    };
    let (meta, events) = match split {
        Some(i) => (&data[..i], &data[i + 1..]),
        None if data.first() == Some(&b'{') => (data, &[][..]),
        None => (seeds::RECORDING_META.as_bytes(), data),
    };
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    if std::fs::write(dir.path().join(replay::format::META_FILE), meta).is_err()
        || std::fs::write(dir.path().join(replay::format::EVENTS_FILE), events).is_err()
    {
        return;
    }
    if let Ok(r) = replay::format::Recording::open(dir.path()) {
        assert_eq!(r.file_bytes, events.len() as u64);
    }
}

/// A deterministic generator (64-bit LCG, Knuth's MMIX constants), so a failure reproduces from
/// its seed.
#[derive(Debug, Clone)]
pub struct Lcg(pub u64);

impl Lcg {
    /// The next 31 random bits.
    pub fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.next_u32() as usize % n
        }
    }
}

/// Values that find boundary bugs in length and count fields.
const INTERESTING: &[u64] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    u64::MAX,
];

/// Mutates `input` in one to four steps, libFuzzer-style: flip, insert, delete or duplicate bytes,
/// write an interesting integer, insert a `dict` token, or splice in part of `other`. The result is
/// at most `max_len` bytes.
pub fn mutate(
    input: &[u8],
    other: &[u8],
    dict: &[&[u8]],
    rng: &mut Lcg,
    max_len: usize,
) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(7) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 => b.insert(at, rng.next_u32() as u8),
            2 if !b.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(b.len());
                b.drain(at.min(end)..end);
            }
            3 if !b.is_empty() => {
                let start = rng.below(b.len());
                let end = (start + 1 + rng.below(64)).min(b.len());
                let piece = b[start..end].to_vec();
                b.splice(at..at, piece);
            }
            4 => {
                let v = INTERESTING[rng.below(INTERESTING.len())];
                let width = [1usize, 2, 4, 8][rng.below(4)];
                let bytes = &v.to_le_bytes()[..width];
                let end = (at + width).min(b.len());
                b.splice(at..end, bytes.iter().copied());
            }
            5 if !dict.is_empty() => {
                let t = dict[rng.below(dict.len())];
                b.splice(at..at, t.iter().copied());
            }
            _ if !other.is_empty() => {
                let start = rng.below(other.len());
                let end = (start + 1 + rng.below(256)).min(other.len());
                b.splice(at..at, other[start..end].iter().copied());
            }
            _ => b.push(b'\n'),
        }
    }
    b.truncate(max_len);
    b
}

/// Runs `target` on every seed, then on `mutations` variants made by [`mutate`] (seeded with
/// `seed`), each at most `max_len` bytes. A panic is re-raised after printing the target's name
/// and the failing input's path (written to the temporary directory), so the failure reproduces.
pub fn run_smoke(
    name: &str,
    target: Target,
    seeds: &[Vec<u8>],
    dict: &[&[u8]],
    mutations: usize,
    max_len: usize,
    seed: u64,
) {
    let run = |input: &[u8]| {
        if let Err(e) = std::panic::catch_unwind(|| target(input)) {
            let path = std::env::temp_dir().join(format!("fuzz-smoke-{name}-{seed:x}.bin"));
            let _ = std::fs::write(&path, input);
            eprintln!(
                "fuzz target {name} panicked on an input of {} bytes, saved as {}",
                input.len(),
                path.display()
            );
            std::panic::resume_unwind(e);
        }
    };
    for s in seeds {
        run(s);
    }
    if seeds.is_empty() {
        return;
    }
    let mut rng = Lcg(seed);
    let mut current: Vec<u8> = Vec::new();
    for i in 0..mutations {
        // Mostly mutate a seed; sometimes keep stacking mutations on the last variant.
        let base = if i % 4 == 3 && !current.is_empty() {
            current.clone()
        } else {
            seeds[rng.below(seeds.len())].clone()
        };
        let other = &seeds[rng.below(seeds.len())];
        current = mutate(&base, other, dict, &mut rng, max_len);
        run(&current);
    }
}
