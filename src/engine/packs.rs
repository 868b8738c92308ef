//! Expiry index table mode, packed entries ([`crate::store::packs`]): which packs a sweep reads,
//! and the cursor that tells the next sweep what was judged, since packs are never removed one by
//! one (native TTL removes them). A sweep moves the cursor to its instant only when it read every
//! pack due from the cursor and settled or carried ([`super::entries::carry_unsettled`]) every
//! key; otherwise the next sweep reads them again (keys judged twice, never lost). How ticks and
//! full sweeps share the packs: `docs/design.md`, "Packed entries".

use std::time::Duration;

use tracing::{debug, warn};

use super::cursor::PackCursor;
use super::report::{SweepErrorEntry, SweepReport};
use super::retry::Stop;
use super::sweep::{catchup_limit, Sweeper};
use super::CATCHUP_SLICE_PARTITIONS;
use crate::expiry::window::{windows_since, Window};
use crate::expiry::Timestamp;
use crate::store::packs;
use crate::store::{EntryWrite, Store};

/// How far behind the instant of a run's first tick the ticks themselves start reading packs when
/// the cursor is further back: the catch-up reads the rest, beside them.
const TICK_HEAD: Duration = Duration::from_secs(2);

/// At most this much of packs a tick reads: behind that, the ticks start again at [`TICK_HEAD`]
/// and leave the rest to the catch-up.
const TICK_SPAN: Duration = Duration::from_secs(60);

impl<S: Store> Sweeper<S> {
    /// The cursor, read from the index table if it is not known or a new run of ticks began:
    /// the later of the stored one and this sweeper's own, no older than the catch-up limit
    /// (`capped` when it was), or else the writers' mark. `None` while the index table holds
    /// neither: no pack yet, and each sweep looks again (`docs/design.md`, "Packed entries").
    /// `Err` when a read failed, its error in `report`.
    async fn cursor(
        &self,
        cursor: &PackCursor,
        now: Timestamp,
        stop: &Stop,
        report: &mut SweepReport,
    ) -> Result<Option<Timestamp>, ()> {
        let (mine, reload) = {
            let state = crate::store::lock(&cursor.state);
            (state.through, state.reload)
        };
        if let (Some(through), false) = (mine, reload) {
            return Ok(Some(through));
        }
        let (store, schema) = (&self.shared.store, &self.shared.schema);
        // This sweeper's own, or else the writers' mark: no pack is due before it.
        let read = |id| stop.bound("Query", store.read_cursor(schema, id));
        let stored = match read(&cursor.id).await {
            Ok(None) => read(&schema.table_name).await,
            own => own,
        };
        let stored = stored.map_err(|e| report.add_errors([SweepErrorEntry::new(None, &e)]))?;
        let (limit, why) = catchup_limit(schema, self.shared.options.max_catchup_seconds);
        let floor = now - Duration::from_secs(limit);
        let through = match stored.max(mine) {
            Some(t) if t < floor => {
                warn!(cursor = %t.iso(), from = %floor.iso(), "the packs' cursor is older than {why}; packs due before are not read");
                report.catchup_capped = true;
                Some(floor)
            }
            other => other,
        };
        let mut state = crate::store::lock(&cursor.state);
        // Ticks may have moved this sweeper's own on meanwhile: never back.
        let through = through.max(state.through);
        state.through = through;
        state.reload = false;
        if through.is_none() {
            debug!("no cursor of packs in the index table: no pack to read");
        }
        Ok(through)
    }

    /// Stores `through` as the cursor (a put into the index table); a failure is logged and
    /// left: the next sweep of another process starts from an older cursor, judging again.
    async fn store_cursor(&self, cursor: &PackCursor, through: Timestamp, stop: &Stop) {
        let at = self.raw_wall().unwrap_or(through);
        let put = vec![EntryWrite::Put(packs::cursor_item(&cursor.id, through, at))];
        let write = self.shared.store.write_entries(&self.shared.schema, put);
        match stop.bound("BatchWriteItem", write).await {
            Ok(left) if left.is_empty() => {}
            Ok(_) => warn!("the packs' cursor was not written (throttled); kept in memory"),
            Err(e) => warn!(error = %e, "the packs' cursor was not written; kept in memory"),
        }
    }

