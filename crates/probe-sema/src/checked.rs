//! The checked program: what the analysis hands the code generator.
//!
//! Everything is resolved and explicit so that lowering is a walk without lookups:
//!
//! - every expression is a [`TExpr`] with its [`Type`];
//! - C's implicit conversions (integer promotions, usual arithmetic conversions, conversion on
//!   assignment and on passing to aggregations) are explicit [`TExprKind::Cast`] nodes: the operands
//!   of a [`TExprKind::Binary`] arithmetic, bitwise or comparison operator already have the
//!   operator's operand type;
//! - variables and aggregations are indices ([`VarId`], [`AggId`]) into
//!   [`CheckedProgram::variables`] / [`CheckedProgram::aggregations`];
//! - built-in variables, subroutines and actions are enums; aggregating functions carry their
//!   constant parameters ([`AggFunc`]).
//!
//! **Integer representation.** A convenient invariant for the code generator, and the one these
//! types assume: an integer value of type `Int { bytes, signed }` is held in a 64-bit register
//! sign-extended (signed) or zero-extended (unsigned) from its width. A [`TExprKind::Cast`] to a
//! narrower or differently-signed type is then "truncate to the target width, re-extend by the
//! target's signedness"; a cast to a wider type of the same value is a no-op.

use crate::catalog::{ProbeDescPattern, ProbeInfo};
use crate::types::{SymKind, Type};
pub use probe_format::agg::AggFunc;
use probe_syntax::Span;
use probe_syntax::ast::{BinaryOp, UnaryOp};

/// Index of a variable in [`CheckedProgram::variables`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);

/// Index of an aggregation in [`CheckedProgram::aggregations`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AggId(pub u32);

/// A whole checked program.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckedProgram {
    /// Clauses in program order (several clauses on the same probe run in this order).
    pub clauses: Vec<CheckedClause>,
    /// All variables (global scalars, associative arrays, thread-locals, clause-locals).
    pub variables: Vec<Variable>,
    /// All aggregations.
    pub aggregations: Vec<Aggregation>,
    /// Options from `#pragma D option` and `SemaOptions::options` (`-x`), the latter winning.
    pub options: Options,
    /// Warnings (the program compiled anyway).
    pub warnings: Vec<probe_syntax::Diagnostic>,
}

impl CheckedProgram {
    /// The variable with this id.
    pub fn var(&self, id: VarId) -> &Variable {
        &self.variables[id.0 as usize]
    }

    /// The aggregation with this id.
    pub fn agg(&self, id: AggId) -> &Aggregation {
        &self.aggregations[id.0 as usize]
    }
}

/// One clause after analysis.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckedClause {
    /// Position of the clause in the program (0-based), as DTrace's "clause" in error messages.
    pub index: usize,
    /// The probes its descriptions matched (each probe once, in catalog order per description).
    pub probes: Vec<ProbeInfo>,
    /// The predicate (an integral-typed expression; the clause runs when it is non-zero), if any.
    pub predicate: Option<TExpr>,
    /// The body.
    pub body: Vec<TStmt>,
    /// The clause-local (`this->`) variables the clause uses.
    pub clause_locals: Vec<VarId>,
    /// The clause calls `strtok()`: its probes' programs keep DTrace's strtok state (the rest
    /// of the string being split) from the clause's first clause to its last in each firing.
    pub strtok: bool,
    /// The clause calls `alloca()` or `copyin()`, whose scratch memory is reached through
    /// pointers: loads through pointers are then checked against each clause's scratch memory
    /// (DTrace's "invalid address" outside what the clause allocated).
    pub scratch_memory: bool,
    /// The probe descriptions as written, after macro substitution (e.g. `syscall::read:entry`).
    pub descriptions: Vec<String>,
    /// The same descriptions as patterns (one per entry of `descriptions`): which fields the
    /// script wrote (an empty field was left out), as DTrace's `-x amin` check reads them.
    pub patterns: Vec<ProbeDescPattern>,
    /// Source span of the clause.
    pub span: Span,
}

