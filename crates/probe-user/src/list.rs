//! Probe sites and listings for the user-space providers: what `pid$target:MOD:FUNC:NAME` and
//! `PROVIDER$target:MOD:FUNC:NAME` descriptions select, and the rows `sightline probe -l` prints.
//!
//! The pid provider's names (DTrace guide, "pid Provider"): `entry` (first instruction), `return`
//! (every return site: `ret` instructions and tail calls, see [`crate::disasm`]), a hexadecimal
//! offset (`1a`: the instruction at that offset, which must be an instruction boundary), and an
//! empty name or `*`-patterns over the offsets for every instruction.

use std::path::{Path, PathBuf};

use crate::FileOffset;
use crate::disasm::{DisasmError, InsnKind, Refusal, decode_function};
use crate::elf::{ElfError, ElfFile, Function};
use crate::glob::{glob_match, is_glob};
use crate::maps::{MapsError, ProcessMaps};
use crate::usdt::{UsdtError, UsdtProbe, probes};

/// Errors selecting user-space probe sites.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    /// Reading the process's mappings failed.
    #[error(transparent)]
    Maps(#[from] MapsError),
    /// Reading a file failed.
    #[error(transparent)]
    Elf(#[from] ElfError),
    /// Reading USDT notes failed.
    #[error(transparent)]
    Usdt(#[from] Box<UsdtError>),
    /// A function named exactly (no glob) cannot be decoded for instruction or return probes.
    #[error(transparent)]
    Disasm(#[from] DisasmError),
    /// An offset probe does not start an instruction.
    #[error("{function}+{offset:#x} is not an instruction boundary in {path}")]
    NotBoundary {
        /// The file.
        path: PathBuf,
        /// The function.
        function: String,
        /// The offset.
        offset: u64,
    },
    /// The instruction at an offset cannot be probed safely (see [`Refusal`]).
    #[error("{function}+{offset:#x}: no uprobe can be placed there: {}", .reason.describe())]
    NotProbeable {
        /// The function.
        function: String,
        /// The offset.
        offset: u64,
        /// Why.
        reason: Refusal,
    },
    /// An offset beyond the function's end.
    #[error("offset {offset:#x} is beyond the end of {function} ({size} bytes)")]
    BeyondEnd {
        /// The function.
        function: String,
        /// The offset.
        offset: u64,
        /// The function's size.
        size: u64,
    },
}

/// What a pid-provider probe name selects in each function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PidName {
    /// `entry`.
    Entry,
    /// `return`.
    Return,
    /// A hexadecimal instruction offset (`1a`, `0x1a`).
    Offset(u64),
    /// An empty name, or a glob over hexadecimal offsets (`*`, `1?`): instruction probes.
    Instructions(String),
}

impl PidName {
    /// Classifies a probe-name field of a pid-provider description.
    pub fn parse(name: &str) -> PidName {
        match name {
            "entry" => PidName::Entry,
            "return" => PidName::Return,
            _ => {
                let hex = name.strip_prefix("0x").unwrap_or(name);
                match u64::from_str_radix(hex, 16) {
                    Ok(v) if !hex.is_empty() && !is_glob(name) => PidName::Offset(v),
                    _ => PidName::Instructions(name.to_string()),
                }
            }
        }
    }
}

/// The kind of a pid-provider site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PidSiteKind {
    /// The function's first instruction; arg0..arg5 are the argument registers.
    Entry,
    /// A return site at `offset` from the function's start (DTrace's `return` arg0); `tail_call`
    /// when it is a jump to another function (arg1, the return value, is then not yet known).
    Return {
        /// Offset of the returning instruction.
        offset: u64,
        /// True for a tail-call jump.
        tail_call: bool,
    },
    /// The instruction at `offset`.
    Instruction {
        /// Offset from the function's start.
        offset: u64,
    },
}

/// One uprobe site of the pid provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidSite {
    /// The file.
    pub path: PathBuf,
    /// The function (as in the symbol table).
    pub function: String,
    /// The probe name as DTrace shows it: `entry`, `return`, or the offset in lowercase hex.
    pub name: String,
    /// What the site is.
    pub kind: PidSiteKind,
    /// File offset of the probed instruction.
    pub offset: FileOffset,
}

