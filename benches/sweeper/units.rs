//! Section 4 of docs/BENCHMARKS.md, its counted units: what the index-table path spends per
//! expired item, counted rather than modelled. The release daemon (`ttl-sweeper run --every 1s
//! --follow-stream`, an expiry index table) on a DynamoDB Local of its own, once with
//! `DELETE_MODE=batch` and once with `DELETE_MODE=conditional`, each run behind the capacity meter
//! of tests/support/capacity.rs (units from item sizes by DynamoDB's published rules; DynamoDB
//! Local's own `ConsumedCapacity` is wrong for batch deletes and for batch reads of missing
//! items). The application writes through the meter's front door, into the same ledger.
//!
//! The workload: items of exactly 1 KB (attribute names included), each written once with a ttl
//! uniformly between 1 minute and 24 hours ahead, that span compressed to [`Settings::span_secs`]
//! (1 minute becomes `span / 1440`, at least [`MIN_AHEAD`] s); one in ten refreshed once before
//! its ttl (the ttl moved later), one in twenty deleted by the application before its ttl. A run
//! ends once every item that expires is gone and every index entry of one item is removed (packs
//! stay, for native TTL).
//!
//! `BENCH_ONLY=units cargo bench --bench sweeper` runs this part alone and writes
//! target/bench-units.md (without `BENCH_QUICK=1` it also rewrites docs/BENCHMARKS.md's
//! `units-counted` block, the cost model's input); `make bench` adds it to docs/BENCHMARKS.md.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use crate::daemon::three;
use crate::stream::{metered, stop_server};
use crate::support::capacity::{padded, Counts, Kind};
use crate::support::cost::{Counted, PRICE_RRU, PRICE_WRU};
use crate::support::*;

/// The least a ttl is ahead of its write in the compressed span (s): a refresh or an
/// application's delete comes well before the ttl.
pub const MIN_AHEAD: f64 = 4.0;
/// The part's heading in docs/BENCHMARKS.md section 4.
pub const HEADING: &str = "### Units counted per expired item";
/// Bytes of every item the application writes.
pub const ITEM_BYTES: u64 = 1024;
/// The sweeper's delete modes, each run once per repetition.
pub const MODES: [&str; 2] = ["batch", "conditional"];

/// Sizes and repetitions.
pub struct Settings {
    pub quick: bool,
    /// Items written per run.
    pub items: usize,
    /// Seconds the 24 hours of ttls are compressed to.
    pub span_secs: f64,
    /// Runs of each mode.
    pub runs: usize,
}

impl Settings {
    pub fn new(quick: bool) -> Self {
        if quick {
            Settings {
                quick,
                items: 1_000,
                span_secs: 40.0,
                runs: 1,
            }
        } else {
            Settings {
                quick,
                items: 10_000,
                span_secs: 120.0,
                runs: 3,
            }
        }
    }
}

/// One run of one mode.
pub struct Run {
    pub mode: &'static str,
    pub written: usize,
    pub refreshed: usize,
    pub app_deleted: usize,
    /// Items that expired: written less those the application deleted.
    pub expired: usize,
    /// Left in the table at the end that should have expired (0 unless the run timed out).
    pub left: usize,
    /// Refreshes and deletes of the application that came after the item's ttl.
    pub late: usize,
    pub counts: Counts,
    pub secs: f64,
}

pub struct Figures {
    pub settings: Settings,
    /// Per repetition, a run of each of [`MODES`].
    pub runs: Vec<[Run; 2]>,
}

/// The `i`-th item, with `ttl`, padded to [`ITEM_BYTES`].
fn item(i: usize, ttl: i64) -> ttl_sweeper::store::Key {
    padded(unwindowed(&format!("u-{i}"), ttl), "payload", ITEM_BYTES)
}

/// What the application does to an item after writing it.
#[derive(Clone, Copy, PartialEq)]
enum Then {
    Nothing,
    /// Write it again, the ttl this many seconds later.
    Refresh(i64),
    Delete,
}

fn then_of(i: usize, rng: &mut fastrand::Rng, span: f64) -> Then {
    match i % 20 {
        3 | 13 => Then::Refresh(1 + rng.i64(0..(span / 2.0) as i64)),
        7 => Then::Delete,
        _ => Then::Nothing,
    }
}

