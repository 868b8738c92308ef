//! Repeated sweeps ([`run_ticks`]): tick mode inside one Lambda invocation, and the long-running
//! `run` command (`docs/design.md`, "Sub-second precision"). Between ticks, the loop sends the
//! probes the clock asks for to learn DynamoDB's clock (`docs/design.md`, "DynamoDB's clock").

use std::cell::RefCell;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use super::{Stop, SweepReport, Sweeper, CONFIRM_AHEAD};
use crate::expiry::window::{partition_key, windows_since, Window};
use crate::expiry::{Clock, Timestamp};
use crate::store::Store;

/// How far past its boundary a tick runs (ms) by the sweep's clock. That clock is held to
/// DynamoDB's (`crate::store::clock`), so any instant past the boundary is in the new second by
/// DynamoDB's clock too; the offset only leaves room for the timer's slop and for an answer that
/// moves the clock's bound back a little before the tick reads it (`BOUNDARY_WAIT`).
pub const TICK_OFFSET_MS: i64 = 5;

/// A tick that wakes with its clock not yet past the boundary waits for it at most this long,
/// then runs as of what the clock reads (its items past the boundary go at the next tick).
const BOUNDARY_WAIT: Duration = Duration::from_millis(50);

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

/// Waits until `clock` reads past `boundary` (checked every millisecond), at most
/// [`BOUNDARY_WAIT`] or until `stop`.
async fn past_boundary<C: Clock + ?Sized>(clock: &C, boundary: Timestamp, stop: &Stop) {
    let give_up = Instant::now() + BOUNDARY_WAIT;
    while clock.now() <= boundary && Instant::now() < give_up && !stop.reached() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Sweeps repeatedly until `ticks.until` or `stop`, and returns the merged report. `on_tick`
/// sees each sweep's own report; `clock` is the entry point's clock.
///
/// Two loops run side by side, so a slow full sweep never delays a tick:
/// - ticks, from the start and then just after every `ticks.every` boundary, each as of the
///   clock at millisecond resolution, reading the windows since the previous tick;
/// - full sweeps (lookback and checkpoint catch-up), the first as of `first_now` and then every
///   `ticks.full_every`, reading only the windows older than those the ticks read, so the two
///   never delete the same items.
pub async fn run_ticks<S, C, F>(
    sweeper: &Sweeper<S>,
    first_now: Timestamp,
    clock: &C,
    ticks: &Ticks,
    stop: &Stop,
    on_tick: F,
) -> SweepReport
where
    S: Store,
    C: Clock + ?Sized,
    F: FnMut(&SweepReport),
{
    let started = Instant::now();
    sweeper.resume_packs();
    let width = sweeper.schema().layout.window_seconds;
    let catchup_cap = Duration::from_secs(sweeper.options().max_catchup_seconds);
    let on_tick = RefCell::new(on_tick);
    // The start (epoch seconds) of the oldest window the ticks read: full sweeps stop below it.
    let first_window = Window::containing_instant(first_now, width);
    let tick_floor = AtomicI64::new(first_window.previous().start);
    let past_until = |wake: Instant| {
        ticks.until.is_some_and(|u| wake >= u) || stop.deadline().is_some_and(|d| wake >= d)
    };
    // Every window since the previous tick, up to `at`, however long the gap (a tick period
    // longer than the lookback, a slow host, a suspended process): nothing else reads them, since
    // full sweeps stay below the ticks' floor. Bounded like a catch-up, by MAX_CATCHUP; anything
    // older is left to a checkpoint's catch-up.
    let tick_windows =
        |prev: Timestamp, at: Timestamp| windows_since(prev.max(at - catchup_cap), at, width);
    let record = |total: &mut SweepReport, report: SweepReport| {
        (on_tick.borrow_mut())(&report);
        total.merge(report);
    };

    let fast = async {
        let mut total = SweepReport::default();
        let mut prev = first_now;
        loop {
            let now = clock.now().max(prev);
            if now - catchup_cap > prev {
                tracing::warn!(gap_s = now.secs() - prev.secs(), "ticks resumed after a gap longer than MAX_CATCHUP; older windows are left to the checkpoint's catch-up");
            }
            let windows = tick_windows(prev, now);
            if let Some(oldest) = windows.last() {
                tick_floor.store(oldest.start, Ordering::Relaxed);
            }
            record(&mut total, sweeper.sweep_windows(now, &windows, stop).await);
            prev = now;
            if stop.reached() {
                break;
            }
            let reading = clock.now();
            let wake = Instant::now() + until_next_tick(reading, ticks.every);
            if past_until(wake) {
                break;
            }
            // The wait for the tick (`false`: stopped); in batch mode, with the next tick's keys
            // confirmed by the table ahead of it, so that its deletes leave without a read of
            // their own (`super::ahead`).
            let waited = async {
                let ahead = wake.checked_sub(CONFIRM_AHEAD);
                if let Some(ahead) = ahead.filter(|a| *a > Instant::now()) {
                    if !stop.sleep_until(ahead).await {
                        return false;
                    }
                    let planned = clock.now() + wake.saturating_duration_since(Instant::now());
                    let windows = tick_windows(prev, planned);
                    tokio::select! {
                        () = sweeper.confirm_ahead(planned, &windows, stop) => {}
                        _ = tokio::time::sleep_until(wake) => {}
                    }
                }
                stop.sleep_until(wake).await
            };
            // Beside the wait, the probes of DynamoDB's next `Date` turn the clock asks for,
            // until the tick: their answers bring its bounds close enough that the tick's
            // instant is not held back (`Clock::probes`). A clock they moved on reaches the
            // tick's boundary sooner: the tick runs then.
            let probes = clock.probes();
            let probing = async {
                if probes.is_empty() || !sweeper.leading() {
                    return std::future::pending().await;
                }
                // The tick's boundary by the clock, and the instant it reads it.
                let due = reading + until_next_tick(reading, ticks.every);
                let left = || {
                    let ms = u64::try_from(due.millis_since(clock.now())).unwrap_or(0);
                    Instant::now() + Duration::from_millis(ms)
                };
                let mut answers = probe(sweeper, &probes, prev, stop);
                loop {
                    tokio::select! {
                        answered = answers.next() => {
                            if answered.is_none() {
                                break;
                            }
                        }
                        _ = tokio::time::sleep_until(left()) => return,
                    }
                }
                let sooner = left();
                if sooner >= wake {
                    return std::future::pending().await;
                }
                tokio::time::sleep_until(sooner).await;
            };
            let go_on = tokio::select! {
                go_on = waited => go_on,
                () = probing => true,
            };
            if !go_on {
                break;
            }
            let boundary = reading + until_next_tick(reading, ticks.every)
                - Duration::from_millis(TICK_OFFSET_MS as u64);
            past_boundary(clock, boundary, stop).await;
        }
        total
    };

    let full = async {
        let mut total = SweepReport::default();
        let mut now = first_now;
        loop {
            let last = Instant::now();
            let below = Some(tick_floor.load(Ordering::Relaxed));
            record(&mut total, sweeper.sweep_below(now, below, stop).await);
            let wake = last + ticks.full_every;
            if stop.reached() || past_until(wake) {
                break;
            }
            if !stop.sleep_until(wake).await {
                break;
            }
            now = clock.now();
        }
        total
    };

    let (mut total, full_total) = futures::join!(fast, full);
    total.merge(full_total);
    total.duration_ms = started.elapsed().as_millis() as u64;
    total
}

/// Sends a cheap request at each instant of `at` ([`Clock::probes`]), concurrently, and yields as
/// each is answered: a `Query` of one item on the first partition of this sweeper's shards in the
/// window of `at_time`, for ttls before the window's start, which no item there has. The answers
/// only feed the clock (their `Date`); failures are ignored.
fn probe<'a, S: Store>(
    sweeper: &'a Sweeper<S>,
    at: &[Instant],
    at_time: Timestamp,
    stop: &'a Stop,
) -> FuturesUnordered<impl std::future::Future<Output = ()> + 'a> {
    let schema = sweeper.schema();
    let window = Window::containing_instant(at_time, schema.layout.window_seconds);
    let shard = sweeper.shard_range().shards().next().unwrap_or(0);
    let partition = partition_key(window, shard, schema.layout.window_shards.max(1));
    let before = Timestamp::from_secs(window.start);
    at.iter()
        .map(|when| {
            let (when, partition) = (*when, partition.clone());
            async move {
                tokio::time::sleep_until(when).await;
                let query =
                    sweeper
                        .store()
                        .query_expired(schema, &partition, before, None, None, Some(1));
                let _ = stop.bound("Query", query).await;
            }
        })
        .collect()
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
            (100_500, one, 505),
            (101_003, one, 2),     // just before the offset: this second's tick
            (101_005, one, 1_000), // right on a tick: the next one
            (103_000, Duration::from_secs(5), 2_005), // 5 s ticks align to multiples of 5
            (100_000, Duration::from_millis(250), 5),
            (100_030, Duration::from_millis(250), 225),
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
