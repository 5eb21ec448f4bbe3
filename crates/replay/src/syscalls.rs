//! The system-call policy shared by recorder and replayer: which calls are trapped, what each one
//! writes into the tracee, and how the replayer reproduces it.
//!
//! The seccomp filter traps every system call by default (an unknown call is recorded and emulated,
//! the safe choice: no side effect is repeated). [`ALLOWED`] lists the calls that run at full speed in
//! both recording and replay because they only build process-local state deterministically (memory
//! maps, signal dispositions, closing fds; not `futex` and `sched_yield`, which the thread scheduler
//! must see, `crate::sched`); [`REFUSED`] lists the calls that fail with ENOSYS in both,
//! so programs fall back to simpler ones (rseq, clone3, io_uring, and the fd-to-fd copies whose data
//! never passes through tracee memory, except `sendfile`, recorded from format version 6).
//!
//! Numbers and structure sizes are x86-64's (`arch/x86/entry/syscalls/syscall_64.tbl`, the man pages
//! of each call).
#![expect(
    non_upper_case_globals,
    reason = "libc's SYS_* constants are matched as patterns"
)]

use replay_ptrace::seccomp::{Action, Filter};

/// How the replayer reproduces a recorded system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Skip it; inject the recorded result and memory writes.
    Emulate,
    /// Run it for real (it builds process state and has no external effect), then inject the
    /// recorded result and writes. Fd-creating calls must return the recorded fd.
    Real,
    /// `open`/`openat`/`creat`/`openat2`: a read-only open of an existing regular file or directory
    /// runs for real (so later `mmap`s of it work); anything else becomes an open of `/dev/null`
    /// (or `/` for directories) that yields the same fd number.
    Open,
    /// `accept`/`accept4`: an open of `/dev/null` stands in for the connection's fd.
    StandIn,
    /// `wait4`/`waitid`: runs for real on the translated child pid after that child's exit was
    /// replayed (a rendezvous point), then the recorded status is injected.
    Wait,
    /// `fork`/`vfork`/`clone`: runs for real; the recorded child pid is injected.
    Fork,
    /// `execve`/`execveat`: runs for real; the new image is prepared like at record.
    Exec,
    /// `rt_sigsuspend`: runs for real with the recorded signal raised first (so the handler runs
    /// under the temporary mask), or is emulated when no signal followed.
    SigSuspend,
    /// `fcntl`: fd-duplicating and fd-flag commands run for real; the rest is emulated.
    Fcntl,
    /// `ioctl`: `FIOCLEX`/`FIONCLEX` run for real; the rest is emulated.
    Ioctl,
}

/// The static description of one trapped system call (its name is [`name`]'s, from the one
/// system-call table, `linux_syscalls`).
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Number of argument registers it reads (the ones divergence checking compares).
    pub nargs: usize,
    /// Replay mode.
    pub mode: Mode,
    /// Index of the argument holding the fd it operates on (rendezvous and output detection).
    pub fd_arg: Option<usize>,
    /// True when a nonnegative result is a new fd.
    pub returns_fd: bool,
}

const fn s(nargs: usize, mode: Mode) -> Spec {
    Spec {
        nargs,
        mode,
        fd_arg: None,
        returns_fd: false,
    }
}
const fn fd(nargs: usize, mode: Mode) -> Spec {
    Spec {
        nargs,
        mode,
        fd_arg: Some(0),
        returns_fd: false,
    }
}
const fn newfd(nargs: usize, mode: Mode) -> Spec {
    Spec {
        nargs,
        mode,
        fd_arg: None,
        returns_fd: true,
    }
}

/// `io_pgetevents` (x86-64 number 333; not in the libc crate).
const SYS_IO_PGETEVENTS: i64 = 333;

/// System calls that run untrapped at full speed, in recording and in replay.
pub const ALLOWED: &[i64] = &[
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_brk,
    libc::SYS_madvise,
    libc::SYS_msync,
    libc::SYS_mlock,
    libc::SYS_munlock,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_sigaltstack,
    libc::SYS_arch_prctl,
    libc::SYS_set_robust_list,
    libc::SYS_get_robust_list,
    libc::SYS_close,
    libc::SYS_dup,
    libc::SYS_dup2,
    libc::SYS_dup3,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_umask,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_prctl,
    libc::SYS_prlimit64,
    libc::SYS_chdir,
    libc::SYS_fchdir,
    libc::SYS_membarrier,
];

/// System calls refused with ENOSYS in recording and replay (programs fall back): `rseq` (glibc runs
/// without it), `clone3` (glibc falls back to `clone`, whose flags we can check), io_uring, and
/// `copy_file_range`/`splice`/`tee`/`vmsplice`, whose data bypasses tracee memory. `sendfile` was
/// refused too before format version 6 (servers such as nginx do not fall back from it): it is now
/// trapped and recorded by its result and offset (see [`outputs`]), except that the recorder
/// refuses it itself when its output fd is Sightline's stdout or stderr, whose bytes replay
/// writes again from the program's memory.
pub const REFUSED: &[i64] = &[
    libc::SYS_rseq,
    libc::SYS_clone3,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_sendfile,
    libc::SYS_copy_file_range,
    libc::SYS_splice,
    libc::SYS_tee,
    libc::SYS_vmsplice,
    libc::SYS_userfaultfd,
];

/// The seccomp filter of recording and replay: trap by default, [`ALLOWED`] run, [`REFUSED`] fail;
/// `mmap` of a file (an fd other than -1) is trapped, so the mapped file is kept in the recording
/// (`crate::files`).
pub fn filter() -> Filter {
    filter_for_version(crate::format::FORMAT_VERSION)
}

/// The filter a recording of format `version` was made with: before version 4, file mappings ran
/// untrapped (their files were not kept).
pub fn filter_for_version(version: u32) -> Filter {
    let mut f = Filter::new(Action::Trace);
    // The syscall-buffering handler's own calls (crate::syscallbuf): recorded by the handler itself.
    f.allow_from_ip(replay_ptrace::syscallbuf::untraced_ip());
    for &nr in ALLOWED {
        f.rule(nr, Action::Allow);
    }
    for &nr in REFUSED {
        if version >= 4 && nr == libc::SYS_io_uring_setup {
            // Trapped: the recorder makes it fail with ENOSYS itself and says "io_uring disabled".
            continue;
        }
        if version >= 6 && nr == libc::SYS_sendfile {
            // Trapped and recorded (see `REFUSED`).
            continue;
        }
        f.rule(nr, Action::Errno(libc::ENOSYS as u16));
    }
    f.rule_arg(libc::SYS_fcntl, 1, FCNTL_FREE, Action::Allow, Action::Trace);
    if version >= 4 {
        // Anonymous mappings pass fd -1 (glibc always does): they run free; file mappings trap.
        f.rule_arg(libc::SYS_mmap, 4, &[u32::MAX], Action::Allow, Action::Trace);
    }
    // Memory calls on the 2.5 GiB below the end of the syscall-buffering region are traced, so that a
    // program mapping over the region unpatches it first (crate::syscallbuf::touches_region).
    let (high, low_end) = region_guard();
    for nr in [
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_pkey_mprotect,
    ] {
        f.trace_if_arg_in(nr, 0, high, low_end);
    }
    f.trace_if_arg_in(libc::SYS_mremap, 0, high, low_end);
    f.trace_if_arg_in(libc::SYS_mremap, 4, high, low_end);
    f
}

