//! The lease's rules, free of I/O: who may take it ([`decide`]), how long a hold is good for
//! ([`valid_until`]), and when a holder's sweeps count as failing.

use std::time::Duration;

use tokio::time::Instant;

use crate::expiry::Timestamp;
use crate::store::{LeaseItem, BATCH_ATTEMPT_TIMEOUT};

/// How long before its lease lapses (by its own monotonic clock, counted from the send of the write
/// that took or renewed it) a holder stops sending deletes: the batch attempt timeout and a
/// second, so that a request sent just before the stop has been answered or given up.
pub const LEASE_MARGIN: Duration = BATCH_ATTEMPT_TIMEOUT.saturating_add(Duration::from_secs(1));

/// The shortest lease: two seconds of validity beyond [`LEASE_MARGIN`].
pub const MIN_LEASE: Duration = Duration::from_secs(5);

/// The longest lease.
pub const MAX_LEASE: Duration = Duration::from_secs(3600);

/// A standby that finds the lease lapsing within this, by its lower bound on DynamoDB's clock,
/// watches it: it reads it every [`WATCH_EVERY`] (each answer's `Date` refining the bound) until it
/// lapses or is renewed, for at most this and one more read. Twice the `Date` header's
/// resolution, so that a watch begun a second or more before the lapse sees a `Date` change first.
pub const LEASE_WATCH: Duration = Duration::from_secs(2);

/// How often a watching standby reads the lease.
pub const WATCH_EVERY: Duration = Duration::from_millis(100);

/// The host's wall clock may run this much faster than its monotonic clock between two lease
/// checks before the monotonic clock is taken to have missed a pause (a frozen or suspended host).
pub const PAUSE_TOLERANCE: Duration = Duration::from_secs(1);

/// One table's lease, as the configuration gives it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeaseConfig {
    /// The checkpoint table, where the lease item lives.
    pub table: String,
    /// The lease item's id: `<table name>#leader` ([`crate::config::Config::lease`]).
    pub id: String,
    /// How long a write holds the lease (`LEADER_LEASE`).
    pub duration: Duration,
    /// This sweeper's name in the lease ([`holder_id`]).
    pub holder: String,
    /// This sweeper's layout, recorded in the lease ([`crate::config::Config::lease_layout`]).
    pub layout: String,
    /// For a sweeper of a shard range short of every shard (`SHARD_RANGE`): its range's lease,
    /// held beside the table's, whose `holder` is then its Region's split ([`split_holder`]).
    pub range: Option<RangeLease>,
}

/// The lease of one shard range, which a sweeper of that range holds beside the table's, so that
/// of the sweepers of one range in a Region only one sweeps.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RangeLease {
    /// The item's id: `<table name>/range<a>-<b>#leader`.
    pub id: String,
    /// This sweeper's name in it ([`holder_id`]).
    pub holder: String,
}

/// A sweeper's name in the lease: `<region>/<function>` on Lambda, so that the overlapping
/// invocations of one deployment share it; elsewhere `<region>/<host>/<pid>`. The entry point reads
/// the parts from its environment.
pub fn holder_id(region: Option<&str>, function: Option<&str>, host: &str, pid: u32) -> String {
    let region = region.filter(|r| !r.is_empty()).unwrap_or("no-region");
    match function.filter(|f| !f.is_empty()) {
        Some(function) => format!("{region}/{function}"),
        None => format!("{region}/{host}/{pid}"),
    }
}

/// The name in the table's lease of the sweepers of a Region that split the table's `shards`
/// shards into ranges (`SHARD_RANGE`), taken from one of them, `holder` ([`holder_id`], which
/// starts with the Region): `<region>/split of <shards> shards`. The ranges of one split share
/// the table's lease, as the invocations of one deployment do, and each holds its range's own;
/// a Region that splits the table otherwise, or not at all, is another holder, so that two
/// Regions never sweep the same shards at once, however each splits them.
pub fn split_holder(holder: &str, shards: u32) -> String {
    let region = holder.split('/').next().unwrap_or(holder);
    format!("{region}/split of {shards} shards")
}

