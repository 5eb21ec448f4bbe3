//! The consumer's side of speculations (DTrace guide, "Speculative Tracing"): the records of
//! clauses that called `speculate()`, held per speculation until its `commit()` or `discard()`.
//!
//! The kernel side (probe-codegen's `lower::spec`) tags each such record with the speculation id
//! and a *token*, the speculation's state word `generation << 8 | 1` while it was active (0 when it
//! was not: the record is dropped, as DTrace silently discards it). A commit or discard carries
//! the token it retired. Because an id is free again as soon as it is retired, a record of the
//! retired generation can still arrive after the commit (it was speculated on another CPU just
//! before and submitted just after): such a record, and any buffer of an older generation, is
//! dropped. Memory is bounded: at most `nspec` generations are live, each holding at most
//! `specsize` bytes of records per CPU; a record beyond that is a speculative drop.

use std::collections::HashMap;

/// One ring-buffer record as the consumer keeps it: (record id, CPU, probe key, executed-actions
/// mask, timestamp in ns, the record's bytes).
pub(crate) type HeldRecord = (u32, u32, u64, u64, u64, Vec<u8>);

/// DTrace's default `specsize` (illumos `dtrace_specsize_default`): 32 KiB per CPU.
pub const SPECSIZE_DEFAULT: u64 = 32 << 10;

/// The records of one speculation generation, in arrival order, and their bytes per CPU.
#[derive(Debug, Default)]
struct Buffer {
    records: Vec<HeldRecord>,
    bytes: HashMap<u32, u64>,
}

/// Speculative records waiting for their commit or discard.
#[derive(Debug)]
pub(crate) struct SpecStore {
    /// Held records by (speculation id, token).
    bufs: HashMap<(u64, u64), Buffer>,
    /// Per speculation id, the newest generation retired so far.
    retired: HashMap<u64, u64>,
    /// Bytes one speculation may hold per CPU.
    specsize: u64,
    /// Records dropped for want of room, not yet reported.
    drops: u64,
}

impl SpecStore {
    /// An empty store whose speculations hold `specsize` bytes per CPU each.
    pub(crate) fn new(specsize: u64) -> SpecStore {
        SpecStore {
            bufs: HashMap::new(),
            retired: HashMap::new(),
            specsize,
            drops: 0,
        }
    }

    /// Keeps `rec`, traced speculatively into speculation `spec` with `token`; drops it when the
    /// token is 0 or retired, and counts a drop when the speculation's room on the record's CPU
    /// is used up.
    pub(crate) fn hold(&mut self, spec: u64, token: u64, rec: HeldRecord) {
        if token == 0 || self.retired.get(&spec).is_some_and(|&g| token >> 8 <= g) {
            return;
        }
        let (cpu, len) = (rec.1, rec.5.len() as u64);
        let buf = self.bufs.entry((spec, token)).or_default();
        let used = buf.bytes.entry(cpu).or_default();
        if *used + len > self.specsize {
            self.drops += 1;
            return;
        }
        *used += len;
        buf.records.push(rec);
    }

    /// Retires speculation `spec`'s generation `token` (a commit or a discard; token 0 is one that
    /// silently failed) and returns its records in arrival order (empty when none were held).
    pub(crate) fn retire(&mut self, spec: u64, token: u64) -> Vec<HeldRecord> {
        if token == 0 {
            return Vec::new();
        }
        let generation = token >> 8;
        let g = self.retired.entry(spec).or_insert(0);
        *g = (*g).max(generation);
        self.bufs
            .retain(|&(s, t), _| s != spec || t >> 8 > generation || t == token);
        self.bufs
            .remove(&(spec, token))
            .map(|b| b.records)
            .unwrap_or_default()
    }

    /// Speculative drops since the last call ("N speculative drops").
    pub(crate) fn take_drops(&mut self) -> u64 {
        std::mem::take(&mut self.drops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(cpu: u32, tag: u8, len: usize) -> HeldRecord {
        (7, cpu, 0, 1, 0, vec![tag; len])
    }

    /// Tokens as the kernel side makes them: generation << 8 | active.
    fn token(generation: u64) -> u64 {
        generation << 8 | 1
    }

    #[test]
    fn commit_returns_the_records_of_its_generation_in_order() {
        let mut s = SpecStore::new(1000);
        s.hold(1, token(0), rec(0, b'a', 10));
        s.hold(2, token(0), rec(0, b'x', 10));
        s.hold(1, token(0), rec(1, b'b', 10));
        let got: Vec<u8> = s.retire(1, token(0)).iter().map(|r| r.5[0]).collect();
        assert_eq!(got, b"ab");
        // Speculation 2 is untouched; retiring it again yields nothing.
        assert_eq!(s.retire(2, token(0)).len(), 1);
        assert!(s.retire(2, token(0)).is_empty());
    }

    #[test]
    fn token_zero_and_late_records_of_a_retired_generation_are_dropped() {
        let mut s = SpecStore::new(1000);
        s.hold(1, 0, rec(0, b'z', 10));
        assert!(s.retire(1, 0).is_empty());
        s.hold(1, token(3), rec(0, b'a', 10));
        assert_eq!(s.retire(1, token(3)).len(), 1);
        // Arrives after its commit (lost the race): dropped, and not counted as a drop.
        s.hold(1, token(3), rec(1, b'l', 10));
        assert!(s.retire(1, token(3)).is_empty());
        // The id's next generation is held normally.
        s.hold(1, token(4), rec(0, b'n', 10));
        assert_eq!(s.retire(1, token(4)).len(), 1);
        assert_eq!(s.take_drops(), 0);
    }

    #[test]
    fn retiring_a_generation_frees_older_ones_of_the_same_id() {
        let mut s = SpecStore::new(1000);
        s.hold(1, token(1), rec(0, b'o', 10));
        s.hold(1, token(2), rec(0, b'n', 10));
        s.hold(2, token(1), rec(0, b'k', 10));
        assert_eq!(s.retire(1, token(2)).len(), 1);
        assert!(
            s.retire(1, token(1)).is_empty(),
            "older generation of id 1 kept"
        );
        assert_eq!(
            s.retire(2, token(1)).len(),
            1,
            "another id's buffer was dropped"
        );
    }

    #[test]
    fn specsize_bounds_each_cpu_and_counts_drops() {
        let mut s = SpecStore::new(100);
        for _ in 0..3 {
            s.hold(1, token(0), rec(0, b'c', 40)); // CPU 0: 40, 80, then 120 > 100
        }
        s.hold(1, token(0), rec(1, b'd', 100)); // CPU 1 has its own 100 bytes
        s.hold(1, token(0), rec(1, b'e', 1));
        assert_eq!(s.take_drops(), 2);
        assert_eq!(s.take_drops(), 0, "drops are reported once");
        let got: Vec<u8> = s.retire(1, token(0)).iter().map(|r| r.5[0]).collect();
        assert_eq!(got, b"ccd");
    }
}
