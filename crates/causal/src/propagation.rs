//! Carrying a context across process boundaries: HTTP headers and environment variables.
//!
//! Headers (`http::HeaderMap`, the type hyper, axum and reqwest use):
//! - `X-Trace`: X-Trace metadata, text form (uppercase hex), sent for sampled tasks;
//! - `traceparent`, `tracestate`: W3C Trace Context; `baggage`: W3C Baggage.
//!
//! On extraction `X-Trace` wins when present and valid (it carries the options); otherwise
//! `traceparent` is used. `tracestate` and `baggage` are carried either way. A response can carry
//! the server's latest event back the same way, so that the caller can join it ([`join_response`]):
//! that is how X-Trace draws the edge from a callee's last event to the caller's next one.
//!
//! Environment (child processes): `SIGHTLINE_XTRACE` (X-Trace metadata) and, following the
//! OpenTelemetry proposal for environment carriers, `TRACEPARENT`, `TRACESTATE`, `BAGGAGE`.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::context::Context;
use crate::metadata::Metadata;
use crate::w3c::TraceParent;

/// The X-Trace header name (`X-Trace`; HTTP header names are case-insensitive).
pub const XTRACE_HEADER: HeaderName = HeaderName::from_static("x-trace");
/// `traceparent`.
pub const TRACEPARENT_HEADER: HeaderName = HeaderName::from_static("traceparent");
/// `tracestate`.
pub const TRACESTATE_HEADER: HeaderName = HeaderName::from_static("tracestate");
/// `baggage`.
pub const BAGGAGE_HEADER: HeaderName = HeaderName::from_static("baggage");

/// Environment variable holding X-Trace metadata for a child process.
pub const XTRACE_ENV: &str = "SIGHTLINE_XTRACE";
/// Environment variable holding a W3C traceparent for a child process.
pub const TRACEPARENT_ENV: &str = "TRACEPARENT";
/// Environment variable holding a W3C tracestate for a child process.
pub const TRACESTATE_ENV: &str = "TRACESTATE";
/// Environment variable holding W3C baggage for a child process.
pub const BAGGAGE_ENV: &str = "BAGGAGE";

/// The header values (or environment values) a context is sent as: (name, value) pairs.
fn carrier_values(ctx: &Context) -> [Option<(usize, String)>; 4] {
    [
        ctx.metadata().map(|m| (0, m.to_text())),
        ctx.traceparent().map(|t| (1, t.to_string())),
        ctx.tracestate().map(|s| (2, s.to_string())),
        ctx.baggage().map(|s| (3, s.to_string())),
    ]
}

/// Builds a context from carrier values (X-Trace text, traceparent, tracestate, baggage).
fn from_values(
    xtrace: Option<&str>,
    traceparent: Option<&str>,
    tracestate: Option<&str>,
    baggage: Option<&str>,
) -> Option<Context> {
    let tp = traceparent.and_then(|v| TraceParent::parse(v).ok());
    let md = xtrace.and_then(|v| Metadata::parse_text(v).ok());
    let mut ctx = match (md, tp) {
        (Some(md), tp) => {
            let mut c = Context::from_metadata(&md);
            // An unsampled traceparent of the same task makes the task unsampled here too.
            if let Some(tp) = tp
                && tp.task_id() == md.task_id()
                && !tp.sampled()
            {
                c = Context::from_traceparent(&tp, None, None);
            }
            c
        }
        (None, Some(tp)) => Context::from_traceparent(&tp, None, None),
        (None, None) => return None,
    };
    ctx.set_carried(tracestate, baggage);
    Some(ctx)
}

/// Writes `ctx` into `headers` (`X-Trace` when sampled, `traceparent`, and `tracestate`/`baggage`
/// when carried), replacing earlier values. Writes nothing before the task's first event.
pub fn inject(ctx: &Context, headers: &mut HeaderMap) {
    let names = [
        XTRACE_HEADER,
        TRACEPARENT_HEADER,
        TRACESTATE_HEADER,
        BAGGAGE_HEADER,
    ];
    for (i, v) in carrier_values(ctx).into_iter().flatten() {
        if let Ok(v) = HeaderValue::from_str(&v) {
            headers.insert(names[i].clone(), v);
        }
    }
}

