//! In-tracee system-call buffering: the mechanism that lets hot, read-only system calls be recorded
//! without a ptrace stop (rr's "syscallbuf", done here without a preload library).
//!
//! # How it works
//! A trapped call costs a context-switch round trip to the tracer (two, with its exit stop); for
//! `find /usr` that is 100,000 `newfstatat`/`getdents64` calls. So the tracer, at the first trapped
//! call of a *bufferable* system call ([`BUFFERED`]) from a libc wrapper whose `syscall` instruction is
//! followed by the usual `cmp $-4096, %rax` (or `%eax`), **patches that site**: the 7–8 bytes become a
//! `jmp` to a per-site stub in a region the tracer maps into the tracee at the fixed address [`BASE`]
//! (so the seccomp filter can recognize it). The stub calls the common handler ([`code`]), which:
//!
//! - in *record* mode performs the call itself from an instruction the seccomp filter lets through
//!   ([`untraced_ip`]) and appends `{nr, args, result, bytes the kernel wrote}` to the buffer;
//! - in *replay* mode takes the next buffered record, checks the number and arguments, copies the
//!   recorded bytes to the output buffer and returns the recorded result, with no system call;
//! - when the buffer is full (record), exhausted or the call does not match (replay), or the call is
//!   not bufferable after all, makes the call from a second, trapped instruction ([`traced_ip`]) so
//!   the tracer handles it like any other. The tracer can answer such a call with [`RETRY`] (the call
//!   skipped) to make the handler start over, after it has refilled the buffer.
//!
//! The tracer drains the buffer at every stop it records an event at, so buffered calls keep their
//! place among the process's other events.
//!
//! # Memory layout at [`BASE`] ([`MAP_LEN`] bytes, one anonymous private mapping, read/write/execute)
//! - `[0, CODE_LEN)`: the handler ([`code`]) at 0, per-site stubs from [`STUBS_OFF`], [`STUB_LEN`] each.
//! - `[BUF_OFF, MAP_LEN)`: the buffer: a 64-byte header, then records.
//!
//! Header (little-endian): `+0` u32 magic [`MAGIC`]; `+4` u32 mode (1 record, 2 replay, other: off);
//! `+8` u64 bytes of records; `+16` u64 replay: read position, record: bytes the tracer has
//! already drained (the handler never reads it in record mode); `+24` u64 capacity; `+32` u64 records
//! appended or consumed; `+40` u64 offset of the next free stub slot.
//!
//! Record: `+0` u64 number, `+8` six u64 argument registers, `+56` i64 result, `+64` u64 length,
//! `+72` the bytes, padded to 8 ([`Buffered`]).
//!
//! Source: rr's syscall buffering (O'Callahan et al., "Engineering Record and Replay for
//! Deployability", USENIX ATC 2017, §3); the x86-64 system call ABI (rcx and r11 clobbered, result in
//! rax); seccomp_data's `instruction_pointer` (`include/uapi/linux/seccomp.h`).

use std::arch::global_asm;

/// Where the region is mapped in every tracee that buffers: 1.5 GiB below where libc is loaded without
/// address-space randomization, so the 32-bit displacement of a `jmp` reaches it from libc and ld.so.
pub const BASE: u64 = 0x7fff_a000_0000;
/// Bytes of code (handler and stubs).
pub const CODE_LEN: u64 = 0x1_0000;
/// Offset of the first per-site stub.
pub const STUBS_OFF: u64 = 0x1000;
/// Bytes per per-site stub slot.
pub const STUB_LEN: u64 = 32;
/// Offset of the buffer (its header).
pub const BUF_OFF: u64 = CODE_LEN;
/// Bytes of the header before the first record.
pub const HEADER_LEN: u64 = 64;
/// Total length of the mapping: 64 KiB of code, 1 MiB of buffer.
pub const MAP_LEN: u64 = CODE_LEN + 0x10_0000;
/// The header's magic ("SLBF").
pub const MAGIC: u32 = 0x4642_4c53;
/// Header mode: the handler records.
pub const MODE_RECORD: u32 = 1;
/// Header mode: the handler replays.
pub const MODE_REPLAY: u32 = 2;
/// What the tracer puts in rax (the trapped call skipped) to make the handler start over.
pub const RETRY: i64 = -5001;
/// Bytes of a record before its data.
pub const RECORD_HEAD: u64 = 72;