/// The address range whose memory calls are traced: `[high << 32, (high << 32) + low_end)`, ending
/// where the syscall-buffering region ends.
fn region_guard() -> (u32, u32) {
    use replay_ptrace::syscallbuf::{BASE, MAP_LEN};
    let end = BASE + MAP_LEN;
    ((end >> 32) as u32, end as u32)
}

/// Bytes `ioctl(fd, cmd, arg)` writes at `arg`: the legacy terminal requests by name, and any
/// other request from its encoding (asm-generic/ioctl.h: direction in bits 30-31, `_IOC_READ` = 2
/// meaning the kernel writes to user memory; size in bits 16-29), e.g. `FS_IOC_GETVERSION`
/// (`_IOR('v', 1, long)`) writes 8. `Some(0)` for known requests that write nothing; `None` for a
/// legacy request (no direction bits) this table does not know: what it writes is not recorded.
pub fn ioctl_output_len(cmd: u64) -> Option<usize> {
    let cmd = cmd as u32;
    let known = match cmd {
        0x5401 => Some(36), // TCGETS: struct termios (kernel layout)
        0x5413 => Some(8),  // TIOCGWINSZ: struct winsize
        0x541B => Some(4),  // FIONREAD
        0x540F => Some(4),  // TIOCGPGRP
        0x5429 => Some(4),  // TIOCGSID
        // TCSETS, TCSETSW, TCSETSF, TCSBRK, TCXONC, TCFLSH, TIOCSCTTY, TIOCSPGRP, TIOCSWINSZ,
        // FIONBIO, TIOCNOTTY, FIONCLEX, FIOCLEX, FIOASYNC: inputs only.
        0x5402..=0x5404 | 0x5409..=0x540B | 0x540E | 0x5410 | 0x5414 | 0x5421 | 0x5422 => Some(0),
        0x5450..=0x5452 => Some(0),
        _ => None,
    };
    if known.is_some() {
        return known;
    }
    let dir = cmd >> 30;
    let size = ((cmd >> 16) & 0x3fff) as usize;
    match dir {
        0 => None,
        d if d & 2 != 0 => Some(size),
        _ => Some(0), // _IOC_WRITE only: the kernel reads from user memory
    }
}

/// The longest path argument read from a tracee (Linux's `PATH_MAX`, its NUL included).
pub const PATH_MAX: usize = 4096;

/// The path argument of system call `nr` ([`path_arg`]) read from the stopped tracee `t`, without
/// its NUL and at most [`PATH_MAX`] bytes; `None` for a call without one or a pointer that cannot
/// be read (the call fails with `EFAULT`).
pub fn read_path(t: &replay_ptrace::Stopped, nr: i64, args: &[u64; 6]) -> Option<Vec<u8>> {
    let i = path_arg(nr)?;
    t.read_cstr(replay_ptrace::RemotePtr::new(args[i]), PATH_MAX)
        .ok()
}

/// Index of the argument of system call `nr` that is a path (a NUL-terminated string in tracee
/// memory), for naming it in reports; `None` for calls without one (the first path of calls with
/// two).
pub fn path_arg(nr: i64) -> Option<usize> {
    use libc::*;
    match nr {
        SYS_execve | SYS_open | SYS_creat | SYS_stat | SYS_lstat | SYS_access | SYS_readlink
        | SYS_unlink | SYS_mkdir | SYS_rmdir | SYS_rename | SYS_link | SYS_symlink | SYS_chdir
        | SYS_truncate | SYS_chmod | SYS_chown | SYS_lchown | SYS_statfs | SYS_mknod
        | SYS_utimes => Some(0),
        SYS_execveat | SYS_openat | SYS_openat2 | SYS_newfstatat | SYS_statx | SYS_faccessat
        | SYS_faccessat2 | SYS_readlinkat | SYS_unlinkat | SYS_mkdirat | SYS_renameat
        | SYS_renameat2 | SYS_linkat | SYS_fchmodat | SYS_fchownat | SYS_mknodat
        | SYS_utimensat => Some(1),
        _ => None,
    }
}

/// The symbolic name of a system call result `-errno` (`-2` → `ENOENT`), for reports; `None`
/// for other values.
pub fn errno_name(result: i64) -> Option<&'static str> {
    use libc::*;
    if !(-4095..0).contains(&result) {
        return None;
    }
    Some(match (-result) as i32 {
        EPERM => "EPERM",
        ENOENT => "ENOENT",
        ESRCH => "ESRCH",
        EINTR => "EINTR",
        EIO => "EIO",
        ENXIO => "ENXIO",
        E2BIG => "E2BIG",
        ENOEXEC => "ENOEXEC",
        EBADF => "EBADF",
        ECHILD => "ECHILD",
        EAGAIN => "EAGAIN",
        ENOMEM => "ENOMEM",
        EACCES => "EACCES",
        EFAULT => "EFAULT",
        EBUSY => "EBUSY",
        EEXIST => "EEXIST",
        EXDEV => "EXDEV",
        ENODEV => "ENODEV",
        ENOTDIR => "ENOTDIR",
        EISDIR => "EISDIR",
        EINVAL => "EINVAL",
        ENFILE => "ENFILE",
        EMFILE => "EMFILE",
        ENOTTY => "ENOTTY",
        ETXTBSY => "ETXTBSY",
        EFBIG => "EFBIG",
        ENOSPC => "ENOSPC",
        ESPIPE => "ESPIPE",
        EROFS => "EROFS",
        EPIPE => "EPIPE",
        ENAMETOOLONG => "ENAMETOOLONG",
        ENOSYS => "ENOSYS",
        ENOTEMPTY => "ENOTEMPTY",
        ELOOP => "ELOOP",
        ENOTSOCK => "ENOTSOCK",
        EOPNOTSUPP => "EOPNOTSUPP",
        ECONNREFUSED => "ECONNREFUSED",
        ETIMEDOUT => "ETIMEDOUT",
        512 => "ERESTARTSYS",
        513 => "ERESTARTNOINTR",
        514 => "ERESTARTNOHAND",
        516 => "ERESTART_RESTARTBLOCK",
        _ => return None,
    })
}

/// `fcntl` commands that run untrapped: they only duplicate fds or touch the fd's close-on-exec
/// flag, deterministic given the (replayed) fd table: `F_DUPFD`, `F_GETFD`, `F_SETFD`,
/// `F_DUPFD_CLOEXEC`. Other commands (`F_GETFL` sees the replay's stand-in files, locks are side
/// effects) are trapped.
pub const FCNTL_FREE: &[u32] = &[0, 1, 2, 1030];

/// The description of system call `nr`. Calls without a description here are emulated, with all six
/// arguments checked.
pub fn spec(nr: i64) -> Spec {
    described(nr).unwrap_or(s(6, Mode::Emulate))
}

/// True when this policy describes system call `nr` (its arguments, replay mode and, through
/// [`outputs`], what it writes); other trapped calls replay by their recorded result alone.
pub fn is_described(nr: i64) -> bool {
    described(nr).is_some()
}

