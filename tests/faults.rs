//! The sweeper through a fault-injecting proxy in front of DynamoDB Local: every fault on its own,
//! a seeded chaos run at fault rates from 0 to 50 %, and the errors an operator must be told about
//! (credentials rejected, an index gone after start-up).
//!
//! The invariants checked after every sweep: no item that was not expired as read is deleted;
//! every expired item is deleted or reported (failed key, or a window the report lists as
//! unread); the report's counts equal what the server holds. A chaos failure prints its seed;
//! `CHAOS_SEED=<seed> cargo test --test suite faults::chaos` repeats the same faults.
//!
//! Three further chaos cases hold the same invariants where the sweep instant moves: narrow
//! windows swept a minute apart with the lookback derived from the schedule, a host clock two
//! minutes fast held to DynamoDB's, and ticks for about twenty seconds while items expire.
//!
//! The chaos tests run side by side, each table through a fault proxy of its own.

use crate::support::{self, fault_proxy};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::config::retry::{RetryConfig, RetryPartition};
use aws_sdk_dynamodb::Client;
use fault_proxy::{all_faults, Fault, FaultProxy, Plan};
use support::*;
use ttl_sweeper::config::{covering_lookback, Config, ConfigError};
use ttl_sweeper::engine::report::{MAX_ERRORS, MAX_FAILED_KEYS};
use ttl_sweeper::engine::{run_ticks, Stop, SweepReport, Sweeper, BATCH_MAX_READ_AGE};
use ttl_sweeper::expiry::window::{window_key, windows_to_sweep};
use ttl_sweeper::expiry::{Clock, Timestamp};
use ttl_sweeper::store::clock::SKEW_TOLERANCE;
use ttl_sweeper::store::{
    key_from_json, DynamoStore, ErrorKind, GuardedClock, Key, SDK_MAX_ATTEMPTS,
};

/// The sweep instant of every sweep here: a fixed minute plus 30 s, so runs are reproducible.
const NOW: i64 = 1_767_225_630;
/// Each attempt's timeout on the proxied client; a delayed request is held longer than this.
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(800);
const DELAY: Duration = Duration::from_millis(1200);
/// Sweeps per chaos table before the faults stop.
const MAX_SWEEPS: usize = 8;

/// The first SDK retry's backoff on the proxied client (the SDK's own is 1 s).
const SDK_INITIAL_BACKOFF: Duration = Duration::from_millis(100);

/// An SDK client through the proxy with the production retry policy ([`retrying_client`]: standard
/// mode, [`SDK_MAX_ATTEMPTS`] attempts), short timeouts and a short [`SDK_INITIAL_BACKOFF`], so
/// delayed answers and retried reads cost the test little. Its retry quota is the proxy's own:
/// the SDK shares one among all clients of a process on the default partition, and the tests
/// running side by side here would otherwise spend each other's.
fn proxied_client(endpoint: &str) -> Client {
    let timeouts = [
        Duration::from_secs(1),
        ATTEMPT_TIMEOUT,
        Duration::from_secs(10),
    ];
    let retries = RetryConfig::standard()
        .with_max_attempts(SDK_MAX_ATTEMPTS)
        .with_initial_backoff(SDK_INITIAL_BACKOFF);
    let config = retrying_client(endpoint, timeouts)
        .config()
        .to_builder()
        .retry_config(retries)
        .retry_partition(RetryPartition::new(format!("fault proxy {endpoint}")));
    Client::from_conf(config.build())
}

/// The ids of the keys a report lists as failed.
fn failed_ids(report: &SweepReport) -> HashSet<String> {
    report
        .failed_keys
        .iter()
        .map(|f| {
            let key = key_from_json(&f.key).expect("failed keys are rendered by key_to_json");
            key["id"].as_s().expect("string id").clone()
        })
        .collect()
}

/// What each item of a chaos table is, and so what must become of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// ttl < NOW, in a swept window: must be deleted (or reported).
    Expired,
    /// ttl >= NOW (including exactly NOW): must stay.
    Future,
    /// No ttl or a millisecond ttl (a string ttl cannot be written: ttl is an index key): must stay.
    Invalid,
    /// Expired but without a window attribute: invisible to the index, must stay.
    NoWindow,
    /// Expired, and its ttl is extended just before its delete (conditional mode): must stay.
    Extended,
}

fn chaos_items(seed: u64, extend: bool) -> (Vec<Key>, HashMap<String, (Kind, String)>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let (mut items, mut kinds) = (Vec::new(), HashMap::new());
    let mut add = |kind: Kind, item: Key| {
        let window = item.get("expirationWindow").and_then(|v| v.as_s().ok());
        let window = window.cloned().unwrap_or_default();
        kinds.insert(item["id"].as_s().unwrap().clone(), (kind, window));
        items.push(item);
    };
    for i in 0..700 {
        // spread over the last hour; every 10th exactly on a window boundary
        let ttl = if i % 10 == 0 {
            (NOW / 60 - rng.i64(0..60)) * 60
        } else {
            NOW - rng.i64(1..3600)
        };
        add(Kind::Expired, session(&format!("expired-{i}"), ttl));
    }
    add(Kind::Expired, session("just-expired", NOW - 1));
    add(Kind::Future, session("at-now", NOW));
    for i in 0..200 {
        let ttl = NOW + rng.i64(1..3600);
        add(Kind::Future, session(&format!("future-{i}"), ttl));
    }
    for i in 0..if extend { 100 } else { 0 } {
        let ttl = NOW - rng.i64(1..3600);
        add(Kind::Extended, session(&format!("extended-{i}"), ttl));
    }
    let window = window_key((NOW - 60) as f64, 60).unwrap();
    for i in 0..20 {
        let id = |kind: &str| format!("{kind}-{i}");
        let ms = (NOW - 100) * 1000;
        add(Kind::Invalid, with_window(id_key(&id("no-ttl")), &window));
        add(Kind::Invalid, windowed(&id("ms-ttl"), ms, &window));
        add(Kind::NoWindow, unwindowed(&id("no-window"), NOW - 100));
    }
    (items, kinds)
}

/// A store whose hook extends the `extended-*` items' ttl (and window, as the application
/// would) right before their first delete: the most adversarial moment.
fn extending_store(
    proxied: DynamoStore,
    direct: Client,
    table: String,
    extended: Arc<Mutex<HashSet<String>>>,
) -> Instrumented<DynamoStore> {
    let mut store = Instrumented::new(proxied);
    store.before_delete = Some(Box::new(move |key: &Key| {
        let (client, table, extended) = (direct.clone(), table.clone(), extended.clone());
        let id = key["id"].as_s().cloned().unwrap_or_default();
        let key = key.clone();
        Box::pin(async move {
            if !id.starts_with("extended-") || extended.lock().unwrap().contains(&id) {
                return;
            }
            if extend_ttl_if_there(&client, &table, key, NOW + 3600).await {
                extended.lock().unwrap().insert(id);
            }
        })
    }));
    store
}