/// Where a variable lives (DTrace guide, "Variables").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VarScope {
    /// A global scalar (`x`) or associative array (`a[k]`): one per program.
    Global,
    /// `self->x`: one per thread (keyed by tid); a dynamic variable.
    Thread,
    /// `this->x`: one per clause execution; lives only while the probe's clauses run.
    Clause,
}

/// A variable.
#[derive(Clone, Debug, PartialEq)]
pub struct Variable {
    /// Its id (its index in [`CheckedProgram::variables`]).
    pub id: VarId,
    /// Name without prefix (`x` for `self->x`).
    pub name: String,
    /// Global, thread-local or clause-local.
    pub scope: VarScope,
    /// Key types for an associative array (empty for a scalar).
    pub keys: Vec<Type>,
    /// Value type (fixed by the declaration or the first assignment).
    pub ty: Type,
    /// Where the type was fixed.
    pub span: Span,
}

impl Variable {
    /// True for associative arrays (global with keys).
    pub fn is_assoc(&self) -> bool {
        !self.keys.is_empty()
    }

    /// True for dynamic variables (associative array elements and thread-locals): DTrace stores
    /// them in the dynamic variable space, and assigning 0 deletes them.
    pub fn is_dynamic(&self) -> bool {
        self.is_assoc() || self.scope == VarScope::Thread
    }
}

/// An aggregation `@name` (DTrace guide, "Aggregations").
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregation {
    /// Its id (its index in [`CheckedProgram::aggregations`]).
    pub id: AggId,
    /// Name without `@` (empty for the anonymous `@`).
    pub name: String,
    /// The aggregating function and its constant parameters (the same at every use; the type is
    /// probe-format's, shared with the code generator and the printers).
    pub func: AggFunc,
    /// Key types (empty for an unkeyed aggregation).
    pub keys: Vec<Type>,
    /// Type of the value argument after conversion (`int64_t` for count; the argument's promoted
    /// type otherwise, converted to `int64_t` or `uint64_t`).
    pub arg_ty: Type,
    /// First use.
    pub span: Span,
}

/// The most bytes one `print()` records, whatever `printsize` says (a record's fields are
/// addressed with 16-bit offsets in BPF).
pub const PRINT_RECORD_MAX: u32 = 16384;

/// Options (DTrace guide, "Options and Tunables"); sizes in bytes, rates in nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// `quiet`: print only explicit output (no probe id/name lines).
    pub quiet: bool,
    /// `bufsize`: principal buffer size in bytes (the ring buffer, per CPU in DTrace).
    pub bufsize: Option<u64>,
    /// `aggsize`: aggregation buffer size in bytes.
    pub aggsize: Option<u64>,
    /// `dynvarsize`: dynamic variable space in bytes.
    pub dynvarsize: Option<u64>,
    /// `strsize`: bytes of a `string` value, NUL included (default 256).
    pub strsize: u32,
    /// `nspec`: number of speculation buffers.
    pub nspec: Option<u64>,
    /// `specsize`: speculation buffer size in bytes.
    pub specsize: Option<u64>,
    /// `scratchsize`: the bytes of `alloca()` memory one clause may take (DTrace's
    /// `DTRACEOPT_SCRATCHSIZE`); unset, sightline's own bound per allocation applies.
    pub scratchsize: Option<u64>,
    /// `printsize`: the most bytes of a value `print()` records and prints (Oracle DTrace's
    /// option; default 8192, a multiple of 8 up to 65536).
    pub printsize: u64,
    /// `stackframes`: frames of `stack()` without argument (default 20).
    pub stackframes: u32,
    /// `ustackframes`: frames of `ustack()` without argument (default 20).
    pub ustackframes: u32,
    /// `aggsortkey`: sort aggregations by key rather than value.
    pub aggsortkey: bool,
    /// `aggsortrev`: reverse the sort.
    pub aggsortrev: bool,
    /// `aggsortpos`: sort by the value of the aggregation at this position in `printa` (0-based).
    pub aggsortpos: Option<u32>,
    /// `aggsortkeypos`: sort by this key position.
    pub aggsortkeypos: Option<u32>,
    /// `switchrate`: how often the consumer reads the buffer, in ns.
    pub switchrate: Option<u64>,
    /// `aggrate`: how often aggregations are read, in ns.
    pub aggrate: Option<u64>,
    /// `statusrate`: how often status (drops) is checked, in ns.
    pub statusrate: Option<u64>,
    /// `destructive`: allow destructive actions.
    pub destructive: bool,
    /// `flowindent`, `rawbytes`, and any other recognized option, verbatim (`name`, value or "").
    pub other: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            quiet: false,
            bufsize: None,
            aggsize: None,
            dynvarsize: None,
            strsize: 256,
            nspec: None,
            specsize: None,
            scratchsize: None,
            printsize: u64::from(probe_format::print::DEFAULT_PRINTSIZE),
            stackframes: 20,
            ustackframes: 20,
            aggsortkey: false,
            aggsortrev: false,
            aggsortpos: None,
            aggsortkeypos: None,
            switchrate: None,
            aggrate: None,
            statusrate: None,
            destructive: false,
            other: Vec::new(),
        }
    }
}

