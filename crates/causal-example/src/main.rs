//! Example system for the causal library: a front end that calls two back ends in parallel over
//! HTTP and joins their answers, each a separate process on loopback.
//!
//! ```text
//! causal-example backend NAME DELAY_MS     serve GET /work on 127.0.0.1:<free port>
//! causal-example frontend URL_A URL_B      serve GET /request; calls both back ends in parallel
//! causal-example demo                      start two back ends and a front end, send one request,
//!                                          print the task id and the answer, stop them
//! causal-example backend NAME DELAY_MS CPU_MS [FILE]
//!                                          a back end of known cost: per request, CPU_MS of busy
//!                                          loop and one read of FILE, under activity
//!                                          `backend NAME` (docs/causal-accounting.md)
//! causal-example client URL N [NAME]       N requests to a front end, each a new task; prints
//!                                          `task ID latency_us=N` per request; with NAME the
//!                                          requests are `/request?client=NAME`, and the front
//!                                          end puts `client=NAME` in the task's baggage
//! causal-example hold CPU_MS               attach a new task (activity `held`), print `task ID`,
//!                                          wait for a line on stdin, then burn CPU_MS of CPU
//!                                          and print `held cpu_ns=N`
//! ```
//!
//! With `SIGHTLINE_EXAMPLE_COST_LOG=FILE` a back end of known cost appends
//! `cost TASK NAME cpu_ns=N read_bytes=N` per request, its own measurement of the work
//! (CLOCK_THREAD_CPUTIME_ID around the busy loop and the read).
//!
//! Servers print `listening on 127.0.0.1:PORT` as their first line and stop on `GET /shutdown`
//! (a clean exit, so their reporters flush). Reports go where `SIGHTLINE_CAUSAL_SINK` says
//! (default `tcp://127.0.0.1:7831`, `sightline collect`); each process's `Agent` is its role.
//!
//! The task's graph: `client request` → `frontend recv` → (`call backend` → `backend recv` →
//! `backend done` → `backend answered`) ×2 in parallel → `join answers` (a join: parents on both
//! paths) → `client done`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::get;
use causal::propagation;
use causal::{Context, InContextExt};
use http::HeaderMap;
use tokio::sync::Notify;

fn usage() -> ! {
    eprintln!(
        "usage: causal-example backend NAME DELAY_MS [CPU_MS [FILE]] | frontend URL_A URL_B | demo | client URL N [NAME] | hold CPU_MS"
    );
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("backend") if (3..=5).contains(&args.len()) => {
            let delay = args[2].parse().unwrap_or_else(|_| usage());
            let cost = Cost {
                cpu: Duration::from_millis(
                    args.get(3)
                        .map_or(Ok(0), |c| c.parse())
                        .unwrap_or_else(|_| usage()),
                ),
                file: args.get(4).map(std::path::PathBuf::from),
            };
            start_reporter(&format!("backend-{}", args[1]));
            serve(backend_router(
                args[1].clone(),
                Duration::from_millis(delay),
                Arc::new(cost),
            ));
        }
        Some("client") if (3..=4).contains(&args.len()) => {
            start_reporter("client");
            let n: usize = args[2].parse().unwrap_or_else(|_| usage());
            if let Err(e) = client(&args[1], n, args.get(3).map(String::as_str)) {
                eprintln!("causal-example client: {e:#}");
                std::process::exit(1);
            }
        }
        Some("hold") if args.len() == 2 => {
            let ms: u64 = args[1].parse().unwrap_or_else(|_| usage());
            hold(Duration::from_millis(ms));
        }
        Some("frontend") if args.len() == 3 => {
            start_reporter("frontend");
            serve(frontend_router(args[1].clone(), args[2].clone()));
        }
        Some("demo") => {
            start_reporter("client");
            match demo() {
                Ok(()) => {}
                Err(e) => {
                    eprintln!("causal-example demo: {e:#}");
                    std::process::exit(1);
                }
            }
        }
        _ => usage(),
    }
}

/// Starts the reporter from `SIGHTLINE_CAUSAL_*` with this process's role as its `Agent`.
fn start_reporter(agent: &str) {
    let mut config = causal::Config::from_env().unwrap_or_else(|e| {
        eprintln!("causal-example: {e}; using the defaults");
        causal::Config::default()
    });
    config.agent = agent.to_string();
    causal::reporter::init(config).expect("reporter starts before any event");
}

/// Runs `router` on 127.0.0.1 on a free port until `GET /shutdown`.
fn serve(router: Router<Arc<Notify>>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        println!(
            "listening on {}",
            listener.local_addr().expect("local addr")
        );
        let stop = Arc::new(Notify::new());
        let app = router
            .route(
                "/shutdown",
                get(|State(stop): State<Arc<Notify>>| async move {
                    stop.notify_one();
                    "bye"
                }),
            )
            .with_state(stop.clone());
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.notified().await })
            .await
            .expect("serve");
    });
    // A normal exit: the reporter's exit hook flushes; flushing here too makes it explicit.
    causal::flush(Duration::from_secs(5));
}

/// A back end's known cost per request.
#[derive(Debug)]
struct Cost {
    cpu: Duration,
    file: Option<std::path::PathBuf>,
}

/// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Burns `cpu` of this thread's CPU time; returns the CPU ns it measured.
fn burn(cpu: Duration) -> u64 {
    let start = thread_cpu_ns();
    let target = cpu.as_nanos() as u64;
    let mut x = 0u64;
    while thread_cpu_ns() - start < target {
        for i in 0..1000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
    std::hint::black_box(x);
    thread_cpu_ns() - start
}

/// Runs the known work of one request on this thread: the busy loop and the file read, both
/// under the current context. Returns (cpu ns, bytes read) as measured here.
fn known_work(cost: &Cost) -> (u64, u64) {
    let start = thread_cpu_ns();
    burn(cost.cpu);
    let bytes = cost
        .file
        .as_ref()
        .map_or(0, |f| std::fs::read(f).map_or(0, |b| b.len() as u64));
    (thread_cpu_ns() - start, bytes)
}

fn backend_router(name: String, delay: Duration, cost: Arc<Cost>) -> Router<Arc<Notify>> {
    let name: &'static str = Box::leak(name.into_boxed_str());
    let activity: &'static str = Box::leak(format!("backend {name}").into_boxed_str());
    Router::new().route(
        "/work",
        get(move |headers: HeaderMap| async move {
            // Server side, two lines: extract the caller's context and run the handler in it.
            let ctx = propagation::extract(&headers).unwrap_or_else(|| Context::new_task(true));
            let ctx = ctx.with_activity(activity);
            let (answer, ctx) = async move {
                causal::event("backend recv").kv("backend", name).report();
                if !cost.cpu.is_zero() || cost.file.is_some() {
                    let (cpu_ns, read_bytes) = known_work(&cost);
                    log_cost(name, cpu_ns, read_bytes);
                }
                tokio::time::sleep(delay).await;
                let answer = format!("{name}:{}", delay.as_millis());
                causal::event("backend done")
                    .kv("backend", name)
                    .kv("answer", answer.clone())
                    .report();
                (answer, causal::current())
            }
            .in_context(ctx)
            .await;
            // The response carries the back end's last event, so the caller can join it.
            let mut out = HeaderMap::new();
            if let Some(ctx) = ctx {
                propagation::inject(&ctx, &mut out);
            }
            (out, answer)
        }),
    )
}

/// Appends this request's measured cost to `$SIGHTLINE_EXAMPLE_COST_LOG` when set.
fn log_cost(name: &str, cpu_ns: u64, read_bytes: u64) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os("SIGHTLINE_EXAMPLE_COST_LOG") else {
        return;
    };
    let task = causal::current()
        .map(|c| c.task_id().to_string())
        .unwrap_or_default();
    let line = format!("cost {task} {name} cpu_ns={cpu_ns} read_bytes={read_bytes}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!("causal-example: writing the cost log: {e}");
    }
}

/// `client URL N [NAME]`: N requests to the front end at URL, each its own task (with NAME,
/// `GET /request?client=NAME`).
fn client(url: &str, n: usize, name: Option<&str>) -> anyhow::Result<()> {
    let query = name.map_or(String::new(), |n| format!("?client={n}"));
    for _ in 0..n {
        let started = std::time::Instant::now();
        let ctx = causal::start_task("client request", [("path", "/request".into())]);
        let mut req = ureq::get(&format!("{url}/request{query}"));
        propagation::inject_current(req.headers_mut().context("building GET /request")?);
        let mut resp = req.call().with_context(|| format!("GET {url}/request"))?;
        let mut cur = causal::take_current().context("taking the context after the request")?;
        propagation::join_response(&mut cur, resp.headers());
        causal::set_current(Some(cur));
        let answer = resp.body_mut().read_to_string()?;
        causal::event("client done").kv("answer", answer).report();
        causal::set_current(None);
        println!(
            "task {} latency_us={}",
            ctx.task_id(),
            started.elapsed().as_micros()
        );
    }
    causal::flush(Duration::from_secs(5));
    Ok(())
}

/// `hold CPU_MS`: a thread whose task is current before any tracer starts.
fn hold(cpu: Duration) {
    let ctx = Context::new_task(true).with_activity("held");
    let task = ctx.task_id();
    let _g = ctx.attach();
    println!("task {task}");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    let ns = burn(cpu);
    println!("held cpu_ns={ns}");
}

