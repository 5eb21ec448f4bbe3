//! A loaded D program: its maps, programs and attachments, the ring-buffer consumer and the
//! aggregation reader. Dropping a [`Session`] closes every descriptor, which detaches everything
//! (raw tracepoint links and perf events are released with their last fd).

use std::os::fd::{AsRawFd, OwnedFd};

use probe_codegen::layout::{Attach, EXIT_FLAG, Layout, MapKind, ProgKind, STAT_COUNT, Stat};

use crate::catalog;
use crate::ringbuf::RingBuf;
use probe_sys::bpf::{self, ProgLoad, VerifierLog, attach_type, map_type, prog_type};
use probe_sys::perf::{self, PerfKind, Scope};
use probe_sys::{SyscallError, os};

/// Errors of loading, attaching and reading a program.
///
/// A variant wrapping another error returns it as its `source()` and does not repeat it in its
/// message: print the chain (`{:#}`) to see the whole story once.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A kernel call failed.
    #[error(transparent)]
    Sys(#[from] SyscallError),
    /// The verifier rejected a program.
    #[error("{what}: the BPF verifier rejected the program: {reason}")]
    Verifier {
        /// Which clause(s) and probe(s) the program holds.
        what: String,
        /// The program's clauses (0-based indices into the checked program's clauses), so that a
        /// caller holding the sources can name them by file:line:col.
        clauses: Box<[usize]>,
        /// The verifier's last message (its reason).
        reason: Box<str>,
        /// The full verifier log.
        log: Box<str>,
        /// The failed call.
        #[source]
        source: SyscallError,
    },
    /// The program calls `copyout()` or `copyoutstr()` and the kernel withholds their helper,
    /// `bpf_probe_write_user` (Linux does under lockdown `integrity` and `confidentiality`).
    #[error(
        "{what}: copyout() and copyoutstr() need the kernel's bpf_probe_write_user helper, which this kernel refuses: {why}"
    )]
    WriteUserRefused {
        /// Which clause(s) and probe(s) the program holds.
        what: String,
        /// Why, as far as known: the lockdown state from /sys/kernel/security/lockdown.
        why: String,
    },
    /// A tracepoint could not be found in tracefs.
    #[error("tracepoint {category}:{event}: not found in tracefs ({dir})")]
    NoTracepoint {
        /// Category.
        category: String,
        /// Event.
        event: String,
        /// Where we looked.
        dir: String,
    },
    /// Attaching a probe failed.
    #[error("attaching {probe}")]
    Attach {
        /// The probe or attach point.
        probe: String,
        /// The failed call.
        #[source]
        source: SyscallError,
    },
    /// An attachment that has no BPF link cannot be pinned (`-A`): it would end with this
    /// process.
    #[error(
        "{0}: this attachment is not a BPF link (a perf event attached by PERF_EVENT_IOC_SET_BPF, a perf-event uprobe where the kernel has no uprobe_multi, or a USDT semaphore sightline sets), so it would end with sightline and cannot be pinned for anonymous tracing"
    )]
    Unpinnable(String),
    /// Pinning or reading a pinned run's directory failed.
    #[error("{what}")]
    Pin {
        /// What was done, with the path.
        what: String,
        /// The file-system error.
        #[source]
        source: std::io::Error,
    },
    /// A uprobe/USDT probe needs the user-space attacher, which this session lacks.
    #[error("{0}: uprobes and USDT probes are attached by probe-user, not available here")]
    Unsupported(String),
    /// Attaching a uprobe or USDT probe failed (probe-user names the failed call).
    #[error("attaching {probe}")]
    User {
        /// The clause(s) and probe(s).
        probe: String,
        /// probe-user's error.
        #[source]
        source: probe_user::attach::AttachError,
    },
}

impl RuntimeError {
    /// True when the failure is a missing privilege (EPERM/EACCES).
    pub fn is_permission(&self) -> bool {
        match self {
            RuntimeError::Sys(e)
            | RuntimeError::Attach { source: e, .. }
            | RuntimeError::Verifier { source: e, .. } => e.is_permission(),
            RuntimeError::User { source, .. } => {
                source.syscall().is_some_and(SyscallError::is_permission)
            }
            _ => false,
        }
    }
}

/// Opens a perf event of `kind` for every process on `cpu`, runs `p` on it and enables it.
/// With `link`, through a BPF link (`BPF_LINK_CREATE`, which can be pinned): returns the link
/// and the event; otherwise with `PERF_EVENT_IOC_SET_BPF`: the event alone.
fn attach_perf(
    p: &Loaded,
    kind: PerfKind<'_>,
    cpu: u32,
    link: bool,
) -> Result<(OwnedFd, Option<OwnedFd>), RuntimeError> {
    let err = |source| RuntimeError::Attach {
        probe: p.what.clone(),
        source,
    };
    let ev = perf::perf_event_open(kind, Scope::Cpu(cpu)).map_err(err)?;
    if link {
        let l = bpf::link_create_perf_event(p.fd.as_raw_fd(), ev.as_raw_fd(), 0).map_err(err)?;
        perf::enable(&ev).map_err(err)?;
        return Ok((l, Some(ev)));
    }
    perf::set_bpf(&ev, p.fd.as_raw_fd()).map_err(err)?;
    perf::enable(&ev).map_err(err)?;
    Ok((ev, None))
}

/// One ring-buffer record with its header decoded (layout: [`probe_codegen::layout::RecordDesc`]).
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    /// Index into [`Layout::records`].
    pub record: u32,
    /// CPU that produced it.
    pub cpu: u32,
    /// Probe key: the syscall number for syscall programs, 0 otherwise.
    pub probe_key: u64,
    /// Bit `i` set when action `i` of the record ran.
    pub mask: u64,
    /// `bpf_ktime_get_ns()` at the firing (CLOCK_MONOTONIC ns).
    pub timestamp: u64,
    /// The whole record, header included (field offsets count from its start).
    pub bytes: &'a [u8],
}

/// Size of the record header.
pub const RECORD_HEADER: usize = probe_codegen::layout::RECORD_HEADER as usize;

/// A loaded program and what attaches it.
#[derive(Debug)]
struct Loaded {
    fd: OwnedFd,
    attach: Attach,
    what: String,
}

