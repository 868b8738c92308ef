//! [`Sweeper`]: one pass over the windows that can hold expired items.
//!
//! Partitions (window, or window and shard) are read concurrently and delete requests run
//! concurrently, both bounded by `max_concurrency`. Unprocessed keys, throttling and 5xx answers
//! are retried with exponential backoff and full jitter; keys that still fail are returned in the
//! report, never dropped. The pass starts no new work once its [`Stop`] condition holds
//! (deadline or shutdown) and reports what it left for the next run. With a checkpoint it also
//! covers every window since the last fully swept boundary (see [`super::checkpoint`]) and then
//! moves the checkpoint forward.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::checkpoint::{advance_to, plan};
use super::delete::{ChunkOutcome, Deleter, Expired};
use super::hook::{delete_with_events, Events, ExpiryHook, FailedEvent, Owed};
use super::pace::{read_ahead, split_permit, take_budget, PagePace, Running, Slots};
use super::report::{SweepErrorEntry, SweepReport};
use super::retry::Stop;
use super::{Checkpoint, SweepOptions, BATCH_SIZE, CATCHUP_SLICE_PARTITIONS};
use crate::expiry::time::iso_millis;
use crate::expiry::window::{parse_ttl, partition_key, ttl_state, ShardRange, TtlState, Window};
use crate::expiry::{Clock, Timestamp};
use crate::store::{key_to_json, Key, Store, StoreError, TableSchema};

/// Outcome of sweeping one partition (one shard of one window): its chunks' outcomes already
/// folded into counters and the lag histogram as they finished, so a partition's memory does not
/// grow with what it deletes.
#[derive(Debug, Default)]
struct PartitionOutcome {
    read_all: bool,
    /// Every chunk's keys were deleted or knowingly kept: none failed, none left.
    handled_all: bool,
    report: SweepReport,
    error: Option<StoreError>,
}

impl PartitionOutcome {
    fn complete(&self) -> bool {
        self.read_all && self.error.is_none() && self.handled_all
    }
}

/// Where a sweep's lags are measured from: the wall clock when it started, and that instant.
#[derive(Debug, Clone, Copy)]
struct LagOrigin {
    wall: Timestamp,
    mono: Instant,
}

/// Adds one finished chunk to a partial report; returns whether every key was handled.
fn fold_chunk(report: &mut SweepReport, chunk: ChunkOutcome, origin: LagOrigin) -> bool {
    for (ttl, at) in chunk.deleted_ttls.iter().zip(&chunk.deleted_at) {
        let deleted_at = origin.wall + at.duration_since(origin.mono);
        let lag_ms = deleted_at.millis() as f64 - ttl * 1000.0;
        report.lags.record(lag_ms.max(0.0).round() as u64);
    }
    let handled = chunk.failed.is_empty() && chunk.left == 0;
    report.items_deleted += chunk.deleted_ttls.len() as u64;
    report.items_skipped += chunk.skipped;
    report.items_gone += chunk.gone;
    report.items_retried += chunk.retried;
    report.items_left += chunk.left;
    report.items_reread += chunk.reread;
    report.items_conditional += chunk.conditional;
    report.items_failed += chunk.failed.len() as u64;
    report.add_failed_keys(chunk.failed);
    report.add_events(chunk.events);
    handled
}

