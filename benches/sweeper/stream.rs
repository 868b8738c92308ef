//! Section 1 of docs/BENCHMARKS.md, its "Writers unchanged: the expiry index table" part: the
//! release daemon against DynamoDB Local and its stream. The lag from ttl to acknowledged delete
//! of items whose writers set the window beside the ttl (a table with the GSI, `run --every 1s`)
//! and of items written with only a ttl (a table with a stream and no GSI, `run --every 1s
//! --follow-stream` with an expiry index table), side by side in one run, and of items written
//! already expired; the same lags on Lambda (lambda.rs: the release Lambda binary under the local
//! Runtime API, the sweeper ticking on a schedule and the indexer fed by an emulated event source
//! mapping); then the indexer's CPU per record.
//! Every lag run (of either path), and every daemon of a CPU run, has a DynamoDB Local of its own,
//! started before and stopped after what is measured: DynamoDB Local's writes to a table with a
//! stream slow as stream records accumulate on the server.
//!
//! `BENCH_ONLY=stream cargo bench --bench sweeper` runs this part alone and writes
//! target/bench-stream.md; `make bench` adds it to docs/BENCHMARKS.md.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::StreamViewType;
use aws_sdk_dynamodb::Client;
use serde_json::Value;
use tokio::time::Instant;

mod lambda;

use crate::daemon::{lag_percentiles, lag_spread, secs, three, Daemon, Lags};
use crate::support::capacity::{Meter, Role};
use crate::support::recorder::{Acks, DeleteRecorder, Recorder};
use crate::support::*;

/// Sizes and repetitions.
pub struct Settings {
    pub quick: bool,
    /// Runs of the lag measurement.
    pub lag_runs: usize,
    /// Seconds over which each lag run writes its items.
    pub lag_secs: i64,
    /// Items written each second, of each kind (writer-set window, ttl only), due
    /// [`DUE_IN`] s later.
    pub due_per_sec: i64,
    /// Items written each second, of each kind, already expired.
    pub expired_per_sec: i64,
    /// Runs of the CPU measurement (each one daemon per variant).
    pub cpu_runs: usize,
    /// Items written in each CPU run.
    pub cpu_items: usize,
    /// Wall seconds of each CPU run's daemon, from its start to its CPU reading, unless it has
    /// not caught up by then: then one second after it has (at most [`CPU_LIMIT`]).
    pub cpu_secs: u64,
}

impl Settings {
    /// Whether the `j`-th of a second's `due_per_sec + expired_per_sec` writes (of one kind) is
    /// written already expired: `expired_per_sec` of them, spread evenly over the second.
    pub fn expired(&self, j: i64) -> bool {
        let per_sec = self.due_per_sec + self.expired_per_sec;
        let step = per_sec / self.expired_per_sec.max(1);
        self.expired_per_sec > 0 && j % step == 0 && j / step < self.expired_per_sec
    }

    pub fn new(quick: bool) -> Self {
        if quick {
            Settings {
                quick,
                lag_runs: 2,
                lag_secs: 8,
                due_per_sec: 5,
                expired_per_sec: 1,
                cpu_runs: 1,
                cpu_items: 1_000,
                cpu_secs: 15,
            }
        } else {
            Settings {
                quick,
                lag_runs: 3,
                lag_secs: 20,
                due_per_sec: 5,
                expired_per_sec: 1,
                cpu_runs: 3,
                cpu_items: 5_000,
                cpu_secs: 40,
            }
        }
    }
}

/// The longest a CPU run's daemon waits to catch up before its CPU is read (seconds).
const CPU_LIMIT: u64 = 300;
/// A due item's ttl is the whole second of its write plus this: 2–3 s after it is written.
const DUE_IN: i64 = 3;
/// An expired item's ttl is the whole second of its write minus this.
const EXPIRED_FOR: i64 = 10;
/// How the sweeper finds the item: its writer set the window (the table's GSI), or it was written
/// with only a ttl (the stream indexer's entry in the expiry index table).
const KINDS: [&str; 2] = ["writer (GSI)", "stream (index table)"];

