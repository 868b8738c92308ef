//! The sweeper through a fault-injecting proxy in front of DynamoDB Local: every fault on its own,
//! a seeded chaos run at fault rates from 0 to 50 %, and the errors an operator must be told about
//! (credentials rejected, an index gone after start-up).
//!
//! The invariants checked after every sweep: no item that was not expired as read is deleted;
//! every expired item is deleted or reported (failed key, or a window the report lists as
//! unread); the report's counts equal what the server holds. A chaos failure prints its seed;
//! `CHAOS_SEED=<seed> cargo test --test faults chaos` repeats the same faults.

mod common;
#[path = "support/fault_proxy.rs"]
mod fault_proxy;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::Client;
use common::*;
use fault_proxy::{all_faults, Fault, FaultProxy, Plan};
use ttl_sweeper::config::Config;
use ttl_sweeper::engine::{Stop, SweepReport, Sweeper, BATCH_MAX_READ_AGE};
use ttl_sweeper::expiry::window::window_key;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{
    key_from_json, DynamoStore, ErrorKind, Key, TableSchema, SDK_MAX_ATTEMPTS,
};

/// The sweep instant of every sweep here: a fixed minute plus 30 s, so runs are reproducible.
const NOW: i64 = 1_767_225_630;
/// Each attempt's timeout on the proxied client; a delayed request is held longer than this.
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(800);
const DELAY: Duration = Duration::from_millis(1200);
/// Sweeps per chaos table before the faults stop.
const MAX_SWEEPS: usize = 8;

/// An SDK client through the proxy with the production retry policy (standard mode,
/// [`SDK_MAX_ATTEMPTS`]) and short timeouts, so delayed answers cost the test little.
fn proxied_client(endpoint: &str) -> Client {
    let config = sdk_config(endpoint)
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(1))
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(Duration::from_secs(10))
                .build(),
        )
        .retry_config(RetryConfig::standard().with_max_attempts(SDK_MAX_ATTEMPTS))
        .build();
    Client::from_conf(config)
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

