//! Scribe-style record and replay: recorder, recording format, replayer, divergence detection, go-live.
#![deny(missing_docs)]
