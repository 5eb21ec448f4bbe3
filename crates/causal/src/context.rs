//! Contexts (a task and the events the next event follows), the per-thread current context, and
//! the event-reporting API.
//!
//! X-Trace's model (Fonseca et al., NSDI 2007, §3): every event of a task carries the task's id and
//! its own id, and names the events that caused it (its edges). A [`Context`] is what travels with
//! the work: the TaskId, the ids of the latest event(s) on this path ("parents" of the next event),
//! the options, the sampling decision and the W3C values carried along. Reporting an event through a
//! context makes that event the context's only parent, so successive events chain; [`Context::join`]
//! merges several paths so that the next event has several parents (a fan-in).
//!
//! Each thread has a current context ([`current`], [`Context::attach`]); [`report`] and [`event`]
//! report through it. Explicit contexts move between threads, queues and tasks by value.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::Arc;

use crate::metadata::{Metadata, OpId, TaskId};
use crate::w3c::TraceParent;

/// Parents kept inline before spilling to the heap: a join of up to this many paths allocates
/// nothing.
const INLINE_PARENTS: usize = 4;

/// The event ids the next event of a context follows.
#[derive(Clone)]
pub(crate) enum Parents {
    Inline {
        len: u8,
        ids: [OpId; INLINE_PARENTS],
    },
    Many(Arc<[OpId]>),
}

impl Parents {
    const EMPTY: Parents = Parents::Inline {
        len: 0,
        ids: [OpId::new(0); INLINE_PARENTS],
    };

    fn one(id: OpId) -> Parents {
        let mut ids = [OpId::new(0); INLINE_PARENTS];
        ids[0] = id;
        Parents::Inline { len: 1, ids }
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[OpId] {
        match self {
            Parents::Inline { len, ids } => &ids[..*len as usize],
            Parents::Many(v) => v,
        }
    }

    fn from_slice(ids: &[OpId]) -> Parents {
        if ids.len() <= INLINE_PARENTS {
            let mut a = [OpId::new(0); INLINE_PARENTS];
            a[..ids.len()].copy_from_slice(ids);
            Parents::Inline {
                len: ids.len() as u8,
                ids: a,
            }
        } else {
            Parents::Many(Arc::from(ids))
        }
    }
}

/// W3C values carried along unchanged, and the activity label (with its key) published for
/// accounting (`crate::publish`).
#[derive(Debug, PartialEq, Eq, Clone, Default)]
struct Carried {
    tracestate: Option<String>,
    baggage: Option<String>,
    activity: Option<(Box<str>, u64)>,
    /// The published form of `baggage` (`w3c::published_baggage`) and its FNV-1a key; `None`
    /// when the baggage has no member.
    baggage_pub: Option<(Box<str>, u64)>,
    /// Other domains' collectors whose events a join brought in as parents (an answer from
    /// another domain): the next event reports them as `EdgeDestination`s, then they are
    /// cleared.
    edge_destinations: Vec<Box<str>>,
}

/// The published form of `baggage` and its key (`None`: nothing to publish).
fn baggage_pub(baggage: Option<&str>) -> Option<(Box<str>, u64)> {
    let p = crate::w3c::published_baggage(baggage?);
    let key = crate::publish::activity_key(&p);
    (key != 0).then(|| (p.into_boxed_str(), key))
}

/// A task and the events its next event follows; cheap to clone (no allocation unless the task
/// has options, W3C tracestate/baggage or a join of more than 4 paths, and then one atomic
/// increment per shared part).
#[derive(Clone)]
pub struct Context {
    task: TaskId,
    parents: Parents,
    sampled: bool,
    options: Option<Arc<[u8]>>,
    carried: Option<Arc<Carried>>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("task", &self.task)
            .field("parents", &self.parents.as_slice())
            .field("sampled", &self.sampled)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Context {
    fn eq(&self, o: &Context) -> bool {
        self.task == o.task
            && self.parents.as_slice() == o.parents.as_slice()
            && self.sampled == o.sampled
            && self.options == o.options
            && self.carried == o.carried
    }
}

impl Context {
    /// A context of a new task with no events yet (its first event has no edges).
    ///
    /// The TaskId is random (8 bytes). `sampled == false` makes an unsampled task: its events cost
    /// a thread-local read and report nothing, while propagation still carries the trace-id with
    /// the sampled flag clear. Most programs call [`start_task`], which also decides sampling.
    ///
    /// An unsampled task gets a random parent id that no event has: with it, `traceparent` can
    /// carry the decision (sampled flag clear) downstream, so the services it calls skip the task
    /// too instead of tracing a fragment of it.
    pub fn new_task(sampled: bool) -> Context {
        let mut c = Context::with_task(TaskId::random(), sampled);
        if !sampled {
            c.parents = Parents::one(OpId::new(crate::ids::random_nonzero_u64()));
        }
        c
    }

    /// A context of task `task` with no events yet.
    pub fn with_task(task: TaskId, sampled: bool) -> Context {
        Context {
            task,
            parents: Parents::EMPTY,
            sampled,
            options: None,
            carried: None,
        }
    }

    /// The context that received X-Trace metadata stands for: its task and options, the metadata's
    /// event as the only parent. Sampled: X-Trace metadata is only sent for traced tasks.
    pub fn from_metadata(md: &Metadata) -> Context {
        Context {
            task: md.task_id(),
            parents: Parents::one(md.op_id()),
            sampled: true,
            options: md.options_arc().cloned(),
            carried: None,
        }
    }

    /// The context a W3C `traceparent` stands for (trace-id mapped to a TaskId as in
    /// [`crate::w3c`]; parent-id as the only parent; sampled as the trace-flags say), carrying
    /// `tracestate` and `baggage` unchanged when they are valid.
    pub fn from_traceparent(
        tp: &TraceParent,
        tracestate: Option<&str>,
        baggage: Option<&str>,
    ) -> Context {
        let mut c = Context {
            task: tp.task_id(),
            parents: Parents::one(tp.parent_op()),
            sampled: tp.sampled(),
            options: None,
            carried: None,
        };
        c.set_carried(tracestate, baggage);
        c
    }

    pub(crate) fn set_carried(&mut self, tracestate: Option<&str>, baggage: Option<&str>) {
        let tracestate = tracestate
            .and_then(crate::w3c::check_tracestate)
            .map(str::to_string);
        let baggage = baggage
            .and_then(crate::w3c::check_baggage)
            .map(str::to_string);
        self.carried = if tracestate.is_none() && baggage.is_none() {
            None
        } else {
            Some(Arc::new(Carried {
                baggage_pub: baggage_pub(baggage.as_deref()),
                tracestate,
                baggage,
                activity: None,
                edge_destinations: Vec::new(),
            }))
        };
    }

