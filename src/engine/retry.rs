//! When to stop and how long to wait: [`Stop`], the deadline-or-shutdown condition every loop of
//! the engine checks before starting new work, and the instant by which every store call of a sweep
//! ends. Its retry loops wait through [`crate::store::Backoff`], the one backoff.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::{ErrorKind, StoreError, BATCH_ATTEMPT_TIMEOUT};

/// How long store calls (and the stream follower's indexing) may still run after a shutdown
/// request (SIGTERM, SIGINT): then they are cut, so that `run` exits within about this long
/// whatever DynamoDB does. A delete cut this way may still be applied; it is reported as not
/// known to be done, and a batch key was read at most `BATCH_MAX_READ_AGE` before its send.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// When a sweep must stop starting new work: a deadline, a shutdown request, or both.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    deadline: Option<Instant>,
    /// Every store call ends by then ([`Stop::bound`]).
    calls_end: Option<Instant>,
    cancel: CancellationToken,
}

impl Stop {
    /// Never stops early.
    pub fn never() -> Self {
        Stop::default()
    }

    /// Stops at `deadline`, if any.
    pub fn at(deadline: Option<Instant>) -> Self {
        Stop {
            deadline,
            ..Stop::default()
        }
    }

    /// Also ends every store call of the sweep still unanswered at `end` (retries included),
    /// however long its attempt timeout and retries would let it run: it answers a retryable
    /// timeout instead, so the caller reports what is left while there is time to.
    pub fn with_calls_ending(mut self, end: Option<Instant>) -> Self {
        self.calls_end = end;
        self
    }

