//! What the code generator hands the runtime: maps to create, programs to load and where to attach
//! them, and the layouts of ring-buffer records and aggregation entries (documented for users in
//! `docs/probe-internals.md`).

use probe_format::agg::AggFunc;
use probe_sema::argspec::ArgSpec;

use crate::insn::{Insn, MapRef};

/// Kind of a BPF map (the runtime maps these to `enum bpf_map_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    /// `BPF_MAP_TYPE_HASH`.
    Hash,
    /// `BPF_MAP_TYPE_ARRAY`.
    Array,
    /// `BPF_MAP_TYPE_PERCPU_HASH` (aggregations: one value slot per CPU, merged in user space).
    PercpuHash,
    /// `BPF_MAP_TYPE_PERCPU_ARRAY`.
    PercpuArray,
    /// `BPF_MAP_TYPE_RINGBUF` (`max_entries` = data size in bytes).
    RingBuf,
}

/// What a map holds (for the runtime's reader and for `docs/probe-internals.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapRole {
    /// The record ring buffer shared by all programs.
    Records,
    /// Per-CPU counters, 8 bytes each, indexed by [`Stat`].
    Stats,
    /// Scratch memory of one program, one `value_size` slot per CPU (key = CPU number): strings,
    /// keys and records are built here because the BPF stack has only 512 bytes.
    Scratch,
    /// All global scalar variables, one element at key 0, each at its [`GlobalVar::offset`].
    Globals,
    /// The associative arrays with one key size and one value size (their names, comma-separated):
    /// key = the variable's number (`u64`, its index in the checked program's variables) then its
    /// tuple keys, value = its value.
    Assoc(String),
    /// The thread-local variables `self->name` with one value size (their names,
    /// comma-separated), keyed by (thread id, the variable's number), two `u64`s.
    ThreadLocal(String),
    /// The aggregations (indexes of [`Layout::aggs`]) of one shape, sharing this map as DTrace's
    /// aggregations share one buffer: keyed ones of one key and value size in a `PERCPU_HASH`
    /// keyed by [`AggDesc::number`] (`u64`) then the keys; unkeyed ones of one value size in a
    /// `PERCPU_ARRAY` indexed by [`AggDesc::number`] (`u32`).
    Aggregations(Vec<usize>),
    /// Syscall-number → probe-function-name table (`probefunc` of syscall probes), 64 bytes each.
    SyscallNames,
    /// Speculation states: `nspec + 1` `u64` words (key = speculation id; 0 unused), each
    /// `generation << 8 | state` with state 0 = free, 1 = active ([`SPEC_ACTIVE`]).
    Speculations,
    /// `chill()`'s budget (DTrace's `cpu_dtrace_chillmark` and `cpu_dtrace_chilled`): one
    /// per-CPU element of two `u64`s, the start of this CPU's current `chill_interval` (ns,
    /// CLOCK_MONOTONIC) and the nanoseconds chilled in it.
    ChillBudget,
    /// `bufpolicy=ring`'s record slots ([`KernelRing`]): `ncpus * slots` elements of one slot
    /// each, keyed by `cpu * slots + slot`.
    RecordRing,
    /// `bufpolicy=ring`'s per-CPU head: one `u64`, the number of records this CPU wrote.
    RingHead,
}

/// The state byte of an active speculation in a [`MapRole::Speculations`] word.
pub const SPEC_ACTIVE: u64 = 1;