/// Whether a lease held with layout `theirs` was written by a sweeper configured unlike one of
/// layout `ours` ([`crate::config::Config::lease_layout`]): a setting other than the shard range
/// differs, or one reads every shard (`range=all`) and the other a range. Two ranges are not told
/// apart: the ranges of one split share the table's lease, which shows the range of whichever
/// wrote it last.
pub fn layouts_differ(theirs: &str, ours: &str) -> bool {
    let ((rest, range), (our_rest, our_range)) = (split_range(theirs), split_range(ours));
    rest != our_rest || (range == "all") != (our_range == "all")
}

/// How layout `theirs` is unlike `ours`, for the logs: the two splits of the shards when only the
/// split differs, else the two layouts.
pub(super) fn unlike(theirs: &str, ours: &str) -> String {
    match (split_range(theirs), split_range(ours)) {
        ((rest, range), (our_rest, our_range)) if rest == our_rest => format!(
            "another split of the shards (range={range}) than this sweeper's (range={our_range})"
        ),
        _ => format!("another layout ({theirs}) than this sweeper's ({ours})"),
    }
}

/// `layout` as its settings but the shard range, and the range (`all` when it names none).
pub fn split_range(layout: &str) -> (&str, &str) {
    layout.rsplit_once(" range=").unwrap_or((layout, "all"))
}

/// What a sweep that led shows of its sweeper's reads and deletes ([`super::Lease::swept`]):
/// for each, `Some(true)` that they work, `Some(false)` that they fail, `None` nothing (a sweep
/// that found nothing to delete says nothing of deletes). A sweep cut short by its stop condition
/// (the deadline, the end of the hold) shows what it did, so that a long catch-up keeps its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepHealth {
    /// `Some(false)`: a partition could not be read (a store error); `Some(true)`: at least one
    /// window was read to its end, and no partition failed.
    pub reads: Option<bool>,
    /// `Some(true)`: DynamoDB answered at least one delete (deleted, kept or already gone);
    /// `Some(false)`: items failed and none was answered. Items that failed beside items deleted
    /// are a throttled table or a few bad keys, which another Region would meet as well.
    pub deletes: Option<bool>,
}

impl SweepHealth {
    /// What `report` shows. Errors of the checkpoint are not counted: they do not keep expired
    /// items from being deleted.
    pub fn of(report: &crate::engine::SweepReport) -> Self {
        let read_failed = report.errors.iter().any(|e| e.window.is_some());
        let reads = (read_failed || report.windows_swept > 0).then_some(!read_failed);
        let answered = report.items_deleted + report.items_skipped + report.items_gone > 0;
        let deletes = (answered || report.items_failed > 0).then_some(answered);
        SweepHealth { reads, deletes }
    }
}

/// Since when a holder's reads, and its deletes, have failed with no success since (see
/// [`SweepHealth`]).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Failing {
    reads: Option<Instant>,
    deletes: Option<Instant>,
}

impl Failing {
    pub(super) fn record(&mut self, health: SweepHealth, now: Instant) {
        for (since, works) in [
            (&mut self.reads, health.reads),
            (&mut self.deletes, health.deletes),
        ] {
            match works {
                Some(true) => *since = None,
                Some(false) => *since = since.or(Some(now)),
                None => {}
            }
        }
    }

    /// Since when either has failed, the earlier.
    pub(super) fn since(&self) -> Option<Instant> {
        self.reads.into_iter().chain(self.deletes).min()
    }
}

/// Why a holder gives the lease up (`Item::release`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unsound {
    /// Its reads or its deletes have failed with no success since ([`super::Lease::swept`]).
    Sweeps,
    /// Its stream indexer has left records unindexed ([`super::Lease::index`]).
    Index,
}

impl Unsound {
    /// What the log says of it, for `seconds`.
    pub(super) fn saying(self, seconds: f64) -> String {
        match self {
            Unsound::Sweeps => format!(
                "its reads or its deletes have failed for {seconds:.1} s with no success since"
            ),
            Unsound::Index => format!(
                "its stream indexer has left records unindexed for {seconds:.1} s while it held the lease"
            ),
        }
    }
}