/// Sites of a merged uprobe program attached per uprobe_multi link (and per progress report of
/// [`Session::attach_with_progress`]): small enough that a million sites report progress about
/// sixteen times, large enough that the links stay few.
pub const ATTACH_CHUNK: usize = 1 << 16;

/// A loaded, possibly attached, D program.
#[derive(Debug)]
pub struct Session {
    /// What the code generator produced.
    pub layout: Layout,
    maps: Vec<Option<OwnedFd>>,
    progs: Vec<Loaded>,
    links: Vec<OwnedFd>,
    /// Uprobe/USDT attachments (probe-user), with any semaphores set by hand.
    user_links: Vec<probe_user::attach::UserAttachment>,
    /// Probes whose uprobe site the kernel refused at attach (see [`Session::refused_probes`]).
    refused: Vec<String>,
    /// The ring buffer (`None` in a session opened from pins without it: a postmortem run
    /// directory holds only the kernel ring, the stats and the aggregations).
    ring: Option<RingBuf>,
    ncpus: usize,
    /// Attach perf events through BPF links (`BPF_LINK_CREATE`) so that they can be pinned
    /// ([`Session::set_pinnable_attachments`]).
    link_perf_events: bool,
    /// Perf events held open beside their BPF links (the link holds the event too).
    perf_events: Vec<OwnedFd>,
    /// Attachments that are not BPF links (perf events with `PERF_EVENT_IOC_SET_BPF`,
    /// perf-event uprobes): they end with this process and cannot be pinned.
    unpinnable: Vec<String>,
}

/// What [`Session::pin`] pinned, by file name inside its directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinnedObjects {
    /// Per map of [`Layout::maps`], the file it is pinned as (`map-I`), `None` when not pinned.
    pub maps: Vec<Option<String>>,
    /// Per program of [`Layout::programs`], its file (`prog-I`), `None` when not pinned.
    pub programs: Vec<Option<String>>,
    /// The attachments' BPF links (`link-I`).
    pub links: Vec<String>,
}

/// Which objects [`Session::pin`] pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinScope {
    /// Every map, program and attachment: an anonymous enabling that keeps tracing.
    Everything,
    /// What a postmortem needs to print a run's buffers: the kernel ring and its heads, the
    /// stats and the aggregation maps (their size is bounded by `bufsize` and `aggsize`).
    Buffers,
}

/// One aggregation entry as the kernel holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggEntry {
    /// Raw key bytes (layout in [`probe_codegen::layout::AggDesc::keys`]).
    pub key: Vec<u8>,
    /// Value words per CPU (`words[cpu][slot]`, layout per [`probe_format::agg::AggFunc`]).
    pub words: Vec<Vec<u64>>,
}

/// Per-CPU counters read from the stats map: `stats[cpu][Stat as usize]`.
pub type Stats = Vec<[u64; STAT_COUNT as usize]>;

impl Session {
    /// Creates the maps, patches their fds into the programs and loads the programs (nothing is
    /// attached yet). `verbose` keeps the full verifier log of a rejection.
    pub fn load(layout: Layout, verbose: bool) -> Result<Session, RuntimeError> {
        os::raise_memlock();
        let ncpus = os::possible_cpus();
        let mut maps = Vec::with_capacity(layout.maps.len());
        for m in &layout.maps {
            let t = match m.kind {
                MapKind::Hash => map_type::HASH,
                MapKind::Array => map_type::ARRAY,
                MapKind::PercpuHash => map_type::PERCPU_HASH,
                MapKind::PercpuArray => map_type::PERCPU_ARRAY,
                MapKind::RingBuf => map_type::RINGBUF,
            };
            let fd = bpf::map_create(
                t,
                m.key_size,
                m.value_size,
                m.max_entries,
                if m.no_prealloc { 1 } else { 0 },
                &m.name,
            )?;
            maps.push(Some(fd));
        }
        // The syscall name table, when the code generator asked for it.
        for (i, m) in layout.maps.iter().enumerate() {
            if m.role == probe_codegen::layout::MapRole::SyscallNames {
                let fd = maps[i].as_ref().expect("just created");
                let vs = m.value_size as usize;
                let mut keys = Vec::new();
                let mut values = Vec::new();
                for &(nr, name) in linux_syscalls::SYSCALLS_X86_64 {
                    if nr < m.max_entries {
                        keys.extend_from_slice(&nr.to_le_bytes());
                        let mut v = vec![0u8; vs];
                        let n = name.len().min(vs - 1);
                        v[..n].copy_from_slice(&name.as_bytes()[..n]);
                        values.extend_from_slice(&v);
                    }
                }
                bpf::map_update_batch(fd, &keys, &values, (keys.len() / 4) as u32)?;
            }
        }
        let mut progs = Vec::new();
        for p in &layout.programs {
            let mut insns = p.insns.clone();
            for r in &p.map_refs {
                insns[r.insn].imm = maps[r.map].as_ref().expect("map exists").as_raw_fd();
            }
            let bytes: Vec<[u8; 8]> = insns.iter().map(|i| i.to_bytes()).collect();
            let t = match p.kind {
                ProgKind::RawTracepoint => prog_type::RAW_TRACEPOINT,
                ProgKind::Tracepoint => prog_type::TRACEPOINT,
                ProgKind::PerfEvent => prog_type::PERF_EVENT,
                ProgKind::Kprobe => prog_type::KPROBE,
            };
            let what = describe_program(&layout, p);
            // Uprobe programs are loaded for uprobe_multi links where the kernel has them.
            let multi = if p.kind == ProgKind::Kprobe {
                crate::user::load_uprobe_program(&bytes, &p.name)
            } else {
                None
            };
            let fd = match multi {
                Some(fd) => fd,
                None => bpf::prog_load(&ProgLoad {
                    prog_type: t,
                    expected_attach_type: attach_type::NONE,
                    insns: &bytes,
                    name: &p.name,
                    log: if verbose {
                        VerifierLog::Verbose
                    } else {
                        VerifierLog::OnError
                    },
                })
                .map_err(|mut source| {
                    let log = source.verifier_log.take().unwrap_or_default();
                    if write_user_refused(&log) {
                        return RuntimeError::WriteUserRefused {
                            what: what.clone(),
                            why: lockdown_reason(),
                        };
                    }
                    RuntimeError::Verifier {
                        what: what.clone(),
                        clauses: p.clauses.clone().into(),
                        reason: verifier_reason(&log).into(),
                        log: log.into(),
                        source,
                    }
                })?,
            };
            progs.push(Loaded {
                fd,
                attach: p.attach.clone(),
                what,
            });
        }
        let rb_fd = maps[layout.ringbuf].take().expect("ring buffer map");
        let ring = RingBuf::new(rb_fd, layout.maps[layout.ringbuf].max_entries)?;
        Ok(Session {
            layout,
            maps,
            progs,
            links: Vec::new(),
            user_links: Vec::new(),
            refused: Vec::new(),
            ring: Some(ring),
            ncpus,
            link_perf_events: false,
            perf_events: Vec::new(),
            unpinnable: Vec::new(),
        })
    }

