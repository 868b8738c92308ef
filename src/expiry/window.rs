//! Expiration windows: the pure time math that maps a ttl to the GSI partition key it is
//! stored under, and an instant to the windows a sweep must read. A ttl `t` is in the window
//! `(end - W, end]` with `end = ceil(t / W) * W`, so a ttl on a boundary is in the window that
//! *ends* there; keys are the published minute-window design's (`docs/design.md`, "The window
//! key, precisely"). Nothing here reads the clock: every function takes the instant it reasons
//! about.

use std::fmt;

use chrono::DateTime;

use super::time::{iso_millis, Timestamp};

/// Default window width, in seconds.
pub const DEFAULT_WINDOW_SECONDS: u32 = 60;

/// Largest supported window width (one day).
pub const MAX_WINDOW_SECONDS: u32 = 86_400;

/// The latest ttl we accept as epoch *seconds*: 9999-12-31T23:59:59Z. Larger values cannot be
/// written as an ISO-8601 year and are almost always epoch milliseconds by mistake.
pub const MAX_TTL_SECONDS: i64 = 253_402_300_799;

/// Native TTL ignores a ttl more than five years in the past ("Time to Live: how it works",
/// DynamoDB developer guide), and so does the sweeper: such an item is never deleted, only counted
/// as invalid. Five years of 365 days: at the edge the sweeper keeps what native TTL might delete.
pub const MAX_EXPIRED_AGE_SECONDS: i64 = 5 * 365 * 86_400;

/// What a valid ttl means at an instant, by native TTL's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlState {
    /// Not yet expired: the ttl is at or after the instant.
    Live,
    /// Expired: before the instant, and not more than five years before it.
    Expired,
    /// More than [`MAX_EXPIRED_AGE_SECONDS`] before the instant: never deleted.
    TooOld,
}

/// Classifies ttl `ttl` (epoch seconds, already parsed) at `now`.
pub fn ttl_state(ttl: f64, now: Timestamp) -> TtlState {
    if !now.is_after_ttl(ttl) {
        TtlState::Live
    } else if ttl < (now.secs() - MAX_EXPIRED_AGE_SECONDS) as f64 {
        TtlState::TooOld
    } else {
        TtlState::Expired
    }
}

/// Why a ttl value cannot be placed in a window.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TtlError {
    /// The value is not a finite number.
    #[error("ttl {0:?} is not a number of epoch seconds")]
    NotANumber(String),
    /// The value is negative (before 1970).
    #[error("ttl {0} is negative; expected epoch seconds (e.g. 1658265600)")]
    Negative(f64),
    /// The value is beyond year 9999 — almost certainly epoch milliseconds.
    #[error(
        "ttl {0} is past the year 9999; it looks like epoch milliseconds — \
         DynamoDB TTL uses epoch seconds (divide by 1000)"
    )]
    LooksLikeMilliseconds(f64),
}

/// Parses a ttl as DynamoDB stores it (the text of a Number attribute: `1658265600`,
/// `1658265600.5`) into epoch seconds, or says why it cannot be one ([`check_ttl`]).
pub fn parse_ttl(text: &str) -> Result<f64, TtlError> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| TtlError::NotANumber(text.to_owned()))?;
    check_ttl(value)
}

/// Checks that `value` can be an epoch-seconds ttl.
pub fn check_ttl(value: f64) -> Result<f64, TtlError> {
    if !value.is_finite() {
        return Err(TtlError::NotANumber(value.to_string()));
    }
    if value < 0.0 {
        return Err(TtlError::Negative(value));
    }
    if value > MAX_TTL_SECONDS as f64 {
        return Err(TtlError::LooksLikeMilliseconds(value));
    }
    Ok(value)
}

/// One expiration window: every ttl `t` with `start < t <= end` (epoch seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Window {
    /// Exclusive lower bound, epoch seconds.
    pub start: i64,
    /// Inclusive upper bound, epoch seconds; a multiple of the width.
    pub end: i64,
}