/// Per-CPU counters in the [`MapRole::Stats`] map, reported at exit the DTrace way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stat {
    /// Ring buffer full: a record was lost ("N drops on CPU k").
    RecordDrops = 0,
    /// A hash map (associative array, thread-local) was full ("N dynamic variable drops").
    DynvarDrops = 1,
    /// An aggregation map was full ("N aggregation drops on CPU k").
    AggDrops = 2,
    /// A clause faulted (division by zero, bad address); also reported through the ERROR record.
    Errors = 3,
    /// `speculation()` found every buffer in use ("N failed speculations (no speculative buffer
    /// available)").
    SpecUnavail = 4,
    /// `exit()` ran in a record that was sent (or dropped): [`EXIT_FLAG`] `|` the status as a
    /// `u32`, written after the record's ring-buffer output whatever its result, so the consumer
    /// stops even when the record itself was dropped (issue 22: "control never drops"). 0 until
    /// then; a CPU's last `exit()` wins.
    ExitStatus = 5,
    /// `bufpolicy=fill` in the kernel ([`KernelRing::fill`]): 1 once a record found this
    /// CPU's buffer full (DTrace marks the buffer filled; its consumer then stops tracing).
    BufferFull = 6,
}

/// Number of [`Stat`] slots.
pub const STAT_COUNT: u32 = 7;

/// The bit of a [`Stat::ExitStatus`] word that says `exit()` ran (its low 32 bits are the status).
pub const EXIT_FLAG: u64 = 1 << 32;

/// A map the runtime creates before loading programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapSpec {
    /// Short name (shown by the kernel in fdinfo; at most 15 characters kept).
    pub name: String,
    /// Map kind.
    pub kind: MapKind,
    /// Key size in bytes (0 for ring buffers).
    pub key_size: u32,
    /// Value size in bytes (per CPU for per-CPU maps; 0 for ring buffers).
    pub value_size: u32,
    /// Capacity in entries (bytes for ring buffers).
    pub max_entries: u32,
    /// Create with `BPF_F_NO_PREALLOC` (hash maps that may be large but are usually sparse).
    pub no_prealloc: bool,
    /// What the map holds.
    pub role: MapRole,
}

/// How a program is loaded and attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attach {
    /// Raw tracepoint `raw_syscalls:sys_enter` (context: `u64[2]` = `{struct pt_regs *, long nr}`).
    SysEnter,
    /// Raw tracepoint `raw_syscalls:sys_exit` (context: `u64[2]` = `{struct pt_regs *, long ret}`).
    SysExit,
    /// A tracefs tracepoint through a perf event (context: the record in its format-file layout).
    Tracepoint {
        /// tracefs category.
        category: String,
        /// Event name.
        event: String,
    },
    /// A cpu-clock perf event (context: `struct bpf_perf_event_data`).
    Profile {
        /// Period in ns.
        period_ns: u64,
        /// One event per online CPU (`profile-N`) or only CPU 0 (`tick-N`).
        every_cpu: bool,
    },
    /// `dtrace:::BEGIN`: run once by `BPF_PROG_TEST_RUN` before anything else is attached.
    Begin,
    /// `dtrace:::END`: run once by `BPF_PROG_TEST_RUN` after everything is detached.
    End,
    /// `dtrace:::ERROR`: run by `BPF_PROG_TEST_RUN` for each error record, context
    /// `u64[6]` = DTrace's `arg0..arg5` (arg1 = enabled probe id, arg4 = fault, arg5 = address).
    Error,
    /// A uprobe or USDT probe (context: `struct pt_regs`); attached by probe-user.
    Uprobe {
        /// ELF object path.
        path: String,
        /// File offset.
        offset: u64,
        /// Return probe?
        ret: bool,
        /// Restrict to one process.
        pid: Option<u32>,
        /// USDT semaphore file offset to increment while attached.
        semaphore: Option<u64>,
    },
    /// Many instruction or entry uprobes of one file served by one program through one
    /// uprobe_multi link (`BPF_TRACE_UPROBE_MULTI`, Linux 6.6): each site's attach cookie holds its
    /// probe (index into [`Layout::probes`]), which the program stores as the record header's
    /// probe key, and its display id. Attached by probe-user.
    UprobeMulti {
        /// ELF object path.
        path: String,
        /// Restrict to one process.
        pid: Option<u32>,
        /// (file offset, attach cookie) of each site, sorted by offset. The cookie's low 32 bits
        /// are the site's probe (an index into [`Layout::probes`], the record's probe key), the
        /// high 32 its display id (the `id` built-in; 0 without
        /// [`crate::lower::CodegenOptions::probe_id`]).
        sites: Vec<(u64, u64)>,
    },
}

