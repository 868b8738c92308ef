//! The sweep engine: one pass over the windows that can hold expired items.
//!
//! For each window — and each shard of it, when windows are sharded — it pages through the GSI
//! for `ttl < now`, checks every item it reads, and deletes the expired ones: in `BatchWriteItem`
//! chunks of 25, or one conditional `DeleteItem` at a time. Partitions are read concurrently and
//! delete requests run concurrently, both bounded by `max_concurrency`. Unprocessed keys,
//! throttling and 5xx answers are retried with exponential backoff and full jitter; keys that
//! still fail are returned in the report, never dropped. The pass starts no new work once its
//! [`Stop`] condition holds (deadline or shutdown) and reports what it left for the next run.
//!
//! With a checkpoint, a sweep also covers every window since the last fully swept boundary
//! (capped by `max_catchup_seconds`) and then moves the checkpoint forward — only over windows it
//! swept completely, and never backwards.
//!
//! The engine takes `now` and its stop condition as inputs and talks to DynamoDB only through
//! [`Store`], so it is tested with mocked and real stores alike.

use std::time::Duration;

use futures::stream::{self, FuturesUnordered, StreamExt};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::config::{Config, DeleteMode};
use crate::store::{
    key_to_json, ConditionalOutcome, ErrorKind, Key, Store, StoreError, TableSchema,
};
use crate::window::{iso_millis, parse_ttl, partition_key, windows_to_sweep, Window};

/// `BatchWriteItem` accepts at most 25 requests.
pub const BATCH_SIZE: usize = 25;

/// Where the catch-up checkpoint lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Checkpoint table (partition key `id`, String).
    pub table: String,
    /// The checkpoint item's id: one per swept table and index.
    pub id: String,
}

/// Engine settings that come from [`Config`] plus knobs for tests and tools.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Window width, seconds.
    pub window_seconds: u32,
    /// Past windows read besides the current one.
    pub lookback_windows: u32,
    /// Shards per window (1: unsharded keys).
    pub window_shards: u32,
    /// Batch or conditional deletes.
    pub delete_mode: DeleteMode,
    /// Partitions read, and delete requests sent, at once.
    pub max_concurrency: usize,
    /// Retries per chunk (unprocessed keys, throttling, 5xx).
    pub max_retries: u32,
    /// Backoff base: the first retry waits up to this long.
    pub backoff_base: Duration,
    /// Backoff cap: no single wait is longer.
    pub backoff_cap: Duration,
    /// Query page size (`Limit`); `None` lets DynamoDB fill 1 MB pages.
    pub page_limit: Option<i32>,
    /// The catch-up checkpoint, if any.
    pub checkpoint: Option<Checkpoint>,
    /// How far back a checkpoint may take a sweep, seconds.
    pub max_catchup_seconds: u64,
}

impl SweepOptions {
    /// Options from validated configuration, with the default backoff (50 ms doubling to 5 s).
    pub fn from_config(config: &Config) -> Self {
        SweepOptions {
            window_seconds: config.window_seconds,
            lookback_windows: config.lookback_windows,
            window_shards: config.window_shards,
            delete_mode: config.delete_mode,
            max_concurrency: config.max_concurrency,
            max_retries: config.max_retries,
            backoff_base: Duration::from_millis(50),
            backoff_cap: Duration::from_secs(5),
            page_limit: None,
            checkpoint: config.checkpoint_table.as_ref().map(|table| Checkpoint {
                table: table.clone(),
                id: format!("{}/{}", config.table_name, config.index_name),
            }),
            max_catchup_seconds: config.max_catchup_seconds,
        }
    }

    /// The wait before retry number `attempt` (1-based); see [`full_jitter`].
    pub fn backoff(&self, attempt: u32) -> Duration {
        full_jitter(self.backoff_base, self.backoff_cap, attempt)
    }
}