async fn present(client: &Client, table: &str) -> HashSet<String> {
    ids(client, table).await.into_iter().collect()
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
    let mut items = Vec::new();
    let mut kinds = HashMap::new();
    let mut add = |id: String, kind: Kind, item: Key| {
        let window = item
            .get("expirationWindow")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        kinds.insert(id, (kind, window));
        items.push(item);
    };
    for i in 0..700 {
        // spread over the last hour; every 10th exactly on a window boundary
        let ttl = if i % 10 == 0 {
            (NOW / 60 - rng.i64(0..60)) * 60
        } else {
            NOW - rng.i64(1..3600)
        };
        let id = format!("expired-{i}");
        add(id.clone(), Kind::Expired, session(&id, ttl));
    }
    add(
        "just-expired".into(),
        Kind::Expired,
        session("just-expired", NOW - 1),
    );
    add("at-now".into(), Kind::Future, session("at-now", NOW));
    for i in 0..200 {
        let id = format!("future-{i}");
        add(
            id.clone(),
            Kind::Future,
            session(&id, NOW + rng.i64(1..3600)),
        );
    }
    if extend {
        for i in 0..100 {
            let id = format!("extended-{i}");
            add(
                id.clone(),
                Kind::Extended,
                session(&id, NOW - rng.i64(1..3600)),
            );
        }
    }
    let window = window_key((NOW - 60) as f64, 60).unwrap();
    for i in 0..20 {
        let id = format!("no-ttl-{i}");
        let mut item = id_key(&id);
        item.insert("expirationWindow".into(), AV::S(window.clone()));
        add(id, Kind::Invalid, item);
        let id = format!("ms-ttl-{i}");
        let mut item = session(&id, 0);
        item.insert("ttl".into(), AV::N(((NOW - 100) * 1000).to_string()));
        item.insert("expirationWindow".into(), AV::S(window.clone()));
        add(id, Kind::Invalid, item);
        let id = format!("no-window-{i}");
        let mut item = session(&id, NOW - 100);
        item.remove("expirationWindow");
        add(id, Kind::NoWindow, item);
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
            let ttl = NOW + 3600;
            let done = client
                .update_item()
                .table_name(&table)
                .set_key(Some(key))
                .update_expression("SET #t = :t, #w = :w")
                .condition_expression("attribute_exists(id)")
                .expression_attribute_names("#t", "ttl")
                .expression_attribute_names("#w", "expirationWindow")
                .expression_attribute_values(":t", AV::N(ttl.to_string()))
                .expression_attribute_values(":w", AV::S(window_key(ttl as f64, 60).unwrap()))
                .send()
                .await
                .is_ok();
            if done {
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

/// Checks one sweep's report against what the server holds before and after it.
fn check_sweep(
    seed: u64,
    label: &str,
    report: &SweepReport,
    before: &HashSet<String>,
    after: &HashSet<String>,
    kinds: &HashMap<String, (Kind, String)>,
    extended: &HashSet<String>,
) -> (usize, usize) {
    let removed: HashSet<&String> = before.difference(after).collect();
    let failed = failed_ids(report);
    for id in &removed {
        assert_eq!(
            kinds[*id].0,
            Kind::Expired,
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
    assert_eq!(
        report.items_found,
        report.items_deleted
            + report.items_skipped
            + report.items_gone
            + report.items_failed
            + report.items_left,
        "seed {seed} {label}: every item found has one outcome: {}",
        brief(report)
    );
    assert_eq!(report.items_failed as usize, report.failed_keys.len());
    // Expired items still there must be reported by this sweep: as failed keys, or in a window
    // it could not read. Anything else is lost.
    let unread: HashSet<&str> = report
        .errors
        .iter()
        .filter_map(|e| e.window.as_deref())
        .collect();
    let due: Vec<&String> = after
        .iter()
        .filter(|id| is_due(id, kinds, extended))
        .collect();
    let reported = due
        .iter()
        .filter(|id| failed.contains(**id) || unread.contains(kinds[**id].1.as_str()))
        .count();
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
    let table = table_name(&format!("chaos_{mode}"));
    create_table(direct, &TableSpec::simple(&table)).await;
    let extend = mode == "conditional";
    let (items, kinds) = chaos_items(seed ^ fault_proxy::fnv(label.as_bytes()), extend);
    put_many(direct, &table, items).await;

    let cfg = config(&table, &[("DELETE_MODE", mode), ("LOOKBACK_WINDOWS", "61")]);
    let schema = DynamoStore::new(direct.clone())
        .describe(&cfg.table_name, &cfg.index_name, &cfg.layout())
        .await
        .unwrap();
    let extended = Arc::new(Mutex::new(HashSet::new()));
    let proxied = DynamoStore::new(proxied_client(&proxy.endpoint));
    let store = extending_store(proxied, direct.clone(), table.clone(), extended.clone());
    let sweeper = Sweeper::new(store, schema, cfg.sweep_options());

    let requests_before = proxy.stats.requests();
    let faults_before = proxy.stats.faults_total();
    proxy.stats.reset_batch_window();
    proxy.set_plan(Plan::Seeded {
        seed,
        rate,
        ops: vec!["Query", "BatchWriteItem", "DeleteItem"],
        faults: all_faults(),
    });
    let mut row = Row {
        mode,
        rate,
        ..Row::default()
    };
    let mut ever_failed = HashSet::new();
    let mut before = present(direct, &table).await;
    // Sweep until the server holds no item that is due (at most MAX_SWEEPS sweeps).
    for n in 1..=MAX_SWEEPS {
        let report = sweeper
            .sweep(Timestamp::from_secs(NOW), &Stop::never())
            .await;
        proxy.wait_idle().await;
        let after = present(direct, &table).await;
        let extended = extended.lock().unwrap().clone();
        let (reported, lost) = check_sweep(
            seed,
            &format!("{label}, sweep {n}"),
            &report,
            &before,
            &after,
            &kinds,
            &extended,
        );
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
    row.batch_window_ms = proxy
        .stats
        .max_batch_window_ms
        .load(std::sync::atomic::Ordering::SeqCst);
    let extended = extended.lock().unwrap().clone();
    // Once the faults stop, one sweep deletes whatever is left.
    proxy.set_plan(Plan::Pass);
    let report = sweeper
        .sweep(Timestamp::from_secs(NOW), &Stop::never())
        .await;
    let after = present(direct, &table).await;
    let (_, lost) = check_sweep(
        seed,
        &format!("{label}, clean-up"),
        &report,
        &before,
        &after,
        &kinds,
        &extended,
    );
    row.lost += lost;
    row.deleted += report.items_deleted;
    row.wrongly_deleted = kinds
        .keys()
        .filter(|id| !is_due(id, &kinds, &extended) && kinds[*id].0 != Kind::Expired)
        .filter(|id| !after.contains(*id))
        .count();
    let still_expired = after
        .iter()
        .filter(|id| is_due(id, &kinds, &extended))
        .count();
    assert_eq!(
        still_expired, 0,
        "seed {seed} {label}: expired items survived a fault-free sweep"
    );
    if extend {
        assert!(
            !extended.is_empty(),
            "seed {seed} {label}: no item was extended"
        );
        // each extended item was kept by its conditional delete, or that delete failed
        let extended_failed = extended
            .iter()
            .filter(|id| ever_failed.contains(*id))
            .count();
        assert_eq!(
            row.skipped as usize + extended_failed,
            extended.len(),
            "seed {seed} {label}"
        );
    }
    row.seconds = started.elapsed().as_secs_f64();
    row
}

fn chaos_seed() -> u64 {
    std::env::var("CHAOS_SEED")
        .ok()
        .map(|s| s.parse().expect("CHAOS_SEED must be a whole number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000_007
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_never_deletes_a_live_item_and_loses_no_expired_one() {
    let seed = chaos_seed();
    eprintln!("chaos seed {seed}: CHAOS_SEED={seed} cargo test --test faults chaos reproduces it");
    let direct = client().await;
    let proxy = FaultProxy::start(&endpoint(), DELAY, Plan::Pass).await;
    let mut rows = Vec::new();
    for rate in [0.0, 0.1, 0.3, 0.5] {
        for mode in ["batch", "conditional"] {
            rows.push(chaos_table(seed, &proxy, &direct, mode, rate).await);
        }
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
    let by_kind = proxy.stats.faults.lock().unwrap().clone();
    let mut kinds: Vec<_> = by_kind.into_iter().collect();
    kinds.sort();
    writeln!(table, "\nfaults injected by kind: {kinds:?}").unwrap();
    println!("{table}");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("chaos-report.md");
    std::fs::write(&out, &table).unwrap();

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
            assert_eq!(
                (r.faults, r.retried, r.sweeps),
                (0, 0, 1),
                "seed {seed}: {r:?}"
            );
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

/// A small table swept in `mode`: 60 items expired over the last five minutes, 10 not yet
/// expired (their ids returned).
async fn small_table(
    direct: &Client,
    prefix: &str,
    mode: &str,
) -> (String, Config, TableSchema, HashSet<String>) {
    let table = table_name(prefix);
    create_table(direct, &TableSpec::simple(&table)).await;
    let mut items: Vec<Key> = (0..60)
        .map(|i| session(&format!("expired-{i}"), NOW - 1 - i * 5))
        .collect();
    items.extend((0..10).map(|i| session(&format!("future-{i}"), NOW + 1 + i * 60)));
    put_items(direct, &table, items).await;
    let future = (0..10).map(|i| format!("future-{i}")).collect();
    let cfg = config(&table, &[("DELETE_MODE", mode), ("LOOKBACK_WINDOWS", "6")]);
    let schema = DynamoStore::new(direct.clone())
        .describe(&cfg.table_name, &cfg.index_name, &cfg.layout())
        .await
        .unwrap();
    (table, cfg, schema, future)
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
            let (name, cfg, schema, future) = small_table(&direct, "one_fault", mode).await;
            let store = DynamoStore::new(proxied_client(&proxy.endpoint));
            let sweeper = Sweeper::new(store, schema, cfg.sweep_options());
            let (requests, faults) = (proxy.stats.requests(), proxy.stats.faults_total());
            proxy.set_plan(first_attempts(fault.clone()));
            let report = sweeper
                .sweep(Timestamp::from_secs(NOW), &Stop::never())
                .await;
            proxy.wait_idle().await;
            proxy.set_plan(Plan::Pass);
            let (requests, faults) = (
                proxy.stats.requests() - requests,
                proxy.stats.faults_total() - faults,
            );
            let left = present(&direct, &name).await;
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
    let (name, cfg, schema, _) = small_table(&direct, "denied", "batch").await;
    let proxy = FaultProxy::start(&endpoint(), DELAY, Plan::Pass).await;
    let store = DynamoStore::new(proxied_client(&proxy.endpoint));

    // Credentials rejected: every request answered 403.
    proxy.set_plan(Plan::script(|_, _| {
        Some(Fault::Reply(
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        ))
    }));
    let err = store
        .describe(&cfg.table_name, &cfg.index_name, &cfg.layout())
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth, "{err}");
    assert!(err.to_string().contains("security token"), "{err}");
    let sweeper = Sweeper::new(&store, schema.clone(), cfg.sweep_options());
    let report = sweeper
        .sweep(Timestamp::from_secs(NOW), &Stop::never())
        .await;
    assert!(!report.is_success());
    assert!(
        report.errors.iter().all(|e| e.kind == ErrorKind::Auth),
        "{report:?}"
    );
    assert_eq!(report.items_deleted, 0);
    assert_eq!(present(&direct, &name).await.len(), 70);

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
    let report = sweeper
        .sweep(Timestamp::from_secs(NOW), &Stop::never())
        .await;
    assert_eq!(report.items_found, 60);
    assert_eq!(report.items_failed, 60, "{report:?}");
    assert_eq!(report.items_retried, 0, "{report:?}");
    assert!(report.failed_keys[0]
        .reason
        .contains("AccessDeniedException"));
    assert_eq!(present(&direct, &name).await.len(), 70);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_dropped_after_start_up_is_reported_and_nothing_is_deleted() {
    let direct = client().await;
    let (name, cfg, schema, _) = small_table(&direct, "index_gone", "batch").await;
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
    let store = DynamoStore::new(proxied_client(&proxy.endpoint));
    let report = Sweeper::new(store, schema, cfg.sweep_options())
        .sweep(Timestamp::from_secs(NOW), &Stop::never())
        .await;
    assert!(!report.is_success());
    assert_eq!(report.windows_swept, 0, "{report:?}");
    assert!(!report.errors.is_empty());
    for e in &report.errors {
        assert_eq!(e.kind, ErrorKind::Validation, "{report:?}");
        assert!(e.message.contains("specified index"), "{report:?}");
    }
    assert_eq!(report.items_deleted, 0);
    assert_eq!(present(&direct, &name).await.len(), 70);
}
