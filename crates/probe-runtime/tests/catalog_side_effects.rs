//! Building the probe catalog has no side effects on other processes (issue 21): the repair of
//! USDT semaphores that a crashed Sightline left behind writes to the processes its record names,
//! so it runs when USDT probes are attached, not when a catalog is built (as `FullCatalog::new()`
//! did).

use std::process::Command;

use probe_runtime::catalog;
use probe_sema::{ProbeCatalog, ProbeDescPattern};
use probe_user::AbsAddr;
use probe_user::provider::UserSites;
use probe_user::semaphore;

/// Kills and reaps the child on every exit path of the test.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn building_the_catalog_does_not_repair_stale_semaphores_of_other_processes() {
    if !test_support::privileged("writes another process's memory through /proc/PID/mem") {
        return;
    }
    // The "other process": a sleep, once it runs its own image.
    let victim = Child(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = victim.0.id();
    let maps = (0..2000)
        .find_map(|_| {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
            if exe.file_name()? == "sleep" && maps.contains("[stack]") {
                Some(maps)
            } else {
                std::thread::sleep(std::time::Duration::from_millis(1));
                None
            }
        })
        .expect("sleep started");
    // The lowest page of its stack mapping: writable, and far below anything sleep touches.
    let stack = maps.lines().find(|l| l.ends_with("[stack]")).unwrap();
    let addr = AbsAddr(u64::from_str_radix(stack.split('-').next().unwrap(), 16).unwrap());
    let before = semaphore::adjust(pid, addr, 1).unwrap();
    assert!(before >= 1);
    // A record of a Sightline that died (an exited process) saying it incremented that word.
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    let dead_start = semaphore::start_time(dead_pid).unwrap_or(1);
    dead.wait().unwrap();
    let start = semaphore::start_time(pid).unwrap();
    let record = semaphore::default_record_dir().join(format!("{dead_pid}.sem"));
    std::fs::write(
        &record,
        format!("{dead_pid} {dead_start}\n{pid} {start} {:x}\n", addr.0),
    )
    .unwrap();

    // Build the system catalog and use it: kernel, pid and USDT providers.
    let c = catalog::system(UserSites::new());
    assert_eq!(
        c.matching(&ProbeDescPattern::new("", "", "", "BEGIN"))
            .len(),
        1
    );
    let _ = c.matching(&ProbeDescPattern::new(
        "python",
        "/usr/bin/python3.11",
        "",
        "",
    ));
    let _ = c.names();
    drop(c);

    let after = semaphore::read(pid, addr).unwrap();
    let record_kept = record.exists();
    // Clean up before asserting: nothing of this test may be repaired later by someone else.
    let _ = std::fs::remove_file(&record);
    let _ = semaphore::adjust(pid, addr, -1);
    assert_eq!(after, before, "the catalog wrote to process {pid}");
    assert!(record_kept, "the catalog consumed the crash record");
}
