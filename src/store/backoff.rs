//! [`full_jitter`]: the one exponential backoff, for every retry loop — the fast path's query
//! retries here, the engine's delete retries, event publishing and backfill above.

use std::time::Duration;

/// Exponential backoff with full jitter: the wait before retry number `attempt` (1-based) is
/// uniformly random in `[0, min(cap, base * 2^(attempt-1))]`.
pub fn full_jitter(base: Duration, cap: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    exp.min(cap).mul_f64(fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded_and_grows() {
        let (base, cap) = (Duration::from_millis(50), Duration::from_secs(5));
        for attempt in 1..40 {
            let bound = base.saturating_mul(1 << (attempt - 1).min(20)).min(cap);
            for _ in 0..50 {
                let d = full_jitter(base, cap, attempt);
                assert!(d <= bound, "attempt {attempt}: {d:?} > {bound:?}");
            }
        }
        // Full jitter: over many draws the late attempts wait longer on average than the first.
        let mean = |a| {
            (0..2000)
                .map(|_| full_jitter(base, cap, a).as_secs_f64())
                .sum::<f64>()
                / 2000.0
        };
        assert!(mean(6) > 4.0 * mean(1));
    }
}