impl Window {
    /// The window of width `width` seconds that holds ttl `ttl` (epoch seconds).
    ///
    /// `ttl` must already be validated (see [`check_ttl`]); `width` must be at least 1.
    pub fn containing(ttl: f64, width: u32) -> Window {
        let w = i64::from(width.max(1));
        let end = (ttl / w as f64).ceil() as i64 * w;
        Window {
            start: end - w,
            end,
        }
    }

    /// The window of width `width` that holds the whole second `t`.
    pub fn containing_secs(t: i64, width: u32) -> Window {
        Window::containing_instant(Timestamp::from_secs(t), width)
    }

    /// The window of width `width` that holds the instant `t`: for a whole second the same as
    /// [`Window::containing_secs`]; a fraction past a boundary is in the window after it.
    pub fn containing_instant(t: Timestamp, width: u32) -> Window {
        let w = i64::from(width.max(1)) * 1000;
        let ms = t.millis();
        let end_ms = ms.div_euclid(w) * w + if ms.rem_euclid(w) == 0 { 0 } else { w };
        Window {
            start: (end_ms - w) / 1000,
            end: end_ms / 1000,
        }
    }

    /// The window immediately before this one.
    pub fn previous(self) -> Window {
        let w = self.end - self.start;
        Window {
            start: self.start - w,
            end: self.start,
        }
    }

    /// Width in seconds.
    pub fn width(self) -> i64 {
        self.end - self.start
    }

    /// The GSI partition key of this window: `<start ISO>_<end ISO>`.
    pub fn key(self) -> String {
        format!("{}_{}", iso_millis(self.start), iso_millis(self.end))
    }

    /// Parses a key produced by [`Window::key`] (or by a writer following the same format).
    pub fn parse_key(key: &str) -> Option<Window> {
        let (a, b) = key.split_once('_')?;
        let start = DateTime::parse_from_rfc3339(a).ok()?.timestamp();
        let end = DateTime::parse_from_rfc3339(b).ok()?.timestamp();
        (end > start).then_some(Window { start, end })
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

/// The window key for a ttl, after validating it: what a writer stores in the window attribute.
///
/// ```
/// use ttl_sweeper::expiry::window::window_key;
/// assert_eq!(
///     window_key(1658265980.0, 60).unwrap(),
///     "2022-07-19T21:26:00.000Z_2022-07-19T21:27:00.000Z"
/// );
/// ```
pub fn window_key(ttl: f64, width: u32) -> Result<String, TtlError> {
    Ok(Window::containing(check_ttl(ttl)?, width).key())
}

/// The windows a sweep at `now` reads, newest first: the window that contains `now` (a ttl on
/// the previous boundary, or a fraction of a second before `now`) and the `lookback` windows
/// before it (what a late, failed or skipped invocation left behind).
pub fn windows_to_sweep(now: Timestamp, width: u32, lookback: u32) -> Vec<Window> {
    let current = Window::containing_instant(now, width);
    let windows = std::iter::successors(Some(current), |w| Some(w.previous()));
    windows.take(lookback as usize + 1).collect()
}

/// The windows that can hold items which expired after `prev` and by `now`:
/// what a tick that follows a sweep at `prev` must read. It reaches one window further back than
/// strictly needed, so an item made visible in the index a moment late is still caught.
pub fn windows_since(prev: Timestamp, now: Timestamp, width: u32) -> Vec<Window> {
    let oldest = Window::containing_instant(prev.min(now), width).previous();
    let current = Window::containing_instant(now, width);
    std::iter::successors(Some(current), |w| {
        (w.start > oldest.start).then(|| w.previous())
    })
    .collect()
}

/// Largest supported number of shards per window.
pub const MAX_SHARDS: u32 = 1000;

/// The shard of an item: the first four bytes of the SHA-256 digest (in every language's standard
/// library) of its partition key value (a String's UTF-8, a Number's decimal text as the writer
/// sends it, a Binary's raw bytes), big-endian, modulo `shards`; with `shards <= 1`, 0
/// (`docs/design.md`, "Sharded windows").
///
/// ```
/// use ttl_sweeper::expiry::window::shard_of;
/// // sha256("user#42") starts with 8d 5e db 35: 0x8d5edb35 % 8 = 5
/// assert_eq!(shard_of(b"user#42", 8), 5);
/// ```
pub fn shard_of(partition_key: &[u8], shards: u32) -> u32 {
    use sha2::{Digest, Sha256};
    if shards <= 1 {
        return 0;
    }
    let digest = Sha256::digest(partition_key);
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) % shards
}

/// A contiguous, inclusive range of shard numbers: the share of every window one sweeper reads
/// (`SHARD_RANGE`). Sweepers whose ranges are disjoint and together cover `0..shards` read every
/// partition `<window>#<shard>` once between them.
///
/// ```
/// use ttl_sweeper::expiry::window::ShardRange;
/// let thirds = ShardRange::split(12, 3);
/// assert_eq!(thirds.iter().map(|r| r.to_string()).collect::<Vec<_>>(), ["0-3", "4-7", "8-11"]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ShardRange {
    /// The first shard read.
    pub first: u32,
    /// The last shard read (inclusive).
    pub last: u32,
}

