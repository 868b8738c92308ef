//! The stream indexer against DynamoDB Local: batches of stream records, shaped as an event
//! source mapping delivers them to Lambda, for items written with only a ttl (and worse). A String
//! ttl is not among them: with the sweeper's index (ttl a Number key) DynamoDB refuses the write.

use crate::common;

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::AttributeValue as AV;
use common::*;
use serde_json::{json, Value};
use ttl_sweeper::engine::{DeleteMode, Stop, Sweeper};
use ttl_sweeper::events::sink::BoxFuture;
use ttl_sweeper::events::{
    EntryResult, EventKind, Events, EventsConfig, EventsMode, ExpiryEvent, ItemSource, Sink,
    SinkError, SinkTarget,
};
use ttl_sweeper::expiry::window::window_key;
use ttl_sweeper::lambda::stream::index_batch;
use ttl_sweeper::store::{key_to_json, DynamoStore, Key};
use ttl_sweeper::tools::index::index_records;

/// A stream record of `item` (its new image) in DynamoDB JSON, as Lambda receives it.
fn record(name: &str, sequence: u64, item: &Key) -> Value {
    let image = key_to_json(item);
    json!({
        "eventID": format!("event-{sequence}"), "eventName": name, "eventVersion": "1.1",
        "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
        "dynamodb": {
            "Keys": { "id": image["id"].clone() },
            "NewImage": image,
            "SequenceNumber": format!("{sequence:021}"),
            "SizeBytes": 64, "StreamViewType": "NEW_IMAGE"
        }
    })
}

fn batch(records: Vec<Value>) -> Value {
    json!({ "Records": records })
}

async fn setup(prefix: &str) -> (aws_sdk_dynamodb::Client, Sweeper<DynamoStore>, String) {
    let (client, table) = simple_table(prefix).await;
    let sweeper = sweeper_for(&config(&table, &[])).await;
    (client, sweeper, table)
}

/// A sink that keeps what it accepts, or refuses everything.
#[derive(Debug, Default)]
struct Recorded {
    refuse: bool,
    accepted: Mutex<Vec<ExpiryEvent>>,
}

impl Sink for Recorded {
    fn put<'a>(
        &'a self,
        batch: &'a [ExpiryEvent],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, SinkError>> {
        Box::pin(async move {
            let result = match self.refuse {
                false => EntryResult::Accepted,
                true => EntryResult::Failed {
                    retryable: false,
                    reason: "AccessDenied: not allowed".into(),
                },
            };
            if !self.refuse {
                self.accepted.lock().unwrap().extend(batch.iter().cloned());
            }
            Ok(vec![result; batch.len()])
        })
    }
}

impl Recorded {
    /// (kind, the key's id) of each accepted event, in order.
    fn seen(&self) -> Vec<(EventKind, String)> {
        let accepted = self.accepted.lock().unwrap();
        let id = |e: &ExpiryEvent| e.key["id"]["S"].as_str().unwrap().to_string();
        accepted.iter().map(|e| (e.kind, id(e))).collect()
    }
}

/// `sweeper` publishing to `sink` in `mode` (conditional deletes; the item in notify events).
fn with_events(
    sweeper: Sweeper<DynamoStore>,
    mode: EventsMode,
    sink: &Arc<Recorded>,
) -> Sweeper<DynamoStore> {
    let config = EventsConfig {
        target: SinkTarget::EventBridge("default".into()),
        mode,
        item: ItemSource::Auto,
        table: sweeper.schema().table_name.clone(),
        delete_mode: DeleteMode::Conditional,
        max_retries: 1,
    };
    sweeper.with_events(Arc::new(Events::new(&config, sink.clone())))
}

fn window_of(ttl: i64) -> AV {
    AV::S(window_key(ttl as f64, 60).unwrap())
}

