//! Allocations on the calling thread per reported event (its own binary: it installs a counting
//! global allocator).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocs;

#[test]
fn an_event_with_a_static_label_and_four_key_values_allocates_nothing() {
    static REPORTS: AtomicU64 = AtomicU64::new(0);
    static LAST_I: AtomicU64 = AtomicU64::new(u64::MAX);
    let sink = causal::Sink::Callback(Arc::new(|r: &causal::Report| {
        if r.label.as_deref() == Some("op") {
            REPORTS.fetch_add(1, Ordering::Relaxed);
            if let Some(i) = r.field("i").and_then(|v| v.parse().ok()) {
                LAST_I.store(i, Ordering::Relaxed);
            }
        }
    }));
    causal::reporter::init(causal::Config {
        sink,
        queue_capacity: 4096,
        ..causal::Config::default()
    })
    .unwrap();
    let _ctx = causal::start_task("event allocations", []);
    // First use on this thread: the tid is looked up and the thread registered (that allocates).
    causal::report("warm up", []);
    let before = allocs();
    for i in 0..1000u64 {
        causal::report(
            "op",
            [
                ("i", causal::Value::U64(i)),
                ("kind", causal::Value::from("bench")),
                ("neg", causal::Value::I64(-(i as i64))),
                ("ok", causal::Value::Bool(i % 2 == 0)),
            ],
        );
        causal::event("op")
            .kv("j", i)
            .kv("kind", "builder")
            .report();
    }
    let n = allocs() - before;
    assert_eq!(n, 0, "{n} allocations for 2000 events");
    // An unsampled task's events allocate nothing either, and report nothing.
    let unsampled = causal::Context::new_task(false).attach();
    let before = allocs();
    for i in 0..1000u64 {
        assert_eq!(causal::report("op", [("i", causal::Value::U64(i))]), None);
    }
    assert_eq!(allocs() - before, 0);
    drop(unsampled);
    assert!(causal::flush(Duration::from_secs(30)));
    assert_eq!(causal::dropped(), 0);
    // The events were real: every one reached the sink, the last with its key/value.
    assert_eq!(REPORTS.load(Ordering::Relaxed), 2000);
    assert_eq!(LAST_I.load(Ordering::Relaxed), 999);
}
