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

use std::collections::BTreeMap;

use probe_sema::argspec::{ArgLocation, ArgSpec, Reg as UReg};
use probe_sema::checked::{
    Action, AggFunc, Builtin, CheckedClause, CheckedProgram, Subr, TExpr, TExprKind, TStmt,
    VarAccess, VarScope,
};
use probe_sema::{DtraceProbe, ProbeArgs, ProbeInfo, ProbeKind, Type};
use probe_syntax::Span;
use probe_syntax::ast::{BinaryOp, UnaryOp};

use crate::insn::*;
use crate::layout::*;

mod spec;
mod strsubr;
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
        }
    }
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
}

type Res<T> = Result<T, CodegenError>;

/// Stack slot holding the scratch-lookup key (the CPU number).
const SLOT_KEY: i16 = -8;
/// Stack slot holding the system call number (syscall programs).
const SLOT_NR: i16 = -16;
/// First free stack slot.
const SLOT_FIRST: i16 = -32;
/// Capacity of the `probefunc` table entries for syscall programs.
const SYSNAME_LEN: u32 = 64;
/// Largest `copyin()` size in bytes. The size must be a compile-time constant: each copyin() gets
/// its own buffer in the per-CPU scratch map (32000 bytes per clause in all), kept for the clause.
pub const COPYIN_MAX: u32 = 1024;
/// Quantize buckets (DTrace's `DTRACE_QUANTIZE_NBUCKETS`: 63 negative, zero, 63 positive).
const QUANTIZE_BUCKETS: u32 = probe_format::agg::QUANTIZE_NBUCKETS as u32;
/// The zero bucket's index.
const QUANTIZE_ZERO: i64 = probe_format::agg::QUANTIZE_ZERO_BUCKET as i64;

/// The attach point a probe needs; clauses sharing one are compiled into one program.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum GroupKey {
    Begin,
    SysEnter,
    SysExit,
    Tracepoint(String, String),
    Profile(u64, bool),
    Uprobe(String, u64, bool, Option<u32>, Option<u64>),
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

