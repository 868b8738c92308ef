//! The [`Sink`] adapters over the AWS SDK clients: EventBridge `PutEvents`, SQS
//! `SendMessageBatch`, Firehose `PutRecordBatch`. Each maps one batch to one call and the
//! answer to one [`EntryResult`] per event, so the publisher retries exactly the entries that
//! failed; SDK errors are classified by the store's rules.

use aws_smithy_types::error::operation::BuildError;
use aws_smithy_types::{Blob, DateTime};

pub use super::model::sqs_body;
use super::model::{ExpiryEvent, SOURCE};
use super::sink::{BoxFuture, EntryResult, Sink, SinkError, SQS_ID_ATTRIBUTE};
use crate::store::StoreError;

/// Error codes of a refused entry that no retry can fix; every other code (throttling,
/// internal errors, unknown codes) is retried, within the retry limit.
fn entry_retryable(code: &str) -> bool {
    !(code.contains("Validation")
        || code.contains("Malformed")
        || code.contains("AccessDenied")
        || code.contains("NotAuthorized")
        || code.contains("InvalidArgument")
        || code.contains("InvalidParameter")
        || code.contains("NotFound")
        || code.contains("TooLong"))
}

fn refused(code: Option<&str>, message: Option<&str>, retryable: Option<bool>) -> EntryResult {
    let code = code.unwrap_or("Unknown");
    EntryResult::Failed {
        retryable: retryable.unwrap_or_else(|| entry_retryable(code)),
        reason: format!("{code}: {}", message.unwrap_or("refused by the sink")),
    }
}

/// An answer whose entries do not match the request: treat the call as failed (retryable), so
/// nothing counts as accepted without the sink saying so.
fn mismatched(operation: &str, sent: usize, got: usize) -> SinkError {
    let message = format!("{operation} answered {got} entries for {sent} sent");
    SinkError::new(true, message)
}

/// The results of an answer that lists one entry per event, in order (EventBridge, Firehose):
/// `(error code, whether it has an id, error message)`; accepted with an id and no error code.
fn in_order<'a>(
    operation: &str,
    sent: usize,
    answers: impl ExactSizeIterator<Item = (Option<&'a str>, bool, Option<&'a str>)>,
) -> Result<Vec<EntryResult>, SinkError> {
    if answers.len() != sent {
        return Err(mismatched(operation, sent, answers.len()));
    }
    Ok(answers
        .map(|(code, has_id, message)| match code {
            None if has_id => EntryResult::Accepted,
            code => refused(code, message, None),
        })
        .collect())
}

/// An entry the SDK cannot build: no retry builds it either.
fn unbuildable(err: BuildError) -> SinkError {
    SinkError::new(false, err.to_string())
}

/// A sink over an SDK `client`, sending to one `target`: an event bus (name or ARN), a queue URL,
/// or a delivery stream.
#[derive(Debug, Clone)]
pub struct AwsSink<C> {
    client: C,
    target: String,
}

impl<C> AwsSink<C> {
    /// A sink for `target` through `client`.
    pub fn new(client: C, target: impl Into<String>) -> Self {
        AwsSink {
            client,
            target: target.into(),
        }
    }
}

/// EventBridge: `PutEvents` to one bus.
pub type EventBridgeSink = AwsSink<aws_sdk_eventbridge::Client>;

/// SQS: `SendMessageBatch` to one queue; FIFO queues (`.fifo`) get the event's
/// [`ExpiryEvent::deduplication_id`] as deduplication id and the table as message group.
pub type SqsSink = AwsSink<aws_sdk_sqs::Client>;

/// Firehose: `PutRecordBatch` to one delivery stream, one JSON line per record.
pub type FirehoseSink = AwsSink<aws_sdk_firehose::Client>;

impl EventBridgeSink {
    async fn send(&self, batch: &[ExpiryEvent]) -> Result<Vec<EntryResult>, SinkError> {
        use aws_sdk_eventbridge::types::PutEventsRequestEntry;
        let entries = batch.iter().map(|e| {
            PutEventsRequestEntry::builder()
                .source(SOURCE)
                .detail_type(e.kind.detail_type())
                .detail(e.detail().to_string())
                .event_bus_name(&self.target)
                .time(DateTime::from_millis(e.time.millis()))
                .build()
        });
        let request = self.client.put_events();
        let out = request.set_entries(Some(entries.collect())).send().await;
        let out = out.map_err(|e| SinkError::from(StoreError::from_sdk("PutEvents", e)))?;
        let answers = out.entries.unwrap_or_default();
        let answers = answers.iter().map(|r| {
            let (code, message) = (r.error_code.as_deref(), r.error_message.as_deref());
            (code, r.event_id.is_some(), message)
        });
        in_order("PutEvents", batch.len(), answers)
    }
}

