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

use crate::support::{self, fault_proxy, moto};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use fault_proxy::{Fault, FaultProxy, Plan};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use support::{
    clock, config, exists, extend_ttl, id_key, id_set, new_table, put_many, removed_json, run,
    session, simple_table, sweeper_over, AssertFields, BeforeDelete, Daemon, Instrumented,
    Observed, Recording, AV,
};
use ttl_sweeper::engine::{Stop, Sweeper};
use ttl_sweeper::events::aws::{EventBridgeSink, FirehoseSink, SqsSink};
use ttl_sweeper::events::{Events, Sink};
use ttl_sweeper::store::{DynamoStore, Key};

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
    /// A sink of `kind`; an SQS queue that is a FIFO queue if `fifo`.
    async fn new(kind: Kind, fifo: bool) -> TestSink {
        let (setting, queue, bucket) = match kind {
            Kind::Sqs => {
                let name = moto::unique("expiries");
                let url = moto::create_queue(&moto::sqs().await, &name, fifo).await;
                (format!("sqs:{url}"), Some(url), None)
            }
            Kind::EventBridge => {
                let (bus, queue) = moto::create_bus_to_queue(&moto::unique("expiry-bus")).await;
                (format!("eventbridge:{bus}"), Some(queue), None)
            }
            Kind::Firehose => {
                let name = moto::unique("expiry-archive");
                moto::create_firehose_to_bucket(&name).await;
                (format!("firehose:{name}"), None, Some(name))
            }
        };
        let received = Mutex::default();
        TestSink {
            kind,
            setting,
            queue,
            bucket,
            received,
        }
    }

    fn target(&self) -> &str {
        self.setting.split_once(':').unwrap().1
    }

    /// Every event received so far, as `{"source", "detail-type", "detail"}`.
    async fn events(&self) -> Vec<Value> {
        if let Some(bucket) = self.bucket.clone() {
            let lines = tokio::task::spawn_blocking(move || moto::bucket_json_lines(&bucket));
            return lines.await.unwrap();
        }
        let new = moto::drain_queue(&moto::sqs().await, self.queue.as_ref().unwrap()).await;
        let mut received = self.received.lock().unwrap();
        // EventBridge delivers its own envelope; SQS gets ours. Same three fields.
        received.extend(new.into_iter().map(|body| {
            json!({"source": body["source"], "detail-type": body["detail-type"], "detail": body["detail"]})
        }));
        received.clone()
    }

    /// The production adapter for this sink, through `endpoint` (moto or a proxy in front of
    /// it), with the production client settings except a short attempt timeout.
    async fn adapter(&self, endpoint: &str, attempt_timeout: Duration) -> Arc<dyn Sink> {
        use aws_config::{retry::RetryConfig, timeout::TimeoutConfig};
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(1))
            .operation_attempt_timeout(attempt_timeout)
            .operation_timeout(attempt_timeout)
            .build();
        let shared = moto::sdk(endpoint)
            .await
            .to_builder()
            .timeout_config(timeouts);
        let shared = shared.retry_config(RetryConfig::disabled());
        let (shared, target) = (shared.build(), self.target());
        match self.kind {
            Kind::Sqs => Arc::new(SqsSink::new(aws_sdk_sqs::Client::new(&shared), target)),
            Kind::EventBridge => {
                let client = aws_sdk_eventbridge::Client::new(&shared);
                Arc::new(EventBridgeSink::new(client, target))
            }
            Kind::Firehose => {
                let client = aws_sdk_firehose::Client::new(&shared);
                Arc::new(FirehoseSink::new(client, target))
            }
        }
    }
}

// ------------------------------------------------------------------------------ expectations

/// The stable id as docs/events.md defines it, computed here from the contract's words.
fn contract_id(table: &str, key: &Value, ttl: f64) -> String {
    let key_json = serde_json::to_string(key).unwrap();
    let text = format!("{table}\n{key_json}\n{ttl}");
    let hex = |mut s: String, b: &u8| {
        let _ = write!(s, "{b:02x}");
        s
    };
    Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::new(), hex)
}

/// The item id (`id` attribute) of an event.
fn event_item_id(e: &Value) -> String {
    e["detail"]["key"]["id"]["S"]
        .as_str()
        .unwrap_or_else(|| panic!("an event whose key has no string id: {e}"))
        .to_owned()
}

