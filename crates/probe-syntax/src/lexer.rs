//! The D lexer: source text to tokens (DTrace guide, "Types, Operators, and Expressions":
//! identifiers and keywords, integer and character constants, string constants; "Program
//! Structure": probe descriptions, pragmas; "Scripting": macro variables).
//!
//! Probe descriptions are lexed by a separate entry point, [`Lexer::probe_spec`], that the parser
//! calls where a clause may start (DTrace's lexer also switches state there): `syscall::read:entry`
//! or `tick-1s` would otherwise split into many tokens.

use crate::ast::{IntLit, MacroVar};
use crate::diag::Diagnostic;
use crate::errtag::ErrTag;
use crate::source::Span;

/// A token kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// Identifier or keyword (`pid`, `self`, `sizeof`, `int`).
    Ident(String),
    /// Integer or character constant.
    Int(IntLit),
    /// String constant (escapes decoded).
    Str(String),
    /// `$1`, `$$1`, `$target`.
    Macro(MacroVar),
    /// `@name` or `@` (name empty).
    Agg(String),
    /// A `#...` line (the whole line, for the parser to interpret as a pragma).
    Directive(String),
    /// Punctuator or operator, as written (`+`, `->`, `<<=`, `{`).
    Punct(&'static str),
    /// End of input.
    Eof,
}

impl Tok {
    /// Describes the token for messages ("`;`", "identifier `x`", "end of input").
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("identifier `{s}`"),
            Tok::Int(i) => format!("integer `{}`", i.value),
            Tok::Str(_) => "string constant".into(),
            Tok::Macro(_) => "macro variable".into(),
            Tok::Agg(n) => format!("aggregation `@{n}`"),
            Tok::Directive(_) => "preprocessor directive".into(),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "end of input".into(),
        }
    }
}

/// A token with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// The kind.
    pub tok: Tok,
    /// Where (global offsets).
    pub span: Span,
    /// The token was recovered from a lexical error already reported (an unterminated string or
    /// character constant, or the end of input reached inside an unterminated comment): the
    /// parser does not pile a second error on it.
    pub damaged: bool,
}

/// All punctuators, longest first so that maximal munch picks `<<=` over `<<` over `<`.
const PUNCTS: &[&str] = &[
    "<<=", ">>=", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "^^", "+=",
    "-=", "*=", "/=", "%=", "&=", "|=", "^=", "+", "-", "*", "/", "%", "<", ">", "=", "!", "~",
    "&", "|", "^", "?", ":", ";", ",", ".", "(", ")", "[", "]", "{", "}",
];

/// Characters allowed in a probe description (DTrace's lexer accepts `[-$:a-zA-Z_.?*\\\[\]!0-9]`
/// and a few more for module paths).
fn is_probe_spec_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_-.:*?[]!$\\~+".contains(c)
}

/// The lexer: a cursor over one file's text.
#[derive(Clone, Debug)]
pub struct Lexer<'s> {
    text: &'s str,
    base: u32,
    pos: usize,
}

impl<'s> Lexer<'s> {
    /// A lexer over `text`, whose first byte has global offset `base`.
    pub fn new(text: &'s str, base: u32) -> Lexer<'s> {
        Lexer { text, base, pos: 0 }
    }

    /// Global offset of the cursor.
    pub fn offset(&self) -> u32 {
        self.base + self.pos as u32
    }

    /// Moves the cursor to global offset `off` (used to re-lex a probe description).
    pub fn seek(&mut self, off: u32) {
        self.pos = (off - self.base) as usize;
    }

    /// The text between two global offsets of this file ("" if out of range).
    pub fn text_between(&self, from: u32, to: u32) -> &'s str {
        let (a, b) = (
            (from.saturating_sub(self.base)) as usize,
            (to.saturating_sub(self.base)) as usize,
        );
        self.text.get(a..b).unwrap_or("")
    }

    fn span(&self, start: usize) -> Span {
        Span::new(self.base + start as u32, self.base + self.pos as u32)
    }

