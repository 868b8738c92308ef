//! Second-level precision, sharded windows, checkpointed catch-up and the long-running loop,
//! against the local server.

use crate::support::{self, runtime_api};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use runtime_api::{Options, Outcome, RuntimeApi, Schedule};
use support::*;
use ttl_sweeper::config::Config;
use ttl_sweeper::engine::run_ticks;
use ttl_sweeper::engine::{Stop, Sweeper};
use ttl_sweeper::expiry::iso_millis;
use ttl_sweeper::expiry::{Timestamp, Window};
use ttl_sweeper::store::{Key, Store};

/// [`watch_gone`] of the items of `ttls` in `table`, in a task of its own, for `limit` at most:
/// when each was first seen gone, at most a scan and 50 ms late.
fn watch_deletions(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    ttls: &HashMap<String, i64>,
    limit: Duration,
) -> tokio::task::JoinHandle<BTreeMap<String, f64>> {
    let (client, table) = (client.clone(), table.to_owned());
    let ids: Vec<String> = ttls.keys().cloned().collect();
    tokio::spawn(async move { watch_gone(&client, &table, &ids, limit).await })
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Each item's lag (observed deletion minus ttl, seconds; infinite if never seen deleted),
/// sorted, with its id.
fn lags_of<'a>(
    ttls: &'a HashMap<String, i64>,
    gone: &BTreeMap<String, f64>,
) -> Vec<(f64, &'a String)> {
    let lag = |id: &String, ttl: i64| gone.get(id).copied().unwrap_or(f64::INFINITY) - ttl as f64;
    let mut lags: Vec<(f64, &String)> = ttls.iter().map(|(id, t)| (lag(id, *t), id)).collect();
    lags.sort_by(|a, b| a.0.total_cmp(&b.0));
    lags
}

fn summary(lags: &[(f64, &String)]) -> (f64, f64, f64) {
    let v: Vec<f64> = lags.iter().map(|l| l.0).collect();
    (pct(&v, 0.5), pct(&v, 0.99), v[v.len() - 1])
}

