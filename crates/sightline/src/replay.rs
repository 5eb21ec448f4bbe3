//! `sightline record` and `sightline replay`, dispatched to the `replay` crate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use replay::replayer::HighWater;

/// Options of `sightline record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The recording directory to create (default: `./sightline-rec-N`, the first free N).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// The command to record and its arguments.
    #[arg(trailing_var_arg = true, required = true)]
    pub command: Vec<String>,
}

/// Options of `sightline replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// Show the recording (processes, events, sizes) instead of replaying it.
    #[arg(long)]
    pub info: bool,
    /// List every recorded event instead of replaying.
    #[arg(long)]
    pub dump: bool,
    /// Serve the GDB remote protocol on ADDR (`PORT` or `HOST:PORT`; a bare port listens on the
    /// loopback address) and wait for gdb (`target remote ADDR`) before replaying. Port 0 picks a
    /// free one (printed).
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["info", "dump", "gdb"])]
    pub gdbserver: Option<String>,
    /// Start gdb on the replay, already connected (the recorded executable loaded for symbols).
    #[arg(long, conflicts_with_all = ["info", "dump"])]
    pub gdb: bool,
    /// Replay to where the recording ends, then let the program run on live: its real files,
    /// pipes, sockets and our stdin/stdout/stderr (docs/replay-go-live.md). Same as
    /// `--go-live-at end`.
    #[arg(long, conflicts_with_all = ["go_live_at", "gdb", "gdbserver"])]
    pub go_live: bool,
    /// Replay to POINT, then go live: an event number shown by `--dump` (go live before it),
    /// `PID:N` (before the N-th system call of recorded process PID, from 1), or `end`.
    #[arg(long, value_name = "POINT", conflicts_with_all = ["gdb", "gdbserver"])]
    pub go_live_at: Option<replay::replayer::Point>,
    /// The recording directory.
    pub dir: PathBuf,
    /// With --gdb: more arguments for gdb (after `--`, e.g. `-- -batch -x cmds.gdb`).
    #[arg(last = true, requires = "gdb")]
    pub gdb_args: Vec<String>,
}

fn default_dir() -> PathBuf {
    (1..)
        .map(|n| PathBuf::from(format!("sightline-rec-{n}")))
        .find(|p| !p.exists())
        .expect("some name is free")
}

/// Runs `sightline record`: the program's exit code becomes ours, except that an incomplete
/// recording (e.g. the recording could not be written) exits 2.
pub fn record(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let dir = args.output.unwrap_or_else(default_dir);
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("{} exists and is not a directory", dir.display());
    }
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        anyhow::bail!("{} exists and is not empty", dir.display());
    }
    let opts = replay::recorder::RecordOptions {
        dir: dir.clone(),
        command: args.command,
    };
    let out = replay::recorder::record(&opts).context("record")?;
    eprintln!(
        "sightline: recorded {} events of {} process(es) in {} ({} bytes)",
        out.events,
        out.processes,
        dir.display(),
        out.stats.file_bytes
    );
    if let Some(why) = &out.incomplete {
        // The program ran to its end, but the recording cannot be replayed past this point: a
        // script must not take it for a good recording (exit 0).
        eprintln!(
            "sightline: the recording is incomplete: {why} (the program exited with {})",
            out.exit_code
        );
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::from(out.exit_code.clamp(0, 255) as u8))
}

