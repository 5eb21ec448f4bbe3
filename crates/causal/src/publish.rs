//! Publication of each thread's task and activity for kernel-side accounting (issue 19; the
//! format is docs/causal-accounting.md).
//!
//! Two channels, both without a system call on the event path:
//! - the USDT probe `causal:context(task, activity_key, activity, baggage)`, fired whenever the
//!   task, the activity or the baggage a thread works with changes (attach, detach, `set_current`,
//!   `set_activity`, `set_baggage_item`); while no tracer enables it, it costs one 16-bit load and
//!   a branch (the `sightline-usdt` disabled cost);
//! - a per-thread [`ThreadSlot`] in a process-wide list whose head is the exported static
//!   `SIGHTLINE_CAUSAL_THREADS`, so that a tracer that starts later learns what every thread works
//!   for at that moment by reading the process's memory (`/proc/PID/mem` or
//!   `bpf_probe_read_user`). Each slot's address is also announced once per thread by the probe
//!   `causal:thread(tid, slot)`.
//!
//! Only sampled tasks are published (an unsampled task's reports are not stored, so there is no
//! task to charge). A slot is written only when the published pair changes; a slot is reused by a
//! later thread after its thread exits (at most one slot per live thread that ever had a context).

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::probes::causal as probe;

/// `ThreadSlot::magic`: "CSLT" little-endian.
pub const SLOT_MAGIC: u32 = u32::from_le_bytes(*b"CSLT");
/// `Registry::magic`: "SLCAUSAL" little-endian.
pub const REGISTRY_MAGIC: u64 = u64::from_le_bytes(*b"SLCAUSAL");
/// Format version of [`Registry`] and [`ThreadSlot`] (docs/causal-accounting.md). Version 2 is
/// version 1's 128-byte slot (unchanged offsets; its reserved word now holds `baggage_len`)
/// followed by 256 bytes of published baggage.
pub const FORMAT_VERSION: u32 = 2;
/// Bytes of activity label kept in a slot (longer labels are cut at a character boundary).
pub const ACTIVITY_MAX: usize = 80;
/// Bytes for published baggage in a slot (`causal::w3c::published_baggage` makes it fit: at most
/// `PUBLISHED_BAGGAGE_MAX`, 255).
pub const BAGGAGE_MAX: usize = 256;
/// Size of one [`ThreadSlot`] in bytes.
pub const SLOT_SIZE: usize = 384;

/// One thread's published state. Layout (little-endian, offsets in bytes): 0 `magic` u32,
/// 4 `tid` u32 (0: free), 8 `seq` u32 (odd while the owner writes), 12 `activity_len` u32,
/// 16 `task` u64 (the TaskId's first 8 bytes big-endian as in `causal:event`; 0: none),
/// 24 `activity_key` u64 (FNV-1a of the label; 0: none), 32 `next` pointer (the next slot or 0),
/// 40 `baggage_len` u32, 44 reserved u32, 48..128 the activity label (`activity_len` bytes,
/// UTF-8, no NUL), 128..384 the published baggage (`baggage_len` bytes, `,key=value,...,` as
/// `causal::w3c::published_baggage` makes it; 0: none).
///
/// A reader takes `seq`, the fields, then `seq` again, and retries when they differ or are odd.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct ThreadSlot {
    magic: u32,
    tid: AtomicU32,
    seq: AtomicU32,
    activity_len: AtomicU32,
    task: AtomicU64,
    activity_key: AtomicU64,
    next: AtomicPtr<ThreadSlot>,
    baggage_len: AtomicU32,
    reserved: u32,
    activity: [AtomicU64; ACTIVITY_MAX / 8],
    baggage: [AtomicU64; BAGGAGE_MAX / 8],
}

const _: () = assert!(std::mem::size_of::<ThreadSlot>() == SLOT_SIZE);
// Published baggage fits the slot and passes whole through a USDT string argument.
const _: () = assert!(
    crate::w3c::PUBLISHED_BAGGAGE_MAX <= BAGGAGE_MAX
        && crate::w3c::PUBLISHED_BAGGAGE_MAX <= usdt::STR_MAX
);

/// The process-wide list of slots, exported as `SIGHTLINE_CAUSAL_THREADS`. Layout: 0 `magic` u64,
/// 8 `version` u32, 12 `slot_size` u32, 16 `head` pointer (first slot or 0).
#[repr(C)]
#[derive(Debug)]
pub struct Registry {
    magic: u64,
    version: u32,
    slot_size: u32,
    head: AtomicPtr<ThreadSlot>,
}

/// The registry a tracer finds by symbol name in the executable (or shared object) that links
/// this library.
#[unsafe(no_mangle)]
#[used]
pub static SIGHTLINE_CAUSAL_THREADS: Registry = Registry {
    magic: REGISTRY_MAGIC,
    version: FORMAT_VERSION,
    slot_size: SLOT_SIZE as u32,
    head: AtomicPtr::new(std::ptr::null_mut()),
};