/// How a bufferable system call writes memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Nothing but its result.
    None,
    /// A new fd for a directory opened read-only (`openat` with `O_DIRECTORY`). On replay the
    /// handler opens the directory again (or `/` as a stand-in) so that the fd exists for real,
    /// with the recorded number.
    DirectoryFd,
    /// `len` bytes at argument `arg` when the result is 0 (the `stat` family, `clock_gettime`).
    Fixed {
        /// Index (0–5) of the argument holding the output pointer.
        arg: u8,
        /// Bytes written.
        len: u16,
    },
    /// `result` bytes at argument `arg` when the result is positive, at most argument `max`
    /// (`getdents64`, `readlink`).
    Counted {
        /// Index of the output pointer.
        arg: u8,
        /// Index of the buffer-size argument.
        max: u8,
    },
}

/// One bufferable system call: its number, how many argument registers replay compares, and what it
/// writes. The handler's table ([`code`]) holds the same entries (a test checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bufferable {
    /// x86-64 system call number.
    pub nr: i64,
    /// Argument registers compared on replay.
    pub nargs: u8,
    /// What it writes.
    pub output: Output,
    /// Buffered only when the low 32 bits of argument `.0`, masked with `.2` (0: all bits), equal
    /// `.1` (`fcntl(fd, F_GETFL)`; `openat` of a directory, read-only).
    pub only_if: Option<(u8, u32, u32)>,
}

const fn b(nr: i64, nargs: u8, output: Output) -> Bufferable {
    Bufferable {
        nr,
        nargs,
        output,
        only_if: None,
    }
}

const O_DIRECTORY: u32 = libc::O_DIRECTORY as u32;
/// `O_DIRECTORY | O_ACCMODE | O_CREAT | O_TRUNC`: buffered opens have `O_DIRECTORY` and none of the others.
const OPEN_MASK: u32 = (libc::O_DIRECTORY | libc::O_ACCMODE | libc::O_CREAT | libc::O_TRUNC) as u32;

/// The system calls the handler buffers: reads of file-system metadata and of clocks, whose results
/// are inputs but which have no effect another process could see.
pub const BUFFERED: &[Bufferable] = &[
    b(libc::SYS_stat, 2, Output::Fixed { arg: 1, len: 144 }),
    b(libc::SYS_fstat, 2, Output::Fixed { arg: 1, len: 144 }),
    b(libc::SYS_lstat, 2, Output::Fixed { arg: 1, len: 144 }),
    b(libc::SYS_newfstatat, 4, Output::Fixed { arg: 2, len: 144 }),
    b(libc::SYS_statx, 5, Output::Fixed { arg: 4, len: 256 }),
    b(libc::SYS_getdents64, 3, Output::Counted { arg: 1, max: 2 }),
    b(libc::SYS_readlink, 3, Output::Counted { arg: 1, max: 2 }),
    b(libc::SYS_readlinkat, 4, Output::Counted { arg: 2, max: 3 }),
    b(
        libc::SYS_clock_gettime,
        2,
        Output::Fixed { arg: 1, len: 16 },
    ),
    b(libc::SYS_access, 2, Output::None),
    b(libc::SYS_faccessat, 3, Output::None),
    b(libc::SYS_faccessat2, 4, Output::None),
    b(libc::SYS_lseek, 3, Output::None),
    b(libc::SYS_getpid, 0, Output::None),
    b(libc::SYS_getppid, 0, Output::None),
    b(libc::SYS_getxattr, 4, Output::Counted { arg: 2, max: 3 }),
    b(libc::SYS_lgetxattr, 4, Output::Counted { arg: 2, max: 3 }),
    b(libc::SYS_fgetxattr, 4, Output::Counted { arg: 2, max: 3 }),
    b(libc::SYS_listxattr, 3, Output::Counted { arg: 1, max: 2 }),
    b(libc::SYS_llistxattr, 3, Output::Counted { arg: 1, max: 2 }),
    b(libc::SYS_flistxattr, 3, Output::Counted { arg: 1, max: 2 }),
    Bufferable {
        only_if: Some((1, libc::F_GETFL as u32, 0)),
        ..b(libc::SYS_fcntl, 2, Output::None)
    },
    Bufferable {
        only_if: Some((2, O_DIRECTORY, OPEN_MASK)),
        ..b(libc::SYS_openat, 3, Output::DirectoryFd)
    },
];

/// The entry of [`BUFFERED`] for `nr`.
pub fn bufferable(nr: i64) -> Option<&'static Bufferable> {
    BUFFERED.iter().find(|b| b.nr == nr)
}

