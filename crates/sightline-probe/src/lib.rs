//! Sightline's D tracing as a library: typed programmatic access to tracing data.
//!
//! Compile a D program ([`Script`]) for a [`Target`] (the whole system, a running process, or a
//! command this library creates, held until every probe is attached), read its [`Schema`] (per
//! clause: the recorded fields with their D types) before anything runs, then [`Program::run`] it
//! and receive every [`Event`] as a typed value: records with their probe, CPU, timestamp and
//! values ([`Record`], decodable into your own `#[derive(Deserialize)]` struct with
//! [`Record::decode`]), aggregation snapshots with numeric buckets ([`AggregationSnapshot`], at
//! `printa()`, at exit, and on demand with [`Run::snapshot`]), drops, run-time errors (the ERROR
//! probe), failed speculations and the exit status. A [`Run`] is a blocking [`Iterator`];
//! [`Run::into_stream`] makes it a tokio [`Stream`](tokio_stream::Stream).
//!
//! `sightline probe` is built on this crate: it compiles and runs scripts through [`Script`] and
//! [`Program`], and its `--json` lines are the `serde_json` serialization of these events
//! (`docs/probe-json.md`). The D language is DTrace's (`docs/d-reference.md`).
//!
//! Back-pressure: the events of a run wait in a bounded queue ([`RunOptions::queue`]). When the
//! consumer is slower than the probes, the reading thread waits for room; the kernel side never
//! waits: its ring buffer fills and what it cannot hold arrives as [`Event::Drops`] (DTrace's
//! "N drops on CPU k").
//!
//! Loading BPF programs needs root (or CAP_BPF and CAP_PERFMON); compiling does not.
//!
//! ```no_run
//! use sightline_probe::{Event, Script, Target};
//!
//! // Count getpid() calls of a command this library starts.
//! let program = Script::new("syscall::getpid:entry /pid == $target/ { @calls = count(); }")
//!     .compile(Target::command(["/bin/true"])?)?;
//! for event in program.run()? {
//!     if let Event::Aggregation(a) = event? {
//!         println!("@{} = {:?}", a.name, a.entries.first().and_then(|e| e.value));
//!     }
//! }
//! # Ok::<(), sightline_probe::Error>(())
//! ```
//!
//! Compiling only (no privileges needed):
//!
//! ```
//! use sightline_probe::{Script, Target};
//! let program = Script::new(r#"BEGIN { printf("%s is %d\n", execname, pid); exit(0); }"#)
//!     .compile(Target::System)
//!     .unwrap();
//! let clause = &program.schema().clauses[0];
//! let fields: Vec<(&str, &str)> =
//!     clause.fields.iter().map(|f| (f.name.as_str(), f.ty.as_str())).collect();
//! assert_eq!(fields, [("execname", "string"), ("pid", "int")]);
//! ```
#![deny(missing_docs)]

pub mod cpp;
mod schema;
pub mod stability;
mod target;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use probe_runtime::compile::{self, CompileError, CompileOptions};
use probe_runtime::run::{Consumer, RunConfig, RunControl, RunError, StopReason};
use probe_sema::CheckedProgram;
use probe_syntax::SourceMap;

pub use probe_format::event::{
    AggEntrySnapshot, AggParams, AggregationSnapshot, Bucket, DropKind, Drops, Event, Exit,
    ExitReason, ProbeError, ProbeRef, Record, RecordItem,
};
pub use probe_format::value::{Int, Stack, Symbol, Value};
pub use schema::{AggregationSchema, ClauseSchema, FieldSchema, Schema};
pub use target::Target;

