//! Each reporting thread's own queue to the reporter (its own binary: it starts the reporter with
//! a callback sink): every thread's events arrive in that thread's order, the counters add up
//! after the threads exit (their queues are freed), and an event reported in a thread-local
//! destructor after the thread's queue is gone still arrives (through the shared queue).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use causal::{Context, Report};

const THREADS: u64 = 4;
const PER_THREAD: u64 = 3000;

/// Reports one event through its context when dropped (a thread-local's destructor).
struct ReportOnDrop(Option<Context>);

impl Drop for ReportOnDrop {
    fn drop(&mut self) {
        if let Some(ctx) = &mut self.0 {
            ctx.report("from destructor", []);
        }
    }
}

thread_local! {
    static ON_EXIT: RefCell<ReportOnDrop> = const { RefCell::new(ReportOnDrop(None)) };
}

#[test]
fn thread_queues_keep_each_threads_order_and_lose_nothing_at_thread_exit() {
    let seen: Arc<Mutex<Vec<Report>>> = Arc::default();
    let sink_seen = seen.clone();
    causal::reporter::init(causal::Config {
        sink: causal::Sink::Callback(Arc::new(move |r: &Report| {
            sink_seen.lock().unwrap().push(r.clone());
        })),
        queue_capacity: 4096,
        flush_interval: Duration::from_millis(2),
        ..causal::Config::default()
    })
    .unwrap();
    let mut tasks = Vec::new();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                // Registered before the thread's first event, so its destructor runs after the
                // thread's queue was destroyed (thread-local destructors run last-registered
                // first).
                ON_EXIT.with(|_| {});
                let ctx = causal::start_task("thread", [("t", t.into())]);
                for i in 0..PER_THREAD {
                    // Compact events, and kinds that take the thread's ring of full events
                    // (three key/values; an owned string second or first), interleaved.
                    match i % 4 {
                        0 => causal::report("op", [("i", i.into())]),
                        1 => causal::report(
                            "op",
                            [("i", i.into()), ("a", 1u8.into()), ("b", "b".into())],
                        ),
                        2 => causal::report("op", [("i", i.into()), ("s", format!("s{i}").into())]),
                        _ => causal::report("op", [("s", format!("s{i}").into()), ("i", i.into())]),
                    };
                    if i % 500 == 0 {
                        // Let the reporter drain meanwhile: the queue holds 4096 events.
                        std::thread::yield_now();
                    }
                }
                let last = causal::current().unwrap();
                ON_EXIT.with(|d| d.borrow_mut().0 = Some(last.clone()));
                (ctx.task_id(), last.parents().to_vec())
            })
        })
        .collect();
    for h in handles {
        tasks.push(h.join().unwrap());
    }
    assert!(causal::flush(Duration::from_secs(30)));
    let s = causal::stats();
    let per_thread = PER_THREAD + 2;
    assert_eq!(s.dropped(), 0, "{s:?}");
    assert_eq!(s.queued, THREADS * per_thread, "{s:?}");
    assert_eq!(s.sent, THREADS * per_thread, "{s:?}");
    let seen = seen.lock().unwrap();
    let mut by_task: HashMap<_, Vec<&Report>> = HashMap::new();
    for r in seen.iter() {
        by_task.entry(r.metadata.task_id()).or_default().push(r);
    }
    assert_eq!(by_task.len() as u64, THREADS);
    for (task, last_parents) in &tasks {
        let reports = &by_task[task];
        assert_eq!(reports.len() as u64, per_thread, "task {task}");
        // The task's first event from its own queue; the destructor's event comes through the
        // shared queue and may be drained before it (it did under load).
        let own: Vec<&&Report> = reports
            .iter()
            .filter(|r| r.label.as_deref() != Some("from destructor"))
            .collect();
        assert_eq!(own[0].label.as_deref(), Some("thread"));
        assert!(own[0].thread_id.is_some_and(|t| t > 0), "{:?}", own[0]);
        // The thread's own events in the order it reported them, each following the one
        // before.
        let ops: Vec<_> = reports
            .iter()
            .filter(|r| r.label.as_deref() == Some("op"))
            .collect();
        assert_eq!(ops.len() as u64, PER_THREAD);
        for (i, r) in ops.iter().enumerate() {
            assert_eq!(r.field("i"), Some(i.to_string().as_str()));
            let want: &[(&str, String)] = match i % 4 {
                0 => &[("i", i.to_string())],
                1 => &[("i", i.to_string()), ("a", "1".into()), ("b", "b".into())],
                2 => &[("i", i.to_string()), ("s", format!("s{i}"))],
                _ => &[("s", format!("s{i}")), ("i", i.to_string())],
            };
            let got: Vec<(&str, String)> = r
                .fields
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect();
            assert_eq!(got, want, "event {i} of task {task}");
            // Compact events take the thread id from their ring, full ones carry it.
            assert_eq!(r.thread_id, own[0].thread_id, "event {i} of task {task}");
        }
        for pair in ops.windows(2) {
            assert_eq!(pair[1].edges, [pair[0].metadata.op_id()]);
        }
        assert_eq!(last_parents, &[ops.last().unwrap().metadata.op_id()]);
        // The destructor's event arrived (through the shared queue, so not necessarily after
        // the thread's own events), following the thread's last event.
        let ends: Vec<_> = reports
            .iter()
            .filter(|r| r.label.as_deref() == Some("from destructor"))
            .collect();
        assert_eq!(ends.len(), 1, "task {task}");
        assert_eq!(&ends[0].edges, last_parents);
    }
}
