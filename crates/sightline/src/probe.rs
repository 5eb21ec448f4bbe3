//! `sightline probe`: DTrace's command line (dtrace(1M)) over the probe pipeline:
//! probe-syntax (parse) → probe-sema (check against the kernel catalog) → probe-codegen (BPF) →
//! probe-runtime (load, attach, consume) → probe-format (output).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, bail};
use probe_runtime::catalog;
use probe_runtime::compile::CompileError;
use probe_runtime::run::{RunError, StopReason};
use probe_runtime::session::RuntimeError;
use probe_sema::{Catalog, ProbeCatalog, ProbeDescPattern, ProbeInfo};
use probe_syntax::SourceMap;
use probe_sys::os as sys;
use probe_user::held::{HeldCommand, HeldError};
use probe_user::provider::UserSites;
use sightline_probe::{self as probe_lib, PrintOptions, Script, Target};

/// Options of `sightline probe` (as dtrace(1M)).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  sightline probe -n 'syscall:::entry { @[execname] = count(); } tick-5s { exit(0); }'\n  sightline probe -c 'gzip -k file' -n 'syscall:::entry /pid == $target/ { @[probefunc] = count(); }'\n  sightline probe -l -P syscall\n  sightline probe -A -s /etc/sightline/anon.d --boot-unit /etc/systemd/system/sightline-anon.service   (later: sightline probe -a)"
)]
pub struct ProbeArgs {
    /// A probe clause or probe description, as in `dtrace -n` (repeatable).
    #[arg(short = 'n', value_name = "CLAUSE")]
    pub clauses: Vec<String>,
    /// A D script file (a `#!` first line is ignored).
    #[arg(short = 's', value_name = "FILE")]
    pub script: Vec<std::path::PathBuf>,
    /// Define `causal_task`, `causal_activity` and `causal_baggage["KEY"]` (Pivot Tracing: the
    /// causal task, activity label and baggage item KEY of the current thread) for the processes
    /// of this executable, which links the causal library (repeatable;
    /// docs/causal-accounting.md).
    #[arg(long, value_name = "EXE")]
    pub causal: Vec<std::path::PathBuf>,
    /// Run CMD (held until every probe is attached), set `$target` to its pid, and stop when it exits.
    #[arg(short = 'c', value_name = "CMD")]
    pub command: Option<String>,
    /// Set `$target` to PID and stop when that process exits.
    #[arg(short = 'p', value_name = "PID")]
    pub pid: Option<u32>,
    /// Quiet: print only explicit output (no probe lines), like `-x quiet`.
    #[arg(short = 'q')]
    pub quiet: bool,
    /// Flow indent: indent each function entry's line (`->`) and unindent at its return (`<-`),
    /// like `-x flowindent`.
    #[arg(short = 'F')]
    pub flowindent: bool,
    /// Write output to FILE instead of stdout.
    #[arg(short = 'o', value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// List the probes matching `-n`/`-P`/`-f`/`-m` (all probes when none is given).
    #[arg(short = 'l')]
    pub list: bool,
    /// Probes of this provider (enables `provider:::` or, with `-l`, lists them).
    #[arg(short = 'P', value_name = "PROVIDER")]
    pub providers: Vec<String>,
    /// Probes of this function (`::FUNC:`).
    #[arg(short = 'f', value_name = "FUNC")]
    pub functions: Vec<String>,
    /// Probes of this module (`:MOD::`).
    #[arg(short = 'm', value_name = "MODULE")]
    pub modules: Vec<String>,
    /// Set an option, as `#pragma D option` (d-reference.md § 9 says which are honoured):
    /// aggpack, aggrate, aggsize, aggsortkey, aggsortkeypos, aggsortpos, aggsortrev, agghist,
    /// aggzoom, amin, argref, bufpolicy, bufresize, bufsize, cleanrate, cpu, defaultargs, destructive,
    /// dynvarpolicy, dynvarsize, empty, encoding, flowindent, grabanon, jstackframes, jstackstrsize, nolibs,
    /// nspec, quiet, rawbytes, specsize, stackframes, stackindent, statusrate, strsize,
    /// switchrate, temporal, ustackframes, verbose, zdefs; and, with -a only, keepanon; and,
    /// system-wide, postmortem (print the ring, then the crash, when a process the predicates
    /// select dies of a core-dumping signal).
    #[arg(short = 'x', value_name = "OPT[=VAL]")]
    pub options: Vec<String>,
    /// Compile only: check the program and generate its BPF code, then exit without loading or
    /// attaching anything (dtrace -e).
    #[arg(short = 'e')]
    pub compile_only: bool,
    /// Show the generated program on stderr: every BPF program with its attach point and its
    /// instructions, in the verifier log's notation (dtrace -S shows its intermediate code).
    #[arg(short = 'S')]
    pub show_program: bool,
    /// Allow probe descriptions that match no probe (they are left out), like `-x zdefs`.
    #[arg(short = 'Z')]
    pub zero_matches: bool,
    /// Print the version of the D language and of Sightline, then exit (dtrace -V).
    #[arg(short = 'V')]
    pub version: bool,
    /// Allow destructive actions (`system()`, `raise()`, `stop()`), like `-x destructive`
    /// (dtrace -w).
    #[arg(short = 'w')]
    pub destructive: bool,
    /// Verbose: print the full BPF verifier log when a program is rejected; with `-l`, each
    /// probe's stability attributes and argument types (dtrace -l -v).
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Run the C preprocessor (`cpp`) over each `-s` script first (dtrace -C): `#include`,
    /// `#define`, `#if`; with `-I`, `-D`, `-U`, `-H`.
    #[arg(short = 'C')]
    pub cpp: bool,
    /// With -C: a directory searched for `#include` files (repeatable).
    #[arg(short = 'I', value_name = "DIR")]
    pub include: Vec<String>,
    /// With -C: define a macro, `NAME` or `NAME=VALUE` (repeatable).
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    pub define: Vec<String>,
    /// With -C: undefine a macro (repeatable).
    #[arg(short = 'U', value_name = "NAME")]
    pub undefine: Vec<String>,
    /// With -C: print the name of each file `#include`d, on stderr.
    #[arg(short = 'H')]
    pub show_includes: bool,
    /// Strict JSON Lines on stdout (records, aggregations, drops, errors); messages on stderr.
    #[arg(long)]
    pub json: bool,
    /// Anonymous tracing (dtrace -A): compile, load and attach the program system-wide, pin
    /// every map, program and link under /sys/fs/bpf/sightline/anon/ with the layout
    /// (JSON in the pinned map `layout`), and exit; the probes keep firing, records kept in the kernel
    /// (`bufpolicy=ring` is implied). Claim it with `-a` (docs/probe-pinning.md).
    #[arg(short = 'A', conflicts_with_all = ["command", "pid", "claim", "recover", "list"])]
    pub anonymous: bool,
    /// Claim the anonymous enabling (dtrace -a): stop its probes, print its buffered records,
    /// run END, print its aggregations as the script would at exit, and remove it (keep it,
    /// still tracing, with `-x keepanon`).
    #[arg(short = 'a', conflicts_with_all = ["command", "pid", "recover", "list"])]
    pub claim: bool,
    /// With -A: write a systemd unit (sightline-anon.service; `-` prints it) that installs the
    /// same enabling at boot, before sysinit.target, without default dependencies.
    #[arg(long, value_name = "PATH", requires = "anonymous")]
    pub boot_unit: Option<std::path::PathBuf>,
    /// Postmortem: print what ring-policy runs that died (`kill -9`) had buffered, from
    /// /sys/fs/bpf/sightline/run-PID/, then remove it.
    #[arg(long, conflicts_with_all = ["command", "pid", "list"])]
    pub recover: bool,
    /// Macro arguments `$1`..`$9`.
    #[arg(value_name = "ARG")]
    pub args: Vec<String>,
}

