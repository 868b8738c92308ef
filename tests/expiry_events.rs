//! Expiry events through the engine, with an in-memory table and a scripted sink: what is
//! published in notify and archive mode, that archive mode deletes nothing before the sink
//! accepted its event, cancellations, per-entry retries, failures reported (never dropped), and
//! the bound on events deleted but not yet published.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support;

use aws_sdk_dynamodb::types::AttributeValue as AV;
use support::mem_store::{key, ttl_of, Change, Fault, MemStore, Op, When};
use support::{assert_accounted, AssertFields};
use ttl_sweeper::engine::{DeleteMode, FailedKey, Stop, SweepOptions, SweepReport, Sweeper};
use ttl_sweeper::events::sink::BoxFuture;
use ttl_sweeper::events::{
    event_id, EntryResult, Events, EventsConfig, EventsMode, ExpiryEvent, ItemSource, Sink,
    SinkError, SinkTarget,
};
use ttl_sweeper::expiry::window::Window;
use ttl_sweeper::expiry::{Layout, Timestamp};
use ttl_sweeper::store::{ErrorKind, Key, Retry};

const NOW: i64 = 1_658_264_100;
const TABLE: &str = "sessions";
/// The events of an expiry published, then cancelled.
const CANCELLED: [&str; 2] = ["Item Expired", "Item Expiry Cancelled"];

/// What the table deleted (`deleted <id>`) and the sink accepted (`accepted <detail-type> <id>`),
/// in order.
type Log = Arc<Mutex<Vec<String>>>;

fn options(mode: DeleteMode, concurrency: usize) -> SweepOptions {
    SweepOptions {
        lookback_windows: 0,
        delete_mode: mode,
        max_concurrency: concurrency,
        retry: Retry {
            attempts: 4,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(100),
        },
        ..SweepOptions::default()
    }
}

/// The id of expired item `n`.
fn e(n: usize) -> String {
    format!("e{n:04}")
}

/// Every third of the first 30 expired items.
fn every_third() -> HashSet<String> {
    (0..30).step_by(3).map(e).collect()
}

/// A table in memory (every query lists every expired item: these sweeps read one window)
/// holding `expired` items with a payload and `live` ones; deletes log what they remove into
/// the shared log, after which a sink logs what it accepted.
fn with_items(expired: usize, live: usize, log: &Log) -> MemStore {
    let table = holding(BTreeMap::new(), log);
    for n in 0..expired {
        let mut item = key(&e(n));
        item.insert("ttl".into(), AV::N((NOW - 10 - n as i64 % 50).to_string()));
        item.insert("payload".into(), AV::S(format!("data of {}", e(n))));
        table.put_item(item);
    }
    for n in 0..live {
        table.put(&format!("l{n:04}"), (NOW + 100) as f64);
    }
    table
}

/// A new log and a table of `expired` items with a payload, nothing scripted.
fn expired_table(expired: usize) -> (Log, MemStore) {
    let log = Log::default();
    let table = with_items(expired, 0, &log);
    (log, table)
}

/// A table holding `items`, with nothing scripted.
fn holding(items: BTreeMap<String, Key>, log: &Log) -> MemStore {
    let table = MemStore::new(Layout::default())
        .any_partition()
        .log_to(log.clone());
    items.into_values().for_each(|item| table.put_item(item));
    table
}

/// `table` with `script` applied for each of `ids`.
fn for_each<I: IntoIterator<Item = S>, S: AsRef<str>>(
    table: MemStore,
    ids: I,
    script: impl Fn(MemStore, &str) -> MemStore,
) -> MemStore {
    ids.into_iter().fold(table, |t, id| script(t, id.as_ref()))
}

/// The application extends the `ids` right after each call `op`: after the index read
/// (`Op::Query`), or after the sweep's read of the table (`Op::Get`), the last read before an
/// archive-mode publish and its delete.
fn extend_after<S: AsRef<str>>(
    table: MemStore,
    op: Op,
    ids: impl IntoIterator<Item = S>,
) -> MemStore {
    let extend = Change::Extend((NOW + 3600) as f64);
    for_each(table, ids, |t, id| t.change(op, When::Always, id, extend))
}

/// The first conditional delete of each of `ids` is throttled, and the application deletes the
/// item during the backoff that follows.
fn throttle_then_remove<S: AsRef<str>>(
    table: MemStore,
    ids: impl IntoIterator<Item = S>,
) -> MemStore {
    let throttled = Fault::Fail(ErrorKind::Throttled);
    for_each(table, ids, |t, id| {
        let key = || When::Key(id.into());
        t.fault(Op::Delete, key(), throttled)
            .change(Op::Delete, key(), id, Change::Remove)
    })
}

/// The first conditional delete of each of `ids` is applied, but answered with a timeout.
fn lose_delete_answer<S: AsRef<str>>(
    table: MemStore,
    ids: impl IntoIterator<Item = S>,
) -> MemStore {
    for_each(table, ids, |t, id| {
        t.fault(Op::Delete, When::Key(id.into()), Fault::LoseAnswer)
    })
}

/// The `id` of the item an event is about.
fn item_id(e: &ExpiryEvent) -> String {
    e.detail()["key"]["id"]["S"].as_str().unwrap().to_owned()
}

/// The ids of the lines of `log` that start with `prefix`.
fn logged(log: &Log, prefix: &str) -> BTreeSet<String> {
    let log = log.lock().unwrap();
    log.iter()
        .filter_map(|l| l.strip_prefix(prefix).map(str::to_owned))
        .collect()
}

