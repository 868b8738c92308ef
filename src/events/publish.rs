//! [`Publisher`]: one chunk's events through a [`Sink`], in batches within the service's limits,
//! with bounded retries (exponential backoff, full jitter) of the calls and of the single entries
//! that failed. Every event ends accepted, failed (with the reason) or stopped (the sweep had to
//! stop): none is dropped without a word.

use std::sync::Arc;
use std::time::Duration;

use super::model::ExpiryEvent;
use super::sink::{EntryResult, Sink, SinkError, SinkKind};
use crate::engine::hook::Delivery;
use crate::engine::Stop;
use crate::store::{Backoff, Retry};

/// Sends events through a sink with retries.
#[derive(Debug, Clone)]
pub struct Publisher {
    sink: Arc<dyn Sink>,
    kind: SinkKind,
    /// How a batch call or entry is tried.
    pub retry: Retry,
}

/// How long past the stop's deadline a sink call may run before it is given up (its events reported
/// failed): in the Lambda, whose stop is 3 s before the deadline, a call ends 1 s before it, so the
/// sweep ends and its summary is written with every event accounted for.
pub const PUBLISH_PAST_STOP: Duration = Duration::from_secs(2);

/// What publishing a list of events did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Published {
    /// One per event, in order.
    pub deliveries: Vec<Delivery>,
    /// Entry re-submissions.
    pub retried: u64,
    /// Events that lost their item to the size limit.
    pub truncated: u64,
}

impl Publisher {
    /// A publisher over `sink`, a `kind` service, retrying like the deletes (8 retries, 50 ms
    /// doubling to 5 s) until told otherwise.
    pub fn new(sink: Arc<dyn Sink>, kind: SinkKind) -> Self {
        Publisher {
            sink,
            kind,
            retry: Retry::default(),
        }
    }

    /// The service.
    pub fn kind(&self) -> SinkKind {
        self.kind
    }

    /// Publishes `events`. The first attempt is always made; a retry only when its wait does
    /// not run into `stop` (the events left then end [`Delivery::Stopped`]).
    pub async fn publish(&self, mut events: Vec<ExpiryEvent>, stop: &Stop) -> Published {
        let mut out = Published {
            deliveries: vec![Delivery::Stopped; events.len()],
            ..Published::default()
        };
        out.truncated = self.kind.plan_batches(&mut events).1;
        // Indices not yet settled, with the last reason they failed for.
        let mut pending: Vec<(usize, String)> =
            (0..events.len()).map(|i| (i, String::new())).collect();
        let mut backoff = Backoff::new(self.retry);
        loop {
            let mut batch_events: Vec<ExpiryEvent> =
                pending.iter().map(|(i, _)| events[*i].clone()).collect();
            let (batches, _) = self.kind.plan_batches(&mut batch_events);
            let mut still = Vec::new();
            for range in batches {
                let slots = &pending[range.clone()];
                let put = self.sink.put(&batch_events[range.clone()]);
                let answer = match stop.deadline() {
                    None => put.await,
                    // Not retried: the sweep is out of time. Reported by id, never silently lost.
                    Some(d) => tokio::time::timeout_at(d + PUBLISH_PAST_STOP, put)
                        .await
                        .unwrap_or_else(|_| {
                            let late = "the sink had not answered when the sweep ran out of time \
                                        (its deadline)";
                            Err(SinkError::new(false, late))
                        }),
                };
                match answer {
                    Ok(results) if results.len() == slots.len() => {
                        for ((i, _), result) in slots.iter().zip(results) {
                            match result {
                                EntryResult::Accepted => out.deliveries[*i] = Delivery::Accepted,
                                EntryResult::Failed { retryable, reason } if retryable => {
                                    still.push((*i, reason))
                                }
                                EntryResult::Failed { reason, .. } => {
                                    out.deliveries[*i] = Delivery::Failed(reason)
                                }
                            }
                        }
                    }
                    Ok(results) => {
                        let (got, sent) = (results.len(), slots.len());
                        let reason = format!("the sink answered {got} results for {sent} entries");
                        still.extend(slots.iter().map(|(i, _)| (*i, reason.clone())));
                    }
                    Err(e) if e.retryable => {
                        still.extend(slots.iter().map(|(i, _)| (*i, e.message.clone())))
                    }
                    Err(e) => {
                        for (i, _) in slots {
                            out.deliveries[*i] = Delivery::Failed(e.message.clone());
                        }
                    }
                }
            }
            pending = still;
            if pending.is_empty() {
                return out;
            }
            let Some(wait) = backoff.next_wait() else {
                let made = backoff.made();
                for (i, reason) in pending {
                    out.deliveries[i] =
                        Delivery::Failed(format!("{reason} (after {made} attempts)"));
                }
                return out;
            };
            if stop.would_pass(wait) {
                // Left as Stopped.
                return out;
            }
            tracing::debug!(attempt = backoff.made(), events = pending.len(), wait_ms = wait.as_millis() as u64, reason = %pending[0].1, "retrying expiry events");
            out.retried += pending.len() as u64;
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    use super::*;
    use crate::events::model::test_event;
    use crate::events::sink::{BoxFuture, SinkError};

    /// Fails every call, retryably; counts the calls.
    #[derive(Debug, Default)]
    struct Down(AtomicUsize);

    impl Sink for Down {
        fn put<'a>(
            &'a self,
            _batch: &'a [ExpiryEvent],
        ) -> BoxFuture<'a, Result<Vec<EntryResult>, SinkError>> {
            self.0.fetch_add(1, SeqCst);
            Box::pin(async { Err(SinkError::new(true, "503")) })
        }
    }

