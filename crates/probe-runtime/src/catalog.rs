//! The system's probe catalog: the kernel providers `dtrace`, `profile`, `syscall`, `proc` and every
//! tracefs tracepoint (each a probe-sema [`Provider`] here), plus probe-user's pid and USDT
//! providers, plugged into one [`Catalog`] by [`kernel`] and [`system`].
//!
//! Building a catalog has no side effects: providers read tracefs, `/proc` and ELF files when asked,
//! and never write to another process (USDT semaphores left behind by a crashed Sightline are
//! repaired when probes are attached, by probe-user's `attach`).
//!
//! Naming (see `docs/probe-providers.md`):
//! - `dtrace:::BEGIN`, `dtrace:::END`, `dtrace:::ERROR`;
//! - `profile:::tick-N[unit]` (one CPU) and `profile:::profile-N[unit]` (every CPU); units `ns`,
//!   `nsec`, `us`, `usec`, `ms`, `msec`, `s`, `sec`, `m`, `min`, `h`, `hour`, `d`, `day`, `hz`
//!   (the default); any N is accepted, the listing shows DTrace's usual rates;
//! - `syscall::NAME:entry` / `syscall::NAME:return` for every x86-64 system call;
//! - `proc:::exec-success`, `proc:::exit`, `proc:::create`, `proc:::signal-send` (on the
//!   `sched_process_exec`, `sched_process_exit`, `sched_process_fork` and `signal_generate`
//!   tracepoints; `args->` are those tracepoints' fields);
//! - tracepoints as `CATEGORY:::EVENT` (e.g. `sched:::sched_switch`), `args->` typed from the
//!   event's tracefs `format` file.

use std::path::{Path, PathBuf};

use probe_sema::catalog::{
    Catalog, DtraceProbe, ProbeArgs, ProbeDescPattern, ProbeInfo, ProbeKind, Provider, TpField,
    field_matches,
};
use probe_user::provider::{PidProvider, UsdtProvider, UserSites};

use linux_syscalls::SYSCALLS_X86_64;

/// Where tracefs is (mounted on demand by [`tracefs_dir`]).
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Returns the tracefs directory, mounting tracefs there if it is not mounted yet.
/// `None` when it cannot be found or mounted (no privileges, no tracefs in the kernel).
pub fn tracefs_dir() -> Option<PathBuf> {
    let dir = Path::new(TRACEFS);
    if dir.join("events").is_dir() {
        return Some(dir.to_path_buf());
    }
    if probe_sys::os::mount_tracefs(TRACEFS).is_ok() && dir.join("events").is_dir() {
        return Some(dir.to_path_buf());
    }
    let old = Path::new("/sys/kernel/debug/tracing");
    old.join("events").is_dir().then(|| old.to_path_buf())
}