/// Asserts that every `<then><id>` line of `log` comes after a `<first><id>` line.
#[track_caller]
fn assert_follows(log: &Log, then: &str, first: &str) {
    let log = log.lock().unwrap();
    for (i, line) in log.iter().enumerate() {
        if let Some(id) = line.strip_prefix(then) {
            let after = log[..i].contains(&format!("{first}{id}"));
            assert!(after, "{line}, before {first}{id}: {log:?}");
        }
    }
}

/// A sink's answer to a batch.
type Answer = Result<Vec<EntryResult>, SinkError>;

type Script = dyn Fn(usize, &[ExpiryEvent]) -> Answer + Send + Sync;

/// A sink answering as `script` says (given the call number and the batch); logs every
/// accepted event and keeps it.
struct ScriptedSink {
    script: Box<Script>,
    calls: AtomicUsize,
    accepted: Mutex<Vec<ExpiryEvent>>,
    log: Log,
    /// Time each call takes.
    delay: Duration,
    /// Items deleted minus events accepted, at its largest when a call arrived.
    table: Option<MemStore>,
    max_gap: AtomicUsize,
}

impl std::fmt::Debug for ScriptedSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScriptedSink")
    }
}

fn log_accepted(log: &Log, event: &ExpiryEvent) {
    let line = format!("accepted {} {}", event.kind.detail_type(), item_id(event));
    log.lock().unwrap().push(line);
}

/// A call the sink accepted whose answer was lost: `batch` logged as accepted, and an error.
fn lost_answer(log: &Log, batch: &[ExpiryEvent]) -> Answer {
    batch.iter().for_each(|e| log_accepted(log, e));
    Err(SinkError::new(
        true,
        "connection reset after the request was sent",
    ))
}

fn failed(retryable: bool, reason: &str) -> EntryResult {
    let reason = reason.into();
    EntryResult::Failed { retryable, reason }
}

impl ScriptedSink {
    fn new(
        log: &Log,
        script: impl Fn(usize, &[ExpiryEvent]) -> Answer + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(ScriptedSink {
            script: Box::new(script),
            calls: AtomicUsize::new(0),
            accepted: Mutex::new(vec![]),
            log: log.clone(),
            delay: Duration::ZERO,
            table: None,
            max_gap: AtomicUsize::new(0),
        })
    }

    fn accepting(log: &Log) -> Arc<Self> {
        ScriptedSink::new(log, |_, batch| Ok(vec![EntryResult::Accepted; batch.len()]))
    }

    /// An accepting sink whose every call takes `delay`, watching the gap of `table`.
    fn slow(log: &Log, delay: Duration, table: Option<MemStore>) -> Arc<Self> {
        let mut sink = Arc::into_inner(ScriptedSink::accepting(log)).unwrap();
        (sink.delay, sink.table) = (delay, table);
        Arc::new(sink)
    }

    fn accepted(&self) -> Vec<ExpiryEvent> {
        self.accepted.lock().unwrap().clone()
    }

    /// The ids (the key's `id`) of the items whose events were accepted.
    fn accepted_ids(&self) -> HashSet<String> {
        self.accepted().iter().map(item_id).collect()
    }

    /// The accepted events of item `id`, in order.
    fn accepted_of(&self, id: &str) -> Vec<ExpiryEvent> {
        let mut of = self.accepted();
        of.retain(|e| item_id(e) == id);
        of
    }

    /// The kinds of the accepted events of item `id`, in order.
    fn kinds_of(&self, id: &str) -> Vec<&'static str> {
        let of = self.accepted_of(id);
        of.iter().map(|e| e.kind.detail_type()).collect()
    }
}

impl Sink for ScriptedSink {
    fn put<'a>(&'a self, batch: &'a [ExpiryEvent]) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            assert!(batch.len() <= 10, "a batch within the EventBridge limit");
            if let Some(table) = &self.table {
                let gap = table.deleted.load(SeqCst) - self.accepted.lock().unwrap().len();
                self.max_gap.fetch_max(gap, SeqCst);
            }
            tokio::time::sleep(self.delay).await;
            let n = self.calls.fetch_add(1, SeqCst);
            let results = (self.script)(n, batch)?;
            for (event, result) in batch.iter().zip(&results) {
                if *result == EntryResult::Accepted {
                    self.accepted.lock().unwrap().push(event.clone());
                    log_accepted(&self.log, event);
                }
            }
            Ok(results)
        })
    }
}

/// How a sweep publishes: the events mode, the delete mode, the item in the events.
type How = (EventsMode, DeleteMode, ItemSource);

/// Archive mode with conditional deletes and no item in the events.
const ARCHIVE: How = (
    EventsMode::Archive,
    DeleteMode::Conditional,
    ItemSource::Off,
);

/// Notify mode with `delete_mode` deletes and no item in the events.
fn notify(delete_mode: DeleteMode) -> How {
    (EventsMode::Notify, delete_mode, ItemSource::Off)
}

/// The events of a sweep published to `sink` as `how` says.
fn events((mode, delete_mode, item): How, sink: &Arc<ScriptedSink>) -> Events {
    let config = EventsConfig {
        target: SinkTarget::EventBridge("default".into()),
        mode,
        item,
        table: TABLE.into(),
        delete_mode,
        max_retries: 3,
    };
    Events::new(&config, sink.clone())
}

/// A sweep of one window at `NOW` with `concurrency` workers, publishing `events`, until `stop`.
async fn sweep_with(
    table: &MemStore,
    events: Events,
    delete_mode: DeleteMode,
    concurrency: usize,
    stop: &Stop,
) -> SweepReport {
    let options = options(delete_mode, concurrency);
    let sweeper = Sweeper::new(table.clone(), table.schema(), options);
    sweep_window(&sweeper.with_events(Arc::new(events)), 0, stop).await
}

