//! The soak (`make soak`, not part of `make test`): the real binaries — `ttl-sweeper run` and the
//! Lambda under the local Runtime API — sweeping tables in DynamoDB Local while faults are
//! injected between them and DynamoDB and between them and their SQS sink (moto), their
//! processes are killed with SIGKILL at random moments, and application writers race the sweep
//! (rewriting keys, extending ttls). Two scenarios sweep through an expiry index table of their own
//! (`EXPIRY_INDEX_TABLE`) that `run --follow-stream` feeds from the table's stream: their tables
//! have no GSI and their writers set only the ttl; in the archive one the writers also delete
//! keys, before their ttl or just read. Afterwards, and after one final clean sweep, the
//! invariants are checked from DynamoDB Local's state, what reached the sink, what the sweepers
//! sent, and the writers' own logs:
//!
//! - (a) no live item deleted: no item deleted before its ttl; no key a writer rewrote or extended
//!   destroyed — in batch mode, none by a `BatchWriteItem` that reached DynamoDB more than the
//!   documented bound after the key's last read ([`batch_bound`]);
//! - (b) nothing expired left after the final clean sweep;
//! - (c) every deleted item has an accepted event, accepted before the delete (archive), or an
//!   event or a report of it (notify; a SIGKILL may lose up to the documented number of events);
//!   and every accepted `Item Expired` names an item the sweeper deleted, or is cancelled, or the
//!   application deleted the item while the event's chunk was in flight ([`stands`]);
//! - (c') not a violation, counted and shown apart: in archive mode, an accepted `Item Expired`
//!   whose sweeper died or whose sweep ended (stopped, the key failed or left) before it was
//!   settled (deleted, or cancelled), its item changed or deleted by the application before a
//!   later sweep settled it: the documented exception (docs/events.md, "Archive"), told apart as
//!   [`unsettled`] says;
//! - (d) nothing but the writers and the sweepers' deletes wrote the application's table: no
//!   request the sweepers sent (counted at the fault proxy by operation and table) writes it
//!   otherwise.
//!
//! `SOAK_SEED` (printed) fixes the schedule of faults, kills, items and writer choices;
//! `SOAK_SCALE` (default 1) scales items, duration and kills; `SOAK_SCENARIOS` (comma-separated
//! names) runs only those. It prints a table (also written to `target/tmp/soak-report.md`) and
//! fails on any violation (all of them in `target/soak/<seed>/<scenario>/violations.txt`, the
//! (c') events in `unsettled.txt`).
//! `SOAK_RUST_LOG` replaces the sweepers' `RUST_LOG` (`info`), to follow a failing seed more
//! closely (their logs are under `target/soak/<seed>/`). See docs/reliability.md.

mod stands;
mod unsettled;

use crate::support::{self, fault_proxy, moto, recorder, runtime_api};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::{ReturnValue, StreamViewType};
use aws_sdk_dynamodb::Client;
use fault_proxy::{all_faults, delete_ids, read_ids, FaultProxy, Plan};
use recorder::Recorder;
use runtime_api::{Options, Outcome, RuntimeApi, Schedule};
use serde_json::Value;
use support::*;
use ttl_sweeper::engine::BATCH_MAX_READ_AGE;
use ttl_sweeper::events::event_id;
use ttl_sweeper::expiry::window::window_attribute;
use ttl_sweeper::store::Key;

/// Window width of every soak table. Windows are sharded (each scenario's `shards`), so each
/// sweep makes several reads per window (and meets as many more faults).
const WINDOW: u32 = 10;
/// `run --every` and the Lambda's `TICK_SECONDS`.
const TICK: &str = "100ms";
/// `run`'s `SCHEDULE_SECONDS`: a full sweep this often.
const RUN_PERIOD: u64 = 20;
/// How long the fault proxy holds a delayed request: past the batch attempt timeout, then the
/// connection is reset and the request applied anyway.
const DELAY: Duration = Duration::from_millis(2500);
/// Added to every `BatchWriteItem` of the batch-mode tables: a slow DynamoDB, under which a
/// chunk waits for its turn to be sent.
const SLOW_BATCH: Duration = Duration::from_millis(250);
/// Fault rate of the DynamoDB requests and of the sink's batch calls.
const DB_FAULT_RATE: f64 = 0.5;
const SINK_FAULT_RATE: f64 = 0.35;
/// Share of the sink's batch calls answered slowly, and how slowly (ms).
const SLOW_SINK_RATE: f64 = 0.2;
const SLOW_SINK_MS: std::ops::Range<u64> = 100..1000;
/// How often the writers touch a key after their first burst.
const WRITE_EVERY: Duration = Duration::from_millis(300);
/// `MAX_RETRIES` of the sweepers under test.
const MAX_RETRIES: u32 = 4;
/// How long after a delete a SIGKILL may still lose its notify-mode event: the delete's chunk
/// publishes what it owes before its next wait, and that publishing ends within the sink's
/// retries: `MAX_RETRIES + 1` attempts, each of up to three sequential `SendMessageBatch` calls
/// (25 events, 10 per call), each held at most `DELAY` (a faulted call) plus the slow sink's
/// second, and the backoffs between attempts (at most 0.8 s each, full jitter from 50 ms).
const CRASH_PUBLISH_WINDOW: f64 = (MAX_RETRIES as f64 + 1.0) * 3.0 * (2.5 + 1.0) + 4.0 * 0.8;
/// How many (c') events of a scenario the report shows in full.
const UNSETTLED_SHOWN: usize = 3;
/// Final clean sweeps at most, one after the other until one succeeds.
const FINAL_SWEEPS: usize = 3;
/// How long before a delete reaches DynamoDB the process that sent it may already have been
/// killed: the request was in flight (held by the fault proxy, slowed), then applied.
fn crash_inflight_window() -> f64 {
    (DELAY + SLOW_BATCH).as_secs_f64() + 1.0
}
/// The Lambda's schedule period (`SCHEDULE_SECONDS`) and tick.
const LAMBDA_PERIOD: u64 = 10;
/// The writes (as the fault proxy's `by_table` names them) no sweeper may send to the
/// application's table: it only ever deletes from it.
const APP_WRITES: [&str; 9] = [
    "PutItem",
    "UpdateItem",
    "BatchWriteItem:PutRequest",
    "TransactWriteItems:Put",
    "TransactWriteItems:Update",
    "TransactWriteItems:Delete",
    "UpdateTable",
    "UpdateTimeToLive",
    "DeleteTable",
];
/// PartiQL, which names its table inside the statement: no sweeper sends it to any table.
const PARTIQL: [&str; 3] = [
    "ExecuteStatement",
    "BatchExecuteStatement",
    "ExecuteTransaction",
];

/// How long after a key's read a batch delete of it may reach DynamoDB, as the documentation
/// bounds batch mode: a key is sent by `BatchWriteItem` at most [`BATCH_MAX_READ_AGE`] after
/// its read; a sent request reaches DynamoDB after [`SLOW_BATCH`], or — when the fault proxy
/// holds it past the client's attempt timeout — after [`DELAY`]. One second of slack: the
/// recorder times a read before the answer reaches the sweeper and a delete after DynamoDB
/// answered it, both later on a loaded machine.
fn batch_bound() -> f64 {
    (BATCH_MAX_READ_AGE + DELAY + SLOW_BATCH).as_secs_f64() + 1.0
}

// ------------------------------------------------------------------------------------- scenarios

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    /// `ttl-sweeper run --every 100ms`, restarted after each kill.
    Run,
    /// The Lambda binary under the local Runtime API, tick mode, two environments.
    Lambda,
}

#[derive(Debug, Clone, Copy)]
struct Spec {
    name: &'static str,
    runner: Runner,
    /// Swept through an expiry index table of its own (`EXPIRY_INDEX_TABLE`), fed by `run
    /// --follow-stream` from the table's stream, instead of a GSI: the table has a stream and no
    /// GSI, and its writers set only the ttl.
    index: bool,
    delete: &'static str,
    events: &'static str,
    concurrency: u32,
    /// `WINDOW_SHARDS`: fewer in batch mode, where bigger pages make chunks wait longer.
    shards: u32,
    /// The writers also delete keys for good ([`writers`]): the scenarios of [`DELETING`].
    deletes: bool,
}

/// The scenarios, named `<runner>[-index]-<delete mode>-<events mode>`: see [`spec`].
const SCENARIOS: [&str; 6] = [
    "run-batch-notify",
    "run-conditional-archive",
    "lambda-batch-notify",
    "lambda-conditional-archive",
    "run-index-batch-notify",
    "run-index-conditional-archive",
];

/// The scenarios whose writers also delete keys for good, before their ttl or just read: in
/// archive mode through an expiry index table, where a deleted item's entry stays behind and is
/// listed at the old ttl.
const DELETING: [&str; 1] = ["run-index-conditional-archive"];

/// The scenario `name` says: batch mode with one worker and 4 shards, conditional mode with 4
/// workers and 8 shards.
fn spec(name: &'static str) -> Spec {
    let mut parts = name.split('-').peekable();
    let runner = match parts.next() {
        Some("run") => Runner::Run,
        _ => Runner::Lambda,
    };
    let index = parts.next_if_eq(&"index").is_some();
    assert!(
        !index || runner == Runner::Run,
        "{name}: the index is fed by `run`"
    );
    let (delete, events) = (parts.next().unwrap(), parts.next().unwrap());
    let (concurrency, shards) = if delete == "batch" { (1, 4) } else { (4, 8) };
    Spec {
        name,
        runner,
        index,
        delete,
        events,
        concurrency,
        shards,
        deletes: DELETING.contains(&name),
    }
}