    /// A tick's packs: those due from where the ticks last stopped (or, for the first tick of a
    /// run, from the cursor, or just behind `now` when the cursor is further back) to `now`.
    /// `None` without an expiry index table, or while another tick's pass runs.
    pub(super) async fn tick_packs(&self, now: Timestamp, stop: &Stop) -> Option<SweepReport> {
        let cursor = self.packs.as_ref()?;
        let _one = cursor.ticking.try_lock().ok()?;
        let mut report = self.report(now);
        let Ok(through) = self.cursor(cursor, now, stop, &mut report).await else {
            return Some(report);
        };
        let through = through?;
        let since = {
            let mut state = crate::store::lock(&cursor.state);
            let start = through.max(now - TICK_HEAD).min(now);
            let ticks = state.ticks.get_or_insert((start, start));
            if ticks.1 < now - TICK_SPAN {
                // Ticks that fell behind (their reads failed, the host slept) start again just
                // behind `now`: the catch-up reads the rest in slices, not every tick all of it.
                *ticks = (now - TICK_HEAD, now - TICK_HEAD);
            }
            ticks.1
        };
        let windows = windows_since(since, now, self.shared.schema.layout.window_seconds);
        let (part, complete) = self
            .sweep_partitions(now, &windows, stop, Some((since, now)))
            .await;
        report.add_pass(part);
        if complete.iter().all(|c| *c) {
            let joined = {
                let mut state = crate::store::lock(&cursor.state);
                let from = state.ticks.map_or(since, |t| t.0);
                let caught_up = state.through.is_some_and(|t| t >= from);
                state.ticks = Some(if caught_up { (now, now) } else { (from, now) });
                if caught_up {
                    state.through = Some(now);
                }
                caught_up
            };
            if joined {
                self.store_cursor(cursor, now, stop).await;
            }
        }
        Some(report)
    }

    /// A full sweep's packs: from the cursor to `now`, or to where the ticks running beside it
    /// began, oldest first in slices of windows, the cursor stored after each slice read whole
    /// and settled. `None` without an expiry index table, or while another catch-up runs.
    pub(super) async fn catch_up_packs(&self, now: Timestamp, stop: &Stop) -> Option<SweepReport> {
        let cursor = self.packs.as_ref()?;
        let _one = cursor.catching_up.try_lock().ok()?;
        // Each full sweep reads the stored cursor again: another process may have moved it on.
        crate::store::lock(&cursor.state).reload = true;
        let mut report = self.report(now);
        let Ok(through) = self.cursor(cursor, now, stop, &mut report).await else {
            return Some(report);
        };
        let mut through = through?;
        // Never past this sweep's instant: ticks that began later (after a slow read of the
        // cursor, or started again behind a later tick) may have begun past it, and a pack due
        // after the instant may hold entries not yet expired at it.
        let upto = crate::store::lock(&cursor.state)
            .ticks
            .map_or(now, |t| t.0)
            .min(now);
        let width = self.shared.schema.layout.window_seconds;
        let mut windows = windows_since(through, upto, width);
        windows.reverse();
        let per_slice =
            (CATCHUP_SLICE_PARTITIONS / self.shard_range().shards().count().max(1)).max(1);
        let mut moved = false;
        let mut slices = windows.chunks(per_slice).peekable();
        while through < upto {
            let Some(slice) = slices.next() else { break };
            if stop.reached() {
                report.stopped_early = true;
                break;
            }
            // A window holds the packs due in (start, end]: the slice reads to its newest
            // window's end included, since the next slice does not read that window.
            let newest: &Window = slice.last().expect("a slice is not empty");
            let end = if slices.peek().is_none() {
                upto
            } else {
                (Timestamp::from_secs(newest.end) + Duration::from_millis(1)).min(upto)
            };
            let (part, complete) = self
                .sweep_partitions(now, slice, stop, Some((through, end)))
                .await;
            report.add_pass(part);
            if !complete.iter().all(|c| *c) {
                break;
            }
            through = end;
            moved = true;
            crate::store::lock(&cursor.state).through = Some(through);
        }
        // Caught up with the ticks: one run from here on.
        {
            let mut state = crate::store::lock(&cursor.state);
            if let Some(ticks) = state.ticks.as_mut().filter(|t| through >= t.0) {
                through = through.max(ticks.1);
                *ticks = (through, through);
                state.through = Some(through);
            }
        }
        if moved {
            self.store_cursor(cursor, through, stop).await;
        }
        Some(report)
    }
}
