//! Diagnostics: a user's mistake in a D script, with the span it concerns, and their rendering.
//!
//! Diagnostics are collected, never thrown one at a time: the parser and the semantic analysis report
//! every error of a script. [`Diagnostic::render`] prints the shape the project uses everywhere:
//!
//! ```text
//! script.d:3:27: error: expected `;` after statement
//!     3 |     @[execname] = count()
//!       |                          ^
//! hint: statements in a clause end with `;`
//! ```
//!
//! That is `file:line:col: severity: message` (an error with DTrace's tag shows it after the
//! severity, `error[D_SYNTAX]:`, as rustc shows its codes) (1-based line and column, the column counted in
//! characters), each source line a label touches with its number, a marker line under each label
//! (`^~~~` for the primary span, `-` for secondary labels) followed by the label's message, and an
//! optional `hint:` line. We render it ourselves rather than with codespan-reporting or
//! annotate-snippets because both put the location on a second line (`┌─ file:line:col`), while the
//! compilers our users know (cc, dtrace) put it first, which editors and `grep` pick up.

use crate::errtag::ErrTag;
use crate::source::{SourceMap, Span};
use std::fmt::Write as _;

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Extra information attached to another diagnostic.
    Note,
    /// Suspicious but the program still compiles.
    Warning,
    /// The program cannot be compiled.
    Error,
}

impl Severity {
    /// `error`, `warning` or `note`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// A secondary span with a short message (e.g. "first assigned here as `string`").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    /// What the label points at.
    pub span: Span,
    /// Shown after the marker; may be empty.
    pub message: String,
}

/// One problem in a script: severity, message, primary span, secondary labels and an optional hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error, warning or note.
    pub severity: Severity,
    /// One line, lower case, no final period (e.g. "unknown variable `foo`").
    pub message: String,
    /// The primary location: the caret goes under it.
    pub span: Span,
    /// Message printed after the primary caret (may be empty).
    pub span_label: String,
    /// Secondary locations.
    pub labels: Vec<Label>,
    /// A suggestion of how to fix it (`hint: ...`).
    pub hint: Option<String>,
    /// DTrace's error tag, rendered as `error[D_SYNTAX]:` (see [`crate::errtag`]).
    pub code: Option<ErrTag>,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span,
            span_label: String::new(),
            labels: Vec::new(),
            hint: None,
            code: None,
        }
    }

    /// An error at `span` with DTrace's tag `code`.
    pub fn tagged(code: ErrTag, message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic::error(message, span).with_code(code)
    }

    /// Sets DTrace's error tag.
    pub fn with_code(mut self, code: ErrTag) -> Diagnostic {
        self.code = Some(code);
        self
    }

    /// Sets the tag `code` unless the diagnostic is not an error or already has one.
    pub fn or_code(mut self, code: ErrTag) -> Diagnostic {
        if self.is_error() && self.code.is_none() {
            self.code = Some(code);
        }
        self
    }

    /// `error[D_SYNTAX]`, `error` or `warning`: the severity and the tag, as rendered.
    pub fn head(&self) -> String {
        match self.code {
            Some(c) => format!("{}[{c}]", self.severity.as_str()),
            None => self.severity.as_str().to_string(),
        }
    }

    /// A warning at `span`.
    pub fn warning(message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(message, span)
        }
    }

    /// Sets the text printed after the primary caret.
    pub fn with_span_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.span_label = label.into();
        self
    }

    /// Adds a secondary label.
    pub fn with_label(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    /// Sets the hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }

    /// True for [`Severity::Error`].
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Renders the diagnostic as text (see the module docs for the shape). Ends with a newline.
    ///
    /// A span that no file of `map` contains (e.g. [`Span::DETACHED`]) renders as
    /// `error: message` without a location.
    pub fn render<'a>(&'a self, map: &'a SourceMap) -> String {
        let mut out = String::new();
        let Some(file) = map.file_of(self.span.start) else {
            let _ = writeln!(out, "{}: {}", self.head(), self.message);
            if let Some(h) = &self.hint {
                let _ = writeln!(out, "hint: {h}");
            }
            return out;
        };
        let (line, col) = file.line_col(self.span.start);
        let _ = writeln!(
            out,
            "{}:{}:{}: {}: {}",
            file.name(),
            line,
            col,
            self.head(),
            self.message
        );

        let mut marks: Vec<Mark<'a>> = Vec::new();
        let mark = |span: Span, primary: bool, msg: &'a str| -> Option<Mark<'a>> {
            if !file.contains(span.start) {
                return None;
            }
            let (line, col) = file.line_col(span.start);
            let line_text = file.line_text(line);
            // Multi-line spans are marked to the end of their first line.
            let end_pos = span
                .end
                .min(file.line_start(line) + line_text.len() as u32)
                .max(span.start);
            let (_, end_col) = file.line_col(end_pos);
            let end_col = end_col.max(col + 1);
            Some(Mark {
                line,
                col,
                end_col,
                primary,
                msg,
            })
        };
        marks.extend(mark(self.span, true, &self.span_label));
        for lab in &self.labels {
            marks.extend(mark(lab.span, false, &lab.message));
        }
        let mut lines: Vec<usize> = marks.iter().map(|m| m.line).collect();
        lines.sort_unstable();
        lines.dedup();
        let gutter = lines
            .last()
            .map(|l| l.to_string().len())
            .unwrap_or(1)
            .max(4);
        for l in lines {
            let text = file.line_text(l);
            let _ = writeln!(out, "{:>gutter$} | {}", l, text);
            for m in marks.iter().filter(|m| m.line == l) {
                let (c, ec, primary, msg) = (m.col, m.end_col, m.primary, m.msg);
                // Copy tabs from the source prefix so the marker lines up however tabs are shown.
                let prefix: String = text
                    .chars()
                    .take(c - 1)
                    .map(|ch| if ch == '\t' { '\t' } else { ' ' })
                    .collect();
                let n = ec - c;
                let marker = if primary {
                    format!("^{}", "~".repeat(n.saturating_sub(1)))
                } else {
                    "-".repeat(n.max(1))
                };
                let sep = if msg.is_empty() { "" } else { " " };
                let _ = writeln!(out, "{:>gutter$} | {prefix}{marker}{sep}{msg}", "");
            }
        }
        if let Some(h) = &self.hint {
            let _ = writeln!(out, "hint: {h}");
        }
        out
    }
}