/// The soak's size, from `SOAK_SCALE`.
#[derive(Debug, Clone, Copy)]
struct Size {
    scale: f64,
    /// Expired before the sweepers start, in one window: a backlog read in big pages.
    backlog: usize,
    /// Expiring while the sweepers run.
    rolling: usize,
    /// Never expiring during the soak.
    live: usize,
    /// The chaos phase.
    chaos: Duration,
    /// SIGKILLs per scenario.
    kills: usize,
    /// Backlog keys rewritten in one burst three seconds in.
    burst: usize,
}

impl Size {
    fn new(scale: f64) -> Size {
        let n = |x: f64| ((x * scale).round() as usize).max(1);
        Size {
            scale,
            backlog: n(2000.0),
            rolling: n(1200.0),
            live: n(200.0),
            chaos: Duration::from_secs_f64((420.0 * scale).clamp(30.0, 4200.0)),
            kills: n(6.0).max(2),
            burst: n(200.0),
        }
    }
}

/// One original item of a scenario's table.
#[derive(Debug, Clone)]
struct Original {
    id: String,
    ttl: i64,
}

impl Original {
    fn new(id: String, ttl: i64) -> Original {
        Original { id, ttl }
    }
}

// --------------------------------------------------------------------------- recording proxy

/// What the recording proxy saw reach the server and come back, by item id or event id.
#[derive(Debug, Default)]
struct Seen {
    /// Item id -> when a `Query` answer listed it, or a `BatchGetItem` answer held it (wall
    /// clock, s): a read of the item.
    listed: HashMap<String, Vec<f64>>,
    /// Item id -> when a `Query` answer of the expiry index table listed an entry of it: not a
    /// read of the item (the entry's ttl may be long gone from it), but the sweeper's next step
    /// on the key (the writers pick such keys as they pick keys just read).
    indexed: HashMap<String, Vec<f64>>,
    /// Item id -> when a delete of it (`BatchWriteItem` not leaving it unprocessed, or a
    /// successful `DeleteItem`) was answered by the server.
    deleted: HashMap<String, Vec<f64>>,
    /// Item id -> each strongly consistent read of it from the application's table (`GetItem`,
    /// `BatchGetItem`): when its answer came back and the ttl it found (`None`: not there).
    reads: HashMap<String, Vec<(f64, Option<f64>)>>,
    /// Item id -> when each request deleting it (`DeleteItem`, a `DeleteRequest` of a
    /// `BatchWriteItem`) reached the recording proxy on its way to the server, applied or not
    /// (a conditional delete that finds the item gone or changed is answered with an error).
    delete_requests: HashMap<String, Vec<f64>>,
    /// Event id -> its `Item Expired` as the sink first accepted it.
    expired: HashMap<String, Accepted>,
    /// Event id -> when the sink first accepted its `Item Expiry Cancelled`.
    cancelled: HashMap<String, f64>,
    /// Entries the sink accepted, duplicates included.
    accepted_entries: u64,
    /// Item id -> each pack holding an entry of it that the server stored: when the write was
    /// answered, the pack's window partition and sort key.
    pack_puts: HashMap<String, Vec<(f64, String, String)>>,
    /// Window partition -> each `Query` of the expiry index table's packs answered: when, and the
    /// sort keys it covered (from the start key or the lower bound, to the last evaluated key or
    /// the upper bound).
    pack_queries: HashMap<String, Vec<(f64, String, String)>>,
}

/// An `Item Expired` the sink accepted: the item's id and the ttl it names, when it was first
/// accepted, and every time it was (published again by a later chunk, or a duplicate).
#[derive(Debug, Clone)]
struct Accepted {
    item: String,
    ttl: f64,
    at: f64,
    times: Vec<f64>,
}

/// The state of a recording proxy (a [`Recorder`]) between the fault proxy and a server
/// (DynamoDB Local or moto): what the server did (reads, deletes, accepted events) with the
/// time; and how it makes requests slow: every `BatchWriteItem` by `slow_batch`, a seeded share
/// of the sink's calls by a seeded time.
struct RecState {
    seed: u64,
    /// The application's table, whose consistent reads are recorded (empty for a sink).
    table: String,
    slow_batch: Duration,
    slow_sink: bool,
    /// Slowing on (the chaos phase) or off (the final sweep).
    slowing: AtomicBool,
    slowed: AtomicU64,
    seen: Mutex<Seen>,
}

/// A recording proxy in front of `upstream`, and its state.
async fn recorder(
    upstream: &str,
    table: &str,
    seed: u64,
    slow_batch: Duration,
    slow_sink: bool,
) -> (Recorder, Arc<RecState>) {
    let state = Arc::new(RecState {
        seed,
        table: table.to_owned(),
        slow_batch,
        slow_sink,
        slowing: AtomicBool::new(true),
        slowed: AtomicU64::new(0),
        seen: Mutex::new(Seen::default()),
    });
    let (held, seen) = (state.clone(), state.clone());
    let hold = Box::new(move |op: &str, request: &Value| held.hold(op, request));
    let observe = Box::new(move |op: &str, request: &Value, answer: &Value, at: f64| {
        seen.observe(op, request, answer, at)
    });
    (Recorder::start(upstream, hold, observe).await, state)
}

impl RecState {
    /// How long to hold a request while slowing; notes the deletes on their way.
    fn hold(&self, op: &str, request: &Value) -> Duration {
        let deleting = match op {
            "BatchWriteItem" => delete_ids(&request["RequestItems"]),
            "DeleteItem" => request["Key"]["id"]["S"]
                .as_str()
                .map(str::to_owned)
                .into_iter()
                .collect(),
            _ => Vec::new(),
        };
        if !deleting.is_empty() {
            let at = wall_clock();
            let mut seen = self.seen.lock().unwrap();
            for id in deleting {
                seen.delete_requests.entry(id).or_default().push(at);
            }
        }
        if !self.slowing.load(Ordering::SeqCst) {
            return Duration::ZERO;
        }
        let pause = if op == "BatchWriteItem" {
            self.slow_batch
        } else if self.slow_sink && fault_proxy::is_sink_batch(op) {
            let identity = fault_proxy::request_identity(op, request);
            let mut rng = fastrand::Rng::with_seed(
                self.seed ^ fault_proxy::fnv(identity.as_bytes()) ^ 0x5eed,
            );
            if rng.f64() < SLOW_SINK_RATE {
                Duration::from_millis(rng.u64(SLOW_SINK_MS))
            } else {
                Duration::ZERO
            }
        } else {
            Duration::ZERO
        };
        if !pause.is_zero() {
            self.slowed.fetch_add(1, Ordering::SeqCst);
        }
        pause
    }