/// Runs `sightline replay`: the recorded program's output is written again; its exit code is ours.
pub fn replay(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let rec = replay::format::Recording::open(&args.dir)
        .with_context(|| format!("reading recording {}", args.dir.display()))?;
    if args.info {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        print_info(&mut out, &args.dir, &rec)?;
        std::io::Write::flush(&mut out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.dump {
        use std::io::Write;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for (i, r) in rec.records.iter().enumerate() {
            writeln!(
                out,
                "{i:>8} pid {:>7}  {}",
                r.pid,
                replay::describe(&r.event)
            )?;
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.gdbserver.is_some() || args.gdb {
        return replay_under_gdb(&args, &rec);
    }
    let point = args
        .go_live_at
        .or(args.go_live.then_some(replay::replayer::Point::End));
    if let Some(point) = point {
        return go_live(&rec, point);
    }
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut out = stdout.lock();
    let mut err = stderr.lock();
    let outcome = replay::replayer::replay(&rec, &mut out, &mut err).context("replay")?;
    Ok(ExitCode::from(outcome.exit_code.clamp(0, 255) as u8))
}

/// The address `--gdbserver` listens on: `PORT` is `127.0.0.1:PORT`, else `HOST:PORT`.
fn gdbserver_addr(spec: &str) -> String {
    if spec.parse::<u16>().is_ok() {
        format!("127.0.0.1:{spec}")
    } else {
        spec.to_owned()
    }
}

/// Starts `gdb -q -ex 'target remote ADDR' ARGS EXE` *not* as our child: the replayer waits for
/// any child (`waitpid(-1)`) and must see only its tracees. A shell starts gdb in the background
/// (on our stdin, in our process group, so it owns the terminal as we do) and exits at once;
/// returns gdb's pid.
fn start_gdb(addr: &str, extra: &[String], exe: &str) -> anyhow::Result<u32> {
    let pidfile = std::env::temp_dir().join(format!("sightline-gdb-{}.pid", std::process::id()));
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"command -v gdb >/dev/null || exit 127; f=$1; shift; exec 3<&0; gdb "$@" <&3 3<&- & echo $! > "$f""#)
        .arg("sh")
        .arg(&pidfile)
        .arg("-q")
        .arg("-ex")
        .arg(format!("target remote {addr}"))
        .args(extra)
        .arg(exe)
        .status()
        .context("starting gdb")?;
    if st.code() == Some(127) {
        anyhow::bail!("gdb is not installed (--gdbserver serves any gdb)");
    }
    let pid = std::fs::read_to_string(&pidfile).unwrap_or_default();
    let _ = std::fs::remove_file(&pidfile);
    pid.trim().parse().context("starting gdb: no pid")
}

/// Waits until process `pid` (gdb, not our child) is gone or a zombie.
fn wait_for_gdb(pid: u32) {
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the command name in parentheses.
        let state = stat.rsplit_once(") ").map(|(_, r)| r.chars().next());
        if matches!(state, None | Some(Some('Z' | 'X'))) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `replay --gdbserver ADDR` / `replay --gdb`: waits for gdb, then replays under its control
/// (docs/replay-gdb.md). Our exit code is the replayed program's; with `--gdb`, gdb's is ignored
/// (gdb is waited for after the replay).
fn replay_under_gdb(
    args: &ReplayArgs,
    rec: &replay::format::Recording,
) -> anyhow::Result<ExitCode> {
    let addr = args
        .gdbserver
        .as_deref()
        .map_or_else(|| "127.0.0.1:0".to_owned(), gdbserver_addr);
    let listener =
        std::net::TcpListener::bind(&addr).with_context(|| format!("listening on {addr}"))?;
    let local = listener.local_addr()?;
    let mut gdb = None;
    if args.gdb {
        gdb = Some(start_gdb(
            &local.to_string(),
            &args.gdb_args,
            &rec.meta.path,
        )?);
    } else {
        eprintln!(
            "sightline: listening for gdb on {local}; connect with: gdb -ex 'target remote {local}' {}",
            rec.meta.path
        );
    }
    let (stream, peer) = listener.accept().context("waiting for gdb")?;
    if !peer.ip().is_loopback() {
        eprintln!("sightline: gdb connected from {peer}");
    }
    drop(listener);
    let mut server =
        replay::gdb::GdbServer::new(stream, rec.meta.path.clone(), Box::new(std::io::stderr()));
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut out = HighWater::new(stdout.lock());
    let mut err = HighWater::new(stderr.lock());
    let result = replay::replayer::replay_debugged(rec, &mut out, &mut err, &mut server);
    drop(server);
    if let Some(pid) = gdb {
        wait_for_gdb(pid);
    }
    if let Err(replay::Error::GoLive {
        rec_tid,
        thread_events,
    }) = result
    {
        // `monitor go-live`: replay again to that point in live mode (the output already written
        // is not written twice) and go live there; gdb has been disconnected (with --gdb, it
        // has ended, so the live program has the terminal to itself).
        let point = replay::replayer::go_live_point(rec, rec_tid, thread_events);
        let (written_out, written_err) = (out.high(), err.high());
        drop((out, err));
        return go_live_skipping(rec, point, written_out, written_err);
    }
    let outcome = result.context("replay")?;
    Ok(ExitCode::from(outcome.exit_code.clamp(0, 255) as u8))
}

/// `--go-live`/`--go-live-at`: replays to the point, goes live, reports what went live on stderr,
/// and waits for the first process to end (its exit code is ours).
fn go_live(
    rec: &replay::format::Recording,
    point: replay::replayer::Point,
) -> anyhow::Result<ExitCode> {
    go_live_skipping(rec, point, 0, 0)
}

/// [`go_live`], not writing the first `skip_out`/`skip_err` bytes of the replayed output (written
/// already by a debugged replay).
fn go_live_skipping(
    rec: &replay::format::Recording,
    point: replay::replayer::Point,
    skip_out: u64,
    skip_err: u64,
) -> anyhow::Result<ExitCode> {
    let live = {
        let stdout = std::io::stdout();
        let stderr = std::io::stderr();
        let mut out = HighWater::past(stdout.lock(), skip_out);
        let mut err = HighWater::past(stderr.lock(), skip_err);
        replay::replayer::go_live(rec, point, &mut out, &mut err).context("going live")?
    };
    let at = if live.plan.index >= rec.records.len() {
        "the end of the recording".to_string()
    } else {
        format!("event #{}", live.plan.index)
    };
    eprintln!(
        "sightline: replayed {} events, live at {at}: {}",
        live.events,
        if live.processes.is_empty() {
            "no process".to_string()
        } else {
            live.processes
                .iter()
                .map(|p| {
                    let id = if p.process == p.recorded {
                        "pid"
                    } else {
                        "tid"
                    };
                    let pid = if live.pid_namespace {
                        format!("{id} {} outside the replay's pid namespace", p.live)
                    } else {
                        format!("now {id} {}", p.live)
                    };
                    let who = if p.process == p.recorded {
                        format!("process {}", p.recorded)
                    } else {
                        format!("thread {} of process {}", p.recorded, p.process)
                    };
                    format!("{who} ({pid}, entering {})", p.at)
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    for n in &live.notes {
        eprintln!("sightline: {n}");
    }
    let code = live.wait().context("waiting for the live program")?;
    Ok(ExitCode::from(code.unwrap_or(0).clamp(0, 255) as u8))
}

fn print_info(
    o: &mut impl std::io::Write,
    dir: &Path,
    rec: &replay::format::Recording,
) -> std::io::Result<()> {
    use replay::format::Event;
    let m = &rec.meta;
    writeln!(o, "recording:   {}", dir.display())?;
    writeln!(o, "format:      version {}", m.version)?;
    writeln!(o, "command:     {}", command_line(&m.argv))?;
    writeln!(o, "executable:  {}", m.path)?;
    writeln!(o, "cwd:         {}", m.cwd)?;
    writeln!(
        o,
        "status:      {}{}",
        m.status,
        if rec.truncated {
            " (stream truncated)"
        } else {
            ""
        }
    )?;
    if let Some(c) = m.exit_code {
        writeln!(o, "exit code:   {c}")?;
    }
    writeln!(o, "cpuid fault: {}", m.cpuid_faulting)?;
    writeln!(
        o,
        "size:        {} bytes on disk, {} bytes decoded, {} chunks",
        rec.file_bytes, rec.raw_bytes, rec.chunks
    )?;
    let kept = replay::files::usage(dir);
    writeln!(
        o,
        "mapped files: {} kept, {} bytes ({} bytes of them hard links shared with the originals or other recordings)",
        kept.files, kept.bytes, kept.shared_bytes
    )?;
    let mut per_proc: BTreeMap<i32, (u64, u64, u64)> = BTreeMap::new();
    let mut per_call: BTreeMap<String, u64> = BTreeMap::new();
    let (mut buffered, mut batches, mut patches) = (0u64, 0u64, 0u64);
    for r in &rec.records {
        let e = per_proc.entry(r.pid).or_default();
        e.0 += 1;
        match &r.event {
            Event::Syscall(s) => {
                *per_call.entry(replay::syscalls::name(s.nr)).or_default() += 1;
                e.2 += s.writes.iter().map(|w| w.data.len() as u64).sum::<u64>();
            }
            Event::Signal { .. } => e.1 += 1,
            Event::Buffered(recs) => {
                batches += 1;
                buffered += recs.len() as u64;
                for b in recs {
                    *per_call.entry(replay::syscalls::name(b.nr)).or_default() += 1;
                    e.2 += b.data.len() as u64;
                }
            }
            Event::SyscallbufPatch { .. } => patches += 1,
            _ => {}
        }
    }
    writeln!(
        o,
        "events:      {} in {} process(es)",
        rec.records.len(),
        per_proc.len()
    )?;
    writeln!(
        o,
        "  {:>8} {:>9} {:>8} {:>12}",
        "pid", "events", "signals", "input bytes"
    )?;
    for (pid, (n, s, b)) in &per_proc {
        writeln!(o, "  {pid:>8} {n:>9} {s:>8} {b:>12}")?;
    }
    let groups = replay::format::thread_groups(&rec.records);
    let (mut switches, mut syncs) = (0u64, 0u64);
    for r in &rec.records {
        match r.event {
            Event::Switch { .. } => switches += 1,
            Event::SyncPoint { .. } => syncs += 1,
            _ => {}
        }
    }
    writeln!(o, "threads:     per process (first thread's pid: tids)")?;
    for (pid, tids) in &groups {
        let list: Vec<String> = tids.iter().map(|t| t.to_string()).collect();
        writeln!(o, "  {pid:>8} {} thread(s): {}", tids.len(), list.join(" "))?;
    }
    writeln!(
        o,
        "schedule:    {switches} switches, {syncs} forced sync points (see docs/recording-format.md, Threads)"
    )?;
    writeln!(
        o,
        "rseq:        refused with ENOSYS (glibc runs without it; sched_getcpu makes recorded getcpu calls)"
    )?;
    let mut calls: Vec<_> = per_call.into_iter().collect();
    calls.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    writeln!(
        o,
        "buffered:    {buffered} system calls in {batches} batches, {patches} patched libc sites (see docs/recording-format.md)"
    )?;
    writeln!(o, "system calls (trapped and buffered):")?;
    for (name, n) in calls {
        writeln!(o, "  {name:<20} {n}")?;
    }
    Ok(())
}

/// `argv` as a POSIX shell command line (`shlex` quoting), so `--info`'s command can be pasted back
/// into a shell. A recorded argument holds no NUL byte (execve(2) takes C strings), the one thing
/// shlex refuses to quote; should one appear, the words are joined unquoted.
fn command_line(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn info_quotes_arguments_like_a_shell() {
        let argv: Vec<String> = ["find", "/usr", "-name", "*.so*", "a b", "it's", ""]
            .map(String::from)
            .to_vec();
        let line = super::command_line(&argv);
        assert!(line.starts_with("find /usr -name '*.so*' "), "{line}");
        assert_eq!(shlex::split(&line), Some(argv));
    }
}