/// Program types (the runtime maps these to `enum bpf_prog_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgKind {
    /// `BPF_PROG_TYPE_RAW_TRACEPOINT`.
    RawTracepoint,
    /// `BPF_PROG_TYPE_TRACEPOINT`.
    Tracepoint,
    /// `BPF_PROG_TYPE_PERF_EVENT`.
    PerfEvent,
    /// `BPF_PROG_TYPE_KPROBE` (uprobes).
    Kprobe,
}

/// One program to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgSpec {
    /// Name for the kernel (`sl_<attach>`).
    pub name: String,
    /// Program type.
    pub kind: ProgKind,
    /// Where it attaches.
    pub attach: Attach,
    /// Instructions; `lddw` map references carry the map index in `imm` until patched.
    pub insns: Vec<Insn>,
    /// Where the map references are.
    pub map_refs: Vec<MapRef>,
    /// Clause indexes (program order) compiled into this program.
    pub clauses: Vec<usize>,
    /// Probe ids (indexes into [`Layout::probes`]) this program serves.
    pub probes: Vec<usize>,
}

/// How a value sits in a record, an aggregation key, or a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer stored in 8 bytes (sign- or zero-extended), of C width `bytes`.
    Int {
        /// Width of the C type (1, 2, 4, 8).
        bytes: u8,
        /// Signed?
        signed: bool,
    },
    /// A NUL-padded string of `len` bytes.
    Str {
        /// Bytes reserved (the string's capacity).
        len: u32,
    },
    /// A kernel (`user == false`) or user stack: `frames` 8-byte addresses, zero-terminated. A
    /// user stack is preceded by the 8-byte process id (tgid) it was taken in, as DTrace's
    /// `ustack()` record, so the consumer resolves it in that process's mappings.
    Stack {
        /// User stack?
        user: bool,
        /// Frames reserved.
        frames: u32,
    },
    /// An address printed as a symbol of this kind; a user kind (`usym`, `ufunc`, `umod`,
    /// `uaddr`, `%A`) is followed by the 8-byte process id (tgid) it was taken in.
    Sym(probe_sema_kind::SymKind),
    /// `len` raw bytes (a struct value for `trace()`, `tracemem()`'s memory), printed as DTrace's
    /// hex dump.
    Bytes {
        /// Bytes recorded.
        len: u32,
    },
}

/// Re-export of the symbol kinds, kept local so `layout` reads on its own.
pub mod probe_sema_kind {
    pub use probe_sema::types::SymKind;
}

impl FieldKind {
    /// Bytes this field takes (a multiple of 8).
    pub fn size(&self) -> u32 {
        match self {
            FieldKind::Sym(k) if k.is_user() => 16,
            FieldKind::Int { .. } | FieldKind::Sym(_) => 8,
            FieldKind::Str { len } | FieldKind::Bytes { len } => (len + 7) & !7,
            FieldKind::Stack { user: true, frames } => 8 * (frames + 1),
            FieldKind::Stack { frames, .. } => 8 * frames,
        }
    }
}

/// A field of a record or key at a byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Offset from the start of the record (header included) or of the key.
    pub offset: u32,
    /// What is stored there.
    pub kind: FieldKind,
}

/// The layout of one kind of ring-buffer record: everything one clause recorded in one firing
/// (DTrace's EPID buffer), or one run-time error. Every record starts with a
/// [`RECORD_HEADER`]-byte header: `u32 record id` (index into [`Layout::records`]), `u32 cpu`,
/// `u64 probe key` (the syscall number in syscall programs, else 0), `u64 executed-actions mask`
/// (bit `i` set when `actions[i]` ran; actions under an `if` may not), `u64 timestamp`
/// (`bpf_ktime_get_ns`, CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordDesc {
    /// The clause (program order) that emits it.
    pub clause: usize,
    /// Index of the program (in [`Layout::programs`]) that emits it.
    pub program: usize,
    /// The data-recording actions in clause order (empty for a clause without any: DTrace's default
    /// action prints just the probe line).
    pub actions: Vec<ActionRec>,
    /// Total size including the header.
    pub size: u32,
}

