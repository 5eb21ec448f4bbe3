//! The pid and USDT providers ([`PidProvider`], [`UsdtProvider`], probe-sema [`Provider`]s over
//! the shared [`UserSites`]): probe descriptions → [`ProbeInfo`]s whose [`ProbeKind::Uprobe`] /
//! [`ProbeKind::Usdt`] the runtime attaches with [`crate::attach`].
//!
//! Descriptions (DTrace guide, "pid Provider" and "User Process Tracing"; `$target` already
//! substituted by the analysis):
//!
//! - `pidPID:MODULE:FUNCTION:NAME`: functions of process PID. NAME is `entry`, `return`, a hex
//!   instruction offset, or empty/a glob (every matching one of `entry`, `return` and the
//!   instruction offsets). A `return` probe is described by the function's entry with
//!   `ret: true`; the runtime attaches it at every return site ([`crate::list::return_plan`]:
//!   `ret` instructions and tail-call jumps) with the site's offset as the attach cookie, which is
//!   `arg0` (DTrace's semantics); `arg1` is the return value. Functions that never return or do
//!   not decode have no `return` probe, and instructions that cannot be probed safely
//!   ([`crate::disasm::Refusal`]) no instruction probe: [`UserSites::skipped`] counts them.
//! - `pid:/path/to/binary:FUNCTION:NAME`: the same by path, for every process that maps the file,
//!   now and later.
//! - `PROVIDERPID:MODULE:FUNCTION:NAME`: USDT probes of process PID whose provider matches
//!   PROVIDER (for example `python1234:::function-return`); NAME with `-` or `__`.
//! - `PROVIDER:/path:FUNCTION:NAME`: USDT probes of a file, for every process that maps it.
//!
//! A provider without a pid and a module that is not a path matches nothing here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use probe_sema::catalog::{
    Catalog, ProbeArgs, ProbeDescPattern, ProbeInfo, ProbeKind, Provider, UsdtArg,
};

use crate::elf::{ElfError, ElfFile};
use crate::glob::{glob_match, is_glob};
use crate::list::{ReturnPlan, Skipped, Target, pid_sites, return_plan, target_files};
use crate::usdt::{UsdtProbe, probes};

/// What [`UserSites`] remembers between queries.
#[derive(Debug, Default)]
struct Cache {
    elfs: HashMap<PathBuf, Result<Arc<ElfFile>, Arc<ElfError>>>,
    usdt: HashMap<PathBuf, Arc<Vec<UsdtProbe>>>,
    files: HashMap<(Target, String), Vec<PathBuf>>,
    /// What each (description, file) left out, from its latest query.
    skipped: HashMap<(String, PathBuf), Skipped>,
}

/// Splits `pid1234` into (`pid`, 1234) and `python1234` into (`python`, 1234); a provider without
/// trailing digits has no pid.
pub fn split_provider(provider: &str) -> (&str, Option<u32>) {
    let digits = provider.len()
        - provider
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .len();
    if digits == 0 || digits == provider.len() {
        return (provider, None);
    }
    let (name, pid) = provider.split_at(provider.len() - digits);
    (name, pid.parse().ok())
}

/// The default cap on the probes one description may match: 4,000,000 instruction probes (every
/// instruction of a 15 MB text; a multi-site program attaches them in links of at most 2^20 sites,
/// the kernel's `MAX_UPROBE_MULTI_CNT`).
pub const DEFAULT_MAX_PROBES: usize = 4_000_000;

/// The user-space targets' files and probe sites, shared by the pid and USDT providers (clones
/// share the cache). A process's module list is read afresh at every query, so it sees libraries
/// loaded since the last one; files are parsed once.
#[derive(Debug, Clone, Default)]
pub struct UserSites {
    /// Parsed files and resolved module lists, shared by the queries of one analysis (a script
    /// with 100 descriptions parses libc once). Files are assumed not to change meanwhile.
    cache: Arc<Mutex<Cache>>,
    /// Cap on the probes one description may match (instruction probes of a large library run to
    /// millions); 0 means no cap.
    pub max_probes: usize,
    /// A `-c` command held before its `execve`: (pid, executable). Descriptions for that pid resolve
    /// modules against the files the command will map ([`Target::Command`]), not against the
    /// held process's current maps.
    pub held: Option<(u32, PathBuf)>,
}

impl UserSites {
    /// Sites with the default cap of [`DEFAULT_MAX_PROBES`] probes per description.
    pub fn new() -> Self {
        UserSites {
            cache: Arc::default(),
            max_probes: DEFAULT_MAX_PROBES,
            held: None,
        }
    }