/// One chaos table's outcome, a row of the printed table.
#[derive(Debug, Default)]
struct Row {
    mode: &'static str,
    rate: f64,
    sweeps: usize,
    requests: u64,
    faults: u64,
    retried: u64,
    deleted: u64,
    gone: u64,
    skipped: u64,
    reported: usize,
    wrongly_deleted: usize,
    lost: usize,
    /// Batch mode: the longest time from an item's read to a batch delete of it reaching the
    /// server (ms).
    batch_window_ms: u64,
    seconds: f64,
}

/// The counts of a report, for assertion messages.
fn brief(r: &SweepReport) -> String {
    format!(
        "found {} deleted {} gone {} skipped {} failed {} left {} retried {} windows swept {} left {} errors {:?}",
        r.items_found,
        r.items_deleted,
        r.items_gone,
        r.items_skipped,
        r.items_failed,
        r.items_left,
        r.items_retried,
        r.windows_swept,
        r.windows_left,
        r.errors.iter().map(|e| &e.message).collect::<Vec<_>>()
    )
}

/// What the invariants need to know of each item of a table, for one sweep.
struct Rules<'a> {
    /// The sweep may have deleted it: it was expired as of the sweep.
    may_delete: Box<dyn Fn(&str) -> bool + 'a>,
    /// The sweep must delete it, or report it: it was expired as of the sweep and in a window
    /// the sweep covers.
    due: Box<dyn Fn(&str) -> bool + 'a>,
    /// Its window key.
    window: Box<dyn Fn(&str) -> String + 'a>,
}

/// Checks one sweep's report against what the server holds before and after it, by `rules`:
/// nothing the sweep may not delete is gone; the report accounts for everything that is; every
/// due item still there is reported. Returns (due items reported, due items lost).
fn check(
    seed: u64,
    label: &str,
    report: &SweepReport,
    before: &HashSet<String>,
    after: &HashSet<String>,
    rules: &Rules<'_>,
) -> (usize, usize) {
    let removed: HashSet<&String> = before.difference(after).collect();
    let failed = failed_ids(report);
    for id in &removed {
        assert!(
            (rules.may_delete)(id),
            "seed {seed} {label}: {id} was deleted but was not expired"
        );
    }
    let failed_but_gone = failed.iter().filter(|id| removed.contains(id)).count() as u64;
    assert_eq!(
        removed.len() as u64,
        report.items_deleted + report.items_gone + failed_but_gone,
        "seed {seed} {label}: the server lost {} items, the report accounts for {} deleted + {} \
         gone + {failed_but_gone} failed-but-applied: {}",
        removed.len(),
        report.items_deleted,
        report.items_gone,
        brief(report)
    );
    assert_accounted(report);
    assert_eq!(report.items_failed as usize, report.failed_keys.len());
    // Expired items still there must be reported by this sweep: as failed keys, or in a window
    // it could not read. Anything else is lost.
    reported_and_lost(report, after, &rules.due, &rules.window)
}

/// Of the items of `after` that are `due`, how many `report` lists (as failed keys, or in a
/// window it could not read, by `window`) and how many it does not: (reported, lost).
fn reported_and_lost(
    report: &SweepReport,
    after: &HashSet<String>,
    due: impl Fn(&str) -> bool,
    window: impl Fn(&str) -> String,
) -> (usize, usize) {
    let failed = failed_ids(report);
    let unread: HashSet<&str> = report
        .errors
        .iter()
        .filter_map(|e| e.window.as_deref())
        .collect();
    let due: Vec<&String> = after.iter().filter(|id| due(id)).collect();
    let listed = |id: &str| failed.contains(id) || unread.contains(window(id).as_str());
    let reported = due.iter().filter(|id| listed(id)).count();
    (reported, due.len() - reported)
}

/// Whether the sweeper must delete this item: expired, and not extended.
fn is_due(id: &str, kinds: &HashMap<String, (Kind, String)>, extended: &HashSet<String>) -> bool {
    match kinds[id].0 {
        Kind::Expired => true,
        Kind::Extended => !extended.contains(id),
        Kind::Future | Kind::Invalid | Kind::NoWindow => false,
    }
}

async fn chaos_table(
    seed: u64,
    proxy: &FaultProxy,
    direct: &Client,
    mode: &'static str,
    rate: f64,
) -> Row {
    let started = Instant::now();
    let label = format!("{mode} at {:.0}%", rate * 100.0);
    let table = new_table(direct, &format!("chaos_{mode}"), |_| {}).await;
    let extend = mode == "conditional";
    let (items, kinds) = chaos_items(seed ^ fault_proxy::fnv(label.as_bytes()), extend);
    put_many(direct, &table, items).await;

    let cfg = config(&table, &[("DELETE_MODE", mode), ("LOOKBACK_WINDOWS", "61")]);
    let extended = Arc::new(Mutex::new(HashSet::new()));
    let proxied = support::store(proxied_client(&proxy.endpoint));
    let store = extending_store(proxied, direct.clone(), table.clone(), extended.clone());
    let sweeper = sweeper_over(&cfg, |_| store).await;

    let requests_before = proxy.stats.requests();
    let faults_before = proxy.stats.faults_total();
    proxy.stats.reset_batch_window();
    proxy.set_plan(seeded(seed, rate));
    let mut row = Row {
        mode,
        rate,
        ..Row::default()
    };
    let mut ever_failed = HashSet::new();
    let mut before = id_set(direct, &table).await;
    // One sweep, checked against what the server holds before and after it.
    let check = |sweep: &str, report: &SweepReport, before: &_, after: &_| {
        let extended = extended.lock().unwrap().clone();
        let rules = Rules {
            may_delete: Box::new(|id| kinds[id].0 == Kind::Expired),
            due: Box::new(|id| is_due(id, &kinds, &extended)),
            window: Box::new(|id| kinds[id].1.clone()),
        };
        check(
            seed,
            &format!("{label}, {sweep}"),
            report,
            before,
            after,
            &rules,
        )
    };
    // Sweep until the server holds no item that is due (at most MAX_SWEEPS sweeps).
    for n in 1..=MAX_SWEEPS {
        let report = sweeper.sweep_at(NOW).await;
        proxy.wait_idle().await;
        let after = id_set(direct, &table).await;
        let (reported, lost) = check(&format!("sweep {n}"), &report, &before, &after);
        let extended = extended.lock().unwrap().clone();
        row.sweeps = n;
        row.retried += report.items_retried;
        row.deleted += report.items_deleted;
        row.gone += report.items_gone;
        row.skipped += report.items_skipped;
        row.reported += reported;
        row.lost += lost;
        ever_failed.extend(failed_ids(&report));
        before = after;
        if !before.iter().any(|id| is_due(id, &kinds, &extended)) {
            break;
        }
    }
    row.requests = proxy.stats.requests() - requests_before;
    row.faults = proxy.stats.faults_total() - faults_before;
    let window_ms = &proxy.stats.max_batch_window_ms;
    row.batch_window_ms = window_ms.load(SeqCst);
    let extended = extended.lock().unwrap().clone();
    // Once the faults stop, one sweep deletes whatever is left.
    proxy.set_plan(Plan::Pass);
    let report = sweeper.sweep_at(NOW).await;
    let after = id_set(direct, &table).await;
    let (_, lost) = check("clean-up", &report, &before, &after);
    row.lost += lost;
    row.deleted += report.items_deleted;
    row.wrongly_deleted = kinds
        .keys()
        .filter(|id| !is_due(id, &kinds, &extended) && kinds[*id].0 != Kind::Expired)
        .filter(|id| !after.contains(*id))
        .count();
    let survived = after.iter().any(|id| is_due(id, &kinds, &extended));
    assert!(
        !survived,
        "seed {seed} {label}: expired items survived a fault-free sweep"
    );
    if extend {
        let some = !extended.is_empty();
        assert!(some, "seed {seed} {label}: no item was extended");
        // each extended item was kept by its conditional delete, or that delete failed
        let failed = extended
            .iter()
            .filter(|id| ever_failed.contains(*id))
            .count();
        let kept = row.skipped as usize + failed;
        assert_eq!(kept, extended.len(), "seed {seed} {label}");
    }
    row.seconds = started.elapsed().as_secs_f64();
    row
}

