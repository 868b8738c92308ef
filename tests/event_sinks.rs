//! The three sink adapters against `aws-smithy-mocks` clients: what each request carries, and
//! that the publisher retries exactly the entries a batch call refused (and whole calls that
//! failed transiently), and gives up on what no retry can fix.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue as AV;
use aws_smithy_mocks::{mock, mock_client, RuleMode};
use serde_json::Value;
use ttl_sweeper::engine::hook::Delivery;
use ttl_sweeper::engine::Stop;
use ttl_sweeper::events::aws::{EventBridgeSink, FirehoseSink, SqsSink};
use ttl_sweeper::events::{
    EventFacts, EventsMode, ExpiryEvent, Published, Publisher, Sink, SinkKind,
};
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{Key, Retry};

use crate::support;
use support::mem_store::{default_schema, key};

/// The facts of the deletion of the item at `key` from `sessions`, published in `mode`.
fn facts(key: &Key, mode: EventsMode) -> EventFacts<'_> {
    EventFacts {
        table: "sessions",
        key,
        ttl: 1_700_000_000.0,
        deleted_at: Timestamp::from_millis(1_700_000_000_500),
        delete_mode: "conditional",
        mode,
        item: None,
    }
}

/// The expiries of items `k0`, `k1`... in notify mode.
fn events(n: usize) -> Vec<ExpiryEvent> {
    let event = |i| ExpiryEvent::expired(&facts(&key(&format!("k{i}")), EventsMode::Notify));
    (0..n).map(event).collect()
}

fn publisher(sink: impl Sink + 'static, kind: SinkKind) -> Publisher {
    let mut p = Publisher::new(Arc::new(sink), kind);
    p.retry = Retry {
        attempts: 4,
        base: Duration::from_millis(1),
        cap: Duration::from_millis(5),
    };
    p
}

fn all_accepted(deliveries: &[Delivery]) -> bool {
    deliveries.iter().all(|d| *d == Delivery::Accepted)
}

/// Whether every delivery failed, with `reason` in its reason.
fn all_failed(deliveries: &[Delivery], reason: &str) -> bool {
    let failed = |d: &Delivery| matches!(d, Delivery::Failed(r) if r.contains(reason));
    deliveries.iter().all(failed)
}

/// The sizes of the batches a mocked service received, in order.
#[derive(Clone, Default)]
struct Batches(Arc<Mutex<Vec<usize>>>);

impl Batches {
    /// Records a batch of `n` entries: whether it is the first.
    fn record(&self, n: usize) -> bool {
        let mut sizes = self.0.lock().unwrap();
        sizes.push(n);
        sizes.len() == 1
    }

    fn sizes(&self) -> Vec<usize> {
        self.0.lock().unwrap().clone()
    }
}

/// `events` published by `p`, never stopped.
async fn publish(p: Publisher, events: Vec<ExpiryEvent>) -> Published {
    p.publish(events, &Stop::never()).await
}

mod eventbridge {
    use super::*;
    use aws_sdk_eventbridge::error::ErrorMetadata;
    use aws_sdk_eventbridge::operation::put_events::{PutEventsError, PutEventsOutput};
    use aws_sdk_eventbridge::types::error::InternalException;
    use aws_sdk_eventbridge::types::PutEventsResultEntry;
    use aws_sdk_eventbridge::Client;

    fn ok(n: usize) -> PutEventsResultEntry {
        PutEventsResultEntry::builder()
            .event_id(format!("eb-{n}"))
            .build()
    }

    fn refused(code: &str, message: &str) -> PutEventsResultEntry {
        let entry = PutEventsResultEntry::builder().error_code(code);
        entry.error_message(message).build()
    }

    /// A publisher to the bus `bus` through `client`.
    fn to_bus(client: Client, bus: &str) -> Publisher {
        publisher(EventBridgeSink::new(client, bus), SinkKind::EventBridge)
    }

