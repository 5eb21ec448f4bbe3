//! Helpers shared by the integration tests: the demo binary and a SystemTap note reader.

#![allow(dead_code)]

use std::path::PathBuf;

/// Path of the `usdt-demo` binary, built by Cargo for these tests.
pub fn demo_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_usdt-demo"))
}

/// One SystemTap v3 SDT note (`NT_STAPSDT`, owner "stapsdt"), as read from the file.
#[derive(Debug, Clone, PartialEq)]
pub struct SdtNote {
    /// Link-time address of the probe site.
    pub pc: u64,
    /// Link-time address of `.stapsdt.base` as recorded in the note.
    pub base: u64,
    /// Link-time address of the semaphore (0: none).
    pub semaphore: u64,
    pub provider: String,
    pub name: String,
    /// The argument specs, split on spaces (`-4@%edi`).
    pub args: Vec<String>,
}

fn cstr_at(bytes: &[u8], at: &mut usize) -> String {
    let end = bytes[*at..]
        .iter()
        .position(|&b| b == 0)
        .expect("NUL-terminated string")
        + *at;
    let s = String::from_utf8(bytes[*at..end].to_vec()).expect("UTF-8 note string");
    *at = end + 1;
    s
}

/// Walks the raw `.note.stapsdt` section data (ELF notes: namesz, descsz, type, name and desc each
/// padded to 4 bytes; gABI "Note Section") and decodes every stapsdt note (x86-64: 8-byte
/// addresses, little-endian).
pub fn parse_notes(data: &[u8]) -> Vec<SdtNote> {
    let u32_at = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |d: &[u8], o: usize| u64::from_le_bytes(d[o..o + 8].try_into().unwrap());
    let pad4 = |n: usize| (n + 3) & !3;
    let mut notes = Vec::new();
    let mut off = 0;
    while off + 12 <= data.len() {
        let (namesz, descsz, ntype) = (u32_at(off), u32_at(off + 4), u32_at(off + 8));
        let name = &data[off + 12..off + 12 + namesz];
        let desc_off = off + 12 + pad4(namesz);
        let desc = &data[desc_off..desc_off + descsz];
        off = desc_off + pad4(descsz);
        if name != b"stapsdt\0" || ntype != 3 {
            continue;
        }
        let mut at = 24;
        let provider = cstr_at(desc, &mut at);
        let probe = cstr_at(desc, &mut at);
        let argstr = cstr_at(desc, &mut at);
        notes.push(SdtNote {
            pc: u64_at(desc, 0),
            base: u64_at(desc, 8),
            semaphore: u64_at(desc, 16),
            provider,
            name: probe,
            args: argstr.split_whitespace().map(str::to_owned).collect(),
        });
    }
    notes
}
