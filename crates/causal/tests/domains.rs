//! A process that belongs to an administrative domain ([`causal::Config::destination`]): every
//! event it reports names its domain's collector in its metadata (X-Trace's Destination option),
//! so does the metadata it propagates, and the first event after metadata from another domain
//! records where that domain's collector is (`EdgeDestination`). Other options travel on. Its own
//! binary: the reporter is started once per process.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use causal::metadata::{destination_in, options_with_destination};
use causal::{Context, Metadata, OpId, Report, TaskId};

const OWN: &str = "tcp://collector.b.example:7831";
const UPSTREAM: &str = "tls://collector.a.example:7832";

fn edge_destination(r: &Report) -> Option<&str> {
    r.fields
        .iter()
        .find(|(k, _)| k == "EdgeDestination")
        .map(|(_, v)| v.as_str())
}

#[test]
fn events_name_their_domain_and_the_first_after_a_crossing_names_the_one_before() {
    let seen: Arc<Mutex<Vec<Report>>> = Arc::default();
    let sink_seen = seen.clone();
    causal::reporter::init(causal::Config {
        sink: causal::Sink::Callback(Arc::new(move |r: &Report| {
            sink_seen.lock().unwrap().push(r.clone());
        })),
        destination: Some(OWN.into()),
        flush_interval: Duration::from_millis(2),
        ..causal::Config::default()
    })
    .unwrap();

    // A task started in this domain.
    let mut local = causal::start_task("local", []);
    local.report("local step", []);
    let out = local.metadata().unwrap();
    assert_eq!(out.destination(), Some(OWN));

    // A task that came from domain A, with a severity option (0xCE) beside A's destination.
    let opts = options_with_destination(&[0xCE, 1, 5], UPSTREAM).unwrap();
    let task = TaskId::from_u64(0x0a0b_0c0d_0e0f_1011).unwrap();
    let md = Metadata::with_options(task, OpId::new(0x77), &opts).unwrap();
    let mut remote = Context::from_metadata(&md);
    remote.report("arrived", []);
    remote.report("worked", []);
    let onward = remote.metadata().unwrap();
    assert_eq!(
        onward.destination(),
        Some(OWN),
        "the next hop learns this domain"
    );
    assert_eq!(
        &onward.options_bytes()[..3],
        &[0xCE, 1, 5],
        "other options carried"
    );

    // An answer from domain A joined into the local task: the next event names A.
    let answer_opts = options_with_destination(&[], UPSTREAM).unwrap();
    let answer = Metadata::with_options(local.task_id(), OpId::new(0x99), &answer_opts).unwrap();
    local.join_in(&Context::from_metadata(&answer));
    local.report("answered", []);
    local.report("after", []);

    assert!(causal::flush(Duration::from_secs(5)));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 6);
    for r in seen.iter() {
        assert_eq!(
            destination_in(r.metadata.options_bytes()),
            Some(OWN),
            "{} names its domain",
            r.label.as_deref().unwrap_or("")
        );
    }
    let by_label = |l: &str| {
        seen.iter()
            .find(|r| r.label.as_deref() == Some(l))
            .unwrap_or_else(|| panic!("{l} reported"))
    };
    assert_eq!(edge_destination(by_label("local")), None);
    assert_eq!(edge_destination(by_label("local step")), None);
    assert_eq!(edge_destination(by_label("arrived")), Some(UPSTREAM));
    assert_eq!(edge_destination(by_label("worked")), None);
    assert_eq!(by_label("arrived").edges, [OpId::new(0x77)]);
    assert_eq!(edge_destination(by_label("answered")), Some(UPSTREAM));
    assert_eq!(
        by_label("answered").edges.len(),
        2,
        "the local step and the answer"
    );
    assert_eq!(edge_destination(by_label("after")), None);
    assert_eq!(
        &by_label("arrived").metadata.options_bytes()[..3],
        &[0xCE, 1, 5]
    );
}
