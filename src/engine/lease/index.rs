//! How current a Region's expiry index table is, as its stream indexer tells the lease
//! ([`IndexHealth`]): a holder whose index has lagged for a lease gives the lease up, and a
//! standby whose index lags leaves a lapsed lease to a Region whose index is current. The indexer
//! tells it in either of two ways: a follower running beside the sweeper reports its progress
//! ([`IndexHealth::indexed`]), and the Lambda's stream indexer, in other execution environments,
//! writes reports into the index table that the lease reads ([`IndexHealth::reported`]).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use tracing::warn;

use crate::engine::Stop;
use crate::expiry::Timestamp;
use crate::store::entries::STREAM_RETENTION_SECONDS;
use crate::store::{lock, IndexerReport, ServerTime, Store};

/// A record a stream batch failed to index counts as unindexed while a batch failed on it within
/// this: longer than the stream indexer's timeout (30 s) and the interval of its reports
/// ([`REPORT_EVERY`]), so that a record the event source mapping keeps delivering again counts
/// from one failed attempt to the next; a record indexed since in another environment, or passed
/// by the mapping, stops counting this long after its last failure.
pub const REPORT_FRESH: Duration = Duration::from_secs(60);

/// The stream indexer writes its report at most this often per execution environment and table,
/// but whenever a record starts or stops failing there.
pub const REPORT_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
struct Known {
    /// From the follower: the instant as of which every record was indexed; `None`: not watched.
    followed: Option<Instant>,
    /// From the reports, as last read: since when a record has been unindexed (`None`: none).
    reported: Option<Instant>,
}

/// How current this sweeper's own expiry index table is, from what its stream indexer reports:
/// the instant (monotonic) as of which every record of the stream was indexed. Not watched (no
/// indexer reports to it, as without `--follow-stream`) until [`IndexHealth::watch`]; the
/// reports read from the index table count whenever they say a record is unindexed.
#[derive(Debug, Default)]
pub struct IndexHealth {
    known: Mutex<Known>,
}

impl IndexHealth {
    /// An indexer starts reporting at `now`: the index counts as current then, so that one that
    /// never reports is behind from its start.
    pub fn watch(&self, now: Instant) {
        lock(&self.known).followed.get_or_insert(now);
    }

    /// The indexer reported at `now` that its oldest record not yet indexed is `behind` old (the
    /// age of the newest record it indexed when it holds none, 0 once read up to the end of its
    /// shards): every record written more than `behind` before `now` is indexed. A report older
    /// than what is known already changes nothing.
    pub fn indexed(&self, now: Instant, behind: Duration) {
        let as_of = now.checked_sub(behind).unwrap_or(now);
        let mut known = lock(&self.known);
        if known.followed.is_none_or(|c| c < as_of) {
            known.followed = Some(as_of);
        }
    }

    /// The stream indexer's reports, read at `now` (monotonic) when DynamoDB's clock read at
    /// least `server_now`: what they say ([`unindexed_for`]) replaces what the last read said.
    pub fn reported(&self, now: Instant, server_now: Timestamp, reports: &[IndexerReport]) {
        let behind = unindexed_for(reports, server_now);
        lock(&self.known).reported = behind.map(|b| now.checked_sub(b).unwrap_or(now));
    }

    /// Since when the index has not been known current: the records written since are not all
    /// indexed, as far as the indexer has said. `None` when not watched and no report says so.
    pub fn behind_since(&self) -> Option<Instant> {
        let known = lock(&self.known);
        known.followed.into_iter().chain(known.reported).min()
    }

    /// Whether the index lags `limit` or more at `now` (`false` when not watched and no report
    /// says a record is unindexed).
    pub fn lags(&self, now: Instant, limit: Duration) -> bool {
        self.behind_since()
            .is_some_and(|since| now.saturating_duration_since(since) >= limit)
    }
}