/// Bytes of the record header.
pub const RECORD_HEADER: u32 = 32;

/// One action's part of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRec {
    /// What it does in user space.
    pub action: RecordAction,
    /// Its fields; offsets count from the start of the record (header included).
    pub fields: Vec<Field>,
}

/// The bit of a record's action mask (the `u64` at record offset 16) that says the action at
/// index `i` of its clause ran. The mask has 64 bits: actions from index 63 on share bit 63, so
/// in a clause of more than 63 actions those print together when any of them ran
/// (docs/probe-internals.md).
pub fn action_bit(i: usize) -> u64 {
    1u64 << i.min(63)
}

/// The action a record carries out in user space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordAction {
    /// `printf(fmt, args...)`: `fields` are the arguments.
    Printf {
        /// The format string.
        format: String,
    },
    /// `system(fmt, args...)` (destructive): the consumer formats the command as `printf` does
    /// and runs it with `/bin/sh -c`, its output in place; `fields` are the arguments.
    System {
        /// The format string.
        format: String,
    },
    /// `stop()` (destructive): the program sent SIGSTOP to the process whose pid is the one
    /// field; the consumer sends it SIGCONT when tracing ends.
    Stop,
    /// `trace(expr)`: one field.
    Trace,
    /// `setopt(name[, value])`: three fields, the name and value strings and a 1-byte flag
    /// (1: a value was given); the consumer sets the option when it reads the record.
    Setopt,
    /// `print(ptr)`: two fields, the address (8 bytes) and the pointee's first bytes; the
    /// consumer prints them member by member as `ty` says (`probe_format::print`).
    Print {
        /// The pointee's type as `print()` shows it.
        ty: Box<probe_format::print::PrintType>,
    },
    /// `stack()`/`ustack()` as a statement: one stack field.
    Stack,
    /// `exit(status)`: one int field.
    Exit,
    /// `printa([fmt,] @a, ...)`: no fields; the runtime prints the aggregations now.
    Printa {
        /// Optional format.
        format: Option<String>,
        /// Aggregation ids.
        aggs: Vec<usize>,
    },
    /// `clear(@a)`: zero the aggregation's values now.
    Clear {
        /// Aggregation id.
        agg: usize,
    },
    /// `trunc(@a[, n])`: keep the top `n` (or none).
    Trunc {
        /// Aggregation id.
        agg: usize,
        /// Entries to keep (`None`: all removed).
        keep: Option<i64>,
    },
    /// `normalize(@a, n)` / `denormalize(@a)`.
    Normalize {
        /// Aggregation id.
        agg: usize,
        /// Divisor (`None` = denormalize).
        factor: Option<i64>,
    },
    /// A run-time fault, in a record of its own: fields are `u64 fault kind` ([`Fault`]) and
    /// `u64 address`.
    Error,
    /// `speculate(id)`: fields `u64 id` and `u64 token`. The record is held by the consumer in
    /// speculation `id`'s buffer until a commit or discard with the same token; token 0 (the id
    /// was 0, or the speculation not active) drops the record silently, as DTrace does.
    Speculate,
    /// `commit(id)`: fields `u64 id` and `u64 token` (the speculation's state word when this
    /// commit made it free; 0 when it was not active: the commit silently fails).
    Commit,
    /// `discard(id)`: fields as [`RecordAction::Commit`].
    Discard,
}

