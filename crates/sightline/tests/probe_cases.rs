//! Data-driven runtime tests of `sightline probe` (bpftrace's runtime-test style): every
//! `tests/probe/*.case` file holds the cases of one feature; each case runs the real binary as root
//! on the live kernel and checks its output.
//!
//! # Case file format
//!
//! A case file is a sequence of cases. Lines starting with `#` outside a block are comments;
//! blank lines are ignored. A case starts with `NAME` and has one field per line, `KEY value`, or
//! a block `KEY <<TAG` followed by lines up to a line that is exactly `TAG` (the block's text is
//! those lines, each ending in `\n`; trailing spaces are kept).
//!
//! | key | meaning |
//! |---|---|
//! | `NAME text` | starts a case |
//! | `PROG program` / block | a D program, written to `prog.d` and passed as `-s prog.d` |
//! | `ARGS words` | more arguments to `sightline probe`, split like a shell (`'…'`, `"…"`) |
//! | `EXPECT line` / block | stdout must be exactly this (`EXPECT line` = the line and `\n`) |
//! | `EXPECT_REGEX re` / block | this regex must match somewhere in stdout (Rust `regex` syntax, multi-line mode: `^`/`$` match at line ends) |
//! | `EXPECT_NOT_REGEX re` / block | this regex must not match stdout |
//! | `STDERR_REGEX re` / block | this regex must match stderr |
//! | `STDERR_NOT_REGEX re` / block | this regex must not match stderr |
//! | `EXIT n` | the exit status (default 0) |
//! | `JSON` | every stdout line must be one JSON object valid against `docs/probe-json.md` |
//! | `STRACE command` | stdout's aggregation lines (`name count`) must equal `strace -f -c command`'s calls per syscall |
//! | `STRACE_IGNORE names` | syscalls left out of that comparison (give the reason in a comment) |
//! | `TIMEOUT seconds` | kill `sightline` after this long and fail (default 30) |
//! | `SIGINT_AFTER seconds` | send `sightline` SIGINT (Ctrl-C) after this long (decimal seconds) |
//! | `BACKGROUND command` | start this process before `sightline` (its pid is `{bgpid}`); killed after the run if still alive |
//! | `BACKGROUND_EXIT n` | instead, wait for the `BACKGROUND` process (up to `TIMEOUT`) and require exit status `n`: the target was not harmed |
//! | `OUTFILE_EXPECT` block | the file `{tmp}/out.txt` (for `-o`) must hold exactly this |
//! | `AS_NOBODY` | run `sightline` as uid/gid 65534 with no capabilities (a copy of the binary in a world-readable directory, through `setpriv`) |
//! | `ENV NAME=VALUE` | set this variable in `sightline`'s environment (one line each) |
//! | `XFAIL reason` | the case is expected to fail for `reason` (see below) |
//!
//! Placeholders in `PROG`, `ARGS` and `STRACE`: `{bin:NAME}` is `tests/probe/workloads/NAME.c`
//! compiled with `gcc -O1` (once per run); `{workloads}` the `tests/probe/workloads` directory
//! (non-C workloads such as `compress.py`); `{tmp}` the case's temporary directory (also the
//! working directory); `{data}` a deterministic 256 KiB text file in it, with `{data}.gz` its
//! gzip-compressed copy; `{prog}` the `PROG` file; `{bgpid}` the `BACKGROUND` process's pid.
//!
//! Every case runs `sightline probe [-s {prog}] ARGS...` with stdin from `/dev/null`. Expectations
//! are written from DTrace's documented behaviour (the guide and `docs/probe-output.md`), not
//! from what Sightline prints today.
//!
//! `XFAIL`: a case naming a capability the back end does not have yet. A failing XFAIL case is
//! reported as "expected failure" and passes; an XFAIL case that passes fails, so that its `XFAIL`
//! line gets removed.
//!
//! Each case is its own test (`libtest-mimic`, `harness = false`), named `FILE::NAME` (the case
//! file's stem and the case's `NAME`): `cargo test -p sightline --test probe_cases -- printf::`
//! runs one file's cases, `--exact 'printf::%d'` one case, `--list` lists them. Cases run one at a
//! time unless `--test-threads` is given. `PROBE_CASES=substring` runs only the cases whose
//! `file:line: name` contains the substring; a `PROBE_CASES` that matches no case fails the run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};

use libtest_mimic::{Arguments, Failed, Trial};
use std::time::{Duration, Instant};

