//! The one backoff of every retry loop of ours ([`full_jitter`]; the SDK retries each request
//! with its own), the loop that retries one request ([`retried`]) and the one that writes entries
//! to the expiry index table until all are written ([`write_all`]), with how each caller tries
//! ([`Retry`]) and the attempts of one run of a loop ([`Backoff`]), which every other loop that
//! retries counts and waits through.

use std::future::Future;
use std::time::Duration;

use super::{EntryWrite, ErrorKind, StoreError};

/// Exponential backoff with full jitter: the wait before retry number `attempt` (1-based) is
/// uniformly random in `[0, min(cap, base * 2^(attempt-1))]`.
pub fn full_jitter(base: Duration, cap: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    exp.min(cap).mul_f64(fastrand::f64())
}

/// How a retry loop tries: `attempts` in all, [`full_jitter`] of `base` and `cap` between them.
/// The default is the deletes' (the first attempt and 8 retries, 50 ms doubling to 5 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all, the first included (at least 1).
    pub attempts: u32,
    /// The first retry's longest wait.
    pub base: Duration,
    /// The longest wait of any retry.
    pub cap: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 9,
            base: Duration::from_millis(50),
            cap: Duration::from_secs(5),
        }
    }
}

impl Retry {
    /// The same, `retries` after the first attempt.
    pub fn with_retries(self, retries: u32) -> Retry {
        let attempts = retries.saturating_add(1);
        Retry { attempts, ..self }
    }

    /// Retries after the first attempt.
    pub fn retries(&self) -> u32 {
        self.attempts.max(1) - 1
    }
}

/// The attempts of one run of a retry loop: each loop that retries counts its attempts and
/// waits through one of these.
#[derive(Debug, Clone)]
pub struct Backoff {
    retry: Retry,
    made: u32,
}

impl Backoff {
    /// The first attempt is being made.
    pub fn new(retry: Retry) -> Backoff {
        Backoff { retry, made: 1 }
    }

    /// Attempts made so far, the current one included.
    pub fn made(&self) -> u32 {
        self.made
    }

    /// After a failed attempt: the wait ([`full_jitter`]) before the next one, which then counts
    /// as made; `None` once `retry.attempts` were made.
    pub fn next_wait(&mut self) -> Option<Duration> {
        (self.made < self.retry.attempts.max(1)).then(|| self.wait())
    }

    /// For a loop that tries until it works or is stopped, whatever its `attempts`: the wait
    /// before the next attempt, which then counts as made.
    pub fn wait(&mut self) -> Duration {
        let wait = full_jitter(self.retry.base, self.retry.cap, self.made);
        self.made = self.made.saturating_add(1);
        wait
    }
}

/// Runs `request` until it succeeds, fails with an error not worth retrying, or `retry.attempts`
/// were made, waiting [`full_jitter`] between attempts: its last answer.
pub async fn retried<T, F, Fut>(retry: Retry, mut request: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut backoff = Backoff::new(retry);
    loop {
        match request().await {
            Err(e) if e.kind.is_retryable() => match backoff.next_wait() {
                Some(wait) => tokio::time::sleep(wait).await,
                None => return Err(e),
            },
            answer => return answer,
        }
    }
}

