//! Packed entries of the expiry index table (`store::packs`, `engine::packs`) on an in-memory
//! table with virtual time: ticks read each pack once, the cursor carries what was judged across
//! a restart, a key not settled is carried into a new pack and deleted by a later sweep, entries
//! of one item each are swept beside packs, a sweep starts from its writer's mark, and ticks that
//! fell behind leave the backlog to the catch-up; the stream indexer's packs are written once,
//! each before it is due, and lose nothing across a redelivered or hour-late batch, a slow write,
//! a kill and a handoff. On DynamoDB Local (in `stream_indexer`, whose
//! server is already up): `on_dynamodb_local_a_sweep_reads_the_packs_between_the_cursor_and_…`.

use crate::support;

use std::ops::RangeInclusive;
use std::time::Duration;

use support::mem_store::{mem_sweeper, Fault, MemStore, Op, When};
use support::mem_stream::insert_record as record;
use support::SweepAt;
use tokio::time::Instant;

use aws_lambda_events::dynamodb::EventRecord;
use ttl_sweeper::engine::{run_ticks, DeleteMode, Stop, SweepOptions, SweepReport, Sweeper};
use ttl_sweeper::expiry::window::windows_since;
use ttl_sweeper::expiry::{Clock, Layout, Timestamp};
use ttl_sweeper::index::{delete_expired, index_records};
use ttl_sweeper::store::{packs, ErrorKind, Retry};

const T0: i64 = 1_800_000_000;

fn store() -> MemStore {
    MemStore::new(Layout::default())
        .starting_at(T0)
        .with_index_table()
}

/// Items `s<s>-<i>`, `per` of them expiring at each second `T0 + s` for `s` in `seconds`.
fn put_items(store: &MemStore, seconds: RangeInclusive<i64>, per: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for s in seconds {
        for i in 0..per {
            let id = format!("s{s:+05}-{i}");
            store.put(&id, (T0 + s) as f64);
            ids.push(id);
        }
    }
    ids
}

fn refs(ids: &[String]) -> Vec<&str> {
    ids.iter().map(String::as_str).collect()
}

/// Items `s<s>-<i>` ([`put_items`]), indexed in packs from `origin`.
fn put_packed(
    store: &MemStore,
    seconds: RangeInclusive<i64>,
    per: usize,
    origin: &str,
) -> Vec<String> {
    let ids = put_items(store, seconds, per);
    store.index_packed(&refs(&ids), origin);
    ids
}

/// Runs 1 s ticks (full sweeps every 60 s beside them) of `sweeper` for `secs` of virtual time.
async fn tick_for(sweeper: &Sweeper<MemStore>, store: &MemStore, secs: f64) -> SweepReport {
    ticks_for(sweeper, store, secs, Duration::from_secs(60)).await
}

/// Runs 1 s ticks, with a full sweep every `full_every` beside them, of `sweeper` for `secs` of
/// virtual time.
async fn ticks_for(
    sweeper: &Sweeper<MemStore>,
    store: &MemStore,
    secs: f64,
    full_every: Duration,
) -> SweepReport {
    let clock = store.clock_fn(f64::round);
    let run_for = Duration::from_secs_f64(secs);
    let ticks = support::ticks(Duration::from_secs(1), full_every, run_for);
    run_ticks(sweeper, clock(), &clock, &ticks, &Stop::never(), |_| {}).await
}

fn pack_reads(store: &MemStore) -> std::collections::BTreeMap<String, usize> {
    store.pack_reads.lock().unwrap().clone()
}

/// Asserts that no pack was read more than once; the reads by pack.
#[track_caller]
fn assert_read_once(store: &MemStore) -> std::collections::BTreeMap<String, usize> {
    let reads = pack_reads(store);
    assert!(
        reads.values().all(|n| *n == 1),
        "a pack read twice: {reads:?}"
    );
    reads
}

/// The stream indexer's write of `records` into packs, as of `clock`, with no failure.
async fn index_ok(store: &MemStore, clock: &impl Clock, records: &[EventRecord]) {
    let indexed = index_records(store, &store.schema(), clock, records).await;
    assert!(indexed.failures.is_empty(), "{:?}", indexed.report);
}

