//! Allocations on the calling thread per `tracing` span through `CausalLayer` (its own binary:
//! it installs a counting global allocator).

use tracing_subscriber::layer::SubscriberExt as _;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocs;

#[test]
fn span_with_integer_and_bool_fields_allocates_only_its_state() {
    static ENTERS: std::sync::Mutex<Vec<Vec<(String, String)>>> = std::sync::Mutex::new(Vec::new());
    let sink = causal::Sink::Callback(std::sync::Arc::new(|r: &causal::Report| {
        if r.field("span") == Some("enter") {
            ENTERS.lock().unwrap().push(r.fields.clone());
        }
    }));
    causal::reporter::init(causal::Config {
        sink,
        ..causal::Config::default()
    })
    .unwrap();
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::registry().with(causal::layer::CausalLayer::new()),
    );
    let _ctx = causal::start_task("layer allocations", []);
    let queued_before = causal::stats().queued;
    tracing::dispatcher::with_default(&dispatch, || {
        let span = |i: u64| {
            let span = tracing::info_span!("op", i, ok = true, delta = -(i as i64));
            let _g = span.enter();
        };
        // Warm up the registry's slab and the thread's first-use state.
        for i in 0..100 {
            span(i);
        }
        let before = allocs();
        for i in 0..1000 {
            span(i);
        }
        let per_span = (allocs() - before) as f64 / 1000.0;
        // One Box for the span's state in the layer's table (before, in the Registry's
        // extensions; earlier also a Vec of fields and one String per field).
        assert!(per_span <= 1.0, "{per_span} allocations per span");
    });
    // The spans did report: an enter and an exit event each.
    assert_eq!(
        causal::stats().queued + causal::stats().dropped_queue_full - queued_before,
        2 * 1100
    );
    // The fields arrive formatted as before (as `Debug` formats them).
    assert!(causal::flush(std::time::Duration::from_secs(10)));
    let enters = ENTERS.lock().unwrap();
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    assert_eq!(
        enters[107],
        [
            pair("span", "enter"),
            pair("i", "7"),
            pair("ok", "true"),
            pair("delta", "-7")
        ]
    );
}
