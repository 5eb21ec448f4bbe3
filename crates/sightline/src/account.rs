//! `sightline account`: per-task and per-activity resource and energy accounting
//! (`causal-account`, docs/causal-accounting.md), and the cost views over its reports:
//! `sightline cost --by activity,host` and the per-task cost of `show --cost` / `tasks --sort cost`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use causal_account::reports::{self, CostRow, cost_rows};
use causal_account::{Accounting, Resource};
use causal_analysis::Event;
use causal_collector::{TaskFilter, TraceStore};

use crate::causal::DbArg;

/// Options of `sightline account`.
#[derive(Debug, clap::Args)]
pub struct AccountArgs {
    /// An executable linking the causal library: every process running it is accounted, also
    /// those started later (repeatable).
    #[arg(long, value_name = "PATH")]
    pub exe: Vec<PathBuf>,
    /// A process to account (repeatable; its executable's later processes too).
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Stop after DURATION (e.g. 30s, 5m); default: at SIGINT (Ctrl-C).
    #[arg(long, value_name = "DURATION", value_parser = parse_secs)]
    pub duration: Option<std::time::Duration>,
    /// Energy sampling interval in ms.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub interval_ms: u64,
    /// Where the per-task reports go (a causal sink: tcp://HOST:PORT, udp://..., off);
    /// default: $SIGHTLINE_CAUSAL_SINK, else tcp://127.0.0.1:7831 (`sightline collect`).
    #[arg(long, value_name = "URL")]
    pub sink: Option<String>,
    /// The powercap root holding RAPL zones.
    #[arg(long, value_name = "DIR", default_value = "/sys/class/powercap")]
    pub powercap: PathBuf,
    /// Always use the linear energy model, even with RAPL.
    #[arg(long)]
    pub no_rapl: bool,
    /// The linear model's calibration file (`watts_per_core = 10`, `joules_per_disk_byte = ...`,
    /// `joules_per_net_byte = ...`).
    #[arg(long, value_name = "FILE")]
    pub energy_model: Option<PathBuf>,
}

fn parse_secs(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(|v| std::time::Duration::from_secs_f64(v * mult))
        .ok_or_else(|| format!("duration {s:?}: expected e.g. 500ms, 30s or 5m"))
}

/// Runs `sightline account`.
pub fn run(args: AccountArgs) -> anyhow::Result<ExitCode> {
    let model = match &args.energy_model {
        Some(p) => causal_account::energy::Model::parse(
            &std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        )?,
        None => causal_account::energy::Model::default(),
    };
    let cfg = causal_account::Config {
        exes: args.exe.clone(),
        pids: args.pids.clone(),
        interval_ms: args.interval_ms,
        powercap: (!args.no_rapl).then(|| args.powercap.clone()),
        model,
        ..causal_account::Config::default()
    };
    let mut rc = causal::Config::from_env().unwrap_or_default();
    if let Some(s) = &args.sink {
        rc.sink = causal::Sink::parse(s)?;
    }
    rc.agent = "sightline-account".into();
    rc.sample_rate = 1.0;
    causal::reporter::init(rc).context("starting the causal reporter")?;
    probe_sys::os::install_interrupt_handler().context("installing the SIGINT handler")?;
    let stop = AtomicBool::new(false);
    let acct = std::thread::scope(|s| {
        if let Some(d) = args.duration {
            let stop = &stop;
            s.spawn(move || {
                std::thread::sleep(d);
                stop.store(true, Ordering::Release);
            });
        }
        let r = causal_account::run(&cfg, &stop, || {
            eprintln!("sightline: accounting; stop with Ctrl-C");
        });
        stop.store(true, Ordering::Release);
        r
    })?;
    print!("{}", table(&acct));
    let n = acct.report("sightline-account");
    causal::flush(std::time::Duration::from_secs(10));
    eprintln!(
        "sightline: {n} accounting reports sent (dropped {})",
        causal::dropped()
    );
    Ok(ExitCode::SUCCESS)
}

/// The run's totals per (task, activity) as a table.
fn table(a: &Accounting) -> String {
    let mut out = format!(
        "{:<16} {:<20} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>8} {:>12}\n",
        "TASK", "ACTIVITY", "CPU", "READ", "WRITE", "NET TX", "NET RX", "BLOCK", "FAULTS", "ENERGY"
    );
    for ((task, ak), u) in a.per_task() {
        let task = if task == 0 {
            "(none)".to_string()
        } else {
            format!("{task:016X}")
        };
        out.push_str(&format!(
            "{task:<16} {:<20} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>8} {:>12}\n",
            or_dash(a.label(ak)),
            fmt_ns(u.get(Resource::Cpu)),
            u.get(Resource::ReadBytes),
            u.get(Resource::WriteBytes),
            u.get(Resource::NetTxBytes),
            u.get(Resource::NetRxBytes),
            u.get(Resource::BlockBytes),
            u.get(Resource::PageFaults),
            fmt_uj(u.energy_uj),
        ));
    }
    out.push_str(&format!(
        "energy from {}{}\n",
        a.energy_source.as_str(),
        if a.unattributed_uj > 0.0 {
            format!(
                "; {} of the machine's energy used by nothing accounted",
                fmt_uj(a.unattributed_uj)
            )
        } else {
            String::new()
        }
    ));
    out
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

fn fmt_ns(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.3}s", ns as f64 / 1e9)
    } else {
        format!("{:.3}ms", ns as f64 / 1e6)
    }
}

fn fmt_uj(uj: f64) -> String {
    if uj >= 1e6 {
        format!("{:.3}J", uj / 1e6)
    } else {
        format!("{:.3}mJ", uj / 1e3)
    }
}