#[tokio::test(start_paused = true)]
async fn ticks_read_each_pack_once_and_a_restart_goes_on_from_the_cursor() {
    // 50 items due over 10 s, packed ahead (five per pack, one pack a second). One sweeper
    // ticks for 5.5 s and stops (a Lambda's invocation ends, a process is killed); a new one
    // ticks on. Every item is deleted once, and no pack is read twice: the second sweeper starts
    // from the cursor the first stored, not from the packs it already judged.
    let store = store();
    let ids = put_items(&store, 1..=10, 5);
    let sorts = store.index_packed(&refs(&ids), "stream-1");
    assert_eq!(sorts.len(), 10);

    let first = mem_sweeper(store.clone(), SweepOptions::default());
    let report = tick_for(&first, &store, 5.5).await;
    let left = store.ids();
    assert_eq!(left.len(), 25, "{left:?} {report:?}");
    assert!(left.iter().all(|id| id.as_str() >= "s+0006"), "{left:?}");
    drop(first);

    let second = mem_sweeper(store.clone(), SweepOptions::default());
    let report = tick_for(&second, &store, 6.0).await;
    assert!(store.ids().is_empty(), "{:?} {report:?}", store.ids());
    assert_eq!(store.deleted.load(std::sync::atomic::Ordering::SeqCst), 50);
    let reads = assert_read_once(&store);
    assert_eq!(reads.len(), 10, "{reads:?}");
    // Batch mode read each key from the table once before its delete.
    assert_eq!(
        store.calls(Op::Get),
        10,
        "one confirming read per pack's keys"
    );
    // Nothing removed one by one: the packs stay for the index table's native TTL.
    let index = store.entries.lock().unwrap();
    assert_eq!(index.keys().filter(|(_, s)| s.starts_with('p')).count(), 10);
}

#[tokio::test(start_paused = true)]
async fn a_full_sweep_s_late_cursor_answer_does_not_move_the_ticks_back() {
    // As above, with a full sweep every 2 s beside the ticks whose read of the stored cursor is
    // served at once and answered 1.5 s later, while the ticks go on and store theirs. The
    // late answer must not move the sweeper's own cursor back: the second sweeper, starting
    // from the one stored, reads no pack the first judged.
    let late = Fault::AnswerLate(Duration::from_millis(1500));
    let store = store().fault(Op::ReadCursor, When::Always, late);
    put_packed(&store, 1..=10, 5, "stream-1");
    let first = mem_sweeper(store.clone(), SweepOptions::default());
    let report = ticks_for(&first, &store, 5.5, Duration::from_secs(2)).await;
    drop(first);
    let second = mem_sweeper(store.clone(), SweepOptions::default());
    let more = tick_for(&second, &store, 8.0).await;
    assert!(
        store.ids().is_empty(),
        "{:?} {report:?} {more:?}",
        store.ids()
    );
    assert_read_once(&store);
}

#[tokio::test(start_paused = true)]
async fn a_cursor_never_stored_leaves_no_pack_read_twice_by_the_ticks_and_full_sweeps_of_one_run() {
    // 50 items due over 10 s, packed ahead. Every write of the cursor is throttled, so the stored
    // one stays at the writers' mark while the ticks move their own on in memory. The full sweep
    // of 60 s reads the stored cursor again: the run goes on from its own, later one, and no
    // pack is read (its keys judged) again.
    let throttled = Fault::Fail(ErrorKind::Throttled);
    let store = store().fault(Op::WriteEntries, When::Always, throttled);
    put_packed(&store, 1..=10, 5, "stream-1");
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let report = tick_for(&sweeper, &store, 75.0).await;
    assert!(store.ids().is_empty(), "{:?} {report:?}", store.ids());
    assert!(
        store.calls(Op::WriteEntries) > 0,
        "the cursor was never written"
    );
    let reads = assert_read_once(&store);
    assert_eq!(reads.len(), 10, "{reads:?}");
}

#[tokio::test(start_paused = true)]
async fn a_key_not_settled_is_carried_into_a_new_pack_and_deleted_by_the_next_tick() {
    // One attempt per delete: the first `BatchWriteItem` (the two keys of the pack due at
    // `T0 + 1`) is throttled, and both keys fail. Their pack is not read again; the keys go into
    // a new pack due at the sweep instant, which the next tick reads and deletes them from.
    let throttled = Fault::Fail(ttl_sweeper::store::ErrorKind::Throttled);
    let store = store().fault(Op::BatchDelete, When::Call(1), throttled);
    put_packed(&store, 1..=3, 2, "stream-1");
    let options = support::opts(|o| o.retry = Retry::default().with_retries(0));
    let sweeper = mem_sweeper(store.clone(), options);
    let report = tick_for(&sweeper, &store, 4.5).await;
    assert!(store.ids().is_empty(), "{:?} {report:?}", store.ids());
    assert_eq!(report.items_failed, 2, "{report:?}");
    assert_eq!(report.items_deleted, 6, "{report:?}");
    let reads = assert_read_once(&store);
    let carried: Vec<&String> = reads.keys().filter(|s| s.contains("#carry-")).collect();
    assert_eq!(carried.len(), 1, "{reads:?}");
}

