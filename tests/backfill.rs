//! `backfill` on the in-memory store, in paused time: each item judged by the clock when its
//! write is made, a concurrent change never overwritten nor a deleted item recreated, an expired
//! item deleted only with the ttl it was read with, throttled writes retried, and a run stopped
//! by a failed page resumed to the end with every item written once. The same requests' real
//! conditions are checked on DynamoDB Local in `adoption`.

use crate::support;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use aws_sdk_dynamodb::types::AttributeValue as AV;
use support::mem_store::{Change, Fault, MemStore, Op, When};
use support::*;
use ttl_sweeper::expiry::window::window_key;
use ttl_sweeper::expiry::{Layout, Timestamp};
use ttl_sweeper::store::ErrorKind::{Throttled, Transient};
use ttl_sweeper::tools::backfill::{backfill, BackfillOptions, BackfillReport, BackfillState};

const START: i64 = 1_700_000_000;

/// A backfill of `store`'s table in `segments` segments, `page` items a page, judging items by
/// `clock`, from `state` (a fresh run's when `None`); `on_page` sees the items scanned so far.
/// The state it ends with.
async fn run(
    store: &MemStore,
    segments: u32,
    page: i32,
    clock: &(dyn Fn() -> Timestamp + Send + Sync),
    state: Option<BackfillState>,
    on_page: &(dyn Fn(u64) + Sync),
) -> BackfillState {
    let schema = store.schema();
    let options = BackfillOptions {
        page_limit: Some(page),
        ..BackfillOptions::default()
    };
    let state =
        state.unwrap_or_else(|| BackfillState::new(&schema.table_name, &schema.layout, segments));
    backfill(store, &schema, &options, &clock, state, &|_| {}, on_page).await
}

/// A complete run's report, without errors.
fn complete(state: BackfillState) -> BackfillReport {
    let report = state.report;
    assert!(report.complete && report.errors.is_empty(), "{report:?}");
    report
}

/// The window attribute of item `id` as the table holds it.
fn window_of(store: &MemStore, id: &str) -> Option<AV> {
    store.items()[id].get("expirationWindow").cloned()
}

fn window_for(ttl: i64) -> AV {
    AV::S(window_key(ttl as f64, 60).unwrap())
}

/// Each item is judged by the clock when the backfill writes it, not when the run started: the
/// clock moves 10 s per item scanned and every ttl is 25 s after the start, so the first three
/// are live when written and get their window, the rest have expired when reached and are
/// deleted: none is given a window the sweeps may already have passed.
#[tokio::test(start_paused = true)]
async fn each_item_is_judged_by_the_clock_when_it_is_written() {
    let store = MemStore::new(Layout::default());
    let ttl = START + 25;
    for i in 0..12 {
        store.put(&format!("item-{i:02}"), ttl as f64);
    }
    let scanned = AtomicU64::new(0);
    let clock = || Timestamp::from_secs(START + 10 * scanned.load(SeqCst) as i64);
    let state = run(&store, 1, 1, &clock, None, &|n| scanned.store(n, SeqCst)).await;
    complete(state).assert_fields("scanned=12 written=3 deleted_expired=9 expired_while_written=0");
    let left = store.ids();
    assert_eq!(left, ["item-00", "item-01", "item-02"]);
    for id in &left {
        assert_eq!(window_of(&store, id), Some(window_for(ttl)), "{id}");
    }
}

/// An item live when its window is written, whose ttl passes before the write is acknowledged,
/// is deleted after the write (on the ttl read) rather than left with a window the sweeps may
/// already have passed.
#[tokio::test(start_paused = true)]
async fn an_item_whose_ttl_passes_while_its_window_is_written_is_deleted() {
    let store = MemStore::new(Layout::default());
    store.put("slow", (START + 5) as f64);
    // The clock reads the start while the item is judged (scanned, and written), and a minute
    // later from the acknowledgement on.
    let reads = AtomicU64::new(0);
    let clock = || {
        let n = reads.fetch_add(1, SeqCst);
        Timestamp::from_secs(if n < 2 { START } else { START + 60 })
    };
    let state = run(&store, 1, 1, &clock, None, &|_| {}).await;
    complete(state).assert_fields("written=1 expired_while_written=1 deleted_expired=1");
    assert!(store.ids().is_empty());
}