/// Returns the item's key and ttl if — and only if — the item as read is expired at `now`: a
/// Number ttl in epoch seconds, before `now` and not more than five years before it (native
/// TTL's rule), and the table's key attributes present. The key is moved out of the item, not
/// copied; `read_at` is when the page that listed it arrived.
fn check_item(
    schema: &TableSchema,
    mut item: Key,
    now: Timestamp,
    read_at: Instant,
) -> Option<Expired> {
    let (ttl, ttl_as_read) = match item.remove(&schema.layout.ttl_attribute) {
        Some(aws_sdk_dynamodb::types::AttributeValue::N(n)) => match parse_ttl(&n) {
            Ok(t) => (t, n),
            Err(e) => {
                warn!(error = %e, "item with an unusable ttl ignored");
                return None;
            }
        },
        other => {
            warn!(ttl = ?other, "item without a numeric ttl ignored");
            return None;
        }
    };
    match ttl_state(ttl, now) {
        TtlState::Expired => {}
        TtlState::Live => {
            warn!(ttl, now = %now, "index returned an item that is not yet expired; ignored");
            return None;
        }
        TtlState::TooOld => {
            warn!(ttl, now = %now, "ttl is more than five years in the past: native TTL's rule keeps the item; ignored");
            return None;
        }
    }
    // The projection asks for the key attributes and the ttl: what remains without the ttl
    // (taken above) is the key, if every key attribute is there.
    item.retain(|name, _| schema.key_attributes.contains(name));
    if item.len() != schema.key_attributes.len() {
        warn!("index item without the table's key attributes ignored");
        return None;
    }
    Some(Expired {
        key: item,
        ttl,
        ttl_as_read,
        read_at,
        maybe_applied: false,
        reread: false,
    })
}

/// Runs sweeps of one table through a [`Store`]. Partitions and delete requests run as tasks
/// of their own on the Tokio runtime (so a multi-threaded runtime spreads them over its worker
/// threads), bounded by `max_concurrency`; dropping a sweep aborts its tasks.
pub struct Sweeper<S> {
    shared: Arc<Shared<S>>,
    wall: Option<Arc<dyn Clock>>,
    events: Option<Arc<dyn ExpiryHook>>,
    /// Notify mode: the events owed for deletes not yet published, across the sweeps.
    owed: Arc<Owed>,
}

/// What the tasks of a sweep share.
struct Shared<S> {
    store: S,
    schema: TableSchema,
    options: SweepOptions,
}

impl<S: std::fmt::Debug> std::fmt::Debug for Sweeper<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweeper")
            .field("store", &self.shared.store)
            .field("schema", &self.shared.schema)
            .field("options", &self.shared.options)
            .field("wall_clock", &self.wall.is_some())
            .field("events", &self.events)
            .finish()
    }
}

/// The outcome of a finished task; a panic in the task goes on in the caller.
fn joined<T>(result: Result<T, JoinError>) -> T {
    match result {
        Ok(value) => value,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Tasks are aborted only when their JoinSet is dropped, and then nobody joins them.
        Err(e) => unreachable!("sweep task cancelled while joined: {e}"),
    }
}

impl<S: Store> Sweeper<S> {
    /// A sweeper for the table described by `schema` (see `DynamoStore::describe`).
    pub fn new(store: S, schema: TableSchema, options: SweepOptions) -> Self {
        Sweeper {
            shared: Arc::new(Shared {
                store,
                schema,
                options,
            }),
            wall: None,
            events: None,
            owed: Arc::default(),
        }
    }

    /// Publishes expiry events through `hook` around every delete (see [`super::hook`]).
    pub fn with_events(mut self, hook: Arc<dyn ExpiryHook>) -> Self {
        self.events = Some(hook);
        self
    }

    /// Measures expiry lag against `wall` (the entry point's clock), read once when a sweep
    /// starts: a deletion's time is that reading plus the monotonic time to its acknowledgement.
    /// Without it, lag is measured from the sweep instant, which is the same for a sweep as of
    /// the clock but not for one as of an earlier event time.
    pub fn with_wall_clock(mut self, wall: Arc<dyn Clock>) -> Self {
        self.wall = Some(wall);
        self
    }

    /// The table schema in use.
    pub fn schema(&self) -> &TableSchema {
        &self.shared.schema
    }

    /// The options in use.
    pub fn options(&self) -> &SweepOptions {
        &self.shared.options
    }

    /// The store in use.
    pub fn store(&self) -> &S {
        &self.shared.store
    }

