//! The parallel Scan driver shared by `backfill` and `audit`: every segment read concurrently,
//! page by page, each page handed to a callback together with where the segment continues, so a
//! caller can save its position and resume.

use std::future::Future;

use futures::future::join_all;

use crate::store::{DynamoStore, Key, StoreError};

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
}

/// Scans `table` in `positions.len()` segments concurrently, projecting `attributes` (all when
/// empty). `on_page` returns `Ok(false)` to stop that segment early. The first error stops the
/// segment it happened in and is returned after the others finish.
pub async fn parallel_scan<F, Fut>(
    store: &DynamoStore,
    table: &str,
    positions: Vec<Position>,
    attributes: &[String],
    page_limit: Option<i32>,
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
                let page = store
                    .scan_page(table, segment, total, start.take(), attributes, page_limit)
                    .await?;
                let position = match &page.next {
                    Some(k) => Position::After(k.clone()),
                    None => Position::Done,
                };
                let more = on_page(ScanPageOf {
                    segment,
                    items: page.items,
                    position,
                })
                .await?;
                match page.next {
                    Some(next) if more => start = Some(next),
                    _ => return Ok(()),
                }
            }
        });
    join_all(segments).await.into_iter().collect()
}
