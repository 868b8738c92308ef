//! [`Sweeper`]: one pass over the windows that can hold expired items.
//!
//! Partitions (window, or window and shard) are read concurrently and delete requests run
//! concurrently, both bounded by `max_concurrency`. Unprocessed keys, throttling and 5xx answers
//! are retried with exponential backoff and full jitter; keys that still fail are returned in the
//! report, never dropped. The pass starts no new work once its [`Stop`] condition holds
//! (deadline or shutdown) and reports what it left for the next run. With a checkpoint it also
//! covers every window since the last fully swept boundary (see [`super::checkpoint`]) and then
//! moves the checkpoint forward.

use std::sync::Arc;

use futures::stream::{self, FuturesUnordered, StreamExt};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::checkpoint::{advance_to, plan};
use super::delete::{ChunkOutcome, Deleter, Expired};
use super::hook::{delete_with_events, ExpiryHook};
use super::report::{SweepErrorEntry, SweepReport};
use super::retry::Stop;
use super::{SweepOptions, BATCH_SIZE};
use crate::expiry::time::iso_millis;
use crate::expiry::window::{parse_ttl, partition_key, ttl_state, TtlState, Window};
use crate::expiry::{Clock, Timestamp};
use crate::store::{Key, Store, StoreError, StoreExt, TableSchema};

/// Outcome of sweeping one partition (one shard of one window).
#[derive(Debug, Default)]
struct PartitionOutcome {
    read_all: bool,
    found: u64,
    invalid: u64,
    chunks: Vec<ChunkOutcome>,
    error: Option<StoreError>,
}

impl PartitionOutcome {
    fn complete(&self) -> bool {
        self.read_all
            && self.error.is_none()
            && self
                .chunks
                .iter()
                .all(|c| c.failed.is_empty() && c.left == 0)
    }
}

