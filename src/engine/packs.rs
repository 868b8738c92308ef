//! Expiry index table mode, packed entries ([`crate::store::packs`]): which packs a sweep reads,
//! and the cursor that tells the next sweep what was judged, since packs are never removed one by
//! one (native TTL removes them). `docs/design.md`, "Packed entries".
//!
//! Every pack due before the cursor was read and each of its entries judged against the table
//! (deleted, found gone, kept) or carried: written into a new pack due at the sweep instant, which
//! the next sweep reads. A sweep reads the packs due from the cursor to its instant and moves the
//! cursor to that instant only when it read them all and settled or carried every key; otherwise
//! the cursor stays and the next sweep reads them again (their keys judged twice, never lost).
//!
//! Ticks and full sweeps run side by side: ticks read from where they last stopped, full sweeps
//! catch up from the cursor to where the ticks began, in slices of windows, and the two runs join
//! once the catch-up reaches the ticks. A new run of ticks (a Lambda invocation) reads the stored
//! cursor again, which another execution environment may have moved on.

use std::time::Duration;

use tracing::{debug, warn};

use super::delete::{write_index, ChunkOutcome, Deleter, Expired};
use super::report::{SweepErrorEntry, SweepReport};
use super::retry::Stop;
use super::sweep::{catchup_limit, Sweeper};
use super::CATCHUP_SLICE_PARTITIONS;
use crate::expiry::window::{windows_since, Window};
use crate::expiry::Timestamp;
use crate::store::packs::{self, PackEntry};
use crate::store::{key_to_json, EntryWrite, Store, StoreError};

/// A sweeper's packs: its cursor, as stored and as its runs moved it.
#[derive(Debug)]
pub(super) struct PackCursor {
    /// The cursor's id ([`packs::CURSOR`]): the table and the shard range.
    id: String,
    state: std::sync::Mutex<State>,
    /// One run of ticks, and one catch-up, at a time.
    ticking: tokio::sync::Mutex<()>,
    catching_up: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct State {
    /// Every pack due before it was judged; `None` until the stored cursor is read.
    through: Option<Timestamp>,
    /// The index table held no cursor when last read: no writer has written a pack, and ticks
    /// read none (full sweeps look again).
    absent: bool,
    /// The stored cursor is read again before the next pass (a new run of ticks).
    reload: bool,
    /// The ticks' own run, judged from `.0` to `.1`, ahead of `through` until the catch-up
    /// reaches `.0`.
    ticks: Option<(Timestamp, Timestamp)>,
}

impl PackCursor {
    pub(super) fn new(id: String) -> Self {
        PackCursor {
            id,
            state: Default::default(),
            ticking: Default::default(),
            catching_up: Default::default(),
        }
    }

    /// A new run of ticks starts: the stored cursor is read again, and the ticks start from it.
    pub(super) fn resume(&self) {
        let mut state = crate::store::lock(&self.state);
        state.reload = true;
        state.ticks = None;
    }
}

/// How far behind the instant of a run's first tick the ticks themselves start reading packs when
/// the cursor is further back: the catch-up reads the rest, beside them.
const TICK_HEAD: Duration = Duration::from_secs(2);

impl<S: Store> Sweeper<S> {
    /// The cursor, read from the index table if it is not known or a new run of ticks began:
    /// the later of the stored one and this sweeper's own, no older than the catch-up limit
    /// (`capped` when it was); without one of its own yet, the writers' mark (a cursor named
    /// after the table, which a writer stores before its first pack). `None` while the index
    /// table holds neither: there is no pack to read (ticks do not look again; full sweeps do).
    async fn cursor(
        &self,
        cursor: &PackCursor,
        now: Timestamp,
        stop: &Stop,
        report: &mut SweepReport,
    ) -> Result<Option<Timestamp>, StoreError> {
        let (mine, reload, absent) = {
            let state = crate::store::lock(&cursor.state);
            (state.through, state.reload, state.absent)
        };
        match (mine, reload, absent) {
            (Some(through), false, _) => return Ok(Some(through)),
            (None, false, true) => return Ok(None),
            _ => {}
        }
        let (store, schema) = (&self.shared.store, &self.shared.schema);
        // This sweeper's own, or else the writers' mark: no pack is due before it.
        let own = store.read_cursor(schema, &cursor.id);
        let stored = match stop.bound("Query", own).await? {
            Some(t) => Some(t),
            None => {
                let mark = store.read_cursor(schema, &schema.table_name);
                stop.bound("Query", mark).await?
            }
        };
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
        state.through = through;
        state.absent = through.is_none();
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
        let through = match self.cursor(cursor, now, stop, &mut report).await {
            Ok(t) => t?,
            Err(e) => {
                report.add_errors([SweepErrorEntry::new(None, &e)]);
                return Some(report);
            }
        };
        let since = {
            let mut state = crate::store::lock(&cursor.state);
            let start = through.max(now - TICK_HEAD).min(now);
            state.ticks.get_or_insert((start, start)).1
        };
        let windows = windows_since(since, now, self.shared.schema.layout.window_seconds);
        let (part, complete) = self
            .sweep_partitions_of(now, &windows, stop, Some((since, now)))
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
        let mut through = match self.cursor(cursor, now, stop, &mut report).await {
            Ok(t) => t?,
            Err(e) => {
                report.add_errors([SweepErrorEntry::new(None, &e)]);
                return Some(report);
            }
        };
        let upto = crate::store::lock(&cursor.state).ticks.map_or(now, |t| t.0);
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
            let newest: &Window = slice.last().expect("a slice is not empty");
            let end = if slices.peek().is_none() {
                upto
            } else {
                Timestamp::from_secs(newest.end).min(upto)
            };
            let (part, complete) = self
                .sweep_partitions_of(now, slice, stop, Some((through, end)))
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
            if let Some(ticks) = state.ticks.as_mut() {
                if through >= ticks.0 {
                    through = through.max(ticks.1);
                    *ticks = (through, through);
                    state.through = Some(through);
                }
            }
        }
        if moved {
            self.store_cursor(cursor, through, stop).await;
        }
        Some(report)
    }
}

