//! ELF model of a probe target: functions from `.symtab` and `.dynsym`, loadable segments, and the
//! conversion from link-time virtual addresses to file offsets that uprobes need.
//!
//! A uprobe is placed at a *file offset* of an inode (see the kernel's
//! `Documentation/trace/uprobetracer.rst`: "OFFSET is the offset of the probe in the file"), while
//! symbols and stapsdt notes hold *virtual addresses*. [`ElfFile::file_offset`] converts through the
//! `PT_LOAD` program headers (System V ABI, "Program Header"), which is right for PIE, non-PIE and
//! shared objects alike.

use std::path::{Path, PathBuf};

use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind, elf};

use crate::{FileOffset, VirtAddr};

/// Errors reading or querying an ELF file.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The path names no regular file (a device such as `/dev/zero`, a FIFO, a directory, a
    /// socket), checked with `stat(2)` before anything is read.
    #[error("{path} is not a regular file (it is {kind})")]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead ("a character device", "a FIFO", ...).
        kind: &'static str,
    },
    /// The file does not start with the ELF magic `\x7fELF` (only its first 4 bytes were read).
    #[error("{path} is not an ELF file")]
    NotElf {
        /// The file.
        path: PathBuf,
    },
    /// The file is larger than [`MAX_ELF_SIZE`] (it is not read).
    #[error("{path} is {size} bytes, over the limit of {limit} bytes for a probed ELF file")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes (`st_size`).
        size: u64,
        /// [`MAX_ELF_SIZE`].
        limit: u64,
    },
    /// The file is not a 64-bit ELF file, or its headers are malformed.
    #[error("{path} is not a usable 64-bit ELF file")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser rejected.
        #[source]
        source: object::Error,
    },
    /// The file is a big-endian ELF file (uprobes here are for x86-64, little-endian).
    #[error("{path} is a big-endian ELF file")]
    BigEndian {
        /// The file.
        path: PathBuf,
    },
    /// A virtual address lies in no `PT_LOAD` segment's file-backed part (so no uprobe can be put
    /// there).
    #[error("{path}: address {addr} is not in a file-backed loadable segment")]
    NotMapped {
        /// The file.
        path: PathBuf,
        /// The address.
        addr: VirtAddr,
    },
}

/// Whether an ELF file is a fixed-address executable or position independent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElfKind {
    /// `ET_EXEC`: a non-PIE executable, loaded at its link-time addresses (load bias 0).
    Executable,
    /// `ET_DYN`: a PIE executable or a shared object, loaded at a per-process bias.
    Dynamic,
}

/// Which symbol table a function came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolTable {
    /// `.symtab` (absent from stripped binaries).
    Symtab,
    /// `.dynsym` (the exported symbols; survives stripping).
    Dynsym,
}

/// A function symbol (`STT_FUNC` or `STT_GNU_IFUNC`, defined in this file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// The symbol's name as stored (C++ and Rust names are mangled; version suffixes of `.dynsym`
    /// are not part of it).
    pub name: String,
    /// Link-time virtual address of the first instruction.
    pub addr: VirtAddr,
    /// Size in bytes from `st_size` (0 when the symbol does not say).
    pub size: u64,
    /// File offset of the first instruction (where a uprobe on its entry goes).
    pub offset: FileOffset,
    /// True for `STT_GNU_IFUNC`: the symbol is a resolver that returns the implementation, so its
    /// entry fires once per binding, not once per call.
    pub ifunc: bool,
    /// The table the symbol came from (`.symtab` wins when both hold it).
    pub table: SymbolTable,
}

/// A `PT_LOAD` program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_memsz` in bytes.
    pub memsz: u64,
    /// `p_offset`.
    pub offset: u64,
    /// `p_filesz` in bytes.
    pub filesz: u64,
    /// `p_flags` (`PF_X` = 1, `PF_W` = 2, `PF_R` = 4).
    pub flags: u32,
}

