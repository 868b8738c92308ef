//! DynamoDB's own clock, learned from the `Date` header of its responses, so that a host clock
//! running fast can never make a sweep delete an item before DynamoDB's time reaches its ttl.
//! Monotonic instants are Tokio's ([`tokio::time::Instant`]): the standard clock's outside tests,
//! a paused one a test moves in them.
//!
//! [`ServerClock`] keeps the tightest upper and lower bounds the answers give (`D + 1 s` aged
//! from the request's sending, `D` aged from the answer's arrival less [`DRIFT_TOLERANCE`]);
//! [`ServerClock::guard`] holds every wall-clock reading to them, and [`ServerClock::probes`]
//! names when requests would locate the `Date`'s turn. The bounds, how the upper one is
//! re-anchored after a pause the monotonic clock missed, and when a clamp is warned about:
//! `docs/design.md`, "DynamoDB's clock".

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use tokio::time::Instant;

use super::lock;
use crate::expiry::{Clock, Timestamp};

/// The `Date` header's resolution: an answer dated `D` was written before `D` plus this.
pub const SKEW_TOLERANCE: Duration = Duration::from_secs(1);

/// A host clock past DynamoDB's upper bound by more than this is warned about (a smaller lead is
/// only reported, `clock_ahead_ms`).
pub const WARN_AHEAD: Duration = Duration::from_millis(100);

/// How long (monotonic time) a bound from one response is trusted before any newer one replaces it.
pub const ANCHOR_MAX_AGE: Duration = Duration::from_secs(60);

/// How much faster than DynamoDB's the monotonic clock may run, as a fraction of the time elapsed
/// (200 parts per million, 0.72 s an hour; clocks kept by NTP differ by a few): the lower bound
/// is lowered by it as it ages, so that it stays below DynamoDB's time over days of running.
pub const DRIFT_TOLERANCE: f64 = 200e-6;

/// The turn of a `Date` counts as located only when the upper bound is within this many round
/// trips (of the answer that set the lower bound) of the lower bound: requests sent one after
/// another, one answered before the turn and the next after it, bracket the turn within the
/// round trip plus the gap between their sendings ([`ServerClock::probes`]).
pub const LOCATE_ROUND_TRIPS: u32 = 2;

/// An answer slower than this never locates a turn: the allowance past the lower bound, that
/// answer's round trip, is never more than this.
pub const MAX_ALLOWANCE: Duration = Duration::from_millis(50);

/// At most this many probes of one turn ([`ServerClock::probes`]).
pub const MAX_PROBES: u32 = 16;

/// Probes of one turn are no closer together than this.
pub const MIN_PROBE_GAP: Duration = Duration::from_millis(1);

/// Once a turn is located, it is probed again when the lower bound is this old (its drift
/// allowance, 2 ms by then, holds the clock back) and no probes were asked for for as long; and
/// a turn [`EAGER_ROUNDS`] rounds of probes did not locate is probed no more often than this.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// Rounds of probes asked for one after another (one a turn) while a turn is not located,
/// before they are spaced [`REFRESH_EVERY`] apart.
pub const EAGER_ROUNDS: u32 = 3;

/// A changed lead of the host clock is warned about at most this often.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// An unchanged lead is warned about again after this long.
pub const REMIND_EVERY: Duration = Duration::from_secs(300);

/// One response's bound on DynamoDB's clock.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    /// `Date + 1 s`.
    bound: Timestamp,
    /// The local instant the request was sent: what the bound is extrapolated from; its age.
    sent: Instant,
}

impl Anchor {
    /// The bound on DynamoDB's clock at local instant `now`.
    fn at(&self, now: Instant) -> Timestamp {
        self.bound + now.saturating_duration_since(self.sent)
    }
}

/// The last warning: when, and the lead it reported (ms).
#[derive(Debug, Clone, Copy)]
struct Warned {
    at: Instant,
    ahead_ms: u64,
}

/// The tightest lower bound: the answer whose `Date` says most of DynamoDB's clock now.
#[derive(Debug, Clone, Copy)]
struct Floor {
    date: Timestamp,
    /// The local instant the answer arrived.
    arrived: Instant,
    /// Its round trip: from the request's sending to that arrival.
    rtt: Duration,
}

impl Floor {
    /// The lower bound at `now`: the date aged by the monotonic time since it arrived, less
    /// [`DRIFT_TOLERANCE`] of it.
    fn at(&self, now: Instant) -> Timestamp {
        let aged = now.saturating_duration_since(self.arrived);
        self.date + (aged - aged.mul_f64(DRIFT_TOLERANCE))
    }
}

#[derive(Debug, Default)]
struct State {
    anchor: Option<Anchor>,
    warned: Option<Warned>,
    floor: Option<Floor>,
    /// When probes were last asked for.
    probed: Option<Instant>,
    /// Rounds of probes asked for since the turn was last located.
    rounds: u32,
}

impl State {
    /// The latest instant a reading may be at `now` ([`ServerClock::guard`]); `None` before the
    /// first response.
    fn bound_at(&self, now: Instant) -> Option<Timestamp> {
        let upper = self.anchor?.at(now);
        let Some(floor) = self.floor else {
            return Some(upper);
        };
        let past_lower = if self.located() {
            floor.rtt
        } else {
            Duration::ZERO
        };
        Some(upper.min(floor.at(now) + past_lower))
    }

