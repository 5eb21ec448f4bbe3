//! DTrace output formats: printf conversions, trace(), aggregation layouts (quantize, lquantize,
//! llquantize, ...) and strict JSON records (pure, no system calls).
#![deny(missing_docs)]