/// How long, at `now` (DynamoDB's clock), the oldest record the stream indexer's `reports` show
/// unindexed has been so: of the records a batch failed on within [`REPORT_FRESH`], the earliest
/// created, if within the stream's retention (an older one is gone from the stream). `None`: no
/// report shows a record unindexed (no traffic, or every batch indexed).
pub fn unindexed_for(reports: &[IndexerReport], now: Timestamp) -> Option<Duration> {
    let retention = Duration::from_secs(STREAM_RETENTION_SECONDS as u64);
    let since = reports
        .iter()
        .flat_map(|r| &r.failing)
        .filter(|f| f.at >= now - REPORT_FRESH && f.since >= now - retention)
        .map(|f| f.since)
        .min()?;
    Some(Duration::from_millis(now.millis_since(since).max(0) as u64))
}

/// The index health a lease item counts, and where the stream indexer's reports are read.
#[derive(Clone, Copy)]
pub(super) struct Index<'a> {
    pub(super) health: &'a IndexHealth,
    pub(super) reports: Option<&'a str>,
}

impl Index<'_> {
    /// Reads the stream indexer's reports, if there are any to read, into the index health; a
    /// read that fails leaves what was known.
    pub(super) async fn read<S: Store>(&self, store: &S, stop: &Stop, time: &dyn ServerTime) {
        let Some(table) = self.reports else {
            return;
        };
        let read = stop.bound("Query", store.read_indexer_reports(table)).await;
        match (read, time.lower_bound()) {
            (Ok(reports), Some(lower)) => self.health.reported(Instant::now(), lower, &reports),
            (Ok(_), None) => {}
            (Err(e), _) => {
                warn!(index = table, error = %e, "could not read the stream indexer's reports; the lease counts what they last said");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_lags_from_the_last_record_known_indexed() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let health = IndexHealth::default();
        assert!(!health.lags(t + s(3600), s(30)), "not watched");
        health.watch(t);
        assert!(!health.lags(t + s(29), s(30)));
        assert!(health.lags(t + s(30), s(30)), "silent for a lease");
        // Read to the end at 20 s: current then.
        health.indexed(t + s(20), Duration::ZERO);
        assert!(!health.lags(t + s(49), s(30)));
        assert!(health.lags(t + s(50), s(30)));
        // Held at a record 40 s old at 60 s: behind since 20 s, as known.
        health.indexed(t + s(60), s(40));
        assert_eq!(health.behind_since(), Some(t + s(20)));
        // Then at a record 25 s old: behind since 35 s.
        health.indexed(t + s(60), s(25));
        assert_eq!(health.behind_since(), Some(t + s(35)));
        // Watching again does not make it current.
        health.watch(t + s(70));
        assert_eq!(health.behind_since(), Some(t + s(35)));
    }

    #[test]
    fn reports_count_the_oldest_record_failing_lately_within_the_stream_s_retention() {
        use crate::store::entries::FailingRecord;
        let ms = Timestamp::from_millis;
        let now = ms(1_800_000_000_000);
        let s = Duration::from_secs;
        let failing = |since: Timestamp, at: Timestamp| FailingRecord {
            sequence: format!("{}", since.millis()),
            since,
            at,
        };
        let report = |failing| IndexerReport {
            environment: "e".into(),
            failing,
            indexed_through: None,
            written_at: now,
        };
        assert_eq!(unindexed_for(&[], now), None, "no traffic");
        assert_eq!(unindexed_for(&[report(vec![])], now), None);
        let a = report(vec![failing(now - s(40), now - s(5))]);
        let b = report(vec![
            failing(now - s(100), now - REPORT_FRESH - s(1)),
            failing(now - s(25), now),
        ]);
        assert_eq!(
            unindexed_for(&[a.clone(), b], now),
            Some(s(40)),
            "the stale one left out"
        );
        let gone = report(vec![failing(now - s(86_401), now)]);
        assert_eq!(
            unindexed_for(&[gone], now),
            None,
            "past the stream's retention"
        );
        // The last read replaces what the one before said, beside a follower's progress.
        let t = Instant::now() + s(100);
        let health = IndexHealth::default();
        health.reported(t, now, &[a]);
        assert_eq!(health.behind_since(), Some(t - s(40)));
        assert!(health.lags(t, s(40)) && !health.lags(t, s(41)));
        health.reported(t + s(1), now + s(1), &[]);
        assert_eq!(health.behind_since(), None);
    }
}