// The handler. Entered by `call` from a site stub with the system call as the `syscall` instruction
// would see it (rax = number, rdi rsi rdx r10 r8 r9 = arguments); returns with rax = result and every
// other register but rcx and r11 preserved, like the instruction it replaces. A buffered call returns
// with rcx = r11 = 0 and the flags of `xor` (ZF and PF set), on record and on replay alike.
//
// Register use: rbx = header, rbp = table entry then record, r12 = output pointer, r13 = arguments
// compared, r14 = output kind (0 none, 1 fixed, 2 counted), r15 = output bytes (fixed) or maximum.
// The six arguments are saved on the stack, rdi's at 0(%rsp).
global_asm!(
    // The registers saved on entry, popped back (the six arguments, then the callee-saved ones).
    ".macro sightline_syscallbuf_restore",
    "pop %rdi", "pop %rsi", "pop %rdx", "pop %r10", "pop %r8", "pop %r9",
    "pop %r15", "pop %r14", "pop %r13", "pop %r12", "pop %rbp", "pop %rbx",
    ".endm",
    ".pushsection .text.sightline_syscallbuf,\"ax\",@progbits",
    ".p2align 4",
    ".globl sightline_syscallbuf_start",
    ".hidden sightline_syscallbuf_start",
    "sightline_syscallbuf_start:",
    "push %rbx", "push %rbp", "push %r12", "push %r13", "push %r14", "push %r15",
    "push %r9", "push %r8", "push %r10", "push %rdx", "push %rsi", "push %rdi",
    "movabs ${buf}, %rbx",
    "cmpl ${magic}, (%rbx)",
    "jne 80f",
    "lea sightline_syscallbuf_table(%rip), %rbp",
    "1:",
    "movzwl (%rbp), %ecx",
    "cmp $0xffff, %ecx",
    "je 80f",
    "cmp %rax, %rcx",
    "je 2f",
    "add $16, %rbp",
    "jmp 1b",
    "2:",
    "movzbl 5(%rbp), %ecx",
    "test %ecx, %ecx",
    "jz 5f",
    "mov -8(%rsp,%rcx,8), %rcx",
    "mov 12(%rbp), %r13d",
    "test %r13d, %r13d",
    "jnz 6f",
    "mov $-1, %r13d",
    "6:",
    "and %r13d, %ecx",
    "cmp 8(%rbp), %ecx",
    "jne 80f",
    "5:",
    "movzbl 2(%rbp), %r13d",
    "movzbl 3(%rbp), %ecx",
    "xor %r12d, %r12d",
    "cmp $6, %ecx",
    "jae 3f",
    "mov (%rsp,%rcx,8), %r12",
    "3:",
    "movzbl 4(%rbp), %r14d",
    "movzwl 6(%rbp), %r15d",
    "cmp $2, %r14d",
    "jne 4f",
    "mov (%rsp,%r15,8), %r15",
    "4:",
    "cmpl $1, 4(%rbx)",
    "je 10f",
    "cmpl $2, 4(%rbx)",
    "je 20f",
    "jmp 80f",
    // Record: reserve room for the largest possible record, run the call untraced, append.
    "10:",
    "cmp 24(%rbx), %r15",
    "ja 80f",
    "mov 8(%rbx), %rbp",
    "lea 79(%rbp,%r15), %rcx",
    "and $-8, %rcx",
    "cmp 24(%rbx), %rcx",
    "ja 80f",
    "lea 64(%rbx,%rbp), %rbp",
    "mov %rax, (%rbp)",
    "mov 0(%rsp), %rcx", "mov %rcx, 8(%rbp)",
    "mov 8(%rsp), %rcx", "mov %rcx, 16(%rbp)",
    "mov 16(%rsp), %rcx", "mov %rcx, 24(%rbp)",
    "mov 24(%rsp), %rcx", "mov %rcx, 32(%rbp)",
    "mov 32(%rsp), %rcx", "mov %rcx, 40(%rbp)",
    "mov 40(%rsp), %rcx", "mov %rcx, 48(%rbp)",
    "call 95f",
    "mov %rax, 56(%rbp)",
    "xor %ecx, %ecx",
    "cmp $1, %r14d",
    "jne 11f",
    "test %rax, %rax",
    "jnz 13f",
    "mov %r15, %rcx",
    "jmp 13f",
    "11:",
    "cmp $2, %r14d",
    "jne 13f",
    "test %rax, %rax",
    "jle 13f",
    "mov %rax, %rcx",
    "cmp %r15, %rcx",
    "cmova %r15, %rcx",
    "13:",
    "mov %rcx, 64(%rbp)",
    "mov %r12, %rsi",
    "lea 72(%rbp), %rdi",
    "rep movsb",
    "mov 64(%rbp), %rcx",
    "add $79, %rcx",
    "and $-8, %rcx",
    "add %rcx, 8(%rbx)",
    "incq 32(%rbx)",
    "jmp 70f",
    // Replay: the next record must be this call; copy its bytes, return its result.
    "20:",
    "mov 16(%rbx), %rbp",
    "cmp 8(%rbx), %rbp",
    "jae 80f",
    "lea 64(%rbx,%rbp), %rbp",
    "cmp (%rbp), %rax",
    "jne 80f",
    "xor %ecx, %ecx",
    "21:",
    "cmp %r13, %rcx",
    "jae 22f",
    "mov (%rsp,%rcx,8), %rdx",
    "cmp 8(%rbp,%rcx,8), %rdx",
    "jne 80f",
    "inc %rcx",
    "jmp 21b",
    "22:",
    "cmp $3, %r14d",
    "je 30f",
    "mov 64(%rbp), %rcx",
    "cmp %r15, %rcx",
    "ja 80f",
    "mov %r12, %rdi",
    "lea 72(%rbp), %rsi",
    "rep movsb",
    "mov 56(%rbp), %rax",
    "mov 64(%rbp), %rcx",
    "add $79, %rcx",
    "and $-8, %rcx",
    "add %rcx, 16(%rbx)",
    "incq 32(%rbx)",
    "jmp 70f",
    // Replay of a directory open: the fd must exist for real (fchdir runs for real, and later
    // calls name it). Open the directory again; if that does not give the recorded fd, open "/" as
    // a stand-in; if neither does, hand the call to the tracer (which reports the divergence).
    "30:",
    "mov 56(%rbp), %rax",
    "test %rax, %rax",
    "js 39f",
    "mov 0(%rsp), %rdi", "mov 8(%rsp), %rsi", "mov 16(%rsp), %rdx", "mov 24(%rsp), %r10",
    "mov $257, %eax",
    "call 95f",
    "cmp 56(%rbp), %rax",
    "je 39f",
    "test %rax, %rax",
    "js 31f",
    "mov %rax, %rdi",
    "mov $3, %eax",
    "call 95f",
    "31:",
    "mov $-100, %rdi",
    "lea 96f(%rip), %rsi",
    "mov 16(%rsp), %rdx",
    "and $0x80000, %edx",
    "or $0x10000, %edx",
    "xor %r10d, %r10d",
    "mov $257, %eax",
    "call 95f",
    "cmp 56(%rbp), %rax",
    "je 39f",
    "test %rax, %rax",
    "js 32f",
    "mov %rax, %rdi",
    "mov $3, %eax",
    "call 95f",
    "32:",
    "mov (%rbp), %rax",
    "jmp 80f",
    "39:",
    "mov 56(%rbp), %rax",
    "mov 64(%rbp), %rcx",
    "add $79, %rcx",
    "and $-8, %rcx",
    "add %rcx, 16(%rbx)",
    "incq 32(%rbx)",
    // Done: restore and return the result in rax.
    "70:",
    "sightline_syscallbuf_restore",
    // rcx, r11 and the flags the same on the record path (which ran a real `syscall`) and the
    // replay path (which did not): a forced sync point right after a buffered call compares them.
    "xor %ecx, %ecx",
    "xor %r11d, %r11d",
    "ret",
    // Traced: restore, make the call where the filter traps it; start over on RETRY.
    "80:",
    "sightline_syscallbuf_restore",
    "push %rax",
    "syscall",
    ".globl sightline_syscallbuf_traced",
    ".hidden sightline_syscallbuf_traced",
    "sightline_syscallbuf_traced:",
    "pop %rcx",
    "cmp ${retry}, %rax",
    "jne 81f",
    "mov %rcx, %rax",
    "jmp sightline_syscallbuf_start",
    "81:",
    "ret",
    // The one system call instruction the seccomp filter lets through.
    "95:",
    "syscall",
    ".globl sightline_syscallbuf_untraced",
    ".hidden sightline_syscallbuf_untraced",
    "sightline_syscallbuf_untraced:",
    "ret",
    "96:",
    ".asciz \"/\"",
    // Table, 16 bytes per entry: u16 number, u8 arguments compared, u8 output-pointer argument
    // (0xff: none), u8 kind (0 none, 1 fixed, 2 counted, 3 directory open), u8 condition (0: none,
    // else 1 + the index of an argument whose low 32 bits, masked with the u32 at +12 (0: all bits),
    // must equal the u32 at +8), u16 fixed length or maximum-argument index, u32 condition value,
    // u32 condition mask.
    ".p2align 3",
    ".globl sightline_syscallbuf_table",
    ".hidden sightline_syscallbuf_table",
    "sightline_syscallbuf_table:",
    ".short 4", ".byte 2, 1, 1, 0", ".short 144", ".long 0, 0", // stat
    ".short 5", ".byte 2, 1, 1, 0", ".short 144", ".long 0, 0", // fstat
    ".short 6", ".byte 2, 1, 1, 0", ".short 144", ".long 0, 0", // lstat
    ".short 262", ".byte 4, 2, 1, 0", ".short 144", ".long 0, 0", // newfstatat
    ".short 332", ".byte 5, 4, 1, 0", ".short 256", ".long 0, 0", // statx
    ".short 217", ".byte 3, 1, 2, 0", ".short 2", ".long 0, 0", // getdents64
    ".short 89", ".byte 3, 1, 2, 0", ".short 2", ".long 0, 0", // readlink
    ".short 267", ".byte 4, 2, 2, 0", ".short 3", ".long 0, 0", // readlinkat
    ".short 228", ".byte 2, 1, 1, 0", ".short 16", ".long 0, 0", // clock_gettime
    ".short 21", ".byte 2, 255, 0, 0", ".short 0", ".long 0, 0", // access
    ".short 269", ".byte 3, 255, 0, 0", ".short 0", ".long 0, 0", // faccessat
    ".short 439", ".byte 4, 255, 0, 0", ".short 0", ".long 0, 0", // faccessat2
    ".short 8", ".byte 3, 255, 0, 0", ".short 0", ".long 0, 0", // lseek
    ".short 39", ".byte 0, 255, 0, 0", ".short 0", ".long 0, 0", // getpid
    ".short 110", ".byte 0, 255, 0, 0", ".short 0", ".long 0, 0", // getppid
    ".short 191", ".byte 4, 2, 2, 0", ".short 3", ".long 0, 0", // getxattr
    ".short 192", ".byte 4, 2, 2, 0", ".short 3", ".long 0, 0", // lgetxattr
    ".short 193", ".byte 4, 2, 2, 0", ".short 3", ".long 0, 0", // fgetxattr
    ".short 194", ".byte 3, 1, 2, 0", ".short 2", ".long 0, 0", // listxattr
    ".short 195", ".byte 3, 1, 2, 0", ".short 2", ".long 0, 0", // llistxattr
    ".short 196", ".byte 3, 1, 2, 0", ".short 2", ".long 0, 0", // flistxattr
    ".short 72", ".byte 2, 255, 0, 2", ".short 0", ".long 3, 0", // fcntl(fd, F_GETFL)
    ".short 257", ".byte 3, 255, 3, 3", ".short 0", ".long 0x10000, 0x10243", // openat(dir, O_DIRECTORY)
    ".short 0xffff", ".byte 0, 0, 0, 0", ".short 0", ".long 0, 0",
    ".globl sightline_syscallbuf_end",
    ".hidden sightline_syscallbuf_end",
    "sightline_syscallbuf_end:",
    ".popsection",
    buf = const BASE + BUF_OFF,
    magic = const MAGIC,
    retry = const RETRY,
    options(att_syntax)
);

