//! `make demo`: watch expired items disappear from a local DynamoDB table.
//!
//! Creates an application's table with a stream and nothing of the sweeper's (no GSI, no window
//! attribute; native TTL left off, so only the sweeper deletes) and the sweeper's own expiry index
//! table beside it. An application that writes only its own attributes and a ttl writes items
//! expiring over the next ~30 s, items written already expired, items that must survive and items
//! without a ttl. The stream indexer follows the table's stream and writes an entry per item into
//! the index table, as `ttl-sweeper run --follow-stream` (or the Lambda's stream mapping) does;
//! tick mode sweeps as a deployed function does (`TICK_SECONDS=1`: a sweep just after every
//! second, as of the clock to the millisecond, with a full sweep beside it), printing what each
//! tick deleted and how late, and at the end what native TTL would have done. Exits non-zero
//! unless every expired item is gone, every survivor is intact, every entry of a deleted item was
//! removed from the index, and the worst lag stayed under [`LAG_BOUND`] (a few ticks, for a busy
//! machine; it is tens of milliseconds on an idle one).
//!
//! With `AWS_ENDPOINT_URL_SQS` set (the Makefile starts moto for it), it also creates an SQS
//! queue, has the sweeper publish an expiry event per deleted item there
//! (`EXPIRY_EVENTS=sqs:<queue URL>`), and prints the events as they arrive; their `lag_ms` gives
//! the lag of each kind of writer.
//!
//! Uses the standard AWS environment (`AWS_ENDPOINT_URL`, `AWS_REGION`, credentials); the
//! Makefile points it at the DynamoDB Local it starts.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue as AV, BillingMode, KeySchemaElement, KeyType, PutRequest,
    ScalarAttributeType, Select, StreamSpecification, StreamViewType, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use tokio_util::sync::CancellationToken;
use ttl_sweeper::config::Config;
use ttl_sweeper::engine::{run_ticks, Stop, SweepReport, Ticks};
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::index::follow::{Follower, Gathering};
use ttl_sweeper::store::stream::StreamClient;
use ttl_sweeper::store::{entries, packs};

