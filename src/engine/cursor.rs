//! The cursor of a sweeper's packs of the expiry index table, as the sweeper holds it: what was
//! stored and how its runs of ticks and catch-ups moved it since. How sweeps read packs from it
//! and move it: [`super::packs`].

use crate::expiry::Timestamp;

/// A sweeper's packs: its cursor, as stored and as its runs moved it.
#[derive(Debug, Default)]
pub(super) struct PackCursor {
    /// The cursor's id ([`crate::store::packs::CURSOR`]): the table and the shard range.
    pub(super) id: String,
    pub(super) state: std::sync::Mutex<State>,
    /// One run of ticks, and one catch-up, at a time.
    pub(super) ticking: tokio::sync::Mutex<()>,
    pub(super) catching_up: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// Every pack due before it was judged; `None` until the stored cursor is read.
    pub(super) through: Option<Timestamp>,
    /// The stored cursor is read again before the next pass (a new run of ticks).
    pub(super) reload: bool,
    /// The ticks' own run, judged from `.0` to `.1`, ahead of `through` until the catch-up
    /// reaches `.0`.
    pub(super) ticks: Option<(Timestamp, Timestamp)>,
}