/// What a sweeper does about the lease item it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write it: there is none (`from: None`), it is ours, or it lapsed.
    Take {
        /// The holder it lapsed from (`None`: no lease yet, or ours).
        from: Option<String>,
        /// The lapsed lease's layout, when it is known and not ours.
        other_layout: Option<String>,
    },
    /// Leave it: another holder's, not surely lapsed.
    StandBy {
        /// Its holder.
        holder: String,
        /// When it lapses, by DynamoDB's clock.
        until: Timestamp,
        /// Its layout, when it is known and not ours: this sweeper is configured unlike the
        /// holder, and must not sweep beside it.
        other_layout: Option<String>,
    },
}

/// The decision on lease item `item` for the sweeper of lease `me` (its holder name, layout and
/// duration) when DynamoDB's clock reads at least `lower` (`None`: not known yet, and then no
/// lease of another holder counts as lapsed). Host clocks play no part: `expiresAt` and `lower`
/// are both DynamoDB's time. Another holder's layout is compared with ours; an item without one
/// (written before items recorded it) is taken to match ([`layouts_differ`]). A lease we gave up (`released`) is left
/// to the others until a lease after it lapses.
pub fn decide(item: Option<&LeaseItem>, me: &LeaseConfig, lower: Option<Timestamp>) -> Decision {
    let stand_by = |l: &LeaseItem, until: Timestamp, other_layout| Decision::StandBy {
        holder: l.holder.clone(),
        until,
        other_layout,
    };
    let lapsed = |until: Timestamp| lower.is_some_and(|now| until < now);
    let (from, other_layout) = match item {
        None => (None, None),
        Some(l) if l.holder == me.holder => {
            let until = l.expires_at + me.duration;
            if l.released && !lapsed(until) {
                return stand_by(l, until, None);
            }
            (None, None)
        }
        Some(l) => {
            let other_layout = (l.layout.as_ref())
                .filter(|theirs| layouts_differ(theirs, &me.layout))
                .cloned();
            if !lapsed(l.expires_at) {
                return stand_by(l, l.expires_at, other_layout);
            }
            (Some(l.holder.clone()), other_layout)
        }
    };
    Decision::Take { from, other_layout }
}

/// The decision of a sweeper whose own expiry index table lags a lease or more
/// ([`super::IndexHealth`]) on lease item `item`, for which [`decide`] said `decision`: a lease
/// that lapsed from another holder is left to the others (a standby whose index is current) until
/// it has lapsed for a further lease, then taken all the same, so that the table is swept even
/// when no Region's index is current. Any other decision stands.
pub fn defer(
    decision: Decision,
    item: Option<&LeaseItem>,
    me: &LeaseConfig,
    lower: Option<Timestamp>,
) -> Decision {
    let Some(until) = item.map(|l| l.expires_at + me.duration) else {
        return decision;
    };
    if lower.is_some_and(|now| until < now) {
        return decision;
    }
    match decision {
        Decision::Take {
            from: Some(holder),
            other_layout,
        } => Decision::StandBy {
            holder,
            until,
            other_layout,
        },
        decision => decision,
    }
}

/// Until when (monotonic) an accepted write of `expires_at` makes its sender leader: the earliest
/// instant DynamoDB's clock can reach `expires_at - margin` ([`LEASE_MARGIN`]) by either of two
/// upper bounds on it — `sent`, the local instant the write was sent and the bound then, and
/// `answered`, the instant its answer came and the bound then (its `Date` taken into account). The
/// second only matters when the first was stale (the host was paused and the answer corrected
/// it). No validity left: `sent` itself.
pub fn valid_until(
    sent: (Instant, Timestamp),
    answered: (Instant, Timestamp),
    expires_at: Timestamp,
) -> Instant {
    let reach = |(at, upper): (Instant, Timestamp)| {
        let left_ms = expires_at.millis_since(upper) - LEASE_MARGIN.as_millis() as i64;
        match u64::try_from(left_ms) {
            Ok(left) if left > 0 => at + Duration::from_millis(left),
            _ => sent.0,
        }
    };
    reach(sent).min(reach(answered))
}

/// Whether the monotonic clock missed time between two readings: the wall clock advanced
/// `wall` while it advanced `mono`, more than [`PAUSE_TOLERANCE`] beyond it.
pub fn missed_a_pause(mono: Duration, wall: Option<Duration>) -> bool {
    wall.is_some_and(|w| w > mono + PAUSE_TOLERANCE)
}