/// One lag run: due items of each kind (lag from ttl), expired items of each kind (lag from the
/// write's acknowledgement), items deleted before their ttl, and the sweeper's own figures.
pub struct LagRun {
    pub due: [Lags; 2],
    pub expired: [Lags; 2],
    pub early: usize,
    /// The largest `lag_p99_ms` and `lag_max_ms` of the daemon's tick lines.
    pub sweeper_p99_ms: u64,
    pub sweeper_max_ms: u64,
}

/// One daemon's CPU in a CPU run.
#[derive(Clone, Copy)]
pub struct CpuRun {
    /// utime + stime, seconds, read just before SIGTERM.
    pub cpu_secs: f64,
    /// Seconds from the daemon's start to that reading.
    pub wall_secs: f64,
    /// Seconds from the daemon's start until the stream records were all read (and the windows
    /// all set); `None` if that did not happen before the reading.
    pub caught_up: Option<f64>,
    /// Stream records read, and the keys the index items the indexer wrote list (a pack's `keys`).
    pub records: u64,
    pub entries: u64,
}

/// The CPU run's variants: what the items carry, and whether the daemon follows the stream into
/// an expiry index table.
pub const VARIANTS: [(&str, bool, bool); 2] = [
    ("ttl only, `--follow-stream` (index table)", false, true),
    ("window set by the writer (GSI), no stream", true, false),
];

pub struct Figures {
    pub settings: Settings,
    /// Whether each run had a DynamoDB Local of its own (not so when `DYNAMODB_ENDPOINT` names
    /// one server for all).
    pub own_servers: bool,
    pub lag: Vec<LagRun>,
    /// The Lambda path's runs (the sweeper ticking, the indexer fed by the emulated mapping).
    pub lambda: Vec<lambda::LambdaRun>,
    /// Per run, the CPU of each of [`VARIANTS`], in that order.
    pub cpu: Vec<[CpuRun; 2]>,
}

/// The daemon, `run --every 1s` on `table` with `checkpoint` (and, given an expiry index table,
/// `--follow-stream` into it), reaching DynamoDB at `endpoint`; ready once it says so: following
/// the stream, or (without it) running.
async fn start_daemon(
    endpoint: &str,
    table: &str,
    checkpoint: &str,
    index: Option<&str>,
) -> Daemon {
    start_daemon_with(endpoint, table, checkpoint, index, &[]).await
}

/// [`start_daemon`] with more settings in its environment (e.g. `DELETE_MODE`).
pub(crate) async fn start_daemon_with(
    endpoint: &str,
    table: &str,
    checkpoint: &str,
    index: Option<&str>,
    more: &[(&str, &str)],
) -> Daemon {
    let mut args = vec!["--every", "1s", "--table-name", table];
    let mut env = vec![("CHECKPOINT_TABLE", checkpoint)];
    env.extend(more.iter().copied());
    let ready = match index {
        Some(index) => {
            args.push("--follow-stream");
            env.push(("EXPIRY_INDEX_TABLE", index));
            "following the table's stream"
        }
        None => "running until SIGINT or SIGTERM",
    };
    Daemon::start(endpoint, &format!("stream-{table}"), &env, &args, ready).await
}

/// The largest `lag_p99_ms` and `lag_max_ms` of the daemon's tick lines.
fn sweeper_lags(daemon: &Daemon) -> (u64, u64) {
    daemon.tick_lines().iter().fold((0, 0), |(p99, max), l| {
        let field = |name: &str| l[name].as_u64().unwrap_or(0);
        (p99.max(field("lag_p99_ms")), max.max(field("lag_max_ms")))
    })
}

/// The tables of a run: one with the sweeper's GSI (writers set the window), one with a stream
/// with both images and no GSI (writers unchanged) and its expiry index table, and a checkpoint
/// table for both daemons.
pub(crate) struct Tables {
    pub(crate) gsi: String,
    pub(crate) plain: String,
    pub(crate) index: String,
    pub(crate) checkpoint: String,
}

pub(crate) async fn tables(client: &Client, prefix: &str) -> Tables {
    let gsi = new_table(client, prefix, |_| {}).await;
    let plain = new_table(client, &format!("{prefix}st"), |t| {
        t.index = false;
        t.stream = Some(StreamViewType::NewAndOldImages);
    })
    .await;
    let index = index_table(client, &format!("{prefix}ix")).await;
    let checkpoint = checkpoint_table(client, &format!("{prefix}cp")).await;
    Tables {
        gsi,
        plain,
        index,
        checkpoint,
    }
}