    #[tokio::test]
    async fn a_refused_entry_is_sent_again_alone() {
        let batches = Batches::default();
        let seen = batches.clone();
        let rule = mock!(Client::put_events).then_compute_output(move |req| {
            let entries = req.entries();
            let first = seen.record(entries.len());
            for e in entries {
                assert_eq!(e.source(), Some("ttl-sweeper"));
                assert_eq!(e.detail_type(), Some("Item Expired"));
                assert_eq!(e.event_bus_name(), Some("expiries"));
                let detail: Value = serde_json::from_str(e.detail().unwrap()).unwrap();
                assert_eq!(detail["table"], "sessions");
                assert_eq!(detail["id"].as_str().unwrap().len(), 64);
                assert_eq!(e.time().unwrap().to_millis().unwrap(), 1_700_000_000_500);
            }
            let result = |i| match first && i == 1 {
                true => refused("ThrottlingException", "Rate exceeded"),
                false => ok(i),
            };
            let results = (0..entries.len()).map(result).collect();
            PutEventsOutput::builder()
                .failed_entry_count(i32::from(first))
                .set_entries(Some(results))
                .build()
        });
        let client = mock_client!(aws_sdk_eventbridge, RuleMode::MatchAny, [&rule]);
        let out = publish(to_bus(client, "expiries"), events(13)).await;
        assert!(all_accepted(&out.deliveries), "{out:?}");
        assert_eq!(out.retried, 1);
        let sizes = batches.sizes();
        assert_eq!(sizes, vec![10, 3, 1], "10 + 3, then the refused one");
    }

    #[tokio::test]
    async fn an_internal_error_is_retried_and_a_validation_error_is_not() {
        let internal = mock!(Client::put_events)
            .sequence()
            .error(|| {
                PutEventsError::InternalException(
                    InternalException::builder()
                        .message("boom")
                        .meta(ErrorMetadata::builder().code("InternalException").build())
                        .build(),
                )
            })
            .times(2)
            .output(|| {
                PutEventsOutput::builder()
                    .set_entries(Some((0..4).map(ok).collect()))
                    .build()
            })
            .build();
        let client = mock_client!(aws_sdk_eventbridge, RuleMode::MatchAny, [&internal]);
        let out = publish(to_bus(client, "default"), events(4)).await;
        assert!(all_accepted(&out.deliveries), "{out:?}");
        assert_eq!(out.retried, 8, "4 events sent again twice");

        let refused = mock!(Client::put_events).then_compute_output(|req| {
            let entries = req.entries().iter();
            let refusals = entries.map(|_| refused("MalformedDetail", "Detail is malformed"));
            PutEventsOutput::builder()
                .failed_entry_count(req.entries().len() as i32)
                .set_entries(Some(refusals.collect()))
                .build()
        });
        let client = mock_client!(aws_sdk_eventbridge, RuleMode::MatchAny, [&refused]);
        let out = publish(to_bus(client, "default"), events(2)).await;
        assert_eq!(refused.num_calls(), 1, "not retried");
        assert!(all_failed(&out.deliveries, "MalformedDetail"));
    }

    #[tokio::test]
    async fn an_answer_that_does_not_match_the_request_accepts_nothing() {
        let short = mock!(Client::put_events).then_output(|| {
            PutEventsOutput::builder()
                .set_entries(Some(vec![ok(0)]))
                .build()
        });
        let client = mock_client!(aws_sdk_eventbridge, RuleMode::MatchAny, [&short]);
        let out = publish(to_bus(client, "default"), events(3)).await;
        assert_eq!(short.num_calls(), 4, "retried, then given up");
        assert!(all_failed(&out.deliveries, "answered 1 entries for 3"));
    }
}

mod sqs {
    use super::*;
    use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchOutput;
    use aws_sdk_sqs::types::{BatchResultErrorEntry, SendMessageBatchResultEntry};
    use aws_sdk_sqs::Client;

    fn ok(id: &str) -> SendMessageBatchResultEntry {
        SendMessageBatchResultEntry::builder()
            .id(id)
            .message_id(format!("m-{id}"))
            .md5_of_message_body("x")
            .build()
            .unwrap()
    }

