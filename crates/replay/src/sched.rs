//! Threads: the serialized schedule shared by recorder and replayer, and forced sync points.
//!
//! One thread of each recorded process runs user code at a time (rr and hermit do the same: user
//! space cannot order shared-memory accesses otherwise). The thread that may run is the process's
//! *holder*. It gives up that right only at three kinds of points, the same in recording and
//! replay:
//!
//! - the seccomp stop of a system call that may block ([`may_block`]: futex waits, reads, polls,
//!   sleeps, waits, `sched_yield`, writes that a full pipe can block). The call proceeds in the
//!   kernel while another thread runs; its result is taken only when its thread holds the right
//!   again (its exit stop waits, held by the tracer), so every record of a process is made by its
//!   holder and the recorded stream is the schedule. Calls that cannot block keep the right through
//!   the kernel, so kernel state they build (fd numbers, mappings) is made in the recorded order;
//!   one still in the kernel after two ticks while another thread waits gives the right up too.
//! - a *forced sync point* (Scribe's `async_reset`): the holder ran a whole time slice
//!   ([`time_slice_ns`]) without stopping while another thread waits or a signal is held; the
//!   recorder interrupts it (`PTRACE_INTERRUPT`) and logs its [`Signature`].
//! - the exit stop of a system call, once it held the right a whole slice while others wait;
//! - its exit.
//!
//! Each change of holder is an [`Event::Switch`](crate::format::Event::Switch) in the stream of
//! the thread that gave the right up; the replayer hands the right over exactly there.
//!
//! # Why let blocking calls run instead of emulating futexes in the tracer?
//! A blocked call sits in the kernel and touches no user memory until it returns (a `read` writes
//! its buffer then, a futex wait only reads its word when it starts): another thread running user
//! code meanwhile cannot observe it, and the call's result is recorded when its thread resumes user
//! code. Emulating futex wait/wake in the tracer would need a model of every futex operation (PI,
//! requeue, bitsets, robust lists, `CLONE_CHILD_CLEARTID` wake-ups done by the kernel at thread
//! exit), all of which the kernel already implements; on replay every futex call is emulated from
//! the recording and no thread blocks in the kernel. A racy program that reads a buffer while
//! another thread's `read` fills it is the exception: such a read may see other bytes on replay.
//!
//! # Why is a signature enough?
//! A thread's future depends only on its registers and the memory it reads. Two moments with equal
//! registers (rip, flags, general registers, rsp, fs_base) and equal stack tops are, for almost
//! every loop, the same iteration, or iterations that are interchangeable: a spin loop
//! `while (!flag);` has one state for all iterations while no other thread runs, so stopping at any
//! of them gives the same future. Replay sets a hardware breakpoint at the recorded rip and checks
//! the signature at each hit. It is not enough when the only difference between two iterations is
//! in memory outside the checksummed stack top (a loop over a global counter whose registers
//! repeat): replay may then stop at the wrong iteration and, if that changes anything observable,
//! report a divergence later. The checksum covers the stack top because locals and spilled loop
//! counters of unoptimized code live there; hashing all writable memory at every hit would make
//! each hit cost milliseconds.
//!
//! Points the breakpoint cannot reach are never recorded: inside a `rep`-prefixed string
//! instruction (a breakpoint hits only before its first iteration) and inside the syscall-buffering
//! handler (whose record and replay code paths differ). The recorder lets such a thread run on and
//! tries again at the next tick.
#![expect(
    non_upper_case_globals,
    reason = "libc's SYS_* constants are matched as patterns"
)]

use replay_ptrace::{RemotePtr, RunStop, Stopped};

use crate::Error;
use crate::format::Signature;

/// Default time slice: 5 ms of wall-clock time, checked at timer ticks of the same period.
pub const DEFAULT_SLICE_NS: u64 = 5_000_000;