/// Run-time faults a clause can report (DTrace's `DTRACEFLT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Fault {
    /// Invalid address (`DTRACEFLT_BADADDR`).
    BadAddr = 1,
    /// Illegal operation (`DTRACEFLT_ILLOP`): e.g. a speculation id above `nspec`.
    IllOp = 2,
    /// Division by zero (`DTRACEFLT_DIVZERO`).
    DivZero = 4,
    /// A subscript outside a fixed-size array (Oracle DTrace's `DTRACEFLT_BADINDEX`); the
    /// fault's value is the subscript.
    BadIndex = 8,
    /// A request for more scratch memory than there is (`DTRACEFLT_NOSCRATCH`): e.g. a computed
    /// `copyin()` size above `COPYIN_MAX`; the fault's value is the size asked for.
    NoScratch = 16,
}

impl Fault {
    /// The fault from its number.
    pub fn from_u64(v: u64) -> Option<Fault> {
        match v {
            1 => Some(Fault::BadAddr),
            2 => Some(Fault::IllOp),
            4 => Some(Fault::DivZero),
            8 => Some(Fault::BadIndex),
            16 => Some(Fault::NoScratch),
            _ => None,
        }
    }
    /// The fault's number as DTrace gives it to ERROR clauses in `arg4` (Oracle's
    /// include/dtrace/faults_defines.h `DTRACEFLT_*`: BADADDR 1, ILLOP 3, DIVZERO 4, NOSCRATCH 5,
    /// BADINDEX 11), which differs from the bit this enum records.
    pub fn dtrace_code(self) -> u64 {
        match self {
            Fault::BadAddr => 1,
            Fault::IllOp => 3,
            Fault::DivZero => 4,
            Fault::NoScratch => 5,
            Fault::BadIndex => 11,
        }
    }

    /// DTrace's wording ("invalid address (0x0)", "divide-by-zero").
    pub fn describe(self, addr: u64) -> String {
        match self {
            Fault::BadAddr => format!("invalid address (0x{addr:x})"),
            Fault::IllOp => "illegal operation".to_string(),
            Fault::DivZero => "divide-by-zero".to_string(),
            Fault::BadIndex => format!("index out of bounds ({addr})"),
            Fault::NoScratch => "out of scratch space".to_string(),
        }
    }
}

/// One aggregation: its function, key layout and value layout in its per-CPU map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggDesc {
    /// Name without `@` (empty for `@`).
    pub name: String,
    /// The function and its constant parameters (its value layout is probe-format's
    /// [`AggFunc::nwords`] 64-bit words).
    pub func: AggFunc,
    /// Key fields (an unkeyed aggregation has one 8-byte zero key).
    pub keys: Vec<Field>,
    /// Key size in bytes (its own keys; the map's key adds the 8-byte [`AggDesc::number`] in front
    /// for a keyed aggregation).
    pub key_size: u32,
    /// Index of its map in [`Layout::maps`], shared with the other aggregations of its shape
    /// ([`MapRole::Aggregations`]).
    pub map: usize,
    /// Its number in that map: the first 8 bytes (`u64`, little-endian) of its entries' keys when
    /// keyed, else its array index.
    pub number: u32,
}

impl AggDesc {
    /// The map key of the entry with this aggregation's `key` (its own key bytes, `key_size`
    /// long; ignored when unkeyed).
    pub fn map_key(&self, key: &[u8]) -> Vec<u8> {
        if self.keys.is_empty() {
            return self.number.to_le_bytes().to_vec();
        }
        let mut k = u64::from(self.number).to_le_bytes().to_vec();
        k.extend_from_slice(key);
        k
    }

    /// This aggregation's own key in a map key of its map, or `None` when the entry belongs to
    /// another aggregation sharing the map.
    pub fn own_key<'k>(&self, map_key: &'k [u8]) -> Option<&'k [u8]> {
        if self.keys.is_empty() {
            return (map_key == self.number.to_le_bytes()).then_some(&[][..]);
        }
        let (n, rest) = map_key.split_at_checked(8)?;
        (n == u64::from(self.number).to_le_bytes()).then_some(rest)
    }
}

