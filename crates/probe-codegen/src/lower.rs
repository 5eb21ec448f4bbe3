//! Lowering of a checked D program (probe-sema's [`CheckedProgram`]) to BPF programs and maps.
//!
//! One program per attach point (all `syscall:::entry` clauses share one `sys_enter` program with
//! the syscall-number filter inside; each tracepoint, timer and dtrace probe gets its own), with
//! the clauses in program order. Register conventions inside a program:
//!
//! - `R6` = the context (saved from `R1` on entry);
//! - `R7` = this CPU's scratch slot (strings, keys and records are built there: the BPF stack is
//!   only 512 bytes);
//! - `R8` = the globals map value (when the program uses globals);
//! - `R0` holds the value of the integer expression just evaluated; `R1..R5`, `R9` are
//!   temporaries. Values that must survive a helper call sit in 8-byte stack slots.
//!
//! Integers are held as 64-bit values sign- or zero-extended from their type's width (the
//! invariant probe-sema's `checked` module describes); strings are `strsize`-byte, NUL-padded
//! buffers in scratch memory, so equality and hashing are plain byte comparisons.
//!
//! Here: the options, [`compile`], and the per-program state; by subject: `maps` (key, value and
//! string sizes, the maps), `program` (programs, clauses, predicates, memory helpers), `records`,
//! `stmts` (statements and actions), `aggs`, `vars`, `args` (probe arguments and built-ins),
//! `int` and `string` (expressions), `strsubr` (string subroutines), `spec` (speculations).

use std::collections::BTreeMap;

use probe_sema::checked::{
    Action, AggFunc, Builtin, CheckedClause, CheckedProgram, Subr, TExpr, TExprKind, TStmt,
    VarAccess, VarScope,
};
use probe_sema::{DtraceProbe, ProbeArgs, ProbeInfo, ProbeKind, Type};
use probe_syntax::Span;
use probe_syntax::ast::{BinaryOp, UnaryOp};

use crate::insn::*;
use crate::layout::*;

mod aggs;
mod args;
mod destructive;
mod inet;
mod int;
mod maps;
mod program;
mod records;
mod spec;
mod stmts;
mod string;
mod strsubr;
mod vars;
pub use aggs::LlqConsts;
pub use maps::ringbuf_size;
use maps::*;
pub use spec::NSPEC_MAX;
use spec::SpecAction;
use strsubr::Search;

