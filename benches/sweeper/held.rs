//! Section 4 of docs/BENCHMARKS.md, its packs gathered across batches: how many keys the
//! daemon's packs list when the follower holds entries (`FOLLOW_HOLD`), counted, beside what the
//! cost model's formula ([`held_keys_per_pack`]) says for the same rate, hold and spread of ttls;
//! and what an entry held costs in memory. The release daemon (`ttl-sweeper run --every 1s
//! --follow-stream`) on a DynamoDB Local of its own per run, behind the capacity meter of
//! tests/support/capacity.rs, once with the hold and once without (`FOLLOW_HOLD=0`, each entry
//! written with its batch, as the Lambda indexer writes them).
//!
//! `BENCH_ONLY=held cargo bench --bench sweeper` runs this part alone and writes
//! target/bench-held.md; `make bench` adds it to docs/BENCHMARKS.md.

use std::fmt::Write as _;
use std::time::Duration;

use crate::daemon::three;
use crate::stream::{metered, own_server, start_daemon_with, stop_server, tables};
use crate::support::capacity::Kind;
use crate::support::cost::{held_keys_per_pack, simulate_held_keys_per_pack};
use crate::support::*;

/// The part's heading in docs/BENCHMARKS.md section 4.
pub const HEADING: &str = "### Packs gathered across batches (the daemon, `FOLLOW_HOLD`)";
/// The least a ttl is ahead of its write (s): past the follower's `HOLD_FROM` (120 s), so that
/// every entry is one the follower may hold.
pub const AHEAD_MIN_S: i64 = 180;

/// Sizes and repetitions.
pub struct Settings {
    pub quick: bool,
    /// Items written per run, at `rate` a second, ttls spread over `spread_s` seconds.
    pub items: usize,
    pub rate: f64,
    pub spread_s: f64,
    /// `FOLLOW_HOLD`, seconds.
    pub hold_s: f64,
    pub runs: usize,
    /// Items held at once for the memory rows.
    pub memory_items: usize,
}

impl Settings {
    pub fn new(quick: bool) -> Self {
        if quick {
            Settings {
                quick,
                items: 1_200,
                rate: 40.0,
                spread_s: 600.0,
                hold_s: 10.0,
                runs: 1,
                memory_items: 10_000,
            }
        } else {
            Settings {
                quick,
                items: 6_000,
                rate: 40.0,
                spread_s: 1_200.0,
                hold_s: 45.0,
                runs: 3,
                memory_items: 50_000,
            }
        }
    }
}

/// One run with or without the hold.
pub struct Run {
    pub hold_s: f64,
    /// Index items put, the keys they list, their write units.
    pub packs: u64,
    pub keys: u64,
    pub units: f64,
    pub secs: f64,
}

impl Run {
    fn keys_per_pack(&self) -> f64 {
        self.keys as f64 / self.packs.max(1) as f64
    }
    fn units_per_key(&self) -> f64 {
        self.units / self.keys.max(1) as f64
    }
}

pub struct Figures {
    pub settings: Settings,
    /// Per repetition: held, then not.
    pub runs: Vec<[Run; 2]>,
    /// Peak resident memory (KiB) with `memory_items` entries held, and without the hold, per
    /// repetition.
    pub memory: Vec<(i64, i64)>,
}

/// One run: its own server, tables, meter and daemon, `items` written at `rate` with ttls
/// spread over `spread_s` from [`AHEAD_MIN_S`] ahead; the daemon stopped (writing what it
/// holds) once the last hold has passed.
async fn run(s: &Settings, hold_s: f64, seed: u64) -> Run {
    let hold = format!("{}ms", (hold_s * 1000.0) as u64);
    let env = [("FOLLOW_HOLD", hold.as_str())];
    let (server, t, meter, mut daemon, app) = metered("held", &env).await;
    let started = std::time::Instant::now();
    let mut rng = fastrand::Rng::with_seed(seed);
    let chunk = 10;
    let every = Duration::from_secs_f64(chunk as f64 / s.rate);
    let mut next = tokio::time::Instant::now();
    for first in (0..s.items).step_by(chunk) {
        let now = wall_clock() as i64;
        let items = (first..(first + chunk).min(s.items))
            .map(|i| {
                let ttl = now + AHEAD_MIN_S + rng.i64(0..s.spread_s as i64);
                unwindowed(&format!("u-{i}"), ttl)
            })
            .collect();
        put_items(&app, &t.plain, items).await;
        next += every;
        tokio::time::sleep_until(next).await;
    }
    // The last records read and the last hold passed; the stop writes what is still held.
    tokio::time::sleep(Duration::from_secs_f64(hold_s + 3.0)).await;
    daemon.stop().await;
    let secs = started.elapsed().as_secs_f64();
    let counts = meter.counts();
    drop(meter);
    stop_server(server).await;
    let puts = counts.of(Kind::EntryPut);
    Run {
        hold_s,
        packs: puts.items,
        keys: counts.keys_listed,
        units: puts.write_units,
        secs,
    }
}

