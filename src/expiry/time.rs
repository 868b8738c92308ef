//! [`Timestamp`]: the one type for instants in the engine — the sweep instant, ttls compared
//! against it, and deletion times — at millisecond resolution.
//!
//! Entry points read the clock once and hand a `Timestamp` down; nothing below them reads the
//! wall clock. DynamoDB compares Numbers exactly, so a query for `ttl < now` with `now` as
//! [`Timestamp::to_number`] writes it means exactly what [`Timestamp::is_after_ttl`] means.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

/// An instant as epoch milliseconds (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The instant `millis` milliseconds after the Unix epoch.
    pub const fn from_millis(millis: i64) -> Self {
        Timestamp(millis)
    }

    /// The instant `secs` whole seconds after the Unix epoch.
    pub const fn from_secs(secs: i64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }

    /// A `chrono` time, truncated to milliseconds.
    pub fn from_datetime(t: DateTime<Utc>) -> Self {
        Timestamp(t.timestamp_millis())
    }

    /// Epoch milliseconds.
    pub const fn millis(self) -> i64 {
        self.0
    }

    /// Whole epoch seconds, rounded down.
    pub const fn secs(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// Epoch seconds with fraction.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// Milliseconds from `earlier` to this instant (negative if `earlier` is later).
    pub const fn millis_since(self, earlier: Timestamp) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    /// True when a ttl of `ttl` epoch seconds is strictly before this instant: expired as of now.
    pub fn is_after_ttl(self, ttl: f64) -> bool {
        ttl < self.as_secs_f64()
    }

    /// The instant as a DynamoDB Number of epoch seconds: `1658265980` or `1658265980.25`.
    pub fn to_number(self) -> String {
        let (secs, ms) = (self.0.div_euclid(1000), self.0.rem_euclid(1000));
        if ms == 0 {
            secs.to_string()
        } else {
            format!("{secs}.{ms:03}").trim_end_matches('0').to_owned()
        }
    }

    /// ISO-8601 UTC with milliseconds: `2022-07-19T21:27:00.000Z`.
    pub fn iso(self) -> String {
        DateTime::<Utc>::from_timestamp_millis(self.0)
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
            .unwrap_or_else(|| format!("invalid-time({}ms)", self.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.iso())
    }
}

fn millis_of(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl std::ops::Add<Duration> for Timestamp {
    type Output = Timestamp;

    /// `d` later (saturating).
    fn add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(millis_of(d)))
    }
}

impl std::ops::Sub<Duration> for Timestamp {
    type Output = Timestamp;

    /// `d` earlier (saturating).
    fn sub(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(millis_of(d)))
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Self {
        Timestamp::from_datetime(t)
    }
}

/// Where "now" comes from. Entry points supply it (the wall clock, held to DynamoDB's clock);
/// tests supply fixed or stepped clocks. Any `Fn() -> Timestamp` is a clock.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Timestamp;

    /// How far (ms) readings were pulled back since the last call, because the source ran ahead
    /// of a more trustworthy clock; resets it. Zero for plain clocks.
    fn take_ahead_ms(&self) -> u64 {
        0
    }

    /// Monotonic instants at which a cheap request to DynamoDB would help the source learn
    /// DynamoDB's clock, which it is held to ([`crate::store::ServerClock::probes`]); the tick
    /// loop sends them. Empty for plain clocks. (The sweeper's alone: the pure helpers have no
    /// Tokio.)
    #[cfg(feature = "sweeper")]
    fn probes(&self) -> Vec<tokio::time::Instant> {
        Vec::new()
    }

    /// The source's own reading, not held back to a more trustworthy clock: what measures how
    /// long ago something happened across a pause (a frozen Lambda, a suspended host), which a
    /// reading held to bounds that age by the monotonic clock does not count until they are
    /// learnt again. [`Clock::now`] for plain clocks.
    fn raw_now(&self) -> Timestamp {
        self.now()
    }

    /// The latest instant DynamoDB's clock may read now, as far as the source knows: what an
    /// index item due later than it must be written ahead of ([`crate::index`]'s packs).
    /// [`Clock::now`] for plain clocks.
    fn latest(&self) -> Timestamp {
        self.now()
    }

    /// The instant a sweep asked to run as of `requested` (an event's time, `--at`; `None`:
    /// now) may run as of: `requested`, never later than [`Clock::now`]. The one rule by which
    /// no sweep runs ahead of the clock, whatever asked for it.
    fn hold(&self, requested: Option<Timestamp>) -> Held {
        let clock = self.now();
        let at = requested.unwrap_or(clock);
        let ahead = Duration::from_millis(at.millis_since(clock).max(0).unsigned_abs());
        Held {
            at: at.min(clock),
            clock,
            ahead,
        }
    }
}

/// A requested sweep instant held to a clock ([`Clock::hold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The instant to sweep as of.
    pub at: Timestamp,
    /// The clock's reading it was held to.
    pub clock: Timestamp,
    /// How far the request was ahead of the clock; zero when it was not.
    pub ahead: Duration,
}

impl<F: Fn() -> Timestamp + Send + Sync> Clock for F {
    fn now(&self) -> Timestamp {
        self()
    }
}

/// Formats epoch seconds as ISO-8601 UTC with milliseconds: `2022-07-19T21:27:00.000Z`.
pub fn iso_millis(secs: i64) -> String {
    Timestamp::from_secs(secs).iso()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_exact_decimal_seconds() {
        let cases = [
            (1_658_265_980_000, "1658265980"),
            (1_658_265_980_250, "1658265980.25"),
            (1_658_265_980_001, "1658265980.001"),
            (1_658_265_980_100, "1658265980.1"),
            (0, "0"),
        ];
        for (ms, text) in cases {
            assert_eq!(Timestamp::from_millis(ms).to_number(), text, "{ms}");
        }
    }

    #[test]
    fn seconds_round_down_and_iso_keeps_milliseconds() {
        let t = Timestamp::from_millis(1_658_265_980_999);
        assert_eq!(t.secs(), 1_658_265_980);
        assert_eq!(t.iso(), "2022-07-19T21:26:20.999Z");
        assert_eq!(iso_millis(1_658_265_980), "2022-07-19T21:26:20.000Z");
        assert_eq!(Timestamp::from_millis(-1).secs(), -1);
    }

    #[test]
    fn a_ttl_equal_to_the_instant_has_not_expired() {
        let t = Timestamp::from_millis(1_658_265_980_250);
        assert!(!t.is_after_ttl(1_658_265_980.25));
        assert!(t.is_after_ttl(1_658_265_980.249));
        assert!(!Timestamp::from_secs(100).is_after_ttl(100.0));
        assert!(Timestamp::from_secs(100).is_after_ttl(99.0));
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Timestamp::from_secs(10);
        assert_eq!((t + Duration::from_millis(1500)).millis(), 11_500);
        assert_eq!((t - Duration::from_secs(20)).millis(), -10_000);
        assert_eq!(
            (Timestamp::from_millis(i64::MAX) + Duration::MAX).millis(),
            i64::MAX
        );
        assert_eq!(t.millis_since(Timestamp::from_secs(4)), 6_000);
    }
}