/// The tracefs `id` of `category/event` (for `perf_event_open`).
pub fn tracepoint_id(category: &str, event: &str) -> Option<u64> {
    let dir = tracefs_dir()?;
    std::fs::read_to_string(dir.join("events").join(category).join(event).join("id"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The fields of `category/event` from its tracefs format file (common fields excluded).
pub fn tracepoint_fields(category: &str, event: &str) -> Option<Vec<TpField>> {
    let dir = tracefs_dir()?;
    let text =
        std::fs::read_to_string(dir.join("events").join(category).join(event).join("format"))
            .ok()?;
    probe_sema::tracefs::parse_tracepoint_format(&text).ok()
}

/// The `proc` provider's probes and the tracepoints they are built on.
pub const PROC_PROBES: &[(&str, &str, &str)] = &[
    ("create", "sched", "sched_process_fork"),
    ("exec-success", "sched", "sched_process_exec"),
    ("exit", "sched", "sched_process_exit"),
    ("signal-send", "signal", "signal_generate"),
];

/// Providers that are not tracefs categories.
const BUILTIN_PROVIDERS: &[&str] = &["dtrace", "profile", "syscall", "proc"];

/// The syscall number of `name` in the x86-64 table.
pub fn syscall_nr(name: &str) -> Option<u32> {
    SYSCALLS_X86_64
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(nr, _)| *nr)
}

/// The name of syscall `nr`.
pub fn syscall_name(nr: u32) -> Option<&'static str> {
    SYSCALLS_X86_64
        .iter()
        .find(|(n, _)| *n == nr)
        .map(|(_, name)| *name)
}

/// Parses a profile probe name `tick-N[unit]` / `profile-N[unit]` into (period in ns, every CPU).
/// A rate in hz (the default unit) becomes `1e9 / N` ns. `None` for other names and for periods
/// below [`PROFILE_MIN_PERIOD_NS`].
pub fn parse_profile_name(name: &str) -> Option<(u64, bool)> {
    profile_period(name).filter(|&(ns, _)| ns >= PROFILE_MIN_PERIOD_NS)
}

/// [`parse_profile_name`] without the minimum period.
fn profile_period(name: &str) -> Option<(u64, bool)> {
    let (every_cpu, rest) = if let Some(r) = name.strip_prefix("tick-") {
        (false, r)
    } else if let Some(r) = name.strip_prefix("profile-") {
        (true, r)
    } else {
        return None;
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let n: u64 = digits.parse().ok().filter(|&n| n > 0)?;
    let unit = &rest[digits.len()..];
    let ns = match unit {
        "ns" | "nsec" => n,
        "us" | "usec" => n.checked_mul(1_000)?,
        "ms" | "msec" => n.checked_mul(1_000_000)?,
        "s" | "sec" => n.checked_mul(1_000_000_000)?,
        "m" | "min" => n.checked_mul(60_000_000_000)?,
        "h" | "hour" => n.checked_mul(3_600_000_000_000)?,
        "d" | "day" => n.checked_mul(86_400_000_000_000)?,
        "" | "hz" => 1_000_000_000 / n,
        _ => return None,
    };
    (ns > 0).then_some((ns, every_cpu))
}

/// The shortest period a `profile-N`/`tick-N` probe may have: 200 µs, DTrace's limit (illumos
/// `profile_interval_min`, Oracle's `dt_prov_profile.c`). A shorter one names no probe, so its
/// description matches nothing, as in DTrace.
pub const PROFILE_MIN_PERIOD_NS: u64 = 200_000;

/// A stable display id for a probe (the ID column of `-l` and of non-quiet output): dtrace's
/// BEGIN, END, ERROR are 1, 2, 3 as in DTrace; system calls follow in table order (entry, return);
/// profile and proc probes come next; a tracepoint's id is 100000 + its tracefs id; a pid or USDT
/// probe's is [`user_probe_id`]'s (0 for one never matched).
pub fn probe_id(provider: &str, module: &str, function: &str, name: &str) -> u32 {
    let nsys = SYSCALLS_X86_64.len() as u32;
    match provider {
        "dtrace" => match name {
            "BEGIN" => 1,
            "END" => 2,
            _ => 3,
        },
        "syscall" => {
            let i = SYSCALLS_X86_64
                .iter()
                .position(|(_, n)| *n == function)
                .unwrap_or(0) as u32;
            4 + 2 * i + u32::from(name == "return")
        }
        "profile" => {
            let h = name
                .bytes()
                .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
            4 + 2 * nsys + (h % 1000)
        }
        "proc" => {
            4 + 2 * nsys + 1000 + PROC_PROBES.iter().position(|p| p.0 == name).unwrap_or(0) as u32
        }
        cat => {
            if let Some(id) = user_probe_id(cat, module, function, name) {
                return id;
            }
            thread_local! {
                static IDS: std::cell::RefCell<std::collections::HashMap<(String, String), u32>> =
                    std::cell::RefCell::new(std::collections::HashMap::new());
            }
            IDS.with(|ids| {
                *ids.borrow_mut()
                    .entry((cat.to_string(), name.to_string()))
                    .or_insert_with(|| tracepoint_id(cat, name).map_or(0, |id| 100_000 + id as u32))
            })
        }
    }
}

/// The kernel providers, in the order they answer: `dtrace`, `profile`, `syscall`, `proc`, then
/// tracefs tracepoints.
pub fn kernel() -> Catalog {
    Catalog::new()
        .with(DtraceProvider)
        .with(ProfileProvider)
        .with(SyscallProvider)
        .with(ProcProvider)
        .with(TracepointProvider::default())
        .with(KernelFunctionProvider)
}

/// Provider names of kernel-function probes: DTrace's `fbt`, and the names bpftrace and BPF use.
pub const KERNEL_FUNCTION_PROVIDERS: &[&str] = &[
    "fbt",
    "kprobe",
    "kretprobe",
    "fentry",
    "fexit",
    "kfunc",
    "kretfunc",
];

/// The kernel-function providers (`fbt`, ...): no probes yet; a description naming one matches
/// nothing and [`kernel_functions_reason`] says why.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelFunctionProvider;

impl Provider for KernelFunctionProvider {
    fn probes(&self, _desc: &ProbeDescPattern, _out: &mut Vec<ProbeInfo>) {}

    fn no_match_reason(&self, desc: &ProbeDescPattern) -> Option<String> {
        KERNEL_FUNCTION_PROVIDERS
            .contains(&desc.provider.as_str())
            .then(kernel_functions_reason)
    }
}

/// What this kernel offers for kernel-function probes, as found (once per process): kprobes (the
/// `kprobe` PMU in `/sys/bus/event_source/devices`, or tracefs `kprobe_events`), and BPF
/// trampolines, by loading a minimal `BPF_PROG_TYPE_TRACING` fentry program without a BTF
/// target: a kernel that takes tracing programs answers EINVAL (no target), one that refuses
/// them (lockdown, an LSM policy) EPERM before verifying.
pub fn kernel_functions_reason() -> String {
    static R: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        let kprobes = Path::new("/sys/bus/event_source/devices/kprobe").exists()
            || Path::new(TRACEFS).join("kprobe_events").exists();
        let kprobes = if kprobes {
            "the kernel has kprobes, but sightline has no fbt provider on them yet".to_string()
        } else {
            "this kernel has no kprobes (no kprobe PMU in /sys/bus/event_source/devices, no kprobe_events in tracefs: CONFIG_KPROBES is off)".to_string()
        };
        // `r0 = 0; exit`.
        let (zero, exit) = ([0xb7, 0, 0, 0, 0, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]);
        let fentry = match probe_sys::bpf::prog_load(&probe_sys::bpf::ProgLoad {
            prog_type: probe_sys::bpf::prog_type::TRACING,
            expected_attach_type: probe_sys::bpf::attach_type::TRACE_FENTRY,
            insns: &[zero, exit],
            name: "sl_fentry_chk",
            log: probe_sys::bpf::VerifierLog::OnError,
        }) {
            Err(e) if e.errno() == Some(libc::EINVAL) => {
                "the kernel takes BPF trampoline programs (fentry/fexit), but sightline's fbt provider on them is not written yet".to_string()
            }
            Err(e) if e.is_permission() => {
                "it refuses BPF trampoline programs (fentry/fexit): loading a BPF_PROG_TYPE_TRACING program fails with EPERM (kernel lockdown or an LSM policy)".to_string()
            }
            Err(e) => format!(
                "loading a BPF trampoline (fentry) program failed: {}",
                e.io_error
            ),
            Ok(_) => "the kernel took a tracing program without a target (unexpected)".to_string(),
        };
        format!("{kprobes}; {fentry}: no fbt probes here (tracepoints and syscall probes work)")
    })
    .clone()
}

