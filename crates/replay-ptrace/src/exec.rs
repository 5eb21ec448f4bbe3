//! Which file a command name runs: execvp(3)'s `PATH` search, shared by every place that starts a
//! command (`sightline probe -c`, `sightline record`).
//!
//! The rules are glibc's `__execvpe` (POSIX `exec`, "the path prefix … is obtained by a search of the
//! directories passed as the environment variable PATH"):
//! - a name containing `/` is used as is;
//! - otherwise each `PATH` directory is tried in order (an empty entry is the current directory;
//!   without `PATH`, `/bin:/usr/bin`, glibc's default) and the first executable regular file wins;
//! - a file that exists but cannot be executed is skipped; `EACCES` is the answer only when no
//!   directory held an executable one, and `ENOENT` when none held a file of that name at all.
//!
//! The kernel interface is faccessat(2) with `AT_EACCESS` (the check execve(2) makes with the
//! effective ids; for root, any execute bit).
//!
//! [`spawn_held`] starts a command *held*: a tracee stopped before its `execve`, for `sightline probe
//! -c`. It is the same fork as [`crate::spawn`]'s (one child set-up for every traced child), with
//! nothing of ours installed in the program.

use std::ffi::CString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// glibc's search path when `PATH` is unset (`posix/execvpe.c`, since glibc 2.24).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Why a command name does not name a file we can execute.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// No directory of `PATH` holds a file of that name (execvp's `ENOENT`), or the name is empty.
    #[error("command not found: {name:?}")]
    NotFound {
        /// The name looked up.
        name: String,
    },
    /// The file exists but execve(2) would refuse it (`EACCES`: not executable or not a regular
    /// file; `ENOENT` for a name with `/` that does not exist).
    #[error("cannot execute {}", path.display())]
    CannotExecute {
        /// The file.
        path: PathBuf,
        /// The error execve(2) would return.
        #[source]
        source: io::Error,
    },
}

/// Checks what execve(2) checks first: `path` exists, is a regular file, and our effective ids may
/// execute it (faccessat(2) `X_OK` with `AT_EACCESS`).
///
/// # Errors
/// The error execve(2) would return: `ENOENT`, `EACCES` (also for a directory or a device), ...
pub fn check_executable(path: &Path) -> io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        // execve(2): EACCES "the file or a script interpreter is not a regular file".
        return Err(io::Error::from_raw_os_error(libc::EACCES));
    }
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    crate::sys::may_execute(&c)
}

/// The file `name` runs with execvp(3)'s rules (see the module docs), searching `PATH` from the
/// environment.
///
/// # Errors
/// [`LookupError::NotFound`] when no file of that name exists in `PATH` (or `name` is empty);
/// [`LookupError::CannotExecute`] for a name with `/` that cannot be executed, or when every file
/// found in `PATH` is unexecutable (`EACCES`, reported for the first one).
pub fn find_executable(name: &str) -> Result<PathBuf, LookupError> {
    let path = std::env::var_os("PATH");
    find_executable_in(name, path.as_deref().unwrap_or(DEFAULT_PATH.as_ref()))
}

/// [`find_executable`] with the search path `path` (a `PATH` value) given.
///
/// # Errors
/// As [`find_executable`].
pub fn find_executable_in(name: &str, path: &std::ffi::OsStr) -> Result<PathBuf, LookupError> {
    if name.is_empty() {
        return Err(LookupError::NotFound {
            name: String::new(),
        });
    }
    if name.contains('/') {
        let file = PathBuf::from(name);
        return match check_executable(&file) {
            Ok(()) => Ok(file),
            Err(source) => Err(LookupError::CannotExecute { path: file, source }),
        };
    }
    let mut refused = None;
    for dir in std::env::split_paths(path) {
        let file = dir.join(name);
        match check_executable(&file) {
            Ok(()) => return Ok(file),
            // A file that exists but is not executable: remember it for EACCES, keep searching.
            Err(e) if e.kind() != io::ErrorKind::NotFound && refused.is_none() => {
                refused = Some((file, e));
            }
            Err(_) => {}
        }
    }
    match refused {
        Some((path, _)) => Err(LookupError::CannotExecute {
            path,
            source: io::Error::from_raw_os_error(libc::EACCES),
        }),
        None => Err(LookupError::NotFound {
            name: name.to_string(),
        }),
    }
}

/// A command created by [`spawn_held`]: our tracee, in a signal-delivery-stop (SIGSTOP) before its
/// `execve`.
#[derive(Debug)]
pub struct HeldChild {
    /// Its pid.
    pub pid: i32,
    /// Read end of its close-on-exec exec-error pipe: end of file once `execve` succeeded, or the
    /// failed call's errno as 4 native-endian bytes (the child has then exited 127).
    pub exec_errors: OwnedFd,
}

