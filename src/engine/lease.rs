//! The leader lease (`LEADER_LEASE`): of several sweepers of one table — one per Region of a
//! global table — only the holder of the table's lease sweeps; the others stand by and take the
//! lease over when it lapses.
//!
//! The lease is the checkpoint table's item `<table name>#leader` ([`crate::store::LeaseItem`]);
//! a sweeper of a shard range holds it as its Region's split, and its range's item beside it. A
//! holder's health counts its sweeps ([`Lease::swept`]) and how current its index is
//! ([`Lease::index`], [`Lease::with_reports_in`]). Every instant written or compared is
//! DynamoDB's, as its `Date` headers bound it ([`crate::store::ServerTime`]); each sweeper
//! measures its own hold on the monotonic clock. Taking, renewing, standing by, giving up, and
//! why two holders never send deletes at once: `docs/global-tables.md`, "The lease". The rules
//! free of I/O are in `rules`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use tracing::{error, info, warn};

mod index;
mod item;
mod rules;

use item::Item;

use index::Index;
pub use index::{unindexed_for, IndexHealth, REPORT_EVERY, REPORT_FRESH};
pub use rules::{
    decide, defer, holder_id, layouts_differ, missed_a_pause, split_holder, split_range,
    valid_until, Decision, LeaseConfig, RangeLease, SweepHealth, LEASE_MARGIN, LEASE_WATCH,
    MAX_LEASE, MIN_LEASE, PAUSE_TOLERANCE, WATCH_EVERY,
};
use rules::{Failing, Unsound};

use super::retry::Stop;
use crate::expiry::{Clock, Timestamp};
use crate::store::{ErrorKind, LeaseItem, ServerTime, Store, StoreError};

/// A hold on the lease: the write that took or renewed it.
#[derive(Debug, Clone, Copy)]
struct Held {
    sent: Instant,
    /// The wall clock at `sent`.
    wall_sent: Timestamp,
    until: Instant,
}

#[derive(Debug, Default)]
struct State {
    held: Option<Held>,
    /// Standing by: no read before this.
    next_read: Option<Instant>,
    /// The other holder last seen, when it lapses, and its layout if not ours.
    seen: Option<LeaseItem>,
    /// What the last check logged: leading, or standing by for whom.
    logged: Option<Result<(), String>>,
    /// Holding: since when its reads or deletes have failed ([`Lease::swept`]).
    failing: Failing,
    /// Holding: since when (the write that took it).
    taken: Option<Instant>,
    /// Standing by, the index behind: until when a lapsed lease is left to the others (logged).
    deferred: Option<Timestamp>,
    /// After giving the lease up: not taken again before this.
    backoff_until: Option<Instant>,
}

impl State {
    /// No longer holding the lease: the next check reads it anew, and logs what it finds.
    fn lose(&mut self) {
        self.backoff_until = std::mem::take(self).backoff_until;
    }
}

/// What a check of the lease says: leading until this instant (sweep, within it), or standing by
/// ([`NotLeading`]).
pub type LeaseCheck = Result<Instant, NotLeading>;

/// Why a check does not lead, beyond another holder having the lease.
#[derive(Debug, Default)]
pub struct NotLeading {
    /// Reading or writing the lease failed.
    pub error: Option<StoreError>,
    /// The holder's layout is not this sweeper's (`LeaseLayoutMismatch`): configured unlike the
    /// holder, this sweeper would not sweep what it sweeps, and must not take over from it.
    pub layout_mismatch: bool,
    /// This check gave the lease up (`LeaseReleased`): its reads or its deletes had failed for a
    /// lease with no success since.
    pub released: bool,
}

/// One table's lease, checked at the start of every sweep ([`super::Sweeper::with_lease`]): the
/// table's item and, for a sweeper of a shard range, its range's ([`LeaseConfig::range`]). It
/// leads while it holds both.
pub struct Lease {
    table: Item,
    range: Option<Item>,
    /// How current this sweeper's own expiry index table is, when its stream indexer reports.
    index: IndexHealth,
    /// The expiry index table whose stream indexer's reports count ([`Lease::with_reports_in`]).
    reports: Option<String>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("table", &self.table.config)
            .field("range", &self.range.as_ref().map(|r| &r.config))
            .field("index", &self.index)
            .field("reports", &self.reports)
            .finish()
    }
}

