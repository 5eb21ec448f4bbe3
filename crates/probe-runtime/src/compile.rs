//! The compile driver: D sources → AST → (kernel BTF) → checked program → BPF layout, in the
//! order of the passes, for every user of the pipeline (the `sightline probe` command, the tests,
//! a typed Rust API).
//!
//! 1. [`parse`]: probe-syntax parses every file of a [`SourceMap`] into one program.
//! 2. [`compile`]: reads the kernel's BTF (`/sys/kernel/btf/vmlinux`, parsed by probe-sema's pure
//!    [`Btf`] parser, once per process) only when the program needs it: structure member access
//!    (`curthread->pid`, casts to `struct` types) types from it, and `ppid`/`vtimestamp` take
//!    their `struct task_struct` member offsets from it; then probe-sema checks the program
//!    against a probe catalog, and probe-codegen lowers it for this machine (possible CPUs, the
//!    wall-clock offset, the syscall table).
//!
//! [`crate::run::Consumer`] loads, attaches and runs the result.

use std::sync::{Arc, OnceLock};

use probe_codegen::lower::{IterNumKfuncs, TaskOffsets};
use probe_codegen::{CodegenOptions, Layout};
use probe_sema::btf::{Btf, BtfError};
use probe_sema::{CheckedProgram, ProbeCatalog, SemaOptions};
use probe_syntax::ast::Program;
use probe_syntax::{Diagnostic, SourceMap};
use probe_sys::os;