const TABLE: &str = "ttl-sweeper-demo";
/// The sweeper's own expiry index table (`EXPIRY_INDEX_TABLE`).
const INDEX_TABLE: &str = "ttl-sweeper-demo-expiry-index";
const EXPIRING: i64 = 300;
/// Items written already expired (their ttl the second the demo starts writing them): deleted by
/// the first tick after their entry is written.
const WRITTEN_EXPIRED: i64 = 20;
const SURVIVORS: i64 = 50;
const NO_TTL: i64 = 10;
const SPREAD_SECS: i64 = 30;
/// The tick period, as `TICK_SECONDS=1`.
const TICK: Duration = Duration::from_secs(1);
/// The first items expire this long after the demo starts writing them (writing 360 items takes
/// seconds on a busy machine), once everything is set up.
const LEAD_SECS: i64 = 10;
/// The worst lag the demo accepts. A tick at `s + 0.02` deletes what expired before it, so lags
/// stay well under the tick period; a machine busy with other work delays ticks, so the bound is
/// a few ticks (tests/precision.rs and docs/BENCHMARKS.md measure the lag itself).
const LAG_BOUND: Duration = Duration::from_secs(5);
const QUEUE: &str = "ttl-sweeper-demo-events";
/// Events printed in full, one line each; the rest are counted.
const EVENTS_SHOWN: usize = 5;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let shared = aws_config::load_from_env().await;
    let client = Client::new(&shared);
    create_table(&client).await?;

    // With a local SQS endpoint: a queue for the expiry events, and a reader printing them.
    let events = match std::env::var("AWS_ENDPOINT_URL_SQS") {
        Ok(_) => Some(EventReader::start(aws_sdk_sqs::Client::new(&shared)).await?),
        Err(_) => None,
    };

    // The demo's table, and any other setting from the environment, as the Lambda would read it.
    let expiry_events = events.as_ref().map(|e| format!("sqs:{}", e.queue_url));
    let config = Config::from_lookup(|var| match var {
        "TABLE_NAME" => Some(TABLE.to_owned()),
        "EXPIRY_INDEX_TABLE" => Some(INDEX_TABLE.to_owned()),
        "EXPIRY_EVENTS" => expiry_events.clone().or_else(|| std::env::var(var).ok()),
        _ => std::env::var(var).ok(),
    })?;
    if let Some(e) = &events {
        println!(
            "expiry events go to SQS queue {} (EXPIRY_EVENTS=sqs:<queue URL>); the first \
             {EVENTS_SHOWN} are shown as they arrive, then counted\n",
            e.queue_url
        );
    }
    // Deletion times (lag, the events' `deleted_at`) from the wall clock, as the CLI and the
    // Lambda measure them.
    let wall = || Timestamp::from_datetime(chrono::Utc::now());
    let connected = ttl_sweeper::connect(std::slice::from_ref(&config), wall).await?;
    let sweeper = (connected.tables[0].sweeper().await).map_err(|e| anyhow::anyhow!(e.message))?;
    let streams = StreamClient::from_env().await;
    let (store, schema, hold) = (sweeper.store(), sweeper.schema(), Gathering::default());
    let follower = Follower::open(store, streams, schema, None, hold).await?;
    // Everything is set up: the items expire from LEAD_SECS from now, ticking starts at once.
    let start = chrono::Utc::now().timestamp();
    let mut items = Vec::new();
    for i in 0..EXPIRING {
        let ttl = start + LEAD_SECS + i % SPREAD_SECS;
        items.push(item(&format!("session-{i:03}"), Some(ttl)));
    }
    for i in 0..WRITTEN_EXPIRED {
        items.push(item(&format!("session-late-{i:02}"), Some(start)));
    }
    for i in 0..SURVIVORS {
        let ttl = start + 3600 + i;
        items.push(item(&format!("survivor-{i:02}"), Some(ttl)));
    }
    for i in 0..NO_TTL {
        items.push(item(&format!("no-ttl-{i:02}"), None));
    }
    put_all(&client, items).await?;
    println!(
        "wrote {EXPIRING} items expiring from {LEAD_SECS} s to {} s after the start, \
         {WRITTEN_EXPIRED} already expired, {SURVIVORS} expiring in an hour, {NO_TTL} without a \
         ttl, each with only the application's attributes and a ttl; the stream indexer writes \
         their entries into {INDEX_TABLE}; tick mode: a sweep every {} s\n",
        LEAD_SECS + SPREAD_SECS - 1,
        TICK.as_secs()
    );

    println!(
        "{:>6}  {:>7}  {:>9}  {:>9}",
        "time", "deleted", "lag p50", "lag max"
    );

    // Tick until the last item has expired and a tick after it has run.
    let clock = || Timestamp::from_datetime(chrono::Utc::now());
    let now = clock();
    let left_ms = (start + LEAD_SECS + SPREAD_SECS + 1) * 1000 - now.millis();
    let ticks = Ticks {
        every: TICK,
        full_every: Duration::from_secs(60),
        until: Some(tokio::time::Instant::now() + Duration::from_millis(left_ms.max(0) as u64)),
    };
    let on_tick = |r: &SweepReport| {
        if r.items_deleted > 0 || !r.is_success() {
            println!(
                "{:>5.1}s  {:>7}  {:>8.3}s  {:>8.3}s{}",
                (clock().millis() - start * 1000) as f64 / 1000.0,
                r.items_deleted,
                r.lag.p50_ms as f64 / 1000.0,
                r.lag.max_ms as f64 / 1000.0,
                if r.is_success() { "" } else { "  (failed)" }
            );
        }
    };
    let done = CancellationToken::new();
    let sweeps = async {
        let report = run_ticks(sweeper, now, &clock, &ticks, &Stop::never(), on_tick).await;
        done.cancel();
        report
    };
    let follow_stop = Stop::never().with_cancel(done.clone());
    let follow = follower.run(sweeper, &clock, &follow_stop, &|_| {});
    let (report, followed) = tokio::join!(sweeps, follow);
    anyhow::ensure!(
        report.is_success(),
        "sweep failed: {}",
        serde_json::to_string(&report)?
    );
    // Deleted by the sweeps, and by the stream indexer as it indexed items written expired.
    let total_deleted = report.items_deleted + followed.index.deleted_at_once;
    let (expired_left, pending) = count_sessions(&client, clock().secs()).await?;
    if let Some(e) = &events {
        e.settle(total_deleted).await;
    }

    let survivors = count_prefix(&client, "survivor-").await?;
    let untimed = count_prefix(&client, "no-ttl-").await?;
    let sessions = count_prefix(&client, "session-").await?;
    println!("\nsummary");
    let expected = (EXPIRING + WRITTEN_EXPIRED) as u64;
    let (packs_left, packs_expiring) = count_packs(&client).await?;
    println!(
        "  expired items deleted : {total_deleted} of {expected} in {} ticks (left: {sessions}, \
         of which expired {expired_left}, not yet due {pending})",
        report.ticks
    );
    println!(
        "  expiry lag            : p50 {:.3} s, p99 {:.3} s, max {:.3} s (ticks every {} s)",
        report.lag.p50_ms as f64 / 1000.0,
        report.lag.p99_ms as f64 / 1000.0,
        report.lag.max_ms as f64 / 1000.0,
        TICK.as_secs()
    );
    if let Some(e) = &events {
        let lags = e.lags();
        let at = |p: f64| lags.get(((lags.len() as f64 * p).ceil() as usize).saturating_sub(1));
        if let (Some(p50), Some(p99), Some(max)) = (at(0.5), at(0.99), lags.last()) {
            println!(
                "    from expiry events  : p50 {p50:.3} s, p99 {p99:.3} s, max {max:.3} s ({} \
                 items; those written already expired count from the second they were written)",
                lags.len()
            );
        }
    }
    println!(
        "  stream indexer        : {} records read, {} entries written ({} of items written \
         already expired), {} records failed",
        followed.index.records,
        followed.index.entries_written,
        followed.index.expired_when_written,
        followed.skipped_records
    );
    println!(
        "  expiry index          : {packs_left} packs, written once and never removed one by one \
         ({} entries removed), {packs_expiring} of them with `expires` for the index table's \
         native TTL",
        report.index_entries_removed
    );
    println!(
        "  native TTL instead    : these {expected} items would be deleted \"within a few days of \
         their expiration time\" (DynamoDB developer guide), showing up in reads until then"
    );
    println!("  survivors untouched   : {survivors} of {SURVIVORS}");
    println!("  items without a ttl   : {untimed} of {NO_TTL}");
    let events_ok = match &events {
        None => true,
        Some(e) => {
            let seen = e.seen.lock().unwrap();
            let items: HashSet<&String> = seen.values().collect();
            println!(
                "  expiry events         : {} received, {} items, {} distinct ids, {} for \
                 items that were not expired",
                seen.len() + e.duplicates(),
                items.len(),
                seen.len(),
                e.unexpected()
            );
            items.len() == expected as usize
                && seen.len() == expected as usize
                && e.unexpected() == 0
        }
    };
    let with_ttl = (EXPIRING + WRITTEN_EXPIRED + SURVIVORS) as u64;
    let ok = sessions == 0
        && total_deleted == expected
        && Duration::from_millis(report.lag.max_ms) < LAG_BOUND
        && survivors == SURVIVORS as usize
        && untimed == NO_TTL as usize
        && followed.index.entries_written == with_ttl
        && packs_left > 0
        && packs_expiring == packs_left
        && followed.skipped_records == 0
        && events_ok;
    println!(
        "  result                : {}",
        if ok { "OK" } else { "FAILED" }
    );
    anyhow::ensure!(ok, "demo invariants violated");
    Ok(())
}

