//! Sinks: where events go ([`SinkTarget`], parsed from `EXPIRY_EVENTS`), each service's batch
//! limits ([`Limits`]) and the pure batching that keeps every call within them, and the
//! one-method seam [`Sink`] the publisher sends batches through.

use std::fmt;
use std::ops::Range;

use super::model::ExpiryEvent;
pub use crate::engine::hook::BoxFuture;

/// Which service a sink is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    /// Amazon EventBridge, `PutEvents`.
    EventBridge,
    /// Amazon SQS, `SendMessageBatch`.
    Sqs,
    /// Amazon Data Firehose, `PutRecordBatch`.
    Firehose,
}

/// Where events go: `EXPIRY_EVENTS` parsed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "sink", content = "target", rename_all = "lowercase")]
pub enum SinkTarget {
    /// An event bus, by name or ARN.
    EventBridge(String),
    /// A queue URL.
    Sqs(String),
    /// A delivery stream name.
    Firehose(String),
}

impl SinkTarget {
    /// The service.
    pub fn kind(&self) -> SinkKind {
        match self {
            SinkTarget::EventBridge(_) => SinkKind::EventBridge,
            SinkTarget::Sqs(_) => SinkKind::Sqs,
            SinkTarget::Firehose(_) => SinkKind::Firehose,
        }
    }

    /// Parses `eventbridge:<bus>`, `sqs:<queue URL>` or `firehose:<stream>`; the error says what
    /// is wrong with it.
    pub fn parse(text: &str) -> Result<SinkTarget, String> {
        let Some((scheme, target)) = text.split_once(':') else {
            return Err(format!(
                "no sink scheme in {text:?}: write eventbridge:<bus>, sqs:<queue URL> or firehose:<stream>"
            ));
        };
        let target = target.trim();
        let scheme = scheme.trim().to_ascii_lowercase();
        if !matches!(scheme.as_str(), "eventbridge" | "sqs" | "firehose") {
            return Err(format!(
                "unknown sink scheme {scheme:?}: use eventbridge, sqs or firehose"
            ));
        }
        if target.is_empty() {
            return Err(format!("empty target after {scheme:?}"));
        }
        let bus_name_ok = |name: &str| name_ok(name, 256, "./");
        // Whether the target is well formed, the sink it names, and what it must be otherwise.
        let (ok, sink, expected): (bool, fn(String) -> SinkTarget, &str) = match scheme.as_str() {
            "eventbridge" if target.starts_with("arn:") => {
                let parts: Vec<&str> = target.splitn(6, ':').collect();
                let ok = parts.len() == 6
                    && !parts[1].is_empty()
                    && parts[2] == "events"
                    && !parts[3].is_empty()
                    && parts[4].len() == 12
                    && parts[4].bytes().all(|b| b.is_ascii_digit())
                    && parts[5].strip_prefix("event-bus/").is_some_and(bus_name_ok);
                let arn =
                    "an event bus ARN (arn:<partition>:events:<region>:<account>:event-bus/<name>)";
                (ok, SinkTarget::EventBridge, arn)
            }
            "eventbridge" => {
                let name = "an event bus name (1-256 letters, digits, . - _ /)";
                (bus_name_ok(target), SinkTarget::EventBridge, name)
            }
            "sqs" => {
                let rest = target
                    .strip_prefix("https://")
                    .or_else(|| target.strip_prefix("http://"));
                let ok = rest.is_some_and(|r| {
                    r.split_once('/').is_some_and(|(host, path)| {
                        !host.is_empty()
                            && !path.is_empty()
                            && !r.chars().any(|c| c.is_whitespace())
                    })
                });
                let url = "a queue URL (https://sqs.<region>.amazonaws.com/<account>/<queue>)";
                (ok, SinkTarget::Sqs, url)
            }
            _ => {
                let name = "a delivery stream name (1-64 letters, digits, . - _)";
                (name_ok(target, 64, "."), SinkTarget::Firehose, name)
            }
        };
        if ok {
            Ok(sink(target.to_owned()))
        } else {
            Err(format!("{target:?} is not {expected}"))
        }
    }
}

/// True when `name` has 1 to `max` characters, each a letter, a digit, `-`, `_` or one of `also`.
fn name_ok(name: &str, max: usize, also: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || also.contains(c);
    (1..=max).contains(&name.len()) && name.chars().all(allowed)
}

impl fmt::Display for SinkTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkTarget::EventBridge(t) => write!(f, "eventbridge:{t}"),
            SinkTarget::Sqs(t) => write!(f, "sqs:{t}"),
            SinkTarget::Firehose(t) => write!(f, "firehose:{t}"),
        }
    }
}

/// A service's limits on one batch call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Entries per call.
    pub max_entries: usize,
    /// Bytes per call, as the service counts them.
    pub max_batch_bytes: usize,
    /// Bytes per entry.
    pub max_entry_bytes: usize,
}