impl ShardRange {
    /// Every shard of a layout with `shards` shards per window (`0` to `shards - 1`).
    pub fn all(shards: u32) -> ShardRange {
        ShardRange {
            first: 0,
            last: shards.max(1) - 1,
        }
    }

    /// The shard numbers in the range.
    pub fn shards(self) -> std::ops::RangeInclusive<u32> {
        self.first..=self.last
    }

    /// How many shards the range holds.
    pub fn len(self) -> u32 {
        self.last.saturating_sub(self.first) + 1
    }

    /// Never true: a range holds at least one shard.
    pub fn is_empty(self) -> bool {
        false
    }

    /// `shards` shards split into `parts` contiguous ranges as even as can be (sizes differ by
    /// at most one), in order, with no gap and no overlap. `parts` is clamped to 1..=`shards`.
    pub fn split(shards: u32, parts: u32) -> Vec<ShardRange> {
        let shards = u64::from(shards.max(1));
        let parts = u64::from(parts).clamp(1, shards);
        (0..parts)
            .map(|i| ShardRange {
                first: (i * shards / parts) as u32,
                last: ((i + 1) * shards / parts - 1) as u32,
            })
            .collect()
    }
}

impl fmt::Display for ShardRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// The GSI partition key of one shard of a window: the window key alone when there is one shard
/// (compatible with unsharded tables), else `<window key>#<shard>`.
pub fn partition_key(window: Window, shard: u32, shards: u32) -> String {
    if shards <= 1 {
        window.key()
    } else {
        format!("{}#{shard}", window.key())
    }
}