/// Where the running kernel publishes its BTF (Linux 5.4+ with `CONFIG_DEBUG_INFO_BTF`).
pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Why a program did not compile.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The sources do not parse: every diagnostic, to render with the [`SourceMap`]
    /// (`probe_syntax::render_all`).
    #[error("the D program has syntax errors")]
    Syntax(Vec<Diagnostic>),
    /// The sources parse but hold no probe clause.
    #[error("no probes specified: the program has no probe clauses [D_EMPTY]")]
    NoClauses,
    /// The analysis rejected the program: every diagnostic (errors and warnings).
    #[error("the D program has errors")]
    Sema(Vec<Diagnostic>),
    /// The program needs kernel types and the kernel's BTF could not be read.
    #[error("reading kernel types from {KERNEL_BTF}")]
    ReadBtf(#[source] Arc<std::io::Error>),
    /// The program needs kernel types and the kernel's BTF did not parse.
    #[error("parsing kernel types from {KERNEL_BTF}")]
    ParseBtf(#[source] BtfError),
    /// The program reads `ppid` or `vtimestamp` and the kernel's BTF lacks a `struct
    /// task_struct` member the code generator needs.
    #[error("ppid and vtimestamp need task_struct.{member}, which the kernel's BTF lacks")]
    TaskOffsets {
        /// The missing member (`real_parent`, `tgid`, `se.sum_exec_runtime`).
        member: &'static str,
    },
    /// The code generator cannot lower the program.
    #[error(transparent)]
    Codegen(#[from] probe_codegen::CodegenError),
}

/// What [`compile`] needs besides the program and the catalog (the `dtrace(1M)` options that
/// shape the analysis).
#[derive(Debug, Clone, Default)]
pub struct CompileOptions {
    /// Macro arguments `$1`, `$2`, ... (index 0 is `$1`).
    pub macro_args: Vec<String>,
    /// `$0` (the `-s` script's path).
    pub script_name: Option<String>,
    /// `$target` (from `-c` or `-p`).
    pub target_pid: Option<u32>,
    /// `-x name[=value]` options, in order (they override `#pragma D option`).
    pub options: Vec<(String, Option<String>)>,
    /// Drop clauses whose descriptions match no probe (`-Z`) instead of failing.
    pub allow_zero_matches: bool,
    /// Under `bufpolicy=ring`, the program's last this many clauses keep the ring buffer (the
    /// flight recorder's crash report): [`CodegenOptions::ring_bypass_last`].
    pub ring_bypass_last: usize,
}

/// A compiled program: the checked program (its warnings included) and what the code generator
/// produced for it.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The program after analysis (clauses, variables, aggregations, options, warnings).
    pub checked: CheckedProgram,
    /// Maps, programs with their attach points, record and aggregation layouts.
    pub layout: Layout,
}

/// Parses every file of `sources` (in order) into one program.
///
/// # Errors
/// [`CompileError::Syntax`] with every diagnostic when any is an error;
/// [`CompileError::NoClauses`] when the sources hold nothing (declarations without a clause
/// are refused by [`compile`], after their own errors).
pub fn parse(sources: &SourceMap) -> Result<Program, CompileError> {
    let mut program = Program::default();
    let mut diags = Vec::new();
    for f in sources.files() {
        let (p, d) = probe_syntax::parse(f);
        program.extend(p);
        diags.extend(d);
    }
    if diags.iter().any(|d| d.is_error()) {
        return Err(CompileError::Syntax(diags));
    }
    // Declarations without clauses are checked by `compile` first (their errors are the
    // user's real mistake); a program with nothing at all is refused here.
    if program.items.is_empty() {
        return Err(CompileError::NoClauses);
    }
    Ok(program)
}

/// Checks `program` against `catalog` and generates its BPF for this machine (see the module
/// docs for the passes). The consumer's own pid is `$pid`.
///
/// # Errors
/// [`CompileError::ReadBtf`], [`CompileError::ParseBtf`] or [`CompileError::TaskOffsets`] when the
/// program needs kernel types that are unavailable; [`CompileError::Sema`] with the diagnostics;
/// [`CompileError::Codegen`] when the code generator cannot lower a construct.
pub fn compile(
    program: &Program,
    catalog: &dyn ProbeCatalog,
    opts: &CompileOptions,
) -> Result<Compiled, CompileError> {
    let kernel_types = if probe_sema::needs_kernel_types(program) {
        Some(kernel_btf()?)
    } else {
        None
    };
    let task = if probe_sema::needs_task_offsets(program) {
        Some(task_offsets(&*kernel_btf()?)?)
    } else {
        None
    };
    // chill()'s spin loop: the kfunc ids, or None (codegen then says what is missing).
    let kfuncs = if probe_sema::needs_kfuncs(program) {
        let btf = kernel_btf()?;
        iter_num_kfuncs(&btf)
    } else {
        None
    };
    let sema_opts = SemaOptions {
        macro_args: opts.macro_args.clone(),
        script_name: opts.script_name.clone(),
        target_pid: opts.target_pid,
        pid: Some(std::process::id()),
        options: opts.options.clone(),
        allow_zero_matches: opts.allow_zero_matches,
        kernel_types,
    };
    let checked = probe_sema::analyze(program, catalog, &sema_opts).map_err(CompileError::Sema)?;
    if program.clauses().next().is_none() {
        return Err(CompileError::NoClauses);
    }
    let o = &checked.options;
    let cg = CodegenOptions {
        ncpus: os::possible_cpus() as u32,
        // Under ring or fill, `bufsize` sizes the kernel's slots (`sl_ring`); the ring buffer,
        // which then carries BEGIN's and ERROR's records (and the records of a program whose
        // probes record nothing), keeps at least DTrace's default 4 MiB.
        bufsize: match crate::run::BufPolicy::of(&checked) {
            Some(_) => o.bufsize.map(|b| b.max(crate::run::BUFSIZE_DEFAULT)),
            None => o.bufsize,
        },
        wall_offset_ns: os::wall_offset_ns(),
        dynvarsize: o.dynvarsize.unwrap_or(1 << 20),
        aggsize: o.aggsize.unwrap_or(4 << 20),
        syscall_count: linux_syscalls::SYSCALLS_X86_64.len(),
        task,
        probe_id: Some(crate::run::probe_display_id),
        kfuncs,
        ring_bypass_last: opts.ring_bypass_last,
        // Both policies keep the probes' records in the kernel's slots (`sl_ring`).
        kernel_ring: crate::run::BufPolicy::of(&checked)
            .map(|_| o.bufsize.unwrap_or(crate::run::BUFSIZE_DEFAULT)),
        kernel_fill: crate::run::BufPolicy::of(&checked) == Some(crate::run::BufPolicy::Fill),
    };
    let layout = probe_codegen::compile(&checked, &cg)?;
    Ok(Compiled { checked, layout })
}

/// The running kernel's BTF, read and parsed once per process (it is several MB; a failure is
/// remembered too).
///
/// # Errors
/// [`CompileError::ReadBtf`] or [`CompileError::ParseBtf`].
pub fn kernel_btf() -> Result<Arc<Btf>, CompileError> {
    /// How reading the BTF failed, kept for later callers.
    enum Failed {
        Read(Arc<std::io::Error>),
        Parse(BtfError),
    }
    static BTF: OnceLock<Result<Arc<Btf>, Failed>> = OnceLock::new();
    let r = BTF.get_or_init(|| {
        let bytes = std::fs::read(KERNEL_BTF).map_err(|e| Failed::Read(Arc::new(e)))?;
        Btf::parse(&bytes).map(Arc::new).map_err(Failed::Parse)
    });
    match r {
        Ok(b) => Ok(b.clone()),
        Err(Failed::Read(io)) => Err(CompileError::ReadBtf(io.clone())),
        Err(Failed::Parse(e)) => Err(CompileError::ParseBtf(e.clone())),
    }
}

/// The BTF ids of the `bpf_iter_num_new`, `_next` and `_destroy` kfuncs `chill()` runs on;
/// `None` when `btf` lacks one (a kernel before 6.4).
pub fn iter_num_kfuncs(btf: &Btf) -> Option<IterNumKfuncs> {
    Some(IterNumKfuncs {
        new: btf.func_id("bpf_iter_num_new")?,
        next: btf.func_id("bpf_iter_num_next")?,
        destroy: btf.func_id("bpf_iter_num_destroy")?,
    })
}

/// The `struct task_struct` member offsets (bytes) the code generator reads for `ppid`
/// (`real_parent`, then the parent's `tgid`) and `vtimestamp` (`se.sum_exec_runtime`).
///
/// # Errors
/// [`CompileError::TaskOffsets`] naming the first member `btf` lacks.
pub fn task_offsets(btf: &Btf) -> Result<TaskOffsets, CompileError> {
    let at = |path: &[&str], member| {
        btf.member_offset("task_struct", path)
            .ok_or(CompileError::TaskOffsets { member })
    };
    Ok(TaskOffsets {
        real_parent: at(&["real_parent"], "real_parent")?,
        tgid: at(&["tgid"], "tgid")?,
        sum_exec_runtime: at(&["se", "sum_exec_runtime"], "se.sum_exec_runtime")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use probe_sema::StaticCatalog;

    fn sources(text: &str) -> SourceMap {
        let mut m = SourceMap::new();
        m.add("t.d", text.to_string());
        m
    }

    /// The running kernel's BTF names the three `bpf_iter_num` kfuncs `chill()` calls (Linux
    /// 6.4+), as distinct FUNC types.
    #[test]
    fn kernel_btf_has_the_iterator_kfuncs() {
        if !test_support::require_file(KERNEL_BTF, "kernel BTF") {
            return;
        }
        let btf = kernel_btf().unwrap();
        let k = iter_num_kfuncs(&btf).expect("bpf_iter_num_* in kernel BTF");
        assert!(
            k.new != k.next && k.next != k.destroy && k.new != k.destroy,
            "{k:?}"
        );
        assert_eq!(btf.func_id("bpf_iter_num_new"), Some(k.new));
        assert_eq!(btf.func_id("no_such_function_sightline"), None);
    }

    #[test]
    fn syntax_errors_and_empty_programs_are_typed() {
        let Err(CompileError::Syntax(d)) = parse(&sources("BEGIN { x = ; }")) else {
            panic!("expected a syntax error");
        };
        assert!(d.iter().any(|d| d.is_error()));
        assert!(matches!(
            parse(&sources("/* nothing */")),
            Err(CompileError::NoClauses)
        ));
    }

    #[test]
    fn unmatched_probes_are_sema_diagnostics() {
        let program = parse(&sources("nosuch:::probe { exit(0); }")).unwrap();
        let e = compile(
            &program,
            &StaticCatalog::default(),
            &CompileOptions::default(),
        )
        .unwrap_err();
        let CompileError::Sema(d) = e else {
            panic!("expected diagnostics, got {e:?}");
        };
        assert!(d.iter().any(|d| d.is_error()));
    }

    #[test]
    fn a_btf_without_task_struct_names_the_missing_member() {
        let e = task_offsets(&Btf::default()).unwrap_err();
        assert!(matches!(
            e,
            CompileError::TaskOffsets {
                member: "real_parent"
            }
        ));
        assert_eq!(
            e.to_string(),
            "ppid and vtimestamp need task_struct.real_parent, which the kernel's BTF lacks"
        );
    }

    #[test]
    fn task_struct_offsets_come_from_the_running_kernel() {
        let btf = match kernel_btf() {
            Ok(b) => b,
            // A kernel without CONFIG_DEBUG_INFO_BTF: a skip here, a failure under CI.
            Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("{e}"),
            Err(e) => {
                eprintln!("skipped: {e}: no kernel BTF");
                return;
            }
        };
        let t = task_offsets(&btf).unwrap();
        // tgid follows pid (both pid_t) and real_parent comes later in struct task_struct.
        let pid = btf.member_offset("task_struct", &["pid"]).unwrap();
        assert_eq!(t.tgid, pid + 4);
        assert!(t.real_parent > t.tgid);
        let se = btf.member_offset("task_struct", &["se"]).unwrap();
        assert!(t.sum_exec_runtime > se);
    }
}
