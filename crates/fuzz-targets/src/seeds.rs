//! Seed inputs of each target, from real inputs: the D scripts of the golden tests and of
//! `tests/probe/*.case`, the issue-22 cases, the X-Trace reports and OTLP bodies of
//! `../shared/data`, and a recording written by `replay::format::Writer`; plus the files of
//! `fuzz/corpus/<target>/` (cargo-fuzz's corpus, where it keeps what it found).

use std::path::{Path, PathBuf};

/// The `meta.json` of the seed recording (and of a [`crate::recording`] input without a NUL).
pub const RECORDING_META: &str = r#"{"version":2,"path":"/usr/bin/true","argv":["true"],"env":["PATH=/usr/bin"],"cwd":"/","root_pid":100,"started_unix":1700000000,"cpuid_faulting":false,"status":"complete","exit_code":0}"#;

/// The workspace root (this crate is `<root>/crates/fuzz-targets`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/fuzz-targets has two ancestors")
        .to_path_buf()
}

/// The seeds of target `name` ([`crate::TARGETS`]). `shared` is the `../shared/data` directory
/// when present (the X-Trace and OTLP targets take their real inputs from it).
pub fn for_target(name: &str, shared: Option<&Path>) -> Vec<Vec<u8>> {
    let root = workspace_root();
    let mut out = match name {
        "d_program" => d_programs(&root),
        "printf_format" => printf_formats(&root),
        "xtrace_metadata" => xtrace(shared, true),
        "xtrace_report" => xtrace(shared, false),
        "otlp" => ["otlp/node_sdk_traces.json", "otlp/python_sdk_traces.pb"]
            .iter()
            .filter_map(|f| std::fs::read(shared?.join(f)).ok())
            .collect(),
        "recording" => recordings(),
        _ => Vec::new(),
    };
    out.extend(files_in(&root.join("fuzz/corpus").join(name), ""));
    out
}

/// Tokens worth inserting for target `name` (libFuzzer's `-dict`).
pub fn dict(name: &str) -> &'static [&'static [u8]] {
    match name {
        "d_program" => &[
            b"BEGIN",
            b"END",
            b"syscall::read:entry",
            b"tick-1s",
            b"@a[",
            b"] = count();",
            b"self->",
            b"this->",
            b"printf(\"%d\\n\", ",
            b"/pid == 1/",
            b"{ ",
            b" }",
            b"\"",
            b"(",
            b")",
            b"*",
            b"#pragma D option ",
            b"strsize=",
            b"copyinstr(arg0)",
            b"quantize(",
            b"$1",
            b"inline ",
            b"0x",
            b"9999999999999999999999",
            b"?:",
            b"->",
            b"args->",
            b"/*",
            b"\\",
        ],
        "printf_format" => &[
            b"%",
            b"*",
            b".",
            b"-",
            b"0",
            b"99999",
            b"65535",
            b"2147483648",
            b"l",
            b"ll",
            b"h",
            b"@",
            b"$",
            b"d",
            b"s",
            b"x",
            b"k",
            b"Y",
            b"%%",
        ],
        "xtrace_report" => &[
            b"X-Trace Report ver 1.0\n",
            b"X-Trace: ",
            b"Edge: ",
            b"Timestamp: ",
            b"\n",
            b": ",
        ],
        "otlp" => &[
            b"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{",
            b"\"traceId\":\"",
            b"\"spanId\":\"",
            b"\"links\":[",
            b"}]}]}]}",
            b"\"",
            b"\\u0000",
        ],
        _ => &[],
    }
}

/// Every file under `dir` whose name ends with `ext` (`""`: every file), sorted by path.
fn files_in(dir: &Path, ext: &str) -> Vec<Vec<u8>> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.to_string_lossy().ends_with(ext))
        .collect();
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// The `PROG` blocks and lines of a `tests/probe/*.case` file (docs/probe-cases.md).
fn case_programs(text: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if let Some(tag) = l.strip_prefix("PROG <<") {
            let mut prog = String::new();
            for b in lines.by_ref() {
                if b == tag {
                    break;
                }
                prog.push_str(b);
                prog.push('\n');
            }
            out.push(prog.into_bytes());
        } else if let Some(p) = l.strip_prefix("PROG ") {
            out.push(p.as_bytes().to_vec());
        }
    }
    out
}

/// The issue-22 inputs, at sizes a smoke run can afford (the full sizes are regression tests).
fn issue_22_programs() -> Vec<Vec<u8>> {
    vec![
        format!("syscall::{}:entry {{ }}", "a".repeat(2000)).into_bytes(),
        format!("BEGIN {{ {}(); }}", "f".repeat(4000)).into_bytes(),
        "BEGIN { x = 1; }\n".repeat(200).into_bytes(),
        b"BEGIN { printf(\"%99999999999d\\n\", 1); }".to_vec(),
        b"BEGIN { printf(\"%*d\\n\", 2147483647, 1); exit(0); }".to_vec(),
        (0..70)
            .map(|i| format!("BEGIN {{ @a{i}[1] = count(); }}\n"))
            .collect::<String>()
            .into_bytes(),
        (0..70)
            .map(|i| format!("BEGIN {{ self->t{i} = 1; }}\n"))
            .collect::<String>()
            .into_bytes(),
    ]
}

