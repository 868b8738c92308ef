//! How current a Region's expiry index table is, as its stream indexer tells the lease
//! ([`IndexHealth`]): a holder whose index has lagged for a lease gives the lease up, and a
//! standby whose index lags leaves a lapsed lease to a Region whose index is current.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How current this sweeper's own expiry index table is, from what its stream indexer reports:
/// the instant (monotonic) as of which every record of the stream was indexed. Not watched (no
/// indexer reports to it, as without `--follow-stream`) until [`IndexHealth::watch`].
#[derive(Debug, Default)]
pub struct IndexHealth {
    current_as_of: Mutex<Option<Instant>>,
}

impl IndexHealth {
    /// An indexer starts reporting at `now`: the index counts as current then, so that one that
    /// never reports is behind from its start.
    pub fn watch(&self, now: Instant) {
        self.lock().get_or_insert(now);
    }

    /// The indexer reported at `now` that its oldest record not yet indexed is `behind` old (the
    /// age of the newest record it indexed when it holds none, 0 once read up to the end of its
    /// shards): every record written more than `behind` before `now` is indexed. A report older
    /// than what is known already changes nothing.
    pub fn indexed(&self, now: Instant, behind: Duration) {
        let as_of = now.checked_sub(behind).unwrap_or(now);
        let mut current = self.lock();
        if current.is_none_or(|c| c < as_of) {
            *current = Some(as_of);
        }
    }

    /// Since when the index has not been known current: the records written since are not all
    /// indexed, as far as the indexer has said. `None` when not watched.
    pub fn behind_since(&self) -> Option<Instant> {
        *self.lock()
    }

    /// Whether the index lags `limit` or more at `now` (`false` when not watched).
    pub fn lags(&self, now: Instant, limit: Duration) -> bool {
        self.behind_since()
            .is_some_and(|since| now.saturating_duration_since(since) >= limit)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.current_as_of
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
}