    fn events(n: usize) -> Vec<ExpiryEvent> {
        (0..n).map(|i| test_event(&i.to_string())).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_stop_one_attempt_is_made_and_the_rest_is_reported_stopped() {
        let sink = Arc::new(Down::default());
        let p = Publisher::new(sink.clone(), SinkKind::Sqs);
        let stop = Stop::never();
        stop.token().cancel();
        let out = p.publish(events(15), &stop).await;
        assert_eq!(
            sink.0.load(SeqCst),
            2,
            "one attempt: two batches of at most 10"
        );
        assert_eq!(out.deliveries, vec![Delivery::Stopped; 15]);
        assert_eq!(out.retried, 0);
    }

    /// Never answers.
    #[derive(Debug, Default)]
    struct Hung;

    impl Sink for Hung {
        fn put<'a>(
            &'a self,
            _batch: &'a [ExpiryEvent],
        ) -> BoxFuture<'a, Result<Vec<EntryResult>, SinkError>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_sink_that_does_not_answer_by_the_deadline_gets_its_events_reported_failed() {
        let p = Publisher::new(Arc::new(Hung), SinkKind::Sqs);
        let started = tokio::time::Instant::now();
        let stop = Stop::at(Some(started + Duration::from_secs(5)));
        let out = p.publish(events(12), &stop).await;
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(5) + PUBLISH_PAST_STOP
        );
        assert_eq!(out.deliveries.len(), 12);
        assert!(
            out.deliveries
                .iter()
                .all(|d| matches!(d, Delivery::Failed(r) if r.contains("ran out of time"))),
            "{:?}",
            out.deliveries
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retries_are_bounded_then_every_event_is_failed_with_its_reason() {
        let sink = Arc::new(Down::default());
        let mut p = Publisher::new(sink.clone(), SinkKind::Firehose);
        p.retry.attempts = 5;
        let started = tokio::time::Instant::now();
        let out = p.publish(events(3), &Stop::never()).await;
        assert_eq!(sink.0.load(SeqCst), 5, "1 + 4 attempts");
        assert_eq!(out.retried, 12);
        assert!(out
            .deliveries
            .iter()
            .all(|d| matches!(d, Delivery::Failed(r) if r == "503 (after 5 attempts)")));
        // Full jitter under a 50 ms base: at most 50 + 100 + 200 + 400 ms of waiting.
        assert!(started.elapsed() <= Duration::from_millis(750));
    }
}
