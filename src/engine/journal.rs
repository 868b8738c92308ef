//! Archive mode with the expiry index table: the journal of expiries published and not yet
//! settled ([`crate::store::entries::Pending`], partition [`crate::store::entries::PENDING`] of
//! the index table), so that a sweeper that dies between an accepted `Item Expired` and its
//! settling leaves the settling to the next sweep of any process (`docs/events.md`, "Archive").
//!
//! A chunk journals its expiries before it publishes them, due [`DUE_AFTER`] later, and at its
//! end removes the item or keeps only what it left unsettled. Every sweep first reads the items
//! due and settles each expiry as a chunk would: item gone, nothing (no cancellation: a genuine
//! expiry looks the same); another ttl, cancelled; on the ttl announced, put again due later.
//! The settings and writer are here; the writes and reads are `delete/journal.rs`'s.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How long after it is written a chunk's journal item is due, should the chunk not remove it:
/// well past a chunk's publish and deletes. A sweep that reads one still in flight (another
/// process's) settles nothing wrongly: the worst is a cancellation or an item sent twice.
pub const DUE_AFTER: Duration = Duration::from_secs(10);

/// Journal items one round of a sweep's settling reads, at most: one `Query` and, for up to 4
/// chunks' expiries (100 keys), one `BatchGetItem`.
pub const READ_PER_ROUND: i32 = 4;

/// Rounds of settling in one sweep, at most: another follows while the last read a full
/// [`READ_PER_ROUND`], so that a sweep settles up to 32 journal items (800 expiries) and a
/// sweep that finds the journal empty makes one `Query`.
pub const ROUNDS_PER_SWEEP: usize = 8;

/// One sweeper's journal writer: its id in the sort keys, the number of its next item, and
/// whether one of its sweeps is settling (the ticks and the full sweeps of `run` go side by side:
/// one settles at a time).
#[derive(Debug)]
pub(super) struct Journal {
    pub(super) writer: String,
    pub(super) next: AtomicU64,
    pub(super) settling: AtomicBool,
}

impl Journal {
    /// A writer with a random id.
    pub(super) fn new() -> Self {
        Journal {
            writer: format!("{:016x}", fastrand::u64(..)),
            next: AtomicU64::new(0),
            settling: AtomicBool::new(false),
        }
    }
}

/// Clears [`Journal::settling`] when a settling ends, or is dropped.
pub(super) struct Settling<'a>(pub(super) &'a AtomicBool);

impl Drop for Settling<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