#[tokio::test(start_paused = true)]
async fn entries_of_one_item_each_and_packs_are_swept_side_by_side() {
    // A table moving to packs: items indexed before by an entry each, the others packed. A
    // sweep deletes both; the entries are removed as before, the packs left to native TTL.
    let store = store();
    let old = put_items(&store, -30..=-21, 1);
    for id in &old {
        store.index(id, "seq-old");
    }
    put_packed(&store, -20..=-11, 1, "stream-2");
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let report = sweeper.sweep_at(T0).await;
    assert!(store.ids().is_empty(), "{:?} {report:?}", store.ids());
    assert_eq!(report.items_deleted, 20, "{report:?}");
    assert_eq!(report.index_entries_removed, 10, "{report:?}");
    let index = store.entries.lock().unwrap();
    let left: Vec<&(String, String)> = index.keys().filter(|(w, _)| !w.starts_with('#')).collect();
    assert!(left.iter().all(|(_, s)| s.starts_with('p')), "{left:?}");
    assert_eq!(left.len(), 10);
}

#[tokio::test(start_paused = true)]
async fn a_sweep_reads_packs_from_the_mark_their_writer_stored_then_from_its_cursor() {
    // Packs due from 20 hours to a minute ago, never swept, and the mark their writer stored
    // before the first: the first sweep reads them all from the mark (MAX_CATCHUP, 24 h, allows
    // it) and stores its own cursor; the next reads none of them again.
    let store = store();
    let ids: Vec<String> = [-20 * 3600, -3600, -60]
        .into_iter()
        .map(|s| {
            let id = format!("old{s}");
            store.put(&id, (T0 + s) as f64);
            id
        })
        .collect();
    store.index_packed(&refs(&ids), "stream-1");
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let report = sweeper.sweep_at(T0).await;
    assert!(store.ids().is_empty(), "{:?} {report:?}", store.ids());
    assert!(!report.catchup_capped, "{report:?}");
    let cursor = || {
        let index = store.entries.lock().unwrap();
        let id = (packs::CURSOR.to_owned(), "sessions#all".to_owned());
        index.get(&id).and_then(packs::cursor_of)
    };
    assert_eq!(cursor(), Some(Timestamp::from_secs(T0)));
    let again = mem_sweeper(store.clone(), SweepOptions::default());
    again.sweep_at(T0 + 60).await;
    assert_eq!(cursor(), Some(Timestamp::from_secs(T0 + 60)));
    let reads = assert_read_once(&store);
    assert_eq!(reads.len(), 3, "{reads:?}");
}