/// A table filled by [`fill`], swept in `mode` with `delete_mode` deletes: what its events must be.
struct Expect<'a> {
    table: &'a str,
    /// The expired items' ttls, by id.
    expired: &'a HashMap<String, i64>,
    mode: &'a str,
    delete_mode: &'a str,
}

impl<'a> Expect<'a> {
    fn new(
        table: &'a str,
        expired: &'a HashMap<String, i64>,
        mode: &'a str,
        delete_mode: &'a str,
    ) -> Self {
        Expect {
            table,
            expired,
            mode,
            delete_mode,
        }
    }

    /// The contract id of expired item `id`.
    fn id_of(&self, id: &str) -> String {
        contract_id(
            self.table,
            &json!({"id": {"S": id}}),
            self.expired[id] as f64,
        )
    }

    /// The contract ids of every expired item.
    fn all_ids(&self) -> HashSet<String> {
        self.expired.keys().map(|id| self.id_of(id)).collect()
    }

    /// Checks one event against the contract and against the items written; returns the item id.
    fn check_event(&self, e: &Value) -> String {
        assert_eq!(e["source"], "ttl-sweeper", "{e}");
        let d = &e["detail"];
        let (table, mode, delete_mode) = (self.table, self.mode, self.delete_mode);
        let want = json!({"version": 1, "table": table, "mode": mode, "delete_mode": delete_mode});
        for (field, value) in want.as_object().unwrap() {
            assert_eq!(d[field], *value, "{field}: {e}");
        }
        let id = event_item_id(e);
        let key_only = d["key"] == json!({"id": {"S": id}});
        assert!(
            key_only,
            "the key is the primary key only, in DynamoDB JSON: {e}"
        );
        let ttl = self.expired.get(&id);
        let ttl = *ttl.unwrap_or_else(|| panic!("an event for {id}, which was not expired: {e}"));
        assert_eq!(d["ttl"].as_f64(), Some(ttl as f64), "{e}");
        let contract = self.id_of(&id);
        let why = "the id is SHA-256 of table, key and ttl";
        assert_eq!(d["id"].as_str(), Some(contract.as_str()), "{why}: {e}");
        let deleted_at = chrono::DateTime::parse_from_rfc3339(d["deleted_at"].as_str().unwrap())
            .unwrap_or_else(|err| panic!("deleted_at is not RFC 3339 ({err}): {e}"));
        let lag = d["lag_ms"].as_i64().expect("lag_ms is a number");
        assert!(lag >= 0, "{e}");
        let since_ttl = deleted_at.timestamp_millis() - ttl * 1000;
        assert_eq!(since_ttl, lag, "lag_ms is deleted_at minus ttl: {e}");
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

    /// The invariants that hold at any moment, whatever failed: every event is for an item that
    /// was expired (checked by [`Expect::check_event`]), one id per item, and — archive mode —
    /// every deleted item has an accepted `Item Expired` event; notify mode — an event, or a
    /// failure reported in `failed`. `present` is what the table holds. Returns (events,
    /// distinct items).
    fn check(
        &self,
        events: &[Value],
        present: &HashSet<String>,
        failed: &HashSet<String>,
        context: &str,
    ) -> (usize, usize) {
        let mut ids: HashMap<String, String> = HashMap::new();
        let mut expired_events: HashSet<String> = HashSet::new();
        for e in events {
            let item = self.check_event(e);
            let id = e["detail"]["id"].as_str().unwrap().to_owned();
            if let Some(before) = ids.insert(item.clone(), id.clone()) {
                assert_eq!(before, id, "{context}: two ids for {item}");
            }
            if e["detail-type"] == "Item Expired" {
                expired_events.insert(item);
            }
        }
        for item in self.expired.keys().filter(|i| !present.contains(*i)) {
            let announced = expired_events.contains(item);
            match self.mode {
                "archive" => assert!(
                    announced,
                    "{context}: {item} was deleted without an accepted expiry event"
                ),
                _ => assert!(
                    announced || failed.contains(&self.id_of(item)),
                    "{context}: {item} was deleted, and its event neither arrived nor was reported"
                ),
            }
        }
        (events.len(), ids.len())
    }

    /// What `sink` received, checked with the items left in the table and `failed`.
    async fn check_sink(
        &self,
        client: &Client,
        sink: &TestSink,
        failed: &HashSet<String>,
        context: &str,
    ) -> (Vec<Value>, usize) {
        let present = id_set(client, self.table).await;
        let events = sink.events().await;
        let (_, distinct) = self.check(&events, &present, failed, context);
        (events, distinct)
    }
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
    items.extend((0..live).map(|i| session(&format!("live-{i:03}"), now + 3600 + i as i64)));
    items.extend((0..5).map(|i| id_key(&format!("nottl-{i}"))));
    put_many(client, table, items).await;
    ttls
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
        let id = f["id"].as_str().is_some_and(|s| s.len() == 64);
        assert!(id && f["key"].is_object(), "{f}");
        assert!(!f["reason"].as_str().unwrap_or_default().is_empty(), "{f}");
    }
    listed
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_owned())
        .collect()
}