    /// Records what a successful answer says the server did.
    fn observe(&self, op: &str, request: &Value, answer: &Value, at: f64) {
        let mut seen = self.seen.lock().unwrap();
        match op {
            // (A `GetItem` names no window nor lists items: only its consistent read counts.)
            "Query" | "BatchGetItem" | "GetItem" => {
                let values = &request["ExpressionAttributeValues"];
                if let (Some(w), Some(lo), Some(hi)) = (
                    values[":w"]["S"].as_str(),
                    values[":lo"]["S"].as_str(),
                    values[":hi"]["S"].as_str(),
                ) {
                    let from = request["ExclusiveStartKey"]["entry"]["S"]
                        .as_str()
                        .unwrap_or(lo);
                    let to = answer["LastEvaluatedKey"]["entry"]["S"]
                        .as_str()
                        .unwrap_or(hi);
                    let range = (at, from.to_owned(), to.to_owned());
                    seen.pack_queries
                        .entry(w.to_owned())
                        .or_default()
                        .push(range);
                }
                for id in read_ids(answer) {
                    seen.listed.entry(id).or_default().push(at);
                }
                for id in entry_ids(answer) {
                    seen.indexed.entry(id).or_default().push(at);
                }
                for (id, ttl) in consistent_reads(op, &self.table, request, answer) {
                    seen.reads.entry(id).or_default().push((at, ttl));
                }
            }
            "BatchWriteItem" => {
                let sort = |r: &Value| {
                    r["PutRequest"]["Item"]["entry"]["S"]
                        .as_str()
                        .map(str::to_owned)
                };
                let unprocessed: HashSet<String> = answer["UnprocessedItems"]
                    .as_object()
                    .into_iter()
                    .flat_map(|o| o.values())
                    .flat_map(|v| v.as_array().into_iter().flatten())
                    .filter_map(sort)
                    .collect();
                let puts = request["RequestItems"]
                    .as_object()
                    .into_iter()
                    .flat_map(|o| o.values());
                for put in puts.flat_map(|v| v.as_array().into_iter().flatten()) {
                    let item = &put["PutRequest"]["Item"];
                    let (Some(w), Some(e)) = (item["window"]["S"].as_str(), sort(put)) else {
                        continue;
                    };
                    if unprocessed.contains(&e) {
                        continue;
                    }
                    for k in item["keys"]["L"].as_array().into_iter().flatten() {
                        if let Some(id) = k["M"]["id"]["S"].as_str() {
                            let pack = (at, w.to_owned(), e.clone());
                            seen.pack_puts.entry(id.to_owned()).or_default().push(pack);
                        }
                    }
                }
                let left = delete_ids(&answer["UnprocessedItems"]);
                for id in delete_ids(&request["RequestItems"]) {
                    if !left.contains(&id) {
                        seen.deleted.entry(id).or_default().push(at);
                    }
                }
            }
            "DeleteItem" => {
                if let Some(id) = request["Key"]["id"]["S"].as_str() {
                    seen.deleted.entry(id.to_owned()).or_default().push(at);
                }
            }
            "SendMessageBatch" => {
                let ok: HashSet<&str> = answer["Successful"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["Id"].as_str())
                    .collect();
                for entry in request["Entries"].as_array().into_iter().flatten() {
                    if !entry["Id"].as_str().is_some_and(|id| ok.contains(id)) {
                        continue;
                    }
                    let event: Value = entry["MessageBody"]
                        .as_str()
                        .and_then(|b| serde_json::from_str(b).ok())
                        .unwrap_or(Value::Null);
                    let detail = &event["detail"];
                    let id = detail["id"].as_str().unwrap_or("?").to_owned();
                    seen.accepted_entries += 1;
                    match event["detail-type"].as_str() {
                        Some("Item Expired") => {
                            let item = detail["key"]["id"]["S"].as_str().unwrap_or("?");
                            let ttl = detail["ttl"].as_f64().unwrap_or(f64::NAN);
                            let item = item.to_owned();
                            let times = Vec::new();
                            let accepted = seen.expired.entry(id);
                            let accepted = accepted.or_insert(Accepted {
                                item,
                                ttl,
                                at,
                                times,
                            });
                            accepted.times.push(at);
                        }
                        Some("Item Expiry Cancelled") => {
                            seen.cancelled.entry(id).or_insert(at);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}

/// The strongly consistent reads of `table` a successful `GetItem` or `BatchGetItem` made: each
/// key read (not left unprocessed) by `id`, with the ttl found (`None`: no such item).
fn consistent_reads(
    op: &str,
    table: &str,
    request: &Value,
    answer: &Value,
) -> Vec<(String, Option<f64>)> {
    let ttl = |item: &Value| item["ttl"]["N"].as_str().and_then(|n| n.parse().ok());
    let id = |key: &Value| key["id"]["S"].as_str().map(str::to_owned);
    if op == "GetItem" {
        if request["TableName"].as_str() != Some(table) || request["ConsistentRead"] != true {
            return Vec::new();
        }
        let found = answer.get("Item").and_then(ttl);
        return id(&request["Key"])
            .map(|id| (id, found))
            .into_iter()
            .collect();
    }
    let asked = &request["RequestItems"][table];
    if asked["ConsistentRead"] != true {
        return Vec::new();
    }
    let unprocessed: HashSet<String> =
        fault_proxy::item_ids(&answer["UnprocessedKeys"][table]["Keys"]).collect();
    let found: HashMap<String, Option<f64>> = answer["Responses"][table]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| Some((id(item)?, ttl(item))))
        .collect();
    fault_proxy::item_ids(&asked["Keys"])
        .filter(|id| !unprocessed.contains(id))
        .map(|id| {
            let ttl = found.get(&id).copied().flatten();
            (id, ttl)
        })
        .collect()
}

/// The `id`s of the items whose expiry index entries a `Query` answer lists: an entry of one
/// item's `key` (a Map), a pack's `keys` (a List of Maps).
fn entry_ids(answer: &Value) -> impl Iterator<Item = String> + '_ {
    let entries = answer["Items"].as_array().into_iter().flatten();
    entries.flat_map(|e| {
        let packed = e["keys"]["L"].as_array().into_iter().flatten();
        std::iter::once(&e["key"])
            .chain(packed)
            .filter_map(|k| k["M"]["id"]["S"].as_str().map(str::to_owned))
    })
}

// ------------------------------------------------------------------------------------ writers

/// The window attribute of item `id` with `ttl`, as a writer computes it (sharded).
fn window_attr(id: &str, ttl: i64, shards: u32) -> String {
    window_attribute(ttl as f64, WINDOW, shards, id.as_bytes()).unwrap()
}

/// The item `id` with `ttl`, carrying `marker`: in its window of `shards` shards, or (`None`, a
/// table swept through an expiry index table) with only the ttl.
fn marked(id: &str, ttl: i64, shards: Option<u32>, marker: &str) -> Key {
    let mut item = match shards {
        Some(shards) => windowed(id, ttl, &window_attr(id, ttl, shards)),
        None => unwindowed(id, ttl),
    };
    item.insert("marker".into(), AV::S(marker.into()));
    item
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Delete the key and put it again with a ttl an hour ahead and a fresh marker.
    Rewrite,
    /// Move the ttl an hour ahead (with a fresh marker), if the item is still there.
    Extend,
    /// Delete the key, not to write it again (a scenario's writers with `deletes`).
    Delete,
}

/// One writer operation, as the writer logged it.
#[derive(Debug, Clone)]
struct Write {
    id: String,
    action: Action,
    /// Whether the original item was still there (the rewrite's delete returned it; the
    /// extension's condition held). If not, the sweeper had deleted it.
    found_original: bool,
    /// Whether the write left a live item that must survive (a rewrite always does).
    live: bool,
    /// The marker the live item carries.
    marker: String,
    /// When the write that made the item live started (wall clock, s).
    started: f64,
    /// When the writer's delete that removed the original item was sent and answered (wall
    /// clock, s): a rewrite's or a delete's that found it.
    app_delete: Option<(f64, f64)>,
}

/// Deletes key `id` as the application does; whether that removed the original item (marker
/// `orig`), and when the delete was sent and answered.
async fn app_delete(client: &Client, table: &str, id: &str) -> (bool, f64, f64) {
    let sent = wall_clock();
    let old = client
        .delete_item()
        .table_name(table)
        .set_key(Some(id_key(id)))
        .return_values(ReturnValue::AllOld)
        .send()
        .await
        .expect("writer delete");
    let found = old.attributes.is_some_and(|a| {
        a.get("marker")
            .and_then(|m| m.as_s().ok())
            .map(String::as_str)
            == Some("orig")
    });
    (found, sent, wall_clock())
}

/// Writes key `id` as `action` says, the live item carrying `marker`.
async fn write(
    action: Action,
    client: &Client,
    table: &str,
    shards: Option<u32>,
    id: &str,
    marker: &str,
) -> Write {
    let mut deleted = None;
    let (started, found_original) = match action {
        Action::Rewrite | Action::Delete => {
            let (found, sent, answered) = app_delete(client, table, id).await;
            deleted = found.then_some((sent, answered));
            let started = wall_clock();
            if action == Action::Rewrite {
                let ttl = started as i64 + 3600;
                put_one(client, table, marked(id, ttl, shards, marker)).await;
            }
            (started, found)
        }
        Action::Extend => {
            let started = wall_clock();
            let ttl = started as i64 + 3600;
            let update = client
                .update_item()
                .table_name(table)
                .set_key(Some(id_key(id)))
                .condition_expression("attribute_exists(id)")
                .expression_attribute_names("#t", "ttl")
                .expression_attribute_names("#m", "marker")
                .expression_attribute_values(":t", AV::N(ttl.to_string()))
                .expression_attribute_values(":m", AV::S(marker.into()));
            // The window moves with the ttl; a writer of a table swept through an expiry index
            // table sets only the ttl.
            let update = match shards {
                Some(shards) => update
                    .update_expression("SET #t = :t, #w = :w, #m = :m")
                    .expression_attribute_names("#w", "expirationWindow")
                    .expression_attribute_values(":w", AV::S(window_attr(id, ttl, shards))),
                None => update.update_expression("SET #t = :t, #m = :m"),
            };
            let found = match update.send().await {
                Ok(_) => true,
                Err(e) => {
                    let e = e.into_service_error();
                    assert!(
                        e.is_conditional_check_failed_exception(),
                        "writer update: {e:?}"
                    );
                    false
                }
            };
            (started, found)
        }
    };
    Write {
        id: id.into(),
        action,
        found_original,
        live: action == Action::Rewrite || (action == Action::Extend && found_original),
        marker: marker.into(),
        started,
        app_delete: deleted,
    }
}

/// The application: a burst of rewrites of backlog keys three seconds in (while the sweepers
/// work through the backlog), then one rewrite or extension every 300 ms of a key that has
/// expired or is about to, each key touched once, until `until`. Two picks in three are
/// adversarial when they can be: a key a `Query` answer listed (an item, or an entry of the
/// expiry index table) in the last 1.5 s and not deleted since (read, and its delete still to
/// come), as seen by `reads`. `shards`: as [`marked`]. With `deletes`, a third of the writes
/// delete the key for good instead: a key just read, or else one due within three seconds
/// (deleted before its ttl).
#[allow(clippy::too_many_arguments)]
async fn writers(
    client: Client,
    table: String,
    shards: Option<u32>,
    deletes: bool,
    seed: u64,
    reads: Arc<RecState>,
    originals: Vec<Original>,
    backlog: usize,
    burst: usize,
    t0: f64,
    until: f64,
) -> Vec<Write> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x3717e5);
    let mut log = Vec::new();
    let mut touched = HashSet::new();
    let mut n = 0u64;
    tokio::time::sleep(Duration::from_secs_f64((t0 + 3.0 - wall_clock()).max(0.0))).await;
    let mut burst_ids: Vec<String> = originals[..backlog].iter().map(|o| o.id.clone()).collect();
    rng.shuffle(&mut burst_ids);
    burst_ids.truncate(burst);
    for chunk in burst_ids.chunks(8) {
        let mut tasks = Vec::new();
        for id in chunk {
            n += 1;
            touched.insert(id.clone());
            let (client, table, id) = (client.clone(), table.clone(), id.clone());
            let marker = format!("w{n}");
            tasks.push(tokio::spawn(async move {
                write(Action::Rewrite, &client, &table, shards, &id, &marker).await
            }));
        }
        for t in tasks {
            log.push(t.await.expect("writer task"));
        }
    }
    while wall_clock() < until {
        tokio::time::sleep(WRITE_EVERY).await;
        let now = wall_clock();
        let adversarial = rng.u8(..3) < 2;
        let planned = deletes.then(|| match rng.u8(..3) {
            0 => Action::Rewrite,
            1 => Action::Extend,
            _ => Action::Delete,
        });
        let mut just_read: Vec<String> = if adversarial {
            let seen = reads.seen.lock().unwrap();
            seen.listed
                .iter()
                .chain(&seen.indexed)
                .filter_map(|(id, times)| {
                    let last = times.last().copied()?;
                    let deleted = seen.deleted.get(id).and_then(|d| d.last().copied());
                    (now - last < 1.5 && deleted.is_none_or(|d| d < last) && !touched.contains(id))
                        .then(|| id.clone())
                })
                .collect()
        } else {
            Vec::new()
        };
        just_read.sort();
        just_read.dedup();
        let pick = if just_read.is_empty() {
            let due = |ttl: f64| match planned {
                Some(Action::Delete) => ttl > now && ttl <= now + 3.0,
                _ => ttl < now + 2.0,
            };
            let candidates: Vec<&Original> = originals
                .iter()
                .filter(|o| due(o.ttl as f64) && !touched.contains(&o.id))
                .collect();
            if candidates.is_empty() {
                continue;
            }
            candidates[rng.usize(..candidates.len())].id.clone()
        } else {
            just_read[rng.usize(..just_read.len())].clone()
        };
        touched.insert(pick.clone());
        n += 1;
        let marker = format!("w{n}");
        let action = planned.unwrap_or_else(|| {
            if rng.bool() {
                Action::Rewrite
            } else {
                Action::Extend
            }
        });
        log.push(write(action, &client, &table, shards, &pick, &marker).await);
    }
    log
}

// ------------------------------------------------------------------------------ sweeper runs

/// A process's reports: failed event ids and failed keys listed (by item id or event id), and
/// the `events_failed` beyond what a line listed.
#[derive(Debug, Default)]
struct Reports {
    failed_events: HashSet<String>,
    failed_items: HashSet<String>,
    unlisted_failed_events: u64,
    /// Item id -> when a sweeper logged it `key not deleted`, or in archive mode `accepted expiry
    /// not settled by its chunk` (wall clock, s): its chunk gave it up, or left it.
    given_up: HashMap<String, Vec<f64>>,
    /// Item id -> when a sweeper logged an event of it `expiry event not published`.
    unpublished: HashMap<String, Vec<f64>>,
    /// When a sweeper logged leaving keys for the next sweep: a read before publishing failed,
    /// a re-read after an accepted expiry failed, or a sweep's summary with keys left or
    /// stopped early.
    leaving: Vec<f64>,
    /// Item id -> when a sweeper logged it re-read with a new ttl after its expiry was accepted
    /// (`cancelling the expiry`): that chunk owed its cancellation.
    cancelling: HashMap<String, Vec<f64>>,
    /// When a sweeper logged that it could not re-read the items whose expiry was accepted but
    /// not deleted (their chunk's settling read failed).
    reread_failed: Vec<f64>,
}

impl Reports {
    /// Takes what a JSON value (a log line, a report) says, wherever the fields are nested.
    fn absorb(&mut self, v: &Value) {
        match v {
            Value::Object(map) => {
                let at = map.get("timestamp").and_then(Value::as_str).and_then(|t| {
                    let t = chrono::DateTime::parse_from_rfc3339(t).ok()?;
                    Some(t.timestamp_millis() as f64 / 1000.0)
                });
                let message = map.get("message").and_then(Value::as_str).unwrap_or("");
                let left = map.get("left").and_then(Value::as_u64).unwrap_or(0) > 0
                    || map.get("stopped_early") == Some(&Value::Bool(true))
                    || message.starts_with("could not read the keys before publishing")
                    || message.starts_with("could not re-read items whose expiry was accepted");
                if let (Some(at), true) = (at, left) {
                    self.leaving.push(at);
                }
                if let (Some(at), true) = (
                    at,
                    message.starts_with("could not re-read items whose expiry was accepted"),
                ) {
                    self.reread_failed.push(at);
                }
                let key = map.get("key").and_then(Value::as_str);
                let key: Value = key
                    .and_then(|k| serde_json::from_str(k).ok())
                    .unwrap_or_default();
                if let (Some(at), Some(id)) = (at, key["id"]["S"].as_str()) {
                    if message.ends_with("has a new ttl: cancelling the expiry") {
                        self.cancelling.entry(id.to_owned()).or_default().push(at);
                    }
                    // Archive mode: the chunk ended with the key unsettled (failed or left).
                    if message.starts_with("accepted expiry not settled by its chunk") {
                        self.given_up.entry(id.to_owned()).or_default().push(at);
                    }
                }
                let events = map.get("failed_event_ids").map(parse_list);
                if let Some(list) = &events {
                    for e in list {
                        if let Some(id) = e["id"].as_str() {
                            self.failed_events.insert(id.to_owned());
                        }
                    }
                    let failed = map
                        .get("events_failed")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    self.unlisted_failed_events += failed.saturating_sub(list.len() as u64);
                }
                // A key's own line (`key not deleted`), written as its chunk ends: a process
                // killed before its summary has still named the key.
                if let (Some(Value::String(key)), Some(_)) = (map.get("key"), map.get("reason")) {
                    let key: Value = serde_json::from_str(key).unwrap_or_default();
                    if let Some(id) = key["id"]["S"].as_str() {
                        self.failed_items.insert(id.to_owned());
                        let given_up = map.get("message").and_then(Value::as_str);
                        match (at, given_up) {
                            (Some(at), Some("key not deleted")) => {
                                self.given_up.entry(id.to_owned()).or_default().push(at);
                            }
                            (Some(at), Some("expiry event not published")) => {
                                self.unpublished.entry(id.to_owned()).or_default().push(at);
                            }
                            _ => {}
                        }
                    }
                }
                if let Some(keys) = map.get("failed_keys").map(parse_list) {
                    for k in keys {
                        if let Some(id) = k["key"]["id"]["S"].as_str() {
                            self.failed_items.insert(id.to_owned());
                        }
                    }
                }
                for (_, inner) in map {
                    if inner.is_object() {
                        self.absorb(inner);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| self.absorb(i)),
            _ => {}
        }
    }

    fn absorb_text(&mut self, text: &str) {
        for line in text.lines() {
            if let Ok(v) = serde_json::from_str::<Value>(line.trim()) {
                self.absorb(&v);
            }
        }
    }
}

/// A list field: a JSON array, or a string holding one (the summary log line's form).
fn parse_list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        Value::String(s) if !s.is_empty() => serde_json::from_str(s).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// What a scenario's sweepers did.
#[derive(Debug, Default)]
struct RunOutcome {
    /// When each SIGKILL was sent (wall clock, s).
    kills: Vec<f64>,
    /// Each `run` process's life, from its start to its SIGKILL, exit or SIGTERM, or each Lambda
    /// invocation's, from its start to its end (wall clock, s).
    lives: Vec<(f64, f64)>,
    /// Lambda invocations that ran into their deadline (killed by the Runtime API).
    timeouts: usize,
    /// Processes that exited by themselves during the chaos phase (then restarted).
    exits: usize,
    reports: Reports,
    /// How the last `run` process ended after SIGTERM (exit code), if it did.
    final_exit: Option<i32>,
}

/// A process's environment variables.
type Env = Vec<(String, String)>;

fn settings(spec: &Spec, table: &str, queue: &str, db: &str, sink: &str) -> Env {
    local_env([
        ("TABLE_NAME", table.to_owned()),
        ("AWS_ENDPOINT_URL", db.to_owned()),
        ("AWS_ENDPOINT_URL_SQS", sink.to_owned()),
        ("WINDOW_SECONDS", WINDOW.to_string()),
        ("WINDOW_SHARDS", spec.shards.to_string()),
        ("DELETE_MODE", spec.delete.to_owned()),
        ("MAX_CONCURRENCY", spec.concurrency.to_string()),
        ("MAX_RETRIES", MAX_RETRIES.to_string()),
        ("EXPIRY_EVENTS", format!("sqs:{queue}")),
        ("EXPIRY_EVENTS_MODE", spec.events.to_owned()),
        // `SOAK_RUST_LOG` overrides it, to follow one run more closely.
        (
            "RUST_LOG",
            std::env::var("SOAK_RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
        ),
    ])
}

fn spawn_run(env: &[(String, String)], dir: &Path, n: usize) -> Child {
    let out = std::fs::File::create(dir.join(format!("run-{n}.out"))).unwrap();
    let err = std::fs::File::create(dir.join(format!("run-{n}.log"))).unwrap();
    cli()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("SCHEDULE_SECONDS", RUN_PERIOD.to_string())
        .args(["--log-format", "json", "run", "--every", TICK])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("start ttl-sweeper run")
}

/// `ttl-sweeper run`, killed with SIGKILL at each of `kill_at` and started again at once (after
/// a seeded pause of up to a second), stopped with SIGTERM at `until`.
async fn soak_run(env: Env, dir: &Path, seed: u64, kill_at: &[f64], until: f64) -> RunOutcome {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x4b111);
    let mut out = RunOutcome::default();
    let mut n = 0;
    let mut started = wall_clock();
    let mut child = spawn_run(&env, dir, n);
    let mut kills = kill_at.iter().copied().peekable();
    while wall_clock() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Ok(Some(_)) = child.try_wait() {
            out.exits += 1;
            out.lives.push((started, wall_clock()));
            n += 1;
            started = wall_clock();
            child = spawn_run(&env, dir, n);
            continue;
        }
        if kills.peek().is_some_and(|t| wall_clock() >= *t) {
            kills.next();
            if matches!(child.try_wait(), Ok(None)) {
                // Child::kill sends SIGKILL to this child's PID.
                child.kill().expect("SIGKILL");
                out.kills.push(wall_clock());
            }
            out.lives.push((started, wall_clock()));
            let _ = child.wait();
            tokio::time::sleep(Duration::from_millis(rng.u64(0..1000))).await;
            n += 1;
            started = wall_clock();
            child = spawn_run(&env, dir, n);
        }
    }
    // SAFETY: signals the child this test started, by its PID (not yet reaped).
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let stopped = wall_clock();
    out.lives.push((started, stopped));
    out.final_exit = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status.code();
        }
        if wall_clock() - stopped > 60.0 {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for i in 0..=n {
        for ext in ["out", "log"] {
            let text =
                std::fs::read_to_string(dir.join(format!("run-{i}.{ext}"))).unwrap_or_default();
            out.reports.absorb_text(&text);
        }
    }
    out
}

/// The Lambda in tick mode under the local Runtime API, two environments (reserved concurrency
/// 2), invoked every [`LAMBDA_PERIOD`] s until `until`; an environment's process is killed with
/// SIGKILL at each of `kill_at` (a fresh one starts in its place). Waits for the last
/// invocation to end.
async fn soak_lambda(env: Env, dir: &Path, seed: u64, kill_at: &[f64], until: f64) -> RunOutcome {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x1a3bda);
    let mut env = env;
    env.push(("SCHEDULE_SECONDS".into(), LAMBDA_PERIOD.to_string()));
    env.push(("TICK_SECONDS".into(), TICK.into()));
    let timeout = Duration::from_secs(LAMBDA_PERIOD + 10 + 3 + 5);
    let api = RuntimeApi::start(Options {
        binary: PathBuf::from(env!("CARGO_BIN_EXE_ttl-sweeper-lambda")),
        environments: 2,
        timeout,
        env,
        log_dir: dir.to_owned(),
        function_name: "ttl-sweeper-soak".into(),
    })
    .await;
    let first = wall_clock().ceil() as i64;
    let count = (((until - first as f64) / LAMBDA_PERIOD as f64).ceil() as usize).max(1);
    api.run_schedule(&Schedule {
        first,
        period: Duration::from_secs(LAMBDA_PERIOD),
        count,
        max_delay: Duration::from_secs(1),
        seed,
    });
    let mut out = RunOutcome::default();
    for &at in kill_at {
        tokio::time::sleep(Duration::from_secs_f64((at - wall_clock()).max(0.0))).await;
        let env = rng.usize(..2);
        if api
            .kill_environment(env)
            .or_else(|| api.kill_environment(1 - env))
            .is_some()
        {
            out.kills.push(wall_clock());
        }
    }
    let last = first as f64 + (count as f64) * LAMBDA_PERIOD as f64 + timeout.as_secs_f64() + 30.0;
    api.wait_ended(last).await;
    // Invocations queue while both environments are busy, so the last may still be running:
    // it ends by itself (by its deadline at the latest), not killed mid-way by the stop, which
    // is not one of the counted kills.
    api.drain().await;
    let run = tokio::task::block_in_place(|| api.stop());
    out.timeouts = run
        .invocations
        .iter()
        .filter(|i| i.outcome == Outcome::TimedOut)
        .count();
    let lives = run
        .invocations
        .iter()
        .filter_map(|i| Some((i.start?, i.end?)));
    out.lives = lives.collect();
    for i in &run.invocations {
        if let Outcome::Succeeded(v) = &i.outcome {
            out.reports.absorb(v);
        }
    }
    out.reports.absorb_text(&api.log_text());
    out
}

/// Empties the queue twice a second, as a consumer keeping up would, until aborted. What the
/// sink accepted is recorded by the proxy in front of moto, not read from the queue; the queue is
/// kept short because moto's SQS computes the queue's attributes over every message it holds on
/// each send, so a queue left to fill slows every `SendMessageBatch` down with its depth (a final
/// sweep after the chaos phase took many minutes), and receiving is no cheaper: `PurgeQueue` is.
async fn consume(sqs: aws_sdk_sqs::Client, queue: String) {
    loop {
        let _ = sqs.purge_queue().queue_url(&queue).send().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The items of archive mode's journal in the expiry index table `index`.
async fn journal_items(client: &Client, index: &str) -> usize {
    let pending = AV::S(ttl_sweeper::store::entries::PENDING.to_owned());
    (scan_all(client, index).await.iter())
        .filter(|i| i.get("window") == Some(&pending))
        .count()
}

/// The final clean sweep: `ttl-sweeper sweep` through the same proxies with the faults off,
/// over every window since the oldest ttl of the table. Its JSON report.
fn final_sweep(env: &[(String, String)], lookback: usize) -> (i32, Value, String) {
    let (code, stdout, stderr) = run(cli()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("LOOKBACK_WINDOWS", lookback.to_string())
        .env("MAX_RETRIES", "8")
        .args(["--log-format", "json", "sweep"]));
    let report = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok());
    (code, report.unwrap_or(Value::Null), stderr)
}

// ------------------------------------------------------------------------------------ checks

/// One scenario's row of the table.
#[derive(Debug, Default, Clone)]
struct Row {
    name: &'static str,
    runner: &'static str,
    delete: &'static str,
    events: &'static str,
    faults: BTreeMap<&'static str, u64>,
    sink_faults: u64,
    slowed_batch: u64,
    slowed_sink: u64,
    kills: usize,
    timeouts: usize,
    items: usize,
    deleted: usize,
    rewrites: usize,
    extends: usize,
    /// Keys the writers deleted for good.
    app_deletes: usize,
    events_accepted: u64,
    /// Entries (`PutRequest`s) the sweepers sent to the expiry index table, faulted or not.
    entries: u64,
    /// Destroyed in batch mode within the documented bound of their read (batch mode's
    /// documented risk, not a violation).
    batch_trusted: usize,
    /// Notify-mode events lost to a SIGKILL within the documented bound.
    lost_to_kill: usize,
    /// `Item Expired` events of items the application deleted while their chunk was in flight
    /// (not deleted by the sweeper, not cancelled: excused under (c)).
    in_flight: usize,
    /// (c'): `Item Expired` events published and never settled, their item changed or deleted
    /// by the application before the next sweep read it: archive mode's documented exception
    /// (docs/events.md, "Archive"), not a violation.
    unsettled: usize,
    /// Each (c') event, for the scenario's `unsettled.txt`; the first few are printed.
    unsettled_lines: Vec<String>,
    /// Final clean sweeps run (more than one when one failed).
    final_sweeps: usize,
    /// The longest time from a key's last read to the delete that destroyed its rewritten or
    /// extended item (s).
    oldest_read: f64,
    a: usize,
    b: usize,
    c: usize,
    d: usize,
    /// The first few violations of each invariant, for the failure message.
    examples: Vec<String>,
    /// Every violation, for the scenario's `violations.txt`.
    violations: Vec<String>,
}

impl Row {
    fn total_faults(&self) -> u64 {
        self.faults.values().sum::<u64>() + self.sink_faults + self.slowed_sink
    }

    /// One (c') event: archive mode's documented exception, counted and kept, not a violation.
    fn unsettled(&mut self, text: String) {
        self.unsettled += 1;
        self.unsettled_lines.push(format!("(c') {text}"));
    }

    fn violation(&mut self, kind: char, text: String) {
        let seen = match kind {
            'a' => &mut self.a,
            'b' => &mut self.b,
            'c' => &mut self.c,
            _ => &mut self.d,
        };
        *seen += 1;
        let text = format!("({kind}) {text}");
        if *seen <= 6 {
            self.examples.push(text.clone());
        }
        self.violations.push(text);
    }
}

fn fault_kind(name: &str) -> &'static str {
    match name {
        "unprocessed" => "partial",
        "http_500" | "http_503" => "5xx",
        "delay" => "timeout",
        "reset" => "reset",
        "drop_after_apply" => "lost",
        _ => "throttle",
    }
}

#[allow(clippy::too_many_arguments)]
fn check(
    row: &mut Row,
    spec: &Spec,
    table: &str,
    originals: &[Original],
    live: &[Original],
    writes: &[Write],
    present: &HashMap<String, (Option<f64>, Option<String>)>,
    seen: &Seen,
    sent: &HashMap<String, Vec<(f64, Option<String>)>>,
    run: &RunOutcome,
    final_at: f64,
    final_reports: &Reports,
) {
    let writes: HashMap<&str, &Write> = writes.iter().map(|w| (w.id.as_str(), w)).collect();
    let bound = batch_bound();
    let deletes = |id: &str| seen.deleted.get(id).cloned().unwrap_or_default();
    // (a) live items
    for o in live {
        if !present.contains_key(&o.id) {
            row.violation('a', format!("{} (ttl {} ahead) deleted", o.id, o.ttl));
        }
    }
    // Items the sweepers deleted: (key id, ttl), for (c).
    let mut swept: Vec<&Original> = Vec::new();
    // Keys whose writer's item a sweeper delete destroyed, judged here under (a).
    let mut destroyed: HashSet<&str> = HashSet::new();
    for o in originals {
        match writes.get(o.id.as_str()) {
            None if present.contains_key(&o.id) => {}
            None => swept.push(o),
            Some(w) => {
                if !w.found_original {
                    swept.push(o);
                }
                if !w.live {
                    continue;
                }
                let survived = present
                    .get(&o.id)
                    .is_some_and(|(_, m)| m.as_deref() == Some(w.marker.as_str()));
                if survived {
                    continue;
                }
                // Destroyed: by which delete, how long after the key's last read?
                destroyed.insert(o.id.as_str());
                let after: Vec<f64> = deletes(&o.id)
                    .into_iter()
                    .filter(|t| *t >= w.started)
                    .collect();
                let Some(applied) = after.first().copied() else {
                    row.violation(
                        'a',
                        format!(
                            "{} {:?} at {:.1} is gone, no delete seen after it",
                            o.id, w.action, w.started
                        ),
                    );
                    continue;
                };
                let read = seen.listed.get(&o.id).and_then(|ts| {
                    ts.iter()
                        .copied()
                        .filter(|t| *t <= applied)
                        .reduce(f64::max)
                });
                let age = read.map(|r| applied - r);
                row.oldest_read = row.oldest_read.max(age.unwrap_or(0.0));
                let text = format!(
                    "{} {:?} at {:.1} destroyed by a delete applied at {:.1}, {} after the key's last read",
                    o.id,
                    w.action,
                    w.started,
                    applied,
                    age.map_or("?".into(), |a| format!("{a:.1} s"))
                );
                if spec.delete == "batch" && age.is_some_and(|a| a <= bound) {
                    row.batch_trusted += 1;
                } else {
                    row.violation('a', text);
                }
            }
        }
    }
    // (a) nothing deleted before its ttl, nor without a delete seen.
    for o in &swept {
        let text = match deletes(&o.id).first() {
            Some(first) if *first < o.ttl as f64 => {
                format!("{} deleted at {first:.2} before its ttl {}", o.id, o.ttl)
            }
            Some(_) => continue,
            None => format!("{} is gone, and no delete of it was seen", o.id),
        };
        row.violation('a', text);
    }
    row.deleted = swept.len();
    // (b) nothing expired left after the final sweep.
    let expiring = final_at - 5.0 * 365.0 * 86_400.0..final_at;
    for (id, (ttl, _)) in present {
        if let Some(ttl) = ttl.filter(|t| expiring.contains(t)) {
            let listed = seen.indexed.get(id.as_str()).map_or(&[][..], Vec::as_slice);
            let read = seen.reads.get(id.as_str()).map_or(&[][..], Vec::as_slice);
            let puts = seen
                .pack_puts
                .get(id.as_str())
                .map_or(&[][..], Vec::as_slice);
            let packs: Vec<String> = puts
                .iter()
                .map(|(at, w, e)| {
                    let queries = seen.pack_queries.get(w).map_or(&[][..], Vec::as_slice);
                    let covering = queries.iter().filter(|(_, from, to)| {
                        from.as_str() <= e.as_str() && e.as_str() <= to.as_str()
                    });
                    let after = covering.clone().filter(|(q, _, _)| q >= at).count();
                    let before: Vec<String> = covering
                        .filter(|(q, _, _)| q < at)
                        .map(|(q, from, to)| format!("{q:.2} {from}..{to}"))
                        .collect();
                    let near: Vec<String> = queries
                        .iter()
                        .filter(|(q, _, _)| (q - at).abs() < 3.0)
                        .map(|(q, from, to)| format!("{q:.2} {from}..{to}"))
                        .collect();
                    format!(
                        "[put {at:.2} {w} {e}: {after} covering queries after, before: {before:?}; \
                         queries within 3 s: {near:?}]"
                    )
                })
                .collect();
            let text = format!(
                "{id} (ttl {ttl}) still there after the final sweep (packs {packs:?}; listed by \
                 the index at {:?}; read at {:?})",
                listed
                    .iter()
                    .map(|at| format!("{at:.2}"))
                    .collect::<Vec<_>>(),
                read.iter()
                    .map(|(at, _)| format!("{at:.2}"))
                    .collect::<Vec<_>>()
            );
            row.violation('b', text);
        }
    }
    // (c) events.
    let mut unlisted = run.reports.unlisted_failed_events + final_reports.unlisted_failed_events;
    let per_kill = 2 * 25 * spec.concurrency as usize;
    let mut kill_budget: Vec<usize> = vec![per_kill; run.kills.len()];
    // (c) from the events' side: every `Item Expired` stands for an item the sweeper deleted (or
    // whose writer's item it destroyed, judged under (a)), or is cancelled, or the application
    // deleted the item while its chunk was in flight.
    let swept_ttl: HashMap<&str, i64> = swept.iter().map(|o| (o.id.as_str(), o.ttl)).collect();
    let reported = |id: &str| {
        [&run.reports, final_reports]
            .iter()
            .any(|r| r.failed_events.contains(id))
    };
    // A key's times in the run's reports, then in the final ones.
    let merged = |run: &HashMap<String, Vec<f64>>, last: &HashMap<String, Vec<f64>>| {
        let mut all = run.clone();
        last.iter()
            .for_each(|(id, t)| all.entry(id.clone()).or_default().extend(t));
        all
    };
    let given_up = merged(&run.reports.given_up, &final_reports.given_up);
    let unpublished = merged(&run.reports.unpublished, &final_reports.unpublished);
    let cancelling = merged(&run.reports.cancelling, &final_reports.cancelling);
    let ends = unsettled::Ends {
        lives: &run.lives,
        given_up: &given_up,
        deletes: sent,
        unpublished: &unpublished,
        kills: &run.kills,
        leaving: &[&run.reports.leaving[..], &final_reports.leaving[..]].concat(),
        cancelling: &cancelling,
        reread_failed: &[
            &run.reports.reread_failed[..],
            &final_reports.reread_failed[..],
        ]
        .concat(),
    };
    let archive = (spec.events == "archive").then_some(&ends);
    let journaled = archive.is_some() && spec.index;
    stands::check(
        row, seen, &swept_ttl, &destroyed, &writes, &reported, archive, journaled,
    );
    for o in swept {
        let key: Key = id_key(&o.id);
        let id = event_id(table, &key, o.ttl as f64);
        let first_delete = deletes(&o.id).first().copied();
        let accepted = seen.expired.get(&id);
        if spec.events == "archive" {
            match (accepted, first_delete) {
                (Some(Accepted { at, .. }), Some(deleted)) => {
                    if *at > deleted {
                        row.violation(
                            'c',
                            format!(
                                "{} deleted at {deleted:.2}, its event accepted later ({at:.2})",
                                o.id
                            ),
                        );
                    }
                }
                (Some(_), None) => {} // counted under (a)
                _ => row.violation('c', format!("{} deleted without an accepted event", o.id)),
            }
            continue;
        }
        if accepted.is_some() {
            continue;
        }
        let reported =
            |r: &Reports| r.failed_events.contains(&id) || r.failed_items.contains(&o.id);
        if reported(&run.reports) || reported(final_reports) {
            continue;
        }
        if unlisted > 0 {
            unlisted -= 1;
            continue;
        }
        let excused = first_delete.and_then(|d| {
            run.kills.iter().enumerate().position(|(k, t)| {
                *t >= d - crash_inflight_window()
                    && *t <= d + CRASH_PUBLISH_WINDOW
                    && kill_budget[k] > 0
            })
        });
        match excused {
            Some(k) => {
                kill_budget[k] -= 1;
                row.lost_to_kill += 1;
            }
            None => {
                let times = |ts: &[f64]| {
                    let ts: Vec<String> = ts.iter().map(|t| format!("{t:.2}")).collect();
                    ts.join(" ")
                };
                let write = writes.get(o.id.as_str()).map(|w| (w.action, w.started));
                row.violation(
                    'c',
                    format!(
                        "{} deleted (at {}) with no event and not reported (ttl {}; deletes seen at [{}]; read at [{}]; write {write:?})",
                        o.id,
                        first_delete.map_or("?".into(), |d| format!("{d:.2}")),
                        o.ttl,
                        times(&deletes(&o.id)),
                        times(seen.listed.get(&o.id).map_or(&[][..], Vec::as_slice)),
                    ),
                )
            }
        }
    }
}

// -------------------------------------------------------------------------------- the soak

/// Item id -> each `DeleteItem` of `table` among `requests` (as a fault proxy recorded them):
/// when it arrived and the fault injected, if any.
fn sent_deletes(
    requests: &[fault_proxy::Seen],
    table: &str,
) -> HashMap<String, Vec<(f64, Option<String>)>> {
    let mut deletes: HashMap<String, Vec<(f64, Option<String>)>> = HashMap::new();
    for r in requests {
        if r.op != "DeleteItem" || r.body["TableName"].as_str() != Some(table) {
            continue;
        }
        if let Some(id) = r.body["Key"]["id"]["S"].as_str() {
            let fault = r.fault.as_ref().map(|f| f.name());
            deletes
                .entry(id.to_owned())
                .or_default()
                .push((r.at, fault));
        }
    }
    deletes
}

/// A fault proxy in front of `upstream` that fails `ops` at `rate` with any fault.
async fn seeded_proxy(upstream: &str, seed: u64, rate: f64, ops: Vec<&'static str>) -> FaultProxy {
    let faults = all_faults();
    FaultProxy::start(
        upstream,
        DELAY,
        Plan::Seeded {
            seed,
            rate,
            ops,
            faults,
        },
    )
    .await
}

/// Seeded kill times: one in each of `kills` equal slots of the chaos phase, away from its ends.
fn kill_times(seed: u64, kills: usize, t0: f64, until: f64) -> Vec<f64> {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0xdead);
    let (from, to) = (t0 + 4.0, until - 6.0);
    let slot = (to - from) / kills as f64;
    (0..kills)
        .map(|k| from + slot * (k as f64 + 0.15 + 0.7 * rng.f64()))
        .collect()
}

async fn scenario(
    spec: Spec,
    seed: u64,
    size: Size,
    db_endpoint: String,
    moto_endpoint: String,
    client: Client,
    dir: PathBuf,
) -> Row {
    let seed = seed ^ fault_proxy::fnv(spec.name.as_bytes());
    let mut rng = fastrand::Rng::with_seed(seed);
    let table = table_name(&spec.name.replace('-', "_"));
    let mut shape = TableSpec::simple(&table);
    // Swept through an expiry index table: the table has no GSI and a stream, which `run
    // --follow-stream` reads into the index table (its position saved in the checkpoint table).
    let index = if spec.index {
        shape.index = false;
        shape.stream = Some(StreamViewType::NewAndOldImages);
        let prefix = table.replace('_', "");
        let index = index_table(&client, &format!("{prefix}_entries")).await;
        let checkpoint = checkpoint_table(&client, &format!("{prefix}_state")).await;
        Some((index, checkpoint))
    } else {
        None
    };
    create_table(&client, &shape).await;
    // The writers set the window attribute, or only the ttl.
    let writer_shards = (!spec.index).then_some(spec.shards);
    let sqs = moto::sqs().await;
    let queue = moto::create_queue(&sqs, &moto::unique(spec.name), false).await;
    let consumer = tokio::spawn(consume(sqs.clone(), queue.clone()));
    std::fs::create_dir_all(&dir).unwrap();

    // The items: a backlog already expired in two windows, items expiring during the soak,
    // items that never expire during it.
    let now = wall_clock();
    let load_time = 20.0 * size.scale.max(0.5);
    let start_estimate = now + load_time;
    let window_base = (now as i64 / WINDOW as i64) * WINDOW as i64;
    let mut originals = Vec::new();
    for i in 0..size.backlog {
        let ttl = window_base - WINDOW as i64 - rng.i64(1..=WINDOW as i64);
        originals.push(Original::new(format!("b{i}"), ttl));
    }
    for i in 0..size.rolling {
        let ttl = start_estimate as i64 + rng.i64(0..size.chaos.as_secs() as i64);
        originals.push(Original::new(format!("r{i}"), ttl));
    }
    let live: Vec<Original> = (0..size.live)
        .map(|i| Original::new(format!("l{i}"), now as i64 + 7200 + rng.i64(0..3600)))
        .collect();
    let items: Vec<Key> = originals
        .iter()
        .chain(&live)
        .map(|o| marked(&o.id, o.ttl, writer_shards, "orig"))
        .collect();
    put_many(&client, &table, items).await;

    // DynamoDB: sweeper -> fault proxy -> recorder (slow batch writes) -> DynamoDB Local.
    let slow = if spec.delete == "batch" {
        SLOW_BATCH
    } else {
        Duration::ZERO
    };
    let (db_rec, db_state) = recorder(&db_endpoint, &table, seed, slow, false).await;
    let mut ops = vec!["Query", "BatchWriteItem", "DeleteItem", "BatchGetItem"];
    if spec.index {
        // The follower's reads of the stream too.
        ops.push("GetRecords");
    }
    let db_faults = seeded_proxy(&db_rec.endpoint, seed, DB_FAULT_RATE, ops).await;
    if spec.events == "archive" {
        // Each request and its fault: which deletes a sweeper had an answer to, for (c').
        db_faults.record();
    }
    // SQS: sweeper -> fault proxy -> recorder (slow sink) -> moto.
    let (sink_rec, sink_state) = recorder(&moto_endpoint, "", seed, Duration::ZERO, true).await;
    let sink_ops = fault_proxy::SINK_BATCH_OPS.to_vec();
    let sink_faults =
        seeded_proxy(&sink_rec.endpoint, seed ^ 0x51c, SINK_FAULT_RATE, sink_ops).await;
    let mut env = settings(
        &spec,
        &table,
        &queue,
        &db_faults.endpoint,
        &sink_faults.endpoint,
    );
    if let Some((index, checkpoint)) = &index {
        env.extend([
            ("EXPIRY_INDEX_TABLE".to_owned(), index.clone()),
            ("CHECKPOINT_TABLE".to_owned(), checkpoint.clone()),
            ("FOLLOW_STREAM".to_owned(), "true".to_owned()),
        ]);
    }

    let t0 = wall_clock();
    let until = t0 + size.chaos.as_secs_f64();
    let kill_at = kill_times(seed, size.kills, t0, until);
    let writer = tokio::spawn(writers(
        client.clone(),
        table.clone(),
        writer_shards,
        spec.deletes,
        seed,
        db_state.clone(),
        originals.clone(),
        size.backlog,
        size.burst,
        t0,
        until,
    ));
    let run = match spec.runner {
        Runner::Run => soak_run(env.clone(), &dir, seed, &kill_at, until).await,
        Runner::Lambda => soak_lambda(env.clone(), &dir, seed, &kill_at, until).await,
    };
    let writes = writer.await.expect("writers");

    // Late requests land, then the faults and the slowness stop for the final clean sweep.
    db_faults.wait_idle().await;
    sink_faults.wait_idle().await;
    db_faults.set_plan(Plan::Pass);
    sink_faults.set_plan(Plan::Pass);
    db_state.slowing.store(false, Ordering::SeqCst);
    sink_state.slowing.store(false, Ordering::SeqCst);
    let oldest = originals.iter().map(|o| o.ttl).min().unwrap_or(now as i64) as f64;
    // Blocking, off the runtime's workers: the proxies it goes through run on them. A final
    // sweep that fails (its report lists what it could not do: a sink still slow from the load
    // the chaos left on it, say) is followed by another, up to FINAL_SWEEPS; every report counts
    // for (c), the last one's instant for (b).
    let mut final_reports = Reports::default();
    let mut final_sweeps = 0;
    // Archive mode with the expiry index table: what the sweepers journaled and did not settle
    // is due DUE_AFTER after it was written; the final sweep settles it (and sweeps again while
    // some is left).
    let journal = index
        .as_ref()
        .filter(|_| spec.events == "archive")
        .map(|(index, _)| index.clone());
    let due_after = ttl_sweeper::engine::journal::DUE_AFTER + Duration::from_secs(1);
    if journal.is_some() {
        tokio::time::sleep(due_after).await;
    }
    let (code, report, stderr) = loop {
        final_sweeps += 1;
        // From this sweep's start back to the oldest item: a final sweep after a slow one (a sink
        // still loaded) must reach as far back as the first did.
        let lookback = ((wall_clock() - oldest) / WINDOW as f64).ceil() as usize + 2;
        let (code, report, stderr) = tokio::task::block_in_place(|| final_sweep(&env, lookback));
        final_reports.absorb(&report);
        final_reports.absorb_text(&stderr);
        let journaled = match &journal {
            Some(index) => journal_items(&client, index).await,
            None => 0,
        };
        if (code == 0 && journaled == 0) || final_sweeps == FINAL_SWEEPS {
            if journaled > 0 {
                eprintln!(
                    "{}: {journaled} journal items left after the final sweeps",
                    spec.name
                );
            }
            break (code, report, stderr);
        }
        if journaled > 0 {
            eprintln!(
                "{}: {journaled} journal items left; sweeping again once due",
                spec.name
            );
            tokio::time::sleep(due_after).await;
        }
        if code != 0 {
            eprintln!(
                "{}: final sweep {final_sweeps} exit {code}; sweeping again",
                spec.name
            );
        }
    };
    let final_at = report["sweep_at"]
        .as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|d| d.timestamp_millis() as f64 / 1000.0)
        .unwrap_or_else(|| {
            panic!(
                "{}: the final sweep printed no report (exit {code}): {stderr}",
                spec.name
            )
        });