/// A typed statement.
#[derive(Clone, Debug, PartialEq)]
pub enum TStmt {
    /// An expression evaluated for its effect (assignment, `++`); its value is discarded.
    Expr(TExpr),
    /// An action (records data or changes tracing state).
    Action(Action, Span),
    /// `@agg[keys] = func(args)`: update aggregation `agg`. `keys` are converted to the aggregation's
    /// key types; `value` is the value argument (converted to `arg_ty`), `None` for `count()`.
    /// `lquantize`/`llquantize` constants are in [`AggFunc`]; `incr` is the optional weight
    /// (`quantize(x, incr)`, `lquantize(x, b, l, s, incr)`), `int64_t`.
    Aggregate {
        /// Which aggregation.
        agg: AggId,
        /// Key values.
        keys: Vec<TExpr>,
        /// The value argument (absent for `count()`).
        value: Option<TExpr>,
        /// Optional weight for the quantizing functions.
        incr: Option<TExpr>,
        /// The statement.
        span: Span,
    },
    /// `if (cond) then else els`.
    If {
        /// Integral condition (non-zero = true).
        cond: TExpr,
        /// Then-branch.
        then: Vec<TStmt>,
        /// Else-branch (empty when absent).
        els: Vec<TStmt>,
    },
}

/// Actions (DTrace guide, "Actions and Subroutines").
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// `trace(expr)`: record one value (integer, string, stack, symbol).
    Trace(TExpr),
    /// `printf(format, args...)`: the format string (a literal) and its arguments, checked against
    /// the conversions.
    Printf {
        /// The format string, escapes decoded.
        format: String,
        /// Arguments in order.
        args: Vec<TExpr>,
    },
    /// `printa([format,] @a, @b, ...)`: print aggregations now (with a format: `%@d`-style).
    Printa {
        /// The optional format string.
        format: Option<String>,
        /// The aggregations.
        aggs: Vec<AggId>,
    },
    /// `exit(status)`: stop tracing after this probe; `status` (int) is the exit status.
    Exit(TExpr),
    /// `clear(@a)`: zero the values, keep the keys.
    Clear(AggId),
    /// `trunc(@a)` (remove all keys) or `trunc(@a, n)` (keep the top `n`; negative: bottom).
    Trunc {
        /// The aggregation.
        agg: AggId,
        /// Entries to keep.
        keep: Option<TExpr>,
    },
    /// `normalize(@a, n)`: divide printed values by `n`.
    Normalize {
        /// The aggregation.
        agg: AggId,
        /// The divisor (`int64_t`).
        factor: TExpr,
    },
    /// `denormalize(@a)`: undo `normalize`.
    Denormalize(AggId),
    /// `speculate(id)`: record the rest of this clause into speculation `id`.
    Speculate(TExpr),
    /// `commit(id)`: copy speculation `id` to the principal buffer.
    Commit(TExpr),
    /// `discard(id)`: drop speculation `id`.
    Discard(TExpr),
    /// `print(ptr)`: record the address and the first `size` bytes of `*ptr`, printed member by
    /// member as `ty` describes them (`probe_format::print`).
    Print {
        /// The pointer.
        addr: TExpr,
        /// The pointee's type as `print()` shows it.
        ty: Box<probe_format::print::PrintType>,
        /// Bytes recorded: the type's size, at most [`PRINT_RECORD_MAX`] (the consumer prints at
        /// most `printsize` of them, an option `setopt()` may change).
        size: u32,
    },
    /// `setopt(name[, value])`: the consumer sets a run-time option when it reads the record
    /// (Oracle DTrace's action; load-time options are refused then, with a message).
    Setopt {
        /// The option's name (a string).
        name: TExpr,
        /// Its value (a string), when given.
        value: Option<TExpr>,
    },
    /// `printm`, `tracemem(addr, size)`: record `size` bytes at `addr`.
    Tracemem {
        /// Address.
        addr: TExpr,
        /// Constant size in bytes.
        size: u32,
    },
    /// `system(format, args...)`: destructive; runs a shell command in the consumer.
    System {
        /// Format string.
        format: String,
        /// Arguments.
        args: Vec<TExpr>,
    },
    /// `raise(signal)`: destructive; sends a signal to the current thread.
    Raise(TExpr),
    /// `stop()`: destructive; stops the current process.
    Stop,
    /// `copyout(buf, addr, nbytes)`: destructive; writes `nbytes` bytes read at kernel address
    /// `buf` (a `copyin()` buffer, DTrace's scratch) to user address `addr` of the current
    /// process.
    Copyout {
        /// The buffer's (kernel) address.
        buf: TExpr,
        /// The user address written.
        addr: TExpr,
        /// Constant size in bytes.
        size: u32,
    },
    /// `copyoutstr(str, addr, maxlen)`: destructive; writes the string and its NUL, at most
    /// `maxlen` bytes, to user address `addr` of the current process.
    Copyoutstr {
        /// The string.
        s: TExpr,
        /// The user address written.
        addr: TExpr,
        /// Most bytes written (the NUL included).
        maxlen: TExpr,
    },
    /// `chill(nanoseconds)`: destructive; spins on this CPU for that long, within DTrace's
    /// budget of `chill_max` (500 ms) per `chill_interval` (1 s) per CPU.
    Chill(TExpr),
}

