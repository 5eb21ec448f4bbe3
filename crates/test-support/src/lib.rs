//! Test helpers shared by the workspace.
//!
//! The project's rules for tests that need something the machine may lack:
//!
//! - **Privileges** (BPF, uprobes, ptrace of non-children need root): [`privileged`] returns `false`
//!   and prints the reason when the test cannot run, so the test returns early; with
//!   `SIGHTLINE_REQUIRE_PRIVILEGED=1` (set by `.ci/run`) it panics instead, so CI never skips silently.
//! - **Shared data** (`../shared/data` beside the checkout): [`shared_data`] returns the path, or prints
//!   why it is absent and returns `None`; with `CI=true` it panics instead.
//! - **Tools and files** the machine may lack (`sqlite3`, `make`, a kernel header): [`require_tool`]
//!   and [`require_file`] return `false` after printing why; with `CI=true` they panic, since
//!   `scripts/install-deps.sh` installs everything the tests use.
//!
//! Use them as the first line of a test:
//!
//! ```no_run
//! # fn demo() {
//! if !test_support::privileged("attaches a BPF program") { return; }
//! let Some(dir) = test_support::shared_data("xtrace") else { return };
//! # let _ = dir; }
//! ```
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

/// True when `name` is set to `1` or `true` in the environment.
fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// True when this process runs with effective uid 0.
///
/// Reads `/proc/self/status` (the `Uid:` line's second field is the effective uid; proc(5)) so that
/// this crate needs no `unsafe` and no libc.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// Gate for a test that needs root. `what` says what the test does that needs it.
///
/// Returns `true` when the test may run. Otherwise prints `skipped: <what>: needs root` to stderr and
/// returns `false`, or panics when `SIGHTLINE_REQUIRE_PRIVILEGED=1` (a skip is a failure in CI).
pub fn privileged(what: &str) -> bool {
    if is_root() {
        return true;
    }
    let msg =
        format!("skipped: {what}: needs root (BPF, uprobes and ptrace need CAP_SYS_ADMIN/CAP_BPF)");
    if env_flag("SIGHTLINE_REQUIRE_PRIVILEGED") {
        panic!("{msg}; SIGHTLINE_REQUIRE_PRIVILEGED=1 makes this a failure");
    }
    eprintln!("{msg}");
    false
}

/// The workspace root (the directory holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    // This crate lives at <root>/crates/test-support.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/test-support has two ancestors")
        .to_path_buf()
}

/// Path of `../shared/data/<rel>` beside the workspace, if present.
///
/// Returns `None` after printing a reason when it is absent; panics under `CI=true`, where the shared
/// data must be there. The directory can be moved with `SIGHTLINE_SHARED_DATA`.
pub fn shared_data(rel: &str) -> Option<PathBuf> {
    let base = std::env::var_os("SIGHTLINE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/data"));
    let path = base.join(rel);
    if path.exists() {
        return Some(path);
    }
    skip(&format!("shared data {} is absent", path.display()));
    None
}

/// Reports a missing prerequisite: panics under `CI=true`, otherwise prints `skipped: <msg>` and
/// returns `false`.
fn skip(msg: &str) -> bool {
    if env_flag("CI") {
        panic!("{msg}; CI=true makes this a failure");
    }
    eprintln!("skipped: {msg}");
    false
}

/// Gate for a test that needs a service (a ClickHouse server): `available` says whether it
/// answered; `what` names it and how to provide it.
///
/// True when available. Otherwise prints `skipped: <what> is not available` and returns `false`,
/// or panics under `CI=true` (`.ci/run` starts every service the tests use).
pub fn require_service(available: bool, what: &str) -> bool {
    available || skip(&format!("{what} is not available"))
}

/// Default of [`clickhouse_server`]: Debian's clickhouse-server as `.ci/run` starts it
/// (`scripts/start-clickhouse.sh`).
pub const CLICKHOUSE_DEFAULT_URL: &str = "clickhouse://127.0.0.1:8123/default";

