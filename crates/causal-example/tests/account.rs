//! Per-activity accounting (issue 19, docs/causal-accounting.md) on the example system with back
//! ends of known cost: 20 ms and 60 ms of CPU and one read of a file of known size per request.
//! The accounting program (D, compiled and loaded in this process by `causal_account::run`)
//! must charge each task, in each back end, CPU within 10% of what the back end measured with
//! CLOCK_THREAD_CPUTIME_ID around the work, and exactly the file's bytes; a thread whose task
//! was current before the program started is charged through its slot.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use causal_account::{Config, Resource};

mod common;
use common::{BIN, Server};

/// `cost TASK NAME cpu_ns=N read_bytes=N` lines: (task key, name) -> (cpu ns, bytes).
fn read_cost_log(path: &std::path::Path) -> BTreeMap<(u64, String), (u64, u64)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let [_, task, name, cpu, bytes] = f[..] else {
            panic!("bad cost line {l:?}");
        };
        let n = |s: &str| s.split_once('=').unwrap().1.parse::<u64>().unwrap();
        m.insert(
            (u64::from_str_radix(task, 16).unwrap(), name.to_string()),
            (n(cpu), n(bytes)),
        );
    }
    m
}

/// The machine's steal time so far, ns: time the host ran something else on a vCPU.
/// Wall-clock pieces of the accounting include it, a thread's CPU clock does not
/// (docs/causal-accounting.md).
fn steal_ns() -> u64 {
    causal_account::energy::steal_ns(std::path::Path::new("/proc/stat")).expect("read /proc/stat")
}