    fn peek_char(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// True when the cursor is at the start of a line (only blanks before it on its line).
    fn at_line_start(&self, pos: usize) -> bool {
        self.text[..pos]
            .rsplit('\n')
            .next()
            .is_none_or(|l| l.chars().all(|c| c == ' ' || c == '\t'))
    }

    /// Skips whitespace and comments (`/* */`, `//`, and a `#!` first line). An unterminated
    /// `/*` comment is reported.
    fn skip_trivia(&mut self, diags: &mut Vec<Diagnostic>) {
        loop {
            let rest = &self.text[self.pos..];
            if rest.starts_with("#!") && self.pos == 0 {
                self.pos += rest.find('\n').unwrap_or(rest.len());
            } else if let Some(body) = rest.strip_prefix("/*") {
                let start = self.pos;
                match body.find("*/") {
                    Some(i) => self.pos += i + 4,
                    None => {
                        self.pos = self.text.len();
                        diags.push(
                            Diagnostic::error(
                                "unterminated comment",
                                Span::new(self.base + start as u32, self.base + start as u32 + 2),
                            )
                            .with_span_label("comment starts here")
                            .with_hint("close the comment with `*/`"),
                        );
                    }
                }
            } else if rest.starts_with("//") {
                self.pos += rest.find('\n').unwrap_or(rest.len());
            } else if let Some(c) = rest.chars().next().filter(|c| c.is_whitespace()) {
                self.pos += c.len_utf8();
            } else {
                return;
            }
        }
    }

    /// Lexes a probe description starting at the cursor (after trivia). Returns its text and span;
    /// the text is empty when no probe-description character is there.
    pub fn probe_spec(&mut self, diags: &mut Vec<Diagnostic>) -> (String, Span) {
        self.skip_trivia(diags);
        let start = self.pos;
        while let Some(c) = self.peek_char() {
            if c == '/' && self.text[start..self.pos].ends_with(':') {
                match self.path_field_len() {
                    Ok(len) => {
                        self.pos += len;
                        continue;
                    }
                    Err(Some(len)) => {
                        let at = self.base + self.pos as u32;
                        diags.push(
                            Diagnostic::error("a file path in a probe description must be followed by `:function:name`", Span::new(at, at + len as u32))
                                .with_span_label("path of the module field")
                                .with_hint("write the four fields, e.g. `pid:/usr/bin/bash:main:entry`"),
                        );
                        self.pos += len;
                        break;
                    }
                    Err(None) => {}
                }
            }
            if !is_probe_spec_char(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        (self.text[start..self.pos].to_string(), self.span(start))
    }

    /// At a `/` right after a `:` of a probe description: `Ok(length)` of the file path there
    /// (`pid:/usr/lib/x86_64-linux-gnu/libc.so.6:malloc:entry`), or `Err` when the `/` is not a
    /// path. A path is `/` followed by path characters (letters, digits, `_-.+~@/` and the
    /// wildcards `*?[]!`) and must end at the `:` that opens the next field, so a predicate
    /// written without a blank after an empty last field (`syscall:::/pid == 1/`) stays a
    /// predicate. `//` and `/*` right after the `:` start a comment, never a path (inside a path,
    /// `/*/` is a wildcard directory).
    ///
    /// `Err(Some(length))`: what follows is a path used as the last field (`pid:/usr/bin/bash {`),
    /// which is a mistake: it has a second `/`, does not end in `/` (as a predicate does), and a
    /// blank, `{`, `,` or the end of input follows it.
    fn path_field_len(&self) -> Result<usize, Option<usize>> {
        let rest = &self.text[self.pos..];
        if rest.starts_with("//") || rest.starts_with("/*") {
            return Err(None);
        }
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_-.+~@/*?[]!".contains(c)))
            .unwrap_or(rest.len());
        let (path, after) = rest.split_at(len);
        if len > 1 && after.starts_with(':') {
            return Ok(len);
        }
        let trailing = path.matches('/').count() >= 2
            && !path.ends_with('/')
            && after
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace() || c == '{' || c == ',');
        Err(trailing.then_some(len))
    }

    /// Lexes the next token, reporting lexical errors into `diags` (and skipping the bad input).
    pub fn next_token(&mut self, diags: &mut Vec<Diagnostic>) -> Token {
        loop {
            let trivia_errors_before = diags.len();
            self.skip_trivia(diags);
            let errors_before = diags.len();
            let start = self.pos;
            let Some(c) = self.peek_char() else {
                // An unterminated comment ran to the end: what the parser misses there is a
                // consequence, already reported.
                let damaged = diags[trivia_errors_before..]
                    .iter()
                    .any(|d| d.message.starts_with("unterminated"));
                return Token {
                    tok: Tok::Eof,
                    span: self.span(start),
                    damaged,
                };
            };
            let ident_at = |text: &str, at: usize| {
                text[at..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            };
            let tok = if c.is_ascii_alphabetic()
                || c == '_'
                || (c == '`' && ident_at(self.text, self.pos + 1))
            {
                if c == '`' {
                    self.pos += 1;
                }
                while self
                    .peek_char()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
                // DTrace's scoping operator: `` `symbol `` and `` module`symbol `` (kernel
                // symbols), `` D`type `` (a type of the D program): one identifier.
                if c != '`' && self.peek_char() == Some('`') && ident_at(self.text, self.pos + 1) {
                    self.pos += 1;
                    while self
                        .peek_char()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        self.pos += 1;
                    }
                }
                Tok::Ident(self.text[start..self.pos].to_string())
            } else if c.is_ascii_digit() {
                self.number(diags)
            } else if c == '"' {
                self.string(diags)
            } else if c == '\'' {
                self.char_const(diags)
            } else if c == '$' {
                match self.macro_var() {
                    Some(m) => Tok::Macro(m),
                    None => {
                        diags.push(
                            Diagnostic::error("`$` must start a macro variable", self.span(start))
                                .with_hint("macro variables are `$1`..`$9`, `$$1` (as a string), `$target`, `$pid`"),
                        );
                        continue;
                    }
                }
            } else if c == '@' {
                self.pos += 1;
                while self
                    .peek_char()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
                Tok::Agg(self.text[start + 1..self.pos].to_string())
            } else if c == '#' {
                let line_end = self.text[self.pos..]
                    .find('\n')
                    .map(|i| self.pos + i)
                    .unwrap_or(self.text.len());
                let at_start = self.at_line_start(start);
                self.pos = line_end;
                if !at_start {
                    diags.push(Diagnostic::error(
                        "`#` directive not at the start of a line",
                        Span::new(self.base + start as u32, self.base + start as u32 + 1),
                    ));
                    continue;
                }
                Tok::Directive(self.text[start..line_end].trim_end().to_string())
            } else if let Some(p) = PUNCTS
                .iter()
                .find(|p| self.text[self.pos..].starts_with(**p))
            {
                self.pos += p.len();
                Tok::Punct(p)
            } else {
                self.bump();
                diags.push(Diagnostic::error(
                    format!("invalid character {c:?}"),
                    self.span(start),
                ));
                continue;
            };
            let damaged = diags[errors_before..]
                .iter()
                .any(|d| d.message.starts_with("unterminated"));
            return Token {
                tok,
                span: self.span(start),
                damaged,
            };
        }
    }

    /// `$N`, `$$N`, `$name`. The cursor is on `$`; on failure it is moved past `$`.
    fn macro_var(&mut self) -> Option<MacroVar> {
        self.pos += 1;
        let string_form = self.peek_char() == Some('$');
        if string_form {
            self.pos += 1;
        }
        let start = self.pos;
        if self.peek_char().is_some_and(|c| c.is_ascii_digit()) {
            while self.peek_char().is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1;
            }
            let n: u32 = self.text[start..self.pos].parse().ok()?;
            return Some(if string_form {
                MacroVar::ArgString(n)
            } else {
                MacroVar::Arg(n)
            });
        }
        if !string_form
            && self
                .peek_char()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        {
            while self
                .peek_char()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                self.pos += 1;
            }
            return Some(MacroVar::Named(self.text[start..self.pos].to_string()));
        }
        None
    }

    /// Integer constant: decimal, `0x` hex, `0` octal, then `u`/`l` suffixes (ISO C 6.4.4.1).
    fn number(&mut self, diags: &mut Vec<Diagnostic>) -> Tok {
        let start = self.pos;
        let rest = &self.text[self.pos..];
        let (radix, digits_start) = if rest.starts_with("0x") || rest.starts_with("0X") {
            (16, self.pos + 2)
        } else if rest.starts_with('0') {
            (8, self.pos)
        } else {
            (10, self.pos)
        };
        self.pos = digits_start;
        while self.peek_char().is_some_and(|c| c.is_ascii_alphanumeric()) {
            self.pos += 1;
        }
        // `1.5`, `1e3`: D has no floating point; consume the whole constant and say so.
        if radix != 16
            && self.peek_char() == Some('.')
            && self.text[self.pos + 1..].starts_with(|c: char| c.is_ascii_digit())
        {
            self.pos += 1;
            while self.peek_char().is_some_and(|c| c.is_ascii_alphanumeric()) {
                self.pos += 1;
            }
            diags.push(
                Diagnostic::error(
                    "floating-point constants are not supported",
                    self.span(start),
                )
                .with_hint("D in Sightline, as in DTrace's kernel, computes with integers only"),
            );
            return Tok::Int(IntLit {
                value: 0,
                unsigned_suffix: false,
                long_suffix: false,
                decimal: true,
                char_lit: false,
            });
        }
        let word = &self.text[digits_start..self.pos];
        let digits_end = word
            .find(|c: char| !c.is_digit(radix))
            .unwrap_or(word.len());
        let (digits, suffix) = word.split_at(digits_end);
        let lower = suffix.to_ascii_lowercase();
        let (unsigned_suffix, long_suffix, ok_suffix) = match lower.as_str() {
            "" => (false, false, true),
            "u" => (true, false, true),
            "l" | "ll" => (false, true, true),
            "ul" | "lu" | "ull" | "llu" => (true, true, true),
            _ => (false, false, false),
        };
        let span = self.span(start);
        if !ok_suffix {
            let what = if radix == 8 && suffix.starts_with(|c: char| c.is_ascii_digit()) {
                format!("invalid digit `{}` in octal constant", &suffix[..1])
            } else {
                format!("invalid suffix `{suffix}` on integer constant")
            };
            diags.push(Diagnostic::tagged(ErrTag::D_INT_DIGIT, what, span));
        }
        let value = if digits.is_empty() && radix == 16 {
            diags.push(Diagnostic::error(
                "hexadecimal constant has no digits",
                span,
            ));
            0
        } else if digits.is_empty() {
            0
        } else {
            match u64::from_str_radix(digits, radix) {
                Ok(v) => v,
                Err(_) => {
                    diags.push(
                        Diagnostic::tagged(
                            ErrTag::D_INT_OFLOW,
                            "integer constant is too large",
                            span,
                        )
                        .with_hint("D integers are at most 64 bits (18446744073709551615)"),
                    );
                    0
                }
            }
        };
        Tok::Int(IntLit {
            value,
            unsigned_suffix,
            long_suffix,
            decimal: radix == 10,
            char_lit: false,
        })
    }

    /// One escape sequence after `\` (ISO C 6.4.4.4): returns the byte, or reports it.
    fn escape(&mut self, diags: &mut Vec<Diagnostic>) -> Option<u8> {
        let esc_start = self.pos - 1;
        let c = self.bump()?;
        Some(match c {
            'n' => b'\n',
            't' => b'\t',
            'r' => b'\r',
            'a' => 7,
            'b' => 8,
            'f' => 12,
            'v' => 11,
            '\\' => b'\\',
            '"' => b'"',
            '\'' => b'\'',
            '?' => b'?',
            '0'..='7' => {
                let mut v = c as u32 - '0' as u32;
                for _ in 0..2 {
                    match self.peek_char() {
                        Some(d @ '0'..='7') => {
                            v = v * 8 + (d as u32 - '0' as u32);
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                if v > 255 {
                    diags.push(Diagnostic::error(
                        "octal escape sequence out of range",
                        self.span(esc_start),
                    ));
                }
                v as u8
            }
            'x' => {
                let ds = self.pos;
                while self.peek_char().is_some_and(|c| c.is_ascii_hexdigit()) && self.pos - ds < 2 {
                    self.pos += 1;
                }
                if self.pos == ds {
                    diags.push(Diagnostic::error(
                        "`\\x` used with no following hex digits",
                        self.span(esc_start),
                    ));
                    return Some(b'x');
                }
                u8::from_str_radix(&self.text[ds..self.pos], 16).unwrap_or(0)
            }
            other => {
                diags.push(
                    Diagnostic::error(format!("unknown escape sequence `\\{}`", other.escape_default()), self.span(esc_start))
                        .with_hint("escapes are \\n \\t \\r \\a \\b \\f \\v \\\\ \\\" \\' \\? \\NNN (octal) \\xHH"),
                );
                other as u32 as u8
            }
        })
    }

    fn string(&mut self, diags: &mut Vec<Diagnostic>) -> Tok {
        let start = self.pos;
        self.pos += 1;
        let mut bytes = Vec::new();
        loop {
            match self.peek_char() {
                None | Some('\n') => {
                    diags.push(
                        Diagnostic::tagged(
                            ErrTag::D_STR_NL,
                            "unterminated string constant",
                            self.span(start),
                        )
                        .with_span_label("string starts here")
                        .with_hint("close the string with `\"` on the same line"),
                    );
                    break;
                }
                Some('"') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    self.pos += 1;
                    if let Some(b) = self.escape(diags) {
                        bytes.push(b);
                    }
                }
                Some(c) => {
                    let mut buf = [0u8; 4];
                    bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    self.pos += c.len_utf8();
                }
            }
        }
        Tok::Str(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn char_const(&mut self, diags: &mut Vec<Diagnostic>) -> Tok {
        let start = self.pos;
        self.pos += 1;
        let mut vals = Vec::new();
        loop {
            match self.peek_char() {
                None | Some('\n') => {
                    diags.push(
                        Diagnostic::tagged(
                            ErrTag::D_CHR_NL,
                            "unterminated character constant",
                            self.span(start),
                        )
                        .with_hint("close it with `'`"),
                    );
                    return Tok::Int(IntLit {
                        value: 0,
                        unsigned_suffix: false,
                        long_suffix: false,
                        decimal: true,
                        char_lit: true,
                    });
                }
                Some('\'') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    self.pos += 1;
                    if let Some(b) = self.escape(diags) {
                        vals.push(b);
                    }
                }
                Some(c) => {
                    let mut buf = [0u8; 4];
                    vals.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    self.pos += c.len_utf8();
                }
            }
        }
        if vals.len() != 1 {
            let msg = if vals.is_empty() {
                "empty character constant"
            } else {
                "character constant has more than one character"
            };
            diags.push(
                Diagnostic::tagged(ErrTag::D_CHR_OFLOW, msg, self.span(start))
                    .with_hint("use a string constant (\"...\") for text"),
            );
        }
        // `char` is signed: '\377' is -1 (promoted to int).
        let v = vals.first().copied().unwrap_or(0) as i8 as i64 as u64;
        Tok::Int(IntLit {
            value: v,
            unsigned_suffix: false,
            long_suffix: false,
            decimal: true,
            char_lit: true,
        })
    }
}

/// Peeks the token after the cursor without consuming it or reporting errors (2-token lookahead).
pub fn peek_after(lexer: &Lexer<'_>) -> Tok {
    let mut l = lexer.clone();
    let mut sink = Vec::new();
    l.next_token(&mut sink).tok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex(s: &str) -> (Vec<Tok>, Vec<Diagnostic>) {
        let mut l = Lexer::new(s, 0);
        let mut d = Vec::new();
        let mut out = Vec::new();
        loop {
            let t = l.next_token(&mut d);
            if t.tok == Tok::Eof {
                break;
            }
            out.push(t.tok);
        }
        (out, d)
    }

    #[test]
    fn integers_and_suffixes() {
        let (t, d) = lex("10 0x1F 017 42u 7ul 0 'a' '\\n' '\\377'");
        assert!(d.is_empty(), "{d:?}");
        let vals: Vec<u64> = t
            .iter()
            .map(|t| {
                if let Tok::Int(i) = t {
                    i.value
                } else {
                    panic!()
                }
            })
            .collect();
        assert_eq!(vals, vec![10, 31, 15, 42, 7, 0, 97, 10, u64::MAX]);
        let Tok::Int(u) = &t[3] else { panic!() };
        assert!(u.unsigned_suffix && !u.long_suffix && u.decimal);
        let Tok::Int(h) = &t[1] else { panic!() };
        assert!(!h.decimal);
    }

    #[test]
    fn bad_numbers() {
        assert_eq!(
            lex("09").1[0].message,
            "invalid digit `9` in octal constant"
        );
        assert_eq!(
            lex("12zz").1[0].message,
            "invalid suffix `zz` on integer constant"
        );
        assert_eq!(
            lex("99999999999999999999").1[0].message,
            "integer constant is too large"
        );
    }

    #[test]
    fn strings_and_escapes() {
        let (t, d) = lex(r#""a\tb\x41\101\"" "#);
        assert!(d.is_empty());
        assert_eq!(t, vec![Tok::Str("a\tbAA\"".into())]);
        let (_, d) = lex("\"abc\n");
        assert_eq!(d[0].message, "unterminated string constant");
        let (_, d) = lex(r#""\q""#);
        assert_eq!(d[0].message, "unknown escape sequence `\\q`");
    }

    #[test]
    fn operators_maximal_munch() {
        let (t, _) = lex("a<<=b->c^^d++");
        assert_eq!(
            t,
            vec![
                Tok::Ident("a".into()),
                Tok::Punct("<<="),
                Tok::Ident("b".into()),
                Tok::Punct("->"),
                Tok::Ident("c".into()),
                Tok::Punct("^^"),
                Tok::Ident("d".into()),
                Tok::Punct("++"),
            ]
        );
    }

    #[test]
    fn macros_aggs_comments_and_directives() {
        let (t, d) = lex(
            "#!/usr/sbin/dtrace -s\n$1 $$2 $target @ @foo /* c */ // x\n #pragma D option quiet\n",
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(
            t,
            vec![
                Tok::Macro(MacroVar::Arg(1)),
                Tok::Macro(MacroVar::ArgString(2)),
                Tok::Macro(MacroVar::Named("target".into())),
                Tok::Agg(String::new()),
                Tok::Agg("foo".into()),
                Tok::Directive("#pragma D option quiet".into()),
            ]
        );
        assert_eq!(lex("/* open").1[0].message, "unterminated comment");
    }

    #[test]
    fn probe_spec_mode() {
        let mut l = Lexer::new("  syscall::read:entry/pid/", 0);
        let mut d = Vec::new();
        let (s, sp) = l.probe_spec(&mut d);
        assert_eq!(s, "syscall::read:entry");
        assert_eq!(sp, Span::new(2, 21));
        assert_eq!(l.next_token(&mut d).tok, Tok::Punct("/"));
    }

    #[test]
    fn probe_spec_paths() {
        let spec = |t: &str| {
            let mut l = Lexer::new(t, 0);
            let mut d = Vec::new();
            let (s, _) = l.probe_spec(&mut d);
            assert!(d.is_empty(), "{d:?}");
            (s, l.next_token(&mut d).tok)
        };
        let libc = "pid:/usr/lib/x86_64-linux-gnu/libc.so.6:malloc:entry";
        assert_eq!(
            spec(&format!("{libc}/arg0 > 8/")),
            (libc.to_string(), Tok::Punct("/"))
        );
        assert_eq!(
            spec("python:/usr/bin/python3.11::function-return {").0,
            "python:/usr/bin/python3.11::function-return"
        );
        assert_eq!(
            spec("pid$target:/usr/lib/*/libc.so.?:malloc:entry").0,
            "pid$target:/usr/lib/*/libc.so.?:malloc:entry"
        );
        // Not a path: no `:` after it (a predicate after an empty name), or a comment.
        assert_eq!(
            spec("syscall:::/pid == 1/"),
            ("syscall:::".to_string(), Tok::Punct("/"))
        );
        assert_eq!(
            spec("syscall:::/pid/"),
            ("syscall:::".to_string(), Tok::Punct("/"))
        );
        assert_eq!(
            spec("syscall:::/* c */ {"),
            ("syscall:::".to_string(), Tok::Punct("{"))
        );
        assert_eq!(spec("syscall::// c\n{").0, "syscall::");
    }
}