#[tokio::test]
async fn items_written_with_only_a_ttl_get_their_window_and_expired_ones_are_deleted() {
    let (client, sweeper, table) = setup("index").await;
    let table = &table;
    let now = now();
    let wrong = windowed("wrong", now + 600, "1970-01-01T00:00");
    let items = [
        unwindowed("live", now + 300),
        unwindowed("expired", now - 30),
        session("right", now + 900),
        wrong.clone(),
        bare("no-ttl", None),
        unwindowed("millis", (now + 300) * 1000),
    ];
    put_items(&client, table, items.to_vec()).await;
    let records: Vec<Value> = (items.iter().enumerate())
        .map(|(i, item)| record("INSERT", i as u64 + 1, item))
        .collect();

    let answer = index_batch(&sweeper, &clock, &batch(records.clone()), None).await;
    assert_eq!(answer.unwrap(), json!({ "batchItemFailures": [] }));

    let live = get(&client, table, "live").await.unwrap();
    assert_eq!(live.get("expirationWindow"), Some(&window_of(now + 300)));
    let fixed = get(&client, table, "wrong").await.unwrap();
    assert_eq!(fixed.get("expirationWindow"), Some(&window_of(now + 600)));
    assert!(get(&client, table, "expired").await.is_none(), "deleted");
    assert_eq!(
        get(&client, table, "right").await.unwrap(),
        session("right", now + 900)
    );
    for untouched in ["no-ttl", "millis"] {
        let item = get(&client, table, untouched).await.unwrap();
        assert!(!item.contains_key("expirationWindow"), "{item:?}");
    }

    // The same batch again (at-least-once delivery): nothing more is written or deleted.
    let before = scan_all(&client, table).await.len();
    let parsed: aws_lambda_events::dynamodb::Event =
        serde_json::from_value(batch(records)).unwrap();
    let again = index_records(&sweeper, &clock, &Stop::never(), &parsed.records).await;
    assert!(again.failures.is_empty(), "{:?}", again.report);
    let counts = &again.report.items;
    assert_eq!(
        (counts.written, counts.deleted_expired),
        (0, 0),
        "{counts:?}"
    );
    assert_eq!(counts.expired_gone, 1, "{counts:?}");
    assert_eq!((counts.no_ttl, counts.invalid_ttl), (1, 1), "{counts:?}");
    assert_eq!(scan_all(&client, table).await.len(), before);
    let live_again = get(&client, table, "live").await.unwrap();
    assert_eq!(live_again, live);
}

#[tokio::test]
async fn a_record_older_than_the_item_changes_nothing_and_a_deleted_item_is_not_recreated() {
    let (client, sweeper, table) = setup("index_races").await;
    let table = &table;
    let now = now();
    // Each record's image is older than the item: extended, given a window by its writer, deleted.
    let extended = unwindowed("extended", now - 10); // read expired, extended since
    put_one(&client, table, session("extended", now + 3600)).await;
    let moved = unwindowed("moved", now + 300); // its ttl rewritten since
    put_one(&client, table, unwindowed("moved", now + 900)).await;
    let deleted = unwindowed("deleted", now + 300); // deleted since
    let records = vec![
        record("INSERT", 1, &extended),
        record("MODIFY", 2, &moved),
        record("INSERT", 3, &deleted),
        record("REMOVE", 4, &deleted),
    ];
    let answer = index_batch(&sweeper, &clock, &batch(records), None).await;
    assert_eq!(answer.unwrap(), json!({ "batchItemFailures": [] }));
    assert_eq!(
        get(&client, table, "extended").await.unwrap(),
        session("extended", now + 3600)
    );
    assert_eq!(
        get(&client, table, "moved").await.unwrap(),
        unwindowed("moved", now + 900)
    );
    assert!(
        get(&client, table, "deleted").await.is_none(),
        "not recreated"
    );
}

