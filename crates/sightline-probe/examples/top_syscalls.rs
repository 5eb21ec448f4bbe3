//! System calls per process, every second: the top 5 of each second from the typed aggregation.
//!
//! `cargo run -p sightline-probe --example top_syscalls [SECONDS]` (as root; default 5 s).
//! The aggregation keeps counting; each on-demand snapshot is compared with the previous one.

use std::collections::HashMap;
use std::time::Duration;

use sightline_probe::{Event, Script, Target, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u32 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(5);
    let program = Script::new("syscall:::entry { @calls[pid, execname] = count(); }")
        .compile(Target::System)?;
    let run = program.run()?;
    let handle = run.handle();
    std::thread::spawn(move || {
        for _ in 0..seconds {
            std::thread::sleep(Duration::from_secs(1));
            handle.snapshot();
        }
        handle.stop();
    });
    let mut before: HashMap<(i64, String), i128> = HashMap::new();
    let mut second = 0;
    for event in run {
        match event? {
            Event::Aggregation(a) => {
                second += 1;
                let mut now: Vec<((i64, String), i128)> = Vec::new();
                for e in &a.entries {
                    let (Some(Value::Int(pid)), Some(Value::Str(name))) =
                        (e.keys.first(), e.keys.get(1))
                    else {
                        continue;
                    };
                    let key = (pid.as_i64(), name.clone());
                    let total = e.value.unwrap_or(0);
                    let delta = total - before.get(&key).copied().unwrap_or(0);
                    before.insert(key.clone(), total);
                    now.push((key, delta));
                }
                now.sort_by_key(|e| std::cmp::Reverse(e.1));
                println!("second {second}:");
                for ((pid, name), n) in now.iter().take(5) {
                    println!("  {pid:>7} {name:<16} {n:>8}");
                }
            }
            Event::Drops(d) => eprintln!("{}", d.message),
            Event::Exit(_) => break,
            _ => {}
        }
    }
    Ok(())
}