/// What one thread works for, as read from its slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadState {
    /// Kernel thread id.
    pub tid: u32,
    /// The TaskId's first 8 bytes, big-endian (0: no sampled task).
    pub task: u64,
    /// FNV-1a 64 of the activity label (0: none).
    pub activity_key: u64,
    /// The activity label (empty: none).
    pub activity: String,
    /// The published baggage, `,key=value,...,` (empty: none).
    pub baggage: String,
}

/// What a thread works for, as the context code hands it to the publication: the task key, the
/// activity's key and label, and the published baggage's key and text (keys 0: none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pair<'a> {
    pub(crate) task: u64,
    pub(crate) key: u64,
    pub(crate) label: &'a str,
    pub(crate) bag_key: u64,
    pub(crate) bag: &'a str,
}

/// Stores `b` (cut to `words.len() * 8` bytes) into `words`, zero-padded, stopping after the
/// word that holds its last byte; returns the stored length.
fn store_bytes(words: &[AtomicU64], b: &[u8]) -> usize {
    let n = b.len().min(words.len() * 8);
    for (i, w) in words.iter().enumerate() {
        let lo = (i * 8).min(n);
        let hi = (i * 8 + 8).min(n);
        let mut chunk = [0u8; 8];
        chunk[..hi - lo].copy_from_slice(&b[lo..hi]);
        w.store(u64::from_le_bytes(chunk), Ordering::Relaxed);
        if hi == n {
            break;
        }
    }
    n
}