    fn failed(id: &str, sender_fault: bool, code: &str) -> BatchResultErrorEntry {
        BatchResultErrorEntry::builder()
            .id(id)
            .sender_fault(sender_fault)
            .code(code)
            .message("refused")
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn messages_carry_the_envelope_and_id_and_failed_ones_are_retried() {
        let batches = Batches::default();
        let seen = batches.clone();
        let rule = mock!(Client::send_message_batch).then_compute_output(move |req| {
            assert_eq!(
                req.queue_url(),
                Some("http://127.0.0.1:1/000000000000/expiries")
            );
            let entries = req.entries();
            let first = seen.record(entries.len());
            for e in entries {
                let body: Value = serde_json::from_str(e.message_body()).unwrap();
                assert_eq!(body["source"], "ttl-sweeper");
                assert_eq!(body["detail-type"], "Item Expired");
                let id = e.message_attributes().unwrap()["id"]
                    .string_value()
                    .unwrap();
                assert_eq!(body["detail"]["id"], id);
                assert_eq!(e.message_deduplication_id(), None, "not a FIFO queue");
            }
            let (mut good, mut bad) = (vec![], vec![]);
            for (i, e) in entries.iter().enumerate() {
                match (first, i) {
                    (true, 1) => bad.push(failed(e.id(), false, "InternalError")),
                    (true, 2) => bad.push(failed(e.id(), true, "InvalidMessageContents")),
                    _ => good.push(ok(e.id())),
                }
            }
            SendMessageBatchOutput::builder()
                .set_successful(Some(good))
                .set_failed(Some(bad))
                .build()
                .unwrap()
        });
        let client = mock_client!(aws_sdk_sqs, RuleMode::MatchAny, [&rule]);
        let sink = SqsSink::new(client, "http://127.0.0.1:1/000000000000/expiries");
        let out = publish(publisher(sink, SinkKind::Sqs), events(4)).await;
        assert_eq!(out.deliveries[0], Delivery::Accepted);
        let second = &out.deliveries[1];
        assert_eq!(*second, Delivery::Accepted, "the server's fault: retried");
        let refused = matches!(&out.deliveries[2], Delivery::Failed(r) if r.contains("InvalidMessageContents"));
        assert!(refused, "the sender's fault: not retried");
        assert_eq!(out.deliveries[3], Delivery::Accepted);
        assert_eq!(batches.sizes(), vec![4, 1]);
    }

    #[tokio::test]
    async fn a_fifo_queue_gets_the_id_as_deduplication_id_and_a_cancellation_its_own() {
        let rule = mock!(Client::send_message_batch).then_compute_output(|req| {
            let mut seen = std::collections::HashSet::new();
            for e in req.entries() {
                let body: Value = serde_json::from_str(e.message_body()).unwrap();
                let id = body["detail"]["id"].as_str().unwrap();
                let expected = match body["detail-type"].as_str() {
                    Some("Item Expired") => id.to_owned(),
                    Some("Item Expiry Cancelled") => format!("{id}-cancelled"),
                    other => panic!("{other:?}"),
                };
                assert_eq!(e.message_deduplication_id(), Some(expected.as_str()));
                let first = seen.insert(expected);
                assert!(first, "a de-duplication id repeated in one batch");
                assert_eq!(e.message_group_id(), Some("sessions"));
            }
            SendMessageBatchOutput::builder()
                .set_successful(Some(req.entries().iter().map(|e| ok(e.id())).collect()))
                .set_failed(Some(vec![]))
                .build()
                .unwrap()
        });
        let client = mock_client!(aws_sdk_sqs, RuleMode::MatchAny, [&rule]);
        let sink = SqsSink::new(client, "https://sqs.us-east-1.amazonaws.com/1/e.fifo");
        // Three expiries, and the cancellation of the first, in one batch.
        let mut batch = events(3);
        let (k0, cancelled_at) = (key("k0"), Timestamp::from_millis(1_700_000_000_600));
        let facts = facts(&k0, EventsMode::Archive);
        batch.push(ExpiryEvent::cancelled(&facts, cancelled_at));
        assert_eq!(batch[3].id, batch[0].id, "the cancellation of the first");
        let out = publish(publisher(sink, SinkKind::Sqs), batch).await;
        assert!(all_accepted(&out.deliveries));
        assert_eq!(rule.num_calls(), 1);
    }
}

mod firehose {
    use super::*;
    use aws_sdk_firehose::operation::put_record_batch::PutRecordBatchOutput;
    use aws_sdk_firehose::types::PutRecordBatchResponseEntry;
    use aws_sdk_firehose::Client;