/// An item with the application's attributes and, if given, a ttl: nothing of the sweeper's.
fn item(id: &str, ttl: Option<i64>) -> HashMap<String, AV> {
    let mut item = HashMap::from([
        ("id".to_string(), AV::S(id.into())),
        ("payload".to_string(), AV::S(format!("data for {id}"))),
    ]);
    if let Some(ttl) = ttl {
        item.insert("ttl".into(), AV::N(ttl.to_string()));
    }
    item
}

async fn create_table(client: &Client) -> anyhow::Result<()> {
    for table in [TABLE, INDEX_TABLE] {
        if client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .is_ok()
        {
            client.delete_table().table_name(table).send().await?;
        }
    }
    let attr = |n: &str, t: ScalarAttributeType| {
        AttributeDefinition::builder()
            .attribute_name(n)
            .attribute_type(t)
            .build()
    };
    let key = |n: &str, t: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(n)
            .key_type(t)
            .build()
    };
    client
        .create_table()
        .table_name(TABLE)
        .attribute_definitions(attr("id", ScalarAttributeType::S)?)
        .key_schema(key("id", KeyType::Hash)?)
        .billing_mode(BillingMode::PayPerRequest)
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()?,
        )
        .send()
        .await?;
    client
        .create_table()
        .table_name(INDEX_TABLE)
        .attribute_definitions(attr("window", ScalarAttributeType::S)?)
        .attribute_definitions(attr("entry", ScalarAttributeType::S)?)
        .key_schema(key("window", KeyType::Hash)?)
        .key_schema(key("entry", KeyType::Range)?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await?;
    println!(
        "created table {TABLE} with a stream (NEW_AND_OLD_IMAGES), no GSI and native TTL off, \
         and the sweeper's expiry index table {INDEX_TABLE} (window, entry)"
    );
    Ok(())
}