/// Gate for a test that needs a ClickHouse server: the store URL of `$SIGHTLINE_CLICKHOUSE_URL`
/// (default [`CLICKHOUSE_DEFAULT_URL`]) when the server at its host and port answers its HTTP
/// interface's `GET /ping` with `Ok.` within 2 s (no database is touched).
///
/// Otherwise `None`, after printing `skipped: a ClickHouse server at URL … is not available`, or
/// a panic under `CI=true` ([`require_service`]).
pub fn clickhouse_server() -> Option<String> {
    let url = std::env::var("SIGHTLINE_CLICKHOUSE_URL")
        .unwrap_or_else(|_| CLICKHOUSE_DEFAULT_URL.to_string());
    let up = clickhouse_pings(&url);
    require_service(
        up,
        &format!("a ClickHouse server at {url} (set SIGHTLINE_CLICKHOUSE_URL)"),
    )
    .then_some(url)
}

/// Whether the host and port of the store URL `url` (`clickhouse://[USER[:PASSWORD]@]HOST[:PORT]/DB`,
/// port 8123 by default) answer `GET /ping` with `Ok.`.
fn clickhouse_pings(url: &str) -> bool {
    use std::io::{Read as _, Write as _};
    use std::net::ToSocketAddrs as _;
    let rest = url.strip_prefix("clickhouse://").unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host_port = if host_port.contains(':') {
        host_port.to_string()
    } else {
        format!("{host_port}:8123")
    };
    let timeout = std::time::Duration::from_secs(2);
    let Some(addr) = host_port.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return false;
    };
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(timeout));
    let request = format!("GET /ping HTTP/1.0\r\nHost: {host_port}\r\n\r\n");
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    // Read until the body has come (the server may keep the connection open), EOF or timeout.
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    while answer.len() < 4096 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
        if answer.ends_with(b"\r\n\r\nOk.\n") {
            break;
        }
    }
    // ClickHouse answers an HTTP/1.0 request in HTTP/1.0.
    (answer.starts_with(b"HTTP/1.0 200 ") || answer.starts_with(b"HTTP/1.1 200 "))
        && answer.ends_with(b"\r\n\r\nOk.\n")
}

/// Gate for a test that runs the program `name` (`"sqlite3"`, `"make"`): true when an executable file
/// of that name is on `PATH`.
///
/// Otherwise prints `skipped: <name> is not installed` and returns `false`, or panics under
/// `CI=true` (CI installs every tool the tests use).
pub fn require_tool(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|d| {
        std::fs::metadata(d.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    });
    found || skip(&format!("{name} is not installed (not on PATH)"))
}

/// Gate for a test that reads the file `path`; `what` says what it is (`"the uapi header"`).
///
/// True when it exists. Otherwise prints `skipped: <what> <path> is absent` and returns `false`, or
/// panics under `CI=true`.
pub fn require_file(path: impl AsRef<Path>, what: &str) -> bool {
    let path = path.as_ref();
    path.exists() || skip(&format!("{what} {} is absent", path.display()))
}

/// Runs golden tests: every `*.{ext}` file in `dir` is rendered by `render(file_name, text)` and
/// compared with the file of the same stem ending `.expected`.
///
/// With `UPDATE_GOLDEN=1` the expectations are rewritten instead (review every diff by eye before
/// committing: an expectation must be right, not merely current). Panics listing every mismatch or
/// missing expectation, and when fewer than `min_cases` cases exist (so an emptied directory cannot
/// pass).
pub fn check_golden(
    dir: &Path,
    ext: &str,
    min_cases: usize,
    render: impl Fn(&str, &str) -> String,
) {
    let update = env_flag("UPDATE_GOLDEN");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    cases.sort();
    assert!(
        cases.len() >= min_cases,
        "golden cases missing from {}",
        dir.display()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let name = case
            .file_name()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(case)
            .unwrap_or_else(|e| panic!("reading {}: {e}", case.display()));
        let got = render(&name, &text);
        let exp_path = case.with_extension("expected");
        if update {
            std::fs::write(&exp_path, &got)
                .unwrap_or_else(|e| panic!("writing {}: {e}", exp_path.display()));
            continue;
        }
        match std::fs::read_to_string(&exp_path) {
            Ok(want) if want == got => {}
            Ok(want) => failures.push(format!(
                "{name}: mismatch\n--- expected\n{want}--- got\n{got}"
            )),
            Err(_) => failures.push(format!(
                "{name}: no {} (run with UPDATE_GOLDEN=1)\n--- got\n{got}",
                exp_path.display()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
