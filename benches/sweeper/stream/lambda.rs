//! The stream part's Lambda path (`followStream` as the construct deploys it): the release Lambda
//! binary twice under the local Lambda Runtime API (tests/support/runtime_api.rs), the sweeper
//! ticking every second on a schedule and the stream indexer fed DynamoDB Local's real stream by
//! an emulated event source mapping (tests/support/esm.rs), both on the expiry index table and
//! both reaching DynamoDB through the delete-recording proxy of the daemon's rows. The lag from
//! ttl (or from the write, for items written already expired) to DynamoDB's acknowledged delete.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::{early, lags_of, own_server, stop_server, tables, until_deleted, Settings, Written};
use super::{DUE_IN, EXPIRED_FOR};
use crate::daemon::{lag_percentiles, lag_spread, release_binary, secs, Lags};
use crate::support::esm::{item, sequence, Answer, Esm, Stream};
use crate::support::recorder::DeleteRecorder;
use crate::support::runtime_api::{Options, Outcome, RuntimeApi, Schedule};
use crate::support::*;

/// Records per batch of the construct's mapping (`batchSize`; its batching window is 0).
pub const BATCH_SIZE: usize = 100;
/// How long the emulated mapping waits after a poll of the shard that gave nothing (Lambda polls
/// a stream's shards four times a second).
pub const POLL: Duration = Duration::from_millis(250);
/// The sweeper's schedule period (`SCHEDULE_SECONDS`), s: the deployed shape's default in the
/// sub-second rows. Each invocation ticks until 10 s after the next one's scheduled time.
pub const PERIOD: i64 = 10;
/// Each scheduled event arrives after a seeded random delay of 0 to this many seconds.
pub const MAX_DELAY: i64 = 5;
/// The indexer's timeout (the construct's), s.
const INDEXER_TIMEOUT: u64 = 30;

/// One run of the Lambda path.
pub struct LambdaRun {
    /// Due items (lag from ttl) and items written already expired (lag from the write).
    pub due: Lags,
    pub expired: Lags,
    /// Due items deleted before their ttl.
    pub early: usize,
    /// Records the mapping delivered (those its filter passed), its invocations of the indexer,
    /// those not answered with a clean success, records sent to the on-failure destination.
    pub records: usize,
    pub batches: usize,
    pub failed_batches: usize,
    pub discarded: usize,
    /// From each item's `PutItem` acknowledgement to the end of the indexer's invocation that
    /// succeeded with its record (s): the largest, and the items never indexed.
    pub indexed_max: f64,
    pub not_indexed: usize,
    /// The sweeper's invocations: started, and failed or timed out (init errors included).
    pub invocations: usize,
    pub failed_invocations: usize,
    /// The largest `lag_p99_ms` and `lag_max_ms` of the sweeper's tick lines.
    pub sweeper_p99_ms: u64,
    pub sweeper_max_ms: u64,
}

/// The Lambda binary for `table` and its expiry index table `index`, reaching DynamoDB at
/// `endpoint`, with `more` settings, as `environments` execution environments; its logs in
/// target/bench-servers/stream-lambda-`name` (emptied first).
async fn function(
    name: &str,
    table: &str,
    index: &str,
    endpoint: &str,
    more: &[(&str, String)],
    environments: usize,
    timeout: Duration,
) -> RuntimeApi {
    let log_dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("target/bench-servers/stream-lambda-{name}"));
    let _ = std::fs::remove_dir_all(&log_dir);
    let mut settings = vec![
        ("TABLE_NAME", table.to_owned()),
        ("EXPIRY_INDEX_TABLE", index.to_owned()),
        ("AWS_ENDPOINT_URL", endpoint.to_owned()),
    ];
    settings.extend(more.iter().cloned());
    RuntimeApi::start(Options {
        binary: release_binary("ttl-sweeper-lambda"),
        environments,
        timeout,
        env: local_env(settings),
        log_dir,
        function_name: format!("ttl-sweeper-bench-{name}"),
    })
    .await
}

