//! Expiry events end to end: the sweeper against DynamoDB Local, its events against moto's SQS,
//! EventBridge (bus → rule → queue, read from the queue) and Firehose (→ S3 bucket, read as JSON
//! lines).
//!
//! - Each sink gets one event per expired item, with the contract's fields (docs/events.md), the
//!   right table, key and ttl and the stable id, computed here independently; nothing for live
//!   items or items without a ttl. The `ttl-sweeper` binary, configured by environment only.
//! - Archive mode with conditional deletes: a ttl extended between the read and the delete gets
//!   an `Item Expiry Cancelled` with the expiry's id, and the item stays.
//! - A sink that is down: notify mode reports every lost event; archive mode deletes nothing.
//! - The fault proxy in front of each sink (throttling, 5xx, timeouts, a connection reset, an
//!   answer lost after the sink accepted, per-entry failures), seeded, in both modes; then the
//!   invariants: events only for items really expired, one id per item (duplicates carry it),
//!   archive — every deleted item has an accepted event, notify — every deleted item has an
//!   event or a reported failure. `EVENTS_SEED=<seed>` repeats a run.
//! - SIGKILL of an archive-mode `ttl-sweeper sweep` at a seeded moment (`EVENTS_KILL_SEED`),
//!   then the same invariants on what the table and the queue hold, and a second sweep finishes.

mod common;
#[path = "support/fault_proxy.rs"]
mod fault_proxy;
#[path = "support/moto.rs"]
mod moto;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use common::{
    clock, config, exists, extend_ttl, id_key, new_table, put_many, removed_json, run, scan_all,
    session, simple_table, sweeper_over, BeforeDelete, Instrumented, AV,
};
use fault_proxy::{Fault, FaultProxy, Plan};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use ttl_sweeper::engine::{Stop, SweepReport, Sweeper};
use ttl_sweeper::events::aws::{EventBridgeSink, FirehoseSink, SqsSink};
use ttl_sweeper::events::{Events, Sink};
use ttl_sweeper::expiry::window::window_key;
use ttl_sweeper::store::Key;

// ------------------------------------------------------------------------------------ sinks

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sqs,
    EventBridge,
    Firehose,
}

/// A sink on moto and how to read back what it received.
struct TestSink {
    kind: Kind,
    /// The `EXPIRY_EVENTS` value.
    setting: String,
    /// The queue the events end up in (SQS; EventBridge through its rule).
    queue: Option<String>,
    /// The bucket the Firehose stream writes (named like the stream).
    bucket: Option<String>,
    received: Mutex<Vec<Value>>,
}

impl TestSink {
    async fn new(kind: Kind) -> TestSink {
        let name = moto::unique(match kind {
            Kind::Sqs => "expiries",
            Kind::EventBridge => "expiry-bus",
            Kind::Firehose => "expiry-archive",
        });
        let (setting, queue, bucket) = match kind {
            Kind::Sqs => {
                let url = moto::create_queue(&moto::sqs().await, &name).await;
                (format!("sqs:{url}"), Some(url), None)
            }
            Kind::EventBridge => {
                let (bus, queue) = moto::create_bus_to_queue(&name).await;
                (format!("eventbridge:{bus}"), Some(queue), None)
            }
            Kind::Firehose => {
                moto::create_firehose_to_bucket(&name).await;
                (format!("firehose:{name}"), None, Some(name))
            }
        };
        TestSink {
            kind,
            setting,
            queue,
            bucket,
            received: Mutex::new(Vec::new()),
        }
    }

    fn target(&self) -> &str {
        self.setting.split_once(':').unwrap().1
    }

    /// Every event received so far, as `{"source", "detail-type", "detail"}`.
    async fn events(&self) -> Vec<Value> {
        match (&self.queue, &self.bucket) {
            (Some(queue), _) => {
                let new = moto::drain_queue(&moto::sqs().await, queue).await;
                let mut received = self.received.lock().unwrap();
                received.extend(new.into_iter().map(|body| {
                    // EventBridge delivers its own envelope; SQS gets ours. Same three fields.
                    json!({
                        "source": body["source"],
                        "detail-type": body["detail-type"],
                        "detail": body["detail"],
                    })
                }));
                received.clone()
            }
            (None, Some(bucket)) => {
                let bucket = bucket.clone();
                tokio::task::spawn_blocking(move || moto::bucket_json_lines(&bucket))
                    .await
                    .unwrap()
            }
            (None, None) => unreachable!(),
        }
    }