/// Starts `path` (already found, e.g. by [`find_executable`]) with `argv` (`argv[0]` included) and
/// this process's environment and working directory, seized by the calling thread
/// (`PTRACE_SEIZE` with `PTRACE_O_EXITKILL`: if we die, the kernel kills it rather than let it run
/// untraced) and stopped before its `execve`.
///
/// Release it with `PTRACE_DETACH` and signal 0, which discards its SIGSTOP (ptrace(2)), so its
/// first own action is the `execve`; kill it with SIGKILL and reap it to give it up. A file the
/// kernel cannot execute (`ENOEXEC`) runs under `/bin/sh`, as execvp(3) does.
///
/// # Errors
/// [`crate::Error::Spawn`] for an empty `argv` or a NUL byte in an argument or the environment, or
/// a child that did not stop; [`crate::Error::Sys`] naming `pipe2`, `fork`, `ptrace(PTRACE_SEIZE)`
/// or `waitpid`.
pub fn spawn_held(path: &Path, argv: &[String]) -> crate::Result<HeldChild> {
    let nul = |what: &str| crate::Error::Spawn(format!("NUL byte in {what}"));
    if argv.is_empty() {
        return Err(crate::Error::Spawn("empty command".into()));
    }
    let plan = crate::sys::ChildPlan {
        path: CString::new(path.as_os_str().as_bytes()).map_err(|_| nul("the path"))?,
        argv: argv
            .iter()
            .map(|a| CString::new(a.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| nul("an argument"))?,
        envp: std::env::vars_os()
            .map(|(k, v)| {
                let mut kv = k.into_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv)
            })
            .collect::<Result<_, _>>()
            .map_err(|_| nul("the environment"))?,
        cwd: None,
        cpu: None,
        no_aslr: false,
        stdio_null: false,
        close_fds: false,
        filter: None,
        hold: true,
        sh_fallback: true,
        exec_errors: true,
        ignored_signals: Vec::new(),
        overlays: Vec::new(),
        binds: Vec::new(),
        pid: None,
    };
    let (pid, errors) = crate::sys::fork_seized(&plan, libc::PTRACE_O_EXITKILL as u32)?;
    Ok(HeldChild {
        pid,
        exec_errors: errors.expect("exec_errors asked for"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sightline-exec-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn path_search_skips_unexecutable_files_and_reports_eacces_only_without_an_executable_one() {
        let root = tempdir("search");
        let (a, b, c) = (root.join("a"), root.join("b"), root.join("c"));
        for d in [&a, &b, &c] {
            std::fs::create_dir(d).unwrap();
        }
        file(&a, "tool", 0o644);
        let good = file(&b, "tool", 0o755);
        std::fs::create_dir(c.join("adir")).unwrap();
        let path = std::env::join_paths([&a, &b]).unwrap();
        assert_eq!(find_executable_in("tool", &path).unwrap(), good);
        // Only the unexecutable one: EACCES naming it.
        let path = std::env::join_paths([&a, &c]).unwrap();
        match find_executable_in("tool", &path) {
            Err(LookupError::CannotExecute { path, source }) => {
                assert_eq!(path, a.join("tool"));
                assert_eq!(source.raw_os_error(), Some(libc::EACCES));
            }
            other => panic!("{other:?}"),
        }
        // A directory of that name is not a command.
        assert!(matches!(
            find_executable_in("adir", &path),
            Err(LookupError::CannotExecute { .. })
        ));
        assert!(matches!(
            find_executable_in("missing", &path),
            Err(LookupError::NotFound { name }) if name == "missing"
        ));
        assert!(matches!(
            find_executable_in("", &path),
            Err(LookupError::NotFound { .. })
        ));
        // A name with a slash is used as is, never searched.
        let direct = a.join("tool");
        assert!(matches!(
            find_executable_in(direct.to_str().unwrap(), &path),
            Err(LookupError::CannotExecute { .. })
        ));
        assert_eq!(
            find_executable_in(good.to_str().unwrap(), "".as_ref()).unwrap(),
            good
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn check_executable_gives_execves_errors() {
        let root = tempdir("check");
        let err = |p: &Path| check_executable(p).unwrap_err().raw_os_error();
        assert_eq!(err(&root.join("none")), Some(libc::ENOENT));
        assert_eq!(err(&root), Some(libc::EACCES));
        let exe = file(&root, "x", 0o700);
        assert!(check_executable(&exe).is_ok());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
