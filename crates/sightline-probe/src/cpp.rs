//! `dtrace -C`: the C preprocessor over a D script (dtrace(1M) `-C`, `-I`, `-D`, `-U`, `-H`;
//! Oracle's libdtrace `dt_preproc`).
//!
//! The script goes to the system's `cpp` (GCC's; package `cpp`) on its standard input, with
//! `-D__SUNW_D=1 -D__SUNW_D_64 -D__SUNW_D_VERSION=0x01010000` (the macros DTrace defines) and the
//! user's `-D`/`-U`/`-I`. A `#!` first line is blanked first (cpp refuses it). The output is
//! laid back onto the script's own lines using cpp's line markers (`# LINE "FILE" FLAGS`), so a
//! diagnostic's line and column are the script's: text from an `#include`d header is joined
//! onto the line of its `#include`.

use std::io::Write;
use std::process::{Command, Stdio};

/// How to run the preprocessor.
#[derive(Clone, Debug, Default)]
pub struct Cpp {
    /// `-I DIR`: directories searched for `#include`, in order.
    pub includes: Vec<String>,
    /// `-D NAME[=VALUE]`: macros defined.
    pub defines: Vec<String>,
    /// `-U NAME`: macros undefined.
    pub undefs: Vec<String>,
    /// `-H`: cpp prints the name of each included file on stderr.
    pub show_includes: bool,
    /// The preprocessor to run (default `cpp`, found on `PATH`).
    pub program: Option<String>,
    /// `-x stdc=MODE`: the C dialect cpp follows.
    pub stdc: Stdc,
}

/// The C dialect of the preprocessor (dtrace's `-x stdc` option, Oracle libdtrace
/// `dt_opt_stdc` and `dt_preproc`): `a` (the default) runs cpp as ISO C99 (`-std=c99`), `s`
/// as a K&R preprocessor (`-traditional-cpp`: no `__STDC__`), `c` and `t` with cpp's own
/// defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stdc {
    /// `a`: ISO C plus K&R compatibility (`-std=c99`).
    #[default]
    A,
    /// `c`: strictly conforming ISO C.
    C,
    /// `s`: K&R C only (`-traditional-cpp`).
    S,
    /// `t`: ISO C plus K&R compatibility warnings.
    T,
}

impl Stdc {
    /// The mode named `value` (`a`, `c`, `s` or `t`), or `None`.
    pub fn parse(value: &str) -> Option<Stdc> {
        Some(match value {
            "a" => Stdc::A,
            "c" => Stdc::C,
            "s" => Stdc::S,
            "t" => Stdc::T,
            _ => return None,
        })
    }
}

