//! Batch mode at DynamoDB's pace, and the sweeper's peak memory: the release `ttl-sweeper sweep`
//! measured from outside (a process of its own) against the fake DynamoDB endpoint process
//! (`--fake-dynamodb`), which counts the requests it answered of each operation.
//!
//! `BENCH_ONLY=pace cargo bench --bench sweeper` runs these rows alone and writes
//! target/bench-pace.md; `make bench` adds them to docs/BENCHMARKS.md.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::daemon::release_binary;
use crate::perf::{measured, spawn_fake, stop_fake, Pace};
use crate::spread3;
use crate::support::LOCAL_AWS_ENV;

/// The section's heading, also where the profile section carried over is put before it.
pub const HEADING: &str = "## Batch mode at DynamoDB's pace";

/// Windows a default sweep reads: the current one and `LOOKBACK_WINDOWS` (15) before it.
pub const WINDOWS: usize = 16;
/// Items per `BatchWriteItem`.
const BATCH: usize = 25;
/// `MAX_CONCURRENCY` of the pace rows.
pub const PACE_CONCURRENCY: usize = 16;
/// `MAX_CONCURRENCY` of the memory rows.
pub const MEMORY_CONCURRENCY: usize = 18;
/// `MAX_CONCURRENCY` of the rows of whole items in expiry events.
pub const ITEMS_CONCURRENCY: usize = 64;
/// The size of each whole item in those rows, KiB: DynamoDB's largest.
pub const ITEM_KIB: usize = 400;
/// The rows of whole items in expiry events: a label, and the settings besides
/// `EXPIRY_EVENTS=eventbridge:default` and `MAX_CONCURRENCY`.
const ITEM_ROWS: [(&str, [(&str, &str); 2]); 2] = [
    (
        "conditional, the item as the delete returns it (`EXPIRY_EVENTS_ITEM=auto`)",
        [
            ("DELETE_MODE", "conditional"),
            ("EXPIRY_EVENTS_ITEM", "auto"),
        ],
    ),
    (
        "batch, the item read before the delete (`EXPIRY_EVENTS_ITEM=read`)",
        [("DELETE_MODE", "batch"), ("EXPIRY_EVENTS_ITEM", "read")],
    ),
];
/// The fake endpoint's paces: at once, DynamoDB's usual in-Region pace, and a slow one.
pub const PACES: [Pace; 3] = [
    Pace::Instant,
    Pace::Delayed {
        lo_ms: 5,
        hi_ms: 10,
    },
    Pace::Delayed {
        lo_ms: 40,
        hi_ms: 50,
    },
];
/// Goals printed beside the figures (never asserted): the share of the in-flight ceiling at
/// 40–50 ms, the share of deletes sent one by one, the peak memory.
pub const CEILING_GOAL: f64 = 0.8;
pub const ONE_BY_ONE_GOAL: f64 = 0.01;
pub const MEMORY_GOAL_MIB: f64 = 48.0;

/// Sizes and repetitions.
pub struct Settings {
    pub quick: bool,
    pub runs: usize,
    pub per_window: usize,
    pub memory_runs: usize,
    pub memory_per_window: usize,
    pub items_per_window: usize,
}

impl Settings {
    pub fn new(quick: bool) -> Self {
        Settings {
            quick,
            runs: if quick { 1 } else { 3 },
            per_window: if quick { 1_000 } else { 4_000 },
            memory_runs: if quick { 1 } else { 3 },
            memory_per_window: 20_000,
            items_per_window: if quick { 100 } else { 200 },
        }
    }
}

/// Requests the fake endpoint answered, in all and of each operation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ops {
    pub requests: u64,
    pub query: u64,
    pub batch_write: u64,
    pub delete: u64,
    pub batch_get: u64,
    /// The time the fake took to answer the `BatchWriteItem` requests, added up, from each
    /// request's arrival to its answer (its delay included), microseconds.
    pub batch_write_answer_us: u64,
    /// From the first `BatchWriteItem`'s arrival at the fake to the last one's answer, µs.
    pub deletes_span_us: u64,
}