/// Every provider of this machine: [`kernel`]'s, then the pid and USDT providers over `user`
/// (which knows a held `-c` command, if any).
///
/// The pid and USDT probes get their ids as they are matched ([`user_probe_id`]).
pub fn system(user: UserSites) -> Catalog {
    kernel()
        .with(UserIds(PidProvider(user.clone())))
        .with(UserIds(UsdtProvider(user)))
}

/// The first id of the pid and USDT probes: above every kernel probe's id (tracepoints are
/// 100000 + their tracefs id).
pub const USER_PROBE_ID_BASE: u32 = 1_000_000;

/// The ids given to pid and USDT probes so far: by a 64-bit hash of the full name (8 bytes a
/// probe rather than its name, for millions of instruction probes), and the next id.
#[derive(Debug, Default)]
struct UserIdTable {
    ids: std::collections::HashMap<u64, u32>,
    next: u32,
}

fn user_ids() -> std::sync::MutexGuard<'static, UserIdTable> {
    static T: std::sync::OnceLock<std::sync::Mutex<UserIdTable>> = std::sync::OnceLock::new();
    T.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn name_hash(provider: &str, module: &str, function: &str, name: &str) -> u64 {
    use std::hash::Hasher;
    // `DefaultHasher::new()` has fixed keys: the same name hashes the same in every run. Its
    // writes stream, so this hashes the bytes of `provider:module:function:name` as
    // [`full_name_hash`] does.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (i, part) in [provider, module, function, name].into_iter().enumerate() {
        if i > 0 {
            h.write(b":");
        }
        h.write(part.as_bytes());
    }
    h.finish()
}