/// A typed expression.
#[derive(Clone, Debug, PartialEq)]
pub struct TExpr {
    /// What it computes.
    pub kind: TExprKind,
    /// Its type.
    pub ty: Type,
    /// Source range.
    pub span: Span,
}

/// Typed expression forms.
#[derive(Clone, Debug, PartialEq)]
pub enum TExprKind {
    /// Integer constant (bits; interpret by `ty`).
    Int(u64),
    /// String constant.
    Str(String),
    /// A built-in variable.
    Builtin(Builtin),
    /// `args[N]` at the clause's probes: the N-th argument, typed by the probe (syscall entry types
    /// from tracefs; USDT sizes; otherwise `int64_t`). When the clause's probes type it
    /// differently (`syscall:::entry`), `ty` is `int64_t` and each probe's own type (from its
    /// [`crate::ProbeArgs`]) should apply first: a 32-bit `int` argument is sign-extended from
    /// 32 bits, then converted to `ty` (AT_FDCWD is -100, not 4294967196).
    ProbeArg(u8),
    /// `args->field` on a tracepoint: the field's name; its offset, size and string-ness are in each
    /// probe's [`crate::ProbeArgs::field`] (they may differ between the clause's probes; the type
    /// does not).
    TpField(String),
    /// Read a variable (scalar: `keys` empty).
    Var(VarAccess),
    /// Prefix unary operator; operand already converted to `ty` (for `!` the operand keeps its type,
    /// result `int`).
    Unary(UnaryOp, Box<TExpr>),
    /// Binary operator. Arithmetic/bitwise: both operands have type `ty`. Shifts: the left operand
    /// has type `ty`, the right its own promoted type. Comparisons: both operands have the common
    /// type, result `int`. `&&`, `||`, `^^`: operands integral of any type, result `int`,
    /// short-circuit for `&&` and `||`.
    Binary(BinaryOp, Box<TExpr>, Box<TExpr>),
    /// String comparison (`==`, `!=`, `<`, `<=`, `>`, `>=` by `strcmp`), result `int`.
    StrCmp(BinaryOp, Box<TExpr>, Box<TExpr>),
    /// `c ? a : b`: `a` and `b` both converted to `ty`.
    Ternary(Box<TExpr>, Box<TExpr>, Box<TExpr>),
    /// Conversion of the operand to `ty` (written or implicit).
    Cast(Box<TExpr>),
    /// `target = value` (value converted to the target's type); the expression's value is the
    /// assigned value. Compound assignments are lowered: `x += e` is `x = (T)(x + e)` (the target's
    /// keys are evaluated twice; they have no side effects).
    Assign(VarAccess, Box<TExpr>),
    /// `++x`, `x++`, `--x`, `x--` on a variable of integral type.
    IncDec {
        /// The variable.
        target: VarAccess,
        /// `++` (true) or `--`.
        increment: bool,
        /// Prefix: value is the new value; postfix: the old value.
        prefix: bool,
    },
    /// A subroutine call (returns a value).
    Call(Subr, Vec<TExpr>),
    /// `stack(n)` / `ustack(n)` as a value (key or `trace` argument): frames to record.
    Stack {
        /// User stack?
        user: bool,
        /// Frames (from the argument or the `stackframes`/`ustackframes` option).
        frames: u32,
    },
    /// `sym(a)`, `func(a)`, `mod(a)`, `usym(a)`, `ufunc(a)`, `umod(a)`, `uaddr(a)`: the address
    /// (`uint64_t`) tagged for symbolized printing (type [`Type::Symbol`]).
    Symbol(SymKind, Box<TExpr>),
    /// `*ptr`: read `ty`'s size from memory at the address (kernel address; a fault fires ERROR).
    Deref(Box<TExpr>),
    /// `base[i]` on a [`Type::Array`] value with a constant index.
    ArrayElem(Box<TExpr>, u32),
    /// The address (`uint64_t`) of a variable's storage, for reading members of a variable of
    /// struct or union type ([`Type::Struct`]) through [`TExprKind::Deref`]; a dynamic variable
    /// that does not exist reads as zeroes (the address of a zeroed buffer).
    VarAddr(VarAccess),
    /// `var.member = value` (nested members and constant array elements included): stores
    /// `value` (already converted to `ty`, an integer or pointer type) at byte `offset` of the
    /// struct-typed variable `target`, creating a dynamic variable. Its value is `value`.
    StoreMember {
        /// The variable of struct type.
        target: VarAccess,
        /// Byte offset of the member in the struct.
        offset: u32,
        /// The value stored.
        value: Box<TExpr>,
    },
    /// `*p = value`, `p->m = value`, `p->arr[i] = value` through a pointer into scratch memory
    /// (`alloca()`, `copyin()`): stores `value` (converted to `ty`, an integer or pointer type)
    /// at the address `addr` (a `uint64_t`). An address outside the clause's scratch memory is
    /// DTrace's "invalid address" fault. Its value is `value`.
    StorePtr {
        /// The address written.
        addr: Box<TExpr>,
        /// The value stored.
        value: Box<TExpr>,
    },
    /// `a[i]` of a fixed-size array variable (`int a[5];`) or of an array member of a struct
    /// variable (`v.arr[i]`): the element `index` (a `uint64_t`), checked against `len` at run
    /// time (DTrace's "index out of bounds" fault when outside).
    ElemLoad {
        /// The variable holding the array.
        target: VarAccess,
        /// The subscript.
        index: Box<TExpr>,
        /// Number of elements.
        len: u32,
        /// Byte offset of the array in the variable: 0 for an array variable, the member's
        /// offset for `v.arr[i]`.
        base: u32,
    },
    /// `a[i] = value` of a fixed-size array variable: stores `value` (converted to the element
    /// type `ty`) at element `index`, checked as [`TExprKind::ElemLoad`]; its value is `value`.
    ElemStore {
        /// The variable holding the array.
        target: VarAccess,
        /// The subscript.
        index: Box<TExpr>,
        /// Number of elements.
        len: u32,
        /// Byte offset of the array in the variable (as [`TExprKind::ElemLoad`]'s).
        base: u32,
        /// The value stored.
        value: Box<TExpr>,
    },
    /// `var = other` for variables of one struct or union type: copies `ty`'s size in bytes from
    /// the address `src` (a `uint64_t`, e.g. a [`TExprKind::VarAddr`]) into `target`.
    CopyStruct {
        /// The variable written.
        target: VarAccess,
        /// Address of the bytes copied.
        src: Box<TExpr>,
    },
}