/// Between the scan and the writes, the application extends one item's ttl, deletes another and
/// rewrites a third already expired with another expired ttl: the window write of the first
/// fails its condition (the application's item stands), the second is not recreated, and the
/// third is kept, its ttl not the one read. The untouched items are written and deleted.
#[tokio::test(start_paused = true)]
async fn a_concurrent_change_is_never_overwritten_nor_a_deleted_item_recreated() {
    let now = START;
    let changes = [
        ("extended", Change::Extend((now + 7200) as f64)),
        ("deleted", Change::Remove),
        ("rewritten", Change::Put((now - 60) as f64)),
    ];
    let on_scan = |store: MemStore, (id, change)| store.change(Op::Scan, When::Call(1), id, change);
    let store = changes
        .into_iter()
        .fold(MemStore::new(Layout::default()), on_scan);
    for id in ["extended", "deleted", "live"] {
        store.put(id, (now + 60) as f64);
    }
    for id in ["rewritten", "expired"] {
        store.put(id, (now - 3600) as f64);
    }
    let clock = || Timestamp::from_secs(now);
    let state = run(&store, 1, 10, &clock, None, &|_| {}).await;
    let report = complete(state);
    report.assert_fields(
        "scanned=5 written=1 changed_concurrently=2 deleted_expired=1 expired_kept=1",
    );
    assert_eq!(store.ids(), ["extended", "live", "rewritten"]);
    let extended = window_of(&store, "extended");
    assert_eq!(extended, None, "the application's write stands");
    assert_eq!(window_of(&store, "live"), Some(window_for(now + 60)));
    let writes = store.calls(Op::SetWindow);
    assert_eq!(writes, 3, "one conditional write per live item read");
}

/// Throttled and transient answers to the writes are tried again, after a backoff that paused
/// time lets pass at once, and the items written.
#[tokio::test(start_paused = true)]
async fn throttled_writes_are_tried_again() {
    let store = MemStore::new(Layout::default());
    let store = store.fault(Op::SetWindow, When::First(2), Fault::Fail(Throttled));
    let store = store.fault(Op::DeleteRead, When::Call(1), Fault::Fail(Transient));
    store.put("live", (START + 60) as f64);
    store.put("expired", (START - 60) as f64);
    let clock = || Timestamp::from_secs(START);
    let state = run(&store, 1, 10, &clock, None, &|_| {}).await;
    complete(state).assert_fields("written=1 deleted_expired=1");
    let calls = (store.calls(Op::SetWindow), store.calls(Op::DeleteRead));
    assert_eq!(calls, (3, 2));
}

/// A run whose scan fails on its third page stops that segment where its last page ended; the
/// run resumed from its state reads the rest, so that every item is scanned and written once.
#[tokio::test(start_paused = true)]
async fn a_run_stopped_by_a_failed_page_resumes_and_writes_each_item_once() {
    let store = MemStore::new(Layout::default());
    let store = store.fault(Op::Scan, When::Call(3), Fault::Fail(Transient));
    let ttl = START + 3600;
    let ids: Vec<String> = (0..40).map(|i| format!("item-{i:02}")).collect();
    for id in &ids {
        store.put(id, ttl as f64);
    }
    let clock = || Timestamp::from_secs(START);
    let stopped = run(&store, 2, 4, &clock, None, &|_| {}).await;
    assert!(!stopped.report.complete, "{:?}", stopped.report);
    assert_eq!(stopped.report.errors.len(), 1, "{:?}", stopped.report);
    let before = stopped.report.written;
    assert!((4..40).contains(&before), "{:?}", stopped.report);

    let mut resumed = stopped;
    resumed.report.errors.clear();
    let report = complete(run(&store, 2, 4, &clock, Some(resumed), &|_| {}).await);
    report.assert_fields("scanned=40 written=40");
    assert_eq!(store.calls(Op::SetWindow), 40, "each item written once");
    for id in &ids {
        assert_eq!(window_of(&store, id), Some(window_for(ttl)), "{id}");
    }
}

/// `audit` of a table swept through its expiry index table counts the items to come that no pack
/// lists, and only those, reading one entry look-up or pack query per item.
#[tokio::test(start_paused = true)]
async fn audit_counts_the_items_to_come_that_no_pack_lists() {
    use ttl_sweeper::tools::audit::audit;
    let store = MemStore::new(Layout::default()).with_index_table();
    for id in ["packed-1", "packed-2", "missing"] {
        store.put(id, (START + 3600) as f64);
    }
    store.put("expired", (START - 60) as f64);
    store.index_packed(&["packed-1", "packed-2"], "test");
    let (schema, now) = (store.schema(), Timestamp::from_secs(START));
    let report = audit(&store, &schema, 2, None, None, now, &|_| {})
        .await
        .unwrap();
    report.assert_fields("scanned=4 with_ttl=4 missing_entry=1");
    let examples: Vec<(&str, String)> = (report.examples.iter())
        .map(|e| (e.problem, e.key.to_string()))
        .collect();
    let missing = r#"{"id":{"S":"missing"}}"#.to_owned();
    assert_eq!(examples, [("missing_entry", missing)]);
    let expired = report.expired_present.get("1m_to_5m");
    assert_eq!(expired, Some(&1), "{report:?}");
    // An entry look-up for each item to come, and a pack query for each without an entry.
    assert_eq!(store.calls(Op::HasEntry), 3 + 3);
}
