//! The probe runtime's other system calls: signals (`sigaction(2)`, `kill(2)`), `mount(2)` of
//! tracefs, `setrlimit(2)`, `clock_gettime(2)`, and the sysfs CPU lists. Failures are
//! [`SyscallError`]s naming the call, like the `bpf(2)` ones.

use std::ffi::CString;
use std::io;

use crate::{SysResult, SyscallError};

/// Number of possible CPUs (`/sys/devices/system/cpu/possible`), the slot count of per-CPU map
/// values.
pub fn possible_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| parse_cpu_list(&s).last().map(|c| c + 1))
        .unwrap_or(1)
}

/// CPUs that are online now (`/sys/devices/system/cpu/online`), where perf events can be opened.
pub fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| parse_cpu_list(&s))
        .unwrap_or_else(|_| vec![0])
}

/// Parses a kernel CPU list such as `0-3,5` (Documentation/admin-guide/cputopology.rst).
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<usize>().ok()),
        }
    }
    out
}

/// `mount("nodev", dir, "tracefs")`: mounts tracefs where it is absent.
pub fn mount_tracefs(dir: &str) -> SysResult<()> {
    mount_fs(dir, c"tracefs", "mount(tracefs)")
}

/// Where Sightline pins BPF objects: the usual bpf file system mount point.
pub const BPFFS: &str = "/sys/fs/bpf";

/// True when `/proc/self/mounts` lists a bpf file system at `dir`.
pub fn bpffs_mounted(dir: &str) -> bool {
    std::fs::read_to_string("/proc/self/mounts").is_ok_and(|m| {
        m.lines().any(|l| {
            let mut f = l.split_whitespace();
            let (_, at, fstype) = (f.next(), f.next(), f.next());
            at == Some(dir) && fstype == Some("bpf")
        })
    })
}

/// Mounts the bpf file system at `dir` (`mount("nodev", dir, "bpf")`) unless one is mounted
/// there already, as Sightline mounts tracefs.
///
/// # Errors
/// [`SyscallError`] naming `mount(bpf)` (EPERM without CAP_SYS_ADMIN, ENOENT without `dir`).
pub fn ensure_bpffs(dir: &str) -> SysResult<()> {
    if bpffs_mounted(dir) {
        return Ok(());
    }
    mount_fs(dir, c"bpf", "mount(bpf)")
}

/// The kernel's lockdown file, `none [integrity] confidentiality` (the bracketed mode is in
/// effect; Linux 5.4 `security/lockdown/lockdown.c`).
pub const LOCKDOWN_FILE: &str = "/sys/kernel/security/lockdown";

/// The contents of [`LOCKDOWN_FILE`], mounting securityfs at `/sys/kernel/security` first when
/// it is absent (as systemd does at boot); `None` when it still cannot be read (no privilege, no
/// lockdown LSM).
pub fn read_lockdown() -> Option<String> {
    if let Ok(s) = std::fs::read_to_string(LOCKDOWN_FILE) {
        return Some(s);
    }
    mount_fs("/sys/kernel/security", c"securityfs", "mount(securityfs)").ok()?;
    std::fs::read_to_string(LOCKDOWN_FILE).ok()
}

/// `mount("nodev", dir, fstype)` of a pseudo file system; `what` names the call in errors.
fn mount_fs(dir: &str, fstype: &std::ffi::CStr, what: &'static str) -> SysResult<()> {
    let src = c"nodev";
    let target = CString::new(dir)
        .map_err(|_| SyscallError::new(what, io::ErrorKind::InvalidInput.into()))?;
    // SAFETY: all three strings are NUL-terminated and live across the call; data is null.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r < 0 {
        Err(SyscallError::last(what))
    } else {
        Ok(())
    }
}

/// Raises RLIMIT_MEMLOCK to infinity (kernels before 5.11 charged BPF memory to it; harmless after).
pub fn raise_memlock() {
    let lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `lim` is a valid rlimit; failure is ignored (memcg accounting makes it moot on 5.11+).
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
}

/// `CLOCK_REALTIME - CLOCK_MONOTONIC` in ns (clock_gettime(2)), for `walltimestamp`.
pub fn wall_offset_ns() -> i64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to fill.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    };
    read(libc::CLOCK_REALTIME) - read(libc::CLOCK_MONOTONIC)
}

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Installs a SIGINT/SIGTERM handler (sigaction(2), without `SA_RESTART` so blocking waits return
/// EINTR) that only sets a flag; [`interrupted`] reads it.
pub fn install_interrupt_handler() -> SysResult<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic, which is
        // async-signal-safe.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigint as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r < 0 {
            return Err(SyscallError::last("sigaction(SIGINT)"));
        }
    }
    Ok(())
}

/// True once SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// True while process `pid` exists and is not a zombie (kill(2) with signal 0, then
/// `/proc/PID/stat`).
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: signal 0 performs only the existence/permission check.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => false,
    }
}

/// Sends `sig` to process `pid` (kill(2)).
///
/// # Errors
/// [`SyscallError`] naming `kill` (ESRCH when the process is gone).
pub fn kill(pid: u32, sig: i32) -> SysResult<()> {
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    let r = unsafe { libc::kill(pid as libc::pid_t, sig) };
    if r < 0 {
        Err(SyscallError::last("kill"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_ranges_and_singles() {
        assert_eq!(parse_cpu_list("0-3,5\n"), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("0"), vec![0]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
    }

    #[test]
    fn this_process_is_alive() {
        assert!(process_alive(std::process::id()));
    }
}
