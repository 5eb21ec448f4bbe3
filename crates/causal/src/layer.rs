//! A `tracing` layer: code instrumented with the `tracing` crate reports X-Trace events without
//! changes.
//!
//! ```no_run
//! use tracing_subscriber::prelude::*;
//! tracing_subscriber::registry().with(causal::layer::CausalLayer::new()).init();
//! ```
//!
//! # Mapping
//! - Entering a span reports an event labelled with the span's name and `span: enter` (plus the
//!   span's fields on its first entry); exiting reports `span: exit`.
//! - A span keeps its own context: it starts as its parent's (explicit parent) or the thread's
//!   (contextual), becomes the thread's current context while the span is entered, and keeps the
//!   events reported inside. So an async task instrumented with a span carries its causality
//!   across polls and threads.
//! - When a span exits and the context restored is of the same task, the span's last event is
//!   joined into it: sequential children chain, children that ran concurrently (e.g. two futures
//!   polled by `join!`) both become parents of the parent's next event (a fan-in).
//! - `follows_from(a, b)` joins `b`'s context into `a`'s: `a`'s next event gets an extra edge.
//! - `tracing` events (`info!` …) become events labelled with their message, with their fields.
//! - A root span entered with no current context starts a new task (head sampling applies), unless
//!   disabled with [`CausalLayer::start_tasks`].

use std::borrow::Cow;
use std::fmt;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context as LayerCx, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::context::{self, Context, Fields, Parents, SmallFields, SmallValue, Value};

/// The layer (see the module docs).
#[derive(Debug, Clone)]
pub struct CausalLayer {
    start_tasks: bool,
}

impl Default for CausalLayer {
    fn default() -> Self {
        CausalLayer::new()
    }
}

impl CausalLayer {
    /// A layer that starts a task at a root span entered without a context.
    pub fn new() -> CausalLayer {
        CausalLayer { start_tasks: true }
    }

    /// Whether a root span entered with no current context starts a new task (default true).
    pub fn start_tasks(mut self, yes: bool) -> CausalLayer {
        self.start_tasks = yes;
        self
    }
}

/// The key/values an entry reports before the span's own: `span: enter`.
fn enter_fields() -> Gathered {
    Gathered::Small(span_mark("enter"))
}

/// Key/values gathered from a span or an event: in a compact event's form while they fit one
/// (nothing else to build or convert), else in the general form.
enum Gathered {
    Small(SmallFields),
    Full(Fields),
}

impl Gathered {
    fn push(&mut self, k: &'static str, v: Value) {
        match self {
            Gathered::Small(small) => {
                let v = match SmallValue::of(v) {
                    Ok(sv) => match small.push((k, sv)) {
                        Ok(()) => return,
                        Err(()) => sv.value(),
                    },
                    Err(v) => v,
                };
                let mut f = small.into_fields();
                f.push(k, v);
                *self = Gathered::Full(f);
            }
            Gathered::Full(f) => f.push(k, v),
        }
    }

    /// The key/values by value, in order.
    fn into_pairs(self) -> impl Iterator<Item = (&'static str, Value)> {
        match self {
            Gathered::Small(s) => s.into_fields(),
            Gathered::Full(f) => f,
        }
        .into_pairs()
    }

    /// Reports an event labelled `label` with these key/values through the thread's context.
    fn report(self, label: Cow<'static, str>) {
        match self {
            Gathered::Small(s) => context::report_small(label, s),
            Gathered::Full(f) => context::report_fields(label, f),
        };
    }
}

/// Per-span state kept in the registry's extensions: kept small, since it is boxed into them
/// at each span's creation.
struct SpanState {
    ctx: Option<Context>,
    /// The parents of the context the span was created from (`None`: created without one), to
    /// tell on exit whether the context being restored moved on meanwhile (concurrent siblings:
    /// join) or not (sequential: replace).
    created_from: Option<Parents>,
    /// Thread contexts saved at each entry: the first inline (no allocation), re-entries of an
    /// already entered span in `saved_more`.
    saved: Option<Option<Context>>,
    saved_more: Vec<Option<Context>>,
    /// The span's last event(s) joined into the restored context at its previous exit; superseded
    /// by the span's next exit, so removed from the restored context then.
    contributed: Option<Parents>,
    /// `span: enter` and the fields recorded before the first entry, reported with it (then
    /// `span: enter` and the fields recorded since; `None`: no field recorded since). Up to 4
    /// inline; integers and booleans are kept as values (formatted by the reporter thread, as
    /// `Debug` would), so a span with such fields allocates nothing here. Floats and other types
    /// are formatted with `Debug` at once.
    fields: Option<Gathered>,
}

/// `span: enter` or `span: exit` alone, as a compact event's key/values.
fn span_mark(what: &'static str) -> SmallFields {
    SmallFields::One(("span", SmallValue::Str(what)))
}

struct FieldCollector {
    fields: Gathered,
    message: Option<String>,
}

impl FieldCollector {
    fn new() -> FieldCollector {
        FieldCollector::with(Gathered::Small(SmallFields::Zero))
    }

