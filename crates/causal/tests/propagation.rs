//! Events, parents and fields checked with the mock collector: the current context, explicit
//! contexts, joins, threads, futures, HTTP headers, the tracing layer, child processes, sampling.

use std::time::Duration;

use causal::propagation;
use causal::{Context, InContextExt, Metadata};
use causal_mock::{self as mock, TcpCollector, expect, expect_task};

mod common;

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn events_chain_through_the_current_context() {
    let m = mock::install();
    let wall = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let t0 = wall();
    let ctx = causal::start_task("request", [("path", "/a".into())]);
    let e1 = causal::report("parse", [("bytes", 120u32.into()), ("ok", true.into())]);
    let e2 = causal::event("respond")
        .agent("http")
        .kv("status", 200u16)
        .report();
    let t1 = wall();
    assert!(e1.is_some() && e2.is_some() && e1 != e2);
    let reports = m.wait_for(ctx.task_id(), 3, WAIT);
    expect_task()
        .event(
            expect::event()
                .label("request")
                .no_parents()
                .field("path", "/a"),
        )
        .event(
            expect::event()
                .label("parse")
                .parents(["request"])
                .field("bytes", "120")
                .field("ok", "true"),
        )
        .event(
            expect::event()
                .label("respond")
                .agent("http")
                .parents(["parse"])
                .field("status", "200"),
        )
        .only()
        .check(&reports);
    // Standard fields are filled in by the reporter.
    let r = reports
        .iter()
        .find(|r| r.label.as_deref() == Some("parse"))
        .unwrap();
    assert_eq!(
        r.process_id.as_deref(),
        Some(std::process::id().to_string().as_str())
    );
    assert!(r.thread_id.is_some_and(|t| t > 0));
    assert!(r.host.as_deref().is_some_and(|h| !h.is_empty()));
    let (ts, hrt) = (r.timestamp_ns.unwrap(), r.hrt_ns.unwrap());
    assert!(ts > 1_600_000_000_000_000_000, "wall clock in ns: {ts}");
    assert!(hrt > 0 && hrt < ts);
    assert_eq!(r.metadata.op_id(), e1.unwrap());
    // Each event's wall time (its HRT, from its stamp, plus the reporter's offset) lies between
    // clock reads before and after (slack: the offset is re-read each second), and HRTs follow
    // the events' order, compact ("request", "parse") and not ("respond", with an agent) alike.
    let slack = 5_000_000;
    for r in &reports {
        let ts = r.timestamp_ns.unwrap();
        assert!(
            ts + slack >= t0 && ts <= t1 + slack,
            "{:?}: {t0} <= {ts} <= {t1}",
            r.label
        );
    }
    let hrts: Vec<u64> = reports.iter().map(|r| r.hrt_ns.unwrap()).collect();
    assert!(hrts.windows(2).all(|w| w[0] <= w[1]), "{hrts:?}");
    causal::set_current(None);
}

#[test]
fn no_context_reports_nothing() {
    let _m = mock::install();
    causal::set_current(None);
    assert_eq!(causal::report("orphan", []), None);
    assert_eq!(causal::event("orphan").report(), None);
}

