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

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue as AV;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use ttl_sweeper::engine::hook::{BoxFuture, Delivery, EventTally, Expiry, ExpiryHook, Publication};
use ttl_sweeper::engine::{run_ticks, Checkpoint, DeleteMode, Stop, SweepOptions, Sweeper, Ticks};
use ttl_sweeper::expiry::{Layout, Timestamp};
use ttl_sweeper::store::{
    ConditionalOutcome, ErrorKind, Key, Page, Store, StoreError, TableSchema,
};

/// The sweep instant of every scenario, epoch seconds (a minute boundary).
const T0: i64 = 1_800_000_000;

/// One item: its ttl and the index partition it is listed under.
#[derive(Debug, Clone)]
struct Item {
    ttl: f64,
    partition: String,
}

/// An in-memory table with its (window, ttl) index, whose requests take virtual time.
#[derive(Default)]
struct Mem {
    layout: Layout,
    items: Mutex<BTreeMap<String, Item>>,
    /// Virtual time each `BatchWriteItem` takes.
    batch_delay: Duration,
    /// Virtual time each `Query` takes (a DynamoDB answering slowly, or its retries).
    query_delay: Duration,
    /// Virtual time each conditional `DeleteItem` takes (throttled, or a slow server).
    conditional_delay: Duration,
    /// Virtual time each `BatchGetItem` takes.
    get_delay: Duration,
    /// This many `BatchWriteItem` calls apply their deletes, then answer a timeout and cancel
    /// `cancel_on_failure` (the sweep's stop).
    fail_after_apply: AtomicUsize,
    cancel_on_failure: Option<CancellationToken>,
    /// This many `BatchWriteItem` calls answer a timeout and cancel `cancel_on_failure` at once,
    /// and apply their deletes 3 s later (a request that outlived its client's timeout).
    apply_late: AtomicUsize,
    /// `BatchGetItem` fails.
    reads_fail: bool,
    /// This many `BatchWriteItem` calls delete only their first key and leave the rest
    /// unprocessed.
    leave_unprocessed: AtomicUsize,
    /// This many `BatchWriteItem` calls leave their first key unprocessed and name it in a form
    /// that matches no key sent (a Number written differently, say).
    rename_unprocessed: AtomicUsize,
    /// When each `BatchWriteItem` was sent, with the keys it deleted.
    batch_calls: Mutex<Vec<(Instant, Vec<String>)>>,
    /// Cancel the token once this many queries were answered.
    stop_after: Mutex<Option<(usize, CancellationToken)>>,
    /// When each key was last listed by a query, and the largest age (virtual time since that
    /// listing) of a key when a `BatchWriteItem` carrying it was sent.
    listed_at: Mutex<BTreeMap<String, Instant>>,
    max_sent_age: Mutex<Duration>,
    queries: AtomicUsize,
    /// Keys listed by queries and not yet answered by a delete, now and at the most.
    outstanding: AtomicUsize,
    max_outstanding: AtomicUsize,
    /// The renamed unprocessed key of the call under way (see `rename_unprocessed`).
    renamed: Mutex<Vec<Key>>,
    /// Items a `BatchWriteItem` deleted while their ttl was not past the virtual clock.
    destroyed_live: Mutex<Vec<String>>,
    checkpoint: Mutex<Option<Timestamp>>,
    started: Option<Instant>,
    /// Keys whose late-applied delete landed (see `apply_late`), removed at the next look.
    late: Arc<Mutex<Vec<String>>>,
}

impl Mem {
    fn new(layout: Layout) -> Self {
        Mem {
            layout,
            started: Some(Instant::now()),
            ..Mem::default()
        }
    }

    /// The virtual wall clock: `T0` when the scenario started.
    fn clock(&self) -> f64 {
        T0 as f64 + self.started.map_or(0.0, |s| s.elapsed().as_secs_f64())
    }

