//! D language front end: lexer, recursive-descent/Pratt parser, AST with spans, diagnostics (pure, no
//! system calls).
//!
//! Main types: [`SourceMap`]/[`SourceFile`] (the script text, spans are global byte offsets into it),
//! [`ast::Program`] (what the parser builds), [`Diagnostic`] (a located error with a hint, rendered
//! `file:line:col: error[D_TAG]: message` plus the source line and a caret). The language is D as in the
//! DTrace guide; `docs/d-reference.md` describes what is implemented.
#![deny(missing_docs)]

pub mod ast;
pub mod diag;
pub mod dump;
pub mod errtag;
pub mod lexer;
pub mod parser;
pub mod source;

pub use diag::{Diagnostic, Label, Severity, render_all};
pub use errtag::ErrTag;
pub use parser::parse;
pub use source::{FileId, SourceFile, SourceMap, Span};