/// Where a variable's value lives.
#[derive(Debug, Clone)]
enum VarHome {
    Global {
        offset: u32,
    },
    Map {
        map: usize,
        key_fields: Vec<FieldKind>,
    },
    ThreadLocal {
        map: usize,
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
}

/// Compiles a checked program into maps, programs and record layouts.
///
/// Errors: a construct not supported by this code generator (named in the message, e.g.
/// `strjoin()`), or a program too large for the BPF stack/scratch limits.
pub fn compile(prog: &CheckedProgram, opts: &CodegenOptions) -> Res<Layout> {
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
    };
    b.build_maps()?;
    // Group clauses by attach point, keeping program order inside each group.
    let mut groups: BTreeMap<GroupKey, Vec<(usize, Vec<ProbeInfo>)>> = BTreeMap::new();
    let mut order: Vec<GroupKey> = Vec::new();
    for c in &prog.clauses {
        for p in &c.probes {
            let Some(g) = group_of(p) else {
                return Err(CodegenError {
                    clause: c.index,
                    span: c.span,
                    message: format!(
                        "probe {} has a kind this runtime cannot attach",
                        p.full_name()
                    ),
                });
            };
            if !groups.contains_key(&g) {
                order.push(g.clone());
            }
            let list = groups.entry(g).or_default();
            match list.last_mut() {
                Some((ci, probes)) if *ci == c.index => probes.push(p.clone()),
                _ => list.push((c.index, vec![p.clone()])),
            }
        }
    }
    for g in order {
        let members = groups.remove(&g).expect("group listed");
        b.program(g, members)?;
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

/// The most bytes a string expression's value can take (NUL included), when that is known to be
/// less than `strsize`: literals, `execname` (the 16-byte comm) and choices between them.
fn str_cap(e: &TExpr, strsize: u32) -> u32 {
    let c = match &e.kind {
        TExprKind::Str(s) => (s.len() as u32 + 1).min(strsize),
        TExprKind::Builtin(Builtin::Execname) => 16,
        TExprKind::Ternary(_, a, b) => str_cap(a, strsize).max(str_cap(b, strsize)),
        TExprKind::Cast(inner) => str_cap(inner, strsize),
        _ => strsize,
    };
    c.min(strsize)
}

/// For aggregation `agg`, the capacity of each key position: the largest [`str_cap`] over every
/// update of it in the program (strsize for non-string keys; unused then).
fn agg_key_caps(prog: &CheckedProgram, agg: usize, nkeys: usize, strsize: u32) -> Vec<u32> {
    fn walk(stmts: &[TStmt], agg: usize, caps: &mut [u32], strsize: u32) {
        for s in stmts {
            match s {
                TStmt::Aggregate { agg: a, keys, .. } if a.0 as usize == agg => {
                    for (c, k) in caps.iter_mut().zip(keys) {
                        *c = (*c).max(str_cap(k, strsize));
                    }
                }
                TStmt::If { then, els, .. } => {
                    walk(then, agg, caps, strsize);
                    walk(els, agg, caps, strsize);
                }
                _ => {}
            }
        }
    }
    let mut caps = vec![1u32; nkeys];
    for c in &prog.clauses {
        walk(&c.body, agg, &mut caps, strsize);
    }
    // Round up to whole 8-byte words (the key layout's unit).
    caps.iter()
        .map(|c| ((c + 7) & !7).min(strsize.max(8)))
        .collect()
}

/// A valid ring-buffer data size: a power of two between 16 KiB and 1 GiB.
fn ringbuf_size(bytes: u64) -> u32 {
    bytes.clamp(16 << 10, 1 << 30).next_power_of_two() as u32
}

fn value_kind(ty: &Type, strsize: u32) -> FieldKind {
    match ty {
        Type::String => FieldKind::Str { len: strsize },
        Type::Stack { user, frames } => FieldKind::Stack {
            user: *user,
            frames: *frames,
        },
        Type::Symbol(k) => FieldKind::Sym(*k),
        Type::Int { bytes, signed } => FieldKind::Int {
            bytes: *bytes,
            signed: *signed,
        },
        _ => FieldKind::Int {
            bytes: 8,
            signed: false,
        },
    }
}

fn entries_for(space: u64, entry_bytes: u32) -> u32 {
    let n = space / (entry_bytes as u64 + 64);
    n.clamp(1024, 1 << 20) as u32
}

impl<'p> Builder<'p> {
    fn add_map(&mut self, spec: MapSpec) -> usize {
        self.layout.maps.push(spec);
        self.layout.maps.len() - 1
    }

    fn build_maps(&mut self) -> Res<()> {
        let rb = ringbuf_size(self.opts.bufsize.unwrap_or(16 << 10));
        self.layout.ringbuf = self.add_map(MapSpec {
            name: "sl_records".into(),
            kind: MapKind::RingBuf,
            key_size: 0,
            value_size: 0,
            max_entries: rb,
            no_prealloc: false,
            role: MapRole::Records,
        });
        self.layout.stats = self.add_map(MapSpec {
            name: "sl_stats".into(),
            kind: MapKind::PercpuArray,
            key_size: 4,
            value_size: 8,
            max_entries: STAT_COUNT,
            no_prealloc: false,
            role: MapRole::Stats,
        });
        let strsize = self.strsize;
        for v in &self.prog.variables {
            let vk = value_kind(&v.ty, strsize);
            let home = match v.scope {
                VarScope::Clause => VarHome::ClauseLocal,
                VarScope::Thread => {
                    let map = self.layout.maps.len();
                    self.layout.maps.push(MapSpec {
                        name: format!("sl_self_{}", v.name),
                        kind: MapKind::Hash,
                        key_size: 8,
                        value_size: vk.size(),
                        max_entries: entries_for(self.opts.dynvarsize, 8 + vk.size()),
                        no_prealloc: true,
                        role: MapRole::ThreadLocal(v.name.clone()),
                    });
                    VarHome::ThreadLocal { map }
                }
                VarScope::Global if v.is_assoc() => {
                    let key_fields: Vec<FieldKind> =
                        v.keys.iter().map(|t| value_kind(t, strsize)).collect();
                    let key_size: u32 = key_fields.iter().map(FieldKind::size).sum();
                    let map = self.layout.maps.len();
                    self.layout.maps.push(MapSpec {
                        name: format!("sl_a_{}", v.name),
                        kind: MapKind::Hash,
                        key_size,
                        value_size: vk.size(),
                        max_entries: entries_for(self.opts.dynvarsize, key_size + vk.size()),
                        no_prealloc: true,
                        role: MapRole::Assoc(v.name.clone()),
                    });
                    VarHome::Map { map, key_fields }
                }
                VarScope::Global => {
                    let offset = self.globals_size;
                    self.globals_size += vk.size();
                    self.layout.globals.push(GlobalVar {
                        name: v.name.clone(),
                        offset,
                        kind: vk,
                    });
                    VarHome::Global { offset }
                }
            };
            self.homes.push(home);
        }
        if self.globals_size > 0 {
            self.globals_map = Some(self.add_map(MapSpec {
                name: "sl_globals".into(),
                kind: MapKind::Array,
                key_size: 4,
                value_size: self.globals_size,
                max_entries: 1,
                no_prealloc: false,
                role: MapRole::Globals,
            }));
        }
        for a in &self.prog.aggregations {
            // String keys take only the room their values can need (e.g. 16 bytes for execname),
            // which makes hashing and copying the key cheaper than a full strsize buffer.
            let caps = agg_key_caps(self.prog, a.id.0 as usize, a.keys.len(), strsize);
            let keys: Vec<FieldKind> = a
                .keys
                .iter()
                .zip(&caps)
                .map(|(t, cap)| match value_kind(t, strsize) {
                    FieldKind::Str { .. } => FieldKind::Str { len: *cap },
                    k => k,
                })
                .collect();
            let mut off = 0;
            let mut fields = Vec::new();
            for k in keys {
                let sz = k.size();
                fields.push(Field {
                    offset: off,
                    kind: k,
                });
                off += sz;
            }
            let func = a.func;
            let value_size = func.nwords() as u32 * 8;
            self.agg_value_max = self.agg_value_max.max(value_size);
            let keyed = !fields.is_empty();
            let key_size = if keyed { off } else { 4 };
            let id = self.layout.aggs.len();
            let map = self.add_map(MapSpec {
                name: format!("sl_agg_{}", a.name),
                kind: if keyed {
                    MapKind::PercpuHash
                } else {
                    MapKind::PercpuArray
                },
                key_size,
                value_size,
                max_entries: if keyed {
                    entries_for(self.opts.aggsize, key_size + value_size)
                } else {
                    1
                },
                no_prealloc: keyed,
                role: MapRole::Aggregation(id),
            });
            self.layout.aggs.push(AggDesc {
                name: a.name.clone(),
                func,
                keys: fields,
                key_size,
                map,
            });
        }
        Ok(())
    }

    fn program(&mut self, g: GroupKey, members: Vec<(usize, Vec<ProbeInfo>)>) -> Res<()> {
        let (kind, attach) = match &g {
            GroupKey::Begin => (ProgKind::RawTracepoint, Attach::Begin),
            GroupKey::End => (ProgKind::RawTracepoint, Attach::End),
            GroupKey::Error => (ProgKind::RawTracepoint, Attach::Error),
            GroupKey::SysEnter => (ProgKind::RawTracepoint, Attach::SysEnter),
            GroupKey::SysExit => (ProgKind::RawTracepoint, Attach::SysExit),
            GroupKey::Tracepoint(c, e) => (
                ProgKind::Tracepoint,
                Attach::Tracepoint {
                    category: c.clone(),
                    event: e.clone(),
                },
            ),
            GroupKey::Profile(p, e) => (
                ProgKind::PerfEvent,
                Attach::Profile {
                    period_ns: *p,
                    every_cpu: *e,
                },
            ),
            GroupKey::Uprobe(path, offset, ret, pid, semaphore) => (
                ProgKind::Kprobe,
                Attach::Uprobe {
                    path: path.clone(),
                    offset: *offset,
                    ret: *ret,
                    pid: *pid,
                    semaphore: *semaphore,
                },
            ),
        };
        let name = match &g {
            GroupKey::Begin => "sl_begin".to_string(),
            GroupKey::End => "sl_end".into(),
            GroupKey::Error => "sl_error".into(),
            GroupKey::SysEnter => "sl_sys_enter".into(),
            GroupKey::SysExit => "sl_sys_exit".into(),
            GroupKey::Tracepoint(_, e) => format!("sl_{e}"),
            GroupKey::Profile(..) => "sl_profile".into(),
            GroupKey::Uprobe(..) => "sl_uprobe".into(),
        };
        let scratch_map = self.add_map(MapSpec {
            name: format!("sl_scr{}", self.layout.programs.len()),
            kind: MapKind::Array,
            key_size: 4,
            value_size: 8, // fixed below once the program's use is known
            max_entries: self.opts.ncpus.max(1),
            no_prealloc: false,
            role: MapRole::Scratch,
        });
        let mut probe_ids = Vec::new();
        for (_, probes) in &members {
            for p in probes {
                let full = p.full_name();
                let id = match self.layout.probes.iter().position(|q| q.name == full) {
                    Some(i) => i,
                    None => {
                        self.layout.probes.push(ProbeRef { name: full });
                        self.layout.probes.len() - 1
                    }
                };
                if !probe_ids.contains(&id) {
                    probe_ids.push(id);
                }
            }
        }
        let prog_index = self.layout.programs.len();
        let mut pg = ProgGen {
            b: self,
            prog_index,
            record: None,
            asm: Asm::new(),
            group: g.clone(),
            scratch_map,
            stack_next: SLOT_FIRST,
            scratch_next: 0,
            scratch_max: 0,
            pinned: 0,
            clause: 0,
            clause_span: Span::new(0, 0),
            clause_end: None,
            probes: Vec::new(),
            clause_locals: BTreeMap::new(),
            zero_off: 0,
            sysnames_map: None,
            loop_cost: 0,
        };
        pg.prologue(&members)?;
        for (ci, probes) in &members {
            let clause = &pg.b.prog.clauses[*ci];
            pg.clause(clause, probes, &members)?;
        }
        let out = pg.asm.label();
        pg.asm.bind(out);
        pg.asm.mov_imm(R0, 0);
        pg.asm.exit();
        let scratch_size = (pg.scratch_max.max(8) + 7) & !7;
        let asm = std::mem::take(&mut pg.asm);
        drop(pg);
        self.layout.maps[scratch_map].value_size = scratch_size;
        let (insns, map_refs) = asm.finish();
        self.layout.programs.push(ProgSpec {
            name,
            kind,
            attach,
            insns,
            map_refs,
            clauses: members.iter().map(|(c, _)| *c).collect(),
            probes: probe_ids,
        });
        Ok(())
    }
}

/// The lower bounds of llquantize's buckets 1.. (ascending): bucket `i + 1` holds values
/// `>= bounds[i]` (and below the next bound); bucket 0 holds values below `factor^low`. Taken
/// from probe-format's labels so the BPF side and the printer agree exactly
/// ([`probe_format::agg::llquantize_bucket`]).
pub fn llquantize_boundaries(factor: u16, low: u16, high: u16, nsteps: u16) -> Vec<i64> {
    let v = probe_format::agg::llquantize_bucket_values(factor, low, high, nsteps);
    v[1..].to_vec()
}

/// The record of the clause being compiled.
struct CurRecord {
    base: u32,
    size: u32,
    sections: Vec<Vec<u32>>,
    next: usize,
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
    clause: usize,
    clause_span: Span,
    clause_end: Option<Label>,
    probes: Vec<ProbeInfo>,
    clause_locals: BTreeMap<u32, u32>,
    zero_off: u32,
    sysnames_map: Option<usize>,
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

    // ---- program structure ----

    /// `dst = map_lookup_elem(map, &SLOT_KEY)`; returns 0 from the program when the lookup
    /// fails (it cannot for an array map's key 0 or a CPU index, but the verifier needs the check).
    fn lookup_or_return(&mut self, map: usize, dst: Reg) {
        let a = &mut self.asm;
        a.ld_map(R1, map);
        a.mov(R2, R10);
        a.alu_imm(Alu::Add, R2, SLOT_KEY as i32);
        a.call(helper::MAP_LOOKUP_ELEM);
        let ok = a.label();
        a.jmp_imm(Cond::Ne, R0, 0, ok);
        a.mov_imm(R0, 0);
        a.exit();
        a.bind(ok);
        a.mov(dst, R0);
    }

    fn prologue(&mut self, members: &[(usize, Vec<ProbeInfo>)]) -> Res<()> {
        let a = &mut self.asm;
        a.mov(R6, R1);
        a.call(helper::GET_SMP_PROCESSOR_ID);
        a.stx(Size::W, R10, SLOT_KEY, R0);
        self.lookup_or_return(self.scratch_map, R7);
        // A zeroed region, never written, used to create aggregation entries.
        let zsize = self.b.agg_value_max.max(8);
        self.zero_off = self.scratch(zsize, Span::new(0, 0))?;
        let a = &mut self.asm;
        if let Some(g) = self.b.globals_map {
            a.st_imm(Size::W, R10, SLOT_KEY, 0);
            self.lookup_or_return(g, R8);
        }
        let a = &mut self.asm;
        match self.group {
            GroupKey::SysEnter => {
                a.ldx(Size::DW, R0, R6, 8);
                a.stx(Size::DW, R10, SLOT_NR, R0);
            }
            GroupKey::SysExit => {
                // nr = regs->orig_ax, read through the pt_regs pointer in ctx[0].
                a.st_imm(Size::DW, R10, SLOT_NR, -1);
                a.mov(R1, R10);
                a.alu_imm(Alu::Add, R1, SLOT_NR as i32);
                a.mov_imm(R2, 8);
                a.ldx(Size::DW, R3, R6, 0);
                a.alu_imm(Alu::Add, R3, pt_regs::ORIG_AX as i32);
                a.call(helper::PROBE_READ_KERNEL);
            }
            _ => {
                a.st_imm(Size::DW, R10, SLOT_NR, 0);
            }
        }
        let _ = members;
        Ok(())
    }

    fn clause(
        &mut self,
        c: &CheckedClause,
        probes: &[ProbeInfo],
        _members: &[(usize, Vec<ProbeInfo>)],
    ) -> Res<()> {
        self.clause = c.index;
        self.clause_span = c.span;
        self.probes = probes.to_vec();
        self.stack_next = SLOT_FIRST;
        let scratch_mark = self.scratch_next;
        self.pinned = 0;
        let end = self.asm.label();
        self.clause_end = Some(end);
        // Clause-local variables get scratch slots for the clause.
        self.clause_locals.clear();
        for v in &c.clause_locals {
            let ty = self.b.prog.var(*v).ty.clone();
            let size = value_kind(&ty, self.strsize()).size();
            let off = self.scratch(size, c.span)?;
            self.zero(off, size);
            self.clause_locals.insert(v.0, off);
        }
        if self.is_syscall() {
            self.syscall_filter(probes, end)?;
        }
        if let Some(p) = &c.predicate {
            self.int(p)?;
            self.asm.jmp_imm(Cond::Eq, R0, 0, end);
        }
        let mut shapes = Vec::new();
        self.collect_actions(&c.body, &mut shapes);
        self.record = None;
        if !shapes.is_empty() || c.body.is_empty() {
            let (id, size, sections) = self.record_layout(shapes);
            let base = self.scratch(size, c.span)?;
            self.write_header(base, id);
            self.record = Some(CurRecord {
                base,
                size,
                sections,
                next: 0,
            });
        }
        for s in &c.body {
            self.stmt(s)?;
        }
        if let Some(r) = self.record.take() {
            self.submit(r.base, r.size);
        }
        self.asm.bind(end);
        self.scratch_next = scratch_mark;
        self.pinned = 0;
        Ok(())
    }

    fn syscall_filter(&mut self, probes: &[ProbeInfo], end: Label) -> Res<()> {
        let nrs: Vec<u32> = probes
            .iter()
            .filter_map(|p| match p.kind {
                ProbeKind::Syscall { nr, .. } => Some(nr),
                _ => None,
            })
            .collect();
        if nrs.len() >= self.b.opts.syscall_count {
            return Ok(()); // every system call: no filter
        }
        self.asm.ldx(Size::DW, R1, R10, SLOT_NR);
        let hit = self.asm.label();
        // A sorted compare chain; ranges of consecutive numbers collapse into one test.
        let mut sorted = nrs.clone();
        sorted.sort_unstable();
        sorted.dedup();
        let mut i = 0;
        while i < sorted.len() {
            let mut j = i;
            while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
                j += 1;
            }
            if i == j {
                self.asm.jmp_imm(Cond::Eq, R1, sorted[i] as i32, hit);
            } else {
                let skip = self.asm.label();
                self.asm.jmp_imm(Cond::Lt, R1, sorted[i] as i32, skip);
                self.asm.jmp_imm(Cond::Le, R1, sorted[j] as i32, hit);
                self.asm.bind(skip);
            }
            i = j + 1;
        }
        self.asm.ja(end);
        self.asm.bind(hit);
        Ok(())
    }

    // ---- memory helpers ----

    fn zero(&mut self, off: u32, len: u32) {
        let mut i = 0;
        while i < len {
            self.asm.st_imm(Size::DW, R7, (off + i) as i16, 0);
            i += 8;
        }
    }

    /// Copies `len` bytes (a multiple of 8) from `src + soff` to `dst + doff` through R1.
    fn copy(&mut self, dst: Reg, doff: i32, src: Reg, soff: i32, len: u32) {
        let mut i = 0;
        while i < len {
            self.asm.ldx(Size::DW, R1, src, (soff + i as i32) as i16);
            self.asm.stx(Size::DW, dst, (doff + i as i32) as i16, R1);
            i += 8;
        }
    }

    fn stat_inc(&mut self, stat: Stat) {
        let a = &mut self.asm;
        a.st_imm(Size::W, R10, SLOT_KEY, stat as i32);
        a.ld_map(R1, self.b.layout.stats);
        a.mov(R2, R10);
        a.alu_imm(Alu::Add, R2, SLOT_KEY as i32);
        a.call(helper::MAP_LOOKUP_ELEM);
        let skip = a.label();
        a.jmp_imm(Cond::Eq, R0, 0, skip);
        a.ldx(Size::DW, R1, R0, 0);
        a.alu_imm(Alu::Add, R1, 1);
        a.stx(Size::DW, R0, 0, R1);
        a.bind(skip);
    }

    /// Normalizes R-register `r` to the representation of `ty` (truncate, then sign/zero extend).
    fn normalize(&mut self, r: Reg, ty: &Type) {
        if let Type::Int { bytes, signed } = ty
            && *bytes < 8
        {
            if *signed {
                self.asm.movsx(r, r, (*bytes as i16) * 8);
            } else {
                self.asm.zext(r, *bytes as u32 * 8);
            }
        }
    }

    // ---- records ----

    /// Registers a record layout for `actions` and returns (record id, size, per-action field
    /// offsets relative to the record start).
    fn record_layout(
        &mut self,
        actions: Vec<(RecordAction, Vec<FieldKind>)>,
    ) -> (u32, u32, Vec<Vec<u32>>) {
        let mut size = RECORD_HEADER;
        let mut recs = Vec::new();
        let mut offs = Vec::new();
        for (action, kinds) in actions {
            let mut fields = Vec::new();
            let mut o = Vec::new();
            for k in kinds {
                o.push(size);
                fields.push(Field {
                    offset: size,
                    kind: k.clone(),
                });
                size += k.size();
            }
            recs.push(ActionRec { action, fields });
            offs.push(o);
        }
        let id = self.b.layout.records.len() as u32;
        self.b.layout.records.push(RecordDesc {
            clause: self.clause,
            program: self.prog_index,
            actions: recs,
            size,
        });
        (id, size, offs)
    }

    /// Writes the record header at scratch `base` (mask 0).
    fn write_header(&mut self, base: u32, id: u32) {
        let a = &mut self.asm;
        a.st_imm(Size::W, R7, base as i16, id as i32);
        a.call(helper::GET_SMP_PROCESSOR_ID);
        a.stx(Size::W, R7, (base + 4) as i16, R0);
        a.ldx(Size::DW, R0, R10, SLOT_NR);
        a.stx(Size::DW, R7, (base + 8) as i16, R0);
        a.st_imm(Size::DW, R7, (base + 16) as i16, 0);
        a.call(helper::KTIME_GET_NS);
        a.stx(Size::DW, R7, (base + 24) as i16, R0);
    }

    /// Sends `size` bytes at scratch `base` to the ring buffer; a full buffer counts a drop.
    fn submit(&mut self, base: u32, size: u32) {
        let a = &mut self.asm;
        a.ld_map(R1, self.b.layout.ringbuf);
        a.mov(R2, R7);
        a.alu_imm(Alu::Add, R2, base as i32);
        a.mov_imm(R3, size as i64);
        a.mov_imm(R4, 0);
        a.call(helper::RINGBUF_OUTPUT);
        let ok = a.label();
        a.jmp_imm(Cond::SGe, R0, 0, ok);
        self.stat_inc(Stat::RecordDrops);
        self.asm.bind(ok);
    }

    /// The next action's field offsets (absolute scratch offsets), marking it executed.
    fn next_section(&mut self, span: Span) -> Res<Vec<u32>> {
        let Some(r) = self.record.as_mut() else {
            return self.err(span, "internal: action outside a clause record");
        };
        let i = r.next;
        r.next += 1;
        let base = r.base;
        let offs: Vec<u32> = r
            .sections
            .get(i)
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|o| base + o)
            .collect();
        // mask |= 1 << i
        let a = &mut self.asm;
        a.ldx(Size::DW, R1, R7, (base + 16) as i16);
        if i < 31 {
            a.alu_imm(Alu::Or, R1, 1 << i);
        } else {
            a.mov_imm(R2, 1i64 << i.min(63));
            a.alu(Alu::Or, R1, R2);
        }
        a.stx(Size::DW, R7, (base + 16) as i16, R1);
        Ok(offs)
    }