    /// True when the user-space providers answer for `desc` (a pid provider, or a provider with a pid or a
    /// path module), so the caller need not ask the kernel providers.
    pub fn handles(desc: &ProbeDescPattern) -> bool {
        let (prov, pid) = split_provider(&desc.provider);
        pid.is_some()
            || (!is_glob(prov) && !prov.is_empty() && desc.module.starts_with('/'))
            || prov == "pid"
    }

    /// The sites for a `-c` command held before executing `exe`.
    pub fn with_held_command(pid: u32, exe: PathBuf) -> Self {
        UserSites {
            held: Some((pid, exe)),
            ..Self::new()
        }
    }

    fn target<'a>(&self, desc: &'a ProbeDescPattern) -> Option<(Target, &'a str, Option<u32>)> {
        let (prov, pid) = split_provider(&desc.provider);
        match pid {
            Some(p) => match &self.held {
                Some((hp, exe)) if *hp == p => Some((
                    Target::Command {
                        pid: p,
                        exe: exe.clone(),
                    },
                    prov,
                    Some(p),
                )),
                _ => Some((Target::Process(p), prov, Some(p))),
            },
            None if desc.module.starts_with('/') && !is_glob(&desc.module) => {
                Some((Target::File(PathBuf::from(&desc.module)), prov, None))
            }
            None => None,
        }
    }

    /// The sites and functions the pid-provider descriptions queried so far left out, by reason
    /// (each description and file counted once however often it was queried): instructions that
    /// cannot be probed safely, functions that do not decode, functions that never return.
    pub fn skipped(&self) -> Skipped {
        let mut all = Skipped::default();
        for s in self.cache().skipped.values() {
            all.absorb(s);
        }
        all
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The files of `target` that `module` selects (a process's list is read afresh, a command's
    /// or a path's is cached).
    fn files(&self, target: &Target, module: &str) -> Vec<PathBuf> {
        let cacheable = !matches!(target, Target::Process(_));
        let key = (target.clone(), module.to_string());
        if cacheable && let Some(f) = self.cache().files.get(&key) {
            return f.clone();
        }
        let f = target_files(target, module).unwrap_or_default();
        if cacheable {
            self.cache().files.insert(key, f.clone());
        }
        f
    }

    /// The parsed file at `path` (`None` when it is not a readable ELF file), parsed once.
    fn elf(&self, path: &Path) -> Option<Arc<ElfFile>> {
        self.elf_result(path).ok()
    }

    /// The parsed file at `path` or why it is not usable, parsed once.
    fn elf_result(&self, path: &Path) -> Result<Arc<ElfFile>, Arc<ElfError>> {
        if let Some(e) = self.cache().elfs.get(path) {
            return e.clone();
        }
        let e = ElfFile::open(path).map(Arc::new).map_err(Arc::new);
        self.cache().elfs.insert(path.to_path_buf(), e.clone());
        e
    }

    /// Why `desc` matches nothing when its module is a path that is no usable ELF file: the
    /// error naming the file and why, with its cause (`/dev/zero is not a regular file (it is a
    /// character device)`).
    fn path_reason(&self, desc: &ProbeDescPattern) -> Option<String> {
        let (Target::File(path), _, _) = self.target(desc)? else {
            return None;
        };
        let e = self.elf_result(&path).err()?;
        let mut text = e.to_string();
        let mut cause = std::error::Error::source(&*e);
        while let Some(c) = cause {
            text.push_str(": ");
            text.push_str(&c.to_string());
            cause = c.source();
        }
        Some(text)
    }

    /// The USDT probes of the file at `path`, read once (empty when it has none or they do not
    /// parse).
    fn usdt_of(&self, path: &Path) -> Arc<Vec<UsdtProbe>> {
        if let Some(p) = self.cache().usdt.get(path) {
            return p.clone();
        }
        let p = Arc::new(
            self.elf(path)
                .and_then(|e| probes(&e).ok())
                .unwrap_or_default(),
        );
        self.cache().usdt.insert(path.to_path_buf(), p.clone());
        p
    }

    fn pid_probes(
        &self,
        desc: &ProbeDescPattern,
        target: &Target,
        pid: Option<u32>,
    ) -> Vec<ProbeInfo> {
        let files = self.files(target, &desc.module);
        let name = desc.name.as_str();
        let mut out = Vec::new();
        for path in files {
            let Some(elf) = self.elf(&path) else { continue };
            let module = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_string();
            let path_s = path.to_string_lossy().into_owned();
            let mk = |function: &str, pname: &str, offset: u64, ret: bool| ProbeInfo {
                provider: desc.provider.clone(),
                module: module.clone(),
                function: function.to_string(),
                name: pname.to_string(),
                args: ProbeArgs::Uprobe { ret },
                kind: ProbeKind::Uprobe {
                    path: path_s.clone(),
                    offset,
                    ret,
                    pid,
                },
            };
            let wants = |n: &str| name.is_empty() || glob_match(name, n);
            let literal = !name.is_empty() && !is_glob(name);
            let mut skipped = Skipped::default();
            if (wants("entry") || wants("return"))
                && let Ok((entries, _)) = pid_sites(&elf, &desc.function, "entry")
            {
                let by_entry: HashMap<(&str, u64), &crate::elf::Function> = if wants("return") {
                    elf.functions()
                        .iter()
                        .map(|f| ((f.name.as_str(), f.offset.0), f))
                        .collect()
                } else {
                    HashMap::new()
                };
                for s in &entries {
                    if wants("entry") {
                        out.push(mk(&s.function, "entry", s.offset.0, false));
                    }
                    if !wants("return") {
                        continue;
                    }
                    // Only functions that return get a return probe (see ReturnPlan).
                    match by_entry
                        .get(&(s.function.as_str(), s.offset.0))
                        .map(|f| return_plan(&elf, f))
                    {
                        Some(ReturnPlan::Sites(_) | ReturnPlan::Uretprobe) => {
                            out.push(mk(&s.function, "return", s.offset.0, true));
                        }
                        Some(ReturnPlan::Never) => skipped.never_return += 1,
                        Some(ReturnPlan::Undecodable(_)) | None => skipped.undecodable += 1,
                    }
                }
            }
            if (name.is_empty() || !literal || (name != "entry" && name != "return"))
                && let Ok((sites, left_out)) = pid_sites(
                    &elf,
                    &desc.function,
                    if name.is_empty() { "*" } else { name },
                )
            {
                for s in sites {
                    if s.name != "entry" && s.name != "return" {
                        out.push(mk(&s.function, &s.name, s.offset.0, false));
                    }
                }
                // A function that does not decode is already counted by its return probe.
                skipped.kernel += left_out.kernel;
                skipped.system_call += left_out.system_call;
                if !wants("return") {
                    skipped.undecodable += left_out.undecodable;
                }
            }
            let key = (
                format!(
                    "{}:{}:{}:{}",
                    desc.provider, desc.module, desc.function, desc.name
                ),
                path.clone(),
            );
            self.cache().skipped.insert(key, skipped);
            if self.max_probes > 0 && out.len() > self.max_probes {
                out.truncate(self.max_probes);
                break;
            }
        }
        out
    }

    fn usdt(
        &self,
        desc: &ProbeDescPattern,
        target: &Target,
        prov: &str,
        pid: Option<u32>,
    ) -> Vec<ProbeInfo> {
        let probes: Vec<UsdtProbe> = self
            .files(target, &desc.module)
            .iter()
            .flat_map(|f| self.usdt_of(f).iter().cloned().collect::<Vec<_>>())
            .collect();
        let suffix = pid.map(|p| p.to_string()).unwrap_or_default();
        probes
            .into_iter()
            .filter(|p| {
                p.matches(prov, &desc.name)
                    && (desc.function.is_empty() || glob_match(&desc.function, &p.function))
            })
            .map(|p| ProbeInfo {
                provider: format!("{}{suffix}", p.provider),
                module: p.module().to_string(),
                function: p.function.clone(),
                name: p.dtrace_name(),
                args: ProbeArgs::Usdt {
                    args: p
                        .args
                        .iter()
                        .enumerate()
                        .map(|(i, a)| UsdtArg {
                            size: a.size,
                            signed: a.signed,
                            typed: p.typed.get(i).cloned(),
                        })
                        .collect(),
                    stability: p.stability.clone(),
                },
                kind: ProbeKind::Usdt {
                    path: p.path.to_string_lossy().into_owned(),
                    offset: p.pc_offset.0,
                    semaphore: p.semaphore_offset.map(|o| o.0),
                    arg_specs: p.args.iter().map(|a| a.at_site(p.pc)).collect(),
                    pid,
                },
            })
            .collect()
    }
}

/// The pid provider: `pidPID:MODULE:FUNCTION:NAME` and `pid:/path:FUNCTION:NAME` (see the module
/// docs).
#[derive(Debug, Clone, Default)]
pub struct PidProvider(pub UserSites);

impl Provider for PidProvider {
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>) {
        if let Some((target, "pid", pid)) = self.0.target(desc) {
            out.extend(self.0.pid_probes(desc, &target, pid));
        }
    }

    fn no_match_reason(&self, desc: &ProbeDescPattern) -> Option<String> {
        match self.0.target(desc) {
            Some((_, "pid", _)) => self.0.path_reason(desc),
            _ => None,
        }
    }
}