/// Whether the construct's mapping filter passes `record` to the function: an `INSERT` or a
/// `MODIFY` whose new image has a Number `ttl`.
fn passes(record: &Value) -> bool {
    matches!(record["eventName"].as_str(), Some("INSERT" | "MODIFY"))
        && record["dynamodb"]["NewImage"]["ttl"]["N"].is_string()
}

/// The largest `lag_p99_ms` and `lag_max_ms` of the tick lines (`tick finished`) in `log`.
fn sweeper_lags(log: &str) -> (u64, u64) {
    let lines = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok());
    let ticks = lines.filter(|l| {
        l["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("tick finished"))
    });
    ticks.fold((0, 0), |(p99, max), l| {
        let field = |name: &str| l[name].as_u64().unwrap_or(0);
        (p99.max(field("lag_p99_ms")), max.max(field("lag_max_ms")))
    })
}

/// One run, on a DynamoDB Local of its own: a table with a stream and no GSI and its expiry
/// index table; the sweeper (`TICK_SECONDS=1`, two environments) invoked on a schedule every
/// [`PERIOD`] s, the events [`MAX_DELAY`] s late at most; the indexer (one environment) invoked by
/// the emulated mapping. Once the first scheduled invocation has started, for `lag_secs` s, each
/// second `due_per_sec` items due [`DUE_IN`] s after the second and `expired_per_sec` expired
/// [`EXPIRED_FOR`] s before it, all with only a ttl, written one `PutItem` at a time, evenly
/// spaced.
async fn run(s: &Settings, seed: u64) -> LambdaRun {
    let server = own_server().await;
    let client = client_of(&server.endpoint).await;
    let t = tables(&client, "lambdalag").await;
    let recorder = DeleteRecorder::start(&server.endpoint).await;
    let acks = recorder.acks.clone();
    let timeout = Duration::from_secs(INDEXER_TIMEOUT);
    let indexer = function(
        "indexer",
        &t.plain,
        &t.index,
        &recorder.endpoint,
        &[],
        1,
        timeout,
    )
    .await;
    let ticking = [
        ("TICK_SECONDS", "1".to_owned()),
        ("SCHEDULE_SECONDS", PERIOD.to_string()),
    ];
    // The construct's default timeout in tick mode: the period plus 20 s.
    let timeout = Duration::from_secs(PERIOD as u64 + 20);
    let sweeper = function(
        "sweeper",
        &t.plain,
        &t.index,
        &recorder.endpoint,
        &ticking,
        2,
        timeout,
    )
    .await;

    // Events from the next second on, for as long as the run can last: the writes, the last
    // ttl, and 15 s more at most.
    let first = now() + 1;
    let count = (s.lag_secs + DUE_IN + 15 + MAX_DELAY + 5) / PERIOD + 2;
    sweeper.run_schedule(&Schedule {
        first,
        period: Duration::from_secs(PERIOD as u64),
        count: count as usize,
        max_delay: Duration::from_secs(MAX_DELAY as u64),
        seed: 0x1a3b + seed,
    });

    let done = AtomicBool::new(false);
    // The mapping: polls the shard, and delivers what its filter passes in batches, one
    // invocation at a time; polls again at once after records, after [`POLL`] after none.
    let mapping = async {
        let mut stream = Stream::at(&server.endpoint, &client, &t.plain).await;
        let mut esm = Esm::new(&indexer, BATCH_SIZE);
        let mut delivered: Vec<Value> = Vec::new();
        while !done.load(Ordering::Relaxed) {
            let polled = Instant::now();
            let before = stream.records.len();
            if stream.read().await > 0 {
                let new = stream.records[before..].iter().filter(|r| passes(r));
                delivered.extend(new.cloned());
                esm.drain(&delivered).await;
            } else {
                tokio::time::sleep_until(polled + POLL).await;
            }
        }
        (esm, delivered)
    };
    let writer = async {
        let deadline = Instant::now() + Duration::from_secs(60);
        while sweeper.invocations().iter().all(|i| i.start.is_none()) {
            assert!(
                Instant::now() < deadline,
                "the first scheduled invocation did not start:\n{}",
                sweeper.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let per_sec = s.due_per_sec + s.expired_per_sec;
        let gap = Duration::from_secs_f64(1.0 / per_sec as f64);
        let mut written = Vec::new();
        let start = Instant::now();
        for k in 0..s.lag_secs * per_sec {
            tokio::time::sleep_until(start + gap * k as u32).await;
            let expired = s.expired(k % per_sec);
            let second = now();
            let ttl = if expired {
                second - EXPIRED_FOR
            } else {
                second + DUE_IN
            };
            let id = format!("l{}-{k}", if expired { "x" } else { "d" });
            put_one(&client, &t.plain, unwindowed(&id, ttl)).await;
            written.push(Written {
                id,
                kind: 0,
                expired,
                ttl,
                at: wall_clock(),
            });
        }
        until_deleted(&written, &acks).await;
        done.store(true, Ordering::Relaxed);
        written
    };
    let ((esm, delivered), written) = tokio::join!(mapping, writer);

    let swept = sweeper.stop();
    let (sweeper_p99_ms, sweeper_max_ms) = sweeper_lags(&sweeper.log_text());
    let failed_invocations = swept
        .invocations
        .iter()
        .filter(|i| matches!(i.outcome, Outcome::Failed(_) | Outcome::TimedOut))
        .count()
        + swept.init_errors.len();
    if failed_invocations > 0 {
        eprintln!(
            "Lambda path: failed sweeper invocations:\n{}\ninit errors: {:?}\nlogs: {:?}",
            swept.describe(first as f64),
            swept.init_errors,
            sweeper.logs()
        );
    }
    let clean = |a: &Answer| *a == Answer::Failures(Vec::new());
    let failed_batches = esm.deliveries.iter().filter(|d| !clean(&d.answer)).count();
    if failed_batches > 0 || !esm.destination.is_empty() {
        eprintln!("Lambda path: the mapping's deliveries:\n{}", esm.context());
    }
    // When each item's record was delivered in a batch the indexer answered with success.
    let by_sequence: HashMap<&str, &str> =
        delivered.iter().map(|r| (sequence(r), item(r))).collect();
    let mut indexed: HashMap<&str, f64> = HashMap::new();
    for d in esm.deliveries.iter().filter(|d| clean(&d.answer)) {
        let Some(end) = d.invocation.end else {
            continue;
        };
        for s in &d.sequences {
            indexed.entry(by_sequence[s.as_str()]).or_insert(end);
        }
    }
    let indexed_lags: Vec<f64> = written
        .iter()
        .filter_map(|w| indexed.get(w.id.as_str()).map(|at| at - w.at))
        .collect();
    let acks = acks.lock().unwrap().clone();
    let result = LambdaRun {
        due: lags_of(&written, &acks, 0, false),
        expired: lags_of(&written, &acks, 0, true),
        early: early(&written, &acks),
        records: delivered.len(),
        batches: esm.deliveries.len(),
        failed_batches,
        discarded: esm.destination.len(),
        indexed_max: indexed_lags.iter().copied().fold(f64::NAN, f64::max),
        not_indexed: written.len() - indexed_lags.len(),
        invocations: swept.started().count(),
        failed_invocations,
        sweeper_p99_ms,
        sweeper_max_ms,
    };
    drop(esm);
    indexer.stop();
    drop(recorder);
    stop_server(server).await;
    result
}

/// The runs, each printed as it ends.
pub async fn measure(s: &Settings) -> Vec<LambdaRun> {
    let mut runs = Vec::new();
    for i in 0..s.lag_runs {
        let r = run(s, i as u64).await;
        for (what, l) in [("due", &r.due), ("written expired", &r.expired)] {
            eprintln!("Lambda path, run {}, {what}: {}", i + 1, l.line());
        }
        eprintln!(
            "Lambda path, run {}: {} deleted before their ttl; mapping: {} records in {} batches ({} not a clean success), {} to the destination, indexed within {:.3} s ({} never); sweeper: {} invocations ({} failed), its tick lines' largest lag_p99_ms {}, lag_max_ms {}",
            i + 1,
            r.early,
            r.records,
            r.batches,
            r.failed_batches,
            r.discarded,
            r.indexed_max,
            r.not_indexed,
            r.invocations,
            r.failed_invocations,
            r.sweeper_p99_ms,
            r.sweeper_max_ms
        );
        runs.push(r);
    }
    runs
}

/// The Lambda path's rows, in Markdown.
pub fn render(d: &mut String, s: &Settings, own_servers: bool, runs: &[LambdaRun]) {
    let _ = writeln!(
        d,
        "**On Lambda** (`followStream`): the release Lambda binary under the local Lambda Runtime API, each run on {}a new table with a stream: the sweeper as in the deployed shape, the indexer fed by an event source mapping emulated as the construct configures it (`tests/support/esm.rs`: batches of up to {BATCH_SIZE}, no batching window). Items and lag as above ({} s; each second {} due, {} expired), all with only a ttl.\n",
        crate::when(own_servers, "its own DynamoDB Local, "),
        s.lag_secs,
        s.due_per_sec,
        s.expired_per_sec
    );
    crate::table_head(d, "| run | items | never deleted | deleted before ttl | deleted by `DeleteItem` | p50 lag | p99 lag | max lag |");
    type Of = fn(&LambdaRun) -> &Lags;
    // The items, their lags, and whether they were due (a delete before the ttl counts).
    let rows: [(&str, Of, bool); 2] = [
        ("due 2–3 s after the write", |r| &r.due, true),
        ("written already expired", |r| &r.expired, false),
    ];
    for (what, of, due) in rows {
        for (i, r) in runs.iter().enumerate() {
            let (l, early) = (of(r), due.then(|| r.early.to_string()));
            let _ = writeln!(
                d,
                "| {} | {} {what} | {} | {} | {} | {} |",
                i + 1,
                l.items,
                l.missed(),
                early.as_deref().unwrap_or("–"),
                l.one_by_one,
                lag_percentiles(l)
            );
        }
    }
    let _ = writeln!(d, "\n**min / median / max over {} runs**:\n", runs.len());
    crate::table_head(d, "| items | p50 lag | p99 lag | max lag |");
    for (what, of, _) in rows {
        let lags: Vec<&Lags> = runs.iter().map(of).collect();
        let _ = writeln!(d, "| {what} | {} |", lag_spread(&lags));
    }
    let path = "Lambda (the stream indexer's function)";
    let pairs: Vec<_> = runs.iter().map(|r| (&r.due, &r.expired)).collect();
    super::index_goals(d, path, &pairs, super::DUE_SOON_P99_BEFORE_LAMBDA);
    let _ = writeln!(
        d,
        "\n| run | records delivered (batches; not a clean success) | to the on-failure destination | indexed within (slowest item, from its write to the end of the invocation that took it) | sweeper invocations started (failed) | the sweeper's tick lines: largest `lag_p99_ms`, `lag_max_ms` |"
    );
    let _ = writeln!(d, "|---|---|---|---|---|---|");
    for (i, r) in runs.iter().enumerate() {
        let _ = writeln!(
            d,
            "| {} | {} ({}; {}) | {} | {}{} | {} ({}) | {} ms, {} ms |",
            i + 1,
            r.records,
            r.batches,
            r.failed_batches,
            r.discarded,
            secs(r.indexed_max),
            if r.not_indexed > 0 {
                format!(", {} never", r.not_indexed)
            } else {
                String::new()
            },
            r.invocations,
            r.failed_invocations,
            r.sweeper_p99_ms,
            r.sweeper_max_ms
        );
    }
    let early: usize = runs.iter().map(|r| r.early).sum();
    let _ = writeln!(
        d,
        "\nRecords are indexed well before a due item's ttl (*indexed within*), so its lag is the tick's; an item written expired waits for its record and the next tick. Deleted before their ttl: {early}.\n"
    );
}