    /// Notify mode: the events owed for items deleted by a sweep that was dropped before it
    /// published them (the sweep's future given up at a deadline), as failed events, taken. A
    /// sweep that runs to its end leaves none: each event it owed was published or reported.
    pub fn unpublished_events(&self) -> Vec<FailedEvent> {
        let Some(hook) = &self.events else {
            return Vec::new();
        };
        self.owed
            .take_all()
            .into_iter()
            .map(|expiry| FailedEvent {
                id: hook.event_id(&expiry),
                key: key_to_json(&expiry.key),
                reason: "deleted, but the sweep was dropped before the event was surely \
                         published (the invocation's deadline)"
                    .to_owned(),
            })
            .collect()
    }

    /// A full sweep as of `now`: the current window, the lookback windows, and — with a
    /// checkpoint — every window since the checkpoint; then the checkpoint moves forward.
    pub async fn sweep(&self, now: Timestamp, stop: &Stop) -> SweepReport {
        self.sweep_below(now, None, stop).await
    }

    /// A full sweep as of `now` that leaves out the windows ending after `newest_end` (epoch
    /// seconds): the ones ticks running beside it read.
    pub async fn sweep_below(
        &self,
        now: Timestamp,
        newest_end: Option<i64>,
        stop: &Stop,
    ) -> SweepReport {
        let started = Instant::now();
        let width = self.shared.schema.layout.window_seconds;
        let options = &self.shared.options;
        let mut checkpoint_before = None;
        let mut checkpoint_error = None;
        if let Some(cp) = &options.checkpoint {
            let store = &self.shared.store;
            let mut read = store.read_checkpoint(&cp.table, &cp.id).await;
            // A shard range without a checkpoint of its own yet starts from the whole table's.
            if let (Ok(None), Some(parent)) = (&read, &cp.start_from) {
                read = store.read_checkpoint(&cp.table, parent).await;
                if let Ok(Some(c)) = &read {
                    debug!(from = %parent, at = %c.iso(), "no checkpoint of this shard range yet: starting from the whole table's");
                }
            }
            match read {
                Ok(c) => checkpoint_before = c,
                Err(e) => {
                    warn!(error = %e, "could not read the checkpoint; sweeping the lookback windows only");
                    checkpoint_error = Some(e);
                }
            }
        }
        let plan = plan(
            now,
            width,
            options.lookback_windows,
            checkpoint_before,
            options.max_catchup_seconds,
        );
        let below = |w: &Window| newest_end.is_none_or(|end| w.end <= end);
        let recent: Vec<Window> = plan.recent.iter().copied().filter(below).collect();
        if plan.capped {
            warn!(
                checkpoint = %checkpoint_before.map(Timestamp::iso).unwrap_or_default(),
                from = %plan.floor.map(iso_millis).unwrap_or_default(),
                "checkpoint is older than MAX_CATCHUP; windows before the cap are not swept"
            );
        }

        // The recent windows first (they hold what expired last), then the catch-up.
        let (mut report, recent_complete) = self.sweep_partitions(now, &recent, stop).await;
        report.catchup_capped = plan.capped;
        if let Some(e) = checkpoint_error {
            report.add_errors([SweepErrorEntry::new(None, &e)]);
            return report;
        }
        let Some(cp) = &options.checkpoint else {
            return report;
        };
        report.checkpoint_before = checkpoint_before.map(Timestamp::iso);
        let mut mover = CheckpointMover {
            store: &self.shared.store,
            checkpoint: cp,
            now,
            at: checkpoint_before,
            through: plan.floor.unwrap_or(i64::MIN),
            unbroken: true,
        };
        // Oldest first, in slices: every slice swept completely moves the checkpoint, so a
        // backlog longer than one invocation still makes progress that the next one keeps.
        let mut catchup = plan.catchup;
        if !catchup.is_empty() {
            debug!(windows = catchup.len(), "catching up");
        }
        let per_slice =
            (CATCHUP_SLICE_PARTITIONS / self.shard_range().shards().count().max(1)).max(1);
        while !catchup.is_empty() {
            if stop.reached() {
                report.windows_left += usize::try_from(catchup.len()).unwrap_or(usize::MAX);
                report.stopped_early = true;
                break;
            }
            let mut slice = catchup.slice(per_slice);
            slice.retain(below);
            // Partitions start in this order: oldest first.
            let (part, mut complete) = self.sweep_partitions(now, &slice, stop).await;
            report.merge(part);
            slice.reverse();
            complete.reverse();
            mover.advance(&slice, &complete, &mut report).await;
        }
        // The recent windows extend the run only once every older window was swept.
        if catchup.is_empty() {
            mover.advance(&recent, &recent_complete, &mut report).await;
        }
        report.ticks = 1;
        report.duration_ms = started.elapsed().as_millis() as u64;
        report.checkpoint_after = mover.at.map(Timestamp::iso);
        report
    }

