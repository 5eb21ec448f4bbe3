//! `std::thread` helpers that carry the current context to a new thread and join it back.

use std::thread::{self, JoinHandle as StdJoinHandle};

use crate::context::{self, Context};

/// A spawned thread's handle; [`JoinHandle::join`] joins the thread's final context into the
/// caller's, so the caller's next event follows the thread's last one (a fan-in).
#[derive(Debug)]
pub struct JoinHandle<T> {
    inner: StdJoinHandle<(T, Option<Context>)>,
}

impl<T> JoinHandle<T> {
    /// Waits for the thread; on success its last context is joined into the current one.
    ///
    /// # Errors
    /// The thread's panic payload, as [`std::thread::JoinHandle::join`].
    pub fn join(self) -> thread::Result<T> {
        let (v, ctx) = self.inner.join()?;
        if let Some(ctx) = ctx {
            context::join_current([&ctx]);
        }
        Ok(v)
    }

    /// Waits for the thread and returns its value and final context without joining it.
    ///
    /// # Errors
    /// The thread's panic payload.
    pub fn join_with_context(self) -> thread::Result<(T, Option<Context>)> {
        self.inner.join()
    }
}

/// Spawns a thread whose current context starts as the caller's current context.
///
/// # Panics
/// As [`std::thread::spawn`], when the OS cannot create a thread.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_named(None, f)
}

/// [`spawn`] with a thread name (reported as `ThreadName`).
///
/// # Panics
/// As [`std::thread::Builder::spawn`] followed by `expect`, when the OS cannot create a thread.
pub fn spawn_named<F, T>(name: Option<String>, f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let ctx = Context::current();
    let mut b = thread::Builder::new();
    if let Some(n) = name {
        b = b.name(n);
    }
    let inner = b
        .spawn(move || {
            context::set_current(ctx);
            let v = f();
            (v, context::take_current())
        })
        .expect("spawning a thread");
    JoinHandle { inner }
}
