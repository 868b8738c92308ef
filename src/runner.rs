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

use crate::store::Store;
use crate::sweep::{Stop, SweepReport, Sweeper};
use crate::window::windows_since;

/// How far past the start of a second a tick runs, so that the second has certainly begun.
const TICK_OFFSET: f64 = 0.02;

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

/// The wall-clock time to sleep until the next tick boundary after `clock_secs` (epoch seconds
/// with fraction) for ticks of `every`.
pub fn until_next_tick(clock_secs: f64, every: Duration) -> Duration {
    let period = every.as_secs_f64().max(0.001);
    let next = ((clock_secs - TICK_OFFSET) / period).floor() * period + period + TICK_OFFSET;
    Duration::from_secs_f64((next - clock_secs).max(0.0))
}

/// Sweeps once as of `first_now`, then on every tick as of the clock, until `ticks.until` or
/// `stop`; returns the merged report. `clock` returns the current epoch time in seconds with
/// fraction; `on_tick` sees each tick's own report.
pub async fn run_ticks<S, C, F>(
    sweeper: &Sweeper<S>,
    first_now: i64,
    clock: C,
    ticks: &Ticks,
    stop: &Stop,
    mut on_tick: F,
) -> SweepReport
where
    S: Store,
    C: Fn() -> f64,
    F: FnMut(&SweepReport),
{
    let started = Instant::now();
    let width = sweeper.options().window_seconds;
    let mut total = SweepReport::default();
    let mut prev_now: Option<i64> = None;
    let mut last_full: Option<Instant> = None;
    loop {
        if let Some(prev) = prev_now {
            let wake = Instant::now() + until_next_tick(clock(), ticks.every);
            if ticks.until.is_some_and(|u| wake >= u) || stop.deadline().is_some_and(|d| wake >= d)
            {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = stop.token().cancelled() => break,
            }
            let now = (clock().floor() as i64).max(prev);
            let report = if last_full.is_some_and(|t| t.elapsed() < ticks.full_every) {
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
        let d = until_next_tick(100.5, one);
        assert!((d.as_secs_f64() - 0.52).abs() < 1e-9, "{d:?}");
        // just before the offset: wait for this second's tick
        let d = until_next_tick(101.01, one);
        assert!((d.as_secs_f64() - 0.01).abs() < 1e-9, "{d:?}");
        // right on a tick: the next one
        let d = until_next_tick(101.02, one);
        assert!((d.as_secs_f64() - 1.0).abs() < 1e-9, "{d:?}");
        // 5 s ticks align to multiples of 5
        let d = until_next_tick(103.0, Duration::from_secs(5));
        assert!((d.as_secs_f64() - 2.02).abs() < 1e-9, "{d:?}");
    }
}