    #[tokio::test]
    async fn records_are_json_lines_and_failed_ones_are_retried() {
        let batches = Batches::default();
        let seen = batches.clone();
        let rule = mock!(Client::put_record_batch).then_compute_output(move |req| {
            assert_eq!(req.delivery_stream_name(), Some("archive"));
            let records = req.records();
            let first = seen.record(records.len());
            for r in records {
                let data = r.data().as_ref();
                assert_eq!(data.last(), Some(&b'\n'), "one JSON line per record");
                assert_eq!(data.iter().filter(|b| **b == b'\n').count(), 1);
                let line: Value = serde_json::from_slice(data).unwrap();
                assert_eq!(line["detail-type"], "Item Expired");
            }
            let responses = (0..records.len())
                .map(|i| {
                    if first && i % 2 == 0 {
                        PutRecordBatchResponseEntry::builder()
                            .error_code("ServiceUnavailableException")
                            .error_message("Slow down.")
                            .build()
                    } else {
                        PutRecordBatchResponseEntry::builder()
                            .record_id(format!("r{i}"))
                            .build()
                    }
                })
                .collect();
            let failed = if first { records.len().div_ceil(2) } else { 0 };
            PutRecordBatchOutput::builder()
                .failed_put_count(failed as i32)
                .set_request_responses(Some(responses))
                .build()
                .unwrap()
        });
        let client = mock_client!(aws_sdk_firehose, RuleMode::MatchAny, [&rule]);
        let p = publisher(FirehoseSink::new(client, "archive"), SinkKind::Firehose);
        let out = publish(p, events(25)).await;
        assert!(all_accepted(&out.deliveries), "{out:?}");
        assert_eq!(
            batches.sizes(),
            vec![25, 13],
            "one call, then the 13 refused"
        );
        assert_eq!(out.retried, 13);
    }
}

mod dynamodb {
    use super::*;
    use aws_sdk_dynamodb::operation::delete_item::DeleteItemOutput;
    use aws_sdk_dynamodb::types::ReturnValue;
    use aws_sdk_dynamodb::Client;
    use ttl_sweeper::store::{ConditionalOutcome, DynamoStore, Store};

    #[tokio::test]
    async fn a_returning_conditional_delete_asks_for_the_old_item_and_only_then() {
        let returning = mock!(Client::delete_item)
            .match_requests(|r| r.return_values() == Some(&ReturnValue::AllOld))
            .then_output(|| {
                DeleteItemOutput::builder()
                    .attributes("id", AV::S("k1".into()))
                    .attributes("payload", AV::S("p".into()))
                    .build()
            });
        let plain = mock!(Client::delete_item)
            .match_requests(|r| r.return_values().is_none())
            .then_output(|| DeleteItemOutput::builder().build());
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&returning, &plain]);
        let store = DynamoStore::new(client);
        let (schema, key) = (default_schema(), key("k1"));
        let now = Timestamp::from_secs(1_700_000_000);
        let delete =
            |returning| store.delete_if_expired(&schema, key.clone(), "1699999990", now, returning);
        let (outcome, item) = delete(true).await.unwrap();
        assert_eq!(outcome, ConditionalOutcome::Deleted);
        assert_eq!(item.unwrap()["payload"], AV::S("p".into()));
        assert_eq!(
            delete(false).await.unwrap(),
            (ConditionalOutcome::Deleted, None)
        );
        assert_eq!((returning.num_calls(), plain.num_calls()), (1, 1));
    }
}