unsafe extern "C" {
    static sightline_syscallbuf_start: u8;
    static sightline_syscallbuf_untraced: u8;
    static sightline_syscallbuf_traced: u8;
    static sightline_syscallbuf_table: u8;
    static sightline_syscallbuf_end: u8;
}

fn offset_of_label(label: *const u8) -> u64 {
    label as u64 - (&raw const sightline_syscallbuf_start) as u64
}

/// The handler's machine code, position-independent, to be copied to [`BASE`].
pub fn code() -> &'static [u8] {
    let start = &raw const sightline_syscallbuf_start;
    let len = offset_of_label(&raw const sightline_syscallbuf_end) as usize;
    // SAFETY: both labels are in the same section of our own text, `end` after `start`; the bytes
    // between them are the assembled handler and table, mapped readable for the life of the process.
    unsafe { std::slice::from_raw_parts(start, len) }
}

/// The handler's table as assembled (for the test that it equals [`BUFFERED`]).
pub fn table_bytes() -> &'static [u8] {
    &code()[offset_of_label(&raw const sightline_syscallbuf_table) as usize..]
}

/// The address just after the handler's untraced `syscall` instruction (seccomp's
/// `instruction_pointer` for calls the filter must let through).
pub fn untraced_ip() -> u64 {
    BASE + offset_of_label(&raw const sightline_syscallbuf_untraced)
}

