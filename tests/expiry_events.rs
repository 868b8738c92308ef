//! Expiry events through the engine, with an in-memory table and a scripted sink: what is
//! published in notify and archive mode, that archive mode deletes nothing before the sink
//! accepted its event, cancellations, per-entry retries, failures reported (never dropped), and
//! the bound on events deleted but not yet published.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use aws_sdk_dynamodb::types::AttributeValue as AV;
use common::mem_store::{
    default_schema, key, mem_sweeper, ttl_of, Change, Fault, MemStore, Op, When,
};
use ttl_sweeper::engine::{DeleteMode, Stop, SweepOptions, SweepReport, Sweeper};
use ttl_sweeper::events::sink::BoxFuture;
use ttl_sweeper::events::{
    event_id, EntryResult, Events, EventsConfig, EventsMode, ExpiryEvent, ItemSource, Sink,
    SinkError, SinkTarget,
};
use ttl_sweeper::expiry::window::Window;
use ttl_sweeper::expiry::{Layout, Timestamp};
use ttl_sweeper::store::{ErrorKind, Key, Store};

const NOW: i64 = 1_658_264_100;
const TABLE: &str = "sessions";

fn options(mode: DeleteMode, concurrency: usize) -> SweepOptions {
    SweepOptions {
        lookback_windows: 0,
        delete_mode: mode,
        max_concurrency: concurrency,
        max_retries: 3,
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(100),
        ..SweepOptions::default()
    }
}

/// A table in memory (every query lists every expired item: these sweeps read one window)
/// holding `expired` items with a payload and `live` ones; deletes log what they remove into
/// the shared log, after which a sink logs what it accepted.
fn with_items(expired: usize, live: usize, log: Arc<Mutex<Vec<String>>>) -> MemStore {
    let table = holding(BTreeMap::new(), log);
    for n in 0..expired {
        let id = format!("e{n:04}");
        let mut item = key(&id);
        item.insert("ttl".into(), AV::N((NOW - 10 - n as i64 % 50).to_string()));
        item.insert("payload".into(), AV::S(format!("data of {id}")));
        table.put_item(item);
    }
    for n in 0..live {
        table.put(&format!("l{n:04}"), (NOW + 100) as f64);
    }
    table
}

/// A table holding `items`, with nothing scripted.
fn holding(items: BTreeMap<String, Key>, log: Arc<Mutex<Vec<String>>>) -> MemStore {
    let table = MemStore::new(Layout::default()).any_partition().log_to(log);
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

/// The application extends the `ids` right after each index read.
fn extend_after_read<S: AsRef<str>>(table: MemStore, ids: impl IntoIterator<Item = S>) -> MemStore {
    for_each(table, ids, |t, id| {
        t.change(
            Op::Query,
            When::Always,
            id,
            Change::Extend((NOW + 3600) as f64),
        )
    })
}

/// The first conditional delete of each of `ids` is throttled, and the application deletes the
/// item during the backoff that follows.
fn throttle_then_remove<S: AsRef<str>>(
    table: MemStore,
    ids: impl IntoIterator<Item = S>,
) -> MemStore {
    for_each(table, ids, |t, id| {
        t.fault(
            Op::Delete,
            When::Key(id.into()),
            Fault::Fail(ErrorKind::Throttled),
        )
        .change(Op::Delete, When::Key(id.into()), id, Change::Remove)
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

type Script = dyn Fn(usize, &[ExpiryEvent]) -> Result<Vec<EntryResult>, SinkError> + Send + Sync;

/// A sink answering as `script` says (given the call number and the batch); logs every
/// accepted event and keeps it.
struct ScriptedSink {
    script: Box<Script>,
    calls: AtomicUsize,
    accepted: Mutex<Vec<ExpiryEvent>>,
    log: Arc<Mutex<Vec<String>>>,
    /// Time each call takes.
    delay: Duration,
    /// Items deleted minus events accepted, at its largest when a call arrived.
    table: Option<Arc<MemStore>>,
    max_gap: AtomicUsize,
}

impl std::fmt::Debug for ScriptedSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScriptedSink")
    }
}

impl ScriptedSink {
    fn new(
        log: Arc<Mutex<Vec<String>>>,
        script: impl Fn(usize, &[ExpiryEvent]) -> Result<Vec<EntryResult>, SinkError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        ScriptedSink {
            script: Box::new(script),
            calls: AtomicUsize::new(0),
            accepted: Mutex::new(vec![]),
            log,
            delay: Duration::ZERO,
            table: None,
            max_gap: AtomicUsize::new(0),
        }
    }

    fn accepting(log: Arc<Mutex<Vec<String>>>) -> Self {
        ScriptedSink::new(log, |_, batch| Ok(vec![EntryResult::Accepted; batch.len()]))
    }

    fn accepted(&self) -> Vec<ExpiryEvent> {
        self.accepted.lock().unwrap().clone()
    }

    /// The ids (the key's `id`) of the items whose events were accepted.
    fn accepted_ids(&self) -> HashSet<String> {
        self.accepted()
            .iter()
            .map(|e| e.detail()["key"]["id"]["S"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Sink for ScriptedSink {
    fn put<'a>(
        &'a self,
        batch: &'a [ExpiryEvent],
    ) -> BoxFuture<'a, Result<Vec<EntryResult>, SinkError>> {
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
                    let id = event.detail()["key"]["id"]["S"]
                        .as_str()
                        .unwrap()
                        .to_owned();
                    self.log
                        .lock()
                        .unwrap()
                        .push(format!("accepted {} {id}", event.kind.detail_type()));
                }
            }
            Ok(results)
        })
    }
}