    /// A collector whose fields start with `fields` (the `span` or `level` key/value reported
    /// first), so that the event's fields need no second gathering.
    fn with(fields: Gathered) -> FieldCollector {
        FieldCollector {
            fields,
            message: None,
        }
    }

    fn value(&mut self, field: &Field, value: Value) {
        self.fields.push(field.name(), value);
    }
}

impl Visit for FieldCollector {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = Some(format!("{value:?}"));
        } else {
            self.value(field, Value::Str(Cow::Owned(format!("{value:?}"))));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_string());
        } else {
            self.value(field, Value::Str(Cow::Owned(value.to_string())));
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.value(field, Value::U64(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.value(field, Value::I64(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.value(field, Value::Bool(value));
    }
}

impl<S> Layer<S> for CausalLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, cx: LayerCx<'_, S>) {
        let Some(span) = cx.span(id) else { return };
        let ctx = match attrs.parent() {
            Some(p) => cx.span(p).and_then(|p| {
                p.extensions()
                    .get::<SpanState>()
                    .and_then(|s| s.ctx.clone())
            }),
            None if attrs.is_contextual() => Context::current(),
            None => None,
        };
        let mut fc = FieldCollector::with(enter_fields());
        attrs.record(&mut fc);
        let created_from = ctx.as_ref().map(Context::parent_ids);
        span.extensions_mut().insert(SpanState {
            ctx,
            created_from,
            saved: None,
            saved_more: Vec::new(),
            contributed: None,
            fields: Some(fc.fields),
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, cx: LayerCx<'_, S>) {
        let Some(span) = cx.span(id) else { return };
        let mut fc = FieldCollector::new();
        values.record(&mut fc);
        if let Some(st) = span.extensions_mut().get_mut::<SpanState>() {
            let fields = st.fields.get_or_insert_with(enter_fields);
            for (k, v) in fc.fields.into_pairs() {
                fields.push(k, v);
            }
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, cx: LayerCx<'_, S>) {
        let other = cx.span(follows).and_then(|s| {
            s.extensions()
                .get::<SpanState>()
                .and_then(|s| s.ctx.clone())
        });
        let (Some(span), Some(other)) = (cx.span(id), other) else {
            return;
        };
        if let Some(st) = span.extensions_mut().get_mut::<SpanState>() {
            match st.ctx.as_mut() {
                Some(c) => c.join_in(&other),
                None => st.ctx = Some(other),
            }
        }
    }

    fn on_enter(&self, id: &Id, cx: LayerCx<'_, S>) {
        let Some(span) = cx.span(id) else { return };
        let name = span.name();
        let mut ext = span.extensions_mut();
        let Some(st) = ext.get_mut::<SpanState>() else {
            return;
        };
        let mut ctx = st.ctx.take();
        if ctx.is_none() && self.start_tasks && span.parent().is_none() {
            let sampled = crate::reporter::sample_new_task();
            ctx = Some(Context::new_task(sampled));
        }
        let prev = context::set_current(ctx);
        match st.saved {
            None => st.saved = Some(prev),
            Some(_) => st.saved_more.push(prev),
        }
        let fields = st.fields.take();
        drop(ext);
        fields
            .unwrap_or_else(enter_fields)
            .report(Cow::Borrowed(name));
    }

    fn on_exit(&self, id: &Id, cx: LayerCx<'_, S>) {
        let Some(span) = cx.span(id) else { return };
        context::report_small(Cow::Borrowed(span.name()), span_mark("exit"));
        let mut ext = span.extensions_mut();
        let Some(st) = ext.get_mut::<SpanState>() else {
            return;
        };
        let restored = match st.saved_more.pop() {
            Some(prev) => prev,
            None => st.saved.take().flatten(),
        };
        // The span's context is read in place and moved out by the one swap that restores
        // the thread's: one thread-local access, one clone of the context.
        let (contributed, created_from) = (&mut st.contributed, &st.created_from);
        st.ctx = context::restore_current(restored, |restored, mine| {
            let (Some(r), Some(m)) = (restored.as_mut(), mine) else {
                return false;
            };
            if r.task_id() != m.task_id() {
                return false;
            }
            if let Some(c) = contributed.as_ref() {
                r.remove_parents(c.as_slice());
            }
            let unchanged = created_from
                .as_ref()
                .is_some_and(|c| c.as_slice() == r.parents());
            *contributed = Some(m.parent_ids());
            if r.parents().is_empty() || unchanged {
                // Nothing else happened on the restored path since this span began: continue
                // from the span's last event (the thread's context stays the span's).
                return true;
            }
            // A sibling ran meanwhile: both paths lead to the parent's next event.
            r.join_in(m);
            false
        });
    }

    fn on_event(&self, event: &Event<'_>, _cx: LayerCx<'_, S>) {
        // One thread-local load, not a clone of the current context.
        if !context::current_is_sampled() {
            return;
        }
        let level = event.metadata().level().as_str();
        let mut fc = FieldCollector::with(Gathered::Small(SmallFields::One((
            "level",
            SmallValue::Str(level),
        ))));
        event.record(&mut fc);
        let label: Cow<'static, str> = match fc.message {
            Some(m) => Cow::Owned(m),
            None => Cow::Borrowed(event.metadata().name()),
        };
        fc.fields.report(label);
    }
}
