//! The backfill's limits: the ranges its flags accept and the default segment count. The token
//! buckets that hold writes to `--max-wcu` and the scan to `--max-rcu` are
//! [`crate::tools::scan::RateLimit`]s.

/// The range `--max-wcu` and `--max-rcu` accept: 0.01 (a unit every 100 s) to 1,000,000
/// capacity units a second.
pub const MAX_UNITS_RANGE: std::ops::RangeInclusive<f64> = 0.01..=1_000_000.0;

/// Parses and checks a `--max-wcu` value: a number in [`MAX_UNITS_RANGE`].
pub fn parse_max_wcu(text: &str) -> Result<f64, String> {
    parse_units(text, "write")
}

/// Parses and checks a `--max-rcu` value: a number in [`MAX_UNITS_RANGE`].
pub fn parse_max_rcu(text: &str) -> Result<f64, String> {
    parse_units(text, "read")
}

fn parse_units(text: &str, what: &str) -> Result<f64, String> {
    let (lo, hi) = (MAX_UNITS_RANGE.start(), MAX_UNITS_RANGE.end());
    match text.trim().parse::<f64>() {
        Ok(units) if MAX_UNITS_RANGE.contains(&units) => Ok(units),
        Ok(units) => Err(format!(
            "{units} {what} capacity units per second: expected a number from {lo} to {hi}"
        )),
        Err(_) => Err(format!(
            "{text:?} is not a number: expected {what} capacity units per second from {lo} to {hi}"
        )),
    }
}

/// The most items a Scan page may be asked for (`--page-size`).
pub const MAX_PAGE_SIZE: i32 = 1000;

/// Parses and checks a `--page-size` value: a whole number from 1 to [`MAX_PAGE_SIZE`].
pub fn parse_page_size(text: &str) -> Result<i32, String> {
    let max = MAX_PAGE_SIZE.unsigned_abs();
    crate::tools::scan::parse_count(text, max, "items per page").map(|n| n as i32)
}

/// The default segment count for a table of `size_bytes`: one per 256 MiB, between 4 and 256.
pub fn default_segments(size_bytes: i64) -> u32 {
    let per = 256 * 1024 * 1024;
    ((size_bytes.max(0) + per - 1) / per).clamp(4, 256) as u32
}