/// A variable access: which variable and, for associative arrays, the key values (converted to the
/// variable's key types).
#[derive(Clone, Debug, PartialEq)]
pub struct VarAccess {
    /// The variable.
    pub var: VarId,
    /// Keys (empty for scalars).
    pub keys: Vec<TExpr>,
}

/// Built-in variables (DTrace guide, "Variables" → "Built-in Variables") with their D types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `pid`: process id (tgid), `pid_t`.
    Pid,
    /// `tid`: thread id (Linux tid), `id_t` (int).
    Tid,
    /// `ppid`: parent process id, `pid_t`.
    Ppid,
    /// `uid`: real user id, `uid_t` (uint32).
    Uid,
    /// `gid`: real group id, `gid_t` (uint32).
    Gid,
    /// `execname`: the current task's comm, `string`.
    Execname,
    /// `cpu`: current CPU, `processorid_t` (int).
    Cpu,
    /// `timestamp`: monotonic nanoseconds, `uint64_t`.
    Timestamp,
    /// `vtimestamp`: nanoseconds the current thread has been on CPU, `uint64_t`.
    Vtimestamp,
    /// `walltimestamp`: nanoseconds since the Unix epoch, `int64_t`.
    Walltimestamp,
    /// `probeprov`: provider of the firing probe, `string`.
    Probeprov,
    /// `probemod`: module, `string`.
    Probemod,
    /// `probefunc`: function, `string`.
    Probefunc,
    /// `probename`: name, `string`.
    Probename,
    /// `arg0`..`arg9`: raw probe arguments, `int64_t`.
    Arg(u8),
    /// `errno`: the error of the last system call of this thread (set at syscall return), `int`.
    Errno,
    /// `curthread`: address of the current `task_struct`, a pointer.
    Curthread,
    /// `epid`: enabled probe id (here: the clause's probe index), `uint32`.
    Epid,
    /// `id`: probe id, `uint32`.
    Id,
    /// `caller`: kernel return address of the current function, `uintptr_t`.
    Caller,
    /// `ucaller`: user return address, `uint64_t`.
    Ucaller,
    /// `stackdepth`: kernel stack depth, `uint32`.
    Stackdepth,
    /// `ustackdepth`: user stack depth, `uint32`.
    Ustackdepth,
}

