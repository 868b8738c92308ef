//! Checkpoint planning, as pure functions: which windows a sweep reads given the checkpoint (a
//! window boundary up to which every window was swept completely), and how far it may move after
//! the sweep: `docs/design.md`, "Exact catch-up after an outage".

use crate::expiry::window::{windows_to_sweep, Window};
use crate::expiry::Timestamp;

/// Where the catch-up checkpoint lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Checkpoint table (partition key `id`, String).
    pub table: String,
    /// The checkpoint item's id: one per swept table and index.
    pub id: String,
    /// Another item to start from while `id` does not exist yet: for a shard range, the whole
    /// table's, whose every shard was swept completely up to its boundary. Only read, never moved.
    pub start_from: Option<String>,
    /// The item of the table's stream position (`run --follow-stream`): one per table, whatever
    /// shard range this process sweeps.
    pub stream_id: String,
}

/// The windows one sweep reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The current window and the lookback windows, newest first: read first, every sweep.
    pub recent: Vec<Window>,
    /// With a checkpoint behind the lookback: the older windows still to catch up on, oldest
    /// first, read in slices after the recent ones.
    pub catchup: CatchUp,
    /// With a checkpoint: the boundary after which every window must be swept completely before
    /// the checkpoint may move (the checkpoint, or the catch-up cap).
    pub floor: Option<i64>,
    /// True when the checkpoint was older than the catch-up cap: older windows are not read.
    pub capped: bool,
}

/// The windows a catch-up still has to read, oldest first, without holding them in memory: a
/// 30-day catch-up of 1-second windows is 2.6 million windows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// The start of the oldest window not yet handed out.
    start: i64,
    /// The windows' width, seconds.
    width: i64,
    /// How many windows are left, from `start` on.
    left: u64,
}

impl CatchUp {
    /// Windows not yet handed out.
    pub fn len(&self) -> u64 {
        self.left
    }

    /// True when every window was handed out.
    pub fn is_empty(&self) -> bool {
        self.left == 0
    }
}

impl Iterator for CatchUp {
    type Item = Window;

    fn next(&mut self) -> Option<Window> {
        self.left = self.left.checked_sub(1)?;
        let start = self.start;
        self.start += self.width;
        Some(Window {
            start,
            end: self.start,
        })
    }
}

/// Plans a sweep at `now` of `width`-second windows with `lookback` past windows, given the
/// checkpoint read (`None`: no checkpoint configured, none stored yet, or unreadable).
pub fn plan(
    now: Timestamp,
    width: u32,
    lookback: u32,
    checkpoint: Option<Timestamp>,
    max_catchup_seconds: u64,
) -> Plan {
    let recent = windows_to_sweep(now, width, lookback);
    let Some(c) = checkpoint.map(Timestamp::secs) else {
        return Plan {
            recent,
            ..Plan::default()
        };
    };
    let oldest = now
        .secs()
        .saturating_sub(i64::try_from(max_catchup_seconds).unwrap_or(i64::MAX));
    let floor = c.max(oldest);
    // Read back from the current window to the one that holds `floor`.
    let w = i64::from(width.max(1));
    let back = u64::try_from(recent[0].start.saturating_sub(floor))
        .unwrap_or(0)
        .div_ceil(w as u64);
    let catchup = match back.checked_sub(u64::from(lookback)) {
        Some(left) if left > 0 => {
            let start = recent[0].start - i64::try_from(back).unwrap_or(i64::MAX / 2) * w;
            CatchUp {
                start,
                width: w,
                left,
            }
        }
        _ => CatchUp::default(),
    };
    Plan {
        recent,
        catchup,
        floor: Some(floor),
        capped: c < oldest,
    }
}