impl Lease {
    /// The lease `config`, judged by DynamoDB's clock as `time` bounds it. `wall` is the host's
    /// wall clock, as it reads (not held to DynamoDB's): compared only with the monotonic clock,
    /// to notice that the host was paused while holding the lease ([`missed_a_pause`]).
    pub fn new(config: LeaseConfig, time: Arc<dyn ServerTime>, wall: Arc<dyn Clock>) -> Self {
        let range = config.range.as_ref().map(|range| {
            let config = LeaseConfig {
                id: range.id.clone(),
                holder: range.holder.clone(),
                range: None,
                ..config.clone()
            };
            Item::new(config, time.clone(), wall.clone())
        });
        let config = LeaseConfig {
            range: None,
            ..config
        };
        Lease {
            table: Item::new(config, time, wall),
            range,
            index: IndexHealth::default(),
            reports: None,
        }
    }

    /// The Lambda's stream indexer writes its reports into `index_table`, this sweeper's expiry
    /// index table (`None`: swept through a GSI): read (one strongly consistent `Query`) at each
    /// renewal, before giving the lease up for them and before taking a lapsed lease, they count
    /// as the follower's progress does ([`Lease::index`], [`IndexHealth::reported`]).
    pub fn with_reports_in(mut self, index_table: Option<String>) -> Self {
        self.reports = index_table;
        self
    }

    /// Where this sweeper's stream indexer, running beside it, reports how current its expiry
    /// index table is (the daemon's `--follow-stream`). Once it does, a holder whose index has
    /// lagged for a lease while holding gives the lease up, and a standby whose index lags a lease
    /// or more leaves a lapsed lease to the others for a further lease ([`defer`]).
    pub fn index(&self) -> &IndexHealth {
        &self.index
    }

    /// Whether this sweeper leads now, taking, renewing or reading the lease as needed; a holder
    /// whose reads or deletes have failed for a lease gives it up instead ([`Lease::swept`]). A
    /// sweeper of a shard range reads its range's lease only while it holds the table's, and
    /// leads until the earlier of the two holds ends.
    pub async fn check<S: Store>(&self, store: &S, stop: &Stop) -> LeaseCheck {
        let index = Index {
            health: &self.index,
            reports: self.reports.as_deref(),
        };
        let until = self.table.check(store, stop, Some(index)).await?;
        match &self.range {
            None => Ok(until),
            Some(range) => range.check(store, stop, None).await.map(|r| r.min(until)),
        }
    }