fn full_name_hash(full_name: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write(full_name.as_bytes());
    h.finish()
}

/// [`user_probe_id`] of a probe named in full (`provider:module:function:name`; a C++ function
/// name may hold colons, so this is the form to use when the name is whole).
pub fn user_probe_id_of(full_name: &str) -> Option<u32> {
    user_ids().ids.get(&full_name_hash(full_name)).copied()
}

/// The id of a pid or USDT probe that a [`system`] catalog has matched, `None` for one it has
/// not. DTrace creates user probes (and gives them the next free id) when a description first
/// names them; so here: ids count up from [`USER_PROBE_ID_BASE`] in the order the probes are
/// first matched in this process (a description's probes in the provider's order: module,
/// function, offset), and a probe keeps its id for the rest of the run. `-l` and a run of the
/// same descriptions give the same ids.
pub fn user_probe_id(provider: &str, module: &str, function: &str, name: &str) -> Option<u32> {
    user_ids()
        .ids
        .get(&name_hash(provider, module, function, name))
        .copied()
}

/// Gives each probe of `probes` not seen before the next user probe id.
fn register_user_probes(probes: &[ProbeInfo]) {
    if probes.is_empty() {
        return;
    }
    let mut t = user_ids();
    for p in probes {
        let h = name_hash(&p.provider, &p.module, &p.function, &p.name);
        let next = USER_PROBE_ID_BASE + t.next;
        if let std::collections::hash_map::Entry::Vacant(e) = t.ids.entry(h) {
            e.insert(next);
            t.next += 1;
        }
    }
}

/// A user-space provider whose matched probes get ids ([`register_user_probes`]).
#[derive(Debug)]
struct UserIds<P>(P);

impl<P: Provider> Provider for UserIds<P> {
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>) {
        let start = out.len();
        self.0.probes(desc, out);
        register_user_probes(&out[start..]);
    }

    fn suggestions(&self, out: &mut Vec<String>) {
        self.0.suggestions(out);
    }

    fn no_match_reason(&self, desc: &ProbeDescPattern) -> Option<String> {
        self.0.no_match_reason(desc)
    }
}

/// The `dtrace` provider: `BEGIN`, `END`, `ERROR`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DtraceProvider;

impl Provider for DtraceProvider {
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>) {
        for (name, p) in [
            ("BEGIN", DtraceProbe::Begin),
            ("END", DtraceProbe::End),
            ("ERROR", DtraceProbe::Error),
        ] {
            if desc.matches("dtrace", "", "", name) {
                let args = if p == DtraceProbe::Error {
                    ProbeArgs::DtraceError
                } else {
                    ProbeArgs::None
                };
                out.push(probe("dtrace", "", name, args, ProbeKind::Dtrace(p)));
            }
        }
    }

    fn suggestions(&self, out: &mut Vec<String>) {
        out.extend(["dtrace:::BEGIN", "dtrace:::END", "dtrace:::ERROR"].map(String::from));
    }
}

/// The `profile` provider: `tick-N[unit]` (one CPU) and `profile-N[unit]` (every CPU).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProfileProvider;