/// One case of a case file.
#[derive(Debug, Clone, Default)]
struct Case {
    file: String,
    line: usize,
    name: String,
    prog: Option<String>,
    args: Vec<String>,
    expect: Option<String>,
    expect_regex: Vec<String>,
    expect_not_regex: Vec<String>,
    stderr_regex: Vec<String>,
    stderr_not_regex: Vec<String>,
    exit: i32,
    json: bool,
    strace: Option<String>,
    strace_ignore: Vec<String>,
    timeout: u64,
    sigint_after: Option<f64>,
    background: Option<String>,
    background_exit: Option<i32>,
    outfile_expect: Option<String>,
    as_nobody: bool,
    /// `ENV NAME=VALUE` lines: variables set in `sightline`'s environment.
    env: Vec<(String, String)>,
    xfail: Option<String>,
}

impl Case {
    /// `file:line: name`, what `PROBE_CASES` matches and reports show.
    fn id(&self) -> String {
        format!("{}:{}: {}", self.file, self.line, self.name)
    }

    /// The trial's name: `FILE::NAME` (`aggregations::count`), stable when lines move.
    fn trial_name(&self) -> String {
        let stem = self.file.strip_suffix(".case").unwrap_or(&self.file);
        format!("{stem}::{}", self.name)
    }
}

/// Splits `s` into words as a POSIX shell would (`shlex`: quotes and backslashes, no expansions).
fn shell_words(s: &str) -> Result<Vec<String>, String> {
    shlex::split(s).ok_or_else(|| format!("unbalanced quotes in {s:?}"))
}

/// Parses one case file's text.
fn parse_cases(file: &str, text: &str) -> Result<Vec<Case>, String> {
    let mut cases: Vec<Case> = Vec::new();
    let lines: Vec<&str> = text.split('\n').collect();
    let mut i = 0;
    while i < lines.len() {
        let lineno = i + 1;
        let line = lines[i];
        i += 1;
        let trimmed = line.trim_end();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (key, rest) = match trimmed.split_once(' ') {
            Some((k, r)) => (k, r.trim_start()),
            None => (trimmed, ""),
        };
        // A block value: KEY <<TAG ... TAG.
        let value = if let Some(tag) = rest.strip_prefix("<<") {
            let tag = tag.trim();
            if tag.is_empty() {
                return Err(format!("{file}:{lineno}: empty block tag"));
            }
            let mut block = String::new();
            loop {
                let Some(l) = lines.get(i) else {
                    return Err(format!("{file}:{lineno}: block {tag} is not closed"));
                };
                i += 1;
                if *l == tag {
                    break;
                }
                block.push_str(l);
                block.push('\n');
            }
            block
        } else {
            rest.to_string()
        };
        if key == "NAME" {
            cases.push(Case {
                file: file.to_string(),
                line: lineno,
                name: value.trim().to_string(),
                timeout: 30,
                ..Case::default()
            });
            continue;
        }
        let Some(case) = cases.last_mut() else {
            return Err(format!("{file}:{lineno}: {key} before the first NAME"));
        };
        let is_block = rest.starts_with("<<");
        match key {
            "PROG" => case.prog = Some(value),
            "ARGS" => case
                .args
                .extend(shell_words(&value).map_err(|e| format!("{file}:{lineno}: {e}"))?),
            "EXPECT" => {
                case.expect = Some(if is_block {
                    value
                } else {
                    format!("{value}\n")
                })
            }
            "EXPECT_REGEX" => case.expect_regex.push(value),
            "EXPECT_NOT_REGEX" => case.expect_not_regex.push(value),
            "STDERR_REGEX" => case.stderr_regex.push(value),
            "STDERR_NOT_REGEX" => case.stderr_not_regex.push(value),
            "EXIT" => {
                case.exit = value
                    .trim()
                    .parse()
                    .map_err(|_| format!("{file}:{lineno}: bad EXIT {value:?}"))?
            }
            "JSON" => case.json = true,
            "STRACE" => case.strace = Some(value.trim().to_string()),
            "STRACE_IGNORE" => case
                .strace_ignore
                .extend(value.split_whitespace().map(str::to_string)),
            "TIMEOUT" => {
                case.timeout = value
                    .trim()
                    .parse()
                    .map_err(|_| format!("{file}:{lineno}: bad TIMEOUT {value:?}"))?
            }
            "XFAIL" => case.xfail = Some(value.trim().to_string()),
            "SIGINT_AFTER" => {
                case.sigint_after = Some(
                    value
                        .trim()
                        .parse()
                        .map_err(|_| format!("{file}:{lineno}: bad SIGINT_AFTER {value:?}"))?,
                )
            }
            "BACKGROUND" => case.background = Some(value.trim().to_string()),
            "AS_NOBODY" => case.as_nobody = true,
            "ENV" => {
                let Some((k, v)) = value.trim().split_once('=') else {
                    return Err(format!(
                        "{file}:{lineno}: ENV needs NAME=VALUE, got {value:?}"
                    ));
                };
                case.env.push((k.to_string(), v.to_string()));
            }
            "BACKGROUND_EXIT" => {
                case.background_exit = Some(
                    value
                        .trim()
                        .parse()
                        .map_err(|_| format!("{file}:{lineno}: bad BACKGROUND_EXIT {value:?}"))?,
                )
            }
            "OUTFILE_EXPECT" => {
                case.outfile_expect = Some(if is_block {
                    value
                } else {
                    format!("{value}\n")
                })
            }
            other => return Err(format!("{file}:{lineno}: unknown key {other}")),
        }
    }
    for c in &cases {
        if c.prog.is_none() && c.args.is_empty() {
            return Err(format!("{}: no PROG and no ARGS", c.id()));
        }
        if c.expect.is_none()
            && c.expect_regex.is_empty()
            && c.expect_not_regex.is_empty()
            && c.stderr_regex.is_empty()
            && c.stderr_not_regex.is_empty()
            && c.background_exit.is_none()
            && !c.json
            && c.strace.is_none()
            && c.outfile_expect.is_none()
        {
            return Err(format!("{}: no expectation", c.id()));
        }
    }
    Ok(cases)
}