    /// The production adapter for this sink, through `endpoint` (moto or a proxy in front of
    /// it), with the production client settings except a short attempt timeout.
    async fn adapter(&self, endpoint: &str, attempt_timeout: Duration) -> Arc<dyn Sink> {
        use aws_config::retry::RetryConfig;
        use aws_config::timeout::TimeoutConfig;
        let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                "local", "local", None, None, "tests",
            ))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(1))
                    .operation_attempt_timeout(attempt_timeout)
                    .operation_timeout(attempt_timeout)
                    .build(),
            )
            .retry_config(RetryConfig::disabled())
            .load()
            .await;
        match self.kind {
            Kind::Sqs => Arc::new(SqsSink::new(
                aws_sdk_sqs::Client::new(&shared),
                self.target(),
            )),
            Kind::EventBridge => Arc::new(EventBridgeSink::new(
                aws_sdk_eventbridge::Client::new(&shared),
                self.target(),
            )),
            Kind::Firehose => Arc::new(FirehoseSink::new(
                aws_sdk_firehose::Client::new(&shared),
                self.target(),
            )),
        }
    }
}

// ------------------------------------------------------------------------------ expectations

/// The stable id as docs/events.md defines it, computed here from the contract's words.
fn contract_id(table: &str, key: &Value, ttl: f64) -> String {
    let key_json = serde_json::to_string(key).unwrap();
    let text = format!("{table}\n{key_json}\n{ttl}");
    Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The item id (`id` attribute) of an event.
fn event_item_id(e: &Value) -> String {
    e["detail"]["key"]["id"]["S"]
        .as_str()
        .unwrap_or_else(|| panic!("an event whose key has no string id: {e}"))
        .to_owned()
}

/// Checks one event against the contract and against the items written; returns the item id.
fn check_event(
    e: &Value,
    table: &str,
    expired: &HashMap<String, i64>,
    mode: &str,
    delete_mode: &str,
) -> String {
    assert_eq!(e["source"], "ttl-sweeper", "{e}");
    let d = &e["detail"];
    assert_eq!(d["version"], 1, "{e}");
    assert_eq!(d["table"], table, "{e}");
    assert_eq!(d["mode"], mode, "{e}");
    assert_eq!(d["delete_mode"], delete_mode, "{e}");
    let id = event_item_id(e);
    assert_eq!(
        d["key"],
        json!({"id": {"S": id}}),
        "the key is the primary key only, in DynamoDB JSON: {e}"
    );
    let ttl = *expired
        .get(&id)
        .unwrap_or_else(|| panic!("an event for {id}, which was not expired: {e}"));
    assert_eq!(d["ttl"].as_f64(), Some(ttl as f64), "{e}");
    assert_eq!(
        d["id"].as_str(),
        Some(contract_id(table, &d["key"], ttl as f64).as_str()),
        "the id is SHA-256 of table, key and ttl: {e}"
    );
    let deleted_at = chrono::DateTime::parse_from_rfc3339(d["deleted_at"].as_str().unwrap())
        .unwrap_or_else(|err| panic!("deleted_at is not RFC 3339 ({err}): {e}"));
    let lag = d["lag_ms"].as_i64().expect("lag_ms is a number");
    assert!(lag >= 0, "{e}");
    assert_eq!(
        deleted_at.timestamp_millis() - ttl * 1000,
        lag,
        "lag_ms is deleted_at minus ttl: {e}"
    );
    match e["detail-type"].as_str() {
        Some("Item Expired") => {}
        Some("Item Expiry Cancelled") => {
            assert_eq!(mode, "archive", "{e}");
            assert_eq!(d["reason"], "ttl changed", "{e}");
            assert!(d["cancelled_at"].is_string(), "{e}");
        }
        other => panic!("unexpected detail-type {other:?}: {e}"),
    }
    id
}

/// Items `exp-i` (expired, ttls spread over the last minutes), `live-i` (an hour ahead) and
/// `nottl-i`; returns the expired ids with their ttls.
async fn fill(client: &Client, table: &str, expired: usize, live: usize) -> HashMap<String, i64> {
    let now = clock().secs();
    let mut items = Vec::new();
    let mut ttls = HashMap::new();
    for i in 0..expired {
        let id = format!("exp-{i:05}");
        let ttl = now - 2 - (i as i64 % 240);
        let mut item = session(&id, ttl);
        item.insert("payload".into(), AV::S(format!("payload of {id}")));
        items.push(item);
        ttls.insert(id, ttl);
    }
    for i in 0..live {
        items.push(session(&format!("live-{i:03}"), now + 3600 + i as i64));
    }
    for i in 0..5 {
        items.push(HashMap::from([(
            "id".to_string(),
            AV::S(format!("nottl-{i}")),
        )]));
    }
    put_many(client, table, items).await;
    ttls
}

async fn present(client: &Client, table: &str) -> HashSet<String> {
    scan_all(client, table)
        .await
        .iter()
        .map(|i| i["id"].as_s().unwrap().clone())
        .collect()
}

/// The invariants that hold at any moment, whatever failed: every event is for an item that
/// was expired (checked by [`check_event`]), one id per item, and — archive mode — every
/// deleted item has an accepted `Item Expired` event. Returns (events, distinct items).
#[allow(clippy::too_many_arguments)]
fn check_invariants(
    events: &[Value],
    table: &str,
    expired: &HashMap<String, i64>,
    present: &HashSet<String>,
    mode: &str,
    delete_mode: &str,
    reported_failed: &HashSet<String>,
    context: &str,
) -> (usize, usize) {
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut expired_events: HashSet<String> = HashSet::new();
    for e in events {
        let item = check_event(e, table, expired, mode, delete_mode);
        let id = e["detail"]["id"].as_str().unwrap().to_owned();
        if let Some(before) = ids.insert(item.clone(), id.clone()) {
            assert_eq!(before, id, "{context}: two ids for {item}");
        }
        if e["detail-type"] == "Item Expired" {
            expired_events.insert(item);
        }
    }
    for item in expired.keys().filter(|i| !present.contains(*i)) {
        let id = contract_id(table, &json!({"id": {"S": item}}), expired[item] as f64);
        match mode {
            "archive" => assert!(
                expired_events.contains(item),
                "{context}: {item} was deleted without an accepted expiry event"
            ),
            _ => assert!(
                expired_events.contains(item) || reported_failed.contains(&id),
                "{context}: {item} was deleted, and its event neither arrived nor was reported"
            ),
        }
    }
    (events.len(), ids.len())
}

fn report_json(report: &SweepReport) -> Value {
    serde_json::to_value(report).unwrap()
}

/// The ids a report lists as failed; checks the report's own accounting of them.
fn failed_ids(report: &Value) -> HashSet<String> {
    let listed = report["failed_event_ids"].as_array().unwrap();
    assert_eq!(
        report["events_failed"].as_u64().unwrap(),
        listed.len() as u64 + report["failed_event_ids_dropped"].as_u64().unwrap(),
        "events_failed counts every failed event: {report}"
    );
    for f in listed {
        assert!(
            f["id"].as_str().is_some_and(|s| s.len() == 64) && f["key"].is_object(),
            "{f}"
        );
        assert!(!f["reason"].as_str().unwrap_or_default().is_empty(), "{f}");
    }
    listed
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_owned())
        .collect()
}