    /// Opens the objects a [`Session::pin`] left in `dir` (`BPF_OBJ_GET`), for `layout`, the
    /// same program compiled again: the maps and programs `pinned` names (the others stay
    /// absent: reading them is a bug of the caller). Nothing is attached by this session; the
    /// pinned links stay attached until their files are removed.
    ///
    /// # Errors
    /// [`RuntimeError::Sys`] naming `bpf(BPF_OBJ_GET)` when a pinned object is missing, or
    /// `mmap` when the ring buffer cannot be mapped.
    pub fn open_pinned(
        layout: Layout,
        dir: &std::path::Path,
        pinned: &PinnedObjects,
    ) -> Result<Session, RuntimeError> {
        let get = |file: &str| {
            let path = std::ffi::CString::new(dir.join(file).into_os_string().into_encoded_bytes())
                .map_err(|_| {
                    SyscallError::new("bpf(BPF_OBJ_GET)", std::io::ErrorKind::InvalidInput.into())
                })?;
            bpf::obj_get(&path)
        };
        let mut maps = Vec::with_capacity(layout.maps.len());
        for i in 0..layout.maps.len() {
            maps.push(match pinned.maps.get(i).and_then(|f| f.as_deref()) {
                Some(f) => Some(get(f)?),
                None => None,
            });
        }
        let mut progs = Vec::new();
        for (i, p) in layout.programs.iter().enumerate() {
            if let Some(f) = pinned.programs.get(i).and_then(|f| f.as_deref()) {
                progs.push(Loaded {
                    fd: get(f)?,
                    attach: p.attach.clone(),
                    what: describe_program(&layout, p),
                });
            }
        }
        let ring = match maps[layout.ringbuf].take() {
            Some(fd) => Some(RingBuf::new(fd, layout.maps[layout.ringbuf].max_entries)?),
            None => None,
        };
        Ok(Session {
            layout,
            maps,
            progs,
            links: Vec::new(),
            user_links: Vec::new(),
            refused: Vec::new(),
            ring,
            ncpus: os::possible_cpus(),
            link_perf_events: false,
            perf_events: Vec::new(),
            unpinnable: Vec::new(),
        })
    }

    /// Attaches tracepoints and profile probes through BPF links (`BPF_LINK_CREATE` of the perf
    /// event, Linux 5.15) instead of `PERF_EVENT_IOC_SET_BPF`, so that [`Session::pin`] can pin
    /// them. Call before [`Session::attach`].
    pub fn set_pinnable_attachments(&mut self, yes: bool) {
        self.link_perf_events = yes;
    }

    /// Pins this session's objects in `dir` (which must exist on bpffs): per `scope`, each map
    /// as `map-I` (`I` its index in [`Layout::maps`]), each program as `prog-I` and each
    /// attachment's BPF link as `link-I`. Pinned objects outlive this process until their files
    /// are removed; a pinned link keeps its probe attached.
    ///
    /// # Errors
    /// [`RuntimeError::Unpinnable`] when [`PinScope::Everything`] meets an attachment without a
    /// BPF link (a perf-event uprobe, a USDT semaphore, a perf event attached without
    /// [`Session::set_pinnable_attachments`]); [`RuntimeError::Sys`] naming `bpf(BPF_OBJ_PIN)`.
    pub fn pin(
        &self,
        dir: &std::path::Path,
        scope: PinScope,
    ) -> Result<PinnedObjects, RuntimeError> {
        use probe_codegen::layout::MapRole;
        let everything = scope == PinScope::Everything;
        if everything {
            let mut refused = self.unpinnable.clone();
            for (u, what) in self.user_links.iter().zip(self.user_link_names()) {
                if u.pinnable_links().is_none() {
                    refused.push(what);
                }
            }
            if let Some(first) = refused.first() {
                return Err(RuntimeError::Unpinnable(first.clone()));
            }
        }
        let pin = |fd: &OwnedFd, file: &str| -> Result<String, RuntimeError> {
            let path = std::ffi::CString::new(dir.join(file).into_os_string().into_encoded_bytes())
                .map_err(|_| {
                    SyscallError::new("bpf(BPF_OBJ_PIN)", std::io::ErrorKind::InvalidInput.into())
                })?;
            bpf::obj_pin(fd.as_raw_fd(), &path)?;
            Ok(file.to_string())
        };
        let ring_maps = self
            .layout
            .kernel_ring
            .map(|r| [r.map, r.head])
            .unwrap_or([usize::MAX; 2]);
        let mut out = PinnedObjects::default();
        for (i, spec) in self.layout.maps.iter().enumerate() {
            let wanted = everything
                || i == self.layout.stats
                || ring_maps.contains(&i)
                || matches!(spec.role, MapRole::Aggregations(_));
            let fd = if i == self.layout.ringbuf {
                self.ring.as_ref().map(RingBuf::map_fd)
            } else {
                self.maps[i].as_ref()
            };
            out.maps.push(match fd {
                Some(fd) if wanted => Some(pin(fd, &format!("map-{i}"))?),
                _ => None,
            });
        }
        for (i, p) in self.progs.iter().enumerate() {
            out.programs.push(if everything {
                Some(pin(&p.fd, &format!("prog-{i}"))?)
            } else {
                None
            });
        }
        if everything {
            let user = self
                .user_links
                .iter()
                .flat_map(|u| u.pinnable_links().unwrap_or_default());
            for (i, fd) in self.links.iter().chain(user).enumerate() {
                out.links.push(pin(fd, &format!("link-{i}"))?);
            }
        }
        Ok(out)
    }

