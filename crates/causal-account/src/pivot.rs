//! Pivot Tracing in D (Mace, Roelke, Fonseca, "Pivot Tracing", SOSP 2015): the built-in-like
//! variables `causal_task` (the task key of the current thread, 0: none) and `causal_activity`
//! (its activity label, "" when none), so that any probe can group by request:
//!
//! ```text
//! syscall::read:return /causal_task/ { @[causal_task] = sum(arg0); }
//! ```
//!
//! They are D `inline`s over per-thread arrays that a `causal:context` clause keeps, prepended
//! to the user's program ([`prelude`]; `sightline probe --causal EXE`). A thread's values are
//! known from its first `causal:context` after the program started (docs/causal-accounting.md,
//! "Pivot Tracing in D").

use std::path::PathBuf;

/// The D prelude defining `causal_task` and `causal_activity` for the processes of `exes`.
pub fn prelude(exes: &[PathBuf]) -> String {
    let mut d = String::from(
        "uint64_t causal_task_of[int];\nstring causal_activity_of[int];\n\
         inline uint64_t causal_task = causal_task_of[tid];\n\
         inline string causal_activity = causal_activity_of[tid];\n",
    );
    for exe in exes {
        d.push_str(&format!(
            "causal:{}::context {{ causal_task_of[tid] = arg0; causal_activity_of[tid] = copyinstr(arg2); }}\n",
            exe.display()
        ));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prelude_names_each_executable() {
        let d = prelude(&[PathBuf::from("/srv/a"), PathBuf::from("/srv/b")]);
        assert!(d.contains("inline uint64_t causal_task = causal_task_of[tid];"));
        assert!(d.contains("causal:/srv/a::context {"));
        assert!(d.contains("causal:/srv/b::context {"));
    }
}