/// The address just after the handler's trapped `syscall` instruction (the rip of its seccomp stop).
pub fn traced_ip() -> u64 {
    BASE + offset_of_label(&raw const sightline_syscallbuf_traced)
}

/// If the 8 bytes at a `syscall` instruction are a patchable site, the length of the patch: the
/// 2-byte `syscall` plus the `cmp $-4096/-4095, %rax` (6 bytes) or `%eax` (5 bytes) after it, which
/// the stub re-executes.
pub fn patch_len(bytes: &[u8; 8]) -> Option<usize> {
    if bytes[..2] != [0x0f, 0x05] {
        return None;
    }
    let imm_ok = |i: &[u8]| (i[0] == 0x00 || i[0] == 0x01) && i[1..4] == [0xf0, 0xff, 0xff];
    match bytes[2..] {
        [0x48, 0x3d, ref imm @ ..] if imm_ok(imm) => Some(8),
        [0x3d, ref imm @ .., _] if imm_ok(imm) => Some(7),
        _ => None,
    }
}

/// The `jmp rel32` (padded with `nop`s to `len` bytes) that replaces the site at `site`, going to
/// the stub at `stub`. `None` when the stub is out of `rel32` reach.
pub fn site_patch(site: u64, len: usize, stub: u64) -> Option<Vec<u8>> {
    let rel = rel32(site + 5, stub)?;
    let mut p = vec![0xe9];
    p.extend_from_slice(&rel.to_le_bytes());
    p.resize(len, 0x90);
    Some(p)
}