/// Errors of compiling and running a D program.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The program does not compile: every diagnostic, with its location.
    #[error("the D program does not compile: {}", first_message(.diagnostics))]
    Compile {
        /// Errors and warnings, in source order.
        diagnostics: Vec<Diagnostic>,
        /// The diagnostics rendered as `sightline probe` prints them (source lines and carets).
        rendered: String,
    },
    /// Compiling failed for another reason (the kernel's BTF could not be read, no clauses, a
    /// kernel limit the code generator predicts without a source location).
    #[error(transparent)]
    Build(CompileError),
    /// A command to create is empty, has unbalanced quotes, or cannot be found in `PATH`.
    #[error("command {command:?}: {reason}")]
    Command {
        /// The command as given.
        command: String,
        /// What is wrong.
        reason: String,
    },
    /// The command to create exists but cannot be executed (permissions, not an executable).
    #[error("{command}: cannot execute: {reason}")]
    CannotExecute {
        /// The command's first word.
        command: String,
        /// The operating system's reason.
        reason: String,
    },
    /// A process to trace (`Target::Pid`) does not exist.
    #[error("no such process: {0}")]
    NoProcess(u32),
    /// Loading, attaching or reading the program failed (needs root; verifier rejections).
    #[error(transparent)]
    Run(#[from] RunError),
    /// A script file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// `-C`: the C preprocessor could not run or failed on a script.
    #[error(transparent)]
    Cpp(#[from] cpp::CppError),
    /// The program's created command is traced by another thread: [`Program::run_to`] needs
    /// [`Script::compile_here`] for a command, [`Program::run`] needs [`Script::compile`].
    #[error(
        "the created command is traced by another thread (compile with compile_here to run_to, with compile to run)"
    )]
    WrongThread,
    /// The thread running the program panicked.
    #[error("the tracing thread panicked")]
    Panicked,
}

fn first_message(d: &[Diagnostic]) -> String {
    d.iter()
        .find(|d| d.severity == "error")
        .or(d.first())
        .map(|d| format!("{}:{}:{}: {}", d.file, d.line, d.column, d.message))
        .unwrap_or_default()
}

impl Error {
    /// True when the failure is a missing privilege (loading BPF needs root or CAP_BPF).
    pub fn is_permission(&self) -> bool {
        matches!(self, Error::Run(RunError::Runtime(r)) if r.is_permission())
    }
}

/// One compiler diagnostic with its location: a typed form of what `sightline probe` renders.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Diagnostic {
    /// `error`, `warning` or `note`.
    pub severity: String,
    /// DTrace's error tag (`D_SYNTAX`, `D_IDENT_UNDEF`, ...), when it has one.
    pub code: Option<String>,
    /// One line, lower case ("unknown variable `foo`").
    pub message: String,
    /// The source's name (a file's path, or the name given to [`Script::add_source`]).
    pub file: String,
    /// 1-based line of the span's start.
    pub line: usize,
    /// 1-based column (in characters) of the span's start.
    pub column: usize,
    /// The primary span, as byte offsets into that source's text (`text[span.0..span.1]` is the
    /// code the diagnostic points at).
    pub span: (usize, usize),
    /// What the caret says, if anything.
    pub label: Option<String>,
    /// A suggestion of how to fix it.
    pub hint: Option<String>,
}

impl Diagnostic {
    fn of(d: &probe_syntax::Diagnostic, map: &SourceMap) -> Diagnostic {
        let (file, line, column, span) = match map.file_of(d.span.start) {
            Some(f) => {
                let (line, column) = f.line_col(d.span.start);
                let base = f.base() as usize;
                (
                    f.name().to_string(),
                    line,
                    column,
                    (
                        d.span.start as usize - base,
                        (d.span.end as usize).saturating_sub(base),
                    ),
                )
            }
            None => (String::new(), 0, 0, (0, 0)),
        };
        Diagnostic {
            severity: format!("{:?}", d.severity).to_lowercase(),
            code: d.code.map(|c| format!("{c:?}")),
            message: d.message.clone(),
            file,
            line,
            column,
            span,
            label: (!d.span_label.is_empty()).then(|| d.span_label.clone()),
            hint: d.hint.clone(),
        }
    }
}

/// A D program's sources, macro arguments and options, not yet compiled.
///
/// ```
/// use sightline_probe::Script;
/// let s = Script::new("BEGIN { trace($1); exit(0); }").arg("42").option("quiet");
/// assert!(s.compile(sightline_probe::Target::System).is_ok());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Script {
    sources: Vec<(String, String)>,
    script_name: Option<String>,
    macro_args: Vec<String>,
    options: Vec<(String, Option<String>)>,
    zero_matches: bool,
    report_last: usize,
}

