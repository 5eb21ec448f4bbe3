//! Causal graph reconstruction, critical path, comparison and resource accounting (pure).
#![deny(missing_docs)]
