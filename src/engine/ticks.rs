//! Repeated sweeps: tick mode inside one Lambda invocation, and the long-running `run` command.
//!
//! An EventBridge rule fires at most once a minute. To expire items within about a second, one
//! invocation sweeps, sleeps to the next tick, and sweeps again until just before the next
//! scheduled invocation. Ticks are aligned to whole seconds of the wall clock (plus a few
//! milliseconds), so a tick sweeping as of second `s` runs just after `s` begins and an item whose
//! ttl is `s - 1` waits about one second, not two.
//!
//! The first sweep of a series, and one every `full_every` after it, is a full sweep (lookback
//! windows and checkpoint catch-up); the ticks in between read only the windows that can hold
//! items expired since the previous tick, which keeps the read cost per tick at one or two
//! queries per shard.

use std::time::Duration;

use tokio::time::Instant;

use super::{Stop, SweepReport, Sweeper};
use crate::expiry::window::windows_since;
use crate::expiry::{Clock, Timestamp};
use crate::store::Store;

/// How far past the start of a second a tick runs (ms), so that the second has certainly begun.
const TICK_OFFSET_MS: i64 = 20;

/// When and how often to sweep.
#[derive(Debug, Clone)]
pub struct Ticks {
    /// Period between ticks.
    pub every: Duration,
    /// A full sweep (lookback and checkpoint) runs at least this often.
    pub full_every: Duration,
    /// No tick starts at or after this instant.
    pub until: Option<Instant>,
}

/// The wall-clock time to sleep from `clock` until the next tick boundary for ticks of `every`.
pub fn until_next_tick(clock: Timestamp, every: Duration) -> Duration {
    let period = i64::try_from(every.as_millis()).unwrap_or(i64::MAX).max(1);
    let next =
        (clock.millis() - TICK_OFFSET_MS).div_euclid(period) * period + period + TICK_OFFSET_MS;
    Duration::from_millis(u64::try_from(next - clock.millis()).unwrap_or(0))
}

/// Sweeps once as of `first_now`, then on every tick as of the clock, until `ticks.until` or
/// `stop`; returns the merged report. `clock` is the entry point's clock; `on_tick` sees each
/// tick's own report.
pub async fn run_ticks<S, C, F>(
    sweeper: &Sweeper<S>,
    first_now: Timestamp,
    clock: &C,
    ticks: &Ticks,
    stop: &Stop,
    mut on_tick: F,
) -> SweepReport
where
    S: Store,
    C: Clock + ?Sized,
    F: FnMut(&SweepReport),
{
    let started = Instant::now();
    let width = sweeper.schema().layout.window_seconds;
    let mut total = SweepReport::default();
    let mut prev_now: Option<Timestamp> = None;
    let mut last_full: Option<Instant> = None;
    loop {
        if let Some(prev) = prev_now {
            let wake = Instant::now() + until_next_tick(clock.now(), ticks.every);
            if ticks.until.is_some_and(|u| wake >= u) || stop.deadline().is_some_and(|d| wake >= d)
            {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = stop.token().cancelled() => break,
            }
            let now = clock.now().floor_to_second().max(prev);
            // A tick reads the few windows since the previous one; after a long gap (a slow
            // catch-up, a suspended host) a full sweep covers it instead, so a tick never reads
            // more windows than a full sweep does.
            let gap_windows = now.secs().saturating_sub(prev.secs()) / i64::from(width.max(1));
            let small = gap_windows <= i64::from(sweeper.options().lookback_windows);
            let report = if small && last_full.is_some_and(|t| t.elapsed() < ticks.full_every) {
                sweeper
                    .sweep_windows(now, &windows_since(prev, now, width), stop)
                    .await
            } else {
                last_full = Some(Instant::now());
                sweeper.sweep(now, stop).await
            };
            on_tick(&report);
            prev_now = Some(now);
            total.merge(report);
        } else {
            last_full = Some(Instant::now());
            let report = sweeper.sweep(first_now, stop).await;
            on_tick(&report);
            prev_now = Some(first_now);
            total.merge(report);
        }
        if stop.reached() {
            break;
        }
    }
    total.duration_ms = started.elapsed().as_millis() as u64;
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_land_just_after_second_boundaries() {
        let one = Duration::from_secs(1);
        let at = Timestamp::from_millis;
        // (clock ms, period, expected wait ms)
        let cases = [
            (100_500, one, 520),
            (101_010, one, 10),    // just before the offset: this second's tick
            (101_020, one, 1_000), // right on a tick: the next one
            (103_000, Duration::from_secs(5), 2_020), // 5 s ticks align to multiples of 5
            (100_000, Duration::from_millis(250), 20),
            (100_030, Duration::from_millis(250), 240),
        ];
        for (clock, every, wait) in cases {
            assert_eq!(
                until_next_tick(at(clock), every),
                Duration::from_millis(wait),
                "{clock} {every:?}"
            );
        }
    }
}