    /// Tells the lease what a sweep that led showed ([`SweepHealth`]): a holder whose reads, or
    /// whose deletes, have failed for a lease (`LEADER_LEASE`: what a standby already waits when a
    /// holder stops) with no success since gives it up at its next check, so it hands over within
    /// about two leases of its first failure (one to notice, one for its lease to lapse). Counted
    /// in the table's lease only: giving it up hands the whole Region's split over; a range's own
    /// item then lapses unrenewed.
    pub async fn swept(&self, health: SweepHealth) {
        self.table.swept(health).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expiry::Timestamp;
    use crate::store::BATCH_ATTEMPT_TIMEOUT;

    /// Our layout in these tests.
    const L: &str = "index=i ttl=ttl window=w width=60s shards=1 range=all";

    fn lease(holder: &str, expires_ms: i64) -> LeaseItem {
        LeaseItem {
            holder: holder.into(),
            expires_at: Timestamp::from_millis(expires_ms),
            layout: Some(L.into()),
            released: false,
        }
    }

    /// The lease of holder `holder`, of layout `L`, 30 s.
    fn me(holder: &str) -> LeaseConfig {
        LeaseConfig {
            table: "state".into(),
            id: "sessions#leader".into(),
            duration: Duration::from_secs(30),
            holder: holder.into(),
            layout: L.into(),
            range: None,
        }
    }

    fn take(from: Option<&str>) -> Decision {
        Decision::Take {
            from: from.map(Into::into),
            other_layout: None,
        }
    }

    #[test]
    fn the_holder_is_the_deployment_on_lambda_and_the_process_elsewhere() {
        let id = holder_id(Some("eu-west-1"), Some("sweeper"), "ip-10-0-0-1", 7);
        assert_eq!(id, "eu-west-1/sweeper");
        let id = holder_id(Some("us-east-2"), None, "ip-10-0-0-1", 7);
        assert_eq!(id, "us-east-2/ip-10-0-0-1/7");
        assert_eq!(holder_id(None, Some(""), "h", 1), "no-region/h/1");
    }

    #[test]
    fn no_lease_or_our_own_is_taken_and_another_only_once_it_surely_lapsed() {
        let ms = Timestamp::from_millis;
        assert_eq!(decide(None, &me("a"), None), take(None));
        let ours = lease("a", 1_000);
        assert_eq!(decide(Some(&ours), &me("a"), Some(ms(5_000))), take(None));
        let theirs = lease("b", 10_000);
        let stand_by = Decision::StandBy {
            holder: "b".into(),
            until: ms(10_000),
            other_layout: None,
        };
        // DynamoDB's clock not known: theirs holds whatever its time.
        assert_eq!(decide(Some(&theirs), &me("a"), None), stand_by);
        // Not lapsed, or lapsing exactly now: theirs.
        assert_eq!(decide(Some(&theirs), &me("a"), Some(ms(9_999))), stand_by);
        assert_eq!(decide(Some(&theirs), &me("a"), Some(ms(10_000))), stand_by);
        assert_eq!(
            decide(Some(&theirs), &me("a"), Some(ms(10_001))),
            take(Some("b"))
        );
    }

    #[test]
    fn a_sweep_shows_reads_and_deletes_working_failing_or_nothing() {
        use super::super::report::{SweepErrorEntry, SweepReport};
        let health = |r: &SweepReport| {
            let h = SweepHealth::of(r);
            (h.reads, h.deletes)
        };
        assert_eq!(health(&SweepReport::default()), (None, None));
        let read = SweepReport {
            windows_swept: 2,
            ..SweepReport::default()
        };
        assert_eq!(health(&read), (Some(true), None), "nothing to delete");
        let cut_short = SweepReport {
            windows_swept: 1,
            stopped_early: true,
            windows_left: 3,
            items_found: 100,
            items_deleted: 40,
            items_left: 60,
            ..SweepReport::default()
        };
        assert_eq!(health(&cut_short), (Some(true), Some(true)));
        let e = StoreError::new(ErrorKind::Transient, "Query", "timed out");
        let unread = SweepReport {
            windows_swept: 1,
            errors: vec![SweepErrorEntry::new(Some("w".into()), &e)],
            ..SweepReport::default()
        };
        assert_eq!(health(&unread).0, Some(false));
        let checkpoint = SweepReport {
            windows_swept: 1,
            errors: vec![SweepErrorEntry::new(None, &e)],
            ..SweepReport::default()
        };
        assert_eq!(
            health(&checkpoint).0,
            Some(true),
            "a checkpoint error is not a read"
        );
        let refused = SweepReport {
            items_found: 5,
            items_failed: 5,
            ..read.clone()
        };
        assert_eq!(health(&refused).1, Some(false));
        let some_deleted = SweepReport {
            items_deleted: 1,
            ..refused.clone()
        };
        assert_eq!(health(&some_deleted).1, Some(true));
        let kept = SweepReport {
            items_skipped: 1,
            ..refused
        };
        assert_eq!(health(&kept).1, Some(true), "a conditional delete answered");
    }

    #[test]
    fn failing_runs_from_the_first_failure_until_a_success() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let (ok, bad) = (Some(true), Some(false));
        let h = |reads, deletes| SweepHealth { reads, deletes };
        let mut f = Failing::default();
        f.record(h(ok, None), t);
        assert_eq!(f.since(), None);
        f.record(h(ok, bad), t + s(1));
        // Sweeps that show nothing of deletes (a full sweep of older windows) do not end it.
        f.record(h(ok, None), t + s(2));
        f.record(h(ok, bad), t + s(3));
        assert_eq!(f.since(), Some(t + s(1)));
        f.record(h(bad, None), t + s(4));
        assert_eq!(f.since(), Some(t + s(1)));
        f.record(h(ok, ok), t + s(5));
        assert_eq!(f.since(), None);
    }