    /// Whether the `Date` turn of the lower bound's answer is located: that answer's round trip
    /// is at most [`MAX_ALLOWANCE`], and the upper bound is no further above the lower one (both
    /// aged alike, the drift allowance aside) than [`LOCATE_ROUND_TRIPS`] of it.
    fn located(&self) -> bool {
        let (Some(anchor), Some(floor)) = (self.anchor, self.floor) else {
            return false;
        };
        if floor.rtt > MAX_ALLOWANCE {
            return false;
        }
        let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        let dates_us = anchor.bound.millis_since(floor.date).saturating_mul(1000);
        let apart_us = match floor.arrived.checked_duration_since(anchor.sent) {
            Some(after) => dates_us.saturating_add(micros(after)),
            None => dates_us.saturating_sub(micros(anchor.sent - floor.arrived)),
        };
        apart_us <= micros(floor.rtt * LOCATE_ROUND_TRIPS)
    }

    /// When to send the probes of DynamoDB's next `Date` turn ([`ServerClock::probes`]).
    fn probes_at(&mut self, now: Instant) -> Vec<Instant> {
        let (Some(anchor), Some(floor)) = (self.anchor, self.floor) else {
            return Vec::new();
        };
        let recent = |t: Instant| now.saturating_duration_since(t) < REFRESH_EVERY;
        if self.located() {
            self.rounds = 0;
            if recent(floor.arrived) || self.probed.is_some_and(recent) {
                return Vec::new();
            }
        } else if self.rounds >= EAGER_ROUNDS && self.probed.is_some_and(recent) {
            return Vec::new();
        }
        self.probed = Some(now);
        self.rounds = self.rounds.saturating_add(1);
        // The next whole second of the lower bound: DynamoDB's clock turns to it no earlier than
        // the upper bound reaches it, and no later than the lower bound does.
        let lower = floor.at(now);
        let turn = Timestamp::from_secs(lower.secs() + 1);
        let until = |bound: Timestamp| {
            Duration::from_millis(u64::try_from(turn.millis_since(bound)).unwrap_or(0))
        };
        let latest = now + until(lower);
        let earliest = now + until(anchor.at(now));
        let width = latest.saturating_duration_since(earliest);
        let count = u32::try_from(width.as_micros() / MIN_PROBE_GAP.as_micros())
            .unwrap_or(u32::MAX)
            .clamp(1, MAX_PROBES);
        let gap = width / count;
        // Each written about half its round trip after it is sent: dated at the middle of its
        // share of the interval the turn lies in.
        let lead = floor.rtt.min(MAX_ALLOWANCE) / 2;
        let mut at: Vec<Instant> = (0..count)
            .map(|i| {
                let written = earliest + gap * i + gap / 2;
                written.checked_sub(lead).unwrap_or(now).max(now)
            })
            .collect();
        at.dedup();
        at
    }
}

/// What DynamoDB's `Date` headers say of its clock: an upper bound, re-anchored as the module
/// docs say, and how far the host clock was found ahead of it.
#[derive(Debug, Default)]
pub struct ServerClock {
    state: Mutex<State>,
    /// Largest clamp since the last [`ServerClock::take_clamped`], milliseconds.
    clamped_ms: AtomicU64,
}

impl ServerClock {
    /// Records a response with `Date` header `date` to a request sent at `sent`.
    pub fn observe(&self, date: Timestamp, sent: Instant) {
        self.observe_at(date, sent, Instant::now());
    }

    /// [`ServerClock::observe`], with `now` the local instant the response arrived.
    fn observe_at(&self, date: Timestamp, sent: Instant, now: Instant) {
        let candidate = Anchor {
            bound: date + SKEW_TOLERANCE,
            sent,
        };
        let mut state = lock(&self.state);
        if state.floor.is_none_or(|f| f.at(now) < date) {
            let (arrived, rtt) = (now, now.saturating_duration_since(sent));
            state.floor = Some(Floor { date, arrived, rtt });
        }
        let replace = state.anchor.is_none_or(|current| {
            let current_now = current.at(now);
            // DynamoDB's clock read at least `date`: a bound below it is stale (the monotonic
            // clock missed time, e.g. while the host was suspended).
            let contradicted = date > current_now;
            if contradicted {
                tracing::info!(
                    dynamodb_at_least = %date,
                    learned_bound = %current_now,
                    "DynamoDB's clock is past the bound learned of it (the host was paused?): \
                     learning it anew"
                );
            }
            contradicted
                || candidate.at(now) < current_now
                || now.saturating_duration_since(current.sent) > ANCHOR_MAX_AGE
        });
        if replace {
            state.anchor = Some(candidate);
        }
    }

    fn upper_bound_at(&self, now: Instant) -> Option<Timestamp> {
        lock(&self.state).anchor.map(|a| a.at(now))
    }

    fn lower_bound_at(&self, now: Instant) -> Option<Timestamp> {
        Some(lock(&self.state).floor?.at(now))
    }