/// Entries in the expiry index table.
/// The packs in the expiry index table (items listing `keys`), and how many carry `expires`.
async fn count_packs(client: &Client) -> anyhow::Result<(usize, usize)> {
    let mut pages = client
        .scan()
        .table_name(INDEX_TABLE)
        .consistent_read(true)
        .into_paginator()
        .items()
        .send();
    let (mut packs, mut expiring) = (0, 0);
    while let Some(item) = pages.next().await {
        let item = item?;
        if item.contains_key(packs::KEYS) {
            packs += 1;
            expiring += usize::from(item.contains_key(entries::EXPIRES));
        }
    }
    Ok((packs, expiring))
}

async fn put_all(client: &Client, items: Vec<HashMap<String, AV>>) -> anyhow::Result<()> {
    for chunk in items.chunks(25) {
        let mut requests: Vec<WriteRequest> = chunk
            .iter()
            .map(|i| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(i.clone()))
                            .build()
                            .expect("item"),
                    )
                    .build()
            })
            .collect();
        while !requests.is_empty() {
            let out = client
                .batch_write_item()
                .request_items(TABLE, requests)
                .send()
                .await?;
            requests = out
                .unprocessed_items
                .and_then(|mut m| m.remove(TABLE))
                .unwrap_or_default();
        }
    }
    Ok(())
}

/// Sessions present: (expired at `now`, not yet due).
async fn count_sessions(client: &Client, now: i64) -> anyhow::Result<(usize, usize)> {
    let mut expired = 0;
    let mut pending = 0;
    let mut start = None;
    loop {
        let page = client
            .scan()
            .table_name(TABLE)
            .filter_expression("begins_with(id, :p)")
            .expression_attribute_values(":p", AV::S("session-".into()))
            .set_exclusive_start_key(start)
            .consistent_read(true)
            .send()
            .await?;
        for item in page.items() {
            let ttl: i64 = item["ttl"]
                .as_n()
                .map_err(|_| anyhow::anyhow!("ttl"))?
                .parse()?;
            if ttl < now {
                expired += 1;
            } else {
                pending += 1;
            }
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            return Ok((expired, pending));
        }
    }
}

async fn count_prefix(client: &Client, prefix: &str) -> anyhow::Result<usize> {
    let out = client
        .scan()
        .table_name(TABLE)
        .filter_expression("begins_with(id, :p)")
        .expression_attribute_values(":p", AV::S(prefix.into()))
        .select(Select::Count)
        .consistent_read(true)
        .send()
        .await?;
    Ok(out.count() as usize)
}