/// The clauses `-x bufpolicy=ring` with `-c`/`-p` adds: the target's death by a core-dumping
/// signal recorded with the fault address and the thread's user stack.
const FLIGHT_RECORDER: &str = include_str!("flight_recorder.d");
/// The source name of [`FLIGHT_RECORDER`] (in diagnostics; no "matched N probes" notice).
const FLIGHT_RECORDER_FILE: &str = "<flight recorder>";
/// How many clauses [`FLIGHT_RECORDER`] holds.
const FLIGHT_RECORDER_CLAUSES: usize = 2;

/// `-x postmortem`'s clauses: [`FLIGHT_RECORDER`]'s for any process `PM_PREDICATE` (replaced
/// by [`postmortem_predicate`]) selects, each ending the run with `exit(0)`.
const POSTMORTEM_RECORDER: &str = include_str!("postmortem.d");
/// The `-x` name of the system-wide crash report (docs/d-reference.md, "postmortem").
const POSTMORTEM: &str = "postmortem";

/// The processes `-x postmortem` reports the crash of: the user's clauses' predicates (their
/// source text, each in parentheses) joined with `||`; `1` (every process) when a clause has no
/// predicate. A predicate naming what `signal:::signal_deliver` lacks fails to compile there.
fn postmortem_predicate(program: &probe_syntax::ast::Program, map: &SourceMap) -> String {
    let mut parts = Vec::new();
    for c in program.clauses() {
        match &c.predicate {
            Some(p) => parts.push(format!("({})", map.slice(p.span))),
            None => return "1".into(),
        }
    }
    if parts.is_empty() {
        "1".into()
    } else {
        parts.join(" || ")
    }
}

