//! Stopping without losing what is open: stop accepting, let open connections finish within a
//! deadline, then cut the rest.
//!
//! Every listener and connection task of one part of the sidecar (the data path, the admin
//! API) is spawned on its [`Drain`], never detached. [`Drain::run`] is the whole stop: the
//! listeners see [`Drain::stopping`] and close, so new connections are refused; an HTTP
//! connection finishes the request it is answering and closes; tunnels and other
//! conversations go on until they end or the deadline passes. Then [`Drain::cut`] fires: a
//! tunnel journals what it moved and closes, and every other task is dropped at its next poll,
//! so the ticket it held is journaled as `shutdown` ([`crate::decide::Ticket`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tokio_util::task::TaskTracker;

/// One part of the sidecar's tasks and when they stop. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct Drain {
    stopping: CancellationToken,
    cut: CancellationToken,
    tasks: TaskTracker,
}

/// How a `Drain::run` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Tasks still open at the deadline, and cut.
    pub cut: usize,
}

impl Drain {
    /// Run `task` until it ends or the drain is cut; tracked, so [`Drain::run`] waits for it.
    pub(crate) fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn(UntilCut {
            task,
            cut: self.cut.clone().cancelled_owned(),
        });
    }

    /// Completes once the sidecar is stopping: listeners stop accepting, HTTP connections stop
    /// keeping alive.
    pub(crate) fn stopping(&self) -> impl Future<Output = ()> + Send + 'static {
        self.stopping.clone().cancelled_owned()
    }

    /// Completes once the deadline has passed: whatever is still open ends now.
    pub(crate) fn cut(&self) -> impl Future<Output = ()> + Send + 'static {
        self.cut.clone().cancelled_owned()
    }

    /// Whether the deadline has passed.
    pub(crate) fn is_cut(&self) -> bool {
        self.cut.is_cancelled()
    }

    /// Stop accepting, wait up to `deadline` for every task, cut the ones still open, and
    /// return once all have ended.
    pub(crate) async fn run(&self, deadline: Duration) -> Drained {
        self.stopping.cancel();
        self.tasks.close();
        let cut = match tokio::time::timeout(deadline, self.tasks.wait()).await {
            Ok(()) => 0,
            Err(_) => self.tasks.len(),
        };
        self.cut.cancel();
        self.tasks.wait().await;
        Drained { cut }
    }

    /// Completes once [`Drain::run`] (or [`Drain::abandon`]) has begun and every task has
    /// ended: a data thread runs its runtime until then, so the tasks it holds finish on it.
    pub(crate) fn finished(&self) -> impl Future<Output = ()> + Send + 'static {
        let tasks = self.tasks.clone();
        async move { tasks.wait().await }
    }

    /// Stop and cut at once, without waiting (a sidecar dropped rather than drained).
    pub(crate) fn abandon(&self) {
        self.stopping.cancel();
        self.tasks.close();
        self.cut.cancel();
    }
}

/// hyper's HTTP/2 server runs each stream on the drain, so streams are tracked and cut with
/// their connection.
impl<F> hyper::rt::Executor<F> for Drain
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        self.spawn(fut.map(drop));
    }
}

pin_project_lite::pin_project! {
    /// A task that ends when it does or when the drain is cut. The task is polled first: one
    /// that watches the cut itself (a tunnel) finishes its record in the poll that sees it,
    /// rather than being dropped first. It is held in place, not moved into an `async` block's
    /// state (which would hold it twice over), so a connection's task is the size of its own
    /// future.
    struct UntilCut<F> {
        #[pin]
        task: F,
        #[pin]
        cut: WaitForCancellationFutureOwned,
    }
}

impl<F: Future<Output = ()>> Future for UntilCut<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this.task.poll(cx).is_ready() {
            return Poll::Ready(());
        }
        this.cut.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

    #[tokio::test]
    async fn a_task_that_ends_once_stopping_is_waited_for_and_not_cut() {
        let drain = Drain::default();
        let finished = Arc::new(AtomicBool::new(false));
        {
            let (stopping, finished) = (drain.stopping(), finished.clone());
            drain.spawn(async move {
                stopping.await;
                tokio::task::yield_now().await;
                finished.store(true, Relaxed);
            });
        }
        let drained = drain.run(Duration::from_secs(3600)).await;
        assert!(finished.load(Relaxed));
        assert_eq!(drained, Drained { cut: 0 });
    }

    #[tokio::test]
    async fn at_the_deadline_an_open_task_is_counted_and_dropped() {
        let drain = Drain::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        drain.spawn(async move {
            let _held = tx;
            std::future::pending::<()>().await;
        });
        let drained = drain.run(Duration::ZERO).await;
        assert_eq!(drained, Drained { cut: 1 });
        assert!(drain.is_cut());
        // The task's future was dropped, and with it what it held.
        assert!(rx.await.is_err());
    }

    #[tokio::test]
    async fn a_task_that_watches_the_cut_finishes_in_the_poll_that_sees_it() {
        let drain = Drain::default();
        let finished = Arc::new(AtomicBool::new(false));
        {
            let (cut, finished) = (drain.cut(), finished.clone());
            drain.spawn(async move {
                cut.await;
                finished.store(true, Relaxed);
            });
        }
        let drained = drain.run(Duration::ZERO).await;
        assert_eq!(drained, Drained { cut: 1 }, "open at the deadline");
        assert!(finished.load(Relaxed), "polled before it was dropped");
    }
}
