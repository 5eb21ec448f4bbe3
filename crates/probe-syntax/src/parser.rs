//! The D parser: recursive descent for programs, clauses and statements, Pratt parsing for
//! expressions. Functions are named after the grammar productions of the DTrace guide ("Program
//! Structure", "Types, Operators, and Expressions" → "Precedence and Associativity").
//!
//! Errors are collected, and the parser resynchronizes so that one run reports every error of a
//! script: a bad statement skips to its `;` (or the clause's `}`), a bad clause header skips to its
//! `{`, and a stray token at the top level is skipped.

use crate::ast::*;
use crate::diag::Diagnostic;
use crate::errtag::ErrTag;
use crate::lexer::{Lexer, Tok, Token, peek_after};
use crate::source::{SourceFile, Span};

/// Parses one source file into a program and the diagnostics found (empty when it parsed cleanly).
///
/// The program holds everything that parsed, even when there are errors, so that later stages can
/// report more problems; a caller must not run a program that has error diagnostics.
pub fn parse(file: &SourceFile) -> (Program, Vec<Diagnostic>) {
    let mut p = Parser::new(file.text(), file.base());
    let program = p.program();
    // Errors the grammar finds are DTrace's D_SYNTAX unless the lexer named a finer tag.
    let diags = p
        .diags
        .into_iter()
        .map(|d| d.or_code(ErrTag::D_SYNTAX))
        .collect();
    (program, diags)
}

/// Binding powers, loosest to tightest (C precedence; D puts `^^` between `&&` and `||`).
mod bp {
    pub const ASSIGN: u8 = 2;
    pub const TERNARY: u8 = 4;
    pub const LOG_OR: u8 = 6;
    pub const LOG_XOR: u8 = 8;
    pub const LOG_AND: u8 = 10;
    pub const BIT_OR: u8 = 12;
    pub const BIT_XOR: u8 = 14;
    pub const BIT_AND: u8 = 16;
    pub const EQUALITY: u8 = 18;
    pub const RELATIONAL: u8 = 20;
    pub const SHIFT: u8 = 22;
    pub const ADDITIVE: u8 = 24;
    pub const MULTIPLICATIVE: u8 = 26;
    pub const UNARY: u8 = 28;
}

/// A parse failure already reported as a diagnostic; the caller resynchronizes.
struct Reported;

type PResult<T> = Result<T, Reported>;

/// C type keywords and the typedef names D predefines (a name here starts a cast `(T)`).
/// The kernel and DTrace typedefs scripts name, with their Linux x86-64 widths and signedness:
/// the kernel's own (`dev_t` is `u32`, include/linux/types.h; `ino_t`, `off_t`, `loff_t`,
/// `time_t`, `clock_t` are `long`-sized; `mode_t` is `unsigned int`, `umode_t` `unsigned short`;
/// `sector_t` and `blkcnt_t` `u64`; `gfp_t` `unsigned int`; `daddr_t` and `key_t` `int`),
/// the socket ones (`socklen_t`, `in_port_t`, `in_addr_t`), and DTrace's and Solaris'
/// (`major_t`, `minor_t` are 32-bit unsigned; `hrtime_t` 64-bit signed; `zoneid_t`, `projid_t`,
/// `taskid_t`, `ctid_t`, `poolid_t` are `id_t`s; `boolean_t` an `int`; `bool` a byte; the BSD
/// `u_char`, `u_short`, `u_int`, `u_long`).
const KERNEL_TYPEDEFS: &[(&str, u8, bool)] = &[
    ("dev_t", 4, false),
    ("ino_t", 8, false),
    ("off_t", 8, true),
    ("loff_t", 8, true),
    ("mode_t", 4, false),
    ("umode_t", 2, false),
    ("nlink_t", 4, false),
    ("time_t", 8, true),
    ("clock_t", 8, true),
    ("suseconds_t", 8, true),
    ("useconds_t", 4, false),
    ("blkcnt_t", 8, false),
    ("sector_t", 8, false),
    ("gfp_t", 4, false),
    ("key_t", 4, true),
    ("daddr_t", 4, true),
    ("socklen_t", 4, false),
    ("in_port_t", 2, false),
    ("in_addr_t", 4, false),
    // Oracle's ip.d: `typedef __be32 ipaddr_t` (an IPv4 address in network byte order).
    ("ipaddr_t", 4, false),
    ("major_t", 4, false),
    ("minor_t", 4, false),
    ("hrtime_t", 8, true),
    ("zoneid_t", 4, true),
    ("projid_t", 4, true),
    ("taskid_t", 4, true),
    ("ctid_t", 4, true),
    ("poolid_t", 4, true),
    ("boolean_t", 4, true),
    ("bool", 1, false),
    ("__u8", 1, false),
    ("__u16", 2, false),
    ("__u32", 4, false),
    ("__u64", 8, false),
    ("__s8", 1, true),
    ("__s16", 2, true),
    ("__s32", 4, true),
    ("__s64", 8, true),
    ("__be16", 2, false),
    ("__be32", 4, false),
    ("__be64", 8, false),
    ("__le16", 2, false),
    ("__le32", 4, false),
    ("__le64", 8, false),
    ("u_char", 1, false),
    ("u_short", 2, false),
    ("u_int", 4, false),
    ("u_long", 8, false),
];

fn is_type_word(s: &str) -> bool {
    KERNEL_TYPEDEFS.iter().any(|(n, _, _)| *n == s)
        || matches!(
            s,
            "char"
                | "short"
                | "int"
                | "long"
                | "signed"
                | "unsigned"
                | "void"
                | "string"
                | "int8_t"
                | "int16_t"
                | "int32_t"
                | "int64_t"
                | "uint8_t"
                | "uint16_t"
                | "uint32_t"
                | "uint64_t"
                | "intptr_t"
                | "uintptr_t"
                | "size_t"
                | "ssize_t"
                | "pid_t"
                | "id_t"
                | "uid_t"
                | "gid_t"
                | "processorid_t"
                | "uchar_t"
                | "ushort_t"
                | "uint_t"
                | "ulong_t"
                | "u8"
                | "u16"
                | "u32"
                | "u64"
                | "s8"
                | "s16"
                | "s32"
                | "s64"
                | "struct"
                | "union"
                | "enum"
        )
}

/// Words the parser treats as reserved (they can't name variables).
fn is_reserved(s: &str) -> bool {
    is_type_word(s)
        || matches!(
            s,
            "self"
                | "this"
                | "sizeof"
                | "stringof"
                | "if"
                | "else"
                | "struct"
                | "union"
                | "enum"
                | "typedef"
                | "extern"
                | "inline"
                | "translator"
                | "xlate"
                | "offsetof"
                | "return"
                | "for"
                | "while"
                | "do"
        )
}

struct Parser<'s> {
    lexer: Lexer<'s>,
    tok: Token,
    prev_end: u32,
    /// The previous token was damaged (see [`Token::damaged`]).
    prev_damaged: bool,
    diags: Vec<Diagnostic>,
    /// Inside a predicate, outside any brackets: `/` ends the predicate rather than dividing.
    no_slash: bool,
    /// Current nesting of expressions and statements; bounded so that a pathological script gets a
    /// diagnostic instead of overflowing the stack (here and in every later pass, which recurse
    /// over the same tree).
    depth: u32,
    /// The program's `typedef`s so far: a name and the base type and pointer depth it stands for.
    typedefs: std::collections::HashMap<String, (BaseType, u8)>,
    /// `struct`/`union`/`enum` definitions met inside type names since the last top-level item;
    /// the program loop puts them before the item that holds them.
    pending_types: Vec<TypeDef>,
    /// Anonymous structs and unions named so far (for their made-up tags).
    anon_types: u32,
    /// Statements after the first of a comma expression statement (`a = 1, b = 2;`), which
    /// the caller of [`Parser::statement`] places after it.
    comma_rest: Vec<Stmt>,
}

/// The type names of Sightline's built-in D library (probe-sema's `procfs.d`): DTrace's
/// process model types, `typedef struct psinfo psinfo_t;` and `typedef struct lwpsinfo
/// lwpsinfo_t;`, known to every program as DTrace's `procfs.d` library makes them.
fn builtin_typedefs() -> std::collections::HashMap<String, (BaseType, u8)> {
    [("psinfo_t", "psinfo"), ("lwpsinfo_t", "lwpsinfo")]
        .into_iter()
        .map(|(t, s)| (t.to_string(), (BaseType::Struct(s.to_string()), 0)))
        .collect()
}

/// Deepest nesting of expressions/statements accepted (far beyond any real script).
const MAX_DEPTH: u32 = 100;