/// The daemon's peak resident memory (KiB) once it has read `items` records whose entries are
/// due an hour ahead, with `hold` (`FOLLOW_HOLD`): held, or written at once.
async fn memory(items: usize, hold: &str) -> i64 {
    let server = own_server().await;
    let client = client_of(&server.endpoint).await;
    let t = tables(&client, "heldmem").await;
    let env = [("FOLLOW_HOLD", hold)];
    let index = Some(t.index.as_str());
    let mut daemon =
        start_daemon_with(&server.endpoint, &t.plain, &t.checkpoint, index, &env).await;
    let due = wall_clock() as i64 + 3600;
    let ids: Vec<String> = (0..items).map(|i| format!("m-{i:07}")).collect();
    let writes = ids.chunks(250).map(|ids| {
        let (client, table) = (client.clone(), t.plain.clone());
        let items = ids.iter().map(|id| unwindowed(id, due)).collect();
        async move { put_items(&client, &table, items).await }
    });
    futures::future::join_all(writes).await;
    // Read and indexed once the peak stops growing.
    let mut peak = 0;
    let mut still = 0;
    while still < 6 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = daemon.peak_rss_kib().unwrap_or(peak);
        still = if now > peak { 0 } else { still + 1 };
        peak = peak.max(now);
    }
    daemon.stop().await;
    stop_server(server).await;
    peak
}

/// Every run: held and not, per repetition, and the memory rows.
pub async fn measure(quick: bool) -> Figures {
    let settings = Settings::new(quick);
    let mut runs = Vec::new();
    let mut memory_rows = Vec::new();
    for r in 0..settings.runs {
        let held = run(&settings, settings.hold_s, 1 + r as u64).await;
        let not = run(&settings, 0.0, 1 + r as u64).await;
        for run in [&held, &not] {
            eprintln!(
                "held, run {}, FOLLOW_HOLD={} s: {} packs listing {} keys ({:.2} a pack), {:.3} WRU a key, {:.0} s",
                r + 1,
                run.hold_s,
                run.packs,
                run.keys,
                run.keys_per_pack(),
                run.units_per_key(),
                run.secs
            );
        }
        runs.push([held, not]);
        let with = memory(settings.memory_items, "1h").await;
        let without = memory(settings.memory_items, "0").await;
        eprintln!(
            "held, run {}, memory: {with} KiB holding {} entries, {without} KiB holding none",
            r + 1,
            settings.memory_items
        );
        memory_rows.push((with, without));
    }
    Figures {
        settings,
        runs,
        memory: memory_rows,
    }
}

