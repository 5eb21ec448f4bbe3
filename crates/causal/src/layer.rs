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
use std::collections::HashMap;
use std::fmt;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context as LayerCx, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::context::{self, Context, Fields, Parents, SmallFields, SmallValue, Value};

/// The layer (see the module docs).
///
/// It keeps each span's state in a table of its own, keyed by span id (not in the Registry's
/// extensions): creating, entering and exiting a span then take no Registry lookup and no
/// extension lock, and the state's one box is all a span allocates (see docs/causal-cost.md,
/// session 7). A span's entry is removed when it closes. A clone is a new layer with an empty
/// table: span ids belong to the subscriber a layer is installed in.
#[derive(Debug)]
pub struct CausalLayer {
    start_tasks: bool,
    spans: SpanTable,
}

impl Clone for CausalLayer {
    fn clone(&self) -> CausalLayer {
        CausalLayer {
            start_tasks: self.start_tasks,
            spans: SpanTable::new(),
        }
    }
}

impl Default for CausalLayer {
    fn default() -> Self {
        CausalLayer::new()
    }
}

impl CausalLayer {
    /// A layer that starts a task at a root span entered without a context.
    pub fn new() -> CausalLayer {
        CausalLayer {
            start_tasks: true,
            spans: SpanTable::new(),
        }
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
    /// Adds a key/value that holds no owned string (integers and booleans from a visitor).
    /// Inlined into the visitor: the compact form's push is a few moves; the general form is
    /// reached out of line.
    #[inline(always)]
    fn push_small(&mut self, k: &'static str, v: SmallValue) {
        if let Gathered::Small(small) = self
            && small.push((k, v)).is_ok()
        {
            return;
        }
        self.push_general(k, v.value());
    }

    /// Adds a key/value in the general form (converting a full compact form first).
    #[cold]
    #[inline(never)]
    fn push_general(&mut self, k: &'static str, v: Value) {
        match self {
            Gathered::Small(small) => {
                let mut f = small.into_fields();
                f.push(k, v);
                *self = Gathered::Full(f);
            }
            Gathered::Full(f) => f.push(k, v),
        }
    }

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

    /// Reports an event labelled `label` with these key/values through the thread's context;
    /// its OpId, `None` when nothing was reported (no context, or an unsampled one).
    fn report(self, label: Cow<'static, str>) -> Option<crate::OpId> {
        match self {
            Gathered::Small(s) => context::report_small(label, s),
            Gathered::Full(f) => context::report_fields(label, f),
        }
    }
}

/// The span states of one layer, by span id: shards each behind its own lock, so that threads
/// working on different spans rarely meet. States are boxed: an entry then moves a pointer, not
/// the state. Entries are removed when their span closes (`on_close`); a shard keeps its
/// capacity, so a steady number of live spans allocates nothing.
struct SpanTable {
    shards: Box<[std::sync::Mutex<Shard>]>,
}

/// One shard: span id to its state. The first [`FEW`] live spans sit in a short list scanned
/// in order (an id compared per entry: cheaper than a hash map's probe for the one or few live
/// spans a shard holds most of the time, see docs/causal-cost.md, session 8); the rest in a map.
struct Shard {
    few: Vec<(u64, Box<SpanState>)>,
    many: HashMap<u64, Box<SpanState>, IdHash>,
}

/// Shards of the table: a power of two.
const SHARDS: usize = 64;

/// Live spans a shard keeps in its list (room for them from the start) before using its map.
const FEW: usize = 8;

impl Shard {
    fn new() -> Shard {
        Shard {
            few: Vec::with_capacity(FEW),
            many: HashMap::default(),
        }
    }

    #[inline]
    fn get_mut(&mut self, key: u64) -> Option<&mut SpanState> {
        match self.few.iter_mut().find(|(k, _)| *k == key) {
            Some((_, st)) => Some(st),
            None if self.many.is_empty() => None,
            None => self.many.get_mut(&key).map(|st| &mut **st),
        }
    }

    #[inline]
    fn insert(&mut self, key: u64, st: Box<SpanState>) {
        // An id is live once: a span's entry is removed when it closes, before the Registry
        // can hand its id out again. A repeated id replaces the old entry all the same.
        if let Some(e) = self.few.iter_mut().find(|(k, _)| *k == key) {
            e.1 = st;
        } else if self.few.len() < FEW && (self.many.is_empty() || !self.many.contains_key(&key)) {
            self.few.push((key, st));
        } else {
            self.many.insert(key, st);
        }
    }