impl Ops {
    /// What the fake endpoint prints on SIGTERM: `requests N`, then
    /// `ops Query=.. BatchWriteItem=.. DeleteItem=.. BatchGetItem=..`, then
    /// `answer_us Query=.. BatchWriteItem=.. ..` and `deletes_span_us N`.
    fn parse(said: &str) -> Ops {
        let mut ops = Ops::default();
        for line in said.lines() {
            if let Some(n) = line.trim().strip_prefix("requests ") {
                ops.requests = n.parse().unwrap_or(0);
            }
            if let Some(n) = line.trim().strip_prefix("deletes_span_us ") {
                ops.deletes_span_us = n.parse().unwrap_or(0);
            }
            if let Some(rest) = line.trim().strip_prefix("answer_us ") {
                let batch_write = rest
                    .split_whitespace()
                    .find_map(|pair| pair.strip_prefix("BatchWriteItem="));
                ops.batch_write_answer_us = batch_write.and_then(|n| n.parse().ok()).unwrap_or(0);
            }
            if let Some(rest) = line.trim().strip_prefix("ops ") {
                for pair in rest.split_whitespace() {
                    let Some((name, n)) = pair.split_once('=') else {
                        continue;
                    };
                    let n = n.parse().unwrap_or(0);
                    match name {
                        "Query" => ops.query = n,
                        "BatchWriteItem" => ops.batch_write = n,
                        "DeleteItem" => ops.delete = n,
                        "BatchGetItem" => ops.batch_get = n,
                        _ => {}
                    }
                }
            }
        }
        ops
    }
}

/// One `ttl-sweeper sweep` process measured from outside.
#[derive(Clone, Debug)]
pub struct Run {
    pub deleted: u64,
    pub confirmed: u64,
    pub reread: u64,
    pub conditional: u64,
    /// From spawn to exit.
    pub wall_secs: f64,
    /// The last `VmHWM` read while it ran (every 2 ms), MiB.
    pub peak_mib: f64,
    pub ops: Ops,
}

impl Run {
    pub fn per_sec(&self) -> f64 {
        self.deleted as f64 / self.wall_secs
    }
    /// `DeleteItem` requests per item deleted.
    pub fn one_by_one(&self) -> f64 {
        self.ops.delete as f64 / self.deleted.max(1) as f64
    }
    /// The fake's mean time to answer a `BatchWriteItem`, from its arrival to its answer, ms.
    pub fn answered_ms(&self) -> f64 {
        self.ops.batch_write_answer_us as f64 / self.ops.batch_write.max(1) as f64 / 1000.0
    }
    /// `BatchWriteItem` requests in flight at the fake, on average over the span from the first
    /// one's arrival to the last one's answer.
    pub fn in_flight_at_fake(&self) -> f64 {
        self.ops.batch_write_answer_us as f64 / self.ops.deletes_span_us.max(1) as f64
    }
    /// The share of the wall time from spawn to exit that the fake's deletes span.
    pub fn deletes_span_share(&self) -> f64 {
        self.ops.deletes_span_us as f64 / 1e6 / self.wall_secs
    }
}

/// The pace rows: the runs at each of [`PACES`].
pub struct PaceRows {
    pub pace: Pace,
    pub runs: Vec<Run>,
}

/// The memory rows: the runs in each `DELETE_MODE`.
pub struct MemoryRows {
    pub mode: &'static str,
    pub runs: Vec<Run>,
}

pub struct Figures {
    pub settings: Settings,
    pub paces: Vec<PaceRows>,
    pub memory: Vec<MemoryRows>,
    pub items: Vec<MemoryRows>,
}

/// Deletes/s that `MAX_CONCURRENCY` requests of 25 keys in flight allow when each answer takes
/// the pace's mean delay; none when answers come at once.
pub fn ceiling(pace: Pace, concurrency: usize) -> Option<f64> {
    match pace {
        Pace::Instant => None,
        Pace::Delayed { lo_ms, hi_ms } => {
            let mean_secs = (lo_ms + hi_ms) as f64 / 2.0 / 1000.0;
            Some((concurrency * BATCH) as f64 / mean_secs)
        }
    }
}