/// Exponential backoff with full jitter: the wait before retry number `attempt` (1-based) is
/// uniformly random in `[0, min(cap, base * 2^(attempt-1))]`.
pub fn full_jitter(base: Duration, cap: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    exp.min(cap).mul_f64(fastrand::f64())
}

/// When a sweep must stop starting new work: a deadline, a shutdown request, or both.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    deadline: Option<Instant>,
    cancel: CancellationToken,
}

impl Stop {
    /// Never stops early.
    pub fn never() -> Self {
        Stop::default()
    }

    /// Stops at `deadline`, if any.
    pub fn at(deadline: Option<Instant>) -> Self {
        Stop {
            deadline,
            cancel: CancellationToken::new(),
        }
    }

    /// Also stops when `token` is cancelled (e.g. on SIGTERM).
    pub fn with_cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The shutdown token.
    pub fn token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// True once the deadline has passed or shutdown was requested.
    pub fn reached(&self) -> bool {
        self.cancel.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// True if waiting `wait` would run into the stop condition.
    fn would_pass(&self, wait: Duration) -> bool {
        self.cancel.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() + wait >= d)
    }

    /// A stop condition that also holds when this one does, but can be triggered on its own.
    fn child(&self) -> Stop {
        Stop {
            deadline: self.deadline,
            cancel: self.cancel.child_token(),
        }
    }
}

/// Expiry lag of deleted items (time of deletion minus ttl), milliseconds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LagStats {
    /// Median.
    pub p50_ms: u64,
    /// 99th percentile.
    pub p99_ms: u64,
    /// Maximum.
    pub max_ms: u64,
}

impl LagStats {
    /// Nearest-rank percentiles of `lags` (any order).
    pub fn from_lags(lags: &mut [u64]) -> LagStats {
        if lags.is_empty() {
            return LagStats::default();
        }
        lags.sort_unstable();
        let rank = |p: f64| {
            let idx = ((p * lags.len() as f64).ceil() as usize).clamp(1, lags.len()) - 1;
            lags[idx]
        };
        LagStats {
            p50_ms: rank(0.50),
            p99_ms: rank(0.99),
            max_ms: lags[lags.len() - 1],
        }
    }
}

/// A key the sweeper could not delete, and why.
#[derive(Debug, Clone, Serialize)]
pub struct FailedKey {
    /// The primary key, as DynamoDB JSON.
    pub key: serde_json::Value,
    /// The last error seen for it.
    pub reason: String,
}

/// A DynamoDB error that stopped part of a sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepErrorEntry {
    /// The partition (window, or window#shard) being read, if any.
    pub window: Option<String>,
    /// Classification.
    pub kind: ErrorKind,
    /// The error message.
    pub message: String,
}

impl SweepErrorEntry {
    fn new(window: Option<String>, e: &StoreError) -> Self {
        SweepErrorEntry {
            window,
            kind: e.kind,
            message: e.to_string(),
        }
    }
}

