//! Happened-before joins through baggage (Pivot Tracing, issue 19, docs/causal-accounting.md):
//! the front end of the example system puts `client=NAME` in each request's baggage; the back
//! ends, separate processes reached over HTTP, read a file of known size per request. A D
//! program compiled by `causal_account::pivot::program` groups the back ends' read bytes by
//! `causal_baggage["client"]`, a value set in another process: the sums per client and back end
//! must be exactly the file's size times that client's requests (two clients at once, then one).

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

mod common;
use common::{BIN, Server};

/// Runs `client URL N NAME`; returns the task keys it printed.
fn client(front: &Server, n: usize, name: &str) -> Vec<u64> {
    let out = Command::new(BIN)
        .args([
            "client",
            &format!("http://{}", front.addr),
            &n.to_string(),
            name,
        ])
        .env("SIGHTLINE_CAUSAL_SINK", "off")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("task "))
        .map(|t| u64::from_str_radix(t.split_whitespace().next().unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn back_end_reads_grouped_by_the_front_ends_client_baggage() {
    if !test_support::privileged("loads a BPF program (syscalls, USDT causal:context)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (fa, fb) = (dir.path().join("a.bin"), dir.path().join("b.bin"));
    let (size_a, size_b) = (54_321u64, 777_777u64);
    std::fs::write(&fa, vec![1u8; size_a as usize]).unwrap();
    std::fs::write(&fb, vec![2u8; size_b as usize]).unwrap();
    let a = Server::start(&["backend", "a", "0", "0", fa.to_str().unwrap()], &[]);
    let b = Server::start(&["backend", "b", "0", "0", fb.to_str().unwrap()], &[]);
    let front = Server::start(
        &[
            "frontend",
            &format!("http://{}", a.addr),
            &format!("http://{}", b.addr),
        ],
        &[],
    );
    let (apid, bpid) = (a.pid(), b.pid());

    let user = "syscall::read:return,syscall::pread64:return /causal_task && (int64_t)arg0 > 0/ \
                { @r[pid, causal_baggage[\"client\"]] = sum(arg0); @t[pid, causal_task, causal_baggage[\"client\"]] = sum(arg0); }\n\
                END { printa(\"R %u <%s> %@u\\n\", @r); printa(\"T %u %u <%s> %@u\\n\", @t); }\n";
    let exe = std::fs::canonicalize(BIN).unwrap();
    let (prelude, sources) = causal_account::pivot::program(&[exe], &[user]).unwrap();
    let src = format!("{prelude}{}", sources.concat());
    assert!(!src.contains("causal_baggage["), "rewritten:\n{src}");

    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel();
    let (out, alice, bob) = std::thread::scope(|s| {
        let run = s.spawn(|| causal_account::run_d(&src, &stop, move || tx.send(()).unwrap()));
        if rx.recv().is_err() {
            let e = run.join().unwrap().unwrap_err();
            panic!("the D program: {e}\n{src}");
        }
        // Both clients at once, then alice again: the back ends' threads switch between the
        // clients' tasks, concurrently and in turn.
        let (mut alice, bob) = std::thread::scope(|c| {
            let alice = c.spawn(|| client(&front, 2, "alice"));
            let bob = c.spawn(|| client(&front, 2, "bob"));
            (alice.join().unwrap(), bob.join().unwrap())
        });
        alice.append(&mut client(&front, 1, "alice"));
        stop.store(true, Ordering::Release);
        (run.join().unwrap(), alice, bob)
    });
    front.stop();
    a.stop();
    b.stop();
    let out = out.expect("the D program runs");
    assert_eq!((alice.len(), bob.len()), (3, 2));

    // Per (pid, client): the D sums.
    let mut by_client: BTreeMap<(u32, String), u64> = BTreeMap::new();
    let mut by_task: BTreeMap<(u32, u64), (String, u64)> = BTreeMap::new();
    for l in out.lines() {
        let (kind, rest) = l.split_once(' ').unwrap_or(("", ""));
        let (head, tail) = match (rest.find('<'), rest.find('>')) {
            (Some(i), Some(j)) => (&rest[..i], (&rest[i + 1..j], &rest[j + 1..])),
            _ => continue,
        };
        let nums: Vec<u64> = head
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        let sum: u64 = tail.1.trim().parse().unwrap();
        match kind {
            "R" => {
                by_client.insert((nums[0] as u32, tail.0.to_string()), sum);
            }
            "T" => {
                by_task.insert((nums[0] as u32, nums[1]), (tail.0.to_string(), sum));
            }
            _ => {}
        }
    }
    eprintln!("{by_client:?}");
    for (pid, size, name) in [(apid, size_a, "a"), (bpid, size_b, "b")] {
        assert_eq!(
            by_client.get(&(pid, "alice".into())).copied(),
            Some(3 * size),
            "back end {name}: alice's reads\n{out}"
        );
        assert_eq!(
            by_client.get(&(pid, "bob".into())).copied(),
            Some(2 * size),
            "back end {name}: bob's reads\n{out}"
        );
        assert_eq!(
            by_client.get(&(pid, String::new())),
            None,
            "back end {name}: every read of a task has its client\n{out}"
        );
        // Each task's reads carry that task's own client: the join follows the request.
        for (tasks, who) in [(&alice, "alice"), (&bob, "bob")] {
            for t in tasks {
                assert_eq!(
                    by_task.get(&(pid, *t)),
                    Some(&(who.to_string(), size)),
                    "back end {name}, task {t:x}\n{out}"
                );
            }
        }
    }
}