    /// Writes the value of `e` (of field kind `k`) at scratch offset `off`.
    fn store_value(&mut self, e: &TExpr, k: &FieldKind, off: u32) -> Res<()> {
        match k {
            FieldKind::Str { len } if *len < self.strsize() => self.string_small(e, off, *len),
            FieldKind::Str { .. } => self.string(e, off),
            FieldKind::Stack { user, frames } => {
                self.zero(off, frames * 8);
                let a = &mut self.asm;
                a.mov(R1, R6);
                a.mov(R2, R7);
                a.alu_imm(Alu::Add, R2, off as i32);
                a.mov_imm(R3, (*frames * 8) as i64);
                a.mov_imm(R4, if *user { 256 } else { 0 });
                a.call(helper::GET_STACK);
                Ok(())
            }
            _ => {
                self.int(e)?;
                self.asm.stx(Size::DW, R7, off as i16, R0);
                Ok(())
            }
        }
    }

    fn fault(&mut self, fault: Fault, addr_slot: Option<i16>, span: Span) -> Res<()> {
        let kinds = vec![
            FieldKind::Int {
                bytes: 8,
                signed: false,
            },
            FieldKind::Int {
                bytes: 8,
                signed: false,
            },
        ];
        let mark = self.scratch_next;
        let (id, size, offs) = self.record_layout(vec![(RecordAction::Error, kinds)]);
        let base = self.scratch(size, span)?;
        self.write_header(base, id);
        self.asm.st_imm(Size::DW, R7, (base + 16) as i16, 1);
        self.asm.mov_imm(R0, fault as i64);
        self.asm.stx(Size::DW, R7, (base + offs[0][0]) as i16, R0);
        match addr_slot {
            Some(s) => self.asm.ldx(Size::DW, R0, R10, s),
            None => self.asm.mov_imm(R0, 0),
        }
        self.asm.stx(Size::DW, R7, (base + offs[0][1]) as i16, R0);
        self.submit(base, size);
        self.stat_inc(Stat::Errors);
        self.scratch_next = mark;
        let end = self.clause_end.expect("inside a clause");
        self.asm.ja(end);
        Ok(())
    }

    // ---- statements ----

    fn stmt(&mut self, s: &TStmt) -> Res<()> {
        let mark = (self.stack_next, self.scratch_next);
        match s {
            TStmt::Expr(e) => {
                if e.ty.is_string() {
                    if let TExprKind::Assign(..) = e.kind {
                        self.assign(e)?;
                    } else {
                        let off = self.scratch(self.strsize(), e.span)?;
                        self.string(e, off)?;
                    }
                } else {
                    self.int(e)?;
                }
            }
            TStmt::If { cond, then, els } => {
                self.int(cond)?;
                let else_l = self.asm.label();
                let done = self.asm.label();
                self.asm.jmp_imm(Cond::Eq, R0, 0, else_l);
                for s in then {
                    self.stmt(s)?;
                }
                self.asm.ja(done);
                self.asm.bind(else_l);
                for s in els {
                    self.stmt(s)?;
                }
                self.asm.bind(done);
            }
            TStmt::Aggregate {
                agg,
                keys,
                value,
                incr,
                span,
            } => self.aggregate(agg.0 as usize, keys, value.as_ref(), incr.as_ref(), *span)?,
            TStmt::Action(a, span) => self.action(a, *span)?,
        }
        self.stack_next = mark.0;
        self.scratch_next = mark.1.max(self.pinned);
        Ok(())
    }

    /// The record part of an action: what it does in user space and its fields. `None` for
    /// actions that record nothing (none today) or are rejected in [`Self::action`].
    fn action_shape(&self, a: &Action) -> Option<(RecordAction, Vec<FieldKind>)> {
        let ss = self.strsize();
        Some(match a {
            Action::Trace(e) => (RecordAction::Trace, vec![value_kind(&e.ty, ss)]),
            Action::Printf { format, args } => (
                RecordAction::Printf {
                    format: format.clone(),
                },
                args.iter().map(|e| value_kind(&e.ty, ss)).collect(),
            ),
            Action::Exit(_) => (
                RecordAction::Exit,
                vec![FieldKind::Int {
                    bytes: 4,
                    signed: true,
                }],
            ),
            Action::Printa { format, aggs } => (
                RecordAction::Printa {
                    format: format.clone(),
                    aggs: aggs.iter().map(|a| a.0 as usize).collect(),
                },
                vec![],
            ),
            Action::Clear(agg) => (
                RecordAction::Clear {
                    agg: agg.0 as usize,
                },
                vec![],
            ),
            Action::Trunc { agg, keep } => {
                let keep = match keep {
                    None => None,
                    Some(e) => Some(self.const_int(e)?),
                };
                (
                    RecordAction::Trunc {
                        agg: agg.0 as usize,
                        keep,
                    },
                    vec![],
                )
            }
            Action::Normalize { agg, factor } => (
                RecordAction::Normalize {
                    agg: agg.0 as usize,
                    factor: Some(self.const_int(factor)?),
                },
                vec![],
            ),
            Action::Denormalize(agg) => (
                RecordAction::Normalize {
                    agg: agg.0 as usize,
                    factor: None,
                },
                vec![],
            ),
            Action::Speculate(_) | Action::Commit(_) | Action::Discard(_) => {
                let action = match a {
                    Action::Speculate(_) => RecordAction::Speculate,
                    Action::Commit(_) => RecordAction::Commit,
                    _ => RecordAction::Discard,
                };
                let word = FieldKind::Int {
                    bytes: 8,
                    signed: false,
                };
                (action, vec![word.clone(), word])
            }
            _ => return None,
        })
    }

    fn collect_actions(&self, body: &[TStmt], out: &mut Vec<(RecordAction, Vec<FieldKind>)>) {
        for s in body {
            match s {
                TStmt::Action(a, _) => {
                    if let Some(shape) = self.action_shape(a) {
                        out.push(shape);
                    }
                }
                TStmt::If { then, els, .. } => {
                    self.collect_actions(then, out);
                    self.collect_actions(els, out);
                }
                _ => {}
            }
        }
    }

    fn action(&mut self, a: &Action, span: Span) -> Res<()> {
        match a {
            Action::Tracemem { .. } => {
                return self.err(span, "tracemem() is not supported by sightline yet");
            }
            Action::System { .. } | Action::Raise(_) | Action::Stop => {
                return self.err(
                    span,
                    "destructive actions (system, raise, stop) are not supported",
                );
            }
            Action::Trunc { keep: Some(e), .. } if self.const_int(e).is_none() => {
                return self.err(e.span, "trunc() needs a constant count");
            }
            Action::Normalize { factor, .. } if self.const_int(factor).is_none() => {
                return self.err(factor.span, "normalize() needs a constant factor");
            }
            _ => {}
        }
        let offs = self.next_section(span)?;
        match a {
            Action::Trace(e) => {
                let k = value_kind(&e.ty, self.strsize());
                self.store_value(e, &k, offs[0])?;
            }
            Action::Printf { args, .. } => {
                for (e, off) in args.iter().zip(&offs) {
                    let k = value_kind(&e.ty, self.strsize());
                    self.store_value(e, &k, *off)?;
                }
            }
            Action::Exit(e) => {
                self.int(e)?;
                self.asm.stx(Size::DW, R7, offs[0] as i16, R0);
            }
            Action::Speculate(id) => self.spec_action(SpecAction::Speculate, id, &offs, span)?,
            Action::Commit(id) => self.spec_action(SpecAction::Commit, id, &offs, span)?,
            Action::Discard(id) => self.spec_action(SpecAction::Discard, id, &offs, span)?,
            _ => {}
        }
        Ok(())
    }

    fn const_int(&self, e: &TExpr) -> Option<i64> {
        match &e.kind {
            TExprKind::Int(v) => Some(*v as i64),
            TExprKind::Cast(inner) => self.const_int(inner),
            TExprKind::Unary(UnaryOp::Neg, inner) => self.const_int(inner).map(|v| -v),
            _ => None,
        }
    }

    // ---- aggregations ----

    fn build_key(&mut self, kinds: &[FieldKind], keys: &[TExpr], span: Span) -> Res<u32> {
        let size: u32 = kinds.iter().map(FieldKind::size).sum();
        let off = self.scratch(size.max(8), span)?;
        let mut o = off;
        for (k, e) in kinds.iter().zip(keys) {
            self.store_value(e, k, o)?;
            o += k.size();
        }
        Ok(off)
    }

    fn aggregate(
        &mut self,
        id: usize,
        keys: &[TExpr],
        value: Option<&TExpr>,
        incr: Option<&TExpr>,
        span: Span,
    ) -> Res<()> {
        let desc = self.b.layout.aggs[id].clone();
        // Value and weight first, into stack slots.
        let vslot = self.slot(span)?;
        match value {
            Some(v) => self.int(v)?,
            None => self.asm.mov_imm(R0, 0),
        }
        self.asm.stx(Size::DW, R10, vslot, R0);
        let islot = self.slot(span)?;
        match incr {
            Some(v) => self.int(v)?,
            None => self.asm.mov_imm(R0, 1),
        }
        self.asm.stx(Size::DW, R10, islot, R0);
        let map = desc.map;
        let done = self.asm.label();
        if desc.keys.is_empty() {
            self.asm.st_imm(Size::W, R10, SLOT_KEY, 0);
            let a = &mut self.asm;
            a.ld_map(R1, map);
            a.mov(R2, R10);
            a.alu_imm(Alu::Add, R2, SLOT_KEY as i32);
            a.call(helper::MAP_LOOKUP_ELEM);
            a.jmp_imm(Cond::Eq, R0, 0, done);
            a.mov(R9, R0);
        } else {
            let kinds: Vec<FieldKind> = desc.keys.iter().map(|f| f.kind.clone()).collect();
            let koff = self.build_key(&kinds, keys, span)?;
            let a = &mut self.asm;
            a.ld_map(R1, map);
            a.mov(R2, R7);
            a.alu_imm(Alu::Add, R2, koff as i32);
            a.call(helper::MAP_LOOKUP_ELEM);
            let found = a.label();
            a.jmp_imm(Cond::Ne, R0, 0, found);
            // Create the entry from the zero region (BPF_NOEXIST: another CPU may have raced us).
            a.ld_map(R1, map);
            a.mov(R2, R7);
            a.alu_imm(Alu::Add, R2, koff as i32);
            a.mov(R3, R7);
            a.alu_imm(Alu::Add, R3, self.zero_off as i32);
            a.mov_imm(R4, 1);
            a.call(helper::MAP_UPDATE_ELEM);
            a.ld_map(R1, map);
            a.mov(R2, R7);
            a.alu_imm(Alu::Add, R2, koff as i32);
            a.call(helper::MAP_LOOKUP_ELEM);
            a.jmp_imm(Cond::Ne, R0, 0, found);
            self.stat_inc(Stat::AggDrops);
            self.asm.ja(done);
            self.asm.bind(found);
            self.asm.mov(R9, R0);
        }
        let signed = self.b.prog.aggregations[id]
            .arg_ty
            .as_int()
            .is_none_or(|(_, s)| s);
        let a = &mut self.asm;
        a.ldx(Size::DW, R2, R10, vslot);
        match &desc.func {
            AggFunc::Count => {
                a.ldx(Size::DW, R1, R9, 0);
                a.alu_imm(Alu::Add, R1, 1);
                a.stx(Size::DW, R9, 0, R1);
            }
            AggFunc::Sum => {
                a.ldx(Size::DW, R1, R9, 0);
                a.alu(Alu::Add, R1, R2);
                a.stx(Size::DW, R9, 0, R1);
            }
            AggFunc::Avg => {
                a.ldx(Size::DW, R1, R9, 0);
                a.alu_imm(Alu::Add, R1, 1);
                a.stx(Size::DW, R9, 0, R1);
                a.ldx(Size::DW, R1, R9, 8);
                a.alu(Alu::Add, R1, R2);
                a.stx(Size::DW, R9, 8, R1);
            }
            AggFunc::Min | AggFunc::Max => {
                let set = a.label();
                let skip = a.label();
                a.ldx(Size::DW, R1, R9, 0);
                a.jmp_imm(Cond::Eq, R1, 0, set);
                a.ldx(Size::DW, R3, R9, 8);
                let better = match (&desc.func, signed) {
                    (AggFunc::Min, true) => Cond::SLt,
                    (AggFunc::Min, false) => Cond::Lt,
                    (_, true) => Cond::SGt,
                    (_, false) => Cond::Gt,
                };
                a.jmp(better, R2, R3, set);
                a.ja(skip);
                a.bind(set);
                a.stx(Size::DW, R9, 8, R2);
                a.bind(skip);
                a.alu_imm(Alu::Add, R1, 1);
                a.stx(Size::DW, R9, 0, R1);
            }
            AggFunc::Stddev => {
                // count, sum, and the 128-bit sum of squares (lo, hi).
                a.ldx(Size::DW, R1, R9, 0);
                a.alu_imm(Alu::Add, R1, 1);
                a.stx(Size::DW, R9, 0, R1);
                a.ldx(Size::DW, R1, R9, 8);
                a.alu(Alu::Add, R1, R2);
                a.stx(Size::DW, R9, 8, R1);
                // u = |v|; a = u >> 32; b = u & 0xffffffff.
                let pos = a.label();
                a.jmp_imm(Cond::SGe, R2, 0, pos);
                a.alu_imm(Alu::Neg, R2, 0);
                a.bind(pos);
                a.mov(R3, R2);
                a.alu_imm(Alu::Rsh, R3, 32); // a
                a.mov(R4, R2);
                a.zext(R4, 32); // b
                a.mov(R5, R4);
                a.alu(Alu::Mul, R5, R4); // lo = b*b
                a.mov(R0, R3);
                a.alu(Alu::Mul, R0, R4); // mid = a*b
                a.alu(Alu::Mul, R3, R3); // hi = a*a
                a.mov(R4, R0);
                a.alu_imm(Alu::Rsh, R4, 31);
                a.alu(Alu::Add, R3, R4); // hi += mid >> 31
                a.alu_imm(Alu::Lsh, R0, 33);
                a.alu(Alu::Add, R0, R5); // lo' = lo + (mid << 33)
                let nc1 = a.label();
                a.jmp(Cond::Ge, R0, R5, nc1);
                a.alu_imm(Alu::Add, R3, 1);
                a.bind(nc1);
                // (lo', hi) += into slots 2, 3.
                a.ldx(Size::DW, R1, R9, 16);
                a.alu(Alu::Add, R1, R0);
                let nc2 = a.label();
                a.jmp(Cond::Ge, R1, R0, nc2);
                a.alu_imm(Alu::Add, R3, 1);
                a.bind(nc2);
                a.stx(Size::DW, R9, 16, R1);
                a.ldx(Size::DW, R1, R9, 24);
                a.alu(Alu::Add, R1, R3);
                a.stx(Size::DW, R9, 24, R1);
            }
            AggFunc::Quantize => {
                self.quantize_bucket(R2);
                self.bump_bucket(QUANTIZE_BUCKETS, islot);
            }
            AggFunc::Lquantize { base, step, .. } => {
                let levels = desc.func.lquantize_levels() as u32;
                let under = a.label();
                let over = a.label();
                let have = a.label();
                a.mov_imm(R1, *base);
                a.jmp(Cond::SLt, R2, R1, under);
                a.mov_imm(R1, base + levels as i64 * step);
                a.jmp(Cond::SGe, R2, R1, over);
                a.mov_imm(R1, *base);
                a.alu(Alu::Sub, R2, R1);
                a.mov_imm(R1, *step);
                a.alu(Alu::Div, R2, R1);
                a.alu_imm(Alu::Add, R2, 1);
                a.mov(R0, R2);
                a.ja(have);
                a.bind(under);
                a.mov_imm(R0, 0);
                a.ja(have);
                a.bind(over);
                a.mov_imm(R0, levels as i64 + 1);
                a.bind(have);
                self.bump_bucket(levels + 2, islot);
            }
            AggFunc::Llquantize {
                factor,
                low,
                high,
                nsteps,
            } => {
                let bounds = llquantize_boundaries(*factor, *low, *high, *nsteps);
                // Bucket = number of bounds <= v (bounds ascend), by a descending compare chain.
                let have = a.label();
                for (i, bnd) in bounds.iter().enumerate().rev() {
                    let next = a.label();
                    a.mov_imm(R1, *bnd);
                    a.jmp(Cond::SLt, R2, R1, next);
                    a.mov_imm(R0, i as i64 + 1);
                    a.ja(have);
                    a.bind(next);
                }
                a.mov_imm(R0, 0);
                a.bind(have);
                self.bump_bucket(bounds.len() as u32 + 1, islot);
            }
        }
        self.asm.bind(done);
        Ok(())
    }