    fn put(&self, id: &str, ttl: f64) {
        let partition = self.layout.window_for(ttl, &AV::S(id.into())).unwrap();
        self.items
            .lock()
            .unwrap()
            .insert(id.into(), Item { ttl, partition });
    }

    fn has(&self, id: &str) -> bool {
        self.land_late();
        self.items.lock().unwrap().contains_key(id)
    }

    /// Applies the deletes that landed late.
    fn land_late(&self) {
        let landed = std::mem::take(&mut *self.late.lock().unwrap());
        let mut items = self.items.lock().unwrap();
        for id in landed {
            items.remove(&id);
        }
    }

    fn ids(&self) -> Vec<String> {
        self.land_late();
        self.items.lock().unwrap().keys().cloned().collect()
    }

    fn schema(&self) -> TableSchema {
        TableSchema {
            table_name: "sessions".into(),
            index_name: "expiry".into(),
            key_attributes: vec!["id".into()],
            layout: self.layout.clone(),
        }
    }
}

fn id_of(key: &Key) -> String {
    match &key["id"] {
        AV::S(s) => s.clone(),
        other => panic!("{other:?}"),
    }
}

fn key(id: &str) -> Key {
    [("id".to_string(), AV::S(id.into()))].into()
}

impl Store for Mem {
    async fn query_expired(
        &self,
        _: &TableSchema,
        partition: &str,
        now: Timestamp,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        tokio::time::sleep(self.query_delay).await;
        let after = start.as_ref().map(id_of);
        let limit = limit.map_or(usize::MAX, |l| l as usize);
        let items = self.items.lock().unwrap();
        let mut page: Vec<Key> = items
            .iter()
            .filter(|(id, i)| {
                i.partition == partition
                    && i.ttl < now.as_secs_f64()
                    && after.as_ref().is_none_or(|a| *id > a)
            })
            .take(limit.saturating_add(1))
            .map(|(id, i)| {
                let mut k = key(id);
                k.insert("ttl".into(), AV::N(i.ttl.to_string()));
                k
            })
            .collect();
        let next = (page.len() > limit).then(|| {
            page.truncate(limit);
            key(&id_of(page.last().unwrap()))
        });
        drop(items);
        let n = self.queries.fetch_add(1, SeqCst) + 1;
        if let Some((after, token)) = &*self.stop_after.lock().unwrap() {
            if n >= *after {
                token.cancel();
            }
        }
        let mut listed = self.listed_at.lock().unwrap();
        for k in &page {
            listed.insert(id_of(k), Instant::now());
        }
        let held = self.outstanding.fetch_add(page.len(), SeqCst) + page.len();
        self.max_outstanding.fetch_max(held, SeqCst);
        Ok(Page { items: page, next })
    }