    /// The description of each user attachment's program, in `user_links` order.
    fn user_link_names(&self) -> Vec<String> {
        self.progs
            .iter()
            .filter(|p| matches!(p.attach, Attach::Uprobe { .. } | Attach::UprobeMulti { .. }))
            .map(|p| p.what.clone())
            .collect()
    }

    /// Runs the BEGIN (or END) programs once, on this thread, via `BPF_PROG_TEST_RUN`.
    pub fn run_dtrace(&self, which: Attach) -> Result<(), RuntimeError> {
        for p in self.progs.iter().filter(|p| p.attach == which) {
            bpf::prog_test_run_raw_tp(&p.fd, &[0; 6])?;
        }
        Ok(())
    }

    /// True when the program has ERROR clauses.
    pub fn has_error_clauses(&self) -> bool {
        self.progs.iter().any(|p| p.attach == Attach::Error)
    }

    /// Runs the ERROR programs with DTrace's ERROR arguments (arg1 = enabled probe id,
    /// arg2 = action index, arg3 = offset, arg4 = fault, arg5 = address).
    pub fn run_error(&self, args: [u64; 6]) -> Result<(), RuntimeError> {
        for p in self.progs.iter().filter(|p| p.attach == Attach::Error) {
            bpf::prog_test_run_raw_tp(&p.fd, &args)?;
        }
        Ok(())
    }

    /// Attaches every probe program (not BEGIN/END/ERROR). Each attachment is an fd kept until
    /// [`Session::detach`] or drop.
    ///
    /// # Errors
    /// [`RuntimeError::Attach`] or [`RuntimeError::User`] naming the probe that failed.
    pub fn attach(&mut self) -> Result<(), RuntimeError> {
        self.attach_with_progress(&mut |_, _| {})
    }

    /// Number of attach steps [`Session::attach_with_progress`] reports: one per uprobe site of
    /// a merged (uprobe_multi) program, one per other probe program (a syscall program, a
    /// tracepoint, a profile probe, a single uprobe).
    pub fn attach_steps(&self) -> usize {
        self.progs.iter().map(|p| steps_of(&p.attach)).sum()
    }