/// [`inject`] of the thread's current context; does nothing without one.
pub fn inject_current(headers: &mut HeaderMap) {
    if let Some(c) = Context::current() {
        inject(&c, headers);
    }
}

/// Reads a context from `headers`; `None` when neither a valid `X-Trace` nor a valid
/// `traceparent` is present (invalid values are ignored, as W3C Trace Context §3.2 asks).
///
/// A `traceparent` sent twice is invalid and ignored. Several `tracestate` (or `baggage`) header
/// fields are combined into one list, in order, as W3C Trace Context §3.3.1.1 (and W3C Baggage
/// §3.2) require; the combined value must then pass the same checks.
pub fn extract(headers: &HeaderMap) -> Option<Context> {
    let get = |n: &HeaderName| headers.get(n).and_then(|v| v.to_str().ok());
    // Two traceparent fields are an invalid traceparent (W3C's test suite,
    // `test_traceparent_duplicated`: the receiver restarts the trace).
    let traceparent = if headers.get_all(&TRACEPARENT_HEADER).iter().nth(1).is_some() {
        None
    } else {
        get(&TRACEPARENT_HEADER)
    };
    let (tracestate, baggage) = (
        combined(headers, &TRACESTATE_HEADER),
        combined(headers, &BAGGAGE_HEADER),
    );
    from_values(
        get(&XTRACE_HEADER),
        traceparent,
        tracestate.as_deref(),
        baggage.as_deref(),
    )
}

/// The non-empty values of every `name` field joined with `,` (borrowed when there is one);
/// `None` when there is none or one is not visible ASCII.
fn combined<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<std::borrow::Cow<'a, str>> {
    let mut out: Option<std::borrow::Cow<'a, str>> = None;
    for v in headers.get_all(name) {
        let v = v.to_str().ok()?;
        // Empty fields add no member (W3C's test suite sends them; they must not void the rest).
        if v.trim_matches([' ', '\t']).is_empty() {
            continue;
        }
        match &mut out {
            None => out = Some(std::borrow::Cow::Borrowed(v)),
            Some(o) => {
                let o = o.to_mut();
                o.push(',');
                o.push_str(v);
            }
        }
    }
    out
}

/// Joins the context a response carries (the callee's latest event) into `ctx`, so that the
/// caller's next event has an edge from it. Does nothing when the response carries none or
/// another task's.
pub fn join_response(ctx: &mut Context, headers: &HeaderMap) {
    if let Some(remote) = extract(headers) {
        ctx.join_in(&remote);
    }
}

/// The environment variables that carry `ctx` to a child process.
pub fn env_vars(ctx: &Context) -> Vec<(&'static str, String)> {
    let names = [XTRACE_ENV, TRACEPARENT_ENV, TRACESTATE_ENV, BAGGAGE_ENV];
    carrier_values(ctx)
        .into_iter()
        .flatten()
        .map(|(i, v)| (names[i], v))
        .collect()
}

/// Sets the variables that carry the thread's current context on `cmd` (and removes stale ones
/// inherited from this process when there is no context).
pub fn command_with_current(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for n in [XTRACE_ENV, TRACEPARENT_ENV, TRACESTATE_ENV, BAGGAGE_ENV] {
        cmd.env_remove(n);
    }
    if let Some(c) = Context::current() {
        cmd.envs(env_vars(&c));
    }
    cmd
}

/// The context this process was started with (from the variables above), if any.
pub fn from_env() -> Option<Context> {
    let get = |n: &str| std::env::var(n).ok();
    let (x, t, s, b) = (
        get(XTRACE_ENV),
        get(TRACEPARENT_ENV),
        get(TRACESTATE_ENV),
        get(BAGGAGE_ENV),
    );
    from_values(x.as_deref(), t.as_deref(), s.as_deref(), b.as_deref())
}

/// Makes the context this process was started with current on this thread (typically first thing
/// in `main`). Returns true when there was one.
pub fn attach_from_env() -> bool {
    match from_env() {
        Some(c) => {
            crate::context::set_current(Some(c));
            true
        }
        None => false,
    }
}