/// The keys of `group` listed from packs: each with the ttl as read.
pub(super) fn packed_of(group: &[Expired]) -> Vec<(String, PackEntry)> {
    group
        .iter()
        .filter(|e| e.packed)
        .map(|e| {
            let entry = PackEntry {
                key: e.key.clone(),
                ttl: e.ttl_as_read.clone(),
            };
            (key_to_json(&e.key).to_string(), entry)
        })
        .collect()
}

/// Carries the keys of `packed` that `out` did not settle (failed, or left) into new packs due at
/// the sweep instant, in the partition of that instant and each key's shard, so that the next
/// sweep, which reads from that instant on, judges them again. Sets `out.carried_all` when every
/// such key was written (or there was none).
pub(super) async fn carry_unsettled<S: Store>(
    d: &Deleter<'_, S>,
    packed: Vec<(String, PackEntry)>,
    out: &mut ChunkOutcome,
) {
    let unsettled: std::collections::HashSet<String> = out
        .failed
        .iter()
        .map(|f| f.key.to_string())
        .chain(out.left_keys.iter().map(|k| key_to_json(k).to_string()))
        .collect();
    let carry: Vec<PackEntry> = packed
        .into_iter()
        .filter(|(token, _)| unsettled.contains(token))
        .map(|(_, e)| e)
        .collect();
    if carry.is_empty() {
        out.carried_all = true;
        return;
    }
    // By partition: each key's shard, in the window of the sweep instant.
    let (schema, due) = (d.schema, d.now);
    let mut by_window: std::collections::BTreeMap<String, Vec<PackEntry>> = Default::default();
    for e in carry {
        let pk = schema.key_attributes.first().and_then(|a| e.key.get(a));
        let window = pk.and_then(|pk| schema.layout.window_for(due.as_secs_f64(), pk).ok());
        match window {
            Some(w) => by_window.entry(w).or_default().push(e),
            // Not a key of this table: nothing a sweep could delete, nothing to carry.
            None => warn!("an unsettled key of a pack has no window; not carried"),
        }
    }
    let origin = format!("carry-{:016x}", fastrand::u64(..));
    let mut writes = Vec::new();
    for (n, (window, entries)) in by_window.into_iter().enumerate() {
        for pack in packs::pack(&window, due, &format!("{origin}-{n}"), entries) {
            writes.push((pack.entries.len() as u64, EntryWrite::Put(pack.to_item())));
        }
    }
    let mut all = true;
    for chunk in writes.chunks(25) {
        let count: u64 = chunk.iter().map(|(n, _)| n).sum();
        let request = chunk.iter().map(|(_, w)| w.clone()).collect();
        match write_index(d, request).await {
            (_, None) => out.carried += count,
            (_, Some(e)) => {
                warn!(error = %e, keys = count, "unsettled keys of packs not carried; their packs are read again");
                all = false;
            }
        }
    }
    out.carried_all = all;
}