/// The description of system call `nr` when this policy has one.
fn described(nr: i64) -> Option<Spec> {
    use Mode::*;
    use libc::*;
    Some(match nr {
        SYS_read => fd(3, Emulate),
        SYS_write => fd(3, Emulate),
        SYS_pread64 => fd(4, Emulate),
        SYS_pwrite64 => fd(4, Emulate),
        SYS_readv => fd(3, Emulate),
        SYS_writev => fd(3, Emulate),
        SYS_preadv => fd(5, Emulate),
        SYS_pwritev => fd(5, Emulate),
        SYS_preadv2 => fd(6, Emulate),
        SYS_pwritev2 => fd(6, Emulate),
        SYS_recvfrom => fd(6, Emulate),
        SYS_sendto => fd(6, Emulate),
        SYS_recvmsg => fd(3, Emulate),
        SYS_sendmsg => fd(3, Emulate),
        // Its fd argument is the output one (arg 0), as for the write family: its rendezvous.
        SYS_sendfile => fd(4, Emulate),
        SYS_open => newfd(3, Open),
        SYS_openat => newfd(4, Open),
        SYS_creat => newfd(2, Open),
        SYS_openat2 => newfd(4, Open),
        SYS_accept => Spec {
            fd_arg: Some(0),
            ..newfd(3, StandIn)
        },
        SYS_accept4 => Spec {
            fd_arg: Some(0),
            ..newfd(4, StandIn)
        },
        SYS_pipe => s(1, Real),
        SYS_pipe2 => s(2, Real),
        SYS_socket => newfd(3, Real),
        SYS_socketpair => s(4, Real),
        SYS_eventfd => newfd(1, Real),
        SYS_eventfd2 => newfd(2, Real),
        SYS_epoll_create => newfd(1, Real),
        SYS_epoll_create1 => newfd(1, Real),
        SYS_timerfd_create => newfd(2, Real),
        SYS_signalfd => newfd(3, Real),
        SYS_signalfd4 => newfd(4, Real),
        SYS_inotify_init => newfd(0, Real),
        SYS_inotify_init1 => newfd(1, Real),
        SYS_memfd_create => newfd(2, Real),
        SYS_fcntl => Spec {
            fd_arg: None,
            ..fd(3, Fcntl)
        },
        // Trapped only near the syscall-buffering region (see `filter`); they build process state.
        SYS_mmap => s(6, Real),
        SYS_munmap => s(2, Real),
        SYS_mprotect => s(3, Real),
        SYS_madvise => s(3, Real),
        SYS_pkey_mprotect => s(4, Real),
        SYS_mremap => s(5, Real),
        SYS_ioctl => fd(3, Ioctl),
        // Linux AIO: the context (its ring mapping) is made and destroyed for real, so the address
        // space is as recorded; submissions and completions are emulated.
        SYS_io_setup => s(2, Real),
        SYS_io_destroy => s(1, Real),
        SYS_io_submit => s(3, Emulate),
        SYS_io_getevents => s(5, Emulate),
        SYS_IO_PGETEVENTS => s(6, Emulate),
        SYS_io_cancel => s(3, Emulate),
        // Trapped only to say so: the recorder refuses it with ENOSYS (see `REFUSED`).
        SYS_io_uring_setup => s(2, Emulate),
        SYS_fork => s(0, Fork),
        SYS_vfork => s(0, Fork),
        SYS_clone => s(5, Fork),
        // Not compared: the first execve's pointers are into the spawning tracer's memory.
        SYS_execve => s(0, Exec),
        SYS_execveat => s(0, Exec),
        SYS_wait4 => s(4, Wait),
        SYS_waitid => s(5, Wait),
        SYS_rt_sigsuspend => s(2, SigSuspend),
        SYS_stat => s(2, Emulate),
        SYS_lstat => s(2, Emulate),
        SYS_fstat => s(2, Emulate),
        SYS_newfstatat => s(4, Emulate),
        SYS_statx => s(5, Emulate),
        SYS_statfs => s(2, Emulate),
        SYS_fstatfs => s(2, Emulate),
        SYS_getdents => s(3, Emulate),
        SYS_getdents64 => s(3, Emulate),
        SYS_lseek => s(3, Emulate),
        SYS_access => s(2, Emulate),
        SYS_faccessat => s(3, Emulate),
        SYS_faccessat2 => s(4, Emulate),
        SYS_readlink => s(3, Emulate),
        SYS_readlinkat => s(4, Emulate),
        SYS_getcwd => s(2, Emulate),
        SYS_clock_gettime => s(2, Emulate),
        SYS_clock_getres => s(2, Emulate),
        SYS_gettimeofday => s(2, Emulate),
        SYS_time => s(1, Emulate),
        SYS_nanosleep => s(2, Emulate),
        SYS_clock_nanosleep => s(4, Emulate),
        SYS_getrandom => s(3, Emulate),
        SYS_uname => s(1, Emulate),
        SYS_sysinfo => s(1, Emulate),
        SYS_capget => s(2, Emulate),
        SYS_pkey_alloc => s(2, Emulate),
        SYS_pkey_free => s(1, Emulate),
        // Closes fds of the process like `close` (which runs untrapped): for real in replay too.
        SYS_close_range => s(3, Real),
        SYS_getrusage => s(2, Emulate),
        SYS_times => s(1, Emulate),
        SYS_getpid => s(0, Emulate),
        SYS_getppid => s(0, Emulate),
        SYS_gettid => s(0, Emulate),
        // Real: the kernel must know the address it clears at thread exit (the recorded tid is
        // injected as the result).
        SYS_set_tid_address => s(1, Real),
        // Trapped so that the scheduler sees a thread block (crate::sched); emulated on replay,
        // where no thread waits in the kernel.
        SYS_futex => s(6, Emulate),
        SYS_sched_yield => s(0, Emulate),
        SYS_getpgid => s(1, Emulate),
        SYS_getpgrp => s(0, Emulate),
        SYS_getsid => s(1, Emulate),
        SYS_setpgid => s(2, Emulate),
        SYS_setsid => s(0, Emulate),
        SYS_kill => s(2, Emulate),
        SYS_tgkill => s(3, Emulate),
        SYS_tkill => s(2, Emulate),
        SYS_poll => s(3, Emulate),
        SYS_ppoll => s(4, Emulate),
        SYS_select => s(5, Emulate),
        SYS_pselect6 => s(6, Emulate),
        SYS_epoll_wait => s(4, Emulate),
        SYS_epoll_pwait => s(6, Emulate),
        SYS_epoll_ctl => s(4, Emulate),
        SYS_connect => fd(3, Emulate),
        SYS_bind => fd(3, Emulate),
        SYS_listen => fd(2, Emulate),
        SYS_shutdown => fd(2, Emulate),
        SYS_getsockname => s(3, Emulate),
        SYS_getpeername => s(3, Emulate),
        SYS_getsockopt => s(5, Emulate),
        SYS_setsockopt => s(5, Emulate),
        SYS_sched_getaffinity => s(3, Emulate),
        SYS_get_mempolicy => s(5, Emulate),
        SYS_set_mempolicy => s(3, Emulate),
        SYS_mbind => s(6, Emulate),
        SYS_sched_setaffinity => s(3, Emulate),
        SYS_getrlimit => s(2, Emulate),
        SYS_alarm => s(1, Emulate),
        SYS_setitimer => s(3, Emulate),
        SYS_getitimer => s(2, Emulate),
        SYS_timer_create => s(3, Emulate),
        SYS_timer_settime => s(4, Emulate),
        SYS_timer_gettime => s(2, Emulate),
        SYS_timer_delete => s(1, Emulate),
        SYS_pause => s(0, Emulate),
        SYS_rt_sigtimedwait => s(4, Emulate),
        SYS_rt_sigpending => s(2, Emulate),
        SYS_getcpu => s(3, Emulate),
        SYS_getresuid => s(3, Emulate),
        SYS_getresgid => s(3, Emulate),
        SYS_getgroups => s(2, Emulate),
        // Credential changes run for real in replay (a failed one is emulated, as any failed
        // call): `getuid` and the other id reads run untrapped, so they must see what the
        // program set.
        SYS_setuid => s(1, Real),
        SYS_setgid => s(1, Real),
        SYS_setreuid => s(2, Real),
        SYS_setregid => s(2, Real),
        SYS_setresuid => s(3, Real),
        SYS_setresgid => s(3, Real),
        SYS_setfsuid => s(1, Real),
        SYS_setfsgid => s(1, Real),
        SYS_setgroups => s(2, Real),
        SYS_getxattr => s(4, Emulate),
        SYS_lgetxattr => s(4, Emulate),
        SYS_fgetxattr => s(4, Emulate),
        SYS_listxattr => s(3, Emulate),
        SYS_llistxattr => s(3, Emulate),
        SYS_flistxattr => s(3, Emulate),
        SYS_mincore => s(3, Emulate),
        SYS_restart_syscall => s(0, Emulate),
        SYS_unlink => s(1, Emulate),
        SYS_unlinkat => s(3, Emulate),
        SYS_rename => s(2, Emulate),
        SYS_renameat => s(4, Emulate),
        SYS_renameat2 => s(5, Emulate),
        SYS_mkdir => s(2, Emulate),
        SYS_mkdirat => s(3, Emulate),
        SYS_rmdir => s(1, Emulate),
        SYS_chmod => s(2, Emulate),
        SYS_fchmod => s(2, Emulate),
        SYS_fchmodat => s(3, Emulate),
        SYS_chown => s(3, Emulate),
        SYS_fchown => s(3, Emulate),
        SYS_lchown => s(3, Emulate),
        SYS_fchownat => s(5, Emulate),
        SYS_truncate => s(2, Emulate),
        SYS_ftruncate => s(2, Emulate),
        SYS_fsync => s(1, Emulate),
        SYS_fdatasync => s(1, Emulate),
        SYS_utimensat => s(4, Emulate),
        SYS_symlink => s(2, Emulate),
        SYS_symlinkat => s(3, Emulate),
        SYS_link => s(2, Emulate),
        SYS_linkat => s(5, Emulate),
        SYS_fallocate => s(4, Emulate),
        SYS_flock => s(2, Emulate),
        SYS_fadvise64 => s(4, Emulate),
        _ => return None,
    })
}