impl Builtin {
    /// The built-in named `name` (`arg0`..`arg9` included).
    pub fn from_name(name: &str) -> Option<Builtin> {
        Some(match name {
            "pid" => Builtin::Pid,
            "tid" => Builtin::Tid,
            "ppid" => Builtin::Ppid,
            "uid" => Builtin::Uid,
            "gid" => Builtin::Gid,
            "execname" => Builtin::Execname,
            "cpu" => Builtin::Cpu,
            "timestamp" => Builtin::Timestamp,
            "vtimestamp" => Builtin::Vtimestamp,
            "walltimestamp" => Builtin::Walltimestamp,
            "probeprov" => Builtin::Probeprov,
            "probemod" => Builtin::Probemod,
            "probefunc" => Builtin::Probefunc,
            "probename" => Builtin::Probename,
            "errno" => Builtin::Errno,
            "curthread" => Builtin::Curthread,
            "epid" => Builtin::Epid,
            "id" => Builtin::Id,
            "caller" => Builtin::Caller,
            "ucaller" => Builtin::Ucaller,
            "stackdepth" => Builtin::Stackdepth,
            "ustackdepth" => Builtin::Ustackdepth,
            _ => {
                let n = name.strip_prefix("arg")?;
                if n.len() == 1 {
                    let d = n.parse::<u8>().ok()?;
                    return Some(Builtin::Arg(d));
                }
                return None;
            }
        })
    }