    async fn batch_delete(&self, _: &TableSchema, keys: &[&Key]) -> Result<Vec<Key>, StoreError> {
        if self.apply_late.load(SeqCst) > 0 {
            self.apply_late.fetch_sub(1, SeqCst);
            if let Some(token) = &self.cancel_on_failure {
                token.cancel();
            }
            let late = self.late.clone();
            let ids: Vec<String> = keys.iter().copied().map(id_of).collect();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(3)).await;
                late.lock().unwrap().extend(ids);
            });
            return Err(StoreError::new(
                ErrorKind::Transient,
                "BatchWriteItem",
                "timed out (the request is applied later)",
            ));
        }
        let keys = keys.to_vec();
        {
            let listed = self.listed_at.lock().unwrap();
            let mut max = self.max_sent_age.lock().unwrap();
            for k in &keys {
                *max = (*max).max(listed[&id_of(k)].elapsed());
            }
        }
        let sent = Instant::now();
        tokio::time::sleep(self.batch_delay).await;
        let clock = self.clock();
        let (keys, unprocessed) = match self
            .leave_unprocessed
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
        {
            Ok(_) if keys.len() > 1 => (keys[..1].to_vec(), keys[1..].to_vec()),
            _ => (keys, vec![]),
        };
        let renamed = self
            .rename_unprocessed
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok();
        let (keys, unprocessed) = if renamed {
            let mut named = keys[0].clone();
            named.insert("id".into(), AV::S(format!("{} ", id_of(keys[0]))));
            self.renamed.lock().unwrap().push(named);
            (keys[1..].to_vec(), vec![])
        } else {
            (keys, unprocessed)
        };
        self.batch_calls
            .lock()
            .unwrap()
            .push((sent, keys.iter().copied().map(id_of).collect()));
        let mut items = self.items.lock().unwrap();
        for k in &keys {
            let id = id_of(k);
            if let Some(item) = items.remove(&id) {
                if item.ttl >= clock {
                    self.destroyed_live.lock().unwrap().push(id);
                }
            }
        }
        drop(items);
        let fail = self
            .fail_after_apply
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            if let Some(token) = &self.cancel_on_failure {
                token.cancel();
            }
            return Err(StoreError::new(
                ErrorKind::Transient,
                "BatchWriteItem",
                "timed out after the deletes were applied",
            ));
        }
        self.outstanding.fetch_sub(keys.len(), SeqCst);
        let mut unprocessed: Vec<Key> = unprocessed.into_iter().cloned().collect();
        unprocessed.append(&mut self.renamed.lock().unwrap());
        Ok(unprocessed)
    }

    async fn delete_if_expired(
        &self,
        _: &TableSchema,
        key: Key,
        ttl: &str,
        now: Timestamp,
        _: bool,
    ) -> Result<(ConditionalOutcome, Option<Key>), StoreError> {
        tokio::time::sleep(self.conditional_delay).await;
        self.outstanding.fetch_sub(1, SeqCst);
        let id = id_of(&key);
        let mut items = self.items.lock().unwrap();
        let outcome = match items.get(&id) {
            None => ConditionalOutcome::Gone,
            Some(i) if i.ttl < now.as_secs_f64() && ttl.parse() == Ok(i.ttl) => {
                items.remove(&id);
                ConditionalOutcome::Deleted
            }
            Some(_) => ConditionalOutcome::Kept,
        };
        Ok((outcome, None))
    }

    async fn get_items(
        &self,
        _: &TableSchema,
        keys: Vec<Key>,
        _: bool,
    ) -> Result<Vec<Key>, StoreError> {
        tokio::time::sleep(self.get_delay).await;
        self.land_late();
        if self.reads_fail {
            return Err(StoreError::new(
                ErrorKind::Transient,
                "BatchGetItem",
                "connection reset",
            ));
        }
        let items = self.items.lock().unwrap();
        let mut listed = self.listed_at.lock().unwrap();
        Ok(keys
            .into_iter()
            .filter_map(|mut k| {
                let id = id_of(&k);
                let item = items.get(&id)?;
                // A strongly consistent read of the item is a read too.
                listed.insert(id, Instant::now());
                k.insert("ttl".into(), AV::N(item.ttl.to_string()));
                Some(k)
            })
            .collect())
    }

    async fn read_checkpoint(&self, _: &str, _: &str) -> Result<Option<Timestamp>, StoreError> {
        Ok(*self.checkpoint.lock().unwrap())
    }

    async fn advance_checkpoint(
        &self,
        _: &str,
        _: &str,
        to: Timestamp,
        _: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut cp = self.checkpoint.lock().unwrap();
        let moved = cp.is_none_or(|c| to > c);
        if moved {
            *cp = Some(to);
        }
        Ok(moved)
    }
}

/// Sweep options with a checkpoint and `lookback` windows.
fn checkpointed(lookback: u32) -> SweepOptions {
    SweepOptions {
        lookback_windows: lookback,
        checkpoint: Some(Checkpoint {
            table: "checkpoints".into(),
            id: "sessions#expiry".into(),
            start_from: None,
        }),
        ..SweepOptions::default()
    }
}

