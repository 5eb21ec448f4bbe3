//! Futures that run in a context: `.in_context(ctx)` makes `ctx` current during every poll and
//! keeps the events reported meanwhile, wherever the executor polls it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskCx, Poll};

use crate::context::{self, Context};

pin_project_lite::pin_project! {
    /// A future polled with a causal context current (see [`InContextExt::in_context`]).
    #[derive(Debug)]
    pub struct InContext<F> {
        #[pin]
        inner: F,
        ctx: Option<Context>,
    }
}

impl<F> InContext<F> {
    /// The context as it stands (with the events reported by polls so far).
    pub fn context(&self) -> Option<&Context> {
        self.ctx.as_ref()
    }
}

impl<F: Future> Future for InContext<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<F::Output> {
        let this = self.project();
        let prev = context::set_current(this.ctx.take());
        // Restore the thread's context even if the inner poll panics.
        struct Restore<'a> {
            slot: &'a mut Option<Context>,
            prev: Option<Option<Context>>,
        }
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                if let Some(prev) = self.prev.take() {
                    *self.slot = context::set_current(prev);
                }
            }
        }
        let _restore = Restore {
            slot: this.ctx,
            prev: Some(prev),
        };
        this.inner.poll(cx)
    }
}

/// Adds `.in_context(ctx)` and `.in_current_context()` to every future.
pub trait InContextExt: Future + Sized {
    /// Polls this future with `ctx` current; events reported inside chain from `ctx` and stay with
    /// the future across threads.
    fn in_context(self, ctx: Context) -> InContext<Self> {
        InContext {
            inner: self,
            ctx: Some(ctx),
        }
    }

    /// `in_context` with the caller's current context (when there is one).
    fn in_current_context(self) -> InContext<Self> {
        InContext {
            inner: self,
            ctx: Context::current(),
        }
    }
}

impl<F: Future> InContextExt for F {}