fn cases_dir() -> PathBuf {
    test_support::workspace_root().join("tests/probe")
}

fn load_all_cases() -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("tests/probe exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "case"))
        .collect();
    files.sort();
    let mut all = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&f).expect("read case file");
        match parse_cases(&name, &text) {
            Ok(c) => all.extend(c),
            Err(e) => panic!("bad case file: {e}"),
        }
    }
    all
}

/// Compiles every `tests/probe/workloads/*.c` into `dir`, returning name → binary path.
fn build_workloads(dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    assert!(
        test_support::require_tool("gcc"),
        "the workloads need gcc (scripts/install-deps.sh)"
    );
    let src_dir = cases_dir().join("workloads");
    let mut srcs: Vec<PathBuf> = std::fs::read_dir(&src_dir)
        .expect("tests/probe/workloads exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    srcs.sort();
    for src in srcs {
        let name = src.file_stem().unwrap().to_string_lossy().to_string();
        let bin = dir.join(&name);
        let st = Command::new("gcc")
            .args(["-O1", "-Wall", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .expect("run gcc (install build-essential)");
        assert!(st.success(), "gcc failed on {}", src.display());
        out.insert(name, bin);
    }
    out
}

/// A deterministic 256 KiB text file (for gzip and friends).
fn write_data_file(path: &Path) {
    let mut s = String::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while s.len() < 256 * 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let _ = writeln!(s, "line {} value {} word{}", s.len(), x % 100_000, x % 37);
    }
    std::fs::write(path, s).expect("write data file");
}

/// What one case runs with.
struct Ctx<'a> {
    bin: &'a Path,
    workloads: &'a BTreeMap<String, PathBuf>,
    /// The running case's BACKGROUND process id.
    bgpid: std::cell::Cell<Option<u32>>,
}

/// What every case shares: the binary and the workloads, compiled on first use.
struct Shared {
    workloads: OnceLock<BTreeMap<String, PathBuf>>,
    dir: tempfile::TempDir,
}

fn substitute(s: &str, ctx: &Ctx<'_>, tmp: &Path) -> Result<String, String> {
    let mut out = s.replace("{tmp}", &tmp.to_string_lossy());
    if let Some(pid) = ctx.bgpid.get() {
        out = out.replace("{bgpid}", &pid.to_string());
    }
    out = out.replace(
        "{workloads}",
        &cases_dir().join("workloads").to_string_lossy(),
    );
    out = out.replace("{data}", &tmp.join("data.txt").to_string_lossy());
    out = out.replace("{prog}", &tmp.join("prog.d").to_string_lossy());
    while let Some(start) = out.find("{bin:") {
        let end = out[start..].find('}').ok_or("unterminated {bin:")? + start;
        let name = &out[start + 5..end];
        let path = ctx
            .workloads
            .get(name)
            .ok_or_else(|| format!("no workload {name}.c"))?;
        out.replace_range(start..=end, &path.to_string_lossy());
    }
    Ok(out)
}

/// Removes what `cargo test` adds to the environment that changes a workload's behaviour:
/// `LD_LIBRARY_PATH` (cargo's target directories) makes the dynamic loader of every workload
/// probe extra paths, i.e. make extra `openat` calls that a case would see.
fn clean_env(cmd: &mut Command) {
    cmd.env_remove("LD_LIBRARY_PATH");
}

/// Output of one run.
struct Run {
    status: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

/// Runs `cmd` with a deadline, capturing stdout and stderr. On timeout the child (only it, by
/// its own handle) is killed.
fn run_with_timeout(
    mut cmd: Command,
    timeout: Duration,
    sigint_after: Option<Duration>,
) -> Result<Run, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let mut timed_out = false;
    let mut sigint = sigint_after;
    let status = loop {
        if let Some(after) = sigint
            && start.elapsed() >= after
        {
            // Ctrl-C for our own child only, by its pid.
            let _ = Command::new("kill")
                .arg("-INT")
                .arg(child.id().to_string())
                .status();
            sigint = None;
        }
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if start.elapsed() > timeout => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().map_err(|e| format!("wait: {e}"))?;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    };
    let stdout = String::from_utf8_lossy(&t_out.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
    Ok(Run {
        status: status.code(),
        stdout,
        stderr,
        timed_out,
    })
}

/// Shows where two texts first differ, with invisible characters made visible.
fn diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.split_inclusive('\n').collect();
    let a: Vec<&str> = actual.split_inclusive('\n').collect();
    let mut s = String::new();
    let first = (0..e.len().max(a.len()))
        .find(|&i| e.get(i) != a.get(i))
        .unwrap_or(0);
    let _ = writeln!(s, "first difference at line {}:", first + 1);
    let _ = writeln!(
        s,
        "  expected: {:?}",
        e.get(first).copied().unwrap_or("<end of output>")
    );
    let _ = writeln!(
        s,
        "  actual:   {:?}",
        a.get(first).copied().unwrap_or("<end of output>")
    );
    let _ = writeln!(
        s,
        "--- expected stdout\n{expected}--- actual stdout\n{actual}---"
    );
    s
}

/// Checks one `--json` line against the schemas of `docs/probe-json.md`.
fn check_json_line(line: &str) -> Result<(), String> {
    use serde_json::Value as J;
    let v: J = serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line:?}"))?;
    let obj = v
        .as_object()
        .ok_or_else(|| format!("not a JSON object: {line:?}"))?;
    let need = |k: &str| {
        obj.get(k)
            .ok_or_else(|| format!("missing {k:?} in {line:?}"))
    };
    let is_int = |v: &J| v.is_i64() || v.is_u64();
    let check_probe = |p: &J| -> Result<(), String> {
        let p = p.as_object().ok_or("probe is not an object")?;
        if !p.get("id").is_some_and(is_int) {
            return Err(format!("probe.id is not an integer in {line:?}"));
        }
        for k in ["provider", "module", "function", "name"] {
            if !p.get(k).is_some_and(J::is_string) {
                return Err(format!("probe.{k} is not a string in {line:?}"));
            }
        }
        Ok(())
    };
    match need("type")?.as_str() {
        Some("record") => {
            if !is_int(need("cpu")?) {
                return Err(format!("cpu is not an integer: {line:?}"));
            }
            check_probe(need("probe")?)?;
            let ts = need("timestamp_ns")?;
            if !(ts.is_null() || is_int(ts)) {
                return Err(format!("timestamp_ns: {line:?}"));
            }
            for item in need("data")?.as_array().ok_or("data is not an array")? {
                match item.get("action").and_then(J::as_str) {
                    Some("trace") if item.get("value").is_some() => {}
                    Some("printf")
                        if item.get("text").is_some_and(J::is_string)
                            && item.get("format").is_some_and(J::is_string)
                            && item.get("args").is_some_and(J::is_array) => {}
                    Some("exit") if item.get("status").is_some_and(is_int) => {}
                    _ => return Err(format!("bad data item {item} in {line:?}")),
                }
            }
        }
        Some("aggregation") => {
            if !need("name")?.is_string()
                || !need("params")?.is_object()
                || !is_int(need("normal")?)
            {
                return Err(format!("bad aggregation header: {line:?}"));
            }
            let func = need("function")?.as_str().unwrap_or("");
            let dist = matches!(func, "quantize" | "lquantize" | "llquantize");
            if !matches!(func, "count" | "sum" | "avg" | "min" | "max" | "stddev") && !dist {
                return Err(format!("unknown function {func:?}"));
            }
            for e in need("entries")?
                .as_array()
                .ok_or("entries is not an array")?
            {
                if !e.get("keys").is_some_and(J::is_array) {
                    return Err(format!("entry without keys: {e}"));
                }
                let val = e
                    .get("value")
                    .ok_or_else(|| format!("entry without value: {e}"))?;
                if dist {
                    if !val.is_null() {
                        return Err(format!("distribution value must be null: {e}"));
                    }
                    for b in e
                        .get("buckets")
                        .and_then(J::as_array)
                        .ok_or_else(|| format!("no buckets: {e}"))?
                    {
                        let ok = ["min", "max"]
                            .iter()
                            .all(|k| b.get(*k).is_some_and(|x| x.is_null() || is_int(x)))
                            && b.get("count").is_some_and(is_int);
                        if !ok {
                            return Err(format!("bad bucket {b}"));
                        }
                    }
                } else if !is_int(val) {
                    return Err(format!("value is not an integer: {e}"));
                }
                if matches!(func, "avg" | "stddev")
                    && !(e.get("count").is_some_and(is_int) && e.get("sum").is_some_and(is_int))
                {
                    return Err(format!("{func} entry without count/sum: {e}"));
                }
            }
        }
        Some("drops") => {
            if !need("kind")?.is_string()
                || !is_int(need("count")?)
                || !need("message")?.is_string()
            {
                return Err(format!("bad drops line: {line:?}"));
            }
        }
        Some("error") => {
            check_probe(need("probe")?)?;
            if !need("message")?.is_string() {
                return Err(format!("bad error line: {line:?}"));
            }
        }
        Some("exit") => {
            let reason = need("reason")?.as_str().unwrap_or("");
            if !matches!(
                reason,
                "exit" | "interrupted" | "target_exited" | "buffer_full"
            ) {
                return Err(format!("bad exit reason: {line:?}"));
            }
            let status = need("status")?;
            if !(status.is_null() || is_int(status)) {
                return Err(format!("bad exit status: {line:?}"));
            }
        }
        other => return Err(format!("unknown type {other:?} in {line:?}")),
    }
    // The one schema: every line is a serialized `probe_format::event::Event`.
    serde_json::from_str::<probe_format::event::Event>(line)
        .map_err(|e| format!("not an Event ({e}): {line:?}"))?;
    Ok(())
}