/// The message attribute carrying the event id on SQS.
pub const SQS_ID_ATTRIBUTE: &str = "id";

impl SinkKind {
    /// The limits of one call: EventBridge `PutEvents` 10 entries / 256 KB; SQS
    /// `SendMessageBatch` 10 messages / 256 KiB (what every queue accepts, whatever its
    /// `MaximumMessageSize`); Firehose `PutRecordBatch` 500 records / 4 MiB / 1,000 KiB a record.
    pub fn limits(self) -> Limits {
        let (max_entries, max_batch_bytes, max_entry_bytes) = match self {
            SinkKind::EventBridge => (10, 256_000, 256_000),
            SinkKind::Sqs => (10, 262_144, 262_144),
            SinkKind::Firehose => (500, 4 * 1024 * 1024, 1_000 * 1024),
        };
        Limits {
            max_entries,
            max_batch_bytes,
            max_entry_bytes,
        }
    }

    /// An event's size as the service counts it: EventBridge, the bytes of `Source`,
    /// `DetailType` and `Detail` plus 14 for `Time`; SQS, the body plus the `id` attribute's
    /// name, type and value; Firehose, the record (the envelope and its newline).
    pub fn entry_bytes(self, event: &ExpiryEvent) -> usize {
        match self {
            SinkKind::EventBridge => {
                super::model::SOURCE.len()
                    + event.kind.detail_type().len()
                    + event.detail().to_string().len()
                    + 14
            }
            SinkKind::Sqs => {
                super::model::sqs_body(event).len()
                    + SQS_ID_ATTRIBUTE.len()
                    + "String".len()
                    + event.id.len()
            }
            SinkKind::Firehose => event.envelope_json().len() + 1,
        }
    }

    /// Makes every event fit one entry — an event over the per-entry limit loses its item and is
    /// marked truncated — and splits them into consecutive batches within the count and byte
    /// limits. Returns the batches as index ranges and how many events were truncated.
    pub fn plan_batches(self, events: &mut [ExpiryEvent]) -> (Vec<Range<usize>>, u64) {
        let limits = self.limits();
        let (mut batches, mut truncated) = (Vec::new(), 0);
        let (mut start, mut bytes) = (0, 0);
        for (i, event) in events.iter_mut().enumerate() {
            let mut size = self.entry_bytes(event);
            if size > limits.max_entry_bytes && event.drop_item() {
                truncated += 1;
                size = self.entry_bytes(event);
            }
            let full = i - start >= limits.max_entries || bytes + size > limits.max_batch_bytes;
            if i > start && full {
                batches.push(start..i);
                (start, bytes) = (i, 0);
            }
            bytes += size;
        }
        if start < events.len() {
            batches.push(start..events.len());
        }
        (batches, truncated)
    }
}

/// What became of one entry of a batch call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryResult {
    /// The sink accepted it.
    Accepted,
    /// The sink refused it; `retryable` when a later attempt may succeed (throttling, an
    /// internal error).
    Failed {
        /// Whether to try again.
        retryable: bool,
        /// The sink's error code and message.
        reason: String,
    },
}

/// A batch call that failed as a whole.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SinkError {
    /// Whether a later attempt may succeed (throttling, 5xx, timeouts, lost connections).
    pub retryable: bool,
    /// What happened, with the operation.
    pub message: String,
    /// The underlying SDK error, when there is one.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl SinkError {
    /// An error with no underlying SDK error.
    pub fn new(retryable: bool, message: impl Into<String>) -> Self {
        SinkError {
            retryable,
            message: message.into(),
            source: None,
        }
    }
}

impl From<crate::store::StoreError> for SinkError {
    /// SDK errors are classified once, by the store's rules (throttling, 5xx, timeouts and lost
    /// connections are retryable), plus the sinks' own names for internal errors and throttling.
    fn from(e: crate::store::StoreError) -> Self {
        let sink_transient = matches!(
            e.code.as_deref(),
            Some(
                "InternalException"
                    | "InternalError"
                    | "ServiceUnavailableException"
                    | "RequestThrottled"
                    | "ThrottlingException"
                    | "KMSThrottlingException"
            )
        );
        SinkError {
            retryable: e.kind.is_retryable() || sink_transient,
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }
}

/// The one seam to a sink: send one batch (within [`SinkKind::limits`]), answer one
/// [`EntryResult`] per event, in order — or an error for the whole call.
pub trait Sink: Send + Sync + fmt::Debug {
    /// Sends `batch` in one call.
    fn put<'a>(
        &'a self,
        batch: &'a [ExpiryEvent],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, SinkError>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::model::{EventFacts, EventsMode};
    use crate::expiry::Timestamp;
    use crate::store::Key;
    use aws_sdk_dynamodb::types::AttributeValue as AV;

