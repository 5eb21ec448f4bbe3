//! USDT probes fired by every reported event, so `sightline probe` can aggregate by task.
//!
//! FIXME(usdt): the workspace's `sightline-usdt` crate has not landed its API yet; until it does,
//! [`event_fired`] fires nothing. Provider `causal`, probe `event(task_hi: u64, task_lo: u64,
//! op: u64, label: *const u8)` is the planned signature (docs/causal-metadata.md).

use crate::metadata::{OpId, TaskId};

/// Fires the `causal:event` probe for one event (see the module FIXME).
#[inline(always)]
pub(crate) fn event_fired(_task: TaskId, _op: OpId, _label: &str) {}