/// Notify mode: records the `Item Expired` events it is given, and when, and accepts them all
/// (or, `hang`ing, never answers: a sink that does not answer and ignores the stop).
#[derive(Debug, Default)]
struct Recorder {
    expired: Mutex<Vec<String>>,
    published_at: Mutex<Vec<(String, Instant)>>,
    hang: bool,
}

impl ExpiryHook for Recorder {
    fn archive(&self) -> bool {
        false
    }

    fn read_items(&self) -> bool {
        false
    }

    fn event_id(&self, expiry: &Expiry) -> String {
        id_of(&expiry.key)
    }

    fn publish<'a>(
        &'a self,
        publications: Vec<Publication>,
        _stop: &'a Stop,
    ) -> BoxFuture<'a, (Vec<Delivery>, EventTally)> {
        Box::pin(async move {
            if self.hang {
                std::future::pending::<()>().await;
            }
            let mut expired = self.expired.lock().unwrap();
            for p in &publications {
                if let Publication::Expired(e) = p {
                    expired.push(id_of(&e.key));
                    self.published_at
                        .lock()
                        .unwrap()
                        .push((id_of(&e.key), Instant::now()));
                }
            }
            let tally = EventTally {
                published: publications.len() as u64,
                ..EventTally::default()
            };
            (vec![Delivery::Accepted; publications.len()], tally)
        })
    }
}