/// The per-site stub at `stub` for the site at `site` whose original bytes are `orig` (`len` of them
/// are replaced): step over the red zone, call the handler, re-execute the displaced `cmp`, jump back.
pub fn site_stub(stub: u64, site: u64, orig: &[u8; 8], len: usize) -> Option<Vec<u8>> {
    let mut s = vec![0x48, 0x8d, 0x64, 0x24, 0x80]; // lea -128(%rsp), %rsp
    s.push(0xe8); // call handler
    s.extend_from_slice(&rel32(stub + 10, BASE)?.to_le_bytes());
    s.extend_from_slice(&[0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00]); // lea 128(%rsp), %rsp
    s.extend_from_slice(&orig[2..len]); // the displaced cmp
    let back = stub + s.len() as u64 + 5;
    s.push(0xe9);
    s.extend_from_slice(&rel32(back, site + len as u64)?.to_le_bytes());
    debug_assert!(s.len() as u64 <= STUB_LEN);
    Some(s)
}

/// The inverse of [`site_stub`]: from the bytes of the stub at `stub`, the site it serves, that
/// site's original 8 bytes (the last one is not part of the patch when it is 7 bytes long: 0 here)
/// and the patch length. `None` when the bytes are not a stub.
pub fn stub_site(stub: u64, s: &[u8]) -> Option<(u64, [u8; 8], usize)> {
    let len = match s.get(18)? {
        0x48 => 8,
        0x3d => 7,
        _ => return None,
    };
    let jmp = 18 + len - 2;
    if s.get(..6)? != [0x48, 0x8d, 0x64, 0x24, 0x80, 0xe8] || *s.get(jmp)? != 0xe9 {
        return None;
    }
    let rel = i32::from_le_bytes(s.get(jmp + 1..jmp + 5)?.try_into().ok()?);
    let site = (stub + jmp as u64 + 5)
        .wrapping_add(rel as i64 as u64)
        .wrapping_sub(len as u64);
    let mut orig = [0u8; 8];
    orig[..2].copy_from_slice(&[0x0f, 0x05]);
    orig[2..len].copy_from_slice(&s[18..jmp]);
    patch_len(&orig).filter(|&l| l == len)?;
    Some((site, orig, len))
}

fn rel32(from: u64, to: u64) -> Option<i32> {
    i32::try_from(to.wrapping_sub(from) as i64).ok()
}

/// A fresh header for `mode`, with the first stub slot free.
pub fn header(mode: u32) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..8].copy_from_slice(&mode.to_le_bytes());
    h[24..32].copy_from_slice(&(MAP_LEN - BUF_OFF - HEADER_LEN).to_le_bytes());
    h[40..48].copy_from_slice(&STUBS_OFF.to_le_bytes());
    h
}

