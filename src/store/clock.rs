//! DynamoDB's own clock, learned from the `Date` header of its responses, so that a host clock
//! running fast can never make a sweep delete an item before DynamoDB's time reaches its ttl.
//!
//! A response sent when the server's clock read `T` carries `Date: floor(T)`. For a request sent
//! at local monotonic instant `s`, the server's clock at any later instant `x` is below
//! `Date + 1 s + (x - s)`: the header is at most a second behind the server clock, and the server
//! clock cannot have advanced by more than the time since the request left. [`ServerClock`]
//! keeps the tightest such bound over all responses; [`ServerClock::guard`] clamps a wall-clock
//! reading to it. The bound is never below DynamoDB's real time, so a correct host clock is
//! never clamped, and a fast one is held to at most one second plus the newest round trip ahead
//! of DynamoDB ([`SKEW_TOLERANCE`] in the docs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use std::time::Instant;

use crate::expiry::{Clock, Timestamp};

/// How far ahead of DynamoDB's clock a sweep instant can be at most, besides the round trip of
/// the request the bound came from: the `Date` header's resolution.
pub const SKEW_TOLERANCE: Duration = Duration::from_secs(1);

/// The tightest upper bound on DynamoDB's clock seen so far, and how far the host clock was
/// found ahead of it.
#[derive(Debug, Default)]
pub struct ServerClock {
    /// `(Date + 1 s, local instant the request was sent)` of the tightest bound.
    bound: Mutex<Option<(Timestamp, Instant)>>,
    /// Largest clamp since the last [`ServerClock::take_clamped`], milliseconds.
    clamped_ms: AtomicU64,
}

impl ServerClock {
    /// Records a response with `Date` header `date` to a request sent at `sent`.
    pub fn observe(&self, date: Timestamp, sent: Instant) {
        let candidate = (date + SKEW_TOLERANCE, sent);
        let mut bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let at_now = |(t, s): (Timestamp, Instant)| t + now.saturating_duration_since(s);
        if bound.is_none_or(|b| at_now(candidate) < at_now(b)) {
            *bound = Some(candidate);
        }
    }

    /// An upper bound on DynamoDB's clock now, once a response has been seen.
    pub fn upper_bound(&self) -> Option<Timestamp> {
        let bound = *self.bound.lock().unwrap_or_else(|e| e.into_inner());
        bound.map(|(t, sent)| t + sent.elapsed())
    }

    /// `wall` (a host clock reading), held to at most [`ServerClock::upper_bound`]: the instant
    /// a sweep may safely use. A clamp is logged and remembered for the report.
    pub fn guard(&self, wall: Timestamp) -> Timestamp {
        match self.upper_bound() {
            Some(bound) if wall > bound => {
                let ahead = wall.millis_since(bound).unsigned_abs();
                self.clamped_ms.fetch_max(ahead, Ordering::Relaxed);
                tracing::warn!(
                    wall = %wall,
                    dynamodb_at_most = %bound,
                    ahead_ms = ahead,
                    "the host clock is ahead of DynamoDB's: sweeping as of DynamoDB's time"
                );
                bound
            }
            _ => wall,
        }
    }

    /// The largest amount (ms) by which [`ServerClock::guard`] pulled a reading back since the
    /// last call; resets it.
    pub fn take_clamped(&self) -> u64 {
        self.clamped_ms.swap(0, Ordering::Relaxed)
    }
}

/// A host clock held to DynamoDB's: every reading of `wall` passes through
/// [`ServerClock::guard`].
#[derive(Debug, Clone)]
pub struct GuardedClock<F> {
    wall: F,
    server: Arc<ServerClock>,
}

impl<F: Fn() -> Timestamp + Send + Sync> GuardedClock<F> {
    /// `wall` (the entry point's clock) held to `server` (see [`crate::store::DynamoStore::server_clock`]).
    pub fn new(wall: F, server: Arc<ServerClock>) -> Self {
        GuardedClock { wall, server }
    }
}

impl<F: Fn() -> Timestamp + Send + Sync> Clock for GuardedClock<F> {
    fn now(&self) -> Timestamp {
        self.server.guard((self.wall)())
    }

    fn take_ahead_ms(&self) -> u64 {
        self.server.take_clamped()
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
        let (Some(SentAt(sent)), Some(date)) = (
            cfg.load::<SentAt>().copied(),
            context.response().headers().get("date"),
        ) else {
            return Ok(());
        };
        if let Some(date) = parse_http_date(date) {
            self.0.observe(date, sent);
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
        assert!(held <= Timestamp::from_secs(1_658_265_882), "{held}");
        assert!(held >= Timestamp::from_secs(1_658_265_881), "{held}");
        let ahead = clock.take_clamped();
        assert!((98_000..=99_000).contains(&ahead), "{ahead}");
        assert_eq!(clock.take_clamped(), 0);
        // A reading at or behind DynamoDB's time passes unchanged.
        let behind = Timestamp::from_secs(1_658_265_880);
        assert_eq!(clock.guard(behind), behind);
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
        let clock = ServerClock::default();
        let sent = Instant::now();
        clock.observe(Timestamp::from_secs(2_000), sent);
        clock.observe(Timestamp::from_secs(1_000), sent);
        clock.observe(Timestamp::from_secs(1_500), sent);
        let bound = clock.upper_bound().unwrap();
        assert!(bound < Timestamp::from_secs(1_002), "{bound}");
    }
}