/// Deletes/s that `concurrency` requests of 25 keys in flight allow when each answer takes what
/// the fake took on average to answer the `BatchWriteItem` requests of `run`.
pub fn ceiling_as_answered(run: &Run, concurrency: usize) -> f64 {
    (concurrency * BATCH) as f64 / (run.answered_ms() / 1000.0)
}

/// One sweep by the release CLI against a fresh fake endpoint answering `16 × per_window` items
/// at `pace` (seeded with `seed`). The sweeper starts from an empty environment plus the local
/// AWS settings, the endpoint, `TABLE_NAME=fake` and `settings`: every other setting is its
/// default. The fake runs on the last CPU, the sweeper on the first.
// The fake endpoint is reaped by `wait4` (see `reap`), which `Child::wait` cannot replace.
#[allow(clippy::zombie_processes)]
fn sweep_once(
    binary: &Path,
    pace: Pace,
    per_window: usize,
    seed: usize,
    item_kib: usize,
    settings: &[(&str, String)],
) -> Run {
    let last_cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    let args = [
        per_window.to_string(),
        pace.arg(),
        seed.to_string(),
        item_kib.to_string(),
    ];
    let (fake, port) = spawn_fake(&args, Some(last_cpu));
    let mut cmd = Command::new(binary);
    cmd.arg("sweep")
        .env_clear()
        .envs(LOCAL_AWS_ENV)
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("TABLE_NAME", "fake");
    for (k, v) in settings {
        cmd.env(k, v);
    }
    let (out, _, peak_mib, wall_secs) = measured(&mut cmd, vec![0]);
    let (said, _) = stop_fake(fake);
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    let count = |field: &str| report[field].as_u64().unwrap_or(0);
    Run {
        deleted: count("items_deleted"),
        confirmed: count("items_confirmed"),
        reread: count("items_reread"),
        conditional: count("items_conditional"),
        wall_secs,
        peak_mib,
        ops: Ops::parse(&said),
    }
}

fn describe(run: &Run) -> String {
    format!(
        "{} deletes in {:.2} s = {:.0} deletes/s, peak {:.1} MiB; {} confirmed, {} re-read, {} conditional; requests {} (Query {}, BatchWriteItem {}, DeleteItem {}, BatchGetItem {}); BatchWriteItem answered after {:.2} ms on average, {:.2} in flight at the fake over {:.0} % of the wall time",
        run.deleted,
        run.wall_secs,
        run.per_sec(),
        run.peak_mib,
        run.confirmed,
        run.reread,
        run.conditional,
        run.ops.requests,
        run.ops.query,
        run.ops.batch_write,
        run.ops.delete,
        run.ops.batch_get,
        run.answered_ms(),
        run.in_flight_at_fake(),
        run.deletes_span_share() * 100.0
    )
}

/// Every row, `runs` times, the rows' order turning by one each run.
pub fn measure(settings: Settings) -> Figures {
    let binary = release_binary("ttl-sweeper");
    let mut paces: Vec<PaceRows> = PACES
        .iter()
        .map(|&pace| PaceRows {
            pace,
            runs: Vec::new(),
        })
        .collect();
    for run in 0..settings.runs {
        for k in 0..paces.len() {
            let rows = &mut paces[(k + run) % PACES.len()];
            let r = sweep_once(
                &binary,
                rows.pace,
                settings.per_window,
                run + 1,
                0,
                &[("MAX_CONCURRENCY", PACE_CONCURRENCY.to_string())],
            );
            eprintln!(
                "pace, batch mode, answers {}, {PACE_CONCURRENCY} in flight: {}",
                rows.pace.label(),
                describe(&r)
            );
            rows.runs.push(r);
        }
    }
    let mut memory: Vec<MemoryRows> = ["conditional", "batch"]
        .into_iter()
        .map(|mode| MemoryRows {
            mode,
            runs: Vec::new(),
        })
        .collect();
    for run in 0..settings.memory_runs {
        for k in 0..memory.len() {
            let rows = &mut memory[(k + run) % 2];
            let r = sweep_once(
                &binary,
                Pace::Instant,
                settings.memory_per_window,
                run + 1,
                0,
                &[
                    ("MAX_CONCURRENCY", MEMORY_CONCURRENCY.to_string()),
                    ("DELETE_MODE", rows.mode.to_string()),
                ],
            );
            eprintln!(
                "memory, DELETE_MODE={}, {MEMORY_CONCURRENCY} in flight: {}",
                rows.mode,
                describe(&r)
            );
            rows.runs.push(r);
        }
    }
    let mut items: Vec<MemoryRows> = ITEM_ROWS
        .iter()
        .map(|(mode, _)| MemoryRows {
            mode,
            runs: Vec::new(),
        })
        .collect();
    for run in 0..settings.memory_runs {
        for k in 0..items.len() {
            let row = (k + run) % ITEM_ROWS.len();
            let mut env = vec![
                ("MAX_CONCURRENCY", ITEMS_CONCURRENCY.to_string()),
                ("EXPIRY_EVENTS", "eventbridge:default".to_string()),
            ];
            env.extend(ITEM_ROWS[row].1.iter().map(|(k, v)| (*k, v.to_string())));
            let per_window = settings.items_per_window;
            let r = sweep_once(&binary, Pace::Instant, per_window, run + 1, ITEM_KIB, &env);
            eprintln!(
                "memory, whole {ITEM_KIB} KiB items in events, {}, {ITEMS_CONCURRENCY} in flight: {}",
                items[row].mode,
                describe(&r)
            );
            items[row].runs.push(r);
        }
    }
    Figures {
        settings,
        paces,
        memory,
        items,
    }
}

