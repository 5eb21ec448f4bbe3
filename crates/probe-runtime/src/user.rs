//! User-space providers in the runtime: the catalog that adds the pid and USDT providers of
//! probe-user to the kernel catalog, attaching `Attach::Uprobe` programs through probe-user, and
//! user-space symbolization for `ustack()`, `usym()`, `ufunc()`, `umod()` and `uaddr()`.
//!
//! See `docs/probe-user.md` for the provider syntax and semantics.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use probe_format::value::Symbol;
use probe_sema::catalog::{ProbeCatalog, ProbeDescPattern, ProbeInfo};
use probe_user::attach::{AttachError, AttachRequest, UserAttachment};
use probe_user::provider::UserCatalog;
use probe_user::symbolize::Symbolizer;
use probe_user::{AbsAddr, FileOffset};

use crate::catalog::KernelCatalog;

/// The kernel catalog plus the user-space providers (`pidPID`, `PROVIDERPID`, and either by path).
#[derive(Debug, Default)]
pub struct FullCatalog {
    /// dtrace, profile, syscall, proc and tracefs tracepoints.
    pub kernel: KernelCatalog,
    /// pid and USDT providers.
    pub user: UserCatalog,
}

impl FullCatalog {
    /// Both catalogs, with no held command.
    pub fn new() -> FullCatalog {
        FullCatalog { kernel: KernelCatalog::new(), user: UserCatalog::new() }
    }

    /// Tells the user catalog that `pid` is a `-c` command held before executing `exe`, so that
    /// `pid$target:libc.so.6:...` resolves against the files the command will map.
    pub fn set_held_command(&mut self, pid: u32, exe: PathBuf) {
        self.user.held = Some((pid, exe));
    }
}

impl ProbeCatalog for FullCatalog {
    fn matching(&self, desc: &ProbeDescPattern) -> Vec<ProbeInfo> {
        let mut out = self.kernel.matching(desc);
        out.extend(self.user.matching(desc));
        out
    }

    fn names(&self) -> Vec<String> {
        self.kernel.names()
    }
}

/// Attaches a loaded uprobe program (`BPF_PROG_TYPE_KPROBE`, loaded without an expected attach
/// type, so through perf-event uprobes) to one site, with its USDT semaphore.
///
/// # Errors
/// [`AttachError`] naming the failed call.
pub fn attach(
    prog: &OwnedFd,
    path: &str,
    offset: u64,
    ret: bool,
    pid: Option<u32>,
    semaphore: Option<u64>,
) -> Result<UserAttachment, AttachError> {
    let offsets = [FileOffset(offset)];
    let req = AttachRequest {
        path: Path::new(path),
        offsets: &offsets,
        ret,
        pid,
        semaphore: semaphore.map(FileOffset),
        multi_prog: false,
    };
    probe_user::attach::attach(prog.as_raw_fd(), &req)
}

/// User-address symbolization for the consumer, against the `$target` process (the records do
/// not carry the pid that produced a user address; with no target, addresses stay numeric).
#[derive(Debug, Default)]
pub struct UserSymbols {
    pid: Option<u32>,
    inner: Option<Symbolizer>,
}

impl UserSymbols {
    /// Symbolization in process `pid` (`$target`), or none.
    pub fn new(pid: Option<u32>) -> UserSymbols {
        UserSymbols { pid, inner: None }
    }

    /// Re-reads the target's mappings while it runs, so addresses still resolve after it exits
    /// (aggregation keys are printed at the end).
    pub fn refresh(&mut self) {
        if let Some(pid) = self.pid {
            self.inner.get_or_insert_with(Symbolizer::new).remember(pid);
        }
    }

    /// The symbol of user address `addr` (or the bare address).
    pub fn resolve(&mut self, addr: u64) -> Symbol {
        let Some(pid) = self.pid else { return Symbol::unknown(addr) };
        let s = self.inner.get_or_insert_with(Symbolizer::new).resolve(pid, AbsAddr(addr));
        Symbol { addr, module: s.module, name: s.function, offset: s.offset }
    }
}