    /// The thread's current context, cloned (capture it to move work elsewhere). `None` also in a
    /// thread-local destructor that runs after this thread's context was destroyed.
    #[inline]
    pub fn current() -> Option<Context> {
        CURRENT
            .try_with(|c| c.try_borrow().ok().and_then(|c| c.clone()))
            .ok()
            .flatten()
    }

    /// The TaskId.
    #[inline]
    pub fn task_id(&self) -> TaskId {
        self.task
    }

    /// The events the next event will follow (empty before a task's first event; several after a
    /// join).
    #[inline]
    pub fn parents(&self) -> &[OpId] {
        self.parents.as_slice()
    }

    /// Whether this task's events are reported.
    pub fn is_sampled(&self) -> bool {
        self.sampled
    }

    /// The raw X-Trace options block carried with the task (empty when none).
    pub fn options_bytes(&self) -> &[u8] {
        self.options.as_deref().unwrap_or(&[])
    }

    /// The W3C `tracestate` carried along, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.carried.as_ref().and_then(|c| c.tracestate.as_deref())
    }

    /// The W3C `baggage` carried along, if any.
    pub fn baggage(&self) -> Option<&str> {
        self.carried.as_ref().and_then(|c| c.baggage.as_deref())
    }

    /// The value of baggage item `key` (W3C Baggage, percent-decoded), if the carried baggage has
    /// one.
    pub fn baggage_item(&self, key: &str) -> Option<String> {
        crate::w3c::baggage_item(self.baggage()?, key)
    }

    /// Sets baggage item `key` to `value` (replacing any member of that key): carried with the
    /// task to every process it reaches (the `baggage` header or `BAGGAGE` variable), kept by
    /// clones and joins, and published with the thread's task for tracers
    /// (`causal_baggage[KEY]` in D, docs/causal-accounting.md). Allocates here, never on the
    /// event path.
    ///
    /// # Errors
    /// [`crate::w3c::BaggageError`] when `key` is not a token or the baggage would exceed 8192
    /// bytes; the context is then unchanged.
    pub fn set_baggage_item(
        &mut self,
        key: &str,
        value: &str,
    ) -> Result<(), crate::w3c::BaggageError> {
        let list = crate::w3c::with_baggage_item(self.baggage(), key, value)?;
        let mut c = self.carried.as_deref().cloned().unwrap_or_default();
        c.baggage_pub = baggage_pub(Some(&list));
        c.baggage = Some(list);
        self.carried = Some(Arc::new(c));
        Ok(())
    }

    /// [`Context::set_baggage_item`] by value.
    ///
    /// # Errors
    /// As [`Context::set_baggage_item`].
    pub fn with_baggage_item(
        mut self,
        key: &str,
        value: &str,
    ) -> Result<Context, crate::w3c::BaggageError> {
        self.set_baggage_item(key, value)?;
        Ok(self)
    }

    /// The activity label this context's work is charged to (docs/causal-accounting.md), if set.
    pub fn activity(&self) -> Option<&str> {
        self.carried
            .as_ref()
            .and_then(|c| c.activity.as_ref())
            .map(|(l, _)| &**l)
    }

    /// Sets (or with an empty label clears) the activity label: a programmer-defined name for
    /// what this work is (Quanto's activities), published with the task for accounting and kept
    /// by clones and joins of this context. Allocates once here, never on the event path.
    pub fn set_activity(&mut self, label: &str) {
        let mut c = self.carried.as_deref().cloned().unwrap_or_default();
        c.activity =
            (!label.is_empty()).then(|| (Box::from(label), crate::publish::activity_key(label)));
        self.carried = (c != Carried::default()).then(|| Arc::new(c));
    }

    /// [`Context::set_activity`] by value.
    pub fn with_activity(mut self, label: &str) -> Context {
        self.set_activity(label);
        self
    }

    /// X-Trace metadata to send with a message: the task, the options and the *latest* parent.
    ///
    /// X-Trace metadata names one event; after a join, report an event (e.g. "send") first so
    /// that one event stands for all paths. `None` before the task's first event and for unsampled
    /// tasks (X-Trace metadata is only sent for traced tasks).
    pub fn metadata(&self) -> Option<Metadata> {
        if !self.sampled {
            return None;
        }
        let op = *self.parents().last()?;
        Some(Metadata::from_parts(self.task, op, self.options.clone()))
    }

    /// The W3C `traceparent` to send: trace-id mapped from the TaskId, parent-id the latest parent,
    /// sampled flag from the sampling decision. `None` before the task's first event, and while the
    /// latest parent is the zero OpId (X-Trace metadata from old agents uses it for "no event
    /// yet"; an all-zero parent-id is invalid, W3C Trace Context §3.2.2.4).
    pub fn traceparent(&self) -> Option<TraceParent> {
        let op = *self.parents().last()?;
        if op.is_zero() {
            return None;
        }
        Some(TraceParent::from_task(self.task, op, self.sampled))
    }

    /// This context with the parents of `other` added (no duplicates), so that the next event
    /// follows both paths. A context of another task is ignored (an event belongs to one task):
    /// the result is then `self` unchanged.
    pub fn join(&self, other: &Context) -> Context {
        let mut c = self.clone();
        c.join_in(other);
        c
    }

    /// [`Context::join`] of many: the first context's task; others of that task add their parents.
    /// `None` when `contexts` is empty.
    pub fn join_all<'a, I: IntoIterator<Item = &'a Context>>(contexts: I) -> Option<Context> {
        let mut it = contexts.into_iter();
        let mut c = it.next()?.clone();
        for o in it {
            c.join_in(o);
        }
        Some(c)
    }

    /// Adds `other`'s parents to this context in place (see [`Context::join`]).
    pub fn join_in(&mut self, other: &Context) {
        if other.task != self.task {
            return;
        }
        let mine = self.parents.as_slice();
        if other.parents().iter().all(|p| mine.contains(p)) {
            return;
        }
        let mut v: Vec<OpId> = mine.to_vec();
        for p in other.parents() {
            if !v.contains(p) {
                v.push(*p);
            }
        }
        self.parents = Parents::from_slice(&v);
        self.sampled |= other.sampled;
        if self.carried.is_none() {
            self.carried.clone_from(&other.carried);
        }
        // In a domain, parents joined from another domain's event are marked for the next
        // event's report, as `enter_domain` marks the first event after received metadata.
        if let Some(own) = crate::reporter::domain_options() {
            let theirs = crate::metadata::destination_in(other.options_bytes());
            if let Some(d) = theirs.filter(|d| Some(*d) != crate::metadata::destination_in(own)) {
                let c = Arc::make_mut(self.carried.get_or_insert_with(Arc::default));
                if !c.edge_destinations.iter().any(|e| &**e == d) {
                    c.edge_destinations.push(d.into());
                }
            }
        }
    }

