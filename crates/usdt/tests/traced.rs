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
        .map(|&b| if b.is_ascii_graphic() { (b as char).to_string() } else { format!("\\x{b:02x}") })
        .collect();
    vec![
        format!("tick {i}"),
        format!("unsigned {} {} {} {} {}", u8::MAX, u16::MAX, u32::MAX, u64::MAX, 12345),
        format!("signed {} {} {} {} {}", i8::MIN, i16::MIN, i32::MIN, i64::MIN, -1),
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
    let bin = common::demo_bin();
    let bin = bin.to_str().unwrap();
    let out = Command::new("timeout")
        .args(["-k", "5", "60", "bpftrace", "-e", &bpftrace_script(bin), "-c"])
        .arg(format!("{bin} --iterations 3 --interval-ms 200"))
        .output()
        .expect("run bpftrace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("Attaching") && !l.starts_with("fired") && !l.starts_with('@'))
        .collect();
    // bpftrace attaches before the command runs, so the first iteration is the one traced.
    let expected = expected_lines(0);
    assert_eq!(lines, expected, "bpftrace output:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    // The demo saw its semaphore raised by bpftrace through the kernel's reference counter.
    assert!(stdout.contains("fired 3 iterations; tick semaphore "), "{stdout}");
    assert!(!stdout.contains("tick semaphore 0"), "semaphore still 0 under bpftrace -c:\n{stdout}");
}
