//! `sightline probe -A` (install an anonymous enabling), `-a` (claim it) and `--recover` (print
//! the buffers of a ring-policy run that died): BPF objects pinned under
//! `/sys/fs/bpf/sightline/` (probe_runtime::pin; docs/probe-pinning.md).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use probe_runtime::pin::{self, Manifest, ScriptInputs};
use probe_runtime::run::{Consumer, RunConfig};
use probe_runtime::session::Session;
use sightline_probe::Program;

/// The `-x` option that keeps the anonymous enabling after `-a` has printed it.
pub const KEEPANON: &str = "keepanon";

/// `-A`: loads `program` (compiled system-wide under `bufpolicy=ring`), attaches it through
/// BPF links, pins everything in the anonymous directory with its manifest (`inputs`) and
/// returns; the probes keep firing. `boot_unit`: also write the systemd unit there (`-`:
/// stdout) re-installing the enabling at boot with `unit_args`.
pub fn install(
    program: &Program,
    inputs: ScriptInputs,
    verbose: bool,
    boot_unit: Option<&Path>,
    unit_args: &[String],
) -> anyhow::Result<ExitCode> {
    let dir = pin::anon_dir();
    if dir.exists() {
        bail!(
            "an anonymous enabling is installed already ({}): claim it with `sightline probe -a` first",
            dir.display()
        );
    }
    // The unit first: a path that cannot be written leaves nothing installed.
    if let Some(path) = boot_unit {
        let exe = std::env::current_exe().context("finding the sightline binary")?;
        let text = pin::boot_unit(&exe, unit_args);
        if path == Path::new("-") {
            print!("{text}");
        } else {
            std::fs::write(path, &text)
                .with_context(|| format!("--boot-unit: writing {}", path.display()))?;
            eprintln!(
                "sightline: wrote {} (enable it with `systemctl enable {}`)",
                path.display(),
                path.file_name()
                    .map_or_else(|| "sightline-anon.service".into(), |n| n.to_string_lossy())
            );
        }
    }
    pin::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let cfg = RunConfig {
        quiet: true,
        verbose,
        ..RunConfig::default()
    };
    let mut out = std::io::sink();
    let mut err = std::io::stderr();
    let installed = Consumer::new(
        program.checked(),
        program.layout().clone(),
        cfg,
        &mut out,
        &mut err,
    )
    .and_then(|mut c| c.install_anonymous(&dir, inputs));
    match installed {
        Ok(m) => {
            eprintln!(
                "sightline: anonymous enabling installed in {} ({} maps, {} programs, {} links pinned); claim it with `sightline probe -a`",
                dir.display(),
                m.maps.iter().filter(|m| m.file.is_some()).count(),
                m.programs.iter().flatten().count(),
                m.links.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            // Nothing half-installed stays behind: the unpinned links detach.
            let _ = pin::remove_dir(&dir);
            Err(anyhow::Error::new(e).context("-A: installing the anonymous enabling"))
        }
    }
}

/// How a claim prints.
#[derive(Debug, Clone, Copy)]
pub struct ClaimOptions {
    /// `-q`.
    pub quiet: bool,
    /// `--json`.
    pub json: bool,
    /// `-v`.
    pub verbose: bool,
}

/// Compiles the manifest's script again (system-wide) and checks it against the pinned layout.
fn recompile(m: &Manifest, dir: &Path) -> anyhow::Result<probe_runtime::compile::Compiled> {
    let map = m.script.source_map();
    let program = probe_runtime::compile::parse(&map)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("{}: parsing the pinned script again", dir.display()))?;
    let catalog = probe_runtime::catalog::system(probe_user::provider::UserSites::new());
    let compiled = probe_runtime::compile::compile(&program, &catalog, &m.script.compile_options())
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("{}: compiling the pinned script again", dir.display()))?;
    m.check_layout(&compiled.layout).map_err(|why| {
        anyhow::anyhow!(
            "{}: the pinned program cannot be read by this sightline: {why}",
            dir.display()
        )
    })?;
    Ok(compiled)
}

/// Prints a pinned directory's buffers (END after them when `run_end`); the caller removes it.
/// `ready` runs once the script compiled again and the pinned objects are open, before a
/// byte is read (the claim detaches the probes there: nothing is lost when it cannot read).
fn print_pinned(
    dir: &Path,
    m: &Manifest,
    opts: ClaimOptions,
    run_end: bool,
    out: &mut dyn Write,
    ready: &mut dyn FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let compiled = recompile(m, dir)?;
    let session = Session::open_pinned(compiled.layout, dir, &m.pinned())
        .with_context(|| format!("opening the objects pinned in {}", dir.display()))?;
    ready()?;
    let n = compiled.checked.clauses.len();
    let cfg = RunConfig {
        quiet: opts.quiet || opts.json || compiled.checked.options.quiet,
        json: opts.json,
        verbose: opts.verbose,
        ring_last_clauses: (n.saturating_sub(m.script.ring_bypass_last)..n).collect(),
        ..RunConfig::default()
    };
    let mut err = std::io::stderr();
    let mut c = Consumer::from_session(&compiled.checked, session, cfg, out, &mut err);
    c.claim(run_end)
        .with_context(|| format!("reading the buffers pinned in {}", dir.display()))?;
    Ok(())
}

