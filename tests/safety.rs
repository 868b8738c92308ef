//! The engine's safety and completeness under queueing, stops and long backlogs, on an in-memory
//! table with virtual time (Tokio's paused clock): deterministic, and fast however long the
//! scenario.
//!
//! - batch mode never sends a key read longer ago than `BATCH_MAX_READ_AGE`: a key the
//!   application wrote again while its chunk waited survives;
//! - notify mode settles deletes whose answer was lost when the sweep has to stop, so every
//!   deleted item gets its event;
//! - a catch-up longer than one invocation moves the checkpoint as it goes, oldest first;
//! - ticks longer than the lookback (`run --every 5m` on 10 s windows) leave no ttl unread.

use crate::support;

use std::sync::atomic::{AtomicI64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use support::hook::Recorder;
use support::mem_store::{mem_sweeper, Change, Fault, MemStore, Op, When};
use support::{AssertFields, SweepAt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use ttl_sweeper::engine::ticks::TICK_OFFSET_MS;
use ttl_sweeper::engine::{
    run_ticks, Checkpoint, DeleteMode, Stop, SweepOptions, SweepReport, Sweeper,
};
use ttl_sweeper::expiry::{Layout, Timestamp, Window};
use ttl_sweeper::store::{ErrorKind, Retry};

/// The sweep instant of every scenario, epoch seconds (a minute boundary).
const T0: i64 = 1_800_000_000;

/// `T0` as an instant.
const AT_T0: Timestamp = Timestamp::from_secs(T0);

/// The in-memory table of the scenarios, its virtual clock at `T0` when it is made.
fn mem_with(layout: Layout) -> MemStore {
    MemStore::new(layout).starting_at(T0)
}

/// [`mem_with`] the default layout.
fn mem() -> MemStore {
    mem_with(Layout::default())
}

/// Writes `n` keys `k00`, `k01`... (`digits` wide), all expired 30 s before `T0`.
fn put_expired(store: &MemStore, n: usize, digits: usize) {
    (0..n).for_each(|i| store.put(&format!("k{i:0digits$}"), (T0 - 30) as f64));
}

/// A stop cancelled `after` from now (a SIGTERM), and the task that cancels it.
fn stop_after(after: Duration) -> (Stop, tokio::task::JoinHandle<()>) {
    let token = CancellationToken::new();
    let stop = Stop::never().with_cancel(token.clone());
    let cancel = tokio::spawn(async move {
        tokio::time::sleep(after).await;
        token.cancel();
    });
    (stop, cancel)
}

/// [`put_expired`] `n` keys (two digits), each with its entry in the expiry index table.
fn put_expired_indexed(store: &MemStore, n: usize) {
    put_expired(store, n, 2);
    (0..n).for_each(|i| store.index(&format!("k{i:02}"), &format!("{i}")));
}

/// Options sweeping one partition at a time, in pages of at most `page_limit` items.
fn one_at_a_time(page_limit: Option<i32>) -> SweepOptions {
    SweepOptions {
        max_concurrency: 1,
        page_limit,
        ..SweepOptions::default()
    }
}

/// Asserts that no key went out in a BatchWriteItem longer than the bound after the query that
/// listed it.
#[track_caller]
fn assert_sent_fresh(store: &MemStore, report: &SweepReport) {
    let max_age = *store.max_sent_age.lock().unwrap();
    let fresh = max_age <= ttl_sweeper::engine::BATCH_MAX_READ_AGE;
    assert!(
        fresh,
        "a key was sent {max_age:?} after its read; {report:?}"
    );
}

/// Sweeps at `T0` while the application writes the keys `ids` again, live for an hour, `after_s`
/// seconds into the sweep; asserts [`assert_sent_fresh`]. The report and the rewritten keys the
/// sweep destroyed.
async fn sweep_rewriting(
    sweeper: &Sweeper<MemStore>,
    after_s: u64,
    ids: Vec<String>,
) -> (SweepReport, Vec<String>) {
    let store = sweeper.store();
    let writer = store.put_at(Duration::from_secs(after_s), ids, (T0 + 3_600) as f64);
    let report = sweeper.sweep_at(T0).await;
    writer.await.unwrap();
    assert_sent_fresh(store, &report);
    let destroyed = store.destroyed_live.lock().unwrap().clone();
    (report, destroyed)
}

/// Sweep options with a checkpoint and `lookback` windows.
fn checkpointed(lookback: u32) -> SweepOptions {
    SweepOptions {
        lookback_windows: lookback,
        checkpoint: Some(Checkpoint {
            table: "checkpoints".into(),
            id: "sessions#expiry".into(),
            start_from: None,
            stream_id: "sessions#expiry#stream".into(),
        }),
        ..SweepOptions::default()
    }
}

#[tokio::test(start_paused = true)]
async fn batch_mode_keeps_keys_rewritten_while_their_chunk_waited() {
    // 3,000 expired keys in one window, every BatchWriteItem taking 0.25 s, one request at a
    // time: the last chunk of a 3,000-key page would wait 30 s.
    let started = Instant::now();
    let store = mem().delay(Op::BatchDelete, Duration::from_millis(250));
    put_expired(&store, 3_000, 4);
    let sweeper = mem_sweeper(store.clone(), one_at_a_time(None));
    // 4 s into the sweep the application deletes and writes again every tenth key, with a ttl
    // an hour ahead.
    let rewritten: Vec<String> = (0..3_000).step_by(10).map(|i| format!("k{i:04}")).collect();
    let (report, destroyed) = sweep_rewriting(&sweeper, 4, rewritten.clone()).await;
    // So a rewritten key can be destroyed only if it was read within the bound (plus the
    // request's own time) before the rewrite; the others all survive. (Before the check on
    // every send: 269 of the 300 rewritten keys destroyed.)
    let listed = store.listed_at.lock().unwrap().clone();
    let rewrite_at = started + Duration::from_secs(4);
    for id in &destroyed {
        let read = listed[id];
        let before = rewrite_at.duration_since(read);
        let bound = ttl_sweeper::engine::BATCH_MAX_READ_AGE + Duration::from_millis(250);
        assert!(
            before <= bound,
            "{id} destroyed though read {before:?} before its rewrite"
        );
    }
    let few = destroyed.len();
    assert!(few < 30, "{few} destroyed; {report:?}");
    for id in rewritten.iter().filter(|id| !destroyed.contains(id)) {
        assert!(store.has(id), "rewritten {id} was deleted");
    }
    // Everything else went.
    let rest = rewritten.len() - destroyed.len();
    assert_eq!(store.ids().len(), rest, "{report:?}");
    // The read-ahead budget (`READ_AHEAD_ROUNDS` rounds of chunks) reads no faster than the
    // deletes go: no key waited long enough to need a second read (before it, 3,000 keys were
    // read at once and most of them aged past the bound).
    report.assert_fields("items_reread=0 items_conditional=0 items_failed=0 items_left=0");
    let settled = report.items_deleted + report.items_skipped + report.items_gone;
    assert_eq!(settled, report.items_found, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn batch_mode_deletes_nothing_the_table_has_refreshed_while_the_index_lags() {
    // 6,400 expired keys; the application then refreshes every tenth (ttl an hour ahead), as a
    // session is refreshed at its expiry. The index lags the table by 30 s, so at the sweep it
    // still lists all 6,400 as expired with their old ttl. The table, not the index, decides.
    for delete_mode in [DeleteMode::Batch, DeleteMode::Conditional] {
        let store = mem();
        put_expired(&store, 6_400, 4);
        let store = store.index_lag(Duration::from_secs(30));
        let refreshed: Vec<String> = (0..6_400).step_by(10).map(|i| format!("k{i:04}")).collect();
        refreshed
            .iter()
            .for_each(|id| store.put(id, (T0 + 3_600) as f64));
        let sweeper = mem_sweeper(store.clone(), options_of(delete_mode));
        let report = sweeper.sweep_at(T0).await;
        let destroyed = store.destroyed_live.lock().unwrap().len();
        assert_eq!(
            destroyed, 0,
            "{delete_mode}: live items destroyed; {report:?}"
        );
        assert_eq!(store.ids(), refreshed, "{delete_mode}: {report:?}");
        report.assert_fields("items_deleted=5760 items_skipped=640 items_failed=0 items_left=0");
    }
}

#[tokio::test(start_paused = true)]
async fn a_key_listed_twice_goes_once_and_fails_no_chunk() {
    // Pages of 10 keys. After the first page the application rewrites k03 with a later ttl, still
    // expired and in the same window, and the second page lists it again (a GSI sorted by ttl
    // does): both listings wait in one chunk. DynamoDB refuses a BatchWriteItem or BatchGetItem
    // naming a key twice, the whole request.
    for delete_mode in [DeleteMode::Batch, DeleteMode::Conditional] {
        let store = mem()
            .page_size(10)
            .change(
                Op::Query,
                When::Call(1),
                "k03",
                Change::Put((T0 - 10) as f64),
            )
            .list_again(2, "k03");
        put_expired(&store, 20, 2);
        let sweeper = mem_sweeper(store, options_of(delete_mode));
        let report = sweeper.sweep_at(T0).await;
        assert!(
            sweeper.store().ids().is_empty(),
            "{delete_mode}: {report:?}"
        );
        report.assert_fields("items_found=21 items_deleted=20 items_failed=0 items_left=0");
    }
}

#[tokio::test(start_paused = true)]
async fn batch_mode_checks_every_key_again_after_a_slow_pass() {
    // Pages of 30 keys, each query taking 2.5 s, one request at a time, every read of the table
    // and every conditional delete 1 s: the first page's last 5 keys wait for the second page and
    // share its chunk. At 7 s the application writes k35 (listed by the second page) again, live.
    // A key may be destroyed only if the table was read for it within the bound before the
    // rewrite: the index's listing, however recent, never counts.
    let started = Instant::now();
    let store = mem()
        .delay(Op::Query, Duration::from_millis(2_500))
        .delay(Op::Delete, Duration::from_secs(1))
        .delay(Op::Get, Duration::from_secs(1));
    put_expired(&store, 40, 2);
    let sweeper = mem_sweeper(store.clone(), one_at_a_time(Some(30)));
    let rewrite_at = started + Duration::from_secs(7);
    let (report, destroyed) = sweep_rewriting(&sweeper, 7, vec!["k35".into()]).await;
    let read = store.table_read_at.lock().unwrap().clone();
    for id in &destroyed {
        let before = read.get(id).map(|at| rewrite_at.duration_since(*at));
        assert!(
            before.is_some_and(|b| b <= ttl_sweeper::engine::BATCH_MAX_READ_AGE),
            "{id} destroyed, its table read {before:?} before the rewrite; {report:?}"
        );
    }
    let left = if destroyed.is_empty() {
        vec!["k35".to_string()]
    } else {
        vec![]
    };
    assert_eq!(store.ids(), left, "{report:?}");
    report.assert_fields("items_failed=0 items_left=0");
}

#[tokio::test(start_paused = true)]
async fn a_key_read_again_counts_as_read_when_the_read_was_asked_not_when_it_answered() {
    // Pages of 30 keys, each query taking 2.5 s: the first page's last 5 keys wait for the second
    // page, stale when their chunk goes out, and are read again by a BatchGetItem that DynamoDB
    // answers 2.5 s after reading them. Dated by the answer they would look fresh and go out in a
    // BatchWriteItem 2.5 s after their read; dated by the request they are stale again and go
    // out conditionally.
    let store = mem()
        .delay(Op::Query, Duration::from_millis(2_500))
        .delay(Op::Get, Duration::from_millis(2_500));
    put_expired(&store, 40, 2);
    let sweeper = mem_sweeper(store.clone(), one_at_a_time(Some(30)));
    let report = sweeper.sweep_at(T0).await;
    assert_sent_fresh(&store, &report);
    assert!(report.items_reread > 0, "{report:?}");
    assert!(store.ids().is_empty(), "{report:?}");
    report.assert_fields("items_failed=0 items_left=0");
}

#[tokio::test(start_paused = true)]
async fn an_unprocessed_key_named_unlike_any_key_sent_is_sent_again_not_counted_deleted() {
    // The first BatchWriteItem leaves one key unprocessed and returns it in a form that matches
    // no key sent: which key was left is unknown, so none may be counted as deleted.
    let store = mem().fault(Op::BatchDelete, When::Call(1), Fault::RenameUnprocessed);
    put_expired(&store, 25, 2);
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let report = sweeper.sweep_at(T0).await;
    let left = store.ids();
    assert!(left.is_empty(), "left: {left:?}; {report:?}");
    report.assert_fields("items_deleted=25 items_failed=0 items_left=0");
    assert_eq!(store.batch_calls.lock().unwrap().len(), 2, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn a_sweep_holds_no_more_keys_than_its_read_ahead_whatever_the_pages() {
    // 16 windows of 2,000 expired keys each, every request taking 50 ms: whatever DynamoDB
    // would put in a page, the keys read and not yet deleted stay within the read-ahead budget
    // across all partitions, in both delete modes.
    for delete_mode in [DeleteMode::Batch, DeleteMode::Conditional] {
        let ops = [Op::BatchDelete, Op::Query, Op::Delete];
        let store = ops
            .into_iter()
            .fold(mem(), |m, op| m.delay(op, Duration::from_millis(50)));
        for w in 0..16 {
            (0..2_000)
                .for_each(|i| store.put(&format!("k{w:02}{i:04}"), (T0 - 60 * w - 30) as f64));
        }
        let options = SweepOptions {
            max_concurrency: 4,
            lookback_windows: 16,
            ..options_of(delete_mode)
        };
        let sweeper = mem_sweeper(store.clone(), options);
        let report = sweeper.sweep_at(T0).await;
        assert!(store.ids().is_empty(), "{delete_mode}: {report:?}");
        report.assert_fields("items_deleted=32000");
        let budget = ttl_sweeper::engine::READ_AHEAD_ROUNDS * 25 * (4 + 1);
        let held = store.max_outstanding.load(SeqCst);
        let within = held <= budget;
        assert!(
            within,
            "{delete_mode}: {held} keys held at once, past the budget of {budget}"
        );
        report.assert_fields("items_reread=0 items_conditional=0");
    }
}

/// `store` holding one chunk of 25 expired keys (`k00` to `k24`), swept in notify mode with
/// `hook` publishing the events.
fn one_notify_chunk(
    store: MemStore,
    hook: Recorder,
) -> (MemStore, Arc<Recorder>, Sweeper<MemStore>) {
    put_expired(&store, 25, 2);
    let hook = Arc::new(hook);
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default()).with_events(hook.clone());
    (store, hook, sweeper)
}

/// The ids of [`one_notify_chunk`]'s keys.
fn chunk_ids() -> Vec<String> {
    (0..25).map(|i| format!("k{i:02}")).collect()
}

/// A sweep in notify mode whose first BatchWriteItem plays out `lost` (deletes its 25 keys then
/// times out, or times out and lands later), and the stop comes before the retry.
async fn stop_after_a_lost_answer(
    lost: Fault,
    reads_fail: bool,
) -> (MemStore, Arc<Recorder>, SweepReport) {
    let token = CancellationToken::new();
    let store = mem().fault(Op::BatchDelete, When::Call(1), lost);
    let mut store = store.cancel_on_lost(token.clone());
    if reads_fail {
        // The first read confirms the chunk before its send; the second, the settling one, fails.
        store = store.fault(Op::Get, When::Call(2), Fault::Fail(ErrorKind::Transient));
    }
    let (store, hook, sweeper) = one_notify_chunk(store, Recorder::default());
    let stop = Stop::never().with_cancel(token);
    let report = sweeper.sweep(AT_T0, &stop).await;
    (store, hook, report)
}

/// The chunk a lost attempt deleted is settled: every item gone, each with its event, none left.
#[track_caller]
fn assert_chunk_settled(store: &MemStore, hook: &Recorder, report: &SweepReport) {
    assert!(store.ids().is_empty(), "the lost attempt deleted them");
    let mut events = hook.expired.lock().unwrap().clone();
    events.sort();
    assert_eq!(
        events,
        chunk_ids(),
        "every deleted item gets its event; {report:?}"
    );
    report.assert_fields("items_left=0 items_gone=25");
}

#[tokio::test(start_paused = true)]
async fn notify_mode_settles_deletes_whose_answer_was_lost_at_the_stop() {
    let (store, hook, report) = stop_after_a_lost_answer(Fault::LoseAnswer, false).await;
    assert_chunk_settled(&store, &hook, &report);
}

#[tokio::test(start_paused = true)]
async fn notify_mode_reports_by_key_a_delete_that_may_still_land_after_the_stop() {
    // The attempt times out and the stop comes; the check finds the keys still there, and then
    // the request that timed out is applied. No event can follow, so each key is reported.
    let late = Fault::LandLate(Duration::from_secs(3));
    let (store, hook, report) = stop_after_a_lost_answer(late, false).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(store.ids().is_empty(), "the late request deleted them all");
    assert!(hook.expired.lock().unwrap().is_empty());
    report.assert_fields("items_failed=25 items_left=0");
    let failed = &report.failed_keys[0];
    assert!(failed.reason.contains("may still delete it"), "{failed:?}");
}

#[tokio::test(start_paused = true)]
async fn notify_mode_reports_by_key_what_it_cannot_settle_at_the_stop() {
    let (_store, hook, report) = stop_after_a_lost_answer(Fault::LoseAnswer, true).await;
    assert!(hook.expired.lock().unwrap().is_empty());
    // Not silently "left": each key is reported, with why.
    assert_eq!(report.items_failed, 25, "{report:?}");
    assert_eq!(report.failed_keys.len(), 25);
    let failed = &report.failed_keys[0];
    assert!(failed.reason.contains("may have deleted it"), "{failed:?}");
    assert!(!report.is_success());
}

#[tokio::test(start_paused = true)]
async fn notify_mode_settles_batch_deletes_whose_answer_was_lost_when_the_stop_comes_during_their_conditional_retry(
) {
    // Batch mode: the chunk's BatchWriteItem deletes its 25 keys and its answer is lost; the keys
    // are stale by the retry, their second read fails, so they go conditional, one DeleteItem a
    // second; the stop comes after the first. The 24 keys not yet retried were deleted by the
    // lost attempt: each is owed its event (or reported), never left in silence.
    let store = mem()
        .delay(Op::BatchDelete, Duration::from_secs(1))
        .fault(Op::BatchDelete, When::Call(1), Fault::LoseAnswer)
        .fault(Op::Get, When::Call(2), Fault::Fail(ErrorKind::Transient))
        .delay(Op::Delete, Duration::from_secs(1));
    put_expired(&store, 25, 2);
    let hook = Arc::new(Recorder::default());
    let options = support::opts(|o| o.batch_max_read_age = Duration::from_millis(500));
    let sweeper = mem_sweeper(store.clone(), options).with_events(hook.clone());
    let (stop, cancel) = stop_after(Duration::from_millis(2_500));
    let report = sweeper.sweep(AT_T0, &stop).await;
    cancel.await.unwrap();
    assert!(store.calls(Op::Delete) >= 1, "went conditional: {report:?}");
    assert_chunk_settled(&store, &hook, &report);
}

#[tokio::test(start_paused = true)]
async fn notify_mode_settles_a_key_whose_retries_ran_out_after_an_attempt_that_may_have_deleted_it()
{
    // One expired item, conditional deletes, four retries: a 5xx, then an attempt applied whose
    // answer was lost, then throttling twice and a 5xx. The retries run out with the item gone:
    // its delete happened, so its event is owed, not a failed key nobody can place.
    let store = [
        Fault::Fail(ErrorKind::Transient),
        Fault::LoseAnswer,
        Fault::Fail(ErrorKind::Throttled),
        Fault::Fail(ErrorKind::Throttled),
        Fault::Fail(ErrorKind::Transient),
    ]
    .into_iter()
    .enumerate()
    .fold(mem(), |m, (i, f)| m.fault(Op::Delete, When::Call(i + 1), f));
    store.put("k0", (T0 - 30) as f64);
    let hook = Arc::new(Recorder::default());
    let options = SweepOptions {
        delete_mode: DeleteMode::Conditional,
        retry: Retry::default().with_retries(4),
        ..SweepOptions::default()
    };
    let sweeper = mem_sweeper(store, options).with_events(hook.clone());
    let report = sweeper.sweep_at(T0).await;
    assert!(sweeper.store().ids().is_empty(), "{report:?}");
    assert_eq!(sweeper.store().calls(Op::Delete), 5, "{report:?}");
    assert_eq!(
        hook.expired.lock().unwrap().clone(),
        vec!["k0".to_string()],
        "the deleted item gets its event; {report:?}"
    );
    report.assert_fields("items_gone=1 items_failed=0 events_published=1");
}

#[tokio::test(start_paused = true)]
async fn whole_items_held_for_events_stay_within_the_budget() {
    use ttl_sweeper::engine::hook::EVENT_ITEMS_BUDGET_KIB;
    // 200 expired items of 400 KiB in one window, conditional deletes that return them for
    // notify events, 64 requests at once, each delete 10 ms: every chunk would hold its 25 items
    // until its events go out, 80,000 KiB at once.
    let blob = "x".repeat(400 * 1024 - 64);
    let store = mem().delay(Op::Delete, Duration::from_millis(10));
    for i in 0..200 {
        let mut item = support::unwindowed(&format!("k{i:03}"), T0 - 30);
        item.insert("blob".into(), support::AV::S(blob.clone()));
        store.put_item(item);
    }
    let hook = Arc::new(Recorder {
        items_published: Some(store.items_published.clone()),
        ..Recorder::default()
    });
    let options = SweepOptions {
        delete_mode: DeleteMode::Conditional,
        max_concurrency: 64,
        ..SweepOptions::default()
    };
    let sweeper = mem_sweeper(store.clone(), options).with_events(hook.clone());
    let report = sweeper.sweep_at(T0).await;
    report.assert_fields("items_deleted=200 events_published=200 items_failed=0");
    assert_eq!(
        store.items_published.load(SeqCst),
        200,
        "each event with its item"
    );
    let held = store.max_items_held.load(SeqCst);
    let held_kib = held * 400;
    assert!(
        held_kib <= EVENT_ITEMS_BUDGET_KIB as usize,
        "{held} items of 400 KiB held at once ({held_kib} KiB; the budget is {EVENT_ITEMS_BUDGET_KIB} KiB)"
    );
}

#[tokio::test(start_paused = true)]
async fn notify_mode_publishes_each_attempts_deletes_before_waiting_to_retry_the_rest() {
    // One chunk of 25 keys; four BatchWriteItem calls in a row delete one key each and leave the
    // rest unprocessed, so the chunk takes four backoffs. A crash during those waits must not
    // take the events of the keys already deleted with it: they go out before each wait.
    let partial = Fault::AllButFirstUnprocessed;
    let store = mem().fault(Op::BatchDelete, When::First(4), partial);
    let (store, hook, sweeper) = one_notify_chunk(store, Recorder::default());
    let report = sweeper.sweep_at(T0).await;
    report.assert_fields("items_deleted=25 events_published=25");
    let calls = store.batch_calls.lock().unwrap().clone();
    assert_eq!(
        calls.len(),
        5,
        "four partial answers, then the rest: {calls:?}"
    );
    let published = hook.published_at.lock().unwrap().clone();
    for (i, pair) in calls.windows(2).enumerate() {
        let ((_, deleted), (next_sent, _)) = (&pair[0], &pair[1]);
        for id in deleted {
            let at = published.iter().find(|(p, _)| p == id).map(|(_, at)| *at);
            assert!(
                at.is_some_and(|at| at <= *next_sent),
                "{id}, deleted by call {i}, was published at {at:?}, after call {} was sent at \
                 {next_sent:?}",
                i + 1
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_lambda_sweep_dropped_at_its_deadline_reports_the_events_it_owed() {
    use ttl_sweeper::lambda::handler::{handle, HandlerError};
    // Notify mode with a sink that never answers and ignores the stop: the handler's last
    // resort drops the sweep before the deadline. The 25 items it deleted are reported by event
    // id, not lost with the dropped sweep.
    let hanging = Recorder {
        hang: true,
        ..Recorder::default()
    };
    let (store, _hook, sweeper) = one_notify_chunk(mem(), hanging);
    let settings = support::handler_settings(None, 60, 10);
    let clock = || AT_T0;
    let handled = tokio::time::timeout(
        Duration::from_secs(10),
        handle(
            &sweeper,
            &serde_json::json!({}),
            &clock,
            Some(Duration::from_secs(10)),
            &settings,
        ),
    )
    .await
    .expect("the invocation ends before its deadline");
    assert!(store.ids().is_empty(), "the sweep deleted all 25");
    let Err(HandlerError::SweepFailed { report, .. }) = handled else {
        panic!("a dropped sweep is a failed invocation: {handled:?}");
    };
    let mut reported: Vec<String> = report
        .failed_event_ids
        .iter()
        .map(|e| e.id.clone())
        .collect();
    reported.sort();
    assert_eq!(reported, chunk_ids(), "{report:?}");
    assert_eq!(report.events_failed, 25, "{report:?}");
    assert!(sweeper.unpublished_events().is_empty(), "taken once");
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_does_not_wait_for_a_query_that_is_slow_to_answer() {
    // A query that takes a minute (DynamoDB slow, or its retries); SIGTERM a second in. The sweep
    // ends at once: the read is given up, nothing it would have found is deleted.
    let store = mem().delay(Op::Query, Duration::from_secs(60));
    store.put("k0", (T0 - 30) as f64);
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let (stop, _sigterm) = stop_after(Duration::from_secs(1));
    let started = Instant::now();
    let report = sweeper.sweep(AT_T0, &stop).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the sweep held the shutdown for {:?}",
        started.elapsed()
    );
    assert!(report.stopped_early, "{report:?}");
    assert!(!report.is_complete(), "{report:?}");
    assert!(store.has("k0"), "nothing was read, nothing deleted");
}

#[tokio::test(start_paused = true)]
async fn a_long_catch_up_moves_the_checkpoint_oldest_first_within_one_invocation() {
    // Two hours behind on 16 shards (1,920 partitions); each invocation is stopped after 600
    // queries.
    let layout = Layout {
        window_shards: 16,
        ..Layout::default()
    };
    let before = T0 - 2 * 3_600;
    let mut checkpoints = vec![before];
    let store = mem_with(layout.clone());
    *store.checkpoint.lock().unwrap() = Some(Timestamp::from_secs(before));
    // one expired item in every minute of the backlog
    (0..120).for_each(|m| store.put(&format!("m{m:03}"), (before + 60 * m + 30) as f64));
    for run in 0..5 {
        let token = CancellationToken::new();
        let so_far = store.calls(Op::Query);
        store.stop_after_queries(so_far + 600, token.clone());
        let sweeper = mem_sweeper(store.clone(), checkpointed(1));
        let stop = Stop::never().with_cancel(token);
        let report = sweeper.sweep(AT_T0, &stop).await;
        let after = store.checkpoint.lock().unwrap().unwrap().secs();
        assert!(
            after > *checkpoints.last().unwrap() || after >= T0 - 120,
            "run {run}: the checkpoint did not move from {}: {report:?}",
            checkpoints.last().unwrap()
        );
        // whatever is older than the checkpoint was deleted
        for id in store.ids() {
            let m: i64 = id[1..].parse().unwrap();
            let swept = before + 60 * m + 30 > after;
            assert!(swept, "run {run}: {id} left behind {after}");
        }
        checkpoints.push(after);
        if after >= T0 - 120 {
            break;
        }
    }
    assert!(
        *checkpoints.last().unwrap() >= T0 - 120,
        "caught up in a few invocations: {checkpoints:?}"
    );
}

#[test]
fn a_thirty_day_catch_up_of_one_second_windows_is_planned_without_listing_it() {
    let plan = ttl_sweeper::engine::checkpoint::plan(
        AT_T0,
        1,
        15,
        Some(Timestamp::from_secs(T0 - 30 * 86_400)),
        30 * 86_400,
    );
    assert_eq!(plan.recent.len(), 16);
    assert_eq!(plan.catchup.len(), 30 * 86_400 - 16);
    let catchup = plan.catchup;
    let first: Vec<_> = catchup.take(3).collect();
    assert_eq!(first[0].start, T0 - 30 * 86_400, "oldest first");
    assert!(first.windows(2).all(|w| w[0].end == w[1].start));
}

#[tokio::test(start_paused = true)]
async fn ticks_longer_than_the_lookback_read_every_window_since_the_last_tick() {
    // `run --every 5m` on 10 s windows, lookback 7 (70 s), full sweeps every minute, no
    // checkpoint: 12 minutes of items, one every 5 s.
    let layout = Layout {
        window_seconds: 10,
        ..Layout::default()
    };
    let store = mem_with(layout);
    for s in (5..12 * 60).step_by(5) {
        store.put(&format!("s{s:04}"), (T0 + s) as f64);
    }
    let options = support::opts(|o| o.lookback_windows = 7);
    let sweeper = mem_sweeper(store.clone(), options);
    let clock = store.clock_fn(f64::trunc);
    let (every, full_every) = (Duration::from_secs(300), Duration::from_secs(60));
    let ticks = support::ticks(every, full_every, Duration::from_secs(11 * 60));
    let mut last_tick = AT_T0;
    let report = run_ticks(&sweeper, AT_T0, &clock, &ticks, &Stop::never(), |r| {
        let at: chrono::DateTime<chrono::Utc> = r.sweep_at.parse().unwrap();
        last_tick = last_tick.max(Timestamp::from_datetime(at));
    })
    .await;
    let stranded: Vec<String> = store
        .ids()
        .into_iter()
        .filter(|id| ((T0 + id[1..].parse::<i64>().unwrap()) as f64) < last_tick.as_secs_f64())
        .collect();
    assert!(
        stranded.is_empty(),
        "{} items expired before the last sweep at {last_tick} were never deleted, e.g. {:?}; {report:?}",
        stranded.len(),
        &stranded[..stranded.len().min(5)]
    );
    assert!(last_tick.secs() >= T0 + 600, "{last_tick}");
}

#[tokio::test(start_paused = true)]
async fn a_catch_up_stopped_before_it_began_leaves_the_checkpoint_where_it_was() {
    // An hour behind; the stop comes once the two recent windows were read.
    let store = mem();
    let before = T0 - 3_600;
    *store.checkpoint.lock().unwrap() = Some(Timestamp::from_secs(before));
    store.put("old", (before + 90) as f64);
    let token = CancellationToken::new();
    store.stop_after_queries(2, token.clone());
    let sweeper = mem_sweeper(store.clone(), checkpointed(1));
    let stop = Stop::never().with_cancel(token);
    let report = sweeper.sweep(AT_T0, &stop).await;
    assert!(store.has("old"));
    assert_eq!(
        *store.checkpoint.lock().unwrap(),
        Some(Timestamp::from_secs(before)),
        "the recent windows are complete, but the hour before them was not swept: {report:?}"
    );
    let stopped = report.windows_left >= 58 && report.stopped_early;
    assert!(stopped, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn batch_ticks_confirm_their_keys_ahead_so_the_delete_follows_the_query() {
    // 1 s ticks for 10 s, 20 items due each second, every request 10 ms. Each key is confirmed
    // by the table before its first send; read before the tick, the confirmation adds no round
    // trip after it: a tick's BatchWriteItem goes one query (10 ms) after the tick, not a query
    // and a read (20 ms).
    let ops = [Op::Query, Op::Get, Op::BatchDelete];
    let store = ops
        .into_iter()
        .fold(mem(), |m, op| m.delay(op, Duration::from_millis(10)));
    for s in 1..=10 {
        (0..20).for_each(|i| store.put(&format!("s{s:02}-{i:02}"), (T0 + s) as f64));
    }
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let clock = store.clock_fn(f64::round);
    let started = Instant::now();
    let ticks = support::ticks_for(Duration::from_millis(10_500));
    let report = run_ticks(&sweeper, AT_T0, &clock, &ticks, &Stop::never(), |_| {}).await;
    assert!(store.ids().is_empty(), "{report:?}");
    assert_sent_fresh(&store, &report);
    // Each send, measured from the tick that made it (at s + TICK_OFFSET_MS).
    let sends = store.batch_calls.lock().unwrap().clone();
    assert!(!sends.is_empty());
    for (at, ids) in &sends {
        let after_tick = at.duration_since(started).as_millis() % 1000;
        assert!(
            after_tick <= TICK_OFFSET_MS as u128 + 10 + 5,
            "{ids:?} sent {after_tick} ms into its second; {report:?}"
        );
    }
    report.assert_fields("items_deleted=200 items_failed=0");
}

#[tokio::test(start_paused = true)]
async fn a_key_confirmed_before_a_pause_is_read_again_after_it() {
    // A key is confirmed ahead of a tick; then the host is paused for a minute (a frozen Lambda,
    // a suspended host), which the monotonic clock does not count: only the wall clock moves on.
    // Meanwhile the application extends the item's ttl, and the index, 30 s behind the table,
    // still lists the old one. The confirmation is a minute old by the wall clock: the tick
    // reads the table again and keeps the item. Both with the sweeper's wall clock and, without
    // one, by the sweep instants alone.
    for wall_clock in [true, false] {
        let store = mem();
        store.put("k0", (T0 - 30) as f64);
        let store = store.index_lag(Duration::from_secs(30));
        let paused_ms = Arc::new(AtomicI64::new(0));
        let wall = {
            let (store, paused_ms) = (store.clone(), paused_ms.clone());
            move || {
                let ms = (store.clock() * 1000.0).round() as i64 + paused_ms.load(SeqCst);
                Timestamp::from_millis(ms)
            }
        };
        let mut sweeper = mem_sweeper(store.clone(), SweepOptions::default());
        if wall_clock {
            sweeper = sweeper.with_wall_clock(Arc::new(wall.clone()));
        }
        let (windows, never) = ([Window::containing((T0 - 30) as f64, 60)], Stop::never());
        sweeper.confirm_ahead(wall(), &windows, &never).await;
        assert_eq!(store.calls(Op::Get), 1, "{wall_clock}: confirmed ahead");

        paused_ms.store(60_000, SeqCst);
        store.put("k0", (T0 + 3_600) as f64);
        let report = sweeper.sweep_windows(wall(), &windows, &never).await;
        assert!(
            store.has("k0"),
            "wall clock {wall_clock}: the item whose ttl was extended during the pause was \
             deleted on a confirmation made before it; {report:?}"
        );
        assert_eq!(store.calls(Op::Get), 2, "{wall_clock}: {report:?}");
        report.assert_fields("items_deleted=0 items_skipped=1 items_confirmed=1");
    }
}

/// With an expiry index table, an entry goes only once its item is judged against the table:
/// the entries of items whose deletes failed, or that the sweep left when it had to stop, stay,
/// and the next sweep deletes those items and then removes their entries.
#[tokio::test(start_paused = true)]
async fn an_expiry_index_entry_stays_until_its_item_is_judged() {
    for delete_mode in [DeleteMode::Batch, DeleteMode::Conditional] {
        let delete = match delete_mode {
            DeleteMode::Batch => Op::BatchDelete,
            DeleteMode::Conditional => Op::Delete,
        };
        let store = mem().with_index_table().fault(
            delete,
            When::First(200),
            Fault::Fail(ErrorKind::Throttled),
        );
        put_expired_indexed(&store, 30);
        assert_eq!(store.entry_count(), 30);
        let options = SweepOptions {
            retry: Retry::default().with_retries(1),
            ..options_of(delete_mode)
        };
        let sweeper = mem_sweeper(store.clone(), options);
        let failed = sweeper.sweep_at(T0).await;
        failed.assert_fields("items_deleted=0 index_entries_removed=0");
        assert!(failed.items_failed > 0, "{delete_mode}: {failed:?}");
        assert_eq!(store.entry_count(), 30, "{delete_mode}");

        // A shutdown while the keys wait to be sent (batch mode's confirming read, or a send
        // slot, taking 2 s) leaves them, and every entry stays.
        let slow = mem()
            .with_index_table()
            .delay(Op::Get, Duration::from_secs(2))
            .delay(Op::Delete, Duration::from_secs(2));
        put_expired_indexed(&slow, 30);
        let (stop, cancel) = stop_after(Duration::from_secs(1));
        let options = SweepOptions {
            max_concurrency: 1,
            ..options_of(delete_mode)
        };
        let stopped = mem_sweeper(slow.clone(), options).sweep(AT_T0, &stop).await;
        cancel.await.unwrap();
        let deleted = 30 - slow.ids().len();
        assert!(stopped.items_left > 0, "{delete_mode}: {stopped:?}");
        assert_eq!(
            slow.entry_count(),
            30 - stopped.index_entries_removed as usize,
            "{delete_mode}: {stopped:?}"
        );
        assert!(
            slow.entry_count() >= 30 - deleted,
            "{delete_mode}: an item not deleted lost its entry: {stopped:?}"
        );

        let store = mem().with_index_table();
        put_expired_indexed(&store, 30);
        store.put("k05", (T0 + 600) as f64); // extended: its entry deletes nothing
        let sweeper = mem_sweeper(store.clone(), options_of(delete_mode));
        let done = sweeper.sweep_at(T0).await;
        done.assert_fields("items_deleted=29 index_entries_removed=30");
        assert_eq!(store.entry_count(), 0, "{delete_mode}");
        assert_eq!(store.ids(), ["k05"], "{delete_mode}");
    }
}

fn options_of(delete_mode: DeleteMode) -> SweepOptions {
    support::opts(|o| o.delete_mode = delete_mode)
}

/// With an expiry index table, an item whose ttl was moved earlier (both ttls past) is listed
/// by two entries and sent once, judged on the later ttl: the table keeps the item (its ttl is the
/// earlier one), and the entry of the earlier ttl must stay, so that the next sweep deletes it.
#[tokio::test(start_paused = true)]
async fn an_item_listed_by_two_entries_is_deleted_on_the_ttl_the_table_holds() {
    for delete_mode in [DeleteMode::Batch, DeleteMode::Conditional] {
        let store = mem().with_index_table();
        store.put("k", (T0 - 20) as f64);
        store.index("k", "1");
        store.put("k", (T0 - 40) as f64); // the application moved its ttl earlier
        store.index("k", "2");
        assert_eq!(store.entry_count(), 2);
        let sweeper = mem_sweeper(store.clone(), options_of(delete_mode));
        let first = sweeper.sweep_at(T0).await;
        assert_eq!(first.items_found, 2, "{delete_mode}: {first:?}");
        assert_eq!(store.entry_count(), 1, "{delete_mode}: {first:?}");
        let second = sweeper.sweep_at(T0 + 1).await;
        assert!(
            !store.has("k"),
            "{delete_mode}: left behind: {first:?} {second:?}"
        );
        assert_eq!(store.entry_count(), 0, "{delete_mode}: {second:?}");
    }
}

/// Archive mode with an expiry index table: an item the application deleted before its ttl
/// leaves its entry behind (the indexer writes nothing on a `REMOVE`). At the old ttl the sweep
/// lists it, and must announce nothing: each key is read from the table before its event is
/// published, so only the items still there, expired on the ttl listed, get an `Item Expired`,
/// and every entry is settled.
#[tokio::test(start_paused = true)]
async fn archive_mode_announces_no_expiry_for_an_item_the_application_deleted_before_its_ttl() {
    let store = mem().with_index_table();
    put_expired_indexed(&store, 40);
    // The application deletes every other item before its ttl; another moves its ttl later.
    let deleted: Vec<String> = (0..40).step_by(2).map(|i| format!("k{i:02}")).collect();
    deleted.iter().for_each(|id| store.remove_item(id));
    store.put("k01", (T0 + 600) as f64);
    let hook = Arc::new(Recorder {
        archive: true,
        ..Recorder::default()
    });
    let options = options_of(DeleteMode::Conditional);
    let sweeper = mem_sweeper(store.clone(), options).with_events(hook.clone());
    let report = sweeper.sweep_at(T0).await;
    let announced = hook.expired.lock().unwrap().clone();
    let phantom: Vec<&String> = announced.iter().filter(|id| deleted.contains(id)).collect();
    assert!(
        phantom.is_empty(),
        "Item Expired for items the application deleted: {phantom:?}; {report:?}"
    );
    assert!(!announced.contains(&"k01".to_owned()), "k01 was extended");
    assert_eq!(announced.len(), 19, "{announced:?}");
    assert!(hook.cancelled.lock().unwrap().is_empty());
    report.assert_fields("items_deleted=19 items_gone=20 items_skipped=1 events_published=19");
    assert_eq!(store.entry_count(), 0, "every entry settled: {report:?}");
    assert_eq!(store.ids(), ["k01"]);
}

/// Batch mode with an expiry index table: an item listed by two entries with the same ttl (a
/// back-filled entry and the stream's), side by side in sort order, whose pair straddles two
/// groups, is sent by one group only: one delete counted, one expiry event. The entry the other
/// group left stays, and the next sweep settles it (the item gone).
#[tokio::test(start_paused = true)]
async fn an_item_listed_twice_with_one_ttl_across_two_groups_is_deleted_and_announced_once() {
    let store = mem()
        .with_index_table()
        .delay(Op::Get, Duration::from_secs(1));
    // The earliest ttl: its two entries sort first, so the first group of 100 keys (taken from
    // the back of the 101 listed) holds one of them and the last group the other.
    store.put("dup", (T0 - 50) as f64);
    store.index("dup", "backfill");
    store.index("dup", "7");
    put_expired_indexed(&store, 99);
    assert_eq!(store.entry_count(), 101);
    let hook = Arc::new(Recorder::default());
    let options = options_of(DeleteMode::Batch);
    let sweeper = mem_sweeper(store.clone(), options).with_events(hook.clone());
    let report = sweeper.sweep_at(T0).await;
    let announced = hook.expired.lock().unwrap().clone();
    let dup = announced.iter().filter(|id| *id == "dup").count();
    assert_eq!(
        dup, 1,
        "Item Expired events for dup: {announced:?}; {report:?}"
    );
    report.assert_fields("items_found=101 items_deleted=100 events_published=100");
    assert!(store.ids().is_empty(), "{:?}", store.ids());
    let entries_left = store.entry_count();
    assert!(entries_left <= 1, "{report:?}");
    let next = sweeper.sweep_at(T0 + 1).await;
    next.assert_fields("items_deleted=0 events_published=0");
    assert_eq!(store.entry_count(), 0, "{next:?}");
}

/// With an expiry index table, a catch-up can be exact only while the entries live (two days
/// past their ttl, then native TTL may take them) and, for items written during the outage,
/// while the stream keeps their records (24 hours): a catch-up reaches back no further than the
/// entries live, whatever MAX_CATCHUP accepts, and one longer than the stream's 24 hours is
/// reported capped too (`catchup_capped`), though every window it can still read is swept.
#[tokio::test(start_paused = true)]
async fn an_index_table_catch_up_is_capped_at_what_its_entries_and_the_stream_still_hold() {
    const DAY: i64 = 86_400;
    let hourly = Layout {
        window_seconds: 3_600,
        ..Layout::default()
    };
    let sweep_after = |outage: i64, index_table: bool| {
        let hourly = hourly.clone();
        async move {
            // Entries written before the outage, each before its ttl.
            let store = MemStore::new(hourly).starting_at(T0 - outage - 60);
            let store = if index_table {
                store.with_index_table()
            } else {
                store
            };
            for (id, ago) in [("d4", 4 * DAY), ("d1", DAY + 3_600), ("h2", 2 * 3_600)] {
                if ago < outage {
                    store.put(id, (T0 - ago) as f64);
                    store.index(id, id);
                }
            }
            *store.checkpoint.lock().unwrap() = Some(Timestamp::from_secs(T0 - outage));
            let options = SweepOptions {
                max_catchup_seconds: 30 * DAY as u64,
                ..checkpointed(1)
            };
            let report = mem_sweeper(store.clone(), options).sweep_at(T0).await;
            (report, store.ids())
        }
    };
    // Five days down: the windows more than two days back are not read, and it says so.
    let (report, left) = sweep_after(5 * DAY, true).await;
    assert!(report.catchup_capped, "{report:?}");
    assert_eq!(left, ["d4"], "{report:?}");
    // Thirty hours down: every window read, every item deleted, and still reported capped:
    // records written early in the outage may have been trimmed before they were indexed.
    let (report, left) = sweep_after(30 * 3_600, true).await;
    assert!(left.is_empty(), "{left:?}: {report:?}");
    assert!(report.catchup_capped, "{report:?}");
    // Twenty hours: exact. And through a GSI (no stream, no entries), thirty hours is exact.
    let (report, left) = sweep_after(20 * 3_600, true).await;
    assert!(left.is_empty() && !report.catchup_capped, "{report:?}");
    let (report, left) = sweep_after(30 * 3_600, false).await;
    assert!(left.is_empty() && !report.catchup_capped, "{report:?}");
}
