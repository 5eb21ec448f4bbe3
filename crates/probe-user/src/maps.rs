//! `/proc/PID/maps`: which files a process maps where, and module resolution for probe
//! descriptions.
//!
//! The format is proc(5)'s: `start-end perms offset dev inode pathname`, one mapping a line,
//! addresses and offset in hex. A *module* is a file-backed path with at least one mapping. Probe
//! descriptions name modules the DTrace way (DTrace guide, "pid Provider"): `a.out` is the
//! executable, a shared object goes by its basename (`libc.so.6`) or by its full path, and globs
//! (`libc*`) match basenames, or whole paths when the pattern contains `/`.

use std::path::{Path, PathBuf};

use crate::elf::ElfFile;
use crate::glob::glob_match;
use crate::{AbsAddr, FileOffset, VirtAddr};

/// x86-64 page size in bytes.
const PAGE: u64 = 4096;

/// Errors reading a process's mappings.
#[derive(Debug, thiserror::Error)]
pub enum MapsError {
    /// `/proc/PID/maps` (or `/proc/PID/exe`) could not be read: usually the process is gone.
    #[error("reading /proc/{pid}/{what}")]
    Read {
        /// The process id.
        pid: u32,
        /// `maps` or `exe`.
        what: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line of the maps file did not have the proc(5) shape.
    #[error("/proc/{pid}/maps line {line}: malformed: {text:?}")]
    Malformed {
        /// The process id.
        pid: u32,
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
}

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address (inclusive).
    pub start: AbsAddr,
    /// End address (exclusive).
    pub end: AbsAddr,
    /// `rwxp`-style permissions as printed (`r-xp`).
    pub perms: String,
    /// File offset mapped at `start`.
    pub offset: FileOffset,
    /// Inode number (0 for anonymous mappings).
    pub inode: u64,
    /// The path, pseudo-name (`[heap]`, `[vdso]`) or empty; a ` (deleted)` suffix is removed and
    /// recorded in `deleted`.
    pub path: String,
    /// True when the kernel marked the file ` (deleted)`.
    pub deleted: bool,
}

impl Mapping {
    /// True for a mapping of a real file (an absolute path, not `[heap]` and the like).
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/')
    }

    /// True when the mapping is executable.
    pub fn is_exec(&self) -> bool {
        self.perms.as_bytes().get(2) == Some(&b'x')
    }

    /// True when `addr` is inside the mapping.
    pub fn contains(&self, addr: AbsAddr) -> bool {
        self.start <= addr && addr < self.end
    }

    /// The file offset that `addr` (inside the mapping) corresponds to.
    pub fn file_offset_of(&self, addr: AbsAddr) -> FileOffset {
        FileOffset(addr.0 - self.start.0 + self.offset.0)
    }
}

/// Parses the text of a maps file.
///
/// # Errors
/// [`MapsError::Malformed`] naming the first bad line.
pub fn parse_maps(pid: u32, text: &str) -> Result<Vec<Mapping>, MapsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || MapsError::Malformed {
            pid,
            line: i + 1,
            text: line.to_string(),
        };
        let mut fields = line.splitn(6, ' ');
        let range = fields.next().ok_or_else(bad)?;
        let perms = fields.next().ok_or_else(bad)?;
        let offset = fields.next().ok_or_else(bad)?;
        let _dev = fields.next().ok_or_else(bad)?;
        let inode = fields.next().ok_or_else(bad)?;
        let path = fields.next().unwrap_or("").trim_start();
        let (s, e) = range.split_once('-').ok_or_else(bad)?;
        let hex = |t: &str| u64::from_str_radix(t, 16).map_err(|_| bad());
        let (path, deleted) = match path.strip_suffix(" (deleted)") {
            Some(p) => (p, true),
            None => (path, false),
        };
        out.push(Mapping {
            start: AbsAddr(hex(s)?),
            end: AbsAddr(hex(e)?),
            perms: perms.to_string(),
            offset: FileOffset(hex(offset)?),
            inode: inode.parse().map_err(|_| bad())?,
            path: path.to_string(),
            deleted,
        });
    }
    Ok(out)
}

