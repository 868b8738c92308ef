//! When to stop: [`Stop`], the deadline-or-shutdown condition every loop of the engine checks
//! before starting new work. (The backoff between attempts is [`crate::store::full_jitter`].)

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// When a sweep must stop starting new work: a deadline, a shutdown request, or both.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    deadline: Option<Instant>,
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
            cancel: CancellationToken::new(),
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
            deadline: self.deadline,
            cancel: self.cancel.child_token(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