    /// The D type of the built-in.
    pub fn ty(self) -> Type {
        match self {
            Builtin::Pid | Builtin::Tid | Builtin::Ppid | Builtin::Cpu | Builtin::Errno => {
                Type::INT
            }
            Builtin::Uid
            | Builtin::Gid
            | Builtin::Epid
            | Builtin::Id
            | Builtin::Stackdepth
            | Builtin::Ustackdepth => Type::UINT,
            Builtin::Execname
            | Builtin::Probeprov
            | Builtin::Probemod
            | Builtin::Probefunc
            | Builtin::Probename => Type::String,
            Builtin::Timestamp | Builtin::Vtimestamp | Builtin::Caller | Builtin::Ucaller => {
                Type::U64
            }
            Builtin::Walltimestamp | Builtin::Arg(_) => Type::I64,
            Builtin::Curthread => Type::Ptr(Box::new(Type::Void)),
        }
    }
}

/// Subroutines: calls that return a value (DTrace guide, "Actions and Subroutines" → "Subroutines").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subr {
    /// `copyinstr(uaddr [, maxlen])`: user string → `string`.
    Copyinstr,
    /// `copyin(uaddr, size)`: user memory → pointer to a scratch copy (`void *`).
    Copyin,
    /// `strlen(s)` → `size_t`.
    Strlen,
    /// `strjoin(a, b)` → `string`.
    Strjoin,
    /// `stringof(x)` → `string` (also the `stringof` operator): a `char *`/array read as a string.
    Stringof,
    /// `basename(s)` → `string`.
    Basename,
    /// `dirname(s)` → `string`.
    Dirname,
    /// `substr(s, i [, len])` → `string`.
    Substr,
    /// `strchr(s, c)` → `string`: `s` from the first `c` on ("" when `c` does not occur).
    Strchr,
    /// `strrchr(s, c)` → `string`: `s` from the last `c` on ("" when `c` does not occur).
    Strrchr,
    /// `strstr(s, t)` → `string`: `s` from the first occurrence of `t` on ("" when none).
    Strstr,
    /// `index(s, t [, start])` → `int`: position of the first `t` in `s` at or after `start`, -1 if none.
    Index,
    /// `rindex(s, t [, start])` → `int`: position of the last `t` in `s` at or before `start`, -1 if none.
    Rindex,
    /// `lltostr(i)` → `string`.
    Lltostr,
    /// `rand()` → `int`.
    Rand,
    /// `progenyof(pid)` → `int` (1 if the current process descends from `pid`).
    Progenyof,
    /// `speculation()` → `int` (a speculation id, 0 if none free).
    Speculation,
    /// `htons(x)`, `ntohs(x)` → `uint16_t`.
    Htons,
    /// `htonl(x)`, `ntohl(x)` → `uint32_t`.
    Htonl,
    /// `htonll(x)`, `ntohll(x)` → `uint64_t`.
    Htonll,
    /// `strtoll(s [, base])`: the integer at the start of `s` in `base` (2 to 36; a constant
    /// [`TExprKind::Int`] second argument, 10 when not given) → `int64_t`. Leading white space
    /// and one sign are skipped, base 16 also skips a `0x` prefix; the first character that is
    /// not a digit of the base ends the number (DTrace's `dtrace_strtoll`).
    Strtoll,
    /// `toupper(s)`: `s` with ASCII `a`-`z` made upper case → `string`.
    Toupper,
    /// `tolower(s)`: `s` with ASCII `A`-`Z` made lower case → `string`.
    Tolower,
    /// `uregs[index]`: the current thread's saved user register `index` (an `int64_t`, DTrace's
    /// `R_*` numbering: `consts::UREGS`, mapped to `struct pt_regs` by `consts::uregs_word`)
    /// → `uint64_t`. An index naming no saved register faults with "illegal operation".
    Uregs,
    /// `inet_ntoa(ipaddr_t *addr)`: the IPv4 address at `addr` (4 bytes, network order, kernel
    /// or scratch memory) in dotted-quad notation → `string`.
    InetNtoa,
    /// `inet_ntoa6(struct in6_addr *addr [, strict])`: the IPv6 address at `addr` (16 bytes) in
    /// RFC 5952 notation: lower-case hex groups without leading zeros, the longest run of two or
    /// more zero groups (the first of equal ones) as `::`; an IPv4-mapped (`::ffff:a.b.c.d`) or
    /// IPv4-compatible (`::a.b.c.d`, not `::` or `::1`) address prints as the dotted quad, as
    /// Oracle DTrace prints it, unless the optional constant `strict` is non-zero: then with its
    /// `::ffff:` or `::` prefix → `string`. Its arguments: the address, then `strict` as an `int`
    /// constant 0 or 1.
    InetNtoa6,
    /// `inet_ntop(af, addr)`: `inet_ntoa` for `af` = `AF_INET` (2), strict `inet_ntoa6` for
    /// `AF_INET6` (10, Linux's value); another family faults with "illegal operation" →
    /// `string`.
    InetNtop,
    /// `alloca(size)`: `size` zeroed bytes of the clause's scratch memory (a constant up to
    /// 1024, or a computed size checked when the probe fires) → `void *`, valid until the clause
    /// ends.
    Alloca,
    /// `strtok(str, delims)` → `string`: the next token of `str`, a run of characters none of
    /// which is in `delims`, after skipping characters that are; "" (DTrace's NULL) when only
    /// delimiters remain. A first argument that is the constant `NULL` ([`TExprKind::Int`] 0)
    /// continues the string of the previous call in the same probe firing on this CPU
    /// (DTrace's per-CPU strtok state); with no previous call it faults with "invalid address".
    Strtok,
    /// `bcopy(src, dest, size)` (a statement): copies `size` bytes (a constant, 1 to 1024) from
    /// kernel or scratch memory at `src` (or from a `string`'s bytes) to `dest`, which must lie in memory `alloca()` or
    /// `copyin()` gave this clause ("invalid address" otherwise, as DTrace) → `void`.
    Bcopy,
    /// `copyinto(uaddr, size, dest)` (a statement): copies `size` bytes (a constant, 0 to 1024)
    /// from user memory at `uaddr` (the current process's) to `dest`, which must lie in memory
    /// `alloca()` or `copyin()` gave this clause; a bad user address or a `dest` outside that
    /// memory faults with "invalid address" (Oracle DTrace's `copyinto`) → `void`.
    Copyinto,
    /// `s[i]` of a `string` `s` (Oracle DTrace: strings are `char` arrays): the character at
    /// index `i` (`uint64_t`) → `char`; an index at or past `strsize` faults with "invalid
    /// address".
    StrChar,
}