    /// R0 = quantize bucket of the signed value in `v` (clobbers R1..R4): 63 for 0,
    /// 64 + floor(log2 v) for v > 0, 62 - floor(log2 -v) for v < 0 (at least 0).
    fn quantize_bucket(&mut self, v: Reg) {
        let a = &mut self.asm;
        let neg = a.label();
        let have = a.label();
        let log = a.label();
        a.mov(R3, v);
        a.mov_imm(R0, QUANTIZE_ZERO);
        a.jmp_imm(Cond::Eq, R3, 0, have);
        a.mov_imm(R4, 1); // sign: 1 positive, 0 negative
        a.jmp_imm(Cond::SGt, R3, 0, log);
        a.alu_imm(Alu::Neg, R3, 0);
        a.mov_imm(R4, 0);
        a.bind(log);
        // R1 = floor(log2(R3)) for R3 != 0 (unsigned).
        a.mov_imm(R1, 0);
        for sh in [32, 16, 8, 4, 2, 1] {
            let skip = a.label();
            a.mov(R2, R3);
            a.alu_imm(Alu::Rsh, R2, sh);
            a.jmp_imm(Cond::Eq, R2, 0, skip);
            a.mov(R3, R2);
            a.alu_imm(Alu::Add, R1, sh);
            a.bind(skip);
        }
        a.jmp_imm(Cond::Eq, R4, 0, neg);
        a.mov_imm(R0, QUANTIZE_ZERO + 1);
        a.alu(Alu::Add, R0, R1);
        a.ja(have);
        a.bind(neg);
        a.mov_imm(R0, QUANTIZE_ZERO - 1);
        a.alu(Alu::Sub, R0, R1);
        a.jmp_imm(Cond::SGe, R0, 0, have);
        a.mov_imm(R0, 0);
        a.bind(have);
    }

    /// `value[R0] += weight` with R0 clamped to `n - 1` (so the verifier sees the bound).
    fn bump_bucket(&mut self, n: u32, islot: i16) {
        let a = &mut self.asm;
        let ok = a.label();
        a.jmp_imm(Cond::Le, R0, (n - 1) as i32, ok);
        a.mov_imm(R0, (n - 1) as i64);
        a.bind(ok);
        a.alu_imm(Alu::Lsh, R0, 3);
        a.mov(R1, R9);
        a.alu(Alu::Add, R1, R0);
        a.ldx(Size::DW, R2, R1, 0);
        a.ldx(Size::DW, R3, R10, islot);
        a.alu(Alu::Add, R2, R3);
        a.stx(Size::DW, R1, 0, R2);
    }

    // ---- variables ----

    /// Leaves a pointer to the variable's storage in R0 (or 0 if a dynamic variable is absent).
    /// With `create`, absent dynamic variables are created zeroed (a full map counts a drop and
    /// yields 0).
    fn var_ptr(&mut self, va: &VarAccess, create: bool, span: Span) -> Res<()> {
        let home = self.b.homes[va.var.0 as usize].clone();
        match home {
            VarHome::Global { offset } => {
                self.asm.mov(R0, R8);
                self.asm.alu_imm(Alu::Add, R0, offset as i32);
            }
            VarHome::ClauseLocal => {
                let Some(&off) = self.clause_locals.get(&va.var.0) else {
                    return self.err(span, "clause-local variable used outside its clause");
                };
                self.asm.mov(R0, R7);
                self.asm.alu_imm(Alu::Add, R0, off as i32);
            }
            VarHome::ThreadLocal { map } => {
                let kslot = self.slot(span)?;
                self.asm.call(helper::GET_CURRENT_PID_TGID);
                self.asm.zext(R0, 32);
                self.asm.stx(Size::DW, R10, kslot, R0);
                self.map_ptr(map, R10, kslot as i32, create)?;
            }
            VarHome::Map {
                map, key_fields, ..
            } => {
                let koff = self.build_key(&key_fields, &va.keys, span)?;
                self.map_ptr(map, R7, koff as i32, create)?;
            }
        }
        Ok(())
    }

    fn map_ptr(&mut self, map: usize, kbase: Reg, koff: i32, create: bool) -> Res<()> {
        let a = &mut self.asm;
        a.ld_map(R1, map);
        a.mov(R2, kbase);
        a.alu_imm(Alu::Add, R2, koff);
        a.call(helper::MAP_LOOKUP_ELEM);
        if create {
            let done = a.label();
            a.jmp_imm(Cond::Ne, R0, 0, done);
            a.ld_map(R1, map);
            a.mov(R2, kbase);
            a.alu_imm(Alu::Add, R2, koff);
            a.mov(R3, R7);
            a.alu_imm(Alu::Add, R3, self.zero_off as i32);
            a.mov_imm(R4, 0);
            a.call(helper::MAP_UPDATE_ELEM);
            let ok = a.label();
            a.jmp_imm(Cond::Eq, R0, 0, ok);
            self.stat_inc(Stat::DynvarDrops);
            self.asm.mov_imm(R0, 0);
            self.asm.ja(done);
            self.asm.bind(ok);
            let a = &mut self.asm;
            a.ld_map(R1, map);
            a.mov(R2, kbase);
            a.alu_imm(Alu::Add, R2, koff);
            a.call(helper::MAP_LOOKUP_ELEM);
            a.bind(done);
        }
        Ok(())
    }

    fn var_read_int(&mut self, va: &VarAccess, span: Span) -> Res<()> {
        self.var_ptr(va, false, span)?;
        let z = self.asm.label();
        self.asm.jmp_imm(Cond::Eq, R0, 0, z);
        self.asm.ldx(Size::DW, R0, R0, 0);
        self.asm.bind(z);
        Ok(())
    }

    /// Deletes a dynamic variable (assignment of 0).
    fn var_delete(&mut self, va: &VarAccess, span: Span) -> Res<()> {
        let home = self.b.homes[va.var.0 as usize].clone();
        match home {
            VarHome::ThreadLocal { map } => {
                let kslot = self.slot(span)?;
                self.asm.call(helper::GET_CURRENT_PID_TGID);
                self.asm.zext(R0, 32);
                self.asm.stx(Size::DW, R10, kslot, R0);
                let a = &mut self.asm;
                a.ld_map(R1, map);
                a.mov(R2, R10);
                a.alu_imm(Alu::Add, R2, kslot as i32);
                a.call(helper::MAP_DELETE_ELEM);
            }
            VarHome::Map {
                map, key_fields, ..
            } => {
                let koff = self.build_key(&key_fields, &va.keys, span)?;
                let a = &mut self.asm;
                a.ld_map(R1, map);
                a.mov(R2, R7);
                a.alu_imm(Alu::Add, R2, koff as i32);
                a.call(helper::MAP_DELETE_ELEM);
            }
            _ => {}
        }
        Ok(())
    }

    /// Stores the integer in stack slot `vslot` into the variable (dynamic variables: 0 deletes).
    fn var_write_int(&mut self, va: &VarAccess, vslot: i16, span: Span) -> Res<()> {
        let dynamic = self.b.prog.var(va.var).is_dynamic();
        if dynamic {
            let del = self.asm.label();
            let done = self.asm.label();
            self.asm.ldx(Size::DW, R0, R10, vslot);
            self.asm.jmp_imm(Cond::Eq, R0, 0, del);
            self.var_ptr(va, true, span)?;
            self.asm.jmp_imm(Cond::Eq, R0, 0, done);
            self.asm.ldx(Size::DW, R1, R10, vslot);
            self.asm.stx(Size::DW, R0, 0, R1);
            self.asm.ja(done);
            self.asm.bind(del);
            self.var_delete(va, span)?;
            self.asm.bind(done);
        } else {
            self.var_ptr(va, false, span)?;
            self.asm.ldx(Size::DW, R1, R10, vslot);
            self.asm.stx(Size::DW, R0, 0, R1);
        }
        Ok(())
    }

    fn assign(&mut self, e: &TExpr) -> Res<()> {
        let TExprKind::Assign(va, value) = &e.kind else {
            unreachable!("assign() on a non-assignment")
        };
        if e.ty.is_string() || matches!(e.ty, Type::Stack { .. }) {
            let k = value_kind(&e.ty, self.strsize());
            let tmp = self.scratch(k.size(), e.span)?;
            self.store_value(value, &k, tmp)?;
            self.var_ptr(va, true, e.span)?;
            let skip = self.asm.label();
            self.asm.jmp_imm(Cond::Eq, R0, 0, skip);
            self.asm.mov(R9, R0);
            self.copy(R9, 0, R7, tmp as i32, k.size());
            self.asm.bind(skip);
            return Ok(());
        }
        let vslot = self.slot(e.span)?;
        self.int(value)?;
        self.asm.stx(Size::DW, R10, vslot, R0);
        self.var_write_int(va, vslot, e.span)?;
        self.asm.ldx(Size::DW, R0, R10, vslot);
        Ok(())
    }

    // ---- integer expressions (result in R0) ----