/// A sweep by `sweeper` of the one window holding `NOW + secs`, as of then, until `stop`.
async fn sweep_window(sweeper: &Sweeper<MemStore>, secs: i64, stop: &Stop) -> SweepReport {
    let at = Timestamp::from_secs(NOW + secs);
    let window = [Window::containing_instant(at, 60)];
    sweeper.sweep_windows(at, &window, stop).await
}

/// A sweeper of `table` in archive mode with `concurrency` workers, publishing to `sink`.
fn archive_sweeper(
    table: &MemStore,
    sink: &Arc<ScriptedSink>,
    concurrency: usize,
) -> Sweeper<MemStore> {
    let options = options(DeleteMode::Conditional, concurrency);
    let sweeper = Sweeper::new(table.clone(), table.schema(), options);
    sweeper.with_events(Arc::new(events(ARCHIVE, sink)))
}

/// A sweep of `table` publishing to `sink` as `how` says, with short backoffs.
async fn sweep(table: &MemStore, sink: &Arc<ScriptedSink>, how: How) -> SweepReport {
    let (base, cap) = (Duration::from_millis(10), Duration::from_millis(100));
    let events = events(how, sink).with_backoff(base, cap);
    sweep_with(table, events, how.1, 4, &Stop::never()).await
}

/// A sweep in archive mode with conditional deletes that must stop `after` from now.
async fn sweep_archive_stopping(table: &MemStore, events: Events, after: Duration) -> SweepReport {
    let stop = Stop::at(Some(tokio::time::Instant::now() + after));
    sweep_with(table, events, DeleteMode::Conditional, 4, &stop).await
}

#[tokio::test(start_paused = true)]
async fn notify_publishes_one_event_per_deleted_item_with_its_stable_id() {
    for delete_mode in [DeleteMode::Batch, DeleteMode::Conditional] {
        let log = Log::default();
        let table = with_items(60, 5, &log);
        let sink = ScriptedSink::accepting(&log);
        let report = sweep(&table, &sink, notify(delete_mode)).await;
        report.assert_fields("items_deleted=60 events_published=60 events_failed=0");
        assert!(report.is_success());
        assert_eq!(table.ids().len(), 5, "the live items stay");
        let accepted = sink.accepted();
        let ids: HashSet<&String> = accepted.iter().map(|e| &e.id).collect();
        assert_eq!(ids.len(), 60, "one event per item");
        for e in &accepted {
            let (d, ttl) = (e.detail(), e.detail()["ttl"].as_f64().unwrap());
            assert_eq!(e.id, event_id(TABLE, &key(&item_id(e)), ttl));
            assert!(d["id"] == e.id.as_str() && d["mode"] == "notify");
            assert_eq!(d["delete_mode"], delete_mode.to_string());
            assert!(ttl < NOW as f64, "events only for expired items");
            assert!(d.get("item").is_none(), "EXPIRY_EVENTS_ITEM=off");
        }
        // Notify: every event after its delete.
        assert_follows(&log, "accepted Item Expired ", "deleted ");
    }
}

/// Items a conditional delete's retry finds gone: one the application deleted during the backoff
/// after a throttled first attempt (which deleted nothing) is owed no event; one a first attempt
/// deleted, its answer lost (a timeout), was deleted by this sweep all the same and is owed one.
#[tokio::test(start_paused = true)]
async fn notify_publishes_for_exactly_the_items_the_sweep_deleted_some_found_gone_by_a_retry() {
    for lost_answer in [false, true] {
        let log = Log::default();
        let table = match lost_answer {
            false => throttle_then_remove(with_items(30, 0, &log), every_third()),
            true => lose_delete_answer(with_items(30, 0, &log), every_third()),
        };
        let sink = ScriptedSink::accepting(&log);
        let report = sweep(&table, &sink, notify(DeleteMode::Conditional)).await;
        assert!(table.ids().is_empty(), "{report:?}");
        report.assert_fields("items_deleted=20 items_gone=10");
        let deleted = logged(&log, "deleted ");
        assert_eq!(deleted.len(), if lost_answer { 30 } else { 20 });
        report.assert_fields(&format!("events_published={}", deleted.len()));
        let published: BTreeSet<String> = sink.accepted_ids().into_iter().collect();
        let why = "an event for each item this sweep deleted, no other";
        assert_eq!(published, deleted, "{why}");
    }
}