/// Inputs the code generator needs from the machine and the options.
#[derive(Debug, Clone)]
pub struct CodegenOptions {
    /// Number of possible CPUs (scratch slots).
    pub ncpus: u32,
    /// Ring buffer size in bytes (rounded up to a power of two, at least 16 KiB). `None`: 4 MiB
    /// (DTrace's default `bufsize`) when probes that fire asynchronously record data, else 16 KiB
    /// (BEGIN/END/ERROR records are consumed right after their test run, so a small buffer
    /// suffices and keeps the consumer's resident memory low).
    pub bufsize: Option<u64>,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC` in ns at load time, for `walltimestamp`.
    pub wall_offset_ns: i64,
    /// Dynamic-variable space in bytes (sizes associative arrays and thread-locals).
    pub dynvarsize: u64,
    /// Aggregation space in bytes (sizes keyed aggregations).
    pub aggsize: u64,
    /// `struct task_struct` member offsets from the kernel's BTF (for `ppid`, `vtimestamp`);
    /// `None` makes those built-ins a compile error.
    pub task: Option<TaskOffsets>,
    /// Number of system calls in the runtime's table: a clause with this many syscall probes in
    /// one program needs no number filter.
    pub syscall_count: usize,
    /// The display id of a probe by its full name (`provider:module:function:name`; `-l`'s ID
    /// column), the value of the `id` built-in at every probe but a system call's (which reads
    /// its number). `None`: `id` reads 0 there.
    pub probe_id: Option<fn(&str) -> u32>,
    /// The BTF ids of the kernel's `bpf_iter_num_*` kfuncs (read from BTF by the runtime) that
    /// `chill()`'s spin loop runs on; `None` makes `chill()` a compile error.
    pub kfuncs: Option<IterNumKfuncs>,
    /// `bufpolicy=ring` in the kernel: the ring's bytes per CPU (DTrace's `bufsize`), see
    /// [`crate::layout::KernelRing`]; `None`: records go to the ring buffer.
    pub kernel_ring: Option<u64>,
    /// With [`CodegenOptions::kernel_ring`], the program's last this many clauses send their
    /// records to the ring buffer all the same (and do not size the slots): the flight
    /// recorder's crash report, which the consumer prints after the ring.
    pub ring_bypass_last: usize,
    /// With [`CodegenOptions::kernel_ring`], DTrace's `fill` policy instead of `ring`: the
    /// slots fill once and are never overwritten, END's records go into them too, with room
    /// kept for them ([`crate::layout::KernelRing::probe_slots`]).
    pub kernel_fill: bool,
}

impl Default for CodegenOptions {
    fn default() -> Self {
        CodegenOptions {
            ncpus: 1,
            bufsize: None,
            wall_offset_ns: 0,
            dynvarsize: 1 << 20,
            aggsize: 4 << 20,
            syscall_count: usize::MAX,
            task: None,
            probe_id: None,
            kfuncs: None,
            kernel_ring: None,
            ring_bypass_last: 0,
            kernel_fill: false,
        }
    }
}

/// BTF type ids (in `/sys/kernel/btf/vmlinux`) of the open-coded numeric iterator kfuncs
/// (kernel/bpf/bpf_iter.c, Linux 6.4): a loop over `bpf_iter_num_next` is one the verifier checks
/// once, however many times it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IterNumKfuncs {
    /// `int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end)`.
    pub new: u32,
    /// `int *bpf_iter_num_next(struct bpf_iter_num *it)` (NULL after the last).
    pub next: u32,
    /// `void bpf_iter_num_destroy(struct bpf_iter_num *it)`.
    pub destroy: u32,
}

/// Byte offsets in the running kernel's `struct task_struct` (read from BTF by the runtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskOffsets {
    /// `task_struct.real_parent` (a `struct task_struct *`).
    pub real_parent: u32,
    /// `task_struct.tgid` (`pid_t`).
    pub tgid: u32,
    /// `task_struct.se.sum_exec_runtime` (`u64`, ns on CPU).
    pub sum_exec_runtime: u32,
}

/// The message of the error returned when `ppid`/`vtimestamp` are used without
/// [`CodegenOptions::task`]: the runtime reads BTF and compiles again (BTF is read only when needed,
/// which keeps start-up fast).
pub const NEEDS_TASK_OFFSETS: &str = "ppid and vtimestamp need task_struct offsets (kernel BTF)";

/// A construct the code generator cannot lower: which clause, where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("clause {}: {message}", clause + 1)]
pub struct CodegenError {
    /// Clause index (0-based, program order).
    pub clause: usize,
    /// Source span of the offending construct.
    pub span: Span,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when the code generator knows (e.g. for a kernel limit it predicted).
    pub hint: Option<String>,
}

impl CodegenError {
    /// The error as a located diagnostic (`file:line:col`, a caret under [`CodegenError::span`],
    /// the hint), for rendering with the script's `SourceMap` like the analysis' diagnostics.
    pub fn diagnostic(&self) -> probe_syntax::Diagnostic {
        // The back end's limits have no DTrace tag of their own.
        let d = probe_syntax::Diagnostic::tagged(
            probe_syntax::ErrTag::D_UNKNOWN,
            self.message.clone(),
            self.span,
        );
        match &self.hint {
            Some(h) => d.with_hint(h.clone()),
            None => d,
        }
    }
}

/// The most maps one BPF program may use (`MAX_USED_MAPS`, kernel/bpf/verifier.c, since Linux
/// 3.18); the loader fails with "total number of maps per program has reached the limit of 64"
/// beyond it, so the code generator reports the clause that crosses it instead.
pub const MAX_MAPS_PER_PROGRAM: usize = 64;

/// The verifier's limit of branches pending exploration (`BPF_COMPLEXITY_LIMIT_JMP_SEQ`,
/// kernel/bpf/verifier.c, 8192 since Linux 5.2): it walks the fall-through side of each
/// conditional jump first and keeps the other pending, so a program made of many clauses, each with
/// its own lookups and predicates, fails with "The sequence of 8193 jumps is too complex" once it
/// has more conditional jumps than this. The code generator counts them and reports the clause that
/// crosses it.
pub const MAX_PENDING_BRANCHES: usize = 8192;

/// The verifier's limit of processed instructions per program (`BPF_COMPLEXITY_LIMIT_INSNS`,
/// kernel/bpf/verifier.c, 1,000,000 since Linux 5.2). A program's length plus the loop iterations
/// the code generator knows it emits is a lower bound of what the verifier processes, checked at
/// each clause.
pub const MAX_PROCESSED_INSNS: u64 = 1_000_000;

type Res<T> = Result<T, CodegenError>;

/// Stack slot holding the scratch-lookup key (the CPU number).
const SLOT_KEY: i16 = -8;
/// Stack slot holding the system call number (syscall programs).
const SLOT_NR: i16 = -16;
/// Stack slot holding the key of a kernel-ring slot ([`crate::layout::KernelRing`]).
const SLOT_RING: i16 = -24;
/// Stack slot holding the scratch memory's address as a plain integer (set by the prologue:
/// a map-value pointer may not take part in arbitrary arithmetic, so it is spilled and read
/// back by a helper once per firing; `ProgGen::scratch_address`).
const SLOT_SCRATCH_BASE: i16 = -32;
/// The spill slot the prologue reads [`SLOT_SCRATCH_BASE`] from.
const SLOT_SCRATCH_SPILL: i16 = -40;
/// First free stack slot.
const SLOT_FIRST: i16 = -48;
/// Capacity of the `probefunc` table entries for syscall programs.
const SYSNAME_LEN: u32 = 64;
/// Largest `copyin()` size in bytes. The size must be a compile-time constant: each copyin() gets
/// its own buffer in the per-CPU scratch map (32000 bytes per clause in all), kept for the clause.
pub const COPYIN_MAX: u32 = 1024;
/// Addresses from this many bytes below the scratch memory to this many above its start count
/// as scratch addresses in the checks of loads through pointers (the scratch memory of a program
/// is at most 32000 bytes).
const SCRATCH_SPAN: u32 = 32768;
/// Quantize buckets (DTrace's `DTRACE_QUANTIZE_NBUCKETS`: 63 negative, zero, 63 positive).
const QUANTIZE_BUCKETS: u32 = probe_format::agg::QUANTIZE_NBUCKETS as u32;
/// The zero bucket's index.
const QUANTIZE_ZERO: i64 = probe_format::agg::QUANTIZE_ZERO_BUCKET as i64;

/// `R0 = bpf_map_lookup_elem(map, &SLOT_KEY)` (the CPU number or the 0 of a one-element array,
/// stored there by the caller); the caller checks R0 for NULL.
fn lookup_slot_key(a: &mut Asm, map: usize) {
    a.ld_map(R1, map);
    a.mov(R2, R10);
    a.alu_imm(Alu::Add, R2, SLOT_KEY as i32);
    a.call(helper::MAP_LOOKUP_ELEM);
}

/// The attach point a probe needs; clauses sharing one are compiled into one program.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum GroupKey {
    Begin,
    SysEnter,
    SysExit,
    Tracepoint(String, String),
    Profile(u64, bool),
    Uprobe(String, u64, bool, Option<u32>, Option<u64>),
    /// Many single-probe uprobe sites of one file (path, pid) whose sites all run the same
    /// clauses (their indexes): one program, one uprobe_multi link, the probe from the cookie.
    UprobeMulti(String, Option<u32>, Vec<usize>),
    End,
    Error,
}

fn group_of(p: &ProbeInfo) -> Option<GroupKey> {
    Some(match &p.kind {
        ProbeKind::Dtrace(DtraceProbe::Begin) => GroupKey::Begin,
        ProbeKind::Dtrace(DtraceProbe::End) => GroupKey::End,
        ProbeKind::Dtrace(DtraceProbe::Error) => GroupKey::Error,
        ProbeKind::Syscall { entry: true, .. } => GroupKey::SysEnter,
        ProbeKind::Syscall { entry: false, .. } => GroupKey::SysExit,
        ProbeKind::Tracepoint { category, event } => {
            GroupKey::Tracepoint(category.clone(), event.clone())
        }
        ProbeKind::Profile {
            period_ns,
            every_cpu,
        } => GroupKey::Profile(*period_ns, *every_cpu),
        ProbeKind::Uprobe {
            path,
            offset,
            ret,
            pid,
        } => GroupKey::Uprobe(path.clone(), *offset, *ret, *pid, None),
        ProbeKind::Usdt {
            path,
            offset,
            semaphore,
            pid,
            ..
        } => GroupKey::Uprobe(path.clone(), *offset, false, *pid, *semaphore),
        ProbeKind::Other(_) => return None,
    })
}

/// The members of a group: (clause index, the clause's probes in the group), in program order.
type Members = Vec<(usize, Vec<ProbeInfo>)>;

/// The internal error of a multi-site program whose clause needs a per-site constant.
const PER_SITE_NEEDED: &str = "internal: per-site constant in a multi-site uprobe program";

/// Whether a per-site group is an instruction or entry uprobe site whose clauses all see the
/// same probes (one, or an `entry` and its `0` at one offset): it can join a multi-site program.
fn mergeable_uprobe_site(g: &GroupKey, members: &[(usize, Vec<ProbeInfo>)]) -> bool {
    let GroupKey::Uprobe(_, _, false, _, None) = g else {
        return false;
    };
    let Some((_, first)) = members.first() else {
        return false;
    };
    first
        .iter()
        .all(|p| matches!(p.kind, ProbeKind::Uprobe { ret: false, .. }))
        && members.iter().all(|(_, ps)| {
            ps.len() == first.len()
                && ps
                    .iter()
                    .zip(first)
                    .all(|(a, b)| a.full_name() == b.full_name())
        })
}

/// Merges the per-site groups of single-probe instruction and entry uprobes of one file into
/// [`GroupKey::UprobeMulti`] groups (one per file, pid and clause list, with at least two sites),
/// taking the last site's place in `order`.
fn merge_uprobe_sites(
    groups: &mut BTreeMap<GroupKey, Vec<(usize, Vec<ProbeInfo>)>>,
    order: Vec<GroupKey>,
) -> Vec<GroupKey> {
    let mut multi: std::collections::HashMap<GroupKey, Vec<GroupKey>> =
        std::collections::HashMap::new();
    let mut multi_of: std::collections::HashMap<GroupKey, GroupKey> =
        std::collections::HashMap::new();
    for g in &order {
        let members = &groups[g];
        if !mergeable_uprobe_site(g, members) {
            continue;
        }
        let GroupKey::Uprobe(path, _, _, pid, _) = g else {
            continue;
        };
        let key = GroupKey::UprobeMulti(
            path.clone(),
            *pid,
            members.iter().map(|(c, _)| *c).collect(),
        );
        multi.entry(key.clone()).or_default().push(g.clone());
        multi_of.insert(g.clone(), key);
    }
    let mut out = Vec::with_capacity(order.len());
    let mut placed = std::collections::HashSet::new();
    for g in order {
        let Some(key) = multi_of.get(&g) else {
            out.push(g);
            continue;
        };
        let sites = &multi[key];
        if sites.len() < 2 {
            out.push(g);
            continue;
        }
        // Placed at its last site: the kernel runs a uprobe's newest consumer first, so a
        // return probe at the same instruction (attached earlier) runs after it, as before.
        if sites.last() != Some(&g) || !placed.insert(key.clone()) {
            continue;
        }
        let mut merged: Vec<(usize, Vec<ProbeInfo>)> = Vec::new();
        for site in sites {
            for (i, (c, ps)) in groups
                .remove(site)
                .expect("site group")
                .into_iter()
                .enumerate()
            {
                if merged.len() <= i {
                    merged.push((c, Vec::new()));
                }
                merged[i].1.extend(ps);
            }
        }
        groups.insert(key.clone(), merged);
        out.push(key.clone());
    }
    out
}

/// The per-site groups of a [`GroupKey::UprobeMulti`] group's members (the fallback when a
/// clause needs a per-site constant).
fn split_multi(members: &[(usize, Vec<ProbeInfo>)]) -> Vec<(GroupKey, Members)> {
    let mut sites: BTreeMap<GroupKey, Vec<(usize, Vec<ProbeInfo>)>> = BTreeMap::new();
    let mut order = Vec::new();
    for (c, ps) in members {
        for p in ps {
            let ProbeKind::Uprobe {
                path, offset, pid, ..
            } = &p.kind
            else {
                continue;
            };
            let key = GroupKey::Uprobe(path.clone(), *offset, false, *pid, None);
            let list = sites.entry(key.clone()).or_insert_with(|| {
                order.push(key);
                Vec::new()
            });
            match list.last_mut() {
                Some((ci, probes)) if ci == c => probes.push(p.clone()),
                _ => list.push((*c, vec![p.clone()])),
            }
        }
    }
    order
        .into_iter()
        .map(|k| {
            let m = sites.remove(&k).expect("site listed");
            (k, m)
        })
        .collect()
}

/// Where a variable's value lives.
#[derive(Debug, Clone)]
enum VarHome {
    Global {
        offset: u32,
    },
    /// An associative array in a map shared by arrays of its key and value sizes; its key is
    /// `id` (8 bytes) then the tuple.
    Map {
        map: usize,
        key_fields: Vec<FieldKind>,
        id: u32,
    },
    /// A thread-local in a map shared by thread-locals of its value size; its key is the thread
    /// id then `id` (8 bytes each).
    ThreadLocal {
        map: usize,
        id: u32,
    },
    ClauseLocal,
}

struct Builder<'p> {
    prog: &'p CheckedProgram,
    opts: CodegenOptions,
    strsize: u32,
    layout: Layout,
    homes: Vec<VarHome>,
    globals_map: Option<usize>,
    globals_size: u32,
    agg_value_max: u32,
    /// The `sl_spec` map, once a program uses speculations.
    spec_map: Option<usize>,
    /// The `sl_chill` map (`chill()`'s per-CPU budget), once a program calls `chill()`.
    chill_map: Option<usize>,
    /// The kernel ring's maps and shape (`bufpolicy=ring` with [`CodegenOptions::kernel_ring`]).
    ring: Option<KernelRing>,
    /// Index of each probe's full name in `layout.probes` (a million-site wildcard looks them
    /// up once each).
    probe_index: std::collections::HashMap<String, usize>,
    /// Some clause calls `exit()`: every clause outside END and ERROR then starts by checking
    /// this CPU's [`Stat::ExitStatus`] slot and does nothing once `exit()` ran (DTrace's
    /// activity check before each clause: clauses after `exit()` record nothing).
    any_exit: bool,
    /// Some clause calls `alloca()` or `copyin()`: loads through pointers then check an address
    /// in scratch memory against the running clause's buffers (see `ProgGen::deref`).
    scratch_pointers: bool,
    /// `-x scratchsize`: the bytes of `alloca()` memory a clause may take (DTrace's
    /// `DTRACEOPT_SCRATCHSIZE`); more faults with "out of scratch space".
    scratch_size: Option<u32>,
}

/// True when `body` calls `exit()` (in any branch).
fn calls_exit(body: &[TStmt]) -> bool {
    body.iter().any(|s| match s {
        TStmt::Action(Action::Exit(_), _) => true,
        TStmt::If { then, els, .. } => calls_exit(then) || calls_exit(els),
        _ => false,
    })
}

/// Compiles a checked program into maps, programs and record layouts.
///
/// Errors: a construct not supported by this code generator (named in the message, e.g.
/// `strjoin()`), or a program too large for the BPF stack/scratch limits.
pub fn compile(prog: &CheckedProgram, opts: &CodegenOptions) -> Res<Layout> {
    let Some(bytes) = opts.kernel_ring else {
        return compile_with(prog, opts, None);
    };
    // The slot size is the largest record a probe-fired program sends: a first pass finds it.
    let plain = compile_with(
        prog,
        &CodegenOptions {
            kernel_ring: None,
            ..opts.clone()
        },
        None,
    )?;
    let bypass_from = prog.clauses.len().saturating_sub(opts.ring_bypass_last);
    // Under fill, END's records share the slots (DTrace's END reserve, below).
    let in_ring = |attach: &Attach| match attach {
        Attach::Begin | Attach::Error => false,
        Attach::End => opts.kernel_fill,
        _ => true,
    };
    let largest = plain
        .records
        .iter()
        .filter(|r| r.clause < bypass_from && in_ring(&plain.programs[r.program].attach))
        .map(|r| r.size)
        .max();
    let Some(largest) = largest else {
        return Ok(plain);
    };
    let slot_size = largest.div_ceil(8) * 8;
    // Keys and the slot counts in instructions' immediates stay below 2^31.
    let slots =
        (bytes / slot_size as u64).clamp(1, (i32::MAX as u32 / opts.ncpus.max(1)) as u64) as u32;
    // DTrace's fill policy keeps room for END's records apart from the probes' ("fill Policy
    // and END Probes"): each END clause that records sends one record per firing (its own or
    // the error record of its fault), one slot each.
    let end_reserve = if opts.kernel_fill {
        let mut clauses: Vec<usize> = plain
            .records
            .iter()
            .filter(|r| r.clause < bypass_from && plain.programs[r.program].attach == Attach::End)
            .map(|r| r.clause)
            .collect();
        clauses.sort_unstable();
        clauses.dedup();
        clauses.len() as u32
    } else {
        0
    };
    if end_reserve > slots {
        // DTrace refuses to start: "END enablings exceed size of principal buffer".
        let clause = plain
            .records
            .iter()
            .find(|r| plain.programs[r.program].attach == Attach::End)
            .map_or(0, |r| r.clause);
        return Err(CodegenError {
            clause,
            span: prog.clauses.get(clause).map(|c| c.span).unwrap_or_default(),
            message: format!(
                "END enablings exceed size of principal buffer ({end_reserve} END records of \
                 {slot_size} bytes, bufsize {bytes} bytes)"
            ),
            hint: Some(format!(
                "raise bufsize to at least {} bytes",
                u64::from(end_reserve) * u64::from(slot_size)
            )),
        });
    }
    compile_with(prog, opts, Some((slot_size, slots, slots - end_reserve)))
}

fn compile_with(
    prog: &CheckedProgram,
    opts: &CodegenOptions,
    ring: Option<(u32, u32, u32)>,
) -> Res<Layout> {
    let strsize = prog.options.strsize.clamp(8, 4096);
    let mut b = Builder {
        prog,
        opts: opts.clone(),
        strsize,
        layout: Layout::default(),
        homes: Vec::new(),
        globals_map: None,
        globals_size: 0,
        agg_value_max: 8,
        spec_map: None,
        chill_map: None,
        ring: None,
        any_exit: prog.clauses.iter().any(|c| calls_exit(&c.body)),
        scratch_pointers: prog.clauses.iter().any(|c| c.scratch_memory),
        scratch_size: prog
            .options
            .scratchsize
            .map(|v| v.min(u64::from(u32::MAX)) as u32),
        probe_index: std::collections::HashMap::new(),
    };
    b.build_maps()?;
    if let Some((slot_size, slots, probe_slots)) = ring {
        let map = b.add_map(MapSpec {
            name: "sl_ring".into(),
            kind: MapKind::Array,
            key_size: 4,
            value_size: slot_size,
            max_entries: slots * opts.ncpus.max(1),
            no_prealloc: false,
            role: MapRole::RecordRing,
        });
        let head = b.add_map(MapSpec {
            name: "sl_ring_head".into(),
            kind: MapKind::PercpuArray,
            key_size: 4,
            value_size: 8,
            max_entries: 1,
            no_prealloc: false,
            role: MapRole::RingHead,
        });
        let r = KernelRing {
            map,
            head,
            slot_size,
            slots,
            fill: opts.kernel_fill,
            probe_slots,
        };
        b.ring = Some(r);
        b.layout.kernel_ring = Some(r);
    }
    // Group clauses by attach point, keeping program order inside each group.
    let mut groups: BTreeMap<GroupKey, Vec<(usize, Vec<ProbeInfo>)>> = BTreeMap::new();
    let mut order: Vec<GroupKey> = Vec::new();
    // Clauses are named by their position in `prog.clauses` (what record layouts and the
    // consumer index), which differs from `CheckedClause::index` when `-Z` left out a clause
    // that matched nothing.
    for (pos, c) in prog.clauses.iter().enumerate() {
        for p in &c.probes {
            let Some(g) = group_of(p) else {
                return Err(CodegenError {
                    clause: pos,
                    span: c.span,
                    message: format!(
                        "probe {} has a kind this runtime cannot attach",
                        p.full_name()
                    ),
                    hint: None,
                });
            };
            if !groups.contains_key(&g) {
                order.push(g.clone());
            }
            let list = groups.entry(g).or_default();
            match list.last_mut() {
                Some((ci, probes)) if *ci == pos => probes.push(p.clone()),
                _ => list.push((pos, vec![p.clone()])),
            }
        }
    }
    let order = merge_uprobe_sites(&mut groups, order);
    for g in order {
        let members = groups.remove(&g).expect("group listed");
        if !matches!(g, GroupKey::UprobeMulti(..)) {
            b.program(g, members)?;
            continue;
        }
        // A clause that needs a per-site constant (`probefunc` differing between the sites)
        // falls back to one program per site.
        let saved = (
            b.layout.clone(),
            b.spec_map,
            b.chill_map,
            b.probe_index.clone(),
        );
        match b.program(g, members.clone()) {
            Err(e) if e.message == PER_SITE_NEEDED => {
                (b.layout, b.spec_map, b.chill_map, b.probe_index) = saved;
                for (key, m) in split_multi(&members) {
                    b.program(key, m)?;
                }
            }
            r => r?,
        }
    }
    if opts.bufsize.is_none() {
        let asynchronous = b.layout.records.iter().any(|r| {
            !matches!(
                b.layout.programs[r.program].attach,
                Attach::Begin | Attach::End | Attach::Error
            )
        });
        if asynchronous {
            let rb = b.layout.ringbuf;
            b.layout.maps[rb].max_entries = ringbuf_size(4 << 20);
        }
    }
    Ok(b.layout)
}

/// The record of the clause being compiled.
struct CurRecord {
    base: u32,
    size: u32,
    sections: Vec<Vec<u32>>,
    next: usize,
    /// The `exit()` actions of the record: (section index, absolute scratch offset of the status).
    exits: Vec<(usize, u32)>,
}

struct ProgGen<'b, 'p> {
    b: &'b mut Builder<'p>,
    prog_index: usize,
    record: Option<CurRecord>,
    asm: Asm,
    group: GroupKey,
    scratch_map: usize,
    stack_next: i16,
    scratch_next: u32,
    scratch_max: u32,
    /// End of the scratch memory that must outlive its statement (copyin() buffers: DTrace keeps
    /// them for the whole clause); statements never release scratch below it. Reset per clause.
    pinned: u32,
    /// Start of the clause's first `alloca()`/`copyin()` buffer: with `pinned` it bounds the
    /// memory that pointers into scratch may reach (`None` before the clause's first one).
    pin_lo: Option<u32>,
    /// Bytes the clause's `alloca()` calls asked for (unrounded), against `-x scratchsize`.
    scratch_used: u32,
    clause: usize,
    clause_span: Span,
    clause_end: Option<Label>,
    probes: Vec<ProbeInfo>,
    clause_locals: BTreeMap<u32, u32>,
    zero_off: u32,
    sysnames_map: Option<usize>,
    /// Scratch offset of the program's strtok state (see `strsubr::strtok`), when a clause of
    /// the program calls `strtok()`.
    strtok_state: Option<u32>,
    /// Instructions the verifier is expected to walk in this program's string-scanning loops
    /// (each iteration is walked once; see `strsubr`), summed to report an over-budget program
    /// before the kernel does.
    loop_cost: u64,
}

impl ProgGen<'_, '_> {
    fn err<T>(&self, span: Span, message: impl Into<String>) -> Res<T> {
        Err(CodegenError {
            clause: self.clause,
            span,
            message: message.into(),
            hint: None,
        })
    }

    fn slot(&mut self, span: Span) -> Res<i16> {
        let s = self.stack_next;
        if s <= -512 {
            return self.err(span, "expression too deep for the 512-byte BPF stack");
        }
        self.stack_next -= 8;
        Ok(s)
    }

    fn scratch(&mut self, size: u32, span: Span) -> Res<u32> {
        let off = self.scratch_next;
        let size = (size + 7) & !7;
        self.scratch_next += size;
        if self.scratch_next > 32000 {
            return self.err(
                span,
                "clause needs more than 32000 bytes of scratch memory (lower strsize)",
            );
        }
        self.scratch_max = self.scratch_max.max(self.scratch_next);
        Ok(off)
    }

    fn strsize(&self) -> u32 {
        self.b.strsize
    }

    fn is_syscall(&self) -> bool {
        matches!(self.group, GroupKey::SysEnter | GroupKey::SysExit)
    }
}