/// Returns the item's key and ttl if — and only if — the item as read is expired at `now`: a
/// Number ttl in epoch seconds, before `now` and not more than five years before it (native
/// TTL's rule), and the table's key attributes present.
fn check_item(schema: &TableSchema, item: &Key, now: Timestamp) -> Option<Expired> {
    let ttl = match item.get(&schema.layout.ttl_attribute) {
        Some(aws_sdk_dynamodb::types::AttributeValue::N(n)) => match parse_ttl(n) {
            Ok(t) => t,
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
    let Some(key) = schema.key_of(item) else {
        warn!("index item without the table's key attributes ignored");
        return None;
    };
    Some(Expired {
        key,
        ttl,
        read_at: Instant::now(),
    })
}

/// Runs sweeps of one table through a [`Store`].
pub struct Sweeper<S> {
    store: S,
    schema: TableSchema,
    options: SweepOptions,
    wall: Option<Arc<dyn Clock>>,
    events: Option<Arc<dyn ExpiryHook>>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for Sweeper<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweeper")
            .field("store", &self.store)
            .field("schema", &self.schema)
            .field("options", &self.options)
            .field("wall_clock", &self.wall.is_some())
            .field("events", &self.events)
            .finish()
    }
}

impl<S: Store> Sweeper<S> {
    /// A sweeper for the table described by `schema` (see `DynamoStore::describe`).
    pub fn new(store: S, schema: TableSchema, options: SweepOptions) -> Self {
        Sweeper {
            store,
            schema,
            options,
            wall: None,
            events: None,
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
        &self.schema
    }

    /// The options in use.
    pub fn options(&self) -> &SweepOptions {
        &self.options
    }

    /// The store in use.
    pub fn store(&self) -> &S {
        &self.store
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
        let width = self.schema.layout.window_seconds;
        let options = &self.options;
        let mut checkpoint_before = None;
        let mut checkpoint_error = None;
        if let Some(cp) = &options.checkpoint {
            match self.store.read_checkpoint(&cp.table, &cp.id).await {
                Ok(c) => checkpoint_before = c,
                Err(e) => {
                    warn!(error = %e, "could not read the checkpoint; sweeping the lookback windows only");
                    checkpoint_error = Some(e);
                }
            }
        }
        let mut plan = plan(
            now,
            width,
            options.lookback_windows,
            checkpoint_before,
            options.max_catchup_seconds,
        );
        if let Some(end) = newest_end {
            plan.windows.retain(|w| w.end <= end);
        }
        if plan.capped {
            warn!(
                checkpoint = %checkpoint_before.map(iso_millis).unwrap_or_default(),
                from = %plan.floor.map(iso_millis).unwrap_or_default(),
                "checkpoint is older than MAX_CATCHUP; windows before the cap are not swept"
            );
        }

        let (mut report, complete) = self.sweep_partitions(now, &plan.windows, stop).await;
        report.catchup_capped = plan.capped;
        if let Some(e) = checkpoint_error {
            report.add_errors([SweepErrorEntry::new(None, &e)]);
            return report;
        }
        let Some(cp) = &options.checkpoint else {
            return report;
        };
        report.checkpoint_before = checkpoint_before.map(iso_millis);
        let floor = plan.floor.unwrap_or(i64::MIN);
        let after = match advance_to(&plan.windows, &complete, floor, now) {
            Some(to) if checkpoint_before.is_none_or(|c| to > c) => {
                match self
                    .store
                    .advance_checkpoint(&cp.table, &cp.id, to, now)
                    .await
                {
                    Ok(moved) => {
                        debug!(to = %iso_millis(to), moved, "checkpoint advanced");
                        Some(to)
                    }
                    Err(e) => {
                        report.add_errors([SweepErrorEntry::new(None, &e)]);
                        checkpoint_before
                    }
                }
            }
            _ => checkpoint_before,
        };
        report.checkpoint_after = after.map(iso_millis);
        report
    }

    /// Sweeps exactly `windows` (every shard of each) for items expired at `now`; no checkpoint.
    pub async fn sweep_windows(
        &self,
        now: Timestamp,
        windows: &[Window],
        stop: &Stop,
    ) -> SweepReport {
        self.sweep_partitions(now, windows, stop).await.0
    }

    /// Sweeps every shard of every window; returns the report and, per window, whether it was
    /// swept completely.
    async fn sweep_partitions(
        &self,
        now: Timestamp,
        windows: &[Window],
        stop: &Stop,
    ) -> (SweepReport, Vec<bool>) {
        let started = Instant::now();
        let wall_start = self.wall.as_ref().map_or(now, |c| c.now());
        let shards = self.schema.layout.window_shards.max(1);
        let limit = self.options.max_concurrency.max(1);
        let permits = Semaphore::new(limit);
        let inner = stop.child();
        let partitions = windows
            .iter()
            .enumerate()
            .flat_map(|(i, w)| (0..shards).map(move |shard| (i, partition_key(*w, shard, shards))));
        let outcomes: Vec<(usize, PartitionOutcome)> = stream::iter(partitions)
            .map(|(i, key)| {
                let (inner, permits) = (&inner, &permits);
                async move { (i, self.sweep_partition(&key, now, inner, permits).await) }
            })
            .buffer_unordered(limit)
            .collect()
            .await;

        let mut report = SweepReport {
            sweep_at: now.iso(),
            table: self.schema.table_name.clone(),
            delete_mode: self.options.delete_mode.to_string(),
            ticks: 1,
            ..SweepReport::default()
        };
        let mut read_all = vec![true; windows.len()];
        let mut complete = vec![true; windows.len()];
        for (i, mut out) in outcomes {
            read_all[i] &= out.read_all && out.error.is_none();
            complete[i] &= out.complete();
            report.items_found += out.found;
            report.items_invalid += out.invalid;
            for chunk in out.chunks.drain(..) {
                for (ttl, at) in chunk.deleted_ttls.iter().zip(&chunk.deleted_at) {
                    let deleted_at = wall_start + at.duration_since(started);
                    let lag_ms = deleted_at.millis() as f64 - ttl * 1000.0;
                    report.lags.record(lag_ms.max(0.0).round() as u64);
                }
                report.items_deleted += chunk.deleted_ttls.len() as u64;
                report.items_skipped += chunk.skipped;
                report.items_gone += chunk.gone;
                report.items_retried += chunk.retried;
                report.items_left += chunk.left;
                report.items_failed += chunk.failed.len() as u64;
                report.add_failed_keys(chunk.failed);
                report.add_events(chunk.events);
            }
            if let Some(e) = out.error {
                report.add_errors([SweepErrorEntry::new(Some(windows[i].key()), &e)]);
            }
        }
        report.windows_swept = read_all.iter().filter(|r| **r).count();
        report.windows_left = windows.len() - report.windows_swept;
        report.stopped_early = stop.reached() && !report.is_complete();
        report.lag = report.lags.stats();
        report.duration_ms = started.elapsed().as_millis() as u64;
        (report, complete)
    }

    /// Reads one partition to the end (or until `stop`), deleting as it goes.
    async fn sweep_partition(
        &self,
        key: &str,
        now: Timestamp,
        stop: &Stop,
        permits: &Semaphore,
    ) -> PartitionOutcome {
        let mut out = PartitionOutcome::default();
        if stop.reached() {
            return out;
        }
        let max_inflight = self.options.max_concurrency.max(1);
        let mut inflight = FuturesUnordered::new();
        let mut pending: Vec<Expired> = Vec::new();
        let mut start: Option<Key> = None;
        let delete = |chunk: Vec<Expired>| async move {
            let _permit = permits.acquire().await;
            // The stop may have come while this chunk waited for a permit.
            if stop.reached() {
                return ChunkOutcome::left(chunk.len());
            }
            let deleter = Deleter {
                store: &self.store,
                schema: &self.schema,
                options: &self.options,
                track_keys: self.events.is_some(),
                return_items: self.events.as_ref().is_some_and(|h| h.returned_items()),
            };
            match &self.events {
                None => deleter.delete_chunk(chunk, now, stop).await,
                Some(hook) => {
                    let wall = || self.wall.as_ref().map_or(now, |c| c.now());
                    delete_with_events(&deleter, hook.as_ref(), chunk, now, stop, &wall).await
                }
            }
        };
        loop {
            let page = match self
                .store
                .query_expired(
                    &self.schema,
                    key,
                    now,
                    start.take(),
                    self.options.page_limit,
                )
                .await
            {
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
            for item in &page.items {
                match check_item(&self.schema, item, now) {
                    Some(expired) => {
                        out.found += 1;
                        pending.push(expired);
                    }
                    None => out.invalid += 1,
                }
            }
            while pending.len() >= BATCH_SIZE && !stop.reached() {
                let chunk: Vec<Expired> = pending.drain(..BATCH_SIZE).collect();
                inflight.push(delete(chunk));
                while inflight.len() >= max_inflight {
                    if let Some(c) = inflight.next().await {
                        out.chunks.push(c);
                    }
                }
            }
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
            out.chunks.push(ChunkOutcome::left(pending.len()));
        } else {
            for chunk in pending.chunks(BATCH_SIZE) {
                inflight.push(delete(chunk.to_vec()));
            }
        }
        while let Some(c) = inflight.next().await {
            out.chunks.push(c);
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
            match check_item(&schema(), &item, Timestamp::from_secs(now)) {
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
        assert!(check_item(&schema(), &no_ttl, Timestamp::from_secs(2_000_000_000)).is_none());
        let no_key: Key = [("ttl".to_string(), AV::N("5".into()))].into();
        assert!(check_item(&schema(), &no_key, Timestamp::from_secs(2_000_000_000)).is_none());
        let ok: Key = [
            ("id".to_string(), AV::S("a".into())),
            ("ttl".to_string(), AV::N("5".into())),
        ]
        .into();
        assert!(check_item(&schema(), &ok, Timestamp::from_secs(6)).is_some());
        assert!(
            check_item(&schema(), &ok, Timestamp::from_secs(5)).is_none(),
            "ttl == now is not expired"
        );
        // native TTL's rule: a ttl more than five years old is never deleted
        let now = Timestamp::from_secs(1_800_000_000);
        assert!(
            check_item(&schema(), &ok, now).is_none(),
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
        assert!(check_item(&schema(), &six_years, now).is_none());
        let four_years: Key = [
            ("id".to_string(), AV::S("a".into())),
            (
                "ttl".to_string(),
                AV::N((1_800_000_000 - 4 * 365 * 86_400).to_string()),
            ),
        ]
        .into();
        assert!(check_item(&schema(), &four_years, now).is_some());
    }
}
