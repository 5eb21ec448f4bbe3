//! The `-c` command of `sightline probe`: created held, then released to run once every probe is
//! attached, or killed (never having run) when tracing is given up. The kernel interface is
//! fork(2), ptrace(2), execve(2), pipe2(2), kill(2) and waitpid(2).
//!
//! DTrace's semantics (illumos `dt_proc_create` / `dt_proc_destroy`): a process dtrace creates for
//! `-c` is released to run when tracing starts; if dtrace gives up before that (a description that
//! matches nothing, an attach failure), the process is released with `PRELEASE_KILL`: it dies
//! without running. [`HeldCommand`] does the same: dropping it while still held kills and reaps it.
//!
//! # Why a ptrace stop before exec
//!
//! Nothing the hold does may be seen by the probes as the target's own activity once they are
//! attached (a blocking read of a start signal returns after the probes attach; a SIGCONT would be
//! seen by `signal:::signal_generate`). So the child asks to be traced (`PTRACE_TRACEME`) and stops
//! itself with SIGSTOP before any probe exists; [`HeldCommand::release`] detaches with no signal
//! (`PTRACE_DETACH`, data 0, which discards the SIGSTOP; ptrace(2)), so the command's first traced
//! event is its `execve`. SIGCHLD gets `SA_NOCLDSTOP`, so the stop sends us no SIGCHLD. While held
//! it has `PTRACE_O_EXITKILL`: if Sightline dies (even by SIGKILL) the kernel kills the command
//! instead of detaching it to run untraced.
//!
//! # Exec failures
//!
//! [`HeldCommand::spawn`] checks the file first (`replay_ptrace::exec::check_executable`: exists,
//! regular, executable: what execve(2) would refuse with `ENOENT`/`EACCES`), so the common mistakes
//! are reported before anything is traced. Failures only execve(2) can see (a missing ELF
//! interpreter, `ETXTBSY`) come back through a close-on-exec pipe: the child writes its `errno`
//! there and exits 127; a successful exec closes the pipe (end of file). A file the kernel cannot execute (`ENOEXEC`: a script without `#!`) is
//! run by `/bin/sh`, as execvp(3) does.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Errors of creating, releasing and killing a held command.
#[derive(Debug, thiserror::Error)]
pub enum HeldError {
    /// The command cannot be executed (execve(2)'s error, found by the check before fork or by the
    /// child's failed exec).
    #[error("{}: cannot execute: {source}", path.display())]
    CannotExecute {
        /// The file.
        path: PathBuf,
        /// Why (`ENOENT`, `EACCES`, `ENOEXEC`, ...).
        #[source]
        source: io::Error,
    },
    /// A system call failed.
    #[error("{call}: {source}")]
    Sys {
        /// The call (`fork`, `pipe2`, `ptrace(PTRACE_DETACH)`, ...).
        call: &'static str,
        /// The kernel's error.
        #[source]
        source: io::Error,
    },
}

fn last(call: &'static str) -> HeldError {
    HeldError::Sys {
        call,
        source: io::Error::last_os_error(),
    }
}

/// Where the command is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Stopped before exec, our tracee.
    Held,
    /// Released: running its command, not reaped yet.
    Running,
    /// Reaped (exited, killed, or failed to exec).
    Reaped,
}

/// A command created held for `-c`: stopped in a ptrace stop before its `execve`.
///
/// Dropping it while held kills it (SIGKILL) and reaps it: it never runs its command. Once
/// released, dropping it leaves the command running.
#[derive(Debug)]
pub struct HeldCommand {
    /// The child's pid (`$target`).
    pub pid: u32,
    /// The file it executes.
    pub path: PathBuf,
    state: State,
    /// Read end of the close-on-exec error pipe (the child writes its exec `errno`).
    errors: Option<OwnedFd>,
    /// The exit status once reaped (the exit code, or 128 + signal).
    status: Option<i32>,
}