/// The seed of this run's chaos tests: `CHAOS_SEED`, or one drawn once per run and shared by
/// all of them. Printed with the command that repeats the test `name` with it.
fn chaos_seed(name: &str) -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        let set = std::env::var("CHAOS_SEED").ok();
        let set = set.map(|s| s.parse().expect("CHAOS_SEED must be a whole number"));
        set.unwrap_or_else(|| clock_seed() % 1_000_000_007)
    });
    eprintln!(
        "chaos seed {seed}: CHAOS_SEED={seed} cargo test --test suite faults::{name} reproduces it"
    );
    seed
}

/// The seeded plan of the chaos tests: reads and deletes fail at `rate` with any fault.
fn seeded(seed: u64, rate: f64) -> Plan {
    Plan::Seeded {
        seed,
        rate,
        ops: vec!["Query", "BatchWriteItem", "DeleteItem"],
        faults: all_faults(),
    }
}

/// What target/tmp/chaos-report.md holds: the fault-rate table and a row per further case. The
/// chaos tests run side by side; each rewrites the whole file after adding its part.
struct ChaosReport {
    rates: Option<String>,
    cases: BTreeMap<u8, String>,
}

static CHAOS_REPORT: Mutex<ChaosReport> = Mutex::new(ChaosReport {
    rates: None,
    cases: BTreeMap::new(),
});

fn publish(update: impl FnOnce(&mut ChaosReport)) {
    let mut report = CHAOS_REPORT.lock().unwrap_or_else(|e| e.into_inner());
    update(&mut report);
    let mut text = report.rates.clone().unwrap_or_default();
    if !report.cases.is_empty() {
        text.push_str(
            "\n| case | setup | sweeps | requests | faults | deleted | gone | reported | wrongly deleted | lost | checked | seconds |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for row in report.cases.values() {
            text.push_str(row);
        }
    }
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("chaos-report.md");
    std::fs::write(out, text).unwrap();
}

/// One further chaos case: a row of the chaos report's second table.
#[derive(Debug, Default)]
struct CaseRow {
    case: &'static str,
    setup: String,
    sweeps: u64,
    requests: u64,
    faults: u64,
    deleted: u64,
    gone: u64,
    reported: usize,
    wrongly_deleted: usize,
    lost: usize,
    /// What the case checked beyond the invariants, as measured.
    checked: String,
    seconds: f64,
}

impl CaseRow {
    /// Adds the row to the chaos report (as case number `order`) and prints it.
    fn publish(&self, order: u8) {
        let line = format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |\n",
            self.case,
            self.setup,
            self.sweeps,
            self.requests,
            self.faults,
            self.deleted,
            self.gone,
            self.reported,
            self.wrongly_deleted,
            self.lost,
            self.checked,
            self.seconds
        );
        print!("{line}");
        publish(|r| {
            r.cases.insert(order, line);
        });
    }

    /// Once the case's proxy is idle, [`check`]s the sweep `report` (`label`) by `rules` against
    /// `before` and what the table holds now, which becomes `before`; adds the sweep's counts
    /// and what the check found.
    async fn add_checked(
        &mut self,
        case: &Case,
        label: &str,
        report: &SweepReport,
        before: &mut HashSet<String>,
        rules: &Rules<'_>,
    ) {
        case.proxy.wait_idle().await;
        let after = id_set(&case.direct, &case.table).await;
        let (reported, lost) = check(case.seed, label, report, before, &after, rules);
        self.sweeps += 1;
        self.deleted += report.items_deleted;
        self.gone += report.items_gone;
        self.reported += reported;
        self.lost += lost;
        *before = after;
    }

    /// Takes the proxy's counts and the case's time, and publishes the row (see [`publish`]).
    fn finish(&mut self, case: &Case, order: u8) {
        self.requests = case.proxy.stats.requests();
        self.faults = case.proxy.stats.faults_total();
        self.seconds = case.started.elapsed().as_secs_f64();
        self.publish(order);
    }

    /// What every further case holds: nothing deleted that was not expired, no expired item
    /// lost or left once the faults stopped, and faults injected.
    fn assert_sound(&self, seed: u64, still_due: usize) {
        assert_eq!(self.wrongly_deleted, 0, "seed {seed}: {self:?}");
        assert_eq!(
            still_due, 0,
            "seed {seed}: expired items survived a fault-free sweep: {self:?}"
        );
        assert_eq!(self.lost, 0, "seed {seed}: {self:?}");
        assert!(self.faults > 0, "seed {seed}: no fault injected: {self:?}");
    }
}

/// What a further chaos case starts from: its seed, a proxy of its own that passes everything and
/// a new table.
struct Case {
    started: Instant,
    seed: u64,
    direct: Client,
    proxy: FaultProxy,
    table: String,
}

/// The case of test `name` (as [`chaos_seed`] names it), over a new table `prefix`, and a random
/// source drawn from its seed and `tag`.
async fn case(name: &str, prefix: &str, tag: &[u8]) -> (Case, fastrand::Rng) {
    let started = Instant::now();
    let seed = chaos_seed(name);
    let direct = client().await;
    let proxy = FaultProxy::start(&endpoint(), DELAY, Plan::Pass).await;
    let table = new_table(&direct, prefix, |_| {}).await;
    let rng = fastrand::Rng::with_seed(seed ^ fault_proxy::fnv(tag));
    let case = Case {
        started,
        seed,
        direct,
        proxy,
        table,
    };
    (case, rng)
}

