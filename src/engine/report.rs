//! What a sweep reports: counts, lag percentiles, failed keys and errors. One report per sweep;
//! tick mode and the long-running loop merge them.

use serde::Serialize;

use crate::store::{key_to_json, ErrorKind, Key, StoreError};

/// Most failed keys a report keeps; the rest are counted in `failed_keys_dropped`.
pub const MAX_FAILED_KEYS: usize = 1000;

/// Most failed expiry events a report lists; the rest are counted in `failed_event_ids_dropped`.
pub const MAX_FAILED_EVENTS: usize = 1000;

/// Most errors a report keeps; the rest are counted in `errors_dropped`.
pub const MAX_ERRORS: usize = 100;

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

/// Every deleted item's lag in a fixed-size histogram (three significant digits), allocated on
/// the first lag recorded: merged reports have percentiles, and memory does not grow with what
/// is deleted.
#[derive(Clone, Default)]
pub struct LagHistogram(Option<Box<hdrhistogram::Histogram<u64>>>);

impl std::fmt::Debug for LagHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LagHistogram")
            .field("count", &self.len())
            .field("stats", &self.stats())
            .finish()
    }
}

impl LagHistogram {
    fn histogram(&mut self) -> &mut hdrhistogram::Histogram<u64> {
        self.0.get_or_insert_with(|| {
            // One millisecond to about 35 years: every lag a valid ttl can have.
            Box::new(
                hdrhistogram::Histogram::new_with_bounds(1, 1 << 40, 3)
                    .expect("static histogram bounds are valid"),
            )
        })
    }

    /// Records one lag.
    pub fn record(&mut self, lag_ms: u64) {
        self.histogram().saturating_record(lag_ms);
    }

    /// Adds another histogram's counts.
    pub fn add(&mut self, other: &LagHistogram) {
        if let Some(theirs) = &other.0 {
            // Same bounds on both sides: adding cannot fail.
            let _ = self.histogram().add(theirs.as_ref());
        }
    }