/// `name count` lines of a printed `@[probefunc] = count()` aggregation.
fn parse_count_table(out: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in out.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if let [name, n] = w.as_slice()
            && let Ok(n) = n.parse::<u64>()
        {
            m.insert((*name).to_string(), n);
        }
    }
    m
}

/// Calls per syscall from `strace -f -c` output.
fn parse_strace_table(out: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in out.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() < 5 || w[0].starts_with('-') || w[0] == "%" {
            continue;
        }
        let name = w[w.len() - 1];
        if name == "total" {
            continue;
        }
        if let Ok(n) = w[3].parse::<u64>() {
            m.insert(name.to_string(), n);
        }
    }
    m
}

/// The `sightline probe` command line of a case (run in `tdir`).
fn build_command(case: &Case, ctx: &Ctx<'_>, tdir: &Path) -> Result<Command, String> {
    let mut cmd = if case.as_nobody {
        // The unprivileged user must be able to reach the binary and the case directory.
        use std::os::unix::fs::PermissionsExt;
        let bin = tdir.join("sightline");
        std::fs::copy(ctx.bin, &bin).map_err(|e| format!("copy binary: {e}"))?;
        for p in [tdir, bin.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| e.to_string())?;
        }
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(bin);
        c
    } else {
        Command::new(ctx.bin)
    };
    clean_env(&mut cmd);
    cmd.envs(case.env.iter().map(|(k, v)| (k, v)));
    cmd.current_dir(tdir).arg("probe");
    if let Some(p) = &case.prog {
        std::fs::write(tdir.join("prog.d"), substitute(p, ctx, tdir)?)
            .map_err(|e| e.to_string())?;
        cmd.arg("-s").arg(tdir.join("prog.d"));
    }
    for a in &case.args {
        cmd.arg(substitute(a, ctx, tdir)?);
    }
    Ok(cmd)
}

