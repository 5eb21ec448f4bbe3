//! Enabling a probe the way a tracer without the kernel's reference counter does (Sightline's
//! fallback, gdb): find the semaphore from the note and the process's mappings, and write it
//! through `/proc/PID/mem`. Here the process is the test itself (no privilege needed).

mod common;

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};

use object::{Object, ObjectSection};

sightline_usdt::provider! {
    /// Probes of this test.
    mod selftest {
        /// Fired by the test.
        fn once(x: u64, s: &str);
        /// Never enabled.
        fn other();
    }
}

/// Load bias of this (PIE) executable: the start of its mapping at file offset 0 (proc(5)).
fn load_bias() -> u64 {
    let exe = std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| {
            l.ends_with(exe.to_str().unwrap()) && l.split_whitespace().nth(2) == Some("00000000")
        })
        .expect("mapping of the test executable at offset 0");
    u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap()
}

/// Link-time semaphore address of `selftest:once`, from this executable's own notes.
fn note_semaphore() -> u64 {
    let data = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let notes = common::parse_notes(
        obj.section_by_name(".note.stapsdt")
            .unwrap()
            .data()
            .unwrap(),
    );
    let once: Vec<_> = notes
        .iter()
        .filter(|n| n.provider == "selftest" && n.name == "once")
        .collect();
    assert!(!once.is_empty(), "no selftest:once note in {notes:?}");
    assert!(once.iter().all(|n| n.semaphore == once[0].semaphore));
    assert_eq!(once[0].args.len(), 2);
    once[0].semaphore
}

fn write_mem(addr: u64, bytes: &[u8]) {
    let mut mem = OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")
        .expect("open /proc/self/mem");
    mem.seek(SeekFrom::Start(addr)).unwrap();
    mem.write_all(bytes).expect("write /proc/self/mem");
}

fn fire(calls: &mut u32) {
    sightline_usdt::probe!(selftest::once, || {
        *calls += 1;
        (7u64, "seven")
    });
}

#[test]
fn semaphore_written_through_proc_mem_enables_the_probe() {
    let addr = load_bias() + note_semaphore();
    // The note's address, relocated by the load bias, is the static the probe reads.
    assert_eq!(addr as usize, selftest::once::semaphore().addr());

    let mut calls = 0;
    fire(&mut calls);
    assert_eq!(calls, 0, "disabled: arguments not evaluated");
    assert!(!selftest::once::is_enabled());

    // A tracer increments the counter (read-modify-write, so several tracers compose).
    let before = selftest::once::semaphore().count();
    write_mem(addr, &(before + 1).to_ne_bytes());
    assert!(selftest::once::is_enabled());
    assert_eq!(selftest::once::semaphore().count(), 1);
    assert!(
        !selftest::other::is_enabled(),
        "the neighbouring semaphore is untouched"
    );
    fire(&mut calls);
    fire(&mut calls);
    assert_eq!(
        calls, 2,
        "enabled: arguments evaluated once per hit, the site ran"
    );

    // ... and restores it on detach.
    write_mem(addr, &before.to_ne_bytes());
    assert!(!selftest::once::is_enabled());
    fire(&mut calls);
    assert_eq!(calls, 2);
}
