//! User-space symbolization for `ustack()`, `usym()`, `ufunc()`, `umod()` and `uaddr()`, printed
//! the way DTrace prints them (DTrace guide, "Actions and Subroutines": `ustack`, `usym`, `uaddr`):
//!
//! | call | output |
//! |---|---|
//! | `uaddr` / a `ustack` frame | ``libc.so.6`malloc+0x12``, ``a.out`main`` at offset 0, ``libc.so.6`0x7f..`` without a symbol, `0x7ffd..` outside any file |
//! | `usym` / `ufunc` | ``libc.so.6`malloc`` |
//! | `umod` | `libc.so.6` |
//!
//! Addresses are resolved lazily, when printed, and cached per (pid, address). A process's
//! mappings are read the first time one of its addresses is resolved (or earlier, by
//! [`Symbolizer::remember`], so that addresses of a process that has exited by the time the
//! aggregations print still resolve) and re-read when an address falls outside them. Symbol names
//! come from each file's `.symtab`/`.dynsym` through blazesym (reading files, not the process, so
//! this works after the process exits), demangled.

use std::collections::HashMap;
use std::path::PathBuf;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized};

use crate::AbsAddr;
use crate::maps::ProcessMaps;

/// A resolved user-space address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSymbol {
    /// The address.
    pub addr: AbsAddr,
    /// Basename of the mapped file, or `None` for anonymous memory (JIT code, stack).
    pub module: Option<String>,
    /// The function (demangled), if the file's symbol tables cover the address.
    pub function: Option<String>,
    /// Bytes from the function's start.
    pub offset: u64,
}

impl UserSymbol {
    /// DTrace's `uaddr` / stack-frame form: ``module`function+0xoff`` (no `+0x0`),
    /// ``module`0xADDR`` or `0xADDR`.
    pub fn frame(&self) -> String {
        match (&self.module, &self.function) {
            (Some(m), Some(f)) if self.offset == 0 => format!("{m}`{f}"),
            (Some(m), Some(f)) => format!("{m}`{f}+{:#x}", self.offset),
            (Some(m), None) => format!("{m}`{:#x}", self.addr.0),
            (None, _) => format!("{:#x}", self.addr.0),
        }
    }

    /// DTrace's `usym` / `ufunc` form: ``module`function`` (or the `frame()` form without a name).
    pub fn sym(&self) -> String {
        match (&self.module, &self.function) {
            (Some(m), Some(f)) => format!("{m}`{f}"),
            _ => self.frame(),
        }
    }

    /// DTrace's `umod` form: the module's basename, or the address in hex.
    pub fn module_name(&self) -> String {
        self.module
            .clone()
            .unwrap_or_else(|| format!("{:#x}", self.addr.0))
    }
}

/// Resolves user addresses of any number of processes, caching maps and results.
pub struct Symbolizer {
    inner: blazesym::symbolize::Symbolizer,
    maps: HashMap<u32, ProcessMaps>,
    cache: HashMap<(u32, u64), UserSymbol>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("processes", &self.maps.len())
            .field("cached", &self.cache.len())
            .finish()
    }
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbolizer {
    /// An empty symbolizer (nothing is read until an address is resolved).
    pub fn new() -> Self {
        let inner = blazesym::symbolize::Symbolizer::builder()
            .enable_code_info(false)
            .enable_inlined_fns(false)
            .enable_demangling(true)
            .build();
        Symbolizer {
            inner,
            maps: HashMap::new(),
            cache: HashMap::new(),
        }
    }

    /// Reads and keeps `pid`'s mappings now, so its addresses resolve after it exits. Returns false
    /// when the process cannot be read.
    pub fn remember(&mut self, pid: u32) -> bool {
        match ProcessMaps::read(pid) {
            Ok(m) => {
                self.maps.insert(pid, m);
                true
            }
            Err(_) => false,
        }
    }

    /// Uses `maps` as the mappings of its process from now on (a snapshot taken elsewhere, for
    /// example by a thread that watches a short-lived process). Cached results stay.
    pub fn set_maps(&mut self, maps: ProcessMaps) {
        self.maps.insert(maps.pid, maps);
    }

    /// Resolves `addr` in process `pid`. Never fails: what cannot be resolved is shown as an
    /// address, as DTrace does.
    pub fn resolve(&mut self, pid: u32, addr: AbsAddr) -> UserSymbol {
        if let Some(s) = self.cache.get(&(pid, addr.0)) {
            return s.clone();
        }
        let covered = self
            .maps
            .get(&pid)
            .is_some_and(|m| m.mapping_at(addr).is_some());
        if !covered {
            // New process, or a library loaded since the snapshot: refresh if it still runs.
            self.remember(pid);
        }
        let mut sym = UserSymbol {
            addr,
            module: None,
            function: None,
            offset: 0,
        };
        if let Some(m) = self
            .maps
            .get(&pid)
            .and_then(|m| m.mapping_at(addr))
            .filter(|m| m.is_file())
        {
            let path = PathBuf::from(&m.path);
            sym.module = path
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_string);
            let off = m.file_offset_of(addr).0;
            let mut src = Elf::new(path);
            src.debug_syms = false;
            if let Ok(mut v) = self
                .inner
                .symbolize(&Source::Elf(src), Input::FileOffset(&[off]))
                && let Some(Symbolized::Sym(s)) = v.pop()
            {
                sym.function = Some(s.name.to_string());
                sym.offset = s.offset as u64;
            }
        }
        self.cache.insert((pid, addr.0), sym.clone());
        sym
    }

    /// Resolves a user stack (innermost frame first) to DTrace's frame strings.
    pub fn stack(&mut self, pid: u32, frames: &[u64]) -> Vec<String> {
        frames
            .iter()
            .map(|&a| self.resolve(pid, AbsAddr(a)).frame())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_dtrace() {
        let s = UserSymbol {
            addr: AbsAddr(0x7f00),
            module: Some("libc.so.6".into()),
            function: Some("malloc".into()),
            offset: 0x12,
        };
        assert_eq!(s.frame(), "libc.so.6`malloc+0x12");
        assert_eq!(s.sym(), "libc.so.6`malloc");
        assert_eq!(s.module_name(), "libc.so.6");
        let at0 = UserSymbol {
            offset: 0,
            ..s.clone()
        };
        assert_eq!(at0.frame(), "libc.so.6`malloc");
        let nosym = UserSymbol {
            function: None,
            ..s.clone()
        };
        assert_eq!(nosym.frame(), "libc.so.6`0x7f00");
        let anon = UserSymbol {
            module: None,
            function: None,
            ..s
        };
        assert_eq!(anon.frame(), "0x7f00");
        assert_eq!(anon.module_name(), "0x7f00");
    }
}