fn events_config(mode: EventsMode, delete_mode: DeleteMode, item: ItemSource) -> EventsConfig {
    EventsConfig {
        target: SinkTarget::EventBridge("default".into()),
        mode,
        item,
        table: TABLE.into(),
        delete_mode,
        max_retries: 3,
    }
}

async fn sweep<S: Store>(
    table: S,
    sink: Arc<ScriptedSink>,
    mode: EventsMode,
    delete_mode: DeleteMode,
    item: ItemSource,
) -> (Sweeper<S>, SweepReport) {
    let events = Events::new(&events_config(mode, delete_mode, item), sink)
        .with_backoff(Duration::from_millis(10), Duration::from_millis(100));
    let sweeper = Sweeper::new(table, default_schema(), options(delete_mode, 4))
        .with_events(Arc::new(events));
    let now = Timestamp::from_secs(NOW);
    let window = Window::containing_instant(now, 60);
    let report = sweeper.sweep_windows(now, &[window], &Stop::never()).await;
    (sweeper, report)
}

/// A sweep in notify mode with `delete_mode` deletes and no item in the events.
async fn sweep_notify<S: Store>(
    table: S,
    sink: Arc<ScriptedSink>,
    delete_mode: DeleteMode,
) -> (Sweeper<S>, SweepReport) {
    sweep(
        table,
        sink,
        EventsMode::Notify,
        delete_mode,
        ItemSource::Off,
    )
    .await
}

/// A sweep in archive mode with conditional deletes and no item in the events.
async fn sweep_archive<S: Store>(table: S, sink: Arc<ScriptedSink>) -> (Sweeper<S>, SweepReport) {
    sweep(
        table,
        sink,
        EventsMode::Archive,
        DeleteMode::Conditional,
        ItemSource::Off,
    )
    .await
}

/// A sweep in archive mode with conditional deletes that must stop `after` from now.
async fn sweep_archive_stopping<S: Store>(
    table: S,
    events: Events,
    after: Duration,
) -> SweepReport {
    let sweeper = Sweeper::new(table, default_schema(), options(DeleteMode::Conditional, 4))
        .with_events(Arc::new(events));
    let now = Timestamp::from_secs(NOW);
    let stop = Stop::at(Some(tokio::time::Instant::now() + after));
    sweeper
        .sweep_windows(now, &[Window::containing_instant(now, 60)], &stop)
        .await
}

/// The events for an archive sweep with conditional deletes and no item.
fn archive_events(sink: Arc<ScriptedSink>) -> Events {
    Events::new(
        &events_config(
            EventsMode::Archive,
            DeleteMode::Conditional,
            ItemSource::Off,
        ),
        sink,
    )
}

