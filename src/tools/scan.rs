//! The parallel Scan driver of `backfill` and `audit`: every segment read concurrently, page by
//! page, each page handed to a callback with where the segment continues, so a caller can resume.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use tokio::time::Instant;

use crate::store::{lock, Key, Scan, StoreError, TableSchema};

/// The most segments a scan may be split into. DynamoDB accepts up to 1,000,000, but every
/// segment is a position in the backfill's progress file (saved after every page) and at least
/// one Scan request; 1,000 segments of a 10 TiB table are still 10 GiB each.
pub const MAX_SEGMENTS: u32 = 1000;

/// The most segments read at the same time; the rest wait for a free slot. 256 is also the
/// largest default segment count of a backfill.
pub const MAX_CONCURRENT_SEGMENTS: usize = 256;

/// Parses and checks a `--segments` value: a whole number from 1 to [`MAX_SEGMENTS`].
pub fn parse_segments(text: &str) -> Result<u32, String> {
    parse_count(text, MAX_SEGMENTS, "segments")
}

/// Parses a whole number from 1 to `max`; the error names the value `what` (`segments`).
pub(super) fn parse_count(text: &str, max: u32, what: &str) -> Result<u32, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if (1..=i64::from(max)).contains(&n) => Ok(n as u32),
        _ => Err(format!(
            "{text:?} {what}: expected a whole number from 1 to {max}"
        )),
    }
}

/// What `backfill` and `audit` read of an item: its key, its ttl and, without an expiry index
/// table, its window attribute.
pub(super) fn item_attributes(schema: &TableSchema) -> Vec<String> {
    let layout = &schema.layout;
    let mut attributes = schema.key_attributes.clone();
    attributes.push(layout.ttl_attribute.clone());
    if schema.index.table().is_none() {
        attributes.push(layout.window_attribute.clone());
    }
    attributes.dedup();
    attributes
}

/// Where one segment stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Position {
    /// Not started: scan from the beginning.
    Start,
    /// Continue after this key.
    After(Key),
    /// Finished.
    Done,
}

/// One page handed to the callback.
#[derive(Debug)]
pub struct ScanPageOf {
    /// Segment number.
    pub segment: u32,
    /// The page's items.
    pub items: Vec<Key>,
    /// The segment's position after this page.
    pub position: Position,
    /// The read capacity the page consumed.
    pub consumed: f64,
}

/// Scans `table` in `positions.len()` segments, at most [`MAX_CONCURRENT_SEGMENTS`] at a time,
/// projecting `attributes` (all when empty), every page within `read_limit` if one is given.
/// `on_page` returns `Ok(false)` to stop that segment early. The first error stops the segment it
/// happened in and is returned after the others finish.
pub async fn parallel_scan<S: Scan, F, Fut>(
    store: &S,
    table: &str,
    positions: Vec<Position>,
    attributes: &[String],
    page_limit: Option<i32>,
    read_limit: Option<&RateLimit>,
    on_page: F,
) -> Result<(), StoreError>
where
    F: Fn(ScanPageOf) -> Fut,
    Fut: Future<Output = Result<bool, StoreError>>,
{
    let total = positions.len() as u32;
    let on_page = &on_page;
    let segments = positions
        .into_iter()
        .enumerate()
        .map(|(i, position)| async move {
            let segment = i as u32;
            let mut start = match position {
                Position::Done => return Ok(()),
                Position::Start => None,
                Position::After(key) => Some(key),
            };
            loop {
                let page = paced(read_limit, async {
                    let page = store
                        .scan_page(table, segment, total, start.take(), attributes, page_limit)
                        .await?;
                    let consumed = page.consumed;
                    Ok((page, consumed))
                })
                .await?;
                let more = on_page(ScanPageOf {
                    segment,
                    items: page.items,
                    position: page.next.clone().map_or(Position::Done, Position::After),
                    consumed: page.consumed,
                })
                .await?;
                match page.next {
                    Some(next) if more => start = Some(next),
                    _ => return Ok(()),
                }
            }
        });
    let results: Vec<Result<(), StoreError>> = stream::iter(segments)
        .buffer_unordered(MAX_CONCURRENT_SEGMENTS)
        .collect()
        .await;
    results.into_iter().collect()
}

/// `request` within `limit`, if one is given: a unit taken before it is sent, and the rest of
/// what its answer says it consumed (the pair's second half) charged after.
pub async fn paced<T>(
    limit: Option<&RateLimit>,
    request: impl Future<Output = Result<(T, f64), StoreError>>,
) -> Result<T, StoreError> {
    if let Some(limit) = limit {
        limit.acquire().await;
    }
    let (answer, consumed) = request.await?;
    if let Some(limit) = limit {
        limit.charge(consumed - 1.0);
    }
    Ok(answer)
}

/// A token bucket for capacity units (reads or writes): `per_second` units per second on average, in bursts of at
/// most `max(per_second, 1)` units. The bucket holds at least one unit, so that a rate below one
/// unit per second still lets a write through now and then.
pub struct RateLimit {
    per_second: f64,
    capacity: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimit {
    /// A bucket of `per_second` units a second, full.
    pub fn new(per_second: f64) -> Self {
        let capacity = per_second.max(1.0);
        RateLimit {
            per_second,
            capacity,
            state: Mutex::new((capacity, Instant::now())),
        }
    }

    /// Waits until one unit is available and takes it.
    pub async fn acquire(&self) {
        loop {
            let wait = {
                let mut s = lock(&self.state);
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
            // A rate checked by `parse_max_wcu` or `parse_max_rcu` always gives a valid wait; anything else retries
            // after a second rather than panicking.
            let wait = Duration::try_from_secs_f64(wait).unwrap_or(Duration::from_secs(1));
            tokio::time::sleep(wait).await;
        }
    }

    /// Charges what a request cost beyond the unit taken for it.
    pub fn charge(&self, extra: f64) {
        if extra > 0.0 {
            lock(&self.state).0 -= extra;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_counts_are_bounded() {
        assert_eq!(parse_segments("1"), Ok(1));
        assert_eq!(parse_segments(&MAX_SEGMENTS.to_string()), Ok(MAX_SEGMENTS));
        for bad in [0, MAX_SEGMENTS + 1, 1_000_000, u32::MAX] {
            assert!(parse_segments(&bad.to_string())
                .unwrap_err()
                .contains("1 to 1000"));
        }
        assert_eq!(parse_segments(" 16 "), Ok(16));
        for bad in ["-1", "4000000000", "1e3", "many", ""] {
            assert!(
                parse_segments(bad).unwrap_err().contains("1 to 1000"),
                "{bad}"
            );
        }
    }
}