/// A run behind the capacity meter, on a DynamoDB Local of its own: the server, its tables
/// (`prefix`), the meter in front of it, the daemon following the stream through the meter with
/// `env` besides, and the application's client, through the meter's front door.
pub(crate) async fn metered(
    prefix: &str,
    env: &[(&str, &str)],
) -> (OwnDynamoDbLocal, Tables, Meter, Daemon, Client) {
    let server = own_server().await;
    let direct = client_of(&server.endpoint).await;
    let t = tables(&direct, prefix).await;
    let known: [(&str, Role, &[&str]); 3] = [
        (&t.plain, Role::Table, &["id"]),
        (&t.index, Role::Index, &["window", "entry"]),
        (&t.checkpoint, Role::Checkpoint, &["id"]),
    ];
    let meter = Meter::start(&server.endpoint, &known).await;
    let index = Some(t.index.as_str());
    let daemon = start_daemon_with(&meter.endpoint, &t.plain, &t.checkpoint, index, env).await;
    let app = client_of(&meter.app_endpoint).await;
    (server, t, meter, daemon, app)
}

/// A DynamoDB Local of the run's own, started (a few seconds, not measured) on a free port.
pub(crate) async fn own_server() -> OwnDynamoDbLocal {
    tokio::task::spawn_blocking(OwnDynamoDbLocal::start)
        .await
        .expect("start DynamoDB Local")
}

/// Stops the run's DynamoDB Local by its PID, once the run has measured what it measures.
pub(crate) async fn stop_server(server: OwnDynamoDbLocal) {
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .expect("stop DynamoDB Local");
}

/// One item written by the lag run.
struct Written {
    id: String,
    kind: usize,
    expired: bool,
    ttl: i64,
    /// When its `PutItem` was acknowledged (epoch seconds).
    at: f64,
}

/// The lags of the items of `kind` written due (lag from ttl) or already expired (lag from the
/// acknowledgement of their `PutItem`), from the acknowledged deletes `acks`.
fn lags_of(
    written: &[Written],
    acks: &HashMap<String, (f64, bool)>,
    kind: usize,
    expired: bool,
) -> Lags {
    let of: Vec<&Written> = written
        .iter()
        .filter(|w| w.kind == kind && w.expired == expired)
        .collect();
    let mut lags: Vec<f64> = of
        .iter()
        .filter_map(|w| {
            let from = if expired { w.at } else { w.ttl as f64 };
            acks.get(&w.id).map(|(at, _)| at - from)
        })
        .collect();
    lags.sort_by(f64::total_cmp);
    Lags {
        items: of.len(),
        lags,
        one_by_one: of
            .iter()
            .filter(|w| acks.get(&w.id).is_some_and(|(_, one)| *one))
            .count(),
    }
}