/// `min / median / max` of `v`, each written by `f`.
fn three(v: &[f64], f: impl Fn(f64) -> String) -> String {
    let (lo, mid, hi) = spread3(v);
    format!("{} / {} / {}", f(lo), f(mid), f(hi))
}

fn of(runs: &[Run], f: impl Fn(&Run) -> f64) -> Vec<f64> {
    runs.iter().map(f).collect()
}

/// The section, in Markdown.
pub fn render(d: &mut String, f: &Figures) {
    let s = &f.settings;
    let runs_text = |n: usize| {
        if n == 1 {
            "1 run".to_string()
        } else {
            format!("{n} runs")
        }
    };
    let _ = writeln!(d, "{HEADING}\n");
    let _ = writeln!(
        d,
        "Measured from outside, as in section 6: the release `ttl-sweeper sweep` with the settings named below (otherwise defaults: batch mode, 16 windows, one thread) against the bench's fake DynamoDB endpoint, which accepts every delete, confirms every read and counts each operation. Rows alternate; min / median / max over the runs.\n"
    );

    let _ = writeln!(
        d,
        "{}**At DynamoDB's pace.** `MAX_CONCURRENCY={PACE_CONCURRENCY}`, {} windows × {} items = {} deletes per run; the fake answers at once or after a seeded uniform 5–10 ms or 40–50 ms. *Ceiling*: {PACE_CONCURRENCY} requests of 25 deletes per mean delay; *ratio*: deletes/s ÷ ceiling. *Answered after*: the fake's mean time to answer a `BatchWriteItem`, which *ceiling as answered* and *ratio to it* use instead of the delay. *In flight at the fake*: its mean over the *span* from the first `BatchWriteItem`'s arrival to the last one's answer (a share of the wall time). *One by one*: `DeleteItem`s ÷ items deleted. {} of each pace.\n",
        crate::when(s.quick, "Quick mode (`BENCH_QUICK=1`): 1 run of each row, 1,000 items per window at each pace. "),
        WINDOWS,
        s.per_window,
        WINDOWS * s.per_window,
        runs_text(s.runs)
    );
    crate::table_head(d, "| fake answers | deletes/s | ceiling | ratio | BatchWriteItem answered after, ms | ceiling as answered | ratio to it | BatchWriteItem in flight at the fake | span | one by one | BatchGetItem requests | peak memory MiB |");
    let dash = || "—".to_string();
    for rows in &f.paces {
        let ceiling = ceiling(rows.pace, PACE_CONCURRENCY);
        let rates = of(&rows.runs, Run::per_sec);
        let delayed = ceiling.is_some();
        let _ = writeln!(
            d,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            rows.pace.label(),
            three(&rates, |v| format!("{v:.0}")),
            ceiling.map_or_else(dash, |c| format!("{c:.0}")),
            ceiling.map_or_else(dash, |c| {
                three(&of(&rows.runs, |r| r.per_sec() / c), |v| format!("{v:.2}"))
            }),
            if delayed {
                three(&of(&rows.runs, Run::answered_ms), |v| format!("{v:.2}"))
            } else {
                dash()
            },
            if delayed {
                three(
                    &of(&rows.runs, |r| ceiling_as_answered(r, PACE_CONCURRENCY)),
                    |v| format!("{v:.0}"),
                )
            } else {
                dash()
            },
            if delayed {
                three(
                    &of(&rows.runs, |r| {
                        r.per_sec() / ceiling_as_answered(r, PACE_CONCURRENCY)
                    }),
                    |v| format!("{v:.2}"),
                )
            } else {
                dash()
            },
            if delayed {
                three(&of(&rows.runs, Run::in_flight_at_fake), |v| {
                    format!("{v:.1}")
                })
            } else {
                dash()
            },
            three(&of(&rows.runs, Run::deletes_span_share), |v| format!(
                "{:.1} %",
                v * 100.0
            )),
            three(&of(&rows.runs, |r| r.one_by_one() * 100.0), |v| format!(
                "{v:.2} %"
            )),
            three(&of(&rows.runs, |r| r.ops.batch_get as f64), |v| format!(
                "{v:.0}"
            )),
            three(&of(&rows.runs, |r| r.peak_mib), |v| format!("{v:.1}")),
        );
    }
    // Per run, exactly: ratio = (mean delay ÷ answered after) × (in flight at the fake ÷
    // MAX_CONCURRENCY) × span; the factors' medians say where each pace's share went.
    let mut shares = Vec::new();
    for rows in &f.paces {
        let Pace::Delayed { lo_ms, hi_ms } = rows.pace else {
            continue;
        };
        let mean_ms = (lo_ms + hi_ms) as f64 / 2.0;
        let med = |g: &dyn Fn(&Run) -> f64| spread3(&of(&rows.runs, g)).1;
        let answered = med(&Run::answered_ms);
        let in_flight = med(&Run::in_flight_at_fake);
        let span = med(&Run::deletes_span_share);
        shares.push(format!(
            "{}: {mean_ms} ms ÷ {answered:.2} ms = {:.2} (late answers) × {in_flight:.1} ÷ {PACE_CONCURRENCY} = {:.2} (slots' time outside the fake) × {:.2} (start-up and exit) = {:.2}",
            rows.pace.label(),
            mean_ms / answered,
            in_flight / PACE_CONCURRENCY as f64,
            span,
            mean_ms / answered * in_flight / PACE_CONCURRENCY as f64 * span,
        ));
    }
    if !shares.is_empty() {
        let _ = writeln!(
            d,
            "\nPer run, ratio = (mean delay ÷ answered after) × (in flight at the fake ÷ {PACE_CONCURRENCY}) × span; the factors' medians: {}.",
            shares.join("; ")
        );
    }
    // The median over a pace's runs of deletes/s ÷ the ceiling `of` each run gives (NaN when the
    // pace was not run, or has no ceiling).
    let median_ratio = |pace: Pace, of: &dyn Fn(&Run) -> Option<f64>| -> f64 {
        let rows = f.paces.iter().find(|r| r.pace == pace);
        let ratios: Option<Vec<f64>> = rows.and_then(|r| {
            r.runs
                .iter()
                .map(|run| Some(run.per_sec() / of(run)?))
                .collect()
        });
        ratios.map_or(f64::NAN, |v| spread3(&v).1)
    };
    let nominal = |pace: Pace| median_ratio(pace, &|_| ceiling(pace, PACE_CONCURRENCY));
    let as_answered = |pace: Pace| {
        median_ratio(pace, &|run| {
            Some(ceiling_as_answered(run, PACE_CONCURRENCY))
        })
    };
    let (slow, usual) = (nominal(PACES[2]), nominal(PACES[1]));
    let worst_one_by_one = f
        .paces
        .iter()
        .flat_map(|r| r.runs.iter().map(Run::one_by_one))
        .fold(0.0, f64::max);
    let _ = writeln!(
        d,
        "\nGoals (printed, not asserted): at least {CEILING_GOAL:.1} of the ceiling {}, median {slow:.2}, {} (as answered: {:.2}), and {}, median {usual:.2}, {} (as answered: {:.2}); at most {:.0} % of deletes one by one, at most {:.2} %, {}.\n",
        PACES[2].label(),
        crate::met(slow >= CEILING_GOAL),
        as_answered(PACES[2]),
        PACES[1].label(),
        crate::met(usual >= CEILING_GOAL),
        as_answered(PACES[1]),
        ONE_BY_ONE_GOAL * 100.0,
        worst_one_by_one * 100.0,
        crate::met(worst_one_by_one <= ONE_BY_ONE_GOAL),
    );

    let _ = writeln!(
        d,
        "**Peak memory.** `MAX_CONCURRENCY={MEMORY_CONCURRENCY}`, `DELETE_MODE=conditional` and `batch`, the fake answering at once, {} windows × {} items = {} deletes per run; {} of each mode.\n",
        WINDOWS,
        s.memory_per_window,
        WINDOWS * s.memory_per_window,
        runs_text(s.memory_runs)
    );
    let worst_peak = memory_table(d, "DELETE_MODE", &f.memory);
    let _ = writeln!(
        d,
        "\nGoal (printed, not asserted): peak memory at most {MEMORY_GOAL_MIB:.0} MiB — at most {worst_peak:.1} MiB, {}.\n",
        crate::met(worst_peak <= MEMORY_GOAL_MIB)
    );
    let budget_mib = f64::from(ttl_sweeper::engine::hook::EVENT_ITEMS_BUDGET_KIB) / 1024.0;
    let _ = writeln!(
        d,
        "**Peak memory with whole items in expiry events.** `MAX_CONCURRENCY={ITEMS_CONCURRENCY}`, `EXPIRY_EVENTS=eventbridge:default`, items of {ITEM_KIB} KiB, the fake answering at once, {} windows × {} items = {} deletes per run; {} of each row. Unbounded, {ITEMS_CONCURRENCY} chunks of 25 such items would hold {:.0} MiB; a sweep holds at most `EVENT_ITEMS_BUDGET_KIB` ({budget_mib:.0} MiB) of whole items.\n",
        WINDOWS,
        s.items_per_window,
        WINDOWS * s.items_per_window,
        runs_text(s.memory_runs),
        (ITEMS_CONCURRENCY * 25 * ITEM_KIB) as f64 / 1024.0
    );
    memory_table(d, "delete mode, item", &f.items);
    let _ = writeln!(d);
    let _ = writeln!(
        d,
        "Reproduce alone: `cargo build --release --bin ttl-sweeper && BENCH_ONLY=pace AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null cargo bench --bench sweeper` (writes target/bench-pace.md; `BENCH_QUICK=1`: 1 run of each row, 1,000 items per window).\n"
    );
}