/// The header fields the tracer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// [`MODE_RECORD`] or [`MODE_REPLAY`] (anything else: off).
    pub mode: u32,
    /// Bytes of records in the buffer.
    pub used: u64,
    /// Replay: read position (bytes consumed). Record: bytes already drained by the tracer.
    pub pos: u64,
    /// Offset of the next free stub slot.
    pub next_stub: u64,
}

impl Header {
    /// Parses a header; `None` when the magic is missing (no buffer there).
    pub fn parse(h: &[u8]) -> Option<Header> {
        let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8 bytes"));
        if h.len() < HEADER_LEN as usize || h[0..4] != MAGIC.to_le_bytes() {
            return None;
        }
        Some(Header {
            mode: u32::from_le_bytes(h[4..8].try_into().expect("4 bytes")),
            used: u64_at(8),
            pos: u64_at(16),
            next_stub: u64_at(40),
        })
    }
}

/// One buffered system call, as the handler wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffered {
    /// System call number.
    pub nr: i64,
    /// The six argument registers.
    pub args: [u64; 6],
    /// Its result.
    pub result: i64,
    /// The bytes the kernel wrote at the output pointer.
    pub data: Vec<u8>,
}

/// Parses the records of a drained buffer. Errors: a record that runs past the end (a corrupt
/// buffer), with the byte offset.
pub fn parse_records(mut b: &[u8]) -> Result<Vec<Buffered>, usize> {
    let total = b.len();
    let mut out = Vec::new();
    let u = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    while !b.is_empty() {
        let at = total - b.len();
        if b.len() < RECORD_HEAD as usize {
            return Err(at);
        }
        let len = u(b, 64);
        let size = (RECORD_HEAD + len + 7) & !7;
        if len > b.len() as u64 || size > b.len() as u64 {
            return Err(at);
        }
        let mut args = [0u64; 6];
        for (i, a) in args.iter_mut().enumerate() {
            *a = u(b, 8 + 8 * i);
        }
        out.push(Buffered {
            nr: u(b, 0) as i64,
            args,
            result: u(b, 56) as i64,
            data: b[RECORD_HEAD as usize..(RECORD_HEAD + len) as usize].to_vec(),
        });
        b = &b[size as usize..];
    }
    Ok(out)
}