    #[inline]
    fn remove(&mut self, key: u64) -> Option<Box<SpanState>> {
        match self.few.iter().position(|(k, _)| *k == key) {
            Some(i) => Some(self.few.swap_remove(i).1),
            None if self.many.is_empty() => None,
            None => self.many.remove(&key),
        }
    }
}

impl fmt::Debug for SpanTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpanTable").finish_non_exhaustive()
    }
}

impl SpanTable {
    fn new() -> SpanTable {
        SpanTable {
            // Room for a few live spans per shard from the start: a program's first spans
            // then allocate nothing for the table either.
            shards: (0..SHARDS)
                .map(|_| std::sync::Mutex::new(Shard::new()))
                .collect(),
        }
    }

    /// Runs `f` on span `id`'s state under its shard's lock; `None` when the span has none.
    #[inline]
    fn with<R>(&self, id: &Id, f: impl FnOnce(&mut SpanState) -> R) -> Option<R> {
        let key = id.into_u64();
        let mut shard = self.shard(key);
        shard.get_mut(key).map(f)
    }

    #[inline]
    fn shard(&self, key: u64) -> std::sync::MutexGuard<'_, Shard> {
        // Fibonacci hashing: the top bits of the product spread consecutive ids over shards.
        let i = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARDS.ilog2())) as usize;
        // A panic under the lock leaves the shard as consistent as any other state of it.
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    fn insert(&self, id: &Id, st: Box<SpanState>) {
        let key = id.into_u64();
        self.shard(key).insert(key, st);
    }

    #[inline]
    fn remove(&self, id: &Id) -> Option<Box<SpanState>> {
        let key = id.into_u64();
        self.shard(key).remove(key)
    }
}

/// Hashes a span id (already unique per live span) with one multiplication.
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdHash = std::hash::BuildHasherDefault<IdHasher>;

/// Per-span state, in the layer's table.
struct SpanState {
    /// The span's name, for its enter and exit events.
    name: &'static str,
    /// The span's own context (taken while it is entered: the thread's then; see
    /// `ctx_in_saved`).
    ctx: Option<Context>,
    /// The parents of the context the span was created from (`None`: created without one), to
    /// tell on exit whether the context being restored moved on meanwhile (concurrent siblings:
    /// join) or not (sequential: replace).
    created_from: Option<Parents>,
    /// Whether the span is entered (its outermost entry not exited yet).
    entered: bool,
    /// True after a sequential exit that kept the saved context (see `context::Restore::Kept`):
    /// the span's context is then `saved` with `contributed` as its parents, put together
    /// ([`SpanState::ctx_mut`]) only when it is used (a next entry, a child, `follows_from`);
    /// `ctx` is `None` meanwhile. Most spans close without that: no clone at their exit.
    ctx_in_saved: bool,
    /// The thread context saved at the outermost entry, to restore at its exit (`None` when not
    /// entered, unless `ctx_in_saved`). When the span entered where it was created (the thread's context was the
    /// span's own, nothing reported between), the thread's context stayed, and the span's copy
    /// is kept here (no swap, no clone). Read and adjusted in place at the exit.
    saved: Option<Context>,
    /// The thread contexts saved at re-entries of an already entered span (innermost last).
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

impl SpanState {
    /// The span's context, put together first when a sequential exit left it in `saved`
    /// (`ctx_in_saved`).
    #[inline]
    fn ctx_mut(&mut self) -> &mut Option<Context> {
        if self.ctx_in_saved {
            self.ctx_in_saved = false;
            self.ctx = self.saved.take();
            if let (Some(c), Some(p)) = (self.ctx.as_mut(), self.contributed.as_ref()) {
                c.set_parents(p.clone());
            }
        }
        &mut self.ctx
    }
}

/// `span: enter` or `span: exit` alone, as a compact event's key/values.
fn span_mark(what: &'static str) -> SmallFields {
    SmallFields::One(("span", SmallValue::Str(what)))
}

/// Gathers a span's or an event's fields into `fields`, which is borrowed: a span's are
/// gathered straight into its state (not moved there afterwards).
struct FieldCollector<'a> {
    fields: &'a mut Gathered,
    message: Option<String>,
}