/// One sweep as of the clock, its report as JSON.
async fn sweep_json<S: ttl_sweeper::store::Store>(sweeper: &Sweeper<S>) -> Value {
    serde_json::to_value(sweeper.sweep(clock(), &Stop::never()).await).unwrap()
}

// ------------------------------------------------------------------------ the CLI, per sink

/// `ttl-sweeper sweep` with DynamoDB Local and moto, settings from the environment only.
fn sweep_cli(table: &str, settings: &[(&str, &str)]) -> std::process::Command {
    let mut cmd = support::local_cli();
    cmd.args(["sweep", "--table-name", table]);
    for service in ["SQS", "EVENTBRIDGE", "FIREHOSE"] {
        cmd.env(format!("AWS_ENDPOINT_URL_{service}"), moto::endpoint());
    }
    cmd.envs(settings.iter().copied());
    cmd
}

/// Runs [`sweep_cli`] to its end (off the runtime's workers): exit code, stdout, stderr.
fn run_sweep_cli(table: &str, settings: &[(&str, &str)]) -> (i32, String, String) {
    tokio::task::block_in_place(|| run(&mut sweep_cli(table, settings)))
}

async fn one_event_per_expired_item(kind: Kind, settings: &[(&str, &str)], with_item: bool) {
    let (client, table) = simple_table(&format!("events_{kind:?}")).await;
    let expired = fill(&client, &table, 40, 10).await;
    let sink = TestSink::new(kind, false).await;
    let mut settings = settings.to_vec();
    settings.push(("EXPIRY_EVENTS", &sink.setting));
    let setting = |k: &str, default| {
        settings
            .iter()
            .find(|(s, _)| *s == k)
            .map_or(default, |s| s.1)
    };
    let mode = setting("EXPIRY_EVENTS_MODE", "notify");
    let delete_mode = setting("DELETE_MODE", "batch");

    let (code, out, err) = run_sweep_cli(&table, &settings);
    assert_eq!(code, 0, "{kind:?}: stdout {out}\nstderr {err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    // Still one event per item when a lost delete answer turns a deletion into a gone item.
    assert_eq!(removed_json(&report), 40, "{report}");
    report.assert_fields("events_published=40 events_failed=0");

    let left = id_set(&client, &table).await;
    assert_eq!(left.len(), 15, "live and ttl-less items stay");
    assert!(left.iter().all(|i| !i.starts_with("exp-")));
    let expect = Expect::new(&table, &expired, mode, delete_mode);
    let events = sink.events().await;
    let counts = expect.check(&events, &left, &HashSet::new(), &format!("{kind:?}"));
    assert_eq!(
        counts,
        (40, 40),
        "{kind:?}: exactly one event per expired item"
    );
    for e in &events {
        assert_eq!(e["detail-type"], "Item Expired", "{e}");
        assert_eq!(e["detail"]["item_truncated"], false, "{e}");
        let id = event_item_id(e);
        let item = &e["detail"]["item"];
        if with_item {
            assert_eq!(item["id"], json!({"S": id}), "{e}");
            assert_eq!(item["ttl"], json!({"N": expired[&id].to_string()}), "{e}");
            let payload = &item["payload"];
            assert_eq!(*payload, json!({"S": format!("payload of {id}")}), "{e}");
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
    let settings = [
        ("EXPIRY_EVENTS_MODE", "archive"),
        ("DELETE_MODE", "conditional"),
        ("EXPIRY_EVENTS_ITEM", "read"),
    ];
    one_event_per_expired_item(Kind::Firehose, &settings, true).await;
}

/// A binary partition key and a Number sort key: the event's key is both attributes, in name
/// order, the binary as base64, and the id is computed from exactly that text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_binary_keys_are_named_exactly_and_hashed_in_name_order() {
    use aws_sdk_dynamodb::types::ScalarAttributeType as T;
    use base64::Engine as _;
    let client = support::client().await;
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
        let mut item = session("", ttl); // the ttl and its window; the key follows
        item.remove("id");
        let blob = aws_sdk_dynamodb::primitives::Blob::new(bytes.clone());
        item.insert("b".into(), AV::B(blob));
        item.insert("a_seq".into(), support::num(i * 10));
        items.push(item);
        if ttl < now {
            let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let key_text = format!(r#"{{"a_seq":{{"N":"{}"}},"b":{{"B":"{b64}"}}}}"#, i * 10);
            expected.insert(key_text, ttl);
        }
    }
    put_many(&client, &table, items).await;
    let sink = TestSink::new(Kind::Sqs, false).await;
    let (code, out, err) = run_sweep_cli(&table, &[("EXPIRY_EVENTS", &sink.setting)]);
    assert_eq!(code, 0, "{out}\n{err}");
    let events = sink.events().await;
    assert_eq!(events.len(), expected.len(), "one event per expired item");
    let mut seen = HashSet::new();
    for e in &events {
        let key_text = serde_json::to_string(&e["detail"]["key"]).unwrap();
        let ttl = expected.get(&key_text);
        let ttl = *ttl.unwrap_or_else(|| panic!("unexpected key {key_text} in {e}"));
        assert_eq!(e["detail"]["ttl"].as_f64(), Some(ttl as f64), "{e}");
        let id = contract_id(&table, &e["detail"]["key"], ttl as f64);
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
) -> Sweeper<Instrumented<DynamoStore>> {
    let mut pairs = settings.to_vec();
    pairs.push(("EXPIRY_EVENTS", &sink.setting));
    let cfg = config(table, &pairs);
    let adapter = sink.adapter(endpoint, attempt_timeout).await;
    let events = Events::new(&cfg.events.clone().expect("EXPIRY_EVENTS is set"), adapter)
        .with_backoff(Duration::from_millis(10), Duration::from_millis(200));
    let observer = Recording {
        before_delete,
        ..Recording::default()
    };
    let sweeper = sweeper_over(&cfg, |inner| Observed { inner, observer }).await;
    sweeper
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

/// The settings of archive mode with conditional deletes.
const ARCHIVE: [(&str, &str); 2] = [
    ("EXPIRY_EVENTS_MODE", "archive"),
    ("DELETE_MODE", "conditional"),
];

/// One archive sweep with conditional deletes of `table` into `sink`, in which the application
/// extends the `extended` items between the publish and the delete. Returns its report; checks
/// what the sink received against the invariants, no item reported failed.
async fn sweep_archive_extending(
    client: &Client,
    expect: &Expect<'_>,
    sink: &TestSink,
    extended: &HashSet<String>,
    context: &str,
) -> (Value, Vec<Value>) {
    let hook = extend_before_delete(client, expect.table, extended);
    let timeout = ttl_sweeper::events::ATTEMPT_TIMEOUT;
    let endpoint = moto::endpoint();
    let sweeper =
        sweeper_with_events(expect.table, &ARCHIVE, sink, &endpoint, Some(hook), timeout).await;
    let report = sweep_json(&sweeper).await;
    let (events, _) = expect
        .check_sink(client, sink, &HashSet::new(), context)
        .await;
    (report, events)
}

/// What a table of expired items `expired` swept in archive mode must send.
fn archived<'a>(table: &'a str, expired: &'a HashMap<String, i64>) -> Expect<'a> {
    Expect::new(table, expired, "archive", "conditional")
}

/// Archive mode with conditional deletes: a ttl the application extends between the publish and
/// the delete gets an `Item Expiry Cancelled` with the expiry's id and time, and the item stays.
/// On a FIFO queue (which drops a message whose de-duplication id it saw in the last five
/// minutes, answering success) the expiry and, milliseconds later, its cancellation both arrive,
/// in order: the cancellation has its own de-duplication id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_mode_cancels_an_expiry_whose_ttl_was_extended_on_standard_and_fifo_queues() {
    let extended: HashSet<String> = ["exp-00001", "exp-00004", "exp-00009"]
        .map(String::from)
        .into();
    for fifo in [false, true] {
        let context = if fifo { "FIFO" } else { "cancellations" };
        let (client, table) = simple_table(&format!("events_{context}")).await;
        let expired = fill(&client, &table, 12, 3).await;
        let sink = TestSink::new(Kind::Sqs, fifo).await;
        let expect = archived(&table, &expired);
        let (report, events) =
            sweep_archive_extending(&client, &expect, &sink, &extended, context).await;
        let fields = "items_deleted=9 events_published=12 events_cancelled=3 events_failed=0";
        report.assert_fields(fields);
        let of = |kind: &str| -> Vec<&Value> {
            let mut of: Vec<&Value> = events.iter().filter(|e| e["detail-type"] == kind).collect();
            of.sort_by_key(|e| event_item_id(e));
            of
        };
        let ids = |events: Vec<&Value>| -> Vec<String> {
            events.into_iter().map(event_item_id).collect()
        };
        let (expiries, cancellations) = (of("Item Expired"), of("Item Expiry Cancelled"));
        let mut all: Vec<String> = expired.keys().cloned().collect();
        all.sort();
        let arrived = ids(expiries.clone());
        assert_eq!(
            arrived, all,
            "{context}: one expiry per expired item arrived"
        );
        let mut want: Vec<String> = extended.iter().cloned().collect();
        want.sort();
        let why = "one cancellation for each extended item, none for the others";
        let cancelled = ids(cancellations.clone());
        assert_eq!(cancelled, want, "{context}: {why}: {events:?}");
        for c in cancellations {
            let e = expiries
                .iter()
                .find(|e| event_item_id(e) == event_item_id(c));
            let e = e.unwrap();
            let same = &c["detail"]["id"];
            assert_eq!(*same, e["detail"]["id"], "same id as the expiry");
            assert_eq!(c["detail"]["deleted_at"], e["detail"]["deleted_at"]);
        }
        for id in &extended {
            assert!(exists(&client, &table, id).await, "{id} stays");
            // In order within the table's message group: each cancellation after its expiry.
            let at = |kind: &str| {
                let of = |e: &Value| e["detail-type"] == kind && event_item_id(e) == *id;
                events.iter().position(of).unwrap()
            };
            let in_order = !fifo || at("Item Expired") < at("Item Expiry Cancelled");
            assert!(in_order, "{id}");
        }
    }
}

// ------------------------------------------------------------------------ a sink that is down

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_is_down_loses_nothing_silently() {
    let client = support::client().await;
    for (mode, delete_mode) in [("notify", "batch"), ("archive", "conditional")] {
        let table = new_table(&client, &format!("events_down_{mode}"), |_| {}).await;
        let expired = fill(&client, &table, 30, 3).await;
        let sink = TestSink::new(Kind::Sqs, false).await;
        let down =
            Plan::script(|op, _| fault_proxy::is_sink_batch(op).then_some(Fault::Status(503)));
        let proxy = FaultProxy::start(&moto::endpoint(), DELAY, down).await;
        let settings = [
            ("EXPIRY_EVENTS_MODE", mode),
            ("DELETE_MODE", delete_mode),
            ("MAX_RETRIES", "2"),
        ];
        let timeout = ttl_sweeper::events::ATTEMPT_TIMEOUT;
        let sweeper =
            sweeper_with_events(&table, &settings, &sink, &proxy.endpoint, None, timeout).await;
        let report = sweep_json(&sweeper).await;
        let failed = failed_ids(&report);
        let left = id_set(&client, &table).await;
        assert!(sink.events().await.is_empty());
        report.assert_fields("events_published=0 events_failed=30");
        let expect = Expect::new(&table, &expired, mode, delete_mode);
        let all = expect.all_ids();
        assert_eq!(failed, all, "{mode}: every lost event is listed by id");
        match mode {
            "notify" => {
                // deleted, then publishing failed: reported, never silently dropped
                assert_eq!(removed_json(&report), 30, "{report}");
                assert_eq!(left.len(), 8);
            }
            _ => {
                // nothing is deleted before its event is accepted
                report.assert_fields("items_deleted=0 items_failed=30");
                let failed_keys = report["failed_keys"].as_array().unwrap();
                let not_accepted = "expiry event not accepted";
                let refused = |f: &Value| f["reason"].as_str().unwrap().starts_with(not_accepted);
                assert!(failed_keys.iter().all(refused));
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
    let (code, out, err) = run_sweep_cli(&table, &[("EXPIRY_EVENTS", &missing)]);
    assert_eq!(code, 1, "a sweep that lost events fails: {err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(removed_json(&report), 12, "{report}");
    let left = id_set(&client, &table).await;
    assert!(left.iter().all(|id| !expired.contains_key(id)), "{left:?}");
    let why = "the live items and those without a ttl stay";
    assert_eq!(left.len(), 2 + 5, "{why}: {left:?}");
    report.assert_fields("events_published=0 events_failed=12");
    let expect = Expect::new(&table, &expired, "notify", "batch");
    let ids = expect.all_ids();
    assert_eq!(failed_ids(&report), ids);
    // The log, without its colours: the summary line names the count and the first ids, and
    // each lost event has its own error line with its id.
    let log = strip_ansi(&err);
    let summary = log.lines().find(|l| l.contains("events_failed=12"));
    let summary =
        summary.unwrap_or_else(|| panic!("no summary line with events_failed=12:\n{log}"));
    assert!(summary.contains("ERROR"), "{summary}");
    assert!(summary.contains("failed_event_ids="), "{summary}");
    for id in &ids {
        let line = |l: &str| l.contains("ERROR") && l.contains(id.as_str()) && l != summary;
        let found = log.lines().any(line);
        assert!(found, "no error line for event {id}:\n{log}");
    }
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(char::is_ascii_alphabetic);
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
    let seed = std::env::var("EVENTS_SEED").ok();
    seed.and_then(|s| s.parse().ok())
        .unwrap_or_else(support::clock_seed)
}

/// One sink, one mode: sweeps with faults in front of the sink until the table is clean (or
/// the limit), the invariants after every sweep; then a sweep without faults finishes. Its row
/// of the report.
async fn fault_run(kind: Kind, mode: &'static str, seed: u64) -> String {
    const ITEMS: usize = 120;
    let delete_mode = match mode {
        "archive" => "conditional",
        _ => "batch",
    };
    let (client, table) = simple_table(&format!("events_faults_{kind:?}_{mode}")).await;
    let expired = fill(&client, &table, ITEMS, 10).await;
    let sink = TestSink::new(kind, false).await;
    let ops = fault_proxy::SINK_BATCH_OPS.to_vec();
    // Seeded faults, and the first sink call always fails: a sink called only a few times per
    // sweep could otherwise draw no fault at all.
    let then = Box::new(Plan::Seeded {
        seed,
        rate: 0.4,
        ops: ops.clone(),
        faults: sink_faults(),
    });
    let first = Fault::Status(500);
    let plan = Plan::FirstThen {
        first,
        ops,
        then,
        used: Default::default(),
    };
    let proxy = FaultProxy::start(&moto::endpoint(), DELAY, plan).await;
    let settings = [
        ("EXPIRY_EVENTS_MODE", mode),
        ("DELETE_MODE", delete_mode),
        ("MAX_RETRIES", "3"),
    ];
    let endpoint = &proxy.endpoint;
    let sweeper =
        sweeper_with_events(&table, &settings, &sink, endpoint, None, ATTEMPT_TIMEOUT).await;
    let expect = Expect::new(&table, &expired, mode, delete_mode);
    let context = format!("{kind:?} {mode} (EVENTS_SEED={seed})");
    let mut reported_failed = HashSet::new();
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for (sweep, faults_on) in [true, true, true, true, false].into_iter().enumerate() {
        if !faults_on {
            proxy.set_plan(Plan::Pass);
        }
        let report = sweep_json(&sweeper).await;
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
        let context = format!("{context}, sweep {}", sweep + 1);
        expect
            .check_sink(&client, &sink, &reported_failed, &context)
            .await;
        let succeeded = report["events_failed"] == 0 && report["items_failed"] == 0;
        let why = "the sweep without faults must succeed";
        assert!(faults_on || succeeded, "{context}: {why}: {report}");
    }
    let left = id_set(&client, &table).await;
    let clean = left.iter().all(|i| !i.starts_with("exp-"));
    assert!(clean, "{context}: every expired item is gone in the end");
    assert_eq!(left.len(), 15, "{context}: live items stay");
    let events = sink.events().await;
    let (count, distinct) = expect.check(&events, &left, &reported_failed, &context);
    let every = mode != "archive" || distinct == ITEMS;
    assert!(
        every,
        "{context}: every expired item has an event ({distinct})"
    );
    let faulted = proxy.stats.faults_total() > 0;
    assert!(faulted, "{context}: no fault was injected");
    let faults = proxy.stats.faults.lock().unwrap().clone();
    let mut faults: Vec<String> = faults.iter().map(|(k, v)| format!("{k} {v}")).collect();
    faults.sort();
    format!(
        "| {kind:?} | {mode} | {} | {} | {count} | {distinct} | {} | {} | {} |",
        faults.join(", "),
        proxy.stats.requests(),
        count - distinct,
        totals["events_retried"],
        reported_failed.len(),
    )
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
    for line in runs {
        table.push_str(&line);
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
    let kill_seed = std::env::var("EVENTS_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let seed = kill_seed.unwrap_or_else(seed);
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
    let sink = TestSink::new(Kind::Firehose, false).await;
    let bucket = sink.bucket.clone().unwrap();
    let settings = [
        ("EXPIRY_EVENTS", sink.setting.as_str()),
        ARCHIVE[0],
        ARCHIVE[1],
    ];
    let mut cmd = sweep_cli(&table, &settings);
    let quiet = cmd.stdout(std::process::Stdio::null());
    let mut sweep = Daemon::spawn(quiet, &format!("events-kill-{table}"));
    let started = Instant::now();
    let mut finished_first = false;
    loop {
        let bucket = bucket.clone();
        let archived = tokio::task::spawn_blocking(move || moto::bucket_object_count(&bucket));
        if archived.await.unwrap() >= kill_after {
            tokio::time::sleep(extra).await;
            break;
        }
        if sweep.child.try_wait().unwrap().is_some() {
            finished_first = true;
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no progress");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    finished_first |= sweep.child.try_wait().unwrap().is_some();
    let status = sweep.signal(libc::SIGKILL);
    let killed_at = started.elapsed();
    let expect = archived(&table, &expired);
    let context = format!("after SIGKILL (EVENTS_KILL_SEED={seed})");
    let (events, _) = expect
        .check_sink(&client, &sink, &HashSet::new(), &context)
        .await;
    let left = id_set(&client, &table).await;
    let deleted = expired.keys().filter(|i| !left.contains(*i)).count();
    eprintln!(
        "killed after {:.2} s ({status}): {} events archived, {deleted} of {ITEMS} items deleted",
        killed_at.as_secs_f64(),
        events.len()
    );
    let killed = !finished_first && deleted < ITEMS;
    assert!(
        killed,
        "EVENTS_KILL_SEED={seed}: the sweep ended before the kill"
    );

    // The next sweep finishes: everything expired deleted, each with an event; items whose event
    // went out before the kill but were not deleted get it again, with the same id.
    let (code, out, err) = run_sweep_cli(&table, &settings);
    assert_eq!(code, 0, "{out}\n{err}");
    let left = id_set(&client, &table).await.len();
    assert_eq!(left, 25, "only live and ttl-less items are left");
    let context = format!("{context}, then a full sweep");
    let (events, distinct) = expect
        .check_sink(&client, &sink, &HashSet::new(), &context)
        .await;
    assert_eq!(distinct, ITEMS);
    let count = events.len();
    eprintln!(
        "after the second sweep: {count} events for {distinct} items ({} duplicates, same ids)",
        count - distinct
    );
}