#[tokio::test(start_paused = true)]
async fn batch_mode_keeps_keys_rewritten_while_their_chunk_waited() {
    // 3,000 expired keys in one window, every BatchWriteItem taking 0.25 s, one request at a
    // time: the last chunk of a 3,000-key page would wait 30 s.
    let started = Instant::now();
    let store = Arc::new(Mem {
        batch_delay: Duration::from_millis(250),
        ..Mem::new(Layout::default())
    });
    for i in 0..3_000 {
        store.put(&format!("k{i:04}"), (T0 - 30) as f64);
    }
    let options = SweepOptions {
        max_concurrency: 1,
        ..SweepOptions::default()
    };
    let sweeper = Sweeper::new(store.clone(), store.schema(), options);
    // 4 s into the sweep the application deletes and writes again every tenth key, with a ttl
    // an hour ahead.
    let rewritten: Vec<String> = (0..3_000).step_by(10).map(|i| format!("k{i:04}")).collect();
    let writer = tokio::spawn({
        let (store, rewritten) = (store.clone(), rewritten.clone());
        async move {
            tokio::time::sleep(Duration::from_secs(4)).await;
            for id in &rewritten {
                store.put(id, (T0 + 3_600) as f64);
            }
        }
    });
    let report = sweeper
        .sweep(Timestamp::from_secs(T0), &Stop::never())
        .await;
    writer.await.unwrap();

    // No key went out in a BatchWriteItem longer than the bound after the query that listed it.
    let max_age = *store.max_sent_age.lock().unwrap();
    assert!(
        max_age <= ttl_sweeper::engine::BATCH_MAX_READ_AGE,
        "a key was sent {max_age:?} after its read; {report:?}"
    );
    // So a rewritten key can be destroyed only if it was read within the bound (plus the
    // request's own time) before the rewrite; the others all survive. (Before the check on
    // every send: 269 of the 300 rewritten keys destroyed.)
    let destroyed = store.destroyed_live.lock().unwrap().clone();
    let listed = store.listed_at.lock().unwrap().clone();
    let rewrite_at = started + Duration::from_secs(4);
    for id in &destroyed {
        let read = listed[id];
        assert!(
            rewrite_at.duration_since(read)
                <= ttl_sweeper::engine::BATCH_MAX_READ_AGE + Duration::from_millis(250),
            "{id} destroyed though read {:?} before its rewrite",
            rewrite_at.duration_since(read)
        );
    }
    assert!(
        destroyed.len() < 30,
        "{} destroyed; {report:?}",
        destroyed.len()
    );
    for id in rewritten.iter().filter(|id| !destroyed.contains(id)) {
        assert!(store.has(id), "rewritten {id} was deleted");
    }
    // Everything else went.
    assert_eq!(
        store.ids().len(),
        rewritten.len() - destroyed.len(),
        "{report:?}"
    );
    // The read-ahead budget (`READ_AHEAD_ROUNDS` rounds of chunks) reads no faster than the
    // deletes go: no key waited long enough to need a second read (before it, 3,000 keys were
    // read at once and most of them aged past the bound).
    assert_eq!(
        report.items_reread + report.items_conditional,
        0,
        "{report:?}"
    );
    assert_eq!(report.items_failed + report.items_left, 0, "{report:?}");
    assert_eq!(
        report.items_deleted + report.items_skipped + report.items_gone,
        report.items_found,
        "{report:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn batch_mode_checks_every_key_again_after_a_slow_conditional_pass() {
    // Pages of 30 keys, each query taking 2.5 s, one request at a time: the first page's last
    // 5 keys wait for the second page and share its chunk, already stale when it goes out.
    // Their conditional deletes take 1 s each; the second page's keys must not go out in the
    // BatchWriteItem that follows as if they were still fresh.
    let started = Instant::now();
    let store = Arc::new(Mem {
        query_delay: Duration::from_millis(2_500),
        conditional_delay: Duration::from_secs(1),
        get_delay: Duration::from_secs(1),
        ..Mem::new(Layout::default())
    });
    for i in 0..40 {
        store.put(&format!("k{i:02}"), (T0 - 30) as f64);
    }
    let options = SweepOptions {
        max_concurrency: 1,
        page_limit: Some(30),
        ..SweepOptions::default()
    };
    let sweeper = Sweeper::new(store.clone(), store.schema(), options);
    // At 7 s the application writes k35 (listed on the second page, at 5 s) again, live.
    let writer = tokio::spawn({
        let store = store.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(7)).await;
            store.put("k35", (T0 + 3_600) as f64);
        }
    });
    let report = sweeper
        .sweep(Timestamp::from_secs(T0), &Stop::never())
        .await;
    writer.await.unwrap();
    let max_age = *store.max_sent_age.lock().unwrap();
    assert!(
        max_age <= ttl_sweeper::engine::BATCH_MAX_READ_AGE,
        "a key was sent {max_age:?} after its read; {report:?}"
    );
    assert!(
        store.destroyed_live.lock().unwrap().is_empty(),
        "destroyed {:?}; sends {:?}; {report:?}",
        store.destroyed_live.lock().unwrap(),
        store
            .batch_calls
            .lock()
            .unwrap()
            .iter()
            .map(|(at, ids)| (at.duration_since(started), ids.clone()))
            .collect::<Vec<_>>()
    );
    assert!(store.has("k35"), "{report:?}");
    assert_eq!(store.ids(), vec!["k35".to_string()], "{report:?}");
    assert_eq!(report.items_failed + report.items_left, 0, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn an_unprocessed_key_named_unlike_any_key_sent_is_sent_again_not_counted_deleted() {
    // The first BatchWriteItem leaves one key unprocessed and returns it in a form that matches
    // no key sent: which key was left is unknown, so none may be counted as deleted.
    let store = Arc::new(Mem {
        rename_unprocessed: AtomicUsize::new(1),
        ..Mem::new(Layout::default())
    });
    for i in 0..25 {
        store.put(&format!("k{i:02}"), (T0 - 30) as f64);
    }
    let sweeper = Sweeper::new(store.clone(), store.schema(), SweepOptions::default());
    let report = sweeper
        .sweep(Timestamp::from_secs(T0), &Stop::never())
        .await;
    assert!(
        store.ids().is_empty(),
        "left: {:?}; {report:?}",
        store.ids()
    );
    assert_eq!(report.items_deleted, 25, "{report:?}");
    assert_eq!(report.items_failed + report.items_left, 0, "{report:?}");
    assert_eq!(store.batch_calls.lock().unwrap().len(), 2, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn a_sweep_holds_no_more_keys_than_its_read_ahead_whatever_the_pages() {
    // 16 windows of 2,000 expired keys each, every request taking 50 ms: whatever DynamoDB
    // would put in a page, the keys read and not yet deleted stay within the read-ahead budget
    // across all partitions, in both delete modes.
    for delete_mode in [DeleteMode::Batch, DeleteMode::Conditional] {
        let store = Arc::new(Mem {
            batch_delay: Duration::from_millis(50),
            query_delay: Duration::from_millis(50),
            conditional_delay: Duration::from_millis(50),
            ..Mem::new(Layout::default())
        });
        for w in 0..16 {
            for i in 0..2_000 {
                store.put(&format!("k{w:02}{i:04}"), (T0 - 60 * w - 30) as f64);
            }
        }
        let options = SweepOptions {
            delete_mode,
            max_concurrency: 4,
            lookback_windows: 16,
            ..SweepOptions::default()
        };
        let sweeper = Sweeper::new(store.clone(), store.schema(), options);
        let report = sweeper
            .sweep(Timestamp::from_secs(T0), &Stop::never())
            .await;
        assert!(store.ids().is_empty(), "{delete_mode}: {report:?}");
        assert_eq!(report.items_deleted, 32_000, "{delete_mode}: {report:?}");
        let budget = ttl_sweeper::engine::READ_AHEAD_ROUNDS * 25 * (4 + 1);
        let held = store.max_outstanding.load(SeqCst);
        assert!(
            held <= budget,
            "{delete_mode}: {held} keys held at once, past the budget of {budget}"
        );
        assert_eq!(
            report.items_reread + report.items_conditional,
            0,
            "{delete_mode}"
        );
    }
}

/// `store` holding one chunk of 25 expired keys (`k00` to `k24`), swept in notify mode with
/// `hook` publishing the events.
fn one_notify_chunk(store: Mem, hook: Recorder) -> (Arc<Mem>, Arc<Recorder>, Sweeper<Arc<Mem>>) {
    let store = Arc::new(store);
    for i in 0..25 {
        store.put(&format!("k{i:02}"), (T0 - 30) as f64);
    }
    let hook = Arc::new(hook);
    let sweeper = Sweeper::new(store.clone(), store.schema(), SweepOptions::default())
        .with_events(hook.clone());
    (store, hook, sweeper)
}

/// A sweep in notify mode whose first BatchWriteItem deletes its 25 keys, then times out, and
/// the stop comes before the retry.
async fn stop_after_a_lost_answer(
    reads_fail: bool,
) -> (Arc<Mem>, Arc<Recorder>, ttl_sweeper::engine::SweepReport) {
    let token = CancellationToken::new();
    let (store, hook, sweeper) = one_notify_chunk(
        Mem {
            fail_after_apply: AtomicUsize::new(1),
            cancel_on_failure: Some(token.clone()),
            reads_fail,
            ..Mem::new(Layout::default())
        },
        Recorder::default(),
    );
    let stop = Stop::never().with_cancel(token);
    let report = sweeper.sweep(Timestamp::from_secs(T0), &stop).await;
    (store, hook, report)
}

#[tokio::test(start_paused = true)]
async fn notify_mode_settles_deletes_whose_answer_was_lost_at_the_stop() {
    let (store, hook, report) = stop_after_a_lost_answer(false).await;
    assert!(store.ids().is_empty(), "the lost attempt deleted them");
    let mut events = hook.expired.lock().unwrap().clone();
    events.sort();
    let want: Vec<String> = (0..25).map(|i| format!("k{i:02}")).collect();
    assert_eq!(
        events, want,
        "every deleted item gets its event; {report:?}"
    );
    assert_eq!(report.items_left, 0, "{report:?}");
    assert_eq!(report.items_gone, 25, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn notify_mode_reports_by_key_a_delete_that_may_still_land_after_the_stop() {
    // The attempt times out and the stop comes; the check finds the keys still there, and then
    // the request that timed out is applied. No event can follow, so each key is reported.
    let token = CancellationToken::new();
    let (store, hook, sweeper) = one_notify_chunk(
        Mem {
            apply_late: AtomicUsize::new(1),
            cancel_on_failure: Some(token.clone()),
            ..Mem::new(Layout::default())
        },
        Recorder::default(),
    );
    let report = sweeper
        .sweep(Timestamp::from_secs(T0), &Stop::never().with_cancel(token))
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(store.ids().is_empty(), "the late request deleted them all");
    assert!(hook.expired.lock().unwrap().is_empty());
    assert_eq!(report.items_failed, 25, "{report:?}");
    assert_eq!(report.items_left, 0, "{report:?}");
    assert!(
        report.failed_keys[0].reason.contains("may still delete it"),
        "{:?}",
        report.failed_keys[0]
    );
}

#[tokio::test(start_paused = true)]
async fn notify_mode_reports_by_key_what_it_cannot_settle_at_the_stop() {
    let (_store, hook, report) = stop_after_a_lost_answer(true).await;
    assert!(hook.expired.lock().unwrap().is_empty());
    // Not silently "left": each key is reported, with why.
    assert_eq!(report.items_failed, 25, "{report:?}");
    assert_eq!(report.failed_keys.len(), 25);
    assert!(
        report.failed_keys[0].reason.contains("may have deleted it"),
        "{:?}",
        report.failed_keys[0]
    );
    assert!(!report.is_success());
}

#[tokio::test(start_paused = true)]
async fn notify_mode_publishes_each_attempts_deletes_before_waiting_to_retry_the_rest() {
    // One chunk of 25 keys; four BatchWriteItem calls in a row delete one key each and leave the
    // rest unprocessed, so the chunk takes four backoffs. A crash during those waits must not
    // take the events of the keys already deleted with it: they go out before each wait.
    let (store, hook, sweeper) = one_notify_chunk(
        Mem {
            leave_unprocessed: AtomicUsize::new(4),
            ..Mem::new(Layout::default())
        },
        Recorder::default(),
    );
    let report = sweeper
        .sweep(Timestamp::from_secs(T0), &Stop::never())
        .await;
    assert_eq!(report.items_deleted, 25, "{report:?}");
    assert_eq!(report.events_published, 25, "{report:?}");
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
    use ttl_sweeper::lambda::handler::{handle, HandlerError, HandlerSettings};
    // Notify mode with a sink that never answers and ignores the stop: the handler's last
    // resort drops the sweep before the deadline. The 25 items it deleted are reported by event
    // id, not lost with the dropped sweep.
    let (store, _hook, sweeper) = one_notify_chunk(
        Mem::new(Layout::default()),
        Recorder {
            hang: true,
            ..Recorder::default()
        },
    );
    let settings = HandlerSettings {
        namespace: "Test".into(),
        tick: None,
        schedule: Duration::from_secs(60),
        handoff: Duration::from_secs(10),
    };
    let clock = || Timestamp::from_secs(T0);
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
    let want: Vec<String> = (0..25).map(|i| format!("k{i:02}")).collect();
    assert_eq!(reported, want, "{report:?}");
    assert_eq!(report.events_failed, 25, "{report:?}");
    assert!(sweeper.unpublished_events().is_empty(), "taken once");
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_does_not_wait_for_a_query_that_is_slow_to_answer() {
    // A query that takes a minute (DynamoDB slow, or its retries); SIGTERM a second in. The sweep
    // ends at once: the read is given up, nothing it would have found is deleted.
    let store = Arc::new(Mem {
        query_delay: Duration::from_secs(60),
        ..Mem::new(Layout::default())
    });
    store.put("k0", (T0 - 30) as f64);
    let sweeper = Sweeper::new(store.clone(), store.schema(), SweepOptions::default());
    let token = CancellationToken::new();
    let sigterm = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        sigterm.cancel();
    });
    let started = Instant::now();
    let report = sweeper
        .sweep(Timestamp::from_secs(T0), &Stop::never().with_cancel(token))
        .await;
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
    let store = Arc::new(Mem::new(layout.clone()));
    *store.checkpoint.lock().unwrap() = Some(Timestamp::from_secs(before));
    // one expired item in every minute of the backlog
    for m in 0..120 {
        store.put(&format!("m{m:03}"), (before + 60 * m + 30) as f64);
    }
    for run in 0..5 {
        let token = CancellationToken::new();
        let so_far = store.queries.load(SeqCst);
        *store.stop_after.lock().unwrap() = Some((so_far + 600, token.clone()));
        let options = checkpointed(1);
        let sweeper = Sweeper::new(store.clone(), store.schema(), options);
        let stop = Stop::never().with_cancel(token);
        let report = sweeper.sweep(Timestamp::from_secs(T0), &stop).await;
        let after = store.checkpoint.lock().unwrap().unwrap().secs();
        assert!(
            after > *checkpoints.last().unwrap() || after >= T0 - 120,
            "run {run}: the checkpoint did not move from {}: {report:?}",
            checkpoints.last().unwrap()
        );
        // whatever is older than the checkpoint was deleted
        for id in store.ids() {
            let m: i64 = id[1..].parse().unwrap();
            assert!(
                before + 60 * m + 30 > after,
                "run {run}: {id} left behind {after}"
            );
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
        Timestamp::from_secs(T0),
        1,
        15,
        Some(Timestamp::from_secs(T0 - 30 * 86_400)),
        30 * 86_400,
    );
    assert_eq!(plan.recent.len(), 16);
    assert_eq!(plan.catchup.len(), 30 * 86_400 - 16);
    let mut catchup = plan.catchup;
    let first = catchup.slice(3);
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
    let store = Arc::new(Mem::new(layout));
    for s in (5..12 * 60).step_by(5) {
        store.put(&format!("s{s:04}"), (T0 + s) as f64);
    }
    let options = SweepOptions {
        lookback_windows: 7,
        ..SweepOptions::default()
    };
    let sweeper = Sweeper::new(store.clone(), store.schema(), options);
    let clock = {
        let store = store.clone();
        move || Timestamp::from_millis((store.clock() * 1000.0) as i64)
    };
    let ticks = Ticks {
        every: Duration::from_secs(300),
        full_every: Duration::from_secs(60),
        until: Some(Instant::now() + Duration::from_secs(11 * 60)),
    };
    let mut last_tick = Timestamp::from_secs(T0);
    let report = run_ticks(
        &sweeper,
        Timestamp::from_secs(T0),
        &clock,
        &ticks,
        &Stop::never(),
        |r| {
            let at: chrono::DateTime<chrono::Utc> = r.sweep_at.parse().unwrap();
            last_tick = last_tick.max(Timestamp::from_datetime(at));
        },
    )
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
    let store = Arc::new(Mem::new(Layout::default()));
    let before = T0 - 3_600;
    *store.checkpoint.lock().unwrap() = Some(Timestamp::from_secs(before));
    store.put("old", (before + 90) as f64);
    let token = CancellationToken::new();
    *store.stop_after.lock().unwrap() = Some((2, token.clone()));
    let options = checkpointed(1);
    let sweeper = Sweeper::new(store.clone(), store.schema(), options);
    let report = sweeper
        .sweep(Timestamp::from_secs(T0), &Stop::never().with_cancel(token))
        .await;
    assert!(store.has("old"));
    assert_eq!(
        *store.checkpoint.lock().unwrap(),
        Some(Timestamp::from_secs(before)),
        "the recent windows are complete, but the hour before them was not swept: {report:?}"
    );
    assert!(
        report.windows_left >= 58 && report.stopped_early,
        "{report:?}"
    );
}