    /// Sweeps exactly `windows` (each one's shards in the shard range) for items expired at
    /// `now`; no checkpoint.
    pub async fn sweep_windows(
        &self,
        now: Timestamp,
        windows: &[Window],
        stop: &Stop,
    ) -> SweepReport {
        self.sweep_partitions(now, windows, stop).await.0
    }

    /// The shards of each window this sweeper reads.
    fn shard_range(&self) -> ShardRange {
        let shards = self.shared.schema.layout.window_shards.max(1);
        self.shared
            .options
            .shard_range
            .unwrap_or_else(|| ShardRange::all(shards))
    }

    /// Sweeps the shards in the range of every window; returns the report and, per window,
    /// whether it was swept completely. Each partition's outcome is folded into the report as it
    /// finishes: memory stays bounded by the partitions running at once, not by the backlog.
    async fn sweep_partitions(
        &self,
        now: Timestamp,
        windows: &[Window],
        stop: &Stop,
    ) -> (SweepReport, Vec<bool>) {
        let started = Instant::now();
        let origin = LagOrigin {
            wall: self.wall.as_ref().map_or(now, |c| c.now()),
            mono: started,
        };
        let events = self.events.clone().map(|hook| Events {
            hook,
            wall: self.wall.clone(),
            owed: self.owed.clone(),
        });
        let shards = self.shared.schema.layout.window_shards.max(1);
        let range = self.shard_range();
        let limit = self.shared.options.max_concurrency.max(1);
        let permits = Arc::new(Semaphore::new(limit));
        let budget = Arc::new(Semaphore::new(read_ahead(&self.shared.options)));
        let partitions_running = Arc::new(AtomicUsize::new(0));
        let inner = stop.child();
        let partitions = windows.iter().enumerate().flat_map(|(i, w)| {
            range
                .shards()
                .map(move |shard| (i, partition_key(*w, shard, shards)))
        });

        let mut report = SweepReport {
            sweep_at: now.iso(),
            table: self.shared.schema.table_name.clone(),
            delete_mode: self.shared.options.delete_mode.to_string(),
            ticks: 1,
            ..SweepReport::default()
        };
        let mut read_all = vec![true; windows.len()];
        let mut complete = vec![true; windows.len()];
        let mut fold = |(i, out): (usize, PartitionOutcome)| {
            read_all[i] &= out.read_all && out.error.is_none();
            complete[i] &= out.complete();
            report.add_partition(out.report);
            if let Some(e) = out.error {
                report.add_errors([SweepErrorEntry::new(Some(windows[i].key()), &e)]);
            }
        };
        // At most `limit` partitions at once, each a task of its own.
        let mut running = JoinSet::new();
        for (i, key) in partitions {
            if running.len() >= limit {
                if let Some(done) = running.join_next().await {
                    fold(joined(done));
                }
            }
            let (shared, inner) = (self.shared.clone(), inner.clone());
            let slots = Slots {
                permits: permits.clone(),
                budget: budget.clone(),
                running: partitions_running.clone(),
            };
            let events = events.clone();
            let counted = Running::new(&partitions_running);
            running.spawn(async move {
                let _counted = counted;
                let out =
                    Shared::sweep_partition(&shared, &key, now, &inner, &slots, &events, origin)
                        .await;
                (i, out)
            });
        }
        while let Some(done) = running.join_next().await {
            fold(joined(done));
        }

        report.windows_swept = read_all.iter().filter(|r| **r).count();
        report.windows_left = windows.len() - report.windows_swept;
        report.stopped_early = stop.reached() && !report.is_complete();
        report.lag = report.lags.stats();
        report.duration_ms = started.elapsed().as_millis() as u64;
        (report, complete)
    }
}