#[tokio::test(start_paused = true)]
async fn notify_reports_an_item_written_again_after_a_delete_whose_answer_was_lost() {
    // The first DeleteItem of e0003 is applied, its answer lost, and the application writes the
    // item again, live, before the retry, which finds it with another ttl. The delete happened
    // and no event can be sent for it now: it is reported by key, not counted as kept.
    let log = Log::default();
    let table = lose_delete_answer(with_items(10, 0, &log), ["e0003"]);
    let put_back = Change::Put((NOW + 3600) as f64);
    let table = table.change(Op::Delete, When::Key(e(3)), "e0003", put_back);
    let sink = ScriptedSink::accepting(&log);
    let report = sweep(&table, &sink, notify(DeleteMode::Conditional)).await;
    assert!(logged(&log, "deleted ").contains("e0003"));
    assert_eq!(table.ids(), ["e0003"], "the live rewrite stays");
    report.assert_fields("items_skipped=0 items_failed=1 events_published=9");
    let failed = &report.failed_keys[0];
    assert_eq!(failed.key["id"]["S"], "e0003", "{report:?}");
    assert!(failed.reason.contains("written again"), "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn archive_deletes_nothing_the_sink_refused() {
    // Refused outright, and refused (retryable) until the retries run out.
    for retryable in [false, true] {
        let (log, table) = expired_table(30);
        let sink = ScriptedSink::new(&log, move |_, batch| {
            let refused = failed(retryable, "AccessDeniedException: not allowed");
            Ok(vec![refused; batch.len()])
        });
        let report = sweep(&table, &sink, ARCHIVE).await;
        assert_eq!(table.ids().len(), 30, "every item is still in the table");
        assert_eq!(table.deleted.load(SeqCst), 0);
        // Reported, not skipped.
        report.assert_fields("items_deleted=0 items_failed=30 events_failed=30");
        assert_eq!(report.failed_event_ids.len(), 30);
        let not_accepted = |f: &FailedKey| f.reason.starts_with("expiry event not accepted");
        assert!(report.failed_keys.iter().all(not_accepted));
        assert!(!report.is_success());
        // Chunks of 25 and 5: batches of 10, 10, 5 and 5, each tried 1 + 3 times if retryable.
        let expected = if retryable { 4 * 4 } else { 4 };
        assert_eq!(sink.calls.load(SeqCst), expected);
    }
}

#[tokio::test(start_paused = true)]
async fn archive_deletes_exactly_what_was_accepted_and_only_after() {
    let (log, table) = expired_table(40);
    let number = |id: &str| id[1..].parse::<usize>().unwrap();
    // Odd items refused for good; even ones accepted (after one throttled try for some).
    let sink = ScriptedSink::new(&log, move |call, batch| {
        let answer = |e: &ExpiryEvent| match number(&item_id(e)) {
            n if n % 2 == 1 => failed(false, "ValidationException"),
            n if call < 4 && n % 4 == 0 => failed(true, "ThrottlingException"),
            _ => EntryResult::Accepted,
        };
        Ok(batch.iter().map(answer).collect())
    });
    let report = sweep(&table, &sink, ARCHIVE).await;
    let left = table.ids();
    assert_eq!(left.len(), 20);
    assert!(left.iter().all(|id| number(id) % 2 == 1));
    report.assert_fields("items_deleted=20 events_published=20 events_failed=20");
    assert!(report.events_retried > 0);
    assert_follows(&log, "deleted ", "accepted Item Expired ");
}

#[tokio::test(start_paused = true)]
async fn archive_cancels_an_expiry_whose_ttl_changed_with_the_same_id() {
    let log = Log::default();
    let extended = ["e0003", "e0007"];
    let table = extend_after(with_items(10, 0, &log), Op::Get, extended);
    let sink = ScriptedSink::accepting(&log);
    let read = (ARCHIVE.0, ARCHIVE.1, ItemSource::Read);
    let report = sweep(&table, &sink, read).await;
    assert_eq!(table.ids(), extended);
    let fields = "items_deleted=8 items_skipped=2 events_published=10 events_cancelled=2";
    report.assert_fields(fields);
    assert!(report.is_success());
    for id in extended {
        let of = sink.accepted_of(id);
        let kinds = sink.kinds_of(id);
        assert_eq!(kinds, CANCELLED, "{id}");
        let (expired, cancelled) = (&of[0], &of[1]);
        assert_eq!(expired.id, cancelled.id);
        assert_eq!(cancelled.detail()["reason"], "ttl changed");
        // EXPIRY_EVENTS_ITEM=read: the expiry carries the item as read, the cancellation not.
        let payload = &expired.detail()["item"]["payload"]["S"];
        assert_eq!(*payload, format!("data of {id}"));
        assert!(cancelled.detail().get("item").is_none());
    }
    let cancellation = |e: &&ExpiryEvent| e.kind.detail_type() == "Item Expiry Cancelled";
    let cancelled = sink.accepted().iter().filter(cancellation).count();
    assert_eq!(cancelled, 2, "no cancellation for the items deleted");
}

#[tokio::test(start_paused = true)]
async fn failed_entries_are_retried_alone_and_published_once() {
    let (log, table) = expired_table(25);
    let seen = Arc::new(Mutex::new(Vec::<Vec<String>>::new()));
    let record = seen.clone();
    // The first call of each batch fails its even entries; later calls accept.
    let sink = ScriptedSink::new(&log, move |_, batch| {
        let ids: Vec<String> = batch.iter().map(|e| e.id.clone()).collect();
        let mut record = record.lock().unwrap();
        let first_time = !record.iter().flatten().any(|i| ids.contains(i));
        record.push(ids);
        let answer = |i: usize| match first_time && i % 2 == 0 {
            true => failed(true, "InternalFailure"),
            false => EntryResult::Accepted,
        };
        Ok((0..batch.len()).map(answer).collect())
    });
    let report = sweep(&table, &sink, notify(DeleteMode::Batch)).await;
    report.assert_fields("events_published=25 events_failed=0");
    let accepted = sink.accepted();
    let unique: HashSet<&String> = accepted.iter().map(|e| &e.id).collect();
    let counts = (accepted.len(), unique.len());
    assert_eq!(counts, (25, 25), "each accepted once");
    // 25 events: batches of 10, 10, 5 with 5, 5, 3 failures, then the 13 failed ones resent.
    let sent: usize = seen.lock().unwrap().iter().map(Vec::len).sum();
    assert_eq!(sent, 25 + 13, "only the failed entries are sent again");
    assert_eq!(report.events_retried, 13);
}

#[tokio::test(start_paused = true)]
async fn notify_events_that_cannot_be_published_are_reported_not_dropped() {
    let (log, table) = expired_table(30);
    let sink = ScriptedSink::new(&log, |n, batch| match n % 2 {
        0 => Err(SinkError::new(true, "PutEvents failed (Transient): 503")),
        _ => Ok(vec![
            failed(true, "ThrottlingException: slow down");
            batch.len()
        ]),
    });
    let report = sweep(&table, &sink, notify(DeleteMode::Batch)).await;
    // Notify: deleted first.
    report.assert_fields("items_deleted=30 events_published=0 events_failed=30");
    let failed = &report.failed_event_ids;
    assert_eq!(failed.len(), 30);
    assert!(failed.iter().all(|f| f.reason.contains("after 4 attempts")));
    let ids: HashSet<&str> = failed.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids.len(), 30);
    assert!(!report.is_success(), "a lost event fails the sweep");
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(v["events_failed"], 30);
    assert_eq!(v["failed_event_ids"][0]["id"].as_str().unwrap().len(), 64);
}