/// A call as reports and `--dump` show it: `name(arg, ...)` with the arguments divergence checking
/// compares (and the path argument, when there is one), numbers in decimal, addresses in hex;
/// `path`, when given, in place of the path argument's address (quoted); `AT_FDCWD` for the
/// directory argument of the `*at` calls; `open`/`openat` flags by name (`O_RDONLY|O_CLOEXEC`).
pub fn format_call(nr: i64, args: &[u64; 6], path: Option<&[u8]>) -> String {
    let path_at = path.and(path_arg(nr));
    let n = spec(nr).nargs.max(path_at.map_or(0, |i| i + 1));
    let dirfd_at = (path_arg(nr) == Some(1)).then_some(0);
    let flags_at = match nr {
        libc::SYS_open => Some(1),
        libc::SYS_openat => Some(2),
        _ => None,
    };
    let (prot_at, map_flags_at) = match nr {
        libc::SYS_mmap => (Some(2), Some(3)),
        libc::SYS_mprotect | libc::SYS_pkey_mprotect => (Some(2), None),
        _ => (None, None),
    };
    let a: Vec<String> = (0..n)
        .map(|k| {
            let v = args[k];
            if Some(k) == path_at {
                format!("{:?}", String::from_utf8_lossy(path.unwrap_or_default()))
            } else if Some(k) == dirfd_at && v as i32 == libc::AT_FDCWD {
                "AT_FDCWD".to_string()
            } else if Some(k) == flags_at {
                open_flags(v as i32)
            } else if Some(k) == prot_at {
                prot_flags(v as i32)
            } else if Some(k) == map_flags_at {
                map_flags(v as i32)
            } else if v > 0xffff {
                format!("{v:#x}")
            } else {
                format!("{}", v as i64)
            }
        })
        .collect();
    format!("{}({})", name(nr), a.join(", "))
}