impl<'s> Parser<'s> {
    fn new(text: &'s str, base: u32) -> Parser<'s> {
        let mut lexer = Lexer::new(text, base);
        let mut diags = Vec::new();
        let tok = lexer.next_token(&mut diags);
        Parser {
            lexer,
            tok,
            prev_end: base,
            prev_damaged: false,
            diags,
            no_slash: false,
            depth: 0,
            typedefs: builtin_typedefs(),
            pending_types: Vec::new(),
            anon_types: 0,
            comma_rest: Vec::new(),
        }
    }

    // ----- token helpers -----

    fn bump(&mut self) -> Token {
        let next = self.lexer.next_token(&mut self.diags);
        self.prev_end = self.tok.span.end;
        self.prev_damaged = self.tok.damaged;
        std::mem::replace(&mut self.tok, next)
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(&self.tok.tok, Tok::Punct(q) if *q == p)
    }

    fn is_ident(&self, s: &str) -> bool {
        matches!(&self.tok.tok, Tok::Ident(q) if q == s)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        if self.is_punct(p) {
            self.bump();
            true
        } else {
            false
        }
    }

    /// Where an error about the current token points: the token, or at the end of input the point
    /// just after the last token (rather than an empty line past the end of the file).
    fn err_span(&self) -> Span {
        if matches!(self.tok.tok, Tok::Eof) {
            self.after_prev()
        } else {
            self.tok.span
        }
    }

    /// An empty span just after the previous token (where a missing token belongs).
    fn after_prev(&self) -> Span {
        Span::new(self.prev_end, self.prev_end)
    }

    fn expect_punct(&mut self, p: &str, what: &str) -> PResult<Span> {
        if self.is_punct(p) {
            return Ok(self.bump().span);
        }
        if self.prev_damaged || self.tok.damaged {
            // An unterminated string swallowed the rest of its line (the `)` or `;`), or an
            // unterminated comment the rest of the file: already said.
            return Err(Reported);
        }
        let found = self.tok.tok.describe();
        let d = Diagnostic::error(
            format!("expected `{p}` {what}, found {found}"),
            self.err_span(),
        );
        self.diags.push(d);
        Err(Reported)
    }

    fn error_here(&mut self, msg: impl Into<String>) -> Reported {
        self.diags.push(Diagnostic::error(msg, self.err_span()));
        Reported
    }

    // ----- program structure -----

    /// program := item*
    fn program(&mut self) -> Program {
        let mut items = Vec::new();
        loop {
            // Definitions met inside this item's type names go just before it.
            let at = items.len();
            let defs = std::mem::take(&mut self.pending_types);
            items.splice(at..at, defs.into_iter().map(Item::Type));
            let at = items.len();
            if matches!(self.tok.tok, Tok::Eof) {
                break;
            }
            self.program_item(&mut items);
            let defs = std::mem::take(&mut self.pending_types);
            items.splice(at..at, defs.into_iter().map(Item::Type));
        }
        Program { items }
    }

    /// One top-level item (or none, after an error), appended to `items`.
    fn program_item(&mut self, items: &mut Vec<Item>) {
        {
            match &self.tok.tok {
                Tok::Eof => {}
                Tok::Directive(_) => {
                    if let Some(item) = self.directive() {
                        items.push(item);
                    }
                }
                Tok::Ident(w) if w == "typedef" => {
                    if self.typedef().is_err() {
                        self.recover_statement();
                    }
                }
                Tok::Ident(w) if w == "extern" => {
                    if self.extern_declaration().is_err() {
                        self.recover_statement();
                    }
                }
                Tok::Ident(w) if w == "inline" => match self.inline_definition() {
                    Ok(d) => items.push(Item::Inline(d)),
                    Err(Reported) => self.recover_statement(),
                },
                Tok::Ident(w) if w == "translator" => match self.translator_definition() {
                    Ok(d) => items.push(Item::Translator(d)),
                    Err(Reported) => self.recover_statement(),
                },
                Tok::Ident(w)
                    if self.is_type(w)
                        || ((w == "self" || w == "this")
                            && matches!(peek_after(&self.lexer), Tok::Ident(_))) =>
                {
                    match self.declaration() {
                        Ok(ds) => items.extend(ds.into_iter().map(Item::Decl)),
                        Err(Reported) => self.recover_statement(),
                    }
                }
                Tok::Punct(p) if !matches!(*p, "-" | "*" | "?" | "[" | ":" | "." | "!") => {
                    let found = self.tok.tok.describe();
                    self.diags.push(
                        Diagnostic::error(format!("expected a probe description, found {found}"), self.tok.span)
                            .with_hint("a clause starts with a probe description such as `syscall::read:entry` or `BEGIN`"),
                    );
                    self.bump();
                }
                _ => {
                    let c = self.clause();
                    items.push(Item::Clause(c));
                }
            }
        }
    }

    /// `extern declaration ;` (the guide, "Variables" → "External Variables"; C declarations
    /// of kernel symbols, function prototypes and arrays included): accepted and left out of the
    /// tree. A backquoted symbol (`` `name ``) takes its type from the kernel's BTF instead. The
    /// declaration must end with `;` before any `{` or `}` and keep its brackets balanced.
    fn extern_declaration(&mut self) -> PResult<()> {
        let start = self.bump().span;
        let mut open: Vec<&'static str> = Vec::new();
        loop {
            match &self.tok.tok {
                Tok::Punct(";") if open.is_empty() => {
                    self.bump();
                    return Ok(());
                }
                Tok::Punct(p @ ("(" | "[")) => {
                    open.push(if *p == "(" { ")" } else { "]" });
                }
                Tok::Punct(p @ (")" | "]")) if open.pop() != Some(*p) => {
                    return Err(
                        self.error_here(format!("unbalanced `{p}` in the extern declaration"))
                    );
                }
                Tok::Eof | Tok::Directive(_) | Tok::Punct("{" | "}") => {
                    self.diags.push(Diagnostic::error(
                        "expected `;` to end the extern declaration",
                        start.to(self.tok.span),
                    ));
                    return Err(Reported);
                }
                _ => {}
            }
            self.bump();
        }
    }

    /// A word that starts a type name: a C or kernel type word, or a `typedef` of the program.
    fn is_type(&self, w: &str) -> bool {
        is_type_word(w) || self.typedefs.contains_key(w)
    }

    /// `typedef type-name IDENT ;` (the guide, "Type and Constant Definitions"): later type names
    /// may use IDENT for the type. Nothing reaches the tree; a redefinition is `D_DECL_TYPERED`.
    fn typedef(&mut self) -> PResult<()> {
        self.bump();
        let ty = self.type_name()?;
        let (name, span) = match &self.tok.tok {
            Tok::Ident(n) if !is_reserved(n) && !is_type_word(n) => (n.clone(), self.tok.span),
            _ => {
                return Err(self.error_here(format!(
                    "expected a name for the typedef, found {}",
                    self.tok.tok.describe()
                )));
            }
        };
        self.bump();
        self.expect_punct(";", "after the typedef")?;
        if self.typedefs.contains_key(&name) {
            // DTrace's dt_decl.c: "typedef redeclared" is D_DECL_IDRED.
            self.diags.push(Diagnostic::tagged(
                ErrTag::D_DECL_IDRED,
                format!("type `{name}` is already defined"),
                span,
            ));
            return Ok(());
        }
        self.typedefs.insert(name, (ty.base, ty.pointer));
        Ok(())
    }

    /// directive := `#pragma D option NAME[=VALUE]` | other pragmas (ignored with a warning)
    fn directive(&mut self) -> Option<Item> {
        let tok = self.bump();
        let Tok::Directive(line) = tok.tok else {
            return None;
        };
        let words: Vec<&str> = line[1..].split_whitespace().collect();
        match words.as_slice() {
            ["pragma", "D", "option", opt] => {
                let (name, value) = match opt.split_once('=') {
                    Some((n, v)) => (n.to_string(), Some(v.to_string())),
                    None => (opt.to_string(), None),
                };
                if name.is_empty() || value.as_deref() == Some("") {
                    self.diags.push(
                        Diagnostic::tagged(
                            ErrTag::D_PRAGMA_MALFORM,
                            "malformed `#pragma D option`",
                            tok.span,
                        )
                        .with_hint(
                            "write `#pragma D option name` or `#pragma D option name=value`",
                        ),
                    );
                    return None;
                }
                Some(Item::Option(OptionPragma {
                    name,
                    value,
                    span: tok.span,
                }))
            }
            // Oracle's dt_pragma.c: `error` stops the compile with its tokens as the message.
            ["pragma", "D", "error", rest @ ..] => {
                self.diags.push(Diagnostic::tagged(
                    ErrTag::D_PRAGERR,
                    format!("#pragma D error: {}", rest.join(" ").replace('"', "")),
                    tok.span,
                ));
                None
            }
            ["pragma", "D", "depends_on", class, name] => {
                let class = match *class {
                    "provider" => DependsClass::Provider,
                    "module" => DependsClass::Module,
                    "library" => {
                        self.diags.push(
                            Diagnostic::tagged(
                                ErrTag::D_PRAGMA_DEPEND,
                                "main program may not explicitly depend on a library",
                                tok.span,
                            )
                            .with_hint("Sightline loads no D libraries"),
                        );
                        return None;
                    }
                    other => {
                        self.diags.push(
                            Diagnostic::tagged(
                                ErrTag::D_PRAGMA_INVAL,
                                format!(
                                    "invalid class `{other}` specified by #pragma D depends_on"
                                ),
                                tok.span,
                            )
                            .with_hint("the classes are provider, module and library"),
                        );
                        return None;
                    }
                };
                Some(Item::Depends(DependsPragma {
                    class,
                    name: name.to_string(),
                    span: tok.span,
                }))
            }
            ["pragma", "D", "depends_on", ..] => {
                self.diags.push(
                    Diagnostic::tagged(
                        ErrTag::D_PRAGMA_MALFORM,
                        "malformed #pragma D depends_on",
                        tok.span,
                    )
                    .with_hint("write `#pragma D depends_on <class> <name>`"),
                );
                None
            }
            ["pragma", "D", "attributes", attrs, _ident, ..] => {
                if !valid_attributes(attrs) {
                    self.diags.push(
                        Diagnostic::tagged(
                            ErrTag::D_PRAGMA_INVAL,
                            "invalid attributes specified by #pragma D attributes",
                            tok.span,
                        )
                        .with_hint("write name/data/dependency stabilities and a class, e.g. `Evolving/Evolving/Common`"),
                    );
                }
                // Stability attributes change nothing Sightline does.
                None
            }
            ["pragma", "D", "attributes", ..] => {
                self.diags.push(
                    Diagnostic::tagged(
                        ErrTag::D_PRAGMA_MALFORM,
                        "malformed #pragma D attributes",
                        tok.span,
                    )
                    .with_hint("write `#pragma D attributes <attributes> <ident>`"),
                );
                None
            }
            // Accepted and without effect here, as `ident` in DTrace.
            ["pragma", "D", "binding" | "ident" | "line", ..] => None,
            ["pragma", "D", other, ..] if *other != "option" => {
                self.diags.push(Diagnostic::tagged(
                    ErrTag::D_PRAGMA_INVAL,
                    format!("invalid D pragma: {other}"),
                    tok.span,
                ));
                None
            }
            ["pragma", "D", "option", ..] => {
                self.diags.push(
                    Diagnostic::tagged(
                        ErrTag::D_PRAGMA_MALFORM,
                        "malformed `#pragma D option`",
                        tok.span,
                    )
                    .with_hint("write `#pragma D option name=value` without spaces around `=`"),
                );
                None
            }
            ["pragma", "D", ..] | ["pragma", ..] | ["ident", ..] => {
                self.diags.push(
                    Diagnostic::warning("pragma ignored", tok.span)
                        .with_hint("only `#pragma D option` is supported"),
                );
                None
            }
            _ => {
                self.diags.push(
                    Diagnostic::tagged(
                        ErrTag::D_PRAGCTL_INVAL,
                        "preprocessor directives are not supported",
                        tok.span,
                    )
                    .with_hint("run the C preprocessor over the script with -C, as dtrace -C"),
                );
                None
            }
        }
    }

    /// declaration := [`self`|`this`] type-name declarator {`,` declarator} `;`
    /// declarator := IDENT [`[` type-name {`,` type-name} `]`]
    ///
    /// Several declarators share the type (`int a, b;`, as in C); each becomes a [`VarDecl`]
    /// whose span runs from the declaration's start to its `;`.
    fn declaration(&mut self) -> PResult<Vec<VarDecl>> {
        let start = self.tok.span;
        let scope = if self.is_ident("self") {
            self.bump();
            DeclScope::Thread
        } else if self.is_ident("this") {
            self.bump();
            DeclScope::Clause
        } else {
            DeclScope::Global
        };
        if scope != DeclScope::Global && (self.is_ident("self") || self.is_ident("this")) {
            self.diags.push(Diagnostic::tagged(
                ErrTag::D_DECL_CLASS,
                "more than one storage class specified",
                self.tok.span,
            ));
            return Err(Reported);
        }
        let defined = self.pending_types.len();
        let implicit_int = scope != DeclScope::Global
            && matches!(&self.tok.tok, Tok::Ident(n) if !self.is_type(n) && !is_reserved(n));
        let ty = if implicit_int {
            // `self x;`: a declaration without a type declares an `int`, as in DTrace (and
            // C's implicit int).
            TypeName {
                base: BaseType::Int {
                    bytes: 4,
                    signed: true,
                },
                pointer: 0,
                text: "int".into(),
                span: self.after_prev(),
            }
        } else {
            self.type_name()?
        };
        if scope == DeclScope::Global && self.pending_types.len() > defined && self.is_punct(";") {
            // `struct s { ... };` or `enum e { ... };`: a definition and no variable.
            self.bump();
            return Ok(Vec::new());
        }
        let mut declarators = Vec::new();
        loop {
            let name = match &self.tok.tok {
                Tok::Ident(n) if !is_reserved(n) => n.clone(),
                // A second type after the first (`struct a { ... } struct b { ... };`, a
                // definition missing its `;`): DTrace's "invalid type combination".
                Tok::Ident(n) if self.is_type(n) => {
                    self.diags.push(Diagnostic::tagged(
                        ErrTag::D_DECL_COMBO,
                        format!("invalid type combination: `{}` followed by `{n}`", ty.text),
                        self.tok.span,
                    ));
                    return Err(Reported);
                }
                _ => {
                    return Err(self.error_here(format!(
                        "expected a variable name, found {}",
                        self.tok.tok.describe()
                    )));
                }
            };
            self.bump();
            let mut keys = Vec::new();
            let mut array = None;
            if self.is_punct("[") && matches!(peek_after(&self.lexer), Tok::Int(_)) {
                self.bump();
                let Tok::Int(lit) = self.bump().tok else {
                    unreachable!("peeked")
                };
                if lit.value == 0 {
                    self.diags.push(Diagnostic::tagged(
                        ErrTag::D_DECL_ARRSUB,
                        "an array dimension must be a positive integer",
                        self.after_prev(),
                    ));
                    return Err(Reported);
                }
                self.expect_punct("]", "after the array dimension")?;
                array = Some(lit.value);
            } else if self.is_punct("[") && matches!(peek_after(&self.lexer), Tok::Punct("]")) {
                self.diags.push(Diagnostic::tagged(
                    ErrTag::D_DECL_ARRNULL,
                    format!(
                        "array declaration requires array dimension or tuple signature: {name}"
                    ),
                    self.tok.span,
                ));
                return Err(Reported);
            } else if self.is_punct("[") && matches!(peek_after(&self.lexer), Tok::Punct("-")) {
                self.diags.push(Diagnostic::tagged(
                    ErrTag::D_DECL_ARRSUB,
                    "positive integral constant expression or tuple signature expected as array declaration subscript",
                    self.tok.span,
                ));
                return Err(Reported);
            } else if self.eat_punct("[") {
                loop {
                    keys.push(self.type_name()?);
                    if !self.eat_punct(",") {
                        break;
                    }
                }
                self.expect_punct("]", "after the key types")?;
            }
            if self.is_punct("=") {
                // D declarations have no initializers (guide, "Variables" → "Scalar Variables").
                self.diags.push(
                    Diagnostic::error("a D declaration cannot assign an initial value", self.tok.span)
                        .with_hint(format!("declare `{name}` here and assign it in a BEGIN clause: BEGIN {{ {name} = ...; }}")),
                );
                return Err(Reported);
            }
            declarators.push((name, keys, array));
            if !self.eat_punct(",") {
                break;
            }
        }
        let end = self.expect_punct(";", "after the declaration")?;
        Ok(declarators
            .into_iter()
            .map(|(name, keys, array)| VarDecl {
                scope,
                ty: ty.clone(),
                name,
                keys,
                array,
                span: start.to(end),
            })
            .collect())
    }

    /// inline-definition := `inline` type-name IDENT `=` expression `;`
    fn inline_definition(&mut self) -> PResult<InlineDef> {
        let start = self.bump().span;
        let ty = self.type_name()?;
        let name = match &self.tok.tok {
            Tok::Ident(n) if !is_reserved(n) => n.clone(),
            _ => {
                return Err(self.error_here(format!(
                    "expected a name for the inline, found {}",
                    self.tok.tok.describe()
                )));
            }
        };
        self.bump();
        self.expect_punct("=", "after the inline's name")?;
        let value = self.expr_bp(bp::ASSIGN + 1)?;
        let end = self.expect_punct(";", "after the inline definition")?;
        Ok(InlineDef {
            ty,
            name,
            value,
            span: start.to(end),
        })
    }

    /// translator-definition := `translator` type-name `<` type-name IDENT `>`
    ///   `{` (IDENT `=` expression `;`)* `}` `;`   (guide, "Translators")
    fn translator_definition(&mut self) -> PResult<TranslatorDef> {
        let start = self.bump().span;
        let output = self.type_name()?;
        self.expect_punct("<", "before the translator's input type")?;
        let input = self.type_name()?;
        let (param, param_span) = match &self.tok.tok {
            Tok::Ident(n) if !is_reserved(n) => (n.clone(), self.tok.span),
            _ => {
                return Err(self.error_here(format!(
                    "expected a name for the translator's input, found {}",
                    self.tok.tok.describe()
                )));
            }
        };
        self.bump();
        self.expect_punct(">", "after the translator's input")?;
        self.expect_punct("{", "to start the translator's members")?;
        let mut members = Vec::new();
        while !self.is_punct("}") {
            let (name, name_span) = match &self.tok.tok {
                Tok::Ident(n) if !is_reserved(n) => (n.clone(), self.tok.span),
                _ => {
                    return Err(self.error_here(format!(
                        "expected a member name in the translator, found {}",
                        self.tok.tok.describe()
                    )));
                }
            };
            self.bump();
            self.expect_punct("=", "after the translator member's name")?;
            let value = self.nested(|p| p.expression())?;
            self.expect_punct(";", "after the translator member's value")?;
            members.push(TranslatorMember {
                name,
                name_span,
                value,
            });
        }
        self.bump();
        let end = self.expect_punct(";", "after the translator definition")?;
        Ok(TranslatorDef {
            output,
            input,
            param,
            param_span,
            members,
            span: start.to(end),
        })
    }

    /// clause := probe-descriptions [predicate] [`{` statement* `}`]
    fn clause(&mut self) -> Clause {
        let start = self.tok.span;
        let mut probes = Vec::new();
        let mut ok = true;
        loop {
            match self.probe_description(!probes.is_empty()) {
                Ok(d) => probes.push(d),
                Err(Reported) => {
                    ok = false;
                    break;
                }
            }
            if !self.eat_punct(",") {
                break;
            }
        }
        let mut predicate = None;
        if ok && self.is_punct("/") {
            match self.predicate() {
                Ok(p) => predicate = Some(p),
                Err(Reported) => ok = false,
            }
        }
        if !ok {
            // Skip the rest of the header; parse the body if there is one so its errors show too.
            while !matches!(self.tok.tok, Tok::Eof) && !self.is_punct("{") && !self.is_punct("}") {
                self.bump();
            }
        }
        let mut body = Vec::new();
        let mut end = self.after_prev();
        if self.is_punct("{") {
            let open = self.bump().span;
            body = self.statement_list();
            if self.is_punct("}") {
                end = self.bump().span;
            } else if matches!(self.tok.tok, Tok::Directive(_)) {
                // statement_list reported the directive (most likely a missing `}`).
                end = self.after_prev();
            } else if self.tok.damaged {
                // An unterminated comment swallowed the `}`: already reported.
                end = self.after_prev();
            } else {
                let found = self.tok.tok.describe();
                self.diags.push(
                    Diagnostic::error(
                        format!("expected `}}` at the end of the clause, found {found}"),
                        self.err_span(),
                    )
                    .with_label(open, "the clause's body starts here"),
                );
                end = self.after_prev();
            }
        } else if ok
            && !matches!(self.tok.tok, Tok::Eof | Tok::Directive(_))
            && !self.clause_follows()
        {
            let found = self.tok.tok.describe();
            self.diags.push(
                Diagnostic::error(
                    format!("expected `{{`, `/` or `,` after the probe description, found {found}"),
                    self.tok.span,
                )
                .with_hint("a clause is `probe /predicate/ { statements }`"),
            );
            // Skip the rest of the would-be statement.
            while !matches!(self.tok.tok, Tok::Eof | Tok::Directive(_))
                && !self.is_punct(";")
                && !self.is_punct("}")
            {
                self.bump();
            }
            if self.is_punct(";") || self.is_punct("}") {
                self.bump();
            }
        }
        Clause {
            probes,
            predicate,
            body,
            span: start.to(end),
        }
    }

    /// True when the current token begins a new clause on a later line (a bodiless clause may be
    /// followed by another). Something on the same line is a mistake (`tick-1s trace(1);`).
    fn clause_follows(&self) -> bool {
        let starts = matches!(&self.tok.tok, Tok::Ident(_) | Tok::Int(_))
            || matches!(&self.tok.tok, Tok::Punct(p) if matches!(*p, ":" | "*" | "?" | "["));
        starts
            && self
                .lexer
                .text_between(self.prev_end, self.tok.span.start)
                .contains('\n')
    }

    /// probe-description := field [`:` field [`:` field [`:` field]]] — lexed as one word, then split.
    fn probe_description(&mut self, after_comma: bool) -> PResult<ProbeDesc> {
        // Re-lex from the current token's start in probe-description mode.
        self.lexer.seek(self.tok.span.start);
        let (text, span) = self.lexer.probe_spec(&mut self.diags);
        self.prev_end = span.end;
        self.tok = self.lexer.next_token(&mut self.diags);
        self.prev_damaged = false;
        if text.is_empty() {
            let found = self.tok.tok.describe();
            let mut d = Diagnostic::error(
                format!("expected a probe description, found {found}"),
                self.err_span(),
            );
            if after_comma {
                d = d.with_hint("remove the trailing `,` after the last probe description");
            }
            self.diags.push(d);
            return Err(Reported);
        }
        let parts: Vec<&str> = text.split(':').collect();
        if parts.len() > 4 {
            self.diags.push(
                Diagnostic::error(
                    format!(
                        "probe description has {} fields; at most 4 are allowed",
                        parts.len()
                    ),
                    span,
                )
                .with_hint("write provider:module:function:name"),
            );
            return Err(Reported);
        }
        // Fields fill from the right: `BEGIN` is `:::BEGIN`.
        let mut fields: Vec<PatField> = Vec::with_capacity(4);
        let mut off = span.start;
        for part in &parts {
            fields.push(PatField {
                text: part.to_string(),
                span: Span::new(off, off + part.len() as u32),
            });
            off += part.len() as u32 + 1;
        }
        while fields.len() < 4 {
            fields.insert(
                0,
                PatField {
                    text: String::new(),
                    span: Span::new(span.start, span.start),
                },
            );
        }
        let mut it = fields.into_iter();
        let (provider, module, function, name) = (
            it.next().unwrap_or_else(empty_field),
            it.next().unwrap_or_else(empty_field),
            it.next().unwrap_or_else(empty_field),
            it.next().unwrap_or_else(empty_field),
        );
        Ok(ProbeDesc {
            provider,
            module,
            function,
            name,
            text,
            span,
        })
    }

    /// predicate := `/` expression `/`
    fn predicate(&mut self) -> PResult<Expr> {
        let open = self.bump().span;
        let saved = std::mem::replace(&mut self.no_slash, true);
        let e = self.expression();
        self.no_slash = saved;
        let e = e?;
        if !self.is_punct("/") {
            let found = self.tok.tok.describe();
            self.diags.push(
                Diagnostic::error(
                    format!("expected `/` to end the predicate, found {found}"),
                    self.err_span(),
                )
                .with_label(open, "predicate starts here"),
            );
            return Err(Reported);
        }
        let close = self.bump().span;
        // `/a / b > 1/` ends the predicate at the division. An operand right after the closing `/`
        // on the same line gives it away.
        let operand_follows = matches!(self.tok.tok, Tok::Ident(_) | Tok::Int(_) | Tok::Punct("("))
            && !self
                .lexer
                .text_between(close.end, self.tok.span.start)
                .contains('\n');
        if operand_follows {
            self.diags.push(
                Diagnostic::error(
                    "`/` ends the predicate here; a division inside a predicate needs parentheses",
                    close,
                )
                .with_label(open, "predicate starts here")
                .with_hint("write the division in parentheses: /(a / b) > 1/"),
            );
            return Err(Reported);
        }
        Ok(e)
    }

    // ----- statements -----

    /// statement-list := statement* (up to `}` or end of input)
    fn statement_list(&mut self) -> Vec<Stmt> {
        let mut out = Vec::new();
        while !self.is_punct("}") && !matches!(self.tok.tok, Tok::Eof) {
            if matches!(self.tok.tok, Tok::Directive(_)) {
                // A directive inside a clause: most likely a missing `}` above it.
                self.diags.push(
                    Diagnostic::error("preprocessor directive inside a clause", self.tok.span)
                        .with_hint("is a `}` missing before it?"),
                );
                return out;
            }
            match self.statement() {
                Ok(s) => {
                    out.push(s);
                    out.append(&mut self.comma_rest);
                }
                Err(Reported) => {
                    self.comma_rest.clear();
                    self.recover_statement()
                }
            }
        }
        out
    }

    /// Skips to just after the next `;` outside braces, or to the `}` closing the clause.
    /// Parentheses and brackets are not counted: in D they never span statements, and an unclosed
    /// `(` in the broken statement must not swallow the rest of the clause.
    fn recover_statement(&mut self) {
        let mut depth = 0i32;
        loop {
            match &self.tok.tok {
                Tok::Eof => return,
                Tok::Directive(_) => return,
                Tok::Punct(";") if depth <= 0 => {
                    self.bump();
                    return;
                }
                Tok::Punct("}") if depth <= 0 => return,
                Tok::Punct("{") => depth += 1,
                Tok::Punct("}") => depth -= 1,
                _ => {}
            }
            self.bump();
        }
    }

    /// statement := `;` | if-statement | aggregation-statement terminator | expression terminator
    ///
    /// The terminator is `;`, optional before the clause's `}` (as in DTrace).
    fn statement(&mut self) -> PResult<Stmt> {
        self.enter()?;
        let r = self.statement_inner();
        self.depth -= 1;
        r
    }

    fn statement_inner(&mut self) -> PResult<Stmt> {
        let start = self.tok.span;
        if self.is_punct(";") {
            self.bump();
            return Ok(Stmt {
                kind: StmtKind::Empty,
                span: start,
            });
        }
        if self.is_ident("if") {
            return self.if_statement();
        }
        if self.is_punct("{") {
            // Report, then parse the block anyway so that errors inside it are found too.
            self.diags.push(
                Diagnostic::error(
                    "blocks are only allowed after `if` and `else`",
                    self.tok.span,
                )
                .with_hint("remove the braces"),
            );
            self.bump();
            let _ = self.statement_list();
            let end = self.expect_punct("}", "at the end of the block")?;
            return Ok(Stmt {
                kind: StmtKind::Empty,
                span: start.to(end),
            });
        }
        let kind = if let Tok::Agg(_) = self.tok.tok {
            if matches!(peek_after(&self.lexer), Tok::Punct("=" | "[")) {
                StmtKind::Aggregate(self.aggregation_statement()?)
            } else {
                StmtKind::Expr(self.expression()?)
            }
        } else {
            StmtKind::Expr(self.expression()?)
        };
        // D's comma operator at statement level (dt_grammar.y `expression ',' assignment`):
        // `a = 1, b = 2;` evaluates each in turn, so it is the statements `a = 1; b = 2;`.
        let mut rest = Vec::new();
        while matches!(kind, StmtKind::Expr(_)) && self.is_punct(",") {
            self.bump();
            let at = self.tok.span;
            let e = self.expression()?;
            rest.push((e, at));
        }
        let end = self.statement_terminator()?;
        self.comma_rest.clear();
        for (e, at) in rest {
            self.comma_rest.push(Stmt {
                kind: StmtKind::Expr(e),
                span: at.to(end),
            });
        }
        Ok(Stmt {
            kind,
            span: start.to(end),
        })
    }

    /// Consumes the statement's `;`. When it is missing, reports it and carries on as if it were
    /// there (the next statement most often starts on the next line), except before `{`, which
    /// usually means a clause's `}` is missing.
    fn statement_terminator(&mut self) -> PResult<Span> {
        if self.is_punct(";") {
            return Ok(self.bump().span);
        }
        if self.is_punct("}") {
            return Ok(self.after_prev());
        }
        if self.prev_damaged {
            return Ok(self.after_prev());
        }
        if matches!(self.tok.tok, Tok::Eof) {
            // The input ends inside a clause: the missing `}` is the mistake (reported by the
            // clause), not a `;`, which may be omitted before a `}`.
            return Ok(self.after_prev());
        }
        let found = self.tok.tok.describe();
        let mut d = Diagnostic::error(
            format!("expected `;` after the statement, found {found}"),
            self.after_prev(),
        )
        .with_label(self.tok.span, "next token");
        if self.is_punct("{") {
            d = d.with_hint("if this starts a new clause, a `}` is missing before it");
            self.diags.push(d);
            return Err(Reported);
        }
        d = d.with_hint("statements in a clause end with `;`");
        self.diags.push(d);
        if matches!(self.tok.tok, Tok::Directive(_)) {
            return Err(Reported);
        }
        Ok(self.after_prev())
    }

    /// if-statement := `if` `(` expression `)` block-or-statement [`else` block-or-statement]
    fn if_statement(&mut self) -> PResult<Stmt> {
        let start = self.bump().span;
        self.expect_punct("(", "after `if`")?;
        let cond = self.nested(|p| p.expression())?;
        self.expect_punct(")", "after the `if` condition")?;
        let then = self.block_or_statement()?;
        let els = if self.is_ident("else") {
            self.bump();
            Some(self.block_or_statement()?)
        } else {
            None
        };
        Ok(Stmt {
            kind: StmtKind::If { cond, then, els },
            span: start.to(self.after_prev()),
        })
    }

    /// block-or-statement := `{` statement* `}` | statement
    fn block_or_statement(&mut self) -> PResult<Vec<Stmt>> {
        if self.eat_punct("{") {
            let body = self.statement_list();
            self.expect_punct("}", "at the end of the block")?;
            Ok(body)
        } else {
            let first = self.statement();
            let mut body = vec![first?];
            body.append(&mut self.comma_rest);
            Ok(body)
        }
    }

    /// aggregation-statement := AGG [`[` argument-list `]`] `=` IDENT `(` [argument-list] `)`
    fn aggregation_statement(&mut self) -> PResult<AggStmt> {
        let tok = self.bump();
        let Tok::Agg(name) = tok.tok else {
            unreachable!("caller checked for an aggregation token")
        };
        let name_span = tok.span;
        let mut keys = Vec::new();
        if self.eat_punct("[") {
            keys = self.nested(|p| p.argument_list("]"))?;
            self.expect_punct("]", "after the aggregation keys")?;
        }
        self.expect_punct("=", "after the aggregation")?;
        let (func, func_span) = match &self.tok.tok {
            Tok::Ident(f) => (f.clone(), self.tok.span),
            _ => {
                let found = self.tok.tok.describe();
                self.diags.push(
                    Diagnostic::error(format!("expected an aggregating function, found {found}"), self.err_span())
                        .with_hint("aggregations are assigned a function call: @a = count(), @b = sum(x), @c = quantize(x)"),
                );
                return Err(Reported);
            }
        };
        self.bump();
        if !self.is_punct("(") {
            let found = self.tok.tok.describe();
            self.diags.push(
                Diagnostic::error(
                    format!("expected `(` after the aggregating function, found {found}"),
                    self.err_span(),
                )
                .with_label(func_span, "an aggregating function is always called")
                .with_hint(format!(
                    "write `{func}()`{}",
                    if func == "count" {
                        ""
                    } else {
                        " with its arguments"
                    }
                )),
            );
            return Err(Reported);
        }
        self.bump();
        let args = self.nested(|p| p.argument_list(")"))?;
        self.expect_punct(")", "after the arguments")?;
        Ok(AggStmt {
            name,
            name_span,
            keys,
            func,
            func_span,
            args,
        })
    }

    /// argument-list := [assignment-expression {`,` assignment-expression}] (stops before `close`)
    fn argument_list(&mut self, close: &str) -> PResult<Vec<Expr>> {
        let mut args = Vec::new();
        if self.is_punct(close) {
            return Ok(args);
        }
        loop {
            args.push(self.expr_bp(bp::ASSIGN)?);
            if !self.eat_punct(",") {
                break;
            }
        }
        Ok(args)
    }

    /// Runs `f` with `/` meaning division again (inside brackets in a predicate).
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        let saved = std::mem::replace(&mut self.no_slash, false);
        let r = f(self);
        self.no_slash = saved;
        r
    }

