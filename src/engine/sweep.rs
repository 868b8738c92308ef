//! [`Sweeper`]: one pass over the windows that can hold expired items.
//!
//! Keys that still fail after the retries are reported, never dropped. The pass starts no new
//! work once its [`Stop`] condition holds (deadline or shutdown) and reports what it left for the
//! next run. With a checkpoint it also covers every window since the last fully swept boundary
//! (see [`super::checkpoint`]), then moves the checkpoint forward.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::checkpoint::{advance_to, plan};
use super::cursor::PackCursor;
use super::delete::{settle_journal, settle_unsettled};
use super::hook::{Events, ExpiryHook, FailedEvent, Owed, Unsettled, EVENT_ITEMS_BUDGET_KIB};
use super::journal::Journal;
use super::lease::Lease;
use super::pace::{read_ahead, Running};
use super::partition::{
    check_item, delete_group, fold_chunk, joined, sweep_partition, PartitionOutcome, Pass, Shared,
};
use super::report::{SweepErrorEntry, SweepReport};
use super::retry::Stop;
use super::{Checkpoint, SweepOptions, BATCH_SIZE, CATCHUP_SLICE_PARTITIONS};
use crate::expiry::time::iso_millis;
use crate::expiry::window::{partition_key, ShardRange, Window};
use crate::expiry::{Clock, Timestamp};
use crate::store::{entries, key_to_json, Index, Retry, Store, TableSchema};

mod at_once;
mod partitions;

use partitions::CheckpointMover;

/// Runs sweeps of one table through a [`Store`]. Partitions and delete requests run as tasks
/// of their own on the Tokio runtime (so a multi-threaded runtime spreads them over its worker
/// threads), bounded by `max_concurrency`; dropping a sweep aborts its tasks.
pub struct Sweeper<S> {
    /// What its sweeps' tasks share.
    pub(super) shared: Arc<Shared<S>>,
    wall: Option<Arc<dyn Clock>>,
    events: Option<Arc<dyn ExpiryHook>>,
    /// Notify mode: the events owed for deletes not yet published, across the sweeps.
    owed: Arc<Owed>,
    /// Archive mode: the accepted expiries not settled yet, across the sweeps.
    unsettled: Arc<Unsettled>,
    /// Archive mode with the expiry index table: its journal writer (instead of `unsettled`).
    journal: Arc<Journal>,
    /// With `LEADER_LEASE`: only its holder sweeps.
    lease: Option<Lease>,
    /// Whether the last sweep led (held the lease, or there is none): a standby reads nothing,
    /// not even ahead of a tick.
    leading: AtomicBool,
    /// Its expiry index table is claimed for its table (or it has none): see [`Self::claim`].
    claimed: AtomicBool,
    /// With a lease: until when the last check found it held ([`Self::delete_indexed`]).
    lead_until: std::sync::Mutex<Option<Instant>>,
    /// With an expiry index table: the cursor of its packs ([`super::packs`]).
    pub(super) packs: Option<PackCursor>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for Sweeper<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweeper")
            .field("store", &self.shared.store)
            .field("schema", &self.shared.schema)
            .field("options", &self.shared.options)
            .field("wall_clock", &self.wall.is_some())
            .field("events", &self.events)
            .field("lease", &self.lease)
            .finish()
    }
}

impl<S: Store> Sweeper<S> {
    /// A sweeper for the table described by `schema` (see `DynamoStore::describe`).
    pub fn new(store: S, schema: TableSchema, options: SweepOptions) -> Self {
        let packs = schema.index.table().map(|_| {
            let range = options
                .shard_range
                .map_or("all".to_owned(), |r| r.to_string());
            let id = format!("{}#{range}", schema.table_name);
            PackCursor {
                id,
                ..PackCursor::default()
            }
        });
        Sweeper {
            shared: Arc::new(Shared {
                store,
                schema,
                // Few, short retries: a delete that does not go at once goes at the next sweep.
                at_once: SweepOptions {
                    delete_mode: super::DeleteMode::Conditional,
                    retry: Retry {
                        cap: options.retry.cap.min(Duration::from_millis(200)),
                        ..options.retry.with_retries(options.retry.retries().min(2))
                    },
                    ..options.clone()
                },
                options,
                confirmed: Default::default(),
                in_flight: Default::default(),
            }),
            wall: None,
            events: None,
            owed: Arc::default(),
            unsettled: Arc::default(),
            journal: Arc::new(Journal::new()),
            lease: None,
            leading: AtomicBool::new(true),
            claimed: AtomicBool::new(false),
            lead_until: Default::default(),
            packs,
        }
    }