/// The names of the bits of `v` that `names` lists, joined by `|`, with bits without a name as a
/// hex remainder; `zero` when `v` is 0.
fn bit_names(v: i32, names: &[(i32, &str)], zero: &str) -> String {
    if v == 0 {
        return zero.to_string();
    }
    let mut rest = v;
    let mut parts: Vec<String> = Vec::new();
    for &(bit, name) in names {
        if bit != 0 && rest & bit == bit {
            parts.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    parts.join("|")
}

/// `mmap(2)`/`mprotect(2)` protection by name, `PROT_READ|PROT_WRITE`, or `PROT_NONE`.
fn prot_flags(p: i32) -> String {
    use libc::*;
    let names = [
        (PROT_READ, "PROT_READ"),
        (PROT_WRITE, "PROT_WRITE"),
        (PROT_EXEC, "PROT_EXEC"),
    ];
    bit_names(p, &names, "PROT_NONE")
}

/// `mmap(2)` flags by name, `MAP_PRIVATE|MAP_ANONYMOUS`; bits without a name as a hex remainder.
fn map_flags(f: i32) -> String {
    use libc::*;
    // MAP_SHARED_VALIDATE (3) holds both sharing bits: named first, whole.
    let names = [
        (MAP_SHARED_VALIDATE, "MAP_SHARED_VALIDATE"),
        (MAP_SHARED, "MAP_SHARED"),
        (MAP_PRIVATE, "MAP_PRIVATE"),
        (MAP_FIXED_NOREPLACE, "MAP_FIXED_NOREPLACE"),
        (MAP_FIXED, "MAP_FIXED"),
        (MAP_ANONYMOUS, "MAP_ANONYMOUS"),
        (MAP_GROWSDOWN, "MAP_GROWSDOWN"),
        (MAP_DENYWRITE, "MAP_DENYWRITE"),
        (MAP_EXECUTABLE, "MAP_EXECUTABLE"),
        (MAP_LOCKED, "MAP_LOCKED"),
        (MAP_NORESERVE, "MAP_NORESERVE"),
        (MAP_POPULATE, "MAP_POPULATE"),
        (MAP_NONBLOCK, "MAP_NONBLOCK"),
        (MAP_STACK, "MAP_STACK"),
        (MAP_HUGETLB, "MAP_HUGETLB"),
        (MAP_SYNC, "MAP_SYNC"),
    ];
    bit_names(f, &names, "0")
}

/// `open(2)` flags by name, `O_RDONLY|O_CLOEXEC`; bits without a name as a hex remainder.
fn open_flags(f: i32) -> String {
    use libc::*;
    let mut parts = vec![
        match f & O_ACCMODE {
            O_RDONLY => "O_RDONLY",
            O_WRONLY => "O_WRONLY",
            O_RDWR => "O_RDWR",
            _ => "O_ACCMODE",
        }
        .to_string(),
    ];
    let mut rest = f & !O_ACCMODE;
    // O_TMPFILE includes O_DIRECTORY's bit: named first, whole.
    for (bit, name) in [
        (O_TMPFILE, "O_TMPFILE"),
        (O_CREAT, "O_CREAT"),
        (O_EXCL, "O_EXCL"),
        (O_NOCTTY, "O_NOCTTY"),
        (O_TRUNC, "O_TRUNC"),
        (O_APPEND, "O_APPEND"),
        (O_NONBLOCK, "O_NONBLOCK"),
        (O_DSYNC, "O_DSYNC"),
        (O_DIRECT, "O_DIRECT"),
        (O_LARGEFILE, "O_LARGEFILE"),
        (O_DIRECTORY, "O_DIRECTORY"),
        (O_NOFOLLOW, "O_NOFOLLOW"),
        (O_NOATIME, "O_NOATIME"),
        (O_CLOEXEC, "O_CLOEXEC"),
        (O_PATH, "O_PATH"),
    ] {
        if rest & bit == bit {
            parts.push(name.to_string());
            rest &= !bit;
        }
    }
    // O_SYNC is __O_SYNC | O_DSYNC: its own bit left over after O_DSYNC.
    if rest & (O_SYNC & !O_DSYNC) != 0 {
        parts.push("O_SYNC".to_string());
        rest &= !(O_SYNC & !O_DSYNC);
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    parts.join("|")
}

/// Name of system call `nr` for reports: the kernel's (`linux_syscalls::name`), or `syscall_<nr>` for
/// a number the table does not know.
pub fn name(nr: i64) -> String {
    linux_syscalls::name(nr).map_or_else(|| format!("syscall_{nr}"), str::to_string)
}

/// True for the kernel-internal "restart" results (`-ERESTARTSYS` 512, `-ERESTARTNOINTR` 513,
/// `-ERESTARTNOHAND` 514, `-ERESTART_RESTARTBLOCK` 516; `include/linux/errno.h`) that a signal
/// turns into a restart or -EINTR; the program never sees them.
pub fn is_restart(result: i64) -> bool {
    matches!(result, -516 | -514 | -513 | -512)
}

/// Where one system call's kernel-written memory is, computed at record time from the arguments,
/// the result and (for vectors and message headers) tracee memory.
///
/// Regions may over-approximate what the kernel wrote: writing back bytes that were already there is
/// harmless when the replay is faithful. Returns `(address, length)` pairs.
pub fn outputs(
    nr: i64,
    a: &[u64; 6],
    res: i64,
    mem: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>,
) -> Vec<(u64, usize)> {
    use libc::*;
    let mut out = Vec::new();
    let ok = res >= 0;
    let r = res.max(0) as usize;
    let fixed = |out: &mut Vec<(u64, usize)>, ptr: u64, len: usize| {
        if ptr != 0 && len > 0 {
            out.push((ptr, len));
        }
    };
    let u32_at = |mem: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>, p: u64| -> Option<usize> {
        if p == 0 {
            return None;
        }
        mem(p, 4).map(|b| u32::from_le_bytes(b[..4].try_into().expect("4")) as usize)
    };
    match nr {
        SYS_read | SYS_pread64 | SYS_getdents | SYS_getdents64 | SYS_getrandom if ok => {
            fixed(&mut out, a[1 - usize::from(nr == SYS_getrandom)], r)
        }
        SYS_readlink | SYS_getxattr | SYS_lgetxattr | SYS_fgetxattr if ok => {
            fixed(&mut out, a[if nr == SYS_readlink { 1 } else { 2 }], r)
        }
        SYS_listxattr | SYS_llistxattr | SYS_flistxattr if ok => fixed(&mut out, a[1], r),
        SYS_readlinkat if ok => fixed(&mut out, a[2], r),
        // The file offset it was given (`off_t *`), advanced by the bytes sent.
        SYS_sendfile if ok => fixed(&mut out, a[2], 8),
        SYS_getcwd if ok => fixed(&mut out, a[0], r),
        SYS_readv | SYS_preadv | SYS_preadv2 if ok => {
            scatter(&mut out, mem, a[1], a[2] as usize, r)
        }
        SYS_recvfrom => {
            if ok {
                fixed(&mut out, a[1], r);
            }
            if let Some(len) = u32_at(mem, a[5]) {
                fixed(&mut out, a[4], len.min(128));
                fixed(&mut out, a[5], 4);
            }
        }
        SYS_recvmsg => {
            if let Some(h) = mem(a[1], 56) {
                let g = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8"));
                let namelen = u32::from_le_bytes(h[8..12].try_into().expect("4")) as usize;
                fixed(&mut out, a[1], 56);
                if ok {
                    fixed(&mut out, g(0), namelen.min(128));
                    scatter(&mut out, mem, g(16), g(24) as usize, r);
                    fixed(&mut out, g(32), (g(40) as usize).min(4096));
                }
            }
        }
        SYS_stat | SYS_lstat | SYS_fstat => fixed(&mut out, a[1], 144),
        SYS_newfstatat => fixed(&mut out, a[2], 144),
        SYS_statx => fixed(&mut out, a[4], 256),
        SYS_statfs | SYS_fstatfs => fixed(&mut out, a[1], 120),
        SYS_clock_gettime | SYS_clock_getres => fixed(&mut out, a[1], 16),
        SYS_gettimeofday => {
            fixed(&mut out, a[0], 16);
            fixed(&mut out, a[1], 8);
        }
        SYS_time => fixed(&mut out, a[0], 8),
        SYS_nanosleep => fixed(&mut out, a[1], 16),
        SYS_clock_nanosleep => fixed(&mut out, a[3], 16),
        SYS_uname => fixed(&mut out, a[0], 390),
        SYS_sysinfo => fixed(&mut out, a[0], 112),
        // capget(2): the kernel writes its preferred version into the header when the caller's
        // is unknown (EINVAL), and one `__user_cap_data_struct` (12 bytes) per 32 capability bits
        // for versions 2 and 3 (two), one for version 1 (`include/uapi/linux/capability.h`).
        SYS_capget => {
            fixed(&mut out, a[0], 8);
            if ok {
                let n = match u32_at(mem, a[0]) {
                    Some(0x1998_0330) => 1,
                    _ => 2,
                };
                fixed(&mut out, a[1], 12 * n);
            }
        }
        SYS_getrusage => fixed(&mut out, a[1], 144),
        SYS_times => fixed(&mut out, a[0], 32),
        SYS_getrlimit => fixed(&mut out, a[1], 16),
        SYS_poll => fixed(&mut out, a[0], (a[1] as usize).min(1 << 16) * 8),
        SYS_ppoll => {
            fixed(&mut out, a[0], (a[1] as usize).min(1 << 16) * 8);
            fixed(&mut out, a[2], 16);
        }
        SYS_select | SYS_pselect6 => {
            let sets = (a[0] as usize).min(1 << 16).div_ceil(64) * 8;
            for p in [a[1], a[2], a[3]] {
                fixed(&mut out, p, sets);
            }
            fixed(&mut out, a[4], 16);
        }
        SYS_epoll_wait | SYS_epoll_pwait if ok => fixed(&mut out, a[1], r * 12),
        SYS_wait4 => {
            fixed(&mut out, a[1], 4);
            fixed(&mut out, a[3], 144);
        }
        SYS_waitid => {
            fixed(&mut out, a[2], 128);
            fixed(&mut out, a[4], 144);
        }
        SYS_pipe | SYS_pipe2 if ok => fixed(&mut out, a[0], 8),
        SYS_socketpair if ok => fixed(&mut out, a[3], 8),
        SYS_accept | SYS_accept4 | SYS_getsockname | SYS_getpeername => {
            if let Some(len) = u32_at(mem, a[2]) {
                fixed(&mut out, a[1], len.min(128));
                fixed(&mut out, a[2], 4);
            }
        }
        SYS_getsockopt => {
            if let Some(len) = u32_at(mem, a[4]) {
                fixed(&mut out, a[3], len.min(1024));
                fixed(&mut out, a[4], 4);
            }
        }
        SYS_ioctl if ok => fixed(&mut out, a[2], ioctl_output_len(a[1]).unwrap_or(0)),
        SYS_fcntl if a[1] == F_GETLK as u64 => fixed(&mut out, a[2], 32),
        SYS_sched_getaffinity if ok => fixed(&mut out, a[2], r),
        // get_mempolicy(int *mode, unsigned long *nodemask, maxnode, addr, flags): the mode, and
        // a bitmask of maxnode bits rounded up to whole longs (mm/mempolicy.c, copy_nodes_to_user).
        SYS_get_mempolicy if ok => {
            fixed(&mut out, a[0], 4);
            fixed(
                &mut out,
                a[1],
                (a[2] as usize).min(1 << 16).div_ceil(64) * 8,
            );
        }
        // Linux AIO: the context id (the address of the ring the kernel maps), the completed
        // `struct io_event`s (32 bytes each), a cancelled request's event.
        SYS_io_setup if ok => fixed(&mut out, a[1], 8),
        SYS_io_getevents | SYS_IO_PGETEVENTS if ok => {
            let n = (res as usize).min(1 << 16);
            fixed(&mut out, a[3], n * 32);
            aio_read_buffers(&mut out, mem, a[3], n);
        }
        SYS_io_cancel if ok => fixed(&mut out, a[2], 32),
        SYS_getitimer => fixed(&mut out, a[1], 32),
        SYS_setitimer => fixed(&mut out, a[2], 32),
        SYS_timer_create => fixed(&mut out, a[2], 4),
        SYS_timer_settime => fixed(&mut out, a[3], 32),
        SYS_timer_gettime => fixed(&mut out, a[1], 32),
        SYS_rt_sigtimedwait => fixed(&mut out, a[1], 128),
        SYS_rt_sigpending => fixed(&mut out, a[0], 8),
        SYS_getcpu => {
            fixed(&mut out, a[0], 4);
            fixed(&mut out, a[1], 4);
        }
        // The futex word(s) the kernel itself changes: PI lock and unlock (owner tid and
        // FUTEX_WAITERS in uaddr), FUTEX_WAKE_OP (the operation on uaddr2), the PI requeues
        // (uaddr2); `kernel/futex/`.
        SYS_futex => match a[1] & 0x7f {
            6..=8 | 13 => fixed(&mut out, a[0], 4),
            5 | 11 | 12 => fixed(&mut out, a[4], 4),
            _ => {}
        },
        // The tids the kernel stores for a new thread (CLONE_PARENT_SETTID in the parent,
        // CLONE_CHILD_SETTID in the child, the same memory with CLONE_VM): the recorded ones are
        // written back on replay, where the real tids differ.
        SYS_clone if ok && a[0] & 0x100 != 0 => {
            if a[0] & 0x0010_0000 != 0 {
                fixed(&mut out, a[2], 4);
            }
            if a[0] & 0x0100_0000 != 0 {
                fixed(&mut out, a[3], 4);
            }
        }
        SYS_getresuid | SYS_getresgid => {
            for p in [a[0], a[1], a[2]] {
                fixed(&mut out, p, 4);
            }
        }
        SYS_getgroups if ok => fixed(&mut out, a[1], r * 4),
        SYS_mincore => fixed(&mut out, a[2], (a[1] as usize).div_ceil(4096)),
        _ => {}
    }
    out
}

/// Distributes `total` bytes over the iovec array at `iov` (`cnt` entries) and appends the filled
/// parts to `out`.
/// The buffers the kernel filled for the completed AIO reads among `n` `struct io_event`s at `events`
/// (linux/aio_abi.h: `data, obj, res, res2`, 32 bytes; `obj` is the `struct iocb`, whose
/// `aio_lio_opcode` is at byte 16, `aio_buf` at 24 and `aio_nbytes` at 32): `res` bytes at
/// `aio_buf` for `IOCB_CMD_PREAD` (0), scattered over the iovecs for `IOCB_CMD_PREADV` (7).
fn aio_read_buffers(
    out: &mut Vec<(u64, usize)>,
    mem: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>,
    events: u64,
    n: usize,
) {
    let Some(raw) = mem(events, n * 32) else {
        return;
    };
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8"));
    for e in raw.chunks_exact(32) {
        let (obj, res) = (word(e, 8), word(e, 16) as i64);
        if res <= 0 {
            continue;
        }
        let Some(cb) = mem(obj, 40) else { continue };
        let opcode = u16::from_le_bytes([cb[16], cb[17]]);
        let (buf, len) = (word(&cb, 24), word(&cb, 32) as usize);
        match opcode {
            0 if buf != 0 => out.push((buf, (res as usize).min(len))),
            7 => scatter(out, mem, buf, len, res as usize),
            _ => {}
        }
    }
}

fn scatter(
    out: &mut Vec<(u64, usize)>,
    mem: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>,
    iov: u64,
    cnt: usize,
    mut total: usize,
) {
    let cnt = cnt.min(1024);
    let Some(raw) = mem(iov, cnt * 16) else {
        return;
    };
    for i in 0..cnt {
        if total == 0 {
            break;
        }
        let base = u64::from_le_bytes(raw[i * 16..i * 16 + 8].try_into().expect("8"));
        let len = u64::from_le_bytes(raw[i * 16 + 8..i * 16 + 16].try_into().expect("8")) as usize;
        let n = len.min(total);
        if n > 0 {
            out.push((base, n));
        }
        total -= n;
    }
}

/// Where the data a write-family call handed to the kernel lies (for hashing and output), given its
/// result (bytes accepted). Returns `(address, length)` pairs.
pub fn inputs(
    nr: i64,
    a: &[u64; 6],
    res: i64,
    mem: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>,
) -> Vec<(u64, usize)> {
    use libc::*;
    let mut out = Vec::new();
    if res <= 0 {
        return out;
    }
    let r = res as usize;
    match nr {
        SYS_write | SYS_pwrite64 | SYS_sendto => out.push((a[1], r)),
        SYS_writev | SYS_pwritev | SYS_pwritev2 => scatter(&mut out, mem, a[1], a[2] as usize, r),
        SYS_sendmsg => {
            if let Some(h) = mem(a[1], 56) {
                let iov = u64::from_le_bytes(h[16..24].try_into().expect("8"));
                let cnt = u64::from_le_bytes(h[24..32].try_into().expect("8")) as usize;
                scatter(&mut out, mem, iov, cnt, r);
            }
        }
        _ => {}
    }
    out
}

/// True for `mmap` arguments that map a file (an fd, not `MAP_ANONYMOUS`) shared
/// (`MAP_SHARED`/`MAP_SHARED_VALIDATE`) and writable: the recorder records the file's bytes under
/// such a mapping and replay maps shared anonymous memory holding them (docs/recording-format.md,
/// *Shared memory*).
pub fn is_shared_writable_file_mapping(args: &[u64; 6]) -> bool {
    let (prot, flags, fd) = (args[2] as i32, args[3] as i32, args[4] as i32);
    fd >= 0
        && flags & libc::MAP_ANONYMOUS == 0
        && flags & 0x0f != libc::MAP_PRIVATE
        && prot & libc::PROT_WRITE != 0
}

/// The fds a successful `recvmsg` received in `SCM_RIGHTS` control messages, from its recorded
/// memory writes (`writes`: address and bytes after the call): the `msghdr` at `args[1]` gives the
/// control buffer and the length the kernel filled in; each `cmsghdr` (`cmsg_len:u64`,
/// `cmsg_level:i32`, `cmsg_type:i32`, then data, aligned to 8: cmsg(3)) at `SOL_SOCKET` /
/// `SCM_RIGHTS` holds `(cmsg_len - 16) / 4` fd numbers. The kernel installed them in the
/// receiver's fd table; replay, which emulates the call, must make fds at those numbers.
pub fn received_fds(args: &[u64; 6], writes: &[(u64, &[u8])]) -> Vec<i32> {
    let at = |addr: u64, len: usize| {
        writes
            .iter()
            .find(|(a, d)| *a == addr && d.len() >= len)
            .map(|(_, d)| *d)
    };
    let u64_at = |b: &[u8], o: usize| {
        b.get(o..o + 8)
            .map_or(0, |s| u64::from_le_bytes(s.try_into().expect("8")))
    };
    let Some(hdr) = at(args[1], 56) else {
        return Vec::new();
    };
    let (control, controllen) = (u64_at(hdr, 32), u64_at(hdr, 40) as usize);
    let Some(buf) = at(control, 0) else {
        return Vec::new();
    };
    let buf = &buf[..controllen.min(buf.len())];
    let mut fds = Vec::new();
    let mut o = 0;
    while o + 16 <= buf.len() {
        let len = u64_at(buf, o) as usize;
        let level = i32::from_le_bytes(buf[o + 8..o + 12].try_into().expect("4"));
        let kind = i32::from_le_bytes(buf[o + 12..o + 16].try_into().expect("4"));
        if len < 16 || o + len > buf.len() {
            break;
        }
        if level == libc::SOL_SOCKET && kind == libc::SCM_RIGHTS {
            fds.extend(
                buf[o + 16..o + len]
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().expect("4"))),
            );
        }
        o += (len + 7) & !7;
    }
    fds
}

/// True for the write family (calls whose data [`inputs`] describes).
pub fn is_write(nr: i64) -> bool {
    use libc::*;
    matches!(
        nr,
        SYS_write
            | SYS_pwrite64
            | SYS_sendto
            | SYS_writev
            | SYS_pwritev
            | SYS_pwritev2
            | SYS_sendmsg
    )
}

/// 64-bit FNV-1a over `data`, continuing from `h` (start with [`HASH_SEED`]). Used for the data hash
/// of the write family; it needs no key and is stable across builds.
pub fn hash(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// FNV-1a offset basis.
pub const HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmap_and_mprotect_flags_are_named() {
        let mmap = [0, 37647, 1, 2, 3, 0];
        assert_eq!(
            format_call(libc::SYS_mmap, &mmap, None),
            "mmap(0, 37647, PROT_READ, MAP_PRIVATE, 3, 0)"
        );
        let fixed = [0x7fff_f7df_a000, 0x1000, 5, 0x812, 3, 0x26000];
        assert_eq!(
            format_call(libc::SYS_mmap, &fixed, None),
            "mmap(0x7ffff7dfa000, 4096, PROT_READ|PROT_EXEC, MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE, 3, 0x26000)"
        );
        let odd = [0, 4096, 0, 0x100003, 0xffff_ffff, 0];
        assert_eq!(
            format_call(libc::SYS_mmap, &odd, None),
            "mmap(0, 4096, PROT_NONE, MAP_SHARED_VALIDATE|MAP_FIXED_NOREPLACE, 0xffffffff, 0)"
        );
        assert_eq!(
            format_call(libc::SYS_mprotect, &[0x1000, 4096, 3, 0, 0, 0], None),
            "mprotect(4096, 4096, PROT_READ|PROT_WRITE)"
        );
    }

    #[test]
    fn sendfile_is_trapped_from_version_6_and_refused_before() {
        assert_eq!(filter().action_for(libc::SYS_sendfile), Action::Trace);
        assert_eq!(
            filter_for_version(5).action_for(libc::SYS_sendfile),
            Action::Errno(libc::ENOSYS as u16)
        );
        // Its offset argument is written back; without one nothing is.
        let none = |_: u64, _: usize| None;
        assert_eq!(
            outputs(libc::SYS_sendfile, &[4, 3, 0x1000, 10, 0, 0], 10, &mut {
                none
            }),
            vec![(0x1000, 8)]
        );
        assert!(outputs(libc::SYS_sendfile, &[4, 3, 0, 10, 0, 0], 10, &mut { none }).is_empty());
    }

    #[test]
    fn received_fds_are_read_from_scm_rights_messages() {
        // A msghdr whose control buffer at 0x2000 holds a credentials message (level SOL_SOCKET,
        // type SCM_CREDENTIALS, 12 bytes of data, padded to 32) and then SCM_RIGHTS with fds 7 and 9.
        let mut hdr = [0u8; 56];
        hdr[32..40].copy_from_slice(&0x2000u64.to_le_bytes());
        let mut control = Vec::new();
        let cmsg = |c: &mut Vec<u8>, kind: i32, data: &[u8]| {
            c.extend_from_slice(&(16 + data.len() as u64).to_le_bytes());
            c.extend_from_slice(&libc::SOL_SOCKET.to_le_bytes());
            c.extend_from_slice(&kind.to_le_bytes());
            c.extend_from_slice(data);
            while !c.len().is_multiple_of(8) {
                c.push(0);
            }
        };
        cmsg(&mut control, libc::SCM_CREDENTIALS, &[1; 12]);
        let fds: Vec<u8> = [7i32, 9].iter().flat_map(|f| f.to_le_bytes()).collect();
        cmsg(&mut control, libc::SCM_RIGHTS, &fds);
        control.extend_from_slice(&[0xff; 24]); // beyond the length the kernel filled in
        let filled = (control.len() - 24) as u64;
        hdr[40..48].copy_from_slice(&filled.to_le_bytes());
        let args = [5, 0x1000, 0, 0, 0, 0];
        let writes = [(0x1000u64, &hdr[..]), (0x2000u64, &control[..])];
        assert_eq!(received_fds(&args, &writes), vec![7, 9]);
        // No control buffer recorded, or none filled in: no fds.
        assert!(received_fds(&args, &writes[..1]).is_empty());
        hdr[40..48].copy_from_slice(&0u64.to_le_bytes());
        let writes = [(0x1000u64, &hdr[..]), (0x2000u64, &control[..])];
        assert!(received_fds(&args, &writes).is_empty());
    }

    #[test]
    fn allowed_and_refused_calls_are_not_trapped_and_the_rest_is() {
        let f = filter();
        assert_eq!(f.action_for(libc::SYS_mmap), Action::Allow);
        assert_eq!(
            f.action_for(libc::SYS_rseq),
            Action::Errno(libc::ENOSYS as u16)
        );
        assert_eq!(f.action_for(libc::SYS_read), Action::Trace);
        // The thread scheduler must see a thread block or yield (crate::sched).
        assert_eq!(f.action_for(libc::SYS_futex), Action::Trace);
        assert_eq!(f.action_for(libc::SYS_sched_yield), Action::Trace);
        assert_eq!(
            f.action_for(libc::SYS_clone3),
            Action::Errno(libc::ENOSYS as u16)
        );
        assert_eq!(f.action_for(libc::SYS_unlink), Action::Trace);
        assert_eq!(
            f.action_for_args(libc::SYS_fcntl, [3, 1030, 3, 0, 0, 0]),
            Action::Allow
        );
        assert_eq!(
            f.action_for_args(libc::SYS_fcntl, [3, libc::F_GETFL as u64, 0, 0, 0, 0]),
            Action::Trace
        );
        // Every allowed call must not also be described as something to replay, except the memory
        // calls traced near the syscall-buffering region, which replay runs for real.
        let guarded = [
            libc::SYS_mmap,
            libc::SYS_munmap,
            libc::SYS_mprotect,
            libc::SYS_madvise,
            libc::SYS_mremap,
        ];
        for &nr in ALLOWED {
            if guarded.contains(&nr) {
                assert_eq!(spec(nr).mode, Mode::Real, "{nr}");
            } else {
                assert!(
                    described(nr).is_none(),
                    "{nr} is allowed but has a replay spec"
                );
            }
        }
        // The guard traces them on addresses up to the region's end, and only there.
        let p = f.compile();
        let ev = |nr: i64, a0: u64| {
            replay_ptrace::seccomp::evaluate(
                &p,
                0xc000_003e,
                nr as u32,
                [a0, 0x1000, 3, 0x22, u64::MAX, 0],
            )
        };
        assert_eq!(
            ev(libc::SYS_mmap, replay_ptrace::syscallbuf::BASE),
            0x7ff0_0000,
            "traced"
        );
        assert_eq!(
            ev(libc::SYS_munmap, 0x7fff_f7d8_0000),
            0x7fff_0000,
            "libc's area runs free"
        );
        assert_eq!(ev(libc::SYS_mmap, 0), 0x7fff_0000, "no address: runs free");
        // A file mapping (an fd, not -1) is trapped anywhere, so its file is kept; not so in the
        // filter of version 3 recordings.
        let file_map = |p: &[replay_ptrace::seccomp::SockFilter]| {
            replay_ptrace::seccomp::evaluate(
                p,
                0xc000_003e,
                libc::SYS_mmap as u32,
                [0, 0x1000, 1, 2, 3, 0],
            )
        };
        assert_eq!(file_map(&p), 0x7ff0_0000, "file mapping traced");
        assert_eq!(
            file_map(&filter_for_version(3).compile()),
            0x7fff_0000,
            "version 3: file mappings ran free"
        );
    }

    #[test]
    fn paths_and_errno_names_for_reports() {
        assert_eq!(path_arg(libc::SYS_execve), Some(0));
        assert_eq!(path_arg(libc::SYS_openat), Some(1));
        assert_eq!(path_arg(libc::SYS_read), None);
        assert_eq!(errno_name(-2), Some("ENOENT"));
        assert_eq!(errno_name(-8), Some("ENOEXEC"));
        assert_eq!(errno_name(0), None);
        assert_eq!(errno_name(0x7fff_f000), None);
    }

    #[test]
    fn ioctl_outputs_follow_the_request_encoding() {
        assert_eq!(ioctl_output_len(0x8008_7601), Some(8), "FS_IOC_GETVERSION");
        assert_eq!(ioctl_output_len(0x8004_6602), Some(4), "FS_IOC32_GETFLAGS");
        assert_eq!(
            ioctl_output_len(0xc020_660b),
            Some(32),
            "FS_IOC_FIEMAP (read/write)"
        );
        assert_eq!(
            ioctl_output_len(0x4008_7602),
            Some(0),
            "FS_IOC_SETVERSION: input only"
        );
        assert_eq!(ioctl_output_len(0x5401), Some(36), "TCGETS by name");
        assert_eq!(ioctl_output_len(0x5402), Some(0), "TCSETS writes nothing");
        assert_eq!(ioctl_output_len(0x5490), None, "unknown legacy request");
        let mut read = |_: u64, _: usize| None;
        assert_eq!(
            outputs(
                libc::SYS_ioctl,
                &[3, 0x8008_7601, 0x1000, 0, 0, 0],
                0,
                &mut read
            ),
            vec![(0x1000, 8)]
        );
    }

    #[test]
    fn names_come_from_the_kernel_table() {
        assert_eq!(name(libc::SYS_openat), "openat");
        // Not described by the policy (it runs untrapped), still named.
        assert_eq!(name(libc::SYS_brk), "brk");
        assert!(described(libc::SYS_brk).is_none());
        // Described (trapped for the thread scheduler) and named by the same table.
        assert_eq!(name(libc::SYS_futex), "futex");
        assert!(described(libc::SYS_futex).is_some());
        assert_eq!(name(-1), "syscall_-1");
        assert_eq!(name(400), "syscall_400");
        // Calls the policy does not describe are emulated with all six arguments compared.
        let unknown = spec(400);
        assert_eq!((unknown.nargs, unknown.mode), (6, Mode::Emulate));
    }

    #[test]
    fn read_outputs_follow_the_result_and_readv_scatters() {
        let mut no_mem = |_: u64, _: usize| None;
        assert_eq!(
            outputs(libc::SYS_read, &[3, 0x1000, 4096, 0, 0, 0], 10, &mut no_mem),
            vec![(0x1000, 10)]
        );
        assert!(
            outputs(
                libc::SYS_read,
                &[3, 0x1000, 4096, 0, 0, 0],
                -11,
                &mut no_mem
            )
            .is_empty()
        );
        // Two iovecs of 4 and 8 bytes, 6 bytes read.
        let mut iov = Vec::new();
        for (b, l) in [(0x2000u64, 4u64), (0x3000, 8)] {
            iov.extend_from_slice(&b.to_le_bytes());
            iov.extend_from_slice(&l.to_le_bytes());
        }
        let mut mem = |p: u64, n: usize| (p == 0x500).then(|| iov[..n].to_vec());
        assert_eq!(
            outputs(libc::SYS_readv, &[3, 0x500, 2, 0, 0, 0], 6, &mut mem),
            vec![(0x2000, 4), (0x3000, 2)]
        );
    }

    #[test]
    fn a_new_threads_tids_are_written_back_and_pi_futex_words_too() {
        let mut no_mem = |_: u64, _: usize| None;
        // pthread_create's flags: CLONE_VM | ... | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID.
        let flags = 0x3d0f00;
        assert_eq!(
            outputs(
                libc::SYS_clone,
                &[flags, 0x7000, 0x7990, 0x7990, 0x76c0, 0],
                42,
                &mut no_mem
            ),
            vec![(0x7990, 4)]
        );
        // A fork writes nothing into the parent.
        assert!(
            outputs(
                libc::SYS_clone,
                &[0x1200011, 0, 0, 0x7990, 0, 0],
                42,
                &mut no_mem
            )
            .is_empty()
        );
        // FUTEX_LOCK_PI_PRIVATE sets the owner in the word; FUTEX_WAKE_OP changes uaddr2.
        assert_eq!(
            outputs(libc::SYS_futex, &[0x5000, 0x86, 0, 0, 0, 0], 0, &mut no_mem),
            vec![(0x5000, 4)]
        );
        assert_eq!(
            outputs(
                libc::SYS_futex,
                &[0x5000, 0x85, 1, 1, 0x6000, 0],
                1,
                &mut no_mem
            ),
            vec![(0x6000, 4)]
        );
        assert!(outputs(libc::SYS_futex, &[0x5000, 0x80, 0, 0, 0, 0], 0, &mut no_mem).is_empty());
    }

    #[test]
    fn fnv_hash_matches_reference_values() {
        assert_eq!(hash(HASH_SEED, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash(HASH_SEED, b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