    // ----- expressions -----

    /// expression := assignment-expression (a comma expression is split into statements by
    /// [`Parser::statement`]; elsewhere a comma separates arguments)
    fn expression(&mut self) -> PResult<Expr> {
        self.expr_bp(0)
    }

    /// The Pratt loop: a prefix/primary expression, then postfix and infix operators binding tighter
    /// than `min_bp`.
    fn expr_bp(&mut self, min_bp: u8) -> PResult<Expr> {
        self.enter()?;
        let r = self.expr_bp_inner(min_bp);
        self.depth -= 1;
        r
    }

    /// Counts one level of nesting; reports and fails past [`MAX_DEPTH`].
    fn enter(&mut self) -> PResult<()> {
        if self.depth >= MAX_DEPTH {
            return Err(self.too_deep());
        }
        self.depth += 1;
        Ok(())
    }

    fn too_deep(&mut self) -> Reported {
        self.diags.push(
            Diagnostic::error(
                format!("expression or statement nested more than {MAX_DEPTH} levels deep"),
                self.err_span(),
            )
            .with_hint("split it using variables"),
        );
        Reported
    }

    fn expr_bp_inner(&mut self, min_bp: u8) -> PResult<Expr> {
        let mut lhs = self.unary_expression()?;
        // A left-associative chain `a + b + c + ...` is built in this loop, not by recursion, but
        // it nests the tree just as deeply: count it against the same limit.
        let mut chain = 0u32;
        while let Tok::Punct(op) = self.tok.tok {
            chain += 1;
            if self.depth + chain > MAX_DEPTH {
                return Err(self.too_deep());
            }
            if let Some(aop) = assign_op(op) {
                if bp::ASSIGN < min_bp {
                    break;
                }
                self.bump();
                let rhs = self.expr_bp(bp::ASSIGN)?;
                let span = lhs.span.to(rhs.span);
                lhs = Expr {
                    kind: ExprKind::Assign(aop, Box::new(lhs), Box::new(rhs)),
                    span,
                };
                continue;
            }
            if op == "?" {
                if bp::TERNARY < min_bp {
                    break;
                }
                self.bump();
                let then = self.nested(|p| p.expression())?;
                self.expect_punct(":", "in the conditional expression")?;
                let els = self.expr_bp(bp::TERNARY)?;
                let span = lhs.span.to(els.span);
                lhs = Expr {
                    kind: ExprKind::Ternary(Box::new(lhs), Box::new(then), Box::new(els)),
                    span,
                };
                continue;
            }
            if op == "/" && self.no_slash {
                break;
            }
            let Some((bop, lbp)) = binary_op(op) else {
                break;
            };
            if lbp <= min_bp {
                break;
            }
            self.bump();
            let rhs = self.expr_bp(lbp)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(bop, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    /// unary-expression := postfix-expression | (`++`|`--`) unary-expression
    ///   | unary-operator cast-expression | `sizeof` ... | `stringof` unary-expression | cast-expression
    fn unary_expression(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.unary_expression_inner();
        self.depth -= 1;
        r
    }

    fn unary_expression_inner(&mut self) -> PResult<Expr> {
        let start = self.tok.span;
        match self.tok.tok.clone() {
            Tok::Punct(op @ ("++" | "--")) => {
                self.bump();
                let e = self.unary_expression()?;
                let span = start.to(e.span);
                Ok(Expr {
                    kind: ExprKind::IncDec {
                        increment: op == "++",
                        prefix: true,
                        expr: Box::new(e),
                    },
                    span,
                })
            }
            Tok::Punct(op @ ("-" | "+" | "!" | "~" | "*" | "&")) => {
                self.bump();
                let e = self.unary_expression()?;
                let uop = match op {
                    "-" => UnaryOp::Neg,
                    "+" => UnaryOp::Plus,
                    "!" => UnaryOp::Not,
                    "~" => UnaryOp::BitNot,
                    "*" => UnaryOp::Deref,
                    _ => UnaryOp::AddrOf,
                };
                let span = start.to(e.span);
                Ok(Expr {
                    kind: ExprKind::Unary(uop, Box::new(e)),
                    span,
                })
            }
            Tok::Punct("(") if matches!(peek_after(&self.lexer), Tok::Ident(w) if self.is_type(&w)) =>
            {
                self.bump();
                let ty = self.type_name()?;
                self.expect_punct(")", "after the type in the cast")?;
                let e = self.unary_expression()?;
                let span = start.to(e.span);
                Ok(Expr {
                    kind: ExprKind::Cast(ty, Box::new(e)),
                    span,
                })
            }
            Tok::Ident(w) if w == "sizeof" => {
                self.bump();
                if self.is_punct("(")
                    && matches!(peek_after(&self.lexer), Tok::Ident(w) if self.is_type(&w))
                {
                    self.bump();
                    let ty = self.type_name()?;
                    let end = self.expect_punct(")", "after the type")?;
                    return Ok(Expr {
                        kind: ExprKind::SizeofType(ty),
                        span: start.to(end),
                    });
                }
                let e = self.unary_expression()?;
                let span = start.to(e.span);
                Ok(Expr {
                    kind: ExprKind::SizeofExpr(Box::new(e)),
                    span,
                })
            }
            Tok::Ident(w) if w == "offsetof" => {
                self.bump();
                self.expect_punct("(", "after `offsetof`")?;
                let ty = self.type_name()?;
                self.expect_punct(",", "after the type in `offsetof`")?;
                let (member, _) = self.member_name()?;
                let end = self.expect_punct(")", "after the member name")?;
                Ok(Expr {
                    kind: ExprKind::Offsetof(ty, member),
                    span: start.to(end),
                })
            }
            Tok::Ident(w) if w == "xlate" => {
                self.bump();
                self.expect_punct("<", "after `xlate`")?;
                let ty = self.type_name()?;
                self.expect_punct(">", "after the type in `xlate`")?;
                self.expect_punct("(", "before the value to translate")?;
                let e = self.nested(|p| p.expression())?;
                let end = self.expect_punct(")", "after the value to translate")?;
                let x = Expr {
                    kind: ExprKind::Xlate(ty, Box::new(e)),
                    span: start.to(end),
                };
                self.postfix_on(x)
            }
            Tok::Ident(w) if w == "stringof" => {
                self.bump();
                let e = self.unary_expression()?;
                let span = start.to(e.span);
                Ok(Expr {
                    kind: ExprKind::Stringof(Box::new(e)),
                    span,
                })
            }
            _ => self.postfix_expression(),
        }
    }

    /// postfix-expression := primary-expression { `[` argument-list `]` | `(` argument-list `)`
    ///   | `->` IDENT | `.` IDENT | `++` | `--` }
    fn postfix_expression(&mut self) -> PResult<Expr> {
        let e = self.primary_expression()?;
        self.postfix_on(e)
    }

    /// The postfix operators that follow `e` (see [`Parser::postfix_expression`]).
    fn postfix_on(&mut self, mut e: Expr) -> PResult<Expr> {
        let mut chain = 0u32;
        loop {
            chain += 1;
            if self.depth + chain > MAX_DEPTH {
                return Err(self.too_deep());
            }
            match self.tok.tok {
                Tok::Punct("[") => {
                    self.bump();
                    let idx = self.nested(|p| p.argument_list("]"))?;
                    let end = self.expect_punct("]", "after the subscript")?;
                    if idx.is_empty() {
                        self.diags
                            .push(Diagnostic::error("empty subscript", e.span.to(end)));
                    }
                    let span = e.span.to(end);
                    e = Expr {
                        kind: ExprKind::Index(Box::new(e), idx),
                        span,
                    };
                }
                Tok::Punct("(") => {
                    let ExprKind::Ident(name) = &e.kind else {
                        return Err(self.error_here("only named functions can be called"));
                    };
                    let (func, func_span) = (name.clone(), e.span);
                    self.bump();
                    let args = self.nested(|p| p.argument_list(")"))?;
                    let end = self.expect_punct(")", "after the arguments")?;
                    e = Expr {
                        kind: ExprKind::Call {
                            func,
                            func_span,
                            args,
                        },
                        span: func_span.to(end),
                    };
                }
                Tok::Punct(op @ ("->" | ".")) => {
                    self.bump();
                    let (field, field_span) = self.member_name()?;
                    let span = e.span.to(field_span);
                    e = Expr {
                        kind: ExprKind::Member {
                            base: Box::new(e),
                            field,
                            field_span,
                            arrow: op == "->",
                        },
                        span,
                    };
                }
                Tok::Punct(op @ ("++" | "--")) => {
                    let end = self.bump().span;
                    let span = e.span.to(end);
                    e = Expr {
                        kind: ExprKind::IncDec {
                            increment: op == "++",
                            prefix: false,
                            expr: Box::new(e),
                        },
                        span,
                    };
                }
                _ => break,
            }
        }
        Ok(e)
    }

    fn member_name(&mut self) -> PResult<(String, Span)> {
        match &self.tok.tok {
            Tok::Ident(n) => {
                let r = (n.clone(), self.tok.span);
                self.bump();
                Ok(r)
            }
            _ => {
                let found = self.tok.tok.describe();
                Err(self.error_here(format!("expected a member name, found {found}")))
            }
        }
    }

    /// primary-expression := IDENT | INTEGER | STRING | MACRO | AGG | `self->` IDENT | `this->` IDENT
    ///   | `(` expression `)`
    fn primary_expression(&mut self) -> PResult<Expr> {
        let t = self.tok.clone();
        let kind = match t.tok {
            Tok::Int(i) => ExprKind::Int(i),
            Tok::Str(s) => {
                // Adjacent string constants concatenate, as in C.
                self.bump();
                let mut s = s;
                let mut span = t.span;
                while let Tok::Str(more) = &self.tok.tok {
                    s.push_str(more);
                    span = span.to(self.tok.span);
                    self.bump();
                }
                return Ok(Expr {
                    kind: ExprKind::Str(s),
                    span,
                });
            }
            Tok::Macro(m) => ExprKind::Macro(m),
            Tok::Agg(name) => ExprKind::AggRef(name),
            Tok::Ident(w) if w == "self" || w == "this" => {
                self.bump();
                if !self.is_punct("->") {
                    let found = self.tok.tok.describe();
                    self.diags.push(
                        Diagnostic::error(
                            format!("expected `->` after `{w}`, found {found}"),
                            self.err_span(),
                        )
                        .with_hint(format!("{w} variables are written `{w}->name`")),
                    );
                    return Err(Reported);
                }
                self.bump();
                let (name, nspan) = self.member_name()?;
                let kind = if w == "self" {
                    ExprKind::SelfVar(name)
                } else {
                    ExprKind::ThisVar(name)
                };
                return Ok(Expr {
                    kind,
                    span: t.span.to(nspan),
                });
            }
            Tok::Ident(w) if is_reserved(&w) => {
                self.diags.push(Diagnostic::error(
                    format!("unexpected keyword `{w}` in an expression"),
                    t.span,
                ));
                return Err(Reported);
            }
            Tok::Ident(w) => ExprKind::Ident(w),
            Tok::Punct("(") => {
                self.bump();
                let e = self.nested(|p| p.expression())?;
                let end = self.expect_punct(")", "to close the parenthesis")?;
                return Ok(Expr {
                    kind: e.kind,
                    span: t.span.to(end),
                });
            }
            ref other => {
                let found = other.describe();
                let mut d =
                    Diagnostic::error(format!("expected an expression, found {found}"), t.span);
                if matches!(other, Tok::Punct(";" | ")" | "]" | "}")) {
                    d = d.with_hint("an operand is missing");
                }
                self.diags.push(d);
                return Err(Reported);
            }
        };
        self.bump();
        Ok(Expr { kind, span: t.span })
    }

    /// type-name := (`struct` | `union`) (IDENT | [IDENT] `{` member* `}`) `*`*
    ///            | `enum` (IDENT | [IDENT] `{` enumerators `}`) `*`* | type-specifier+ `*`*
    fn type_name(&mut self) -> PResult<TypeName> {
        let start = self.tok.span;
        if self.is_ident("enum") {
            return self.enum_type(start);
        }
        if self.is_ident("struct") || self.is_ident("union") {
            let kw = self.bump();
            let Tok::Ident(kw) = kw.tok else {
                unreachable!("checked above")
            };
            let name = match &self.tok.tok {
                Tok::Ident(n) if !is_reserved(n) => {
                    let n = n.clone();
                    self.bump();
                    n
                }
                Tok::Punct("{") => {
                    self.anon_types += 1;
                    format!("<anon {}>", self.anon_types)
                }
                _ => {
                    let found = self.tok.tok.describe();
                    return Err(self.error_here(format!("expected a {kw} name, found {found}")));
                }
            };
            if self.is_punct("{") {
                self.struct_body(&kw, &name, start)?;
            }
            let mut pointer = 0u8;
            while self.is_punct("*") {
                self.bump();
                pointer += 1;
            }
            let text = format!(
                "{kw} {name}{}",
                if pointer > 0 {
                    format!(" {}", "*".repeat(pointer as usize))
                } else {
                    String::new()
                }
            );
            // `struct D`s`, `struct vmlinux`task_struct`: the scope names where the type is
            // defined; types are looked up by name alone.
            let name = match name.rsplit_once('`') {
                Some((_, n)) => n.to_string(),
                None => name,
            };
            return Ok(TypeName {
                base: BaseType::Struct(name),
                pointer,
                text,
                span: start.to(self.after_prev()),
            });
        }
        if let Tok::Ident(w) = &self.tok.tok
            && let Some((base, depth)) = self.typedefs.get(w).cloned()
        {
            let name = w.clone();
            self.bump();
            let mut pointer = depth;
            let mut stars = 0usize;
            while self.is_punct("*") {
                self.bump();
                pointer = pointer.saturating_add(1);
                stars += 1;
            }
            let text = if stars > 0 {
                format!("{name} {}", "*".repeat(stars))
            } else {
                name
            };
            return Ok(TypeName {
                base,
                pointer,
                text,
                span: start.to(self.after_prev()),
            });
        }
        let mut words: Vec<String> = Vec::new();
        while let Tok::Ident(w) = &self.tok.tok {
            if !is_type_word(w) || matches!(w.as_str(), "struct" | "union" | "enum") {
                break;
            }
            words.push(w.clone());
            self.bump();
        }
        if !words.is_empty()
            && matches!(&self.tok.tok, Tok::Ident(w) if matches!(w.as_str(), "struct" | "union" | "enum"))
        {
            // `long struct s`, `unsigned union u`: DTrace's dt_decl.c checks.
            let has = |w: &str| words.iter().any(|x| x == w);
            let (tag, msg) = if has("long") {
                (
                    ErrTag::D_DECL_LONGINT,
                    "invalid type declaration: long and long long may only be used with integer or floating-point type",
                )
            } else if has("signed") || has("unsigned") {
                (
                    ErrTag::D_DECL_SIGNINT,
                    "invalid type declaration: signed and unsigned may only be used with integer type",
                )
            } else {
                (ErrTag::D_DECL_COMBO, "invalid type combination")
            };
            self.diags.push(Diagnostic::tagged(tag, msg, self.tok.span));
            return Err(Reported);
        }
        if words.is_empty() {
            let found = self.tok.tok.describe();
            return Err(self.error_here(format!("expected a type name, found {found}")));
        }
        let mut pointer = 0u8;
        while self.is_punct("*") {
            self.bump();
            pointer += 1;
        }
        let span = start.to(self.after_prev());
        let text = format!(
            "{}{}",
            words.join(" "),
            if pointer > 0 {
                format!(" {}", "*".repeat(pointer as usize))
            } else {
                String::new()
            }
        );
        let Some(base) = base_type(&words) else {
            // The finer tags of DTrace's dt_decl.c for the combinations it refuses.
            let has = |w: &str| words.iter().any(|x| x == w);
            let attr = has("short") || has("long") || has("signed") || has("unsigned");
            let tag = if has("void") && attr {
                ErrTag::D_DECL_VOIDATTR
            } else if has("char") && (has("short") || has("long")) {
                ErrTag::D_DECL_CHARATTR
            } else {
                ErrTag::D_DECL_COMBO
            };
            self.diags.push(Diagnostic::tagged(
                tag,
                format!("invalid type `{}`", words.join(" ")),
                span,
            ));
            return Err(Reported);
        };
        Ok(TypeName {
            base,
            pointer,
            text,
            span,
        })
    }
}

impl Parser<'_> {
    /// `{ member-declaration* }` of `struct NAME` or `union NAME` (the `{` is current): the
    /// definition is queued in [`Parser::pending_types`].
    /// member-declaration := type-name declarator (`,` declarator)* `;`,
    /// declarator := IDENT [`[` INT `]`]
    fn struct_body(&mut self, kw: &str, name: &str, start: Span) -> PResult<()> {
        self.bump();
        let members = match self.struct_members(kw, name) {
            Ok(m) => m,
            Err(r) => {
                self.skip_body();
                return Err(r);
            }
        };
        if members.is_empty() {
            // C's grammar (and D's) needs at least one member.
            return Err(self.error_here("syntax error near `}`: a struct or union needs a member"));
        }
        let end = self.bump().span;
        self.pending_types.push(TypeDef {
            name: name.to_string(),
            kind: TypeDefKind::Struct {
                union: kw == "union",
                members,
            },
            span: start.to(end),
        });
        Ok(())
    }

    /// After an error inside a `{ ... }` body of a definition: skips to just past its `}`.
    fn skip_body(&mut self) {
        let mut depth = 1u32;
        loop {
            match &self.tok.tok {
                Tok::Eof => return,
                Tok::Punct("{") => depth += 1,
                Tok::Punct("}") => {
                    depth -= 1;
                    if depth == 0 {
                        self.bump();
                        return;
                    }
                }
                _ => {}
            }
            self.bump();
        }
    }

    /// The member declarations of a struct or union body, up to (not including) its `}`.
    fn struct_members(&mut self, kw: &str, name: &str) -> PResult<Vec<MemberDecl>> {
        let mut members = Vec::new();
        while !self.is_punct("}") {
            if matches!(self.tok.tok, Tok::Eof) {
                return Err(self.error_here(format!("expected `}}` to close {kw} {name}")));
            }
            let ty = self.type_name()?;
            loop {
                let (mname, mspan) = match &self.tok.tok {
                    Tok::Ident(n) if !is_reserved(n) => (n.clone(), self.tok.span),
                    // An unnamed bit-field: `int : 3;`.
                    Tok::Punct(":") => (String::new(), self.tok.span),
                    _ => {
                        let found = self.tok.tok.describe();
                        return Err(
                            self.error_here(format!("expected a member name, found {found}"))
                        );
                    }
                };
                if !mname.is_empty() {
                    self.bump();
                }
                let mut array = None;
                if self.eat_punct("[") {
                    let n = match &self.tok.tok {
                        Tok::Int(lit) if lit.value > 0 => lit.value,
                        _ => {
                            let found = self.tok.tok.describe();
                            return Err(self.error_here(format!(
                                "expected a positive array size, found {found}"
                            )));
                        }
                    };
                    self.bump();
                    self.expect_punct("]", "after the array size")?;
                    array = Some(n);
                }
                let mut bits = None;
                if array.is_none() && self.eat_punct(":") {
                    bits = Some(self.nested(|p| p.expr_bp(bp::LOG_OR))?);
                }
                members.push(MemberDecl {
                    ty: ty.clone(),
                    name: mname,
                    array,
                    bits,
                    span: mspan.to(self.after_prev()),
                });
                if !self.eat_punct(",") {
                    break;
                }
            }
            self.expect_punct(";", "after the member declaration")?;
        }
        Ok(members)
    }

    /// `enum [IDENT] [{ A [= expr], ... }]` `*`* (`enum` is current): an `int` type; a body is
    /// queued in [`Parser::pending_types`].
    fn enum_type(&mut self, start: Span) -> PResult<TypeName> {
        self.bump();
        let name = match &self.tok.tok {
            Tok::Ident(n) if !is_reserved(n) => {
                let n = n.clone();
                self.bump();
                n
            }
            Tok::Punct("{") => String::new(),
            _ => {
                let found = self.tok.tok.describe();
                return Err(self.error_here(format!("expected an enum name, found {found}")));
            }
        };
        if self.eat_punct("{") {
            let consts = match self.enumerators() {
                Ok(c) => c,
                Err(r) => {
                    self.skip_body();
                    return Err(r);
                }
            };
            let end = self.expect_punct("}", "to close the enum")?;
            self.pending_types.push(TypeDef {
                name: name.clone(),
                kind: TypeDefKind::Enum(consts),
                span: start.to(end),
            });
        } else if name.is_empty() {
            return Err(self.error_here("expected an enum name or `{`"));
        }
        let mut pointer = 0u8;
        while self.eat_punct("*") {
            pointer += 1;
        }
        let mut text = if name.is_empty() {
            "enum".to_string()
        } else {
            format!("enum {name}")
        };
        if pointer > 0 {
            text = format!("{text} {}", "*".repeat(pointer as usize));
        }
        Ok(TypeName {
            base: BaseType::Int {
                bytes: 4,
                signed: true,
            },
            pointer,
            text,
            span: start.to(self.after_prev()),
        })
    }

    /// enumerators := [IDENT [`=` expression] (`,` IDENT [`=` expression])* [`,`]], up to the `}`.
    fn enumerators(&mut self) -> PResult<Vec<EnumConst>> {
        {
            let mut consts = Vec::new();
            if self.is_punct("}") {
                return Err(self.error_here("syntax error near `}`: an enum needs an enumerator"));
            }
            while !self.is_punct("}") {
                let (cname, cspan) = match &self.tok.tok {
                    Tok::Ident(n) if !is_reserved(n) => (n.clone(), self.tok.span),
                    _ => {
                        let found = self.tok.tok.describe();
                        return Err(
                            self.error_here(format!("expected an enumerator name, found {found}"))
                        );
                    }
                };
                self.bump();
                let value = if self.eat_punct("=") {
                    Some(self.expr_bp(bp::ASSIGN + 1)?)
                } else {
                    None
                };
                consts.push(EnumConst {
                    name: cname,
                    value,
                    span: cspan,
                });
                if !self.eat_punct(",") {
                    break;
                }
            }
            if !self.is_punct("}") {
                let found = self.tok.tok.describe();
                return Err(
                    self.error_here(format!("expected `,` or `}}` in the enum, found {found}"))
                );
            }
            Ok(consts)
        }
    }
}

fn empty_field() -> PatField {
    PatField {
        text: String::new(),
        span: Span::default(),
    }
}

/// Maps C type words to a base type (LP64). `None` for an invalid combination.
fn base_type(words: &[String]) -> Option<BaseType> {
    let int = |bytes, signed| Some(BaseType::Int { bytes, signed });
    if words.len() == 1 {
        return match words[0].as_str() {
            "void" => Some(BaseType::Void),
            "string" => Some(BaseType::String),
            "char" | "int8_t" | "s8" => int(1, true),
            "uint8_t" | "uchar_t" | "u8" => int(1, false),
            "short" | "int16_t" | "s16" => int(2, true),
            "uint16_t" | "ushort_t" | "u16" => int(2, false),
            "int" | "signed" | "int32_t" | "pid_t" | "id_t" | "processorid_t" | "s32" => {
                int(4, true)
            }
            "unsigned" | "uint32_t" | "uid_t" | "gid_t" | "uint_t" | "u32" => int(4, false),
            "long" | "int64_t" | "intptr_t" | "ssize_t" | "s64" => int(8, true),
            "uint64_t" | "uintptr_t" | "size_t" | "ulong_t" | "u64" => int(8, false),
            w => KERNEL_TYPEDEFS
                .iter()
                .find(|(n, _, _)| *n == w)
                .and_then(|&(_, bytes, signed)| int(bytes, signed)),
        };
    }
    // Combinations of C keywords: [signed|unsigned] (char | short [int] | int | long [long] [int]).
    let mut signed = None;
    let (mut chars, mut shorts, mut ints, mut longs) = (0, 0, 0, 0);
    for w in words {
        match w.as_str() {
            "signed" if signed.is_none() => signed = Some(true),
            "unsigned" if signed.is_none() => signed = Some(false),
            "char" => chars += 1,
            "short" => shorts += 1,
            "int" => ints += 1,
            "long" => longs += 1,
            _ => return None,
        }
    }
    let s = signed.unwrap_or(true);
    match (chars, shorts, ints, longs) {
        (1, 0, 0, 0) => int(1, s),
        (0, 1, 0..=1, 0) => int(2, s),
        (0, 0, 0..=1, 0) => int(4, s),
        (0, 0, 0..=1, 1..=2) => int(8, s),
        _ => None,
    }
}

/// Assignment operators: `=` (None) and compound `op=`.
fn assign_op(p: &str) -> Option<Option<BinaryOp>> {
    Some(match p {
        "=" => None,
        "+=" => Some(BinaryOp::Add),
        "-=" => Some(BinaryOp::Sub),
        "*=" => Some(BinaryOp::Mul),
        "/=" => Some(BinaryOp::Div),
        "%=" => Some(BinaryOp::Mod),
        "&=" => Some(BinaryOp::BitAnd),
        "|=" => Some(BinaryOp::BitOr),
        "^=" => Some(BinaryOp::BitXor),
        "<<=" => Some(BinaryOp::Shl),
        ">>=" => Some(BinaryOp::Shr),
        _ => return None,
    })
}

/// Binary (non-assignment) operators and their binding power; all are left-associative.
fn binary_op(p: &str) -> Option<(BinaryOp, u8)> {
    use BinaryOp::*;
    Some(match p {
        "*" => (Mul, bp::MULTIPLICATIVE),
        "/" => (Div, bp::MULTIPLICATIVE),
        "%" => (Mod, bp::MULTIPLICATIVE),
        "+" => (Add, bp::ADDITIVE),
        "-" => (Sub, bp::ADDITIVE),
        "<<" => (Shl, bp::SHIFT),
        ">>" => (Shr, bp::SHIFT),
        "<" => (Lt, bp::RELATIONAL),
        "<=" => (Le, bp::RELATIONAL),
        ">" => (Gt, bp::RELATIONAL),
        ">=" => (Ge, bp::RELATIONAL),
        "==" => (Eq, bp::EQUALITY),
        "!=" => (Ne, bp::EQUALITY),
        "&" => (BitAnd, bp::BIT_AND),
        "^" => (BitXor, bp::BIT_XOR),
        "|" => (BitOr, bp::BIT_OR),
        "&&" => (LogAnd, bp::LOG_AND),
        "^^" => (LogXor, bp::LOG_XOR),
        "||" => (LogOr, bp::LOG_OR),
        _ => return None,
    })
}

// `bp::UNARY` documents where unary operators sit; the recursive descent in `unary_expression`
// implements it.
const _: u8 = bp::UNARY;

/// DTrace's attribute triple (`dtrace_str2attr`): `name/data/class`, the first two stability
/// levels and the last a dependency class, each may be left empty.
fn valid_attributes(s: &str) -> bool {
    const STABILITY: &[&str] = &[
        "Internal", "Private", "Obsolete", "External", "Unstable", "Evolving", "Stable", "Standard",
    ];
    const CLASS: &[&str] = &["Unknown", "CPU", "Platform", "Group", "ISA", "Common"];
    let parts: Vec<&str> = s.split('/').collect();
    if parts.len() != 3 {
        return false;
    }
    let ok = |p: &str, set: &[&str]| p.is_empty() || set.iter().any(|n| n.eq_ignore_ascii_case(p));
    ok(parts[0], STABILITY) && ok(parts[1], STABILITY) && ok(parts[2], CLASS)
}