impl Provider for ProfileProvider {
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>) {
        if !field_matches(&desc.provider, "profile")
            || !field_matches(&desc.module, "")
            || !field_matches(&desc.function, "")
        {
            return;
        }
        let mut names: Vec<String> = Vec::new();
        if parse_profile_name(&desc.name).is_some() {
            names.push(desc.name.clone());
        } else {
            // The rates DTrace's profile provider lists by default.
            for r in ["97", "199", "499", "997", "1999", "4001", "4999"] {
                names.push(format!("profile-{r}"));
            }
            for r in ["1", "10", "100", "500", "1000", "5000"] {
                names.push(format!("tick-{r}"));
            }
            names.push("tick-1s".into());
            names.push("tick-10s".into());
            names.retain(|n| field_matches(&desc.name, n));
        }
        for n in names {
            if let Some((period_ns, every_cpu)) = parse_profile_name(&n) {
                out.push(probe(
                    "profile",
                    "",
                    &n,
                    ProbeArgs::Profile,
                    ProbeKind::Profile {
                        period_ns,
                        every_cpu,
                    },
                ));
            }
        }
    }

    fn suggestions(&self, out: &mut Vec<String>) {
        out.extend(["profile:::tick-1s", "profile:::profile-97"].map(String::from));
    }

    fn no_match_reason(&self, desc: &ProbeDescPattern) -> Option<String> {
        if !field_matches(&desc.provider, "profile") {
            return None;
        }
        let (ns, _) = profile_period(&desc.name)?;
        (ns < PROFILE_MIN_PERIOD_NS).then(|| {
            format!(
                "`{}` has a period of {ns} ns; profile and tick probes need at least 200us (5000 hz), as in DTrace",
                desc.name
            )
        })
    }
}

/// The `syscall` provider: `syscall::NAME:entry` and `:return` for every x86-64 system call.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyscallProvider;

impl Provider for SyscallProvider {
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>) {
        if !field_matches(&desc.provider, "syscall") || !field_matches(&desc.module, "") {
            return;
        }
        let literal = desc.is_literal() && !desc.function.is_empty();
        for &(nr, name) in SYSCALLS_X86_64 {
            if !field_matches(&desc.function, name) {
                continue;
            }
            for (pname, entry) in [("entry", true), ("return", false)] {
                if !field_matches(&desc.name, pname) {
                    continue;
                }
                let args = if entry {
                    // Typed args[] only when one system call is named (reading hundreds of format
                    // files would slow down `syscall:::entry`).
                    let typed = if literal { syscall_args(name) } else { None };
                    match typed {
                        Some(args) => ProbeArgs::SyscallEntry {
                            nargs: args.len().min(6) as u8,
                            args,
                        },
                        None => ProbeArgs::SyscallEntry {
                            nargs: 6,
                            args: Vec::new(),
                        },
                    }
                } else {
                    ProbeArgs::SyscallReturn
                };
                out.push(ProbeInfo {
                    provider: "syscall".into(),
                    module: String::new(),
                    function: name.into(),
                    name: pname.into(),
                    args,
                    kind: ProbeKind::Syscall { nr, entry },
                });
            }
        }
    }

    fn suggestions(&self, out: &mut Vec<String>) {
        for &(_, name) in SYSCALLS_X86_64 {
            out.push(format!("syscall::{name}:entry"));
            out.push(format!("syscall::{name}:return"));
        }
    }
}

/// The `proc` provider: [`PROC_PROBES`] on their tracepoints.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcProvider;

impl Provider for ProcProvider {
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>) {
        for &(name, cat, ev) in PROC_PROBES {
            if desc.matches("proc", "", "", name) {
                let fields = tracepoint_fields(cat, ev).unwrap_or_default();
                out.push(probe(
                    "proc",
                    "",
                    name,
                    ProbeArgs::Tracepoint { fields },
                    ProbeKind::Tracepoint {
                        category: cat.into(),
                        event: ev.into(),
                    },
                ));
            }
        }
    }

    fn suggestions(&self, out: &mut Vec<String>) {
        for &(name, _, _) in PROC_PROBES {
            out.push(format!("proc:::{name}"));
        }
    }
}

/// Every tracefs tracepoint as `CATEGORY:::EVENT` (categories named like the other providers
/// excluded).
#[derive(Debug, Default)]
pub struct TracepointProvider {
    /// Every `(category, event)` in tracefs, read once on first use.
    all: std::sync::OnceLock<Vec<(String, String)>>,
}

impl TracepointProvider {
    fn all(&self) -> &[(String, String)] {
        self.all.get_or_init(|| list_tracepoints("", ""))
    }
}