/// The chaos tables, (fault rate, delete mode), in the order they start: the longest first.
const CHAOS_TABLES: [(f64, &str); 8] = [
    (0.5, "conditional"),
    (0.3, "conditional"),
    (0.5, "batch"),
    (0.3, "batch"),
    (0.1, "conditional"),
    (0.0, "conditional"),
    (0.1, "batch"),
    (0.0, "batch"),
];

/// Chaos tables swept at once, each through a fault proxy of its own (its counts, and the read
/// times behind the batch read→delete measure, are that table's alone).
const CHAOS_TABLES_AT_ONCE: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_never_deletes_a_live_item_and_loses_no_expired_one() {
    let seed = chaos_seed("chaos");
    let direct = client().await;
    // Each worker takes the next table not yet started; a row comes back with its faults by kind.
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..CHAOS_TABLES_AT_ONCE)
        .map(|_| {
            let (next, direct) = (next.clone(), direct.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let i = next.fetch_add(1, SeqCst);
                    let Some(&(rate, mode)) = CHAOS_TABLES.get(i) else {
                        return done;
                    };
                    let proxy = FaultProxy::start(&endpoint(), DELAY, Plan::Pass).await;
                    let row = chaos_table(seed, &proxy, &direct, mode, rate).await;
                    let by_kind = proxy.stats.faults.lock().unwrap().clone();
                    done.push((row, by_kind));
                }
            })
        })
        .collect();
    let mut done = Vec::new();
    for worker in workers {
        // A failed assertion in a table's sweeps fails the test with its message.
        done.extend(
            worker
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())),
        );
    }
    // The rows by fault rate, then batch before conditional; the faults of all proxies by kind.
    done.sort_by_key(|(row, _)| ((row.rate * 100.0) as u32, row.mode != "batch"));
    let mut by_kind: HashMap<String, u64> = HashMap::new();
    let mut rows = Vec::new();
    for (row, faults) in done {
        for (kind, n) in faults {
            *by_kind.entry(kind).or_default() += n;
        }
        rows.push(row);
    }
    let mut table = format!(
        "chaos seed {seed}; {} items per table; proxy faults drawn evenly from: {}\n\n\
         | mode | fault rate | sweeps | requests | faults | retried | deleted | gone | skipped (extended) | reported | wrongly deleted | lost | batch read→delete max | seconds |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        chaos_items(0, true).0.len(),
        all_faults().iter().map(Fault::name).collect::<Vec<_>>().join(", ")
    );
    for r in &rows {
        writeln!(
            table,
            "| {} | {:.0}% | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
            r.mode,
            r.rate * 100.0,
            r.sweeps,
            r.requests,
            r.faults,
            r.retried,
            r.deleted,
            r.gone,
            r.skipped,
            r.reported,
            r.wrongly_deleted,
            r.lost,
            if r.mode == "batch" {
                format!("{:.1} s", r.batch_window_ms as f64 / 1000.0)
            } else {
                "-".into()
            },
            r.seconds
        )
        .unwrap();
    }
    let mut kinds: Vec<_> = by_kind.into_iter().collect();
    kinds.sort();
    writeln!(table, "\nfaults injected by kind: {kinds:?}").unwrap();
    println!("{table}");
    publish(|r| r.rates = Some(table));

    // Batch mode trusts a read for at most BATCH_MAX_READ_AGE before the last send, and the
    // proxy may apply that send DELAY later (plus scheduling slack on a loaded machine).
    let window_bound = BATCH_MAX_READ_AGE + DELAY + Duration::from_secs(1);
    for r in &rows {
        assert_eq!(r.wrongly_deleted, 0, "seed {seed}: {r:?}");
        assert_eq!(r.lost, 0, "seed {seed}: {r:?}");
        if r.mode == "batch" {
            assert!(
                r.batch_window_ms <= window_bound.as_millis() as u64,
                "seed {seed}: a batch delete reached the server {} ms after its read: {r:?}",
                r.batch_window_ms
            );
        }
        if r.rate == 0.0 {
            // No fault, one sweep. Retries are not asserted here: on a loaded machine a
            // fault-free request can still outlast its attempt timeout and be retried.
            assert_eq!((r.faults, r.sweeps), (0, 1), "seed {seed}: {r:?}");
        } else {
            assert!(r.faults > 0, "seed {seed}: no fault injected: {r:?}");
        }
    }
    // Every kind of fault was exercised at least once.
    for f in all_faults() {
        assert!(
            kinds.iter().any(|(name, n)| *name == f.name() && *n > 0),
            "seed {seed}: {} never injected: {kinds:?}",
            f.name()
        );
    }
}

/// Each item's ttl (epoch seconds) and window key, by id.
type Ttls = HashMap<String, (i64, String)>;

/// Adds an item `id` with `ttl` in windows of `width` seconds to `items`, its ttl and window to
/// `ttls`.
fn add_item(items: &mut Vec<Key>, ttls: &mut Ttls, id: String, ttl: i64, width: u32) {
    let window = window_key(ttl as f64, width).unwrap();
    items.push(windowed(&id, ttl, &window));
    ttls.insert(id, (ttl, window));
}

/// The rules of a sweep as of `at` over windows that hold every ttl before it: it may delete,
/// and must delete or report, exactly the items whose ttl is before `at`.
fn expired_before(ttls: &Ttls, at: Timestamp) -> Rules<'_> {
    Rules {
        may_delete: Box::new(move |id| at.is_after_ttl(ttls[id].0 as f64)),
        due: Box::new(move |id| at.is_after_ttl(ttls[id].0 as f64)),
        window: Box::new(move |id| ttls[id].1.clone()),
    }
}

/// Window width of the narrow-window case: with SCHEDULE_SECONDS at its default (60) the
/// derived lookback is 24 windows, where the fixed lookback used to be 15 (45 s).
const NARROW: u32 = 3;

/// The lookback every layout had before it was derived from the schedule.
const OLD_LOOKBACK: u32 = 15;

