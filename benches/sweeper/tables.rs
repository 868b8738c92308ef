//! Section 1 of docs/BENCHMARKS.md, its "Many tables" part: the release daemon,
//! `ttl-sweeper run --every 1s`, sweeping one table and sweeping ten, side by side in one run
//! against DynamoDB Local, the same items written into every table: the lag from ttl to
//! acknowledged delete, the daemon's tick durations (its `tick finished` lines), its CPU and its
//! peak memory.
//!
//! `BENCH_ONLY=tables cargo bench --bench sweeper` runs this part alone and writes
//! target/bench-tables.md; `make bench` adds it to docs/BENCHMARKS.md.

use std::fmt::Write as _;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use tokio::time::Instant;

use crate::daemon::{lag_cells, lag_spread, three, Daemon, Lags};
use crate::pct;
use crate::support::recorder::{Acks, DeleteRecorder};
use crate::support::*;

/// Sizes and repetitions.
pub struct Settings {
    pub quick: bool,
    pub runs: usize,
    /// Seconds over which each run writes its items.
    pub secs: i64,
    /// Items written each second into each table, due [`DUE_IN`] s later.
    pub per_sec: i64,
}

impl Settings {
    pub fn new(quick: bool) -> Self {
        Settings {
            quick,
            runs: if quick { 1 } else { 3 },
            secs: if quick { 8 } else { 20 },
            per_sec: 5,
        }
    }
}

/// A due item's ttl is the whole second of its write plus this: 2–3 s after it is written.
const DUE_IN: i64 = 3;
/// The configurations measured side by side: one daemon sweeping this many tables.
pub const CONFIGS: [usize; 2] = [1, 10];

/// One configuration in one run.
pub struct Measured {
    pub tables: usize,
    /// Lag from ttl to acknowledged delete of each deleted item, every table's.
    pub lag: Lags,
    pub early: usize,
    /// `duration_ms` of each of the daemon's tick lines, every table's (sorted).
    pub ticks_ms: Vec<f64>,
    /// utime + stime, seconds, and the daemon's wall seconds, read just before SIGTERM.
    pub cpu_secs: f64,
    pub wall_secs: f64,
    /// `VmHWM`, KiB, read just before SIGTERM.
    pub peak_rss_kib: Option<i64>,
}

impl Measured {
    fn tick_ms(&self, p: f64) -> f64 {
        pct(&self.ticks_ms, p)
    }
    fn tick_max_ms(&self) -> f64 {
        self.ticks_ms.last().copied().unwrap_or(f64::NAN)
    }
    fn rss_mib(&self) -> f64 {
        self.peak_rss_kib.map_or(f64::NAN, |k| k as f64 / 1024.0)
    }
}

pub struct Figures {
    pub settings: Settings,
    /// Per run, each of [`CONFIGS`] in that order.
    pub runs: Vec<Vec<Measured>>,
}

/// One configuration's daemon, its tables, its proxy, and the items written into them.
struct Sweeping {
    tables: Vec<String>,
    daemon: Daemon,
    acks: Acks,
    _recorder: DeleteRecorder,
    started: Instant,
}

async fn start(client: &Client, n: usize, config: usize) -> Sweeping {
    let mut tables = Vec::new();
    for _ in 0..n {
        tables.push(new_table(client, &format!("tables{n}"), |_| {}).await);
    }
    let recorder = DeleteRecorder::start(&endpoint()).await;
    let acks = recorder.acks.clone();
    let started = Instant::now();
    let names = tables.join(",");
    let args = ["--every", "1s", "--table-name", &names];
    let log = format!("tables-{config}-{}", tables[0]);
    let ready = "running until SIGINT or SIGTERM";
    let daemon = Daemon::start(&recorder.endpoint, &log, &[], &args, ready).await;
    Sweeping {
        tables,
        daemon,
        acks,
        _recorder: recorder,
        started,
    }
}