fn frontend_router(a: String, b: String) -> Router<Arc<Notify>> {
    Router::new().route(
        "/request",
        get(move |headers: HeaderMap, uri: http::Uri| {
            let (a, b) = (a.clone(), b.clone());
            async move {
                let ctx = propagation::extract(&headers);
                let client = uri.query().and_then(|q| {
                    q.split('&')
                        .find_map(|kv| kv.strip_prefix("client="))
                        .map(str::to_string)
                });
                // The blocking HTTP client runs on its own threads; the context goes with them.
                let res =
                    tokio::task::spawn_blocking(move || fan_out(ctx, client.as_deref(), &a, &b))
                        .await;
                match res {
                    Ok(Ok((answer, ctx))) => {
                        let mut out = HeaderMap::new();
                        propagation::inject(&ctx, &mut out);
                        (http::StatusCode::OK, out, answer).into_response()
                    }
                    Ok(Err(e)) => (http::StatusCode::BAD_GATEWAY, format!("{e:#}")).into_response(),
                    Err(e) => {
                        (http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
                    }
                }
            }
        }),
    )
}

/// Calls both back ends in parallel (one thread each) and joins their answers; with `client`,
/// the task's baggage gets `client=CLIENT` first, so the back ends (and any tracer of them) see
/// who the request is for.
fn fan_out(
    ctx: Option<Context>,
    client: Option<&str>,
    a: &str,
    b: &str,
) -> anyhow::Result<(String, Context)> {
    match ctx {
        Some(c) => {
            causal::set_current(Some(c));
        }
        None => {
            causal::start_task("frontend request", []);
        }
    }
    if let Some(name) = client {
        causal::set_baggage_item("client", name).context("setting the client baggage")?;
    }
    causal::event("frontend recv").report();
    let calls: Vec<_> = [("a", a.to_string()), ("b", b.to_string())]
        .into_iter()
        .map(|(name, url)| {
            causal::thread::spawn_named(Some(format!("call-{name}")), move || call(name, &url))
        })
        .collect();
    let mut answers = Vec::new();
    for c in calls {
        // Joining the thread joins its last event into this thread's context.
        answers.push(
            c.join()
                .map_err(|_| anyhow!("a back-end call thread panicked"))??,
        );
    }
    causal::event("join answers")
        .kv("answers", answers.len())
        .report();
    let ctx = causal::take_current().context("taking the context after the join")?;
    Ok((answers.join(","), ctx))
}

/// One back-end call: report, send with the context's headers, join the answer's context.
fn call(name: &'static str, url: &str) -> anyhow::Result<String> {
    causal::event("call backend").kv("backend", name).report();
    // Client side, two lines: the request carries the context ...
    let mut req = ureq::get(&format!("{url}/work"));
    propagation::inject_current(
        req.headers_mut()
            .with_context(|| format!("building GET {url}/work"))?,
    );
    let mut resp = req.call().with_context(|| format!("GET {url}/work"))?;
    // ... and the response's context is joined, so the next event follows the back end's last.
    let mut cur = causal::take_current().context("taking the context after the call")?;
    propagation::join_response(&mut cur, resp.headers());
    causal::set_current(Some(cur));
    let body = resp
        .body_mut()
        .read_to_string()
        .with_context(|| format!("reading the answer of GET {url}/work"))?;
    causal::event("backend answered")
        .kv("backend", name)
        .kv("answer", body.clone())
        .report();
    Ok(body)
}

/// A child server process and its address.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(args: &[&str]) -> anyhow::Result<Server> {
        let exe = std::env::current_exe().context("finding this program's path")?;
        let mut child = Command::new(exe)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting server {args:?}"))?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("taking the server's stdout")?)
            .read_line(&mut line)
            .with_context(|| format!("reading the address of server {args:?}"))?;
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .with_context(|| format!("starting server {args:?}: it said {line:?}"))?;
        Ok(Server {
            child,
            url: format!("http://{addr}"),
        })
    }

    /// Asks the server to exit cleanly and waits for it.
    fn stop(mut self) -> anyhow::Result<()> {
        let _ = ureq::get(&format!("{}/shutdown", self.url)).call();
        let status = self
            .child
            .wait()
            .with_context(|| format!("waiting for server {}", self.url))?;
        anyhow::ensure!(
            status.success(),
            "stopping server {}: it exited with {status}",
            self.url
        );
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Only reached when `stop` was not: do not leave a server behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn demo() -> anyhow::Result<()> {
    let a = Server::start(&["backend", "a", "30"])?;
    let b = Server::start(&["backend", "b", "60"])?;
    let front = Server::start(&["frontend", &a.url, &b.url])?;
    let ctx = causal::start_task("client request", [("path", "/request".into())]);
    let mut req = ureq::get(&format!("{}/request", front.url));
    propagation::inject_current(
        req.headers_mut()
            .context("building GET /request of the front end")?,
    );
    let sent_traceparent = ctx.traceparent().map(|t| t.to_string()).unwrap_or_default();
    let mut resp = req
        .call()
        .with_context(|| format!("GET {}/request", front.url))?;
    let mut cur = causal::take_current().context("taking the context after the request")?;
    propagation::join_response(&mut cur, resp.headers());
    let back_traceparent = resp
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    causal::set_current(Some(cur));
    let answer = resp
        .body_mut()
        .read_to_string()
        .with_context(|| format!("reading the answer of GET {}/request", front.url))?;
    causal::event("client done")
        .kv("answer", answer.clone())
        .report();
    println!("task {}", ctx.task_id());
    println!("answer {answer}");
    println!("traceparent sent {sent_traceparent}");
    println!("traceparent back {back_traceparent}");
    front.stop()?;
    a.stop()?;
    b.stop()?;
    causal::flush(Duration::from_secs(5));
    let stats = causal::stats();
    println!(
        "client reports sent {} dropped {}",
        stats.sent,
        stats.dropped()
    );
    Ok(())
}
