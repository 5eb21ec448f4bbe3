//! USDT probes: SystemTap v3 notes from `.note.stapsdt`.
//!
//! `<sys/sdt.h>` records each probe site as an ELF note (owner `stapsdt`, type 3 = `NT_STAPSDT`;
//! SystemTap wiki "UserSpaceProbeImplementation") whose descriptor is
//!
//! ```text
//! u64 pc         link-time address of the probe's nop
//! u64 base       link-time address of .stapsdt.base when the note was written
//! u64 semaphore  link-time address of the u16 semaphore, or 0
//! provider\0 name\0 arguments\0
//! ```
//!
//! When the file was prelinked after assembly, `.stapsdt.base`'s actual address differs from the
//! recorded `base`; `pc` and `semaphore` are then shifted by the difference. Probe names use `__`
//! where DTrace shows `-` (`function__return` is `function-return`); both forms are accepted when
//! matching ([`UsdtProbe::matches`]). One name may have several sites (inlined or repeated
//! `DTRACE_PROBE` uses): each site is one [`UsdtProbe`].

use std::path::{Path, PathBuf};

use crate::argspec::{ArgSpec, ArgSpecError, parse_args};
use crate::elf::{ElfError, ElfFile};
use crate::glob::glob_match;
use crate::{FileOffset, VirtAddr};

/// `NT_STAPSDT`: the note type of SystemTap v3 probe descriptors.
pub const NT_STAPSDT: u32 = 3;

/// Errors reading USDT notes.
#[derive(Debug, thiserror::Error)]
pub enum UsdtError {
    /// The ELF file could not be read or an address could not be converted.
    #[error(transparent)]
    Elf(#[from] ElfError),
    /// A note's descriptor is shorter than its fields or lacks a NUL terminator.
    #[error("{path}: malformed .note.stapsdt at byte {at}: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Offset within the section.
        at: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A probe's argument string did not parse.
    #[error("{path}: probe {provider}:{name}: reading its argument specs")]
    Arg {
        /// The file.
        path: PathBuf,
        /// The probe's provider.
        provider: String,
        /// The probe's name.
        name: String,
        /// The parse error.
        source: Box<ArgSpecError>,
    },
}

/// One USDT probe site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsdtProbe {
    /// The file holding the note.
    pub path: PathBuf,
    /// Provider as stored (`python`).
    pub provider: String,
    /// Name as stored (`function__return`); see [`UsdtProbe::dtrace_name`].
    pub name: String,
    /// Link-time address of the site, after the `.stapsdt.base` adjustment.
    pub pc: VirtAddr,
    /// File offset of the site: where the uprobe goes.
    pub pc_offset: FileOffset,
    /// Link-time address of the u16 semaphore, if the probe has one.
    pub semaphore: Option<VirtAddr>,
    /// File offset of the semaphore (the uprobe `ref_ctr_offset`), if it has one.
    pub semaphore_offset: Option<FileOffset>,
    /// The function containing the site (DTrace's probe *function* field), or empty.
    pub function: String,
    /// The argument string as stored (`8@%rbp 8@%r12 -4@%eax`).
    pub arg_text: String,
    /// The parsed arguments, RIP-relative symbols resolved.
    pub args: Vec<ArgSpec>,
}

impl UsdtProbe {
    /// The name DTrace shows: every `__` replaced by `-` (`function-return`).
    pub fn dtrace_name(&self) -> String {
        self.name.replace("__", "-")
    }

    /// True when the name matches `pattern` (glob) in either spelling: `function__return`,
    /// `function-return` and `function-*` all match `function__return`.
    pub fn matches_name(&self, pattern: &str) -> bool {
        glob_match(pattern, &self.name)
            || glob_match(&pattern.replace("__", "-"), &self.dtrace_name())
    }

    /// True when provider and name match their patterns (empty patterns match everything).
    pub fn matches(&self, provider: &str, name: &str) -> bool {
        glob_match(provider, &self.provider) && self.matches_name(name)
    }

    /// The module name shown for the probe: the file's basename.
    pub fn module(&self) -> &str {
        self.path.file_name().and_then(|n| n.to_str()).unwrap_or("")
    }
}

/// A raw stapsdt note descriptor, before address adjustment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawNote {
    /// Recorded probe address.
    pub pc: u64,
    /// Recorded `.stapsdt.base` address.
    pub base: u64,
    /// Recorded semaphore address (0 = none).
    pub semaphore: u64,
    /// Provider.
    pub provider: String,
    /// Name.
    pub name: String,
    /// Argument string.
    pub args: String,
}