    /// `wall` (a host clock reading), held to [`ServerTime::lower_bound`]; once the `Date` turn is
    /// located ([`MAX_ALLOWANCE`], [`LOCATE_ROUND_TRIPS`]), to the lower bound plus the round trip
    /// of the answer that set it, and to the upper bound: never ahead of DynamoDB's clock by more
    /// than that round trip, and not at all before. A clamp is remembered for the report, and
    /// logged (module docs).
    pub fn guard(&self, wall: Timestamp) -> Timestamp {
        self.guard_at(wall, Instant::now())
    }

    fn guard_at(&self, wall: Timestamp, now: Instant) -> Timestamp {
        let mut state = lock(&self.state);
        let (Some(upper), Some(bound)) = (state.anchor.map(|a| a.at(now)), state.bound_at(now))
        else {
            return wall;
        };
        if wall <= bound {
            return wall;
        }
        // Reported, and warned about, only as far as the host clock is surely ahead: past the
        // upper bound (a clamp to the lower bound may hold a correct clock back a little).
        let ahead_ms = wall.millis_since(upper).max(0).unsigned_abs();
        self.clamped_ms.fetch_max(ahead_ms, Ordering::Relaxed);
        if ahead_ms > WARN_AHEAD.as_millis() as u64 && should_warn(state.warned, ahead_ms, now) {
            state.warned = Some(Warned { at: now, ahead_ms });
            drop(state);
            tracing::warn!(
                wall = %wall,
                dynamodb_at_most = %upper,
                ahead_ms,
                "the host clock is ahead of DynamoDB's: sweeping as of DynamoDB's time"
            );
        }
        bound
    }

    /// The local instants at which to send a cheap request, so that the answers locate the next
    /// turn of DynamoDB's `Date` ([`LOCATE_ROUND_TRIPS`]): spread (at most [`MAX_PROBES`],
    /// [`MIN_PROBE_GAP`] apart at the closest) over the interval the bounds leave for it, each
    /// sent half a round trip before its share's middle. Empty before the first answer, and once
    /// the turn is located but every [`REFRESH_EVERY`]; after [`EAGER_ROUNDS`] rounds that did
    /// not locate it, at most every [`REFRESH_EVERY`].
    pub fn probes(&self) -> Vec<Instant> {
        let now = Instant::now();
        lock(&self.state).probes_at(now)
    }

    /// The most (ms) [`ServerClock::guard`] pulled a reading back since the last call; resets it.
    pub fn take_clamped(&self) -> u64 {
        self.clamped_ms.swap(0, Ordering::Relaxed)
    }
}

/// What DynamoDB's clock reads now, as far as its responses tell: between two bounds. The leader
/// lease reads its time through it ([`ServerClock`] in production; the tests, their own).
pub trait ServerTime: Send + Sync {
    /// DynamoDB's clock reads at most this now; `None` before the first response.
    fn upper_bound(&self) -> Option<Timestamp>;
    /// DynamoDB's clock reads at least this now; `None` before the first response.
    fn lower_bound(&self) -> Option<Timestamp>;
}

impl ServerTime for ServerClock {
    fn upper_bound(&self) -> Option<Timestamp> {
        self.upper_bound_at(Instant::now())
    }

    fn lower_bound(&self) -> Option<Timestamp> {
        self.lower_bound_at(Instant::now())
    }
}

/// Whether a lead of `ahead_ms` (past the tolerance) is worth a warning after `last`.
fn should_warn(last: Option<Warned>, ahead_ms: u64, now: Instant) -> bool {
    let Some(last) = last else {
        return true;
    };
    let since = now.saturating_duration_since(last.at);
    let changed = ahead_ms.abs_diff(last.ahead_ms) > SKEW_TOLERANCE.as_millis() as u64;
    since >= REMIND_EVERY || (changed && since >= WARN_EVERY)
}

/// The sweep clock: the entry point's host clock, every reading held to DynamoDB's
/// ([`ServerClock::guard`]). Built once per process, by [`crate::connect`].
pub struct GuardedClock {
    wall: Box<dyn Fn() -> Timestamp + Send + Sync>,
    server: Arc<ServerClock>,
}

impl std::fmt::Debug for GuardedClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedClock")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl GuardedClock {
    /// `wall` (the entry point's clock) held to `server`
    /// ([`crate::store::DynamoStore::server_clock`]).
    pub fn new(
        wall: impl Fn() -> Timestamp + Send + Sync + 'static,
        server: Arc<ServerClock>,
    ) -> Self {
        let wall = Box::new(wall);
        GuardedClock { wall, server }
    }

    /// DynamoDB's clock as learned so far.
    pub fn server(&self) -> &ServerClock {
        &self.server
    }
}

impl Clock for GuardedClock {
    fn now(&self) -> Timestamp {
        self.server.guard((self.wall)())
    }

    fn take_ahead_ms(&self) -> u64 {
        self.server.take_clamped()
    }

    fn probes(&self) -> Vec<Instant> {
        self.server.probes()
    }

    /// The host clock itself: it counts a pause the held reading misses until DynamoDB's clock
    /// is learnt again.
    fn raw_now(&self) -> Timestamp {
        (self.wall)()
    }

