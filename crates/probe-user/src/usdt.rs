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
//!
//! Probes of the `sightline-usdt` crate also have one `.note.sightline` note each (owner
//! `sightline`, type 1 = [`NT_SIGHTLINE_USDT`]; docs/usdt.md, "The typed-argument note"): the
//! provider's stability and each note argument's declared name and Rust type. [`probes`] attaches
//! them to the probe's sites ([`UsdtProbe::typed`], [`UsdtProbe::stability`]) when provider and
//! name match and the note has one entry per stapsdt argument.

use std::path::{Path, PathBuf};

use probe_sema::UsdtArgType;

use crate::argspec::{ArgSpec, ArgSpecError, parse_args};
use crate::elf::{ElfError, ElfFile};
use crate::glob::glob_match;
use crate::{FileOffset, VirtAddr};

/// `NT_STAPSDT`: the note type of SystemTap v3 probe descriptors.
pub const NT_STAPSDT: u32 = 3;

/// The note type of a `.note.sightline` typed-argument note (owner `sightline`, format version 1;
/// docs/usdt.md).
pub const NT_SIGHTLINE_USDT: u32 = 1;

/// Errors reading USDT notes.
#[derive(Debug, thiserror::Error)]
pub enum UsdtError {
    /// The ELF file could not be read or an address could not be converted.
    #[error(transparent)]
    Elf(#[from] ElfError),
    /// A note's descriptor is shorter than its fields or lacks a NUL terminator.
    #[error("{path}: malformed {section} at byte {at}: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The section: `.note.stapsdt` or `.note.sightline`.
        section: &'static str,
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
    /// Each argument's declared name and Rust type, from the probe's `.note.sightline` note (as
    /// many as `args`); empty when the file has no usable note for the probe.
    pub typed: Vec<UsdtArgType>,
    /// The provider's declared stability `Name/Data/Class` from that note; `None` without one
    /// (or when the note's is empty).
    pub stability: Option<String>,
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

/// One `.note.sightline` note: a `sightline-usdt` probe's declaration (docs/usdt.md, "The
/// typed-argument note").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedNote {
    /// Provider, as in the stapsdt notes.
    pub provider: String,
    /// Probe name, as in the stapsdt notes (`job__start`).
    pub name: String,
    /// The declared stability attributes as written (`Evolving/Evolving/Common`); `None` when the
    /// note's string is empty.
    pub stability: Option<String>,
    /// One entry per stapsdt note argument: `NAME:TYPE` split at the first colon.
    pub args: Vec<UsdtArgType>,
}

/// Walks the ELF notes of a section (gABI "Note Section": little-endian namesz, descsz, type; name
/// and descriptor each padded to 4 bytes) and calls `each(offset, owner, type, desc)` for every
/// note, the owner without its NUL.
///
/// # Errors
/// [`UsdtError::Malformed`] for a note whose name or descriptor runs past the section (the walk
/// cannot go on), or the first error `each` returns.
fn walk_notes(
    path: &Path,
    section: &'static str,
    sec: &[u8],
    mut each: impl FnMut(usize, &[u8], u32, &[u8]) -> Result<(), UsdtError>,
) -> Result<(), UsdtError> {
    let bad = |at, reason| UsdtError::Malformed {
        path: path.to_path_buf(),
        section,
        at,
        reason,
    };
    let u32_at = |i: usize| {
        sec.get(i..i + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    };
    let align4 = |n: usize| n.saturating_add(3) & !3;
    let mut i = 0;
    // Fewer than 12 bytes after the last note are not a note (and were never written by us).
    while i + 12 <= sec.len() {
        let (Some(namesz), Some(descsz), Some(ty)) = (u32_at(i), u32_at(i + 4), u32_at(i + 8))
        else {
            return Err(bad(i, "truncated note header"));
        };
        let (namesz, descsz) = (namesz as usize, descsz as usize);
        let name_start = i + 12;
        let desc_start = name_start.saturating_add(align4(namesz));
        if desc_start.saturating_add(descsz) > sec.len() {
            return Err(bad(i, "note runs past the section"));
        }
        let owner = &sec[name_start..name_start + namesz];
        let owner = owner.strip_suffix(b"\0").unwrap_or(owner);
        each(i, owner, ty, &sec[desc_start..desc_start + descsz])?;
        i = desc_start.saturating_add(align4(descsz));
    }
    Ok(())
}

/// Parses the bytes of a `.note.sightline` section (little-endian, 4-byte note alignment) into
/// its [`NT_SIGHTLINE_USDT`] notes; notes of other owners or types are skipped.
///
/// # Errors
/// [`UsdtError::Malformed`] (section `.note.sightline`, with `path` and the note's offset) for a
/// truncated note, a descriptor not ending in a NUL, fewer than three strings, or an argument
/// entry without a `:` or with an empty name or type.
pub fn parse_typed_notes(path: &Path, sec: &[u8]) -> Result<Vec<TypedNote>, UsdtError> {
    let mut out = Vec::new();
    walk_notes(path, ".note.sightline", sec, |at, owner, ty, d| {
        if ty != NT_SIGHTLINE_USDT || owner != b"sightline" {
            return Ok(());
        }
        let bad = |reason| UsdtError::Malformed {
            path: path.to_path_buf(),
            section: ".note.sightline",
            at,
            reason,
        };
        let Some(body) = d.strip_suffix(&[0]) else {
            return Err(bad("unterminated string"));
        };
        let strs: Vec<String> = body
            .split(|&b| b == 0)
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect();
        let [provider, name, stability, entries @ ..] = &strs[..] else {
            return Err(bad("fewer than provider, name and stability"));
        };
        let args = entries
            .iter()
            .map(|e| match e.split_once(':') {
                Some((n, t)) if !n.is_empty() && !t.is_empty() => Ok(UsdtArgType {
                    name: n.to_string(),
                    rust_type: t.to_string(),
                }),
                _ => Err(bad("argument entry is not NAME:TYPE")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.push(TypedNote {
            provider: provider.clone(),
            name: name.clone(),
            stability: (!stability.is_empty()).then(|| stability.clone()),
            args,
        });
        Ok(())
    })?;
    Ok(out)
}

/// Parses the bytes of a `.note.stapsdt` section (little-endian, 4-byte note alignment) into its
/// `NT_STAPSDT` descriptors; notes of other owners or types are skipped.
///
/// # Errors
/// [`UsdtError::Malformed`] (with `path` for context) on truncated notes or unterminated strings.
pub fn parse_notes(path: &Path, sec: &[u8]) -> Result<Vec<RawNote>, UsdtError> {
    let mut out = Vec::new();
    walk_notes(path, ".note.stapsdt", sec, |i, owner, ty, d| {
        if ty != NT_STAPSDT || owner != b"stapsdt" {
            return Ok(());
        }
        let bad = |at, reason| UsdtError::Malformed {
            path: path.to_path_buf(),
            section: ".note.stapsdt",
            at,
            reason,
        };
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
        Ok(())
    })?;
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
    // A malformed typed note costs only the types: the probes keep their stapsdt arguments.
    let typed: Vec<TypedNote> = elf
        .section_data(".note.sightline")
        .into_iter()
        .flat_map(|sec| parse_typed_notes(path, sec).unwrap_or_default())
        .collect();
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
            let decl = typed.iter().find(|t| {
                t.provider == note.provider && t.name == note.name && t.args.len() == args.len()
            });
            out.push(UsdtProbe {
                typed: decl.map(|t| t.args.clone()).unwrap_or_default(),
                stability: decl.and_then(|t| t.stability.clone()),
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

    /// An ELF note: `owner` (NUL-terminated, padded to 4 bytes), type `ntype`, then `words` as
    /// 8-byte little-endian values and `strs` as NUL-terminated strings, padded to 4 bytes.
    fn elf_note(owner: &str, ntype: u32, words: &[u64], strs: &[&str]) -> Vec<u8> {
        let mut desc = Vec::new();
        for w in words {
            desc.extend_from_slice(&w.to_le_bytes());
        }
        for s in strs {
            desc.extend_from_slice(s.as_bytes());
            desc.push(0);
        }
        let mut n = Vec::new();
        n.extend_from_slice(&(owner.len() as u32 + 1).to_le_bytes());
        n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        n.extend_from_slice(&ntype.to_le_bytes());
        n.extend_from_slice(owner.as_bytes());
        n.push(0);
        while n.len() % 4 != 0 {
            n.push(0);
        }
        n.extend_from_slice(&desc);
        while n.len() % 4 != 0 {
            n.push(0);
        }
        n
    }

    fn note(pc: u64, base: u64, sem: u64, strs: &[&str]) -> Vec<u8> {
        elf_note("stapsdt", NT_STAPSDT, &[pc, base, sem], strs)
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

    /// A `.note.sightline` note with `strs` as its descriptor's strings.
    fn typed_note(strs: &[&str]) -> Vec<u8> {
        elf_note("sightline", NT_SIGHTLINE_USDT, &[], strs)
    }

    #[test]
    fn parses_typed_notes() {
        let mut sec = typed_note(&[
            "webserver",
            "request",
            "Evolving/Evolving/Common",
            "request_path:&str",
            "status:u16",
            "c:&std::ffi::CStr",
        ]);
        // A stapsdt note in the same section is not ours: skipped.
        sec.extend(note(0x1200, 0x2004, 0, &["prov", "two", ""]));
        sec.extend(typed_note(&["plain", "tick", ""]));
        let notes = parse_typed_notes(Path::new("x"), &sec).unwrap();
        assert_eq!(notes.len(), 2);
        assert_eq!(
            (notes[0].provider.as_str(), notes[0].name.as_str()),
            ("webserver", "request")
        );
        assert_eq!(
            notes[0].stability.as_deref(),
            Some("Evolving/Evolving/Common")
        );
        let args: Vec<(&str, &str)> = notes[0]
            .args
            .iter()
            .map(|a| (a.name.as_str(), a.rust_type.as_str()))
            .collect();
        assert_eq!(
            args,
            [
                ("request_path", "&str"),
                ("status", "u16"),
                ("c", "&std::ffi::CStr")
            ]
        );
        assert_eq!(notes[1].stability, None);
        assert!(notes[1].args.is_empty());
    }

    /// Bad or truncated typed notes are errors naming the section and offset, never panics.
    #[test]
    fn bad_typed_notes_are_errors() {
        let good = typed_note(&["webserver", "request", "", "request_path:&str"]);
        let reason = |sec: &[u8]| match parse_typed_notes(Path::new("bin"), sec) {
            Err(UsdtError::Malformed {
                section,
                at,
                reason,
                ..
            }) => {
                assert_eq!(section, ".note.sightline");
                (at, reason)
            }
            other => panic!("{other:?}"),
        };
        // Cut inside the descriptor, at every length that still holds a header.
        for cut in 12..good.len() - 3 {
            let (at, r) = reason(&good[..cut]);
            assert_eq!((at, r), (0, "note runs past the section"), "cut {cut}");
        }
        // Fewer than a header's 12 bytes after a good note: ignored, as for stapsdt.
        let mut tail = good.clone();
        tail.extend_from_slice(&[1, 0, 0, 0]);
        assert_eq!(parse_typed_notes(Path::new("bin"), &tail).unwrap().len(), 1);
        // A second, bad note is reported at its own offset.
        let mut two = good.clone();
        two.extend(typed_note(&["webserver", "request", "", "no_colon"]));
        assert_eq!(
            reason(&two),
            (good.len(), "argument entry is not NAME:TYPE")
        );
        assert_eq!(
            reason(&typed_note(&["webserver", "request"])),
            (0, "fewer than provider, name and stability")
        );
        assert_eq!(
            reason(&typed_note(&["p", "n", "", ":u8"])),
            (0, "argument entry is not NAME:TYPE")
        );
        // Descriptor without its final NUL (descsz one short).
        let mut unterminated = good.clone();
        let descsz = u32::from_le_bytes(good[4..8].try_into().unwrap()) - 1;
        unterminated[4..8].copy_from_slice(&descsz.to_le_bytes());
        assert_eq!(reason(&unterminated), (0, "unterminated string"));
        // An absurd size does not overflow.
        let mut huge = good.clone();
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(reason(&huge), (0, "note runs past the section"));
        let e = parse_typed_notes(Path::new("bin"), &two)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("bin: malformed .note.sightline at byte "),
            "{e}"
        );
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
            typed: vec![],
            stability: None,
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