/// One marker under a source line: 1-based line, start column and exclusive end column (characters).
struct Mark<'a> {
    line: usize,
    col: usize,
    end_col: usize,
    primary: bool,
    msg: &'a str,
}

/// Renders several diagnostics, one after the other, in the order given.
pub fn render_all(diags: &[Diagnostic], map: &SourceMap) -> String {
    diags.iter().map(|d| d.render(map)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;

    #[test]
    fn renders_location_line_caret_and_hint() {
        let map: SourceMap = SourceFile::new("t.d", "BEGIN\n{\n\tx = 1 +;\n}\n").into();
        // `+;` : the `+` is at offset 15, the `;` at 16.
        let d = Diagnostic::error("expected an expression", Span::new(16, 17))
            .with_span_label("here")
            .with_label(Span::new(15, 16), "operator")
            .with_hint("remove the `+`");
        let text = d.render(&map);
        assert_eq!(
            text,
            "t.d:3:9: error: expected an expression\n\
             \x20  3 | \tx = 1 +;\n\
             \x20    | \t       ^ here\n\
             \x20    | \t      - operator\n\
             hint: remove the `+`\n"
        );
    }

    #[test]
    fn detached_span_has_no_location() {
        let map: SourceMap = SourceFile::new("t.d", "BEGIN {}").into();
        let d = Diagnostic::error("unrecognized option `quite`", Span::DETACHED)
            .with_hint("did you mean `quiet`?");
        assert_eq!(
            d.render(&map),
            "error: unrecognized option `quite`\nhint: did you mean `quiet`?\n"
        );
    }

    #[test]
    fn wide_span_gets_tildes() {
        let map: SourceMap = SourceFile::new("t.d", "x = foo;").into();
        let d = Diagnostic::error("unknown variable `foo`", Span::new(4, 7));
        assert!(d.render(&map).contains("|     ^~~\n"), "{}", d.render(&map));
    }
}