fn d_programs(root: &Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for dir in [
        "crates/probe-syntax/tests/golden",
        "crates/probe-sema/tests/golden",
    ] {
        out.extend(files_in(&root.join(dir), ".d"));
    }
    for case in files_in(&root.join("tests/probe"), ".case") {
        out.extend(case_programs(&String::from_utf8_lossy(&case)));
    }
    out.extend(issue_22_programs());
    out
}

/// Format strings: every `printf("…"` / `printa("…"` literal of the D seeds (escapes as
/// written), and conversions the guide lists.
fn printf_formats(root: &Path) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = [
        "%d\n",
        "a %-8.3ld b %%",
        "%99999999999d",
        "%*d|%.*s|%-*.*s",
        "%65535d",
        "%@d %@10u",
        "%Y %T",
        "%k",
        "%s %S %c %C %ls",
        "%#x %#o %X %p %a %A %?p",
        "%+d % i %'d %05d %-05d",
        "%hhd %hd %lld %llu",
        "%e %f %g",
        "%1$d",
        "%**d %1.2.3d %-% %q %",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    for prog in d_programs(root) {
        let text = String::from_utf8_lossy(&prog);
        for part in text
            .split("printf(\"")
            .skip(1)
            .chain(text.split("printa(\"").skip(1))
        {
            if let Some(end) = part.find('"') {
                out.push(part.as_bytes()[..end].to_vec());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// X-Trace metadata (`metadata`) or whole reports in text and binary form, from the first
/// reports of each file of `shared/xtrace/`.
fn xtrace(shared: Option<&Path>, metadata: bool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Some(dir) = shared.map(|s| s.join("xtrace")) else {
        return out;
    };
    for file in files_in(&dir, ".json") {
        let Ok(serde_json::Value::Array(tasks)) = serde_json::from_slice(&file) else {
            continue;
        };
        let reports = tasks
            .iter()
            .filter_map(|t| t.get("reports")?.as_array())
            .flatten()
            .take(40);
        for r in reports {
            let Some(fields) = r.as_object() else {
                continue;
            };
            let mut text = String::from("X-Trace Report ver 1.0\n");
            for (k, vs) in fields {
                for v in vs.as_array().into_iter().flatten() {
                    if let Some(v) = v.as_str() {
                        text.push_str(&format!("{k}: {v}\n"));
                    }
                }
            }
            if metadata {
                for v in fields
                    .get("X-Trace")
                    .and_then(|v| v.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str())
                {
                    out.push(v.as_bytes().to_vec());
                    if let Ok(md) = causal::Metadata::parse_text(v) {
                        out.push(md.to_binary());
                    }
                }
            } else {
                if let Ok(rep) = causal::Report::parse_xtrace_text(&text) {
                    out.push(rep.to_binary());
                }
                out.push(text.into_bytes());
            }
        }
    }
    out
}

/// A small recording written by the recorder's own writer (`meta.json`, NUL, `events.slr`), and
/// the same stream with the default `meta.json`.
fn recordings() -> Vec<Vec<u8>> {
    use replay::format::{Event, Meta, Record, Recording, Writer};
    let Ok(meta) = serde_json::from_str::<Meta>(RECORDING_META) else {
        return Vec::new();
    };
    let Ok(dir) = tempfile::tempdir() else {
        return Vec::new();
    };
    let Ok(mut w) = Writer::create(dir.path(), meta) else {
        return Vec::new();
    };
    let records = [
        Event::Rdtsc {
            value: 123_456_789,
            aux: Some(3),
        },
        Event::Cpuid {
            leaf: 1,
            subleaf: 0,
            out: [1, 2, 3, 4],
        },
        Event::SyscallbufPatch {
            site: 0x7fff_0000_1000,
            orig: [0x0f, 0x05, 0x48, 0x3d, 0x00, 0xf0, 0xff, 0xff],
        },
        Event::Exit {
            status: 0,
            rendezvous: Vec::new(),
        },
    ];
    for event in records {
        if w.push(&Record { pid: 100, event }).is_err() {
            return Vec::new();
        }
    }
    if w.finish().is_err() || Recording::open(dir.path()).is_err() {
        return Vec::new();
    }
    let read = |f: &str| std::fs::read(dir.path().join(f)).unwrap_or_default();
    let (meta, events) = (
        read(replay::format::META_FILE),
        read(replay::format::EVENTS_FILE),
    );
    let mut with_meta = meta;
    with_meta.push(0);
    with_meta.extend_from_slice(&events);
    vec![with_meta, events]
}
