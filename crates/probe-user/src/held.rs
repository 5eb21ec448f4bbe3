//! The `-c` command of `sightline probe`: created held, then released to run once every probe is
//! attached, or killed (never having run) when tracing is given up. The kernel interface is
//! ptrace(2), kill(2) and waitpid(2); the fork is `replay_ptrace::exec::spawn_held`'s.
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
//! seen by `signal:::signal_generate`). So the child is our tracee (`PTRACE_SEIZE`, by
//! `replay_ptrace::exec::spawn_held`, the fork shared with `sightline record`) and stops
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
//! there and exits 127; a successful exec closes the pipe (end of file). A file the kernel cannot
//! execute (`ENOEXEC`: a script without `#!`) is run by `/bin/sh`, as execvp(3) does.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Errors of creating, releasing and killing a held command.
#[derive(Debug, thiserror::Error)]
pub enum HeldError {
    /// The command cannot be executed (execve(2)'s error, found by the check before fork or by the
    /// child's failed exec).
    #[error("{}: cannot execute", path.display())]
    CannotExecute {
        /// The file.
        path: PathBuf,
        /// Why (`ENOENT`, `EACCES`, `ENOEXEC`, ...).
        #[source]
        source: io::Error,
    },
    /// Creating the held child failed (`replay_ptrace::exec::spawn_held`).
    #[error("creating the held command")]
    Spawn(#[source] replay_ptrace::Error),
    /// A system call failed.
    #[error("`{call}` failed")]
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
    /// held before its exec, through the one traced-child fork of the workspace
    /// (`replay_ptrace::exec::spawn_held`).
    ///
    /// # Errors
    /// [`HeldError::CannotExecute`] when the file cannot be executed (nothing is created then);
    /// [`HeldError::Sys`] naming `sigaction(SIGCHLD)`; [`HeldError::Spawn`] when creating the
    /// child failed (`pipe2`, `fork`, `ptrace(PTRACE_SEIZE)`, `waitpid`, a NUL byte in an argument).
    pub fn spawn(path: &Path, argv: &[String]) -> Result<HeldCommand, HeldError> {
        replay_ptrace::exec::check_executable(path).map_err(|source| HeldError::CannotExecute {
            path: path.to_path_buf(),
            source,
        })?;
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
        let child = replay_ptrace::exec::spawn_held(path, argv).map_err(HeldError::Spawn)?;
        Ok(HeldCommand {
            pid: child.pid as u32,
            path: path.to_path_buf(),
            state: State::Held,
            errors: Some(child.exec_errors),
            status: None,
        })
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
        self.kill_and_reap()
    }

    /// Ends the command when tracing ends, as dtrace(1M) does for a process it created (illumos
    /// `dt_proc_destroy` releases it with `PRELEASE_KILL`): a held command is killed before it
    /// runs; a released one still running gets SIGKILL and is reaped. Does nothing once it was
    /// reaped (it exited by itself).
    ///
    /// # Errors
    /// [`HeldError::Sys`] naming `kill` or `waitpid`.
    pub fn terminate(&mut self) -> Result<(), HeldError> {
        match self.state {
            State::Reaped => Ok(()),
            State::Held => self.kill_and_reap(),
            State::Running => {
                if self.try_wait()?.is_some() {
                    return Ok(());
                }
                self.kill_and_reap()
            }
        }
    }

    /// SIGKILL, then a blocking wait for the child.
    fn kill_and_reap(&mut self) -> Result<(), HeldError> {
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