/// One run: its own server, tables, meter and daemon.
async fn run(s: &Settings, mode: &'static str, seed: u64) -> Run {
    let (server, t, meter, mut daemon, app) = metered("units", &[("DELETE_MODE", mode)]).await;
    let started = std::time::Instant::now();

    // Write in chunks of 25, four writers; each chunk's ttls from its own write time.
    let mut rng = fastrand::Rng::with_seed(seed);
    let span = s.span_secs;
    let ahead_min = (span / 1440.0).max(MIN_AHEAD);
    let plan: Vec<(usize, f64, Then)> = (0..s.items)
        .map(|i| {
            let ahead = ahead_min + rng.f64() * (span - ahead_min);
            (i, ahead, then_of(i, &mut rng, span))
        })
        .collect();
    let late = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut last_ttl = 0;
    let mut writers = Vec::new();
    for quarter in plan.chunks(s.items.div_ceil(4).max(1)) {
        let (app, table, quarter) = (app.clone(), t.plain.clone(), quarter.to_vec());
        let late = late.clone();
        writers.push(tokio::spawn(async move {
            let mut events = Vec::new();
            let mut last = 0;
            for chunk in quarter.chunks(25) {
                let at = wall_clock();
                let ttls: Vec<i64> = chunk
                    .iter()
                    .map(|(_, a, _)| (at + a).ceil() as i64)
                    .collect();
                let items = chunk
                    .iter()
                    .zip(&ttls)
                    .map(|((i, _, _), ttl)| item(*i, *ttl));
                put_items(&app, &table, items.collect()).await;
                for ((i, _, then), ttl) in chunk.iter().zip(&ttls) {
                    last = last.max(*ttl + if let Then::Refresh(by) = then { *by } else { 0 });
                    if *then == Then::Nothing {
                        continue;
                    }
                    // Somewhere in the first half of the time left before the ttl.
                    let frac = 0.1 + 0.4 * ((i * 7919) % 1000) as f64 / 1000.0;
                    let when = at + (*ttl as f64 - at) * frac;
                    let (app, table, late, (i, ttl, then)) =
                        (app.clone(), table.clone(), late.clone(), (*i, *ttl, *then));
                    events.push(tokio::spawn(async move {
                        let wait = (when - wall_clock()).max(0.0);
                        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
                        if wall_clock() >= ttl as f64 {
                            late.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        match then {
                            Then::Refresh(by) => put_one(&app, &table, item(i, ttl + by)).await,
                            Then::Delete => delete_one(&app, &table, &format!("u-{i}")).await,
                            Then::Nothing => {}
                        }
                    }));
                }
            }
            for e in events {
                e.await.expect("an application's event");
            }
            last
        }));
    }
    for w in writers {
        last_ttl = last_ttl.max(w.await.expect("a writer"));
    }
    // Every item that expires gone, and every entry of one item removed (the sweeper removes the
    // entries of items refreshed or deleted by the application once it has judged them; packs
    // stay, for native TTL).
    let limit = last_ttl as f64 + 120.0;
    while (meter.live(&t.plain) > 0 || meter.live(&t.index) > 0) && wall_clock() < limit {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // A tick more, so that nothing judged is left half-counted.
    tokio::time::sleep(Duration::from_secs(2)).await;
    daemon.stop().await;
    let secs = started.elapsed().as_secs_f64();
    let counts = meter.counts();
    let left = count_left(&server.endpoint, &t.plain).await;
    drop(meter);
    stop_server(server).await;
    let refreshed = plan
        .iter()
        .filter(|p| matches!(p.2, Then::Refresh(_)))
        .count();
    let app_deleted = plan.iter().filter(|p| p.2 == Then::Delete).count();
    assert!(
        counts.unknown.is_empty(),
        "the meter could not size {} requests: {:?}",
        counts.unknown.len(),
        &counts.unknown[..counts.unknown.len().min(5)]
    );
    Run {
        mode,
        written: s.items,
        refreshed,
        app_deleted,
        expired: s.items - app_deleted,
        left,
        late: late.load(std::sync::atomic::Ordering::Relaxed),
        counts,
        secs,
    }
}

/// Items left in `table` (read directly from the server at `endpoint`, not through the meter).
async fn count_left(endpoint: &str, table: &str) -> usize {
    scan_all(&client_of(endpoint).await, table).await.len()
}

/// Every run: each mode once per repetition, their order turning.
pub async fn measure(quick: bool) -> Figures {
    let settings = Settings::new(quick);
    let mut runs = Vec::new();
    for r in 0..settings.runs {
        let mut got: Vec<Option<Run>> = vec![None, None];
        for k in 0..MODES.len() {
            let m = (k + r) % MODES.len();
            let run = run(&settings, MODES[m], 1 + r as u64).await;
            eprintln!(
                "units, run {}, DELETE_MODE={}: {} written, {} expired, {} left, {} late application events, {:.0} s",
                r + 1,
                run.mode,
                run.written,
                run.expired,
                run.left,
                run.late,
                run.secs
            );
            got[m] = Some(run);
        }
        let [a, b] = [got[0].take().unwrap(), got[1].take().unwrap()];
        runs.push([a, b]);
    }
    Figures { settings, runs }
}

/// Units as the table shows them: write units, read units, or both.
fn units(kind: Kind, w: f64, r: f64, digits: usize) -> String {
    match (kind.writes(), r > 0.0, w > 0.0) {
        (true, true, true) => format!("{w:.digits$} WRU + {r:.digits$} RRU"),
        (true, true, false) => format!("{r:.digits$} RRU"),
        (true, false, _) => format!("{w:.digits$} WRU"),
        (false, _, _) => format!("{r:.digits$} RRU"),
    }
}

/// The counted inputs of the cost model, from a run of each mode.
pub fn counted(batch: &Run, conditional: &Run) -> Counted {
    let per = |r: &Run, k: Kind| r.counts.of(k).units() / r.expired as f64;
    let c = &batch.counts;
    Counted {
        written: batch.written,
        expired: batch.expired,
        table_delete: per(batch, Kind::TableDelete),
        confirm_read: per(batch, Kind::ConfirmRead),
        failed_conditional: per(conditional, Kind::FailedConditionalDelete),
        conditional_delete: per(conditional, Kind::TableDelete),
        entry_put: per(batch, Kind::EntryPut),
        entry_removal: per(batch, Kind::EntryRemoval),
        index_query: per(batch, Kind::IndexQuery),
        entry_bytes: c.entry_bytes as f64 / c.entries.max(1) as f64,
        keys_listed: c.keys_listed as f64 / batch.expired as f64,
        one_key_pack: c.one_key_pack_units / c.one_key_packs.max(1) as f64,
        one_key_bytes: c.one_key_pack_bytes as f64 / c.one_key_packs.max(1) as f64,
    }
}

fn run_table(d: &mut String, r: &Run) {
    crate::table_head(d, "| kind | requests | items | units | per expired item |");
    let n = r.expired as f64;
    let (mut w, mut rd, mut sw, mut sr) = (0.0, 0.0, 0.0, 0.0);
    for kind in Kind::ALL {
        let t = r.counts.of(kind);
        if t.requests == 0 && t.items == 0 {
            continue;
        }
        let _ = writeln!(
            d,
            "| {} | {} | {} | {} | {} |",
            kind.label(),
            t.requests,
            t.items,
            units(kind, t.write_units, t.read_units, 0),
            units(kind, t.write_units / n, t.read_units / n, 3)
        );
        (w, rd) = (w + t.write_units, rd + t.read_units);
        if kind != Kind::App {
            (sw, sr) = (sw + t.write_units, sr + t.read_units);
        }
    }
    let dollars = |w: f64, r: f64| (w * PRICE_WRU + r * PRICE_RRU) / n * 1e6;
    let _ = writeln!(
        d,
        "| **the sweeper's (all but the application's writes)** | | | {sw:.0} WRU + {sr:.0} RRU | **{:.3} WRU + {:.3} RRU** (${:.2} per million) |",
        sw / n,
        sr / n,
        dollars(sw, sr)
    );
    let _ = writeln!(
        d,
        "| all | | | {w:.0} WRU + {rd:.0} RRU | {:.3} WRU + {:.3} RRU (${:.2} per million) |\n",
        w / n,
        rd / n,
        dollars(w, rd)
    );
    let c = &r.counts;
    let _ = writeln!(
        d,
        "Index items put: {}, listing {} keys ({:.2} a pack, {:.3} per expired item); {} of them list one key, {:.0} bytes and {:.2} WRU each on average.\n",
        c.entries,
        c.keys_listed,
        c.keys_listed as f64 / c.entries.max(1) as f64,
        c.keys_listed as f64 / n,
        c.one_key_packs,
        c.one_key_pack_bytes as f64 / c.one_key_packs.max(1) as f64,
        c.one_key_pack_units / c.one_key_packs.max(1) as f64
    );
}

/// The part, in Markdown: each run's table, the spread over repetitions, and the counted block
/// the cost model reads.
pub fn render(d: &mut String, f: &Figures) {
    let s = &f.settings;
    crate::intro(d, HEADING, s.quick, "fewer items, a shorter span");
    let _ = writeln!(
        d,
        "The release daemon (`ttl-sweeper run --every 1s --follow-stream`, an expiry index table) on a DynamoDB Local of its own per run, through a proxy that counts capacity units from item sizes by DynamoDB's published rules (tests/support/capacity.rs; DynamoDB Local's own `ConsumedCapacity` is wrong for batch deletes and for batch reads of missing items). The workload: {} items of exactly {ITEM_BYTES} bytes (attribute names included) written once each, **ttls uniformly between 1 minute and 24 hours ahead compressed to {:.0} s** (at least {MIN_AHEAD:.0} s ahead), one in ten refreshed once before its ttl (the ttl moved later, the item written again), one in twenty deleted by the application before its ttl; the application writes through the proxy's front door. A run ends once every item that expires is gone and every index entry of one item is removed (packs stay for the index table's native TTL). *Per expired item*: units ÷ items that expired (written less those the application deleted). The index queries and the index table's own partitions are paid per tick, not per item: their share per item is this run's, at its rate of expiries.\n",
        s.items,
        s.span_secs
    );
    for (i, pair) in f.runs.iter().enumerate() {
        for r in pair {
            let _ = writeln!(
                d,
                "**Run {}, `DELETE_MODE={}`**: {} written, {} refreshed, {} deleted by the application, {} expired, {} left undeleted, {} of the application's refreshes and deletes after the ttl; {:.0} s.\n",
                i + 1,
                r.mode,
                r.written,
                r.refreshed,
                r.app_deleted,
                r.expired,
                r.left,
                r.late,
                r.secs
            );
            run_table(d, r);
        }
    }
    if f.runs.len() > 1 {
        let _ = writeln!(
            d,
            "**min / median / max over {} runs**, per expired item:\n",
            f.runs.len()
        );
        crate::table_head(
            d,
            "| kind | `DELETE_MODE=batch` | `DELETE_MODE=conditional` |",
        );
        for kind in Kind::ALL {
            let col = |m: usize| {
                let v: Vec<f64> = f
                    .runs
                    .iter()
                    .map(|p| p[m].counts.of(kind).units() / p[m].expired as f64)
                    .collect();
                three(&v, |x| format!("{x:.3}"))
            };
            let _ = writeln!(d, "| {} | {} | {} |", kind.label(), col(0), col(1));
        }
        d.push('\n');
    }
    let c = median_counted(f);
    let _ = writeln!(
        d,
        "The cost model's inputs, per expired item (the median run of each mode; tests/support/cost.rs reads this table):\n"
    );
    d.push_str(&c.block());
    d.push('\n');
}

/// The cost model's inputs: the median run (by the sweeper's units per expired item) of each
/// mode.
pub fn median_counted(f: &Figures) -> Counted {
    let pick = |m: usize| {
        let mut v: Vec<&Run> = f.runs.iter().map(|p| &p[m]).collect();
        v.sort_by(|a, b| sweeper_units(a).total_cmp(&sweeper_units(b)));
        v[v.len() / 2]
    };
    counted(pick(0), pick(1))
}

/// The sweeper's units (all but the application's) per expired item of a run.
fn sweeper_units(r: &Run) -> f64 {
    let all: f64 = Kind::ALL
        .iter()
        .filter(|k| **k != Kind::App)
        .map(|k| r.counts.of(*k).units())
        .sum();
    all / r.expired as f64
}

/// Writes this part, `part` as [`render`] wrote it, into docs/BENCHMARKS.md section 4 in place of
/// the one there (or at the section's start): a full run of this part alone (`make bench` writes
/// the whole document).
pub fn update_doc(part: &str) {
    let path = "docs/BENCHMARKS.md";
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let part = format!("{}\n", part.trim_end());
    let (head, close) = (HEADING, "<!-- /units-counted -->\n");
    let updated = match (text.find(head), text.find(close)) {
        (Some(a), Some(b)) => format!("{}{part}{}", &text[..a], &text[b + close.len()..]),
        _ => {
            let section = "## 4. Cost model (per month)\n\n";
            let Some(at) = text.find(section) else {
                return;
            };
            let at = at + section.len();
            format!("{}{part}\n{}", &text[..at], &text[at..])
        }
    };
    std::fs::write(path, updated).unwrap();
    eprintln!("wrote section 4's counted units into {path}");
}