    /// [`Session::attach`], calling `progress(done, total)` (in [`Session::attach_steps`]'s
    /// units) once before attaching (`done` = 0), then after each program and after each [`ATTACH_CHUNK`] sites of a merged uprobe
    /// program, so a consumer can show how far attaching a million probe sites has come.
    ///
    /// # Errors
    /// As [`Session::attach`].
    pub fn attach_with_progress(
        &mut self,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(), RuntimeError> {
        let total = self.attach_steps();
        let mut done = 0usize;
        progress(0, total);
        for p in &self.progs {
            let steps = steps_of(&p.attach);
            match &p.attach {
                Attach::Begin | Attach::End | Attach::Error => {}
                Attach::SysEnter | Attach::SysExit => {
                    let tp = if p.attach == Attach::SysEnter {
                        c"sys_enter"
                    } else {
                        c"sys_exit"
                    };
                    let link = bpf::raw_tracepoint_open(tp, &p.fd).map_err(|source| {
                        RuntimeError::Attach {
                            probe: p.what.clone(),
                            source,
                        }
                    })?;
                    self.links.push(link);
                }
                Attach::Tracepoint { category, event } => {
                    let id = catalog::tracepoint_id(category, event).ok_or_else(|| {
                        RuntimeError::NoTracepoint {
                            category: category.clone(),
                            event: event.clone(),
                            dir: catalog::TRACEFS.into(),
                        }
                    })?;
                    let (fd, ev) =
                        attach_perf(p, PerfKind::Tracepoint { id }, 0, self.link_perf_events)?;
                    self.links.push(fd);
                    match ev {
                        Some(ev) => self.perf_events.push(ev),
                        None => self.unpinnable.push(p.what.clone()),
                    }
                }
                Attach::Profile {
                    period_ns,
                    every_cpu,
                } => {
                    let cpus = if *every_cpu {
                        os::online_cpus()
                    } else {
                        vec![os::online_cpus().first().copied().unwrap_or(0)]
                    };
                    for cpu in cpus {
                        let kind = PerfKind::CpuClock {
                            period_ns: *period_ns,
                        };
                        let (fd, ev) = attach_perf(p, kind, cpu as u32, self.link_perf_events)?;
                        self.links.push(fd);
                        match ev {
                            Some(ev) => self.perf_events.push(ev),
                            None => self.unpinnable.push(p.what.clone()),
                        }
                    }
                }
                Attach::Uprobe {
                    path,
                    offset,
                    ret,
                    pid,
                    semaphore,
                } => {
                    let a = crate::user::attach(&p.fd, path, *offset, *ret, *pid, *semaphore)
                        .map_err(|source| RuntimeError::User {
                            probe: p.what.clone(),
                            source,
                        })?;
                    if !a.refused_sites.is_empty() {
                        self.refused.push(p.what.clone());
                    }
                    self.user_links.push(a);
                }
                Attach::UprobeMulti { path, pid, sites } => {
                    let mut all = probe_user::attach::UserAttachment::default();
                    for chunk in sites.chunks(ATTACH_CHUNK) {
                        all.absorb(crate::user::attach_multi(&p.fd, path, chunk, *pid).map_err(
                            |source| RuntimeError::User {
                                probe: p.what.clone(),
                                source,
                            },
                        )?);
                        done += chunk.len();
                        progress(done, total);
                    }
                    // Each site's cookie is its probe's index in the layout.
                    let refused: std::collections::HashSet<u64> =
                        all.refused_sites.iter().map(|o| o.0).collect();
                    for &(offset, probe) in sites {
                        if refused.contains(&offset) {
                            let name = self.layout.probes.get((probe & 0xffff_ffff) as usize);
                            self.refused.push(
                                name.map_or_else(
                                    || format!("{path}+{offset:#x}"),
                                    |n| n.name.clone(),
                                ),
                            );
                        }
                    }
                    self.user_links.push(all);
                }
            }
            // A merged uprobe program reported its sites chunk by chunk.
            if steps > 0 && !matches!(p.attach, Attach::UprobeMulti { .. }) {
                done += steps;
                progress(done, total);
            }
        }
        Ok(())
    }

    /// The probes (`provider:module:function:name`) that matched but are not attached because the
    /// kernel refused their uprobe site (`ENOTSUPP`: an instruction its uprobe code can neither
    /// single-step out of line nor emulate, though probe-user's decoder let it through), in
    /// layout order. Their link's other sites are attached.
    pub fn refused_probes(&self) -> &[String] {
        &self.refused
    }

    /// Number of attachments (links and perf events) currently held.
    pub fn attachments(&self) -> usize {
        self.links.len() + self.user_links.iter().map(|u| u.len()).sum::<usize>()
    }

    /// Detaches every probe (closes the link and perf-event fds). Maps stay readable.
    pub fn detach(&mut self) {
        self.links.clear();
        self.perf_events.clear();
        self.unpinnable.clear();
        // Uprobe links wait for RCU grace periods when closed: close them concurrently.
        probe_user::attach::detach_all(std::mem::take(&mut self.user_links));
    }

    /// Waits up to `timeout_ms` for records.
    pub fn wait(&self, timeout_ms: i32) -> Result<bool, RuntimeError> {
        match &self.ring {
            Some(r) => Ok(r.wait(timeout_ms)?),
            None => {
                std::thread::sleep(std::time::Duration::from_millis(timeout_ms.max(0) as u64));
                Ok(false)
            }
        }
    }

    /// Hands every pending record to `f`; returns how many. `f` returns `false` to stop after the
    /// current record (e.g. on `exit()`); the rest stays queued.
    pub fn consume(&mut self, mut f: impl FnMut(RawRecord<'_>) -> bool) -> usize {
        let mut stop = false;
        let Some(ring) = self.ring.as_mut() else {
            return 0;
        };
        ring.consume(|rec| {
            if stop || rec.len() < RECORD_HEADER {
                return;
            }
            let u64at = |o: usize| u64::from_le_bytes(rec[o..o + 8].try_into().expect("8 bytes"));
            let r = RawRecord {
                record: u32::from_le_bytes(rec[0..4].try_into().expect("4 bytes")),
                cpu: u32::from_le_bytes(rec[4..8].try_into().expect("4 bytes")),
                probe_key: u64at(8),
                mask: u64at(16),
                timestamp: u64at(24),
                bytes: rec,
            };
            if !f(r) {
                stop = true;
            }
        })
    }

    /// The records of the kernel ring ([`probe_codegen::layout::KernelRing`], `bufpolicy=ring`),
    /// each CPU's oldest to youngest, CPU after CPU, handed to `f` as the ring buffer's are by
    /// [`Session::consume`]; returns how many. Nothing without a kernel ring. Reads one
    /// `BPF_MAP_LOOKUP_ELEM` per record (after the probes are detached, the ring no longer moves).
    ///
    /// # Errors
    /// [`RuntimeError`] when a lookup fails.
    pub fn consume_kernel_ring(
        &self,
        mut f: impl FnMut(RawRecord<'_>),
    ) -> Result<usize, RuntimeError> {
        let Some(ring) = self.layout.kernel_ring else {
            return Ok(0);
        };
        let mut heads = vec![0u8; 8 * self.ncpus];
        if !bpf::map_lookup(self.map(ring.head), &0u32.to_le_bytes(), &mut heads)? {
            return Ok(0);
        }
        let slots = u64::from(ring.slots);
        let mut slot = vec![0u8; ring.slot_size as usize];
        let mut n = 0;
        for cpu in 0..self.ncpus {
            let head = u64::from_le_bytes(heads[cpu * 8..cpu * 8 + 8].try_into().expect("8 bytes"));
            let (first, count) = if head > slots {
                (head - slots, slots)
            } else {
                (0, head)
            };
            for k in first..first + count {
                let key = cpu as u64 * slots + k % slots;
                if !bpf::map_lookup(self.map(ring.map), &(key as u32).to_le_bytes(), &mut slot)? {
                    continue;
                }
                let id = u32::from_le_bytes(slot[0..4].try_into().expect("4 bytes"));
                let Some(desc) = self.layout.records.get(id as usize) else {
                    continue;
                };
                let rec = &slot[..(desc.size as usize).min(slot.len())];
                if rec.len() < RECORD_HEADER {
                    continue;
                }
                let u64at =
                    |o: usize| u64::from_le_bytes(rec[o..o + 8].try_into().expect("8 bytes"));
                f(RawRecord {
                    record: id,
                    cpu: u32::from_le_bytes(rec[4..8].try_into().expect("4 bytes")),
                    probe_key: u64at(8),
                    mask: u64at(16),
                    timestamp: u64at(24),
                    bytes: rec,
                });
                n += 1;
            }
        }
        Ok(n)
    }

    fn map(&self, i: usize) -> &OwnedFd {
        self.maps[i].as_ref().expect("map fd kept")
    }

    /// Whether map `i` of the layout is open (a session from pins may lack some).
    pub fn has_map(&self, i: usize) -> bool {
        self.maps.get(i).is_some_and(Option::is_some)
            || (i == self.layout.ringbuf && self.ring.is_some())
    }

    /// Reads the per-CPU counters.
    pub fn stats(&self) -> Result<Stats, RuntimeError> {
        let m = self.map(self.layout.stats);
        let mut out = vec![[0u64; STAT_COUNT as usize]; self.ncpus];
        for s in 0..STAT_COUNT {
            let mut buf = vec![0u8; 8 * self.ncpus];
            if bpf::map_lookup(m, &s.to_le_bytes(), &mut buf)? {
                for (cpu, slot) in out.iter_mut().enumerate() {
                    slot[s as usize] =
                        u64::from_le_bytes(buf[cpu * 8..cpu * 8 + 8].try_into().expect("8 bytes"));
                }
            }
        }
        Ok(out)
    }

    /// The status of an `exit()` that ran on some CPU, from the [`Stat::ExitStatus`] slot the
    /// generated code writes after the record whatever the ring buffer did with it (`None` while
    /// no `exit()` ran). With `exit()` on several CPUs, the lowest CPU's wins. One
    /// `BPF_MAP_LOOKUP_ELEM`.
    ///
    /// # Errors
    /// [`RuntimeError`] when the lookup fails.
    pub fn exit_status(&self) -> Result<Option<i32>, RuntimeError> {
        let m = self.map(self.layout.stats);
        let mut buf = vec![0u8; 8 * self.ncpus];
        if !bpf::map_lookup(m, &(Stat::ExitStatus as u32).to_le_bytes(), &mut buf)? {
            return Ok(None);
        }
        Ok(buf
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .find(|w| w & EXIT_FLAG != 0)
            .map(|w| w as u32 as i32))
    }

    /// The CPUs whose kernel fill buffer is full ([`Stat::BufferFull`], `bufpolicy=fill`):
    /// a probe found no free slot there. Empty without a fill buffer, or while none filled. One
    /// `BPF_MAP_LOOKUP_ELEM`.
    ///
    /// # Errors
    /// [`RuntimeError`] when the lookup fails.
    pub fn full_buffers(&self) -> Result<Vec<u32>, RuntimeError> {
        if !self.layout.kernel_ring.is_some_and(|r| r.fill) {
            return Ok(Vec::new());
        }
        let m = self.map(self.layout.stats);
        let mut buf = vec![0u8; 8 * self.ncpus];
        if !bpf::map_lookup(m, &(Stat::BufferFull as u32).to_le_bytes(), &mut buf)? {
            return Ok(Vec::new());
        }
        Ok(buf
            .chunks_exact(8)
            .enumerate()
            .filter(|(_, w)| u64::from_le_bytes((*w).try_into().expect("8 bytes")) != 0)
            .map(|(cpu, _)| cpu as u32)
            .collect())
    }

    /// Reads aggregation `id`: every key (its own, without the number that tells the aggregations
    /// sharing its map apart: `AggDesc::own_key`) with its per-CPU value words
    /// (`words[cpu][slot]`). An unkeyed aggregation that never fired has no entry (DTrace prints
    /// nothing for it).
    pub fn read_agg(&self, id: usize) -> Result<Vec<AggEntry>, RuntimeError> {
        Ok(self.read_aggs(&[id])?.pop().unwrap_or_default())
    }

    /// Reads several aggregations as [`Session::read_agg`] does, walking each shared map once
    /// (a walk per aggregation made printing 2,700 aggregations of one map quadratic: 20 s).
    /// The result is in the order of `ids`.
    pub fn read_aggs(&self, ids: &[usize]) -> Result<Vec<Vec<AggEntry>>, RuntimeError> {
        let mut out: Vec<Vec<AggEntry>> = vec![Vec::new(); ids.len()];
        // Per map: the aggregation number -> position in `ids`.
        let mut by_map: std::collections::BTreeMap<usize, std::collections::HashMap<u32, usize>> =
            std::collections::BTreeMap::new();
        for (pos, &id) in ids.iter().enumerate() {
            let desc = &self.layout.aggs[id];
            by_map.entry(desc.map).or_default().insert(desc.number, pos);
        }
        for (map, owners) in by_map {
            let spec = &self.layout.maps[map];
            let m = self.map(map);
            let slots = (spec.value_size / 8) as usize;
            let stride = spec.value_size as usize; // a multiple of 8
            let mut buf = vec![0u8; stride * self.ncpus];
            // (position in `ids`, the map key).
            let mut keys: Vec<(usize, Vec<u8>)> = Vec::new();
            match spec.kind {
                MapKind::PercpuArray => {
                    for (&number, &pos) in &owners {
                        keys.push((pos, number.to_le_bytes().to_vec()));
                    }
                }
                _ => {
                    let mut cur: Option<Vec<u8>> = None;
                    let mut next = vec![0u8; spec.key_size as usize];
                    while bpf::map_next_key(m, cur.as_deref(), &mut next)? {
                        let number = next.get(..8).and_then(|n| {
                            u32::try_from(u64::from_le_bytes(n.try_into().ok()?)).ok()
                        });
                        if let Some(&pos) = number.and_then(|n| owners.get(&n)) {
                            keys.push((pos, next.clone()));
                        }
                        cur = Some(next.clone());
                    }
                }
            }
            for (pos, map_key) in keys {
                if !bpf::map_lookup(m, &map_key, &mut buf)? {
                    continue;
                }
                let desc = &self.layout.aggs[ids[pos]];
                let key = desc.own_key(&map_key).unwrap_or_default().to_vec();
                let words: Vec<Vec<u64>> = (0..self.ncpus)
                    .map(|c| {
                        (0..slots)
                            .map(|s| {
                                let o = c * stride + s * 8;
                                u64::from_le_bytes(buf[o..o + 8].try_into().expect("8 bytes"))
                            })
                            .collect()
                    })
                    .collect();
                if matches!(spec.kind, MapKind::PercpuArray)
                    && words.iter().all(|v| v.iter().all(|&x| x == 0))
                {
                    continue;
                }
                out[pos].push(AggEntry { key, words });
            }
        }
        Ok(out)
    }

    /// Empties aggregation `id` (`clear()` zeroes values; `trunc()` removes entries).
    pub fn clear_agg(&self, id: usize, remove: bool) -> Result<(), RuntimeError> {
        let desc = &self.layout.aggs[id];
        let spec = &self.layout.maps[desc.map];
        let m = self.map(desc.map);
        let zero = vec![0u8; spec.value_size as usize * self.ncpus];
        let entries = self.read_agg(id)?;
        for e in entries {
            let key = desc.map_key(&e.key);
            if remove && spec.kind != MapKind::PercpuArray {
                bpf::map_delete(m, &key)?;
            } else {
                bpf::map_update(m, &key, &zero)?;
            }
        }
        Ok(())
    }

    /// Deletes one aggregation entry (used by `trunc(@a, n)`); `key` is the aggregation's own key,
    /// as [`Session::read_agg`] returns it.
    pub fn delete_agg_key(&self, id: usize, key: &[u8]) -> Result<(), RuntimeError> {
        let desc = &self.layout.aggs[id];
        bpf::map_delete(self.map(desc.map), &desc.map_key(key))?;
        Ok(())
    }
}

/// One attach step per site of a merged uprobe program, one per other probe program.
fn steps_of(a: &Attach) -> usize {
    match a {
        Attach::Begin | Attach::End | Attach::Error => 0,
        Attach::UprobeMulti { sites, .. } => sites.len(),
        _ => 1,
    }
}

fn describe_program(layout: &Layout, p: &probe_codegen::layout::ProgSpec) -> String {
    let clauses: Vec<String> = p
        .clauses
        .iter()
        .map(|c| format!("clause {}", c + 1))
        .collect();
    let probes: Vec<&str> = p
        .probes
        .iter()
        .take(3)
        .map(|&i| layout.probes[i].name.as_str())
        .collect();
    let more = if p.probes.len() > 3 {
        format!(" and {} more", p.probes.len() - 3)
    } else {
        String::new()
    };
    format!("{} ({}{})", clauses.join(", "), probes.join(", "), more)
}

/// True when a verifier log says the program may not call `bpf_probe_write_user`: "program of
/// this type cannot use helper bpf_probe_write_user#36" (Linux 6.x), "unknown func
/// bpf_probe_write_user#36" (older). Every program type Sightline loads takes its helpers from
/// `bpf_tracing_func_proto`, which withholds this one only under lockdown.
pub fn write_user_refused(log: &str) -> bool {
    log.lines().any(|l| {
        l.contains("bpf_probe_write_user#36")
            && (l.contains("cannot use helper") || l.contains("unknown func"))
    })
}

/// Why `bpf_probe_write_user` is withheld: the kernel's lockdown mode when
/// `/sys/kernel/security/lockdown` is readable (`none [integrity] confidentiality`: the bracketed
/// one is in effect), else the rule itself.
pub fn lockdown_reason() -> String {
    lockdown_reason_of(probe_sys::os::read_lockdown().as_deref())
}

/// [`lockdown_reason`] for the contents of the lockdown file (`None`: not readable).
fn lockdown_reason_of(state: Option<&str>) -> String {
    let mode = state.and_then(|s| {
        let start = s.find('[')? + 1;
        let end = start + s[start..].find(']')?;
        Some(s[start..end].to_string())
    });
    match mode.as_deref() {
        Some("none") => "the helper is missing although kernel lockdown is off (none in /sys/kernel/security/lockdown)".into(),
        Some(m) => format!("kernel lockdown is `{m}` (/sys/kernel/security/lockdown), which withholds the helper from BPF programs"),
        None => "kernel lockdown (`integrity` or `confidentiality`) withholds the helper from BPF programs (/sys/kernel/security/lockdown, which names the mode, is not readable)".into(),
    }
}

/// The verifier's reason: the last non-empty log line that is not a statistics line.
pub fn verifier_reason(log: &str) -> String {
    log.lines()
        .rev()
        .map(str::trim)
        .find(|l| {
            !l.is_empty() && !l.starts_with("processed ") && !l.starts_with("verification time")
        })
        .unwrap_or("no verifier log (the kernel refused the program before verification)")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_user_refusal_is_recognized_in_both_kernels_wording() {
        assert!(write_user_refused(
            "0: (85) call bpf_probe_write_user#36\nprogram of this type cannot use helper bpf_probe_write_user#36\n"
        ));
        assert!(write_user_refused("unknown func bpf_probe_write_user#36\n"));
        assert!(!write_user_refused(
            "program of this type cannot use helper bpf_send_signal#109\n"
        ));
        assert!(!write_user_refused("R1 invalid mem access 'scalar'\n"));
    }

    #[test]
    fn lockdown_reason_names_the_mode_in_brackets() {
        let r = lockdown_reason_of(Some("none [integrity] confidentiality\n"));
        assert!(r.starts_with("kernel lockdown is `integrity`"), "{r}");
        let r = lockdown_reason_of(Some("none integrity [confidentiality]\n"));
        assert!(r.starts_with("kernel lockdown is `confidentiality`"), "{r}");
        assert!(
            lockdown_reason_of(Some("[none] integrity confidentiality"))
                .contains("lockdown is off")
        );
        assert!(lockdown_reason_of(None).contains("is not readable"));
    }

    use crate::run::chain;

    /// The layout of `src` (kernel providers only), compiled by the library's driver.
    fn layout(src: &str) -> Layout {
        let mut m = probe_syntax::SourceMap::new();
        m.add("t.d", src.to_string());
        let program = crate::compile::parse(&m).unwrap();
        crate::compile::compile(
            &program,
            &crate::catalog::kernel(),
            &crate::compile::CompileOptions::default(),
        )
        .unwrap()
        .layout
    }

    /// A descriptor a hooked "kernel" may hand out (the session owns and closes it).
    fn some_fd() -> i64 {
        std::os::fd::IntoRawFd::into_raw_fd(std::fs::File::open("/dev/null").unwrap()) as i64
    }

    #[test]
    fn a_rejected_program_is_a_verifier_error_with_the_log_and_its_last_line() {
        use probe_sys::{BpfCmd, Syscall, override_syscall};
        let layout = layout("BEGIN { exit(0); }");
        let _g = override_syscall(|call| match call {
            Syscall::Bpf {
                cmd: BpfCmd::ProgLoad,
                attr,
            } => {
                let (size, buf) = (attr.u32(28), attr.u64(32));
                let log = b"0: (b7) r0 = 0\nR1 invalid mem access 'scalar'\nprocessed 3 insns\n\0";
                if size as usize >= log.len() {
                    // SAFETY: `buf` is prog_load's live log buffer of `size` bytes (the kernel's
                    // contract for `log_buf`), and the log fits in it.
                    unsafe {
                        std::ptr::copy_nonoverlapping(log.as_ptr(), buf as *mut u8, log.len())
                    };
                }
                Err(std::io::Error::from_raw_os_error(libc::EACCES))
            }
            // Maps and the syscall-name batch succeed.
            _ => Ok(some_fd()),
        });
        let e = Session::load(layout, false).unwrap_err();
        let RuntimeError::Verifier {
            what,
            clauses,
            reason,
            log,
            ..
        } = &e
        else {
            panic!("expected a verifier error, got {e:?}");
        };
        assert_eq!(&**reason, "R1 invalid mem access 'scalar'");
        assert!(log.starts_with("0: (b7) r0 = 0\n"), "{log}");
        assert!(what.contains("BEGIN"), "{what}");
        assert_eq!(&clauses[..], &[0], "the BEGIN clause");
        assert!(e.is_permission(), "EACCES");
        assert!(
            chain(&e).ends_with(
                "the BPF verifier rejected the program: R1 invalid mem access 'scalar': `bpf(BPF_PROG_LOAD)` failed: Permission denied (os error 13)"
            ),
            "{}",
            chain(&e)
        );
    }

    /// A session of one `tick-1ms` program on a hooked kernel (no maps: nothing to pin but
    /// the program and its attachment).
    fn tick_session() -> Session {
        Session {
            layout: Layout::default(),
            maps: Vec::new(),
            progs: vec![Loaded {
                fd: std::fs::File::open("/dev/null").unwrap().into(),
                attach: Attach::Profile {
                    period_ns: 1_000_000,
                    every_cpu: false,
                },
                what: "clause 1 (profile:::tick-1ms)".into(),
            }],
            links: Vec::new(),
            user_links: Vec::new(),
            refused: Vec::new(),
            ring: None,
            ncpus: 1,
            link_perf_events: false,
            perf_events: Vec::new(),
            unpinnable: Vec::new(),
        }
    }

    #[test]
    fn a_perf_event_attached_without_a_link_is_refused_by_pin_and_a_linked_one_is_pinned() {
        use probe_sys::{BpfCmd, Syscall, override_syscall};
        let calls = std::rc::Rc::new(std::cell::RefCell::new(Vec::<String>::new()));
        let c2 = calls.clone();
        let _g = override_syscall(move |call| {
            let name = match &*call {
                Syscall::Bpf {
                    cmd: BpfCmd::ObjPin,
                    attr,
                } => {
                    // SAFETY: obj_pin's pathname is the caller's live NUL-terminated CString.
                    let p = unsafe { std::ffi::CStr::from_ptr(attr.u64(0) as *const libc::c_char) };
                    format!("pin {}", p.to_str().unwrap())
                }
                other => other.call().to_string(),
            };
            c2.borrow_mut().push(name);
            Ok(match &*call {
                Syscall::PerfEventOpen { .. }
                | Syscall::Bpf {
                    cmd: BpfCmd::LinkCreate,
                    ..
                } => some_fd(),
                _ => 0,
            })
        });
        let dir = std::path::Path::new("/sys/fs/bpf/t");
        // PERF_EVENT_IOC_SET_BPF: the program lives as long as this process's descriptor.
        let mut s = tick_session();
        s.attach().unwrap();
        let e = s.pin(dir, PinScope::Everything).unwrap_err();
        assert!(
            matches!(&e, RuntimeError::Unpinnable(w) if w == "clause 1 (profile:::tick-1ms)"),
            "{e:?}"
        );
        assert!(e.to_string().contains("cannot be pinned"), "{e}");
        assert_eq!(
            *calls.borrow(),
            [
                "perf_event_open",
                "ioctl(PERF_EVENT_IOC_SET_BPF)",
                "ioctl(PERF_EVENT_IOC_ENABLE)"
            ],
            "nothing was pinned"
        );
        calls.borrow_mut().clear();
        // Through a BPF link: pinned with the program.
        let mut s = tick_session();
        s.set_pinnable_attachments(true);
        s.attach().unwrap();
        let pinned = s.pin(dir, PinScope::Everything).unwrap();
        assert_eq!(pinned.programs, [Some("prog-0".to_string())]);
        assert_eq!(pinned.links, ["link-0"]);
        assert_eq!(
            *calls.borrow(),
            [
                "perf_event_open",
                "bpf(BPF_LINK_CREATE)",
                "ioctl(PERF_EVENT_IOC_ENABLE)",
                "pin /sys/fs/bpf/t/prog-0",
                "pin /sys/fs/bpf/t/link-0"
            ]
        );
        // The buffers of a postmortem have no programs or links.
        let b = s.pin(dir, PinScope::Buffers).unwrap();
        assert!(b.programs.iter().all(Option::is_none) && b.links.is_empty());
    }

    #[test]
    fn a_refused_map_is_named_by_its_call_without_root() {
        use probe_sys::{BpfCmd, Syscall, override_syscall};
        let layout = layout("BEGIN { @n = count(); exit(0); }");
        let _g = override_syscall(|call| match call {
            Syscall::Bpf {
                cmd: BpfCmd::MapCreate,
                ..
            } => Err(std::io::Error::from_raw_os_error(libc::EPERM)),
            other => panic!("nothing after the refused map: {}", other.call()),
        });
        let e = Session::load(layout, false).unwrap_err();
        assert!(matches!(&e, RuntimeError::Sys(s) if s.call == "bpf(BPF_MAP_CREATE)"));
        assert!(e.is_permission());
    }

    /// Regression: a failed attach printed its OS error three times ("attaching …:
    /// bpf(BPF_RAW_TRACEPOINT_OPEN): Invalid argument (os error 22): bpf(BPF_RAW_TRACEPOINT_OPEN):
    /// Invalid argument (os error 22): Invalid argument (os error 22)").
    #[test]
    fn attach_error_chain_names_each_cause_once() {
        let source = SyscallError::new(
            "bpf(BPF_RAW_TRACEPOINT_OPEN)",
            std::io::Error::from_raw_os_error(22),
        );
        let e = crate::run::RunError::Runtime(RuntimeError::Attach {
            probe: "clause 1 (syscall::openat:entry)".into(),
            source,
        });
        assert_eq!(
            chain(&e),
            "attaching clause 1 (syscall::openat:entry): `bpf(BPF_RAW_TRACEPOINT_OPEN)` failed: Invalid argument (os error 22)"
        );
        let e = RuntimeError::Sys(SyscallError::new(
            "bpf(BPF_MAP_CREATE)",
            std::io::Error::from_raw_os_error(1),
        ));
        assert_eq!(
            chain(&e),
            "`bpf(BPF_MAP_CREATE)` failed: Operation not permitted (os error 1)"
        );
        assert!(e.is_permission());
        let e = crate::run::RunError::Io(std::io::Error::from_raw_os_error(32));
        assert_eq!(chain(&e), "writing output: Broken pipe (os error 32)");
    }
}