/// The USDT providers: `PROVIDERPID:MODULE:FUNCTION:NAME` and `PROVIDER:/path:FUNCTION:NAME`
/// (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct UsdtProvider(pub UserSites);

impl Provider for UsdtProvider {
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>) {
        match self.0.target(desc) {
            Some((_, "pid", _)) | None => {}
            Some((target, prov, pid)) => out.extend(self.0.usdt(desc, &target, prov, pid)),
        }
    }

    fn no_match_reason(&self, desc: &ProbeDescPattern) -> Option<String> {
        match self.0.target(desc) {
            Some((_, "pid", _)) | None => None,
            Some(_) => self.0.path_reason(desc),
        }
    }
}

/// Both user-space providers over `sites`, in a catalog of their own (the runtime plugs the two
/// into the system catalog after the kernel providers).
pub fn catalog(sites: UserSites) -> Catalog {
    Catalog::new()
        .with(PidProvider(sites.clone()))
        .with(UsdtProvider(sites))
}

#[cfg(test)]
mod tests {
    use super::*;
    use probe_sema::ProbeCatalog;

    #[test]
    fn provider_pids() {
        assert_eq!(split_provider("pid1234"), ("pid", Some(1234)));
        assert_eq!(split_provider("python42"), ("python", Some(42)));
        assert_eq!(split_provider("pid"), ("pid", None));
        assert_eq!(split_provider("python"), ("python", None));
        assert_eq!(split_provider("123"), ("123", None));
        assert!(UserSites::handles(&ProbeDescPattern::new(
            "pid7", "a.out", "main", "entry"
        )));
        assert!(UserSites::handles(&ProbeDescPattern::new(
            "python",
            "/usr/bin/python3.11",
            "",
            ""
        )));
        assert!(!UserSites::handles(&ProbeDescPattern::new(
            "syscall", "", "read", "entry"
        )));
    }

