//! D semantic analysis: name resolution, types, probe-description matching, checks (pure).
#![deny(missing_docs)]