/// The due items whose delete DynamoDB acknowledged before their ttl.
/// Waits until every item of `written` has its delete acknowledged in `acks`, or 15 s after the
/// last ttl.
async fn until_deleted(written: &[Written], acks: &Acks) {
    let last = written.iter().map(|w| w.ttl).max().unwrap_or(0) as f64 + 15.0;
    loop {
        let all = {
            let acks = acks.lock().unwrap();
            written.iter().all(|w| acks.contains_key(&w.id))
        };
        if all || wall_clock() > last {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn early(written: &[Written], acks: &HashMap<String, (f64, bool)>) -> usize {
    written
        .iter()
        .filter(|w| !w.expired && acks.get(&w.id).is_some_and(|(at, _)| *at < w.ttl as f64))
        .count()
}

/// One lag run, on a DynamoDB Local of its own: the daemon started, then for `lag_secs` s, each
/// second, `due_per_sec` items of each kind due [`DUE_IN`] s after the second and
/// `expired_per_sec` of each kind expired [`EXPIRED_FOR`] s before it, written one `PutItem` at
/// a time, evenly spaced, the kinds interleaved; deletes timed at DynamoDB's acknowledgement by a
/// pass-through proxy in front of the server.
async fn lag_run(s: &Settings) -> LagRun {
    let server = own_server().await;
    let client = client_of(&server.endpoint).await;
    let t = tables(&client, "streamlag").await;
    let recorder = DeleteRecorder::start(&server.endpoint).await;
    let acks = recorder.acks.clone();
    let mut daemons = [
        start_daemon(&recorder.endpoint, &t.gsi, &t.checkpoint, None).await,
        start_daemon(&recorder.endpoint, &t.plain, &t.checkpoint, Some(&t.index)).await,
    ];
    // Each second's writes: pairs of one item of each kind, `expired_per_sec` of the pairs
    // expired, spread over the second.
    let pairs = s.due_per_sec + s.expired_per_sec;
    let per_sec = 2 * pairs;
    let gap = Duration::from_secs_f64(1.0 / per_sec as f64);
    let mut written = Vec::new();
    let start = Instant::now();
    for k in 0..s.lag_secs * per_sec {
        tokio::time::sleep_until(start + gap * k as u32).await;
        let kind = (k % 2) as usize;
        let expired = s.expired((k % per_sec) / 2);
        let second = now();
        let ttl = if expired {
            second - EXPIRED_FOR
        } else {
            second + DUE_IN
        };
        let id = format!(
            "{}{}-{k}",
            ["w", "s"][kind],
            if expired { "x" } else { "d" }
        );
        let (table, item) = if kind == 0 {
            (&t.gsi, session(&id, ttl))
        } else {
            (&t.plain, unwindowed(&id, ttl))
        };
        put_one(&client, table, item).await;
        written.push(Written {
            id,
            kind,
            expired,
            ttl,
            at: wall_clock(),
        });
    }
    until_deleted(&written, &acks).await;
    let (mut sweeper_p99_ms, mut sweeper_max_ms) = (0, 0);
    for daemon in &mut daemons {
        daemon.stop().await;
        let (p99, max) = sweeper_lags(daemon);
        (sweeper_p99_ms, sweeper_max_ms) = (sweeper_p99_ms.max(p99), sweeper_max_ms.max(max));
    }
    drop(recorder);
    stop_server(server).await;
    let acks = acks.lock().unwrap().clone();
    let lags = |kind: usize, expired: bool| lags_of(&written, &acks, kind, expired);
    LagRun {
        due: [lags(0, false), lags(1, false)],
        expired: [lags(0, true), lags(1, true)],
        early: early(&written, &acks),
        sweeper_p99_ms,
        sweeper_max_ms,
    }
}

/// One daemon of a CPU run, on a DynamoDB Local of its own: `cpu_items` items with a ttl an hour
/// ahead (nothing expires), with their window (the GSI table) or with only a ttl (the table with
/// a stream), written before the daemon starts; the daemon following the stream into the index
/// table or not; its CPU read `cpu_secs` s after its start.
async fn cpu_once(s: &Settings, windowed: bool, follow: bool) -> CpuRun {
    let server = own_server().await;
    let client = client_of(&server.endpoint).await;
    let t = tables(&client, "streamcpu").await;
    let table = if windowed { &t.gsi } else { &t.plain };
    // Counts the stream records the daemon read and the keys it indexed.
    let records = Arc::new(AtomicU64::new(0));
    let entries = Arc::new(AtomicU64::new(0));
    let observe = {
        let (records, entries, index) = (records.clone(), entries.clone(), t.index.clone());
        move |op: &str, request: &Value, answer: &Value, _at: f64| match op {
            "GetRecords" => {
                let n = answer["Records"].as_array().map_or(0, Vec::len);
                records.fetch_add(n as u64, Ordering::Relaxed);
            }
            "BatchWriteItem" => {
                // The keys the puts list: a pack's `keys`, an entry of one item's one.
                let puts = |l: &Value| {
                    l.as_array().map_or(0, |l| {
                        l.iter()
                            .filter_map(|w| w["PutRequest"]["Item"].as_object())
                            .map(capacity::keys_listed)
                            .sum::<u64>()
                    })
                };
                let sent = puts(&request["RequestItems"][index.as_str()]);
                let left = puts(&answer["UnprocessedItems"][index.as_str()]);
                entries.fetch_add(sent.saturating_sub(left), Ordering::Relaxed);
            }
            _ => {}
        }
    };
    let recorder = Recorder::start(
        &server.endpoint,
        Box::new(|_, _| Duration::ZERO),
        Box::new(observe),
    )
    .await;
    // Written before the daemon starts (the stream keeps them; a shard never read is read from
    // its oldest record), so that its wall time is the same whatever the writes take.
    let ttl = now() + 3600;
    let items: Vec<_> = (0..s.cpu_items)
        .map(|i| {
            let id = format!("c-{i}");
            if windowed {
                session(&id, ttl)
            } else {
                unwindowed(&id, ttl)
            }
        })
        .collect();
    put_many(&client, table, items).await;
    let started = Instant::now();
    let index = follow.then_some(t.index.as_str());
    let mut daemon = start_daemon(&recorder.endpoint, table, &t.checkpoint, index).await;
    // Every INSERT record, and an entry for each.
    let n = s.cpu_items as u64;
    let (want_records, want_entries) = if follow { (n, n) } else { (0, 0) };
    let mut reading = started + Duration::from_secs(s.cpu_secs);
    let limit = started + Duration::from_secs(CPU_LIMIT);
    let mut caught_up = None;
    while Instant::now() < reading || (caught_up.is_none() && Instant::now() < limit) {
        if caught_up.is_none()
            && records.load(Ordering::Relaxed) >= want_records
            && entries.load(Ordering::Relaxed) >= want_entries
        {
            caught_up = Some(started.elapsed().as_secs_f64());
            reading = reading.max(Instant::now() + Duration::from_secs(1));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cpu_secs = daemon.cpu_secs();
    let wall_secs = started.elapsed().as_secs_f64();
    daemon.stop().await;
    drop(recorder);
    stop_server(server).await;
    CpuRun {
        cpu_secs,
        wall_secs,
        caught_up,
        records: records.load(Ordering::Relaxed),
        entries: entries.load(Ordering::Relaxed),
    }
}

/// The daemon's lag runs, the Lambda path's runs, then the CPU runs (the variants' order turning
/// by one each run).
pub async fn measure(quick: bool) -> Figures {
    let settings = Settings::new(quick);
    let s = &settings;
    let own_servers = std::env::var_os("DYNAMODB_ENDPOINT").is_none();
    let mut lag = Vec::new();
    for run in 0..s.lag_runs {
        let r = lag_run(s).await;
        for (i, name) in KINDS.iter().enumerate() {
            for (what, l) in [("due", &r.due[i]), ("written expired", &r.expired[i])] {
                eprintln!("stream lag, run {}, {name}, {what}: {}", run + 1, l.line());
            }
        }
        eprintln!(
            "stream lag, run {}: {} deleted before their ttl; the sweeper's tick lines: largest lag_p99_ms {}, lag_max_ms {}",
            run + 1,
            r.early,
            r.sweeper_p99_ms,
            r.sweeper_max_ms
        );
        lag.push(r);
    }
    let lambda = lambda::measure(s).await;
    let mut cpu = Vec::new();
    for run in 0..s.cpu_runs {
        let mut got = [CpuRun {
            cpu_secs: f64::NAN,
            wall_secs: f64::NAN,
            caught_up: None,
            records: 0,
            entries: 0,
        }; 2];
        for k in 0..VARIANTS.len() {
            let v = (k + run) % VARIANTS.len();
            let (name, windowed, follow) = VARIANTS[v];
            let r = cpu_once(s, windowed, follow).await;
            eprintln!(
                "stream CPU, run {}, {name}: {:.2} s CPU in {:.1} s; {} records read, {} keys indexed, caught up {}",
                run + 1,
                r.cpu_secs,
                r.wall_secs,
                r.records,
                r.entries,
                r.caught_up
                    .map_or("never".to_string(), |t| format!("after {t:.1} s"))
            );
            got[v] = r;
        }
        eprintln!(
            "stream CPU, run {}: indexer {:.0} µs per ttl-only record",
            run + 1,
            per_record_us(&got, s.cpu_items)
        );
        cpu.push(got);
    }
    Figures {
        settings,
        own_servers,
        lag,
        lambda,
        cpu,
    }
}

/// The CPU per second of the daemon that does not follow the stream (its ticks alone).
fn idle_rate(run: &[CpuRun; 2]) -> f64 {
    run[1].cpu_secs / run[1].wall_secs
}

/// The indexer's CPU per ttl-only item, µs: (following − not following) ÷ items, the follower's
/// longer wall time (if any) charged at [`idle_rate`]. It includes following the stream itself
/// (its polls, the position saved every second) beside the ticks.
fn per_record_us(run: &[CpuRun; 2], items: usize) -> f64 {
    let more =
        run[0].cpu_secs - run[1].cpu_secs - idle_rate(run) * (run[0].wall_secs - run[1].wall_secs);
    more / items as f64 * 1e6
}

/// The due or the expired items' lags of a run, of each kind.
type Rows = fn(&LagRun) -> &[Lags; 2];

/// The goal for items written already expired through the expiry index table: p99 lag from the
/// write at most this, seconds (a quiet shard is read about every 250 ms).
pub const WRITTEN_EXPIRED_P99_GOAL: f64 = 0.5;

/// The p99 lag from the ttl of items due 2–3 s after their write through the expiry index table,
/// the median of 3 runs, when the goal "no worse than today's" was set: docs/BENCHMARKS.md at
/// c20e0fe (entries of one item each, before packs), on the daemon and on Lambda.
pub const DUE_SOON_P99_BEFORE_DAEMON: f64 = 0.062;
pub const DUE_SOON_P99_BEFORE_LAMBDA: f64 = 0.053;

/// The goals' lines for the items through the index table on `path`, `runs` their due and their
/// expired items' lags in each run: the due items' p99 held to `before`, the same rows' median
/// before packs; the expired items' p99 held to [`WRITTEN_EXPIRED_P99_GOAL`].
pub fn index_goals(d: &mut String, path: &str, runs: &[(&Lags, &Lags)], before: f64) {
    let p99s: Vec<f64> = runs.iter().map(|(due, _)| due.p(0.99)).collect();
    let _ = writeln!(
        d,
        "\n**Goal, items due 2–3 s after their write through the index table, on {path}:** p99 lag from the ttl no worse than before packs ({}, the median of 3 runs at c20e0fe). {}.\n",
        secs(before),
        crate::p99_verdict(&p99s, before),
    );
    let p99s: Vec<f64> = runs.iter().map(|(_, expired)| expired.p(0.99)).collect();
    let (_, _, hi) = crate::spread3(&p99s);
    let _ = writeln!(
        d,
        "\n**Goal, items written already expired through the index table, on {path}:** p99 lag from the write ≤ {WRITTEN_EXPIRED_P99_GOAL:.1} s. {}, {} by the worst run.\n",
        crate::p99_verdict(&p99s, WRITTEN_EXPIRED_P99_GOAL),
        crate::met(hi <= WRITTEN_EXPIRED_P99_GOAL),
    );
}

/// The subsection, in Markdown.
pub fn render(d: &mut String, f: &Figures) {
    let s = &f.settings;
    let quick = "fewer and shorter runs";
    crate::intro(
        d,
        "### Writers unchanged: the expiry index table",
        s.quick,
        quick,
    );
    let _ = writeln!(
        d,
        "The release daemon (`ttl-sweeper run --every 1s` with a `CHECKPOINT_TABLE`), twice side by side: on a table with the sweeper's GSI, its writer setting the window; and with `--follow-stream` and `EXPIRY_INDEX_TABLE` on a table with a stream and no GSI, its writer setting only the ttl. Each run ({}new tables and daemons) writes for {} s: each second {} items of each kind due 2–3 s later and {} already expired. *Lag*: from the ttl, or for expired items from their `PutItem`'s acknowledgement, to the delete's.\n",
        crate::when(f.own_servers, "its own DynamoDB Local, "),
        s.lag_secs,
        s.due_per_sec,
        s.expired_per_sec
    );
    crate::table_head(d, "| run | items | found through | never deleted | deleted by `DeleteItem` | p50 lag | p99 lag | max lag |");
    let rows: [(&str, Rows); 2] = [
        ("due 2–3 s after the write", |r| &r.due),
        ("written already expired", |r| &r.expired),
    ];
    for (what, of) in rows {
        for (i, r) in f.lag.iter().enumerate() {
            for (kind, name) in KINDS.iter().enumerate() {
                let l = &of(r)[kind];
                let _ = writeln!(
                    d,
                    "| {} | {} {what} | {name} | {} | {} | {} |",
                    i + 1,
                    l.items,
                    l.missed(),
                    l.one_by_one,
                    lag_percentiles(l)
                );
            }
        }
    }
    let _ = writeln!(d, "\n**min / median / max over {} runs**:\n", f.lag.len());
    crate::table_head(d, "| items | found through | p50 lag | p99 lag | max lag |");
    for (what, of) in rows {
        for (kind, name) in KINDS.iter().enumerate() {
            let lags: Vec<&Lags> = f.lag.iter().map(|r| &of(r)[kind]).collect();
            let _ = writeln!(d, "| {what} | {name} | {} |", lag_spread(&lags));
        }
    }
    let path = "the daemon (`run --follow-stream`)";
    let runs: Vec<_> = f.lag.iter().map(|r| (&r.due[1], &r.expired[1])).collect();
    index_goals(d, path, &runs, DUE_SOON_P99_BEFORE_DAEMON);
    let early: usize = f.lag.iter().map(|r| r.early).sum();
    let sweeper = |g: fn(&LagRun) -> u64| {
        f.lag
            .iter()
            .map(|r| g(r).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        d,
        "\nThe indexer writes an entry well before a due item's ttl, so both paths' lags are the sweep's. Deleted before their ttl: {early}. The sweepers' tick lines, counting from the ttl ({EXPIRED_FOR} s before an expired item's write): largest `lag_p99_ms` per run {} ms, `lag_max_ms` {} ms.\n",
        sweeper(|r| r.sweeper_p99_ms),
        sweeper(|r| r.sweeper_max_ms)
    );

    lambda::render(d, s, f.own_servers, &f.lambda);

    let n = s.cpu_items;
    let _ = writeln!(
        d,
        "**The indexer's CPU per record.** The same daemon, afresh for each variant and run{}, after {n} items due in an hour were written with only a ttl (the daemon following the stream) or with their window (no stream). *CPU*: utime + stime {} s after the start, or a second after the follower caught up if later, extra seconds charged at the no-stream idle rate. *Per ttl-only record*: the difference ÷ {n}, polling every {} ms included.\n",
        crate::when(f.own_servers, " on a DynamoDB Local of its own"),
        s.cpu_secs,
        ttl_sweeper::index::follow::POLL.as_millis()
    );
    let _ = writeln!(
        d,
        "| run | {} | {} | per ttl-only record |",
        VARIANTS[0].0, VARIANTS[1].0
    );
    let _ = writeln!(d, "|---|---|---|---|");
    let cell = |r: &CpuRun| {
        format!(
            "{:.2} s CPU in {:.1} s, {}",
            r.cpu_secs,
            r.wall_secs,
            r.caught_up.map_or("not caught up".to_string(), |t| format!(
                "caught up at {t:.1} s"
            ))
        )
    };
    for (i, run) in f.cpu.iter().enumerate() {
        let _ = writeln!(
            d,
            "| {} | {} | {} | {:.0} µs |",
            i + 1,
            cell(&run[0]),
            cell(&run[1]),
            per_record_us(run, n),
        );
    }
    let per: Vec<f64> = f.cpu.iter().map(|r| per_record_us(r, n)).collect();
    let us = |v: f64| format!("{v:.0} µs");
    let _ = writeln!(d, "| **min / median / max** | | | {} |", three(&per, us));
    let _ = writeln!(
        d,
        "\nCPU is read in {} ms clock ticks; DynamoDB Local's is not counted. {}\n",
        // SAFETY: sysconf has no preconditions.
        1000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) },
        if f.own_servers {
            "Stream records slow a DynamoDB Local server's writes, hence one per run."
        } else {
            "Here every run shared the server `DYNAMODB_ENDPOINT` names, where writes to a table with a stream slow as records pile up: a later ttl-only run may catch up late and charge each record more idle polling. By default every run has a DynamoDB Local of its own."
        }
    );
    let _ = writeln!(
        d,
        "Reproduce alone: `BENCH_ONLY=stream make bench` (writes target/bench-stream.md; `BENCH_QUICK=1`: {} lag runs of {} s, {} CPU run of {} items).\n",
        Settings::new(true).lag_runs,
        Settings::new(true).lag_secs,
        Settings::new(true).cpu_runs,
        Settings::new(true).cpu_items,
    );
}
