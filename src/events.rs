//! Expiry events: for each item the sweeper expires, an event to EventBridge, SQS or Firehose —
//! `Item Expired` (and, in archive mode, `Item Expiry Cancelled` when the delete finds the ttl
//! changed), with a stable id for de-duplication. Contract and semantics: `docs/events.md`.
//!
//! - [`model`]: the event, its stable id and JSON shapes. Pure.
//! - [`sink`]: where events go ([`SinkTarget`]), batch limits and batching, the seam [`Sink`].
//! - [`aws`]: the [`Sink`] adapters over the SDK clients.
//! - [`publish`]: [`Publisher`], batches with bounded retries, backoff and full jitter.
//!
//! [`Events`] is the engine's [`ExpiryHook`], called from its delete path: a slow sink holds the
//! delete slots, and memory stays bounded by the chunks in flight (`docs/events.md`, "Publishing").

use std::sync::Arc;
use std::time::Duration;

use crate::engine::hook::{
    BoxFuture, Delivery, EventTally, Expiry, ExpiryHook, FailedEvent, Publication,
};
use crate::engine::{DeleteMode, Stop};
use crate::store::Retry;

pub mod aws;
pub mod model;
pub mod publish;
pub mod sink;

pub use model::{event_id, EventFacts, EventKind, EventsMode, ExpiryEvent, ItemSource};
pub use publish::{Published, Publisher};
pub use sink::{EntryResult, Sink, SinkError, SinkKind, SinkTarget};

/// Validated expiry-event settings (`EXPIRY_EVENTS*`), for a sweep that publishes events.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EventsConfig {
    /// Where events go.
    pub target: SinkTarget,
    /// Notify or archive.
    pub mode: EventsMode,
    /// How the item gets into events.
    pub item: ItemSource,
    /// The table as configured, as events name it.
    pub table: String,
    /// The delete mode, as events name it.
    pub delete_mode: DeleteMode,
    /// Retries of a batch call or entry (`MAX_RETRIES`).
    pub max_retries: u32,
}

/// The engine's [`ExpiryHook`]: builds events and publishes them.
#[derive(Debug, Clone)]
pub struct Events {
    publisher: Publisher,
    config: EventsConfig,
}

impl Events {
    /// Events for `config`, published through `sink`.
    pub fn new(config: &EventsConfig, sink: Arc<dyn Sink>) -> Self {
        let mut publisher = Publisher::new(sink, config.target.kind());
        publisher.retry = publisher.retry.with_retries(config.max_retries);
        let config = config.clone();
        Events { publisher, config }
    }

    /// Changes the backoff (tests use short waits).
    pub fn with_backoff(mut self, base: Duration, cap: Duration) -> Self {
        self.publisher.retry = Retry {
            base,
            cap,
            ..self.publisher.retry
        };
        self
    }

    /// The event of one publication.
    fn event(&self, publication: &Publication) -> ExpiryEvent {
        let (expiry, cancelled_at) = match publication {
            Publication::Expired(e) => (e, None),
            Publication::Cancelled(e, at) => (e, Some(*at)),
        };
        let facts = EventFacts {
            table: &self.config.table,
            key: &expiry.key,
            ttl: expiry.ttl,
            deleted_at: expiry.at,
            delete_mode: &self.config.delete_mode.to_string(),
            mode: self.config.mode,
            item: match self.config.item {
                ItemSource::Off => None,
                _ => expiry.item.as_ref(),
            },
        };
        match cancelled_at {
            None => ExpiryEvent::expired(&facts),
            Some(at) => ExpiryEvent::cancelled(&facts, at),
        }
    }
}

impl ExpiryHook for Events {
    fn archive(&self) -> bool {
        self.config.mode == EventsMode::Archive
    }

    fn read_items(&self) -> bool {
        self.config.item == ItemSource::Read
    }

    fn returned_items(&self) -> bool {
        self.config.item == ItemSource::Auto && !self.archive()
    }

    fn event_id(&self, expiry: &Expiry) -> String {
        event_id(&self.config.table, &expiry.key, expiry.ttl)
    }

    fn publish<'a>(
        &'a self,
        publications: Vec<Publication>,
        stop: &'a Stop,
    ) -> BoxFuture<'a, (Vec<Delivery>, EventTally)> {
        Box::pin(async move {
            let events = publications.iter().map(|p| self.event(p)).collect();
            let published = self.publisher.publish(events, stop).await;
            let mut tally = EventTally {
                retried: published.retried,
                truncated: published.truncated,
                ..EventTally::default()
            };
            for (publication, delivery) in publications.iter().zip(&published.deliveries) {
                let reason = match (delivery, publication) {
                    (Delivery::Accepted, Publication::Expired(_)) => {
                        tally.published += 1;
                        continue;
                    }
                    (Delivery::Accepted, Publication::Cancelled(..)) => {
                        tally.cancelled += 1;
                        continue;
                    }
                    (Delivery::Failed(reason), _) => reason.clone(),
                    (Delivery::Stopped, _) => {
                        "not published before the sweep had to stop (deadline or shutdown)"
                            .to_owned()
                    }
                };
                // In archive mode an expiry that was not accepted is not deleted either; it is
                // still an event that did not go out, and the item's failure is reported with it.
                let ExpiryEvent { id, key, .. } = self.event(publication);
                tracing::error!(event_id = %id, key = %key, sink = ?self.publisher.kind(), %reason, "expiry event not published");
                tally.failed += 1;
                tally.failed_events.push(FailedEvent { id, key, reason });
            }
            (published.deliveries, tally)
        })
    }
}

/// Connect timeout of the sink clients.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Timeout of one sink call (each attempt; the publisher retries).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The production hook for `config`: its sink an SDK client from the standard AWS configuration
/// chain (`AWS_REGION`, `AWS_ENDPOINT_URL_SQS` / `_EVENTBRIDGE` / `_FIREHOSE` or
/// `AWS_ENDPOINT_URL`, credentials), with explicit timeouts and the SDK's own retries off: the
/// publisher retries, entry by entry, so attempts do not multiply.
pub async fn connect(config: &EventsConfig) -> Events {
    use aws::AwsSink;
    use aws_config::retry::RetryConfig;
    use aws_config::timeout::TimeoutConfig;
    use aws_sdk_eventbridge::Client as EventBridge;
    use aws_sdk_firehose::Client as Firehose;
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .operation_timeout(ATTEMPT_TIMEOUT)
        .build();
    let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .timeout_config(timeouts)
        .retry_config(RetryConfig::disabled())
        .load()
        .await;
    let sink: Arc<dyn Sink> = match &config.target {
        SinkTarget::EventBridge(bus) => Arc::new(AwsSink::new(EventBridge::new(&shared), bus)),
        SinkTarget::Sqs(url) => Arc::new(AwsSink::new(aws_sdk_sqs::Client::new(&shared), url)),
        SinkTarget::Firehose(stream) => Arc::new(AwsSink::new(Firehose::new(&shared), stream)),
    };
    Events::new(config, sink)
}