/// Runs one case; `Ok` carries a note for the report (what a STRACE comparison compared), `Err`
/// describes the failure.
fn run_case(case: &Case, ctx: &Ctx<'_>) -> Result<String, String> {
    // The tools a case runs besides sightline: skipped without them (a failure under CI=true).
    let tools = [
        (case.strace.is_some(), "strace"),
        (case.as_nobody, "setpriv"),
    ];
    if !tools
        .iter()
        .all(|&(needed, tool)| !needed || test_support::require_tool(tool))
    {
        return Ok("; skipped: a tool is missing".into());
    }
    let mut note = String::new();
    let tmp = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let tdir = tmp.path();
    write_data_file(&tdir.join("data.txt"));
    let uses = |needle: &str| {
        case.prog.as_deref().unwrap_or("").contains(needle)
            || case.args.iter().any(|a| a.contains(needle))
            || case.strace.as_deref().unwrap_or("").contains(needle)
    };
    if uses("{data}.gz") || uses("{data}") && case.strace.is_some() {
        // Both runs of a STRACE case must find the same files: the .gz exists before either.
        let st = Command::new("gzip")
            .arg("-k")
            .arg(tdir.join("data.txt"))
            .status()
            .map_err(|e| format!("gzip: {e}"))?;
        if !st.success() {
            return Err("gzip -k data.txt failed".into());
        }
    }
    let mut background = None;
    if let Some(bg) = &case.background {
        let words = shell_words(&substitute(bg, ctx, tdir)?)?;
        let (prog, rest) = words.split_first().ok_or("empty BACKGROUND")?;
        let mut c = Command::new(prog);
        clean_env(&mut c);
        let child = c
            .args(rest)
            .current_dir(tdir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("BACKGROUND {bg}: {e}"))?;
        ctx.bgpid.set(Some(child.id()));
        background = Some(child);
    }
    // No early return until the background process is reaped.
    let run = build_command(case, ctx, tdir).and_then(|cmd| {
        run_with_timeout(
            cmd,
            Duration::from_secs(case.timeout),
            case.sigint_after.map(Duration::from_secs_f64),
        )
    });
    let mut bg_problem = None;
    if let Some(mut bg) = background {
        // Our own BACKGROUND child, by its handle.
        let deadline = Instant::now() + Duration::from_secs(case.timeout);
        let status = loop {
            match bg.try_wait() {
                Ok(Some(st)) => break Some(st),
                Ok(None) if case.background_exit.is_some() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => break None,
            }
        };
        if status.is_none() {
            let _ = bg.kill();
            let _ = bg.wait();
        }
        if let Some(want) = case.background_exit {
            match status {
                Some(st) if st.code() == Some(want) => {}
                Some(st) => {
                    bg_problem = Some(format!(
                        "BACKGROUND process ended with {st}, expected exit status {want}"
                    ))
                }
                None => {
                    bg_problem = Some(format!(
                        "BACKGROUND process still running after {} s (stopped?)",
                        case.timeout
                    ))
                }
            }
        }
        ctx.bgpid.set(None);
    }
    let run = run?;
    let mut problems: Vec<String> = bg_problem.into_iter().collect();
    if run.timed_out {
        problems.push(format!("timed out after {} s (killed)", case.timeout));
    }
    if run.status != Some(case.exit) {
        problems.push(format!(
            "exit status {:?}, expected {}",
            run.status, case.exit
        ));
    }
    if let Some(exp) = &case.expect
        && *exp != run.stdout
    {
        problems.push(format!("stdout differs\n{}", diff(exp, &run.stdout)));
    }
    for re in &case.expect_regex {
        let r = regex::RegexBuilder::new(re.trim_end_matches('\n'))
            .multi_line(true)
            .build()
            .map_err(|e| e.to_string())?;
        if !r.is_match(&run.stdout) {
            problems.push(format!("stdout does not match /{}/", re.trim_end()));
        }
    }
    for re in &case.expect_not_regex {
        let r = regex::RegexBuilder::new(re.trim_end_matches('\n'))
            .multi_line(true)
            .build()
            .map_err(|e| e.to_string())?;
        if r.is_match(&run.stdout) {
            problems.push(format!("stdout matches /{}/ and must not", re.trim_end()));
        }
    }
    for re in &case.stderr_regex {
        let r = regex::RegexBuilder::new(re.trim_end_matches('\n'))
            .multi_line(true)
            .build()
            .map_err(|e| e.to_string())?;
        if !r.is_match(&run.stderr) {
            problems.push(format!("stderr does not match /{}/", re.trim_end()));
        }
        for re in &case.stderr_not_regex {
            let r = regex::RegexBuilder::new(re.trim_end_matches('\n'))
                .multi_line(true)
                .build()
                .map_err(|e| e.to_string())?;
            if r.is_match(&run.stderr) {
                problems.push(format!("stderr matches /{}/ and must not", re.trim_end()));
            }
        }
    }
    if let Some(exp) = &case.outfile_expect {
        let got = std::fs::read_to_string(tdir.join("out.txt"))
            .unwrap_or_else(|e| format!("<cannot read out.txt: {e}>"));
        if *exp != got {
            problems.push(format!("out.txt differs\n{}", diff(exp, &got)));
        }
    }
    if case.json {
        if run.stdout.is_empty() {
            problems.push("no JSON lines on stdout".to_string());
        }
        for l in run.stdout.lines() {
            if let Err(e) = check_json_line(l) {
                problems.push(format!("JSON: {e}"));
                break;
            }
        }
    }
    if let Some(st) = &case.strace {
        let words = shell_words(&substitute(st, ctx, tdir)?)?;
        let out_file = tdir.join("strace.txt");
        let mut c = Command::new("strace");
        clean_env(&mut c);
        c.current_dir(tdir)
            .args(["-f", "-c", "-o"])
            .arg(&out_file)
            .arg("--")
            .args(&words);
        let r = run_with_timeout(c, Duration::from_secs(case.timeout), None)?;
        if r.status != Some(0) {
            problems.push(format!("strace run failed: {:?}: {}", r.status, r.stderr));
        } else {
            let text = std::fs::read_to_string(&out_file).map_err(|e| e.to_string())?;
            let mut want = parse_strace_table(&text);
            let mut got = parse_count_table(&run.stdout);
            for n in &case.strace_ignore {
                want.remove(n);
                got.remove(n);
            }
            if want.is_empty() {
                problems.push(format!("strace counted nothing:\n{text}"));
            }
            note = format!(
                "; compared {} syscalls, {} calls, with strace -f -c",
                want.len(),
                want.values().sum::<u64>()
            );
            if want != got {
                let mut d = String::new();
                for k in want
                    .keys()
                    .chain(got.keys())
                    .collect::<std::collections::BTreeSet<_>>()
                {
                    let (w, g) = (want.get(k), got.get(k));
                    if w != g {
                        let _ = writeln!(d, "  {k}: strace {w:?}, sightline {g:?}");
                    }
                }
                problems.push(format!("syscall counts differ from strace -f -c:\n{d}"));
            }
        }
    }
    if problems.is_empty() {
        Ok(note)
    } else {
        let shown_stdout = if case.expect.as_ref().is_some_and(|e| *e != run.stdout) {
            String::new() // already shown by the diff
        } else {
            format!(
                "--- stdout\n{}{}",
                run.stdout,
                if run.stdout.ends_with('\n') || run.stdout.is_empty() {
                    ""
                } else {
                    "\n"
                }
            )
        };
        Err(format!(
            "{}\n{shown_stdout}--- stderr\n{}---",
            problems.join("\n"),
            if run.stderr.is_empty() {
                "(empty)\n".to_string()
            } else {
                run.stderr.clone()
            }
        ))
    }
}