/// What one sweep (or, merged, a series of ticks) did. Serialized as the CLI's JSON output and
/// the Lambda's response.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepReport {
    /// The sweep instant (`ttl < sweep_at` is expired); the first one for merged ticks.
    pub sweep_at: String,
    /// Table swept.
    pub table: String,
    /// Delete mode used.
    pub delete_mode: String,
    /// Sweeps merged into this report (ticks).
    pub ticks: u32,
    /// Windows whose every shard was read to the end.
    pub windows_swept: usize,
    /// Windows not (fully) read: the stop condition came first, or reading failed.
    pub windows_left: usize,
    /// Expired items found.
    pub items_found: u64,
    /// Items deleted.
    pub items_deleted: u64,
    /// Items kept because their ttl was extended or removed after the index read (conditional).
    pub items_skipped: u64,
    /// Items already gone when their conditional delete arrived: an earlier attempt whose answer
    /// was lost had deleted them, or the application did (conditional).
    pub items_gone: u64,
    /// Items read whose ttl is unusable (not a number, milliseconds, not yet expired): never deleted.
    pub items_invalid: u64,
    /// Key re-submissions after unprocessed keys, throttling or 5xx answers.
    pub items_retried: u64,
    /// Items that could not be deleted within the retry limit.
    pub items_failed: u64,
    /// Items found but not attempted because the sweep had to stop; the next sweep finds them.
    pub items_left: u64,
    /// Expiry lag of the deleted items, relative to the sweep instant.
    pub lag: LagStats,
    /// Wall time, milliseconds.
    pub duration_ms: u64,
    /// True when the deadline or a shutdown request stopped the sweep before it finished.
    pub stopped_early: bool,
    /// The checkpoint before the sweep (ISO time), when a checkpoint is configured.
    pub checkpoint_before: Option<String>,
    /// The checkpoint after the sweep.
    pub checkpoint_after: Option<String>,
    /// True when the checkpoint was older than the catch-up cap and older windows were skipped.
    pub catchup_capped: bool,
    /// Keys that failed, with the reason.
    pub failed_keys: Vec<FailedKey>,
    /// Errors that stopped reading a window or the whole sweep.
    pub errors: Vec<SweepErrorEntry>,
    /// Every deleted item's lag, kept so that merged reports have exact percentiles.
    #[serde(skip)]
    pub lags_ms: Vec<u64>,
}

impl SweepReport {
    /// True when every expired item found was deleted or knowingly kept, and nothing failed.
    pub fn is_success(&self) -> bool {
        self.items_failed == 0 && self.errors.is_empty()
    }

    /// True when every window was read to the end and every found item was handled.
    pub fn is_complete(&self) -> bool {
        self.windows_left == 0 && self.items_left == 0
    }

    /// Adds a later sweep's results to this one (tick mode and long-running mode).
    pub fn merge(&mut self, other: SweepReport) {
        if self.ticks == 0 {
            self.sweep_at = other.sweep_at.clone();
            self.table = other.table.clone();
            self.delete_mode = other.delete_mode.clone();
        }
        self.ticks += other.ticks.max(1);
        self.windows_swept += other.windows_swept;
        self.windows_left += other.windows_left;
        self.items_found += other.items_found;
        self.items_deleted += other.items_deleted;
        self.items_skipped += other.items_skipped;
        self.items_gone += other.items_gone;
        self.items_invalid += other.items_invalid;
        self.items_retried += other.items_retried;
        self.items_failed += other.items_failed;
        self.items_left += other.items_left;
        self.duration_ms += other.duration_ms;
        self.stopped_early |= other.stopped_early;
        self.catchup_capped |= other.catchup_capped;
        if other.checkpoint_before.is_some() && self.checkpoint_before.is_none() {
            self.checkpoint_before = other.checkpoint_before;
        }
        if other.checkpoint_after.is_some() {
            self.checkpoint_after = other.checkpoint_after;
        }
        self.failed_keys.extend(other.failed_keys);
        self.errors.extend(other.errors);
        self.lags_ms.extend(other.lags_ms);
        self.lag = LagStats::from_lags(&mut self.lags_ms);
    }
}

/// An expired item ready to delete.
#[derive(Debug, Clone)]
struct Expired {
    key: Key,
    ttl: f64,
}

