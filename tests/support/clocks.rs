//! The wall clock as the tests read it.

use ttl_sweeper::expiry::Timestamp;

/// A seed from the clock: nanoseconds since the epoch.
pub fn clock_seed() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.unwrap().as_nanos() as u64
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The wall clock, as the engine reads it.
pub fn clock() -> Timestamp {
    Timestamp::from_datetime(chrono::Utc::now())
}

/// The wall clock, epoch seconds with fraction.
pub fn wall_clock() -> f64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.unwrap().as_secs_f64()
}