    /// Number of lags recorded.
    pub fn len(&self) -> u64 {
        self.0.as_ref().map_or(0, |h| h.len())
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Median, 99th percentile and maximum.
    pub fn stats(&self) -> LagStats {
        let Some(h) = self.0.as_ref().filter(|h| !h.is_empty()) else {
            return LagStats::default();
        };
        let q = |p: f64| h.highest_equivalent(h.value_at_quantile(p));
        LagStats {
            p50_ms: q(0.50),
            p99_ms: q(0.99),
            max_ms: h.max(),
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

impl FailedKey {
    pub(crate) fn new(key: &Key, reason: impl Into<String>) -> Self {
        let (key, reason) = (key_to_json(key), reason.into());
        FailedKey { key, reason }
    }
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
    /// Items kept because their ttl in the table was no longer the one the index listed.
    pub items_skipped: u64,
    /// Items already gone when read or deleted: by an earlier attempt whose answer was lost, or
    /// by the application.
    pub items_gone: u64,
    /// Items read whose ttl is unusable (not a number, milliseconds, not yet expired): never deleted.
    pub items_invalid: u64,
    /// Key re-submissions after unprocessed keys, throttling or 5xx answers.
    pub items_retried: u64,
    /// Delete requests refused with `ReplicatedWriteConflictException` (another Region's write to
    /// the item in progress) and sent again; their keys count in `items_retried`.
    pub write_conflicts_retried: u64,
    /// Items that could not be deleted within the retry limit.
    pub items_failed: u64,
    /// Items found but not attempted because the sweep had to stop; the next sweep finds them.
    pub items_left: u64,
    /// Batch mode: keys listed by the index and confirmed by a strongly consistent read of the
    /// table before their first send (one found gone or with another ttl is not sent).
    pub items_confirmed: u64,
    /// Batch mode: keys whose read was older than `BATCH_MAX_READ_AGE` at their send, read again.
    pub items_reread: u64,
    /// Batch mode: keys that aged past the bound again, deleted with a conditional `DeleteItem`
    /// instead (also counted as deleted, kept or gone).
    pub items_conditional: u64,
    /// Expiry index table mode: entries removed once their items were judged; an item that
    /// failed or was left keeps its entry.
    pub index_entries_removed: u64,
    /// Expiry lag of the deleted items, relative to the sweep instant.
    pub lag: LagStats,
    /// Wall time, milliseconds.
    pub duration_ms: u64,
    /// True when the deadline or a shutdown request stopped the sweep before it finished.
    pub stopped_early: bool,
    /// Sweeps that stood by (`LEADER_LEASE`): another sweeper held the table's lease.
    pub stood_by: u32,
    /// Sweeps that stood by beside a lease held with another layout than this sweeper's.
    pub lease_layout_mismatch: u32,
    /// Times this sweeper gave the lease up: its reads or deletes had failed for a lease.
    pub lease_released: u32,
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
    /// How far (ms) the host clock was found ahead of DynamoDB's and pulled back, at most.
    pub clock_ahead_ms: u64,
    /// Failed keys beyond the [`MAX_FAILED_KEYS`] kept in `failed_keys`.
    pub failed_keys_dropped: u64,
    /// Errors beyond the [`MAX_ERRORS`] kept in `errors`.
    pub errors_dropped: u64,
    /// Expiry events (`Item Expired`) the sink accepted.
    pub events_published: u64,
    /// Expiry events and cancellations that could not be published.
    pub events_failed: u64,
    /// Cancellations (`Item Expiry Cancelled`) the sink accepted.
    pub events_cancelled: u64,
    /// Events published without their item because of the sink's size limit.
    pub events_truncated: u64,
    /// Event re-submissions after throttling, 5xx, timeouts or per-entry failures.
    pub events_retried: u64,
    /// The events not published, with the reason.
    pub failed_event_ids: Vec<FailedEvent>,
    /// Failed events beyond the [`MAX_FAILED_EVENTS`] kept in `failed_event_ids`.
    pub failed_event_ids_dropped: u64,
    /// Every deleted item's lag, so that merged reports have percentiles.
    #[serde(skip)]
    pub lags: LagHistogram,
}

impl SweepReport {
    /// True when every expired item found was deleted or knowingly kept, and nothing failed —
    /// expiry events included.
    pub fn is_success(&self) -> bool {
        self.items_failed == 0 && self.errors.is_empty() && self.events_failed == 0
    }

    /// Adds what publishing expiry events did, keeping up to [`MAX_FAILED_EVENTS`] failed ones.
    pub fn add_events(&mut self, tally: EventTally) {
        add_counts!(self, tally; events_published = published, events_failed = failed,
            events_cancelled = cancelled, events_truncated = truncated, events_retried = retried);
        self.add_failed_events(tally.failed_events);
    }

    fn add_failed_events(&mut self, events: Vec<FailedEvent>) {
        let kept = &mut self.failed_event_ids;
        self.failed_event_ids_dropped += keep_at_most(kept, MAX_FAILED_EVENTS, events);
    }

    /// True when every window was read to the end and every found item was handled.
    pub fn is_complete(&self) -> bool {
        self.windows_left == 0 && self.items_left == 0
    }

    /// Adds a later sweep's results to this one (tick mode and long-running mode).
    pub fn merge(&mut self, mut other: SweepReport) {
        if self.ticks == 0 {
            self.sweep_at = other.sweep_at.clone();
            self.table = other.table.clone();
            self.delete_mode = other.delete_mode.clone();
        }
        self.ticks += other.ticks.max(1);
        add_counts!(self, other; stood_by, lease_layout_mismatch, lease_released, duration_ms);
        let before = self.checkpoint_before.take();
        self.checkpoint_before = before.or(other.checkpoint_before.take());
        let after = other.checkpoint_after.take();
        self.checkpoint_after = after.or(self.checkpoint_after.take());
        self.clock_ahead_ms = self.clock_ahead_ms.max(other.clock_ahead_ms);
        self.add_pass(other);
    }

    /// Adds another pass of the same sweep (the packs' beside the entries'): its counts, and its
    /// windows left, stop and cap.
    pub fn add_pass(&mut self, other: SweepReport) {
        add_counts!(self, other; windows_swept, windows_left);
        self.stopped_early |= other.stopped_early;
        self.catchup_capped |= other.catchup_capped;
        self.add_partition(other);
    }

    /// Adds the counts, kept lists and lags of another part of the same sweep (a partition, a
    /// slice of windows).
    pub fn add_partition(&mut self, other: SweepReport) {
        add_counts!(self, other; items_found, items_deleted, items_skipped, items_gone,
            items_invalid, items_retried, write_conflicts_retried, items_failed, items_left,
            items_confirmed, items_reread, items_conditional, index_entries_removed,
            failed_keys_dropped, errors_dropped, events_published, events_failed,
            events_cancelled, events_truncated, events_retried, failed_event_ids_dropped);
        self.add_failed_keys(other.failed_keys);
        self.add_errors(other.errors);
        self.add_failed_events(other.failed_event_ids);
        self.lags.add(&other.lags);
        self.lag = self.lags.stats();
    }

    /// Keeps up to [`MAX_FAILED_KEYS`] failed keys, counting the rest.
    pub fn add_failed_keys(&mut self, keys: impl IntoIterator<Item = FailedKey>) {
        self.failed_keys_dropped += keep_at_most(&mut self.failed_keys, MAX_FAILED_KEYS, keys);
    }

    /// Keeps up to [`MAX_ERRORS`] errors, counting the rest.
    pub fn add_errors(&mut self, errors: impl IntoIterator<Item = SweepErrorEntry>) {
        self.errors_dropped += keep_at_most(&mut self.errors, MAX_ERRORS, errors);
    }
}

/// Adds `items` to `kept` up to `max` in all; answers how many it left out.
fn keep_at_most<T>(kept: &mut Vec<T>, max: usize, items: impl IntoIterator<Item = T>) -> u64 {
    let mut items = items.into_iter();
    kept.extend(items.by_ref().take(max.saturating_sub(kept.len())));
    items.count() as u64
}

/// An event that could not be published.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedEvent {
    /// Its id.
    pub id: String,
    /// The item's key, DynamoDB JSON.
    pub key: serde_json::Value,
    /// Why.
    pub reason: String,
}

/// What publishing did, added up into the report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventTally {
    /// `Item Expired` events accepted.
    pub published: u64,
    /// Events not published.
    pub failed: u64,
    /// Cancellations accepted.
    pub cancelled: u64,
    /// Events published without their item, for size.
    pub truncated: u64,
    /// Entry re-submissions.
    pub retried: u64,
    /// The events not published.
    pub failed_events: Vec<FailedEvent>,
}

impl EventTally {
    /// Adds `other`.
    pub fn add(&mut self, other: EventTally) {
        add_counts!(self, other; published, failed, cancelled, truncated, retried);
        self.failed_events.extend(other.failed_events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(lags: impl IntoIterator<Item = u64>) -> LagHistogram {
        let mut h = LagHistogram::default();
        for lag in lags {
            h.record(lag);
        }
        h
    }

    #[test]
    fn lag_percentiles_use_nearest_rank() {
        let s = histogram((1..=100).rev()).stats();
        assert_eq!((s.p50_ms, s.p99_ms, s.max_ms), (50, 99, 100));
        assert_eq!(LagHistogram::default().stats(), LagStats::default());
        let s = histogram([7]).stats();
        assert_eq!((s.p50_ms, s.p99_ms, s.max_ms), (7, 7, 7));
        // three significant digits above 2 s
        let s = histogram([123_456]).stats();
        assert!(s.max_ms.abs_diff(123_456) <= 123, "{s:?}");
    }

    #[test]
    fn merging_keeps_memory_bounded_and_counts_what_it_drops() {
        let failed = |n: usize| FailedKey {
            key: serde_json::json!({"id": {"S": n.to_string()}}),
            reason: "throttled".into(),
        };
        let mut total = SweepReport::default();
        for tick in 0..3_000u64 {
            let mut r = SweepReport {
                items_failed: 1,
                lags: histogram([tick % 1000, 5]),
                ..SweepReport::default()
            };
            r.add_failed_keys([failed(tick as usize)]);
            r.add_errors([SweepErrorEntry {
                window: None,
                kind: ErrorKind::Throttled,
                message: "slow down".into(),
            }]);
            total.merge(r);
        }
        assert_eq!(total.ticks, 3_000);
        assert_eq!(total.failed_keys.len(), MAX_FAILED_KEYS);
        assert_eq!(total.failed_keys_dropped, 3_000 - MAX_FAILED_KEYS as u64);
        assert_eq!(total.errors.len(), MAX_ERRORS);
        assert_eq!(total.errors_dropped, 3_000 - MAX_ERRORS as u64);
        assert_eq!(total.lags.len(), 6_000);
        assert_eq!(total.lag.max_ms, 999);
    }
}