    fn arg(&mut self, n: u8, span: Span) -> Res<()> {
        let access = self.arg_access(n, span)?;
        match access {
            ArgAccess::Zero => self.asm.mov_imm(R0, 0),
            ArgAccess::CtxU64 { index } => self.asm.ldx(Size::DW, R0, R6, (index * 8) as i16),
            ArgAccess::Regs { reg_offset } => self.asm.ldx(Size::DW, R0, R6, reg_offset),
            ArgAccess::RegsViaPtr {
                ptr_index,
                reg_offset,
            } => {
                let s = self.slot(span)?;
                let a = &mut self.asm;
                a.st_imm(Size::DW, R10, s, 0);
                a.mov(R1, R10);
                a.alu_imm(Alu::Add, R1, s as i32);
                a.mov_imm(R2, 8);
                a.ldx(Size::DW, R3, R6, (ptr_index * 8) as i16);
                a.alu_imm(Alu::Add, R3, reg_offset as i32);
                a.call(helper::PROBE_READ_KERNEL);
                a.ldx(Size::DW, R0, R10, s);
            }
            ArgAccess::Usdt(spec) => self.usdt_arg(&spec, span)?,
            ArgAccess::AttachCookie => {
                self.asm.mov(R1, R6);
                self.asm.call(helper::GET_ATTACH_COOKIE);
            }
        }
        Ok(())
    }

    fn usdt_arg(&mut self, spec: &ArgSpec, span: Span) -> Res<()> {
        let addr_in_r3 = match usdt_operand(&mut self.asm, spec) {
            Ok(UsdtOperand::Value) => false,
            Ok(UsdtOperand::Address) => true,
            Err(why) => {
                return self.err(
                    span,
                    format!("USDT argument `{spec}` is not supported: {why}"),
                );
            }
        };
        if addr_in_r3 {
            let s = self.slot(span)?;
            let a = &mut self.asm;
            a.st_imm(Size::DW, R10, s, 0);
            a.mov(R1, R10);
            a.alu_imm(Alu::Add, R1, s as i32);
            a.mov_imm(R2, spec.size.clamp(1, 8) as i64);
            a.call(helper::PROBE_READ_USER);
            a.ldx(Size::DW, R0, R10, s);
        }
        let ty = Type::Int {
            bytes: spec.size.clamp(1, 8),
            signed: spec.signed,
        };
        self.normalize(R0, &ty);
        Ok(())
    }

    /// How `argN` is read in the current group (all of a clause's probes in one group share it).
    fn arg_access(&self, n: u8, span: Span) -> Res<ArgAccess> {
        Ok(match &self.group {
            GroupKey::Begin | GroupKey::End => ArgAccess::Zero,
            GroupKey::Error => {
                if n < 6 {
                    ArgAccess::CtxU64 { index: n as u16 }
                } else {
                    ArgAccess::Zero
                }
            }
            GroupKey::SysEnter => match SYSCALL_ARG_REGS.get(n as usize) {
                Some(&r) => ArgAccess::RegsViaPtr {
                    ptr_index: 0,
                    reg_offset: r,
                },
                None => ArgAccess::Zero,
            },
            GroupKey::SysExit => {
                if n < 2 {
                    ArgAccess::CtxU64 { index: 1 }
                } else {
                    ArgAccess::Zero
                }
            }
            GroupKey::Tracepoint(..) => ArgAccess::Zero,
            GroupKey::Profile(..) => return self.err(span, "internal: profile args are computed"),
            GroupKey::Uprobe(..) => {
                let probe = self.probes.first();
                match probe.map(|p| &p.kind) {
                    Some(ProbeKind::Usdt { arg_specs, .. }) => match arg_specs.get(n as usize) {
                        Some(spec) => ArgAccess::Usdt(spec.clone()),
                        None => ArgAccess::Zero,
                    },
                    // DTrace: arg0 = offset of the returning instruction (the attach cookie of each
                    // return site, see probe-runtime's `user::attach`), arg1 = the return value.
                    Some(ProbeKind::Uprobe { ret: true, .. }) => match n {
                        0 => ArgAccess::AttachCookie,
                        1 => ArgAccess::Regs {
                            reg_offset: pt_regs::AX,
                        },
                        _ => ArgAccess::Zero,
                    },
                    _ => match CALL_ARG_REGS.get(n as usize) {
                        Some(&r) => ArgAccess::Regs { reg_offset: r },
                        None => ArgAccess::Zero,
                    },
                }
            }
        })
    }

    fn builtin_int(&mut self, b: Builtin, span: Span) -> Res<()> {
        let syscall = self.is_syscall();
        let a = &mut self.asm;
        match b {
            Builtin::Pid => {
                a.call(helper::GET_CURRENT_PID_TGID);
                a.alu_imm(Alu::Rsh, R0, 32);
            }
            Builtin::Tid => {
                a.call(helper::GET_CURRENT_PID_TGID);
                a.zext(R0, 32);
            }
            Builtin::Uid => {
                a.call(helper::GET_CURRENT_UID_GID);
                a.zext(R0, 32);
            }
            Builtin::Gid => {
                a.call(helper::GET_CURRENT_UID_GID);
                a.alu_imm(Alu::Rsh, R0, 32);
            }
            Builtin::Cpu => a.call(helper::GET_SMP_PROCESSOR_ID),
            Builtin::Timestamp => a.call(helper::KTIME_GET_NS),
            Builtin::Walltimestamp => {
                a.call(helper::KTIME_GET_NS);
                a.mov_imm(R1, self.b.opts.wall_offset_ns);
                a.alu(Alu::Add, R0, R1);
            }
            Builtin::Curthread => a.call(helper::GET_CURRENT_TASK),
            Builtin::Arg(n) => {
                if let GroupKey::Profile(..) = self.group {
                    return self.profile_arg(n);
                }
                return self.arg(n, span);
            }
            Builtin::Errno => {
                if self.group == GroupKey::SysExit {
                    // errno = -ret when ret is in [-4095, -1], else 0.
                    let zero = a.label();
                    let done = a.label();
                    a.ldx(Size::DW, R0, R6, 8);
                    a.jmp_imm(Cond::SGe, R0, 0, zero);
                    a.jmp_imm(Cond::SLt, R0, -4095, zero);
                    a.alu_imm(Alu::Neg, R0, 0);
                    a.ja(done);
                    a.bind(zero);
                    a.mov_imm(R0, 0);
                    a.bind(done);
                } else {
                    a.mov_imm(R0, 0);
                }
            }
            Builtin::Epid => a.mov_imm(R0, self.clause as i64 + 1),
            Builtin::Id => {
                if syscall {
                    a.ldx(Size::DW, R0, R10, SLOT_NR);
                } else {
                    a.mov_imm(R0, 0);
                }
            }
            Builtin::Ppid | Builtin::Vtimestamp if self.b.opts.task.is_some() => {
                let t = self.b.opts.task.expect("checked");
                let s = self.slot(span)?;
                // Reads `size` bytes at `R3` into slot `s` (zeroed first), leaving them in R0.
                let read = |a: &mut Asm, size: i64| {
                    a.st_imm(Size::DW, R10, s, 0);
                    a.mov(R1, R10);
                    a.alu_imm(Alu::Add, R1, s as i32);
                    a.mov_imm(R2, size);
                    a.call(helper::PROBE_READ_KERNEL);
                    a.ldx(Size::DW, R0, R10, s);
                };
                let a = &mut self.asm;
                a.call(helper::GET_CURRENT_TASK);
                if b == Builtin::Ppid {
                    a.mov(R3, R0);
                    a.alu_imm(Alu::Add, R3, t.real_parent as i32);
                    read(a, 8);
                    a.mov(R3, R0);
                    a.alu_imm(Alu::Add, R3, t.tgid as i32);
                    read(a, 4);
                    a.movsx(R0, R0, 32);
                } else {
                    a.mov(R3, R0);
                    a.alu_imm(Alu::Add, R3, t.sum_exec_runtime as i32);
                    read(a, 8);
                }
            }
            Builtin::Ppid | Builtin::Vtimestamp => return self.err(span, NEEDS_TASK_OFFSETS),
            Builtin::Caller | Builtin::Ucaller | Builtin::Stackdepth | Builtin::Ustackdepth => {
                return self.err(
                    span,
                    format!("built-in variable {b:?} is not supported by sightline yet")
                        .to_lowercase(),
                );
            }
            Builtin::Execname
            | Builtin::Probeprov
            | Builtin::Probemod
            | Builtin::Probefunc
            | Builtin::Probename => {
                return self.err(span, "internal: string built-in in integer context");
            }
        }
        Ok(())
    }

    /// profile probes: arg0 = kernel PC (0 in user mode), arg1 = user PC (0 in kernel mode), from
    /// the `struct pt_regs` at the start of `bpf_perf_event_data`.
    fn profile_arg(&mut self, n: u8) -> Res<()> {
        let a = &mut self.asm;
        if n > 1 {
            a.mov_imm(R0, 0);
            return Ok(());
        }
        let zero = a.label();
        let done = a.label();
        a.ldx(Size::DW, R1, R6, pt_regs::CS);
        a.alu_imm(Alu::And, R1, 3);
        // user mode when (cs & 3) == 3
        if n == 0 {
            a.jmp_imm(Cond::Eq, R1, 3, zero);
        } else {
            a.jmp_imm(Cond::Ne, R1, 3, zero);
        }
        a.ldx(Size::DW, R0, R6, pt_regs::IP);
        a.ja(done);
        a.bind(zero);
        a.mov_imm(R0, 0);
        a.bind(done);
        Ok(())
    }

    fn tp_field(&self, name: &str, span: Span) -> Res<probe_sema::TpField> {
        for p in &self.probes {
            if let Some(f) = p.args.field(name) {
                return Ok(f.clone());
            }
        }
        self.err(span, format!("no tracepoint field `{name}` at this probe"))
    }

    /// `args->name` at `syscall::NAME:entry`: the system call argument the field stands for (its
    /// position in tracefs `syscalls/sys_enter_NAME/format` after `__syscall_nr`), read from the
    /// saved user registers like `argN`. The raw `sys_enter` context is only `{regs, nr}`: reading
    /// the field's tracepoint-record offset from it makes `BPF_RAW_TRACEPOINT_OPEN` fail with
    /// EINVAL (the program's context accesses exceed the tracepoint's arguments). When the
    /// clause's system calls have the field at different positions, the position is chosen by the
    /// system call number at run time. Result in R0.
    fn syscall_field(&mut self, name: &str, span: Span) -> Res<()> {
        // (argument index, system call numbers having the field there)
        let mut at: Vec<(u8, Vec<u32>)> = Vec::new();
        for p in &self.probes {
            let (ProbeArgs::SyscallEntry { args, .. }, ProbeKind::Syscall { nr, .. }) =
                (&p.args, &p.kind)
            else {
                return self.err(
                    span,
                    format!("probe {} has no named arguments (args->)", p.full_name()),
                );
            };
            let Some(i) = args.iter().position(|f| f.name == name) else {
                return self.err(span, format!("{} has no argument `{name}`", p.full_name()));
            };
            let i = u8::try_from(i).ok().filter(|&i| i < 6);
            let Some(i) = i else {
                return self.err(
                    span,
                    format!(
                        "argument `{name}` of {} is not in a register",
                        p.full_name()
                    ),
                );
            };
            match at.iter_mut().find(|(j, _)| *j == i) {
                Some((_, nrs)) => nrs.push(*nr),
                None => at.push((i, vec![*nr])),
            }
        }
        let Some(((last, _), rest)) = at.split_last() else {
            return self.err(
                span,
                format!("no system call argument `{name}` at this probe"),
            );
        };
        let (last, rest) = (*last, rest.to_vec());
        let done = self.asm.label();
        for (i, nrs) in &rest {
            let next = self.asm.label();
            let here = self.asm.label();
            self.asm.ldx(Size::DW, R0, R10, SLOT_NR);
            for nr in nrs {
                self.asm.jmp_imm(Cond::Eq, R0, *nr as i32, here);
            }
            self.asm.ja(next);
            self.asm.bind(here);
            self.arg(*i, span)?;
            self.asm.ja(done);
            self.asm.bind(next);
        }
        self.arg(last, span)?;
        self.asm.bind(done);
        Ok(())
    }