#[tokio::test(start_paused = true)]
async fn without_a_cursor_no_pack_is_read_and_every_sweep_looks_for_the_writers_mark() {
    // An index table of entries of one item each (no writer has written a pack, so none stored
    // its mark): sweeps read the entries as before, and each of them, tick or full, looks for a
    // cursor, since a writer may store its mark at any moment. Once one has, the next run reads
    // its packs from the mark.
    let store = store();
    let ids = put_items(&store, 1..=3, 2);
    for id in &ids {
        store.index(id, "seq-1");
    }
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let report = tick_for(&sweeper, &store, 3.5).await;
    assert!(store.ids().is_empty(), "{:?} {report:?}", store.ids());
    assert_eq!(report.index_entries_removed, 6, "{report:?}");
    assert!(pack_reads(&store).is_empty());
    assert!(report.ticks >= 4, "{report:?}");
    // Each look reads the sweeper's cursor, then the writers' mark: each tick's, and the full
    // sweep's.
    let looks = store.calls(Op::ReadCursor) as u32;
    assert!(
        looks >= 2 * report.ticks,
        "{looks} looks in {} ticks",
        report.ticks
    );
    // A writer of packs comes: its mark is found, its packs read.
    put_packed(&store, 6..=8, 2, "stream-2");
    let report = tick_for(&sweeper, &store, 9.5).await;
    assert!(store.ids().is_empty(), "{:?} {report:?}", store.ids());
    assert!(!pack_reads(&store).is_empty(), "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn ticks_that_fell_behind_on_packs_leave_the_backlog_to_the_catch_up() {
    // 10 s windows, an item due each second for 100 s, packed. The second tick's confirming
    // read hangs for 70 s. The tick after it reads only the packs of the last 2 s, not the 70 s
    // behind it: those are read by the next full sweep's catch-up, in slices. Every item is
    // deleted, none before its ttl, each pack read at most twice.
    let layout = Layout {
        window_seconds: 10,
        ..Layout::default()
    };
    let hang = Fault::Delay(Duration::from_secs(70));
    let store = MemStore::new(layout).starting_at(T0).with_index_table();
    let store = store.fault(Op::Get, When::Call(2), hang);
    put_packed(&store, 1..=100, 1, "stream-1");
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let started = Instant::now();
    let report = tick_for(&sweeper, &store, 130.0).await;
    assert!(store.ids().is_empty(), "{:?} {report:?}", store.ids());
    assert!(store.destroyed_live.lock().unwrap().is_empty());
    // The sends in the 30 s after the stall carry the ticks' keys only: one or two a second.
    let sends = store.batch_calls.lock().unwrap().clone();
    let after_stall: Vec<usize> = sends
        .iter()
        .filter(|(at, _)| (71..100).contains(&at.duration_since(started).as_secs()))
        .map(|(_, ids)| ids.len())
        .collect();
    assert!(!after_stall.is_empty(), "{sends:?}");
    assert!(after_stall.iter().all(|n| *n <= 3), "{after_stall:?}");
    let reads = pack_reads(&store);
    assert!(reads.values().all(|n| *n <= 2), "{reads:?}");
}

#[tokio::test(start_paused = true)]
async fn a_catch_up_in_slices_reads_the_packs_due_on_the_edge_between_two_slices() {
    // 10 s windows of 64 shards: a catch-up slice is 4 windows (256 partitions). An item due each
    // second for 100 s, packed, never swept: one full sweep catches up over several slices. A
    // pack due exactly at a window's end belongs to the window ending there; the slice holding
    // that window reads it, as the next slice does not read that window.
    let layout = Layout {
        window_seconds: 10,
        window_shards: 64,
        ..Layout::default()
    };
    let store = MemStore::new(layout).starting_at(T0).with_index_table();
    put_packed(&store, 1..=100, 1, "stream-1");
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let report = sweeper.sweep_at(T0 + 101).await;
    assert!(store.ids().is_empty(), "left: {:?} {report:?}", store.ids());
    assert_eq!(report.items_deleted, 100, "{report:?}");
    assert_read_once(&store);
}

#[tokio::test(start_paused = true)]
async fn a_catch_up_reads_no_pack_due_past_its_own_instant_when_the_ticks_began_later() {
    // A full sweep's instant is taken before a run of ticks begins (its read of the cursor was
    // slow): the ticks began 2 s behind their own, later instant. The catch-up reads packs only
    // up to its instant, not up to where the ticks began: a pack due past it holds items not
    // yet expired at it. The next full sweep reads the rest.
    let store = store();
    put_packed(&store, 1..=100, 1, "stream-1");
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let tick_at = Timestamp::from_secs(T0 + 100);
    let windows = windows_since(tick_at - Duration::from_secs(1), tick_at, 60);
    sweeper
        .sweep_windows(tick_at, &windows, &Stop::never())
        .await;
    sweeper.sweep_at(T0 + 50).await;
    let left = store.ids().len();
    assert!((48..=52).contains(&left), "{left} left: {:?}", store.ids());
    // The next full sweep, and a tick after it (the ticks read on from where they stopped).
    sweeper.sweep_at(T0 + 101).await;
    let tick_at = Timestamp::from_secs(T0 + 102);
    let windows = windows_since(tick_at - Duration::from_secs(2), tick_at, 60);
    let report = sweeper
        .sweep_windows(tick_at, &windows, &Stop::never())
        .await;
    assert!(store.ids().is_empty(), "left: {:?} {report:?}", store.ids());
}

#[tokio::test(start_paused = true)]
async fn a_key_a_catch_up_beside_the_ticks_carries_is_due_where_the_ticks_still_read() {
    // A run of ticks begins 100 s after the writer's mark: the ticks start 2 s back and the full
    // sweep beside them catches up on the rest. One key of the catch-up is held 3 s by a delete
    // that then fails, and is carried, by when the ticks have read past the full sweep's
    // instant. Its pack must be due past what the ticks have read (DynamoDB's clock plus the
    // lead), not at that instant, which no tick reads again: a later tick deletes the item.
    let key = || When::Key("s+0040-0".into());
    let held = Fault::Delay(Duration::from_secs(3));
    let store = store().fault(Op::Delete, key(), held);
    let store = store.fault(Op::Delete, key(), Fault::Fail(ErrorKind::Other));
    put_packed(&store, 1..=100, 1, "stream-1");
    let options = support::opts(|o| o.delete_mode = DeleteMode::Conditional);
    let sweeper = mem_sweeper(store.clone(), options);
    tokio::time::sleep(Duration::from_secs(100)).await;
    let report = tick_for(&sweeper, &store, 10.0).await;
    assert!(report.items_failed >= 1, "{report:?}");
    let left = store.ids();
    assert!(left.is_empty(), "left: {left:?} {report:?}");
}

#[tokio::test(start_paused = true)]
async fn an_item_whose_ttl_moved_earlier_listed_by_two_packs_read_together_is_deleted() {
    // Item k was written with ttl T0 + 8, then its ttl moved to T0 + 5: a pack lists each. One
    // sweep reads both in one group: it sends k once, on the later ttl, which the table no
    // longer holds (kept). The entry of the earlier ttl, passed over, is carried, and the next
    // sweep deletes k. (Before a writer's first pack: an item due at T0 + 1, for its mark.)
    for mode in [DeleteMode::Batch, DeleteMode::Conditional] {
        let store = store();
        store.put("first", (T0 + 1) as f64);
        store.index_packed(&["first"], "stream-1");
        store.put("k", (T0 + 8) as f64);
        store.index_packed(&["k"], "stream-2");
        store.put("k", (T0 + 5) as f64);
        store.index_packed(&["k"], "stream-3");
        let options = support::opts(|o| o.delete_mode = mode);
        let sweeper = mem_sweeper(store.clone(), options);
        let started = Instant::now();
        tokio::time::sleep_until(started + Duration::from_secs(10)).await;
        let report = sweeper.sweep_at(T0 + 10).await;
        assert_eq!(store.ids(), ["k"], "{mode:?} {report:?}");
        tokio::time::sleep_until(started + Duration::from_secs(12)).await;
        let report = sweeper.sweep_at(T0 + 12).await;
        assert!(
            store.ids().is_empty(),
            "{mode:?} left: {:?} {report:?}",
            store.ids()
        );
        assert!(store.destroyed_live.lock().unwrap().is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn packs_are_written_once_due_after_their_write_and_lose_nothing_across_a_redelivery_an_hour_late_batch_a_slow_write_a_kill_and_a_handoff(
) {
    // The stream indexer writes four batches into packs: 20 live items (due 5 to 24 s ahead), the
    // same batch delivered again, an hour-late batch of items long expired, and items due 1 s
    // ahead whose write is acknowledged 450 ms late. Then a sweeper ticks for 8 s and dies, and
    // two more tick side by side (a handoff). Every item is deleted once, none before its ttl;
    // no pack is put twice, and each is there before it is due; the late write is written again,
    // due later; each pack is read at most three times.
    let slow = Fault::Delay(Duration::from_millis(450));
    let store = store().fault(Op::WriteEntries, When::Call(4), slow);
    let clock = store.clock_fn(f64::round);
    let mut written = Vec::new();
    // Items `<name>-<i>` with ttl `ttl + i * step`, and their records created at `created`.
    let mut batch = |ids: std::ops::Range<i64>, name: &str, (ttl, step): (i64, i64), created| {
        let records: Vec<EventRecord> = ids
            .map(|i| {
                let id = format!("{name}-{i:02}");
                store.put(&id, (ttl + i * step) as f64);
                written.push(id.clone());
                record(written.len() as u64, &id, ttl + i * step, created)
            })
            .collect();
        records
    };
    let live = batch(0..20, "live", (T0 + 5, 1), T0);
    let late = batch(0..5, "late", (T0 - 3000, 1), T0 - 3600);
    let soon = batch(0..3, "soon", (T0 + 1, 0), T0);
    for records in [&live, &live, &late] {
        index_ok(&store, &clock, records).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    index_ok(&store, &clock, &soon).await;
    assert_eq!(
        store.calls(Op::MarkPacks),
        4,
        "a mark asked for by each batch"
    );

    let first = mem_sweeper(store.clone(), SweepOptions::default());
    tick_for(&first, &store, 8.0).await;
    drop(first);
    let (a, b) = (
        mem_sweeper(store.clone(), SweepOptions::default()),
        mem_sweeper(store.clone(), SweepOptions::default()),
    );
    tokio::join!(tick_for(&a, &store, 30.0), tick_for(&b, &store, 5.0));

    assert!(store.ids().is_empty(), "left: {:?}", store.ids());
    assert!(store.destroyed_live.lock().unwrap().is_empty());
    let deleted = store.deleted.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(deleted, written.len(), "each item deleted once");
    let puts = store.pack_puts.lock().unwrap().clone();
    let mut keys: Vec<&String> = puts.iter().map(|(sort, _)| sort).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), puts.len(), "a pack put twice: {puts:?}");
    for (sort, at) in &puts {
        let due = packs::due_of(sort).unwrap().millis();
        assert!(due > *at, "{sort} put at {at}, not before its due");
    }
    // The late acknowledgement: its pack, due 1 s ahead, was put 950 ms in, and written again,
    // due twice the 450 ms round trip past the acknowledgement (`rewrite_lead`).
    let soon_due = (T0 + 1) * 1000;
    let due = |sort: &str| packs::due_of(sort).unwrap().millis();
    let slow: Vec<_> = puts.iter().filter(|(s, _)| due(s) == soon_due).collect();
    assert_eq!(slow.len(), 1, "{puts:?}");
    assert_eq!(slow[0].1, soon_due - 50, "{puts:?}");
    let again = puts
        .iter()
        .filter(|(s, at)| *at >= slow[0].1 && due(s) == soon_due - 50 + 900);
    assert_eq!(
        again.count(),
        1,
        "not written again, due 900 ms past the ack: {puts:?}"
    );
    let reads = pack_reads(&store);
    assert!(reads.values().all(|n| *n <= 3), "{reads:?}");
    assert_eq!(
        reads.len(),
        puts.len(),
        "every pack read: {reads:?} {puts:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn writes_of_packs_slower_than_the_lead_still_end_each_rewrite_due_further_ahead() {
    // Every write of packs takes 400 ms: longer than `PACK_LEAD` (250 ms) less `ACK_MARGIN`. An
    // item written already expired is packed due 250 ms on, put too late, and written again due
    // twice the round trip on, which that write meets. The next ticks delete the item.
    let slow = Fault::Delay(Duration::from_millis(400));
    let store = store().fault(Op::WriteEntries, When::Always, slow);
    let clock = store.clock_fn(f64::round);
    store.put("written-expired", (T0 - 10) as f64);
    let records = [record(1, "written-expired", T0 - 10, T0)];
    index_ok(&store, &clock, &records).await;
    let puts = store.pack_puts.lock().unwrap().clone();
    assert_eq!(puts.len(), 2, "written, then once again: {puts:?}");
    let due = |sort: &str| packs::due_of(sort).unwrap().millis();
    let (first, again) = (&puts[0], &puts[1]);
    assert!(due(&first.0) <= first.1, "the first is put late: {puts:?}");
    assert!(
        due(&again.0) > again.1 + 100,
        "again, put in time: {puts:?}"
    );
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let report = tick_for(&sweeper, &store, 3.0).await;
    assert!(store.ids().is_empty(), "left: {:?} {report:?}", store.ids());
}

/// An item written already expired, `written-expired`: the indexer packs it, due 250 ms on, and
/// hands it to the delete at once, whose `DeleteItem` hangs past its 1 s budget and fails, while
/// ticks run 4 s beside it. `then` may script more of the store once the indexer's pack is
/// written. The store, what `then` gave, and the ticks' report; the delete at once settled nothing
/// and a tick found the key held.
async fn held_by_a_failing_delete_at_once<R>(
    then: impl FnOnce(&MemStore) -> R,
) -> (MemStore, R, SweepReport) {
    let held = Fault::Delay(Duration::from_millis(1200));
    let store = store().fault(Op::Delete, When::Call(1), held);
    let store = store.fault(Op::Delete, When::Call(1), Fault::Fail(ErrorKind::Throttled));
    let schema = store.schema();
    let clock = store.clock_fn(f64::round);
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    tokio::time::sleep(Duration::from_millis(500)).await;
    store.put("written-expired", (T0 - 10) as f64);
    let records = [record(1, "written-expired", T0 - 10, T0)];
    let mut indexed = index_records(&store, &schema, &clock, &records).await;
    assert_eq!(indexed.expired.len(), 1, "{:?}", indexed.report);
    let given = then(&store);
    let at_once = async {
        delete_expired(&sweeper, &clock, &mut indexed, &Stop::never()).await;
        indexed.report.deleted_at_once
    };
    let (deleted_at_once, report) = tokio::join!(at_once, tick_for(&sweeper, &store, 4.0));
    assert_eq!(deleted_at_once, 0, "the delete at once did not settle it");
    assert!(
        report.items_skipped >= 1,
        "a tick found it held: {report:?}"
    );
    (store, given, report)
}

#[tokio::test(start_paused = true)]
async fn a_packed_key_held_by_a_delete_at_once_that_fails_is_carried_not_lost() {
    // The tick that reads the pack while the delete at once holds the key leaves the key to it,
    // and carries it: the next tick deletes the item. Without the carry, the pack is behind the
    // cursor and the item stays.
    let (store, (), report) = held_by_a_failing_delete_at_once(|_| ()).await;
    assert!(store.ids().is_empty(), "left: {:?} {report:?}", store.ids());
}

#[tokio::test(start_paused = true)]
async fn a_packed_key_held_elsewhere_whose_carry_fails_leaves_its_pack_to_be_read_again() {
    // As above, and the carry's pack write fails (not retryable): the tick that read the pack
    // must not pass it with the cursor, so a later tick reads it again, finds the key no longer
    // held (the delete at once failed) and deletes the item. Passing it would leave the item
    // behind the cursor, with no pack left to list it.
    let (store, writes, report) = held_by_a_failing_delete_at_once(|store| {
        // The indexer's pack is written: the next pack listing the key is the tick's carry.
        let writes = store.calls(Op::WriteEntries);
        store.clone().fault(
            Op::WriteEntries,
            When::Key("written-expired".into()),
            Fault::Fail(ErrorKind::Other),
        );
        writes
    })
    .await;
    let tried = store.faults_left(Op::WriteEntries) == 0;
    assert!(
        tried,
        "the carry failed ({writes} writes before it) {report:?}"
    );
    assert!(store.ids().is_empty(), "left: {:?} {report:?}", store.ids());
}

/// The store's virtual clock as the indexer's: `behind` earlier once the writers' mark has been
/// asked for, as when the mark's answer is the first to tell DynamoDB's clock, behind a host
/// clock running fast.
struct LearnsAtTheMark {
    store: MemStore,
    behind: Duration,
}

impl Clock for LearnsAtTheMark {
    fn now(&self) -> Timestamp {
        let host = self.store.clock_fn(f64::round)();
        if self.store.calls(Op::MarkPacks) > 0 {
            host - self.behind
        } else {
            host
        }
    }
}

#[tokio::test(start_paused = true)]
async fn no_pack_is_due_before_the_writers_mark_when_the_mark_s_answer_first_tells_dynamodb_s_clock(
) {
    // Five items written already expired are indexed while the host clock runs 5 s ahead of
    // DynamoDB's, which the first answer (the mark's) tells. The mark is stored as of the host
    // clock; their pack must be due after it, not 250 ms past DynamoDB's clock (before the
    // mark), where a sweeper starting from the mark would never read it.
    let store = store();
    let records: Vec<EventRecord> = (0..5)
        .map(|i| {
            let id = format!("old-{i}");
            store.put(&id, (T0 - 10) as f64);
            record(i + 1, &id, T0 - 10, T0)
        })
        .collect();
    let clock = LearnsAtTheMark {
        store: store.clone(),
        behind: Duration::from_secs(5),
    };
    index_ok(&store, &clock, &records).await;
    let puts = store.pack_puts.lock().unwrap().clone();
    assert!(!puts.is_empty());
    for (sort, _) in &puts {
        let due = packs::due_of(sort).unwrap().millis();
        assert!(
            due > T0 * 1000,
            "{sort} due before the writers' mark ({T0} s)"
        );
    }
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let report = tick_for(&sweeper, &store, 3.0).await;
    assert!(store.ids().is_empty(), "left: {:?} {report:?}", store.ids());
}