/// The name (its path as given) and text of the D script file `path`.
///
/// # Errors
/// [`Error::Read`] when the file cannot be read.
fn read_script(path: &Path) -> Result<(String, String), Error> {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => Ok((name, text)),
        Err(source) => Err(Error::Read { path: name, source }),
    }
}

impl Script {
    /// A program of one source, named `-n` in diagnostics (as `sightline probe -n`).
    pub fn new(source: impl Into<String>) -> Script {
        Script::default().add_source("-n", source)
    }

    /// A program read from a D script file; a `#!` first line is ignored (blanked, so line
    /// numbers stay), as `sightline probe -s` does. `$0` is the file's path.
    ///
    /// # Errors
    /// [`Error::Read`] when the file cannot be read.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Script, Error> {
        Script::default().add_file(path)
    }

    /// Adds the D script file `path` (see [`Script::from_file`]).
    ///
    /// # Errors
    /// [`Error::Read`] when the file cannot be read.
    pub fn add_file(mut self, path: impl AsRef<Path>) -> Result<Script, Error> {
        let (name, text) = read_script(path.as_ref())?;
        let text = cpp::blank_shebang(&text).into_owned();
        self.script_name.get_or_insert(name.clone());
        Ok(self.add_source(name, text))
    }

    /// Adds the D script in file `path` run through the C preprocessor (`dtrace -C`;
    /// [`cpp::preprocess`]), its lines kept where they were.
    ///
    /// # Errors
    /// [`Error::Read`] when the file cannot be read, [`Error::Cpp`] when `cpp` cannot run or
    /// fails.
    pub fn add_file_preprocessed(
        mut self,
        path: impl AsRef<Path>,
        opts: &cpp::Cpp,
    ) -> Result<Script, Error> {
        let (name, text) = read_script(path.as_ref())?;
        let text = cpp::preprocess(&name, &text, opts)?;
        self.script_name.get_or_insert(name.clone());
        Ok(self.add_source(name, text))
    }

    /// Adds a source named `name` (clauses of all sources form one program, in order).
    pub fn add_source(mut self, name: impl Into<String>, text: impl Into<String>) -> Script {
        self.sources.push((name.into(), text.into()));
        self
    }

    /// Appends a macro argument: the first is `$1` (and `$$1` as a string), and so on.
    pub fn arg(mut self, value: impl Into<String>) -> Script {
        self.macro_args.push(value.into());
        self
    }

    /// Sets a boolean option, as `-x NAME` or `#pragma D option NAME` (`quiet`, `destructive`,
    /// `flowindent`, ...).
    pub fn option(mut self, name: impl Into<String>) -> Script {
        self.options.push((name.into(), None));
        self
    }

    /// Sets an option with a value, as `-x NAME=VALUE` (`bufsize`, `switchrate`, `strsize`,
    /// `aggsortrev`, ...).
    pub fn option_value(mut self, name: impl Into<String>, value: impl Into<String>) -> Script {
        self.options.push((name.into(), Some(value.into())));
        self
    }

    /// Allows probe descriptions that match no probe (they are left out), as `-Z`.
    pub fn allow_zero_matches(mut self, yes: bool) -> Script {
        self.zero_matches = yes;
        self
    }

    /// Under `bufpolicy=ring`, the program's last `clauses` clauses bypass the kernel ring: their
    /// records are printed after every CPU's ring, not in their CPU's turn (DTrace's ring policy
    /// prints oldest to youngest per CPU). The CLI's flight recorder adds its crash report this
    /// way, so it comes after the records that led to the crash. 0 (the default) for none.
    pub fn report_last(mut self, clauses: usize) -> Script {
        self.report_last = clauses;
        self
    }

    /// What compiling this script takes, for a pinned program's manifest
    /// ([`probe_runtime::pin::Manifest`]): sources, `$0`, macro arguments, options, `-Z`, the
    /// [`Script::report_last`] clauses, and `target_pid` (`$target`, `None` system-wide).
    pub fn inputs(&self, target_pid: Option<u32>) -> probe_runtime::pin::ScriptInputs {
        probe_runtime::pin::ScriptInputs {
            sources: (self.sources.iter())
                .map(|(name, text)| probe_runtime::pin::Source {
                    name: name.clone(),
                    text: text.clone(),
                })
                .collect(),
            script_name: self.script_name.clone(),
            macro_args: self.macro_args.clone(),
            options: self.options.clone(),
            allow_zero_matches: self.zero_matches,
            target_pid,
            ring_bypass_last: self.report_last,
        }
    }

    /// The sources, in order: (name, text).
    pub fn sources(&self) -> &[(String, String)] {
        &self.sources
    }

    /// The sources, in order, to change in place: (name, text). For a front end that rewrites
    /// the user's text or puts a prelude before it (`sightline probe --causal`).
    pub fn sources_mut(&mut self) -> &mut Vec<(String, String)> {
        &mut self.sources
    }

    /// Compiles the program for `target`: parses, checks against the probes the system (and the
    /// target's files) provide, and generates its BPF code. A [`Target::Command`] is created
    /// here, held before it runs its first instruction, and released by [`Program::run`] once
    /// every probe is attached; dropping the [`Program`] kills a command that never ran.
    ///
    /// # Errors
    /// [`Error::Compile`] with every diagnostic when the program is wrong; [`Error::Command`],
    /// [`Error::CannotExecute`], [`Error::NoProcess`] for a bad target; [`Error::Build`] for other
    /// compile failures.
    pub fn compile(&self, target: Target) -> Result<Program, Error> {
        if !matches!(target, Target::Command(_)) {
            return self.compile_here(target);
        }
        // A created command is traced (ptrace) by the thread that created it: that thread
        // compiles, holds it and later runs the program.
        let (reply, answer) = std::sync::mpsc::channel();
        let (go, start) = std::sync::mpsc::channel::<Option<WorkerRun>>();
        let script = self.clone();
        let thread = std::thread::Builder::new()
            .name("sightline-probe".into())
            .spawn(move || {
                let mut local = match script.compile_here(target) {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return;
                    }
                };
                let _ = reply.send(Ok(local.clone_view()));
                // Run when asked; a dropped Program (no message) kills the held command.
                if let Ok(Some(w)) = start.recv() {
                    local.serve(w);
                }
            })
            .map_err(|e| Error::Run(RunError::Io(e)))?;
        match answer.recv() {
            Ok(Ok(mut view)) => {
                view.worker = Some(Worker {
                    go,
                    thread: Some(thread),
                });
                Ok(view)
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(Error::Panicked)
            }
        }
    }

    /// [`Script::compile`] on this thread: the program then runs on this thread only
    /// ([`Program::run_to`], as `sightline probe` does); a created command is traced by this
    /// thread ([`Program::run`] refuses such a program).
    ///
    /// # Errors
    /// See [`Script::compile`].
    pub fn compile_here(&self, target: Target) -> Result<Program, Error> {
        let mut map = SourceMap::new();
        for (name, text) in &self.sources {
            map.add(name.clone(), text.clone());
        }
        let program = match compile::parse(&map) {
            Ok(p) => p,
            Err(e) => return Err(compile_error(e, &map)),
        };
        let prepared = target::prepare(target, probe_sema::needs_user_symbols(&program))?;
        let sites = prepared.sites.clone();
        let catalog = probe_runtime::catalog::system(prepared.sites.clone());
        let opts = CompileOptions {
            macro_args: self.macro_args.clone(),
            script_name: self.script_name.clone(),
            target_pid: prepared.pid,
            options: self.options.clone(),
            allow_zero_matches: self.zero_matches || self.options.iter().any(|(k, _)| k == "zdefs"),
            ring_bypass_last: self.report_last,
        };
        let compiled = match compile::compile(&program, &catalog, &opts) {
            Ok(c) => c,
            Err(e) => return Err(compile_error(e, &map)),
        };
        check_amin(&compiled.checked, &map)?;
        let schema = Schema::of(&compiled.checked, &compiled.layout, &map);
        let warnings = compiled
            .checked
            .warnings
            .iter()
            .map(|d| Diagnostic::of(d, &map))
            .collect();
        Ok(Program {
            checked: compiled.checked,
            layout: compiled.layout,
            map,
            schema,
            warnings,
            target_pid: prepared.pid,
            report_last: self.report_last,
            postmortem: None,
            skipped: {
                let s = sites.skipped();
                s.describe().map(|why| (s.total(), why))
            },
            local: Some(Local { target: prepared }),
            worker: None,
        })
    }
}