/// The first `n` bytes held by `words`.
fn load_bytes(words: &[AtomicU64], n: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(words.len() * 8);
    for w in words {
        bytes.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    bytes.truncate(n.min(words.len() * 8));
    bytes
}

/// FNV-1a 64 of `label`, never 0 for a non-empty label (0 is "no activity").
pub fn activity_key(label: &str) -> u64 {
    if label.is_empty() {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}

impl ThreadSlot {
    fn new(tid: u32) -> ThreadSlot {
        ThreadSlot {
            magic: SLOT_MAGIC,
            tid: AtomicU32::new(tid),
            seq: AtomicU32::new(0),
            activity_len: AtomicU32::new(0),
            task: AtomicU64::new(0),
            activity_key: AtomicU64::new(0),
            next: AtomicPtr::new(std::ptr::null_mut()),
            baggage_len: AtomicU32::new(0),
            reserved: 0,
            activity: std::array::from_fn(|_| AtomicU64::new(0)),
            baggage: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Writes the state (owner thread only), seqlock-style. The label bytes are rewritten only
    /// when `label_changed` and the baggage bytes only when `bag_changed`; with a key of 0 their
    /// bytes are stale and their length is 0.
    fn write(&self, tid: u32, p: Pair<'_>, label_changed: bool, bag_changed: bool) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        self.tid.store(tid, Ordering::Relaxed);
        self.task.store(p.task, Ordering::Relaxed);
        self.activity_key.store(p.key, Ordering::Relaxed);
        let label = if p.key == 0 { "" } else { p.label };
        let n = if label_changed {
            store_bytes(&self.activity, label.as_bytes())
        } else {
            label.len().min(ACTIVITY_MAX)
        };
        self.activity_len.store(n as u32, Ordering::Relaxed);
        let bag = if p.bag_key == 0 { "" } else { p.bag };
        let n = if bag_changed {
            store_bytes(&self.baggage, bag.as_bytes())
        } else {
            bag.len().min(BAGGAGE_MAX)
        };
        self.baggage_len.store(n as u32, Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// A consistent snapshot (retries while the owner writes).
    fn read(&self) -> ThreadState {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            let tid = self.tid.load(Ordering::Relaxed);
            let task = self.task.load(Ordering::Relaxed);
            let activity_key = self.activity_key.load(Ordering::Relaxed);
            let label = load_bytes(
                &self.activity,
                self.activity_len.load(Ordering::Relaxed) as usize,
            );
            let bag = load_bytes(
                &self.baggage,
                self.baggage_len.load(Ordering::Relaxed) as usize,
            );
            std::sync::atomic::fence(Ordering::Acquire);
            if s1.is_multiple_of(2) && self.seq.load(Ordering::Relaxed) == s1 {
                return ThreadState {
                    tid,
                    task,
                    activity_key,
                    activity: String::from_utf8_lossy(&label).into_owned(),
                    baggage: String::from_utf8_lossy(&bag).into_owned(),
                };
            }
            std::hint::spin_loop();
        }
    }
}

/// A slot for the calling thread: a free one from the list, else a new leaked one pushed on it.
fn claim_slot(tid: u32) -> &'static ThreadSlot {
    let mut p = SIGHTLINE_CAUSAL_THREADS.head.load(Ordering::Acquire);
    // SAFETY: every pointer in the list comes from `Box::leak` below and is never freed.
    while let Some(s) = unsafe { p.as_ref() } {
        if s.tid
            .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return s;
        }
        p = s.next.load(Ordering::Acquire);
    }
    let s: &'static ThreadSlot = Box::leak(Box::new(ThreadSlot::new(tid)));
    let mut head = SIGHTLINE_CAUSAL_THREADS.head.load(Ordering::Acquire);
    loop {
        s.next.store(head, Ordering::Relaxed);
        match SIGHTLINE_CAUSAL_THREADS.head.compare_exchange_weak(
            head,
            std::ptr::from_ref(s).cast_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return s,
            Err(h) => head = h,
        }
    }
}

/// Whether changes are published (on by default). Off skips the slot write and the probe; for
/// measuring the publication's own cost side by side (bench/causal-bench.sh).
static ENABLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Turns the publication on or off process-wide (on by default). While off, slots keep their
/// last state and `causal:context` does not fire: a tracer then charges work to stale tasks, so
/// this is for measuring the publication's cost, not for production use.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// The calling thread's publication state: its slot (once claimed) and the last published
/// state.
pub(crate) struct Published {
    slot: std::cell::Cell<Option<&'static ThreadSlot>>,
    task: std::cell::Cell<u64>,
    key: std::cell::Cell<u64>,
    bag_key: std::cell::Cell<u64>,
    /// The key of the label whose bytes the slot holds (0: none written yet).
    label_key: std::cell::Cell<u64>,
    /// The key of the baggage whose bytes the slot holds (0: none written yet).
    bag_written: std::cell::Cell<u64>,
}

impl Published {
    pub(crate) const fn new() -> Published {
        Published {
            slot: std::cell::Cell::new(None),
            task: std::cell::Cell::new(0),
            key: std::cell::Cell::new(0),
            bag_key: std::cell::Cell::new(0),
            label_key: std::cell::Cell::new(0),
            bag_written: std::cell::Cell::new(0),
        }
    }

    /// Publishes `p` for the thread whose tid `tid` gives (the caller's cached tid: no system
    /// call here) when its task, activity key or baggage key differs from the last published.
    #[inline]
    pub(crate) fn update(&self, tid: impl FnOnce() -> u32, p: Pair<'_>) {
        if p.task == self.task.get() && p.key == self.key.get() && p.bag_key == self.bag_key.get() {
            return;
        }
        self.publish(tid(), p);
    }

    #[cold]
    #[inline(never)]
    fn publish(&self, tid: u32, p: Pair<'_>) {
        if !ENABLED.load(Ordering::Relaxed) {
            return;
        }
        self.task.set(p.task);
        self.key.set(p.key);
        self.bag_key.set(p.bag_key);
        let slot = match self.slot.get() {
            Some(s) => s,
            None => {
                let s = claim_slot(tid);
                self.slot.set(Some(s));
                usdt::probe!(probe::thread, || (tid, std::ptr::from_ref(s) as u64));
                s
            }
        };
        let label_changed = p.key != 0 && p.key != self.label_key.get();
        if label_changed {
            self.label_key.set(p.key);
        }
        let bag_changed = p.bag_key != 0 && p.bag_key != self.bag_written.get();
        if bag_changed {
            self.bag_written.set(p.bag_key);
        }
        slot.write(tid, p, label_changed, bag_changed);
        let bag = if p.bag_key == 0 { "" } else { p.bag };
        usdt::probe!(probe::context, || (p.task, p.key, p.label, bag));
    }

    /// The thread is exiting: its slot becomes free for a later thread.
    pub(crate) fn release(&self) {
        if let Some(s) = self.slot.take() {
            s.write(0, Pair::NONE, false, false);
            s.tid.store(0, Ordering::Release);
        }
        if self.task.get() != 0 || self.key.get() != 0 || self.bag_key.get() != 0 {
            usdt::probe!(probe::context, || (0u64, 0u64, "", ""));
        }
    }
}

impl Pair<'_> {
    /// No task, activity or baggage.
    pub(crate) const NONE: Pair<'static> = Pair {
        task: 0,
        key: 0,
        label: "",
        bag_key: 0,
        bag: "",
    };
}

/// Every slot of this process in use, newest first (the in-process reader; a tracer reads the
/// same list through the process's memory).
pub fn threads() -> Vec<ThreadState> {
    let mut out = Vec::new();
    let mut p = SIGHTLINE_CAUSAL_THREADS.head.load(Ordering::Acquire);
    // SAFETY: every pointer in the list comes from `Box::leak` in `claim_slot`, never freed.
    while let Some(s) = unsafe { p.as_ref() } {
        let st = s.read();
        if st.tid != 0 {
            out.push(st);
        }
        p = s.next.load(Ordering::Acquire);
    }
    out
}

/// Decodes one slot from its [`SLOT_SIZE`] bytes as read from another process's memory; `None`
/// when the magic is wrong or the owner was writing (odd `seq`). Returns the state and the
/// address of the next slot (0 at the end).
pub fn decode_slot(b: &[u8; SLOT_SIZE]) -> Option<(ThreadState, u64)> {
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    if u32_at(0) != SLOT_MAGIC || !u32_at(8).is_multiple_of(2) {
        return None;
    }
    let n = (u32_at(12) as usize).min(ACTIVITY_MAX);
    let nb = (u32_at(40) as usize).min(BAGGAGE_MAX);
    Some((
        ThreadState {
            tid: u32_at(4),
            task: u64_at(16),
            activity_key: u64_at(24),
            activity: String::from_utf8_lossy(&b[48..48 + n]).into_owned(),
            baggage: String::from_utf8_lossy(&b[128..128 + nb]).into_owned(),
        },
        u64_at(32),
    ))
}

/// Decodes the registry's 24 bytes: the first slot's address, or `None` when the magic, version
/// or slot size do not match this library's.
pub fn decode_registry(b: &[u8; 24]) -> Option<u64> {
    let magic = u64::from_le_bytes(b[0..8].try_into().expect("8 bytes"));
    let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
    let size = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
    (magic == REGISTRY_MAGIC && version == FORMAT_VERSION && size as usize == SLOT_SIZE)
        .then(|| u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")))
}

/// The symbol under which the registry is exported.
pub const REGISTRY_SYMBOL: &str = "SIGHTLINE_CAUSAL_THREADS";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(activity_key(""), 0);
        // FNV-1a 64 of "a" (the published test vector).
        assert_eq!(activity_key("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(activity_key("backend a"), activity_key("backend b"));
    }

    #[test]
    fn slot_round_trip_through_bytes() {
        let s = ThreadSlot::new(77);
        let pair = |task, label: &'static str, bag: &'static str| Pair {
            task,
            key: activity_key(label),
            label,
            bag_key: activity_key(bag),
            bag,
        };
        s.write(
            77,
            pair(0x1122, "render page", ",client=alice,"),
            true,
            true,
        );
        // SAFETY: `ThreadSlot` is `repr(C)` of SLOT_SIZE bytes of plain integers (atomics have
        // the layout of their integer), so viewing it as bytes is a valid read.
        let bytes: &[u8; SLOT_SIZE] = unsafe { &*std::ptr::from_ref(&s).cast() };
        let (st, next) = decode_slot(bytes).expect("valid slot");
        assert_eq!(next, 0);
        assert_eq!(st, s.read());
        assert_eq!(st.tid, 77);
        assert_eq!(st.task, 0x1122);
        assert_eq!(st.activity, "render page");
        assert_eq!(st.baggage, ",client=alice,");
        // Version 1's offsets are kept: the label at 48, its length at 12; the baggage at 128.
        assert_eq!(&bytes[48..59], b"render page");
        assert_eq!(u32::from_le_bytes(bytes[40..44].try_into().unwrap()), 14);
        assert_eq!(&bytes[128..142], b",client=alice,");
        // A longer label is cut to ACTIVITY_MAX bytes; a shorter one after it leaves no tail.
        let long: &'static str = "x".repeat(200).leak();
        s.write(77, pair(1, long, ""), true, false);
        assert_eq!(s.read().activity.len(), ACTIVITY_MAX);
        assert_eq!(s.read().baggage, "", "no baggage: length 0");
        s.write(77, pair(1, "ab", ",k=v,"), true, true);
        assert_eq!(s.read().activity, "ab");
        assert_eq!(s.read().baggage, ",k=v,");
        s.write(77, Pair::NONE, false, false);
        assert_eq!(s.read().activity, "", "no activity: length 0");
        s.write(77, pair(1, "ab", ",k=v,"), false, false);
        assert_eq!(s.read().activity, "ab", "the kept bytes are shown again");
        assert_eq!(s.read().baggage, ",k=v,");
    }

    #[test]
    fn registry_bytes() {
        // SAFETY: `Registry` is `repr(C)`: u64, u32, u32, pointer = 24 bytes of integers.
        let bytes: &[u8; 24] = unsafe { &*std::ptr::from_ref(&SIGHTLINE_CAUSAL_THREADS).cast() };
        let head = decode_registry(bytes).expect("valid registry");
        assert_eq!(
            head,
            SIGHTLINE_CAUSAL_THREADS.head.load(Ordering::Acquire) as u64
        );
        let mut bad = *bytes;
        bad[0] ^= 1;
        assert_eq!(decode_registry(&bad), None);
    }
}