/// A snapshot of one process's mappings and its executable's path.
#[derive(Debug, Clone)]
pub struct ProcessMaps {
    /// The process id (tgid).
    pub pid: u32,
    /// The executable (`/proc/PID/exe`), the target of the `a.out` alias.
    pub exe: PathBuf,
    /// Mappings in address order.
    pub mappings: Vec<Mapping>,
}

/// A file mapped by a process, with its load bias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The file's path as the process maps it.
    pub path: PathBuf,
    /// `runtime address - link-time address` (0 for a non-PIE executable).
    pub bias: u64,
    /// True when this is the process's executable (`a.out`).
    pub is_exe: bool,
}

impl Module {
    /// The name DTrace shows for the module: the basename (`libc.so.6`).
    pub fn name(&self) -> &str {
        self.path.file_name().and_then(|n| n.to_str()).unwrap_or("")
    }

    /// Runtime address of the link-time address `v`.
    pub fn abs(&self, v: VirtAddr) -> AbsAddr {
        AbsAddr(v.0.wrapping_add(self.bias))
    }
}

impl ProcessMaps {
    /// Reads `/proc/PID/maps` and `/proc/PID/exe`.
    ///
    /// # Errors
    /// [`MapsError::Read`] when the process is gone or not readable, [`MapsError::Malformed`] on a
    /// bad line.
    pub fn read(pid: u32) -> Result<Self, MapsError> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|source| {
            MapsError::Read {
                pid,
                what: "maps",
                source,
            }
        })?;
        let exe =
            std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|source| MapsError::Read {
                pid,
                what: "exe",
                source,
            })?;
        let exe = match exe.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
            Some(p) => PathBuf::from(p),
            None => exe,
        };
        Ok(ProcessMaps {
            pid,
            exe,
            mappings: parse_maps(pid, &text)?,
        })
    }

    /// Distinct mapped file paths, in address order of their first mapping.
    pub fn paths(&self) -> Vec<&str> {
        let mut seen: Vec<&str> = Vec::new();
        for m in self.mappings.iter().filter(|m| m.is_file()) {
            if !seen.contains(&m.path.as_str()) {
                seen.push(&m.path);
            }
        }
        seen
    }

    /// Mapped file paths that a module pattern selects: `a.out` (the executable), a basename, a full
    /// path, or a glob over basenames (over full paths when the pattern has a `/`); an empty pattern
    /// selects every file that has an executable mapping.
    pub fn resolve_module(&self, pattern: &str) -> Vec<PathBuf> {
        let exe = self.exe.to_str().unwrap_or("");
        let mut out = Vec::new();
        for path in self.paths() {
            let has_exec = self.mappings.iter().any(|m| m.path == path && m.is_exec());
            let base = Path::new(path)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("");
            let hit = if pattern.is_empty() {
                has_exec
            } else if pattern == "a.out" {
                path == exe
            } else if pattern.contains('/') {
                glob_match(pattern, path)
            } else {
                glob_match(pattern, base) || (path == exe && glob_match(pattern, "a.out"))
            };
            if hit {
                out.push(PathBuf::from(path));
            }
        }
        out
    }

    /// The mapping containing `addr`.
    pub fn mapping_at(&self, addr: AbsAddr) -> Option<&Mapping> {
        let idx = self.mappings.partition_point(|m| m.start <= addr);
        idx.checked_sub(1)
            .map(|i| &self.mappings[i])
            .filter(|m| m.contains(addr))
    }

    /// The module for `path` with its load bias computed from `elf` (the same file, parsed).
    ///
    /// The bias comes from the lowest mapping of the file, which maps the first `PT_LOAD` segment:
    /// `bias = mapping.start - page_down(first.p_vaddr)`. Returns `None` when the file is not mapped
    /// or its first mapping does not start at the first segment's page.
    pub fn module(&self, path: &Path, elf: &ElfFile) -> Option<Module> {
        let p = path.to_str()?;
        // The process shows canonical paths; `path` may go through a symlink (`/lib` → `/usr/lib`).
        let canon = std::fs::canonicalize(path).ok();
        let canon = canon.as_ref().and_then(|c| c.to_str()).unwrap_or(p);
        let first_map = self
            .mappings
            .iter()
            .find(|m| m.path == p || m.path == canon)?;
        let seg = elf.segments().first()?;
        if first_map.offset.0 != seg.offset & !(PAGE - 1) {
            return None;
        }
        let bias = first_map.start.0.wrapping_sub(seg.vaddr & !(PAGE - 1));
        Some(Module {
            path: path.to_path_buf(),
            bias,
            is_exe: path == self.exe,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
55d0c2a00000-55d0c2a02000 r--p 00000000 08:01 1234 /usr/bin/cat
55d0c2a02000-55d0c2a07000 r-xp 00002000 08:01 1234 /usr/bin/cat
55d0c3b9c000-55d0c3bbd000 rw-p 00000000 00:00 0                          [heap]
7f1e5a000000-7f1e5a028000 r--p 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1e5a028000-7f1e5a1bd000 r-xp 00028000 08:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1e5a300000-7f1e5a301000 rw-p 00000000 08:01 77 /tmp/x (deleted)
7ffd1b7f2000-7ffd1b7f4000 r-xp 00000000 00:00 0                          [vdso]
";

    fn snapshot() -> ProcessMaps {
        ProcessMaps {
            pid: 1,
            exe: PathBuf::from("/usr/bin/cat"),
            mappings: parse_maps(1, SAMPLE).unwrap(),
        }
    }

    #[test]
    fn parses_lines() {
        let m = parse_maps(1, SAMPLE).unwrap();
        assert_eq!(m.len(), 7);
        assert_eq!(m[1].start, AbsAddr(0x55d0c2a02000));
        assert_eq!(m[1].offset, FileOffset(0x2000));
        assert!(m[1].is_exec());
        assert_eq!(m[2].path, "[heap]");
        assert!(!m[2].is_file());
        assert_eq!(m[5].path, "/tmp/x");
        assert!(m[5].deleted);
        assert!(matches!(
            parse_maps(3, "zzz r-xp"),
            Err(MapsError::Malformed {
                pid: 3,
                line: 1,
                ..
            })
        ));
    }

    #[test]
    fn resolves_modules() {
        let s = snapshot();
        assert_eq!(
            s.resolve_module("a.out"),
            vec![PathBuf::from("/usr/bin/cat")]
        );
        assert_eq!(
            s.resolve_module("libc.so.6"),
            vec![PathBuf::from("/usr/lib/x86_64-linux-gnu/libc.so.6")]
        );
        assert_eq!(
            s.resolve_module("libc*"),
            vec![PathBuf::from("/usr/lib/x86_64-linux-gnu/libc.so.6")]
        );
        assert_eq!(
            s.resolve_module("/usr/lib/x86_64-linux-gnu/libc.so.6"),
            vec![PathBuf::from("/usr/lib/x86_64-linux-gnu/libc.so.6")]
        );
        assert!(s.resolve_module("libm.so.6").is_empty());
        // Empty: files with executable mappings only.
        assert_eq!(s.resolve_module("").len(), 2);
        assert_eq!(s.resolve_module("cat"), vec![PathBuf::from("/usr/bin/cat")]);
    }

    #[test]
    fn finds_mapping_of_address() {
        let s = snapshot();
        let m = s.mapping_at(AbsAddr(0x7f1e5a028010)).unwrap();
        assert_eq!(
            m.file_offset_of(AbsAddr(0x7f1e5a028010)),
            FileOffset(0x28010)
        );
        assert!(s.mapping_at(AbsAddr(0x10)).is_none());
        assert!(s.mapping_at(AbsAddr(0x55d0c2a07000)).is_none());
    }
}
