#![allow(dead_code)]

//! The demo binary's `.note.stapsdt` notes, parsed back with the `object` crate and compared with
//! the probes the program declares (`examples/shared/demo_probes.rs`, included here too).

mod common;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

include!("../examples/shared/demo_probes.rs");

/// (name, ARG_SIZES) of every declared probe of the demo.
fn declared() -> Vec<(&'static str, &'static [i8])> {
    vec![
        (demo::tick::NAME, demo::tick::ARG_SIZES),
        (demo::unsigned::NAME, demo::unsigned::ARG_SIZES),
        (demo::signed::NAME, demo::signed::ARG_SIZES),
        (demo::flags::NAME, demo::flags::ARG_SIZES),
        (demo::text::NAME, demo::text::ARG_SIZES),
        (demo::bytes::NAME, demo::bytes::ARG_SIZES),
        (demo::json::NAME, demo::json::ARG_SIZES),
        (demo::empty::NAME, demo::empty::ARG_SIZES),
        (
            demo::iteration__done::NAME,
            demo::iteration__done::ARG_SIZES,
        ),
    ]
}

/// x86-64 register names by width in bytes, as GNU/LLVM AT&T syntax prints them.
fn register_width(reg: &str) -> Option<u8> {
    const R64: &[&str] = &["rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp"];
    const R32: &[&str] = &["eax", "ebx", "ecx", "edx", "esi", "edi", "ebp", "esp"];
    const R16: &[&str] = &["ax", "bx", "cx", "dx", "si", "di", "bp", "sp"];
    const R8: &[&str] = &["al", "bl", "cl", "dl", "sil", "dil", "bpl", "spl"];
    let r = reg.strip_prefix('%')?;
    if R64.contains(&r) {
        return Some(8);
    }
    if R32.contains(&r) {
        return Some(4);
    }
    if R16.contains(&r) {
        return Some(2);
    }
    if R8.contains(&r) {
        return Some(1);
    }
    // r8..r15 with suffixes d (32), w (16), b (8).
    let n = r.strip_prefix('r')?;
    let (num, width) = match n.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (n, 8),
        Some((i, _)) => (
            &n[..i],
            match &n[i..] {
                "d" => 4,
                "w" => 2,
                "b" => 1,
                _ => return None,
            },
        ),
    };
    let num: u8 = num.parse().ok()?;
    (8..=15).contains(&num).then_some(width)
}

#[test]
fn register_width_table() {
    assert_eq!(register_width("%dil"), Some(1));
    assert_eq!(register_width("%r10w"), Some(2));
    assert_eq!(register_width("%r9d"), Some(4));
    assert_eq!(register_width("%r15"), Some(8));
    assert_eq!(register_width("%eax"), Some(4));
    assert_eq!(register_width("%r16"), None);
    assert_eq!(register_width("rax"), None);
}

#[test]
fn notes_match_declared_probes() {
    let bin = common::demo_bin();
    let data = std::fs::read(&bin).expect("read demo binary");
    let obj = object::File::parse(&*data).expect("parse ELF");
    let notes_section = obj
        .section_by_name(".note.stapsdt")
        .expect(".note.stapsdt present");
    let notes = common::parse_notes(notes_section.data().unwrap());

    // Every declared probe has at least one site, with the provider name and argument specs whose
    // sizes are the declared ones and whose registers have the width the size says.
    for (name, sizes) in declared() {
        let sites: Vec<_> = notes.iter().filter(|n| n.name == name).collect();
        assert!(!sites.is_empty(), "no note for probe {name}: {notes:#?}");
        for site in sites {
            assert_eq!(site.provider, "demo");
            assert_eq!(site.args.len(), sizes.len(), "{site:?}");
            for (spec, &size) in site.args.iter().zip(sizes) {
                let (sz, reg) = spec.split_once('@').expect("SIZE@LOCATION");
                assert_eq!(sz.parse::<i8>().unwrap(), size, "{name}: {spec}");
                assert_eq!(
                    register_width(reg),
                    Some(size.unsigned_abs()),
                    "{name}: {spec}"
                );
            }
        }
    }
    assert!(
        notes
            .iter()
            .all(|n| declared().iter().any(|(d, _)| *d == n.name))
    );
    // The declared integer probes, exactly.
    let unsigned = notes.iter().find(|n| n.name == "unsigned").unwrap();
    let sizes: Vec<&str> = unsigned
        .args
        .iter()
        .map(|a| a.split('@').next().unwrap())
        .collect();
    assert_eq!(sizes, ["1", "2", "4", "8", "8"]);
    let signed = notes.iter().find(|n| n.name == "signed").unwrap();
    let sizes: Vec<&str> = signed
        .args
        .iter()
        .map(|a| a.split('@').next().unwrap())
        .collect();
    assert_eq!(sizes, ["-1", "-2", "-4", "-8", "-8"]);
    assert!(
        notes
            .iter()
            .find(|n| n.name == "empty")
            .unwrap()
            .args
            .is_empty()
    );
}

#[test]
fn sites_are_5_byte_nops_and_base_matches() {
    let bin = common::demo_bin();
    let data = std::fs::read(&bin).expect("read demo binary");
    let obj = object::File::parse(&*data).expect("parse ELF");
    let notes = common::parse_notes(
        obj.section_by_name(".note.stapsdt")
            .unwrap()
            .data()
            .unwrap(),
    );
    let base = obj
        .section_by_name(".stapsdt.base")
        .expect(".stapsdt.base kept by the linker");
    let text = obj.section_by_name(".text").unwrap();
    let text_data = text.data().unwrap();
    for n in &notes {
        assert_eq!(n.base, base.address(), "{n:?}");
        let off = (n.pc - text.address()) as usize;
        assert_eq!(
            &text_data[off..off + 5],
            &[0x0f, 0x1f, 0x44, 0x00, 0x00],
            "site of {}",
            n.name
        );
    }
}