    consumer.abort();

    let present: HashMap<String, (Option<f64>, Option<String>)> = scan_all(&client, &table)
        .await
        .into_iter()
        .map(|item| {
            let id = item["id"].as_s().unwrap().clone();
            let ttl = item
                .get("ttl")
                .and_then(|t| t.as_n().ok())
                .and_then(|n| n.parse().ok());
            let marker = item.get("marker").and_then(|m| m.as_s().ok()).cloned();
            (id, (ttl, marker))
        })
        .collect();

    let mut row = Row {
        name: spec.name,
        runner: spec.name.split('-').next().unwrap(),
        delete: spec.delete,
        events: spec.events,
        kills: run.kills.len(),
        timeouts: run.timeouts,
        items: originals.len() + live.len(),
        rewrites: writes
            .iter()
            .filter(|w| w.action == Action::Rewrite)
            .count(),
        extends: writes.iter().filter(|w| w.action == Action::Extend).count(),
        app_deletes: writes.iter().filter(|w| w.action == Action::Delete).count(),
        slowed_batch: db_state.slowed.load(Ordering::SeqCst),
        slowed_sink: sink_state.slowed.load(Ordering::SeqCst),
        ..Row::default()
    };
    for (name, n) in db_faults.stats.faults.lock().unwrap().iter() {
        *row.faults.entry(fault_kind(name)).or_default() += n;
    }
    row.sink_faults = sink_faults.stats.faults_total();
    let seen = db_state.seen.lock().unwrap();
    let sink_seen = sink_state.seen.lock().unwrap();
    let merged = Seen {
        listed: seen.listed.clone(),
        indexed: seen.indexed.clone(),
        deleted: seen.deleted.clone(),
        reads: seen.reads.clone(),
        delete_requests: seen.delete_requests.clone(),
        expired: sink_seen.expired.clone(),
        cancelled: sink_seen.cancelled.clone(),
        accepted_entries: sink_seen.accepted_entries,
        pack_puts: seen.pack_puts.clone(),
        pack_queries: seen.pack_queries.clone(),
    };
    row.events_accepted = merged.accepted_entries;
    let deletes = sent_deletes(&db_faults.stats.seen(), &table);
    check(
        &mut row,
        &spec,
        &table,
        &originals,
        &live,
        &writes,
        &present,
        &merged,
        &deletes,
        &run,
        final_at,
        &final_reports,
    );
    row.final_sweeps = final_sweeps;
    // (d) Nothing but the writers (straight to DynamoDB Local) and the sweepers' deletes wrote
    // the application's table: what every request the sweepers sent, faulted or not, asked.
    let mut requests = String::new();
    for ((op, named), n) in db_faults.stats.by_table.lock().unwrap().iter() {
        let _ = writeln!(requests, "{n}\t{op}\t{named}");
        let app_write = *named == table && APP_WRITES.contains(&op.as_str());
        if app_write || PARTIQL.contains(&op.as_str()) {
            row.violation('d', format!("{n} × {op} on {named}"));
        }
    }
    std::fs::write(dir.join("requests.txt"), requests).unwrap();
    std::fs::write(dir.join("violations.txt"), row.violations.join("\n")).unwrap();
    std::fs::write(dir.join("unsettled.txt"), row.unsettled_lines.join("\n")).unwrap();
    if let Some((index, _)) = &index {
        row.entries = db_faults.stats.count("BatchWriteItem:PutRequest", index);
    }
    if code != 0 {
        row.examples
            .push(format!("final sweep exit {code}: {report}"));
    }
    let kills: Vec<String> = run.kills.iter().map(|k| format!("{k:.2}")).collect();
    std::fs::write(dir.join("kills.txt"), kills.join("\n")).unwrap();
    eprintln!(
        "{}: done — {} kills, {} timeouts, {} self-exits, last run exit {:?}, final sweep exit {code}",
        spec.name,
        row.kills,
        run.timeouts,
        run.exits,
        run.final_exit
    );
    row
}