/// Reads the demo's expiry events from SQS as they arrive and prints the first few.
struct EventReader {
    queue_url: String,
    /// Event id → item id.
    seen: Arc<Mutex<HashMap<String, String>>>,
    /// Item id → the lag its event reports (s).
    lag: Arc<Mutex<HashMap<String, f64>>>,
    counts: Arc<Mutex<(usize, usize)>>, // (duplicates, events for items not named session-*)
}

impl EventReader {
    async fn start(sqs: aws_sdk_sqs::Client) -> anyhow::Result<EventReader> {
        let queue_url = sqs
            .create_queue()
            .queue_name(QUEUE)
            .send()
            .await?
            .queue_url
            .ok_or_else(|| anyhow::anyhow!("CreateQueue returned no URL"))?;
        sqs.purge_queue().queue_url(&queue_url).send().await?;
        let reader = EventReader {
            queue_url: queue_url.clone(),
            seen: Arc::default(),
            lag: Arc::default(),
            counts: Arc::default(),
        };
        let (seen, counts) = (reader.seen.clone(), reader.counts.clone());
        let lag = reader.lag.clone();
        tokio::spawn(async move {
            loop {
                let Ok(got) = sqs
                    .receive_message()
                    .queue_url(&queue_url)
                    .max_number_of_messages(10)
                    .wait_time_seconds(1)
                    .send()
                    .await
                else {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                };
                let mut done = sqs.delete_message_batch().queue_url(&queue_url);
                let messages = got.messages.unwrap_or_default();
                for (i, m) in messages.iter().enumerate() {
                    let body: serde_json::Value =
                        serde_json::from_str(m.body().unwrap_or_default()).unwrap_or_default();
                    let detail = &body["detail"];
                    let id = detail["id"].as_str().unwrap_or_default().to_owned();
                    let item = detail["key"]["id"]["S"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let lag_s = detail["lag_ms"].as_f64().unwrap_or_default() / 1000.0;
                    lag.lock().unwrap().insert(item.clone(), lag_s);
                    let mut seen = seen.lock().unwrap();
                    let mut counts = counts.lock().unwrap();
                    if !item.starts_with("session-") {
                        counts.1 += 1;
                    }
                    if seen.insert(id.clone(), item.clone()).is_some() {
                        counts.0 += 1;
                    } else if seen.len() <= EVENTS_SHOWN {
                        println!(
                            "  event  {}  {item}  ttl {}  deleted_at {}  lag {:.1} s  id {}…",
                            body["detail-type"].as_str().unwrap_or_default(),
                            detail["ttl"],
                            detail["deleted_at"].as_str().unwrap_or_default(),
                            detail["lag_ms"].as_f64().unwrap_or_default() / 1000.0,
                            &id[..id.len().min(12)],
                        );
                    }
                    done = done.entries(
                        aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                            .id(i.to_string())
                            .receipt_handle(m.receipt_handle().unwrap_or_default())
                            .build()
                            .expect("entry"),
                    );
                }
                if !messages.is_empty() {
                    let _ = done.send().await;
                }
            }
        });
        Ok(reader)
    }

    /// Distinct events received, after waiting (up to 2 s) for the `deleted` so far to arrive.
    async fn settle(&self, deleted: u64) -> usize {
        for _ in 0..20 {
            if self.seen.lock().unwrap().len() as u64 >= deleted {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.seen.lock().unwrap().len()
    }

    /// The lags the events report, sorted.
    fn lags(&self) -> Vec<f64> {
        let mut lags: Vec<f64> = self.lag.lock().unwrap().values().copied().collect();
        lags.sort_by(f64::total_cmp);
        lags
    }

    fn duplicates(&self) -> usize {
        self.counts.lock().unwrap().0
    }

    fn unexpected(&self) -> usize {
        self.counts.lock().unwrap().1
    }
}