    fn int(&mut self, e: &TExpr) -> Res<()> {
        match &e.kind {
            TExprKind::Int(v) => {
                let mut v = *v as i64;
                if let Type::Int { bytes, signed } = e.ty
                    && bytes < 8
                {
                    let sh = 64 - bytes as u32 * 8;
                    v = if signed {
                        (v << sh) >> sh
                    } else {
                        ((v as u64) << sh >> sh) as i64
                    };
                }
                self.asm.mov_imm(R0, v);
            }
            TExprKind::Str(_) => return self.err(e.span, "a string where an integer is expected"),
            TExprKind::Builtin(b) => self.builtin_int(*b, e.span)?,
            TExprKind::ProbeArg(n) => {
                if let GroupKey::Tracepoint(..) = self.group {
                    return self.err(
                        e.span,
                        "args[N] is not defined at tracepoints: use args->field",
                    );
                }
                if matches!(self.group, GroupKey::Profile(..)) {
                    self.profile_arg(*n)?;
                } else {
                    self.arg(*n, e.span)?;
                }
                self.normalize(R0, &e.ty);
            }
            TExprKind::TpField(name) if self.group == GroupKey::SysEnter => {
                self.syscall_field(name, e.span)?;
                self.normalize(R0, &e.ty);
            }
            TExprKind::TpField(name) => {
                let f = self.tp_field(name, e.span)?;
                if f.array.is_some() || f.data_loc_string {
                    return self.err(
                        e.span,
                        format!("tracepoint field `{name}` is not an integer"),
                    );
                }
                let size = Size::from_bytes(f.size);
                if f.signed && f.size < 8 {
                    self.asm.ldxsx(size, R0, R6, f.offset as i16);
                } else {
                    self.asm.ldx(size, R0, R6, f.offset as i16);
                }
                self.normalize(R0, &e.ty);
            }
            TExprKind::ArrayElem(base, i) => {
                let TExprKind::TpField(name) = &base.kind else {
                    return self.err(
                        e.span,
                        "indexing is supported on tracepoint array fields only",
                    );
                };
                let f = self.tp_field(name, e.span)?;
                let n = f.array.unwrap_or(1).max(1);
                let elem = f.size / n;
                if *i >= n {
                    return self.err(
                        e.span,
                        format!("index {i} is out of bounds of `{name}` ({n} elements)"),
                    );
                }
                let off = (f.offset + i * elem) as i16;
                if f.signed && elem < 8 {
                    self.asm.ldxsx(Size::from_bytes(elem), R0, R6, off);
                } else {
                    self.asm.ldx(Size::from_bytes(elem), R0, R6, off);
                }
                self.normalize(R0, &e.ty);
            }
            TExprKind::Var(va) => {
                if !e.ty.is_integral() && !matches!(e.ty, Type::Symbol(_)) {
                    return self.err(
                        e.span,
                        "a non-integer variable where an integer is expected",
                    );
                }
                self.var_read_int(va, e.span)?;
            }
            TExprKind::Unary(op, inner) => match op {
                UnaryOp::Not => {
                    self.int(inner)?;
                    let a = &mut self.asm;
                    let one = a.label();
                    let done = a.label();
                    a.jmp_imm(Cond::Eq, R0, 0, one);
                    a.mov_imm(R0, 0);
                    a.ja(done);
                    a.bind(one);
                    a.mov_imm(R0, 1);
                    a.bind(done);
                }
                UnaryOp::Neg => {
                    self.int(inner)?;
                    self.asm.alu_imm(Alu::Neg, R0, 0);
                    self.normalize(R0, &e.ty);
                }
                UnaryOp::BitNot => {
                    self.int(inner)?;
                    self.asm.alu_imm(Alu::Xor, R0, -1);
                    self.normalize(R0, &e.ty);
                }
                UnaryOp::Plus => self.int(inner)?,
                UnaryOp::Deref => {
                    self.int(inner)?;
                    self.deref(&e.ty, e.span)?;
                }
                UnaryOp::AddrOf => {
                    return self.err(e.span, "the & operator is not supported by sightline");
                }
            },
            TExprKind::Deref(inner) => {
                self.int(inner)?;
                self.deref(&e.ty, e.span)?;
            }
            TExprKind::Binary(op, l, r) => self.binary(*op, l, r, &e.ty, e.span)?,
            TExprKind::StrCmp(op, l, r) => {
                let ss = self.strsize();
                let a_off = self.scratch(ss, e.span)?;
                self.string(l, a_off)?;
                let b_off = self.scratch(ss, e.span)?;
                self.string(r, b_off)?;
                self.strcmp(a_off, b_off, ss);
                // R0 = -1/0/1; turn into the comparison's truth value.
                let c = match op {
                    BinaryOp::Eq => Cond::Eq,
                    BinaryOp::Ne => Cond::Ne,
                    BinaryOp::Lt => Cond::SLt,
                    BinaryOp::Le => Cond::SLe,
                    BinaryOp::Gt => Cond::SGt,
                    BinaryOp::Ge => Cond::SGe,
                    _ => return self.err(e.span, "internal: string operator"),
                };
                self.set_cond(c, R0, 0);
            }
            TExprKind::Ternary(c, t, f) => {
                self.int(c)?;
                let els = self.asm.label();
                let done = self.asm.label();
                self.asm.jmp_imm(Cond::Eq, R0, 0, els);
                self.int(t)?;
                self.asm.ja(done);
                self.asm.bind(els);
                self.int(f)?;
                self.asm.bind(done);
            }
            TExprKind::Cast(inner) => {
                if inner.ty.is_string() {
                    return self.err(e.span, "a string cannot be converted to an integer");
                }
                self.int(inner)?;
                self.normalize(R0, &e.ty);
            }
            TExprKind::Assign(..) => self.assign(e)?,
            TExprKind::IncDec {
                target,
                increment,
                prefix,
            } => {
                let old = self.slot(e.span)?;
                let new = self.slot(e.span)?;
                self.var_read_int(target, e.span)?;
                self.asm.stx(Size::DW, R10, old, R0);
                self.asm
                    .alu_imm(Alu::Add, R0, if *increment { 1 } else { -1 });
                self.normalize(R0, &e.ty);
                self.asm.stx(Size::DW, R10, new, R0);
                self.var_write_int(target, new, e.span)?;
                self.asm
                    .ldx(Size::DW, R0, R10, if *prefix { new } else { old });
            }
            TExprKind::Call(subr, args) => self.call_int(*subr, args, e)?,
            TExprKind::Stack { .. } => return self.err(e.span, "a stack is not an integer"),
            TExprKind::Symbol(_, inner) => self.int(inner)?,
        }
        Ok(())
    }

    /// `copyin(uaddr, size)` (DTrace guide, "Actions and Subroutines" > copyin): copies `size`
    /// bytes of user memory at `uaddr` into a scratch buffer of the clause and leaves the
    /// buffer's address in R0 (a plain integer, read back through `bpf_probe_read_kernel` like
    /// any pointer). `size` must be an integer constant in 1..=[`COPYIN_MAX`] bytes; the buffer
    /// keeps a NUL after the bytes so `stringof(copyin(..))` stops there. Each copyin() gets its
    /// own buffer, kept until the clause ends. A fault reports `invalid address` (ERROR probe).
    fn copyin(&mut self, args: &[TExpr], span: Span) -> Res<()> {
        let mut size_e = &args[1];
        while let TExprKind::Cast(inner) = &size_e.kind {
            size_e = inner;
        }
        let size = match size_e.kind {
            TExprKind::Int(v) if (1..=COPYIN_MAX as u64).contains(&v) => v as u32,
            TExprKind::Int(v) => {
                return self.err(span, format!("copyin() size {v} is out of range: sightline copies 1 to {COPYIN_MAX} bytes"));
            }
            _ => {
                return self.err(
                    span,
                    format!("copyin() size must be an integer constant (1 to {COPYIN_MAX} bytes)"),
                );
            }
        };
        let addr = self.slot(span)?;
        self.int(&args[0])?;
        self.asm.stx(Size::DW, R10, addr, R0);
        // size bytes, then at least one zero byte (the last 8-byte word is zeroed first).
        let alloc = (size + 8) & !7;
        let off = self.scratch(alloc, span)?;
        self.pinned = self.pinned.max(self.scratch_next);
        let a = &mut self.asm;
        a.st_imm(Size::DW, R7, (off + alloc - 8) as i16, 0);
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.mov_imm(R2, size as i64);
        a.ldx(Size::DW, R3, R10, addr);
        a.call(helper::PROBE_READ_USER);
        let ok = a.label();
        a.jmp_imm(Cond::SGe, R0, 0, ok);
        self.fault(Fault::BadAddr, Some(addr), span)?;
        self.asm.bind(ok);
        // The buffer's address as a scalar: a map-value pointer may not take part in arbitrary
        // arithmetic, so it is spilled and read back by a helper (which yields a plain integer).
        let spill = self.slot(span)?;
        let val = self.slot(span)?;
        let a = &mut self.asm;
        a.mov(R1, R7);
        a.alu_imm(Alu::Add, R1, off as i32);
        a.stx(Size::DW, R10, spill, R1);
        a.st_imm(Size::DW, R10, val, 0);
        a.mov(R1, R10);
        a.alu_imm(Alu::Add, R1, val as i32);
        a.mov_imm(R2, 8);
        a.mov(R3, R10);
        a.alu_imm(Alu::Add, R3, spill as i32);
        a.call(helper::PROBE_READ_KERNEL);
        a.ldx(Size::DW, R0, R10, val);
        Ok(())
    }

    /// R0 = *(ty *)R0 from kernel memory; a fault reports `invalid address`.
    fn deref(&mut self, ty: &Type, span: Span) -> Res<()> {
        let size = ty.as_int().map(|(b, _)| b as u32).unwrap_or(8);
        let addr = self.slot(span)?;
        let val = self.slot(span)?;
        let a = &mut self.asm;
        a.stx(Size::DW, R10, addr, R0);
        a.st_imm(Size::DW, R10, val, 0);
        a.mov(R1, R10);
        a.alu_imm(Alu::Add, R1, val as i32);
        a.mov_imm(R2, size as i64);
        a.mov(R3, R0);
        a.call(helper::PROBE_READ_KERNEL);
        let ok = a.label();
        a.jmp_imm(Cond::SGe, R0, 0, ok);
        self.fault(Fault::BadAddr, Some(addr), span)?;
        self.asm.bind(ok);
        self.asm.ldx(Size::DW, R0, R10, val);
        self.normalize(R0, ty);
        Ok(())
    }

    /// R0 = (R0 cond imm) ? 1 : 0.
    fn set_cond(&mut self, c: Cond, r: Reg, imm: i32) {
        let a = &mut self.asm;
        let t = a.label();
        let done = a.label();
        a.jmp_imm(c, r, imm, t);
        a.mov_imm(R0, 0);
        a.ja(done);
        a.bind(t);
        a.mov_imm(R0, 1);
        a.bind(done);
    }

    fn binary(&mut self, op: BinaryOp, l: &TExpr, r: &TExpr, ty: &Type, span: Span) -> Res<()> {
        match op {
            BinaryOp::LogAnd | BinaryOp::LogOr => {
                let a_done = self.asm.label();
                let done = self.asm.label();
                self.int(l)?;
                if op == BinaryOp::LogAnd {
                    self.asm.jmp_imm(Cond::Eq, R0, 0, a_done);
                } else {
                    self.asm.jmp_imm(Cond::Ne, R0, 0, a_done);
                }
                self.int(r)?;
                self.set_cond(Cond::Ne, R0, 0);
                self.asm.ja(done);
                self.asm.bind(a_done);
                self.asm
                    .mov_imm(R0, if op == BinaryOp::LogAnd { 0 } else { 1 });
                self.asm.bind(done);
                return Ok(());
            }
            BinaryOp::LogXor => {
                let s = self.slot(span)?;
                self.int(l)?;
                self.set_cond(Cond::Ne, R0, 0);
                self.asm.stx(Size::DW, R10, s, R0);
                self.int(r)?;
                self.set_cond(Cond::Ne, R0, 0);
                self.asm.ldx(Size::DW, R1, R10, s);
                self.asm.alu(Alu::Xor, R0, R1);
                return Ok(());
            }
            _ => {}
        }
        let s = self.slot(span)?;
        self.int(l)?;
        self.asm.stx(Size::DW, R10, s, R0);
        self.int(r)?;
        self.asm.mov(R1, R0);
        self.asm.ldx(Size::DW, R0, R10, s);
        // Signedness of the operation: comparisons use the (common) operand type.
        let opnd_signed = l.ty.as_int().is_some_and(|(_, s)| s);
        let res_signed = ty.as_int().is_some_and(|(_, s)| s);
        if op.is_comparison() {
            let c = match (op, opnd_signed) {
                (BinaryOp::Eq, _) => Cond::Eq,
                (BinaryOp::Ne, _) => Cond::Ne,
                (BinaryOp::Lt, true) => Cond::SLt,
                (BinaryOp::Lt, false) => Cond::Lt,
                (BinaryOp::Le, true) => Cond::SLe,
                (BinaryOp::Le, false) => Cond::Le,
                (BinaryOp::Gt, true) => Cond::SGt,
                (BinaryOp::Gt, false) => Cond::Gt,
                (BinaryOp::Ge, true) => Cond::SGe,
                (_, _) => Cond::Ge,
            };
            let a = &mut self.asm;
            let t = a.label();
            let done = a.label();
            a.jmp(c, R0, R1, t);
            a.mov_imm(R0, 0);
            a.ja(done);
            a.bind(t);
            a.mov_imm(R0, 1);
            a.bind(done);
            return Ok(());
        }
        let alu = match op {
            BinaryOp::Add => Alu::Add,
            BinaryOp::Sub => Alu::Sub,
            BinaryOp::Mul => Alu::Mul,
            BinaryOp::Div => {
                if res_signed {
                    Alu::SDiv
                } else {
                    Alu::Div
                }
            }
            BinaryOp::Mod => {
                if res_signed {
                    Alu::SMod
                } else {
                    Alu::Mod
                }
            }
            BinaryOp::Shl => Alu::Lsh,
            BinaryOp::Shr => {
                if res_signed {
                    Alu::Arsh
                } else {
                    Alu::Rsh
                }
            }
            BinaryOp::BitAnd => Alu::And,
            BinaryOp::BitOr => Alu::Or,
            BinaryOp::BitXor => Alu::Xor,
            _ => return self.err(span, format!("internal: operator {}", op.as_str())),
        };
        if matches!(op, BinaryOp::Div | BinaryOp::Mod) {
            let ok = self.asm.label();
            self.asm.jmp_imm(Cond::Ne, R1, 0, ok);
            self.fault(Fault::DivZero, None, span)?;
            self.asm.bind(ok);
        }
        self.asm.alu(alu, R0, R1);
        self.normalize(R0, ty);
        Ok(())
    }