    #[test]
    fn usdt_by_path() {
        let c = catalog(UserSites::new());
        let d = ProbeDescPattern::new("python", "/usr/bin/python3.11", "", "function-return");
        let m = c.matching(&d);
        assert_eq!(m.len(), 1);
        assert_eq!(
            (
                m[0].provider.as_str(),
                m[0].module.as_str(),
                m[0].name.as_str()
            ),
            ("python", "python3.11", "function-return")
        );
        match &m[0].kind {
            ProbeKind::Usdt {
                semaphore,
                arg_specs,
                pid,
                ..
            } => {
                assert!(semaphore.is_some());
                assert_eq!(arg_specs.len(), 3);
                assert_eq!(*pid, None);
            }
            k => panic!("{k:?}"),
        }
        assert_eq!(
            m[0].args,
            ProbeArgs::Usdt {
                args: vec![
                    UsdtArg::untyped(8, false),
                    UsdtArg::untyped(8, false),
                    UsdtArg::untyped(4, true)
                ],
                stability: None
            }
        );
        // The `__` spelling matches too.
        assert_eq!(
            c.matching(&ProbeDescPattern::new(
                "python",
                "/usr/bin/python3.11",
                "",
                "function__return"
            ))
            .len(),
            1
        );
    }

    #[test]
    fn pid_by_path() {
        let c = catalog(UserSites::new());
        let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
        let m = c.matching(&ProbeDescPattern::new("pid", libc, "malloc", "entry"));
        assert_eq!(m.len(), 1);
        let malloc = ElfFile::open(libc)
            .unwrap()
            .function("malloc")
            .unwrap()
            .offset
            .0;
        assert_eq!(
            m[0].kind,
            ProbeKind::Uprobe {
                path: libc.into(),
                offset: malloc,
                ret: false,
                pid: None
            }
        );
        let r = c.matching(&ProbeDescPattern::new("pid", libc, "malloc", "return"));
        assert_eq!(
            r[0].kind,
            ProbeKind::Uprobe {
                path: libc.into(),
                offset: malloc,
                ret: true,
                pid: None
            }
        );
        assert_eq!(r[0].args, ProbeArgs::Uprobe { ret: true });
        // Empty name: entry, return and every instruction.
        let all = c.matching(&ProbeDescPattern::new("pid", libc, "getpid", ""));
        assert!(all.len() >= 3);
        assert_eq!(all.iter().filter(|p| p.name == "entry").count(), 1);
        assert_eq!(all.iter().filter(|p| p.name == "0").count(), 1);
        // Not a path, no pid: not ours.
        assert!(
            c.matching(&ProbeDescPattern::new(
                "pid",
                "libc.so.6",
                "malloc",
                "entry"
            ))
            .is_empty()
        );
    }
}
