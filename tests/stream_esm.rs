//! The Lambda binary under the local Runtime API, fed DynamoDB Local's real stream the way an event
//! source mapping feeds it: the mapping is [`Esm`] (tests/support/esm.rs, which says what it
//! emulates), the stream read by [`Stream`].
//!
//! The function indexes the records into the sweeper's own expiry index table
//! (`EXPIRY_INDEX_TABLE`) and never writes the application's table, which has a stream and
//! nothing of the sweeper's; its sweeps delete the expired items and remove their entries.
//!
//! Each test starts its own function (one execution environment, stopped by its PID) and tables on
//! the shared DynamoDB Local.

use crate::support::{self, esm, fault_proxy, runtime_api};

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::StreamViewType;
use esm::{item, sequence, Answer, Esm, Stream, MAX_RETRIES};
use fault_proxy::{Fault, FaultProxy, Plan};
use runtime_api::{Options, Outcome, RuntimeApi};
use serde_json::{json, Value};
use support::*;

/// Records per batch (the construct's mapping uses 100; fewer here so that a test sees several).
const BATCH_SIZE: usize = 10;

// ------------------------------------------------------------------------------------ the function

/// The Lambda binary for `table` and its expiry index table `index`, reaching DynamoDB at
/// `endpoint`, with `more` settings: one execution environment.
async fn function(
    table: &str,
    index: &str,
    endpoint: &str,
    name: &str,
    more: &[(&str, &str)],
) -> RuntimeApi {
    let mut settings = vec![
        ("TABLE_NAME", table.to_owned()),
        ("EXPIRY_INDEX_TABLE", index.to_owned()),
        ("AWS_ENDPOINT_URL", endpoint.to_owned()),
    ];
    settings.extend(more.iter().map(|(k, v)| (*k, v.to_string())));
    let name = format!("stream-esm-{name}");
    RuntimeApi::start(Options::lambda(&name, 1, local_env(settings))).await
}

/// The index table holds the entry of every write of `app` that gave an item a new ttl, and no
/// other, and the application's table is exactly as `app` wrote it. (A record delivered again
/// is written again, in a pack of its own: the entries are compared each once.)
async fn assert_indexed_as_written(
    client: &aws_sdk_dynamodb::Client,
    (table, index): (&str, &str),
    app: &AppWriter,
    context: &str,
) {
    let entries = listed_once(client, index).await;
    let mut want = app.entries();
    want.dedup();
    assert_eq!(entries, want, "{context}");
    let items = items_by_id(client, table).await;
    assert_eq!(items, app.expected(|_, _| false), "{context}");
}

/// Sleeps until the wall clock has passed the due of every pack of the index table that holds
/// an entry `pick` takes (and then a little, for the sweeper's own reading of the clock): a
/// sweep from then on reads them all.
async fn wait_past_packs(
    client: &aws_sdk_dynamodb::Client,
    index: &str,
    pick: impl Fn(&(String, i64)) -> bool,
) {
    let packed = contents_of(scan_all(client, index).await).packed;
    let picked = packed.into_iter().filter(|(e, _)| pick(e));
    let due = picked.map(|(_, due)| due).max().expect("a pack picked");
    // A sweep's instant is held to DynamoDB's clock, which its whole-second `Date` headers give
    // only to within a second until its bounds are tight: a second more.
    let wait = (due as f64 / 1000.0) + 1.1 - wall_clock();
    tokio::time::sleep(Duration::from_secs_f64(wait.max(0.0))).await;
}

/// Sweeps once by invoking `api` with the scheduled event's empty payload: the report.
async fn sweep(api: &RuntimeApi, esm: &Esm<'_>) -> Value {
    let sweep = api.invoke(&json!({})).await;
    let Outcome::Succeeded(report) = sweep.outcome else {
        panic!("sweep: {:?}\n{}", sweep.outcome, esm.context());
    };
    report
}