/// `-x amin=ATTR` (DTrace guide, "Stability"): refuses a clause whose probes' description
/// attributes are less than the minimum, at the clause.
fn check_amin(checked: &CheckedProgram, map: &SourceMap) -> Result<(), Error> {
    let Some((_, v)) = checked
        .options
        .other
        .iter()
        .rev()
        .find(|(k, _)| k == "amin")
    else {
        return Ok(());
    };
    let min: stability::Attr = v.parse().map_err(|e: stability::AttrError| {
        let d = probe_syntax::Diagnostic::error(
            format!("amin: {e}"),
            checked.clauses.first().map(|c| c.span).unwrap_or_default(),
        );
        Error::Compile {
            diagnostics: vec![Diagnostic::of(&d, map)],
            rendered: probe_syntax::render_all(&[d], map),
        }
    })?;
    let mut diags = Vec::new();
    for c in &checked.clauses {
        // Each description as written against each probe it matched (DTrace checks the
        // description, not the probe: `syscall:::entry` does not name the Private functions).
        let low = c
            .patterns
            .iter()
            .zip(&c.descriptions)
            .find_map(|(pat, desc)| {
                c.probes
                    .iter()
                    .filter(|i| pat.matches_probe(i))
                    .find_map(|i| {
                        let attr = stability::of(i).written(pat);
                        (!attr.at_least(min)).then_some((desc, attr, i))
                    })
            });
        if let Some((desc, attr, info)) = low {
            diags.push(probe_syntax::Diagnostic::tagged(
                probe_syntax::ErrTag::D_ATTR_MIN,
                format!(
                    "attributes for probe description {desc} ({attr}, probe {}) are less than the predefined minimum ({min}, -x amin)",
                    info.full_name()
                ),
                c.span,
            ));
        }
    }
    if diags.is_empty() {
        return Ok(());
    }
    Err(Error::Compile {
        diagnostics: diags.iter().map(|d| Diagnostic::of(d, map)).collect(),
        rendered: probe_syntax::render_all(&diags, map),
    })
}