// ------------------------------------------------------------------------ the CLI, per sink

/// `ttl-sweeper sweep` with DynamoDB Local and moto, settings from the environment only.
fn sweep_cli(table: &str, settings: &[(&str, &str)]) -> std::process::Command {
    let mut cmd = common::cli();
    cmd.args(["sweep", "--table-name", table])
        .env("AWS_ENDPOINT_URL", common::endpoint())
        .env("AWS_ENDPOINT_URL_SQS", moto::endpoint())
        .env("AWS_ENDPOINT_URL_EVENTBRIDGE", moto::endpoint())
        .env("AWS_ENDPOINT_URL_FIREHOSE", moto::endpoint())
        .envs(settings.iter().copied());
    cmd
}

async fn one_event_per_expired_item(kind: Kind, settings: &[(&str, &str)], with_item: bool) {
    let (client, table) = simple_table(&format!("events_{kind:?}")).await;
    let expired = fill(&client, &table, 40, 10).await;
    let sink = TestSink::new(kind).await;
    let mut settings = settings.to_vec();
    settings.push(("EXPIRY_EVENTS", &sink.setting));
    let lookup = |k: &str, default: &'static str| {
        settings
            .iter()
            .find(|(s, _)| *s == k)
            .map_or(default, |(_, v)| *v)
            .to_owned()
    };
    let (mode, delete_mode) = (
        lookup("EXPIRY_EVENTS_MODE", "notify"),
        lookup("DELETE_MODE", "batch"),
    );

    let (code, out, err) = tokio::task::spawn_blocking({
        let (table, settings) = (
            table.clone(),
            settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>(),
        );
        move || {
            let pairs: Vec<(&str, &str)> = settings
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            run(&mut sweep_cli(&table, &pairs))
        }
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{kind:?}: stdout {out}\nstderr {err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    // Still one event per item when a lost delete answer turns a deletion into a gone item.
    assert_eq!(removed_json(&report), 40, "{report}");
    assert_eq!(report["events_published"], 40, "{report}");
    assert_eq!(report["events_failed"], 0, "{report}");

    let events = sink.events().await;
    let left = present(&client, &table).await;
    assert_eq!(left.len(), 15, "live and ttl-less items stay");
    assert!(left.iter().all(|i| !i.starts_with("exp-")));
    let (count, distinct) = check_invariants(
        &events,
        &table,
        &expired,
        &left,
        &mode,
        &delete_mode,
        &HashSet::new(),
        &format!("{kind:?}"),
    );
    assert_eq!(
        (count, distinct),
        (40, 40),
        "{kind:?}: exactly one event per expired item"
    );
    for e in &events {
        assert_eq!(e["detail-type"], "Item Expired", "{e}");
        assert_eq!(e["detail"]["item_truncated"], false, "{e}");
        let id = event_item_id(e);
        if with_item {
            let item = &e["detail"]["item"];
            assert_eq!(item["id"], json!({"S": id}), "{e}");
            assert_eq!(item["ttl"], json!({"N": expired[&id].to_string()}), "{e}");
            assert_eq!(
                item["payload"],
                json!({"S": format!("payload of {id}")}),
                "{e}"
            );
        } else {
            assert!(e["detail"].get("item").is_none(), "{e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_gets_one_event_per_expired_item_with_the_deleted_item() {
    // notify + conditional: DeleteItem returns the item (ALL_OLD), so `auto` includes it
    one_event_per_expired_item(Kind::Sqs, &[("DELETE_MODE", "conditional")], true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventbridge_rule_forwards_one_event_per_expired_item() {
    // notify + batch: no item without an extra read
    one_event_per_expired_item(Kind::EventBridge, &[], false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firehose_archives_one_json_line_per_expired_item_before_deleting_it() {
    one_event_per_expired_item(
        Kind::Firehose,
        &[
            ("EXPIRY_EVENTS_MODE", "archive"),
            ("DELETE_MODE", "conditional"),
            ("EXPIRY_EVENTS_ITEM", "read"),
        ],
        true,
    )
    .await;
}

/// A binary partition key and a Number sort key: the event's key is both attributes, in name
/// order, the binary as base64, and the id is computed from exactly that text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_binary_keys_are_named_exactly_and_hashed_in_name_order() {
    use aws_sdk_dynamodb::primitives::Blob;
    use aws_sdk_dynamodb::types::ScalarAttributeType as T;
    use base64::Engine as _;
    let client = common::client().await;
    let table = new_table(&client, "events_keys", |t| {
        // The sort key's name sorts first: name order is not key-schema order.
        t.partition = ("b", T::B);
        t.sort = Some(("a_seq", T::N));
    })
    .await;
    let now = clock().secs();
    let mut items = Vec::new();
    let mut expected = HashMap::new();
    for i in 0..12i64 {
        let bytes = vec![i as u8, 0xff, 0x00];
        let ttl = if i % 4 == 3 { now + 600 } else { now - 5 - i };
        items.push(HashMap::from([
            ("b".to_string(), AV::B(Blob::new(bytes.clone()))),
            ("a_seq".to_string(), AV::N((i * 10).to_string())),
            ("ttl".to_string(), AV::N(ttl.to_string())),
            (
                "expirationWindow".to_string(),
                AV::S(window_key(ttl as f64, 60).unwrap()),
            ),
        ]));
        if ttl < now {
            let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let key_text = format!(r#"{{"a_seq":{{"N":"{}"}},"b":{{"B":"{b64}"}}}}"#, i * 10);
            expected.insert(key_text, ttl);
        }
    }
    put_many(&client, &table, items).await;
    let sink = TestSink::new(Kind::Sqs).await;
    let (code, out, err) = tokio::task::spawn_blocking({
        let (table, setting) = (table.clone(), sink.setting.clone());
        move || run(&mut sweep_cli(&table, &[("EXPIRY_EVENTS", &setting)]))
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}\n{err}");
    let events = sink.events().await;
    assert_eq!(events.len(), expected.len(), "one event per expired item");
    let mut seen = HashSet::new();
    for e in &events {
        let key_text = serde_json::to_string(&e["detail"]["key"]).unwrap();
        let ttl = *expected
            .get(&key_text)
            .unwrap_or_else(|| panic!("unexpected key {key_text} in {e}"));
        assert_eq!(e["detail"]["ttl"].as_f64(), Some(ttl as f64), "{e}");
        let id_text = format!("{table}\n{key_text}\n{ttl}");
        let id = Sha256::digest(id_text.as_bytes())
            .iter()
            .fold(String::new(), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            });
        assert_eq!(e["detail"]["id"].as_str(), Some(id.as_str()), "{e}");
        assert!(seen.insert(key_text), "one event per key");
    }
}

// ------------------------------------------------------------------- archive: cancellations

/// A sweeper on `table` publishing to `sink` through `endpoint`, settings as the CLI reads them.
async fn sweeper_with_events(
    table: &str,
    settings: &[(&str, &str)],
    sink: &TestSink,
    endpoint: &str,
    before_delete: Option<BeforeDelete>,
    attempt_timeout: Duration,
) -> Sweeper<Instrumented<ttl_sweeper::store::DynamoStore>> {
    let mut pairs = settings.to_vec();
    pairs.push(("EXPIRY_EVENTS", &sink.setting));
    let cfg = config(table, &pairs);
    let events = Events::new(
        &cfg.events().expect("EXPIRY_EVENTS is set"),
        sink.adapter(endpoint, attempt_timeout).await,
    )
    .with_backoff(Duration::from_millis(10), Duration::from_millis(200));
    let store = |s| Instrumented {
        before_delete,
        ..Instrumented::new(s)
    };
    sweeper_over(&cfg, store)
        .await
        .with_events(Arc::new(events))
        .with_wall_clock(Arc::new(clock))
}

/// A [`BeforeDelete`] that extends the ttl of the `extended` items by two hours (with their new
/// window), as the application would between the archive publish and the conditional delete.
fn extend_before_delete(client: &Client, table: &str, extended: &HashSet<String>) -> BeforeDelete {
    let new_ttl = clock().secs() + 7200;
    let (client, table, extended) = (client.clone(), table.to_owned(), extended.clone());
    Box::new(move |key: &Key| {
        let (client, table, key) = (client.clone(), table.clone(), key.clone());
        let extend = extended.contains(key["id"].as_s().unwrap());
        Box::pin(async move {
            if extend {
                extend_ttl(&client, &table, key, new_ttl).await;
            }
        })
    })
}

/// One archive sweep with conditional deletes of `table` into `sink`, in which the application
/// extends the `extended` items between the publish and the delete. Returns its report.
async fn sweep_archive_extending(
    client: &Client,
    table: &str,
    sink: &TestSink,
    extended: &HashSet<String>,
) -> Value {
    let hook = extend_before_delete(client, table, extended);
    let settings = [
        ("EXPIRY_EVENTS_MODE", "archive"),
        ("DELETE_MODE", "conditional"),
    ];
    let sweeper = sweeper_with_events(
        table,
        &settings,
        sink,
        &moto::endpoint(),
        Some(hook),
        ttl_sweeper::events::ATTEMPT_TIMEOUT,
    )
    .await;
    report_json(&sweeper.sweep(clock(), &Stop::never()).await)
}

/// The events `sink` received after an archive sweep with conditional deletes, checked against
/// the invariants with the items left in `table` and no item reported failed.
async fn archive_events_checked(
    client: &Client,
    table: &str,
    sink: &TestSink,
    expired: &HashMap<String, i64>,
    context: &str,
) -> Vec<Value> {
    let events = sink.events().await;
    let left = present(client, table).await;
    check_invariants(
        &events,
        table,
        expired,
        &left,
        "archive",
        "conditional",
        &HashSet::new(),
        context,
    );
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_mode_cancels_an_expiry_whose_ttl_was_extended_before_the_delete() {
    let (client, table) = simple_table("events_cancel").await;
    let expired = fill(&client, &table, 12, 3).await;
    let extended: HashSet<String> = ["exp-00001", "exp-00004", "exp-00009"]
        .map(String::from)
        .into();
    // Between the archive publish and the conditional delete, the application extends three.
    let sink = TestSink::new(Kind::Sqs).await;
    let report = sweep_archive_extending(&client, &table, &sink, &extended).await;
    assert_eq!(report["items_deleted"], 9, "{report}");
    assert_eq!(report["events_published"], 12, "{report}");
    assert_eq!(report["events_cancelled"], 3, "{report}");
    assert_eq!(report["events_failed"], 0, "{report}");

    let events = archive_events_checked(&client, &table, &sink, &expired, "cancellations").await;
    let cancelled: HashMap<String, &Value> = events
        .iter()
        .filter(|e| e["detail-type"] == "Item Expiry Cancelled")
        .map(|e| (event_item_id(e), e))
        .collect();
    assert_eq!(
        cancelled.keys().cloned().collect::<HashSet<_>>(),
        extended,
        "one cancellation for each extended item, none for the others"
    );
    for e in events.iter().filter(|e| e["detail-type"] == "Item Expired") {
        if let Some(c) = cancelled.get(&event_item_id(e)) {
            assert_eq!(
                c["detail"]["id"], e["detail"]["id"],
                "same id as the expiry"
            );
            assert_eq!(c["detail"]["deleted_at"], e["detail"]["deleted_at"]);
        }
    }
    for id in &extended {
        assert!(exists(&client, &table, id_key(id)).await, "{id} stays");
    }
}

/// On a FIFO queue (which drops a message whose de-duplication id it saw in the last five
/// minutes, answering success) an expiry and, milliseconds later, its cancellation both arrive:
/// the cancellation has its own de-duplication id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_queue_delivers_both_the_expiry_and_its_cancellation() {
    let (client, table) = simple_table("events_fifo").await;
    let expired = fill(&client, &table, 6, 2).await;
    let extended: HashSet<String> = ["exp-00001", "exp-00004"].map(String::from).into();
    let url = moto::create_fifo_queue(&moto::sqs().await, &moto::unique("expiries")).await;
    let sink = TestSink {
        kind: Kind::Sqs,
        setting: format!("sqs:{url}"),
        queue: Some(url),
        bucket: None,
        received: Mutex::new(Vec::new()),
    };
    let report = sweep_archive_extending(&client, &table, &sink, &extended).await;
    assert_eq!(report["items_deleted"], 4, "{report}");
    assert_eq!(report["events_published"], 6, "{report}");
    assert_eq!(report["events_cancelled"], 2, "{report}");

    let events = archive_events_checked(&client, &table, &sink, &expired, "FIFO").await;
    let of = |kind: &str| -> Vec<String> {
        let mut ids: Vec<String> = events
            .iter()
            .filter(|e| e["detail-type"] == kind)
            .map(event_item_id)
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(
        of("Item Expired"),
        expired
            .keys()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>(),
        "one expiry per expired item arrived"
    );
    assert_eq!(
        of("Item Expiry Cancelled"),
        vec!["exp-00001".to_string(), "exp-00004".to_string()],
        "each cancellation the queue accepted arrived too: {events:?}"
    );
    // In order within the table's message group: each cancellation after its expiry.
    for id in &extended {
        let at = |kind: &str| {
            events
                .iter()
                .position(|e| e["detail-type"] == kind && event_item_id(e) == *id)
                .unwrap()
        };
        assert!(at("Item Expired") < at("Item Expiry Cancelled"), "{id}");
    }
}

// ------------------------------------------------------------------------ a sink that is down

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_is_down_loses_nothing_silently() {
    let client = common::client().await;
    for (mode, delete_mode) in [("notify", "batch"), ("archive", "conditional")] {
        let table = new_table(&client, &format!("events_down_{mode}"), |_| {}).await;
        let expired = fill(&client, &table, 30, 3).await;
        let sink = TestSink::new(Kind::Sqs).await;
        let proxy = FaultProxy::start(
            &moto::endpoint(),
            DELAY,
            Plan::script(|op, _| fault_proxy::is_sink_batch(op).then_some(Fault::Status(503))),
        )
        .await;
        let settings = [
            ("EXPIRY_EVENTS_MODE", mode),
            ("DELETE_MODE", delete_mode),
            ("MAX_RETRIES", "2"),
        ];
        let sweeper = sweeper_with_events(
            &table,
            &settings,
            &sink,
            &proxy.endpoint,
            None,
            ttl_sweeper::events::ATTEMPT_TIMEOUT,
        )
        .await;
        let report = report_json(&sweeper.sweep(clock(), &Stop::never()).await);
        let failed = failed_ids(&report);
        let left = present(&client, &table).await;
        assert!(sink.events().await.is_empty());
        assert_eq!(report["events_published"], 0, "{report}");
        assert_eq!(report["events_failed"], 30, "{mode}: {report}");
        let all: HashSet<String> = expired
            .iter()
            .map(|(id, ttl)| contract_id(&table, &json!({"id": {"S": id}}), *ttl as f64))
            .collect();
        assert_eq!(failed, all, "{mode}: every lost event is listed by id");
        match mode {
            "notify" => {
                // deleted, then publishing failed: reported, never silently dropped
                assert_eq!(removed_json(&report), 30, "{report}");
                assert_eq!(left.len(), 8);
            }
            _ => {
                // nothing is deleted before its event is accepted
                assert_eq!(report["items_deleted"], 0, "{report}");
                assert_eq!(report["items_failed"], 30, "{report}");
                assert!(report["failed_keys"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|f| f["reason"]
                        .as_str()
                        .unwrap()
                        .starts_with("expiry event not accepted")));
                assert_eq!(left.len(), 38, "every item stays");
            }
        }
        assert!(proxy.stats.faults_total() >= 3, "the sink was tried");
    }
}

/// The CLI with a queue that does not exist: the items are deleted (notify), every event is
/// reported — in the JSON report, in the summary line and one error line each — and the exit
/// status says the sweep failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reports_lost_events_in_its_report_log_and_exit_status() {
    let (client, table) = simple_table("events_cli_down").await;
    let expired = fill(&client, &table, 12, 2).await;
    let missing = format!("sqs:{}/123456789012/no-such-queue", moto::endpoint());
    let (code, out, err) = tokio::task::spawn_blocking({
        let table = table.clone();
        move || run(&mut sweep_cli(&table, &[("EXPIRY_EVENTS", &missing)]))
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "a sweep that lost events fails: {err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(removed_json(&report), 12, "{report}");
    let left = present(&client, &table).await;
    assert!(left.iter().all(|id| !expired.contains_key(id)), "{left:?}");
    assert_eq!(
        left.len(),
        2 + 5,
        "the live items and those without a ttl stay: {left:?}"
    );
    assert_eq!(report["events_published"], 0, "{report}");
    assert_eq!(report["events_failed"], 12, "{report}");
    let ids: HashSet<String> = expired
        .iter()
        .map(|(id, ttl)| contract_id(&table, &json!({"id": {"S": id}}), *ttl as f64))
        .collect();
    assert_eq!(failed_ids(&report), ids);
    // The log, without its colours: the summary line names the count and the first ids, and
    // each lost event has its own error line with its id.
    let log = strip_ansi(&err);
    let summary = log
        .lines()
        .find(|l| l.contains("events_failed=12"))
        .unwrap_or_else(|| panic!("no summary line with events_failed=12:\n{log}"));
    assert!(summary.contains("ERROR"), "{summary}");
    assert!(summary.contains("failed_event_ids="), "{summary}");
    for id in &ids {
        assert!(
            log.lines()
                .any(|l| l.contains("ERROR") && l.contains(id.as_str()) && l != summary),
            "no error line for event {id}:\n{log}"
        );
    }
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

// -------------------------------------------------------------------------------- faults

/// Each attempt's timeout on the sink client of the fault runs; a delayed request is held
/// longer. (Without faults, the production timeout.)
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(1500);
const DELAY: Duration = Duration::from_millis(2000);

fn sink_faults() -> Vec<Fault> {
    vec![
        Fault::Unprocessed, // per-entry failures
        Fault::Throttle("ThrottlingException"),
        Fault::Status(500),
        Fault::Status(503),
        Fault::Delay,          // a timeout; applied late anyway
        Fault::Reset,          // never reached the sink
        Fault::DropAfterApply, // accepted, answer lost
    ]
}

fn seed() -> u64 {
    std::env::var("EVENTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

struct FaultRun {
    line: String,
}

/// One sink, one mode: sweeps with faults in front of the sink until the table is clean (or
/// the limit), the invariants after every sweep; then a sweep without faults finishes.
async fn fault_run(kind: Kind, mode: &'static str, seed: u64) -> FaultRun {
    const ITEMS: usize = 120;
    let delete_mode = if mode == "archive" {
        "conditional"
    } else {
        "batch"
    };
    let (client, table) = simple_table(&format!("events_faults_{kind:?}_{mode}")).await;
    let expired = fill(&client, &table, ITEMS, 10).await;
    let sink = TestSink::new(kind).await;
    let ops = vec!["SendMessageBatch", "PutEvents", "PutRecordBatch"];
    // Seeded faults, and the first sink call always fails: a sink called only a few times per
    // sweep could otherwise draw no fault at all.
    let proxy = FaultProxy::start(
        &moto::endpoint(),
        DELAY,
        Plan::FirstThen {
            first: Fault::Status(500),
            ops: ops.clone(),
            then: Box::new(Plan::Seeded {
                seed,
                rate: 0.4,
                ops,
                faults: sink_faults(),
            }),
            used: Default::default(),
        },
    )
    .await;
    let settings = [
        ("EXPIRY_EVENTS_MODE", mode),
        ("DELETE_MODE", delete_mode),
        ("MAX_RETRIES", "3"),
    ];
    let sweeper = sweeper_with_events(
        &table,
        &settings,
        &sink,
        &proxy.endpoint,
        None,
        ATTEMPT_TIMEOUT,
    )
    .await;
    let context = format!("{kind:?} {mode} (EVENTS_SEED={seed})");
    let mut reported_failed = HashSet::new();
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    let mut sweeps = 0;
    for faults_on in [true, true, true, true, false] {
        if !faults_on {
            proxy.set_plan(Plan::Pass);
        }
        sweeps += 1;
        let report = report_json(&sweeper.sweep(clock(), &Stop::never()).await);
        proxy.wait_idle().await; // late (delayed) requests have reached moto
        reported_failed.extend(failed_ids(&report));
        for field in [
            "items_deleted",
            "events_published",
            "events_failed",
            "events_retried",
        ] {
            *totals.entry(field).or_default() += report[field].as_u64().unwrap();
        }
        let left = present(&client, &table).await;
        let events = sink.events().await;
        check_invariants(
            &events,
            &table,
            &expired,
            &left,
            mode,
            delete_mode,
            &reported_failed,
            &format!("{context}, sweep {sweeps}"),
        );
        if !faults_on {
            assert!(
                report["events_failed"] == 0 && report["items_failed"] == 0,
                "{context}: the sweep without faults must succeed: {report}"
            );
        }
    }
    let left = present(&client, &table).await;
    assert!(
        left.iter().all(|i| !i.starts_with("exp-")),
        "{context}: every expired item is gone in the end"
    );
    assert_eq!(left.len(), 15, "{context}: live items stay");
    let events = sink.events().await;
    let (count, distinct) = check_invariants(
        &events,
        &table,
        &expired,
        &left,
        mode,
        delete_mode,
        &reported_failed,
        &context,
    );
    if mode == "archive" {
        assert_eq!(
            distinct, ITEMS,
            "{context}: every expired item has an event"
        );
    }
    let faults = proxy.stats.faults.lock().unwrap().clone();
    assert!(
        proxy.stats.faults_total() > 0,
        "{context}: no fault was injected"
    );
    let mut faults: Vec<String> = faults.iter().map(|(k, v)| format!("{k} {v}")).collect();
    faults.sort();
    FaultRun {
        line: format!(
            "| {kind:?} | {mode} | {} | {} | {count} | {distinct} | {} | {} | {} |",
            faults.join(", "),
            proxy.stats.requests(),
            count - distinct,
            totals["events_retried"],
            reported_failed.len(),
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_in_front_of_each_sink_lose_no_event_and_delete_nothing_unannounced() {
    let seed = seed();
    eprintln!("EVENTS_SEED={seed}");
    let started = Instant::now();
    let runs = futures::future::join_all(
        [Kind::Sqs, Kind::EventBridge, Kind::Firehose]
            .into_iter()
            .flat_map(|k| [(k, "notify"), (k, "archive")])
            .enumerate()
            .map(|(i, (k, m))| fault_run(k, m, seed.wrapping_add(i as u64))),
    )
    .await;
    let mut table = String::from(
        "| sink | mode | faults injected | sink requests | events received | items with an event | duplicates (same id) | entries retried | failures reported |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        table.push_str(&r.line);
        table.push('\n');
    }
    let text = format!(
        "Expiry events through the fault proxy (EVENTS_SEED={seed}, 40 % of sink calls faulted \
         for 4 sweeps, then one clean sweep; {:.1} s):\n\n{table}",
        started.elapsed().as_secs_f64()
    );
    eprintln!("{text}");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/target/tmp");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(format!("{dir}/events-fault-report.md"), text).unwrap();
}

// ------------------------------------------------------------------------------- SIGKILL

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_an_archive_sweep_deletes_nothing_without_an_event() {
    // Firehose → S3: moto's SQS slows down as a queue grows, its Firehose does not.
    const ITEMS: usize = 1000;
    const CHUNK: usize = 25;
    let seed = std::env::var("EVENTS_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(seed);
    let mut rng = fastrand::Rng::with_seed(seed);
    // Killed once this many chunks (one PutRecordBatch, one S3 object each) were archived, plus
    // up to 30 ms.
    let kill_after = rng.usize(1..ITEMS / CHUNK * 3 / 4);
    let extra = Duration::from_millis(rng.u64(0..30));
    eprintln!(
        "EVENTS_KILL_SEED={seed}: SIGKILL after {kill_after} archived chunks + {} ms",
        extra.as_millis()
    );
    let (client, table) = simple_table("events_kill").await;
    let expired = fill(&client, &table, ITEMS, 20).await;
    let sink = TestSink::new(Kind::Firehose).await;
    let bucket = sink.bucket.clone().unwrap();
    let settings = [
        ("EXPIRY_EVENTS", sink.setting.as_str()),
        ("EXPIRY_EVENTS_MODE", "archive"),
        ("DELETE_MODE", "conditional"),
    ];
    let mut child = sweep_cli(&table, &settings)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut finished_first = false;
    loop {
        let archived = {
            let bucket = bucket.clone();
            tokio::task::spawn_blocking(move || moto::bucket_object_count(&bucket))
                .await
                .unwrap()
        };
        if archived >= kill_after {
            tokio::time::sleep(extra).await;
            break;
        }
        if child.try_wait().unwrap().is_some() {
            finished_first = true;
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no progress");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    finished_first |= child.try_wait().unwrap().is_some();
    // SAFETY: a plain syscall on the PID of the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let status = child.wait().unwrap();
    let killed_at = started.elapsed();
    let events = sink.events().await;
    let left = present(&client, &table).await;
    let deleted = expired.keys().filter(|i| !left.contains(*i)).count();
    eprintln!(
        "killed after {:.2} s ({status}): {} events archived, {deleted} of {ITEMS} items deleted",
        killed_at.as_secs_f64(),
        events.len()
    );
    assert!(
        !finished_first && deleted < ITEMS,
        "EVENTS_KILL_SEED={seed}: the sweep ended before the kill"
    );
    let context = format!("after SIGKILL (EVENTS_KILL_SEED={seed})");
    check_invariants(
        &events,
        &table,
        &expired,
        &left,
        "archive",
        "conditional",
        &HashSet::new(),
        &context,
    );

    // The next sweep finishes: everything expired deleted, each with an event; items whose event
    // went out before the kill but were not deleted get it again, with the same id.
    let (code, out, err) = tokio::task::spawn_blocking({
        let (table, setting) = (table.clone(), sink.setting.clone());
        move || {
            run(&mut sweep_cli(
                &table,
                &[
                    ("EXPIRY_EVENTS", &setting),
                    ("EXPIRY_EVENTS_MODE", "archive"),
                    ("DELETE_MODE", "conditional"),
                ],
            ))
        }
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}\n{err}");
    let events = sink.events().await;
    let left = present(&client, &table).await;
    assert_eq!(left.len(), 25, "only live and ttl-less items are left");
    let (count, distinct) = check_invariants(
        &events,
        &table,
        &expired,
        &left,
        "archive",
        "conditional",
        &HashSet::new(),
        &format!("{context}, then a full sweep"),
    );
    assert_eq!(distinct, ITEMS);
    eprintln!(
        "after the second sweep: {count} events for {distinct} items ({} duplicates, same ids)",
        count - distinct
    );
}