    fn call_int(&mut self, subr: Subr, args: &[TExpr], e: &TExpr) -> Res<()> {
        match subr {
            Subr::Strlen => {
                // bpf_probe_read_kernel_str from our own scratch returns length + 1: no loop.
                let ss = self.strsize();
                let off = self.scratch(ss, e.span)?;
                self.string(&args[0], off)?;
                let tmp = self.scratch(ss, e.span)?;
                let a = &mut self.asm;
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, tmp as i32);
                a.mov_imm(R2, ss as i64);
                a.mov(R3, R7);
                a.alu_imm(Alu::Add, R3, off as i32);
                a.call(helper::PROBE_READ_KERNEL_STR);
                let ok = a.label();
                a.alu_imm(Alu::Sub, R0, 1);
                a.jmp_imm(Cond::SGe, R0, 0, ok);
                a.mov_imm(R0, 0);
                a.bind(ok);
            }
            Subr::Rand => {
                // DTrace's rand() is never negative (illumos dtrace.c DIF_SUBR_RAND: a value
                // modulo 1771875); the `int` of 32 random bits would be negative half the time.
                // Clearing the sign bit keeps 31 uniform bits: 0 ..= 2^31 - 1.
                self.asm.call(helper::GET_PRANDOM_U32);
                self.asm.alu_imm(Alu::And, R0, 0x7fff_ffff);
                self.normalize(R0, &e.ty);
            }
            Subr::Htons | Subr::Htonl | Subr::Htonll => {
                self.int(&args[0])?;
                let bits = match subr {
                    Subr::Htons => 16,
                    Subr::Htonl => 32,
                    _ => 64,
                };
                self.asm.to_be(R0, bits);
                self.normalize(R0, &e.ty);
            }
            Subr::Copyin => self.copyin(args, e.span)?,
            Subr::Speculation => self.speculation(e.span)?,
            Subr::Index | Subr::Rindex if args.len() >= 2 => {
                let kind = if subr == Subr::Index {
                    Search::Index
                } else {
                    Search::Rindex
                };
                let (_, w) = self.search(kind, args, e.span)?;
                self.asm.ldx(Size::DW, R0, R7, w as i16);
            }
            other => {
                return self.err(
                    e.span,
                    format!("subroutine {other:?} is not supported by sightline yet")
                        .to_lowercase(),
                );
            }
        }
        Ok(())
    }

    /// R0 = strcmp-like sign (-1, 0, 1) of the NUL-padded strings at scratch `a` and `b`.
    fn strcmp(&mut self, a_off: u32, b_off: u32, len: u32) {
        let a = &mut self.asm;
        let differ = a.label();
        let done = a.label();
        let mut i = 0;
        while i < len {
            a.ldx(Size::DW, R1, R7, (a_off + i) as i16);
            a.ldx(Size::DW, R2, R7, (b_off + i) as i16);
            a.jmp(Cond::Ne, R1, R2, differ);
            i += 8;
        }
        a.mov_imm(R0, 0);
        a.ja(done);
        a.bind(differ);
        // Byte order: big-endian words compare like the bytes in memory.
        a.to_be(R1, 64);
        a.to_be(R2, 64);
        let lt = a.label();
        a.jmp(Cond::Lt, R1, R2, lt);
        a.mov_imm(R0, 1);
        a.ja(done);
        a.bind(lt);
        a.mov_imm(R0, -1);
        a.bind(done);
    }

    // ---- string expressions (written NUL-padded at R7 + off, strsize bytes) ----

    fn string_lit(&mut self, s: &[u8], off: u32, cap: u32) {
        self.zero(off, cap);
        let n = s.len().min(cap as usize - 1);
        let mut i = 0;
        while i < n {
            let mut w = [0u8; 4];
            let take = (n - i).min(4);
            w[..take].copy_from_slice(&s[i..i + take]);
            self.asm.st_imm(
                Size::W,
                R7,
                (off as usize + i) as i16,
                i32::from_le_bytes(w),
            );
            i += 4;
        }
    }

    fn probe_string(&self, which: Builtin) -> Option<String> {
        let p = self.probes.first()?;
        let s = match which {
            Builtin::Probeprov => &p.provider,
            Builtin::Probemod => &p.module,
            Builtin::Probefunc => &p.function,
            Builtin::Probename => &p.name,
            _ => return None,
        };
        // Constant only when every probe of the clause in this program agrees.
        let all_same = self.probes.iter().all(|q| {
            let t = match which {
                Builtin::Probeprov => &q.provider,
                Builtin::Probemod => &q.module,
                Builtin::Probefunc => &q.function,
                _ => &q.name,
            };
            t == s
        });
        all_same.then(|| s.clone())
    }

    fn sysnames(&mut self) -> usize {
        if let Some(m) = self.sysnames_map {
            return m;
        }
        let m = self.b.add_map(MapSpec {
            name: "sl_sysnames".into(),
            kind: MapKind::Array,
            key_size: 4,
            value_size: SYSNAME_LEN,
            max_entries: 512,
            no_prealloc: false,
            role: MapRole::SyscallNames,
        });
        self.sysnames_map = Some(m);
        m
    }

    /// Writes a string whose capacity `cap` (< strsize) came from [`str_cap`]: only the forms
    /// `str_cap` sizes below strsize reach here.
    fn string_small(&mut self, e: &TExpr, off: u32, cap: u32) -> Res<()> {
        match &e.kind {
            TExprKind::Str(s) => self.string_lit(s.as_bytes(), off, cap),
            TExprKind::Builtin(Builtin::Execname) => {
                self.zero(off, cap);
                let a = &mut self.asm;
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, off as i32);
                a.mov_imm(R2, 16.min(cap as i64));
                a.call(helper::GET_CURRENT_COMM);
            }
            TExprKind::Ternary(c, t, f) => {
                self.int(c)?;
                let els = self.asm.label();
                let done = self.asm.label();
                self.asm.jmp_imm(Cond::Eq, R0, 0, els);
                self.string_small(t, off, cap)?;
                self.asm.ja(done);
                self.asm.bind(els);
                self.string_small(f, off, cap)?;
                self.asm.bind(done);
            }
            TExprKind::Cast(inner) => self.string_small(inner, off, cap)?,
            _ => return self.err(e.span, "internal: string key wider than its slot"),
        }
        Ok(())
    }

    fn string(&mut self, e: &TExpr, off: u32) -> Res<()> {
        let ss = self.strsize();
        match &e.kind {
            TExprKind::Str(s) => self.string_lit(s.as_bytes(), off, ss),
            TExprKind::Builtin(Builtin::Execname) => {
                self.zero(off, ss);
                let a = &mut self.asm;
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, off as i32);
                a.mov_imm(R2, 16.min(ss as i64));
                a.call(helper::GET_CURRENT_COMM);
            }
            TExprKind::Builtin(
                b @ (Builtin::Probeprov
                | Builtin::Probemod
                | Builtin::Probefunc
                | Builtin::Probename),
            ) => {
                if let Some(s) = self.probe_string(*b) {
                    self.string_lit(s.as_bytes(), off, ss);
                } else if *b == Builtin::Probefunc && self.is_syscall() {
                    // The name of the syscall number, from the table map.
                    self.zero(off, ss);
                    let m = self.sysnames();
                    let a = &mut self.asm;
                    let done = a.label();
                    a.ldx(Size::DW, R1, R10, SLOT_NR);
                    a.jmp_imm(Cond::Gt, R1, 511, done);
                    a.stx(Size::W, R10, SLOT_KEY, R1);
                    a.ld_map(R1, m);
                    a.mov(R2, R10);
                    a.alu_imm(Alu::Add, R2, SLOT_KEY as i32);
                    a.call(helper::MAP_LOOKUP_ELEM);
                    a.jmp_imm(Cond::Eq, R0, 0, done);
                    a.mov(R9, R0);
                    let n = SYSNAME_LEN.min(ss - 8);
                    self.copy(R7, off as i32, R9, 0, n);
                    self.asm.bind(done);
                } else {
                    return self.err(
                        e.span,
                        "this probe-name built-in differs between the clause's probes",
                    );
                }
            }
            TExprKind::TpField(name) if self.group == GroupKey::SysEnter => {
                return self.err(
                    e.span,
                    format!(
                        "system call argument `{name}` is not a string: use copyinstr(args->{name})"
                    ),
                );
            }
            TExprKind::TpField(name) => {
                let f = self.tp_field(name, e.span)?;
                self.zero(off, ss);
                let a = &mut self.asm;
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, off as i32);
                if f.data_loc_string {
                    // __data_loc: u32 = offset | len << 16, relative to the record.
                    a.ldx(Size::W, R3, R6, f.offset as i16);
                    a.alu_imm(Alu::And, R3, 0xffff);
                    a.alu(Alu::Add, R3, R6);
                    a.mov_imm(R2, ss as i64);
                } else if f.array.is_some() {
                    a.mov(R3, R6);
                    a.alu_imm(Alu::Add, R3, f.offset as i32);
                    a.mov_imm(R2, (f.size + 1).min(ss) as i64);
                } else {
                    // A `char *` field: the string it points to (kernel memory).
                    a.ldx(Size::DW, R3, R6, f.offset as i16);
                    a.mov_imm(R2, ss as i64);
                }
                a.call(helper::PROBE_READ_KERNEL_STR);
            }
            TExprKind::Var(va) => {
                self.var_ptr(va, false, e.span)?;
                let z = self.asm.label();
                let done = self.asm.label();
                self.asm.jmp_imm(Cond::Eq, R0, 0, z);
                self.asm.mov(R9, R0);
                self.copy(R7, off as i32, R9, 0, ss);
                self.asm.ja(done);
                self.asm.bind(z);
                self.zero(off, ss);
                self.asm.bind(done);
            }
            TExprKind::Ternary(c, t, f) => {
                self.int(c)?;
                let els = self.asm.label();
                let done = self.asm.label();
                self.asm.jmp_imm(Cond::Eq, R0, 0, els);
                self.string(t, off)?;
                self.asm.ja(done);
                self.asm.bind(els);
                self.string(f, off)?;
                self.asm.bind(done);
            }
            TExprKind::Cast(inner) if inner.ty.is_string() => self.string(inner, off)?,
            TExprKind::Assign(va, _) => {
                self.assign(e)?;
                let v = VarAccess {
                    var: va.var,
                    keys: va.keys.clone(),
                };
                let read = TExpr {
                    kind: TExprKind::Var(v),
                    ty: e.ty.clone(),
                    span: e.span,
                };
                self.string(&read, off)?;
            }
            TExprKind::Call(Subr::Copyinstr, args) => {
                let addr = self.slot(e.span)?;
                let len = self.slot(e.span)?;
                self.int(&args[0])?;
                self.asm.stx(Size::DW, R10, addr, R0);
                if let Some(m) = args.get(1) {
                    self.int(m)?;
                    self.asm.alu_imm(Alu::Add, R0, 1);
                } else {
                    self.asm.mov_imm(R0, ss as i64);
                }
                self.asm.stx(Size::DW, R10, len, R0);
                self.zero(off, ss);
                let a = &mut self.asm;
                a.ldx(Size::DW, R2, R10, len);
                let clamp = a.label();
                let ok_len = a.label();
                a.jmp_imm(Cond::Gt, R2, ss as i32, clamp);
                a.jmp_imm(Cond::Ge, R2, 1, ok_len);
                a.bind(clamp);
                a.mov_imm(R2, ss as i64);
                a.bind(ok_len);
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, off as i32);
                a.ldx(Size::DW, R3, R10, addr);
                a.call(helper::PROBE_READ_USER_STR);
                let ok = a.label();
                a.jmp_imm(Cond::SGe, R0, 0, ok);
                self.fault(Fault::BadAddr, Some(addr), e.span)?;
                self.asm.bind(ok);
            }
            TExprKind::Call(Subr::Stringof, args) | TExprKind::Call(Subr::Strjoin, args)
                if args.is_empty() =>
            {
                return self.err(e.span, "internal: subroutine without arguments");
            }
            TExprKind::Call(Subr::Stringof, args) => {
                let arg = &args[0];
                if arg.ty.is_string() {
                    self.string(arg, off)?;
                } else {
                    // A kernel `char *`: read the string it points to.
                    let addr = self.slot(e.span)?;
                    self.int(arg)?;
                    self.asm.stx(Size::DW, R10, addr, R0);
                    self.zero(off, ss);
                    let a = &mut self.asm;
                    a.mov(R1, R7);
                    a.alu_imm(Alu::Add, R1, off as i32);
                    a.mov_imm(R2, ss as i64);
                    a.ldx(Size::DW, R3, R10, addr);
                    a.call(helper::PROBE_READ_KERNEL_STR);
                    let ok = a.label();
                    a.jmp_imm(Cond::SGe, R0, 0, ok);
                    self.fault(Fault::BadAddr, Some(addr), e.span)?;
                    self.asm.bind(ok);
                }
            }
            TExprKind::Call(Subr::Strjoin, args) if args.len() == 2 => {
                // a, then b after a's NUL, truncated to strsize - 1 bytes. The copies are
                // bpf_probe_read_kernel_str from our own scratch memory: bounded, loop-free code
                // (a byte loop makes the verifier walk every length combination).
                let ta = self.scratch(ss, e.span)?;
                self.string(&args[0], ta)?;
                let tb = self.scratch(ss, e.span)?;
                self.string(&args[1], tb)?;
                let tmp = self.scratch(2 * ss, e.span)?;
                self.zero(tmp, 2 * ss);
                let a = &mut self.asm;
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, tmp as i32);
                a.mov_imm(R2, ss as i64);
                a.mov(R3, R7);
                a.alu_imm(Alu::Add, R3, ta as i32);
                a.call(helper::PROBE_READ_KERNEL_STR);
                // len(a) = r0 - 1, kept in [0, ss - 1] so the verifier sees the bound.
                let (ok1, ok2) = (a.label(), a.label());
                a.alu_imm(Alu::Sub, R0, 1);
                a.jmp_imm(Cond::SGe, R0, 0, ok1);
                a.mov_imm(R0, 0);
                a.bind(ok1);
                a.jmp_imm(Cond::Le, R0, (ss - 1) as i32, ok2);
                a.mov_imm(R0, (ss - 1) as i64);
                a.bind(ok2);
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, tmp as i32);
                a.alu(Alu::Add, R1, R0);
                a.mov_imm(R2, ss as i64);
                a.alu(Alu::Sub, R2, R0); // room left, NUL included: ss - len >= 1
                a.mov(R3, R7);
                a.alu_imm(Alu::Add, R3, tb as i32);
                a.call(helper::PROBE_READ_KERNEL_STR);
                self.copy(R7, off as i32, R7, tmp as i32, ss);
            }
            TExprKind::Call(Subr::Lltostr, args) if !args.is_empty() => {
                // Decimal digits written backwards into a 24-byte buffer, then copied out.
                let vslot = self.slot(e.span)?;
                self.int(&args[0])?;
                self.asm.stx(Size::DW, R10, vslot, R0);
                let tmp = self.scratch(24, e.span)?;
                self.zero(tmp, 24);
                self.zero(off, ss);
                let a = &mut self.asm;
                let (pos, digits_done) = (a.label(), a.label());
                a.ldx(Size::DW, R0, R10, vslot);
                a.jmp_imm(Cond::SGe, R0, 0, pos);
                a.alu_imm(Alu::Neg, R0, 0);
                a.bind(pos);
                // R0 = |v| (unsigned), R5 = index of the first digit.
                for k in 0..20i32 {
                    a.mov(R1, R0);
                    a.alu_imm(Alu::Mod, R1, 10);
                    a.alu_imm(Alu::Add, R1, b'0' as i32);
                    a.stx(Size::B, R7, (tmp as i32 + 22 - k) as i16, R1);
                    a.alu_imm(Alu::Div, R0, 10);
                    a.mov_imm(R5, (22 - k) as i64);
                    a.jmp_imm(Cond::Eq, R0, 0, digits_done);
                }
                a.bind(digits_done);
                let nonneg = a.label();
                a.ldx(Size::DW, R0, R10, vslot);
                a.jmp_imm(Cond::SGe, R0, 0, nonneg);
                a.alu_imm(Alu::Sub, R5, 1);
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, tmp as i32);
                a.alu(Alu::Add, R1, R5);
                a.st_imm(Size::B, R1, 0, b'-' as i32);
                a.bind(nonneg);
                // Copy tmp[R5..] (NUL-terminated at tmp[23]) to the destination.
                a.mov(R1, R7);
                a.alu_imm(Alu::Add, R1, off as i32);
                a.mov_imm(R2, 24.min(ss as i64));
                a.mov(R3, R7);
                a.alu_imm(Alu::Add, R3, tmp as i32);
                a.alu(Alu::Add, R3, R5);
                a.call(helper::PROBE_READ_KERNEL_STR);
            }
            TExprKind::Call(Subr::Basename, args) if args.len() == 1 => {
                self.basename_dirname(&args[0], false, off, e.span)?
            }
            TExprKind::Call(Subr::Dirname, args) if args.len() == 1 => {
                self.basename_dirname(&args[0], true, off, e.span)?
            }
            TExprKind::Call(Subr::Substr, args) if args.len() >= 2 => {
                self.substr(args, off, e.span)?
            }
            TExprKind::Call(Subr::Strchr, args) if args.len() == 2 => {
                self.strchr(args, false, off, e.span)?
            }
            TExprKind::Call(Subr::Strrchr, args) if args.len() == 2 => {
                self.strchr(args, true, off, e.span)?
            }
            TExprKind::Call(Subr::Strstr, args) if args.len() == 2 => {
                let (s, w) = self.search(Search::Strstr, args, e.span)?;
                self.suffix_at(s, w, off);
            }
            TExprKind::Call(subr, _) => {
                return self.err(
                    e.span,
                    format!("subroutine {subr:?} is not supported by sightline yet").to_lowercase(),
                );
            }
            _ => {
                return self.err(
                    e.span,
                    "this string expression is not supported by sightline yet",
                );
            }
        }
        Ok(())
    }
}