/// True when the program runs under `bufpolicy=ring`: the last `bufpolicy` of its pragmas and
/// then the `-x` options (the analysis applies them in that order).
fn ring_policy(program: &probe_syntax::ast::Program, x: &[String]) -> bool {
    let pragmas = program
        .options()
        .filter(|o| o.name == "bufpolicy")
        .map(|o| o.value.clone().unwrap_or_default());
    let cli = x
        .iter()
        .filter_map(|o| o.strip_prefix("bufpolicy=").map(str::to_string));
    pragmas.chain(cli).last().as_deref() == Some("ring")
}

/// Runs `sightline probe`.
pub fn run(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    // dtrace(1M) refuses an empty program: an empty -n is a mistake, not "no probes, run forever".
    if args.clauses.iter().any(|c| c.trim().is_empty()) {
        bail!(
            "-n: empty probe description (give a description such as 'syscall::read:entry' or a clause)"
        );
    }
    if args.version {
        println!(
            "sightline: D language as DTrace 1.13 (Sightline {})",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(ExitCode::SUCCESS);
    }
    if args.list {
        return list(&args);
    }
    if args.claim || args.recover {
        let opts = crate::anon::ClaimOptions {
            quiet: args.quiet,
            json: args.json,
            verbose: args.verbose,
        };
        let mut out = output(args.output.as_deref())?;
        if args.recover {
            return crate::anon::recover(opts, &mut *out);
        }
        let keep = args.options.iter().any(|o| o == crate::anon::KEEPANON);
        return crate::anon::claim(opts, keep, &mut *out);
    }
    if args.options.iter().any(|o| o == crate::anon::KEEPANON) {
        bail!("-x keepanon: only with -a (claiming the anonymous enabling)");
    }
    // Sources: the --causal prelude, each -s file, then each -n clause, then -P/-m/-f
    // descriptions: compiled and run through the library (sightline-probe), as any program using
    // it would.
    let mut script = Script::default();
    // The preprocessor's `-x` options (Oracle libdtrace dt_options.c): `cpp` is -C, `define=`
    // and `undef=` are -D and -U, `stdc=` the dialect. They act before compiling, so they are
    // not options of the program.
    let mut cpp = probe_lib::cpp::Cpp {
        includes: args.include.clone(),
        defines: args.define.clone(),
        undefs: args.undefine.clone(),
        show_includes: args.show_includes,
        program: None,
        stdc: probe_lib::cpp::Stdc::default(),
    };
    let mut run_cpp = args.cpp;
    let mut options = Vec::new();
    for o in &args.options {
        match o.split_once('=') {
            _ if o == "cpp" => run_cpp = true,
            Some(("define", v)) => cpp.defines.push(v.to_string()),
            Some(("undef", v)) => cpp.undefs.push(v.to_string()),
            Some(("stdc", v)) => {
                let Some(m) = probe_lib::cpp::Stdc::parse(v) else {
                    eprintln!(
                        "sightline: error[D_PRAGMA_OPTSET]: -x stdc={v}: the value must be a, c, s or t"
                    );
                    return Ok(ExitCode::from(2));
                };
                cpp.stdc = m;
            }
            _ => options.push(o.clone()),
        }
    }
    for path in &args.script {
        script = if run_cpp {
            match script.add_file_preprocessed(path, &cpp) {
                Ok(s) => s,
                Err(probe_lib::Error::Cpp(e)) => {
                    eprintln!("sightline: {e}");
                    return Ok(ExitCode::from(2));
                }
                Err(e) => return Err(anyhow::Error::new(e)),
            }
        } else {
            script.add_file(path).map_err(anyhow::Error::new)?
        };
    }
    for (i, c) in args.clauses.iter().enumerate() {
        let name = if args.clauses.len() == 1 {
            "-n".to_string()
        } else {
            format!("-n#{}", i + 1)
        };
        script = script.add_source(name, c.clone());
    }
    for d in descriptions(&args) {
        script = script.add_source("-P/-m/-f", d.to_string());
    }
    if script.sources().is_empty() {
        bail!("no probes specified: use -n 'CLAUSE', -s FILE, -P PROVIDER or -l");
    }
    if !args.causal.is_empty() {
        // Pivot Tracing: `causal_baggage["KEY"]` rewritten, then the prelude defining the
        // causal_* names goes first.
        let exes: Vec<std::path::PathBuf> = args
            .causal
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .collect();
        let mut keys = Vec::new();
        for (name, text) in script.sources_mut().iter_mut() {
            *text = causal_account::pivot::rewrite_baggage(text, &mut keys)
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        }
        script.sources_mut().insert(
            0,
            (
                "--causal".to_string(),
                causal_account::pivot::prelude(&exes, &keys),
            ),
        );
    }
    for a in &args.args {
        script = script.arg(a.clone());
    }
    // `-x postmortem` is the CLI's (the crash report below), not an option of the program.
    let postmortem = options.iter().any(|o| o == POSTMORTEM);
    if postmortem && (args.command.is_some() || args.pid.is_some() || args.anonymous) {
        bail!(
            "-x postmortem: system-wide only (with -c or -p, -x bufpolicy=ring is the target's flight recorder)"
        );
    }
    for o in options.iter().filter(|o| *o != POSTMORTEM) {
        script = match o.split_once('=') {
            Some((k, v)) => script.option_value(k, v),
            None => script.option(o.clone()),
        };
    }
    // The flight recorder's crash report: with the ring policy and a target, two more clauses,
    // whose records bypass the kernel ring (printed after it).
    let flight_recorder = (args.command.is_some() || args.pid.is_some()) && {
        let mut m = SourceMap::new();
        for (name, text) in script.sources() {
            m.add(name.clone(), text.clone());
        }
        // A program that does not parse is reported by the compile below.
        probe_runtime::compile::parse(&m).is_ok_and(|p| ring_policy(&p, &args.options))
    };
    if flight_recorder {
        script = script
            .add_source(FLIGHT_RECORDER_FILE, FLIGHT_RECORDER)
            .report_last(FLIGHT_RECORDER_CLAUSES);
    }
    if postmortem {
        let mut m = SourceMap::new();
        for (name, text) in script.sources() {
            m.add(name.clone(), text.clone());
        }
        // A program that does not parse is reported by the compile below.
        let predicate = probe_runtime::compile::parse(&m)
            .map(|p| postmortem_predicate(&p, &m))
            .unwrap_or_else(|_| "1".into());
        script = script
            .option_value("bufpolicy", "ring")
            .add_source(
                FLIGHT_RECORDER_FILE,
                POSTMORTEM_RECORDER.replace("PM_PREDICATE", &predicate),
            )
            .report_last(FLIGHT_RECORDER_CLAUSES);
    }
    if args.anonymous {
        // Records stay in the kernel's ring until the claim (DTrace's anonymous state has
        // its buffers in the kernel too).
        script = script.option_value("bufpolicy", "ring");
    }
    if args.quiet {
        script = script.option("quiet");
    }
    if args.flowindent {
        script = script.option("flowindent");
    }
    if args.destructive {
        script = script.option("destructive");
    }
    script = script.allow_zero_matches(args.zero_matches);
    // The target: -c creates it held, -p names it.
    let target = match (&args.command, args.pid) {
        (Some(cmd), _) => {
            let words =
                shlex::split(cmd).with_context(|| format!("-c: unbalanced quotes in {cmd:?}"))?;
            if words.is_empty() {
                bail!("-c: empty command");
            }
            Target::Command(words)
        }
        (None, Some(pid)) => Target::Pid(pid),
        _ => Target::System,
    };
    let mut program = match script.compile_here(target) {
        Ok(p) => p,
        Err(probe_lib::Error::Compile { rendered, .. }) => {
            eprint!("{rendered}");
            return Ok(ExitCode::from(2));
        }
        Err(probe_lib::Error::Build(e @ CompileError::NoClauses)) => bail!("{e}"),
        Err(probe_lib::Error::Build(e)) => return Err(anyhow::Error::new(e)),
        Err(probe_lib::Error::Command { command, reason }) if reason == "command not found" => {
            bail!("-c: command not found: {command}")
        }
        Err(probe_lib::Error::Command { reason, .. }) => bail!("-c: {reason}"),
        Err(probe_lib::Error::CannotExecute { command, reason }) => {
            eprintln!("sightline: -c {command}: cannot execute: {reason}");
            return Ok(ExitCode::from(2));
        }
        Err(probe_lib::Error::NoProcess(pid)) => bail!("-p {pid}: no such process"),
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    let target_pid = program.target_pid();
    let checked = program.checked().clone();
    let map = program.source_map().clone();
    if !checked.warnings.is_empty() {
        eprint!("{}", probe_syntax::render_all(&checked.warnings, &map));
    }
    if let Some(asked) = checked
        .options
        .bufsize
        .filter(|_| probe_runtime::run::BufPolicy::of(&checked).is_none())
    {
        // The ring buffer is a power of two of at least 16 KiB (a page multiple the kernel
        // accepts): say so when bufsize was changed, as dtrace reports a buffer size it adjusts
        // (issue 22: "-x bufsize below 16 KiB is rounded up silently").
        let used = u64::from(probe_codegen::lower::ringbuf_size(asked));
        if used != asked {
            eprintln!(
                "sightline: buffer size {} to {used} bytes (bufsize={asked}; the ring buffer is a power of two between 16 KiB and 1 GiB)",
                if used > asked { "raised" } else { "lowered" }
            );
        }
    }
    if args.show_program {
        eprint!("{}", probe_codegen::disasm::layout(program.layout()));
    }
    if args.compile_only {
        // The -c command, still held, is killed when `program` drops: it never runs.
        return Ok(ExitCode::SUCCESS);
    }
    if args.anonymous {
        let argv: Vec<String> = std::env::args().collect();
        return crate::anon::install(
            &program,
            script.inputs(None),
            args.verbose,
            args.boot_unit.as_deref(),
            &crate::anon::unit_args(&argv),
        );
    }
    if probe_runtime::run::BufPolicy::of(&checked) == Some(probe_runtime::run::BufPolicy::Ring) {
        // Postmortem: the ring's buffers are pinned while the run lives; stale ones of dead
        // runs go first.
        crate::anon::remove_dead_runs();
        program.set_postmortem(script.inputs(target_pid));
    }
    // dtrace(1M): -q (or `#pragma D option quiet`) suppresses notices such as "matched N probes".
    let notices = !(checked.options.quiet || args.json);
    let print = PrintOptions {
        quiet: !notices,
        json: args.json,
        verbose: args.verbose,
        // Oracle dtrace's testing mode, set by its test harness (runtest.sh exports it).
        testing: std::env::var_os("_DTRACE_TESTING").is_some(),
    };
    let mut out = output(args.output.as_deref())?;
    let mut err = std::io::stderr();
    sys::install_interrupt_handler().context("installing the SIGINT handler")?;
    let skipped = program.skipped_sites();
    let loaded = match program.load_to(&mut *out, &mut err, &print) {
        Ok(l) => l,
        Err(probe_lib::Error::Run(e)) => return fail(e, args.verbose, &checked, &map),
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    if notices {
        // dtrace(1M): one notice per source: "script 'FILE' matched N probes" for each -s,
        // "description 'D' matched N probes" for each -n (D: its text up to the first clause's
        // body) and each -P/-m/-f.
        // The --causal prelude is not the user's: no notice for it.
        let pre = usize::from(!args.causal.is_empty());
        for (f, n) in map.files().iter().skip(pre).zip(0..) {
            if flight_recorder && f.name() == FLIGHT_RECORDER_FILE {
                continue;
            }
            let probes: usize = checked
                .clauses
                .iter()
                .filter(|c| {
                    map.file_of(c.span.start)
                        .is_some_and(|g| std::ptr::eq(g, f))
                })
                .map(|c| c.probes.len())
                .sum();
            let (what, name) = if n < args.script.len() {
                ("script", f.name().to_string())
            } else {
                let (program, _) = probe_syntax::parse(f);
                let first = program.clauses().next();
                (
                    "description",
                    first
                        .map(|c| {
                            c.probes
                                .iter()
                                .map(|p| p.text.trim())
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                        .unwrap_or_default(),
                )
            };
            eprintln!(
                "sightline: {what} '{name}' matched {probes} probe{}",
                if probes == 1 { "" } else { "s" }
            );
        }
        // Sites that cannot be probed without harming the target are left out, never silently.
        if let Some((total, why)) = skipped {
            eprintln!(
                "sightline: left out {total} pid-provider site{} that cannot be probed safely: {why}",
                if total == 1 { "" } else { "s" }
            );
        }
    }
    let mut bar = crate::progress::AttachBar::stderr();
    let progress: Box<dyn FnMut(usize, usize)> =
        Box::new(move |done, total| bar.update(done, total));
    let reason = match loaded.run(Some(progress)) {
        Ok(r) => r,
        Err(probe_lib::Error::CannotExecute { reason, .. }) => {
            // A -c command whose exec failed: say so as for a file that is not there.
            drop(program);
            eprintln!(
                "sightline: -c {}: cannot execute: {reason}",
                args.command.as_deref().unwrap_or_default(),
            );
            return Ok(ExitCode::from(2));
        }
        Err(probe_lib::Error::Run(e)) => return fail(e, args.verbose, &checked, &map),
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    drop(program);
    out.flush()?;
    if let (StopReason::TargetExited, Some(pid), true) = (reason, target_pid, notices) {
        eprintln!("sightline: pid {pid} has exited");
    }
    Ok(match reason {
        StopReason::Exit(s) => ExitCode::from(s.clamp(0, 255) as u8),
        _ => ExitCode::SUCCESS,
    })
}

/// Reports a run error: a verifier rejection as a diagnostic located at the program's clauses
/// (exit status 2, as a compile error), anything else through [`explain`].
fn fail(
    e: RunError,
    verbose: bool,
    checked: &probe_sema::CheckedProgram,
    map: &SourceMap,
) -> anyhow::Result<ExitCode> {
    if let RunError::Runtime(RuntimeError::Verifier {
        clauses,
        reason,
        log,
        source,
        ..
    }) = &e
        // The verifier ran (its log is there): the program, not a privilege, is the problem,
        // whatever errno it gave (EACCES for most rejections). Without a log the load was
        // refused before verification (EPERM: not root), explained below.
        && !(log.trim().is_empty() && source.is_permission())
    {
        let spans: Vec<probe_syntax::Span> = clauses
            .iter()
            .filter_map(|&c| checked.clauses.get(c).map(|c| c.span))
            .collect();
        if let Some(d) = verifier_diagnostic(&spans, reason) {
            eprint!("{}", probe_syntax::render_all(&[d], map));
            if verbose {
                eprintln!("{log}");
            }
            return Ok(ExitCode::from(2));
        }
    }
    Err(explain(e, verbose))
}

/// The diagnostic for a program the BPF verifier rejected: at its first clause (`spans`, the
/// clauses the program holds, in order), the others labelled, the verifier's `reason` in the
/// message. `None` when no clause is known.
fn verifier_diagnostic(
    spans: &[probe_syntax::Span],
    reason: &str,
) -> Option<probe_syntax::Diagnostic> {
    let (&first, rest) = spans.split_first()?;
    // The clause's first line (its probe descriptions) is enough to find it.
    let head = |s: probe_syntax::Span| probe_syntax::Span::new(s.start, s.start + 1);
    let mut d = probe_syntax::Diagnostic::tagged(
        probe_syntax::ErrTag::D_UNKNOWN,
        format!("the BPF verifier rejected the program of this clause: {reason}"),
        head(first),
    )
    .with_span_label("this clause");
    for &s in rest {
        d = d.with_label(head(s), "compiled into the same program");
    }
    Some(d.with_hint(
        "rerun with -v for the full verifier log; splitting the clause or lowering strsize may help",
    ))
}

/// Turns a run error into the message a user needs (privileges in one line; verifier reasons
/// with the full log under `-v`).
fn explain(e: RunError, verbose: bool) -> anyhow::Error {
    if let RunError::Runtime(r) = &e {
        if r.is_permission() {
            return anyhow::anyhow!(
                "permission denied: loading BPF programs needs root (or CAP_BPF and CAP_PERFMON; tracefs access for tracepoints)"
            );
        }
        if let RuntimeError::Verifier { log, .. } = r {
            if verbose {
                eprintln!("{log}");
            } else {
                eprintln!("sightline: rerun with -v for the full verifier log");
            }
        }
    }
    anyhow::Error::new(e)
}

fn descriptions(args: &ProbeArgs) -> Vec<String> {
    let mut v = Vec::new();
    for p in &args.providers {
        v.push(format!("{p}:::"));
    }
    for m in &args.modules {
        v.push(format!(":{m}::"));
    }
    for f in &args.functions {
        v.push(format!("::{f}:"));
    }
    v
}

/// The probe descriptions of a `-n` clause as written (`syscall::read:entry`,
/// `pid:/usr/lib/x86_64-linux-gnu/libc.so.6:malloc:entry`), found by the D parser so that paths,
/// predicates and several descriptions per clause are told apart; a clause that does not parse
/// gives none (its diagnostics come from the real compile).
fn clause_descriptions(clause: &str) -> Vec<String> {
    let (program, _) = probe_syntax::parse(&probe_syntax::SourceFile::new("-n", clause));
    program
        .clauses()
        .flat_map(|c| c.probes.iter().map(|p| p.text.trim().to_string()))
        .collect()
}

/// Creates the `-c` command held (before its exec): its resolved path and the handle, or the exit
/// code after printing why it cannot be executed (missing, not executable: exit 2, as dtrace).
///
/// The command is split into words as a shell would (`shlex`: quotes and backslashes, no
/// expansions; dtrace(1M) also runs it without a shell) and found with execvp(3)'s `PATH` rules
/// (`replay_ptrace::exec`).
///
/// Errors: an empty command or unbalanced quotes, a name not found in PATH, a failure to fork or
/// trace.
fn spawn_command(cmd: &str) -> anyhow::Result<Result<(std::path::PathBuf, HeldCommand), ExitCode>> {
    use replay_ptrace::exec::{LookupError, find_executable};
    let words = shlex::split(cmd).with_context(|| format!("-c: unbalanced quotes in {cmd:?}"))?;
    let Some(first) = words.first() else {
        bail!("-c: empty command")
    };
    let cannot_execute = |reason: &dyn std::fmt::Display| {
        eprintln!("sightline: -c {first}: cannot execute: {reason}");
        Ok(Err(ExitCode::from(2)))
    };
    let path = match find_executable(first) {
        Ok(path) => path,
        Err(LookupError::NotFound { .. }) => bail!("-c: command not found: {first}"),
        Err(LookupError::CannotExecute { source, .. }) => return cannot_execute(&source),
    };
    match HeldCommand::spawn(&path, &words) {
        Ok(c) => Ok(Ok((path, c))),
        Err(HeldError::CannotExecute { source, .. }) => cannot_execute(&source),
        Err(e) => Err(anyhow::Error::new(e).context("-c: starting the command")),
    }
}

/// `-l`: the probes matching the descriptions, in DTrace's columns.
///
/// `-l -c CMD` lists the probes of CMD as `dtrace -l -c` does: the command is created held (before
/// its exec), its executable and libraries give the pid and USDT probes (`$target` is its pid), and
/// it is killed afterwards, never having run.
fn list(args: &ProbeArgs) -> anyhow::Result<ExitCode> {
    let mut held = None;
    let mut user = UserSites::new();
    let pid = match (&args.command, args.pid) {
        (Some(cmd), _) => {
            let (path, c) = match spawn_command(cmd)? {
                Ok(x) => x,
                Err(code) => return Ok(code),
            };
            let pid = c.pid;
            user = UserSites::with_held_command(pid, path);
            held = Some(c);
            Some(pid)
        }
        (None, pid) => pid,
    };
    let r = list_probes(args, &catalog::system(user), pid);
    // The command never runs: killed (and reaped) while still held.
    drop(held);
    r
}

fn list_probes(args: &ProbeArgs, catalog: &Catalog, pid: Option<u32>) -> anyhow::Result<ExitCode> {
    let mut pats: Vec<ProbeDescPattern> = Vec::new();
    // `$target` in a listed description is the -c or -p process (`-l -p PID -n 'pid$target:a.out::entry'`).
    // ... and `$1`..`$9` the macro arguments (`-l -n 'python:$1::' /usr/bin/python3.11`).
    let target = |d: &str| {
        if d.contains("$target") && pid.is_none() {
            // d-reference §10: `$target` without -c or -p is an error (dtrace(1M) too).
            bail!("description '{d}' uses $target, which needs a process: add -c CMD or -p PID");
        }
        let mut d = match pid {
            Some(p) => d.replace("$target", &p.to_string()),
            None => d.to_string(),
        };
        for (i, a) in args.args.iter().enumerate().take(9).rev() {
            d = d.replace(&format!("${}", i + 1), a);
        }
        Ok(d)
    };
    for c in &args.clauses {
        for d in clause_descriptions(c) {
            pats.push(pattern(&target(&d)?));
        }
    }
    for d in descriptions(args) {
        pats.push(pattern(&target(&d)?));
    }
    if pats.is_empty() {
        pats.push(ProbeDescPattern::new("", "", "", ""));
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(
        out,
        "{:>5} {:>10} {:>17} {:>33} NAME",
        "ID", "PROVIDER", "MODULE", "FUNCTION"
    )?;
    let mut seen = std::collections::HashSet::new();
    let mut all_listed = true;
    for p in &pats {
        // Each description's probes in ID order, as dtrace(1M) lists them.
        let mut rows: Vec<(u32, ProbeInfo)> = catalog
            .matching(p)
            .into_iter()
            .filter(|info| seen.insert(info.full_name()))
            .map(|info| {
                (
                    probe_runtime::run::probe_display_id(&info.full_name()),
                    info,
                )
            })
            .collect();
        rows.sort_by_key(|(id, _)| *id);
        // A description that matches nothing for a reason a provider knows (`-l -P fbt` on a
        // kernel without kprobes or trampolines): say it, and fail as a run would.
        if rows.is_empty()
            && let Some(why) = catalog.why_no_match(p)
        {
            eprintln!("sightline: `{p}` matches no probes: {why}");
            all_listed = false;
        }
        for (id, info) in rows {
            writeln!(
                out,
                "{:>5} {:>10} {:>17} {:>33} {}",
                id, info.provider, info.module, info.function, info.name
            )?;
            // `-l -v`: the stability attributes and argument types, as `dtrace -l -v`.
            if args.verbose {
                out.write_all(sightline_probe::stability::describe(&info).as_bytes())?;
            }
        }
    }
    out.flush()?;
    Ok(if all_listed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A probe description as a pattern: fields fill from the right (`BEGIN` = `:::BEGIN`).
fn pattern(d: &str) -> ProbeDescPattern {
    let mut f: Vec<&str> = d.split(':').collect();
    while f.len() < 4 {
        f.insert(0, "");
    }
    ProbeDescPattern::new(f[0], f[1], f[2], f[3])
}

/// Where records go: the file of `-o PATH` (created, buffered), else stdout, line by line.
///
/// # Errors
/// The file cannot be created (named with `-o`).
fn output(path: Option<&std::path::Path>) -> anyhow::Result<Box<dyn Write>> {
    Ok(match path {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("-o {}", p.display()))?,
        )),
        None => Box::new(std::io::LineWriter::new(std::io::stdout())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program the verifier rejects is named by its clauses' file:line:col (issue 14: "not
    /// clause 1: ..."), the first clause carrying the reason and the others labelled.
    #[test]
    fn a_verifier_rejection_names_the_clauses_by_file_line_and_column() {
        let text = "BEGIN { x = 1; }\n\n  syscall::read:entry\n{ trace(x); }\nsyscall::write:entry { trace(2); }\n";
        let mut map = SourceMap::new();
        map.add("prog.d", text);
        let file = &map.files()[0];
        let (program, diags) = probe_syntax::parse(file);
        assert!(diags.is_empty(), "{diags:?}");
        let spans: Vec<probe_syntax::Span> = program.clauses().skip(1).map(|c| c.span).collect();
        assert_eq!(spans.len(), 2);
        let d =
            verifier_diagnostic(&spans, "R1 invalid mem access 'scalar'").expect("a diagnostic");
        let out = probe_syntax::render_all(&[d], &map);
        assert!(
            out.contains("prog.d:3:3: error[D_UNKNOWN]: the BPF verifier rejected the program of this clause: R1 invalid mem access 'scalar'"),
            "{out}"
        );
        assert!(out.contains("compiled into the same program"), "{out}");
        assert!(out.contains("5 | syscall::write:entry"), "{out}");
        assert!(verifier_diagnostic(&[], "x").is_none());
    }
}
