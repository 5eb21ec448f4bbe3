//! Rendezvous points: the partial order of recorded processes' interactions through shared kernel
//! objects (Scribe, §3.3).
//!
//! Each shared object has an id ([`fd_object`], [`process_object`]); every recorded event that
//! touches it gets the next sequence number of that object ([`Counters::next`]). On replay an event
//! waits until all earlier events on each of its objects have been replayed ([`Progress`]). Objects:
//!
//! - pipes, FIFOs, sockets and character devices (ttys, `/dev/null`), identified by device and inode;
//! - Sightline's own stdout and stderr, whatever they are, so that the program's output interleaves
//!   on replay exactly as it did;
//! - each process, for its exit and its parent's wait;
//! - each file mapped shared and writable ([`shared_file_object`]), for the mappings of it, the
//!   trapped calls on fds opened to it (locks, reads, writes, truncation) and the ends (exit,
//!   `execve`) of the processes that had it mapped: a process that maps or changes the file after
//!   another stopped using it does so on replay after that use, so the bytes it starts from are
//!   the recorded ones whatever the other processes' pace.
//!
//! Regular files and directories are not rendezvous objects: their reads are replayed from the
//! recording, so the order of other processes' writes cannot change what a replayed read returns.

use std::collections::HashMap;

use crate::format::Rendezvous;

/// The id of an fd-reachable object (`st_dev`, `st_ino`).
pub fn fd_object(dev: u64, ino: u64) -> u64 {
    mix(1, dev.rotate_left(32) ^ ino)
}

/// The id of a process, by recorded pid.
pub fn process_object(pid: i32) -> u64 {
    mix(2, pid as u32 as u64)
}

/// The id of a file mapped shared and writable, by its number in the recording
/// ([`crate::files::SharedMapping::file`]).
pub fn shared_file_object(file: u32) -> u64 {
    mix(3, u64::from(file))
}

fn mix(tag: u64, v: u64) -> u64 {
    // splitmix64 finaliser over a tagged value: distinct tags give distinct id spaces.
    let mut z = v ^ tag.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Record side: the next sequence number of each object.
#[derive(Debug, Default)]
pub struct Counters {
    next: HashMap<u64, u64>,
}

impl Counters {
    /// Takes the next position of `obj`.
    pub fn next(&mut self, obj: u64) -> Rendezvous {
        let n = self.next.entry(obj).or_insert(0);
        let r = Rendezvous { obj, seq: *n };
        *n += 1;
        r
    }
}

/// Replay side: how many events of each object have been replayed.
///
/// An event waits for the recorded events of its objects that come before it, by rank among the
/// positions the recording holds: a position the recorder gave out to an event it never recorded
/// (a write-family call takes its position at entry, and its thread may be killed before the
/// exit) leaves a gap that nothing waits for.
#[derive(Debug, Default)]
pub struct Progress {
    done: HashMap<u64, u64>,
    /// Each object's recorded positions, sorted.
    recorded: HashMap<u64, Vec<u64>>,
}

impl Progress {
    /// Progress over a recording whose events hold the rendezvous points `all`.
    pub fn new<'a>(all: impl IntoIterator<Item = &'a Rendezvous>) -> Self {
        let mut recorded: HashMap<u64, Vec<u64>> = HashMap::new();
        for r in all {
            recorded.entry(r.obj).or_default().push(r.seq);
        }
        for v in recorded.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        Progress {
            done: HashMap::new(),
            recorded,
        }
    }

    /// How many recorded events of `r.obj` come before `r`.
    fn rank(&self, r: &Rendezvous) -> u64 {
        self.recorded
            .get(&r.obj)
            .map_or(r.seq, |v| v.partition_point(|&s| s < r.seq) as u64)
    }

    /// True when every earlier event of each object in `rdv` has been replayed.
    pub fn ready(&self, rdv: &[Rendezvous]) -> bool {
        rdv.iter()
            .all(|r| self.done.get(&r.obj).copied().unwrap_or(0) == self.rank(r))
    }

    /// The first unmet point of `rdv`, with the count replayed so far (for reports).
    pub fn first_unmet(&self, rdv: &[Rendezvous]) -> Option<(Rendezvous, u64)> {
        rdv.iter().find_map(|r| {
            let d = self.done.get(&r.obj).copied().unwrap_or(0);
            (d != self.rank(r)).then_some((*r, d))
        })
    }

    /// Marks the events of `rdv` replayed.
    pub fn complete(&mut self, rdv: &[Rendezvous]) {
        for r in rdv {
            let next = self.rank(r) + 1;
            self.done.insert(r.obj, next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_waits_for_earlier_events_of_the_same_object() {
        let mut c = Counters::default();
        let pipe = fd_object(12, 345);
        let a = c.next(pipe);
        let b = c.next(pipe);
        let other = c.next(process_object(7));
        assert_eq!((a.seq, b.seq, other.seq), (0, 1, 0));
        let mut p = Progress::default();
        assert!(!p.ready(&[b]));
        assert!(p.ready(&[a, other]));
        assert_eq!(p.first_unmet(&[b]), Some((b, 0)));
        p.complete(&[a]);
        assert!(p.ready(&[b]));
        assert_ne!(fd_object(1, 2), process_object(1));
        assert_ne!(shared_file_object(1), process_object(1));
        assert_ne!(shared_file_object(0), shared_file_object(1));
    }

    #[test]
    fn a_position_never_recorded_is_not_waited_for() {
        let pipe = fd_object(12, 345);
        let at = |seq| Rendezvous { obj: pipe, seq };
        // Position 1 went to a write whose thread was killed before its exit was recorded.
        let recorded = [at(0), at(2), at(3)];
        let mut p = Progress::new(&recorded);
        assert!(p.ready(&[at(0)]));
        assert!(!p.ready(&[at(2)]), "2 still waits for 0");
        p.complete(&[at(0)]);
        assert!(p.ready(&[at(2)]), "nothing waits for the missing 1");
        assert!(!p.ready(&[at(3)]));
        p.complete(&[at(2)]);
        assert!(p.ready(&[at(3)]));
        assert_eq!(p.first_unmet(&[at(3)]), None);
    }
}