fn compile_error(e: CompileError, map: &SourceMap) -> Error {
    let diags = match &e {
        CompileError::Syntax(d) | CompileError::Sema(d) => d.clone(),
        CompileError::Codegen(c) => vec![c.diagnostic()],
        _ => return Error::Build(e),
    };
    Error::Compile {
        diagnostics: diags.iter().map(|d| Diagnostic::of(d, map)).collect(),
        rendered: probe_syntax::render_all(&diags, map),
    }
}

/// A compiled D program, ready to run on its target.
#[derive(Debug)]
pub struct Program {
    checked: CheckedProgram,
    layout: probe_codegen::layout::Layout,
    map: SourceMap,
    schema: Schema,
    warnings: Vec<Diagnostic>,
    target_pid: Option<u32>,
    /// [`Script::report_last`].
    report_last: usize,
    /// [`Program::set_postmortem`].
    postmortem: Option<probe_runtime::pin::ScriptInputs>,
    skipped: Option<(usize, String)>,
    /// The target, when this thread owns it.
    local: Option<Local>,
    /// The thread that owns the target (a created command), otherwise.
    worker: Option<Worker>,
}

/// What only the thread owning the target has.
#[derive(Debug)]
struct Local {
    target: target::Prepared,
}

/// The thread that created (and traces) the command, waiting to run the program.
#[derive(Debug)]
struct Worker {
    go: std::sync::mpsc::Sender<Option<WorkerRun>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.go.send(None);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A run request for the worker: where its events go, and its control.
struct WorkerRun {
    tx: tokio::sync::mpsc::Sender<Result<Event, Error>>,
    control: Arc<RunControl>,
}

/// How [`Program::run`] runs a program.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Events the queue between the reading thread and the consumer holds (at least 1; default
    /// 4096). When it is full the reading thread waits and the kernel counts drops.
    pub queue: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { queue: 4096 }
    }
}