fn table(seed: u64, size: &Size, rows: &[Row]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "SOAK_SEED={seed} SOAK_SCALE={} ({} s of chaos per scenario; batch bound {:.1} s)\n",
        size.scale,
        size.chaos.as_secs(),
        batch_bound()
    );
    let _ = writeln!(
        t,
        "| scenario | runner | delete | events | throttle | 5xx | timeout | reset | lost | partial | sink faults | slow sink | slow batch | kills | timeouts | items | deleted | rewrites | extends | deletes | events | entries | batch-trusted | oldest read (s) | lost to kill | in flight | final sweeps | (a) | (b) | (c) | (c') | (d) |"
    );
    let _ = writeln!(t, "|{}", "---|".repeat(32));
    for r in rows {
        let f = |k: &str| r.faults.get(k).copied().unwrap_or(0);
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.name, r.runner, r.delete, r.events,
            f("throttle"), f("5xx"), f("timeout"), f("reset"), f("lost"), f("partial"),
            r.sink_faults, r.slowed_sink, r.slowed_batch, r.kills, r.timeouts, r.items,
            r.deleted, r.rewrites, r.extends, r.app_deletes, r.events_accepted, r.entries,
            r.batch_trusted, r.oldest_read, r.lost_to_kill, r.in_flight, r.final_sweeps, r.a,
            r.b, r.c, r.unsettled, r.d
        );
    }
    let sum = |f: fn(&Row) -> u64| rows.iter().map(f).sum::<u64>();
    let db_faults = sum(|r| r.faults.values().sum());
    let (sink, slowed) = (sum(|r| r.sink_faults), sum(|r| r.slowed_sink));
    let archive = rows.iter().filter(|r| r.events == "archive");
    let unsettled: Vec<String> = archive
        .map(|r| format!("{} {}", r.name, r.unsettled))
        .collect();
    let _ = writeln!(
        t,
        "\nfaults injected: {} (DynamoDB {db_faults}, sink {sink} failed + {slowed} slowed); SIGKILLs: {}; violations: (a) {} (b) {} (c) {} (d) {}; (c') {} ({})",
        sum(Row::total_faults),
        sum(|r| r.kills as u64),
        sum(|r| r.a as u64),
        sum(|r| r.b as u64),
        sum(|r| r.c as u64),
        sum(|r| r.d as u64),
        sum(|r| r.unsettled as u64),
        unsettled.join(", ")
    );
    for r in rows.iter().filter(|r| r.unsettled > 0) {
        let _ = writeln!(
            t,
            "\n{}: (c') {} published, not settled, item changed before a later sweep settled it: the documented archive-mode exception (docs/events.md), not a violation; the first {} (all in unsettled.txt):",
            r.name,
            r.unsettled,
            r.unsettled.min(UNSETTLED_SHOWN)
        );
        let with = |tag: &str| r.unsettled_lines.iter().filter(|l| l.contains(tag)).count();
        let _ = writeln!(
            t,
            "  of which: a refused delete, its sweeper ended {}; a later sweep read it unchanged and left it {}; ambiguous, a read of the change by another chunk or process {}",
            with("[refused delete"),
            with("[a later sweep read it unchanged"),
            with("[ambiguous:")
        );
        for line in r.unsettled_lines.iter().take(UNSETTLED_SHOWN) {
            let _ = writeln!(t, "  {line}");
        }
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the soak runs for minutes: `make soak`"]
async fn soak() {
    let var = |name| std::env::var(name).ok().map(|s| s.trim().to_owned());
    let seed = var("SOAK_SEED").map(|s| s.parse().expect("SOAK_SEED: a whole number"));
    let seed = seed.unwrap_or_else(|| fastrand::u64(..1_000_000));
    let scale =
        var("SOAK_SCALE").map(|s| s.parse().expect("SOAK_SCALE: a number such as 1 or 0.3"));
    let scale: f64 = scale.unwrap_or(1.0);
    assert!(scale > 0.0 && scale <= 10.0, "SOAK_SCALE from 0 to 10");
    let size = Size::new(scale);
    eprintln!(
        "soak: SOAK_SEED={seed} SOAK_SCALE={scale} (repeat with `SOAK_SEED={seed} make soak`)"
    );
    let client = client().await;
    let db = endpoint();
    let moto = moto::endpoint();
    let dir = server::repo_root().join(format!("target/soak/{seed}"));
    // `SOAK_SCENARIOS` (names, comma-separated) runs only those.
    let only = var("SOAK_SCENARIOS").filter(|s| !s.is_empty());
    let chosen: Vec<Spec> = SCENARIOS
        .into_iter()
        .filter(|name| {
            only.as_ref()
                .is_none_or(|o| o.split(',').any(|n| n.trim() == *name))
        })
        .map(spec)
        .collect();
    assert!(
        !chosen.is_empty(),
        "SOAK_SCENARIOS names none of {SCENARIOS:?}"
    );
    let tasks: Vec<_> = chosen
        .iter()
        .map(|spec| {
            let (db, moto, client) = (db.clone(), moto.clone(), client.clone());
            let dir = dir.join(spec.name);
            tokio::spawn(scenario(*spec, seed, size, db, moto, client, dir))
        })
        .collect();
    let mut rows = Vec::new();
    for t in tasks {
        rows.push(t.await.expect("scenario"));
    }
    let text = table(seed, &size, &rows);
    println!("\n{text}");
    let report = server::repo_root().join("target/tmp/soak-report.md");
    std::fs::create_dir_all(report.parent().unwrap()).unwrap();
    std::fs::write(&report, &text).unwrap();
    let mut failures = Vec::new();
    for r in &rows {
        if r.a + r.b + r.c + r.d > 0 {
            failures.push(format!("{}:\n  {}", r.name, r.examples.join("\n  ")));
        }
    }
    println!("logs: {}", dir.display());
    assert!(
        failures.is_empty(),
        "SOAK_SEED={seed}: invariants violated\n{}",
        failures.join("\n")
    );
    let faults: u64 = rows.iter().map(Row::total_faults).sum();
    let kills: usize = rows.iter().map(|r| r.kills).sum();
    if scale >= 1.0 && only.is_none() {
        assert!(
            faults >= 10_000,
            "SOAK_SEED={seed}: only {faults} faults injected"
        );
        assert!(kills >= 20, "SOAK_SEED={seed}: only {kills} SIGKILLs");
    }
}
