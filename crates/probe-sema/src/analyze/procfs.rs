//! Sightline's built-in D library (`procfs.d` beside this crate's sources): DTrace's process
//! model types `psinfo_t` and `lwpsinfo_t`, their translators from `struct task_struct *`, and
//! `curpsinfo`/`curlwpsinfo` (DTrace guide, "Translators" → "Stable Translations"). It is
//! loaded, before the program's own declarations, when the program names one of its
//! identifiers or types and the kernel's BTF describes `struct task_struct`.

use super::*;

/// The library's text.
const PROCFS_D: &str = include_str!("../procfs.d");

/// Where the library's spans start (beyond any program's files, so a diagnostic inside it is
/// never shown as a line of the user's script).
const PROCFS_BASE: u32 = 0xF000_0000;

/// The identifiers the library defines (a program naming one loads it).
pub(super) const NAMES: &[&str] = &[
    "curpsinfo",
    "curlwpsinfo",
    "PR_MODEL_ILP32",
    "PR_MODEL_LP64",
    "PIDTYPE_PID",
    "PIDTYPE_TGID",
    "PIDTYPE_PGID",
    "PIDTYPE_SID",
    "PR_STOPPED",
    "PR_ISTOP",
    "PR_DSTOP",
    "PR_IDLE",
    "SSLEEP",
    "SRUN",
    "SZOMB",
    "SSTOP",
    "SIDL",
    "SONPROC",
    "SWAIT",
];

/// True when `program` names an identifier or type of the library.
pub(super) fn needs_procfs(program: &ast::Program) -> bool {
    any_node(
        program,
        &|e| matches!(&e.kind, ExprKind::Ident(n) if NAMES.contains(&n.as_str())),
        &|t| matches!(&t.base, BaseType::Struct(n) if n == "psinfo" || n == "lwpsinfo"),
    )
}

impl Analyzer<'_> {
    /// Defines the library's types, inlines and translators (nothing without kernel BTF: its
    /// translators read `struct task_struct`). Its diagnostics are kept: they would mean the
    /// kernel's BTF lacks a member it reads.
    pub(super) fn load_procfs(&mut self) {
        if self
            .btf
            .as_ref()
            .and_then(|b| b.struct_id("task_struct"))
            .is_none()
        {
            return;
        }
        let file = probe_syntax::SourceFile::at("<procfs.d>", PROCFS_D, PROCFS_BASE);
        let (lib, diags) = probe_syntax::parse(&file);
        for d in diags {
            self.report(d);
        }
        for item in &lib.items {
            match item {
                ast::Item::Type(t) => self.type_definition(t),
                ast::Item::Inline(d) => self.inline_definition(d),
                ast::Item::Translator(t) => self.translator_definition(t),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_parses_cleanly() {
        let file = probe_syntax::SourceFile::at("<procfs.d>", PROCFS_D, PROCFS_BASE);
        let (lib, diags) = probe_syntax::parse(&file);
        assert!(diags.is_empty(), "{diags:?}");
        let translators = lib
            .items
            .iter()
            .filter(|i| matches!(i, ast::Item::Translator(_)))
            .count();
        assert_eq!(translators, 2);
        // Every name a program may use to load the library is defined by it.
        for n in NAMES {
            assert!(
                lib.items
                    .iter()
                    .any(|i| matches!(i, ast::Item::Inline(d) if d.name == *n)),
                "{n}"
            );
        }
    }
}