/// How [`Program::run_to`] prints (the `sightline probe` command's output).
#[derive(Debug, Clone, Default)]
pub struct PrintOptions {
    /// Only explicit output (no probe lines).
    pub quiet: bool,
    /// JSON Lines (the serialization of [`Event`]s) instead of DTrace's text.
    pub json: bool,
    /// Full verifier logs on rejection.
    pub verbose: bool,
    /// Oracle dtrace's testing mode: probe lines without the CPU and ID columns
    /// ([`RunConfig::testing`]).
    pub testing: bool,
}

impl Program {
    /// The record shapes: per clause, the fields its records carry with their D types; per
    /// aggregation, its function and key types.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The analysis' warnings (the program compiled).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// `$target`: the created command's or the traced process's pid.
    pub fn target_pid(&self) -> Option<u32> {
        self.target_pid
    }

    /// Postmortem: when the program runs under `bufpolicy=ring`, its kernel ring, stats and
    /// aggregation maps are pinned under `/sys/fs/bpf/sightline/run-PID/` while it runs, with a
    /// manifest of `inputs` ([`Script::inputs`]), so that `sightline probe --recover` prints
    /// them if this process dies; a run that ends removes them (docs/probe-pinning.md).
    pub fn set_postmortem(&mut self, inputs: probe_runtime::pin::ScriptInputs) {
        self.postmortem = Some(inputs);
    }

    /// A copy of everything but the target (what the worker thread hands back).
    fn clone_view(&self) -> Program {
        Program {
            checked: self.checked.clone(),
            layout: self.layout.clone(),
            map: self.map.clone(),
            schema: self.schema.clone(),
            warnings: self.warnings.clone(),
            target_pid: self.target_pid,
            report_last: self.report_last,
            postmortem: self.postmortem.clone(),
            skipped: self.skipped.clone(),
            local: None,
            worker: None,
        }
    }

    /// Runs the program for a worker's request (on the thread owning the target).
    fn serve(&mut self, w: WorkerRun) {
        let events = w.tx.clone();
        let r = self.consume(w.control, move |e| events.blocking_send(Ok(e)).is_ok());
        if let Err(e) = r {
            let _ = w.tx.blocking_send(Err(e));
        }
    }

    /// The checked program (probe-sema's form: clauses, their matched probes, options).
    pub fn checked(&self) -> &CheckedProgram {
        &self.checked
    }

    /// The generated code (probe-codegen's layout: BPF programs, maps, record layouts).
    pub fn layout(&self) -> &probe_codegen::layout::Layout {
        &self.layout
    }

    /// The sources as compiled (to render diagnostics and tell clauses' files apart).
    pub fn source_map(&self) -> &SourceMap {
        &self.map
    }

    /// The pid-provider sites left out because they cannot be probed safely: (count, reason),
    /// `None` when none were.
    pub fn skipped_sites(&self) -> Option<(usize, String)> {
        self.skipped.clone()
    }

    /// Runs the program on a new thread and returns its events as they come.
    ///
    /// Life cycle (dtrace(1M)'s): `BEGIN` runs, every probe is attached, a created command is
    /// released; records arrive until `exit()`, [`Run::stop`], or the target's exit; then
    /// everything is detached, `END` runs, aggregations not printed by `printa()` arrive, drops
    /// are reported, and an [`Event::Exit`] is last.
    ///
    /// # Errors
    /// [`Error::WrongThread`] for a command created by [`Script::compile_here`]; load and attach
    /// failures arrive as the run's last item (`Err`).
    pub fn run(self) -> Result<Run, Error> {
        self.run_with(RunOptions::default())
    }