/// The time slice (`SIGHTLINE_TIME_SLICE_MS`, default 5 ms): a holder that used this much CPU time
/// (of its process, checked at timer ticks of this period) without a stop while another thread
/// waits, or while a signal is held for it, is interrupted; so is one that ran 20 ticks of wall
/// time without getting it.
pub fn time_slice_ns() -> u64 {
    std::env::var("SIGHTLINE_TIME_SLICE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(DEFAULT_SLICE_NS, |ms| ms * 1_000_000)
}

/// Interrupts in a row at which the recorder finds no patchable instruction
/// ([`crate::trampoline::patchable`]) before it records a forced sync point there anyway (none
/// when the point is for a held signal, which is delivered at once). Replay
/// watches such a point with a hardware breakpoint, one stop per pass; a thread is interrupted
/// again about one slice later, so a tight loop without a patchable instruction (a spin on a
/// rip-relative flag) waits this many extra slices for its switch.
pub const UNPATCHABLE_TRIES: u32 = 4;

/// EFLAGS bits that are not part of a signature: TF (bit 8, single-step) and RF (bit 16, set by the
/// kernel after a breakpoint hit).
const FLAGS_IGNORED: u64 = (1 << 8) | (1 << 16);

/// Bytes of stack, from rsp up, in the signature's checksum.
pub const STACK_BYTES: usize = 256;

/// `CLONE_THREAD` (`include/uapi/linux/sched.h`).
pub const CLONE_THREAD: u64 = 0x0001_0000;

/// The `extra` byte of a fork's record (`fork`, `vfork`, or `clone` without `CLONE_THREAD`) whose
/// child joined its parent's group ([`shares_writable_memory`]); replay puts the child there too.
pub const JOINED: u8 = 1;

/// True when process `tid` has a mapping that is both shared and writable (`rw?s` in
/// `/proc/<tid>/maps`: `MAP_SHARED` anonymous memory, `/dev/shm` and other shared files, memfds,
/// SysV segments), so a child it forks shares writable memory with it. Such a child is scheduled
/// with its parent, one at a time like threads (rr runs such processes on one core), so the order
/// of their memory accesses is the recorded schedule.
pub fn shares_writable_memory(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{tid}/maps")).is_ok_and(|m| maps_share_writable(&m))
}

/// True when a `/proc/<pid>/maps` text has a line whose permissions are `rw?s`.
fn maps_share_writable(maps: &str) -> bool {
    maps.lines().any(|l| {
        l.split_whitespace()
            .nth(1)
            .is_some_and(|p| p.len() == 4 && p.as_bytes()[1] == b'w' && p.as_bytes()[3] == b's')
    })
}

/// The signature of a stopped thread at a user-mode instruction boundary.
///
/// Errors: the registers cannot be read ([`Error::Ptrace`]).
pub fn signature(t: &mut Stopped) -> Result<Signature, Error> {
    let r = t.regs()?;
    let regs = [
        r.r15,
        r.r14,
        r.r13,
        r.r12,
        r.rbp,
        r.rbx,
        r.r11,
        r.r10,
        r.r9,
        r.r8,
        r.rax,
        r.rcx,
        r.rdx,
        r.rsi,
        r.rdi,
        r.rip,
        r.eflags & !FLAGS_IGNORED,
        r.rsp,
        r.fs_base,
    ];
    let stack_hash = t
        .read_bytes(RemotePtr::new(r.rsp), STACK_BYTES)
        .map_or(0, |b| crate::syscalls::hash(crate::syscalls::HASH_SEED, &b));
    Ok(Signature { regs, stack_hash })
}

/// How many of the signature's registers differ (the "nearest state" of a divergence report).
pub fn distance(a: &Signature, b: &Signature) -> usize {
    a.regs
        .iter()
        .zip(b.regs.iter())
        .filter(|(x, y)| x != y)
        .count()
        + usize::from(a.stack_hash != b.stack_hash)
}

/// True when a thread stopped at `rip` may be given a forced sync point there: not inside the
/// syscall-buffering region and not at a `rep`/`repne`-prefixed string instruction.
pub fn reachable_point(t: &Stopped, rip: u64) -> bool {
    use replay_ptrace::syscallbuf::{BASE, MAP_LEN};
    if (BASE..BASE + MAP_LEN).contains(&rip) {
        return false;
    }
    let Ok(code) = t.read_bytes(RemotePtr::new(rip), 4) else {
        return false;
    };
    !is_rep_string(&code)
}

/// Moves a thread stopped at a forced sync point forward to an instruction replay can check in
/// the tracee ([`crate::trampoline::patchable`]), through code that makes no system call and runs
/// no trapped instruction ([`crate::trampoline::plan`]), for at most
/// [`ADVANCE_ROUNDS`](crate::trampoline::ADVANCE_ROUNDS) rounds. A thread for which none is found
/// stays where it stopped (or where the last round left it) and gets its point there. Returns
/// [`RunStop::Reached`] when the thread stands at its point, or what stopped it on the way (a
/// signal — a fault of the code it ran, or an asynchronous one — or an event): then no point is
/// recorded at this stop and the caller handles that stop.
///
/// Errors: ptrace requests fail, or the thread dies.
pub fn advance_to_patchable(t: &mut Stopped) -> Result<RunStop, Error> {
    use crate::trampoline::{ADVANCE_ROUNDS, PLAN_BYTES, Plan, plan};
    for _ in 0..ADVANCE_ROUNDS {
        let rip = t.regs()?.rip;
        let Ok(code) = t.read_bytes(RemotePtr::new(rip), PLAN_BYTES) else {
            break;
        };
        let to = match plan(&code, rip) {
            Plan::Here | Plan::GiveUp => break,
            Plan::RunTo(a) => Some(a),
            Plan::Step => None,
        };
        match t.run_to(to)? {
            RunStop::Reached => {}
            other => return Ok(other),
        }
    }
    Ok(RunStop::Reached)
}

/// True for a `rep`/`repne` prefix (possibly after operand-size and REX prefixes) followed by a
/// string instruction (`movs`, `cmps`, `stos`, `lods`, `scas`, `ins`, `outs`).
fn is_rep_string(code: &[u8]) -> bool {
    let mut rep = false;
    for &b in code {
        match b {
            0xf2 | 0xf3 => rep = true,
            0x66 | 0x67 | 0x40..=0x4f => {}
            0x6c..=0x6f | 0xa4..=0xa7 | 0xaa..=0xaf => return rep,
            _ => return false,
        }
    }
    false
}

/// True when system call `nr(args)` may block for long in the kernel, so its thread gives up the
/// right to run user code at its seccomp stop (the list is rr's "may block" set, reduced to what
/// we trap). Decided from the number and arguments alone, so recorder and replayer agree.
pub fn may_block(nr: i64, args: &[u64; 6]) -> bool {
    use libc::*;
    match nr {
        SYS_futex => {
            // FUTEX_WAIT 0, FUTEX_LOCK_PI 6, FUTEX_WAIT_BITSET 9, FUTEX_WAIT_REQUEUE_PI 11,
            // FUTEX_LOCK_PI2 13 (`include/uapi/linux/futex.h`; the low 7 bits are the command).
            matches!(args[1] & 0x7f, 0 | 6 | 9 | 11 | 13)
        }
        SYS_read | SYS_readv | SYS_recvfrom | SYS_recvmsg | SYS_accept | SYS_accept4
        | SYS_connect | SYS_poll | SYS_ppoll | SYS_select | SYS_pselect6 | SYS_epoll_wait
        | SYS_epoll_pwait | SYS_nanosleep | SYS_clock_nanosleep | SYS_wait4 | SYS_waitid
        | SYS_pause | SYS_rt_sigsuspend | SYS_rt_sigtimedwait | SYS_write | SYS_writev
        | SYS_sendto | SYS_sendmsg | SYS_sendfile | SYS_sched_yield | SYS_flock
        | SYS_restart_syscall => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn futex_waits_block_and_wakes_do_not() {
        let a = |op: u64| [0x1000, op, 0, 0, 0, 0];
        assert!(may_block(libc::SYS_futex, &a(0)));
        assert!(may_block(libc::SYS_futex, &a(0x80 | 9))); // FUTEX_WAIT_BITSET_PRIVATE
        assert!(!may_block(libc::SYS_futex, &a(0x81))); // FUTEX_WAKE_PRIVATE
        assert!(!may_block(libc::SYS_futex, &a(4))); // FUTEX_CMP_REQUEUE
        assert!(may_block(libc::SYS_sched_yield, &[0; 6]));
        assert!(!may_block(libc::SYS_getpid, &[0; 6]));
    }

    #[test]
    fn only_shared_writable_mappings_count() {
        let private = "7f0000000000-7f0000001000 rw-p 00000000 00:00 0\n\
                       7f0000002000-7f0000003000 r--s 00000000 00:1a 12 /dev/shm/ro\n";
        assert!(!maps_share_writable(private));
        let shared = format!(
            "{private}7f0000004000-7f0000005000 rw-s 00000000 00:01 9 /dev/zero (deleted)\n"
        );
        assert!(maps_share_writable(&shared));
        assert!(!maps_share_writable(""));
    }

    #[test]
    fn rep_string_instructions_are_recognized() {
        assert!(is_rep_string(&[0xf3, 0xa4, 0, 0])); // rep movsb
        assert!(is_rep_string(&[0xf3, 0x48, 0xab, 0])); // rep stosq
        assert!(!is_rep_string(&[0xf3, 0x0f, 0x1e, 0xfa])); // endbr64
        assert!(!is_rep_string(&[0xa4, 0, 0, 0])); // movsb without rep: one step
        assert!(!is_rep_string(&[0x90, 0, 0, 0]));
    }

    #[test]
    fn distance_counts_differing_parts() {
        let a = Signature {
            regs: [1; 19],
            stack_hash: 5,
        };
        let mut b = a;
        assert_eq!(distance(&a, &b), 0);
        b.regs[3] = 2;
        b.stack_hash = 6;
        assert_eq!(distance(&a, &b), 2);
    }
}