/// The part, as docs/BENCHMARKS.md shows it.
pub fn render(d: &mut String, f: &Figures) {
    let s = &f.settings;
    let model = held_keys_per_pack(s.rate, s.hold_s, f64::INFINITY, s.spread_s);
    let simulated = simulated(s);
    crate::intro(d, HEADING, s.quick, "fewer items, a shorter hold");
    let _ = writeln!(
        d,
        "The release daemon (`ttl-sweeper run --every 1s --follow-stream`) on a DynamoDB Local of its own per run, behind the capacity meter: {} items written at {:.0} a second, ttls uniformly {} to {} s ahead (whole seconds: {:.0} due instants, each a pack's group), once with `FOLLOW_HOLD={:.0}s` and once with `FOLLOW_HOLD=0` (each entry written with its stream batch, as the Lambda indexer writes them); the daemon stopped, writing what it still holds, {:.0} s after the last write. The follower's rule for writing what it holds, simulated for this run (`simulate_held_keys_per_pack`, tests/support/cost.rs; mean of 20 draws), gives **{simulated:.2} keys a pack**; its steady state, the cost model's formula (`held_keys_per_pack`: a due second's pack lists the first entry held and those that come while it waits the hold, 1 + rate × hold ÷ spread, which a test holds to the simulation over hours), {model:.2}: the run stops mid-hold, so its packs are emptier than a steady day's.\n",
        s.items,
        s.rate,
        AHEAD_MIN_S,
        AHEAD_MIN_S + s.spread_s as i64,
        s.spread_s,
        s.hold_s,
        s.hold_s + 3.0
    );
    let _ = writeln!(d, "| run | `FOLLOW_HOLD` | packs put | keys listed | keys a pack | WRU a key | counted ÷ simulated |\n|---|---|---|---|---|---|---|");
    for (i, pair) in f.runs.iter().enumerate() {
        for r in pair {
            let ratio = if r.hold_s > 0.0 {
                format!("{:.2}", r.keys_per_pack() / simulated)
            } else {
                "(no hold)".into()
            };
            let _ = writeln!(
                d,
                "| {} | {:.0} s | {} | {} | {:.2} | {:.3} | {ratio} |",
                i + 1,
                r.hold_s,
                r.packs,
                r.keys,
                r.keys_per_pack(),
                r.units_per_key()
            );
        }
    }
    let held: Vec<f64> = f.runs.iter().map(|p| p[0].keys_per_pack()).collect();
    let not: Vec<f64> = f.runs.iter().map(|p| p[1].keys_per_pack()).collect();
    let ratio: Vec<f64> = f
        .runs
        .iter()
        .map(|p| p[0].keys_per_pack() / simulated)
        .collect();
    let per_entry: Vec<f64> = f
        .memory
        .iter()
        .map(|(with, without)| (with - without) as f64 * 1024.0 / s.memory_items as f64)
        .collect();
    let _ = writeln!(
        d,
        "\nKeys a pack, min / median / max: held {}, not held {}; counted ÷ simulated {}.\n\nMemory: the daemon's peak resident memory once it has read {} records whose entries are due an hour ahead, held (`FOLLOW_HOLD=1h`) and not: {} KiB against {} KiB (medians), **{} bytes an entry held** (min / median / max). `FOLLOW_HOLD_ENTRIES`' default, {}, comes to about {:.0} MB at the median.\n",
        three(&held, |x| format!("{x:.2}")),
        three(&not, |x| format!("{x:.2}")),
        three(&ratio, |x| format!("{x:.2}")),
        s.memory_items,
        crate::median(&f.memory.iter().map(|m| m.0 as f64).collect::<Vec<_>>()),
        crate::median(&f.memory.iter().map(|m| m.1 as f64).collect::<Vec<_>>()),
        three(&per_entry, |x| format!("{x:.0}")),
        ttl_sweeper::index::follow::DEFAULT_MAX_ENTRIES,
        crate::median(&per_entry) * ttl_sweeper::index::follow::DEFAULT_MAX_ENTRIES as f64 / 1e6
    );
    let _ = writeln!(d, "{CLOSE}\n");
}

/// Keys a pack the follower's rule gives for `s`'s runs: the mean of 20 simulated draws.
fn simulated(s: &Settings) -> f64 {
    let write_s = s.items as f64 / s.rate;
    let stop_s = write_s + s.hold_s + 3.0;
    let ahead = AHEAD_MIN_S as f64;
    let draws: Vec<f64> = (0..20)
        .map(|seed| {
            simulate_held_keys_per_pack(s.rate, ahead, s.spread_s, s.hold_s, write_s, stop_s, seed)
        })
        .collect();
    draws.iter().sum::<f64>() / draws.len() as f64
}

/// The line that ends the part.
pub const CLOSE: &str = "<!-- /held -->";

/// Puts `part` into `doc` (a whole docs/BENCHMARKS.md), replacing the part there or, when there
/// is none, after section 4's counted units.
pub fn splice(doc: &str, part: &str) -> String {
    let part = format!("{}\n", part.trim_end());
    match (doc.find(HEADING), doc.find(CLOSE)) {
        (Some(a), Some(b)) => format!("{}{part}{}", &doc[..a], &doc[b + CLOSE.len() + 1..]),
        _ => {
            let after = "<!-- /units-counted -->\n";
            match doc.find(after) {
                Some(at) => {
                    let at = at + after.len();
                    format!("{}\n{part}{}", &doc[..at], &doc[at..])
                }
                None => format!("{doc}\n{part}"),
            }
        }
    }
}

/// Writes `part` into docs/BENCHMARKS.md ([`splice`]).
pub fn update_doc(part: &str) {
    let path = "docs/BENCHMARKS.md";
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    std::fs::write(path, splice(&text, part)).unwrap();
    eprintln!("wrote section 4's packs gathered across batches into {path}");
}