/// 3 s windows with LOOKBACK_WINDOWS unset, swept by a one-minute schedule whose runs start up to
/// 10 s late: every ttl between two runs is read by the later one, under faults, and a sweep
/// after the faults stop leaves nothing expired. The lookback of 15 that used to be fixed is
/// refused for this layout, and would have left ttls between runs in windows no run reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_narrow_windows_swept_a_minute_apart_lose_nothing_with_the_derived_lookback() {
    let (case, mut rng) = case("chaos_narrow", "chaos_narrow", b"narrow windows").await;
    let (seed, direct, proxy, table) = (case.seed, &case.direct, &case.proxy, &case.table);
    let rate = 0.3;
    // The runs a minute before NOW, at NOW and a minute after, each started up to 10 s late.
    let runs: Vec<Timestamp> = (-1..=1)
        .map(|k| Timestamp::from_millis((NOW + 60 * k) * 1000 + rng.i64(0..10_000)))
        .collect();
    // 360 ttls over the two minutes before NOW and the minute after, 40 after the last run.
    let (mut items, mut ttls) = (Vec::new(), Ttls::new());
    let mut add = |id, ttl| add_item(&mut items, &mut ttls, id, ttl, NARROW);
    for i in 0..360 {
        add(format!("item-{i}"), NOW - 120 + rng.i64(0..180));
    }
    for i in 0..40 {
        add(format!("later-{i}"), NOW + 70 + rng.i64(0..120));
    }
    put_many(direct, table, items).await;

    let cfg = config(
        table,
        &[("WINDOW_SECONDS", "3"), ("DELETE_MODE", "conditional")],
    );
    let store = support::store(proxied_client(&proxy.endpoint));
    let sweeper = sweeper_over(&cfg, |_| store).await;
    let mut row = CaseRow {
        case: "narrow windows",
        setup: format!(
            "WINDOW_SECONDS=3, LOOKBACK_WINDOWS unset (derived: {}), conditional, {} runs 60 s apart + up to 10 s late, faults {:.0}%",
            cfg.options.lookback_windows,
            runs.len(),
            rate * 100.0
        ),
        ..CaseRow::default()
    };
    let mut before = id_set(direct, table).await;
    // The expired items left after a run's sweep once the faults stopped.
    let mut left_due = HashSet::new();
    for (k, &at) in runs.iter().enumerate() {
        let rules = expired_before(&ttls, at);
        // The run under faults, then once more after they stop.
        for (plan, what) in [
            (seeded(seed, rate), "faults"),
            (Plan::Pass, "faults stopped"),
        ] {
            proxy.set_plan(plan);
            let report = sweeper.sweep(at, &Stop::never()).await;
            let label = format!("narrow windows, run {k} at {at} ({what})");
            (row.add_checked(&case, &label, &report, &mut before, &rules)).await;
        }
        left_due.extend(before.iter().filter(|id| (rules.due)(id)).cloned());
    }
    let still_due = left_due.len();
    let last = *runs.last().unwrap();
    row.wrongly_deleted = ttls
        .iter()
        .filter(|(id, (ttl, _))| !last.is_after_ttl(*ttl as f64) && !before.contains(*id))
        .count();
    // The ttls after the first run and before the last, and how many of them a lookback of
    // `lookback` windows leaves unread: no run they are expired at reads their window.
    let between: Vec<&(i64, String)> = ttls
        .values()
        .filter(|(ttl, _)| *ttl as f64 >= runs[0].as_secs_f64() && last.is_after_ttl(*ttl as f64))
        .collect();
    let unread_with = |lookback: u32| {
        between
            .iter()
            .filter(|(ttl, window)| {
                !runs
                    .iter()
                    .filter(|at| at.is_after_ttl(*ttl as f64))
                    .any(|at| {
                        windows_to_sweep(*at, NARROW, lookback)
                            .iter()
                            .any(|w| w.key() == *window)
                    })
            })
            .count()
    };
    let (unread_old, unread_derived) = (
        unread_with(OLD_LOOKBACK),
        unread_with(cfg.options.lookback_windows),
    );
    row.checked = format!(
        "LOOKBACK_WINDOWS={OLD_LOOKBACK} refused (Uncovered); with {OLD_LOOKBACK}, {unread_old} of {} ttls between runs in no window read; with {}, {unread_derived}; {still_due} expired left after the faults stopped",
        between.len(),
        cfg.options.lookback_windows
    );
    row.finish(&case, 1);
    row.assert_sound(seed, still_due);
    // The lookback is the one derived from the schedule, and the old fixed one is refused by
    // name: it would have left ttls unread.
    assert_eq!(
        cfg.options.lookback_windows,
        covering_lookback(NARROW, cfg.handler.schedule.as_secs() as u32)
    );
    let refused = Config::from_lookup(|var| match var {
        "TABLE_NAME" => Some(table.clone()),
        "WINDOW_SECONDS" => Some(NARROW.to_string()),
        "LOOKBACK_WINDOWS" => Some(OLD_LOOKBACK.to_string()),
        _ => None,
    });
    assert!(
        matches!(
            &refused,
            Err(ConfigError::Uncovered { lookback_windows: OLD_LOOKBACK, needed, .. })
                if *needed == cfg.options.lookback_windows
        ),
        "{refused:?}"
    );
    assert!(unread_old > 0, "seed {seed}: {row:?}");
    assert_eq!(unread_derived, 0, "seed {seed}: {row:?}");
}