    /// [`Program::run`] with options.
    ///
    /// # Errors
    /// See [`Program::run`].
    pub fn run_with(mut self, opts: RunOptions) -> Result<Run, Error> {
        let (tx, rx) = tokio::sync::mpsc::channel(opts.queue.max(1));
        let control = Arc::new(RunControl::default());
        let ctl = control.clone();
        if let Some(mut w) = self.worker.take() {
            let _ = w.go.send(Some(WorkerRun { tx, control: ctl }));
            return Ok(Run {
                rx,
                control,
                thread: w.thread.take(),
            });
        }
        if self.local.as_ref().is_some_and(|l| l.target.held.is_some()) {
            return Err(Error::WrongThread);
        }
        let thread = std::thread::Builder::new()
            .name("sightline-probe".into())
            .spawn(move || {
                let mut program = self;
                let events = tx.clone();
                let r = program.consume(ctl, move |e| events.blocking_send(Ok(e)).is_ok());
                if let Err(e) = r {
                    let _ = tx.blocking_send(Err(e));
                }
            })
            .map_err(|e| Error::Run(RunError::Io(e)))?;
        Ok(Run {
            rx,
            control,
            thread: Some(thread),
        })
    }

    /// Runs the consumer with `sink` receiving every event.
    fn consume(
        &mut self,
        control: Arc<RunControl>,
        sink: impl FnMut(Event) -> bool,
    ) -> Result<StopReason, Error> {
        let cfg = self.config(&PrintOptions::default(), Some(control));
        let mut out = std::io::sink();
        let mut err = std::io::sink();
        let layout = self.layout.clone();
        let Some(local) = self.local.as_mut() else {
            return Err(Error::WrongThread);
        };
        let mut consumer = Consumer::new(&self.checked, layout, cfg, &mut out, &mut err)?;
        consumer.set_event_sink(sink);
        let r = consumer.run(local.target.held.as_mut().map(|h| h as _));
        drop(consumer);
        self.finish(r)
    }

    fn config(&self, p: &PrintOptions, control: Option<Arc<RunControl>>) -> RunConfig {
        RunConfig {
            quiet: p.quiet || p.json || self.checked.options.quiet,
            json: p.json,
            verbose: p.verbose,
            watch_pid: self.local.as_ref().and_then(|l| l.target.watch_pid),
            target_pid: self.target_pid,
            control,
            ring_last_clauses: {
                let n = self.checked.clauses.len();
                (n.saturating_sub(self.report_last)..n).collect()
            },
            postmortem: self.postmortem.clone(),
            testing: p.testing,
        }
    }

    /// A failed release of a created command reports why it cannot execute.
    fn finish(&mut self, r: Result<StopReason, RunError>) -> Result<StopReason, Error> {
        match self.local.as_mut() {
            Some(l) => finish(l, r),
            None => r.map_err(Error::Run),
        }
    }

    /// Loads the program on this thread to print its output to `out` (DTrace's text, or JSON
    /// Lines under [`PrintOptions::json`]) and its messages to `err`, as `sightline probe` does;
    /// [`Loaded::run`] then attaches and runs it. Nothing is attached yet.
    ///
    /// # Errors
    /// [`Error::Run`] when a map cannot be created or the verifier rejects a program (a
    /// permission error without root: [`Error::is_permission`]); [`Error::WrongThread`] for a
    /// command created by [`Script::compile`].
    pub fn load_to<'a>(
        &'a mut self,
        out: &'a mut dyn Write,
        err: &'a mut dyn Write,
        print: &PrintOptions,
    ) -> Result<Loaded<'a>, Error> {
        let cfg = self.config(print, None);
        let layout = self.layout.clone();
        let Some(local) = self.local.as_mut() else {
            return Err(Error::WrongThread);
        };
        let consumer = Consumer::new(&self.checked, layout, cfg, out, err)?;
        Ok(Loaded { consumer, local })
    }

    /// [`Program::load_to`] and [`Loaded::run`] in one call.
    ///
    /// # Errors
    /// See both.
    pub fn run_to(
        &mut self,
        out: &mut dyn Write,
        err: &mut dyn Write,
        print: &PrintOptions,
    ) -> Result<StopReason, Error> {
        self.load_to(out, err, print)?.run(None)
    }
}

/// A created command's failed release reports why it cannot execute.
fn finish(local: &mut Local, r: Result<StopReason, RunError>) -> Result<StopReason, Error> {
    match r {
        Ok(reason) => Ok(reason),
        Err(e) => match local.target.held.as_mut().and_then(|h| h.exec_error.take()) {
            Some(reason) => Err(Error::CannotExecute {
                command: local.target.command.clone().unwrap_or_default(),
                reason,
            }),
            None => Err(Error::Run(e)),
        },
    }
}