/// How far the checkpoint may move after a sweep at `now` that read `windows` (newest first),
/// `complete[i]` telling whether window `i` was swept completely: the end of the newest window
/// of the unbroken run of complete, wholly past windows that starts at `floor`.
pub fn advance_to(
    windows: &[Window],
    complete: &[bool],
    floor: i64,
    now: Timestamp,
) -> Option<i64> {
    let oldest_first = windows.iter().zip(complete).rev();
    let run = oldest_first.filter(|(w, _)| w.end > floor);
    let run = run.take_while(|(w, ok)| **ok && Timestamp::from_secs(w.end) < now);
    run.last().map(|(w, _)| w.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_658_265_960; // a minute boundary

    impl Plan {
        /// Every window of the plan, newest first (the recent ones, then the catch-up ones).
        fn windows(&self) -> Vec<Window> {
            let mut all = self.recent.clone();
            let mut older: Vec<Window> = self.catchup.collect();
            older.reverse();
            all.extend(older);
            all
        }
    }

    fn ends(plan: &Plan) -> Vec<i64> {
        plan.windows().iter().map(|w| w.end - T).collect()
    }

    #[test]
    fn plans_read_back_to_the_checkpoint_within_the_cap() {
        // (now - T, lookback, checkpoint - T, max catch-up, expected window ends - T, floor - T, capped)
        #[allow(clippy::type_complexity)]
        let cases: &[(i64, u32, Option<i64>, u64, &[i64], Option<i64>, bool)] = &[
            // no checkpoint: the current window and the lookback
            (30, 1, None, 3600, &[60, 0], None, false),
            // a checkpoint inside the lookback changes nothing but sets the floor
            (30, 2, Some(0), 3600, &[60, 0, -60], Some(0), false),
            // an older checkpoint reaches back to its window
            (
                30,
                1,
                Some(-180),
                3600,
                &[60, 0, -60, -120],
                Some(-180),
                false,
            ),
            // the cap wins over an older checkpoint
            (30, 0, Some(-10_000), 120, &[60, 0, -60], Some(-90), true),
            // on a boundary: the window ending now is the newest
            (0, 0, Some(-60), 3600, &[0], Some(-60), false),
        ];
        for &(now, lookback, cp, cap, want, floor, capped) in cases {
            let p = plan(
                Timestamp::from_secs(T + now),
                60,
                lookback,
                cp.map(|c| Timestamp::from_secs(T + c)),
                cap,
            );
            assert_eq!(ends(&p), want, "now {now} cp {cp:?}");
            assert_eq!(p.floor, floor.map(|f| T + f), "now {now} cp {cp:?}");
            assert_eq!(p.capped, capped, "now {now} cp {cp:?}");
        }
    }

    #[test]
    fn the_checkpoint_moves_over_complete_past_windows_only() {
        let now = Timestamp::from_secs(T + 30);
        let p = plan(now, 60, 0, Some(Timestamp::from_secs(T - 180)), 3600);
        // windows end at T+60 (current), T, T-60, T-120 (floor T-180)
        assert_eq!(ends(&p), [60, 0, -60, -120]);
        // (complete flags newest first, expected new checkpoint - T)
        let cases: &[(&[bool], Option<i64>)] = &[
            (&[true, true, true, true], Some(0)), // the current window is not wholly past
            (&[true, true, false, true], Some(-120)),
            (&[true, true, true, false], None), // the oldest failed: nothing moves
            (&[false, true, true, true], Some(0)),
        ];
        for (complete, want) in cases {
            assert_eq!(
                advance_to(&p.windows(), complete, T - 180, now),
                want.map(|w| T + w),
                "{complete:?}"
            );
        }
        // windows at or before the floor are not needed
        assert_eq!(advance_to(&p.windows(), &[true; 4], T, now), None);
        assert_eq!(advance_to(&p.windows(), &[true; 4], T - 60, now), Some(T));
    }

    #[test]
    fn a_window_ending_before_a_sub_second_instant_is_wholly_past() {
        let now = Timestamp::from_millis((T + 60) * 1000 + 250);
        let p = plan(now, 60, 1, Some(Timestamp::from_secs(T - 60)), 3600);
        assert_eq!(ends(&p), [120, 60, 0]);
        assert_eq!(
            advance_to(&p.windows(), &[true; 3], T - 60, now),
            Some(T + 60)
        );
    }
}