#[tokio::test]
async fn a_window_left_on_an_item_whose_ttl_is_gone_or_unusable_is_removed_unless_it_changed() {
    let (client, sweeper, table) = setup("index_stale").await;
    let table = &table;
    let now = now();
    let stale = |id: &str, ttl: Option<AV>| with_window(bare(id, ttl), "2026-01-01T00:00");
    let items = [
        stale("no-ttl", None),
        stale("millis", Some(num((now + 300) * 1000))),
        stale("rewritten", Some(num((now + 300) * 1000))),
    ];
    put_items(&client, table, items.to_vec()).await;
    // "rewritten" gets a usable ttl and its window after the record was written.
    put_one(&client, table, session("rewritten", now + 300)).await;
    let records = (items.iter().enumerate())
        .map(|(i, item)| record("MODIFY", i as u64 + 1, item))
        .collect();
    let answer = index_batch(&sweeper, &clock, &batch(records), None).await;
    assert_eq!(answer.unwrap(), json!({ "batchItemFailures": [] }));
    for id in ["no-ttl", "millis"] {
        let item = get(&client, table, id).await.unwrap();
        assert!(!item.contains_key("expirationWindow"), "{item:?}");
        assert!(item.contains_key("ttl") || id == "no-ttl", "{item:?}");
    }
    let kept = get(&client, table, "rewritten").await.unwrap();
    assert_eq!(kept, session("rewritten", now + 300));
}

#[tokio::test]
async fn a_malformed_record_is_answered_by_its_sequence_number_and_stops_only_its_own_item() {
    let (client, sweeper, table) = setup("index_bad").await;
    let table = &table;
    let now = now();
    let (first, later, other) = (
        unwindowed("a", now + 300),
        unwindowed("a", now + 600),
        unwindowed("b", now + 300),
    );
    put_items(&client, table, vec![later.clone(), other.clone()]).await;
    let mut keyless = record("MODIFY", 7, &first);
    keyless["dynamodb"]["NewImage"]
        .as_object_mut()
        .unwrap()
        .remove("id");
    let mut imageless = record("INSERT", 9, &other);
    imageless["dynamodb"]
        .as_object_mut()
        .unwrap()
        .remove("NewImage");
    let records = vec![keyless, record("MODIFY", 8, &later), imageless];
    let answer = index_batch(&sweeper, &clock, &batch(records), None).await;
    let failures = json!({ "batchItemFailures": [
        { "itemIdentifier": format!("{:021}", 7) },
        { "itemIdentifier": format!("{:021}", 9) },
    ]});
    let mut answer = answer.unwrap();
    answer["batchItemFailures"]
        .as_array_mut()
        .unwrap()
        .sort_by_key(|f| f["itemIdentifier"].as_str().unwrap().to_string());
    assert_eq!(answer, failures);
    // Nothing of "a" was handled after its failed record: its later record waits for the retry.
    assert_eq!(get(&client, table, "a").await.unwrap(), later);
    assert_eq!(get(&client, table, "b").await.unwrap(), other);

    // A batch that is not DynamoDB Streams records fails as a whole.
    let bad = json!({ "Records": [{ "eventSource": "aws:dynamodb", "dynamodb": "?" }] });
    let err = index_batch(&sweeper, &clock, &bad, None).await;
    assert_eq!(err.unwrap_err().error_type(), "InvalidEvent");
    // So does a batch from another table's stream: its keys mean nothing here.
    let expired = unwindowed("c", now - 60);
    put_one(&client, table, expired.clone()).await;
    let mut foreign = record("INSERT", 10, &expired);
    let arn = "arn:aws:dynamodb:us-east-1:000000000000:table/other/stream/2026-11-26T00:00:00.000";
    foreign["eventSourceARN"] = json!(arn);
    let err = index_batch(&sweeper, &clock, &batch(vec![foreign]), None).await;
    let message = err.unwrap_err().to_string();
    assert!(message.contains("another table"), "{message}");
    assert!(
        !message.contains("scheduled event"),
        "a sweep's hint: {message}"
    );
    assert_eq!(
        get(&client, table, "c").await.unwrap(),
        expired,
        "nothing deleted"
    );
}