/// `-a`: claims the anonymous enabling: detaches its probes (removes the pinned links), prints
/// its buffered records, runs END, prints the aggregations, and removes the pins; with
/// `keep` (`-x keepanon`) prints without detaching, running END or removing anything.
pub fn claim(opts: ClaimOptions, keep: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let dir = pin::anon_dir();
    if !dir.join(pin::MANIFEST).exists() {
        bail!(
            "-a: no anonymous enabling is installed ({} has none; install one with `sightline probe -A -s SCRIPT`)",
            dir.display()
        );
    }
    let m = Manifest::read(&dir)?;
    let mut detach = || -> anyhow::Result<()> {
        if !keep {
            // The probes stop first, so the buffers stand still while they print.
            for l in &m.links {
                let p = dir.join(l);
                std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
            }
        }
        Ok(())
    };
    print_pinned(&dir, &m, opts, !keep, out, &mut detach)?;
    out.flush()?;
    if !keep {
        pin::remove_dir(&dir)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--recover`: prints the buffers of each ring-policy run that died (its `run-PID` directory
/// outlived its process), then removes them. Fails when there is none, or when one cannot be
/// read (another Sightline version, say): that one is kept, for the next ring-policy run to
/// remove.
pub fn recover(opts: ClaimOptions, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let dead = pin::dead_runs();
    if dead.is_empty() {
        eprintln!(
            "sightline: --recover: no buffers of a dead run under {} (a run pins them only under -x bufpolicy=ring)",
            pin::ROOT
        );
        return Ok(ExitCode::FAILURE);
    }
    let mut failed = false;
    for (pid, dir) in dead {
        if !opts.quiet && !opts.json {
            eprintln!(
                "sightline: recovering the buffers of dead run {pid} ({})",
                dir.display()
            );
        }
        let r = Manifest::read(&dir)
            .map_err(anyhow::Error::new)
            .and_then(|m| print_pinned(&dir, &m, opts, false, out, &mut || Ok(())));
        out.flush()?;
        match r {
            Ok(()) => pin::remove_dir(&dir)?,
            Err(e) => {
                eprintln!("sightline: --recover: {e:#}");
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Removes the `run-PID` directories of dead runs, saying so on stderr (a new ring-policy run
/// does this, so stale buffers never pile up; `--recover` prints them first).
pub fn remove_dead_runs() {
    for (pid, dir) in pin::dead_runs() {
        match pin::remove_dir(&dir) {
            Ok(()) => eprintln!(
                "sightline: removed the buffers pinned by dead run {pid} ({}; `sightline probe --recover` prints them before a new ring-policy run removes them)",
                dir.display()
            ),
            Err(e) => eprintln!(
                "sightline: warning: could not remove {}: {e:#}",
                dir.display()
            ),
        }
    }
}

/// The `sightline probe` arguments the boot unit runs after `-A`: this command line's, without
/// `-A`/`--boot-unit`, every `-s` path made absolute (the unit runs from `/`).
pub fn unit_args(argv: &[String]) -> Vec<String> {
    let start = argv.iter().position(|a| a == "probe").map_or(0, |i| i + 1);
    let mut out = Vec::new();
    let mut it = argv[start.min(argv.len())..].iter();
    let abs = |p: &str| -> String {
        std::fs::canonicalize(p)
            .unwrap_or_else(|_| PathBuf::from(p))
            .to_string_lossy()
            .into_owned()
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "-A" => {}
            "--boot-unit" => {
                it.next();
            }
            s if s.starts_with("--boot-unit=") => {}
            "-s" => {
                out.push("-s".into());
                if let Some(p) = it.next() {
                    out.push(abs(p));
                }
            }
            _ => out.push(a.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_args_drop_the_install_flags_and_keep_the_rest() {
        let argv: Vec<String> = [
            "sightline",
            "probe",
            "-A",
            "--boot-unit",
            "/tmp/u.service",
            "-s",
            "/etc/sightline/anon.d",
            "-x",
            "bufsize=1m",
            "42",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            unit_args(&argv),
            ["-s", "/etc/sightline/anon.d", "-x", "bufsize=1m", "42"]
        );
    }
}