#[test]
fn semaphores_are_the_declared_fields_on_their_own_page() {
    let bin = common::demo_bin();
    let data = std::fs::read(&bin).expect("read demo binary");
    let obj = object::File::parse(&*data).expect("parse ELF");
    let notes = common::parse_notes(
        obj.section_by_name(".note.stapsdt")
            .unwrap()
            .data()
            .unwrap(),
    );

    // The provider's SEMAPHORES static (mangled `..4demo10SEMAPHORES..`).
    let sym = obj
        .symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains("4demo10SEMAPHORES")))
        .expect("demo::SEMAPHORES symbol");
    let probes = obj.section_by_name(".probes").expect(".probes section");
    assert_eq!(sym.section_index(), Some(probes.index()));
    assert_eq!(sym.address() % 4096, 0, "SEMAPHORES is page-aligned");

    // Field order = declaration order: probe k's semaphore is at SEMAPHORES + 2k.
    for (k, (name, _)) in declared().iter().enumerate() {
        for n in notes.iter().filter(|n| n.name == *name) {
            assert_eq!(
                n.semaphore,
                sym.address() + 2 * k as u64,
                "semaphore of {name}"
            );
        }
    }

    // The lld layout: the file page holding the semaphores belongs to exactly one PT_LOAD segment,
    // so the kernel's reference counter cannot land in another mapping of it.
    let (sem_off, _) = probes.file_range().unwrap();
    let page = sem_off / 4096;
    let holders = obj
        .segments()
        .filter(|s| {
            let (off, size) = s.file_range();
            size > 0 && off / 4096 <= page && page <= (off + size - 1) / 4096
        })
        .count();
    assert_eq!(
        holders, 1,
        "the semaphores' file page is mapped by {holders} segments"
    );
}

/// (name, ARGS) of every declared probe of the demo.
fn declared_args() -> Vec<(&'static str, &'static [(&'static str, &'static str)])> {
    vec![
        (demo::tick::NAME, demo::tick::ARGS),
        (demo::unsigned::NAME, demo::unsigned::ARGS),
        (demo::signed::NAME, demo::signed::ARGS),
        (demo::flags::NAME, demo::flags::ARGS),
        (demo::text::NAME, demo::text::ARGS),
        (demo::bytes::NAME, demo::bytes::ARGS),
        (demo::json::NAME, demo::json::ARGS),
        (demo::empty::NAME, demo::empty::ARGS),
        (demo::iteration__done::NAME, demo::iteration__done::ARGS),
    ]
}

/// `.note.sightline` (docs/usdt.md, "The typed-argument note"): one note per probe however many
/// sites it has, owner `sightline`, type 1, with provider, name, stability and one `name:type`
/// entry per note argument (a `&[u8]` is two: `NAME:&[u8]` and `NAME.len:usize`).
#[test]
fn typed_notes_name_every_note_argument() {
    let data = std::fs::read(common::demo_bin()).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let sec = obj
        .section_by_name(".note.sightline")
        .expect(".note.sightline section")
        .data()
        .unwrap();
    let u32_at = |o: usize| u32::from_le_bytes(sec[o..o + 4].try_into().unwrap()) as usize;
    let pad4 = |n: usize| (n + 3) & !3;
    let mut notes: Vec<(String, Vec<String>)> = Vec::new();
    let mut off = 0;
    while off + 12 <= sec.len() {
        let (namesz, descsz, ty) = (u32_at(off), u32_at(off + 4), u32_at(off + 8));
        assert_eq!(
            (&sec[off + 12..off + 12 + namesz], ty),
            (&b"sightline\0"[..], 1)
        );
        let desc = &sec[off + 12 + pad4(namesz)..off + 12 + pad4(namesz) + descsz];
        assert_eq!(desc.last(), Some(&0), "NUL-terminated");
        let strs: Vec<String> = desc[..desc.len() - 1]
            .split(|&b| b == 0)
            .map(|s| String::from_utf8(s.to_vec()).unwrap())
            .collect();
        assert_eq!(strs[0], demo::PROVIDER);
        assert_eq!(strs[2], "Private/Private/Unknown");
        notes.push((strs[1].clone(), strs[3..].to_vec()));
        off += 12 + pad4(namesz) + pad4(descsz);
    }
    notes.sort();
    let mut expected: Vec<(String, Vec<String>)> = declared_args()
        .into_iter()
        .map(|(name, args)| {
            let entries = args
                .iter()
                .flat_map(|(n, t)| match *t {
                    "&[u8]" => vec![format!("{n}:&[u8]"), format!("{n}.len:usize")],
                    _ => vec![format!("{n}:{t}")],
                })
                .collect();
            (name.to_string(), entries)
        })
        .collect();
    expected.sort();
    assert_eq!(notes, expected);
    // Each probe's entries are as many as its stapsdt note arguments.
    for ((name, sizes), (_, args)) in declared().iter().zip(declared_args()) {
        let (_, entries) = notes.iter().find(|(n, _)| n == name).unwrap();
        assert_eq!(entries.len(), sizes.len(), "{name} {args:?}");
    }
}
