//! USDT probes fired by every reported event, so `sightline probe` (or bpftrace) can aggregate by
//! task, through the workspace's `sightline-usdt` crate.
//!
//! Provider `causal`, probe `event(task: u64, op: u64, label: &str)`:
//! - `task`: the TaskId's first 8 bytes, big-endian (the whole id for the usual 8-byte TaskIds; a
//!   4-byte TaskId is zero-extended; 12- and 20-byte TaskIds are cut to their first 8 bytes);
//! - `op`: the event's OpId;
//! - `label`: the event's label (copied only while the probe is enabled).
//!
//! Probes `context(task: u64, activity_key: u64, activity: &str, baggage: &str)` and
//! `thread(tid: u32, slot: u64)` publish what each thread works for (`crate::publish`,
//! docs/causal-accounting.md).
//!
//! While no tracer enables the probe, firing costs one 16-bit load and a not-taken branch.
//!
//! ```text
//! bpftrace -e 'usdt:./frontend:causal:event { @[arg0] = count(); }'
//! ```

use crate::metadata::{OpId, TaskId};

usdt::provider! {
    /// Probes of the causal tracing library.
    pub mod causal {
        /// One reported event: task (first 8 bytes of the TaskId), event id (OpId), label.
        fn event(task: u64, op: u64, label: &str);
        /// The task, activity or baggage this thread works with changed: task (first 8 bytes
        /// of the TaskId, 0: none), activity key (FNV-1a 64 of the label, 0: none), activity
        /// label, published baggage (`,key=value,...,` as `crate::w3c::published_baggage`
        /// makes it; "" when none).
        fn context(task: u64, activity_key: u64, activity: &str, baggage: &str);
        /// A thread's publication slot (`causal::publish::ThreadSlot`), announced once per
        /// thread: tid, slot address.
        fn thread(tid: u32, slot: u64);
    }
}

/// The TaskId's first 8 bytes as a big-endian integer (zero-extended when shorter).
pub(crate) fn task_key(task: TaskId) -> u64 {
    let b = task.as_bytes();
    let mut k = [0u8; 8];
    if b.len() >= 8 {
        k.copy_from_slice(&b[..8]);
    } else {
        k[8 - b.len()..].copy_from_slice(b);
    }
    u64::from_be_bytes(k)
}

/// Fires `causal:event` for one event when a tracer has it enabled.
#[inline(always)]
pub(crate) fn event_fired(task: TaskId, op: OpId, label: &str) {
    usdt::probe!(causal::event, || (task_key(task), op.value(), label));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_keys() {
        assert_eq!(
            task_key(TaskId::from_u64(0x6944_B2AA_0D09_FE8A).unwrap()),
            0x6944_B2AA_0D09_FE8A
        );
        assert_eq!(
            task_key(TaskId::from_bytes(&[1, 2, 3, 4]).unwrap()),
            0x0102_0304
        );
        let long = TaskId::from_bytes(&[9; 20]).unwrap();
        assert_eq!(task_key(long), 0x0909_0909_0909_0909);
    }

    #[test]
    fn probe_is_declared() {
        assert_eq!(causal::PROVIDER, "causal");
        assert_eq!(causal::event::NAME, "event");
        assert_eq!(
            causal::event::ARGS,
            &[("task", "u64"), ("op", "u64"), ("label", "&str")]
        );
        assert!(
            !causal::event::is_enabled(),
            "no tracer attached in unit tests"
        );
    }
}
