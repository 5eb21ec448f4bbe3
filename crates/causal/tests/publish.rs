//! The per-thread publication of task and activity (docs/causal-accounting.md): slots follow the
//! current context through attach, set_activity, detach, futures and thread exit, and a freed
//! slot is reused.

use std::sync::mpsc;

use causal::publish::{self, ThreadState, activity_key};
use causal::{Context, InContextExt, TaskId};

/// Serializes the tests: the slot count checked below is process-wide.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn mine(tid: u32) -> Option<ThreadState> {
    publish::threads().into_iter().find(|s| s.tid == tid)
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}

#[test]
fn slot_follows_the_current_context() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    std::thread::spawn(|| {
        let tid = gettid();
        assert_eq!(mine(tid), None, "no slot before the first context");
        let ctx = Context::with_task(TaskId::from_u64(0x0102_0304_0506_0708).unwrap(), true)
            .with_activity("render page");
        let guard = ctx.attach();
        let st = mine(tid).expect("a slot once a sampled context is current");
        assert_eq!(st.task, 0x0102_0304_0506_0708);
        assert_eq!(st.activity, "render page");
        assert_eq!(st.activity_key, activity_key("render page"));
        causal::set_activity("compress");
        assert_eq!(mine(tid).unwrap().activity, "compress");
        assert_eq!(
            causal::current().unwrap().activity(),
            Some("compress"),
            "the label stays with the context"
        );
        drop(guard);
        let st = mine(tid).unwrap();
        assert_eq!((st.task, st.activity_key, st.activity.as_str()), (0, 0, ""));
        // An unsampled task is not published.
        let _g = Context::with_task(TaskId::from_u64(9).unwrap(), false).attach();
        assert_eq!(mine(tid).unwrap().task, 0);
    })
    .join()
    .unwrap();
}

#[test]
fn baggage_is_published_and_carried_across_processes() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    std::thread::spawn(|| {
        let tid = gettid();
        let task = TaskId::from_u64(0x0A0B).unwrap();
        let _g = Context::with_task(task, true)
            .with_activity("front")
            .attach();
        assert_eq!(mine(tid).unwrap().baggage, "", "no baggage yet");
        causal::set_baggage_item("client", "alice").unwrap();
        let st = mine(tid).unwrap();
        assert_eq!(st.baggage, ",client=alice,");
        assert_eq!(st.activity, "front", "the activity stays");
        // Replacing the item republishes; a second item is appended.
        causal::set_baggage_item("client", "bob smith").unwrap();
        causal::set_baggage_item("tier", "gold").unwrap();
        assert_eq!(mine(tid).unwrap().baggage, ",client=bob%20smith,tier=gold,");
        let cur = causal::current().unwrap();
        assert_eq!(cur.baggage(), Some("client=bob%20smith,tier=gold"));
        assert_eq!(cur.baggage_item("client").as_deref(), Some("bob smith"));
        assert!(causal::set_baggage_item("bad key", "x").is_err());
        assert_eq!(
            causal::current().unwrap().baggage(),
            Some("client=bob%20smith,tier=gold"),
            "an invalid key leaves the baggage as it was"
        );
        // What another process gets: the `baggage` header travels with the task.
        let mut cur = cur;
        cur.report("send", []);
        let mut headers = http::HeaderMap::new();
        causal::propagation::inject(&cur, &mut headers);
        assert_eq!(headers["baggage"], "client=bob%20smith,tier=gold");
        let there = causal::propagation::extract(&headers).expect("a context");
        assert_eq!(there.task_id(), task);
        assert_eq!(there.baggage_item("client").as_deref(), Some("bob smith"));
        // In the other process the received context publishes the same baggage.
        std::thread::spawn(move || {
            let tid = gettid();
            let _g = there.with_activity("back").attach();
            let st = mine(tid).unwrap();
            assert_eq!(
                (st.task, st.activity.as_str(), st.baggage.as_str()),
                (0x0A0B, "back", ",client=bob%20smith,tier=gold,")
            );
        })
        .join()
        .unwrap();
        // A context without baggage clears it.
        let _h = Context::with_task(task, true).attach();
        assert_eq!(mine(tid).unwrap().baggage, "");
    })
    .join()
    .unwrap();
}

#[test]
fn futures_publish_while_polled_and_exited_threads_free_their_slot() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let tid = gettid();
        let task = Context::with_task(TaskId::from_u64(0xAB).unwrap(), true).with_activity("io");
        let seen = futures_lite_block_on(
            async move { publish::threads().into_iter().find(|s| s.tid == tid) }.in_context(task),
        );
        tx.send((tid, seen, mine(tid))).unwrap();
    });
    t.join().unwrap();
    let (tid, inside, after) = rx.recv().unwrap();
    let inside = inside.expect("published while polled");
    assert_eq!((inside.task, inside.activity.as_str()), (0xAB, "io"));
    assert_eq!(after.map(|s| s.task), Some(0), "cleared after the poll");
    assert_eq!(mine(tid), None, "the exited thread's slot is free");
    let slots_before = count_all_slots();
    std::thread::spawn(|| {
        let _g = Context::with_task(TaskId::from_u64(0xCD).unwrap(), true).attach();
        assert_eq!(mine(gettid()).unwrap().task, 0xCD);
    })
    .join()
    .unwrap();
    assert!(
        count_all_slots() <= slots_before.max(1),
        "a later thread reuses a free slot rather than adding one"
    );
}

/// Slots in the list including free ones (walked through the exported registry's bytes).
fn count_all_slots() -> usize {
    let reg = std::ptr::from_ref(&publish::SIGHTLINE_CAUSAL_THREADS).cast::<[u8; 24]>();
    // SAFETY: the registry is a `repr(C)` 24-byte struct of integers; reading its bytes is valid.
    let mut p = publish::decode_registry(unsafe { &*reg }).expect("registry") as usize;
    let mut n = 0;
    while p != 0 {
        // SAFETY: list pointers are leaked `ThreadSlot`s of SLOT_SIZE bytes, never freed.
        let b = unsafe { &*(p as *const [u8; publish::SLOT_SIZE]) };
        let Some((_, next)) = publish::decode_slot(b) else {
            break;
        };
        n += 1;
        p = next as usize;
    }
    n
}

/// Polls a future that never waits to completion on this thread.
fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}