impl Provider for TracepointProvider {
    fn probes(&self, desc: &ProbeDescPattern, out: &mut Vec<ProbeInfo>) {
        if BUILTIN_PROVIDERS.contains(&desc.provider.as_str()) {
            return;
        }
        // Tracepoint names are C identifiers: a literal name such as `tick-1s` cannot be one, so
        // no need to scan tracefs for it.
        let literal_name = !desc.name.is_empty() && !desc.name.contains(['*', '?', '[', '\\']);
        if literal_name
            && !desc
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return;
        }
        if !field_matches(&desc.module, "") || !field_matches(&desc.function, "") {
            return;
        }
        let is_literal = |f: &str| !f.is_empty() && !f.contains(['*', '?', '[', '\\']);
        let matching: Vec<(String, String)> = if is_literal(&desc.provider)
            || is_literal(&desc.name)
        {
            // One category or one event name: look only there (`BEGIN` must not list all of
            // tracefs; that was most of `BEGIN { exit(0); }`'s time and memory).
            list_tracepoints(&desc.provider, &desc.name)
        } else {
            self.all()
                .iter()
                .filter(|(c, e)| field_matches(&desc.provider, c) && field_matches(&desc.name, e))
                .cloned()
                .collect()
        };
        for (cat, ev) in matching {
            let fields = tracepoint_fields(&cat, &ev).unwrap_or_default();
            out.push(probe(
                &cat,
                "",
                &ev,
                ProbeArgs::Tracepoint { fields },
                ProbeKind::Tracepoint {
                    category: cat.clone(),
                    event: ev.clone(),
                },
            ));
        }
    }

    fn suggestions(&self, out: &mut Vec<String>) {
        for (c, e) in self.all() {
            out.push(format!("{c}:::{e}"));
        }
    }
}

fn probe(
    provider: &str,
    function: &str,
    name: &str,
    args: ProbeArgs,
    kind: ProbeKind,
) -> ProbeInfo {
    ProbeInfo {
        provider: provider.into(),
        module: String::new(),
        function: function.into(),
        name: name.into(),
        args,
        kind,
    }
}

/// Typed entry arguments of syscall `name` from `syscalls/sys_enter_NAME/format` (tracefs names a
/// few differently: `newfstat` for `fstat`, ...).
fn syscall_args(name: &str) -> Option<Vec<TpField>> {
    let alt = match name {
        "stat" | "fstat" | "lstat" | "uname" => format!("new{name}"),
        "sendfile" => "sendfile64".into(),
        _ => name.into(),
    };
    let fields = tracepoint_fields("syscalls", &format!("sys_enter_{name}"))
        .or_else(|| tracepoint_fields("syscalls", &format!("sys_enter_{alt}")))?;
    Some(
        fields
            .into_iter()
            .filter(|f| f.name != "__syscall_nr")
            .collect(),
    )
}