/// The sweeper's host clock two minutes fast, held to DynamoDB's clock as the entry points hold
/// it (DynamoDB Local's answers carry its Date; the proxy's injected errors carry none): under
/// faults nothing is deleted before the real clock reaches its ttl, the expired items are all
/// deleted or reported, and every report says how far the clock was ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_a_host_clock_two_minutes_fast_deletes_nothing_early() {
    let (case, mut rng) = case("chaos_a_host", "chaos_fast_clock", b"fast clock").await;
    let (seed, direct, proxy, table) = (case.seed, &case.direct, &case.proxy, &case.table);
    let rate = 0.3;
    let ahead = Duration::from_secs(120);
    let real = now();
    // 120 items expiring 30 to 150 s from now, 300 expired in the last ten minutes.
    let (mut items, mut ttls) = (Vec::new(), Ttls::new());
    let mut add = |id, ttl| add_item(&mut items, &mut ttls, id, ttl, 60);
    for i in 0..120 {
        add(format!("live-{i}"), real + 30 + i);
    }
    for i in 0..300 {
        add(format!("expired-{i}"), real - 1 - rng.i64(0..600));
    }
    put_many(direct, table, items).await;

    let cfg = config(table, &[]);
    let store = support::store(proxied_client(&proxy.endpoint));
    // Opened as the CLI opens a table: the DescribeTable answer's Date bounds DynamoDB's clock.
    let schema = store.describe_config(&cfg).await.unwrap();
    let fast = Arc::new(GuardedClock::new(
        move || clock() + ahead,
        store.server_clock().clone(),
    ));
    let sweeper = Sweeper::new(store, schema, cfg.options.clone()).with_wall_clock(fast.clone());
    let mut row = CaseRow {
        case: "fast host clock",
        setup: format!(
            "host clock +{} s held to DynamoDB's Date, batch, sweeps as of the clock, faults {:.0}%",
            ahead.as_secs(),
            rate * 100.0
        ),
        ..CaseRow::default()
    };
    let mut before = id_set(direct, table).await;
    let (mut clock_ahead, mut lead, mut still_due) = (Vec::new(), f64::MIN, 0);
    proxy.set_plan(seeded(seed, rate));
    // Sweeps under faults until nothing expired is left (at most MAX_SWEEPS), then one after
    // they stop.
    let mut faulted = true;
    for n in 1.. {
        if !faulted {
            proxy.set_plan(Plan::Pass);
        }
        let real_before = wall_clock();
        let at = fast.now();
        let mut report = sweeper.sweep(at, &Stop::never()).await;
        report.clock_ahead_ms = report.clock_ahead_ms.max(fast.take_ahead_ms());
        lead = lead.max(at.as_secs_f64() - real_before);
        clock_ahead.push(report.clock_ahead_ms);
        // DynamoDB's clock may be read up to SKEW_TOLERANCE (its Date's resolution) plus a round
        // trip ahead of the real one; nothing expiring after that may go.
        let limit = real_before + SKEW_TOLERANCE.as_secs_f64() + 1.0;
        let rules = Rules {
            may_delete: Box::new(|id| (ttls[id].0 as f64) < limit),
            ..expired_before(&ttls, at)
        };
        let label = format!(
            "fast clock, sweep {n} at {at} ({})",
            if faulted { "faults" } else { "faults stopped" }
        );
        (row.add_checked(&case, &label, &report, &mut before, &rules)).await;
        let due_left = before.iter().filter(|id| (rules.due)(id)).count();
        if !faulted {
            still_due = due_left;
            break;
        }
        faulted = due_left > 0 && n < MAX_SWEEPS;
    }
    let real_end = wall_clock();
    let not_expired: Vec<&String> = ttls
        .iter()
        .filter(|(_, (ttl, _))| *ttl as f64 > real_end)
        .map(|(id, _)| id)
        .collect();
    row.wrongly_deleted = not_expired
        .iter()
        .filter(|id| !before.contains(**id))
        .count();
    let (least, most) = (
        clock_ahead.iter().min().copied().unwrap_or_default(),
        clock_ahead.iter().max().copied().unwrap_or_default(),
    );
    row.checked = format!(
        "clock_ahead_ms {least}–{most} in every report; sweep instants ≤ real + {lead:.2} s; {} of {} items not yet expired kept; {still_due} expired left after the faults stopped",
        not_expired.len() - row.wrongly_deleted,
        not_expired.len()
    );
    row.finish(&case, 2);
    row.assert_sound(seed, still_due);
    assert!(
        lead <= SKEW_TOLERANCE.as_secs_f64() + 1.0,
        "seed {seed}: a sweep ran {lead:.1} s ahead of the real clock: {row:?}"
    );
    for ms in &clock_ahead {
        assert!(
            (115_000..=125_000).contains(ms),
            "seed {seed}: clock_ahead_ms {clock_ahead:?}"
        );
    }
}

/// How long the ticks case ticks.
const TICK_RUN: Duration = Duration::from_secs(24);

/// Ticks of 1 s for [`TICK_RUN`], as `ttl-sweeper run` sweeps, while items expire a few a second
/// under faults: nothing is deleted before its ttl, every item whose ttl passed before the last
/// sweep is deleted or reported, and the merged report stays bounded.
#[test]
fn chaos_ticks_delete_items_as_they_expire_and_the_merged_report_stays_bounded() {
    on_a_big_stack(chaos_ticks);
}

/// The stack of the thread [`on_a_big_stack`] runs a test on, and of its runtime's workers.
const BIG_STACK: usize = 8 << 20;

/// Runs `test` as `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` would, but on a
/// thread with a stack of [`BIG_STACK`]: a debug build of the ticks case's sweeps can need more
/// than a test thread's 2 MiB (it overflowed it on a loaded machine, and needs more than 1.5 MiB
/// on an idle one).
fn on_a_big_stack<F: std::future::Future<Output = ()>>(test: impl FnOnce() -> F + Send + 'static) {
    let name = std::thread::current().name().unwrap_or("test").to_owned();
    let thread = std::thread::Builder::new()
        .name(name)
        .stack_size(BIG_STACK)
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_stack_size(BIG_STACK)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(test());
        })
        .unwrap();
    if let Err(panic) = thread.join() {
        std::panic::resume_unwind(panic);
    }
}