    #[test]
    fn a_lease_we_gave_up_is_left_to_the_others_until_a_lease_after_it_lapses() {
        let ms = Timestamp::from_millis;
        let given_up = LeaseItem {
            released: true,
            ..lease("a", 10_000)
        };
        // Ours, given up: not renewed; a standby of ours waits for the lapse and a lease (30 s).
        let stand_by = Decision::StandBy {
            holder: "a".into(),
            until: ms(40_000),
            other_layout: None,
        };
        assert_eq!(decide(Some(&given_up), &me("a"), Some(ms(9_000))), stand_by);
        assert_eq!(
            decide(Some(&given_up), &me("a"), Some(ms(40_000))),
            stand_by
        );
        assert_eq!(decide(Some(&given_up), &me("a"), None), stand_by);
        assert_eq!(
            decide(Some(&given_up), &me("a"), Some(ms(40_001))),
            take(None)
        );
        // Another's, given up: theirs until it lapses, then taken as any lapsed lease.
        assert_eq!(
            decide(Some(&given_up), &me("b"), Some(ms(9_000))),
            Decision::StandBy {
                holder: "a".into(),
                until: ms(10_000),
                other_layout: None,
            }
        );
        assert_eq!(
            decide(Some(&given_up), &me("b"), Some(ms(10_001))),
            take(Some("a"))
        );
    }

    #[test]
    fn a_lease_of_another_layout_is_told_apart_and_one_without_a_layout_is_not() {
        let ms = Timestamp::from_millis;
        let wide = "index=i ttl=ttl window=w width=300s shards=1 range=all";
        let theirs = LeaseItem {
            layout: Some(wide.into()),
            ..lease("b", 10_000)
        };
        // Live: stand by, naming their layout.
        assert_eq!(
            decide(Some(&theirs), &me("a"), Some(ms(9_000))),
            Decision::StandBy {
                holder: "b".into(),
                until: ms(10_000),
                other_layout: Some(wide.into()),
            }
        );
        // Lapsed: taken all the same (its holder is gone), naming it.
        assert_eq!(
            decide(Some(&theirs), &me("a"), Some(ms(10_001))),
            Decision::Take {
                from: Some("b".into()),
                other_layout: Some(wide.into()),
            }
        );
        // Ours, whatever layout it was written with: a redeployed sweeper renews its own lease.
        assert_eq!(decide(Some(&theirs), &me("b"), Some(ms(9_000))), take(None));
        // Written before lease items recorded a layout: unknown, no mismatch.
        let old = LeaseItem {
            layout: None,
            ..lease("b", 10_000)
        };
        assert!(matches!(
            decide(Some(&old), &me("a"), Some(ms(9_000))),
            Decision::StandBy {
                other_layout: None,
                ..
            }
        ));
    }

    #[test]
    fn the_ranges_of_one_split_share_the_table_s_lease_and_another_split_is_named() {
        assert_eq!(
            split_holder("eu-west-1/sweeper-2", 8),
            "eu-west-1/split of 8 shards"
        );
        assert_eq!(
            split_holder("eu-west-1/host/7", 8),
            split_holder("eu-west-1/other-host/9", 8)
        );
        assert_ne!(
            split_holder("eu-west-1/a", 8),
            split_holder("us-east-1/a", 8)
        );
        assert_ne!(
            split_holder("eu-west-1/a", 8),
            split_holder("eu-west-1/a", 4)
        );
        let layout =
            |range: &str| format!("index=i ttl=ttl window=w width=60s shards=4 range={range}");
        let (all, low, high) = (layout("all"), layout("0-1"), layout("2-3"));
        assert!(!layouts_differ(&all, &all));
        assert!(!layouts_differ(&low, &high), "two ranges: maybe one split");
        assert!(layouts_differ(&all, &low) && layouts_differ(&low, &all));
        assert!(layouts_differ(&L.replace("width=60s", "width=300s"), L));
        assert_eq!(
            rules::unlike(&low, &all),
            "another split of the shards (range=0-1) than this sweeper's (range=all)"
        );
        assert_eq!(
            rules::unlike(L, &all),
            format!("another layout ({L}) than this sweeper's ({all})")
        );
        // A split's range stands by beside a Region that sweeps every shard, naming it.
        let ms = Timestamp::from_millis;
        let theirs = LeaseItem {
            layout: Some(all.clone()),
            ..lease("us-east-1/sweeper", 10_000)
        };
        let ranged = LeaseConfig {
            layout: low.clone(),
            ..me("eu-west-1/split of 4 shards")
        };
        assert_eq!(
            decide(Some(&theirs), &ranged, Some(ms(9_000))),
            Decision::StandBy {
                holder: "us-east-1/sweeper".into(),
                until: ms(10_000),
                other_layout: Some(all),
            }
        );
    }

