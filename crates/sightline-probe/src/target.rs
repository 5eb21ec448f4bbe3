//! What a program traces: the whole system, a running process, or a command created held.

use probe_runtime::run::Target as ReleaseTarget;
use probe_runtime::session::RuntimeError;
use probe_user::held::{HeldCommand, HeldError};
use probe_user::provider::UserSites;

use crate::Error;

/// What a D program traces; `$target` is the process's pid (d-reference §10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every process (no `$target`); tracing stops at `exit()` or [`crate::Run::stop`].
    System,
    /// A running process (`-p PID`): `$target`, and tracing stops when it exits. It is never
    /// stopped or killed.
    Pid(u32),
    /// A command to create (`-c`): its words (the first is found in `PATH` as execvp(3) does).
    /// It is held before its first instruction until every probe is attached, tracing stops when
    /// it exits, and it is killed if tracing stops first (as dtrace(1M) kills the processes it
    /// created).
    Command(Vec<String>),
}

impl Target {
    /// A [`Target::Command`] of `words`.
    ///
    /// # Errors
    /// [`Error::Command`] when `words` is empty.
    pub fn command<I, S>(words: I) -> Result<Target, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let words: Vec<String> = words.into_iter().map(Into::into).collect();
        if words.is_empty() {
            return Err(Error::Command {
                command: String::new(),
                reason: "empty command".into(),
            });
        }
        Ok(Target::Command(words))
    }

    /// A [`Target::Command`] from one command line, split into words as a shell would (quotes and
    /// backslashes; no expansions), as `sightline probe -c` does.
    ///
    /// # Errors
    /// [`Error::Command`] for unbalanced quotes or an empty line.
    ///
    /// ```
    /// use sightline_probe::Target;
    /// assert_eq!(
    ///     Target::shell_words("sh -c 'exit 3'").unwrap(),
    ///     Target::Command(vec!["sh".into(), "-c".into(), "exit 3".into()])
    /// );
    /// ```
    pub fn shell_words(line: &str) -> Result<Target, Error> {
        let words = shlex::split(line).ok_or_else(|| Error::Command {
            command: line.to_string(),
            reason: "unbalanced quotes".into(),
        })?;
        Target::command(words).map_err(|_| Error::Command {
            command: line.to_string(),
            reason: "empty command".into(),
        })
    }
}

/// A target made ready for compiling: the created command held, the user-probe catalog set.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) pid: Option<u32>,
    pub(crate) watch_pid: Option<u32>,
    pub(crate) held: Option<Held>,
    pub(crate) command: Option<String>,
    pub(crate) sites: UserSites,
    /// The held command's mappings, snapshotted at its entry (kept for user symbols).
    _entry: Option<probe_runtime::user::EntrySnapshot>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        // The command goes before the entry snapshot (which resumes a command still stopped
        // at its entry).
        self.held.take();
    }
}

/// Creates a command held, or checks a pid.
pub(crate) fn prepare(target: Target, user_symbols: bool) -> Result<Prepared, Error> {
    match target {
        Target::System => Ok(Prepared {
            pid: None,
            watch_pid: None,
            held: None,
            command: None,
            sites: UserSites::new(),
            _entry: None,
        }),
        Target::Pid(pid) => {
            if !probe_sys::os::process_alive(pid) {
                return Err(Error::NoProcess(pid));
            }
            Ok(Prepared {
                pid: Some(pid),
                watch_pid: Some(pid),
                held: None,
                command: None,
                sites: UserSites::new(),
                _entry: None,
            })
        }
        Target::Command(words) => {
            let first = words.first().cloned().unwrap_or_default();
            let (path, cmd) = spawn(&words)?;
            let pid = cmd.pid;
            let entry = user_symbols.then(|| probe_runtime::user::snapshot_at_entry(pid, &path));
            Ok(Prepared {
                pid: Some(pid),
                watch_pid: None,
                held: Some(Held {
                    cmd,
                    exec_error: None,
                }),
                command: Some(first),
                sites: UserSites::with_held_command(pid, path),
                _entry: entry,
            })
        }
    }
}

/// Creates `words` held before its exec: its resolved path and handle.
pub(crate) fn spawn(words: &[String]) -> Result<(std::path::PathBuf, HeldCommand), Error> {
    use replay_ptrace::exec::{LookupError, find_executable};
    let first = words.first().cloned().unwrap_or_default();
    let cannot = |reason: String| Error::CannotExecute {
        command: first.clone(),
        reason,
    };
    let path = match find_executable(&first) {
        Ok(p) => p,
        Err(LookupError::NotFound { .. }) => {
            return Err(Error::Command {
                command: first.clone(),
                reason: "command not found".into(),
            });
        }
        Err(LookupError::CannotExecute { source, .. }) => return Err(cannot(source.to_string())),
    };
    match HeldCommand::spawn(&path, words) {
        Ok(c) => Ok((path, c)),
        Err(HeldError::CannotExecute { source, .. }) => Err(cannot(source.to_string())),
        Err(e) => Err(Error::Command {
            command: first.clone(),
            reason: format!("starting the command: {e}"),
        }),
    }
}

/// A created command as the consumer's release target. Dropping it kills the command, as
/// dtrace(1M) does for a process it created (illumos `dt_proc_destroy`: `PRELEASE_KILL`).
#[derive(Debug)]
pub(crate) struct Held {
    cmd: HeldCommand,
    /// The exec failure found at release (its reason), reported instead of the run error.
    pub(crate) exec_error: Option<String>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.cmd.terminate();
    }
}

impl ReleaseTarget for Held {
    fn release(&mut self) -> Result<(), RuntimeError> {
        match self.cmd.release() {
            Ok(()) => Ok(()),
            Err(e) => {
                let source = match &e {
                    HeldError::CannotExecute { source, .. } | HeldError::Sys { source, .. } => {
                        match source.raw_os_error() {
                            Some(n) => std::io::Error::from_raw_os_error(n),
                            None => std::io::Error::from(source.kind()),
                        }
                    }
                    HeldError::Spawn(_) => std::io::Error::from(std::io::ErrorKind::Other),
                };
                let call = match &e {
                    HeldError::CannotExecute { .. } => "execve in the -c child",
                    HeldError::Sys { call, .. } => call,
                    HeldError::Spawn(_) => "creating the -c command",
                };
                if let HeldError::CannotExecute { source, .. } = &e {
                    self.exec_error = Some(source.to_string());
                }
                Err(RuntimeError::Sys(probe_sys::SyscallError::new(
                    call, source,
                )))
            }
        }
    }

    fn exited(&mut self) -> Option<i32> {
        self.cmd.try_wait().ok().flatten()
    }
}
