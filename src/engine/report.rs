//! What a sweep reports: counts, lag percentiles, failed keys and errors. One report per sweep;
//! tick mode and the long-running loop merge them.

use serde::Serialize;

use crate::store::{ErrorKind, StoreError};

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
    pub(crate) fn new(window: Option<String>, e: &StoreError) -> Self {
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
}