/// Encodes records as the handler lays them out (the replayer fills the buffer with this).
pub fn encode_records(recs: &[Buffered]) -> Vec<u8> {
    let mut b = Vec::new();
    for r in recs {
        b.extend_from_slice(&(r.nr as u64).to_le_bytes());
        for a in r.args {
            b.extend_from_slice(&a.to_le_bytes());
        }
        b.extend_from_slice(&(r.result as u64).to_le_bytes());
        b.extend_from_slice(&(r.data.len() as u64).to_le_bytes());
        b.extend_from_slice(&r.data);
        b.resize((b.len() + 7) & !7, 0);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembled_table_equals_the_rust_table() {
        let t = table_bytes();
        for (i, e) in BUFFERED.iter().enumerate() {
            let row = &t[i * 16..i * 16 + 16];
            let (cond, val, mask) = e.only_if.map_or((0, 0, 0), |(a, v, m)| (a + 1, v, m));
            let u32_at = |o: usize| u32::from_le_bytes(row[o..o + 4].try_into().unwrap());
            assert_eq!(
                (row[5], u32_at(8), u32_at(12)),
                (cond, val, mask),
                "nr {}",
                e.nr
            );
            assert_eq!(u16::from_le_bytes([row[0], row[1]]) as i64, e.nr, "row {i}");
            assert_eq!(row[2], e.nargs, "nargs of {}", e.nr);
            let (arg, kind, val) = match e.output {
                Output::None => (255, 0, 0),
                Output::Fixed { arg, len } => (arg, 1, len),
                Output::Counted { arg, max } => (arg, 2, u16::from(max)),
                Output::DirectoryFd => (255, 3, 0),
            };
            assert_eq!(
                (row[3], row[4], u16::from_le_bytes([row[6], row[7]])),
                (arg, kind, val),
                "nr {}",
                e.nr
            );
        }
        let end = &t[BUFFERED.len() * 16..BUFFERED.len() * 16 + 2];
        assert_eq!(
            end,
            [0xff, 0xff],
            "table ends after the Rust table's entries"
        );
    }

    #[test]
    fn handler_fits_before_the_stubs_and_ips_are_inside_it() {
        assert!(
            (code().len() as u64) < STUBS_OFF,
            "handler is {} bytes",
            code().len()
        );
        for ip in [untraced_ip(), traced_ip()] {
            assert!(ip > BASE && ip < BASE + STUBS_OFF, "{ip:#x}");
        }
        assert_ne!(untraced_ip(), traced_ip());
        // Both are just after a `syscall` instruction.
        let c = code();
        for ip in [untraced_ip(), traced_ip()] {
            let o = (ip - BASE) as usize;
            assert_eq!(&c[o - 2..o], &[0x0f, 0x05]);
        }
    }

    #[test]
    fn patchable_sites_are_libc_wrapper_shapes() {
        // getdents64 in glibc 2.36: syscall; cmp $0xfffffffffffff000,%rax
        assert_eq!(
            patch_len(&[0x0f, 0x05, 0x48, 0x3d, 0x00, 0xf0, 0xff, 0xff]),
            Some(8)
        );
        assert_eq!(
            patch_len(&[0x0f, 0x05, 0x48, 0x3d, 0x01, 0xf0, 0xff, 0xff]),
            Some(8)
        );
        // fstatat64: syscall; cmp $0xfffff000,%eax; ja
        assert_eq!(
            patch_len(&[0x0f, 0x05, 0x3d, 0x00, 0xf0, 0xff, 0xff, 0x77]),
            Some(7)
        );
        assert_eq!(
            patch_len(&[0x0f, 0x05, 0x89, 0xc2, 0x85, 0xc0, 0x75, 0x02]),
            None
        );
        assert_eq!(
            patch_len(&[0x90, 0x05, 0x48, 0x3d, 0x00, 0xf0, 0xff, 0xff]),
            None
        );
    }

    #[test]
    fn stub_and_patch_jump_where_they_should() {
        let site = 0x7fff_f7e0_0041u64;
        let stub = BASE + STUBS_OFF + 3 * STUB_LEN;
        let orig = [0x0f, 0x05, 0x48, 0x3d, 0x00, 0xf0, 0xff, 0xff];
        let p = site_patch(site, 8, stub).expect("in reach");
        assert_eq!(p.len(), 8);
        let rel = i32::from_le_bytes(p[1..5].try_into().unwrap());
        assert_eq!((site + 5).wrapping_add(rel as i64 as u64), stub);
        let s = site_stub(stub, site, &orig, 8).expect("in reach");
        assert!(s.len() as u64 <= STUB_LEN);
        let call = i32::from_le_bytes(s[6..10].try_into().unwrap());
        assert_eq!((stub + 10).wrapping_add(call as i64 as u64), BASE);
        assert_eq!(&s[18..24], &orig[2..8]);
        let back = i32::from_le_bytes(s[25..29].try_into().unwrap());
        assert_eq!((stub + 29).wrapping_add(back as i64 as u64), site + 8);
        // A site in a non-PIE executable at 0x400000 is out of reach.
        assert!(site_patch(0x40_1000, 8, stub).is_none());
    }

    #[test]
    fn a_stub_gives_back_its_site_and_original_bytes() {
        let stub = BASE + STUBS_OFF + 5 * STUB_LEN;
        for (site, orig, len) in [
            (
                0x7fff_f7e0_0041u64,
                [0x0f, 0x05, 0x48, 0x3d, 0x01, 0xf0, 0xff, 0xff],
                8,
            ),
            (
                0x7fff_f7fe_a928u64,
                [0x0f, 0x05, 0x3d, 0x00, 0xf0, 0xff, 0xff, 0x00],
                7,
            ),
        ] {
            let s = site_stub(stub, site, &orig, len).unwrap();
            assert_eq!(stub_site(stub, &s), Some((site, orig, len)));
            // The same bytes at another slot point elsewhere: the site is relative to the stub.
            assert_ne!(stub_site(stub + STUB_LEN, &s).map(|x| x.0), Some(site));
        }
        assert_eq!(stub_site(stub, &[0u8; 32]), None, "an unused slot");
    }

    #[test]
    fn records_round_trip() {
        let recs = vec![
            Buffered {
                nr: 262,
                args: [1, 2, 3, 4, 5, 6],
                result: 0,
                data: vec![7; 144],
            },
            Buffered {
                nr: 217,
                args: [3, 0x1000, 32768, 0, 0, 0],
                result: 5,
                data: vec![1, 2, 3, 4, 5],
            },
            Buffered {
                nr: 39,
                args: [0; 6],
                result: 1234,
                data: vec![],
            },
        ];
        let b = encode_records(&recs);
        assert_eq!(b.len() % 8, 0);
        assert_eq!(parse_records(&b).unwrap(), recs);
        assert_eq!(
            parse_records(&b[..b.len() - 8]),
            Err(216 + 80),
            "the third record is cut"
        );
    }
}