// ------------------------------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_written_with_only_a_ttl_get_entries_through_the_mapping_and_sweeps_delete_them_on_time(
) {
    let (client, table, index) =
        indexed_table("esm_writers", StreamViewType::NewAndOldImages).await;
    // Items written already expired left to the sweeps here (their deletes at once: below).
    let later = [("DELETE_WHEN_INDEXED", "false")];
    let api = function(&table, &index, &endpoint(), "writers", &later).await;
    let mut stream = Stream::of(&client, &table).await;
    let mut app = AppWriter::new(&client, &table);

    // Writers that set only a ttl: due in a few seconds, already expired, live for an hour.
    let now = now();
    let (due, expired, live) = (names("due", 10), names("expired", 5), names("live", 10));
    let due_at = now + 8;
    let mut items = unwindowed_each(&due, due_at);
    items.extend(unwindowed_each(&expired, now - 10));
    items.extend(unwindowed_each(&live, now + 3600));
    app.put_many(items).await;
    // The application extends two of the due items and rewrites two live ones (one of them
    // already expired), and deletes two items before their records are delivered.
    for id in ["due-0", "due-1"] {
        app.set_ttl(id, now + 7200).await;
    }
    app.put(unwindowed("live-0", now - 5)).await;
    app.put(unwindowed("live-1", now + 1800)).await;
    app.put(unwindowed("deleted-0", now + 3600)).await;
    app.put(unwindowed("deleted-1", now - 10)).await;
    app.delete("deleted-0").await;
    app.delete("deleted-1").await;
    let written = 25 + 2 + 2 + 4;

    let mut esm = Esm::new(&api, BATCH_SIZE);
    let shard = stream.read_until(written).await;
    assert_eq!(shard.len(), written, "{shard:#?}");
    esm.drain(&shard).await;
    let clean = |esm: &Esm| {
        let ok = |d: &esm::Delivery| d.answer == Answer::Failures(Vec::new());
        esm.destination.is_empty() && esm.deliveries.iter().all(ok)
    };
    assert!(clean(&esm), "{}", esm.context());
    // Batches indexed whole log nothing at the default level: at a record an invocation, a line
    // each would cost more in log ingestion than the batch's packs.
    let log = api.log_text();
    assert!(!log.contains("stream batch indexed"), "{log}");
    let batches = written.div_ceil(BATCH_SIZE);
    assert_eq!(esm.deliveries.len(), batches, "{}", esm.context());
    // One entry per write that gave an item a new ttl (deleted items' included); the
    // application's table is exactly as written: the indexer neither writes nor deletes there.
    let entries = app.entries();
    assert_eq!(entries.len(), 31);
    assert_indexed_as_written(&client, (&table, &index), &app, &esm.context()).await;
    // Each batch delivered once: every entry listed (twice only if its pack was written again).
    assert_eq!(listed_once(&client, &index).await, entries);

    // Once the packs of the items written expired are due (just after each was indexed), a sweep
    // by the same function deletes them and judges every entry of theirs, the deleted item's
    // too (found gone); the packs stay, for native TTL.
    wait_past_packs(&client, &index, |(_, ttl)| *ttl <= now).await;
    let report = sweep(&api, &esm).await;
    assert!(
        wall_clock() < due_at as f64,
        "the machine is too slow for this test: the due items expired before the first sweep ended"
    );
    report.assert_fields(
        "items_found=7 items_deleted=6 items_gone=1 items_failed=0 index_entries_removed=0",
    );
    let swept_by = |at: i64| move |_: &str, ttl: i64| ttl <= at;
    let items = items_by_id(&client, &table).await;
    assert_eq!(items, app.expected(swept_by(now)));
    let unjudged = entries.iter().filter(|(_, ttl)| *ttl > now).cloned();
    let unjudged: Vec<_> = unjudged.collect();
    assert_eq!(unjudged_entries(&client, &index).await, unjudged);
    assert_eq!(listed_once(&client, &index).await, entries);

    // Once the due items' ttl has passed (by DynamoDB's clock too), the next sweep deletes them,
    // and only them; the entries of the extended ones' earlier ttl are judged too, and delete
    // nothing.
    let wait = due_at as f64 + 1.5 - wall_clock();
    tokio::time::sleep(Duration::from_secs_f64(wait.max(0.0))).await;
    let report = sweep(&api, &esm).await;
    report.assert_fields(
        "items_found=10 items_deleted=8 items_skipped=2 items_failed=0 index_entries_removed=0",
    );
    let kept = app.expected(swept_by(due_at));
    assert_eq!(kept.len(), 11, "{kept:?}");
    assert!(kept.contains_key("due-0") && kept.contains_key("due-1"));
    let items = items_by_id(&client, &table).await;
    assert_eq!(items, kept, "{}", esm.context());
    let unjudged: Vec<_> = unjudged.into_iter().filter(|(_, t)| *t > due_at).collect();
    assert_eq!(unjudged_entries(&client, &index).await, unjudged);
    assert_eq!(listed_once(&client, &index).await, entries);

    // The sweeps' deletes come back, and need nothing; nothing else was written to the table.
    let shard = stream.read_until(written + 14).await;
    esm.drain(&shard).await;
    assert!(clean(&esm), "{}", esm.context());
    while stream.read().await > 0 {}
    let all = &stream.records;
    assert_eq!(all.len(), written + 14, "{all:#?}");
    assert!(all[written..].iter().all(|r| r["eventName"] == "REMOVE"));
    assert_eq!(unjudged_entries(&client, &index).await, unjudged);
    assert_eq!(listed_once(&client, &index).await, entries);
}