    /// The parents, as kept (a copy; shared when more than 4).
    #[inline]
    pub(crate) fn parent_ids(&self) -> Parents {
        self.parents.clone()
    }

    /// Replaces the parents (the layer's copy of a context that differs only in them).
    #[inline]
    pub(crate) fn set_parents(&mut self, parents: Parents) {
        self.parents = parents;
    }

    /// Removes `ids` from the parents (events superseded by a later event on the same path).
    pub(crate) fn remove_parents(&mut self, ids: &[OpId]) {
        if ids.is_empty() || !self.parents().iter().any(|p| ids.contains(p)) {
            return;
        }
        let v: Vec<OpId> = self
            .parents()
            .iter()
            .copied()
            .filter(|p| !ids.contains(p))
            .collect();
        self.parents = Parents::from_slice(&v);
    }

    /// Makes this the thread's current context until the guard is dropped, which restores the
    /// previous one. Events reported meanwhile update the current context, not `self`: read it
    /// back with [`ContextGuard::context`] or [`Context::current`].
    ///
    /// In a thread-local destructor that runs after this thread's context was destroyed there is
    /// nothing to attach to: `self` is dropped and the guard does nothing.
    pub fn attach(self) -> ContextGuard {
        let prev = CURRENT.try_with(|c| swap(c, Some(self))).ok();
        ContextGuard {
            prev,
            _not_send: std::marker::PhantomData,
        }
    }