    #[test]
    fn host_clock_skew_plays_no_part_only_dynamodb_time_bounds_do() {
        // Holder B's host clock runs two minutes fast, A's two minutes slow: neither clock is
        // read. B wrote expiresAt from its lower bound on DynamoDB's clock; A judges it by its
        // own. A's lower bound is at most DynamoDB's time, so A takes the lease only once
        // DynamoDB's clock has passed B's expiry, whatever either host's clock says.
        let dynamodb_at_b_write = Timestamp::from_millis(1_000_000);
        let b_lower = dynamodb_at_b_write - Duration::from_millis(900); // a Date a second old
        let b = lease("b", (b_lower + Duration::from_secs(30)).millis());
        for dynamodb_ms in [1_020_000, 1_030_000, 1_030_900, 1_031_000] {
            let dynamodb_now = Timestamp::from_millis(dynamodb_ms);
            // A's lower bound: up to a second behind (the Date header's resolution).
            for behind_ms in [0, 500, 999] {
                let lower = dynamodb_now - Duration::from_millis(behind_ms);
                let took = matches!(
                    decide(Some(&b), &me("a"), Some(lower)),
                    Decision::Take { .. }
                );
                assert!(
                    !took || dynamodb_now > b.expires_at,
                    "took at {dynamodb_now} a lease lapsing at {}",
                    b.expires_at
                );
            }
        }
        // Once DynamoDB's clock is a second past, every lower bound has passed it.
        let late = b.expires_at + Duration::from_millis(1_001);
        assert!(matches!(
            decide(Some(&b), &me("a"), Some(late - Duration::from_millis(999))),
            Decision::Take { .. }
        ));
    }

    #[test]
    fn a_hold_ends_when_dynamodb_can_reach_the_expiry_less_the_margin() {
        let sent = Instant::now();
        let answered = sent + Duration::from_millis(40);
        let lease = Duration::from_secs(30);
        // DynamoDB's clock known within 600 ms when the write was sent; the expiry is written
        // from the lower bound.
        let lower_at_send = Timestamp::from_millis(5_000_000);
        let upper_at_send = lower_at_send + Duration::from_millis(600);
        let expires = lower_at_send + lease;
        // A fresh bound: the answer's is the sent one aged by the round trip. The hold is the
        // lease less the margin and less the width of the bounds.
        let fresh = upper_at_send + Duration::from_millis(40);
        let hold = valid_until((sent, upper_at_send), (answered, fresh), expires);
        assert_eq!(
            hold,
            sent + lease - LEASE_MARGIN - Duration::from_millis(600)
        );
        // The answer's Date tightened the upper bound: the hold is not lengthened by it.
        let tighter = fresh - Duration::from_millis(500);
        assert_eq!(
            valid_until((sent, upper_at_send), (answered, tighter), expires),
            hold
        );
        // The bound was 10 s stale (the host was paused and it was not re-learnt): the answer's
        // Date moves the upper bound 10 s on, and the hold shrinks by as much.
        let corrected = fresh + Duration::from_secs(10);
        assert_eq!(
            valid_until((sent, upper_at_send), (answered, corrected), expires),
            hold - Duration::from_secs(10)
        );
        // So stale the lease had lapsed before it was written: no hold at all.
        let lapsed = fresh + Duration::from_secs(60);
        assert_eq!(
            valid_until((sent, upper_at_send), (answered, lapsed), expires),
            sent,
            "no validity"
        );
    }

    #[test]
    fn a_wall_clock_running_ahead_of_the_monotonic_one_means_a_missed_pause() {
        let s = Duration::from_secs;
        assert!(!missed_a_pause(s(10), Some(s(10))));
        assert!(!missed_a_pause(s(10), Some(s(11))), "within tolerance");
        assert!(missed_a_pause(s(10), Some(s(70))), "frozen for a minute");
        // A wall clock stepped back, or slower, is not a pause.
        assert!(!missed_a_pause(s(10), None));
        assert!(!missed_a_pause(s(10), Some(s(3))));
    }

    #[test]
    fn the_margin_covers_a_batch_attempt_and_a_second() {
        assert!(LEASE_MARGIN >= BATCH_ATTEMPT_TIMEOUT + Duration::from_secs(1));
        assert!(MIN_LEASE > LEASE_MARGIN);
    }
}