// The proxy serves on the runtime's other worker while the test waits on the function.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_named_in_batch_item_failures_is_delivered_again_from_it_until_it_succeeds() {
    let (client, table, index) =
        indexed_table("esm_retries", StreamViewType::NewAndOldImages).await;
    // The packs of "stubborn" are left unprocessed by the index table through the first two
    // deliveries of its records (a delivery's first request holds other items' packs too; the
    // indexer's retries of it hold only the stubborn ones). Its ttls are its own: no other
    // item's entry shares its packs.
    let deliveries = Arc::new(AtomicUsize::new(0));
    let count = deliveries.clone();
    let plan = Plan::script(move |op, body| {
        let ids = (op == "BatchWriteItem").then(|| written_ids(body));
        let ids = ids.unwrap_or_default();
        if !ids.iter().any(|id| id == "stubborn") {
            return None;
        }
        let first = ids.iter().any(|id| id != "stubborn");
        let nth = match first {
            true => count.fetch_add(1, Ordering::SeqCst) + 1,
            false => count.load(Ordering::SeqCst),
        };
        (nth <= 2).then_some(Fault::HoldBack("stubborn"))
    });
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(15), plan).await;
    let api = function(&table, &index, &proxy.endpoint, "retries", &[]).await;
    let mut stream = Stream::of(&client, &table).await;
    let mut app = AppWriter::new(&client, &table);

    // In the shard's order: a-0..a-3, stubborn (INSERT), a-4..a-7, stubborn (MODIFY: the
    // application extends it), a-8..a-13.
    let now = now();
    let a = names("a", 14);
    for id in &a[..4] {
        app.put(unwindowed(id, now + 3600)).await;
    }
    app.put(unwindowed("stubborn", now + 3601)).await;
    for id in &a[4..8] {
        app.put(unwindowed(id, now + 3600)).await;
    }
    app.set_ttl("stubborn", now + 7200).await;
    for id in &a[8..] {
        app.put(unwindowed(id, now + 3600)).await;
    }
    let shard = stream.read_until(16).await;
    assert_eq!(shard.len(), 16);
    let order: Vec<&str> = shard.iter().map(item).collect();
    assert_eq!((order[4], order[9]), ("stubborn", "stubborn"), "{order:?}");

    let mut esm = Esm::new(&api, BATCH_SIZE);
    esm.drain(&shard).await;
    let context = esm.context();
    let sequences = |records: &[Value]| -> Vec<String> {
        records.iter().map(|r| sequence(r).to_owned()).collect()
    };
    let first = sequence(&shard[4]).to_owned();
    let d = &esm.deliveries;
    assert_eq!(d.len(), 4, "{context}");
    // The first batch: the answer names the stubborn item's first record, and only it (its
    // second record fails with it: the first failure of an item stops it).
    assert_eq!(d[0].sequences, sequences(&shard[..10]), "{context}");
    let names_first = Answer::Failures(vec![first.clone()]);
    assert_eq!(d[0].answer, names_first, "{context}");
    // Delivered again from that record on (the records before it were checkpointed), twice.
    for again in &d[1..3] {
        assert_eq!(again.sequences, sequences(&shard[4..10]), "{context}");
    }
    assert_eq!(d[1].answer, Answer::Failures(vec![first]), "{context}");
    assert_eq!(d[2].answer, Answer::Failures(Vec::new()), "{context}");
    assert_eq!(d[3].sequences, sequences(&shard[10..]), "{context}");
    assert_eq!(d[3].answer, Answer::Failures(Vec::new()), "{context}");
    assert!(esm.destination.is_empty(), "{context}");
    assert_eq!(deliveries.load(Ordering::SeqCst), 3, "{context}");
    // The two batches that failed a record say so at info; those indexed whole, nothing.
    let log = api.log_text();
    let said = log.lines().filter(|l| l.contains("stream batch indexed"));
    assert_eq!(said.count(), 2, "{log}");
    assert!(proxy.stats.faults_total() >= 2, "{context}");

    // Every record ends with its entry, the stubborn item's both ttls included, each once: its
    // packs were written only by the third delivery; the application's items are as it wrote
    // them.
    assert_indexed_as_written(&client, (&table, &index), &app, &context).await;
    let entries = index_entries(&client, &index).await;
    let stubborn: Vec<_> = entries.iter().filter(|(id, _)| id == "stubborn").collect();
    let want = [
        ("stubborn".to_string(), now + 3601),
        ("stubborn".to_string(), now + 7200),
    ];
    assert_eq!(stubborn, want.iter().collect::<Vec<_>>(), "{context}");
}