    /// Before its first sweep, a sweeper claims its expiry index table for its table
    /// ([`Store::claim_index_table`]): an index table another table claims is refused, since a
    /// sweep would read that table's entries, find their items absent and remove them: every
    /// sweep is refused with that error, sweeping nothing. A claim that could not be made for a
    /// passing reason (throttling, a 5xx) is tried again at the next sweep, this one going on: the
    /// claim guards against a configuration, not a sweep's deletes, which the table judges.
    async fn claim(&self, stop: &Stop) -> Result<(), crate::store::StoreError> {
        let schema = &self.shared.schema;
        if schema.index.table().is_none() || self.claimed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let claim = self.shared.store.claim_index_table(schema);
        match stop.bound("Query", claim).await {
            Ok(()) => self.claimed.store(true, Ordering::Relaxed),
            Err(e) if e.kind.is_retryable() => {
                warn!(error = %e, "could not claim the expiry index table for this table yet; trying again at the next sweep");
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Sweeps only while holding `lease` (see [`super::lease`]): every sweep first checks it,
    /// and one that does not lead stands by — no read, no delete, no checkpoint write, no event
    /// — and says so in its report (`stood_by`); one that leads stops sending at the end of the
    /// lease's validity ([`Stop::within`]).
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.lease = Some(lease);
        self
    }

    /// The stop a sweep as of `now` runs by: `stop` itself without a lease, narrowed to the
    /// lease's validity while leading; standing by, the report to return instead.
    async fn lead(&self, now: Timestamp, stop: &Stop) -> Result<Stop, SweepReport> {
        if let Err(e) = self.claim(stop).await {
            warn!(error = %e, "the expiry index table is not this table's to sweep through");
            return Err(SweepReport {
                errors: vec![SweepErrorEntry::new(None, &e)],
                ..self.report(now)
            });
        }
        let Some(lease) = &self.lease else {
            return Ok(stop.clone());
        };
        let leading = lease.check(&self.shared.store, stop).await;
        self.leading.store(leading.is_ok(), Ordering::Relaxed);
        *crate::store::lock(&self.lead_until) = leading.as_ref().ok().copied();
        leading
            .map(|until| stop.within(until))
            .map_err(|not_leading| SweepReport {
                stood_by: 1,
                lease_layout_mismatch: u32::from(not_leading.layout_mismatch),
                lease_released: u32::from(not_leading.released),
                errors: Vec::from_iter(not_leading.error.map(|e| SweepErrorEntry::new(None, &e))),
                ..self.report(now)
            })
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

    /// The wall clock's own reading ([`Clock::raw_now`]), if the sweeper has one: what dates the
    /// reads kept across sweeps ([`super::delete::Confirmed`]).
    pub(super) fn raw_wall(&self) -> Option<Timestamp> {
        self.wall.as_ref().map(|c| c.raw_now())
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
        let stop = match self.lead(now, stop).await {
            Ok(stop) => stop,
            Err(standing_by) => return standing_by,
        };
        self.swept(self.sweep_leading(now, newest_end, &stop).await)
            .await
    }

    /// `report`, of a sweep that led, once the lease, if any, has been told how it went
    /// ([`Lease::swept`]).
    async fn swept(&self, report: SweepReport) -> SweepReport {
        if let Some(lease) = &self.lease {
            lease.swept(super::lease::SweepHealth::of(&report)).await;
        }
        report
    }

    /// [`Sweeper::sweep_below`], leading (or without a lease), within `stop`.
    async fn sweep_leading(
        &self,
        now: Timestamp,
        newest_end: Option<i64>,
        stop: &Stop,
    ) -> SweepReport {
        let started = Instant::now();
        let options = &self.shared.options;
        let mut checkpoint_before = None;
        let mut checkpoint_error = None;
        if let Some(cp) = &options.checkpoint {
            let store = &self.shared.store;
            let get = |id| stop.bound("GetItem", store.read_checkpoint(&cp.table, id));
            let mut read = get(&cp.id).await;
            // A shard range without a checkpoint of its own yet starts from the whole table's.
            if let (Ok(None), Some(parent)) = (&read, &cp.start_from) {
                read = get(parent).await;
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
        let (lookback, max_catchup) = (options.lookback_windows, options.max_catchup_seconds);
        let width = self.shared.schema.layout.window_seconds;
        let (limit, why) = catchup_limit(&self.shared.schema, max_catchup);
        let plan = plan(now, width, lookback, checkpoint_before, limit);
        let below = |w: &Window| newest_end.is_none_or(|end| w.end <= end);
        let recent: Vec<Window> = plan.recent.iter().copied().filter(below).collect();
        if plan.capped {
            warn!(
                checkpoint = %checkpoint_before.map(Timestamp::iso).unwrap_or_default(),
                from = %plan.floor.map(iso_millis).unwrap_or_default(),
                "checkpoint is older than {why}; windows before the cap are not swept"
            );
        }
        // The entries of items written while the stream's records are kept: an outage longer
        // than that may have lost records no entry was written for.
        let stream_gap = self.shared.schema.index.table().is_some()
            && checkpoint_before.is_some_and(|c| {
                now.secs().saturating_sub(c.secs()) > entries::STREAM_RETENTION_SECONDS
            });
        if stream_gap {
            warn!(
                checkpoint = %checkpoint_before.map(Timestamp::iso).unwrap_or_default(),
                "checkpoint is older than the 24 hours a DynamoDB stream keeps its records: items \
                 written early in the outage may have no entry (records trimmed before they were \
                 indexed); the catch-up is reported capped. Run `ttl-sweeper backfill \
                 --expiry-index-table` to index them"
            );
        }

        // The recent windows first (they hold what expired last), then the catch-up; the
        // packs of an expiry index table from the cursor beside them.
        let (entries, packs) = futures::join!(
            self.sweep_partitions(now, &recent, stop, None),
            Box::pin(self.catch_up_packs(now, stop))
        );
        let (mut report, recent_complete) = entries;
        if let Some(packs) = packs {
            report.add_pass(packs);
        }
        report.catchup_capped = plan.capped || stream_gap;
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
            stop,
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
            let mut slice: Vec<Window> = catchup.by_ref().take(per_slice).collect();
            slice.retain(below);
            // Partitions start in this order: oldest first.
            let (part, mut complete) = self.sweep_partitions(now, &slice, stop, None).await;
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

    /// Sweeps exactly `windows` (their shards in range) for items expired at `now`; no checkpoint.
    pub async fn sweep_windows(
        &self,
        now: Timestamp,
        windows: &[Window],
        stop: &Stop,
    ) -> SweepReport {
        match self.lead(now, stop).await {
            Ok(stop) => {
                // Boxed: a sweep's future stays as small as it was without packs.
                let (entries, packs) = futures::join!(
                    self.sweep_partitions(now, windows, &stop, None),
                    Box::pin(self.tick_packs(now, &stop))
                );
                let mut report = entries.0;
                if let Some(packs) = packs {
                    report.add_pass(packs);
                }
                self.swept(report).await
            }
            Err(standing_by) => standing_by,
        }
    }

    /// The report of one sweep as of `now`, nothing done yet.
    pub(super) fn report(&self, now: Timestamp) -> SweepReport {
        SweepReport {
            sweep_at: now.iso(),
            table: self.shared.schema.table_name.clone(),
            delete_mode: self.shared.options.delete_mode.to_string(),
            ticks: 1,
            ..SweepReport::default()
        }
    }

    /// A new run of ticks begins (a Lambda invocation in tick mode, `run`): with an expiry index
    /// table, the packs' cursor is read again before its first tick, since a sweeper of another
    /// process may have moved it on (`engine::packs`), and the ticks start from it.
    pub fn resume_packs(&self) {
        if let Some(packs) = &self.packs {
            let mut state = crate::store::lock(&packs.state);
            state.reload = true;
            state.ticks = None;
        }
    }

    /// Its lease, if any (see [`Self::with_lease`]).
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// Whether its last sweep led (see [`Self::with_lease`]).
    pub(super) fn leading(&self) -> bool {
        self.leading.load(Ordering::Relaxed)
    }

    /// The shards of each window this sweeper reads.
    pub(super) fn shard_range(&self) -> ShardRange {
        let all = ShardRange::all(self.shared.schema.layout.window_shards);
        self.shared.options.shard_range.unwrap_or(all)
    }

    /// A pass as of `now` within `stop`, its lags measured from `started` (see [`Pass`]).
    fn pass(
        &self,
        now: Timestamp,
        stop: &Stop,
        started: Instant,
        at_once: bool,
        packs: Option<(Timestamp, Timestamp)>,
    ) -> Arc<Pass<S>> {
        let lags_from = (self.wall.as_ref().map_or(now, |c| c.now()), started);
        let journaled = self.shared.schema.index.table().is_some();
        let events = self.events.clone().map(|hook| Events {
            journal: (hook.archive() && journaled).then(|| self.journal.clone()),
            hook,
            wall: self.wall.clone(),
            owed: self.owed.clone(),
            unsettled: self.unsettled.clone(),
            items_room: Arc::new(Semaphore::new(EVENT_ITEMS_BUDGET_KIB as usize)),
        });
        let limit = self.shared.options.max_concurrency.max(1);
        Arc::new(Pass {
            shared: self.shared.clone(),
            now,
            wall: self.wall.clone(),
            stop: stop.child(),
            events,
            started: lags_from,
            permits: Semaphore::new(limit),
            reads: Semaphore::new(limit),
            budget: Arc::new(Semaphore::new(read_ahead(&self.shared.options))),
            running: Arc::new(AtomicUsize::new(0)),
            at_once,
            packs,
        })
    }
}

/// How far back a catch-up can be exact, in seconds, and what sets it (for the log):
/// `MAX_CATCHUP`, and with an expiry index table no further than its entries live
/// ([`entries::KEEP_SECONDS`] past their ttl: older ones may be gone).
pub(super) fn catchup_limit(schema: &TableSchema, max_catchup: u64) -> (u64, &'static str) {
    let keep = u64::try_from(entries::KEEP_SECONDS).unwrap_or(u64::MAX);
    match schema.index {
        Index::Table(_) if keep < max_catchup => (
            keep,
            "the two days an expiry index entry is kept (MAX_CATCHUP is longer)",
        ),
        _ => (max_catchup, "MAX_CATCHUP"),
    }
}