/// A probe a program serves, as the runtime prints it in errors and `-l`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRef {
    /// `provider:module:function:name`.
    pub name: String,
}

/// A global scalar in the globals map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalVar {
    /// Name.
    pub name: String,
    /// Offset in the globals value.
    pub offset: u32,
    /// Its layout.
    pub kind: FieldKind,
}

/// Everything the code generator produced for one D program.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    /// Maps, indexed by the numbers in [`MapRef::map`].
    pub maps: Vec<MapSpec>,
    /// Programs to load.
    pub programs: Vec<ProgSpec>,
    /// Record kinds, indexed by the record id in each record's header.
    pub records: Vec<RecordDesc>,
    /// Aggregations, indexed by aggregation id.
    pub aggs: Vec<AggDesc>,
    /// Global scalar variables.
    pub globals: Vec<GlobalVar>,
    /// Probes served (for messages), indexed by probe id.
    pub probes: Vec<ProbeRef>,
    /// Index of the ring buffer in `maps`.
    pub ringbuf: usize,
    /// Index of the stats map in `maps`.
    pub stats: usize,
    /// `bufpolicy=ring`'s flight recorder in the kernel, when the options asked for it.
    pub kernel_ring: Option<KernelRing>,
}

/// `bufpolicy=ring` kept in the kernel (DTrace's ring policy): every record of a probe-fired
/// program (not BEGIN, END or ERROR, which run in the consumer) goes into its CPU's ring of
/// `slots` fixed-size slots instead of the ring buffer, overwriting the oldest, so it outlives
/// the consumer until the maps are closed. Slot `i` of CPU `c` is key `c * slots + i` of the
/// [`MapRole::RecordRing`] array; the per-CPU [`MapRole::RingHead`] word counts the records each
/// CPU wrote (the next slot is `head % slots`). A record never spans two slots: the slot size
/// is the program's largest record, so a ring of `bufsize` bytes holds `bufsize / slot_size`
/// records per CPU. The consumer reads each CPU's ring oldest to youngest at exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelRing {
    /// Index of the slot array in [`Layout::maps`].
    pub map: usize,
    /// Index of the head counters in [`Layout::maps`].
    pub head: usize,
    /// Bytes per slot (the largest record, a multiple of 8).
    pub slot_size: u32,
    /// Slots per CPU.
    pub slots: u32,
    /// DTrace's `fill` policy instead of `ring`: a CPU's slots are written once, in order;
    /// a record that finds no free slot is dropped (counted in [`Stat::RecordDrops`]) and
    /// sets [`Stat::BufferFull`], and END's records go into the slots too.
    pub fill: bool,
    /// Slots a probe-fired program may use per CPU: [`KernelRing::slots`] under `ring`;
    /// under `fill`, the slots minus END's reserve (one per END clause that records), so END
    /// always finds room (DTrace's "fill Policy and END Probes").
    pub probe_slots: u32,
}

/// How `argN` is read at a probe (`arg0..arg9` are `int64_t` in D): the probe kinds differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgAccess {
    /// Absent: reads as 0.
    Zero,
    /// `ctx[index]` as `u64` (raw tracepoints, BEGIN/END/ERROR test runs).
    CtxU64 {
        /// Index into the context's `u64` array.
        index: u16,
    },
    /// A `struct pt_regs` field through the pointer at `ctx[ptr_index]`, read with
    /// `bpf_probe_read_kernel` (syscall arguments at `raw_syscalls:sys_enter`).
    RegsViaPtr {
        /// Index of the `struct pt_regs *` in the context.
        ptr_index: u16,
        /// Byte offset of the register in `struct pt_regs` (x86-64: di 112, si 104, ...).
        reg_offset: i16,
    },
    /// A `struct pt_regs` field of the context itself (uprobes; profile: `bpf_perf_event_data`
    /// starts with the registers).
    Regs {
        /// Byte offset of the register.
        reg_offset: i16,
    },
    /// A USDT argument per its typed stapsdt spec, relative to the probe site
    /// ([`ArgSpec::at_site`]): registers are read from the uprobe's `struct pt_regs`, memory with
    /// `bpf_probe_read_user`.
    Usdt(ArgSpec),
    /// The attach cookie (`bpf_get_attach_cookie`): a pid `return` probe's `arg0`, the offset of the
    /// returning instruction, which the attacher gives each return site.
    AttachCookie,
}