/// Sites a pid-provider description left out, by reason: they are reported to the user, never
/// dropped silently.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Functions that do not decode ([`DisasmError`]: no symbol size, data in code, overlapping
    /// code): they get no instruction and no return probes.
    pub undecodable: usize,
    /// Instructions the kernel refuses to probe ([`Refusal::Kernel`]).
    pub kernel: usize,
    /// `syscall`/`sysenter` instructions ([`Refusal::SystemCall`]).
    pub system_call: usize,
    /// Functions with no return site at all (`_start`, `abort`): no `return` probe. A uretprobe
    /// on their entry would overwrite the word at the stack pointer, which is no return address
    /// there (`argc` at `_start`).
    pub never_return: usize,
}

impl Skipped {
    /// Counts one instruction refused for `r`.
    pub fn refuse(&mut self, r: Refusal) {
        match r {
            Refusal::Kernel => self.kernel += 1,
            Refusal::SystemCall => self.system_call += 1,
        }
    }

    /// Adds `other`'s counts to these.
    pub fn absorb(&mut self, other: &Skipped) {
        self.undecodable += other.undecodable;
        self.kernel += other.kernel;
        self.system_call += other.system_call;
        self.never_return += other.never_return;
    }

    /// Total sites and functions left out.
    pub fn total(&self) -> usize {
        self.undecodable + self.kernel + self.system_call + self.never_return
    }