/// What a writer stores in the window attribute for an item with `ttl` whose partition key value
/// has the bytes `partition_key` (see [`shard_of`]), for `shards` shards of `width` seconds.
///
/// ```
/// use ttl_sweeper::expiry::window::window_attribute;
/// assert_eq!(
///     window_attribute(1658265980.0, 60, 16, b"a").unwrap(),
///     "2022-07-19T21:26:00.000Z_2022-07-19T21:27:00.000Z#2"
/// );
/// ```
pub fn window_attribute(
    ttl: f64,
    width: u32,
    shards: u32,
    partition_key_bytes: &[u8],
) -> Result<String, TtlError> {
    let window = Window::containing(check_ttl(ttl)?, width);
    let shard = shard_of(partition_key_bytes, shards);
    Ok(partition_key(window, shard, shards))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_secs(secs)
    }

    /// Epoch seconds of an RFC 3339 time, for readable tables.
    fn at(s: &str) -> i64 {
        DateTime::parse_from_rfc3339(s).unwrap().timestamp()
    }

    #[test]
    fn keys_match_the_published_format() {
        // (ttl, width, expected key)
        let cases = [
            (
                "2022-07-19T21:27:30Z",
                60,
                "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z",
            ),
            // exactly on a boundary: belongs to the window that ends there
            (
                "2022-07-19T21:28:00Z",
                60,
                "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z",
            ),
            (
                "2022-07-19T21:28:01Z",
                60,
                "2022-07-19T21:28:00.000Z_2022-07-19T21:29:00.000Z",
            ),
            (
                "2022-06-23T15:52:10Z",
                300,
                "2022-06-23T15:50:00.000Z_2022-06-23T15:55:00.000Z",
            ),
            (
                "1970-01-01T00:00:00Z",
                60,
                "1969-12-31T23:59:00.000Z_1970-01-01T00:00:00.000Z",
            ),
            (
                "2024-02-29T23:59:59Z",
                3600,
                "2024-02-29T23:00:00.000Z_2024-03-01T00:00:00.000Z",
            ),
            (
                "2022-07-19T21:27:30Z",
                1,
                "2022-07-19T21:27:29.000Z_2022-07-19T21:27:30.000Z",
            ),
        ];
        for (ttl, width, expected) in cases {
            assert_eq!(
                window_key(at(ttl) as f64, width).unwrap(),
                expected,
                "{ttl} / {width}"
            );
        }
    }

    #[test]
    fn fractional_ttl_rounds_up_to_the_next_boundary() {
        let t = at("2022-07-19T21:27:00Z") as f64 + 0.25;
        assert_eq!(
            window_key(t, 60).unwrap(),
            "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z"
        );
    }

    #[test]
    fn bad_ttls_are_rejected_with_reasons() {
        assert!(matches!(parse_ttl("abc"), Err(TtlError::NotANumber(_))));
        assert!(matches!(parse_ttl("NaN"), Err(TtlError::NotANumber(_))));
        assert!(matches!(parse_ttl("inf"), Err(TtlError::NotANumber(_))));
        assert!(matches!(parse_ttl("-5"), Err(TtlError::Negative(_))));
        let ms = parse_ttl("1658265980000").unwrap_err();
        assert!(matches!(ms, TtlError::LooksLikeMilliseconds(_)));
        assert!(ms.to_string().contains("milliseconds"));
        assert_eq!(parse_ttl(" 1658265980 ").unwrap(), 1658265980.0);
        assert_eq!(parse_ttl("1658265980.5").unwrap(), 1658265980.5);
    }

    #[test]
    fn ttls_older_than_five_years_are_not_expired_but_too_old() {
        let now = ts(at("2026-11-22T12:00:00Z"));
        let five_years = MAX_EXPIRED_AGE_SECONDS as f64;
        let n = now.as_secs_f64();
        let cases = [
            (n + 1.0, TtlState::Live),
            (n, TtlState::Live),
            (n - 0.001, TtlState::Expired),
            (n - five_years, TtlState::Expired),
            (n - five_years - 1.0, TtlState::TooOld),
            (0.0, TtlState::TooOld),
        ];
        for (ttl, want) in cases {
            assert_eq!(ttl_state(ttl, now), want, "{ttl}");
        }
    }

    #[test]
    fn sweep_set_covers_now_and_lookback() {
        let now = at("2022-07-19T21:27:30Z");
        let ws = windows_to_sweep(ts(now), 60, 2);
        let keys: Vec<String> = ws.iter().map(|w| w.key()).collect();
        assert_eq!(
            keys,
            [
                "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z",
                "2022-07-19T21:26:00.000Z_2022-07-19T21:27:00.000Z",
                "2022-07-19T21:25:00.000Z_2022-07-19T21:26:00.000Z",
            ]
        );
        // On a boundary, the window containing `now` is the one ending at `now`.
        let ws = windows_to_sweep(ts(at("2022-07-19T21:28:00Z")), 60, 0);
        assert_eq!(
            ws[0].key(),
            "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z"
        );
    }

    #[test]
    fn ticks_read_the_windows_since_the_previous_tick() {
        let b = at("2022-07-19T21:27:00Z");
        // within one window: that window and the one before it
        let keys: Vec<Window> = windows_since(ts(b + 10), ts(b + 11), 60);
        assert_eq!(
            keys,
            vec![
                Window {
                    start: b,
                    end: b + 60
                },
                Window {
                    start: b - 60,
                    end: b
                }
            ]
        );
        // narrow windows, a 5 s tick: every window from prev-1 window to now
        let ws = windows_since(ts(b), ts(b + 5), 1);
        assert_eq!(ws.first().unwrap().end, b + 5);
        assert_eq!(ws.last().unwrap().end, b - 1);
        assert_eq!(ws.len(), 7);
    }

    #[test]
    fn shard_ranges_split_every_shard_once() {
        for shards in 1..=40u32 {
            for parts in 0..=45u32 {
                let ranges = ShardRange::split(shards, parts);
                assert_eq!(ranges.len() as u32, parts.clamp(1, shards));
                let mut next = 0;
                for r in &ranges {
                    assert_eq!(r.first, next, "{shards} shards in {parts}: {ranges:?}");
                    assert!(r.first <= r.last);
                    next = r.last + 1;
                }
                assert_eq!(next, shards, "{shards} shards in {parts}: {ranges:?}");
                let sizes: Vec<u32> = ranges.iter().map(|r| r.len()).collect();
                let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(hi - lo <= 1, "{sizes:?}");
            }
        }
        assert_eq!(ShardRange::all(1), ShardRange { first: 0, last: 0 });
        assert_eq!(ShardRange::all(16).to_string(), "0-15");
    }

    #[test]
    fn shard_hash_matches_the_published_vectors() {
        // sha256("abc") = ba7816bf...: 0xba7816bf = 3128432319
        assert_eq!(shard_of(b"abc", 1000), 3_128_432_319 % 1000);
        assert_eq!(shard_of(b"abc", 7), 3_128_432_319 % 7);
        assert_eq!(shard_of(b"anything", 1), 0);
        assert_eq!(shard_of(b"anything", 0), 0);
        let w = Window::containing_secs(at("2022-07-19T21:27:30Z"), 60);
        assert_eq!(
            partition_key(w, 0, 1),
            "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z"
        );
        assert_eq!(
            partition_key(w, 3, 8),
            "2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z#3"
        );
    }

    #[test]
    fn parse_key_round_trips() {
        let w = Window::containing_secs(at("2022-07-19T21:27:30Z"), 60);
        assert_eq!(Window::parse_key(&w.key()), Some(w));
        assert_eq!(Window::parse_key("garbage"), None);
        assert_eq!(
            Window::parse_key("2022-07-19T21:28:00.000Z_2022-07-19T21:27:00.000Z"),
            None
        );
    }

    proptest! {
        #[test]
        fn ttl_lies_in_its_window(ttl in 0i64..MAX_TTL_SECONDS - 86_400, width in 1u32..=MAX_WINDOW_SECONDS) {
            let w = Window::containing(ttl as f64, width);
            prop_assert!(w.start < ttl && ttl <= w.end, "{ttl} not in {w:?}");
            prop_assert_eq!(w.end % i64::from(width), 0);
            prop_assert_eq!(w.width(), i64::from(width));
            prop_assert_eq!(w, Window::containing_secs(ttl, width));
        }

        #[test]
        fn fractional_ttl_lies_in_its_window(ttl in 0.0f64..4.0e9, width in 1u32..=3600) {
            let w = Window::containing(ttl, width);
            prop_assert!((w.start as f64) < ttl && ttl <= w.end as f64, "{ttl} not in {w:?}");
        }

        #[test]
        fn shards_are_in_range_and_spread(keys in proptest::collection::hash_set("[a-z0-9#]{1,16}", 400..600), shards in 2u32..=16) {
            let mut counts = vec![0usize; shards as usize];
            for k in &keys {
                let s = shard_of(k.as_bytes(), shards);
                prop_assert!(s < shards);
                counts[s as usize] += 1;
            }
            // every shard within 6 standard deviations of its fair share
            let fair = keys.len() as f64 / f64::from(shards);
            let sigma = (fair * (1.0 - 1.0 / f64::from(shards))).sqrt();
            prop_assert!(counts.iter().all(|&c| (c as f64 - fair).abs() <= 6.0 * sigma), "{counts:?}");
        }

        #[test]
        fn ticks_cover_every_ttl_that_expired_since_the_previous_tick(
            prev in 86_400i64..4_000_000_000, gap in 1i64..=30, width in 1u32..=3600, frac in 0.0f64..1.0,
        ) {
            let now = prev + gap;
            let ttl = prev as f64 - 1.0 + frac * (gap as f64 + 1.0);
            if ttl < now as f64 {
                let ws = windows_since(ts(prev), ts(now), width);
                prop_assert!(ws.contains(&Window::containing(ttl, width)), "{ttl} {prev}..{now} w={width}");
            }
        }

        /// Whatever text a Number attribute holds, parsing never panics and only yields a
        /// finite epoch-seconds value in range.
        #[test]
        fn any_ttl_text_parses_into_range_or_fails(text in "\\PC{0,40}|[-+]?[0-9]{0,20}(\\.[0-9]{0,30})?([eE][-+]?[0-9]{1,4})?") {
            if let Ok(v) = parse_ttl(&text) {
                prop_assert!(v.is_finite() && v >= 0.0 && v <= MAX_TTL_SECONDS as f64, "{text} -> {v}");
            }
        }

        /// Rounding a long decimal ttl to f64 never makes a ttl that is not yet expired look
        /// expired: parse(ttl) < now implies the exact decimal is < now.
        #[test]
        fn decimal_rounding_never_expires_a_live_ttl(
            int in 0i64..4_000_000_000,
            frac in "[0-9]{0,30}",
            now in 0i64..4_000_000_000,
        ) {
            let text = if frac.is_empty() { int.to_string() } else { format!("{int}.{frac}") };
            if parse_ttl(&text).is_ok_and(|t| t < now as f64) {
                // int + 0.frac < now  <=>  int < now, as now is whole and 0 <= 0.frac < 1
                prop_assert!(int < now, "{text} read as expired at {now}");
            }
        }

        /// Whatever text a window attribute holds, parsing never panics; a parsed window is
        /// never empty or reversed.
        #[test]
        fn any_window_text_parses_to_a_forward_window_or_none(
            text in "\\PC{0,60}|[0-9T:.Z+-]{0,30}_[0-9T:.Z+-]{0,30}",
            a in 0i64..MAX_TTL_SECONDS, b in 0i64..MAX_TTL_SECONDS,
        ) {
            if let Some(w) = Window::parse_key(&text) {
                prop_assert!(w.end > w.start, "{text} -> {w:?}");
            }
            let pair = format!("{}_{}", iso_millis(a), iso_millis(b));
            prop_assert_eq!(Window::parse_key(&pair).is_some(), b > a, "{}", pair);
        }

        #[test]
        fn key_round_trips(ttl in 0i64..MAX_TTL_SECONDS - 86_400, width in 1u32..=MAX_WINDOW_SECONDS) {
            let w = Window::containing_secs(ttl, width);
            prop_assert_eq!(Window::parse_key(&w.key()), Some(w));
        }

        /// Every ttl that has expired by `now` and is at most `lookback` windows old is in a
        /// window the sweep reads — including ttls exactly on a boundary.
        #[test]
        fn swept_windows_cover_every_recent_expired_ttl(
            now in 86_400i64..4_000_000_000,
            width in 1u32..=3600,
            lookback in 0u32..20,
            age_frac in 0.0f64..1.0,
        ) {
            let windows = windows_to_sweep(ts(now), width, lookback);
            // contiguous, newest first
            for pair in windows.windows(2) {
                prop_assert_eq!(pair[1].end, pair[0].start);
            }
            let oldest_covered = windows.last().unwrap().start;
            let span = (now - oldest_covered) as f64;
            let ttl = now as f64 - age_frac * span;
            if ttl > oldest_covered as f64 && ttl < now as f64 {
                let home = Window::containing(ttl, width);
                prop_assert!(windows.contains(&home), "ttl {ttl} in {home:?} not swept at {now}");
            }
        }

        #[test]
        fn parse_ttl_accepts_only_plausible_seconds(s in "[-+0-9.eE]{0,24}|.{0,24}") {
            if let Ok(v) = parse_ttl(&s) {
                prop_assert!(v.is_finite() && (0.0..=MAX_TTL_SECONDS as f64).contains(&v), "{s:?} -> {v}");
            }
        }
    }
}