#[test]
fn threads_fan_out_and_join() {
    let m = mock::install();
    let ctx = causal::start_task("split", []);
    let handles: Vec<_> = ["left", "right", "middle"]
        .into_iter()
        .map(|name| {
            causal::thread::spawn_named(Some(format!("worker-{name}")), move || {
                causal::report(name, []);
                causal::report("done", [("who", name.into())]);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    causal::report("merge", []);
    let reports = m.wait_for(ctx.task_id(), 8, WAIT);
    expect_task()
        .event(expect::event().label("split").no_parents())
        .event(expect::event().label("left").parents(["split"]))
        .event(expect::event().label("right").parents(["split"]))
        .event(expect::event().label("middle").parents(["split"]))
        .event(
            expect::event()
                .label("done")
                .parents(["left"])
                .field("who", "left"),
        )
        .event(expect::event().label("done").parents(["right"]))
        .event(expect::event().label("done").parents(["middle"]))
        // The main thread's own path (split, then waiting) and each worker's last event.
        .event(
            expect::event()
                .label("merge")
                .parents(["split", "done", "done", "done"]),
        )
        .only()
        .check(&reports);
    let left = reports
        .iter()
        .find(|r| r.label.as_deref() == Some("left"))
        .unwrap();
    assert_eq!(left.thread_name.as_deref(), Some("worker-left"));
    causal::set_current(None);
}

#[test]
fn explicit_contexts_move_through_a_queue_and_join() {
    let m = mock::install();
    let root = causal::start_task("enqueue", []);
    let (tx, rx) = std::sync::mpsc::channel::<Context>();
    tx.send(Context::current().unwrap()).unwrap();
    let worker = std::thread::spawn(move || {
        let mut ctx = rx.recv().unwrap();
        ctx.report("dequeued", []);
        ctx.event("processed").kv("items", 2u8).report();
        ctx
    });
    causal::report("waiting", []);
    let back = worker.join().unwrap();
    causal::join_current([&back]);
    causal::report("reply", []);
    let reports = m.wait_for(root.task_id(), 5, WAIT);
    expect_task()
        .event(expect::event().label("enqueue").no_parents())
        .event(expect::event().label("dequeued").parents(["enqueue"]))
        .event(
            expect::event()
                .label("processed")
                .parents(["dequeued"])
                .field("items", "2"),
        )
        .event(expect::event().label("waiting").parents(["enqueue"]))
        .event(
            expect::event()
                .label("reply")
                .parents(["waiting", "processed"]),
        )
        .only()
        .check(&reports);
    causal::set_current(None);
}

#[test]
fn attach_guard_restores_the_previous_context() {
    let m = mock::install();
    let a = causal::start_task("task a", []);
    let b = Context::new_task(true);
    {
        let g = b.clone().attach();
        causal::report("in b", []);
        assert_eq!(g.context().unwrap().task_id(), b.task_id());
    }
    assert_eq!(causal::current().unwrap().task_id(), a.task_id());
    causal::report("back in a", []);
    let ra = m.wait_for(a.task_id(), 2, WAIT);
    expect_task()
        .event(expect::event().label("task a").no_parents())
        .event(expect::event().label("back in a").parents(["task a"]))
        .only()
        .check(&ra);
    let rb = m.reports(b.task_id());
    expect_task()
        .event(expect::event().label("in b").no_parents())
        .only()
        .check(&rb);
    causal::set_current(None);
}

#[test]
fn futures_carry_their_context_across_polls_and_threads() {
    let m = mock::install();
    let root = causal::start_task("async root", []);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ctx = Context::current().unwrap();
    causal::set_current(None);
    let (c1, c2) = rt.block_on(async move {
        let a = tokio::spawn(
            async {
                causal::report("a start", []);
                tokio::time::sleep(Duration::from_millis(5)).await;
                tokio::task::yield_now().await;
                causal::report("a end", []);
                causal::current().unwrap()
            }
            .in_context(ctx.clone()),
        );
        let b = tokio::spawn(
            async {
                causal::report("b start", []);
                tokio::time::sleep(Duration::from_millis(2)).await;
                causal::report("b end", []);
                causal::current().unwrap()
            }
            .in_context(ctx),
        );
        (a.await.unwrap(), b.await.unwrap())
    });
    let mut joined = c1.join(&c2);
    joined.report("both done", []);
    let reports = m.wait_for(root.task_id(), 6, WAIT);
    expect_task()
        .event(expect::event().label("async root").no_parents())
        .event(expect::event().label("a start").parents(["async root"]))
        .event(expect::event().label("a end").parents(["a start"]))
        .event(expect::event().label("b start").parents(["async root"]))
        .event(expect::event().label("b end").parents(["b start"]))
        .event(
            expect::event()
                .label("both done")
                .parents(["a end", "b end"]),
        )
        .only()
        .check(&reports);
}

#[test]
fn http_headers_carry_xtrace_and_traceparent_both_ways() {
    let m = mock::install();
    let ctx = causal::start_task("client call", []);
    let mut headers = http::HeaderMap::new();
    propagation::inject_current(&mut headers);
    let xt = headers.get("X-Trace").unwrap().to_str().unwrap();
    let md = Metadata::parse_text(xt).unwrap();
    assert_eq!(md.task_id(), ctx.task_id());
    assert_eq!(md.op_id(), ctx.parents()[0]);
    let tp = headers.get("traceparent").unwrap().to_str().unwrap();
    assert!(
        tp.starts_with(&format!(
            "00-0000000000000000{}-",
            ctx.task_id().to_hex().to_lowercase()
        )),
        "{tp}"
    );
    assert!(tp.ends_with("-01"));

    // The server side, on another thread: extract, report, answer with its latest context.
    let server = std::thread::spawn(move || {
        let _g = propagation::extract(&headers).unwrap().attach();
        causal::report("server handle", []);
        let mut resp = http::HeaderMap::new();
        propagation::inject_current(&mut resp);
        resp
    });
    let resp = server.join().unwrap();
    let mut cur = causal::current().unwrap();
    propagation::join_response(&mut cur, &resp);
    causal::set_current(Some(cur));
    causal::report("client got answer", []);
    let reports = m.wait_for(ctx.task_id(), 3, WAIT);
    expect_task()
        .event(expect::event().label("client call").no_parents())
        .event(
            expect::event()
                .label("server handle")
                .parents(["client call"]),
        )
        .event(
            expect::event()
                .label("client got answer")
                .parents(["client call", "server handle"]),
        )
        .only()
        .check(&reports);
    causal::set_current(None);
}

#[test]
fn traceparent_in_means_same_trace_id_out() {
    let m = mock::install();
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    headers.insert(
        "tracestate",
        "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE".parse().unwrap(),
    );
    headers.insert("baggage", "userId=alice".parse().unwrap());
    let ctx = propagation::extract(&headers).unwrap();
    assert_eq!(
        ctx.task_id().to_hex(),
        "4BF92F3577B34DA6A3CE929D0E0E473600000000"
    );
    let task = ctx.task_id();
    let g = ctx.attach();
    causal::report("handled", []);
    let mut out = http::HeaderMap::new();
    propagation::inject_current(&mut out);
    drop(g);
    let tp = out.get("traceparent").unwrap().to_str().unwrap();
    assert!(
        tp.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
        "{tp}"
    );
    assert!(
        !tp.contains("00f067aa0ba902b7"),
        "parent-id is our event now: {tp}"
    );
    assert_eq!(
        out.get("tracestate").unwrap(),
        "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    );
    assert_eq!(out.get("baggage").unwrap(), "userId=alice");
    let reports = m.wait_for(task, 1, WAIT);
    assert_eq!(reports.len(), 1);
    // The remote caller's span is the parent of our first event.
    assert_eq!(
        reports[0].edges,
        vec![causal::OpId::new(0x00f0_67aa_0ba9_02b7)]
    );
    assert!(tp.contains(&reports[0].metadata.op_id().to_hex().to_lowercase()));
}

#[test]
fn unsampled_traceparent_reports_nothing_but_propagates() {
    let _m = mock::install();
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "traceparent",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
            .parse()
            .unwrap(),
    );
    let ctx = propagation::extract(&headers).unwrap();
    assert!(!ctx.is_sampled());
    let before = causal::stats().queued;
    let g = ctx.attach();
    assert_eq!(causal::report("skipped", [("k", 1u8.into())]), None);
    let mut out = http::HeaderMap::new();
    propagation::inject_current(&mut out);
    drop(g);
    assert!(
        out.get("X-Trace").is_none(),
        "no X-Trace metadata for an unsampled task"
    );
    assert_eq!(
        out.get("traceparent").unwrap(),
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    );
    // Other tests run concurrently, so only check that this thread's event did not count: the
    // unsampled report returned None above, and queued never decreases.
    assert!(causal::stats().queued >= before);
}

#[test]
fn tracing_layer_reports_spans_and_follows_from() {
    use tracing_subscriber::prelude::*;
    let m = mock::install();
    let subscriber = tracing_subscriber::registry().with(causal::layer::CausalLayer::new());
    let task = tracing::subscriber::with_default(subscriber, || {
        let root = tracing::info_span!("handle", user = "bob");
        let _r = root.enter();
        let task = causal::current().unwrap().task_id();
        {
            let _c = tracing::info_span!("load").entered();
            tracing::info!(rows = 3, "loaded rows");
        }
        let other = tracing::info_span!("prefetch");
        other.in_scope(|| {});
        let store = tracing::info_span!("store");
        store.follows_from(&other);
        store.in_scope(|| {});
        task
    });
    let reports = m.wait_for(task, 9, WAIT);
    expect_task()
        .event(
            expect::event()
                .label("handle")
                .no_parents()
                .field("span", "enter")
                .field("user", "bob"),
        )
        .event(
            expect::event()
                .label("load")
                .parents(["handle"])
                .field("span", "enter"),
        )
        .event(
            expect::event()
                .label("loaded rows")
                .parents(["load"])
                .field("rows", "3")
                .field("level", "INFO"),
        )
        .event(
            expect::event()
                .label("load")
                .parents(["loaded rows"])
                .field("span", "exit"),
        )
        .event(
            expect::event()
                .label("prefetch")
                .parents(["load"])
                .field("span", "enter"),
        )
        .event(
            expect::event()
                .label("prefetch")
                .parents(["prefetch"])
                .field("span", "exit"),
        )
        // `store` was created after prefetch finished, from the thread's context (prefetch exit);
        // follows_from adds prefetch's last event, already its parent: one edge.
        .event(
            expect::event()
                .label("store")
                .parents(["prefetch"])
                .field("span", "enter"),
        )
        .event(
            expect::event()
                .label("store")
                .parents(["store"])
                .field("span", "exit"),
        )
        .event(
            expect::event()
                .label("handle")
                .parents(["store"])
                .field("span", "exit"),
        )
        .only()
        .check(&reports);
    causal::set_current(None);
}

#[test]
fn tracing_layer_joins_concurrent_child_spans() {
    use tracing::Instrument;
    use tracing_subscriber::prelude::*;
    let m = mock::install();
    let subscriber = tracing_subscriber::registry().with(causal::layer::CausalLayer::new());
    let task = tracing::subscriber::with_default(subscriber, || {
        let root = tracing::info_span!("fanout");
        let _r = root.enter();
        let task = causal::current().unwrap().task_id();
        let a = async { tokio::task::yield_now().await }.instrument(tracing::info_span!("a"));
        let b = async { tokio::task::yield_now().await }.instrument(tracing::info_span!("b"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async { tokio::join!(a, b) });
        task
    });
    let reports = m.wait_for(task, 10, WAIT);
    // Each child is entered once per poll (at least twice: it yields once); each entry follows its
    // own previous exit. The parent's exit follows the last exit of both children.
    expect_task()
        .event(
            expect::event()
                .label("fanout")
                .no_parents()
                .field("span", "enter"),
        )
        .event(
            expect::event()
                .label("a")
                .parents(["fanout"])
                .field("span", "enter"),
        )
        .event(
            expect::event()
                .label("b")
                .parents(["fanout"])
                .field("span", "enter"),
        )
        .event(
            expect::event()
                .label("fanout")
                .parents(["a", "b"])
                .field("span", "exit"),
        )
        .check(&reports);
    let a: Vec<_> = reports
        .iter()
        .filter(|r| r.label.as_deref() == Some("a"))
        .collect();
    assert!(
        a.len() >= 4 && a.len() % 2 == 0,
        "a: enter, exit per poll, got {}",
        a.len()
    );
    for w in a.windows(2) {
        assert_eq!(
            w[1].edges,
            vec![w[0].metadata.op_id()],
            "a's events form one chain"
        );
    }
    causal::set_current(None);
}

#[test]
fn child_process_inherits_the_context() {
    let m = mock::install();
    let collector = TcpCollector::start().unwrap();
    let ctx = causal::start_task("parent", []);
    // The `propagated` scenario of the `causal-test-child` binary, reporting over TCP.
    let mut cmd = common::child_command("propagated");
    cmd.env(
        "SIGHTLINE_CAUSAL_SINK",
        format!("tcp://{}", collector.addr()),
    )
    .env("SIGHTLINE_CAUSAL_FORMAT", "binary");
    propagation::command_with_current(&mut cmd);
    common::stdout_of(cmd);
    let child = collector.received().wait_for(ctx.task_id(), 1, WAIT);
    assert!(
        collector.bad_frames().is_empty(),
        "{:?}",
        collector.bad_frames()
    );
    let mut all = m.wait_for(ctx.task_id(), 1, WAIT);
    all.extend(child.iter().cloned());
    expect_task()
        .event(
            expect::event()
                .label("parent")
                .no_parents()
                .process_id(&std::process::id().to_string()),
        )
        .event(
            expect::event()
                .label("child work")
                .parents(["parent"])
                .field("role", "child"),
        )
        .only()
        .check(&all);
    assert_ne!(child[0].process_id, all[0].process_id);
    causal::set_current(None);
}

#[test]
fn options_travel_with_the_task() {
    let m = mock::install();
    let md = Metadata::parse_text("1D0102030405060708AABBCCDDEEFF0011087E02BEEFCE020506").unwrap();
    let g = Context::from_metadata(&md).attach();
    causal::report("with options", []);
    let mut out = http::HeaderMap::new();
    propagation::inject_current(&mut out);
    drop(g);
    let sent = Metadata::parse_text(out.get("X-Trace").unwrap().to_str().unwrap()).unwrap();
    assert_eq!(sent.options_bytes(), md.options_bytes());
    let reports = m.wait_for(md.task_id(), 1, WAIT);
    assert_eq!(reports[0].metadata.options_bytes(), md.options_bytes());
    assert_eq!(reports[0].edges, vec![md.op_id()]);
}

#[test]
fn extraction_prefers_xtrace_and_ignores_invalid_values() {
    let _m = mock::install();
    let xt = "196944B2AA0D09FE8A24E44608F9C6A944";
    let mut h = http::HeaderMap::new();
    h.insert("x-trace", xt.parse().unwrap());
    h.insert(
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    let c = propagation::extract(&h).unwrap();
    assert_eq!(
        c.task_id().to_hex(),
        "6944B2AA0D09FE8A",
        "X-Trace wins: it carries the options"
    );
    assert_eq!(c.parents(), &[causal::OpId::new(0x24E4_4608_F9C6_A944)]);
    // An invalid X-Trace falls back to the traceparent; invalid both means no context.
    h.insert(
        "x-trace",
        "19000000000000000024E44608F9C6A944".parse().unwrap(),
    );
    assert_eq!(
        propagation::extract(&h).unwrap().task_id().to_hex(),
        "4BF92F3577B34DA6A3CE929D0E0E473600000000"
    );
    h.insert(
        "traceparent",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
            .parse()
            .unwrap(),
    );
    assert!(propagation::extract(&h).is_none());
    assert!(propagation::extract(&http::HeaderMap::new()).is_none());
}

#[test]
fn detach_returns_the_context_with_its_new_events() {
    let m = mock::install();
    causal::set_current(None);
    let mut start = Context::new_task(true);
    let first = start.report("first", []).unwrap();
    let g = start.clone().attach();
    let second = causal::report("second", []).unwrap();
    let after = g.detach().unwrap();
    assert_eq!(after.parents(), &[second]);
    assert!(
        causal::current().is_none(),
        "detach restored the previous (no) context"
    );
    assert_eq!(
        start.parents(),
        &[first],
        "the attached copy moved on, not the original"
    );
    let reports = m.wait_for(start.task_id(), 2, WAIT);
    expect_task()
        .event(expect::event().label("first").no_parents())
        .event(expect::event().label("second").parents(["first"]))
        .only()
        .check(&reports);
}

#[test]
fn tracing_layer_reports_recorded_fields_with_the_next_entry() {
    use tracing_subscriber::prelude::*;
    let m = mock::install();
    let subscriber = tracing_subscriber::registry().with(causal::layer::CausalLayer::new());
    let task = tracing::subscriber::with_default(subscriber, || {
        let root = tracing::info_span!("root");
        let _r = root.enter();
        let task = causal::current().unwrap().task_id();
        // Five key/values at the first entry (past a compact event's two, past 4 inline), one
        // recorded before it; an owned string recorded between entries; none at the third.
        let s = tracing::info_span!(
            "work",
            n = 1u64,
            later = tracing::field::Empty,
            name = "x",
            flag = true,
            again = tracing::field::Empty
        );
        s.record("later", 2u64);
        s.in_scope(|| {});
        s.record("again", format!("y{}", 1).as_str());
        s.in_scope(|| {});
        s.in_scope(|| {});
        task
    });
    let reports = m.wait_for(task, 8, WAIT);
    let seen: Vec<(String, Vec<(String, String)>)> = reports
        .iter()
        .map(|r| (r.label.clone().unwrap_or_default(), r.fields.clone()))
        .collect();
    let kv = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let enter = kv(&[("span", "enter")]);
    let exit = kv(&[("span", "exit")]);
    assert_eq!(
        seen,
        [
            ("root".to_string(), enter.clone()),
            (
                "work".into(),
                kv(&[
                    ("span", "enter"),
                    ("n", "1"),
                    ("name", "x"),
                    ("flag", "true"),
                    ("later", "2")
                ])
            ),
            ("work".into(), exit.clone()),
            ("work".into(), kv(&[("span", "enter"), ("again", "y1")])),
            ("work".into(), exit.clone()),
            ("work".into(), enter.clone()),
            ("work".into(), exit.clone()),
            ("root".into(), exit.clone()),
        ]
    );
    // One chain: each event follows the one before.
    for w in reports.windows(2) {
        assert_eq!(w[1].edges, [w[0].metadata.op_id()]);
    }
    causal::set_current(None);
}

#[test]
fn tracing_layer_clones_keep_their_own_spans() {
    use tracing_subscriber::prelude::*;
    let m = mock::install();
    // Two subscribers with clones of one layer: their span ids start at the same value, and
    // each layer must keep its own subscriber's spans.
    let layer = causal::layer::CausalLayer::new();
    let a = tracing::Dispatch::new(tracing_subscriber::registry().with(layer.clone()));
    let b = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let in_a = tracing::dispatcher::with_default(&a, || tracing::info_span!("in a", n = 1u64));
    let in_b = tracing::dispatcher::with_default(&b, || tracing::info_span!("in b", n = 2u64));
    assert_eq!(in_a.id(), in_b.id(), "the same id in both registries");
    causal::set_current(None);
    let task_of = |span: &tracing::Span| {
        let _g = span.enter();
        causal::current().unwrap().task_id()
    };
    let (task_a, task_b) = (task_of(&in_a), task_of(&in_b));
    assert_ne!(task_a, task_b);
    for (task, label, n) in [(task_a, "in a", "1"), (task_b, "in b", "2")] {
        let reports = m.wait_for(task, 2, WAIT);
        expect_task()
            .event(
                expect::event()
                    .label(label)
                    .no_parents()
                    .field("span", "enter")
                    .field("n", n),
            )
            .event(
                expect::event()
                    .label(label)
                    .parents([label])
                    .field("span", "exit"),
            )
            .only()
            .check(&reports);
    }
    assert!(causal::current().is_none());
}

/// A span used again after a sequential exit (its context then kept as the restored one with
/// the span's exit as parents, put together only when used): a child created with it as
/// explicit parent, its re-entry elsewhere, and its re-entry right where it exited all continue
/// from its exit event.
#[test]
fn tracing_layer_spans_used_after_a_sequential_exit_continue_from_their_exit() {
    use tracing_subscriber::prelude::*;
    let m = mock::install();
    let subscriber = tracing_subscriber::registry().with(causal::layer::CausalLayer::new());
    let task = tracing::subscriber::with_default(subscriber, || {
        let root = tracing::info_span!("root");
        let _r = root.enter();
        let task = causal::current().unwrap().task_id();
        let a = tracing::info_span!("a");
        a.in_scope(|| tracing::info!("one"));
        tracing::info!("between");
        let child = tracing::info_span!(parent: &a, "child");
        child.in_scope(|| {});
        a.in_scope(|| tracing::info!("two"));
        let b = tracing::info_span!("b");
        b.in_scope(|| {});
        b.in_scope(|| tracing::info!("three"));
        task
    });
    let reports = m.wait_for(task, 16, WAIT);
    let find = |label: &str, span: Option<&str>, nth: usize| {
        reports
            .iter()
            .filter(|r| r.label.as_deref() == Some(label) && r.field("span") == span)
            .nth(nth)
            .unwrap_or_else(|| panic!("{label} {span:?} #{nth} in {reports:#?}"))
    };
    let op = |r: &causal::Report| r.metadata.op_id();
    let a_exit = find("a", Some("exit"), 0);
    assert_eq!(a_exit.edges, [op(find("one", None, 0))]);
    assert_eq!(find("between", None, 0).edges, [op(a_exit)]);
    // The child starts from `a`'s context as `a` left it: `a`'s exit, not the thread's event.
    let child_enter = find("child", Some("enter"), 0);
    assert_eq!(child_enter.edges, [op(a_exit)]);
    // `a` entered again (the thread's context had moved on): from its own exit.
    let a_again = find("a", Some("enter"), 1);
    assert_eq!(a_again.edges, [op(a_exit)]);
    assert_eq!(find("two", None, 0).edges, [op(a_again)]);
    // `b` entered again right where it exited: from its exit, and the thread's context
    // continues from there.
    let b_exit = find("b", Some("exit"), 0);
    assert_eq!(find("b", Some("enter"), 1).edges, [op(b_exit)]);
    let three = find("three", None, 0);
    assert_eq!(three.edges, [op(find("b", Some("enter"), 1))]);
    let b_exit2 = find("b", Some("exit"), 1);
    assert_eq!(b_exit2.edges, [op(three)]);
    // The root's exit follows `b`'s last exit (among the paths joined before it).
    let root_exit = find("root", Some("exit"), 0);
    assert!(
        root_exit.edges.contains(&op(b_exit2)),
        "{:?} lacks b's exit",
        root_exit.edges
    );
    causal::set_current(None);
}