/// Moves the checkpoint forward, slice by slice, over the unbroken run of windows swept
/// completely since the floor.
struct CheckpointMover<'a, S> {
    store: &'a S,
    checkpoint: &'a Checkpoint,
    now: Timestamp,
    /// The stored checkpoint, as last read or written.
    at: Option<Timestamp>,
    /// Every window ending at or before this was swept completely (or is below the floor).
    through: i64,
    /// False once a window after `through` was not swept completely, or a write failed: the
    /// checkpoint stays where it is for the rest of the sweep.
    unbroken: bool,
}

impl<S: Store> CheckpointMover<'_, S> {
    /// After sweeping `windows` (newest first, contiguous, the older ones handled before),
    /// advances the checkpoint over those swept completely and wholly in the past.
    async fn advance(&mut self, windows: &[Window], complete: &[bool], report: &mut SweepReport) {
        if !self.unbroken {
            return;
        }
        let to = advance_to(windows, complete, self.through, self.now);
        if windows
            .iter()
            .zip(complete)
            .any(|(w, ok)| w.end > self.through && !ok)
        {
            self.unbroken = false;
        }
        let Some(to) = to else { return };
        self.through = self.through.max(to);
        let to = Timestamp::from_secs(to);
        if self.at.is_some_and(|c| to <= c) {
            return;
        }
        let cp = self.checkpoint;
        match self
            .store
            .advance_checkpoint(&cp.table, &cp.id, to, self.now)
            .await
        {
            Ok(moved) => {
                debug!(to = %to, moved, "checkpoint advanced");
                self.at = Some(to);
            }
            Err(e) => {
                report.add_errors([SweepErrorEntry::new(None, &e)]);
                self.unbroken = false;
            }
        }
    }
}

