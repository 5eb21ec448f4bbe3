//! User-space probe sites for `sightline probe`: the pid provider (uprobes on functions and
//! instructions), USDT probes (`.note.stapsdt`), their semaphores, uprobe attach, and user-space
//! symbolization.
//!
//! The pieces, in pipeline order:
//!
//! - [`elf::ElfFile`]: functions from `.symtab` and `.dynsym`, `PT_LOAD` segments, virtual address →
//!   file offset (uprobes are placed at file offsets).
//! - [`glob`]: DTrace's `gmatch` patterns for module and function fields.
//! - [`maps::ProcessMaps`]: `/proc/PID/maps`, module resolution (`a.out`, `libc.so.6`, paths) and
//!   load biases.
//! - [`disasm::FunctionCode`]: every instruction boundary and return site of a function, decoded by
//!   iced-x86 and checked, so no probe lands inside an instruction.
//! - [`usdt::UsdtProbe`] and [`argspec::ArgSpec`]: SystemTap v3 notes with their typed argument
//!   locations.
//! - [`semaphore`]: USDT semaphores through `/proc/PID/mem` with a restore guard and a crash record.
//! - [`uprobe`]: uprobe_multi links and perf-event uprobes for a loaded BPF program, over
//!   probe-sys (the kernel chokepoint).
//! - [`symbolize::Symbolizer`]: addresses → `module`function+0xoff`, lazily and cached.
//! - [`loader`]: the files a command will map (executable, loader, `DT_NEEDED` closure), for
//!   attaching before it runs.
//! - [`list`]: pid-provider sites and the data behind `sightline probe -l`.
//! - [`provider::PidProvider`], [`provider::UsdtProvider`]: the pid and USDT providers (probe-sema
//!   `Provider`s) over [`provider::UserSites`].
//! - [`entry`]: a rendezvous at a held command's entry point (semaphores, mappings for symbols).
//! - [`attach::UserAttachment`]: attaching a loaded program to a catalog probe, semaphores included.
//! - [`held::HeldCommand`]: the `-c` command, created held before its exec, then released or
//!   killed (never run) when tracing is given up.
//!
//! Addresses have their own types: [`VirtAddr`] (link-time, as in symbol tables), [`FileOffset`]
//! (where the kernel places uprobes) and [`AbsAddr`] (an address in a running process).
#![deny(missing_docs)]

pub use probe_sema::argspec;
pub mod attach;
pub mod disasm;
pub mod elf;
pub mod entry;
pub mod glob;
pub mod held;
pub mod list;
pub mod loader;
pub mod maps;
pub mod provider;
pub mod semaphore;
pub mod symbolize;
pub mod uprobe;
pub mod usdt;

use std::fmt;

pub use probe_sema::argspec::VirtAddr;

/// A byte offset in a file: where the kernel places a uprobe (`uprobetracer.rst`) and where a
/// semaphore's reference counter lives (`ref_ctr_offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileOffset(pub u64);

/// An address in a running process (link-time address plus the module's load bias).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct AbsAddr(pub u64);

macro_rules! hex_display {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    )*};
}
hex_display!(FileOffset, AbsAddr);
