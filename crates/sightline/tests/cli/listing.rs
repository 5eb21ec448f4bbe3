//! `sightline probe -l` lists each description's probes in ID order, as dtrace(1M) does.
//! Regression: tracefs directory order printed sched's IDs as 100380 before 100379.

#[test]
fn listed_probes_are_in_id_order() {
    if !test_support::privileged("reads tracefs (mounting it if needed)") {
        return;
    }
    let out = crate::sightline()
        .args(["probe", "-l", "-n", "sched:::", "-n", "dtrace:::"])
        .output()
        .expect("run sightline probe -l");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<(u32, &str)> = text
        .lines()
        .skip(1)
        .map(|l| {
            let mut f = l.split_whitespace();
            (
                f.next().and_then(|id| id.parse().ok()).expect("numeric ID"),
                f.next().expect("provider"),
            )
        })
        .collect();
    let sched: Vec<u32> = rows
        .iter()
        .filter(|(_, p)| *p == "sched")
        .map(|(id, _)| *id)
        .collect();
    assert!(sched.len() > 10, "few sched tracepoints listed:\n{text}");
    assert!(
        sched.windows(2).all(|w| w[0] < w[1]),
        "sched IDs not ascending: {sched:?}"
    );
    // Each description keeps its place: sched's rows first, then dtrace's BEGIN END ERROR.
    let tail: Vec<(u32, &str)> = rows[sched.len()..].to_vec();
    assert_eq!(
        tail,
        vec![(1, "dtrace"), (2, "dtrace"), (3, "dtrace")],
        "{text}"
    );
}