#[tokio::test(start_paused = true)]
async fn a_slow_sink_pauses_deletes_instead_of_piling_up_events() {
    let (log, table) = expired_table(2000);
    let sink = ScriptedSink::slow(&log, Duration::from_millis(200), Some(table.clone()));
    let concurrency = 2;
    let events = events(notify(DeleteMode::Batch), &sink);
    let stop = Stop::never();
    let report = sweep_with(&table, events, DeleteMode::Batch, concurrency, &stop).await;
    assert_eq!(report.events_published, 2000);
    let gap = sink.max_gap.load(SeqCst);
    let why = "items deleted but not yet published: more than the chunks in flight";
    assert!(gap <= 25 * concurrency, "{gap} {why}");
    assert!(gap > 0, "the measure works");
}

#[tokio::test(start_paused = true)]
async fn archive_leaves_items_for_the_next_sweep_when_it_must_stop() {
    let (log, table) = expired_table(20);
    let sink = ScriptedSink::new(&log, |_, _| Err(SinkError::new(true, "timeout")));
    let (base, cap) = (Duration::from_secs(1), Duration::from_secs(10));
    let events = events(ARCHIVE, &sink).with_backoff(base, cap);
    let report = sweep_archive_stopping(&table, events, Duration::from_millis(1500)).await;
    assert_eq!(table.ids().len(), 20, "nothing deleted");
    report.assert_fields("items_deleted=0 events_failed=20");
    assert_eq!(report.items_left + report.items_failed, 20, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn auto_items_come_from_conditional_deletes_in_notify_mode_only() {
    for (delete_mode, with_item) in [(DeleteMode::Conditional, true), (DeleteMode::Batch, false)] {
        let (log, table) = expired_table(12);
        let sink = ScriptedSink::accepting(&log);
        let auto = (EventsMode::Notify, delete_mode, ItemSource::Auto);
        let report = sweep(&table, &sink, auto).await;
        assert_eq!(report.events_published, 12);
        for e in sink.accepted() {
            let item = e.detail().get("item").cloned();
            match with_item {
                true => assert_eq!(
                    item.unwrap()["payload"]["S"],
                    format!("data of {}", item_id(&e))
                ),
                false => assert!(item.is_none(), "{delete_mode:?}: no item without a read"),
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn archive_cancels_an_accepted_expiry_whose_delete_failed_once_its_ttl_changed() {
    // The sink accepts every expiry; then every delete is throttled until the retries run out.
    // Meanwhile the application extends e0002 and e0005 (they move to a window this sweep does
    // not read) and deletes e0007.
    let log = Log::default();
    let table = extend_after(with_items(10, 0, &log), Op::Get, ["e0002", "e0005"])
        .change(Op::Get, When::Always, "e0007", Change::Remove)
        .fault(Op::Delete, When::Always, Fault::Fail(ErrorKind::Throttled));
    let sink = ScriptedSink::accepting(&log);
    let report = sweep(&table, &sink, ARCHIVE).await;
    // The extended items: their expiry is cancelled, with its id, and they count as kept. The
    // item the application deleted: the expiry stands, nothing more is owed. The rest are still
    // expired with the ttl read: reported, for the next sweep to publish again and delete.
    let fields = "events_published=10 events_cancelled=2 items_skipped=2 items_gone=1";
    report.assert_fields(&format!("{fields} items_failed=7"));
    for id in ["e0002", "e0005"] {
        let kinds = sink.kinds_of(id);
        assert_eq!(kinds, CANCELLED, "{id}");
    }
    assert_eq!(sink.kinds_of("e0007"), ["Item Expired"]);
    let failed: HashSet<String> = (report.failed_keys.iter())
        .map(|f| f.key["id"]["S"].as_str().unwrap().to_owned())
        .collect();
    let settled = ["e0002", "e0005", "e0007"].map(String::from).into();
    assert!(failed.is_disjoint(&settled), "{failed:?}");
    assert!(!report.is_success());
    assert_accounted(&report);
    assert_eq!(table.ids().len(), 9, "nothing deleted");
    // The next sweep, with deletes working again, settles the rest with the same ids.
    let table = holding(table.items(), &log);
    let again = sweep(&table, &sink, ARCHIVE).await;
    assert_eq!(again.items_deleted, 7, "{again:?}");
    assert_eq!(table.ids(), ["e0002", "e0005"]);
}

#[tokio::test(start_paused = true)]
async fn archive_cancels_an_accepted_expiry_left_by_a_stop_once_its_ttl_changed() {
    // The sink takes 10 ms to accept; the sweep must stop after 5 ms: every expiry is accepted,
    // no delete is made. The application extended e0003 meanwhile.
    let log = Log::default();
    let table = extend_after(with_items(6, 0, &log), Op::Get, ["e0003"]);
    let sink = ScriptedSink::slow(&log, Duration::from_millis(10), None);
    let after = Duration::from_millis(5);
    let report = sweep_archive_stopping(&table, events(ARCHIVE, &sink), after).await;
    assert_eq!(table.ids().len(), 6, "nothing deleted");
    assert_eq!(sink.kinds_of("e0003"), CANCELLED);
    // The others are left for the next sweep.
    let fields = "events_published=6 events_cancelled=1 items_skipped=1 items_left=5";
    report.assert_fields(fields);
}

#[tokio::test(start_paused = true)]
async fn archive_cancels_at_the_next_sweep_an_accepted_expiry_whose_item_was_extended_after_its_chunk(
) {
    // The sweep stops with every expiry accepted and no delete made; its chunk reads the items
    // again and finds them unchanged: left. Then the application extends e0003. The index no
    // longer lists it at the ttl announced, so no later chunk would; the same sweeper's next
    // sweep reads it first and cancels the expiry, and deletes the others.
    let log = Log::default();
    let table = with_items(6, 0, &log);
    let sink = ScriptedSink::slow(&log, Duration::from_millis(10), None);
    let sweeper = archive_sweeper(&table, &sink, 4);
    let stop = Stop::at(Some(tokio::time::Instant::now() + Duration::from_millis(5)));
    let first = sweep_window(&sweeper, 0, &stop).await;
    first.assert_fields("events_published=6 events_cancelled=0 items_left=6");
    table.put("e0003", (NOW + 3600) as f64);
    let again = sweep_window(&sweeper, 0, &Stop::never()).await;
    again.assert_fields("events_cancelled=1 items_deleted=5");
    assert_eq!(sink.kinds_of("e0003"), CANCELLED);
    assert_eq!(table.ids(), ["e0003"]);
    // Settled: a third sweep has nothing more to say.
    let third = sweep_window(&sweeper, 0, &Stop::never()).await;
    third.assert_fields("events_published=0 events_cancelled=0");
}

/// An archive sweep of five expired items, e0002 extended after the table's read, every delete
/// failing with `delete` and the table's `read`th read refused: the table, the sink, the report.
async fn archive_refusing(
    delete: ErrorKind,
    read: usize,
) -> (MemStore, Arc<ScriptedSink>, SweepReport) {
    let log = Log::default();
    let table = extend_after(with_items(5, 0, &log), Op::Get, ["e0002"])
        .fault(Op::Delete, When::Always, Fault::Fail(delete))
        .fault(Op::Get, When::Call(read), Fault::Fail(ErrorKind::Auth));
    let sink = ScriptedSink::accepting(&log);
    let report = sweep(&table, &sink, ARCHIVE).await;
    (table, sink, report)
}

#[tokio::test(start_paused = true)]
async fn archive_without_the_re_read_reports_what_it_could_not_settle() {
    // As above, but the re-read (the second read of the table, after the deletes) is refused:
    // nothing is cancelled on a guess, every item whose delete failed stays reported as failed.
    let (table, _, report) = archive_refusing(ErrorKind::Throttled, 2).await;
    report.assert_fields("events_published=5 events_cancelled=0 items_failed=5");
    assert!(!report.is_success());
    assert_eq!(table.ids().len(), 5);
}

#[tokio::test(start_paused = true)]
async fn archive_cancels_an_expiry_whose_ttl_the_read_after_unanswered_deletes_found_changed() {
    // Every delete times out (it may have been applied); the application extends e0002 after the
    // table's read. The read that settles the unanswered deletes finds e0002 with its new ttl:
    // no delete in flight can remove it any more (each requires the ttl read), so its expiry is
    // cancelled there, even though the re-read after the deletes is refused. (Reads: the one
    // before the publish, one per key as its deletes run out, then the re-read.)
    let (table, sink, report) = archive_refusing(ErrorKind::Transient, 7).await;
    report.assert_fields("events_published=5 events_cancelled=1 items_skipped=1 items_failed=4");
    assert_eq!(sink.kinds_of("e0002"), CANCELLED);
    assert_eq!(table.ids().len(), 5);
}

#[tokio::test(start_paused = true)]
async fn archive_publishes_nothing_for_keys_the_table_could_not_be_read_for() {
    // The read of the table before the publish is refused: no expiry is announced for an item
    // not read to hold it; every key is left for the next sweep, which publishes and deletes.
    let log = Log::default();
    let table = with_items(5, 0, &log).fault(Op::Get, When::Call(1), Fault::Fail(ErrorKind::Auth));
    let sink = ScriptedSink::accepting(&log);
    let report = sweep(&table, &sink, ARCHIVE).await;
    report.assert_fields("events_published=0 items_deleted=0 items_left=5");
    assert!(sink.accepted().is_empty());
    assert_eq!(table.ids().len(), 5);
    let again = sweep(&table, &sink, ARCHIVE).await;
    again.assert_fields("events_published=5 items_deleted=5");
    assert!(table.ids().is_empty());
}

/// What the engine guarantees when the process dies between an accepted expiry and its delete
/// (docs/events.md, "Archive"): nothing is deleted without an accepted expiry or while live; an
/// item whose ttl stayed is published again with the same id by the next sweep and deleted; an
/// item whose ttl changed before the next sweep is no longer in any window it reads, so it is
/// neither deleted nor cancelled — the expiry the consumer holds is not followed by anything.
#[tokio::test(start_paused = true)]
async fn archive_after_a_crash_between_expiry_and_delete() {
    let log = Log::default();
    let table = with_items(4, 0, &log).fault(Op::Delete, When::Always, Fault::Stall);
    let sink = ScriptedSink::accepting(&log);
    let crashed = sweep(&table, &sink, ARCHIVE);
    let died = tokio::time::timeout(Duration::from_secs(60), crashed).await;
    assert!(died.is_err(), "the first sweep never got past its deletes");
    assert_eq!(sink.accepted().len(), 4, "every expiry was accepted");
    // After the crash the application extends e0001 (to a window the next sweep does not read).
    let mut items = table.items();
    let extended = items.get_mut("e0001").unwrap();
    extended.insert("ttl".into(), AV::N((NOW + 3600).to_string()));
    let table = holding(items, &log);
    let report = sweep(&table, &sink, ARCHIVE).await;
    report.assert_fields("items_deleted=3 events_cancelled=0");
    assert_eq!(table.ids(), ["e0001"], "the extended item stays");
    for id in ["e0000", "e0002", "e0003"] {
        let ids: Vec<String> = sink.accepted_of(id).into_iter().map(|e| e.id).collect();
        assert_eq!(ids.len(), 2, "{id}: published again");
        assert_eq!(ids[0], ids[1], "{id}: with the same id");
    }
    // The limit: nothing follows the extended item's accepted expiry.
    assert_eq!(sink.kinds_of("e0001"), ["Item Expired"]);
}

/// The same crash with the expiry index table: the chunk journaled its expiries in the index
/// table before publishing them, so the next process's first sweep after they are due reads them
/// and cancels the expiry of the item the application extended meanwhile, though no index lists
/// it at the ttl announced any more; the others are published again and deleted, and the journal
/// is emptied once a sweep finds them gone.
#[tokio::test(start_paused = true)]
async fn archive_with_the_expiry_index_table_cancels_after_a_crash_the_expiry_of_an_item_extended()
{
    let log = Log::default();
    let table =
        with_items(4, 0, &log)
            .with_index_table()
            .fault(Op::Delete, When::First(2), Fault::Stall);
    (0..4).for_each(|n| table.index(&e(n), &n.to_string()));
    let sink = ScriptedSink::accepting(&log);
    // Two processes die the same way, one after the other: two journal items list each key.
    for _ in 0..2 {
        let crashed = sweep(&table, &sink, ARCHIVE);
        let died = tokio::time::timeout(Duration::from_secs(60), crashed).await;
        assert!(died.is_err(), "the sweep never got past its deletes");
    }
    assert_eq!(sink.accepted().len(), 8, "every expiry was accepted, twice");
    table.put("e0001", (NOW + 3600) as f64);
    // Another process, once the journal's items are due.
    let next = archive_sweeper(&table, &sink, 4);
    let report = sweep_window(&next, 11, &Stop::never()).await;
    report.assert_fields("events_cancelled=1 items_deleted=3");
    let kinds = ["Item Expired", "Item Expired", "Item Expiry Cancelled"];
    assert_eq!(sink.kinds_of("e0001"), kinds[..]);
    assert_eq!(table.ids(), ["e0001"], "the extended item stays");
    for id in ["e0000", "e0002", "e0003"] {
        assert_eq!(sink.kinds_of(id), ["Item Expired"; 3], "{id}");
    }
    // Its entry is removed (its item kept on another ttl); the journal holds the others until a
    // sweep reads them again and finds them gone: then nothing of them is left, and nothing more
    // is published.
    // (The window of `NOW + 11`, which holds `NOW + 22`.)
    let later = sweep_window(&next, 22, &Stop::never()).await;
    later.assert_fields("events_published=0 events_cancelled=0");
    assert_eq!(table.entry_count(), 0, "{later:?}");
}

/// Archive mode with the expiry index table, stopped while a publication waits to be tried
/// again: the sink took the expiry and its answer was lost, so the sweeper never learnt it. The
/// journal keeps the expiry (it may have gone out), so once the item is extended, the next sweep
/// after the journal is due cancels it.
#[tokio::test(start_paused = true)]
async fn archive_stopped_before_a_retry_of_a_lost_answer_keeps_the_expiry_journaled_and_cancels_it()
{
    let log = Log::default();
    let table = with_items(1, 0, &log).with_index_table();
    table.index(&e(0), "0");
    let lost_log = log.clone();
    let lost = ScriptedSink::new(&log, move |_, batch| lost_answer(&lost_log, batch));
    let (base, cap) = (Duration::from_secs(10), Duration::from_secs(10));
    let slow_retries = events(ARCHIVE, &lost).with_backoff(base, cap);
    let report = sweep_archive_stopping(&table, slow_retries, Duration::from_secs(1)).await;
    report.assert_fields("items_deleted=0 events_failed=1");
    assert_eq!(logged(&log, "accepted").len(), 1, "the sink took it");
    table.put("e0000", (NOW + 3600) as f64);
    let sink = ScriptedSink::accepting(&log);
    let next = archive_sweeper(&table, &sink, 4);
    let report = sweep_window(&next, 11, &Stop::never()).await;
    report.assert_fields("events_cancelled=1 items_deleted=0");
    assert_eq!(sink.kinds_of("e0000"), ["Item Expiry Cancelled"]);
    assert_eq!(table.ids(), ["e0000"], "the extended item stays");
}

/// A sink whose every answer is drawn from `seed`: accepted, refused (retryable or not), a whole
/// call failing, or a call the sink accepted whose answer was lost (the events are logged as
/// accepted, the publisher sees an error and sends them again).
fn chaotic_sink(log: &Log, seed: u64) -> Arc<ScriptedSink> {
    let rng = Mutex::new(fastrand::Rng::with_seed(seed));
    let lost_log = log.clone();
    ScriptedSink::new(log, move |_, batch| {
        let mut rng = rng.lock().unwrap();
        match rng.u8(0..20) {
            0 => return Err(SinkError::new(true, "503 Service Unavailable")),
            1 => return lost_answer(&lost_log, batch),
            _ => {}
        }
        let answer = |_| match rng.u8(0..10) {
            0..=5 => EntryResult::Accepted,
            6..=8 => failed(true, "ThrottlingException"),
            _ => failed(false, "ValidationException"),
        };
        Ok(batch.iter().map(answer).collect())
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(40))]

    /// Whatever the sink does: in archive mode every deleted item had its event accepted before
    /// the delete; in notify mode every event follows its delete; every expired item found is
    /// deleted, kept or reported; every event carries the id of its table, key and ttl.
    #[test]
    fn events_and_deletes_keep_their_invariants_whatever_the_sink_does(
        seed in 0u64..u64::MAX,
        archive in proptest::bool::ANY,
        items in 1usize..80,
        extended in proptest::collection::btree_set(0usize..80, 0..5),
        throttled_then_removed in proptest::collection::btree_set(0usize..80, 0..5),
        unprocessed in proptest::collection::btree_set(0usize..80, 0..5),
    ) {
        let mut rt = tokio::runtime::Builder::new_current_thread();
        let rt = rt.enable_time().start_paused(true).build().unwrap();
        rt.block_on(async {
            let log = Log::default();
            let ids = |set: &BTreeSet<usize>| set.iter().copied().map(e).collect::<Vec<_>>();
            // Archive mode: after the read of the table that precedes the publish.
            let after = if archive { Op::Get } else { Op::Query };
            let table = extend_after(with_items(items, 3, &log), after, ids(&extended));
            let table = throttle_then_remove(table, ids(&throttled_then_removed));
            let table = for_each(table, ids(&unprocessed), |t, id| {
                t.fault(Op::BatchDelete, When::Key(id.into()), Fault::Unprocessed)
            });
            let written = table.items();
            let before: BTreeMap<String, f64> =
                written.iter().map(|(id, item)| (id.clone(), ttl_of(item))).collect();
            let sink = chaotic_sink(&log, seed);
            // Notify mode with both delete modes: batch (the default) on odd seeds.
            let how = match (archive, seed % 2) {
                (true, _) => ARCHIVE,
                (false, 1) => notify(DeleteMode::Batch),
                (false, _) => notify(DeleteMode::Conditional),
            };
            let report = sweep(&table, &sink, how).await;
            if archive {
                assert_follows(&log, "deleted ", "accepted Item Expired ");
            } else {
                assert_follows(&log, "accepted Item Expired ", "deleted ");
            }
            for id in logged(&log, "accepted Item Expiry Cancelled ") {
                assert!(archive && table.ids().contains(&id), "{id}");
            }
            assert_accounted(&report);
            assert_eq!(report.items_found, items as u64);
            for e in sink.accepted() {
                let id = item_id(&e);
                assert!(before[&id] < NOW as f64, "events only for expired items");
                assert_eq!(e.id, event_id(TABLE, &key(&id), before[&id]));
            }
            if !archive {
                // Every deletion's event is accepted or reported, and only a deletion's.
                let accounted = report.events_published + report.events_failed;
                assert_eq!(report.items_deleted, accounted, "{report:?}");
                // Every item this sweep deleted has its event; none that someone else deleted.
                // (Notify mode publishes no cancellations: every accepted event is an expiry.)
                let deleted = logged(&log, "deleted ");
                let expired: BTreeSet<String> = sink.accepted_ids().into_iter().collect();
                assert!(expired.is_subset(&deleted), "{report:?}");
                if report.events_failed == 0 {
                    assert_eq!(expired, deleted, "{report:?}");
                }
            }
            // Live items are never touched.
            assert_eq!(table.ids().iter().filter(|id| id.starts_with('l')).count(), 3);
        });
    }
}

/// Archive mode with an expiry index table, stopped while a chunk's events are published: the
/// items whose events were not published are left by name, so only their entries stay (with the
/// chunk's journal of them); the entries of the items deleted are removed. The next sweep settles
/// the rest.
#[tokio::test(start_paused = true)]
async fn archive_stopped_mid_publication_keeps_the_entries_of_the_items_left_only() {
    fastrand::seed(7);
    let log = Log::default();
    let table = with_items(20, 0, &log).with_index_table();
    let table = table.change(Op::Get, When::Always, "e0003", Change::Remove);
    (0..20).for_each(|n| table.index(&e(n), &n.to_string()));
    assert_eq!(table.entry_count(), 20);
    // The first call is accepted; the second is refused, and its retry would pass the stop.
    let sink = ScriptedSink::new(&log, |n, batch| match n {
        0 => Ok(vec![EntryResult::Accepted; batch.len()]),
        _ => Err(SinkError::new(true, "503 Service Unavailable")),
    });
    let (base, cap) = (Duration::from_secs(10), Duration::from_secs(10));
    let slow_retries = events(ARCHIVE, &sink).with_backoff(base, cap);
    let stop = Stop::at(Some(tokio::time::Instant::now() + Duration::from_millis(1)));
    let conditional = DeleteMode::Conditional;
    let report = sweep_with(&table, slow_retries, conditional, 1, &stop).await;
    report.assert_fields("items_deleted=10 items_left=10 index_entries_removed=10");
    // Their entries, and the chunk's journal of the 10 expiries perhaps published (the refused
    // call's answer may have been lost).
    assert_eq!(table.entry_count(), 11, "{report:?}");
    // e0003, left, was deleted by the application meanwhile: its entry stays all the same.
    assert_eq!(table.ids().len(), 9, "{report:?}");

    let sink = ScriptedSink::accepting(&log);
    let again = sweep_window(&archive_sweeper(&table, &sink, 1), 0, &Stop::never()).await;
    again.assert_fields("items_deleted=9 items_gone=1 index_entries_removed=10");
    assert!(table.ids().is_empty(), "{again:?}");
    // The journal stays until it is due (10 s on): a sweep then finds its items gone and empties
    // it, publishing nothing more.
    assert_eq!(table.entry_count(), 1, "{again:?}");
    let next = archive_sweeper(&table, &sink, 1);
    let later = sweep_window(&next, 11, &Stop::never()).await;
    later.assert_fields("events_published=0 events_cancelled=0");
    assert_eq!(table.entry_count(), 0, "{later:?}");
}