/// A parsed ELF file with its bytes, functions and segments.
///
/// Built by [`ElfFile::open`]; functions are sorted by address, then name.
#[derive(Debug)]
pub struct ElfFile {
    path: PathBuf,
    data: Vec<u8>,
    kind: ElfKind,
    segments: Vec<Segment>,
    functions: Vec<Function>,
    sections: Vec<SectionInfo>,
    dynamic: DynamicInfo,
    entry: VirtAddr,
}

/// What the dynamic loader reads: `PT_INTERP` and the `.dynamic` entries that name libraries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicInfo {
    /// `PT_INTERP`: the dynamic loader's path (`/lib64/ld-linux-x86-64.so.2`), if any.
    pub interp: Option<String>,
    /// `DT_NEEDED` names in order (`libc.so.6`).
    pub needed: Vec<String>,
    /// `DT_RPATH` directories (`:`-separated in the file).
    pub rpath: Vec<String>,
    /// `DT_RUNPATH` directories.
    pub runpath: Vec<String>,
}

/// Name, address and file range of a section.
#[derive(Debug, Clone)]
pub(crate) struct SectionInfo {
    pub(crate) name: String,
    pub(crate) addr: u64,
    pub(crate) file_range: Option<(u64, u64)>,
}

/// The largest file [`ElfFile::open`] reads: 1 GiB (the biggest libraries on a Debian system,
/// `libjvm.so` and LLVM's, are tens of MiB; the file is held in memory while probes are matched).
pub const MAX_ELF_SIZE: u64 = 1 << 30;

/// [`ElfError::NotRegular`] unless `meta` is a regular file's.
fn check_regular(path: &Path, meta: &std::fs::Metadata) -> Result<(), ElfError> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(ElfError::NotRegular {
        path: path.to_path_buf(),
        kind,
    })
}