// The proxy serves on the runtime's other worker while the test waits on the function.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_function_refuses_is_bisected_down_to_the_record_that_goes_to_the_destination()
{
    let (client, table, index) = indexed_table("esm_bisect", StreamViewType::NewAndOldImages).await;
    let other = new_table(&client, "esm_other", |t| {
        t.index = false;
        t.stream = Some(StreamViewType::NewAndOldImages);
    })
    .await;
    // Every request the function sends, with when it arrives.
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(15), Plan::Pass).await;
    proxy.record();
    // The expired items left to a sweep: the function's only writes are entries.
    let later = [("DELETE_WHEN_INDEXED", "false")];
    let api = function(&table, &index, &proxy.endpoint, "bisect", &later).await;
    let mut app = AppWriter::new(&client, &table);

    let now = now();
    let (live, expired) = (names("m", 18), names("x", 2));
    let mut items = unwindowed_each(&live, now + 3600);
    items.extend(unwindowed_each(&expired, now - 10));
    app.put_many(items).await;
    put_one(&client, &other, unwindowed("stray", now + 3600)).await;
    let mut shard = Stream::of(&client, &table).await.read_until(20).await;
    let stray = Stream::of(&client, &other).await.read_until(1).await;
    // A record of another table's stream, in the second batch.
    shard.insert(13, stray[0].clone());
    assert_ne!(shard[13]["eventSourceARN"], shard[12]["eventSourceARN"]);

    let mut esm = Esm::new(&api, BATCH_SIZE);
    esm.drain(&shard).await;
    let context = esm.context();
    // The stray record, and only it, ends in the on-failure destination, after its retries
    // alone.
    assert_eq!(esm.destination, vec![stray[0].clone()], "{context}");
    let stray_sequence = sequence(&stray[0]).to_owned();
    let alone = (esm.deliveries.iter())
        .filter(|d| d.sequences == [stray_sequence.clone()])
        .count();
    assert_eq!(alone, 1 + MAX_RETRIES as usize, "{context}");
    // Every batch that held it failed as a whole, refused for its other table; every other
    // succeeded with nothing to deliver again.
    for d in &esm.deliveries {
        if d.sequences.contains(&stray_sequence) {
            let Answer::Error(error) = &d.answer else {
                panic!("a batch with the stray record: {:?}\n{context}", d.answer);
            };
            assert!(error.contains("another table"), "{error}");
        } else {
            assert_eq!(d.answer, Answer::Failures(Vec::new()), "{context}");
        }
    }
    // Bisected: the failed batches halved down to the stray record.
    let failed = esm.deliveries.iter().filter(|d| d.failed());
    let failed_sizes: Vec<usize> = failed.map(|d| d.sequences.len()).collect();
    assert_eq!(failed_sizes, [10, 5, 3, 2, 1, 1, 1], "{context}");
    // A refused batch wrote nothing: no write reached DynamoDB while one ran. Every write (the
    // packs, and the writers' mark before the first) went to the index table, none named the
    // stray item.
    let seen = proxy.stats.seen();
    let is_write = |s: &&fault_proxy::Seen| s.op == "BatchWriteItem" || s.op == "PutItem";
    let writes: Vec<_> = seen.iter().filter(is_write).collect();
    assert!(writes.iter().any(|w| w.op == "BatchWriteItem"));
    let marks = writes.iter().filter(|w| w.op == "PutItem").count();
    assert!(marks >= 1, "the writers' mark: {writes:?}");
    for d in esm.deliveries.iter().filter(|d| d.failed()) {
        let (start, end) = (d.invocation.start.unwrap(), d.invocation.end.unwrap());
        let during = writes.iter().filter(|w| (start..=end).contains(&w.at));
        let during: Vec<_> = during.collect();
        assert!(during.is_empty(), "{during:?} during {d:?}");
    }
    for w in &writes {
        assert_eq!(w.tables(), [index.as_str()], "{w:?}");
        assert!(
            !written_ids(&w.body).contains(&"stray".to_string()),
            "{w:?}"
        );
    }
    let ops: HashSet<&str> = seen.iter().map(|s| s.op.as_str()).collect();
    assert_eq!(
        ops,
        HashSet::from(["DescribeTable", "BatchWriteItem", "PutItem"])
    );
    // Every other record has its entry, the expired items' too (with DELETE_WHEN_INDEXED=false
    // the indexer deletes nothing: a sweep does); the application's items are as it wrote them, the stray one too, unindexed.
    assert_indexed_as_written(&client, (&table, &index), &app, &context).await;
    let strays = items_by_id(&client, &other).await;
    assert_eq!(strays["stray"], unwindowed("stray", now + 3600));
}