/// Why preprocessing failed.
#[derive(Debug, thiserror::Error)]
pub enum CppError {
    /// The preprocessor could not be started.
    #[error("{name}: cannot run the C preprocessor `{program}` (install the `cpp` package)")]
    Spawn {
        /// The script.
        name: String,
        /// The program.
        program: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The preprocessor reported errors (they are in `messages`, as cpp printed them).
    #[error("{name}: the preprocessor failed to process the program\n{messages}")]
    Failed {
        /// The script.
        name: String,
        /// cpp's messages.
        messages: String,
    },
}

/// Preprocesses `text` (the script `name`); returns the text to compile, line for line.
///
/// # Errors
/// [`CppError::Spawn`] when `cpp` cannot be run, [`CppError::Failed`] when it reports an error
/// (`#error`, an unterminated `#if`, a missing header).
pub fn preprocess(name: &str, text: &str, opts: &Cpp) -> Result<String, CppError> {
    let program = opts.program.clone().unwrap_or_else(|| "cpp".to_string());
    let mut cmd = Command::new(&program);
    // Oracle libdtrace's predefined macros (dt_open.c: `__linux`, `__unix`, `__SVR4`,
    // `__SUNW_D`, `__SUNW_D_64`, `__` + the system name; `__GNUC__` undefined, so that system
    // headers leave out what only GCC understands) and `__SUNW_D_VERSION` (dt_cc.c).
    cmd.args([
        "-x",
        "c",
        "-D__linux",
        "-D__unix",
        "-D__SVR4",
        "-D__SUNW_D=1",
        "-U__GNUC__",
        "-D__SUNW_D_64",
        "-D__Linux",
        "-D__SUNW_D_VERSION=0x01010000",
    ]);
    match opts.stdc {
        Stdc::A => {
            cmd.arg("-std=c99");
        }
        Stdc::S => {
            cmd.arg("-traditional-cpp");
        }
        Stdc::C | Stdc::T => {}
    }
    for d in &opts.defines {
        cmd.arg(format!("-D{d}"));
    }
    for u in &opts.undefs {
        cmd.arg(format!("-U{u}"));
    }
    for i in &opts.includes {
        cmd.arg(format!("-I{i}"));
    }
    if opts.show_includes {
        cmd.arg("-H");
    }
    cmd.arg("-");
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawn_err = |source| CppError::Spawn {
        name: name.to_string(),
        program: program.clone(),
        source,
    };
    let mut child = cmd.spawn().map_err(spawn_err)?;
    let input = blank_shebang(text).into_owned();
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // A writer thread: cpp may fill its output pipe before it has read all of a large input.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().map_err(spawn_err)?;
    let _ = writer.join();
    // cpp names its standard input `<stdin>`: the messages name the script instead.
    let messages = String::from_utf8_lossy(&out.stderr).replace("<stdin>", name);
    if !out.status.success() {
        return Err(CppError::Failed {
            name: name.to_string(),
            messages,
        });
    }
    if opts.show_includes && !messages.is_empty() {
        eprint!("{messages}");
    }
    Ok(relay(&String::from_utf8_lossy(&out.stdout)))
}

/// Lays cpp's output back onto the input's lines by its line markers: each line of the main
/// file (cpp names standard input `<stdin>`) at its line number, text from other files joined
/// onto the main line that included it.
fn relay(out: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let (mut main, mut line) = (true, 1usize);
    let mut last_main = 1usize;
    for l in out.lines() {
        if let Some(marker) = line_marker(l) {
            let to_main = marker.1 == "<stdin>";
            if main && !to_main {
                // Entering an #include: its text goes on the directive's line.
                last_main = line;
            }
            main = to_main;
            line = marker.0;
            continue;
        }
        // cpp's first markers say line 0 (`# 0 "<stdin>"`); a K&R cpp (`-traditional-cpp`)
        // may put blank lines there: they count as line 1.
        let at = if main {
            last_main = line;
            line
        } else {
            last_main
        }
        .max(1);
        if lines.len() < at {
            lines.resize(at, String::new());
        }
        let slot = &mut lines[at - 1];
        if !l.trim().is_empty() {
            if !slot.is_empty() {
                slot.push(' ');
            }
            slot.push_str(l);
        }
        if main {
            line += 1;
        }
    }
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// `# 12 "file" 1 3` → (12, "file").
fn line_marker(l: &str) -> Option<(usize, &str)> {
    let rest = l.strip_prefix("# ")?;
    let (num, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let n: usize = num.parse().ok()?;
    let file = rest.strip_prefix('"')?.split('"').next()?;
    Some((n, file))
}

/// `text` with a `#!` first line (an interpreter line, as `#!/usr/sbin/dtrace -s`) replaced by
/// spaces, so that the compiler and cpp skip it and line and column numbers stay those of the
/// file; any other text unchanged.
pub(crate) fn blank_shebang(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.starts_with("#!") {
        return std::borrow::Cow::Borrowed(text);
    }
    let end = text.find('\n').unwrap_or(text.len());
    std::borrow::Cow::Owned(format!("{}{}", " ".repeat(end), &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_put_main_lines_back_and_join_headers_onto_the_include() {
        let out = "# 1 \"<stdin>\"\n# 1 \"<built-in>\"\nbuiltin junk\n# 1 \"<stdin>\"\n\n\
                   # 1 \"/usr/include/h.h\" 1\nint a;\nint b;\n# 3 \"<stdin>\" 2\n\
                   BEGIN\n{\n\n\n  x = 5;\n}\n";
        let text = relay(out);
        let lines: Vec<&str> = text.lines().collect();
        // Header text on the #include's line (2), the clause from line 3 on.
        assert_eq!(lines[0], "builtin junk");
        assert_eq!(lines[1], "int a; int b;");
        assert_eq!(lines[2], "BEGIN");
        assert_eq!(lines[6], "  x = 5;");
        assert_eq!(lines.len(), 8);
    }

    #[test]
    fn a_define_and_an_ifdef_are_applied_on_the_script_s_lines() {
        if std::process::Command::new("cpp")
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(
                std::env::var_os("CI").is_none(),
                "cpp is missing (install the cpp package)"
            );
            eprintln!("skipped: no cpp");
            return;
        }
        let src = "#!/usr/sbin/dtrace -s\n#ifdef FLAG\n#define V 5\n#else\n#define V 10\n#endif\nBEGIN { trace(V); }\n";
        let opts = Cpp {
            defines: vec!["FLAG".into()],
            ..Cpp::default()
        };
        let text = preprocess("t.d", src, &opts).unwrap();
        assert_eq!(text.lines().nth(6), Some("BEGIN { trace(5); }"));
        let text = preprocess("t.d", src, &Cpp::default()).unwrap();
        assert_eq!(text.lines().nth(6), Some("BEGIN { trace(10); }"));
        let e = preprocess("t.d", "#if 1\nBEGIN {}\n", &Cpp::default()).unwrap_err();
        assert!(matches!(e, CppError::Failed { .. }), "{e}");
        assert!(e.to_string().contains("unterminated"), "{e}");
    }
}