impl<S: Store> Shared<S> {
    /// Reads one partition to the end (or until `stop`), deleting as it goes: each chunk of
    /// [`BATCH_SIZE`] a task of its own, at most `max_concurrency` of them waiting per partition
    /// and `slots.permits` sending at once across the sweep. Each page asks for no more keys than
    /// the sweep's read-ahead budget has free; a key's share of it returns when its chunk is done.
    async fn sweep_partition(
        this: &Arc<Self>,
        key: &str,
        now: Timestamp,
        stop: &Stop,
        slots: &Slots,
        events: &Option<Events>,
        origin: LagOrigin,
    ) -> PartitionOutcome {
        let mut out = PartitionOutcome {
            handled_all: true,
            ..PartitionOutcome::default()
        };
        if stop.reached() {
            return out;
        }
        let max_inflight = this.options.max_concurrency.max(1);
        let mut inflight = JoinSet::new();
        let mut pending: Vec<Expired> = Vec::new();
        // The budget held for `pending`: one permit a key.
        let mut held: Option<OwnedSemaphorePermit> = None;
        let mut start: Option<Key> = None;
        let mut pace = PagePace::new(&this.options);
        let budget_size = u32::try_from(read_ahead(&this.options)).unwrap_or(u32::MAX);
        let delete = |inflight: &mut JoinSet<ChunkOutcome>,
                      chunk: Vec<Expired>,
                      held: &mut Option<OwnedSemaphorePermit>| {
            let (shared, stop, permits) = (this.clone(), stop.clone(), slots.permits.clone());
            let events = events.clone();
            // The chunk's keys' share of the budget, returned when the chunk is done.
            let keys = split_permit(held, chunk.len());
            inflight.spawn(async move {
                let _keys = keys;
                let _permit = permits.acquire().await;
                // The stop may have come while this chunk waited for a permit.
                if stop.reached() {
                    return ChunkOutcome::left(chunk.len());
                }
                let deleter = Deleter {
                    store: &shared.store,
                    schema: &shared.schema,
                    options: &shared.options,
                    track_keys: events.is_some(),
                    return_items: events.as_ref().is_some_and(|e| e.hook.returned_items()),
                    notify: None,
                };
                match events {
                    None => deleter.delete_chunk(chunk, now, &stop).await,
                    Some(events) => delete_with_events(&deleter, &events, chunk, now, &stop).await,
                }
            });
        };
        loop {
            // A read still unanswered at shutdown (or after the sweep stopped itself on an
            // error it reports) is given up: nothing it finds would be deleted now, and its
            // retries (a slow or failing DynamoDB) must not hold a shutdown. The partition is
            // left for the next sweep, like those not started. (A deadline needs no such cut:
            // every call of the store ends before it, see `Store::end_calls_by`.)
            let want = pace
                .limit()
                .map_or(budget_size, |l| u32::try_from(l.max(1)).unwrap_or(1))
                .min(budget_size);
            let granted = tokio::select! {
                permit = take_budget(slots, pending.len(), want) => permit,
                () = stop.token().cancelled() => {
                    debug!(partition = %key, "stopping while waiting for keys to be deleted");
                    break;
                }
            };
            let limit = i32::try_from(granted.num_permits()).unwrap_or(i32::MAX);
            let query = this
                .store
                .query_expired(&this.schema, key, now, start.take(), Some(limit));
            let answer = tokio::select! {
                answer = query => answer,
                () = stop.token().cancelled() => {
                    debug!(partition = %key, "stopping mid-query");
                    break;
                }
            };
            let page = match answer {
                Ok(page) => page,
                Err(e) => {
                    warn!(partition = %key, error = %e, "query failed; partition left for the next sweep");
                    if !e.kind.is_retryable() {
                        // A missing table or rejected credentials: nothing else will work either.
                        stop.token().cancel();
                    }
                    out.error = Some(e);
                    break;
                }
            };
            let read_at = Instant::now();
            let page_len = page.items.len();
            pending.reserve(page_len);
            for item in page.items {
                match check_item(&this.schema, item, now, read_at) {
                    Some(expired) => {
                        out.report.items_found += 1;
                        pending.push(expired);
                    }
                    None => out.report.items_invalid += 1,
                }
            }
            // Keep one permit per key pending; what the page did not fill goes back at once.
            let mut granted = granted;
            let kept = pending.len() - held.as_ref().map_or(0, |h| h.num_permits());
            drop(granted.split(granted.num_permits().saturating_sub(kept)));
            match &mut held {
                Some(h) => h.merge(granted),
                None => held = Some(granted),
            }
            // Whole chunks go now, from the back (order does not matter); a partial chunk waits
            // for the next page.
            while pending.len() >= BATCH_SIZE && !stop.reached() {
                let chunk = pending.split_off(pending.len() - BATCH_SIZE);
                delete(&mut inflight, chunk, &mut held);
                while inflight.len() >= max_inflight {
                    if let Some(c) = inflight.join_next().await {
                        out.handled_all &= fold_chunk(&mut out.report, joined(c), origin);
                    }
                }
            }
            pace.observe(page_len, read_at.elapsed());
            match page.next {
                Some(_) if stop.reached() => {
                    debug!(partition = %key, "stopping mid-partition");
                    break;
                }
                Some(next) => start = Some(next),
                None => {
                    out.read_all = true;
                    break;
                }
            }
        }
        if stop.reached() {
            // Found but not attempted: the next sweep finds them again.
            out.report.items_left += pending.len() as u64;
            out.handled_all &= pending.is_empty();
        } else {
            while !pending.is_empty() {
                let chunk = pending.split_off(pending.len().saturating_sub(BATCH_SIZE));
                delete(&mut inflight, chunk, &mut held);
            }
        }
        while let Some(c) = inflight.join_next().await {
            out.handled_all &= fold_chunk(&mut out.report, joined(c), origin);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TableSchema {
        TableSchema {
            table_name: "t".into(),
            index_name: "i".into(),
            key_attributes: vec!["id".into()],
            layout: crate::expiry::Layout {
                window_attribute: "w".into(),
                ..Default::default()
            },
        }
    }

    proptest::proptest! {
        /// Whatever the index returns, an item qualifies only with a Number ttl in epoch
        /// seconds strictly before `now`, and keeps exactly its key.
        #[test]
        fn only_items_expired_as_read_qualify(
            ttl in proptest::prop_oneof![
                "[0-9]{1,14}(\\.[0-9]{1,3})?",
                "-?[0-9.eE+-]{1,12}",
                ".{0,12}",
            ],
            numeric in proptest::bool::ANY,
            now in 0i64..4_000_000_000,
        ) {
            use aws_sdk_dynamodb::types::AttributeValue as AV;
            let value = if numeric { AV::N(ttl.clone()) } else { AV::S(ttl.clone()) };
            let item: Key = [("id".to_string(), AV::S("a".into())), ("ttl".to_string(), value)].into();
            let expired_as_read = numeric
                && parse_ttl(&ttl).is_ok_and(|t| {
                    t < now as f64 && t >= (now - crate::expiry::window::MAX_EXPIRED_AGE_SECONDS) as f64
                });
            match check_item(&schema(), item.clone(), Timestamp::from_secs(now), Instant::now()) {
                Some(e) => {
                    proptest::prop_assert!(expired_as_read, "{ttl:?} at {now}");
                    proptest::prop_assert_eq!(Some(e.ttl), parse_ttl(&ttl).ok());
                    proptest::prop_assert_eq!(e.key.len(), 1);
                }
                None => proptest::prop_assert!(!expired_as_read, "{ttl:?} at {now} should qualify"),
            }
        }
    }

    #[test]
    fn items_without_a_ttl_or_key_never_qualify() {
        use aws_sdk_dynamodb::types::AttributeValue as AV;
        let no_ttl: Key = [("id".to_string(), AV::S("a".into()))].into();
        assert!(check_item(
            &schema(),
            no_ttl.clone(),
            Timestamp::from_secs(2_000_000_000),
            Instant::now()
        )
        .is_none());
        let no_key: Key = [("ttl".to_string(), AV::N("5".into()))].into();
        assert!(check_item(
            &schema(),
            no_key.clone(),
            Timestamp::from_secs(2_000_000_000),
            Instant::now()
        )
        .is_none());
        let ok: Key = [
            ("id".to_string(), AV::S("a".into())),
            ("ttl".to_string(), AV::N("5".into())),
        ]
        .into();
        assert!(check_item(
            &schema(),
            ok.clone(),
            Timestamp::from_secs(6),
            Instant::now()
        )
        .is_some());
        assert!(
            check_item(
                &schema(),
                ok.clone(),
                Timestamp::from_secs(5),
                Instant::now()
            )
            .is_none(),
            "ttl == now is not expired"
        );
        // native TTL's rule: a ttl more than five years old is never deleted
        let now = Timestamp::from_secs(1_800_000_000);
        assert!(
            check_item(&schema(), ok.clone(), now, Instant::now()).is_none(),
            "ttl 5 is decades old"
        );
        let six_years: Key = [
            ("id".to_string(), AV::S("a".into())),
            (
                "ttl".to_string(),
                AV::N((1_800_000_000 - 6 * 365 * 86_400).to_string()),
            ),
        ]
        .into();
        assert!(check_item(&schema(), six_years.clone(), now, Instant::now()).is_none());
        let four_years: Key = [
            ("id".to_string(), AV::S("a".into())),
            (
                "ttl".to_string(),
                AV::N((1_800_000_000 - 4 * 365 * 86_400).to_string()),
            ),
        ]
        .into();
        assert!(check_item(&schema(), four_years.clone(), now, Instant::now()).is_some());
    }
}