#[tokio::test]
async fn the_items_it_deletes_get_their_expiry_events_as_a_sweep_s_do() {
    let now = now();
    // Notify: the event after the delete, once; nothing for a live item or a record seen again.
    let (client, sweeper, table) = setup("index_notify").await;
    let sink = Arc::new(Recorded::default());
    let sweeper = with_events(sweeper, EventsMode::Notify, &sink);
    let (expired, live) = (
        unwindowed("expired", now - 5),
        unwindowed("live", now + 300),
    );
    put_items(&client, &table, vec![expired.clone(), live.clone()]).await;
    let records = batch(vec![
        record("INSERT", 1, &expired),
        record("INSERT", 2, &live),
    ]);
    for _ in 0..2 {
        let answer = index_batch(&sweeper, &clock, &records, None).await;
        assert_eq!(answer.unwrap(), json!({ "batchItemFailures": [] }));
    }
    assert!(get(&client, &table, "expired").await.is_none());
    assert_eq!(sink.seen(), [(EventKind::Expired, "expired".to_string())]);
    // With the item, as a conditional delete in notify mode returns it: the record's image.
    let detail = sink.accepted.lock().unwrap()[0].detail();
    assert_eq!(detail["item"], key_to_json(&expired), "{detail}");

    // Archive: the event before the delete; the item kept when its ttl changed since the record,
    // with a cancellation; nothing deleted when the sink refuses, and the record delivered again.
    let (client, sweeper, table) = setup("index_archive").await;
    let sink = Arc::new(Recorded::default());
    let sweeper = with_events(sweeper, EventsMode::Archive, &sink);
    let (gone, extended) = (unwindowed("gone", now - 5), unwindowed("extended", now - 5));
    put_items(
        &client,
        &table,
        vec![gone.clone(), session("extended", now + 3600)],
    )
    .await;
    let records = batch(vec![
        record("INSERT", 1, &gone),
        record("INSERT", 2, &extended),
    ]);
    let answer = index_batch(&sweeper, &clock, &records, None).await;
    assert_eq!(answer.unwrap(), json!({ "batchItemFailures": [] }));
    assert!(get(&client, &table, "gone").await.is_none());
    assert!(get(&client, &table, "extended").await.is_some());
    let mut seen = sink.seen();
    seen.sort_by_key(|(_, id)| id.clone());
    let expected = [
        (EventKind::Expired, "extended".to_string()),
        (EventKind::Cancelled, "extended".to_string()),
        (EventKind::Expired, "gone".to_string()),
    ];
    assert_eq!(seen, expected);

    let (client, sweeper, table) = setup("index_refused").await;
    let refusing = Arc::new(Recorded {
        refuse: true,
        ..Recorded::default()
    });
    let sweeper = with_events(sweeper, EventsMode::Archive, &refusing);
    let kept = unwindowed("kept", now - 5);
    put_items(&client, &table, vec![kept.clone()]).await;
    let answer = index_batch(
        &sweeper,
        &clock,
        &batch(vec![record("INSERT", 3, &kept)]),
        None,
    )
    .await;
    // Not deleted without its event, nor left out of the sweeper's sight (a record given up after
    // the mapping's retries would leave it expired with no window): it gets its window, and the
    // sweeper publishes its event and deletes it.
    assert_eq!(answer.unwrap(), json!({ "batchItemFailures": [] }));
    let windowed = with_window(kept.clone(), &window_key((now - 5) as f64, 60).unwrap());
    assert_eq!(get(&client, &table, "kept").await.unwrap(), windowed);
    let sink = Arc::new(Recorded::default());
    let sweeper = with_events(
        sweeper_for(&config(&table, &[])).await,
        EventsMode::Archive,
        &sink,
    );
    let report = sweeper.sweep(clock(), &Stop::never()).await;
    assert!(get(&client, &table, "kept").await.is_none(), "{report:?}");
    assert_eq!(sink.seen(), [(EventKind::Expired, "kept".to_string())]);

    // Expired an hour ago, its window is older than any sweep reads (LOOKBACK_WINDOWS=15 of
    // 60 s): left there it would never be deleted, so its record fails and is delivered again.
    let (client, sweeper, table) = setup("index_refused_old").await;
    let sweeper = with_events(sweeper, EventsMode::Archive, &refusing);
    let old = unwindowed("old", now - 3_600);
    put_items(&client, &table, vec![old.clone()]).await;
    let records = batch(vec![record("INSERT", 4, &old)]);
    let answer = index_batch(&sweeper, &clock, &records, None).await;
    let failed = json!({ "batchItemFailures": [{ "itemIdentifier": format!("{:021}", 4) }] });
    assert_eq!(answer.unwrap(), failed);
    assert_eq!(get(&client, &table, "old").await.unwrap(), old);
}