/// The case files parse, every case has an expectation, and placeholders name existing
/// workloads (no privileges needed).
fn case_files_are_well_formed() {
    let cases = load_all_cases();
    assert!(
        cases.len() >= 20,
        "expected the case corpus, found {} cases",
        cases.len()
    );
    let workloads: Vec<String> = std::fs::read_dir(cases_dir().join("workloads"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    for c in &cases {
        let all = format!(
            "{} {} {}",
            c.prog.clone().unwrap_or_default(),
            c.args.join(" "),
            c.strace.clone().unwrap_or_default()
        );
        let mut rest = all.as_str();
        while let Some(i) = rest.find("{bin:") {
            let end = rest[i..].find('}').expect("closed {bin:") + i;
            let name = &rest[i + 5..end];
            assert!(
                workloads.iter().any(|w| w == name),
                "{}: no workload {name}.c",
                c.id()
            );
            rest = &rest[end..];
        }
        for re in c
            .expect_regex
            .iter()
            .chain(&c.expect_not_regex)
            .chain(&c.stderr_regex)
        {
            regex::Regex::new(re.trim_end_matches('\n'))
                .unwrap_or_else(|e| panic!("{}: bad regex: {e}", c.id()));
        }
    }
}

/// The harness's own parsers: case files, strace's table, the count table, JSON lines.
fn harness_parsers() {
    assert_eq!(
        shell_words(r#"-q -c '{bin:x} 7' -n "a \"b\"" z"#).unwrap(),
        vec!["-q", "-c", "{bin:x} 7", "-n", "a \"b\"", "z"]
    );
    let cases = parse_cases(
        "t.case",
        "# c\nNAME one\nPROG BEGIN { exit(0); }\nEXPECT <<E\n\n  a  \nE\nXFAIL later\n",
    )
    .unwrap();
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0].expect.as_deref(), Some("\n  a  \n"));
    assert_eq!(cases[0].xfail.as_deref(), Some("later"));
    assert!(
        parse_cases("t.case", "NAME x\nPROG y\n").is_err(),
        "a case without expectation is rejected"
    );
    let st = "% time     seconds  usecs/call     calls    errors syscall\n------ ----------- ----------- --------- --------- ----------------\n  0.00    0.000000           0         3           read\n  0.00    0.000000           0         1         1 access\n------ ----------- ----------- --------- --------- ----------------\n100.00    0.000000           0        4         1 total\n";
    let t = parse_strace_table(st);
    assert_eq!(t.get("read"), Some(&3));
    assert_eq!(t.get("access"), Some(&1));
    assert_eq!(t.len(), 2);
    let c = parse_count_table(
        "\n  read                                                              3\n  access                                                            1\n",
    );
    assert_eq!(c, t);
    assert!(check_json_line(r#"{"type":"aggregation","name":"","function":"count","params":{},"normal":1,"entries":[{"keys":[],"value":3}]}"#).is_ok());
    assert!(check_json_line(r#"{"type":"aggregation","name":"","function":"quantize","params":{},"normal":1,"entries":[{"keys":[],"value":3}]}"#).is_err());
    assert!(check_json_line("not json").is_err());
}

/// Runs one case as a trial: passes, fails with the case's report, or (XFAIL) passes as an expected
/// failure, printed as such; an XFAIL case that passes fails, so that its `XFAIL` line gets removed.
fn run_trial(case: &Case, shared: &Shared) -> Result<(), Failed> {
    let ctx = Ctx {
        bin: Path::new(env!("CARGO_BIN_EXE_sightline")),
        workloads: shared
            .workloads
            .get_or_init(|| build_workloads(shared.dir.path())),
        bgpid: std::cell::Cell::new(None),
    };
    let start = Instant::now();
    let result = run_case(case, &ctx);
    let secs = start.elapsed().as_secs_f64();
    match (result, &case.xfail) {
        (Ok(note), None) => {
            if !note.is_empty() {
                eprintln!("{} ({secs:.2} s{note})", case.id());
            }
            Ok(())
        }
        (Err(e), Some(reason)) => {
            let first = e.lines().next().unwrap_or("");
            eprintln!("expected failure {} (XFAIL: {reason}): {first}", case.id());
            Ok(())
        }
        (Ok(_), Some(reason)) => Err(format!(
            "{}: passes although marked XFAIL ({reason}); remove the XFAIL line",
            case.id()
        )
        .into()),
        (Err(e), None) => Err(format!("{} ({secs:.2} s)\n{e}", case.id()).into()),
    }
}

/// A plain test function as a trial (a panic is its failure).
fn unit(name: &str, f: fn()) -> Trial {
    Trial::test(name, move || {
        f();
        Ok(())
    })
}

/// Every case is its own trial (libtest-mimic), named `FILE::NAME` after its case file's stem and
/// its `NAME`, so that a failure names the case and `cargo test --test probe_cases -- NAME`
/// selects cases; `PROBE_CASES=substring` also selects by `file:line: name`, and a `PROBE_CASES`
/// that matches no case fails. Cases run one at a time unless `--test-threads` says otherwise: they
/// share the kernel's probes and the machine's CPUs, which some expectations count.
fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = Some(1);
    }
    let filter = std::env::var("PROBE_CASES").ok().filter(|f| !f.is_empty());
    let cases: Vec<Case> = load_all_cases()
        .into_iter()
        .filter(|c| filter.as_deref().is_none_or(|f| c.id().contains(f)))
        .collect();
    if let Some(f) = &filter
        && cases.is_empty()
    {
        eprintln!("error: PROBE_CASES={f:?} matches no case (a case's id is `file:line: name`)");
        return ExitCode::FAILURE;
    }
    let privileged = args.list
        || test_support::privileged("runs sightline probe, which loads and attaches BPF programs");
    let shared = Arc::new(Shared {
        workloads: OnceLock::new(),
        dir: tempfile::tempdir().expect("tempdir for the workloads"),
    });
    let mut trials = vec![
        unit("case_files_are_well_formed", case_files_are_well_formed),
        unit("harness_parsers", harness_parsers),
    ];
    for case in cases {
        let shared = Arc::clone(&shared);
        let name = case.trial_name();
        trials.push(
            Trial::test(name, move || run_trial(&case, &shared)).with_ignored_flag(!privileged),
        );
    }
    libtest_mimic::run(&args, trials).exit_code()
}