impl FieldCollector<'_> {
    /// A collector whose fields start with those in `fields` (the `span` or `level` key/value
    /// reported first), so that the event's fields need no second gathering.
    fn with(fields: &mut Gathered) -> FieldCollector<'_> {
        FieldCollector {
            fields,
            message: None,
        }
    }

    fn value(&mut self, field: &Field, value: Value) {
        self.fields.push(field.name(), value);
    }
}

impl Visit for FieldCollector<'_> {
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
        self.fields.push_small(field.name(), SmallValue::U64(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.fields.push_small(field.name(), SmallValue::I64(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.fields
            .push_small(field.name(), SmallValue::Bool(value));
    }
}

impl<S> Layer<S> for CausalLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _cx: LayerCx<'_, S>) {
        let ctx = match attrs.parent() {
            Some(p) => self.spans.with(p, |s| s.ctx_mut().clone()).flatten(),
            None if attrs.is_contextual() => Context::current(),
            None => None,
        };
        let created_from = ctx.as_ref().map(Context::parent_ids);
        // Allocated first and written in place (`Box::new` built the ~560-byte state on the
        // stack and copied it); the fields are then gathered in place too.
        let mut st = Box::write(
            Box::new_uninit(),
            SpanState {
                name: attrs.metadata().name(),
                ctx,
                created_from,
                entered: false,
                ctx_in_saved: false,
                saved: None,
                saved_more: Vec::new(),
                contributed: None,
                fields: Some(enter_fields()),
            },
        );
        if let Some(fields) = st.fields.as_mut() {
            attrs.record(&mut FieldCollector::with(fields));
        }
        self.spans.insert(id, st);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _cx: LayerCx<'_, S>) {
        let mut gathered = Gathered::Small(SmallFields::Zero);
        values.record(&mut FieldCollector::with(&mut gathered));
        self.spans.with(id, |st| {
            let fields = st.fields.get_or_insert_with(enter_fields);
            for (k, v) in gathered.into_pairs() {
                fields.push(k, v);
            }
        });
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, _cx: LayerCx<'_, S>) {
        // One shard's lock at a time: never two held together.
        let Some(other) = self.spans.with(follows, |s| s.ctx_mut().clone()).flatten() else {
            return;
        };
        self.spans.with(id, |st| match st.ctx_mut() {
            Some(c) => c.join_in(&other),
            None => st.ctx = Some(other),
        });
    }

    fn on_enter(&self, id: &Id, cx: LayerCx<'_, S>) {
        let start_tasks = self.start_tasks;
        self.spans.with(id, |st| {
            st.ctx_mut();
            // Whether the span is a root is asked of the Registry only here (rarely): the
            // first entry of a span without a context.
            if st.ctx.is_none() && start_tasks && cx.span(id).is_some_and(|s| s.parent().is_none())
            {
                let sampled = crate::reporter::sample_new_task();
                st.ctx = Some(Context::new_task(sampled));
            }
            // The span's context is compared in place and moved once.
            if st.entered {
                st.saved_more.push(context::set_current(st.ctx.take()));
            } else if st.ctx.as_ref().is_some_and(context::is_current) {
                st.saved = st.ctx.take();
            } else {
                st.saved = context::set_current(st.ctx.take());
            }
            st.entered = true;
            // Reported under the shard's lock (nothing in it calls back into the layer), so
            // that the pending fields are read in place: a compact event's two key/values
            // copied out, the general form moved out only when present.
            let label = Cow::Borrowed(st.name);
            match &st.fields {
                None => context::report_small(label, span_mark("enter")),
                Some(Gathered::Small(small)) => {
                    let small = *small;
                    // A compact form owns nothing: forgotten rather than dropped (the drop
                    // glue of the general form is a call).
                    std::mem::forget(st.fields.take());
                    context::report_small(label, small)
                }
                Some(Gathered::Full(_)) => match st.fields.take() {
                    Some(f) => f.report(label),
                    None => None,
                },
            };
        });
    }

    fn on_exit(&self, id: &Id, _cx: LayerCx<'_, S>) {
        self.spans.with(id, |st| {
            context::report_small(Cow::Borrowed(st.name), span_mark("exit"));
            // (Only an exit without an entry finds the span's context still in `saved`.)
            st.ctx_mut();
            let SpanState {
                ctx,
                entered,
                ctx_in_saved,
                saved,
                saved_more,
                contributed,
                created_from,
                ..
            } = st;
            // The context to restore is read and adjusted where it was saved (a re-entry's
            // popped first).
            let mut popped;
            let (restored, outermost) = match saved_more.pop() {
                Some(prev) => {
                    popped = prev;
                    (&mut popped, false)
                }
                None => {
                    *entered = false;
                    (saved, true)
                }
            };
            // The span's context is read in place; the thread's is restored in the same
            // thread-local access (no swap at all after a sequential span).
            let done = context::restore_current(restored, |restored, mine| {
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
                    // Nothing else happened on the restored path since this span began:
                    // continue from the span's last event (the thread's context stays the
                    // span's).
                    return true;
                }
                // A sibling ran meanwhile: both paths lead to the parent's next event.
                r.join_in(m);
                false
            });
            match done {
                context::Restore::Replaced(c) | context::Restore::Cloned(c) => *ctx = c,
                // The span's context is the restored one with its last event as parents: left
                // where it is, put together if it is used again.
                context::Restore::Kept if outermost => *ctx_in_saved = true,
                context::Restore::Kept => {
                    *ctx = restored.take();
                    if let (Some(c), Some(p)) = (ctx.as_mut(), contributed.as_ref()) {
                        c.set_parents(p.clone());
                    }
                }
            }
        });
    }

    fn on_close(&self, id: Id, _cx: LayerCx<'_, S>) {
        // Dropped outside the shard's lock.
        drop(self.spans.remove(&id));
    }

    fn on_event(&self, event: &Event<'_>, _cx: LayerCx<'_, S>) {
        // One thread-local load, not a clone of the current context.
        if !context::current_is_sampled() {
            return;
        }
        let level = event.metadata().level().as_str();
        let mut gathered = Gathered::Small(SmallFields::One(("level", SmallValue::Str(level))));
        let mut fc = FieldCollector::with(&mut gathered);
        event.record(&mut fc);
        let label: Cow<'static, str> = match fc.message {
            Some(m) => Cow::Owned(m),
            None => Cow::Borrowed(event.metadata().name()),
        };
        let _ = gathered.report(label);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(name: &'static str) -> Box<SpanState> {
        Box::new(SpanState {
            name,
            ctx: None,
            created_from: None,
            entered: false,
            ctx_in_saved: false,
            saved: None,
            saved_more: Vec::new(),
            contributed: None,
            fields: None,
        })
    }

    const NAMES: [&str; 20] = [
        "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13",
        "s14", "s15", "s16", "s17", "s18", "s19",
    ];

    #[test]
    fn a_shard_finds_every_live_span_past_its_list() {
        let mut shard = Shard::new();
        // Ids far apart, as the Registry's are; more than the list holds.
        let id = |i: usize| (i as u64 + 1) << 20;
        for (i, name) in NAMES.iter().enumerate() {
            shard.insert(id(i), state(name));
        }
        assert_eq!(shard.few.len(), FEW);
        assert_eq!(shard.many.len(), NAMES.len() - FEW);
        for (i, name) in NAMES.iter().enumerate() {
            assert_eq!(shard.get_mut(id(i)).map(|s| s.name), Some(*name));
        }
        assert!(shard.get_mut(id(NAMES.len())).is_none());
        // Remove from the list's middle, from the map, then insert again: the freed place in
        // the list is used, and nothing is found twice or lost.
        assert_eq!(shard.remove(id(3)).map(|s| s.name), Some("s3"));
        assert_eq!(shard.remove(id(15)).map(|s| s.name), Some("s15"));
        assert!(shard.remove(id(3)).is_none());
        assert!(shard.get_mut(id(3)).is_none());
        shard.insert(id(3), state("again"));
        assert_eq!(shard.few.len(), FEW);
        assert_eq!(shard.get_mut(id(3)).map(|s| s.name), Some("again"));
        // An id inserted again while live replaces its state, in the list or in the map.
        shard.insert(id(0), state("new0"));
        shard.insert(id(12), state("new12"));
        assert_eq!(shard.get_mut(id(0)).map(|s| s.name), Some("new0"));
        assert_eq!(shard.get_mut(id(12)).map(|s| s.name), Some("new12"));
        assert_eq!(shard.few.len() + shard.many.len(), NAMES.len() - 1);
        for i in (0..NAMES.len()).filter(|&i| i != 15) {
            assert!(shard.remove(id(i)).is_some(), "{i}");
        }
        assert!(shard.few.is_empty() && shard.many.is_empty());
    }
}