/// The records of `batch` as the indexer takes them.
fn records_of(batch: &Value) -> Vec<aws_lambda_events::dynamodb::EventRecord> {
    serde_json::from_value(batch["Records"].clone()).unwrap()
}

#[tokio::test]
async fn notify_mode_reports_the_event_of_a_deleted_item_that_the_sink_refused() {
    // The delete is done and cannot be undone; failing the record would not bring the event
    // back (delivered again, it finds the item gone). The event is reported, by count and id.
    let now = now();
    let (client, sweeper, table) = setup("index_notify_refused").await;
    let refusing = Arc::new(Recorded {
        refuse: true,
        ..Recorded::default()
    });
    let sweeper = with_events(sweeper, EventsMode::Notify, &refusing);
    let expired = unwindowed("expired", now - 5);
    put_items(&client, &table, vec![expired.clone()]).await;
    let records = records_of(&batch(vec![record("INSERT", 1, &expired)]));
    let mut reported = 0;
    for _ in 0..2 {
        let indexed = index_records(&sweeper, &clock, &Stop::never(), &records).await;
        let report = serde_json::to_value(&indexed.report).unwrap();
        reported += report["items"]["events_failed"].as_u64().unwrap_or(0);
    }
    assert!(get(&client, &table, "expired").await.is_none());
    assert_eq!(reported, 1, "the lost event is reported once");
}

#[tokio::test]
async fn notify_mode_publishes_the_event_of_a_delete_applied_behind_a_dropped_answer() {
    use crate::support::fault_proxy::{Fault, FaultProxy, Plan};
    // DynamoDB applies the indexer's first DeleteItem, then the connection drops before the
    // answer: the retry finds the item gone. That attempt deleted it, so its event is owed.
    let now = now();
    let (client, table) = simple_table("index_dropped").await;
    let proxy = FaultProxy::start(
        &endpoint(),
        std::time::Duration::from_millis(500),
        Plan::FirstThen {
            first: Fault::DropAfterApply,
            ops: vec!["DeleteItem"],
            then: Box::new(Plan::Pass),
            used: Default::default(),
        },
    )
    .await;
    let proxied = store(aws_sdk_dynamodb::Client::from_conf(
        sdk_config(&proxy.endpoint).build(),
    ));
    let sweeper = sweeper_over(&config(&table, &[]), |_| proxied).await;
    let sink = Arc::new(Recorded::default());
    let sweeper = with_events(sweeper, EventsMode::Notify, &sink);
    let expired = unwindowed("expired", now - 5);
    put_items(&client, &table, vec![expired.clone()]).await;
    let records = batch(vec![record("INSERT", 1, &expired)]);
    let answer = index_batch(&sweeper, &clock, &records, None).await;
    assert_eq!(answer.unwrap(), json!({ "batchItemFailures": [] }));
    assert_eq!(proxy.stats.faults_total(), 1);
    assert!(get(&client, &table, "expired").await.is_none());
    assert_eq!(sink.seen(), [(EventKind::Expired, "expired".to_string())]);
}
