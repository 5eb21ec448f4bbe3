//! User-space probe sites: ELF symbols, instruction boundaries, USDT (stapsdt) notes and argument specs, semaphores.
#![deny(missing_docs)]