/// A table of peak memory, one row per entry of `rows` (first column headed `first`); returns
/// the largest peak.
fn memory_table(d: &mut String, first: &str, rows: &[MemoryRows]) -> f64 {
    let _ = writeln!(d, "| {first} | peak memory MiB | deletes/s | requests (median run: Query / BatchWriteItem / DeleteItem / BatchGetItem) |");
    let _ = writeln!(d, "|---|---|---|---|");
    let mut worst_peak: f64 = 0.0;
    for rows in rows {
        let peaks = of(&rows.runs, |r| r.peak_mib);
        worst_peak = peaks.iter().copied().fold(worst_peak, f64::max);
        let mut by_rate: Vec<&Run> = rows.runs.iter().collect();
        by_rate.sort_by(|a, b| a.per_sec().total_cmp(&b.per_sec()));
        let ops = by_rate
            .get(by_rate.len() / 2)
            .map(|r| r.ops)
            .unwrap_or_default();
        let _ = writeln!(
            d,
            "| {} | {} | {} | {} / {} / {} / {} |",
            rows.mode,
            three(&peaks, |v| format!("{v:.1}")),
            three(&of(&rows.runs, Run::per_sec), |v| format!("{v:.0}")),
            ops.query,
            ops.batch_write,
            ops.delete,
            ops.batch_get
        );
    }
    worst_peak
}