/// A program loaded to print on this thread ([`Program::load_to`]).
pub struct Loaded<'a> {
    consumer: Consumer<'a>,
    local: &'a mut Local,
}

impl std::fmt::Debug for Loaded<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded").finish_non_exhaustive()
    }
}

impl<'a> Loaded<'a> {
    /// Attaches every probe, releases a created command, prints records as they arrive and the
    /// aggregations at the end; returns why tracing stopped. `progress(done, total)` is told as
    /// the probes attach. SIGINT stops it when the caller installed probe-sys's interrupt
    /// handler.
    ///
    /// # Errors
    /// [`Error::Run`] when attaching, reading or writing fails; [`Error::CannotExecute`] when a
    /// created command's `execve` failed.
    pub fn run(
        mut self,
        progress: Option<Box<dyn FnMut(usize, usize) + 'a>>,
    ) -> Result<StopReason, Error> {
        if let Some(f) = progress {
            self.consumer.set_attach_progress(f);
        }
        let r = self
            .consumer
            .run(self.local.target.held.as_mut().map(|h| h as _));
        drop(self.consumer);
        finish(self.local, r)
    }
}

/// A running program: its events, in order, as a blocking iterator of `Result<Event, Error>`
/// (a failure to load or attach is the last item), or as a tokio stream
/// ([`Run::into_stream`]). Dropping it stops tracing and waits for the thread (a created command
/// still running is killed, as dtrace(1M) does).
#[derive(Debug)]
pub struct Run {
    rx: tokio::sync::mpsc::Receiver<Result<Event, Error>>,
    control: Arc<RunControl>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Run {
    /// Stops tracing, as SIGINT stops `sightline probe`: `END` runs, the aggregations and an
    /// [`Event::Exit`] with [`ExitReason::Interrupted`] still arrive.
    pub fn stop(&self) {
        self.control.stop();
    }

    /// A handle that stops or snapshots the run from elsewhere (another thread or task).
    pub fn handle(&self) -> RunHandle {
        RunHandle(self.control.clone())
    }

    /// Asks for a snapshot of every aggregation: one [`Event::Aggregation`] each, in program
    /// order, within the consumer's wake-up interval (`switchrate`, 50 ms by default).
    pub fn snapshot(&self) {
        self.control.snapshot();
    }

    /// The run as a tokio [`Stream`](tokio_stream::Stream) of the same items.
    pub fn into_stream(mut self) -> RunStream {
        let rx = std::mem::replace(&mut self.rx, tokio::sync::mpsc::channel(1).1);
        RunStream {
            inner: tokio_stream::wrappers::ReceiverStream::new(rx),
            _run: self,
        }
    }
}

impl Iterator for Run {
    type Item = Result<Event, Error>;

    /// The next event, waiting for it; `None` after the last ([`Event::Exit`] or an error).
    fn next(&mut self) -> Option<Self::Item> {
        self.rx.blocking_recv()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.control.stop();
        // Unblock a sender waiting for room, then wait for the thread to detach everything.
        self.rx.close();
        while self.rx.try_recv().is_ok() {}
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            // The thread's panic was already reported on stderr; nothing is left attached
            // (its session's descriptors closed as it unwound).
        }
    }
}

/// Stops or snapshots a [`Run`] from another thread or task.
#[derive(Debug, Clone)]
pub struct RunHandle(Arc<RunControl>);

impl RunHandle {
    /// See [`Run::stop`].
    pub fn stop(&self) {
        self.0.stop();
    }

    /// See [`Run::snapshot`].
    pub fn snapshot(&self) {
        self.0.snapshot();
    }
}

/// A [`Run`]'s events as a tokio stream ([`Run::into_stream`]).
#[derive(Debug)]
pub struct RunStream {
    inner: tokio_stream::wrappers::ReceiverStream<Result<Event, Error>>,
    _run: Run,
}

impl RunStream {
    /// A handle that stops or snapshots the run.
    pub fn handle(&self) -> RunHandle {
        self._run.handle()
    }
}

impl tokio_stream::Stream for RunStream {
    type Item = Result<Event, Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::pin::Pin::new(&mut self.inner).poll_next(cx)
    }
}