    /// `call` (the store's `operation`), ended as [`Stop::with_calls_ending`] says, and, after a
    /// shutdown request, [`SHUTDOWN_GRACE`] after it: either way it answers a retryable timeout.
    pub async fn bound<T>(
        &self,
        operation: &'static str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.within_limits(call).await.unwrap_or_else(|why| {
            let message = format!("timed out: {why}");
            Err(StoreError::new(ErrorKind::Transient, operation, message))
        })
    }

    /// `work`, unless it is still running when calls must end ([`Stop::with_calls_ending`]) or
    /// [`SHUTDOWN_GRACE`] after a shutdown request: then it is dropped and the error says which.
    pub async fn within_limits<F: Future>(&self, work: F) -> Result<F::Output, &'static str> {
        let calls_end = async {
            match self.calls_end {
                Some(end) => tokio::time::sleep_until(end).await,
                None => std::future::pending().await,
            }
        };
        let shutdown = async {
            self.cancel.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            biased;
            done = work => Ok(done),
            () = calls_end => Err("no answer before the deadline set for calls"),
            () = shutdown => Err("no answer within SHUTDOWN_GRACE of the shutdown request"),
        }
    }

    /// This stop condition, also holding at `until` (the leader lease's validity): no new work
    /// starts after it, and every store call still unanswered [`BATCH_ATTEMPT_TIMEOUT`] after it
    /// ends then, if the bound of [`Stop::with_calls_ending`] is not earlier. Shutdown still
    /// stops it.
    pub fn within(&self, until: Instant) -> Stop {
        let calls_end = until + BATCH_ATTEMPT_TIMEOUT;
        Stop {
            deadline: Some(self.deadline.map_or(until, |d| d.min(until))),
            calls_end: Some(self.calls_end.map_or(calls_end, |e| e.min(calls_end))),
            cancel: self.cancel.clone(),
        }
    }

    /// Also stops when `token` is cancelled (e.g. on SIGTERM).
    pub fn with_cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The shutdown token.
    pub fn token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Sleeps until `at`: true, or false as soon as shutdown is requested.
    pub async fn sleep_until(&self, at: Instant) -> bool {
        tokio::select! {
            () = tokio::time::sleep_until(at) => true,
            () = self.cancel.cancelled() => false,
        }
    }

    /// Sleeps for `wait`: true, or false as soon as shutdown is requested.
    pub async fn sleep(&self, wait: Duration) -> bool {
        self.sleep_until(Instant::now() + wait).await
    }

    /// True once the deadline has passed or shutdown was requested.
    pub fn reached(&self) -> bool {
        self.cancel.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// True if waiting `wait` would run into the stop condition.
    pub(crate) fn would_pass(&self, wait: Duration) -> bool {
        self.cancel.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() + wait >= d)
    }

    /// A stop condition that also holds when this one does, but can be triggered on its own.
    pub(crate) fn child(&self) -> Stop {
        Stop {
            cancel: self.cancel.child_token(),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_unanswered_when_calls_end_answers_a_retryable_timeout_then() {
        let start = Instant::now();
        let end = start + Duration::from_secs(4);
        let stop = Stop::at(Some(start + Duration::from_secs(2))).with_calls_ending(Some(end));
        let never = std::future::pending::<Result<(), StoreError>>();
        let err = stop.bound("Query", never).await.unwrap_err();
        assert_eq!(Instant::now(), end);
        assert_eq!(err.kind, ErrorKind::Transient, "{err}");
        assert!(err.to_string().contains("Query"), "{err}");
        // A child keeps the bound; an answer in time passes through; no bound, no cut.
        let slow = async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(7)
        };
        let child = Stop::never()
            .with_calls_ending(Some(Instant::now() + Duration::from_secs(1)))
            .child();
        assert!(child.bound("Query", slow).await.is_err());
        assert_eq!(child.bound("Query", async { Ok(1) }).await.unwrap(), 1);
        let slow = async {
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok(2)
        };
        assert_eq!(Stop::never().bound("Query", slow).await.unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_within_a_lease_ends_at_the_earlier_of_the_two_and_still_on_shutdown() {
        let start = Instant::now();
        let secs = |s| start + Duration::from_secs(s);
        let token = CancellationToken::new();
        let stop = Stop::at(Some(secs(10)))
            .with_calls_ending(Some(secs(12)))
            .with_cancel(token.clone());
        let narrow = stop.within(secs(4));
        assert_eq!(narrow.deadline(), Some(secs(4)));
        assert_eq!(narrow.calls_end, Some(secs(4) + BATCH_ATTEMPT_TIMEOUT));
        // A later lease changes nothing.
        let wide = stop.within(secs(60));
        assert_eq!(wide.deadline(), Some(secs(10)));
        assert_eq!(wide.calls_end, Some(secs(12)));
        // No deadline before: the lease's.
        let open = Stop::never().within(secs(3));
        assert_eq!(open.deadline(), Some(secs(3)));
        assert!(!narrow.reached());
        tokio::time::advance(Duration::from_secs(4)).await;
        assert!(narrow.reached() && !stop.reached());
        let fresh = stop.within(secs(100));
        assert!(!fresh.reached());
        token.cancel();
        assert!(fresh.reached(), "shutdown stops a narrowed stop too");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_unanswered_after_a_shutdown_request_is_cut_after_the_grace() {
        let token = CancellationToken::new();
        let stop = Stop::never().with_cancel(token.clone());
        let call = tokio::spawn({
            let stop = stop.clone();
            async move {
                let never = std::future::pending::<Result<(), StoreError>>();
                stop.bound("BatchWriteItem", never).await
            }
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!call.is_finished(), "no shutdown, no cut");
        let asked = Instant::now();
        token.cancel();
        let err = call.await.unwrap().unwrap_err();
        assert_eq!(Instant::now() - asked, SHUTDOWN_GRACE);
        assert_eq!(err.kind, ErrorKind::Transient, "{err}");
        assert!(err.to_string().contains("SHUTDOWN_GRACE"), "{err}");
        // A call made after the request gets the grace too, and an answer in it passes through.
        let answered = async {
            tokio::time::sleep(SHUTDOWN_GRACE / 2).await;
            Ok(3)
        };
        assert_eq!(stop.bound("PutItem", answered).await.unwrap(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn stop_holds_at_the_deadline_or_on_cancel() {
        let stop = Stop::at(Some(Instant::now() + Duration::from_secs(10)));
        assert!(!stop.reached());
        assert!(stop.would_pass(Duration::from_secs(11)));
        assert!(!stop.would_pass(Duration::from_secs(9)));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(stop.reached());
        let token = CancellationToken::new();
        let stop = Stop::never().with_cancel(token.clone());
        let child = stop.child();
        assert!(!child.reached());
        token.cancel();
        assert!(stop.reached() && child.reached());
    }
}