impl ElfFile {
    /// Reads and parses the ELF file at `path`.
    ///
    /// # Errors
    /// [`ElfError::Read`] when the file cannot be read; [`ElfError::NotRegular`],
    /// [`ElfError::TooLarge`] or [`ElfError::NotElf`] from the checks below; [`ElfError::Parse`] (or
    /// [`ElfError::BigEndian`]) when it is not a 64-bit little-endian ELF file.
    ///
    /// The file is checked before it is read (issue 22: `pid:/dev/zero:malloc:entry` read
    /// without bound): `stat(2)` must show a regular file ([`ElfError::NotRegular`], so devices,
    /// FIFOs and directories are never opened), its size must be at most [`MAX_ELF_SIZE`]
    /// ([`ElfError::TooLarge`]), and its first 4 bytes must be the ELF magic
    /// ([`ElfError::NotElf`]); the read is bounded by the size `fstat(2)` gave, plus one byte to
    /// notice a file that grows meanwhile.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ElfError> {
        use std::io::Read;
        let path = path.as_ref().to_path_buf();
        let read_err = |source| ElfError::Read {
            path: path.clone(),
            source,
        };
        // `stat` before `open`: opening a FIFO blocks until a writer comes.
        let meta = std::fs::metadata(&path).map_err(read_err)?;
        check_regular(&path, &meta)?;
        let file = std::fs::File::open(&path).map_err(read_err)?;
        // The path may have been replaced between the two calls: check what was opened.
        let meta = file.metadata().map_err(read_err)?;
        check_regular(&path, &meta)?;
        if meta.len() > MAX_ELF_SIZE {
            return Err(ElfError::TooLarge {
                path,
                size: meta.len(),
                limit: MAX_ELF_SIZE,
            });
        }
        let mut data = Vec::with_capacity(meta.len() as usize);
        let mut file = file.take(MAX_ELF_SIZE + 1);
        (&mut file)
            .take(4)
            .read_to_end(&mut data)
            .map_err(read_err)?;
        if data.as_slice() != elf::ELFMAG {
            return Err(ElfError::NotElf { path });
        }
        file.read_to_end(&mut data).map_err(read_err)?;
        if data.len() as u64 > MAX_ELF_SIZE {
            return Err(ElfError::TooLarge {
                path,
                size: data.len() as u64,
                limit: MAX_ELF_SIZE,
            });
        }
        Self::from_bytes(path, data)
    }

    /// Parses ELF bytes read elsewhere; `path` is kept for messages and for uprobe attach.
    ///
    /// # Errors
    /// [`ElfError::Parse`] when the bytes are not a 64-bit ELF file, [`ElfError::BigEndian`] when it
    /// is big-endian.
    pub fn from_bytes(path: PathBuf, data: Vec<u8>) -> Result<Self, ElfError> {
        let parse_err = |source| ElfError::Parse {
            path: path.clone(),
            source,
        };
        let file = ElfFile64::<object::Endianness>::parse(&*data).map_err(parse_err)?;
        let endian = file.endian();
        if !file.is_little_endian() {
            return Err(ElfError::BigEndian { path: path.clone() });
        }
        let kind = match file.elf_header().e_type(endian) {
            elf::ET_EXEC => ElfKind::Executable,
            _ => ElfKind::Dynamic,
        };
        let segments: Vec<Segment> = file
            .elf_program_headers()
            .iter()
            .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
            .map(|ph| Segment {
                vaddr: ph.p_vaddr(endian),
                memsz: ph.p_memsz(endian),
                offset: ph.p_offset(endian),
                filesz: ph.p_filesz(endian),
                flags: ph.p_flags(endian).0,
            })
            .collect();
        let sections = file
            .sections()
            .map(|s| SectionInfo {
                name: s.name().unwrap_or("").to_string(),
                addr: s.address(),
                file_range: s.file_range(),
            })
            .collect();

        let mut functions: Vec<Function> = Vec::new();
        let tables = [
            (SymbolTable::Symtab, file.symbols()),
            (SymbolTable::Dynsym, file.dynamic_symbols()),
        ];
        for (table, syms) in tables {
            for sym in syms {
                if sym.kind() != SymbolKind::Text || sym.is_undefined() || sym.address() == 0 {
                    continue;
                }
                let Ok(name) = sym.name() else { continue };
                if name.is_empty() {
                    continue;
                }
                let addr = sym.address();
                let Some(offset) = vaddr_to_offset(&segments, addr) else {
                    continue;
                };
                let ifunc = sym.elf_symbol().st_type() == elf::STT_GNU_IFUNC;
                functions.push(Function {
                    name: name.to_string(),
                    addr: VirtAddr(addr),
                    size: sym.size(),
                    offset: FileOffset(offset),
                    ifunc,
                    table,
                });
            }
        }
        let mut dynamic = DynamicInfo::default();
        for ph in file.elf_program_headers() {
            if let Ok(Some(i)) = ph.interpreter(endian, &*data) {
                dynamic.interp = Some(String::from_utf8_lossy(i).into_owned());
            }
        }
        let table = file.elf_section_table();
        if let Ok(Some((dyns, link))) = table.dynamic(endian, &*data)
            && let Ok(strings) = table.strings(endian, &*data, link)
        {
            for d in dyns {
                let tag = d.d_tag(endian);
                let Ok(text) = d.string(endian, strings) else {
                    continue;
                };
                let text = String::from_utf8_lossy(text).into_owned();
                let dirs = || {
                    text.split(':')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                };
                if tag == elf::DT_NEEDED {
                    dynamic.needed.push(text.clone());
                } else if tag == elf::DT_RPATH {
                    dynamic.rpath.extend(dirs());
                } else if tag == elf::DT_RUNPATH {
                    dynamic.runpath.extend(dirs());
                }
            }
        }
        // One entry per (name, address): .symtab comes first, so dedup keeps it.
        functions.sort_by(|a, b| {
            (a.addr, &a.name, a.table as u8).cmp(&(b.addr, &b.name, b.table as u8))
        });
        functions.dedup_by(|b, a| a.addr == b.addr && a.name == b.name);
        let entry = VirtAddr(file.elf_header().e_entry(endian));
        Ok(ElfFile {
            path,
            data,
            kind,
            segments,
            functions,
            sections,
            dynamic,
            entry,
        })
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `ET_EXEC` or `ET_DYN` (PIE executables and shared objects).
    pub fn kind(&self) -> ElfKind {
        self.kind
    }

    /// `e_entry`: where the process starts after the dynamic loader (`_start`); 0 for most shared
    /// objects.
    pub fn entry(&self) -> VirtAddr {
        self.entry
    }

    /// True when the file page holding `off` is mapped by more than one `PT_LOAD` segment (lld
    /// starts the data segment on the file page where the RELRO segment ends). The kernel's uprobe
    /// reference counter then updates the first writable mapping of that page, which at `execve`
    /// time is the RELRO one, not the variable: a USDT semaphore there must be set by hand.
    pub fn page_shared_by_segments(&self, off: FileOffset) -> bool {
        const PAGE: u64 = 4096;
        let page = off.0 & !(PAGE - 1);
        self.segments
            .iter()
            .filter(|s| {
                s.filesz > 0 && (s.offset & !(PAGE - 1)) <= page && page < s.offset + s.filesz
            })
            .count()
            > 1
    }

    /// `PT_INTERP`, `DT_NEEDED`, `DT_RPATH` and `DT_RUNPATH`.
    pub fn dynamic(&self) -> &DynamicInfo {
        &self.dynamic
    }

    /// The `PT_LOAD` segments in program-header order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Every function, sorted by address then name; aliases at one address appear once per name.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// Functions whose name matches the glob `pattern` ([`crate::glob`] syntax; empty matches all).
    pub fn functions_matching<'a>(
        &'a self,
        pattern: &'a str,
    ) -> impl Iterator<Item = &'a Function> + 'a {
        self.functions
            .iter()
            .filter(move |f| crate::glob::glob_match(pattern, &f.name))
    }

    /// The first function named exactly `name` (the `.symtab` entry when both tables have it).
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// The function containing `addr` (by `st_size`; a size-0 symbol covers only its first byte).
    /// When several symbols cover the address (aliases), the one with the lowest name wins.
    pub fn function_at(&self, addr: VirtAddr) -> Option<&Function> {
        let idx = self.functions.partition_point(|f| f.addr <= addr);
        // Symbols nest rarely and shallowly; look back a bounded distance.
        let mut best: Option<&Function> = None;
        for f in self.functions[..idx].iter().rev().take(64) {
            if addr.0 < f.addr.0 + f.size.max(1) {
                match best {
                    Some(b) if b.addr > f.addr => break,
                    Some(b) if b.addr == f.addr && b.name <= f.name => {}
                    _ => best = Some(f),
                }
            }
        }
        best
    }

    /// Converts a link-time virtual address to a file offset through the `PT_LOAD` headers.
    ///
    /// # Errors
    /// [`ElfError::NotMapped`] when the address is in no segment's file-backed part (for example in
    /// `.bss`).
    pub fn file_offset(&self, addr: VirtAddr) -> Result<FileOffset, ElfError> {
        vaddr_to_offset(&self.segments, addr.0)
            .map(FileOffset)
            .ok_or_else(|| ElfError::NotMapped {
                path: self.path.clone(),
                addr,
            })
    }

    /// Converts a file offset back to the link-time virtual address that maps it, if any.
    pub fn vaddr_of_offset(&self, off: FileOffset) -> Option<VirtAddr> {
        self.segments
            .iter()
            .find(|s| s.offset <= off.0 && off.0 < s.offset + s.filesz)
            .map(|s| VirtAddr(off.0 - s.offset + s.vaddr))
    }

    /// `len` bytes of the file starting at virtual address `addr`, when they are all file-backed.
    pub fn bytes_at(&self, addr: VirtAddr, len: u64) -> Option<&[u8]> {
        let seg = self.segments.iter().find(|s| {
            s.vaddr <= addr.0
                && addr
                    .0
                    .checked_add(len)
                    .is_some_and(|e| e <= s.vaddr + s.filesz)
        })?;
        let start = usize::try_from(addr.0 - seg.vaddr + seg.offset).ok()?;
        self.data
            .get(start..start.checked_add(usize::try_from(len).ok()?)?)
    }

    /// The whole file's bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The link-time address of the first section called `name`.
    pub fn section_addr(&self, name: &str) -> Option<VirtAddr> {
        self.sections
            .iter()
            .find(|s| s.name == name)
            .map(|s| VirtAddr(s.addr))
    }

    /// The file bytes of every section called `name` (empty when there is none).
    pub(crate) fn section_data(&self, name: &str) -> Vec<&[u8]> {
        self.sections
            .iter()
            .filter(|s| s.name == name)
            .filter_map(|s| s.file_range)
            .filter_map(|(off, len)| self.data.get(off as usize..(off + len) as usize))
            .collect()
    }

    /// The address of a symbol of any kind (function or data) named `name`, for RIP-relative USDT
    /// arguments such as `8@counter(%rip)`.
    pub fn symbol_addr(&self, name: &str) -> Option<VirtAddr> {
        let file = ElfFile64::<object::Endianness>::parse(&*self.data).ok()?;
        file.symbols()
            .chain(file.dynamic_symbols())
            .find(|s| s.is_definition() && s.name() == Ok(name))
            .map(|s| VirtAddr(s.address()))
    }
}