/// `(category, event)` of every tracefs tracepoint whose category matches `cat_pat` and event
/// matches `ev_pat`, sorted.
pub fn list_tracepoints(cat_pat: &str, ev_pat: &str) -> Vec<(String, String)> {
    let Some(dir) = tracefs_dir() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let literal = |p: &str| !p.is_empty() && !p.contains(['*', '?', '[', '\\']);
    if literal(cat_pat) && literal(ev_pat) {
        if !BUILTIN_PROVIDERS.contains(&cat_pat)
            && dir.join("events").join(cat_pat).join(ev_pat).is_dir()
        {
            out.push((cat_pat.to_string(), ev_pat.to_string()));
        }
        return out;
    }
    let Ok(cats) = std::fs::read_dir(dir.join("events")) else {
        return out;
    };
    for c in cats.flatten() {
        let cat = c.file_name().to_string_lossy().into_owned();
        if !field_matches(cat_pat, &cat)
            || BUILTIN_PROVIDERS.contains(&cat.as_str())
            || !c.file_type().is_ok_and(|t| t.is_dir())
        {
            continue;
        }
        if literal(ev_pat) {
            // One stat per category instead of listing every event.
            if c.path().join(ev_pat).is_dir() {
                out.push((cat, ev_pat.to_string()));
            }
            continue;
        }
        let Ok(evs) = std::fs::read_dir(c.path()) else {
            continue;
        };
        for e in evs.flatten() {
            let ev = e.file_name().to_string_lossy().into_owned();
            if field_matches(ev_pat, &ev) && e.file_type().is_ok_and(|t| t.is_dir()) {
                out.push((cat.clone(), ev));
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use probe_sema::ProbeCatalog;

    fn user_probe(provider: &str, function: &str, name: &str) -> ProbeInfo {
        probe(
            provider,
            function,
            name,
            ProbeArgs::Uprobe { ret: false },
            ProbeKind::Other(0),
        )
    }

    #[test]
    fn user_probes_get_the_next_ids_once_and_keep_them() {
        // Provider names of their own: the table is shared by every test of this process.
        let a = user_probe("pid4000000001", "malloc", "entry");
        let b = user_probe("pid4000000001", "free", "entry");
        assert_eq!(user_probe_id_of(&a.full_name()), None);
        register_user_probes(&[a.clone(), b.clone(), a.clone()]);
        let ia = user_probe_id_of(&a.full_name()).expect("registered");
        let ib = user_probe_id_of(&b.full_name()).expect("registered");
        assert!(ia >= USER_PROBE_ID_BASE);
        assert_eq!(ib, ia + 1, "consecutive, the repeated probe took no id");
        // Matching them again gives the same ids; the four-part lookup agrees with the full name.
        register_user_probes(&[b.clone(), a.clone()]);
        assert_eq!(user_probe_id_of(&b.full_name()), Some(ib));
        assert_eq!(probe_id("pid4000000001", "", "free", "entry"), ib);
        assert_eq!(
            user_probe_id("pid4000000001", "", "malloc", "entry"),
            Some(ia)
        );
        // A probe never matched is not a user probe: a kernel id (0 for no tracepoint).
        assert_eq!(probe_id("pid4000000001", "", "calloc", "entry"), 0);
    }

    #[test]
    fn profile_names_parse_with_dtrace_units() {
        assert_eq!(parse_profile_name("tick-1s"), Some((1_000_000_000, false)));
        assert_eq!(parse_profile_name("tick-5ms"), Some((5_000_000, false)));
        assert_eq!(
            parse_profile_name("profile-97"),
            Some((1_000_000_000 / 97, true))
        );
        assert_eq!(
            parse_profile_name("profile-1000hz"),
            Some((1_000_000, true))
        );
        assert_eq!(parse_profile_name("tick-200us"), Some((200_000, false)));
        // Below DTrace's 200 us minimum: no such probe.
        assert_eq!(parse_profile_name("tick-100us"), None);
        assert_eq!(parse_profile_name("profile-5001"), None);
        assert_eq!(parse_profile_name("profile-5000"), Some((200_000, true)));
        assert_eq!(
            parse_profile_name("tick-1min"),
            Some((60_000_000_000, false))
        );
        assert_eq!(parse_profile_name("tick-"), None);
        assert_eq!(parse_profile_name("tick-3parsecs"), None);
    }

    #[test]
    fn syscall_table_knows_common_calls() {
        assert_eq!(syscall_nr("read"), Some(0));
        assert_eq!(syscall_nr("getpid"), Some(39));
        assert_eq!(syscall_name(59), Some("execve"));
        assert_eq!(syscall_nr("openat"), Some(257));
    }

    #[test]
    fn syscall_wildcards_match_entry_and_return() {
        let c = kernel();
        let all = c.matching(&ProbeDescPattern::new("syscall", "", "", "entry"));
        assert_eq!(all.len(), SYSCALLS_X86_64.len());
        let reads = c.matching(&ProbeDescPattern::new("syscall", "", "read", ""));
        assert_eq!(reads.len(), 2);
        assert_eq!(reads[0].kind, ProbeKind::Syscall { nr: 0, entry: true });
        assert_eq!(
            reads[1].kind,
            ProbeKind::Syscall {
                nr: 0,
                entry: false
            }
        );
        let begin = c.matching(&ProbeDescPattern::new("", "", "", "BEGIN"));
        assert_eq!(begin.len(), 1);
        assert_eq!(begin[0].kind, ProbeKind::Dtrace(DtraceProbe::Begin));
    }
}