    /// The counts as a comma-separated phrase ("3 syscall instructions (...), 1 function that
    /// does not decode"), or `None` when nothing was left out.
    pub fn describe(&self) -> Option<String> {
        let parts: Vec<String> = [
            (self.system_call, Refusal::SystemCall.describe()),
            (self.kernel, Refusal::Kernel.describe()),
            (
                self.undecodable,
                "functions that do not decode (no symbol size, data in code or overlapping code)",
            ),
            (
                self.never_return,
                "return probes of functions that never return (no ret or tail call)",
            ),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// Functions of `elf` matching `pattern`, ifunc resolvers and aliases included, one per address
/// (the lowest name of aliases, so a wildcard never probes the same instruction twice) unless the
/// pattern names one exactly.
fn select_functions<'a>(elf: &'a ElfFile, pattern: &'a str) -> Vec<&'a Function> {
    if !is_glob(pattern) && !pattern.is_empty() {
        return elf
            .functions()
            .iter()
            .filter(|f| f.name == pattern)
            .take(1)
            .collect();
    }
    let mut out: Vec<&Function> = Vec::new();
    for f in elf.functions_matching(pattern) {
        if out.last().is_some_and(|l| l.addr == f.addr) {
            continue;
        }
        out.push(f);
    }
    out
}

/// The pid-provider sites of `elf` for a function pattern and probe name.
///
/// A function named exactly must decode for `return` and instruction probes (else the
/// [`DisasmError`]); under a glob, functions that do not decode are skipped. Instructions that
/// cannot be probed safely ([`Refusal`]) are left out too; the second element of the result
/// counts what was left out and why.
///
/// # Errors
/// [`SiteError`] as described, or for an offset that is not an instruction boundary or cannot
/// be probed.
pub fn pid_sites(
    elf: &ElfFile,
    function: &str,
    name: &str,
) -> Result<(Vec<PidSite>, Skipped), SiteError> {
    let exact = !is_glob(function) && !function.is_empty();
    let name = PidName::parse(name);
    let mut out = Vec::new();
    let mut skipped = Skipped::default();
    for f in select_functions(elf, function) {
        let site = |name: String, kind, off: u64| PidSite {
            path: elf.path().to_path_buf(),
            function: f.name.clone(),
            name,
            kind,
            offset: FileOffset(f.offset.0 + off),
        };
        if name == PidName::Entry {
            out.push(site("entry".into(), PidSiteKind::Entry, 0));
            continue;
        }
        let code = match decode_function(elf, f) {
            Ok(c) => c,
            Err(e) if exact => return Err(e.into()),
            Err(_) => {
                skipped.undecodable += 1;
                continue;
            }
        };
        match &name {
            PidName::Entry => unreachable!("handled above"),
            PidName::Return => {
                if code.return_sites().next().is_none() {
                    skipped.never_return += 1;
                }
                for i in code.return_sites() {
                    if let Some(r) = i.refusal {
                        skipped.refuse(r);
                        continue;
                    }
                    let kind = PidSiteKind::Return {
                        offset: i.offset,
                        tail_call: i.kind == InsnKind::TailCall,
                    };
                    out.push(site("return".into(), kind, i.offset));
                }
            }
            PidName::Offset(o) => {
                if *o >= f.size {
                    return Err(SiteError::BeyondEnd {
                        function: f.name.clone(),
                        offset: *o,
                        size: f.size,
                    });
                }
                if !code.is_boundary(*o) {
                    return Err(SiteError::NotBoundary {
                        path: elf.path().into(),
                        function: f.name.clone(),
                        offset: *o,
                    });
                }
                if let Some(reason) = code
                    .insns
                    .iter()
                    .find(|i| i.offset == *o)
                    .and_then(|i| i.refusal)
                {
                    return Err(SiteError::NotProbeable {
                        function: f.name.clone(),
                        offset: *o,
                        reason,
                    });
                }
                out.push(site(
                    format!("{o:x}"),
                    PidSiteKind::Instruction { offset: *o },
                    *o,
                ));
            }
            PidName::Instructions(pat) => {
                for i in &code.insns {
                    let o = i.offset;
                    let n = format!("{o:x}");
                    if !glob_match(pat, &n) {
                        continue;
                    }
                    match i.refusal {
                        Some(r) => skipped.refuse(r),
                        None => out.push(site(n, PidSiteKind::Instruction { offset: o }, o)),
                    }
                }
            }
        }
    }
    Ok((out, skipped))
}

/// The function of `elf` whose first instruction is at file offset `entry`.
///
/// # Errors
/// [`SiteError::NotBoundary`] when no function starts there.
fn function_at(elf: &ElfFile, entry: FileOffset) -> Result<&Function, SiteError> {
    elf.functions()
        .iter()
        .find(|f| f.offset == entry)
        .ok_or_else(|| SiteError::NotBoundary {
            path: elf.path().to_path_buf(),
            function: format!("(function at file offset {entry})"),
            offset: 0,
        })
}

/// The return sites of the function whose first instruction is at file offset `entry`: the file
/// offset of each `ret` or tail-call jump the kernel can probe, with its offset from the function's
/// start (DTrace's `arg0` of a `return` probe).
///
/// # Errors
/// [`SiteError::NotBoundary`] when no function starts at `entry`; [`SiteError::Disasm`] when the
/// function does not decode.
pub fn return_sites_at(
    elf: &ElfFile,
    entry: FileOffset,
) -> Result<Vec<(FileOffset, u64)>, SiteError> {
    let f = function_at(elf, entry)?;
    let code = decode_function(elf, f)?;
    Ok(code
        .return_sites()
        .filter(|i| i.probeable)
        .map(|i| (FileOffset(f.offset.0 + i.offset), i.offset))
        .collect())
}

/// How the `return` probe of one function is placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReturnPlan {
    /// Offset probes at its return sites: (file offset, offset from the function's start, which
    /// is the probe's `arg0`), every `ret` and tail call the kernel can probe.
    Sites(Vec<(FileOffset, u64)>),
    /// It has return sites, but none can be probed: a uretprobe on its entry. Safe because a
    /// function that returns is entered by a call, so the word at the stack pointer at its entry
    /// is its return address.
    Uretprobe,
    /// It never returns (no `ret`, no tail call: `_start`, `abort`): no probe. A uretprobe would
    /// replace the word at the stack pointer, which is no return address there (`argc` at
    /// `_start`: Python then fails with "memory allocation failed").
    Never,
    /// It does not decode: no probe, since whether its entry is called is unknown (hand-written
    /// assembly such as signal trampolines is entered otherwise).
    Undecodable(DisasmError),
}

/// The [`ReturnPlan`] of function `f` of `elf`.
pub fn return_plan(elf: &ElfFile, f: &Function) -> ReturnPlan {
    let code = match decode_function(elf, f) {
        Ok(c) => c,
        Err(e) => return ReturnPlan::Undecodable(e),
    };
    let mut any = false;
    let mut sites = Vec::new();
    for i in code.return_sites() {
        any = true;
        if i.probeable {
            sites.push((FileOffset(f.offset.0 + i.offset), i.offset));
        }
    }
    match (any, sites.is_empty()) {
        (false, _) => ReturnPlan::Never,
        (true, true) => ReturnPlan::Uretprobe,
        (true, false) => ReturnPlan::Sites(sites),
    }
}

/// The [`ReturnPlan`] of the function whose first instruction is at file offset `entry`.
///
/// # Errors
/// [`SiteError::NotBoundary`] when no function starts at `entry`.
pub fn return_plan_at(elf: &ElfFile, entry: FileOffset) -> Result<ReturnPlan, SiteError> {
    let f = function_at(elf, entry)?;
    Ok(return_plan(elf, f))
}

/// What to list or attach to: a running process, a command about to be executed, or a file by
/// path (every process mapping it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A process id.
    Process(u32),
    /// A process held before `execve` of `exe` (`-c`): its modules are the files it will map
    /// ([`crate::loader::load_closure`]).
    Command {
        /// The process id (the same after the exec).
        pid: u32,
        /// The executable it will run.
        exe: PathBuf,
    },
    /// A binary or shared object.
    File(PathBuf),
}

/// The files of a target that a module pattern selects: for a process, its mapped files resolved
/// by [`ProcessMaps::resolve_module`]; for a file, the file itself when the pattern is empty,
/// `a.out`, or matches its basename or path.
///
/// # Errors
/// [`SiteError::Maps`] when the process's maps cannot be read.
pub fn target_files(target: &Target, module: &str) -> Result<Vec<PathBuf>, SiteError> {
    match target {
        Target::Process(pid) => Ok(ProcessMaps::read(*pid)?.resolve_module(module)),
        Target::Command { exe, .. } => Ok(crate::loader::load_closure(exe)
            .into_iter()
            .enumerate()
            .filter(|(i, p)| {
                let base = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                module.is_empty()
                    || (module == "a.out" && *i == 0)
                    || glob_match(module, base)
                    || (module.contains('/') && glob_match(module, p.to_str().unwrap_or("")))
            })
            .map(|(_, p)| p)
            .collect()),
        Target::File(p) => {
            let base = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let hit = module.is_empty()
                || module == "a.out"
                || glob_match(module, base)
                || glob_match(module, p.to_str().unwrap_or(""));
            Ok(if hit { vec![p.clone()] } else { vec![] })
        }
    }
}

/// The USDT probes of the files a target maps (or of the file), with the file's notes parsed
/// once each; files without notes are left out.
///
/// # Errors
/// [`SiteError`] when the process or a file cannot be read; a mapped file whose notes do not
/// parse is an error too (naming it), since silently dropping its probes would mislead.
pub fn usdt_probes(target: &Target, module: &str) -> Result<Vec<UsdtProbe>, SiteError> {
    let mut out = Vec::new();
    for path in target_files(target, module)? {
        let elf = match ElfFile::open(&path) {
            Ok(e) => e,
            // Mapped non-ELF files (locale archives, caches) have no probes.
            Err(
                ElfError::Parse { .. }
                | ElfError::BigEndian { .. }
                | ElfError::NotElf { .. }
                | ElfError::NotRegular { .. },
            ) => continue,
            Err(e) => return Err(e.into()),
        };
        out.extend(probes(&elf).map_err(Box::new)?);
    }
    Ok(out)
}

/// A row of `-l` output: DTrace's PROVIDER MODULE FUNCTION NAME columns.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProbeRow {
    /// `python1234` for a process (provider name + pid, as DTrace names USDT and pid providers of
    /// a process), `python` for a file.
    pub provider: String,
    /// The module's basename.
    pub module: String,
    /// The function containing the site.
    pub function: String,
    /// The probe name (USDT names with `-` for `__`).
    pub name: String,
}