/// Outcome of deleting one chunk.
#[derive(Debug, Default)]
struct ChunkOutcome {
    deleted_ttls: Vec<f64>,
    deleted_at: Vec<Instant>,
    skipped: u64,
    gone: u64,
    retried: u64,
    left: u64,
    failed: Vec<FailedKey>,
}

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
/// Number ttl in epoch seconds, before `now`, and the table's key attributes present.
fn check_item(schema: &TableSchema, item: &Key, now: i64) -> Option<Expired> {
    let ttl = match item.get(&schema.ttl_attribute) {
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
    if ttl >= now as f64 {
        warn!(
            ttl,
            now, "index returned an item that is not yet expired; ignored"
        );
        return None;
    }
    let Some(key) = schema.key_of(item) else {
        warn!("index item without the table's key attributes ignored");
        return None;
    };
    Some(Expired { key, ttl })
}

/// Runs sweeps of one table through a [`Store`].
#[derive(Debug)]
pub struct Sweeper<S> {
    store: S,
    schema: TableSchema,
    options: SweepOptions,
}

impl<S: Store> Sweeper<S> {
    /// A sweeper for the table described by `schema` (see `DynamoStore::describe`).
    pub fn new(store: S, schema: TableSchema, options: SweepOptions) -> Self {
        Sweeper {
            store,
            schema,
            options,
        }
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

    /// A full sweep as of `now` (epoch seconds): the current window, the lookback windows, and —
    /// with a checkpoint — every window since the checkpoint; then the checkpoint moves forward.
    pub async fn sweep(&self, now: i64, stop: &Stop) -> SweepReport {
        let width = self.options.window_seconds;
        let mut windows = windows_to_sweep(now, width, self.options.lookback_windows);
        let mut checkpoint_before = None;
        let mut capped = false;
        // With a checkpoint: the boundary after which every window must be swept completely
        // before the checkpoint may move (the checkpoint, or the catch-up cap).
        let mut floor = i64::MIN;
        let mut checkpoint_error = None;
        if let Some(cp) = &self.options.checkpoint {
            match self.store.read_checkpoint(&cp.table, &cp.id).await {
                Ok(Some(c)) => {
                    checkpoint_before = Some(c);
                    let oldest = now.saturating_sub(self.options.max_catchup_seconds as i64);
                    capped = c < oldest;
                    if capped {
                        warn!(
                            checkpoint = %iso_millis(c),
                            from = %iso_millis(oldest),
                            "checkpoint is older than MAX_CATCHUP; windows before the cap are not swept"
                        );
                    }
                    floor = c.max(oldest);
                    // Read back from the current window to the one that holds `floor`, and never
                    // fewer windows than the lookback.
                    let back = u64::try_from(windows[0].start - floor)
                        .unwrap_or(0)
                        .div_ceil(u64::from(width));
                    let back = u32::try_from(back).unwrap_or(u32::MAX);
                    if back > self.options.lookback_windows {
                        windows = windows_to_sweep(now, width, back);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    warn!(error = %e, "could not read the checkpoint; sweeping the lookback windows only");
                    checkpoint_error = Some(e);
                }
            }
        }

        let (mut report, complete) = self.sweep_partitions(now, &windows, stop).await;
        report.catchup_capped = capped;
        if let Some(e) = checkpoint_error {
            report.errors.push(SweepErrorEntry::new(None, &e));
            return report;
        }
        if let Some(cp) = &self.options.checkpoint {
            report.checkpoint_before = checkpoint_before.map(iso_millis);
            // Walk forward from the oldest window the checkpoint (or the cap) left to sweep, over
            // windows that are wholly expired and were swept completely.
            let mut advanced_to = None;
            for (w, ok) in windows.iter().zip(&complete).rev() {
                if w.end <= floor {
                    continue;
                }
                if !ok || w.end >= now {
                    break;
                }
                advanced_to = Some(w.end);
            }
            let after = match advanced_to {
                Some(to) if checkpoint_before.is_none_or(|c| to > c) => {
                    match self.store.advance_checkpoint(&cp.table, &cp.id, to).await {
                        Ok(moved) => {
                            debug!(to = %iso_millis(to), moved, "checkpoint advanced");
                            Some(to)
                        }
                        Err(e) => {
                            report.errors.push(SweepErrorEntry::new(None, &e));
                            checkpoint_before
                        }
                    }
                }
                _ => checkpoint_before,
            };
            report.checkpoint_after = after.map(iso_millis);
        }
        report
    }

    /// Sweeps exactly `windows` (every shard of each) for items expired at `now`; no checkpoint.
    pub async fn sweep_windows(&self, now: i64, windows: &[Window], stop: &Stop) -> SweepReport {
        self.sweep_partitions(now, windows, stop).await.0
    }

    /// Sweeps every shard of every window; returns the report and, per window, whether it was
    /// swept completely.
    async fn sweep_partitions(
        &self,
        now: i64,
        windows: &[Window],
        stop: &Stop,
    ) -> (SweepReport, Vec<bool>) {
        let started = Instant::now();
        let shards = self.options.window_shards.max(1);
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
            sweep_at: iso_millis(now),
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
                    let deleted_at = now as f64 + at.duration_since(started).as_secs_f64();
                    report
                        .lags_ms
                        .push(((deleted_at - ttl).max(0.0) * 1000.0).round() as u64);
                }
                report.items_deleted += chunk.deleted_ttls.len() as u64;
                report.items_skipped += chunk.skipped;
                report.items_gone += chunk.gone;
                report.items_retried += chunk.retried;
                report.items_left += chunk.left;
                report.items_failed += chunk.failed.len() as u64;
                report.failed_keys.extend(chunk.failed);
            }
            if let Some(e) = out.error {
                report
                    .errors
                    .push(SweepErrorEntry::new(Some(windows[i].key()), &e));
            }
        }
        report.windows_swept = read_all.iter().filter(|r| **r).count();
        report.windows_left = windows.len() - report.windows_swept;
        report.stopped_early = stop.reached() && !report.is_complete();
        report.lag = LagStats::from_lags(&mut report.lags_ms);
        report.duration_ms = started.elapsed().as_millis() as u64;
        (report, complete)
    }

    /// Reads one partition to the end (or until `stop`), deleting as it goes.
    async fn sweep_partition(
        &self,
        key: &str,
        now: i64,
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
            self.delete_chunk(chunk, now, stop).await
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
                        stop.cancel.cancel();
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
            while pending.len() >= BATCH_SIZE {
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
        for chunk in pending.chunks(BATCH_SIZE) {
            inflight.push(delete(chunk.to_vec()));
        }
        while let Some(c) = inflight.next().await {
            out.chunks.push(c);
        }
        out
    }

    /// Deletes one chunk, retrying with backoff; never returns an error, only an outcome.
    async fn delete_chunk(&self, chunk: Vec<Expired>, now: i64, stop: &Stop) -> ChunkOutcome {
        match self.options.delete_mode {
            DeleteMode::Batch => self.delete_batch(chunk, stop).await,
            DeleteMode::Conditional => self.delete_conditional(chunk, now, stop).await,
        }
    }

    async fn delete_batch(&self, chunk: Vec<Expired>, stop: &Stop) -> ChunkOutcome {
        let mut out = ChunkOutcome::default();
        let mut remaining = chunk;
        let mut attempt = 0u32;
        loop {
            let keys: Vec<Key> = remaining.iter().map(|e| e.key.clone()).collect();
            let result = self.store.batch_delete(&self.schema, keys).await;
            let (retry, reason) = match result {
                Ok(unprocessed) => {
                    let (left, done): (Vec<Expired>, Vec<Expired>) = remaining
                        .into_iter()
                        .partition(|e| unprocessed.contains(&e.key));
                    let at = Instant::now();
                    for e in done {
                        out.deleted_ttls.push(e.ttl);
                        out.deleted_at.push(at);
                    }
                    remaining = left;
                    if remaining.is_empty() {
                        return out;
                    }
                    (true, "left unprocessed by BatchWriteItem".to_owned())
                }
                Err(e) => (e.kind.is_retryable(), e.to_string()),
            };
            if !retry || attempt >= self.options.max_retries {
                out.failed.extend(remaining.iter().map(|e| FailedKey {
                    key: key_to_json(&e.key),
                    reason: reason.clone(),
                }));
                return out;
            }
            attempt += 1;
            let wait = self.options.backoff(attempt);
            if stop.would_pass(wait) {
                out.left += remaining.len() as u64;
                return out;
            }
            debug!(attempt, keys = remaining.len(), wait_ms = wait.as_millis() as u64, %reason, "retrying deletes");
            out.retried += remaining.len() as u64;
            tokio::time::sleep(wait).await;
        }
    }

    async fn delete_conditional(&self, chunk: Vec<Expired>, now: i64, stop: &Stop) -> ChunkOutcome {
        let mut out = ChunkOutcome::default();
        let mut items = chunk.into_iter();
        while let Some(e) = items.next() {
            let mut attempt = 0u32;
            loop {
                let err: StoreError = match self
                    .store
                    .delete_if_expired(&self.schema, e.key.clone(), now)
                    .await
                {
                    Ok(ConditionalOutcome::Deleted) => {
                        out.deleted_ttls.push(e.ttl);
                        out.deleted_at.push(Instant::now());
                        break;
                    }
                    Ok(ConditionalOutcome::Kept) => {
                        out.skipped += 1;
                        break;
                    }
                    Ok(ConditionalOutcome::Gone) => {
                        out.gone += 1;
                        break;
                    }
                    Err(err) => err,
                };
                if !err.kind.is_retryable() || attempt >= self.options.max_retries {
                    out.failed.push(FailedKey {
                        key: key_to_json(&e.key),
                        reason: err.to_string(),
                    });
                    break;
                }
                attempt += 1;
                let wait = self.options.backoff(attempt);
                if stop.would_pass(wait) {
                    out.left += 1 + items.len() as u64;
                    return out;
                }
                out.retried += 1;
                tokio::time::sleep(wait).await;
            }
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
            window_attribute: "w".into(),
            ttl_attribute: "ttl".into(),
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
            let expired_as_read = numeric && parse_ttl(&ttl).is_ok_and(|t| t < now as f64);
            match check_item(&schema(), &item, now) {
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
        assert!(check_item(&schema(), &no_ttl, 2_000_000_000).is_none());
        let no_key: Key = [("ttl".to_string(), AV::N("5".into()))].into();
        assert!(check_item(&schema(), &no_key, 2_000_000_000).is_none());
        let ok: Key = [
            ("id".to_string(), AV::S("a".into())),
            ("ttl".to_string(), AV::N("5".into())),
        ]
        .into();
        assert!(check_item(&schema(), &ok, 6).is_some());
        assert!(
            check_item(&schema(), &ok, 5).is_none(),
            "ttl == now is not expired"
        );
    }

    #[test]
    fn lag_percentiles_use_nearest_rank() {
        let mut lags: Vec<u64> = (1..=100).rev().collect();
        let s = LagStats::from_lags(&mut lags);
        assert_eq!((s.p50_ms, s.p99_ms, s.max_ms), (50, 99, 100));
        assert_eq!(LagStats::from_lags(&mut []), LagStats::default());
        let s = LagStats::from_lags(&mut [7]);
        assert_eq!((s.p50_ms, s.p99_ms, s.max_ms), (7, 7, 7));
    }

    #[test]
    fn backoff_is_bounded_and_grows() {
        let config =
            crate::config::Config::from_lookup(|k| (k == "TABLE_NAME").then(|| "t_1".into()))
                .unwrap();
        let o = SweepOptions::from_config(&config);
        for attempt in 1..40 {
            let cap = o
                .backoff_base
                .saturating_mul(1 << (attempt - 1).min(20))
                .min(o.backoff_cap);
            for _ in 0..50 {
                let d = o.backoff(attempt);
                assert!(d <= cap, "attempt {attempt}: {d:?} > {cap:?}");
            }
        }
        // Full jitter: over many draws the late attempts wait longer on average than the first.
        let mean = |a| (0..2000).map(|_| o.backoff(a).as_secs_f64()).sum::<f64>() / 2000.0;
        assert!(mean(6) > 4.0 * mean(1));
    }
}
