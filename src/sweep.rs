//! The sweep engine: one pass over the windows that can hold expired items.
//!
//! For each window (newest first) it pages through the GSI for `ttl < now`, checks every item it
//! reads, and deletes the expired ones — in `BatchWriteItem` chunks of 25, or one conditional
//! `DeleteItem` at a time — with a bounded number of chunks in flight while the next page is read.
//! Unprocessed keys, throttling and 5xx answers are retried with exponential backoff and full
//! jitter; keys that still fail are returned in the report, never dropped. The pass stops
//! starting new work at its deadline and reports what it left for the next run.
//!
//! The engine takes `now` and the deadline as inputs and talks to DynamoDB only through
//! [`Store`], so it is tested with mocked and real stores alike.

use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::config::{Config, DeleteMode};
use crate::store::{
    key_to_json, ConditionalOutcome, ErrorKind, Key, Store, StoreError, TableSchema,
};
use crate::window::{iso_millis, parse_ttl, windows_to_sweep, Window};

/// `BatchWriteItem` accepts at most 25 requests.
pub const BATCH_SIZE: usize = 25;

/// Engine settings that come from [`Config`] plus knobs for tests and tools.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Window width, seconds.
    pub window_seconds: u32,
    /// Past windows read besides the current one.
    pub lookback_windows: u32,
    /// Batch or conditional deletes.
    pub delete_mode: DeleteMode,
    /// Delete chunks in flight at once.
    pub max_concurrency: usize,
    /// Retries per chunk (unprocessed keys, throttling, 5xx).
    pub max_retries: u32,
    /// Backoff base: the first retry waits up to this long.
    pub backoff_base: Duration,
    /// Backoff cap: no single wait is longer.
    pub backoff_cap: Duration,
    /// Query page size (`Limit`); `None` lets DynamoDB fill 1 MB pages.
    pub page_limit: Option<i32>,
}

impl SweepOptions {
    /// Options from validated configuration, with the default backoff (50 ms doubling to 5 s).
    pub fn from_config(config: &Config) -> Self {
        SweepOptions {
            window_seconds: config.window_seconds,
            lookback_windows: config.lookback_windows,
            delete_mode: config.delete_mode,
            max_concurrency: config.max_concurrency,
            max_retries: config.max_retries,
            backoff_base: Duration::from_millis(50),
            backoff_cap: Duration::from_secs(5),
            page_limit: None,
        }
    }

    /// The wait before retry number `attempt` (1-based): uniformly random in
    /// `[0, min(cap, base * 2^(attempt-1))]` ("full jitter").
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .backoff_base
            .saturating_mul(1u32 << (attempt.saturating_sub(1)).min(20));
        let ceiling = exp.min(self.backoff_cap);
        ceiling.mul_f64(fastrand::f64())
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
    /// The window being read, if the error happened while reading one.
    pub window: Option<String>,
    /// Classification.
    pub kind: ErrorKind,
    /// The error message.
    pub message: String,
}