/// x86-64 `struct pt_regs` byte offsets (arch/x86/include/asm/ptrace.h), for [`ArgAccess`]; the
/// general-purpose registers come from probe-sema's one table ([`probe_sema::argspec::Reg::pt_regs_offset`]).
pub mod pt_regs {
    use probe_sema::argspec::Reg;

    const fn of(r: Reg) -> i16 {
        r.pt_regs_offset() as i16
    }

    /// r15
    pub const R15: i16 = of(Reg::R15);
    /// r14
    pub const R14: i16 = of(Reg::R14);
    /// r13
    pub const R13: i16 = of(Reg::R13);
    /// r12
    pub const R12: i16 = of(Reg::R12);
    /// rbp
    pub const BP: i16 = of(Reg::Rbp);
    /// rbx
    pub const BX: i16 = of(Reg::Rbx);
    /// r11
    pub const R11: i16 = of(Reg::R11);
    /// r10 (4th syscall argument)
    pub const R10: i16 = of(Reg::R10);
    /// r9
    pub const R9: i16 = of(Reg::R9);
    /// r8
    pub const R8: i16 = of(Reg::R8);
    /// rax (return value)
    pub const AX: i16 = of(Reg::Rax);
    /// rcx
    pub const CX: i16 = of(Reg::Rcx);
    /// rdx
    pub const DX: i16 = of(Reg::Rdx);
    /// rsi
    pub const SI: i16 = of(Reg::Rsi);
    /// rdi
    pub const DI: i16 = of(Reg::Rdi);
    /// orig_rax (system call number)
    pub const ORIG_AX: i16 = 120;
    /// rip
    pub const IP: i16 = of(Reg::Rip);
    /// cs
    pub const CS: i16 = 136;
    /// eflags
    pub const FLAGS: i16 = 144;
    /// rsp
    pub const SP: i16 = of(Reg::Rsp);
    /// ss
    pub const SS: i16 = 160;
}

/// The x86-64 system-call argument registers in order (arg0..arg5), as offsets in `struct pt_regs`.
pub const SYSCALL_ARG_REGS: [i16; 6] = [
    pt_regs::DI,
    pt_regs::SI,
    pt_regs::DX,
    pt_regs::R10,
    pt_regs::R8,
    pt_regs::R9,
];

/// The x86-64 SysV function argument registers in order (uprobe arg0..arg5): probe-sema's
/// [`Reg::ARGS`](probe_sema::argspec::Reg::ARGS) as offsets in `struct pt_regs`.
pub const CALL_ARG_REGS: [i16; 6] = {
    let mut out = [0; 6];
    let mut i = 0;
    while i < 6 {
        out[i] = probe_sema::argspec::Reg::ARGS[i].pt_regs_offset() as i16;
        i += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use super::*;

    /// `struct pt_regs` of arch/x86/include/asm/ptrace.h: 21 8-byte fields in this order.
    #[test]
    fn pt_regs_offsets_follow_the_kernel_layout() {
        use pt_regs::*;
        let fields = [
            R15, R14, R13, R12, BP, BX, R11, R10, R9, R8, AX, CX, DX, SI, DI, ORIG_AX, IP, CS,
            FLAGS, SP, SS,
        ];
        for (i, off) in fields.into_iter().enumerate() {
            assert_eq!(off, 8 * i as i16, "field {i}");
        }
        assert_eq!(CALL_ARG_REGS, [DI, SI, DX, CX, R8, R9]);
    }
}