/// A task's total CPU ns from its accounting reports (`tasks --sort cost`).
pub(crate) fn task_cpu_ns(events: &[Event]) -> u64 {
    cost_rows(events).iter().map(|r| r.get(Resource::Cpu)).sum()
}

/// `show TASK --cost`: per activity, per host/process/thread, each resource with its share of
/// the task's total.
pub(crate) fn render_task_cost(events: &[Event]) -> String {
    let mut rows = cost_rows(events);
    if rows.is_empty() {
        return "cost: no accounting reports for this task (run `sightline account` while it runs)\n"
            .into();
    }
    reports::sort_by_cpu(&mut rows);
    let totals = reports::totals(&rows);
    let total = |r: Resource| totals.get(r);
    let total_e = totals.energy_uj;
    let share = |v: u64, t: u64| {
        if t == 0 {
            "-".to_string()
        } else {
            format!("{:.0}%", 100.0 * v as f64 / t as f64)
        }
    };
    let mut out = format!(
        "cost: CPU {} · read {} B · write {} B · net {} B out {} B in · block {} B · {} faults · energy {}\n",
        fmt_ns(total(Resource::Cpu)),
        total(Resource::ReadBytes),
        total(Resource::WriteBytes),
        total(Resource::NetTxBytes),
        total(Resource::NetRxBytes),
        total(Resource::BlockBytes),
        total(Resource::PageFaults),
        fmt_uj(total_e as f64),
    );
    out.push_str(&format!(
        "{:<20} {:<16} {:>8} {:>8} {:>12} {:>5} {:>10} {:>5} {:>10} {:>5} {:>12} {:>5}\n",
        "ACTIVITY", "HOST", "PID", "TID", "CPU", "%", "READ", "%", "NET", "%", "ENERGY", "%"
    ));
    let net_total = total(Resource::NetTxBytes) + total(Resource::NetRxBytes);
    for r in &rows {
        let net = r.get(Resource::NetTxBytes) + r.get(Resource::NetRxBytes);
        out.push_str(&format!(
            "{:<20} {:<16} {:>8} {:>8} {:>12} {:>5} {:>10} {:>5} {:>10} {:>5} {:>12} {:>5}\n",
            or_dash(&r.activity),
            or_dash(&r.host),
            r.pid,
            r.tid,
            fmt_ns(r.get(Resource::Cpu)),
            share(r.get(Resource::Cpu), total(Resource::Cpu)),
            r.get(Resource::ReadBytes),
            share(r.get(Resource::ReadBytes), total(Resource::ReadBytes)),
            net,
            share(net, net_total),
            fmt_uj(r.energy_uj as f64),
            share(r.energy_uj, total_e),
        ));
    }
    out
}

/// Options of `sightline cost`.
#[derive(Debug, clap::Args)]
pub struct CostArgs {
    /// Group by these, comma-separated: `activity`, `host`, `process`, `task`.
    #[arg(long, value_name = "KEYS", default_value = "activity,host")]
    pub by: String,
    #[command(flatten)]
    pub db: DbArg,
}

/// `sightline cost --by activity,host`: every stored accounting report, summed per group.
pub fn cost(args: CostArgs) -> anyhow::Result<ExitCode> {
    let keys: Vec<String> = args.by.split(',').map(|k| k.trim().to_string()).collect();
    for k in &keys {
        anyhow::ensure!(
            ["activity", "host", "process", "task"].contains(&k.as_str()),
            "--by {k:?}: expected activity, host, process or task"
        );
    }
    let store = crate::causal::open_existing(&args.db.spec()?)?;
    let filter = TaskFilter {
        operation: Some(causal_account::REPORT_LABEL.to_string()),
        ..TaskFilter::default()
    };
    let tasks = store.tasks(&filter)?;
    let mut groups: BTreeMap<Vec<String>, CostRow> = BTreeMap::new();
    for t in &tasks {
        let events = store.load_task(&t.task_id)?;
        for r in cost_rows(&events) {
            let g: Vec<String> = keys
                .iter()
                .map(|k| match k.as_str() {
                    "activity" => or_dash(&r.activity).to_string(),
                    "host" => or_dash(&r.host).to_string(),
                    "process" => format!("{}/{}", or_dash(&r.host), r.pid),
                    _ => t.task_id.clone(),
                })
                .collect();
            let e = groups.entry(g).or_default();
            for (res, v) in &r.by_resource {
                *e.by_resource.entry(*res).or_default() += v;
            }
            e.energy_uj += r.energy_uj;
        }
    }
    let head: Vec<String> = keys.iter().map(|k| k.to_uppercase()).collect();
    let mut out = String::new();
    for h in &head {
        out.push_str(&format!("{h:<24} "));
    }
    out.push_str(&format!(
        "{:>12} {:>12} {:>12} {:>12} {:>12}\n",
        "CPU", "READ", "NET", "BLOCK", "ENERGY"
    ));
    for (g, r) in &groups {
        for v in g {
            out.push_str(&format!("{v:<24} "));
        }
        out.push_str(&format!(
            "{:>12} {:>12} {:>12} {:>12} {:>12}\n",
            fmt_ns(r.get(Resource::Cpu)),
            r.get(Resource::ReadBytes),
            r.get(Resource::NetTxBytes) + r.get(Resource::NetRxBytes),
            r.get(Resource::BlockBytes),
            fmt_uj(r.energy_uj as f64),
        ));
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_secs("500ms").unwrap().as_millis(), 500);
        assert_eq!(parse_secs("2m").unwrap().as_secs(), 120);
        assert_eq!(parse_secs("3").unwrap().as_secs(), 3);
        assert!(parse_secs("-1s").is_err());
    }
}