async fn chaos_ticks() {
    let (case, mut rng) = case("chaos_ticks", "chaos_ticks", b"ticks").await;
    let (seed, direct, proxy, table) = (case.seed, &case.direct, &case.proxy, &case.table);
    let rate = 0.1;
    let start = now();
    let run = TICK_RUN.as_secs() as i64;
    // Four items a second expiring from 4 s from now to 4 s past the end of the run, 60 expired
    // in the last ten minutes, 30 expiring long after the run.
    let (mut items, mut ttls) = (Vec::new(), Ttls::new());
    let mut add = |id, ttl| add_item(&mut items, &mut ttls, id, ttl, 60);
    for i in 0..4 * (run + 4) {
        add(format!("expiring-{i}"), start + 4 + i / 4);
    }
    for i in 0..60 {
        add(format!("expired-{i}"), start - 1 - rng.i64(0..600));
    }
    for i in 0..30 {
        add(format!("later-{i}"), start + 120 + rng.i64(0..600));
    }
    put_many(direct, table, items).await;

    let store = Instrumented::new(support::store(proxied_client(&proxy.endpoint)));
    let sweeper = sweeper_over(&config(table, &[]), |_| store)
        .await
        .with_wall_clock(Arc::new(clock));
    let before = id_set(direct, table).await;
    proxy.set_plan(seeded(seed, rate));
    let ticks = support::ticks(Duration::from_secs(1), Duration::from_secs(10), TICK_RUN);
    // The instant of the last sweep, from the reports the ticks see.
    let mut last = Timestamp::from_millis(0);
    let run_started = Instant::now();
    let report = run_ticks(&sweeper, clock(), &clock, &ticks, &Stop::never(), |r| {
        let at = chrono::DateTime::parse_from_rfc3339(&r.sweep_at).expect("sweep_at is ISO 8601");
        last = last.max(Timestamp::from_datetime(at.with_timezone(&chrono::Utc)));
    })
    .await;
    proxy.wait_idle().await;
    let run_seconds = run_started.elapsed().as_secs_f64();
    let after = id_set(direct, table).await;
    let mut row = CaseRow {
        case: "ticks",
        setup: format!(
            "run_ticks every 1 s (full sweep every 10 s) for {} s, {} items expiring 4 a second, batch, faults {:.0}%",
            TICK_RUN.as_secs(),
            4 * (run + 4),
            rate * 100.0
        ),
        sweeps: u64::from(report.ticks),
        deleted: report.items_deleted,
        gone: report.items_gone,
        ..CaseRow::default()
    };

    // Nothing deleted that was not expired: by the last sweep's instant, and by the real clock
    // when its delete was acknowledged.
    let removed: HashSet<&String> = before.difference(&after).collect();
    let ttl = |id: &str| ttls[id].0 as f64;
    row.wrongly_deleted = removed
        .iter()
        .filter(|id| !last.is_after_ttl(ttl(id)))
        .count();
    let deleted_at = sweeper.store().deleted_at.lock().unwrap().clone();
    let early: Vec<(&String, f64)> = deleted_at
        .iter()
        .filter(|(id, at)| **at < ttl(id))
        .map(|(id, at)| (id, ttl(id) - at))
        .collect();
    // How long after its ttl an item expiring during the run was deleted, at most.
    let run_lag = deleted_at
        .iter()
        .filter(|(id, _)| id.starts_with("expiring-"))
        .map(|(id, at)| at - ttl(id))
        .fold(0.0, f64::max);
    // Every item whose ttl passed before the last sweep is deleted, or reported by the merged
    // report: a failed key, or a window whose reading failed.
    let due = |id: &str| last.is_after_ttl(ttl(id));
    (row.reported, row.lost) = reported_and_lost(&report, &after, due, |id| ttls[id].1.clone());
    let failed = failed_ids(&report);
    let failed_but_gone = failed.iter().filter(|id| removed.contains(id)).count() as u64;
    let accounted = report.items_deleted + report.items_gone;
    let expired_by_end = ttls
        .values()
        .filter(|(t, _)| last.is_after_ttl(*t as f64))
        .count();

    // Once the faults stop, one sweep as of the last instant leaves nothing expired.
    proxy.set_plan(Plan::Pass);
    let cleanup = sweeper.sweep(last, &Stop::never()).await;
    let (mut end, rules) = (after.clone(), expired_before(&ttls, last));
    (row.add_checked(&case, "ticks, clean-up", &cleanup, &mut end, &rules)).await;
    let still_due = end.iter().filter(|id| last.is_after_ttl(ttl(id))).count();
    row.checked = format!(
        "{} ticks and full sweeps in {run_seconds:.0} s, {expired_by_end} items expired by the last; items expiring during the run deleted ≤ {run_lag:.1} s after their ttl; merged report: {} failed keys (≤ {MAX_FAILED_KEYS}), {} errors (≤ {MAX_ERRORS}), {} lags for {} deleted; {} deleted before their ttl; {still_due} expired left after the faults stopped",
        report.ticks,
        report.failed_keys.len(),
        report.errors.len(),
        report.lags.len(),
        report.items_deleted,
        early.len()
    );
    row.finish(&case, 3);
    row.assert_sound(seed, still_due);
    assert!(
        early.is_empty(),
        "seed {seed}: {} items deleted before their ttl (id, seconds early), e.g. {:?}",
        early.len(),
        &early[..early.len().min(5)]
    );
    assert!(
        accounted <= removed.len() as u64 && removed.len() as u64 <= accounted + failed_but_gone,
        "seed {seed}: the server lost {} items, the report accounts for {accounted} deleted or \
         gone + {failed_but_gone} failed-but-applied: {}",
        removed.len(),
        brief(&report)
    );
    assert!(
        report.ticks as u64 >= TICK_RUN.as_secs() / 4,
        "seed {seed}: only {} sweeps in {run_seconds:.0} s",
        report.ticks
    );
    assert!(report.failed_keys.len() <= MAX_FAILED_KEYS);
    assert_eq!(
        report.failed_keys.len() as u64 + report.failed_keys_dropped,
        report.items_failed
    );
    assert!(report.errors.len() <= MAX_ERRORS);
    assert_eq!(
        report.lags.len(),
        report.items_deleted,
        "the lag histogram counts every deletion"
    );
}

/// A small table swept in `mode`: 60 items expired over the last five minutes, 10 not yet
/// expired (their ids returned).
async fn small_table(
    direct: &Client,
    prefix: &str,
    mode: &str,
) -> (String, Config, HashSet<String>) {
    let table = new_table(direct, prefix, |_| {}).await;
    let mut items = sessions("expired", 60, |i| NOW - 1 - i * 5);
    items.extend(sessions("future", 10, |i| NOW + 1 + i * 60));
    put_items(direct, &table, items).await;
    let future = (0..10).map(|i| format!("future-{i}")).collect();
    let cfg = config(&table, &[("DELETE_MODE", mode), ("LOOKBACK_WINDOWS", "6")]);
    (table, cfg, future)
}

