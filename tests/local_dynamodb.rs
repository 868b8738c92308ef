//! The sweeper against a real DynamoDB-API server (DynamoDB Local unless `DYNAMODB_ENDPOINT`).

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use aws_sdk_dynamodb::types::{ProjectionType, ScalarAttributeType as T};
use support::*;
use ttl_sweeper::engine::Sweeper;
use ttl_sweeper::expiry::window::{window_key, Window};
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{ConditionalOutcome, DynamoStore, ErrorKind, Key, Store};

/// A minute boundary comfortably in the past, so every ttl below is expired by the real clock too.
fn boundary() -> i64 {
    (now() / 60) * 60 - 3600
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_past_one_megabyte_are_all_swept() {
    let client = client().await;
    let all = |t: &mut TableSpec| t.projection = ProjectionType::All;
    let table = new_table(&client, "pagination", all).await;

    // 160 items of ~9 KB in ONE window: ~1.4 MB, more than one 1 MB query page.
    let b = boundary();
    let padding = "x".repeat(9 * 1024);
    let items: Vec<Key> = (0..160)
        .map(|i| {
            let mut item = session(&format!("big-{i}"), b - 1 - (i % 50));
            item.insert("payload".into(), AV::S(padding.clone()));
            item
        })
        .collect();
    let window = &items[0]["expirationWindow"];
    assert!(items.iter().all(|i| i["expirationWindow"] == *window));
    put_items(&client, &table, items).await;

    let sweeper = sweeper_over(&config(&table, &[]), Instrumented::new).await;
    let report = sweeper.sweep_at(b + 10).await;
    let more = sweeper.store().pages_with_more.load(SeqCst);
    assert!(
        more >= 1,
        "the window should have needed more than one page"
    );
    assert_eq!(report.items_found, 160);
    assert_eq!(removed(&report), 160, "{report:?}");
    assert!(report.is_success() && report.is_complete());
    assert!(scan_all(&client, &table).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_windows_within_the_lookback_are_swept() {
    let (client, table) = simple_table("lookback").await;
    let b = boundary();
    // One item in each of the 15 previous windows (a missed invocation left them), and one
    // beyond the lookback, which this sweep must not read.
    let mut items: Vec<Key> = (1..=15)
        .map(|k| session(&format!("w{k}"), b - 60 * (k - 1) - 5))
        .collect();
    items.push(session("beyond", b - 60 * 16 - 5));
    put_items(&client, &table, items).await;

    let sweeper = sweeper(&table, &[("LOOKBACK_WINDOWS", "15")]).await;
    let report = sweeper.sweep_at(b + 30).await;
    assert_eq!(report.windows_swept, 16);
    assert_eq!(removed(&report), 15, "{report:?}");
    assert_eq!(ids(&client, &table).await, ["beyond"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_exactly_on_a_window_boundary_is_swept() {
    let (client, table) = simple_table("boundary").await;
    let b = boundary();
    put_items(&client, &table, vec![session("edge", b)]).await;
    let ending_there = Window {
        start: b - 60,
        end: b,
    }
    .key();
    let why = "a boundary ttl belongs to the window that ends there";
    assert_eq!(window_key(b as f64, 60).unwrap(), ending_there, "{why}");

    // One lookback window covers a schedule of up to 50 s (60 s less the 10 s start slack).
    let pairs = [("LOOKBACK_WINDOWS", "1"), ("SCHEDULE_SECONDS", "50")];
    let sweeper = sweeper(&table, &pairs).await;
    // At the boundary itself the item is not expired (ttl < now is false) ...
    assert_eq!(sweeper.sweep_at(b).await.items_deleted, 0);
    assert!(exists(&client, &table, "edge").await);
    // ... and at the next scheduled run the current window is (b, b+60]: only the lookback
    // reaches the item. The published design's single-window query never would.
    let next_run = sweeper.sweep_at(b + 60).await;
    assert_eq!(removed(&next_run), 1, "{next_run:?}");
    assert!(!exists(&client, &table, "edge").await);
}

/// Only validly expired items go. Left alone, in both modes: future ttls (one in the current
/// window), a millisecond ttl and a missing one that a writer put in the current window, a string
/// ttl if the server accepts one; and, native TTL's rule, ttls more than five years in the past
/// (0, six years ago) in the current window, which never expire and count as invalid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn future_missing_millisecond_string_and_too_old_ttls_are_left_alone() {
    let client = client().await;
    let now = boundary() + 30;
    let current = Window::containing_secs(now, 60).key();
    for mode in ["batch", "conditional"] {
        let table = new_table(&client, "untouched", |_| {}).await;
        let items = vec![
            session("expired", now - 20),
            windowed("future", now + 20, &current),
            session("far-future", now + 86_400),
            windowed("millis", (now - 20) * 1000, &current),
            with_window(id_key("no-ttl"), &current),
            windowed("zero", 0, &current),
            windowed("six-years", now - 6 * 365 * 86_400, &current),
        ];
        put_items(&client, &table, items).await;
        // A string ttl cannot be written while the ttl is an index key of type N: the server
        // rejects it, so it can never reach the sweeper.
        let string = with_window(
            bare("string", Some(AV::S((now - 20).to_string()))),
            &current,
        );
        let string_put = client.put_item().table_name(&table).set_item(Some(string));
        // A server that accepts it instead: the item must survive the sweep (checked below).
        if let Err(e) = string_put.send().await {
            let e = format!("{e:?}");
            assert!(e.contains("ValidationException"), "for a string ttl: {e}");
        }
        let pairs = [("DELETE_MODE", mode), ("LOOKBACK_WINDOWS", "2")];
        let report = sweeper(&table, &pairs).await.sweep_at(now).await;
        assert!(report.is_success(), "{mode}: {report:?}");
        assert_eq!(removed(&report), 1, "{mode}: {report:?}");
        assert_eq!(report.items_invalid, 2, "{mode}: {report:?}");
        let mut expected = vec![
            "far-future",
            "future",
            "millis",
            "no-ttl",
            "six-years",
            "zero",
        ];
        if exists(&client, &table, "string").await {
            expected.push("string");
        }
        expected.sort();
        assert_eq!(ids(&client, &table).await, expected, "{mode}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_and_binary_keys_are_deleted_by_their_full_key() {
    let client = client().await;
    let now = boundary() + 30;
    let specs = [
        ("pk_sk", ("tenant", T::S), Some(("seq", T::N))),
        ("pk_num", ("n", T::N), None),
        ("pk_bin", ("b", T::B), Some(("s", T::S))),
    ];
    for (prefix, partition, sort) in specs {
        let table = new_table(&client, prefix, |t| {
            t.partition = partition.clone();
            t.sort = sort.clone();
        })
        .await;
        let value = |ty: &T, i: i64| match ty {
            T::S => AV::S(format!("v{i}")),
            T::N => num(i),
            _ => AV::B(aws_sdk_dynamodb::primitives::Blob::new(vec![i as u8, 0xff])),
        };
        let mut items = Vec::new();
        for i in 0..40i64 {
            // two items per partition value, so only the full key identifies one
            let ttl = if i % 4 == 3 { now + 600 } else { now - 10 - i };
            let mut item = HashMap::from([
                (partition.0.to_string(), value(&partition.1, i / 2)),
                ("ttl".to_string(), num(ttl)),
                (
                    "expirationWindow".into(),
                    AV::S(window_key(ttl as f64, 60).unwrap()),
                ),
            ]);
            match &sort {
                Some((name, ty)) => _ = item.insert(name.to_string(), value(ty, i)),
                None if i % 2 == 1 => continue,
                None => {}
            }
            items.push(item);
        }
        let live = |i: &Key| i["ttl"] == num(now + 600);
        let expected_left = items.iter().filter(|i| live(i)).count();
        let total = items.len();
        put_items(&client, &table, items).await;

        let cfg = config(&table, &[]);
        let (store, schema) = store_and_schema(&cfg).await;
        let keys = schema.key_attributes.len();
        assert_eq!(keys, 1 + usize::from(sort.is_some()), "{prefix}");
        let report = Sweeper::new(store, schema, cfg.options.clone())
            .sweep_at(now)
            .await;
        let expired = total - expected_left;
        assert_eq!(removed(&report) as usize, expired, "{prefix}: {report:?}");
        let left = scan_all(&client, &table).await;
        assert_eq!(left.len(), expected_left, "{prefix}");
        assert!(left.iter().all(live));
    }
}

/// `store`, extending the ttl of `item-0` right between the index read and the delete.
fn extend_ttl_hook(
    store: DynamoStore,
    client: aws_sdk_dynamodb::Client,
    table: String,
    new_ttl: i64,
) -> Instrumented<DynamoStore> {
    let mut wrapped = Instrumented::new(store);
    let done = Arc::new(AtomicBool::new(false));
    wrapped.before_delete = Some(Box::new(move |key: &Key| {
        let (client, table, key, done) = (client.clone(), table.clone(), key.clone(), done.clone());
        Box::pin(async move {
            if key["id"].as_s().unwrap() == "item-0" && !done.swap(true, SeqCst) {
                extend_ttl(&client, &table, key, new_ttl).await;
            }
        })
    }));
    wrapped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_mode_keeps_an_item_whose_ttl_was_extended_after_the_query() {
    let client = client().await;
    let now = boundary() + 30;
    let mut outcomes = HashMap::new();
    for mode in ["conditional", "batch"] {
        let table = new_table(&client, &format!("race_{mode}"), |_| {}).await;
        put_items(&client, &table, sessions("item", 10, |i| now - 5 - i)).await;
        let cfg = config(&table, &[("DELETE_MODE", mode)]);
        let hook = |store| extend_ttl_hook(store, client.clone(), table.clone(), now + 3600);
        let report = sweeper_over(&cfg, hook).await.sweep_at(now).await;
        assert!(report.is_success(), "{mode}: {report:?}");
        let kept = exists(&client, &table, "item-0").await;
        outcomes.insert(mode, (report, kept));
    }
    let (report, kept) = &outcomes["conditional"];
    assert!(kept, "conditional mode must keep the extended item");
    assert_eq!((report.items_deleted, report.items_skipped), (9, 1));
    // Batch mode cannot see the extension: it trusts the index. This is why conditional exists.
    let (report, kept) = &outcomes["batch"];
    assert!(!kept);
    assert_eq!(removed(report), 10, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conditional_delete_tells_deleted_kept_and_already_gone_apart() {
    use ConditionalOutcome::{Deleted, Gone, Kept};
    let (client, table) = simple_table("outcomes").await;
    let now = boundary() + 30;
    let items = vec![session("expired", now - 1), session("extended", now + 3600)];
    put_items(&client, &table, items).await;
    let cfg = config(&table, &[("DELETE_MODE", "conditional")]);
    let (store, schema) = store_and_schema(&cfg).await;
    // Each delete requires the ttl as the index listed it: `now - 1`.
    let read = (now - 1).to_string();
    let outcome = |id: &'static str, read: String| {
        let (store, schema) = (store.clone(), schema.clone());
        async move {
            let at = Timestamp::from_secs(now);
            let answer = store.delete_if_expired(&schema, id_key(id), &read, at, false);
            answer.await.unwrap().0
        }
    };
    // A repeated delete (the first answer lost) finds nothing: gone, not "kept".
    for (id, want) in [
        ("expired", Deleted),
        ("expired", Gone),
        ("never-existed", Gone),
        ("extended", Kept),
    ] {
        assert_eq!(outcome(id, read.clone()).await, want, "{id}");
    }
    assert!(exists(&client, &table, "extended").await);
    // A ttl changed after the read to another past value: still expired, but not the expiry
    // that was read, so the item is kept.
    put_items(&client, &table, vec![session("rewritten", now - 30)]).await;
    assert_eq!(outcome("rewritten", read.clone()).await, Kept);
    assert!(exists(&client, &table, "rewritten").await);
    // The same number written differently is the same ttl.
    let same = format!("{}.000", now - 30);
    assert_eq!(outcome("rewritten", same).await, Deleted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_whose_ttl_key_is_a_string_is_refused_by_name() {
    let client = client().await;
    let table = new_table(&client, "string_ttl_index", |t| t.ttl_type = T::S).await;
    let err = store(client)
        .describe_config(&config(&table, &[]))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Validation);
    let msg = err.to_string();
    let named = msg.contains("ttl (S)") && msg.contains("(N, TTL_ATTRIBUTE)");
    assert!(named, "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_checks_name_the_missing_or_misshapen_table_and_index() {
    let client = client().await;
    let store = support::store(client.clone());
    let refused = |table: &str, pairs: &[(&str, &str)]| {
        let cfg = config(table, pairs);
        let store = store.clone();
        async move { store.describe_config(&cfg).await.unwrap_err() }
    };

    let missing = refused("no_such_table_here", &[]).await;
    assert_eq!(missing.kind, ErrorKind::NotFound);
    let named = missing.to_string().contains("no_such_table_here");
    assert!(named, "{missing}");

    let table = new_table(&client, "shape", |_| {}).await;
    let no_index = refused(&table, &[("INDEX_NAME", "byExpiry")]).await;
    assert_eq!(no_index.kind, ErrorKind::NotFound);
    let msg = no_index.to_string();
    let named = ["byExpiry", "INDEX_NAME", "expirationWindowIndex"];
    assert!(named.iter().all(|n| msg.contains(n)), "{msg}");

    let wrong_attr = refused(&table, &[("TTL_ATTRIBUTE", "expiresAt")]).await;
    assert_eq!(wrong_attr.kind, ErrorKind::Validation);
    assert!(wrong_attr.to_string().contains("expiresAt"), "{wrong_attr}");
}

/// The checkpoint table is checked for its key's name and type, as the expiry index table is: one
/// keyed on a Number `id` is refused at start-up, not left to fail every checkpoint and lease write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_or_index_table_keyed_otherwise_is_refused_by_name() {
    let client = client().await;
    let store = support::store(client.clone());
    let table = new_table(&client, "keyed", |_| {}).await;
    let keyed = |name: &'static str, ty: T| {
        move |t: &mut TableSpec| {
            t.partition = (name, ty);
            t.index = false;
        }
    };
    let number_id = new_table(&client, "ckpt_number_id", keyed("id", T::N)).await;
    let other_key = new_table(&client, "ckpt_other_key", keyed("pk", T::S)).await;
    let number_window = new_table(&client, "index_number", keyed("window", T::N)).await;
    let by_id = "partition key `id` (String)";
    let by_window = "partition key `window` (String)";
    let cases = [
        ("CHECKPOINT_TABLE", &number_id, by_id),
        ("CHECKPOINT_TABLE", &other_key, by_id),
        ("EXPIRY_INDEX_TABLE", &number_window, by_window),
    ];
    for (setting, name, needed) in cases {
        let refused = store
            .describe_config(&config(&table, &[(setting, name)]))
            .await;
        let err = refused.expect_err(name);
        assert_eq!(err.kind, ErrorKind::Validation, "{err}");
        let msg = err.to_string();
        let named = msg.contains(name.as_str()) && msg.contains(setting) && msg.contains(needed);
        assert!(named, "{msg}");
    }
    let good = checkpoint_table(&client, "ckpt_good").await;
    let accepted = store
        .describe_config(&config(&table, &[("CHECKPOINT_TABLE", &good)]))
        .await;
    assert!(accepted.is_ok(), "{accepted:?}");
}

/// A shard migration runs sweepers of two layouts on one table and one checkpoint table: each
/// layout keeps its own checkpoint, so one catching up never skips the other's backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_layouts_keep_their_own_checkpoints() {
    let (client, table) = simple_table("layouts").await;
    let checkpoints = checkpoint_table(&client, "layouts_cp").await;
    let t = boundary();
    // 40 items in the old layout (60 s, one shard) that expired 1-2 h before T.
    let items = sessions("old", 40, |i| t - 7200 + 1 + i * 90);
    put_items(&client, &table, items).await;
    let cp = ("CHECKPOINT_TABLE", checkpoints.as_str());
    let sweeper_of = |shards: &str| {
        let cfg = config(&table, &[cp, ("WINDOW_SHARDS", shards)]);
        async move { sweeper_for(&cfg).await }
    };
    let (old, new) = (sweeper_of("1").await, sweeper_of("4").await);
    // The old layout last swept at T-3h; the new one sweeps at T; then the old one at T.
    old.sweep_at(t - 3 * 3600).await;
    new.sweep_at(t).await;
    let report = old.sweep_at(t).await;
    assert_eq!(removed(&report), 40, "{report:?}");
    assert!(ids(&client, &table).await.is_empty());
}

/// Scale-out: three sweepers with the shard ranges 0-3, 4-7 and 8-11 of a 12-shard table run at
/// the same time. Each reads only the partitions of its own shards and keeps its own checkpoint;
/// between them every expired item is deleted exactly once and no live item is touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_sweepers_split_twelve_shards_and_delete_each_expired_item_once() {
    use ttl_sweeper::expiry::window::shard_of;
    for mode in ["batch", "conditional"] {
        let (client, table) = simple_table("split").await;
        let checkpoints = checkpoint_table(&client, "split_cp").await;
        let now = boundary() + 30;
        // 600 items expired over the last ten windows and the current one; 120 live ones in the
        // same windows' partitions (the current window) and later.
        let expired: Vec<String> = (0..600).map(|i| format!("exp-{i}")).collect();
        let live: Vec<String> = (0..120).map(|i| format!("live-{i}")).collect();
        let items = (expired.iter().zip(0..))
            .map(|(id, i)| sharded(id, now - 1 - (i * 7) % 600, 60, 12))
            .chain(
                (live.iter().zip(0..)).map(|(id, i)| sharded(id, now + 1 + (i * 13) % 300, 60, 12)),
            );
        put_many(&client, &table, items.collect()).await;

        let deletes = Arc::new(std::sync::Mutex::new(HashMap::<String, u32>::new()));
        let mut sweepers = Vec::new();
        for range in ["0-3", "4-7", "8-11"] {
            let cfg = config(
                &table,
                &[
                    ("WINDOW_SHARDS", "12"),
                    ("SHARD_RANGE", range),
                    ("CHECKPOINT_TABLE", &checkpoints),
                    ("DELETE_MODE", mode),
                    ("MAX_CONCURRENCY", "4"),
                ],
            );
            let observer = Recording {
                settled: deletes.clone(),
                ..Recording::default()
            };
            let store = |inner| Observed { inner, observer };
            sweepers.push((range, sweeper_over(&cfg, store).await));
        }
        let (r0, r1, r2) = tokio::join!(
            sweepers[0].1.sweep_at(now),
            sweepers[1].1.sweep_at(now),
            sweepers[2].1.sweep_at(now),
        );

        let deletes = deletes.lock().unwrap().clone();
        let reports = || serde_json::to_string(&[&r0, &r1, &r2]).unwrap_or_default();
        for id in &expired {
            let n = deletes.get(id);
            assert_eq!(
                n,
                Some(&1),
                "{mode}: {id} deleted or found gone {n:?} times; reports: {}",
                reports()
            );
        }
        let only_expired = deletes.len() == expired.len();
        assert!(only_expired, "{mode}: only expired items are deleted");
        let left = ids(&client, &table).await;
        assert_eq!(left, sorted(live), "{mode}: every live item stays");

        for ((range, sweeper), report) in sweepers.iter().zip([&r0, &r1, &r2]) {
            let (first, last) = range.split_once('-').unwrap();
            let shards = first.parse().unwrap()..=last.parse().unwrap();
            // The report counts the expired items of its own shards, and nothing else.
            let own = expired
                .iter()
                .filter(|id| shards.contains(&shard_of(id.as_bytes(), 12)))
                .count() as u64;
            let what = format!("{mode} {range}: {report:?}");
            assert!(report.is_success() && report.is_complete(), "{what}");
            assert_eq!(removed(report), own, "{what}");
            // Only partitions `<window>#<shard>` of its own shards were read, every one of them.
            let mut seen = std::collections::BTreeSet::new();
            for partition in sweeper.store().partitions.lock().unwrap().iter() {
                let shard: u32 = partition.rsplit_once('#').unwrap().1.parse().unwrap();
                assert!(shards.contains(&shard), "{mode} {range} read {partition}");
                seen.insert(shard);
            }
            assert!(seen.into_iter().eq(shards.clone()), "{what}");
            // Its own checkpoint moved.
            assert!(report.checkpoint_after.is_some(), "{what}");
        }
        let total = removed(&r0) + removed(&r1) + removed(&r2);
        assert_eq!(total, 600, "{mode}: {r0:?}\n{r1:?}\n{r2:?}");

        // One checkpoint per range, none for the whole table.
        let prefix = format!("{table}/expirationWindowIndex/60s/12shards");
        let want = ["range0-3", "range4-7", "range8-11"].map(|r| format!("{prefix}/{r}"));
        assert_eq!(ids(&client, &checkpoints).await, want, "{mode}");
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}
