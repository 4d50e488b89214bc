//! [`Pending`]: the handle of one request, waited for by blocking or by `.await`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::engine::Inner;
use super::request::Response;
use crate::Result;

/// Turns the raw answer into the typed one.
type Decode<T> = fn(Response) -> Result<T>;

/// One request on its way: [`Pending::wait`] blocks for its answer; as a
/// [`Future`] it completes when the answer (or its timeout) arrives, under any
/// executor (the client's driver thread files answers and wakes the waker).
/// Dropping it forgets the request (its answer is dropped when it comes).
#[must_use = "a request's answer is only read through its handle"]
pub struct Pending<T> {
    inner: Arc<Inner>,
    tid: u32,
    decode: Decode<T>,
    done: bool,
}

impl<T> core::fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pending").field("tid", &self.tid).finish()
    }
}

impl<T> Pending<T> {
    pub(crate) fn new(inner: Arc<Inner>, tid: u32, decode: Decode<T>) -> Pending<T> {
        Pending {
            inner,
            tid,
            decode,
            done: false,
        }
    }

    /// The low word of the request's TID (the high word is the client's agent's).
    pub fn tid(&self) -> u32 {
        self.tid
    }

    /// Block until the answer arrives.
    ///
    /// # Errors
    /// ETIMEDOUT when every attempt went unanswered; ECONNABORTED when the RMPP
    /// transfer of the answer was aborted; EPROTO for an answer with an error status
    /// (typed calls); EIO/EINVAL when the port failed or was closed.
    pub fn wait(mut self) -> Result<T> {
        self.done = true;
        let r = self.inner.wait(self.tid);
        r.and_then(self.decode)
    }
}

impl<T> Pending<T> {
    /// The answer if it has come, without waiting: with [`super::Client::drive`], for
    /// a loop of its own that keeps many requests going. `None` while it is on its
    /// way, and after the answer has been taken.
    pub fn try_wait(&mut self) -> Option<Result<T>> {
        if self.done {
            return None;
        }
        let r = self.inner.try_take(self.tid)?;
        self.done = true;
        Some(r.and_then(self.decode))
    }
}

impl<T> Future for Pending<T> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        if self.done {
            return Poll::Ready(Err(crate::Error::InvalidArgument(
                "request already completed",
            )));
        }
        match self.inner.poll(self.tid, cx.waker()) {
            Some(r) => {
                self.done = true;
                Poll::Ready(r.and_then(self.decode))
            }
            None => Poll::Pending,
        }
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        if !self.done {
            self.inner.abandon(self.tid);
        }
    }
}
