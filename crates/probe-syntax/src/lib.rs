//! D language front end: lexer, recursive-descent/Pratt parser, AST with spans, diagnostics (pure, no system calls).
#![deny(missing_docs)]