/// Sends `writes` with `send` (one `BatchWriteItem`: the writes it left unprocessed, or an
/// error) until every one is written, an error is not worth retrying, or `retry.attempts` were
/// made, sending only the unprocessed ones again. How many were written, and, if some were not,
/// the error (the last one, or `Throttled` when they were left unprocessed every time) with the
/// writes left.
pub async fn write_all<F, Fut>(
    mut send: F,
    mut writes: Vec<EntryWrite>,
    retry: Retry,
) -> (usize, Result<(), (StoreError, Vec<EntryWrite>)>)
where
    F: FnMut(Vec<EntryWrite>) -> Fut,
    Fut: Future<Output = Result<Vec<EntryWrite>, StoreError>>,
{
    let mut backoff = Backoff::new(retry);
    let mut written = 0;
    loop {
        let sent = writes.len();
        let error = match send(writes.clone()).await {
            Ok(unprocessed) => {
                written += sent.saturating_sub(unprocessed.len());
                writes = unprocessed;
                if writes.is_empty() {
                    return (written, Ok(()));
                }
                None
            }
            Err(e) if !e.kind.is_retryable() => return (written, Err((e, writes))),
            Err(e) => Some(e),
        };
        let Some(wait) = backoff.next_wait() else {
            let e = error.unwrap_or_else(|| {
                let (left, made) = (writes.len(), backoff.made());
                let message = format!("{left} writes left unprocessed after {made} attempts");
                StoreError::new(ErrorKind::Throttled, "BatchWriteItem", message)
            });
            return (written, Err((e, writes)));
        };
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn puts(n: usize) -> Vec<EntryWrite> {
        let item = |i: usize| {
            let value = aws_sdk_dynamodb::types::AttributeValue::S(i.to_string());
            EntryWrite::Put(std::collections::HashMap::from([(
                "entry".to_owned(),
                value,
            )]))
        };
        (0..n).map(item).collect()
    }

    const RETRY: Retry = Retry {
        attempts: 3,
        base: Duration::from_millis(50),
        cap: Duration::from_secs(1),
    };

    #[tokio::test(start_paused = true)]
    async fn only_the_unprocessed_are_sent_again_until_all_are_written() {
        let sent = Mutex::new(Vec::new());
        let send = |writes: Vec<EntryWrite>| {
            let n = writes.len();
            sent.lock().unwrap().push(n);
            // Half of each batch left unprocessed, until two are sent: both written.
            let left = if n > 2 {
                writes[n / 2..].to_vec()
            } else {
                Vec::new()
            };
            async move { Ok(left) }
        };
        let (written, result) = write_all(send, puts(8), RETRY).await;
        assert_eq!(written, 8);
        assert!(result.is_ok());
        assert_eq!(*sent.lock().unwrap(), [8, 4, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn writes_left_after_the_last_attempt_are_a_throttled_error_with_them() {
        let send = |writes: Vec<EntryWrite>| async move { Ok(writes[1..].to_vec()) };
        let (written, result) = write_all(send, puts(5), RETRY).await;
        let (e, left) = result.unwrap_err();
        assert_eq!((written, left.len(), e.kind), (3, 2, ErrorKind::Throttled));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_is_retried_while_its_error_is_worth_it_and_attempts_are_left() {
        let calls = Mutex::new(0);
        let throttled = || StoreError::new(ErrorKind::Throttled, "GetItem", "slow down");
        let request = || {
            *calls.lock().unwrap() += 1;
            let n = *calls.lock().unwrap();
            async move {
                if n < 3 {
                    Err(throttled())
                } else {
                    Ok(n)
                }
            }
        };
        assert_eq!(retried(RETRY, request).await.unwrap(), 3);
        *calls.lock().unwrap() = 0;
        let always = || {
            *calls.lock().unwrap() += 1;
            async { Err::<(), _>(throttled()) }
        };
        assert_eq!(
            retried(RETRY, always).await.unwrap_err().kind,
            ErrorKind::Throttled
        );
        assert_eq!(*calls.lock().unwrap(), 3, "RETRY's attempts, no more");
        *calls.lock().unwrap() = 0;
        let invalid = || {
            *calls.lock().unwrap() += 1;
            async { Err::<(), _>(StoreError::new(ErrorKind::Validation, "GetItem", "no")) }
        };
        assert!(retried(RETRY, invalid).await.is_err());
        assert_eq!(*calls.lock().unwrap(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_not_worth_retrying_ends_it_at_once() {
        let calls = Mutex::new(0);
        let send = |_: Vec<EntryWrite>| {
            *calls.lock().unwrap() += 1;
            async {
                Err(StoreError::new(
                    ErrorKind::Validation,
                    "BatchWriteItem",
                    "no",
                ))
            }
        };
        let (written, result) = write_all(send, puts(2), RETRY).await;
        assert_eq!((written, *calls.lock().unwrap()), (0, 1));
        let (e, left) = result.unwrap_err();
        assert_eq!((e.kind, left.len()), (ErrorKind::Validation, 2));
    }

    #[test]
    fn a_backoff_gives_a_wait_per_retry_then_none_and_counts_each_attempt() {
        let mut backoff = Backoff::new(RETRY);
        assert_eq!(backoff.made(), 1);
        // 50 ms doubling, under the cap: each wait within its attempt's bound.
        for (made, bound) in [(2, 50), (3, 100)] {
            let wait = backoff.next_wait().expect("a retry is left");
            assert!(wait <= Duration::from_millis(bound), "{wait:?}");
            assert_eq!(backoff.made(), made);
        }
        assert_eq!(backoff.next_wait(), None, "RETRY's 3 attempts were made");
        assert_eq!(backoff.made(), 3);
        // A loop that tries until it works goes on, each wait within the cap.
        for _ in 0..40 {
            assert!(backoff.wait() <= RETRY.cap);
        }
        assert_eq!(backoff.made(), 43);
        assert_eq!(Retry::default().with_retries(2).retries(), 2);
    }

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