/// `addr - p_vaddr + p_offset` of the `PT_LOAD` segment whose file-backed part holds `addr`.
fn vaddr_to_offset(segments: &[Segment], addr: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| s.vaddr <= addr && addr < s.vaddr + s.filesz)
        .map(|s| addr - s.vaddr + s.offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 22: `pid:/dev/zero:malloc:entry` read /dev/zero without bound; every non-ELF
    /// "module" is refused before (or after 4 bytes of) reading, naming the file and why.
    #[test]
    fn issue_22_non_elf_modules_are_refused_before_reading() {
        let e = ElfFile::open("/dev/zero").unwrap_err();
        assert!(
            matches!(
                &e,
                ElfError::NotRegular {
                    kind: "a character device",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "/dev/zero is not a regular file (it is a character device)"
        );
        let e = ElfFile::open("/dev/urandom").unwrap_err();
        assert!(matches!(e, ElfError::NotRegular { .. }), "{e:?}");

        let dir = std::env::temp_dir().join(format!("elf-non-elf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = ElfFile::open(&dir).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} is not a regular file (it is a directory)",
                dir.display()
            )
        );

        // A FIFO without a writer: opening it would block, so only `stat` may touch it.
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(st.success());
        let e = ElfFile::open(&fifo).unwrap_err();
        assert!(
            matches!(e, ElfError::NotRegular { kind: "a FIFO", .. }),
            "{e:?}"
        );

        let text = dir.join("notes.txt");
        std::fs::write(&text, "not an executable\n").unwrap();
        let e = ElfFile::open(&text).unwrap_err();
        assert!(
            matches!(&e, ElfError::NotElf { path } if *path == text),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("{} is not an ELF file", text.display())
        );

        // Shorter than the magic.
        std::fs::write(&text, "\x7fE").unwrap();
        assert!(matches!(ElfFile::open(&text), Err(ElfError::NotElf { .. })));

        // The magic alone passes the check and then fails to parse.
        std::fs::write(&text, b"\x7fELF").unwrap();
        assert!(matches!(ElfFile::open(&text), Err(ElfError::Parse { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn offset_conversion_uses_segments() {
        let segs = [
            Segment {
                vaddr: 0x400000,
                memsz: 0x1000,
                offset: 0,
                filesz: 0x1000,
                flags: 5,
            },
            Segment {
                vaddr: 0x601e10,
                memsz: 0x300,
                offset: 0x1e10,
                filesz: 0x200,
                flags: 6,
            },
        ];
        assert_eq!(vaddr_to_offset(&segs, 0x400123), Some(0x123));
        assert_eq!(vaddr_to_offset(&segs, 0x601e18), Some(0x1e18));
        // In .bss (beyond p_filesz): no file offset.
        assert_eq!(vaddr_to_offset(&segs, 0x602050), None);
        assert_eq!(vaddr_to_offset(&segs, 0x10), None);
    }
}