#[test]
fn accounting_charges_known_back_end_costs_to_their_tasks() {
    if !test_support::privileged("loads the accounting BPF program (sched_switch, syscalls, USDT)")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cost.log");
    let (fa, fb) = (dir.path().join("a.bin"), dir.path().join("b.bin"));
    std::fs::write(&fa, vec![7u8; 123_457]).unwrap();
    std::fs::write(&fb, vec![9u8; 1_000_003]).unwrap();
    let env = [("SIGHTLINE_EXAMPLE_COST_LOG", log.as_os_str())];
    let a = Server::start(&["backend", "a", "0", "20", fa.to_str().unwrap()], &env);
    let b = Server::start(&["backend", "b", "0", "60", fb.to_str().unwrap()], &env);
    let front = Server::start(
        &[
            "frontend",
            &format!("http://{}", a.addr),
            &format!("http://{}", b.addr),
        ],
        &env,
    );
    // A thread whose task is current before the accounting starts.
    let mut held = Command::new(BIN)
        .args(["hold", "40"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut held_out = BufReader::new(held.stdout.take().unwrap());
    let mut line = String::new();
    held_out.read_line(&mut line).unwrap();
    let held_task = u64::from_str_radix(line.trim().strip_prefix("task ").unwrap(), 16).unwrap();
    let (apid, bpid, held_pid) = (a.pid(), b.pid(), held.id());

    let steal_before = steal_ns();
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel();
    let cfg = Config {
        exes: vec![BIN.into()],
        interval_ms: 500,
        ..Config::default()
    };
    // Pivot Tracing: a D aggregation by `causal_task`, run beside the accounting.
    let pivot_src = format!(
        "{}syscall::read:return,syscall::pread64:return /causal_task && (int64_t)arg0 > 0/ \
         {{ @r[causal_task, pid, causal_activity] = sum(arg0); }}\n\
         END {{ printa(\"P %u %u %s %@u\\n\", @r); }}\n",
        causal_account::pivot::prelude(&[std::fs::canonicalize(BIN).unwrap()], &[])
    );
    let (ptx, prx) = mpsc::channel();
    let (acct, client_out, held_cpu, pivot) = std::thread::scope(|s| {
        let acct = s.spawn(|| causal_account::run(&cfg, &stop, move || tx.send(()).unwrap()));
        let pivot =
            s.spawn(|| causal_account::run_d(&pivot_src, &stop, move || ptx.send(()).unwrap()));
        if rx.recv().is_err() {
            // The accounting failed before attaching: its error is the test's failure.
            let e = acct.join().unwrap().unwrap_err();
            panic!("accounting: {e}");
        }
        if prx.recv().is_err() {
            let e = pivot.join().unwrap().unwrap_err();
            panic!("pivot program: {e}");
        }
        let client_out = Command::new(BIN)
            .args(["client", &format!("http://{}", front.addr), "3"])
            .env("SIGHTLINE_CAUSAL_SINK", "off")
            .output()
            .unwrap();
        held.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut l = String::new();
        held_out.read_line(&mut l).unwrap();
        let held_cpu: u64 = l
            .trim()
            .strip_prefix("held cpu_ns=")
            .unwrap()
            .parse()
            .unwrap();
        assert!(held.wait().unwrap().success());
        stop.store(true, Ordering::Release);
        (
            acct.join().unwrap(),
            client_out,
            held_cpu,
            pivot.join().unwrap(),
        )
    });
    let acct = acct.expect("accounting runs");
    let steal = steal_ns() - steal_before;
    eprintln!("steal during the run: {} ms", steal / 1_000_000);
    assert!(client_out.status.success(), "{client_out:?}");
    front.stop();
    a.stop();
    b.stop();
    let tasks: Vec<u64> = String::from_utf8_lossy(&client_out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("task "))
        .map(|t| u64::from_str_radix(t.split_whitespace().next().unwrap(), 16).unwrap())
        .collect();
    assert_eq!(tasks.len(), 3);
    let costs = read_cost_log(&log);
    assert_eq!(costs.len(), 6, "{costs:?}");

    // Per (task, process): the accounting's totals.
    let mut by_task_pid: BTreeMap<(u64, u32), (u64, u64, String)> = BTreeMap::new();
    for (c, u) in &acct.usage {
        let e = by_task_pid.entry((c.task, c.pid)).or_default();
        e.0 += u.get(Resource::Cpu);
        e.1 += u.get(Resource::ReadBytes);
        if c.activity_key != 0 {
            e.2 = acct.label(c.activity_key).to_string();
        }
    }
    if std::env::var_os("ACCOUNT_DEBUG").is_some() {
        for (c, u) in &acct.usage {
            if c.pid == apid || c.pid == bpid {
                eprintln!("{c:x?} {:?}", u.by_resource);
            }
        }
    }
    for &t in &tasks {
        for (name, pid, size) in [("a", apid, 123_457u64), ("b", bpid, 1_000_003)] {
            let (cpu_measured, bytes_measured) = costs[&(t, name.to_string())];
            assert_eq!(bytes_measured, size);
            let (cpu, bytes, activity) = by_task_pid
                .get(&(t, pid))
                .cloned()
                .unwrap_or_else(|| panic!("task {t:x} not charged in back end {name}"));
            let ratio = cpu as f64 / cpu_measured as f64;
            let high = 1.1 + steal as f64 / cpu_measured as f64;
            eprintln!(
                "task {t:x} back end {name}: charged {cpu} ns, measured {cpu_measured} ns ({ratio:.3}, allowed up to {high:.3}), {bytes} bytes"
            );
            assert!(
                (0.9..=high).contains(&ratio),
                "task {t:x} back end {name}: charged {cpu} ns, measured {cpu_measured} ns, steal {steal} ns"
            );
            assert_eq!(bytes, size, "task {t:x} back end {name}: read bytes");
            assert_eq!(activity, format!("backend {name}"));
        }
    }
    // The held thread published before the program started: charged through its slot.
    let (cpu, _, activity) = by_task_pid
        .get(&(held_task, held_pid))
        .cloned()
        .expect("the held task is charged");
    let ratio = cpu as f64 / held_cpu as f64;
    let high = 1.1 + steal as f64 / held_cpu as f64;
    eprintln!(
        "held: charged {cpu} ns, measured {held_cpu} ns ({ratio:.3}, allowed up to {high:.3})"
    );
    assert!(
        (0.9..=high).contains(&ratio),
        "held: charged {cpu} ns, measured {held_cpu} ns, steal {steal} ns"
    );
    assert_eq!(activity, "held");
    assert!(acct.intervals >= 1);

    // The D aggregation by causal_task equals the accounting's read bytes per task and process.
    let pivot = pivot.expect("the pivot program runs");
    let mut by_d: BTreeMap<(u64, u32), u64> = BTreeMap::new();
    for l in pivot.lines().filter_map(|l| l.strip_prefix("P ")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (task, pid, bytes): (u64, u32, u64) = (
            f[0].parse().unwrap(),
            f[1].parse().unwrap(),
            f.last().unwrap().parse().unwrap(),
        );
        *by_d.entry((task, pid)).or_default() += bytes;
    }
    for &t in &tasks {
        for (name, pid) in [("a", apid), ("b", bpid)] {
            assert_eq!(
                by_d.get(&(t, pid)).copied(),
                Some(by_task_pid[&(t, pid)].1),
                "task {t:x} back end {name}: @[causal_task] = sum(read bytes) vs the accounting\n{pivot}"
            );
            assert!(
                pivot.contains(&format!("P {t} {pid} backend {name} ")),
                "causal_activity is the back end's label\n{pivot}"
            );
        }
    }
    reports_land_on_their_tasks(&acct, &tasks);
}

/// The accounting's reports, sent through the causal reporter to the real collector, are stored
/// as events of each task with the accounting's figures.
fn reports_land_on_their_tasks(acct: &causal_account::Accounting, tasks: &[u64]) {
    use causal_collector::{Collector, Config as CollectorConfig, Store};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("acct.db");
    let any = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
    let collector = rt
        .block_on(Collector::start(CollectorConfig {
            xtrace_tcp: Some(any),
            xtrace_udp: None,
            otlp_http: None,
            otlp_grpc: None,
            zipkin: None,
            ..CollectorConfig::loopback(&db)
        }))
        .unwrap();
    let tcp = collector.addrs().xtrace_tcp.unwrap();
    causal::reporter::init(causal::Config {
        sink: causal::Sink::parse(&format!("tcp://{tcp}")).unwrap(),
        agent: "sightline-account".into(),
        ..causal::Config::default()
    })
    .unwrap();
    let sent = acct.report("sightline-account");
    assert!(causal::flush(std::time::Duration::from_secs(10)));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stats = rt.block_on(collector.shutdown()).unwrap();
    let with_task = acct.usage.keys().filter(|c| c.task != 0).count();
    assert_eq!(sent, with_task);
    assert_eq!(stats.events_stored as usize, sent, "{stats:?}");
    let store = Store::open(&db).unwrap();
    for &t in tasks {
        let events = store.load_task(&format!("{t:016X}")).unwrap();
        let stored_cpu: u64 = events
            .iter()
            .filter(|e| e.labels.iter().any(|l| l == causal_account::REPORT_LABEL))
            .map(|e| {
                e.fields
                    .iter()
                    .find(|(k, _)| k == "cpu_ns")
                    .map(|(_, v)| v.parse::<u64>().unwrap())
                    .unwrap()
            })
            .sum();
        let accounted: u64 = acct
            .usage
            .iter()
            .filter(|(c, _)| c.task == t)
            .map(|(_, u)| u.get(Resource::Cpu))
            .sum();
        assert_eq!(stored_cpu, accounted, "task {t:016X}");
    }
}
