//! `openat` events as Rust structs, streamed (tokio).
//!
//! `cargo run -p sightline-probe --example opens [COMMAND ARGS...]` (as root): the opens of the
//! command (created held until the probe is attached), or of every process for 3 seconds.

use serde::Deserialize;
use sightline_probe::{Event, Script, Target};
use tokio_stream::StreamExt;

/// One `openat(2)` call, as the clause's `printf()` records it.
#[derive(Debug, Deserialize)]
struct Open {
    pid: i32,
    command: String,
    path: String,
    flags: i64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let words: Vec<String> = std::env::args().skip(1).collect();
    let (target, filter) = if words.is_empty() {
        (Target::System, "")
    } else {
        (Target::command(words)?, "/pid == $target/")
    };
    let program = Script::new(format!(
        "syscall::openat:entry {filter} {{ printf(\"%d %s %s %d\", pid, execname, copyinstr(arg1), arg2); }}"
    ))
    .compile(target.clone())?;
    for f in &program.schema().clauses[0].fields {
        eprintln!("field {} : {}", f.name, f.ty);
    }
    let mut events = program.run()?.into_stream();
    if target == Target::System {
        let handle = events.handle();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            handle.stop();
        });
    }
    while let Some(event) = events.next().await {
        match event? {
            Event::Record(r) => {
                let o: Open = r.decode()?;
                println!(
                    "{:>7} {:<16} {} (flags {:#o})",
                    o.pid, o.command, o.path, o.flags
                );
            }
            Event::Drops(d) => eprintln!("{}", d.message),
            Event::Exit(e) => eprintln!("{:?}", e.reason),
            _ => {}
        }
    }
    Ok(())
}