/// The two tests that measure deletion lag take this for writing, every other test of this file
/// for reading: they never share the machine with another test of this file.
static RUN_ALONE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_second_ticks_delete_each_item_within_three_quarters_of_a_second_of_its_ttl() {
    let _alone = RUN_ALONE.write().await;
    let (client, table) = simple_table("ticks").await;
    let sweeper = sweeper(&table, &[("LOOKBACK_WINDOWS", "2")]).await;
    // Set up first, so that the first ttl is still seconds away when the ticks start.
    let start = now();
    // 20 items, one expiring each second from start+3 to start+22, plus survivors.
    let ttls: HashMap<String, i64> = (0..20)
        .map(|i| (format!("tick-{i:02}"), start + 3 + i))
        .collect();
    let mut items: Vec<Key> = ttls.iter().map(|(id, ttl)| session(id, *ttl)).collect();
    items.extend(sessions("later", 5, |_| start + 600));
    put_items(&client, &table, items).await;

    let ticks = ticks_for(Duration::from_secs(26));
    let watching = watch_deletions(&client, &table, &ttls, Duration::from_secs(26));
    let from = Timestamp::from_secs(start);
    let report = run_ticks(&sweeper, from, &clock, &ticks, &Stop::never(), |_| {}).await;
    let gone = watching.await.unwrap();

    assert!(report.is_success(), "{report:?}");
    assert_eq!(removed(&report), 20, "{report:?}");
    assert!(report.ticks >= 20, "ticks: {}", report.ticks);
    let lags = lags_of(&ttls, &gone);
    let (p50, p99, max) = summary(&lags);
    eprintln!(
        "1 s ticks, continuous loop: lag p50 {p50:.3} s, p99 {p99:.3} s, max {max:.3} s \
         (observed by a scan every 50 ms); all (s): {:?}",
        lags.iter()
            .map(|l| (l.0 * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    );
    for (lag, id) in &lags {
        // A tick at s + 0.02 deletes every ttl before it, so an item with ttl t goes at the first
        // tick after t: about 20 ms plus a query and a delete later, seen by the next scan (up to
        // ~100 ms more). Bound, for a loaded machine: 0.75 s.
        assert!(*lag > 0.0, "{id} deleted {lag:.2} s before its ttl");
        assert!(*lag <= 0.75, "{id} deleted {lag:.2} s after its ttl");
    }
    assert_eq!(scan_all(&client, &table).await.len(), 5);
}

/// The deployed shape: the Lambda binary, unmodified, under a local Lambda Runtime API with two
/// execution environments (reserved concurrency 2), invoked by a schedule every 5 s whose events
/// arrive 0-3 s late, in tick mode (1 s ticks). Items expire every second across three
/// handoffs; consecutive invocations overlap, so none waits for a late invocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lambda_under_a_jittered_schedule_hands_over_without_leaving_items_behind() {
    let _alone = RUN_ALONE.write().await;
    const PERIOD: i64 = 5;
    const PER_SECOND: i64 = 4;
    let (client, table) = simple_table("deployed").await;
    let env = local_env([
        ("TABLE_NAME", table.clone()),
        ("AWS_ENDPOINT_URL", endpoint()),
        ("TICK_SECONDS", "1".into()),
        ("SCHEDULE_SECONDS", PERIOD.to_string()),
        ("METRICS_NAMESPACE", "TtlSweeperTest".into()),
    ]);
    let api = RuntimeApi::start(Options {
        // The construct's default in tick mode: the period plus 20 s.
        timeout: Duration::from_secs(PERIOD as u64 + 20),
        ..Options::lambda("precision", 2, env)
    })
    .await;

    // Events scheduled at first, +5, +10, +15 (three handoffs); items expire 4 per second from
    // first+4 (after the first invocation has surely started) to first+19, plus survivors.
    let first = now() + 2;
    let ttls: HashMap<String, i64> = (first + 4..first + 4 * PERIOD)
        .flat_map(|t| (0..PER_SECOND).map(move |j| (format!("d-{t}-{j}"), t)))
        .collect();
    let last_ttl = *ttls.values().max().unwrap();
    let mut items: Vec<Key> = ttls.iter().map(|(id, ttl)| session(id, *ttl)).collect();
    items.extend(sessions("later", 5, |_| first + 600));
    put_items(&client, &table, items).await;
    // Until every item is gone, or 4 s after the last ttl.
    let limit = Duration::from_secs_f64(last_ttl as f64 + 4.0 - wall_clock());
    let watching = watch_deletions(&client, &table, &ttls, limit);
    let plan = api.run_schedule(&Schedule {
        first,
        period: Duration::from_secs(PERIOD as u64),
        count: 4,
        max_delay: Duration::from_secs(3),
        seed: 7,
    });
    let gone = watching.await.unwrap();
    let run = api.stop();

    let lags = lags_of(&ttls, &gone);
    let (p50, p99, max) = summary(&lags);
    eprintln!(
        "schedule (s after first): {:?}",
        plan.iter()
            .map(|(s, d)| (s - first as f64, ((d - s) * 1000.0).round() / 1000.0))
            .collect::<Vec<_>>()
    );
    eprintln!("invocations:\n{}", run.describe(first as f64));
    eprintln!(
        "deployed shape (2 environments, 5 s schedule, delays 0-3 s, 1 s ticks): {} items, \
         lag p50 {p50:.3} s, p99 {p99:.3} s, max {max:.3} s (observed by a scan every 50 ms); \
         max concurrency {}",
        lags.len(),
        run.max_concurrency()
    );
    eprintln!(
        "largest lags (s, ttl - first): {:?}",
        lags.iter()
            .rev()
            .take(8)
            .map(|(l, id)| ((l * 1000.0).round() / 1000.0, ttls[*id] - first))
            .collect::<Vec<_>>()
    );
    assert!(run.init_errors.is_empty(), "{:?}", run.init_errors);
    for inv in &run.invocations {
        let failed = matches!(inv.outcome, Outcome::Failed(_) | Outcome::TimedOut);
        assert!(!failed, "{inv:?}; logs: {:?}", api.log_text());
    }
    assert!(run.started().count() >= 3, "{}", run.describe(first as f64));
    let succeeded = |i: &&runtime_api::Invocation| matches!(i.outcome, Outcome::Succeeded(_));
    let any = run.invocations.iter().any(|i| succeeded(&i));
    assert!(any, "{}", run.describe(first as f64));
    for (lag, id) in &lags {
        assert!(lag.is_finite(), "{id} was never deleted");
        assert!(*lag > 0.0, "{id} deleted {lag:.3} s before its ttl");
    }
    assert!(p99 <= 0.6, "p99 lag {p99:.3} s");
    assert!(max <= 2.0, "max lag {max:.3} s");
    assert_eq!(run.max_concurrency(), 2, "consecutive invocations overlap");
    assert_eq!(scan_all(&client, &table).await.len(), 5, "survivors stay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_items_written_with_the_documented_hash_are_all_swept() {
    let _shared = RUN_ALONE.read().await;
    let (client, table) = simple_table("shards").await;
    let now = now();
    let shards = 8;
    let items: Vec<Key> = (0..200)
        .map(|i| {
            let ttl = if i % 10 == 0 {
                now + 900
            } else {
                now - 1 - i % 120
            };
            sharded(&format!("user#{i}"), ttl, 60, shards)
        })
        .collect();
    let window = |i: &Key| i["expirationWindow"].as_s().unwrap().clone();
    let used: HashSet<String> = items
        .iter()
        .map(|i| window(i).rsplit_once('#').unwrap().1.into())
        .collect();
    let used = used.len();
    assert_eq!(used, shards as usize, "200 keys should land in every shard");
    put_items(&client, &table, items).await;

    // Unsharded configuration misses them all: the sweeper must be told the shard count.
    let report = sweeper(&table, &[]).await.sweep_at(now).await;
    assert_eq!(report.items_found, 0);

    let sharded = sweeper(&table, &[("WINDOW_SHARDS", "8")]).await;
    let report = sharded.sweep_at(now).await;
    assert!(report.is_success(), "{report:?}");
    assert_eq!(removed(&report), 180, "{report:?}");
    report.assert_fields("windows_swept=16");
    assert_eq!(scan_all(&client, &table).await.len(), 20);
}

/// A table, its checkpoint table with the whole table's checkpoint at `at`, and a configuration
/// of both with `pairs`: the client, table, checkpoint table, checkpoint id and configuration.
async fn checkpointed(
    prefix: &str,
    at: i64,
    pairs: &[(&str, &str)],
) -> (aws_sdk_dynamodb::Client, String, String, String, Config) {
    let (client, table) = simple_table(prefix).await;
    let checkpoints = checkpoint_table(&client, &format!("{prefix}_cp")).await;
    let id = format!("{table}/expirationWindowIndex");
    let store = support::store(client.clone());
    let to = Timestamp::from_secs(at);
    let moved = store.advance_checkpoint(&checkpoints, &id, to, clock());
    assert!(moved.await.unwrap());
    let mut all = vec![("CHECKPOINT_TABLE", checkpoints.as_str())];
    all.extend_from_slice(pairs);
    let cfg = config(&table, &all);
    (client, table, checkpoints, id, cfg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_three_hour_outage_one_sweep_deletes_everything_that_expired_in_between() {
    let _shared = RUN_ALONE.read().await;
    let now = now();
    let outage_start = (now / 60) * 60 - 3 * 3600;
    // The sweeper last finished at the outage's start...
    let (client, table, checkpoints, id, cfg) = checkpointed("outage", outage_start, &[]).await;
    // ... and items kept expiring: one every 2 minutes for 3 hours, far past the 15-window lookback.
    let items = sessions("during", 90, |i| outage_start + 1 + i * 120);
    let before: Vec<Key> = vec![session("before-outage", outage_start - 600)];
    put_items(&client, &table, items.into_iter().chain(before).collect()).await;
    put_items(&client, &table, vec![session("future", now + 600)]).await;

    let sweeper = sweeper_for(&cfg).await;
    let report = sweeper.sweep_at(now).await;
    assert!(report.is_success(), "{report:?}");
    assert_eq!(removed(&report), 90, "{report:?}");
    assert!(report.windows_swept >= 180);
    let before = iso_millis(outage_start);
    assert_eq!(report.checkpoint_before.as_deref(), Some(before.as_str()));
    let cp = sweeper.store().read_checkpoint(&checkpoints, &id).await;
    let cp = cp.unwrap().unwrap();
    let newest_complete = ((now - 1) / 60) * 60; // the newest window end strictly before now
    let newest = iso_millis(newest_complete);
    assert_eq!(cp.secs(), newest_complete, "checkpoint {cp} vs {newest}");
    assert_eq!(report.checkpoint_after.as_deref(), Some(cp.iso().as_str()));
    let left = ids(&client, &table).await;
    // Before the checkpoint is not ours to catch up (native TTL's job); the future item stays.
    assert_eq!(left, ["before-outage", "future"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catch_up_cap_limits_how_far_back_a_sweep_goes() {
    let _shared = RUN_ALONE.read().await;
    let now = now();
    let cap = [("MAX_CATCHUP", "1h")];
    let (client, table, _, _, cfg) = checkpointed("capped", now - 3 * 3600, &cap).await;
    let items = vec![
        session("recent", now - 1800),
        session("old", now - 2 * 3600),
    ];
    put_items(&client, &table, items).await;
    let report = sweeper_for(&cfg).await.sweep_at(now).await;
    assert!(report.catchup_capped);
    assert_eq!(removed(&report), 1, "{report:?}");
    assert!(exists(&client, &table, "old").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sweeps_leave_a_correct_checkpoint_that_never_moves_back() {
    let _shared = RUN_ALONE.read().await;
    let now = now();
    let start = (now / 60) * 60 - 3600;
    let (client, table, checkpoints, id, cfg) = checkpointed("concurrent", start, &[]).await;
    put_items(&client, &table, sessions("c", 120, |i| start + 1 + i * 30)).await;

    let (a, b) = (sweeper_for(&cfg).await, sweeper_for(&cfg).await);
    let (ra, rb) = tokio::join!(a.sweep_at(now), b.sweep_at(now));
    assert!(ra.is_success() && rb.is_success());
    let expired = (0..120).filter(|i| start + 1 + i * 30 < now).count() as u64;
    // Batch deletes are idempotent: both sweeps may count the same item; none may miss one.
    assert!(removed(&ra) <= expired && removed(&rb) <= expired);
    assert!(removed(&ra) + removed(&rb) >= expired, "{ra:?} {rb:?}");
    assert!(scan_all(&client, &table).await.is_empty());
    let newest_complete = ((now - 1) / 60) * 60;
    let checkpoint = || a.store().read_checkpoint(&checkpoints, &id);
    let newest = Some(Timestamp::from_secs(newest_complete));
    assert_eq!(checkpoint().await.unwrap(), newest);

    // A late sweep as of an earlier instant must not move it back.
    assert!(a.sweep_at(now - 900).await.is_success());
    assert_eq!(checkpoint().await.unwrap(), newest);
    let back = Timestamp::from_secs(start);
    let moved = a
        .store()
        .advance_checkpoint(&checkpoints, &id, back, clock());
    assert!(!moved.await.unwrap());
    assert_eq!(checkpoint().await.unwrap(), newest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_stopped_mid_run_never_moves_the_checkpoint_past_an_unfinished_window() {
    let _shared = RUN_ALONE.read().await;
    let now = now();
    // The ten windows with items end where the current window (the one holding the instant
    // `now`, read first) begins, so all ten are catch-up windows, read oldest first. When `now`
    // falls on a minute boundary, the current window is the minute before it.
    let current = Window::containing_instant(Timestamp::from_secs(now), 60);
    let start = current.start - 600;
    let no_lookback = [("LOOKBACK_WINDOWS", "0")];
    let (client, table, checkpoints, id, cfg) =
        checkpointed("interrupted", start, &no_lookback).await;
    // 30 expired items in each of the 10 windows after the checkpoint: item `i-{i}` has this ttl.
    let ttl_of = move |i: i64| start + 1 + (i % 10) * 60 + i / 10;
    let items: Vec<Key> = (0..300)
        .map(|i| session(&format!("i-{i:03}"), ttl_of(i)))
        .collect();
    put_items(&client, &table, items).await;

    // Stop (as a deadline or SIGTERM would) as the first key of the third window is sent:
    // windows are read one at a time, oldest first, so the first two are finished by then and
    // the third is not. The first batch's answer is lost, so its keys go out twice (a retry
    // must not move the stop). The hook keeps the keys in the order they were first sent.
    let (store, schema) = store_and_schema(&cfg).await;
    let mut store = Instrumented::new(store);
    store.lose_batch_answers.store(1, Ordering::SeqCst);
    let token = tokio_util::sync::CancellationToken::new();
    let (sent, trigger) = (Arc::new(std::sync::Mutex::new(Vec::new())), token.clone());
    let third_window = start + 120;
    let order = sent.clone();
    store.before_delete = Some(Box::new(move |k: &Key| {
        let id = k["id"].as_s().unwrap().clone();
        let i: i64 = id.trim_start_matches("i-").parse().unwrap();
        let mut sent = sent.lock().unwrap();
        if !sent.contains(&id) {
            sent.push(id);
        }
        if ttl_of(i) >= third_window {
            trigger.cancel();
        }
        Box::pin(async {})
    }));
    let mut options = cfg.options.clone();
    options.max_concurrency = 1; // one partition at a time, oldest first
    options.page_limit = Some(10);
    let sweeper = Sweeper::new(store, schema, options);
    let stop = Stop::never().with_cancel(token);
    let first = sweeper.sweep(Timestamp::from_secs(now), &stop).await;
    let order = order.lock().unwrap().clone();
    assert!(first.stopped_early, "{first:?}");
    let part = removed(&first) >= 60 && removed(&first) < 300;
    assert!(part, "{first:?}; keys in the order sent: {order:?}");
    assert!(first.windows_left > 0);
    assert!(first.is_success(), "stopping is not a failure: {first:?}");
    let retried = first.items_retried >= 25;
    assert!(retried, "the lost answer was retried: {first:?}");
    let checkpoint = || sweeper.store().inner.read_checkpoint(&checkpoints, &id);
    let cp = checkpoint().await.unwrap();
    // Catch-up runs oldest first and moves the checkpoint after every complete stretch: over
    // the two windows finished, and not past the third, which still holds expired items.
    let cp = cp.expect("a checkpoint").secs();
    assert_eq!(
        cp,
        third_window,
        "the checkpoint moves over the finished windows only ({start} + {}); {first:?}; keys in the order sent: {order:?}",
        cp - start
    );
    for item in scan_all(&client, &table).await {
        let ttl: i64 = item["ttl"].as_n().unwrap().parse().unwrap();
        assert!(
            ttl > cp,
            "the checkpoint {cp} passed an unfinished window (ttl {ttl})"
        );
    }

    // The next run finishes the job and only then moves the checkpoint.
    let second = sweeper_for(&cfg).await.sweep_at(now).await;
    assert!(second.is_success() && second.is_complete(), "{second:?}");
    assert_eq!(removed(&first) + removed(&second), 300);
    assert!(scan_all(&client, &table).await.is_empty());
    let newest = Some(Timestamp::from_secs(current.start));
    assert_eq!(checkpoint().await.unwrap(), newest);
}