/// Writes `per_sec` items a second into `table` for `secs` s, one `PutItem` at a time, evenly
/// spaced from `start + offset`, each due [`DUE_IN`] s after the whole second of its write;
/// returns each item's id and ttl.
async fn write(
    client: Client,
    table: String,
    id_prefix: String,
    (secs, per_sec): (i64, i64),
    start: Instant,
    offset: Duration,
) -> Vec<(String, i64)> {
    let gap = Duration::from_secs_f64(1.0 / per_sec as f64);
    let mut written = Vec::new();
    for k in 0..secs * per_sec {
        tokio::time::sleep_until(start + offset + gap * k as u32).await;
        let ttl = now() + DUE_IN;
        let id = format!("{id_prefix}-{k}");
        put_one(&client, &table, session(&id, ttl)).await;
        written.push((id, ttl));
    }
    written
}

/// One run: a daemon per configuration, started side by side; then every table of every
/// configuration written at the same rate at the same time (the writers' turns interleaved);
/// then, once every item is gone (or 15 s after the last ttl), each daemon's CPU and memory read
/// and the daemons stopped.
async fn run_once(s: &Settings) -> Vec<Measured> {
    let client = client().await;
    let mut sweeping = Vec::new();
    for (c, &n) in CONFIGS.iter().enumerate() {
        sweeping.push(start(&client, n, c).await);
    }
    let all: Vec<(usize, usize, String)> = sweeping
        .iter()
        .enumerate()
        .flat_map(|(c, sw)| {
            sw.tables
                .iter()
                .enumerate()
                .map(move |(t, name)| (c, t, name.clone()))
        })
        .collect();
    let gap = 1.0 / s.per_sec as f64;
    let start = Instant::now();
    let writers: Vec<_> = all
        .iter()
        .enumerate()
        .map(|(i, (c, t, table))| {
            let offset = Duration::from_secs_f64(gap * i as f64 / all.len() as f64);
            let client = client.clone();
            let job = write(
                client,
                table.clone(),
                format!("c{c}t{t}"),
                (s.secs, s.per_sec),
                start,
                offset,
            );
            tokio::spawn(job)
        })
        .collect();
    // Each configuration's items: id and ttl.
    let mut written: Vec<Vec<(String, i64)>> = vec![Vec::new(); CONFIGS.len()];
    for ((c, _, _), writer) in all.iter().zip(writers) {
        written[*c].extend(writer.await.expect("writer"));
    }
    let last = written.iter().flatten().map(|w| w.1).max().unwrap_or(0) as f64 + 15.0;
    loop {
        let done = sweeping.iter().zip(&written).all(|(sw, items)| {
            let acks = sw.acks.lock().unwrap();
            items.iter().all(|(id, _)| acks.contains_key(id))
        });
        if done || wall_clock() > last {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The same idle second for both, then each daemon read and stopped.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut got = Vec::new();
    for ((sw, items), &tables) in sweeping.iter_mut().zip(&written).zip(&CONFIGS) {
        let cpu_secs = sw.daemon.cpu_secs();
        let peak_rss_kib = sw.daemon.peak_rss_kib();
        let wall_secs = sw.started.elapsed().as_secs_f64();
        sw.daemon.stop().await;
        let mut ticks_ms: Vec<f64> = sw
            .daemon
            .tick_lines()
            .iter()
            .filter_map(|l| l["duration_ms"].as_f64())
            .collect();
        ticks_ms.sort_by(f64::total_cmp);
        let acks = sw.acks.lock().unwrap();
        let mut lags: Vec<f64> = items
            .iter()
            .filter_map(|(id, ttl)| acks.get(id).map(|(at, _)| at - *ttl as f64))
            .collect();
        lags.sort_by(f64::total_cmp);
        got.push(Measured {
            tables,
            early: lags.iter().filter(|l| **l < 0.0).count(),
            lag: Lags {
                items: items.len(),
                lags,
                one_by_one: 0,
            },
            ticks_ms,
            cpu_secs,
            wall_secs,
            peak_rss_kib,
        });
    }
    got
}

/// The runs, each with both configurations side by side.
pub async fn measure(quick: bool) -> Figures {
    let settings = Settings::new(quick);
    let mut runs = Vec::new();
    for run in 0..settings.runs {
        let got = run_once(&settings).await;
        for m in &got {
            eprintln!(
                "tables, run {}, {} table(s): {} items, {} never deleted, {} before their ttl; lag p50 {:.3} s, p99 {:.3} s, max {:.3} s; {} tick lines, duration p99 {:.0} ms, max {:.0} ms; {:.2} s CPU in {:.1} s, peak RSS {:.1} MiB",
                run + 1,
                m.tables,
                m.lag.items,
                m.lag.missed(),
                m.early,
                m.lag.p(0.5),
                m.lag.p(0.99),
                m.lag.max(),
                m.ticks_ms.len(),
                m.tick_ms(0.99),
                m.tick_max_ms(),
                m.cpu_secs,
                m.wall_secs,
                m.rss_mib()
            );
        }
        runs.push(got);
    }
    Figures { settings, runs }
}

fn ms(v: f64) -> String {
    format!("{v:.0} ms")
}

fn mib(v: f64) -> String {
    format!("{v:.1} MiB")
}

/// The subsection, in Markdown.
pub fn render(d: &mut String, f: &Figures) {
    let s = &f.settings;
    crate::intro(
        d,
        "### Many tables: one daemon, ten tables",
        s.quick,
        "one shorter run",
    );
    let _ = writeln!(
        d,
        "The release daemon (`ttl-sweeper run --every 1s --table-name <tables>`) sweeping one table and, beside it, another sweeping ten, against DynamoDB Local; each run writes for {} s into each table {} items a second, due 2–3 s later. *Tick*: `duration_ms` of the `tick finished` lines, one per table per tick that found items. *CPU* and *peak RSS*: read a second after the last delete.\n",
        s.secs,
        s.per_sec
    );
    crate::table_head(d, "| run | tables | items | never deleted | deleted before ttl | p50 lag | p99 lag | max lag | tick lines | tick p99 | tick max | CPU | peak RSS |");
    for (i, run) in f.runs.iter().enumerate() {
        for m in run {
            let _ = writeln!(
                d,
                "| {} | {} | {} | {} | {} | {} | {:.2} s in {:.1} s | {} |",
                i + 1,
                m.tables,
                lag_cells(&m.lag, m.early),
                m.ticks_ms.len(),
                ms(m.tick_ms(0.99)),
                ms(m.tick_max_ms()),
                m.cpu_secs,
                m.wall_secs,
                mib(m.rss_mib())
            );
        }
    }
    let _ = writeln!(d, "\n**min / median / max over {} runs**:\n", f.runs.len());
    crate::table_head(
        d,
        "| tables | p50 lag | p99 lag | max lag | tick p99 | tick max | CPU | peak RSS |",
    );
    for (c, tables) in CONFIGS.iter().enumerate() {
        let col = |g: fn(&Measured) -> f64, w: fn(f64) -> String| {
            three(&f.runs.iter().map(|r| g(&r[c])).collect::<Vec<_>>(), w)
        };
        let lags: Vec<&Lags> = f.runs.iter().map(|r| &r[c].lag).collect();
        let _ = writeln!(
            d,
            "| {tables} | {} | {} | {} | {} | {} |",
            lag_spread(&lags),
            col(|m| m.tick_ms(0.99), ms),
            col(Measured::tick_max_ms, ms),
            col(|m| m.cpu_secs, |v| format!("{v:.2} s")),
            col(Measured::rss_mib, mib)
        );
    }
    let missed: usize = f.runs.iter().flatten().map(|m| m.lag.missed()).sum();
    let early: usize = f.runs.iter().flatten().map(|m| m.early).sum();
    let _ = writeln!(
        d,
        "\nNever deleted: {missed}; deleted before their ttl: {early}. CPU is read in {} ms clock ticks; DynamoDB Local's is not counted.\n",
        // SAFETY: sysconf has no preconditions.
        1000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }
    );
    let quick = Settings::new(true);
    let _ = writeln!(
        d,
        "Reproduce alone: `BENCH_ONLY=tables make bench` (writes target/bench-tables.md; `BENCH_QUICK=1`: {} run of {} s).\n",
        quick.runs, quick.secs
    );
}
