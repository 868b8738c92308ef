//! The backfill's limits: the ranges its flags accept, the default segment count, and the token
//! bucket that holds writes and deletes to `--max-wcu`.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The range `--max-wcu` accepts: 0.01 (a write every 100 s) to 1,000,000 write units a second.
pub const MAX_WCU_RANGE: std::ops::RangeInclusive<f64> = 0.01..=1_000_000.0;

/// Parses and checks a `--max-wcu` value: a number in [`MAX_WCU_RANGE`].
pub fn parse_max_wcu(text: &str) -> Result<f64, String> {
    let (lo, hi) = (MAX_WCU_RANGE.start(), MAX_WCU_RANGE.end());
    match text.trim().parse::<f64>() {
        Ok(wcu) if MAX_WCU_RANGE.contains(&wcu) => Ok(wcu),
        Ok(wcu) => Err(format!(
            "{wcu} write capacity units per second: expected a number from {lo} to {hi}"
        )),
        Err(_) => Err(format!(
            "{text:?} is not a number: expected write capacity units per second from {lo} to {hi}"
        )),
    }
}

/// The most items a Scan page may be asked for (`--page-size`).
pub const MAX_PAGE_SIZE: i32 = 1000;

/// Parses and checks a `--page-size` value: a whole number from 1 to [`MAX_PAGE_SIZE`].
pub fn parse_page_size(text: &str) -> Result<i32, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if (1..=i64::from(MAX_PAGE_SIZE)).contains(&n) => Ok(n as i32),
        _ => Err(format!(
            "{text:?} items per page: expected a whole number from 1 to {MAX_PAGE_SIZE}"
        )),
    }
}

/// The default segment count for a table of `size_bytes`: one per 256 MiB, between 4 and 256.
pub fn default_segments(size_bytes: i64) -> u32 {
    let per = 256 * 1024 * 1024;
    ((size_bytes.max(0) + per - 1) / per).clamp(4, 256) as u32
}

/// A token bucket for write capacity: `per_second` units per second on average, in bursts of at
/// most `max(per_second, 1)` units. The bucket holds at least one unit, so that a rate below one
/// unit per second still lets a write through now and then.
pub(crate) struct RateLimit {
    per_second: f64,
    capacity: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimit {
    pub(super) fn new(per_second: f64) -> Self {
        let capacity = per_second.max(1.0);
        RateLimit {
            per_second,
            capacity,
            state: Mutex::new((capacity, Instant::now())),
        }
    }

    /// Waits until one unit is available and takes it.
    pub(super) async fn acquire(&self) {
        loop {
            let wait = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.per_second)
                    .min(self.capacity);
                s.1 = now;
                if s.0 >= 1.0 {
                    s.0 -= 1.0;
                    return;
                }
                (1.0 - s.0) / self.per_second
            };
            // A rate checked by `parse_max_wcu` always gives a valid wait; anything else retries
            // after a second rather than panicking.
            let wait = Duration::try_from_secs_f64(wait).unwrap_or(Duration::from_secs(1));
            tokio::time::sleep(wait).await;
        }
    }

    /// Charges what a write cost beyond the unit taken for it.
    pub(super) fn charge(&self, extra: f64) {
        if extra > 0.0 {
            self.state.lock().unwrap_or_else(|e| e.into_inner()).0 -= extra;
        }
    }
}