/// `-l` rows of the USDT probes of a target matching provider and name patterns, one row per
/// (provider, module, function, name) however many sites it has, sorted.
///
/// # Errors
/// As [`usdt_probes`].
pub fn list_usdt(
    target: &Target,
    provider: &str,
    module: &str,
    function: &str,
    name: &str,
) -> Result<Vec<ProbeRow>, SiteError> {
    let suffix = match target {
        Target::Process(pid) | Target::Command { pid, .. } => pid.to_string(),
        Target::File(_) => String::new(),
    };
    let mut rows: Vec<ProbeRow> = usdt_probes(target, module)?
        .into_iter()
        .filter(|p| p.matches(provider, name) && glob_match(function, &p.function))
        .map(|p| ProbeRow {
            provider: format!("{}{suffix}", p.provider),
            module: p.module().to_string(),
            function: p.function.clone(),
            name: p.dtrace_name(),
        })
        .collect();
    rows.sort();
    rows.dedup();
    Ok(rows)
}

/// `-l` rows of pid-provider probes: `entry` and `return` of every function matching the
/// patterns (plus instruction probes when `name` asks for them), in address order per file.
///
/// # Errors
/// As [`target_files`] and [`pid_sites`].
pub fn list_pid(
    target: &Target,
    module: &str,
    function: &str,
    name: &str,
) -> Result<Vec<ProbeRow>, SiteError> {
    let provider = match target {
        Target::Process(pid) | Target::Command { pid, .. } => format!("pid{pid}"),
        Target::File(_) => "pid".to_string(),
    };
    let mut rows = Vec::new();
    for path in target_files(target, module)? {
        let Ok(elf) = ElfFile::open(&path) else {
            continue;
        };
        let module = Path::new(&path)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let names: Vec<&str> = if name.is_empty() {
            vec!["entry", "return"]
        } else {
            vec![name]
        };
        for n in names {
            let (sites, _) = pid_sites(&elf, function, n)?;
            let mut last: Option<(String, String)> = None;
            for s in sites {
                let key = (s.function.clone(), s.name.clone());
                if last.as_ref() == Some(&key) {
                    continue; // several return sites are one probe
                }
                rows.push(ProbeRow {
                    provider: provider.clone(),
                    module: module.clone(),
                    function: s.function,
                    name: s.name,
                });
                last = Some(key);
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_names() {
        assert_eq!(PidName::parse("entry"), PidName::Entry);
        assert_eq!(PidName::parse("return"), PidName::Return);
        assert_eq!(PidName::parse("1a"), PidName::Offset(0x1a));
        assert_eq!(PidName::parse("0x1a"), PidName::Offset(0x1a));
        assert_eq!(PidName::parse(""), PidName::Instructions(String::new()));
        assert_eq!(PidName::parse("*"), PidName::Instructions("*".into()));
        assert_eq!(PidName::parse("foo"), PidName::Instructions("foo".into()));
    }

    #[test]
    fn file_targets() {
        let t = Target::File(PathBuf::from("/usr/lib/x86_64-linux-gnu/libc.so.6"));
        assert_eq!(target_files(&t, "").unwrap().len(), 1);
        assert_eq!(target_files(&t, "libc.so.6").unwrap().len(), 1);
        assert_eq!(target_files(&t, "libc*").unwrap().len(), 1);
        assert!(target_files(&t, "libm.so.6").unwrap().is_empty());
        let c = Target::Command {
            pid: 1,
            exe: PathBuf::from("/usr/bin/python3.11"),
        };
        assert_eq!(
            target_files(&c, "a.out").unwrap(),
            vec![PathBuf::from("/usr/bin/python3.11")]
        );
        assert_eq!(target_files(&c, "libc.so.6").unwrap().len(), 1);
        assert!(target_files(&c, "").unwrap().len() >= 5);
    }
}