/// Where [`usdt_operand`] left a USDT argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UsdtOperand {
    /// The value is in `R0` (not yet truncated to the argument's size).
    Value,
    /// The argument's user-space address is in `R3`; the caller reads `spec.size` bytes there.
    Address,
}

/// Emits the code that locates a USDT argument, the context (`struct pt_regs *`) in `R6`, as
/// [`ArgSpec::eval`] specifies: a register is loaded from its `pt_regs` slot and shifted down for
/// the high-byte registers (`%ah` is byte 1 of `rax`); a memory operand's address is
/// `base + index * scale + disp`. Clobbers `R0`, `R1`, `R3`.
///
/// # Errors
/// The reason, for a static operand that [`ArgSpec::at_site`] did not make `%rip`-relative (its
/// address would need the module's load bias).
fn usdt_operand(a: &mut Asm, spec: &ArgSpec) -> Result<UsdtOperand, &'static str> {
    let slot = |r: UReg| r.pt_regs_offset() as i16;
    match &spec.loc {
        ArgLocation::Immediate(v) => {
            a.mov_imm(R0, *v);
            Ok(UsdtOperand::Value)
        }
        ArgLocation::Register { reg, byte } => {
            a.ldx(Size::DW, R0, R6, slot(*reg));
            if *byte > 0 {
                a.alu_imm(Alu::Rsh, R0, 8 * i32::from(*byte));
            }
            Ok(UsdtOperand::Value)
        }
        ArgLocation::Memory { base, index, disp } => {
            match base {
                Some(b) => a.ldx(Size::DW, R3, R6, slot(*b)),
                None => a.mov_imm(R3, 0),
            }
            if let Some((i, scale)) = index {
                a.ldx(Size::DW, R1, R6, slot(*i));
                a.alu_imm(Alu::Mul, R1, i32::from(*scale));
                a.alu(Alu::Add, R3, R1);
            }
            if *disp != 0 {
                a.mov_imm(R1, *disp);
                a.alu(Alu::Add, R3, R1);
            }
            Ok(UsdtOperand::Address)
        }
        ArgLocation::Static { .. } => Err("its address is not relative to the probe site"),
    }
}

#[cfg(test)]
mod tests {
    use probe_sema::argspec::VirtAddr;

    use super::*;

    /// Runs the straight-line code [`usdt_operand`] emits over a `struct pt_regs` (`regs`, by byte
    /// offset) and returns `R0` for a value or `R3` for an address, truncated and extended as the
    /// caller's `normalize` does for a value.
    fn run_operand(spec: &ArgSpec, regs: &dyn Fn(i16) -> u64) -> (UsdtOperand, u64) {
        let mut a = Asm::new();
        let kind = usdt_operand(&mut a, spec).expect("supported");
        let (insns, _) = a.finish();
        let mut r = [0u64; 11];
        let mut pc = 0;
        while pc < insns.len() {
            let i = insns[pc];
            let (d, s) = (i.dst as usize, i.src as usize);
            let imm = i.imm as i64 as u64;
            match i.code {
                0x79 => {
                    assert_eq!(s, 6, "loads only from the context");
                    r[d] = regs(i.off);
                }
                0xb7 => r[d] = imm,
                0x18 => {
                    r[d] = (i.imm as u32 as u64) | ((insns[pc + 1].imm as u32 as u64) << 32);
                    pc += 1;
                }
                0x77 => r[d] >>= imm,
                0x27 => r[d] = r[d].wrapping_mul(imm),
                0x0f => r[d] = r[d].wrapping_add(r[s]),
                c => panic!("unexpected opcode {c:#x} for {spec}"),
            }
            pc += 1;
        }
        match kind {
            UsdtOperand::Value => (
                kind,
                probe_sema::argspec::extend(r[0], spec.size, spec.signed) as u64,
            ),
            UsdtOperand::Address => (kind, r[3]),
        }
    }

    /// Issue 21: `%ah`-style high-byte registers (and every other operand form) are read as
    /// [`ArgSpec::eval`] specifies, from the typed spec (no text round-trip).
    #[test]
    fn usdt_operands_match_argspec_eval() {
        let reg_val = |r: UReg| 0x1111_0000_0000_0000u64 | (u64::from(r.dwarf()) << 16) | 0x9a80;
        let by_offset = |off: i16| {
            let all = [
                UReg::Rax,
                UReg::Rbx,
                UReg::Rcx,
                UReg::Rdx,
                UReg::Rsi,
                UReg::Rdi,
                UReg::Rbp,
                UReg::Rsp,
                UReg::R8,
                UReg::R12,
                UReg::Rip,
            ];
            let r = all
                .into_iter()
                .find(|r| r.pt_regs_offset() as i16 == off)
                .unwrap_or_else(|| panic!("no register at pt_regs offset {off}"));
            reg_val(r)
        };
        for text in [
            "1@%ah",
            "-1@%ah",
            "1@%bh",
            "-1@%ch",
            "1@%dh",
            "-4@%eax",
            "8@%rbx",
            "2@%r12w",
            "-1@%sil",
            "8@$42",
            "-4@$-5",
            "8@$0x123456789",
        ] {
            let spec = ArgSpec::parse(text).unwrap();
            let want = spec.eval(reg_val, |_, _| None, 0).unwrap() as u64;
            assert_eq!(
                run_operand(&spec, &by_offset),
                (UsdtOperand::Value, want),
                "{text}"
            );
        }
        for text in ["8@-16(%rbp)", "4@8(%rdi,%r12,4)", "4@(,%rcx,8)", "2@(%rsp)"] {
            let spec = ArgSpec::parse(text).unwrap();
            let seen = std::cell::Cell::new(None);
            spec.eval(
                reg_val,
                |addr, size| {
                    seen.set(Some((addr, size)));
                    Some(0)
                },
                0,
            );
            let (addr, size) = seen.get().expect("a memory read");
            assert_eq!(size, spec.size);
            assert_eq!(
                run_operand(&spec, &by_offset),
                (UsdtOperand::Address, addr),
                "{text}"
            );
        }
        // A static operand reads through %rip once made site-relative; not before.
        let mut spec = ArgSpec::parse("8@counter+8(%rip)").unwrap();
        spec.resolve(|_| Some(VirtAddr(0x4000))).unwrap();
        assert!(usdt_operand(&mut Asm::new(), &spec).is_err());
        let site = spec.at_site(VirtAddr(0x1000));
        let (kind, addr) = run_operand(&site, &by_offset);
        assert_eq!(kind, UsdtOperand::Address);
        assert_eq!(addr, reg_val(UReg::Rip).wrapping_add(0x3008));
    }

    /// The BPF side computes the llquantize bucket as "how many lower bounds are <= v"; that
    /// must equal probe-format's reference function for every value.
    #[test]
    fn llquantize_compare_chain_matches_probe_format() {
        for (factor, low, high, nsteps) in [
            (10u16, 0u16, 3u16, 10u16),
            (2, 0, 10, 2),
            (10, 1, 4, 20),
            (4, 2, 6, 8),
        ] {
            let bounds = llquantize_boundaries(factor, low, high, nsteps);
            assert_eq!(
                bounds.len() + 1,
                probe_format::agg::llquantize_nbuckets(factor, low, high, nsteps),
                "bucket count for {factor},{low},{high},{nsteps}"
            );
            let mut v: i64 = -5;
            while v < 200_000 {
                let ours = bounds.iter().filter(|&&b| v >= b).count();
                let theirs = probe_format::agg::llquantize_bucket(v, factor, low, high, nsteps);
                assert_eq!(ours, theirs, "v={v} for {factor},{low},{high},{nsteps}");
                v = if v < 1000 { v + 1 } else { v + 37 };
            }
        }
    }
}