/// What one sweep did. Serialized as the CLI's JSON output and the Lambda's response.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepReport {
    /// The sweep instant (`ttl < sweep_at` is expired).
    pub sweep_at: String,
    /// Table swept.
    pub table: String,
    /// Delete mode used.
    pub delete_mode: String,
    /// Windows read to the end.
    pub windows_swept: usize,
    /// Windows not (fully) read: the deadline came first, or reading failed.
    pub windows_left: usize,
    /// Expired items found.
    pub items_found: u64,
    /// Items deleted.
    pub items_deleted: u64,
    /// Items kept because their ttl was extended or removed after the index read (conditional).
    pub items_skipped: u64,
    /// Items read whose ttl is unusable (not a number, milliseconds, not yet expired): never deleted.
    pub items_invalid: u64,
    /// Key re-submissions after unprocessed keys, throttling or 5xx answers.
    pub items_retried: u64,
    /// Items that could not be deleted within the retry limit.
    pub items_failed: u64,
    /// Items found but not attempted because the deadline came; the next sweep finds them again.
    pub items_left: u64,
    /// Expiry lag of the deleted items.
    pub lag: LagStats,
    /// Wall time of the sweep, milliseconds.
    pub duration_ms: u64,
    /// True when the deadline stopped the sweep early.
    pub deadline_hit: bool,
    /// Keys that failed, with the reason.
    pub failed_keys: Vec<FailedKey>,
    /// Errors that stopped reading a window or the whole sweep.
    pub errors: Vec<SweepErrorEntry>,
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
    retried: u64,
    left: u64,
    failed: Vec<FailedKey>,
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

    /// The store in use.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Sweeps every window that can hold items expired at `now` (epoch seconds), starting no new
    /// request after `deadline`.
    pub async fn sweep(&self, now: i64, deadline: Option<Instant>) -> SweepReport {
        let windows = windows_to_sweep(
            now,
            self.options.window_seconds,
            self.options.lookback_windows,
        );
        self.sweep_windows(now, &windows, deadline).await
    }

    /// Sweeps exactly `windows` for items expired at `now`.
    pub async fn sweep_windows(
        &self,
        now: i64,
        windows: &[Window],
        deadline: Option<Instant>,
    ) -> SweepReport {
        let started = Instant::now();
        let past_deadline = || deadline.is_some_and(|d| Instant::now() >= d);
        let mut report = SweepReport {
            sweep_at: iso_millis(now),
            table: self.schema.table_name.clone(),
            delete_mode: self.options.delete_mode.to_string(),
            ..SweepReport::default()
        };
        let mut lags: Vec<u64> = Vec::new();
        let mut inflight = FuturesUnordered::new();
        let mut pending: Vec<Expired> = Vec::new();
        let chunk_size = BATCH_SIZE;
        let max_inflight = self.options.max_concurrency.max(1);
        let mut fatal = false;

        let mut absorb = |report: &mut SweepReport, out: ChunkOutcome| {
            for (ttl, at) in out.deleted_ttls.iter().zip(&out.deleted_at) {
                let deleted_at = now as f64 + at.duration_since(started).as_secs_f64();
                lags.push(((deleted_at - ttl).max(0.0) * 1000.0).round() as u64);
            }
            report.items_deleted += out.deleted_ttls.len() as u64;
            report.items_skipped += out.skipped;
            report.items_retried += out.retried;
            report.items_left += out.left;
            report.items_failed += out.failed.len() as u64;
            report.failed_keys.extend(out.failed);
        };

        'windows: for (i, window) in windows.iter().enumerate() {
            if fatal || past_deadline() {
                report.deadline_hit |= !fatal;
                report.windows_left += windows.len() - i;
                break;
            }
            let key = window.key();
            let mut start: Option<Key> = None;
            loop {
                let page = match self
                    .store
                    .query_expired(
                        &self.schema,
                        &key,
                        now,
                        start.take(),
                        self.options.page_limit,
                    )
                    .await
                {
                    Ok(page) => page,
                    Err(e) => {
                        warn!(window = %key, error = %e, "query failed; window left for the next sweep");
                        fatal = !e.kind.is_retryable();
                        report.errors.push(SweepErrorEntry {
                            window: Some(key.clone()),
                            kind: e.kind,
                            message: e.to_string(),
                        });
                        report.windows_left += 1;
                        continue 'windows;
                    }
                };
                for item in &page.items {
                    match self.check_item(item, now) {
                        Some(expired) => {
                            report.items_found += 1;
                            pending.push(expired);
                        }
                        None => report.items_invalid += 1,
                    }
                }
                while pending.len() >= chunk_size {
                    let chunk: Vec<Expired> = pending.drain(..chunk_size).collect();
                    inflight.push(self.delete_chunk(chunk, now, deadline));
                    while inflight.len() >= max_inflight {
                        if let Some(out) = inflight.next().await {
                            absorb(&mut report, out);
                        }
                    }
                }
                match page.next {
                    Some(next) if past_deadline() => {
                        debug!(window = %key, "deadline reached mid-window");
                        drop(next);
                        report.deadline_hit = true;
                        report.windows_left += windows.len() - i;
                        break 'windows;
                    }
                    Some(next) => start = Some(next),
                    None => break,
                }
            }
            report.windows_swept += 1;
        }
        for chunk in pending.chunks(chunk_size) {
            inflight.push(self.delete_chunk(chunk.to_vec(), now, deadline));
            while inflight.len() >= max_inflight {
                if let Some(out) = inflight.next().await {
                    absorb(&mut report, out);
                }
            }
        }
        while let Some(out) = inflight.next().await {
            absorb(&mut report, out);
        }
        report.deadline_hit |= report.items_left > 0;
        report.lag = LagStats::from_lags(&mut lags);
        report.duration_ms = started.elapsed().as_millis() as u64;
        report
    }

    /// Returns the item's key and ttl if — and only if — the item as read is expired at `now`.
    fn check_item(&self, item: &Key, now: i64) -> Option<Expired> {
        let ttl = match item.get(&self.schema.ttl_attribute) {
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
        let Some(key) = self.schema.key_of(item) else {
            warn!("index item without the table's key attributes ignored");
            return None;
        };
        Some(Expired { key, ttl })
    }

    /// Deletes one chunk, retrying with backoff; never returns an error, only an outcome.
    async fn delete_chunk(
        &self,
        chunk: Vec<Expired>,
        now: i64,
        deadline: Option<Instant>,
    ) -> ChunkOutcome {
        match self.options.delete_mode {
            DeleteMode::Batch => self.delete_batch(chunk, deadline).await,
            DeleteMode::Conditional => self.delete_conditional(chunk, now, deadline).await,
        }
    }

    async fn delete_batch(&self, chunk: Vec<Expired>, deadline: Option<Instant>) -> ChunkOutcome {
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
            if deadline.is_some_and(|d| Instant::now() + wait >= d) {
                out.left += remaining.len() as u64;
                return out;
            }
            debug!(attempt, keys = remaining.len(), wait_ms = wait.as_millis() as u64, %reason, "retrying deletes");
            out.retried += remaining.len() as u64;
            tokio::time::sleep(wait).await;
        }
    }

    async fn delete_conditional(
        &self,
        chunk: Vec<Expired>,
        now: i64,
        deadline: Option<Instant>,
    ) -> ChunkOutcome {
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
                if deadline.is_some_and(|d| Instant::now() + wait >= d) {
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