    /// DynamoDB's upper bound once a response has told it; the host clock before.
    fn latest(&self) -> Timestamp {
        self.server.upper_bound().unwrap_or_else(|| (self.wall)())
    }
}

/// The local instant a request attempt was sent, kept in the request's config bag.
#[derive(Debug, Clone, Copy)]
struct SentAt(Instant);

impl Storable for SentAt {
    type Storer = StoreReplace<Self>;
}

/// The SDK interceptor that feeds a [`ServerClock`] from every response's `Date` header.
#[derive(Debug, Clone)]
pub(crate) struct DateRecorder(pub(crate) Arc<ServerClock>);

impl Intercept for DateRecorder {
    fn name(&self) -> &'static str {
        "DateRecorder"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(SentAt(Instant::now()));
        Ok(())
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let date = context.response().headers().get("date");
        if let (Some(sent), Some(date)) = (cfg.load::<SentAt>(), date.and_then(parse_http_date)) {
            self.0.observe(date, sent.0);
        }
        Ok(())
    }
}

/// Parses an HTTP `Date` header (`Sun, 22 Nov 2026 09:54:54 GMT`).
pub(crate) fn parse_http_date(text: &str) -> Option<Timestamp> {
    chrono::DateTime::parse_from_rfc2822(text.trim())
        .ok()
        .map(|t| Timestamp::from_datetime(t.with_timezone(&chrono::Utc)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock that has seen one answer, dated 1,000,000 s, sent and received at the instant given.
    fn answered_once() -> (ServerClock, Instant, Timestamp) {
        let (clock, t0, date) = (
            ServerClock::default(),
            Instant::now(),
            Timestamp::from_secs(1_000_000),
        );
        clock.observe_at(date, t0, t0);
        (clock, t0, date)
    }

    #[tokio::test(start_paused = true)]
    async fn the_bounds_age_on_tokio_time_so_a_paused_test_moves_them() {
        let clock = ServerClock::default();
        let date = Timestamp::from_secs(1_000_000);
        clock.observe(date, Instant::now());
        tokio::time::advance(Duration::from_secs(10)).await;
        let ten_s = Duration::from_secs(10);
        assert_eq!(clock.upper_bound(), Some(date + SKEW_TOLERANCE + ten_s));
        // Less the drift allowance: 2 ms of 10 s.
        let lower = date + Duration::from_millis(9_998);
        assert_eq!(clock.lower_bound(), Some(lower));
    }

    #[test]
    fn http_dates_parse() {
        assert_eq!(
            parse_http_date("Tue, 19 Jul 2022 21:26:20 GMT"),
            Some(Timestamp::from_secs(1_658_265_980))
        );
        assert_eq!(parse_http_date("yesterday"), None);
    }

    #[test]
    fn a_fast_host_clock_is_held_to_the_server_bound_and_a_correct_one_is_not() {
        let clock = ServerClock::default();
        let wall = Timestamp::from_secs(1_658_265_980);
        assert_eq!(
            clock.guard(wall),
            wall,
            "no response seen yet: nothing to compare"
        );
        // DynamoDB said 100 s before our reading, just now.
        clock.observe(Timestamp::from_secs(1_658_265_880), Instant::now());
        let held = clock.guard(wall);
        let date = Timestamp::from_secs(1_658_265_880);
        // One answer locates no `Date` turn: held to the lower bound, the Date aged since.
        assert!(held <= date + Duration::from_millis(50), "{held}");
        assert!(held >= date, "{held}");
        let ahead = clock.take_clamped();
        assert!((98_900..=99_000).contains(&ahead), "{ahead}");
        assert_eq!(clock.take_clamped(), 0);
        // A reading at or behind DynamoDB's time passes unchanged.
        let behind = Timestamp::from_secs(1_658_265_880);
        assert_eq!(clock.guard(behind), behind);
    }

    /// DynamoDB's clock at local instant `x`, when it read `t0` (ms) at `base`.
    fn truth(t0: i64, base: Instant, x: Instant) -> Timestamp {
        Timestamp::from_millis(t0) + x.duration_since(base)
    }

    /// An answer to a request sent at `sent`, written by DynamoDB `rtt / 2` later and arriving
    /// `rtt` later, dated by its clock to the whole second, as the `Date` header is.
    fn answer(clock: &ServerClock, t0: i64, base: Instant, sent: Instant, rtt: Duration) {
        let written = truth(t0, base, sent + rtt / 2);
        let date = Timestamp::from_secs(written.millis().div_euclid(1000));
        clock.observe_at(date, sent, sent + rtt);
    }

    /// `clock`'s guard of a host clock `fast` ahead of DynamoDB's time at local instant `at`,
    /// checked against the bounds: never past the lower bound plus the round trip of the answer
    /// that set it, and the lower bound itself while the `Date` turn is not located (the bounds
    /// further apart than that round trip). Returns how far ahead of DynamoDB's time it is (ms)
    /// and whether the turn was located.
    #[track_caller]
    fn check_guard(
        clock: &ServerClock,
        (t0, base): (i64, Instant),
        at: Instant,
        fast: Duration,
    ) -> (i64, bool) {
        let dynamodb = truth(t0, base, at);
        let held = clock.guard_at(dynamodb + fast, at);
        let state = lock(&clock.state);
        let (floor, located) = (state.floor.unwrap(), state.located());
        drop(state);
        let (lower, rtt) = (floor.at(at), floor.rtt);
        assert!(
            held <= lower + rtt,
            "{held} is past the lower bound {lower} plus {rtt:?}"
        );
        if !located {
            assert_eq!(
                held, lower,
                "the turn is not located: held to the lower bound"
            );
        }
        (held.millis() - dynamodb.millis(), located)
    }

    #[test]
    fn a_fast_host_clock_is_held_to_the_lower_bound_until_the_turn_is_located() {
        // The host clock runs 80 ms fast (less than a round trip of the old allowance) or 0.8 s.
        // DynamoDB's clock reads each of these fractions of a second when the start-up's one
        // answer is written. One request every 100 ms, one at a time: the turn is located only
        // to within the 100 ms between two requests, so every instant is the lower bound, never
        // ahead of DynamoDB's time.
        let rtt = Duration::from_millis(8);
        for fast in [Duration::from_millis(80), Duration::from_millis(800)] {
            for fraction_ms in [0, 50, 150, 400, 700, 950, 995] {
                let clock = ServerClock::default();
                let base = Instant::now();
                let t0 = 1_800_000_000_000 + fraction_ms;
                for i in 0..=30u32 {
                    let sent = base + Duration::from_millis(100) * i;
                    answer(&clock, t0, base, sent, rtt);
                    for after in [rtt, rtt + Duration::from_millis(50)] {
                        let (ahead, located) = check_guard(&clock, (t0, base), sent + after, fast);
                        assert!(!located, "{fraction_ms} ms, answer {i}");
                        assert!(ahead <= 0, "{fraction_ms} ms, answer {i}: {ahead} ms ahead");
                    }
                }
            }
        }
    }

    #[test]
    fn once_the_turn_is_located_an_instant_is_at_most_a_round_trip_ahead() {
        // Eight requests at once, answered after 8 to 36 ms (written 4 to 18 ms after they were
        // sent), across a `Date` turn: those written before it bound DynamoDB's clock from above
        // as closely as the first written after it bounds it from below, so the turn is located
        // within that answer's round trip. An instant is then at most that round trip past the
        // lower bound and ahead of DynamoDB's time, and a host clock 0.8 s fast is held to
        // within it.
        let fast = Duration::from_millis(800);
        for fraction_ms in [983, 988, 990, 995] {
            let clock = ServerClock::default();
            let base = Instant::now();
            let t0 = 1_800_000_000_000 + fraction_ms;
            for j in 0..8u64 {
                answer(&clock, t0, base, base, Duration::from_millis(8 + 4 * j));
            }
            let rtt = lock(&clock.state).floor.unwrap().rtt.as_millis() as i64;
            for after_ms in [40, 500, 5_000] {
                let at = base + Duration::from_millis(after_ms);
                let (ahead, located) = check_guard(&clock, (t0, base), at, fast);
                assert!(located, "{fraction_ms} ms");
                assert!(
                    (-rtt..=rtt).contains(&ahead),
                    "{fraction_ms} ms, {after_ms} ms on: {ahead} ms from DynamoDB's time"
                );
            }
        }
    }

    /// The tick loop (`crate::engine::run_ticks`) over DynamoDB, modelled: every request
    /// answered after `rtt`, written half-way; a start-up answer, then ticks from the start and
    /// at each `until_next_tick` of the guard, each a query and a delete (the tick's items are
    /// acknowledged two round trips after its instant is read), the probes the clock asks for
    /// after each tick (those answered by the next), and with `confirm` the read ahead of a tick
    /// (`CONFIRM_AHEAD`). DynamoDB's clock reads `t0` (ms) at the start; the host clock is `fast`
    /// ahead of it. Checks every tick's instant as [`check_guard`] does. Items expire at each
    /// whole second from the first after the start for `secs` s; answers each one's lag (ms,
    /// from its ttl to its delete's acknowledgement by DynamoDB's clock), in ttl order.
    fn tick_model(t0: i64, fast: Duration, confirm: bool, secs: i64) -> Vec<i64> {
        use crate::engine::ticks::until_next_tick;
        let rtt = Duration::from_millis(2);
        let clock = ServerClock::default();
        let base = Instant::now();
        let at = |x: Instant| truth(t0, base, x);
        // Requests by their sending; answered in that order.
        let mut sent: Vec<Instant> = vec![base];
        let deliver = |sent: &mut Vec<Instant>, upto: Instant| {
            sent.sort();
            let due = sent.iter().take_while(|s| **s + rtt <= upto).count();
            for s in sent.drain(..due) {
                answer(&clock, t0, base, s, rtt);
            }
        };
        let first = at(base).secs() + 1;
        let mut lags: Vec<Option<i64>> = vec![None; secs as usize];
        let mut x = base + rtt;
        while x < base + Duration::from_secs(secs as u64 + 2) {
            deliver(&mut sent, x);
            check_guard(&clock, (t0, base), x, fast);
            let held = clock.guard_at(at(x) + fast, x);
            let acked = x + rtt * 2;
            for (i, lag) in lags.iter_mut().enumerate() {
                let ttl = Timestamp::from_secs(first + i as i64);
                if lag.is_none() && held.is_after_ttl(ttl.as_secs_f64()) {
                    *lag = Some(at(acked).millis_since(ttl));
                }
            }
            sent.extend([x, x + rtt]);
            deliver(&mut sent, acked);
            let every = Duration::from_secs(1);
            let reading = clock.guard_at(at(acked) + fast, acked);
            let wake = acked + until_next_tick(reading, every);
            let probes: Vec<Instant> = lock(&clock.state).probes_at(acked);
            // The tick runs as soon as the clock the probes' answers move on reads its boundary
            // (those still unanswered then are dropped), or at `wake`.
            let due = reading + until_next_tick(reading, every);
            let reads_due = |clock: &ServerClock, from: Instant| {
                let left = due.millis_since(clock.guard_at(at(from) + fast, from));
                from + Duration::from_millis(left.max(0) as u64)
            };
            let mut next = wake;
            let mut from = acked;
            if !probes.is_empty() {
                for p in probes.into_iter().filter(|p| *p + rtt <= wake) {
                    if reads_due(&clock, from) <= p + rtt {
                        break;
                    }
                    sent.push(p);
                    deliver(&mut sent, p + rtt);
                    from = p + rtt;
                }
                next = wake.min(reads_due(&clock, from));
            }
            if confirm {
                let ahead = next.checked_sub(crate::engine::CONFIRM_AHEAD);
                sent.extend(ahead.filter(|a| *a > acked));
            }
            x = next;
        }
        lags.into_iter()
            .map(|l| l.expect("every item deleted"))
            .collect()
    }

    #[test]
    fn after_a_cold_start_ticks_find_their_items_within_a_probe_gap_and_then_at_once() {
        // Whatever fraction of a second DynamoDB's clock reads at the start, the probes after
        // the first tick place its next `Date` turn within 1 s / MAX_PROBES, and the tick runs
        // as soon as the clock they moved on reads its boundary: the first second's items are
        // deleted at most that much late. From then on the turn is located, or the lower bound
        // close enough that the held clock is not behind, whatever the host clock says: every
        // item goes at the first tick after its ttl, TICK_OFFSET_MS past the second by DynamoDB's clock
        // plus the tick's query and delete (two round trips, 4 ms here) and at most a round
        // trip of the lower bound's lag, also after the upper bound was re-anchored
        // (ANCHOR_MAX_AGE) and with the lower bound's drift allowance over 100 s. Every tick's
        // instant is checked against the bounds as `check_guard` does.
        use crate::engine::ticks::TICK_OFFSET_MS;
        let rtt_ms = 2;
        let gap_ms = 1_000 / i64::from(MAX_PROBES);
        for confirm in [false, true] {
            for fast in [
                Duration::ZERO,
                Duration::from_millis(80),
                Duration::from_millis(800),
            ] {
                for fraction_ms in [0, 150, 300, 500, 700, 900, 990] {
                    let lags = tick_model(1_800_000_000_000 + fraction_ms, fast, confirm, 100);
                    let (cold, steady) = lags.split_at(1);
                    let worst = steady.iter().max().unwrap();
                    eprintln!(
                        "start at .{fraction_ms:03} s, host {} ms fast, read ahead {confirm}: \
                         the first second's lag {} ms, then at most {worst} ms",
                        fast.as_millis(),
                        cold[0]
                    );
                    let case = format!(
                        "start at .{fraction_ms:03} s, host {fast:?} fast, read ahead {confirm}: \
                         lags {lags:?} ms"
                    );
                    assert!(cold[0] <= TICK_OFFSET_MS + gap_ms + 3 * rtt_ms, "{case}");
                    assert!(*worst <= TICK_OFFSET_MS + 5 * rtt_ms, "{case}");
                }
            }
        }
    }

    #[test]
    fn one_round_of_probes_after_a_single_answer_places_the_turn_and_the_next_locates_it() {
        // One answer: the turn may be anywhere in the next second. The probes asked for then
        // are spread over it (16, 1 s / 16 apart); answered, they bracket the turn within that
        // gap plus a round trip; the next round, within a round trip or two: located, and no
        // more probes until REFRESH_EVERY.
        let rtt = Duration::from_millis(6);
        for fraction_ms in [0, 10, 333, 500, 999] {
            let clock = ServerClock::default();
            let base = Instant::now();
            let t0 = 1_800_000_000_000 + fraction_ms;
            answer(&clock, t0, base, base, rtt);
            let width = |clock: &ServerClock, at: Instant| {
                let state = lock(&clock.state);
                state
                    .anchor
                    .unwrap()
                    .at(at)
                    .millis_since(state.floor.unwrap().at(at))
            };
            let mut now = base + rtt;
            let mut widths = vec![width(&clock, now)];
            for _ in 0..2 {
                let probes = lock(&clock.state).probes_at(now);
                assert!(
                    (1..=MAX_PROBES as usize).contains(&probes.len()),
                    "{probes:?}"
                );
                for p in &probes {
                    answer(&clock, t0, base, *p, rtt);
                }
                now = *probes.last().unwrap() + rtt;
                widths.push(width(&clock, now));
                check_guard(&clock, (t0, base), now, Duration::from_secs(1));
            }
            let gap = 1_000 / i64::from(MAX_PROBES);
            let rtt_ms = rtt.as_millis() as i64;
            assert!(
                widths[1] <= gap + rtt_ms + 1,
                "{fraction_ms} ms: {widths:?}"
            );
            assert!(lock(&clock.state).located(), "{fraction_ms} ms: {widths:?}");
            assert!(lock(&clock.state).probes_at(now).is_empty());
            let later = now + REFRESH_EVERY;
            assert!(!lock(&clock.state).probes_at(later).is_empty());
            assert!(
                lock(&clock.state).probes_at(later).is_empty(),
                "once a period"
            );
        }
    }

    #[test]
    fn probes_that_cannot_locate_the_turn_are_asked_for_a_few_seconds_then_every_ten() {
        // Every answer takes 60 ms, more than MAX_ALLOWANCE: no turn is ever located, however
        // many probes; after EAGER_ROUNDS rounds in a row, one round every REFRESH_EVERY.
        let rtt = Duration::from_millis(60);
        let clock = ServerClock::default();
        let base = Instant::now();
        let t0 = 1_800_000_000_400;
        answer(&clock, t0, base, base, rtt);
        let mut rounds = Vec::new();
        for second in 0..35u64 {
            let now = base + rtt + Duration::from_secs(second);
            let probes = lock(&clock.state).probes_at(now);
            if !probes.is_empty() {
                rounds.push(second);
            }
            for p in probes {
                answer(&clock, t0, base, p, rtt);
            }
            assert!(!lock(&clock.state).located());
        }
        assert_eq!(rounds, [0, 1, 2, 12, 22, 32]);
    }

    #[test]
    fn a_guarded_clock_reports_how_far_it_pulled_back() {
        let server = Arc::new(ServerClock::default());
        server.observe(Timestamp::from_secs(1_000), Instant::now());
        let fast = GuardedClock::new(|| Timestamp::from_secs(1_120), server.clone());
        assert!(fast.now() <= Timestamp::from_secs(1_002));
        assert!(fast.take_ahead_ms() >= 118_000);
        let right = GuardedClock::new(|| Timestamp::from_secs(1_000), server);
        assert_eq!(right.now(), Timestamp::from_secs(1_000));
        assert_eq!(right.take_ahead_ms(), 0);
    }

    #[test]
    fn the_tightest_bound_wins() {
        // Three answers to requests sent together, none contradicting another: the tightest
        // bound holds.
        // Instants are given, not read: a preempted test thread cannot loosen the bound.
        let clock = ServerClock::default();
        let sent = Instant::now();
        let ms = Timestamp::from_millis;
        clock.observe_at(ms(1_000_900), sent, sent);
        clock.observe_at(ms(1_000_200), sent, sent);
        clock.observe_at(ms(1_000_500), sent, sent);
        let bound = clock.upper_bound_at(sent).unwrap();
        assert_eq!(bound, ms(1_000_200) + SKEW_TOLERANCE, "{bound}");
    }

    /// Log lines written while `f` runs, at warn level and above.
    fn warnings_during(f: impl FnOnce()) -> Vec<String> {
        let lines = crate::telemetry::tests::Buf::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn a_response_after_a_pause_re_anchors_the_bound() {
        // Learned at once; then the host is suspended for ten minutes, which the monotonic
        // clock does not count: the next response's Date is ten minutes on, "instantly".
        let clock = ServerClock::default();
        let date = Timestamp::from_secs(1_658_265_980);
        clock.observe(date, Instant::now());
        let resumed = date + Duration::from_secs(600);
        clock.observe(resumed, Instant::now());
        // A correct host clock is no longer held ten minutes back.
        let wall = resumed + Duration::from_millis(50);
        let held = clock.guard(wall);
        assert!(held >= resumed && held <= wall, "{held}");
        assert_eq!(clock.take_clamped(), 0);
        let bound = clock.upper_bound().unwrap();
        assert!(
            bound >= resumed && bound <= resumed + Duration::from_secs(2),
            "{bound}"
        );
    }

    #[test]
    fn what_was_learned_long_ago_gives_way_to_a_newer_looser_bound() {
        // A bound learned ten minutes (of monotonic time) ago, that a short pause left 0.5 s
        // behind: no response contradicts it, but it may not stay for ever.
        let clock = ServerClock::default();
        let long_ago = Instant::now()
            .checked_sub(Duration::from_secs(600))
            .expect("the host has been up ten minutes");
        let date = Timestamp::from_secs(1_658_265_980);
        clock.observe(date, long_ago);
        let fresh = date + Duration::from_millis(600_500);
        clock.observe(fresh, Instant::now());
        let bound = clock.upper_bound().unwrap();
        assert!(
            bound >= fresh + SKEW_TOLERANCE,
            "the ten-minute-old bound {bound} still holds"
        );
    }

    #[test]
    fn a_small_lead_is_not_warned_about_and_a_large_one_once() {
        let clock = ServerClock::default();
        let date = Timestamp::from_secs(1_658_265_980);
        clock.observe(date, Instant::now());
        // A host 5 ms ahead of the tightest bound: clamped, not warned about, every reading.
        let small = warnings_during(|| {
            for _ in 0..100 {
                let wall = clock.upper_bound().unwrap() + Duration::from_millis(5);
                assert!(clock.guard(wall) < wall);
            }
        });
        assert!(small.is_empty(), "{small:#?}");
        assert!(clock.take_clamped() > 0, "the clamp is still reported");
        // Two minutes ahead, steadily: one warning, not one per reading.
        let large = warnings_during(|| {
            for _ in 0..100 {
                clock.guard(date + Duration::from_secs(120));
            }
        });
        assert_eq!(large.len(), 1, "{large:#?}");
        assert!(large[0].contains("ahead of DynamoDB"), "{large:#?}");
    }

    #[test]
    fn warnings_follow_changes_of_the_lead_at_most_every_warn_period() {
        let (clock, t0, date) = answered_once();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let wall = |s: u64, ahead: u64| date + Duration::from_secs(s + ahead);
        let warned = warnings_during(|| {
            clock.guard_at(wall(0, 30), at(0)); // first: warned
            clock.guard_at(wall(1, 30), at(1)); // same lead: quiet
            clock.guard_at(wall(2, 90), at(2)); // changed, but within WARN_EVERY: quiet
            clock.guard_at(wall(12, 90), at(12)); // changed, WARN_EVERY later: warned
            clock.guard_at(wall(13, 90), at(13)); // same lead: quiet
            clock.guard_at(wall(313, 90), at(313)); // REMIND_EVERY later: warned again
        });
        assert_eq!(warned.len(), 3, "{warned:#?}");
        // What the guard holds readings to is unaffected by the warnings.
        assert_eq!(
            clock.guard_at(wall(400, 90), at(400)),
            Floor {
                date,
                arrived: t0,
                rtt: Duration::ZERO
            }
            .at(at(400))
        );
    }

    #[test]
    fn the_lower_bound_is_the_latest_date_aged_from_its_arrival() {
        let clock = ServerClock::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let ms = Timestamp::from_millis;
        assert_eq!(clock.lower_bound_at(t0), None);
        // Sent at 0, arrived at 300 ms: DynamoDB read at least the Date then.
        // (Aged a second, less the drift allowance: 0.2 ms, which rounds the bound down a ms.)
        clock.observe_at(ms(1_000_000), t0, at(300));
        assert_eq!(clock.lower_bound_at(at(1_300)), Some(ms(1_000_999)));
        // An older Date (a slow response) does not lower it.
        clock.observe_at(ms(999_000), at(400), at(2_000));
        assert_eq!(clock.lower_bound_at(at(2_300)), Some(ms(1_001_999)));
        // A later one raises it.
        clock.observe_at(ms(1_003_000), at(2_300), at(2_400));
        assert_eq!(clock.lower_bound_at(at(2_400)), Some(ms(1_003_000)));
        // Never above the upper bound.
        assert!(clock.lower_bound_at(at(5_000)) <= clock.upper_bound_at(at(5_000)));
    }

    #[test]
    fn an_old_lower_bound_allows_for_drift_and_gives_way_to_newer_answers() {
        let (clock, t0, date) = answered_once();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // An hour on, the bound allows for the monotonic clock having gained 0.72 s.
        let hour = clock.lower_bound_at(at(3_600)).unwrap();
        assert_eq!(hour, date + Duration::from_millis(3_600_000 - 720));
        // So an answer whose Date is half a second short of the aged bound, which the hour-old
        // bound would have ignored without the allowance, takes over.
        let newer = date + Duration::from_millis(3_599_500);
        clock.observe_at(newer, at(3_600), at(3_600));
        assert_eq!(clock.lower_bound_at(at(3_600)), Some(newer));
    }

    #[test]
    fn a_tighter_response_replaces_the_bound_and_ages_with_the_monotonic_clock() {
        let (clock, t0, date) = answered_once();
        let later = |s: u64| t0 + Duration::from_secs(s);
        let plus = |ms: u64| date + Duration::from_millis(ms);
        let bound = |s: u64| clock.upper_bound_at(later(s));
        // Looser (its Date one second later than the first's, sent at the same time) and
        // not contradicting: ignored.
        clock.observe_at(plus(900), t0, later(1));
        assert_eq!(bound(1), Some(plus(2_000)));
        // Tighter: taken.
        clock.observe_at(plus(1_000), later(2), later(2));
        assert_eq!(bound(2), Some(plus(2_000)));
        // Within ANCHOR_MAX_AGE a looser one still gives way to nothing.
        clock.observe_at(plus(29_500), later(30), later(30));
        assert_eq!(bound(30), Some(plus(30_000)));
        // Past it, the newest response is taken, looser or not.
        let past = 2 + ANCHOR_MAX_AGE.as_secs() + 1;
        clock.observe_at(plus(past * 1000 - 500), later(past), later(past));
        assert_eq!(bound(past), Some(plus(past * 1000 + 500)));
    }
}
