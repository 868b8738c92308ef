//! How fast a sweep reads: the read-ahead budget of keys its partitions share (reading never
//! runs ahead of deleting, and memory stays bounded whatever the pages), and batch mode's page
//! pace (a page is dispatched well within `BATCH_MAX_READ_AGE`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{SweepOptions, BATCH_SIZE, READ_AHEAD_ROUNDS};

/// The keys a sweep may hold at once, read but not yet deleted: [`READ_AHEAD_ROUNDS`] rounds of
/// `max_concurrency + 1` chunks, a fair share for every partition that may run (see
/// [`take_budget`]) and one more, so that a partition reads its next page while its last chunks
/// are deleted.
pub(super) fn read_ahead(options: &SweepOptions) -> usize {
    READ_AHEAD_ROUNDS * BATCH_SIZE * (options.max_concurrency.max(1) + 1)
}

/// Takes up to `want` keys of the sweep's read-ahead budget for the next page of a partition that
/// holds `pending` keys already: waits for a partition's fair share ([`READ_AHEAD_ROUNDS`] chunks,
/// less what it holds), then takes without waiting half of what is free beyond a fair share for
/// each other partition running, in whole chunks. The wait always ends: a waiting partition holds
/// less than a chunk, and the budget has a fair share for every partition that may run.
/// `running` counts the partitions running, this one among them.
pub(super) async fn take_budget(
    budget: &Arc<Semaphore>,
    running: &AtomicUsize,
    pending: usize,
    want: u32,
) -> OwnedSemaphorePermit {
    let chunk = BATCH_SIZE as u32;
    let fair = READ_AHEAD_ROUNDS as u32 * chunk;
    let first = (fair - (pending as u32 % chunk)).min(want).max(1);
    let mut permit = budget
        .clone()
        .acquire_many_owned(first)
        .await
        .expect("the read-ahead budget is never closed");
    let others =
        u32::try_from(running.load(Ordering::Relaxed).saturating_sub(1)).unwrap_or(u32::MAX);
    let free = u32::try_from(budget.available_permits()).unwrap_or(u32::MAX);
    let spare = free.saturating_sub(others.saturating_mul(fair)) / 2;
    let more = (want - first).min(spare) / chunk * chunk;
    if more > 0 {
        if let Ok(extra) = budget.clone().try_acquire_many_owned(more) {
            permit.merge(extra);
        }
    }
    permit
}

/// The first query page of a partition in batch mode, before the pace of deletes is known.
const FIRST_BATCH_PAGE: i32 = 1_000;

/// Batch mode reads no faster than it deletes, so that a page is dispatched well within
/// `batch_max_read_age`: the next page's `Limit` shrinks to what this page's pace dispatches in a
/// quarter of the bound if dispatching it took more than half the bound, and doubles (up to
/// `PAGE_LIMIT`, or 1 MB pages) when it took less than an eighth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct PagePace {
    /// `None`: not batch mode — the configured limit, always.
    max_age: Option<std::time::Duration>,
    /// The next page's `Limit`.
    pub(super) limit: Option<i32>,
    cap: Option<i32>,
}

impl PagePace {
    pub(super) fn new(options: &SweepOptions) -> Self {
        let cap = options.page_limit;
        let batch = options.delete_mode == super::DeleteMode::Batch;
        let first = Some(cap.map_or(FIRST_BATCH_PAGE, |c| c.min(FIRST_BATCH_PAGE)));
        PagePace {
            max_age: batch.then_some(options.batch_max_read_age),
            limit: if batch { first } else { cap },
            cap,
        }
    }

    /// A page of `items` took `took` from its arrival until its last whole chunk went to a task.
    pub(super) fn observe(&mut self, items: usize, took: std::time::Duration) {
        let (Some(max_age), Some(limit)) = (self.max_age, self.limit) else {
            return;
        };
        let items = i32::try_from(items).unwrap_or(i32::MAX);
        if took > max_age / 2 {
            // What could have been dispatched in a quarter of the bound, at this page's pace.
            let fits =
                f64::from(items.min(limit)) * (max_age / 4).as_secs_f64() / took.as_secs_f64();
            // Never below one chunk, unless the configured limit is lower still.
            let floor = (BATCH_SIZE as i32).min(limit);
            self.limit = Some((fits as i32).clamp(floor, limit));
        } else if took < max_age / 8 && items >= limit {
            let doubled = limit.saturating_mul(2);
            self.limit = match self.cap {
                Some(cap) => Some(doubled.min(cap)),
                // Past what a 1 MB page of keys can hold anyway: let DynamoDB fill pages.
                None if doubled > 64_000 => None,
                None => Some(doubled),
            };
        }
    }
}

/// Counts a partition among the sweep's running ones from its spawn to its end.
pub(super) struct Running(Arc<AtomicUsize>);

impl Running {
    pub(super) fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Running(count.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Takes `n` permits out of `held` (which holds at least `n`).
pub(super) fn split_permit(
    held: &mut Option<OwnedSemaphorePermit>,
    n: usize,
) -> Option<OwnedSemaphorePermit> {
    let h = held.as_mut()?;
    if h.num_permits() <= n {
        return held.take();
    }
    h.split(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_pages_shrink_when_dispatch_is_slow_and_grow_when_fast() {
        use std::time::Duration;
        let options = SweepOptions::default();
        let age = options.batch_max_read_age;
        let mut pace = PagePace::new(&options);
        assert_eq!(pace.limit, Some(FIRST_BATCH_PAGE));
        // dispatching 1,000 keys took 3/4 of the bound: a third of it fits in a quarter
        pace.observe(1_000, age * 3 / 4);
        assert_eq!(pace.limit, Some(333));
        for _ in 0..10 {
            pace.observe(500, age);
        }
        assert_eq!(pace.limit, Some(BATCH_SIZE as i32), "never below one chunk");
        // fast and full pages double back up, until DynamoDB fills 1 MB pages
        let mut steps = 0;
        while let Some(l) = pace.limit {
            pace.observe(l as usize, Duration::ZERO);
            steps += 1;
            assert!(steps < 20);
        }
        // a short (last) page says nothing about the pace
        let mut pace = PagePace::new(&options);
        pace.observe(10, Duration::ZERO);
        assert_eq!(pace.limit, Some(FIRST_BATCH_PAGE));
        // a configured PAGE_LIMIT is never exceeded; conditional mode keeps it as is
        let capped = SweepOptions {
            page_limit: Some(300),
            ..SweepOptions::default()
        };
        let mut pace = PagePace::new(&capped);
        assert_eq!(pace.limit, Some(300));
        pace.observe(300, Duration::ZERO);
        assert_eq!(pace.limit, Some(300));
        let conditional = SweepOptions {
            delete_mode: crate::engine::DeleteMode::Conditional,
            ..SweepOptions::default()
        };
        let mut pace = PagePace::new(&conditional);
        pace.observe(10_000, age * 10);
        assert_eq!(pace.limit, None);
    }

    #[test]
    fn a_page_limit_below_one_chunk_survives_a_slow_page() {
        // A page limit under BATCH_SIZE (tests and small sweeps set one) and a page whose
        // dispatch took past half the bound: the limit stays within the configured one.
        let small = SweepOptions {
            page_limit: Some(10),
            ..SweepOptions::default()
        };
        let mut pace = PagePace::new(&small);
        assert_eq!(pace.limit, Some(10));
        pace.observe(10, small.batch_max_read_age * 3);
        assert_eq!(pace.limit, Some(10), "the configured limit is kept");
    }
}