impl SqsSink {
    async fn send(&self, batch: &[ExpiryEvent]) -> Result<Vec<EntryResult>, SinkError> {
        use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
        let fifo = self.target.ends_with(".fifo");
        let mut entries = Vec::with_capacity(batch.len());
        for (i, e) in batch.iter().enumerate() {
            let id = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(&e.id)
                .build()
                .map_err(unbuildable)?;
            let mut entry = SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(sqs_body(e))
                .message_attributes(SQS_ID_ATTRIBUTE, id);
            if fifo {
                let table = e.detail()["table"].as_str().unwrap_or_default().to_owned();
                entry = entry
                    .message_deduplication_id(e.deduplication_id())
                    .message_group_id(table);
            }
            entries.push(entry.build().map_err(unbuildable)?);
        }
        let request = self.client.send_message_batch().queue_url(&self.target);
        let out = request.set_entries(Some(entries)).send().await;
        let out = out.map_err(|e| SinkError::from(StoreError::from_sdk("SendMessageBatch", e)))?;
        let mut results: Vec<Option<EntryResult>> = vec![None; batch.len()];
        let accepted = out
            .successful
            .iter()
            .map(|s| (&s.id, EntryResult::Accepted));
        let failed = out.failed.iter().map(|f| {
            let result = refused(Some(&f.code), f.message.as_deref(), Some(!f.sender_fault));
            (&f.id, result)
        });
        for (id, result) in accepted.chain(failed) {
            if let Some(slot) = id.parse::<usize>().ok().and_then(|i| results.get_mut(i)) {
                *slot = Some(result);
            }
        }
        let answered = results.iter().filter(|r| r.is_some()).count();
        if answered != batch.len() {
            return Err(mismatched("SendMessageBatch", batch.len(), answered));
        }
        Ok(results.into_iter().flatten().collect())
    }
}

impl FirehoseSink {
    async fn send(&self, batch: &[ExpiryEvent]) -> Result<Vec<EntryResult>, SinkError> {
        use aws_sdk_firehose::types::Record;
        let records = batch.iter().map(|e| {
            let mut line = e.envelope_json().into_bytes();
            line.push(b'\n');
            Record::builder().data(Blob::new(line)).build()
        });
        let records: Vec<_> = records.collect::<Result<_, _>>().map_err(unbuildable)?;
        let request = self
            .client
            .put_record_batch()
            .delivery_stream_name(&self.target);
        let out = request.set_records(Some(records)).send().await;
        let out = out.map_err(|e| SinkError::from(StoreError::from_sdk("PutRecordBatch", e)))?;
        let answers = out.request_responses.iter().map(|r| {
            let (code, message) = (r.error_code.as_deref(), r.error_message.as_deref());
            (code, r.record_id.is_some(), message)
        });
        in_order("PutRecordBatch", batch.len(), answers)
    }
}

/// Each adapter is a [`Sink`] through its own `send`.
macro_rules! sink_through_send {
    ($($sink:ty),*) => {$(
        impl Sink for $sink {
            fn put<'a>(
                &'a self,
                batch: &'a [ExpiryEvent],
            ) -> BoxFuture<'a, Result<Vec<EntryResult>, SinkError>> {
                Box::pin(self.send(batch))
            }
        }
    )*};
}

sink_through_send!(EventBridgeSink, SqsSink, FirehoseSink);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::model::test_event;

    #[test]
    fn sqs_bodies_escape_the_characters_sqs_refuses_and_mean_the_same() {
        let event = test_event("a\u{FFFE}b\u{FFFF}\u{1F600}");
        let body = sqs_body(&event);
        assert!(!body.contains(['\u{FFFE}', '\u{FFFF}']), "{body}");
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        let raw: serde_json::Value = serde_json::from_str(&event.envelope_json()).unwrap();
        assert_eq!(parsed, raw);
        assert_eq!(
            parsed["detail"]["key"]["id"]["S"],
            "a\u{FFFE}b\u{FFFF}\u{1F600}"
        );
    }
}
