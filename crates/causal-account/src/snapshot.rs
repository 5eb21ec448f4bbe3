//! What each thread of a running process works for, read from the causal library's slot
//! registry (`causal::publish`, exported as `SIGHTLINE_CAUSAL_THREADS`) through `/proc/PID/mem`:
//! the state of threads that published before the accounting program was attached.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt as _;

use causal::publish::{self, SLOT_SIZE, ThreadState};
use probe_user::elf::ElfFile;
use probe_user::maps::ProcessMaps;

use crate::AccountError;

/// Most slots walked in one process (a bound on a corrupt or hostile list).
pub const MAX_SLOTS: usize = 1 << 16;

/// The published state of every live thread of `pid`, by tid. A process that does not link the
/// causal library (no registry symbol in its executable) has none: an empty map.
///
/// # Errors
/// [`AccountError::Process`] when the process's maps, executable or memory cannot be read.
pub fn read(pid: u32) -> Result<BTreeMap<u32, ThreadState>, AccountError> {
    let err = |what: &str, e: &dyn std::fmt::Display| AccountError::Process {
        pid,
        what: format!("{what}: {e}"),
    };
    let maps = ProcessMaps::read(pid).map_err(|e| err("reading its maps", &e))?;
    let elf = ElfFile::open(&maps.exe).map_err(|e| err("reading its executable", &e))?;
    let Some(sym) = elf.symbol_addr(publish::REGISTRY_SYMBOL) else {
        return Ok(BTreeMap::new());
    };
    let Some(module) = maps.module(&maps.exe, &elf) else {
        return Ok(BTreeMap::new());
    };
    let mem = std::fs::File::open(format!("/proc/{pid}/mem"))
        .map_err(|e| err("opening its memory", &e))?;
    let mut reg = [0u8; 24];
    mem.read_exact_at(&mut reg, module.abs(sym).0)
        .map_err(|e| err("reading the slot registry", &e))?;
    let Some(mut p) = publish::decode_registry(&reg) else {
        return Err(err(
            "reading the slot registry",
            &"unknown magic, version or slot size (another causal library version?)",
        ));
    };
    let live: std::collections::BTreeSet<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|e| err("listing its threads", &e))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let mut out = BTreeMap::new();
    let mut walked = 0;
    while p != 0 && walked < MAX_SLOTS {
        walked += 1;
        let mut b = [0u8; SLOT_SIZE];
        let mut decoded = None;
        // The owner may be writing: retry a few times on an odd sequence number.
        for _ in 0..8 {
            mem.read_exact_at(&mut b, p)
                .map_err(|e| err("reading a thread slot", &e))?;
            decoded = publish::decode_slot(&b);
            if decoded.is_some() {
                break;
            }
        }
        let Some((st, next)) = decoded else {
            break;
        };
        if st.tid != 0 && live.contains(&st.tid) {
            out.insert(st.tid, st);
        }
        p = next;
    }
    Ok(out)
}