    /// Reports an event through this explicit context (not the thread's): its parents are this
    /// context's parents, and it becomes the only parent. Returns the event's OpId, or `None` when
    /// the task is unsampled. Use this in code that owns its context (async tasks, queues).
    pub fn report<I>(&mut self, label: impl Into<Cow<'static, str>>, fields: I) -> Option<OpId>
    where
        I: IntoIterator<Item = (&'static str, Value)>,
    {
        if !self.sampled {
            return None;
        }
        emit_iter(self, label.into(), fields)
    }

    /// An event builder reporting through this explicit context.
    pub fn event(&mut self, label: impl Into<Cow<'static, str>>) -> EventBuilder<'_> {
        EventBuilder {
            target: Target::Explicit(self),
            label: label.into(),
            agent: None,
            fields: Fields::new(),
        }
    }
}

/// Restores the previous current context when dropped (see [`Context::attach`]). Not `Send`: it
/// belongs to the thread whose context it changed.
#[derive(Debug)]
#[must_use = "the context is detached again when the guard is dropped"]
pub struct ContextGuard {
    prev: Option<Option<Context>>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl ContextGuard {
    /// The thread's current context now (including events reported since `attach`).
    pub fn context(&self) -> Option<Context> {
        Context::current()
    }

    /// Detaches now and returns the context as it ended up (with the events reported meanwhile),
    /// restoring the previous one.
    pub fn detach(mut self) -> Option<Context> {
        let prev = self.prev.take()?;
        CURRENT.try_with(|c| swap(c, prev)).ok().flatten()
    }
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        if let Some(prev) = self.prev.take() {
            // `try_with`: during thread teardown the slot may already be gone; nothing to restore.
            let _ = CURRENT.try_with(|c| swap(c, prev));
        }
    }
}

/// Replaces the context in `slot`, returning the old one. While the slot is borrowed (a call made
/// from inside [`report`]'s key/value iterator) `v` is dropped and `None` returned, rather than
/// panicking.
fn swap(slot: &RefCell<Option<Context>>, v: Option<Context>) -> Option<Context> {
    match slot.try_borrow_mut() {
        Ok(mut cur) => {
            if !same_publication(&cur, &v) {
                publish_sampled(&v);
            }
            std::mem::replace(&mut *cur, v)
        }
        Err(_) => None,
    }
}

/// Whether `a` and `b` publish the same (sampled flag, task, activity, baggage): the same task
/// with the same sampling decision and the same carried values (one `Arc`: activity and baggage
/// live there). Then a swap between them (a `tracing` span's entry and exit, which keep the
/// task) skips the publication: the thread's published state already says that. (With the
/// publication turned off and on again meanwhile, `crate::publish::set_enabled`, the slot
/// catches up at the thread's next change of task.)
#[inline]
fn same_publication(a: &Option<Context>, b: &Option<Context>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.sampled == b.sampled && a.task == b.task && same_arc(&a.carried, &b.carried)
        }
        _ => false,
    }
}

/// Mirrors "the current context is a sampled task's" in `CURRENT_SAMPLED` and publishes the
/// thread's task and activity (`crate::publish`); called wherever `CURRENT` changes.
#[inline]
fn publish_sampled(cur: &Option<Context>) {
    let sampled = cur.as_ref().filter(|c| c.sampled);
    CURRENT_SAMPLED.set(sampled.is_some());
    let (task, key, label, bag_key, bag) = match sampled {
        Some(c) => {
            let carried = c.carried.as_deref();
            let (label, key) = carried
                .and_then(|k| k.activity.as_ref())
                .map_or(("", 0), |(l, k)| (&**l, *k));
            let (bag, bag_key) = carried
                .and_then(|k| k.baggage_pub.as_ref())
                .map_or(("", 0), |(b, k)| (&**b, *k));
            (crate::probes::task_key(c.task), key, label, bag_key, bag)
        }
        None => (0, 0, "", 0, ""),
    };
    let _ = PUBLISHED.try_with(|p| {
        p.update(
            thread_tid,
            crate::publish::Pair {
                task,
                key,
                label,
                bag_key,
                bag,
            },
        );
    });
}

/// The thread's current context; clears `CURRENT_SAMPLED` when destroyed.
struct CurrentSlot(RefCell<Option<Context>>);

impl std::ops::Deref for CurrentSlot {
    type Target = RefCell<Option<Context>>;
    fn deref(&self) -> &RefCell<Option<Context>> {
        &self.0
    }
}

impl Drop for CurrentSlot {
    fn drop(&mut self) {
        CURRENT_SAMPLED.set(false);
        let _ = PUBLISHED.try_with(crate::publish::Published::release);
    }
}

thread_local! {
    static CURRENT: CurrentSlot = const { CurrentSlot(RefCell::new(None)) };
    /// True while `CURRENT` holds a sampled task's context; false when it holds none, an
    /// unsampled one, or has been destroyed (thread exit). A `Cell<bool>` has no destructor, so it
    /// stays readable in every thread-local destructor, and reading it compiles to one load:
    /// [`report`] for an unsampled task or no context costs that load and a branch.
    static CURRENT_SAMPLED: Cell<bool> = const { Cell::new(false) };
    static TID: Cell<u32> = const { Cell::new(0) };
    /// The thread's publication slot and last published (task, activity); no destructor, so it
    /// stays usable in `CurrentSlot`'s.
    static PUBLISHED: crate::publish::Published = const { crate::publish::Published::new() };
}

/// Sets the activity label of the thread's current context ([`Context::set_activity`]) and
/// publishes it; does nothing when the thread has no context.
pub fn set_activity(label: &str) {
    let _ = CURRENT.try_with(|c| {
        let Ok(mut cur) = c.try_borrow_mut() else {
            return;
        };
        if let Some(ctx) = cur.as_mut() {
            ctx.set_activity(label);
        }
        publish_sampled(&cur);
    });
}

/// Sets baggage item `key` of the thread's current context ([`Context::set_baggage_item`]) and
/// publishes it; does nothing (and succeeds) when the thread has no context.
///
/// # Errors
/// As [`Context::set_baggage_item`]; the context is then unchanged.
pub fn set_baggage_item(key: &str, value: &str) -> Result<(), crate::w3c::BaggageError> {
    CURRENT
        .try_with(|c| {
            let Ok(mut cur) = c.try_borrow_mut() else {
                return Ok(());
            };
            if let Some(ctx) = cur.as_mut() {
                ctx.set_baggage_item(key, value)?;
            }
            publish_sampled(&cur);
            Ok(())
        })
        .unwrap_or(Ok(()))
}

/// Replaces the thread's current context, returning the previous one.
///
/// In a thread-local destructor that runs after this thread's context was destroyed, `ctx` is
/// dropped and `None` returned (the thread is exiting; there is no context to set).
pub fn set_current(ctx: Option<Context>) -> Option<Context> {
    CURRENT.try_with(|c| swap(c, ctx)).ok().flatten()
}

/// The thread's current context, cloned.
pub fn current() -> Option<Context> {
    Context::current()
}

/// Removes and returns the thread's current context (`None` in a thread-local destructor that
/// runs after the context was destroyed).
pub fn take_current() -> Option<Context> {
    CURRENT.try_with(|c| swap(c, None)).ok().flatten()
}

/// Joins `others` into the thread's current context (which becomes the first of them when there
/// is none), so that the next event has parents on every path: the fan-in after parallel work.
///
/// Does nothing in a thread-local destructor that runs after this thread's context was destroyed.
pub fn join_current<'a, I: IntoIterator<Item = &'a Context>>(others: I) {
    let _ = CURRENT.try_with(|c| {
        let Ok(mut cur) = c.try_borrow_mut() else {
            return;
        };
        for o in others {
            match cur.as_mut() {
                Some(cur) => cur.join_in(o),
                None => *cur = Some(o.clone()),
            }
        }
        publish_sampled(&cur);
    });
}

/// Starts a new task on this thread: decides head sampling (the reporter's sample rate), makes a
/// context with a random TaskId current, and reports the task's first event, `label`, with no
/// edges. Returns the context (the current one, after the event).
///
/// An unsampled task still becomes current (so propagation carries the trace-id with the sampled
/// flag clear and downstream services skip it too), but reports nothing.
pub fn start_task<I>(label: impl Into<Cow<'static, str>>, fields: I) -> Context
where
    I: IntoIterator<Item = (&'static str, Value)>,
{
    let sampled = crate::reporter::sample_new_task();
    let mut ctx = Context::new_task(sampled);
    if sampled {
        emit_iter(&mut ctx, label.into(), fields);
    }
    set_current(Some(ctx.clone()));
    ctx
}

/// A key/value's value. `&'static str` and `String` convert without copying; numbers and bools are
/// formatted by the reporter thread, off the caller's path.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Unsigned integer.
    U64(u64),
    /// Signed integer.
    I64(i64),
    /// Float.
    F64(f64),
    /// Boolean (`true`/`false`).
    Bool(bool),
    /// String (borrowed when static: no allocation).
    Str(Cow<'static, str>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(v) => f.write_str(v),
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $v:ident as $as:ty),*) => {$(
        impl From<$t> for Value {
            fn from(x: $t) -> Value { Value::$v(x as $as) }
        }
    )*};
}
value_from!(u8 => U64 as u64, u16 => U64 as u64, u32 => U64 as u64, u64 => U64 as u64, usize => U64 as u64,
            i8 => I64 as i64, i16 => I64 as i64, i32 => I64 as i64, i64 => I64 as i64, isize => I64 as i64,
            f32 => F64 as f64, f64 => F64 as f64);

impl From<bool> for Value {
    fn from(x: bool) -> Value {
        Value::Bool(x)
    }
}
impl From<&'static str> for Value {
    fn from(x: &'static str) -> Value {
        Value::Str(Cow::Borrowed(x))
    }
}
impl From<String> for Value {
    fn from(x: String) -> Value {
        Value::Str(Cow::Owned(x))
    }
}

/// Key/values kept inline before spilling to the heap.
const INLINE_FIELDS: usize = 4;

/// An event's key/values: up to 4 inline, more on the heap.
#[derive(Debug, Clone)]
pub(crate) struct Fields {
    len: u8,
    inline: [(&'static str, Value); INLINE_FIELDS],
    spill: Vec<(&'static str, Value)>,
}

const EMPTY_FIELD: (&str, Value) = ("", Value::Bool(false));

impl Fields {
    pub(crate) fn new() -> Fields {
        Fields {
            len: 0,
            inline: [EMPTY_FIELD; INLINE_FIELDS],
            spill: Vec::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn collect<I: IntoIterator<Item = (&'static str, Value)>>(it: I) -> Fields {
        let mut f = Fields::new();
        for kv in it {
            f.push(kv.0, kv.1);
        }
        f
    }

    #[inline]
    pub(crate) fn push(&mut self, k: &'static str, v: Value) {
        if (self.len as usize) < INLINE_FIELDS {
            self.inline[self.len as usize] = (k, v);
            self.len += 1;
        } else {
            self.spill.push((k, v));
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &(&'static str, Value)> {
        self.inline[..self.len as usize]
            .iter()
            .chain(self.spill.iter())
    }

    /// The key/values by value, in order (no copies of the strings).
    pub(crate) fn into_pairs(self) -> impl Iterator<Item = (&'static str, Value)> {
        let len = self.len as usize;
        self.inline.into_iter().take(len).chain(self.spill)
    }
}

/// One event on its way from the instrumented thread to the reporter thread: everything the
/// report needs that is cheap to copy; the reporter adds host, process, thread name and wall time.
#[derive(Debug)]
pub(crate) struct RawEvent {
    pub(crate) task: TaskId,
    pub(crate) op: OpId,
    parents: Parents,
    pub(crate) options: Option<Arc<[u8]>>,
    pub(crate) label: Cow<'static, str>,
    pub(crate) agent: Option<&'static str>,
    pub(crate) fields: Fields,
    /// When it happened, as `crate::clock::stamp` read it (the reporter makes it ns).
    pub(crate) stamp: u64,
    pub(crate) tid: u32,
}

impl fmt::Debug for Parents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl RawEvent {
    pub(crate) fn parents(&self) -> &[OpId] {
        self.parents.as_slice()
    }
}

/// A key/value's value that holds no owned string: what a compact event carries.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SmallValue {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    Str(&'static str),
}

impl SmallValue {
    /// `v` as a small value, or `v` back when it holds an owned string.
    #[inline(always)]
    pub(crate) fn of(v: Value) -> Result<SmallValue, Value> {
        Ok(match v {
            Value::U64(x) => SmallValue::U64(x),
            Value::I64(x) => SmallValue::I64(x),
            Value::F64(x) => SmallValue::F64(x),
            Value::Bool(x) => SmallValue::Bool(x),
            Value::Str(Cow::Borrowed(x)) => SmallValue::Str(x),
            v @ Value::Str(Cow::Owned(_)) => return Err(v),
        })
    }

    pub(crate) fn value(self) -> Value {
        match self {
            SmallValue::U64(x) => Value::U64(x),
            SmallValue::I64(x) => Value::I64(x),
            SmallValue::F64(x) => Value::F64(x),
            SmallValue::Bool(x) => Value::Bool(x),
            SmallValue::Str(x) => Value::Str(Cow::Borrowed(x)),
        }
    }
}

/// One key/value of a compact event.
pub(crate) type SmallKv = (&'static str, SmallValue);

/// The key/values of a compact event: at most two, none with an owned string.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SmallFields {
    Zero,
    One(SmallKv),
    Two(SmallKv, SmallKv),
}

impl SmallFields {
    /// Adds `kv`; `Err` (with the key/values so far unchanged) when there are two already.
    #[inline(always)]
    pub(crate) fn push(&mut self, kv: SmallKv) -> Result<(), ()> {
        match self {
            SmallFields::Zero => *self = SmallFields::One(kv),
            SmallFields::One(a) => *self = SmallFields::Two(*a, kv),
            SmallFields::Two(..) => return Err(()),
        }
        Ok(())
    }

    pub(crate) fn into_fields(self) -> Fields {
        let mut f = Fields::new();
        let (a, b) = match self {
            SmallFields::Zero => (None, None),
            SmallFields::One(a) => (Some(a), None),
            SmallFields::Two(a, b) => (Some(a), Some(b)),
        };
        for (k, v) in a.into_iter().chain(b) {
            f.push(k, v.value());
        }
        f
    }

    /// `fields` as small ones when there are at most two and none holds an owned string.
    #[inline(always)]
    pub(crate) fn of(fields: &Fields) -> Option<SmallFields> {
        if fields.len > 2 || !fields.spill.is_empty() {
            return None;
        }
        let mut small = SmallFields::Zero;
        for (k, v) in &fields.inline[..fields.len as usize] {
            let v = match v {
                Value::U64(x) => SmallValue::U64(*x),
                Value::I64(x) => SmallValue::I64(*x),
                Value::F64(x) => SmallValue::F64(*x),
                Value::Bool(x) => SmallValue::Bool(*x),
                Value::Str(Cow::Borrowed(x)) => SmallValue::Str(x),
                Value::Str(Cow::Owned(_)) => return None,
            };
            small.push((k, v)).ok()?;
        }
        Some(small)
    }
}

/// The common event in the compact form queued on a thread's ring: an 8-byte TaskId, at most one
/// 8-byte non-zero parent, a static label, no agent, no options, at most two key/values without
/// owned strings (everything else is a [`RawEvent`]). Two cache lines, so that queuing it is a
/// handful of 16-byte moves rather than a `memcpy` call; the thread id is the ring's.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub(crate) struct CompactEvent {
    pub(crate) task: u64,
    pub(crate) op: u64,
    /// The parent's value; 0 for none.
    pub(crate) parent: u64,
    /// When it happened, as `crate::clock::stamp` read it (the reporter makes it ns).
    pub(crate) stamp: u64,
    pub(crate) label: &'static str,
    pub(crate) fields: SmallFields,
}

impl CompactEvent {
    /// The general form of this event, reported by thread `tid`.
    pub(crate) fn into_raw(self, tid: u32) -> RawEvent {
        RawEvent {
            // An 8-byte TaskId read back (`TaskId::as_u64`): never zero, so never an error.
            task: TaskId::from_u64(self.task).unwrap_or_else(|_| TaskId::random()),
            op: OpId::new(self.op),
            parents: if self.parent == 0 {
                Parents::EMPTY
            } else {
                Parents::one(OpId::new(self.parent))
            },
            options: None,
            label: Cow::Borrowed(self.label),
            agent: None,
            fields: self.fields.into_fields(),
            stamp: self.stamp,
            tid,
        }
    }
}

/// This thread's kernel tid, looked up once per thread (and the thread's name registered with
/// the reporter then).
#[inline]
pub(crate) fn thread_tid() -> u32 {
    TID.try_with(|t| {
        let v = t.get();
        if v != 0 {
            return v;
        }
        let tid = crate::sys::gettid();
        crate::reporter::register_thread(tid, std::thread::current().name());
        t.set(tid);
        tid
    })
    .unwrap_or_else(|_| crate::sys::gettid())
}

/// Forgets this thread's cached tid: in the child of a `fork(2)` the thread has a new one.
pub(crate) fn forget_tid_after_fork() {
    let _ = TID.try_with(|t| t.set(0));
}

/// Reports one event through `ctx` (sampled checked by callers) with the key/values of `it`,
/// gathered straight into a compact event's while they fit one.
#[inline(always)]
fn emit_iter<I>(ctx: &mut Context, label: Cow<'static, str>, it: I) -> Option<OpId>
where
    I: IntoIterator<Item = (&'static str, Value)>,
{
    // Unrolled for the two key/values a compact event holds: each lands in its place.
    let mut it = it.into_iter();
    let small = match it.next() {
        None => SmallFields::Zero,
        Some((k1, v1)) => match SmallValue::of(v1) {
            Err(v1) => return emit_iter_rest(ctx, label, SmallFields::Zero, (k1, v1), it),
            Ok(s1) => match it.next() {
                None => SmallFields::One((k1, s1)),
                Some((k2, v2)) => match SmallValue::of(v2) {
                    Err(v2) => {
                        let one = SmallFields::One((k1, s1));
                        return emit_iter_rest(ctx, label, one, (k2, v2), it);
                    }
                    Ok(s2) => match it.next() {
                        None => SmallFields::Two((k1, s1), (k2, s2)),
                        Some(kv) => {
                            let two = SmallFields::Two((k1, s1), (k2, s2));
                            return emit_iter_rest(ctx, label, two, kv, it);
                        }
                    },
                },
            },
        },
    };
    emit_small(ctx, label, None, small)
}

/// [`emit_iter`] once the key/values do not fit a compact event: `small`, then `kv`, then the
/// rest of `it`.
#[cold]
#[inline(never)]
fn emit_iter_rest<I>(
    ctx: &mut Context,
    label: Cow<'static, str>,
    small: SmallFields,
    kv: (&'static str, Value),
    it: I,
) -> Option<OpId>
where
    I: Iterator<Item = (&'static str, Value)>,
{
    let mut f = small.into_fields();
    f.push(kv.0, kv.1);
    for (k, v) in it {
        f.push(k, v);
    }
    emit(ctx, label, None, f)
}

/// Reports one event with `fields` (sampled checked by callers): compact when they fit.
#[inline(always)]
fn emit_fields(
    ctx: &mut Context,
    label: Cow<'static, str>,
    agent: Option<&'static str>,
    fields: Fields,
) -> Option<OpId> {
    match SmallFields::of(&fields) {
        Some(small) => emit_small(ctx, label, agent, small),
        None => emit(ctx, label, agent, fields),
    }
}

/// Reports one event with small key/values (sampled checked by callers): queued as a
/// [`CompactEvent`] when the rest of it fits one too (see there), else through [`emit`]. Both
/// make the same report.
#[inline(always)]
fn emit_small(
    ctx: &mut Context,
    label: Cow<'static, str>,
    agent: Option<&'static str>,
    fields: SmallFields,
) -> Option<OpId> {
    let parent = match ctx.parents.as_slice() {
        [] => Some(0),
        [p] if p.len() == 8 && !p.is_zero() => Some(p.value()),
        _ => None,
    };
    if let (Cow::Borrowed(l), None, None, Some(task), Some(parent)) =
        (&label, agent, &ctx.options, ctx.task.as_u64(), parent)
        && crate::reporter::domain_options().is_none()
        && ctx
            .carried
            .as_ref()
            .is_none_or(|c| c.edge_destinations.is_empty())
    {
        let op = OpId::new(crate::ids::random_nonzero_u64());
        // The event becomes the only parent: written in place (the other inline slots are
        // never read past `len`).
        match &mut ctx.parents {
            Parents::Inline { len, ids } => {
                *len = 1;
                ids[0] = op;
            }
            p => *p = Parents::one(op),
        }
        crate::probes::event_fired(ctx.task, op, l);
        crate::reporter::submit_compact(CompactEvent {
            task,
            op: op.value(),
            parent,
            stamp: crate::clock::stamp(),
            label: l,
            fields,
        });
        return Some(op);
    }
    emit(ctx, label, agent, fields.into_fields())
}

/// Reports one event through `ctx` (sampled checked by callers) as a [`RawEvent`] and makes it
/// `ctx`'s only parent.
#[inline(never)]
fn emit(
    ctx: &mut Context,
    label: Cow<'static, str>,
    agent: Option<&'static str>,
    fields: Fields,
) -> Option<OpId> {
    let op = OpId::new(crate::ids::random_nonzero_u64());
    let mut fields = fields;
    if let Some(own) = crate::reporter::domain_options()
        && !ctx.options.as_ref().is_some_and(|o| Arc::ptr_eq(o, own))
    {
        enter_domain(ctx, own, &mut fields);
    }
    if ctx
        .carried
        .as_ref()
        .is_some_and(|c| !c.edge_destinations.is_empty())
    {
        take_edge_destinations(ctx, &mut fields);
    }
    let parents = std::mem::replace(&mut ctx.parents, Parents::one(op));
    crate::probes::event_fired(ctx.task, op, &label);
    let ev = RawEvent {
        task: ctx.task,
        op,
        parents,
        options: ctx.options.clone(),
        label,
        agent,
        fields,
        stamp: crate::clock::stamp(),
        tid: thread_tid(),
    };
    crate::reporter::submit(ev);
    Some(op)
}

/// Reports the collectors of the other domains whose events `ctx` joined (see
/// [`Context::join_in`]) as `EdgeDestination` keys of the event being reported, and forgets them.
#[cold]
fn take_edge_destinations(ctx: &mut Context, fields: &mut Fields) {
    let Some(carried) = ctx.carried.as_mut() else {
        return;
    };
    let c = Arc::make_mut(carried);
    for d in std::mem::take(&mut c.edge_destinations) {
        if !fields
            .iter()
            .any(|(k, v)| *k == "EdgeDestination" && matches!(v, Value::Str(s) if **s == *d))
        {
            fields.push("EdgeDestination", Value::Str(Cow::Owned(d.into())));
        }
    }
    if *c == Carried::default() {
        ctx.carried = None;
    }
}

/// Makes `ctx`'s options name this process's domain (`own`, the options block of
/// [`crate::reporter::Config::destination`]) before an event is reported through it. When the
/// options named another domain's collector (the task came from there), the event gets an
/// `EdgeDestination` key naming it: the store that holds the event's parent. Other options are
/// kept. Runs only where the options are not `own` itself (a task that came in from outside, or
/// one with more options than the destination).
#[cold]
fn enter_domain(ctx: &mut Context, own: &Arc<[u8]>, fields: &mut Fields) {
    let options = ctx.options.as_deref().unwrap_or(&[]);
    let own_dest = crate::metadata::destination_in(own);
    let came_from = crate::metadata::destination_in(options);
    if came_from.is_some() && came_from != own_dest {
        fields.push(
            "EdgeDestination",
            Value::Str(Cow::Owned(came_from.unwrap_or_default().to_string())),
        );
    }
    let only_destination =
        options.is_empty() || options.len() == 2 + options[1] as usize && came_from.is_some();
    if only_destination {
        ctx.options = Some(own.clone());
    } else if came_from != own_dest
        && let Some(d) = own_dest
        && let Ok(block) = crate::metadata::options_with_destination(options, d)
    {
        ctx.options = Some(Arc::from(block));
    }
}

/// Reports an event through the thread's current context: its edges go to the current context's
/// parents, and it becomes the only parent. Returns its OpId; `None` (and nothing reported) when
/// the thread has no context or its task is unsampled.
///
/// Costs no allocation for a static label and up to 4 key/values of numbers or static strings.
///
/// Never panics: in a thread-local destructor that runs after this thread's context was destroyed
/// it reports nothing and returns `None`, like a thread without a context.
#[inline]
pub fn report<I>(label: impl Into<Cow<'static, str>>, fields: I) -> Option<OpId>
where
    I: IntoIterator<Item = (&'static str, Value)>,
{
    with_sampled_current(|ctx| emit_iter(ctx, label.into(), fields))
}

/// Runs `f` on the thread's current context when it is a sampled task's; `None` otherwise, and
/// while the context is busy (a report from inside a lazy `fields` iterator of another report:
/// the inner one reports nothing rather than panicking). The hot path of every report.
#[inline(always)]
fn with_sampled_current(f: impl FnOnce(&mut Context) -> Option<OpId>) -> Option<OpId> {
    // `CURRENT_SAMPLED` first: no context and an unsampled task cost one thread-local load and
    // a branch. Then `with` rather than `try_with` (about 8 ns cheaper, bench/causal-bench.sh):
    // it cannot panic, since `CURRENT_SAMPLED` is false once `CURRENT` has been destroyed.
    if !CURRENT_SAMPLED.get() {
        return None;
    }
    CURRENT.with(|c| {
        let Ok(mut cur) = c.try_borrow_mut() else {
            return None;
        };
        match cur.as_mut() {
            Some(ctx) if ctx.sampled => f(ctx),
            _ => None,
        }
    })
}

/// [`report`] with key/values already gathered (the `tracing` layer's path): no iterator to
/// drain, the `Fields` moves into the event as it is.
pub(crate) fn report_fields(label: Cow<'static, str>, fields: Fields) -> Option<OpId> {
    with_sampled_current(|ctx| emit_fields(ctx, label, None, fields))
}

/// [`report_fields`] with small key/values (the layer's `span: exit`): nothing to convert.
pub(crate) fn report_small(label: Cow<'static, str>, fields: SmallFields) -> Option<OpId> {
    with_sampled_current(|ctx| emit_small(ctx, label, None, fields))
}

/// What [`restore_current`] did with the thread's context.
pub(crate) enum Restore {
    /// `restored` became the thread's context; this is the one it replaced (`None` also when
    /// the thread's context was busy or destroyed and `restored` was dropped).
    Replaced(Option<Context>),
    /// `f` returned true: the thread's context stays, and `restored`, left in place, equals
    /// it but for its parents (the same task, sampling, options and carried values): with the
    /// parents `f` saw as the current ones it is a copy of the current context.
    Kept,
    /// `f` returned true: the thread's context stays; `restored` (dropped) differed from it in
    /// more than its parents, so this is a clone of it.
    Cloned(Option<Context>),
}

/// Makes `restored` the thread's current context after `f` has adjusted it with the current
/// one in view (the layer's span exit): one thread-local access and at most one swap (see
/// [`Restore`]). When `f` returns true, `restored` would become a copy of the current context:
/// the current one stays instead (no swap), and `restored` is either kept as the caller's copy
/// of it (only the parents differ: no clone) or dropped for a clone. When the thread's context
/// is busy or destroyed, `f` does not run and `restored` is dropped, as [`set_current`] would.
/// `restored` is the caller's (the span state's own place, read and adjusted there, not moved
/// in and out of this call) and is left `None` unless the result is [`Restore::Kept`].
#[inline]
pub(crate) fn restore_current(
    restored: &mut Option<Context>,
    f: impl FnOnce(&mut Option<Context>, Option<&Context>) -> bool,
) -> Restore {
    let done = CURRENT
        .try_with(|c| {
            let Ok(mut cur) = c.try_borrow_mut() else {
                return Restore::Replaced(None);
            };
            if f(restored, cur.as_ref()) {
                return match (restored.as_ref(), cur.as_ref()) {
                    (Some(r), Some(c))
                        if r.task == c.task
                            && r.sampled == c.sampled
                            && same_arc(&r.options, &c.options)
                            && same_arc(&r.carried, &c.carried) =>
                    {
                        Restore::Kept
                    }
                    _ => Restore::Cloned(cur.clone()),
                };
            }
            if !same_publication(&cur, restored) {
                publish_sampled(restored);
            }
            Restore::Replaced(std::mem::replace(&mut *cur, restored.take()))
        })
        .unwrap_or(Restore::Replaced(None));
    if !matches!(done, Restore::Kept) {
        *restored = None;
    }
    done
}

/// Whether `ctx` is the thread's current context as it stands: the same task, sampling decision
/// and parents, and the same options and carried values (by identity: the same `Arc`s).
#[inline]
pub(crate) fn is_current(ctx: &Context) -> bool {
    CURRENT
        .try_with(|c| {
            c.try_borrow().is_ok_and(|cur| {
                cur.as_ref().is_some_and(|cur| {
                    cur.task == ctx.task
                        && cur.sampled == ctx.sampled
                        && cur.parents.as_slice() == ctx.parents.as_slice()
                        && same_arc(&cur.options, &ctx.options)
                        && same_arc(&cur.carried, &ctx.carried)
                })
            })
        })
        .unwrap_or(false)
}

/// Both `None`, or the same `Arc`.
fn same_arc<T: ?Sized>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

/// Whether the thread's current context is a sampled task's: one thread-local load.
#[inline]
pub(crate) fn current_is_sampled() -> bool {
    CURRENT_SAMPLED.get()
}

/// An event builder reporting through the thread's current context.
///
/// ```
/// causal::event("cache miss").agent("cache").kv("key_len", 12u32).report();
/// ```
pub fn event(label: impl Into<Cow<'static, str>>) -> EventBuilder<'static> {
    EventBuilder {
        target: Target::Current,
        label: label.into(),
        agent: None,
        fields: Fields::new(),
    }
}

enum Target<'a> {
    Current,
    Explicit(&'a mut Context),
}

/// Builds one event: label, optional agent, key/values; [`EventBuilder::report`] sends it.
#[must_use = "an event is reported only by .report()"]
pub struct EventBuilder<'a> {
    target: Target<'a>,
    label: Cow<'static, str>,
    agent: Option<&'static str>,
    fields: Fields,
}

impl fmt::Debug for EventBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventBuilder")
            .field("label", &self.label)
            .field("agent", &self.agent)
            .finish()
    }
}

impl EventBuilder<'_> {
    /// The `Agent` of this event (default: the reporter's agent, see `Config::agent`).
    pub fn agent(mut self, agent: &'static str) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Adds a key/value.
    pub fn kv(mut self, key: &'static str, value: impl Into<Value>) -> Self {
        self.fields.push(key, value.into());
        self
    }

    /// Reports the event; returns its OpId, or `None` when there is no context or the task is
    /// unsampled.
    pub fn report(self) -> Option<OpId> {
        let EventBuilder {
            target,
            label,
            agent,
            fields,
        } = self;
        match target {
            Target::Explicit(ctx) => {
                if !ctx.sampled {
                    return None;
                }
                emit_fields(ctx, label, agent, fields)
            }
            Target::Current => CURRENT
                .try_with(|c| {
                    match c
                        .try_borrow_mut()
                        .as_deref_mut()
                        .ok()
                        .and_then(Option::as_mut)
                    {
                        Some(ctx) if ctx.sampled => emit_fields(ctx, label, agent, fields),
                        _ => None,
                    }
                })
                .ok()
                .flatten(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(task: u64, op: u64) -> Context {
        Context::from_metadata(&Metadata::new(
            TaskId::from_u64(task).unwrap(),
            OpId::new(op),
        ))
    }

    #[test]
    fn queued_events_and_contexts_stay_small() {
        // Every event is copied whole into its thread's queue, whose ring holds
        // `queue_capacity` of them: the packed OpId (9 bytes, not 16) keeps 4 inline parents
        // at 37 bytes instead of 72.
        assert_eq!(std::mem::size_of::<OpId>(), 9);
        assert_eq!(std::mem::size_of::<Parents>(), 40);
        let (ev, cx) = (
            std::mem::size_of::<RawEvent>(),
            std::mem::size_of::<Context>(),
        );
        assert!(ev <= 336, "RawEvent is {ev} bytes (376 before)");
        assert!(cx <= 88, "Context is {cx} bytes (120 before)");
        // The common event is queued compact: two cache lines, the ring's mark included.
        assert_eq!(std::mem::size_of::<SmallFields>(), 80);
        assert_eq!(std::mem::size_of::<CompactEvent>(), 128);
        assert_eq!(std::mem::size_of::<crate::reporter::Queued>(), 128);
    }

    #[test]
    fn join_merges_parents_of_the_same_task_without_duplicates() {
        let j = ctx(1, 10).join(&ctx(1, 11)).join(&ctx(1, 10));
        assert_eq!(j.parents(), &[OpId::new(10), OpId::new(11)]);
        let all = Context::join_all([
            &ctx(1, 1),
            &ctx(1, 2),
            &ctx(1, 3),
            &ctx(1, 4),
            &ctx(1, 5),
            &ctx(1, 6),
        ])
        .unwrap();
        assert_eq!(all.parents().len(), 6, "spills past the 4 inline parents");
        assert_eq!(all.parents()[5], OpId::new(6));
        assert!(Context::join_all(std::iter::empty()).is_none());
    }

    #[test]
    fn join_ignores_another_task() {
        let a = ctx(1, 10);
        assert_eq!(a.join(&ctx(2, 11)), a);
    }

    #[test]
    fn metadata_and_traceparent_name_the_latest_parent() {
        let j = ctx(1, 10).join(&ctx(1, 11));
        assert_eq!(j.metadata().unwrap().op_id(), OpId::new(11));
        assert_eq!(j.traceparent().unwrap().parent_op(), OpId::new(11));
        let fresh = Context::new_task(true);
        assert!(
            fresh.parents().is_empty()
                && fresh.metadata().is_none()
                && fresh.traceparent().is_none()
        );
        let unsampled = Context::new_task(false);
        assert!(
            unsampled.metadata().is_none(),
            "no X-Trace metadata for unsampled tasks"
        );
        assert!(!unsampled.traceparent().unwrap().sampled());
    }

    #[test]
    fn remove_parents_keeps_the_rest_in_order() {
        let mut j = Context::join_all([&ctx(1, 1), &ctx(1, 2), &ctx(1, 3)]).unwrap();
        j.remove_parents(&[OpId::new(2)]);
        assert_eq!(j.parents(), &[OpId::new(1), OpId::new(3)]);
    }

    #[test]
    fn report_follows_every_change_of_the_current_context() {
        let report = || crate::report("x", []).is_some();
        let sampled = ctx(7, 1);
        let unsampled = Context::with_task(TaskId::from_u64(7).unwrap(), false);
        set_current(None);
        assert!(!report(), "no context");
        set_current(Some(unsampled.clone()));
        assert!(!report(), "unsampled");
        join_current([&sampled]);
        assert!(report(), "joined with a sampled path of the task");
        let taken = take_current();
        assert!(taken.is_some_and(|c| c.is_sampled()));
        assert!(!report(), "taken");
        {
            let _g = sampled.clone().attach();
            assert!(report(), "attached");
            {
                let _g = unsampled.clone().attach();
                assert!(!report(), "unsampled attached inside");
            }
            assert!(report(), "restored by the inner guard");
            let _ = set_current(Some(unsampled.clone()));
        }
        assert!(!report(), "restored to none");
        join_current([&unsampled]);
        assert!(!report(), "joined into none: unsampled");
        let g = sampled.attach();
        assert!(g.detach().is_some());
        assert!(!report(), "detached");
        set_current(None);
    }

    #[test]
    fn fields_spill_past_four() {
        let f = Fields::collect((0..6u64).map(|i| ("k", Value::U64(i))));
        let vals: Vec<String> = f.iter().map(|(_, v)| v.to_string()).collect();
        assert_eq!(vals, ["0", "1", "2", "3", "4", "5"]);
    }
}
