//! Source text and byte spans.
//!
//! Every AST node carries a [`Span`]: a half-open range of byte offsets. Offsets are *global* across a
//! [`SourceMap`]: each added file gets its own base offset, so one program can be assembled from
//! several `-n` clauses and `-s` files and every span still names its file, line and column.

use std::fmt;

/// A half-open range `[start, end)` of global byte offsets into a [`SourceMap`].
///
/// `start == end` is an empty span (used for "expected X here" points, e.g. a missing `;`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// First byte (global offset).
    pub start: u32,
    /// One past the last byte (global offset).
    pub end: u32,
}

impl Span {
    /// A span that belongs to no source file: diagnostics about command-line input (`-x` options)
    /// render without a location.
    pub const DETACHED: Span = Span {
        start: u32::MAX,
        end: u32::MAX,
    };

    /// The span `[start, end)`.
    pub fn new(start: u32, end: u32) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// Length in bytes.
    pub fn len(self) -> u32 {
        self.end - self.start
    }

    /// True for an empty (zero-width) span.
    pub fn is_empty(self) -> bool {
        self.start == self.end
    }
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

/// Index of a file in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileId(pub u32);

/// One source text (a script file, or one `-n` clause) with its name and a line index.
#[derive(Clone, Debug)]
pub struct SourceFile {
    name: String,
    text: String,
    base: u32,
    /// Byte offsets (relative to the file) at which each line starts; `line_starts[0] == 0`.
    line_starts: Vec<u32>,
}

impl SourceFile {
    /// A file whose spans start at global offset 0 (for a single-file program). Use [`SourceMap::add`]
    /// to combine several files.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        SourceFile::with_base(name.into(), text.into(), 0)
    }

    /// A file whose spans start at global offset `base`, outside any [`SourceMap`] (a built-in
    /// library parsed on its own; its spans must not overlap the program's files).
    pub fn at(name: impl Into<String>, text: impl Into<String>, base: u32) -> SourceFile {
        SourceFile::with_base(name.into(), text.into(), base)
    }

    fn with_base(name: String, text: String, base: u32) -> SourceFile {
        let mut line_starts = vec![0u32];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i as u32 + 1);
            }
        }
        SourceFile {
            name,
            text,
            base,
            line_starts,
        }
    }

    /// The name shown in diagnostics (a path, or e.g. `<command line>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The full text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Global offset of this file's first byte.
    pub fn base(&self) -> u32 {
        self.base
    }

    /// Global offset one past this file's last byte.
    pub fn end(&self) -> u32 {
        self.base + self.text.len() as u32
    }

    /// True when the global offset `pos` lies in this file (its end offset included).
    pub fn contains(&self, pos: u32) -> bool {
        pos >= self.base && pos <= self.end()
    }

    /// The text a span covers (empty if the span is not inside this file).
    pub fn slice(&self, span: Span) -> &str {
        if !self.contains(span.start) || !self.contains(span.end) {
            return "";
        }
        let s = (span.start - self.base) as usize;
        let e = (span.end - self.base) as usize;
        self.text.get(s..e).unwrap_or("")
    }

    /// 1-based line and 1-based column (in characters) of global offset `pos`.
    pub fn line_col(&self, pos: u32) -> (usize, usize) {
        let rel = pos.saturating_sub(self.base).min(self.text.len() as u32);
        let line = match self.line_starts.binary_search(&rel) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line] as usize;
        let col = self.text[start..rel as usize].chars().count() + 1;
        (line + 1, col)
    }

    /// The text of 1-based line `line`, without its newline.
    pub fn line_text(&self, line: usize) -> &str {
        let Some(&start) = self.line_starts.get(line.wrapping_sub(1)) else {
            return "";
        };
        let end = self
            .line_starts
            .get(line)
            .map(|&e| e as usize)
            .unwrap_or(self.text.len());
        self.text[start as usize..end].trim_end_matches(['\n', '\r'])
    }

    /// Global offset of the start of 1-based line `line`.
    pub fn line_start(&self, line: usize) -> u32 {
        self.base
            + self
                .line_starts
                .get(line.wrapping_sub(1))
                .copied()
                .unwrap_or(0)
    }
}

/// All the source files of one program; spans index into it with global offsets.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// Adds a file and returns its id. Its global base offset follows the previous file's end (plus
    /// one, so that an end-of-file span maps to one file only).
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let base = self.files.last().map(|f| f.end() + 1).unwrap_or(0);
        self.files
            .push(SourceFile::with_base(name.into(), text.into(), base));
        FileId(self.files.len() as u32 - 1)
    }

    /// The file with id `id`. Panics if the id came from another map.
    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    /// All files in the order they were added.
    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// The file containing global offset `pos`.
    pub fn file_of(&self, pos: u32) -> Option<&SourceFile> {
        self.files.iter().find(|f| f.contains(pos))
    }

    /// The text a span covers ("" if unknown).
    pub fn slice(&self, span: Span) -> &str {
        self.file_of(span.start)
            .map(|f| f.slice(span))
            .unwrap_or("")
    }
}

impl From<SourceFile> for SourceMap {
    fn from(f: SourceFile) -> SourceMap {
        // A standalone file has base 0, as the first file of a map would.
        let f = SourceFile::with_base(f.name, f.text, 0);
        SourceMap { files: vec![f] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_and_slices_across_files() {
        let mut map = SourceMap::new();
        let a = map.add("a.d", "ab\ncd\n");
        let b = map.add("b.d", "xyz");
        let fb = map.file(b);
        assert_eq!(fb.base(), 7);
        assert_eq!(fb.line_col(8), (1, 2));
        let fa = map.file(a);
        assert_eq!(fa.line_col(4), (2, 2));
        assert_eq!(fa.line_text(2), "cd");
        assert_eq!(map.slice(Span::new(7, 10)), "xyz");
        assert_eq!(map.file_of(9).unwrap().name(), "b.d");
    }
}