/// Injects `fault` into the first attempt of every read and delete request, and nothing else.
fn first_attempts(fault: Fault) -> Plan {
    let seen = Mutex::new(HashSet::new());
    Plan::script(move |op, body| {
        let applies = match op {
            "BatchWriteItem" => true,
            "Query" | "DeleteItem" => fault != Fault::Unprocessed,
            _ => false,
        };
        (applies
            && seen
                .lock()
                .unwrap()
                .insert(fault_proxy::request_identity(op, body)))
        .then(|| fault.clone())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_on_its_own_is_retried_and_the_sweep_completes() {
    let direct = client().await;
    let proxy = FaultProxy::start(&endpoint(), DELAY, Plan::Pass).await;
    let mut table = String::from(
        "| fault | mode | requests | faults | items retried | deleted | gone | result |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for fault in all_faults() {
        for mode in ["batch", "conditional"] {
            if fault == Fault::Unprocessed && mode == "conditional" {
                continue;
            }
            let (name, cfg, future) = small_table(&direct, "one_fault", mode).await;
            let store = support::store(proxied_client(&proxy.endpoint));
            let sweeper = sweeper_over(&cfg, |_| store).await;
            let (requests, faults) = (proxy.stats.requests(), proxy.stats.faults_total());
            proxy.set_plan(first_attempts(fault.clone()));
            let report = sweeper.sweep_at(NOW).await;
            proxy.wait_idle().await;
            proxy.set_plan(Plan::Pass);
            let (requests, faults) = (
                proxy.stats.requests() - requests,
                proxy.stats.faults_total() - faults,
            );
            let left = id_set(&direct, &name).await;
            let what = format!("{} in {mode} mode: {}", fault.name(), brief(&report));
            assert!(faults > 0, "{what}");
            assert!(report.is_success() && report.is_complete(), "{what}");
            assert_eq!(left, future, "{what}");
            assert_eq!(report.items_deleted + report.items_gone, 60, "{what}");
            writeln!(
                table,
                "| {} | {mode} | {requests} | {faults} | {} | {} | {} | all 60 expired deleted, 10 live kept |",
                fault.name(),
                report.items_retried,
                report.items_deleted,
                report.items_gone
            )
            .unwrap();
        }
    }
    println!("{table}");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fault-report.md");
    std::fs::write(out, &table).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_credentials_and_denied_deletes_delete_nothing_and_say_why() {
    let direct = client().await;
    let (name, cfg, _) = small_table(&direct, "denied", "batch").await;
    let proxy = FaultProxy::start(&endpoint(), DELAY, Plan::Pass).await;
    let store = support::store(proxied_client(&proxy.endpoint));

    // Credentials rejected: every request answered 403.
    proxy.set_plan(Plan::script(|_, _| {
        Some(Fault::Reply(
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        ))
    }));
    let err = store.describe_config(&cfg).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth, "{err}");
    assert!(err.to_string().contains("security token"), "{err}");
    let sweeper = sweeper_over(&cfg, |_| store.clone()).await;
    let report = sweeper.sweep_at(NOW).await;
    assert!(!report.is_success());
    let auth = report.errors.iter().all(|e| e.kind == ErrorKind::Auth);
    assert!(auth, "{report:?}");
    assert_eq!(report.items_deleted, 0);
    assert_eq!(id_set(&direct, &name).await.len(), 70);

    // The CLI says so and exits 2 before touching anything.
    let endpoint = proxy.endpoint.clone();
    let table = name.clone();
    let (code, _, stderr) = tokio::task::spawn_blocking(move || {
        run(cli()
            .args(["sweep"])
            .env("TABLE_NAME", &table)
            .env("AWS_ENDPOINT_URL", &endpoint))
    })
    .await
    .unwrap();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("UnrecognizedClientException"), "{stderr}");

    // Reads allowed, deletes denied (an IAM policy without BatchWriteItem): the keys are reported,
    // not retried, and stay.
    proxy.set_plan(Plan::script(|op, _| {
        (op == "BatchWriteItem").then_some(Fault::Reply(
            400,
            "AccessDeniedException",
            "User is not authorized to perform: dynamodb:BatchWriteItem",
        ))
    }));
    let report = sweeper.sweep_at(NOW).await;
    report.assert_fields("items_found=60 items_failed=60 items_retried=0");
    assert!(report.failed_keys[0]
        .reason
        .contains("AccessDeniedException"));
    assert_eq!(id_set(&direct, &name).await.len(), 70);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_dropped_after_start_up_is_reported_and_nothing_is_deleted() {
    let direct = client().await;
    let (name, cfg, _) = small_table(&direct, "index_gone", "batch").await;
    let proxy = FaultProxy::start(
        &endpoint(),
        DELAY,
        Plan::script(|op, _| {
            (op == "Query").then_some(Fault::Reply(
                400,
                "ValidationException",
                "The table does not have the specified index: expirationWindowIndex",
            ))
        }),
    )
    .await;
    let store = support::store(proxied_client(&proxy.endpoint));
    let report = sweeper_over(&cfg, |_| store).await.sweep_at(NOW).await;
    assert!(!report.is_success());
    assert_eq!(report.windows_swept, 0, "{report:?}");
    assert!(!report.errors.is_empty());
    for e in &report.errors {
        assert_eq!(e.kind, ErrorKind::Validation, "{report:?}");
        assert!(e.message.contains("specified index"), "{report:?}");
    }
    assert_eq!(report.items_deleted, 0);
    assert_eq!(id_set(&direct, &name).await.len(), 70);
}

/// A proxy that answers every `Query` with throttling `code`, and the number of them.
async fn throttling_queries(code: &'static str) -> (FaultProxy, Arc<AtomicUsize>) {
    let queries = Arc::new(AtomicUsize::new(0));
    let counted = queries.clone();
    let proxy = FaultProxy::start(
        &endpoint(),
        DELAY,
        Plan::script(move |op, _| {
            (op == "Query").then(|| {
                counted.fetch_add(1, SeqCst);
                Fault::Throttle(code)
            })
        }),
    )
    .await;
    (proxy, queries)
}

/// A throttled `Query` is retried as the client's retry configuration says — its max attempts
/// (`AWS_MAX_ATTEMPTS`), its backoff — and the error that ends it carries DynamoDB's error type
/// and request id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_is_retried_as_the_client_is_configured() {
    use ttl_sweeper::store::Store;

    let direct = client().await;
    let (_, cfg, _) = small_table(&direct, "query_retries", "batch").await;
    let (_, schema) = store_and_schema(&cfg).await;
    let (proxy, queries) = throttling_queries("ProvisionedThroughputExceededException").await;
    for attempts in [1, 2, 4] {
        let config = sdk_config(&proxy.endpoint)
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(attempts)
                    .with_initial_backoff(Duration::from_millis(5)),
            )
            .build();
        let store = DynamoStore::new(Client::from_conf(config));
        let before = queries.load(SeqCst);
        let err = store
            .query_expired(&schema, "w", Timestamp::from_secs(NOW), None, None, None)
            .await
            .expect_err("every query is throttled");
        let made = queries.load(SeqCst) - before;
        let what = format!("max attempts {attempts}: {err}");
        assert_eq!(made, attempts as usize, "{what}");
        assert_eq!(err.kind, ErrorKind::Throttled, "{what}");
        let throttled = err.code.as_deref() == Some("ProvisionedThroughputExceededException");
        assert!(throttled, "{what}");
        assert_eq!(err.request_id.as_deref(), Some("fault-proxy"), "{what}");
    }
}

/// The binaries take their retry configuration from the standard chain: `AWS_MAX_ATTEMPTS`
/// bounds a throttled `Query` page's attempts, and `AWS_RETRY_MODE=adaptive` runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_retries_as_aws_max_attempts_and_aws_retry_mode_say() {
    let direct = client().await;
    let (table, _, _) = small_table(&direct, "max_attempts", "batch").await;
    let (proxy, queries) = throttling_queries("ThrottlingException").await;
    // The process runs off the runtime: the proxy answers on it meanwhile.
    let sweep = |env: &[(&str, &str)]| {
        let mut cmd = cli();
        cmd.args(["sweep", "--table-name", &table, "--lookback-windows", "3"])
            .env("AWS_ENDPOINT_URL", &proxy.endpoint)
            .envs(env.iter().copied());
        tokio::task::block_in_place(|| run(&mut cmd))
    };
    for attempts in [1usize, 2] {
        let before = queries.load(SeqCst);
        let (code, out, err) = sweep(&[("AWS_MAX_ATTEMPTS", &attempts.to_string())]);
        let made = queries.load(SeqCst) - before;
        let what = format!("AWS_MAX_ATTEMPTS={attempts}: {out} {err}");
        assert_eq!(code, 1, "every query throttled: the sweep fails: {what}");
        // Four windows (the current one and three back), one partition each.
        assert_eq!(made, 4 * attempts, "{what}");
        assert!(out.contains("ThrottlingException"), "{what}");
    }
    // One attempt: the adaptive mode's rate limiter would otherwise slow the throttled queries
    // past the operation timeout.
    let (code, out, err) = sweep(&[("AWS_RETRY_MODE", "adaptive"), ("AWS_MAX_ATTEMPTS", "1")]);
    assert_eq!(
        code, 1,
        "the sweep runs and fails on the throttled queries: {out} {err}"
    );
    assert!(out.contains("ThrottlingException"), "{out}");
}