    fn event(n: usize, item_bytes: usize) -> ExpiryEvent {
        let key: Key = [("pk".to_string(), AV::S(format!("k{n}")))].into();
        let item: Key = [
            ("pk".to_string(), AV::S(format!("k{n}"))),
            ("blob".to_string(), AV::S("x".repeat(item_bytes))),
        ]
        .into();
        ExpiryEvent::expired(&EventFacts {
            table: "t",
            key: &key,
            ttl: 1.0e9,
            deleted_at: Timestamp::from_secs(1_000_000_001),
            delete_mode: "batch",
            mode: EventsMode::Notify,
            item: Some(&item),
        })
    }

    #[test]
    fn targets_parse_and_bad_ones_say_why() {
        assert_eq!(
            SinkTarget::parse("eventbridge:default"),
            Ok(SinkTarget::EventBridge("default".into()))
        );
        assert_eq!(
            SinkTarget::parse(
                "eventbridge:arn:aws:events:us-east-1:123456789012:event-bus/expiries"
            ),
            Ok(SinkTarget::EventBridge(
                "arn:aws:events:us-east-1:123456789012:event-bus/expiries".into()
            ))
        );
        assert_eq!(
            SinkTarget::parse("sqs:http://127.0.0.1:4566/000000000000/q"),
            Ok(SinkTarget::Sqs(
                "http://127.0.0.1:4566/000000000000/q".into()
            ))
        );
        assert_eq!(
            SinkTarget::parse("firehose:archive-stream"),
            Ok(SinkTarget::Firehose("archive-stream".into()))
        );
        for (bad, why) in [
            ("kafka:x", "unknown sink scheme"),
            ("eventbridge", "no sink scheme"),
            ("sqs:", "empty target"),
            ("eventbridge: ", "empty target"),
            (
                "eventbridge:arn:aws:events:us-east-1:123:event-bus/x",
                "not an event bus ARN",
            ),
            (
                "eventbridge:arn:aws:sqs:us-east-1:123456789012:event-bus/x",
                "not an event bus ARN",
            ),
            ("eventbridge:bad bus", "not an event bus name"),
            ("sqs:queue-name", "not a queue URL"),
            ("sqs:https://host-only", "not a queue URL"),
            ("firehose:bad/name", "not a delivery stream name"),
            ("firehose:", "empty target"),
        ] {
            let err = SinkTarget::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn batches_respect_the_count_limit_of_every_sink() {
        for (kind, max) in [
            (SinkKind::EventBridge, 10),
            (SinkKind::Sqs, 10),
            (SinkKind::Firehose, 500),
        ] {
            let mut events: Vec<ExpiryEvent> = (0..1234).map(|n| event(n, 10)).collect();
            let (batches, truncated) = kind.plan_batches(&mut events);
            assert_eq!(truncated, 0);
            assert!(batches.iter().all(|b| b.len() <= max), "{kind:?}");
            assert_eq!(
                batches.len(),
                1234usize.div_ceil(max),
                "{kind:?}: as few calls as the count allows"
            );
            // Consecutive, covering every event once.
            let mut next = 0;
            for b in &batches {
                assert_eq!(b.start, next);
                next = b.end;
            }
            assert_eq!(next, 1234);
        }
    }

    #[test]
    fn batches_respect_the_byte_limit_and_big_events_lose_their_item() {
        for kind in [SinkKind::EventBridge, SinkKind::Sqs, SinkKind::Firehose] {
            let limits = kind.limits();
            // Each event about a third of a call's bytes (but under the entry limit).
            let third = (limits.max_batch_bytes / 3).min(limits.max_entry_bytes) - 600;
            let mut events: Vec<ExpiryEvent> = (0..7).map(|n| event(n, third)).collect();
            // One event over the entry limit.
            events.push(event(99, limits.max_entry_bytes + 10));
            let (batches, truncated) = kind.plan_batches(&mut events);
            assert_eq!(truncated, 1, "{kind:?}");
            assert!(events[7].is_truncated() && !events[7].has_item());
            assert!(events[..7].iter().all(|e| e.has_item()));
            let size = |r: std::ops::Range<usize>| -> usize {
                events[r].iter().map(|e| kind.entry_bytes(e)).sum()
            };
            for (i, b) in batches.iter().enumerate() {
                assert!(size(b.clone()) <= limits.max_batch_bytes, "{kind:?}: {b:?}");
                assert!(b.len() <= limits.max_entries);
                // Greedy: the next event did not fit.
                if i + 1 < batches.len() {
                    assert!(
                        size(b.start..b.end + 1) > limits.max_batch_bytes,
                        "{kind:?}: {batches:?}"
                    );
                }
            }
            assert!(batches.len() >= 2, "{kind:?}: {batches:?}");
        }
    }

    #[test]
    fn an_empty_list_needs_no_call() {
        let (batches, _) = SinkKind::Sqs.plan_batches(&mut []);
        assert!(batches.is_empty());
    }
}