impl HeldCommand {
    /// Creates `path` (already resolved against `PATH`) with arguments `argv` (`argv[0]` included),
    /// held before its exec. Only async-signal-safe calls happen in the child, on memory prepared
    /// before fork(2).
    ///
    /// # Errors
    /// [`HeldError::CannotExecute`] when the file cannot be executed (nothing is created then);
    /// [`HeldError::Sys`] naming the failed call (`sigaction(SIGCHLD)`, `pipe2`, `fork`,
    /// `waitpid`, or `ptrace(PTRACE_TRACEME)` refused in the child).
    pub fn spawn(path: &Path, argv: &[String]) -> Result<HeldCommand, HeldError> {
        use std::os::unix::ffi::OsStrExt;
        replay_ptrace::exec::check_executable(path).map_err(|source| HeldError::CannotExecute {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = || HeldError::CannotExecute {
            path: path.to_path_buf(),
            source: io::Error::from(io::ErrorKind::InvalidInput),
        };
        let cpath = CString::new(path.as_os_str().as_bytes()).map_err(|_| invalid())?;
        let cargs: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| invalid())?;
        let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // execvp(3)'s fallback for ENOEXEC: `/bin/sh PATH ARGS...`.
        let sh = c"/bin/sh";
        let mut sh_ptrs: Vec<*const libc::c_char> = vec![sh.as_ptr(), cpath.as_ptr()];
        sh_ptrs.extend(cargs.iter().skip(1).map(|c| c.as_ptr()));
        sh_ptrs.push(std::ptr::null());
        // SAFETY: a zeroed sigaction with SIG_DFL and SA_NOCLDSTOP is valid; only flags change.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            sa.sa_flags = libc::SA_NOCLDSTOP;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGCHLD, &sa, std::ptr::null_mut())
        };
        if r < 0 {
            return Err(last("sigaction(SIGCHLD)"));
        }
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`, a valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            return Err(last("pipe2"));
        }
        // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let wfd = write_end.as_raw_fd();
        // SAFETY: fork; the child only calls async-signal-safe functions (signal, ptrace, getpid,
        // kill, execv, write, _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(last("fork"));
        }
        if pid == 0 {
            // SAFETY: in the child: restore SIGPIPE (Rust ignores it; ignored signals survive
            // exec), become our parent's tracee and stop until it detaches us, then exec. A failed
            // PTRACE_TRACEME exits at once (126) rather than run the command unheld. A failed exec
            // writes its errno to the pipe and exits 127.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                if libc::ptrace(
                    libc::PTRACE_TRACEME,
                    0,
                    std::ptr::null_mut::<libc::c_void>(),
                    std::ptr::null_mut::<libc::c_void>(),
                ) < 0
                {
                    libc::_exit(126);
                }
                libc::kill(libc::getpid(), libc::SIGSTOP);
                libc::execv(cpath.as_ptr(), ptrs.as_ptr());
                let mut errno = *libc::__errno_location();
                if errno == libc::ENOEXEC {
                    libc::execv(sh.as_ptr(), sh_ptrs.as_ptr());
                    errno = *libc::__errno_location();
                }
                let bytes = errno.to_ne_bytes();
                libc::write(wfd, bytes.as_ptr().cast(), bytes.len());
                libc::_exit(127);
            }
        }
        // Our copy of the write end closes here, so a successful exec leaves the pipe at EOF.
        drop(write_end);
        let mut status = 0;
        // SAFETY: waiting for our own child to stop; `status` is a valid int.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
        if r < 0 {
            return Err(last("waitpid(WUNTRACED)"));
        }
        if !libc::WIFSTOPPED(status) {
            // The child exited (PTRACE_TRACEME refused): say which call failed.
            return Err(HeldError::Sys {
                call: "ptrace(PTRACE_TRACEME) in the -c child",
                source: io::Error::from(io::ErrorKind::PermissionDenied),
            });
        }
        let mut held = HeldCommand {
            pid: pid as u32,
            path: path.to_path_buf(),
            state: State::Held,
            errors: Some(read_end),
            status: None,
        };
        // PTRACE_O_EXITKILL: should we die while it is held (SIGKILL, a crash, Ctrl-C before our
        // handler exists), the kernel kills it rather than detach it to run untraced. Options end
        // with PTRACE_DETACH, so a released command is not affected.
        // SAFETY: our tracee is in a ptrace stop (waited above); data is the option bits, addr is
        // ignored.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_SETOPTIONS,
                pid,
                std::ptr::null_mut::<libc::c_void>(),
                libc::PTRACE_O_EXITKILL as usize as *mut libc::c_void,
            )
        };
        if r < 0 {
            let e = last("ptrace(PTRACE_SETOPTIONS, PTRACE_O_EXITKILL)");
            let _ = held.kill();
            return Err(e);
        }
        Ok(held)
    }

    /// True while the command is held (created, not yet released or killed).
    pub fn is_held(&self) -> bool {
        self.state == State::Held
    }

    /// Lets the command run: detaches from it (`PTRACE_DETACH` with no signal, which discards its
    /// pending SIGSTOP), then waits until its exec succeeded or failed. Releasing twice does
    /// nothing.
    ///
    /// # Errors
    /// [`HeldError::CannotExecute`] when the exec failed (the child has exited 127 and is reaped);
    /// [`HeldError::Sys`] naming `ptrace(PTRACE_DETACH)` or `read`.
    pub fn release(&mut self) -> Result<(), HeldError> {
        if self.state != State::Held {
            return Ok(());
        }
        // SAFETY: detaching from our own tracee, stopped in signal-delivery-stop (spawn waited for
        // that stop); addr is ignored and data 0 means "deliver no signal".
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_DETACH,
                self.pid as libc::pid_t,
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
            )
        };
        if r < 0 {
            return Err(last("ptrace(PTRACE_DETACH)"));
        }
        self.state = State::Running;
        let Some(fd) = self.errors.take() else {
            return Ok(());
        };
        let mut buf = [0u8; 4];
        let n = loop {
            // SAFETY: read(2) into `buf`, a valid 4-byte buffer, from our pipe's read end.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break n;
        };
        if n < 0 {
            return Err(last("read(-c exec status pipe)"));
        }
        if n as usize == buf.len() {
            let errno = i32::from_ne_bytes(buf);
            self.wait_blocking()?;
            return Err(HeldError::CannotExecute {
                path: self.path.clone(),
                source: io::Error::from_raw_os_error(errno),
            });
        }
        Ok(())
    }

    /// Kills a held command (SIGKILL; it has run none of its own code) and reaps it, so it never
    /// runs and leaves no zombie. Does nothing once released or reaped.
    ///
    /// # Errors
    /// [`HeldError::Sys`] naming `kill` or `waitpid`.
    pub fn kill(&mut self) -> Result<(), HeldError> {
        if self.state != State::Held {
            return Ok(());
        }
        // SAFETY: kill(2) on our own child (not reaped yet, so the pid is still ours); SIGKILL
        // ends a ptrace-stopped tracee too.
        if unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) } < 0 {
            return Err(last("kill(SIGKILL)"));
        }
        self.wait_blocking()
    }

    /// Waits (blocking) for the child to end and records its status.
    fn wait_blocking(&mut self) -> Result<(), HeldError> {
        loop {
            let mut status = 0;
            // SAFETY: waiting for our own child; `status` is a valid int.
            let r = unsafe { libc::waitpid(self.pid as libc::pid_t, &mut status, 0) };
            if r < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(last("waitpid"));
            }
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                self.state = State::Reaped;
                self.status = Some(decode(status));
                return Ok(());
            }
        }
    }

    /// Non-blocking wait (waitpid(2) with `WNOHANG`): `Some(status)` once the command exited (the
    /// exit code, or 128 + signal), `None` while it runs (or is held).
    ///
    /// # Errors
    /// [`HeldError::Sys`] naming `waitpid`.
    pub fn try_wait(&mut self) -> Result<Option<i32>, HeldError> {
        if self.state != State::Running {
            return Ok(self.status);
        }
        let mut status = 0;
        // SAFETY: waiting for our own child; `status` is a valid int.
        let r = unsafe { libc::waitpid(self.pid as libc::pid_t, &mut status, libc::WNOHANG) };
        if r < 0 {
            return Err(last("waitpid"));
        }
        if r == 0 || !(libc::WIFEXITED(status) || libc::WIFSIGNALED(status)) {
            return Ok(None);
        }
        self.state = State::Reaped;
        self.status = Some(decode(status));
        Ok(self.status)
    }
}

/// A wait status as the exit code, or 128 + the signal that ended the process.
fn decode(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

impl Drop for HeldCommand {
    fn drop(&mut self) {
        // DTrace's PRELEASE_KILL: a command still held when tracing is given up never runs.
        let _ = self.kill();
    }
}
