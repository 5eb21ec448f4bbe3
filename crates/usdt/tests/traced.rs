//! The demo traced for real (root): every argument kind arrives with its exact value.
//!
//! bpftrace 0.17 runs the demo under `-c`, which enables the probes through the kernel's uprobe
//! reference counters (the semaphores) at exec time. That works here because the crate keeps the
//! semaphores on a page of their own (docs/usdt.md, "The lld layout").
#![allow(dead_code)]

mod common;

use std::process::Command;

include!("../examples/shared/demo_probes.rs");

/// The bpftrace program: prints every probe's arguments for one whole iteration (from `tick` to
/// `empty`), then exits.
fn bpftrace_script(bin: &str) -> String {
    format!(
        r#"
usdt:{bin}:demo:tick {{ @go = 1; printf("tick %lu\n", arg0); }}
usdt:{bin}:demo:unsigned /@go/ {{ printf("unsigned %u %u %u %lu %lu\n", arg0, arg1, arg2, arg3, arg4); }}
usdt:{bin}:demo:signed /@go/ {{ printf("signed %d %d %d %ld %ld\n", arg0, arg1, arg2, arg3, arg4); }}
usdt:{bin}:demo:flags /@go/ {{ printf("flags %d %d %d\n", arg0, arg1, arg2); }}
usdt:{bin}:demo:text /@go/ {{ printf("text [%s] [%s]\n", str(arg0), str(arg1)); }}
usdt:{bin}:demo:bytes /@go/ {{ printf("bytes %r %lu\n", buf(arg0, arg1), arg1); }}
usdt:{bin}:demo:json /@go/ {{ printf("json %s\n", str(arg0)); }}
usdt:{bin}:demo:empty /@go/ {{ printf("empty\n"); exit(); }}
"#
    )
}

/// What the script prints for iteration `i`, computed from the values the demo fires.
fn expected_lines(i: u64) -> Vec<String> {
    let bytes: String = BYTES
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() {
                (b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect();
    vec![
        format!("tick {i}"),
        format!(
            "unsigned {} {} {} {} {}",
            u8::MAX,
            u16::MAX,
            u32::MAX,
            u64::MAX,
            12345
        ),
        format!(
            "signed {} {} {} {} {}",
            i8::MIN,
            i16::MIN,
            i32::MIN,
            i64::MIN,
            -1
        ),
        format!("flags 1 0 {}", 'é' as u32),
        format!("text [{TEXT}] [{}]", CTEXT.to_str().unwrap()),
        format!("bytes {bytes} {}", BYTES.len()),
        format!("json {}", json_text(i)),
        "empty".to_string(),
    ]
}

#[test]
fn bpftrace_sees_every_argument_type_exactly() {
    if !test_support::privileged("attaches bpftrace to the demo's USDT probes") {
        return;
    }
    if !test_support::require_tool("bpftrace") {
        return;
    }
    let bin = common::demo_bin();
    let bin = bin.to_str().unwrap();
    let out = Command::new("timeout")
        .args([
            "-k",
            "5",
            "60",
            "bpftrace",
            "-e",
            &bpftrace_script(bin),
            "-c",
        ])
        .arg(format!("{bin} --iterations 3 --interval-ms 200"))
        .output()
        .expect("run bpftrace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("Attaching")
                && !l.starts_with("fired")
                && !l.starts_with('@')
        })
        .collect();
    // bpftrace attaches before the command runs, so the first iteration is the one traced.
    let expected = expected_lines(0);
    let first = &lines[..expected.len().min(lines.len())];
    assert_eq!(
        first,
        expected,
        "bpftrace output:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // bpftrace's exit() is asynchronous: on a loaded machine a later iteration can print part of
    // its lines before bpftrace stops. Each such group must still be that iteration's exact values.
    let mut rest = &lines[expected.len()..];
    while let Some(tick) = rest.first() {
        let i: u64 = tick
            .strip_prefix("tick ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| {
                panic!("unexpected line {tick:?} after the first iteration:\n{stdout}")
            });
        let want = expected_lines(i);
        let n = rest
            .iter()
            .skip(1)
            .position(|l| l.starts_with("tick "))
            .map_or(rest.len(), |p| p + 1);
        assert!(
            n <= want.len() && rest[..n] == want[..n],
            "iteration {i} differs:\n{stdout}"
        );
        rest = &rest[n..];
    }
    // The demo saw its semaphore raised by bpftrace through the kernel's reference counter.
    assert!(
        stdout.contains("fired 3 iterations; tick semaphore "),
        "{stdout}"
    );
    assert!(
        !stdout.contains("tick semaphore 0"),
        "semaphore still 0 under bpftrace -c:\n{stdout}"
    );
}

/// The D script for `sightline probe`: the same lines as the bpftrace script, for iteration 0.
fn d_script() -> String {
    r#"
demo$target:::tick /arg0 == 0/ { self->go = 1; printf("tick %d\n", arg0); }
demo$target:::unsigned /self->go/ { printf("unsigned %u %u %u %u %u\n", arg0, arg1, arg2, arg3, arg4); }
demo$target:::signed /self->go/ { printf("signed %d %d %d %d %d\n", arg0, arg1, arg2, arg3, arg4); }
demo$target:::flags /self->go/ { printf("flags %d %d %d\n", arg0, arg1, arg2); }
demo$target:::text /self->go/ { printf("text [%s] [%s]\n", copyinstr(arg0), copyinstr(arg1)); }
demo$target:::bytes /self->go/ { printf("bytes %d\n", arg1); }
demo$target:::json /self->go/ { printf("json %s\n", copyinstr(arg0)); }
demo$target:::empty /self->go/ { printf("empty\n"); }
demo$target:::iteration-done /self->go/ { printf("done %d\n", arg0); self->go = 0; }
"#
    .to_string()
}

#[test]
fn sightline_probe_c_fires_every_probe_with_exact_values() {
    if !test_support::privileged("traces the demo's USDT probes with sightline probe -c") {
        return;
    }
    let bin = common::demo_bin();
    // No nested cargo builds the top binary for a lower crate: `cargo test --workspace` (CI) has
    // built `sightline` beside the demo; a test run of this crate alone may not have.
    let sightline = bin.with_file_name("sightline");
    if !test_support::require_file(
        &sightline,
        "the sightline binary (cargo build -p sightline)",
    ) {
        return;
    }
    let out = Command::new("timeout")
        .args(["-k", "5", "120"])
        .arg(&sightline)
        .args(["probe", "-q", "-n", &d_script(), "-c"])
        .arg(format!("{} --iterations 2", bin.display()))
        .output()
        .expect("run sightline probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "sightline probe failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("fired"))
        .collect();
    let mut expected = expected_lines(0);
    // sightline's D script has no buf() formatting: the byte slice shows as its length.
    expected[5] = format!("bytes {}", BYTES.len());
    expected.push("done 0".to_string());
    assert_eq!(lines, expected, "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The probes were enabled for the demo itself (its semaphore was non-zero).
    assert!(
        stdout.contains("fired 2 iterations; tick semaphore "),
        "{stdout}"
    );
    assert!(!stdout.contains("tick semaphore 0"), "{stdout}");
}