/// The deployed shape of `followStream`: the sweeper ticking every second in one function, the
/// stream indexer in another fed by the mapping, both on the expiry index table. Items written
/// with only a ttl go with a sub-second lag, none before its ttl, and their entries with them.
/// The stream indexer deletes an item written already expired as it indexes it (a conditional
/// delete judged against the table), without waiting for a sweep: no sweep runs here. An item
/// whose ttl the application moved later before the batch came is kept, and so is its new
/// entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_written_already_expired_goes_as_its_batch_is_indexed_without_a_sweep() {
    let (client, table, index) =
        indexed_table("esm_at_once", StreamViewType::NewAndOldImages).await;
    // The batches' lines are DEBUG when every record was indexed.
    let debug = [("AWS_LAMBDA_LOG_LEVEL", "info,ttl_sweeper=debug")];
    let indexer = function(&table, &index, &endpoint(), "at-once", &debug).await;
    let mut stream = Stream::of(&client, &table).await;
    let mut esm = Esm::new(&indexer, BATCH_SIZE);
    let mut app = AppWriter::new(&client, &table);
    let now = now();
    let expired = support::names("expired", 12);
    let mut items = unwindowed_each(&expired, now - 30);
    items.push(unwindowed("moved", now - 30));
    items.push(unwindowed("live", now + 3600));
    app.put_many(items).await;
    // The application moves one ttl later before the stream's records reach the indexer: the
    // first record's image still says expired, the table does not.
    app.put(unwindowed("moved", now + 3600)).await;
    let records = stream.read_until(expired.len() + 3).await;
    esm.drain(&records).await;
    let drained = clock();
    let present = id_set(&client, &table).await;
    let want = HashSet::from(["moved".to_owned(), "live".to_owned()]);
    assert_eq!(present, want, "{}", esm.context());
    assert_eq!(app.ttl("moved"), Some(now + 3600));
    let items = items_by_id(&client, &table).await;
    assert_eq!(items, app.expected(|_, ttl| ttl < now), "{}", esm.context());
    // Every record's entry is in a pack, for the sweeps: an expired item's (deleted or, the
    // moved item's first, deleting nothing) in a pack due just after it was indexed, for the
    // next sweep to judge; the live ones' at their ttl.
    let entries = index_entries(&client, &index).await;
    assert_eq!(entries, app.entries(), "{}", esm.context());
    let packed = contents_of(scan_all(&client, &index).await).packed;
    assert_eq!(packed.len(), entries.len(), "{packed:?}");
    for ((id, ttl), due) in packed {
        let soon = ttl < now && (now * 1000..drained.millis() + 3000).contains(&due);
        let at_ttl = ttl > now && due == ttl * 1000;
        assert!(soon || at_ttl, "{id} ({ttl}) due {due}");
    }
    // The batches' log lines count what went at once.
    let log = indexer.log_text();
    let deleted: u64 = (log.lines())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|l| {
            let field = |v: &Value| v.get("deleted_at_once").and_then(Value::as_u64);
            field(&l).or_else(|| l.get("fields").and_then(field))
        })
        .sum();
    assert_eq!(deleted, 12, "{log}");
    indexer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_mapping_ttl_only_items_expire_with_a_sub_second_lag_and_leave_no_entry_unjudged(
) {
    const PERIOD: u64 = 5;
    let (client, table, index) = indexed_table("esm_lag", StreamViewType::NewAndOldImages).await;
    let indexer = function(&table, &index, &endpoint(), "lag-indexer", &[]).await;
    let period = PERIOD.to_string();
    let settings = [
        ("TICK_SECONDS", "1"),
        ("SCHEDULE_SECONDS", &period),
        ("METRICS_NAMESPACE", "TtlSweeperTest"),
    ];
    let ticking = function(&table, &index, &endpoint(), "lag-sweeper", &settings).await;
    let mut stream = Stream::of(&client, &table).await;
    let mut esm = Esm::new(&indexer, BATCH_SIZE);

    // One scheduled invocation: it ticks for the period and the 10 s handoff overlap. Items due
    // from 4 s after it, 4 a second.
    let first = now() + 1;
    ticking.run_schedule(&runtime_api::Schedule {
        first,
        period: Duration::from_secs(PERIOD),
        count: 1,
        max_delay: Duration::ZERO,
        seed: 1,
    });
    let mut ttls: HashMap<String, i64> = HashMap::new();
    let mut items = Vec::new();
    for t in first + 4..first + 10 {
        for j in 0..4 {
            let id = format!("t-{t}-{j}");
            items.push(unwindowed(&id, t));
            ttls.insert(id, t);
        }
    }
    put_many(&client, &table, items).await;

    // The mapping delivers what the stream gives; the table is watched for each item's delete.
    let mut gone: HashMap<String, f64> = HashMap::new();
    let started = Instant::now();
    while gone.len() < ttls.len() && started.elapsed() < Duration::from_secs(30) {
        if stream.read().await > 0 {
            let records = stream.records.clone();
            esm.drain(&records).await;
        }
        let present = id_set(&client, &table).await;
        let at = wall_clock();
        for id in ttls.keys().filter(|id| !present.contains(*id)) {
            gone.entry(id.clone()).or_insert(at);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left: Vec<&String> = ttls.keys().filter(|id| !gone.contains_key(*id)).collect();
    let (context, log) = (esm.context(), ticking.log_text());
    assert!(left.is_empty(), "left: {left:?}\n{context}\n{log}");
    assert!(esm.destination.is_empty(), "{}", esm.context());
    let mut lags: Vec<f64> = (gone.iter()).map(|(id, at)| at - ttls[id] as f64).collect();
    lags.sort_by(f64::total_cmp);
    let (best, worst) = (lags[0], lags[lags.len() - 1]);
    eprintln!("lag from ttl to gone, through the mapping: {best:.3}–{worst:.3} s");
    // Never before the ttl; sub-second on a quiet machine (docs/BENCHMARKS.md), the bound leaves
    // room for a busy one.
    assert!(best > 0.0, "deleted before its ttl: lags {lags:?}");
    assert!(worst < 1.5, "lags {lags:?}");
    // Each entry was judged by the tick that deleted its item: the ticks' cursor passed every
    // pack. The packs stay, for native TTL.
    let mut entries = unjudged_entries(&client, &index).await;
    let since = Instant::now();
    while !entries.is_empty() && since.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        entries = unjudged_entries(&client, &index).await;
    }
    assert!(entries.is_empty(), "{entries:?}\n{}", ticking.log_text());
    let mut written: Vec<(String, i64)> = ttls.into_iter().collect();
    written.sort();
    assert_eq!(listed_once(&client, &index).await, written);
    indexer.stop();
    ticking.stop();
}