#[tokio::test(start_paused = true)]
async fn notify_publishes_one_event_per_deleted_item_with_its_stable_id() {
    for delete_mode in [DeleteMode::Batch, DeleteMode::Conditional] {
        let log = Arc::new(Mutex::new(vec![]));
        let table = Arc::new(with_items(60, 5, log.clone()));
        let sink = Arc::new(ScriptedSink::accepting(log.clone()));
        let (_, report) = sweep_notify(table.clone(), sink.clone(), delete_mode).await;
        assert_eq!(report.items_deleted, 60, "{delete_mode:?}");
        assert_eq!(report.events_published, 60);
        assert_eq!(report.events_failed, 0);
        assert!(report.is_success());
        assert_eq!(table.ids().len(), 5, "the live items stay");
        let accepted = sink.accepted();
        let ids: HashSet<String> = accepted.iter().map(|e| e.id.clone()).collect();
        assert_eq!(ids.len(), 60, "one event per item");
        for e in &accepted {
            let d = e.detail();
            let k = key(d["key"]["id"]["S"].as_str().unwrap());
            let ttl = d["ttl"].as_f64().unwrap();
            assert_eq!(e.id, event_id(TABLE, &k, ttl));
            assert!(d["id"] == e.id.as_str() && d["mode"] == "notify");
            assert_eq!(d["delete_mode"], delete_mode.to_string());
            assert!(ttl < NOW as f64, "events only for expired items");
            assert!(d.get("item").is_none(), "EXPIRY_EVENTS_ITEM=off");
        }
        // Notify: every event after its delete.
        let log = log.lock().unwrap();
        for (i, line) in log.iter().enumerate() {
            if let Some(id) = line.strip_prefix("accepted Item Expired ") {
                assert!(log[..i].contains(&format!("deleted {id}")), "{line}");
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn notify_publishes_nothing_for_an_item_someone_else_deleted_during_a_throttle_backoff() {
    // The first DeleteItem of these items is throttled (so it deleted nothing), and the
    // application deletes them before the retry, which finds them gone: no event is owed.
    let log = Arc::new(Mutex::new(vec![]));
    let removed: HashSet<String> = (0..30).step_by(3).map(|n| format!("e{n:04}")).collect();
    let table = Arc::new(throttle_then_remove(
        with_items(30, 0, log.clone()),
        &removed,
    ));
    let sink = Arc::new(ScriptedSink::accepting(log.clone()));
    let (_, report) = sweep_notify(table.clone(), sink.clone(), DeleteMode::Conditional).await;
    assert!(table.ids().is_empty(), "{report:?}");
    assert_eq!(report.items_deleted, 20, "{report:?}");
    assert_eq!(report.items_gone, 10, "{report:?}");
    let published: HashSet<String> = sink.accepted_ids();
    assert!(
        published.is_disjoint(&removed),
        "an event for an item the sweep did not delete: {:?}",
        published.intersection(&removed).collect::<Vec<_>>()
    );
    assert_eq!(published.len(), 20, "{report:?}");
    assert_eq!(report.events_published, report.items_deleted);
}

#[tokio::test(start_paused = true)]
async fn notify_reports_an_item_written_again_after_a_delete_whose_answer_was_lost() {
    // The first DeleteItem of e0003 is applied, its answer lost, and the application writes the
    // item again, live, before the retry, which finds it with another ttl. The delete happened
    // and no event can be sent for it now: it is reported by key, not counted as kept.
    let log = Arc::new(Mutex::new(vec![]));
    let table = lose_delete_answer(with_items(10, 0, log.clone()), ["e0003"]);
    let put_back = Change::Put((NOW + 3600) as f64);
    let table = Arc::new(table.change(Op::Delete, When::Key("e0003".into()), "e0003", put_back));
    let sink = Arc::new(ScriptedSink::accepting(log.clone()));
    let (_, report) = sweep_notify(table.clone(), sink.clone(), DeleteMode::Conditional).await;
    assert!(log.lock().unwrap().contains(&"deleted e0003".to_string()));
    assert_eq!(
        table.ids(),
        vec!["e0003".to_string()],
        "the live rewrite stays"
    );
    assert_eq!(report.items_skipped, 0, "{report:?}");
    assert_eq!(report.items_failed, 1, "{report:?}");
    assert_eq!(report.failed_keys[0].key["id"]["S"], "e0003", "{report:?}");
    assert!(
        report.failed_keys[0].reason.contains("written again"),
        "{report:?}"
    );
    assert_eq!(report.events_published, 9, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn notify_publishes_an_item_deleted_by_an_attempt_whose_answer_was_lost() {
    // The first DeleteItem of these items is applied, but its answer is a timeout: the retry
    // finds them gone. They were deleted by this sweep all the same and are owed an event.
    let log = Arc::new(Mutex::new(vec![]));
    let lost: HashSet<String> = (0..30).step_by(3).map(|n| format!("e{n:04}")).collect();
    let table = Arc::new(lose_delete_answer(with_items(30, 0, log.clone()), &lost));
    let sink = Arc::new(ScriptedSink::accepting(log.clone()));
    let (_, report) = sweep_notify(table.clone(), sink.clone(), DeleteMode::Conditional).await;
    assert!(table.ids().is_empty(), "every expired item is deleted");
    assert_eq!(report.items_deleted, 20);
    assert_eq!(report.items_gone, 10, "found gone by the retry");
    let deleted: HashSet<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| l.strip_prefix("deleted ").map(str::to_owned))
        .collect();
    assert_eq!(deleted.len(), 30);
    let published: HashSet<String> = sink.accepted_ids();
    let missing: Vec<&String> = deleted.difference(&published).collect();
    assert!(missing.is_empty(), "deleted without an event: {missing:?}");
    assert_eq!(report.events_published, 30);
}

#[tokio::test(start_paused = true)]
async fn archive_deletes_nothing_the_sink_refused() {
    // Refused outright, and refused (retryable) until the retries run out.
    for retryable in [false, true] {
        let log = Arc::new(Mutex::new(vec![]));
        let table = Arc::new(with_items(30, 0, log.clone()));
        let sink = Arc::new(ScriptedSink::new(log.clone(), move |_, batch| {
            Ok(vec![
                EntryResult::Failed {
                    retryable,
                    reason: "AccessDeniedException: not allowed".into()
                };
                batch.len()
            ])
        }));
        let (_, report) = sweep_archive(table.clone(), sink.clone()).await;
        assert_eq!(table.ids().len(), 30, "every item is still in the table");
        assert_eq!(table.deleted.load(SeqCst), 0);
        assert_eq!(report.items_deleted, 0);
        assert_eq!(report.items_failed, 30, "reported, not skipped");
        assert_eq!(report.events_failed, 30);
        assert_eq!(report.failed_event_ids.len(), 30);
        assert!(report
            .failed_keys
            .iter()
            .all(|f| f.reason.starts_with("expiry event not accepted")));
        assert!(!report.is_success());
        let calls = sink.calls.load(SeqCst);
        // Chunks of 25 and 5: batches of 10, 10, 5 and 5, each tried 1 + 3 times if retryable.
        let expected = if retryable { 4 * 4 } else { 4 };
        assert_eq!(calls, expected);
    }
}

#[tokio::test(start_paused = true)]
async fn archive_deletes_exactly_what_was_accepted_and_only_after() {
    let log = Arc::new(Mutex::new(vec![]));
    let table = Arc::new(with_items(40, 0, log.clone()));
    // Odd items refused for good; even ones accepted (after one throttled try for some).
    let sink = Arc::new(ScriptedSink::new(log.clone(), |call, batch| {
        Ok(batch
            .iter()
            .map(|e| {
                let id = e.detail()["key"]["id"]["S"].as_str().unwrap().to_owned();
                let n: usize = id[1..].parse().unwrap();
                if n % 2 == 1 {
                    EntryResult::Failed {
                        retryable: false,
                        reason: "ValidationException".into(),
                    }
                } else if call < 4 && n % 4 == 0 {
                    EntryResult::Failed {
                        retryable: true,
                        reason: "ThrottlingException".into(),
                    }
                } else {
                    EntryResult::Accepted
                }
            })
            .collect())
    }));
    let (_, report) = sweep_archive(table.clone(), sink.clone()).await;
    let left: Vec<String> = table.ids();
    assert_eq!(left.len(), 20);
    assert!(left
        .iter()
        .all(|id| id[1..].parse::<usize>().unwrap() % 2 == 1));
    assert_eq!(report.items_deleted, 20);
    assert_eq!(report.events_published, 20);
    assert_eq!(report.events_failed, 20);
    assert!(report.events_retried > 0);
    let log = log.lock().unwrap();
    for (i, line) in log.iter().enumerate() {
        if let Some(id) = line.strip_prefix("deleted ") {
            assert!(
                log[..i].contains(&format!("accepted Item Expired {id}")),
                "{id} deleted before its event was accepted"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn archive_cancels_an_expiry_whose_ttl_changed_with_the_same_id() {
    let log = Arc::new(Mutex::new(vec![]));
    let table = Arc::new(extend_after_read(
        with_items(10, 0, log.clone()),
        ["e0003", "e0007"],
    ));
    let sink = Arc::new(ScriptedSink::accepting(log.clone()));
    let (_, report) = sweep(
        table.clone(),
        sink.clone(),
        EventsMode::Archive,
        DeleteMode::Conditional,
        ItemSource::Read,
    )
    .await;
    assert_eq!(table.ids(), vec!["e0003", "e0007"]);
    assert_eq!(report.items_deleted, 8);
    assert_eq!(report.items_skipped, 2);
    assert_eq!(report.events_published, 10);
    assert_eq!(report.events_cancelled, 2);
    assert!(report.is_success());
    let accepted = sink.accepted();
    for id in ["e0003", "e0007"] {
        let of = |kind: &str| {
            accepted
                .iter()
                .filter(|e| e.kind.detail_type() == kind && e.detail()["key"]["id"]["S"] == id)
                .cloned()
                .collect::<Vec<_>>()
        };
        let (expired, cancelled) = (of("Item Expired"), of("Item Expiry Cancelled"));
        assert_eq!((expired.len(), cancelled.len()), (1, 1), "{id}");
        assert_eq!(expired[0].id, cancelled[0].id);
        assert_eq!(cancelled[0].detail()["reason"], "ttl changed");
        // EXPIRY_EVENTS_ITEM=read: the expiry carries the item as read, the cancellation not.
        assert_eq!(
            expired[0].detail()["item"]["payload"]["S"],
            format!("data of {id}")
        );
        assert!(cancelled[0].detail().get("item").is_none());
    }
    assert_eq!(
        accepted
            .iter()
            .filter(|e| e.kind.detail_type() == "Item Expiry Cancelled")
            .count(),
        2,
        "no cancellation for the items deleted"
    );
}

#[tokio::test(start_paused = true)]
async fn failed_entries_are_retried_alone_and_published_once() {
    let log = Arc::new(Mutex::new(vec![]));
    let table = Arc::new(with_items(25, 0, log.clone()));
    let seen = Arc::new(Mutex::new(Vec::<Vec<String>>::new()));
    let record = seen.clone();
    // The first call of each batch fails its even entries; later calls accept.
    let sink = Arc::new(ScriptedSink::new(log.clone(), move |_, batch| {
        let ids: Vec<String> = batch.iter().map(|e| e.id.clone()).collect();
        let first_time = !record
            .lock()
            .unwrap()
            .iter()
            .flatten()
            .any(|i| ids.contains(i));
        record.lock().unwrap().push(ids);
        Ok(batch
            .iter()
            .enumerate()
            .map(|(i, _)| {
                if first_time && i % 2 == 0 {
                    EntryResult::Failed {
                        retryable: true,
                        reason: "InternalFailure".into(),
                    }
                } else {
                    EntryResult::Accepted
                }
            })
            .collect())
    }));
    let (_, report) = sweep_notify(table.clone(), sink.clone(), DeleteMode::Batch).await;
    assert_eq!(report.events_published, 25);
    assert_eq!(report.events_failed, 0);
    let accepted = sink.accepted();
    let unique: HashSet<&String> = accepted.iter().map(|e| &e.id).collect();
    assert_eq!(
        (accepted.len(), unique.len()),
        (25, 25),
        "each accepted once"
    );
    // 25 events: batches of 10, 10, 5 with 5, 5, 3 failures, then the 13 failed ones resent.
    let sent: usize = seen.lock().unwrap().iter().map(Vec::len).sum();
    assert_eq!(sent, 25 + 13, "only the failed entries are sent again");
    assert_eq!(report.events_retried, 13);
}

#[tokio::test(start_paused = true)]
async fn notify_events_that_cannot_be_published_are_reported_not_dropped() {
    let log = Arc::new(Mutex::new(vec![]));
    let table = Arc::new(with_items(30, 0, log.clone()));
    let sink = Arc::new(ScriptedSink::new(log.clone(), |n, batch| {
        if n % 2 == 0 {
            Err(SinkError::new(true, "PutEvents failed (Transient): 503"))
        } else {
            Ok(vec![
                EntryResult::Failed {
                    retryable: true,
                    reason: "ThrottlingException: slow down".into()
                };
                batch.len()
            ])
        }
    }));
    let (_, report) = sweep_notify(table.clone(), sink.clone(), DeleteMode::Batch).await;
    assert_eq!(report.items_deleted, 30, "notify: deleted first");
    assert_eq!(report.events_published, 0);
    assert_eq!(report.events_failed, 30);
    assert_eq!(report.failed_event_ids.len(), 30);
    assert!(report
        .failed_event_ids
        .iter()
        .all(|f| f.reason.contains("after 4 attempts")));
    let ids: HashSet<&str> = report
        .failed_event_ids
        .iter()
        .map(|f| f.id.as_str())
        .collect();
    assert_eq!(ids.len(), 30);
    assert!(!report.is_success(), "a lost event fails the sweep");
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(v["events_failed"], 30);
    assert_eq!(v["failed_event_ids"][0]["id"].as_str().unwrap().len(), 64);
}

#[tokio::test(start_paused = true)]
async fn a_slow_sink_pauses_deletes_instead_of_piling_up_events() {
    let log = Arc::new(Mutex::new(vec![]));
    let table = Arc::new(with_items(2000, 0, log.clone()));
    let mut sink = ScriptedSink::accepting(log.clone());
    sink.delay = Duration::from_millis(200);
    sink.table = Some(table.clone());
    let sink = Arc::new(sink);
    let concurrency = 2;
    let events = Events::new(
        &events_config(EventsMode::Notify, DeleteMode::Batch, ItemSource::Off),
        sink.clone(),
    );
    let sweeper = mem_sweeper(table.clone(), options(DeleteMode::Batch, concurrency))
        .with_events(Arc::new(events));
    let now = Timestamp::from_secs(NOW);
    let report = sweeper
        .sweep_windows(now, &[Window::containing_instant(now, 60)], &Stop::never())
        .await;
    assert_eq!(report.events_published, 2000);
    let gap = sink.max_gap.load(SeqCst);
    assert!(
        gap <= 25 * concurrency,
        "{gap} items deleted but not yet published: more than the chunks in flight"
    );
    assert!(gap > 0, "the measure works");
}

#[tokio::test(start_paused = true)]
async fn archive_leaves_items_for_the_next_sweep_when_it_must_stop() {
    let log = Arc::new(Mutex::new(vec![]));
    let table = Arc::new(with_items(20, 0, log.clone()));
    let sink = Arc::new(ScriptedSink::new(log.clone(), |_, _| {
        Err(SinkError::new(true, "timeout"))
    }));
    let events =
        archive_events(sink.clone()).with_backoff(Duration::from_secs(1), Duration::from_secs(10));
    let report = sweep_archive_stopping(table.clone(), events, Duration::from_millis(1500)).await;
    assert_eq!(table.ids().len(), 20, "nothing deleted");
    assert_eq!(report.items_deleted, 0);
    assert_eq!(report.items_left + report.items_failed, 20, "{report:?}");
    assert_eq!(report.events_failed, 20);
}

#[tokio::test(start_paused = true)]
async fn auto_items_come_from_conditional_deletes_in_notify_mode_only() {
    for (delete_mode, with_item) in [(DeleteMode::Conditional, true), (DeleteMode::Batch, false)] {
        let log = Arc::new(Mutex::new(vec![]));
        let table = Arc::new(with_items(12, 0, log.clone()));
        let sink = Arc::new(ScriptedSink::accepting(log.clone()));
        let (_, report) = sweep(
            table.clone(),
            sink.clone(),
            EventsMode::Notify,
            delete_mode,
            ItemSource::Auto,
        )
        .await;
        assert_eq!(report.events_published, 12);
        for e in sink.accepted() {
            let d = e.detail();
            let id = d["key"]["id"]["S"].as_str().unwrap();
            if with_item {
                assert_eq!(d["item"]["payload"]["S"], format!("data of {id}"));
            } else {
                assert!(
                    d.get("item").is_none(),
                    "{delete_mode:?}: no item without a read"
                );
            }
        }
    }
}

/// The accepted events of item `id`, in order.
fn accepted_of(sink: &ScriptedSink, id: &str) -> Vec<ExpiryEvent> {
    sink.accepted()
        .into_iter()
        .filter(|e| e.detail()["key"]["id"]["S"] == id)
        .collect()
}

/// The kinds of the accepted events of item `id`, in order.
fn accepted_kinds(sink: &ScriptedSink, id: &str) -> Vec<&'static str> {
    accepted_of(sink, id)
        .iter()
        .map(|e| e.kind.detail_type())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn archive_cancels_an_accepted_expiry_whose_delete_failed_once_its_ttl_changed() {
    // The sink accepts every expiry; then every delete is throttled until the retries run out.
    // Meanwhile the application extends e0002 and e0005 (they move to a window this sweep does
    // not read) and deletes e0007.
    let log = Arc::new(Mutex::new(vec![]));
    let table = extend_after_read(with_items(10, 0, log.clone()), ["e0002", "e0005"])
        .change(Op::Query, When::Always, "e0007", Change::Remove)
        .fault(Op::Delete, When::Always, Fault::Fail(ErrorKind::Throttled));
    let table = Arc::new(table);
    let sink = Arc::new(ScriptedSink::accepting(log.clone()));
    let (_, report) = sweep_archive(table.clone(), sink.clone()).await;
    assert_eq!(report.events_published, 10, "{report:?}");
    // The extended items: their expiry is cancelled, with its id, and they count as kept.
    for id in ["e0002", "e0005"] {
        assert_eq!(
            accepted_kinds(&sink, id),
            ["Item Expired", "Item Expiry Cancelled"],
            "{id}"
        );
    }
    assert_eq!(report.events_cancelled, 2, "{report:?}");
    assert_eq!(report.items_skipped, 2, "{report:?}");
    // The item the application deleted: the expiry stands, nothing more is owed.
    assert_eq!(accepted_kinds(&sink, "e0007"), ["Item Expired"]);
    assert_eq!(report.items_gone, 1, "{report:?}");
    // The rest are still expired with the ttl read: reported, for the next sweep to publish
    // again and delete.
    assert_eq!(report.items_failed, 7, "{report:?}");
    let failed: HashSet<String> = report
        .failed_keys
        .iter()
        .map(|f| f.key["id"]["S"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        failed.is_disjoint(&["e0002", "e0005", "e0007"].map(String::from).into()),
        "{failed:?}"
    );
    assert!(!report.is_success());
    assert_eq!(
        report.items_found,
        report.items_deleted
            + report.items_skipped
            + report.items_gone
            + report.items_failed
            + report.items_left
    );
    assert_eq!(table.ids().len(), 9, "nothing deleted");
    // The next sweep, with deletes working again, settles the rest with the same ids.
    let table = Arc::new(holding(table.items(), log.clone()));
    let (_, again) = sweep_archive(table.clone(), sink.clone()).await;
    assert_eq!(again.items_deleted, 7, "{again:?}");
    assert_eq!(table.ids(), ["e0002", "e0005"]);
}

#[tokio::test(start_paused = true)]
async fn archive_cancels_an_accepted_expiry_left_by_a_stop_once_its_ttl_changed() {
    // The sink takes 10 ms to accept; the sweep must stop after 5 ms: every expiry is accepted,
    // no delete is made. The application extended e0003 meanwhile.
    let log = Arc::new(Mutex::new(vec![]));
    let table = Arc::new(extend_after_read(with_items(6, 0, log.clone()), ["e0003"]));
    let mut sink = ScriptedSink::accepting(log.clone());
    sink.delay = Duration::from_millis(10);
    let sink = Arc::new(sink);
    let report = sweep_archive_stopping(
        table.clone(),
        archive_events(sink.clone()),
        Duration::from_millis(5),
    )
    .await;
    assert_eq!(report.events_published, 6, "{report:?}");
    assert_eq!(table.ids().len(), 6, "nothing deleted");
    assert_eq!(
        accepted_kinds(&sink, "e0003"),
        ["Item Expired", "Item Expiry Cancelled"]
    );
    assert_eq!(report.events_cancelled, 1, "{report:?}");
    assert_eq!(report.items_skipped, 1, "{report:?}");
    assert_eq!(
        report.items_left, 5,
        "the others, for the next sweep: {report:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn archive_without_the_re_read_reports_what_it_could_not_settle() {
    // As above, but the re-read is refused: nothing is cancelled on a guess, every item whose
    // delete failed stays reported as failed.
    let log = Arc::new(Mutex::new(vec![]));
    let table = extend_after_read(with_items(5, 0, log.clone()), ["e0002"])
        .fault(Op::Delete, When::Always, Fault::Fail(ErrorKind::Throttled))
        .fault(Op::Get, When::Always, Fault::Fail(ErrorKind::Auth));
    let table = Arc::new(table);
    let sink = Arc::new(ScriptedSink::accepting(log.clone()));
    let (_, report) = sweep_archive(table.clone(), sink.clone()).await;
    assert_eq!(report.events_published, 5, "{report:?}");
    assert_eq!(report.events_cancelled, 0, "{report:?}");
    assert_eq!(report.items_failed, 5, "{report:?}");
    assert!(!report.is_success());
    assert_eq!(table.ids().len(), 5);
}

/// What the engine guarantees when the process dies between an accepted expiry and its delete
/// (docs/events.md, "Archive"): nothing is deleted without an accepted expiry or while live; an
/// item whose ttl stayed is published again with the same id by the next sweep and deleted; an
/// item whose ttl changed before the next sweep is no longer in any window it reads, so it is
/// neither deleted nor cancelled — the expiry the consumer holds is not followed by anything.
#[tokio::test(start_paused = true)]
async fn archive_after_a_crash_between_expiry_and_delete() {
    let log = Arc::new(Mutex::new(vec![]));
    let table =
        Arc::new(with_items(4, 0, log.clone()).fault(Op::Delete, When::Always, Fault::Stall));
    let sink = Arc::new(ScriptedSink::accepting(log.clone()));
    let died = tokio::time::timeout(
        Duration::from_secs(60),
        sweep_archive(table.clone(), sink.clone()),
    )
    .await;
    assert!(died.is_err(), "the first sweep never got past its deletes");
    assert_eq!(sink.accepted().len(), 4, "every expiry was accepted");
    // After the crash the application extends e0001 (to a window the next sweep does not read).
    let mut items = table.items();
    items
        .get_mut("e0001")
        .unwrap()
        .insert("ttl".into(), AV::N((NOW + 3600).to_string()));
    let table = Arc::new(holding(items, log.clone()));
    let (_, report) = sweep_archive(table.clone(), sink.clone()).await;
    assert_eq!(report.items_deleted, 3, "{report:?}");
    assert_eq!(table.ids(), ["e0001"], "the extended item stays");
    for id in ["e0000", "e0002", "e0003"] {
        let ids: Vec<String> = accepted_of(&sink, id).into_iter().map(|e| e.id).collect();
        assert_eq!(ids.len(), 2, "{id}: published again");
        assert_eq!(ids[0], ids[1], "{id}: with the same id");
    }
    // The limit: nothing follows the extended item's accepted expiry.
    assert_eq!(accepted_kinds(&sink, "e0001"), ["Item Expired"]);
    assert_eq!(report.events_cancelled, 0);
}

/// A sink whose every answer is drawn from `seed`: accepted, refused (retryable or not), a whole
/// call failing, or a call the sink accepted whose answer was lost (the events are logged as
/// accepted, the publisher sees an error and sends them again).
fn chaotic_sink(log: Arc<Mutex<Vec<String>>>, seed: u64) -> ScriptedSink {
    let rng = Mutex::new(fastrand::Rng::with_seed(seed));
    let lost_log = log.clone();
    ScriptedSink::new(log, move |_, batch| {
        let mut rng = rng.lock().unwrap();
        match rng.u8(0..20) {
            0 => return Err(SinkError::new(true, "503 Service Unavailable")),
            1 => {
                for e in batch {
                    let id = e.detail()["key"]["id"]["S"].as_str().unwrap().to_owned();
                    lost_log
                        .lock()
                        .unwrap()
                        .push(format!("accepted {} {id}", e.kind.detail_type()));
                }
                return Err(SinkError::new(
                    true,
                    "connection reset after the request was sent",
                ));
            }
            _ => {}
        }
        Ok(batch
            .iter()
            .map(|_| match rng.u8(0..10) {
                0..=5 => EntryResult::Accepted,
                6..=8 => EntryResult::Failed {
                    retryable: true,
                    reason: "ThrottlingException".into(),
                },
                _ => EntryResult::Failed {
                    retryable: false,
                    reason: "ValidationException".into(),
                },
            })
            .collect())
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
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let log = Arc::new(Mutex::new(vec![]));
            let ids = |set: &BTreeSet<usize>| set.iter().map(|n| format!("e{n:04}")).collect::<Vec<_>>();
            let table = extend_after_read(with_items(items, 3, log.clone()), ids(&extended));
            let table = throttle_then_remove(table, ids(&throttled_then_removed));
            let table = for_each(table, ids(&unprocessed), |t, id| {
                t.fault(Op::BatchDelete, When::Key(id.into()), Fault::Unprocessed)
            });
            let before: BTreeMap<String, f64> = table
                .items()
                .iter()
                .map(|(id, item)| (id.clone(), ttl_of(item)))
                .collect();
            let sink = Arc::new(chaotic_sink(log.clone(), seed));
            // Notify mode with both delete modes: batch (the default) on odd seeds.
            let (mode, delete_mode) = if archive {
                (EventsMode::Archive, DeleteMode::Conditional)
            } else if seed % 2 == 1 {
                (EventsMode::Notify, DeleteMode::Batch)
            } else {
                (EventsMode::Notify, DeleteMode::Conditional)
            };
            let table = Arc::new(table);
            let (_, report) = sweep(table.clone(), sink.clone(), mode, delete_mode, ItemSource::Off).await;
            let log = log.lock().unwrap();
            for (i, line) in log.iter().enumerate() {
                if archive {
                    if let Some(id) = line.strip_prefix("deleted ") {
                        assert!(log[..i].contains(&format!("accepted Item Expired {id}")), "{id}: {log:?}");
                    }
                } else if let Some(id) = line.strip_prefix("accepted Item Expired ") {
                    assert!(log[..i].contains(&format!("deleted {id}")), "{id}: {log:?}");
                }
                if let Some(id) = line.strip_prefix("accepted Item Expiry Cancelled ") {
                    assert!(archive && table.ids().contains(&id.to_owned()), "{id}");
                }
            }
            assert_eq!(
                report.items_found,
                report.items_deleted + report.items_skipped + report.items_gone
                    + report.items_failed + report.items_left,
                "{report:?}"
            );
            assert_eq!(report.items_found, items as u64);
            for e in sink.accepted() {
                let id = e.detail()["key"]["id"]["S"].as_str().unwrap().to_owned();
                assert!(before[&id] < NOW as f64, "events only for expired items");
                assert_eq!(e.id, event_id(TABLE, &key(&id), before[&id]));
            }
            if !archive {
                // Every deletion's event is accepted or reported, and only a deletion's.
                assert_eq!(
                    report.items_deleted,
                    report.events_published + report.events_failed,
                    "{report:?}"
                );
                // Every item this sweep deleted has its event; none that someone else deleted.
                let deleted: BTreeSet<String> = log
                    .iter()
                    .filter_map(|l| l.strip_prefix("deleted ").map(str::to_owned))
                    .collect();
                // (Notify mode publishes no cancellations: every accepted event is an expiry.)
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
