//! Second-level precision, sharded windows, checkpointed catch-up and the long-running loop,
//! against the local server.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use ttl_sweeper::engine::{run_ticks, Ticks};
use ttl_sweeper::engine::{Stop, Sweeper};
use ttl_sweeper::expiry::iso_millis;
use ttl_sweeper::expiry::window::window_attribute;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{DynamoStore, Key, StoreExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_second_ticks_delete_each_item_within_two_seconds_of_its_ttl() {
    let client = client().await;
    let table = table_name("ticks");
    create_table(&client, &TableSpec::simple(&table)).await;
    let start = now();
    // 20 items, one expiring each second from start+3 to start+22, plus survivors.
    let ttls: HashMap<String, i64> = (0..20)
        .map(|i| (format!("tick-{i:02}"), start + 3 + i))
        .collect();
    let mut items: Vec<Key> = ttls.iter().map(|(id, ttl)| session(id, *ttl)).collect();
    items.extend((0..5).map(|i| session(&format!("later-{i}"), start + 600)));
    put_items(&client, &table, items).await;

    let cfg = config(&table, &[("LOOKBACK_WINDOWS", "2")]);
    let (store, schema) = store_and_schema(&cfg).await;
    let sweeper = Sweeper::new(store, schema, cfg.sweep_options());
    let ticks = Ticks {
        every: Duration::from_secs(1),
        full_every: Duration::from_secs(60),
        until: Some(tokio::time::Instant::now() + Duration::from_secs(26)),
    };
    let done = Arc::new(AtomicBool::new(false));

    // Watch the table every 50 ms and record when each item disappears.
    let watcher = {
        let (client, table, done, ttls) =
            (client.clone(), table.clone(), done.clone(), ttls.clone());
        tokio::spawn(async move {
            let mut gone: HashMap<String, f64> = HashMap::new();
            while !done.load(Ordering::SeqCst) {
                let present: HashSet<String> = ids(&client, &table).await.into_iter().collect();
                let t = wall_clock();
                for id in ttls.keys() {
                    if !present.contains(id) {
                        gone.entry(id.clone()).or_insert(t);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            gone
        })
    };
    let report = run_ticks(
        &sweeper,
        Timestamp::from_secs(start),
        &clock,
        &ticks,
        &Stop::never(),
        |_| {},
    )
    .await;
    done.store(true, Ordering::SeqCst);
    let gone = watcher.await.unwrap();

    assert!(report.is_success(), "{report:?}");
    assert_eq!(report.items_deleted, 20);
    assert!(report.ticks >= 20, "ticks: {}", report.ticks);
    let mut lags: Vec<(f64, &String)> = ttls
        .iter()
        .map(|(id, ttl)| {
            (
                gone.get(id).copied().unwrap_or(f64::INFINITY) - *ttl as f64,
                id,
            )
        })
        .collect();
    lags.sort_by(|a, b| a.0.total_cmp(&b.0));
    eprintln!(
        "observed lags (s): {:?}",
        lags.iter()
            .map(|l| (l.0 * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    );
    for (lag, id) in &lags {
        // An item with ttl t is expired once the clock passes t; the sweep instant is the whole
        // second, so the earliest deletion is at t+1 s. Bound: two seconds after t.
        assert!(*lag > 0.0, "{id} deleted {lag:.2} s before its ttl");
        assert!(*lag <= 2.0, "{id} deleted {lag:.2} s after its ttl");
    }
    assert_eq!(scan_all(&client, &table).await.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_items_written_with_the_documented_hash_are_all_swept() {
    let client = client().await;
    let table = table_name("shards");
    create_table(&client, &TableSpec::simple(&table)).await;
    let now = now();
    let shards = 8;
    let mut used = HashSet::new();
    let items: Vec<Key> = (0..200)
        .map(|i| {
            let id = format!("user#{i}");
            let ttl = if i % 10 == 0 {
                now + 900
            } else {
                now - 1 - i % 120
            };
            let attr = window_attribute(ttl as f64, 60, shards, id.as_bytes()).unwrap();
            used.insert(attr.rsplit_once('#').unwrap().1.to_string());
            HashMap::from([
                ("id".to_string(), AV::S(id)),
                ("ttl".to_string(), AV::N(ttl.to_string())),
                ("expirationWindow".to_string(), AV::S(attr)),
            ])
        })
        .collect();
    assert_eq!(
        used.len(),
        shards as usize,
        "200 keys should land in every shard"
    );
    put_items(&client, &table, items).await;

    // Unsharded configuration misses them all: the sweeper must be told the shard count.
    let unsharded = config(&table, &[]);
    let (store, schema) = store_and_schema(&unsharded).await;
    let report = Sweeper::new(store, schema, unsharded.sweep_options())
        .sweep(Timestamp::from_secs(now), &Stop::never())
        .await;
    assert_eq!(report.items_found, 0);

    let cfg = config(&table, &[("WINDOW_SHARDS", "8")]);
    let (store, schema) = store_and_schema(&cfg).await;
    let report = Sweeper::new(store, schema, cfg.sweep_options())
        .sweep(Timestamp::from_secs(now), &Stop::never())
        .await;
    assert!(report.is_success(), "{report:?}");
    assert_eq!(report.items_deleted, 180);
    assert_eq!(report.windows_swept, 16);
    assert_eq!(scan_all(&client, &table).await.len(), 20);
}

async fn checkpoint_setup(
    prefix: &str,
    pairs: &[(&str, &str)],
) -> (
    aws_sdk_dynamodb::Client,
    String,
    String,
    ttl_sweeper::config::Config,
) {
    let client = client().await;
    let table = table_name(prefix);
    let checkpoints = table_name(&format!("{prefix}_cp"));
    create_table(&client, &TableSpec::simple(&table)).await;
    create_checkpoint_table(&client, &checkpoints).await;
    let mut all = vec![("CHECKPOINT_TABLE", checkpoints.as_str())];
    all.extend_from_slice(pairs);
    let cfg = config(&table, &all);
    (client, table, checkpoints, cfg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_three_hour_outage_one_sweep_deletes_everything_that_expired_in_between() {
    let (client, table, checkpoints, cfg) = checkpoint_setup("outage", &[]).await;
    let now = now();
    let outage_start = (now / 60) * 60 - 3 * 3600;
    // The sweeper last finished at the outage's start...
    let store = DynamoStore::new(client.clone());
    let id = format!("{table}/expirationWindowIndex");
    assert!(store
        .advance_checkpoint(&checkpoints, &id, outage_start, clock())
        .await
        .unwrap());
    // ... and items kept expiring: one every 2 minutes for 3 hours, far past the 15-window lookback.
    let items: Vec<Key> = (0..90)
        .map(|i| session(&format!("during-{i}"), outage_start + 1 + i * 120))
        .collect();
    let before: Vec<Key> = vec![session("before-outage", outage_start - 600)];
    put_items(&client, &table, items.into_iter().chain(before).collect()).await;
    put_items(&client, &table, vec![session("future", now + 600)]).await;

    let (store, schema) = store_and_schema(&cfg).await;
    let sweeper = Sweeper::new(store, schema, cfg.sweep_options());
    let report = sweeper
        .sweep(Timestamp::from_secs(now), &Stop::never())
        .await;
    assert!(report.is_success(), "{report:?}");
    assert_eq!(report.items_deleted, 90, "{report:?}");
    assert!(report.windows_swept >= 180);
    assert_eq!(
        report.checkpoint_before.as_deref(),
        Some(iso_millis(outage_start).as_str())
    );
    let cp = sweeper
        .store()
        .read_checkpoint(&checkpoints, &id)
        .await
        .unwrap()
        .unwrap();
    let newest_complete = ((now - 1) / 60) * 60; // the newest window end strictly before now
    assert_eq!(
        cp,
        newest_complete,
        "checkpoint {} vs {}",
        iso_millis(cp),
        iso_millis(newest_complete)
    );
    assert_eq!(
        report.checkpoint_after.as_deref(),
        Some(iso_millis(cp).as_str())
    );
    let left = ids(&client, &table).await;
    // Before the checkpoint is not ours to catch up (native TTL's job); the future item stays.
    assert_eq!(left, ["before-outage", "future"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catch_up_cap_limits_how_far_back_a_sweep_goes() {
    let (client, table, checkpoints, cfg) =
        checkpoint_setup("capped", &[("MAX_CATCHUP", "1h")]).await;
    let now = now();
    let store = DynamoStore::new(client.clone());
    let id = format!("{table}/expirationWindowIndex");
    store
        .advance_checkpoint(&checkpoints, &id, now - 3 * 3600, clock())
        .await
        .unwrap();
    put_items(
        &client,
        &table,
        vec![
            session("recent", now - 1800),
            session("old", now - 2 * 3600),
        ],
    )
    .await;
    let (store, schema) = store_and_schema(&cfg).await;
    let report = Sweeper::new(store, schema, cfg.sweep_options())
        .sweep(Timestamp::from_secs(now), &Stop::never())
        .await;
    assert!(report.catchup_capped);
    assert_eq!(report.items_deleted, 1);
    assert!(exists(&client, &table, id_key("old")).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sweeps_leave_a_correct_checkpoint_that_never_moves_back() {
    let (client, table, checkpoints, cfg) = checkpoint_setup("concurrent", &[]).await;
    let now = now();
    let start = (now / 60) * 60 - 3600;
    let id = format!("{table}/expirationWindowIndex");
    DynamoStore::new(client.clone())
        .advance_checkpoint(&checkpoints, &id, start, clock())
        .await
        .unwrap();
    put_items(
        &client,
        &table,
        (0..120)
            .map(|i| session(&format!("c-{i}"), start + 1 + i * 30))
            .collect(),
    )
    .await;

    let (store_a, schema) = store_and_schema(&cfg).await;
    let a = Sweeper::new(store_a, schema.clone(), cfg.sweep_options());
    let b = Sweeper::new(
        DynamoStore::new(client.clone()),
        schema,
        cfg.sweep_options(),
    );
    let never = Stop::never();
    let (ra, rb) = tokio::join!(
        a.sweep(Timestamp::from_secs(now), &never),
        b.sweep(Timestamp::from_secs(now), &never)
    );
    assert!(ra.is_success() && rb.is_success());
    let expired = (0..120).filter(|i| start + 1 + i * 30 < now).count() as u64;
    // Batch deletes are idempotent: both sweeps may count the same item; none may miss one.
    assert!(ra.items_deleted <= expired && rb.items_deleted <= expired);
    assert!(ra.items_deleted + rb.items_deleted >= expired);
    assert!(scan_all(&client, &table).await.is_empty());
    let newest_complete = ((now - 1) / 60) * 60;
    let cp = a
        .store()
        .read_checkpoint(&checkpoints, &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cp, newest_complete);

    // A late sweep as of an earlier instant must not move it back.
    let late = a
        .sweep(Timestamp::from_secs(now - 900), &Stop::never())
        .await;
    assert!(late.is_success());
    assert_eq!(
        a.store().read_checkpoint(&checkpoints, &id).await.unwrap(),
        Some(newest_complete)
    );
    assert!(!a
        .store()
        .advance_checkpoint(&checkpoints, &id, start, clock())
        .await
        .unwrap());
    assert_eq!(
        a.store().read_checkpoint(&checkpoints, &id).await.unwrap(),
        Some(newest_complete)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_run_exits_cleanly_with_the_report() {
    let client = client().await;
    let table = table_name("run_loop");
    create_table(&client, &TableSpec::simple(&table)).await;
    let now = now();
    let mut items: Vec<Key> = (0..40)
        .map(|i| session(&format!("r-{i}"), now - 1 - i))
        .collect();
    items.extend((0..10).map(|i| session(&format!("r-late-{i}"), now + 2 + i % 2)));
    items.push(session("r-future", now + 3600));
    put_items(&client, &table, items).await;

    let child = std::process::Command::new(env!("CARGO_BIN_EXE_ttl-sweeper"))
        .args(["run", "--every", "1s", "--table-name", &table])
        .env("AWS_ENDPOINT_URL", endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Let it run a few ticks, past the ttls of the "late" items.
    tokio::time::sleep(Duration::from_secs(6)).await;
    // SAFETY: signals the child this test started, by its PID.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let started = std::time::Instant::now();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?} to stop",
        started.elapsed()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["items_deleted"], 50, "{report}");
    assert!(report["ticks"].as_u64().unwrap() >= 3, "{report}");
    assert!(stderr.contains("signal received"), "{stderr}");
    let left = scan_all(&client, &table).await;
    assert_eq!(left.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_stopped_mid_run_never_moves_the_checkpoint_past_an_unfinished_window() {
    let (client, table, checkpoints, cfg) =
        checkpoint_setup("interrupted", &[("LOOKBACK_WINDOWS", "0")]).await;
    let now = now();
    let start = (now / 60) * 60 - 600;
    let id = format!("{table}/expirationWindowIndex");
    DynamoStore::new(client.clone())
        .advance_checkpoint(&checkpoints, &id, start, clock())
        .await
        .unwrap();
    // 30 expired items in each of the 10 windows after the checkpoint.
    let items: Vec<Key> = (0..300)
        .map(|i| session(&format!("i-{i:03}"), start + 1 + (i % 10) * 60 + i / 10))
        .collect();
    put_items(&client, &table, items).await;

    // Stop (as a deadline or SIGTERM would) after 40 deletes, partway through the newest windows.
    let (store, schema) = store_and_schema(&cfg).await;
    let mut store = Instrumented::new(store);
    let token = tokio_util::sync::CancellationToken::new();
    let (seen, trigger) = (
        Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        token.clone(),
    );
    store.before_delete = Some(Box::new(move |_k: &Key| {
        if seen.fetch_add(1, Ordering::SeqCst) + 1 >= 40 {
            trigger.cancel();
        }
        Box::pin(async {})
    }));
    let mut options = cfg.sweep_options();
    options.max_concurrency = 1; // one partition at a time, newest first
    options.page_limit = Some(10);
    let sweeper = Sweeper::new(store, schema, options);
    let first = sweeper
        .sweep(Timestamp::from_secs(now), &Stop::never().with_cancel(token))
        .await;
    assert!(first.stopped_early, "{first:?}");
    assert!(
        first.items_deleted >= 25 && first.items_deleted < 300,
        "{first:?}"
    );
    assert!(first.windows_left > 0);
    assert!(first.is_success(), "stopping is not a failure");
    let cp = sweeper
        .store()
        .inner
        .read_checkpoint(&checkpoints, &id)
        .await
        .unwrap();
    assert_eq!(
        cp,
        Some(start),
        "the oldest windows were not finished: the checkpoint must stay"
    );

    // The next run finishes the job and only then moves the checkpoint.
    let (store, schema) = store_and_schema(&cfg).await;
    let second = Sweeper::new(store, schema, cfg.sweep_options())
        .sweep(Timestamp::from_secs(now), &Stop::never())
        .await;
    assert!(second.is_success() && second.is_complete(), "{second:?}");
    assert_eq!(first.items_deleted + second.items_deleted, 300);
    assert!(scan_all(&client, &table).await.is_empty());
    let cp = DynamoStore::new(client.clone())
        .read_checkpoint(&checkpoints, &id)
        .await
        .unwrap();
    assert_eq!(cp, Some(((now - 1) / 60) * 60));
}