/// Parses the bytes of a `.note.stapsdt` section (little-endian, 4-byte note alignment) into its
/// `NT_STAPSDT` descriptors; notes of other owners or types are skipped.
///
/// # Errors
/// [`UsdtError::Malformed`] (with `path` for context) on truncated notes or unterminated strings.
pub fn parse_notes(path: &Path, sec: &[u8]) -> Result<Vec<RawNote>, UsdtError> {
    let bad = |at, reason| UsdtError::Malformed {
        path: path.to_path_buf(),
        at,
        reason,
    };
    let u32_at = |i: usize| {
        sec.get(i..i + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    };
    let align4 = |n: usize| (n + 3) & !3;
    let mut out = Vec::new();
    let mut i = 0;
    while i + 12 <= sec.len() {
        let (Some(namesz), Some(descsz), Some(ty)) = (u32_at(i), u32_at(i + 4), u32_at(i + 8))
        else {
            return Err(bad(i, "truncated note header"));
        };
        let (namesz, descsz) = (namesz as usize, descsz as usize);
        let name_start = i + 12;
        let desc_start = name_start + align4(namesz);
        let next = desc_start + align4(descsz);
        if desc_start + descsz > sec.len() {
            return Err(bad(i, "note runs past the section"));
        }
        let owner = &sec[name_start..name_start + namesz];
        if ty == NT_STAPSDT && owner.strip_suffix(b"\0").unwrap_or(owner) == b"stapsdt" {
            let d = &sec[desc_start..desc_start + descsz];
            if d.len() < 24 {
                return Err(bad(i, "descriptor shorter than its three addresses"));
            }
            let u64_at = |k: usize| u64::from_le_bytes(d[k..k + 8].try_into().expect("8 bytes"));
            let mut strs = d[24..].split(|&b| b == 0);
            let mut next_str = || -> Result<String, UsdtError> {
                strs.next()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .ok_or_else(|| bad(i, "missing string"))
            };
            let provider = next_str()?;
            let name = next_str()?;
            let args = next_str()?;
            if !d[24..].ends_with(&[0]) {
                return Err(bad(i, "unterminated string"));
            }
            out.push(RawNote {
                pc: u64_at(0),
                base: u64_at(8),
                semaphore: u64_at(16),
                provider,
                name,
                args,
            });
        }
        i = next;
    }
    Ok(out)
}

/// Every USDT probe site in `elf`, in note order.
///
/// # Errors
/// [`UsdtError`] when a note is malformed, an argument does not parse, or an address is not
/// file-backed.
pub fn probes(elf: &ElfFile) -> Result<Vec<UsdtProbe>, UsdtError> {
    let path = elf.path();
    let actual_base = elf.section_addr(".stapsdt.base");
    let mut out = Vec::new();
    for sec in elf.section_data(".note.stapsdt") {
        for note in parse_notes(path, sec)? {
            // Prelink adjustment: shift by (actual - recorded) .stapsdt.base.
            let delta = match actual_base {
                Some(b) if note.base != 0 => b.0.wrapping_sub(note.base),
                _ => 0,
            };
            let pc = VirtAddr(note.pc.wrapping_add(delta));
            let semaphore =
                (note.semaphore != 0).then(|| VirtAddr(note.semaphore.wrapping_add(delta)));
            let pc_offset = elf.file_offset(pc)?;
            let semaphore_offset = semaphore.map(|s| elf.file_offset(s)).transpose()?;
            let arg_err = |source| UsdtError::Arg {
                path: path.to_path_buf(),
                provider: note.provider.clone(),
                name: note.name.clone(),
                source: Box::new(source),
            };
            let mut args = parse_args(&note.args).map_err(arg_err)?;
            for a in &mut args {
                a.resolve(|s| elf.symbol_addr(s)).map_err(arg_err)?;
            }
            let function = elf
                .function_at(pc)
                .map(|f| f.name.clone())
                .unwrap_or_default();
            out.push(UsdtProbe {
                path: path.to_path_buf(),
                provider: note.provider,
                name: note.name,
                pc,
                pc_offset,
                semaphore,
                semaphore_offset,
                function,
                arg_text: note.args,
                args,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(pc: u64, base: u64, sem: u64, strs: &[&str]) -> Vec<u8> {
        let mut desc = Vec::new();
        desc.extend_from_slice(&pc.to_le_bytes());
        desc.extend_from_slice(&base.to_le_bytes());
        desc.extend_from_slice(&sem.to_le_bytes());
        for s in strs {
            desc.extend_from_slice(s.as_bytes());
            desc.push(0);
        }
        let mut n = Vec::new();
        n.extend_from_slice(&8u32.to_le_bytes());
        n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        n.extend_from_slice(&NT_STAPSDT.to_le_bytes());
        n.extend_from_slice(b"stapsdt\0");
        n.extend_from_slice(&desc);
        while n.len() % 4 != 0 {
            n.push(0);
        }
        n
    }

    #[test]
    fn parses_descriptors() {
        let mut sec = note(
            0x1139,
            0x2004,
            0x4010,
            &["prov", "probe__one", "-4@%edi 8@-8(%rbp)"],
        );
        sec.extend(note(0x1200, 0x2004, 0, &["prov", "two", ""]));
        let notes = parse_notes(Path::new("x"), &sec).unwrap();
        assert_eq!(notes.len(), 2);
        assert_eq!(notes[0].pc, 0x1139);
        assert_eq!(notes[0].semaphore, 0x4010);
        assert_eq!(notes[0].name, "probe__one");
        assert_eq!(notes[0].args, "-4@%edi 8@-8(%rbp)");
        assert_eq!(notes[1].args, "");
        assert_eq!(notes[1].semaphore, 0);
        // Truncated.
        assert!(parse_notes(Path::new("x"), &sec[..sec.len() - 8]).is_err());
    }

    #[test]
    fn dash_names() {
        let p = UsdtProbe {
            path: PathBuf::from("/usr/bin/python3.11"),
            provider: "python".into(),
            name: "function__return".into(),
            pc: VirtAddr(0),
            pc_offset: FileOffset(0),
            semaphore: None,
            semaphore_offset: None,
            function: String::new(),
            arg_text: String::new(),
            args: vec![],
        };
        assert_eq!(p.dtrace_name(), "function-return");
        assert!(p.matches_name("function__return"));
        assert!(p.matches_name("function-return"));
        assert!(p.matches_name("function-*"));
        assert!(p.matches_name("function__*"));
        assert!(!p.matches_name("function-entry"));
        assert!(p.matches("py*", ""));
        assert!(!p.matches("libstdcxx", ""));
        assert_eq!(p.module(), "python3.11");
    }
}
