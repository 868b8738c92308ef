//! Writing packs: once each, due after their write is acknowledged. The stream indexer's packs
//! and a sweep's carried keys are written the same way ([`write_packs`]): a pack acknowledged
//! too late for its due is written again, due further on, since a sweep may have read past its
//! due before it was there (`docs/design.md`, "The writer").

use std::collections::HashSet;
use std::time::Duration;

use futures::stream::{self, StreamExt};

use super::{group, Pack, PackEntry, ENTRY};
use crate::expiry::{Clock, Timestamp};
use crate::store::{Backoff, EntryWrite, ErrorKind, Retry, Store, StoreError, TableSchema};

/// How a writer's requests to the expiry index table are tried (the indexer's entries and mark,
/// and a request's packs): 5 attempts in all, waits of 50 ms doubling to 2 s between them. A
/// pack's unprocessed writes are sent again after a wait, one acknowledged too late at once.
pub const WRITES: Retry = Retry {
    attempts: 5,
    base: Duration::from_millis(50),
    cap: Duration::from_secs(2),
};

/// How far past the latest instant DynamoDB's clock may read an entry of an item expired (or
/// about to be) is due: time to write its pack before any sweep reads that far.
pub const PACK_LEAD: Duration = Duration::from_millis(250);

/// How far past the latest instant DynamoDB's clock may read, once its write is acknowledged, a
/// pack must still be due: more than any sweep's instant runs ahead of DynamoDB's clock
/// (`MAX_ALLOWANCE` of the store's clock). A pack due sooner is written again, due later.
pub const ACK_MARGIN: Duration = Duration::from_millis(100);

/// Packs in one `BatchWriteItem`.
pub const PACKS_PER_REQUEST: usize = 25;

/// Writes `packs` (up to [`PACKS_PER_REQUEST`], each with its entries' tags) in one request,
/// with retries ([`WRITES`]): unprocessed packs are sent again after a wait, and a pack whose
/// acknowledgement came too late for its due ([`ACK_MARGIN`]) is written again, due
/// [`rewrite_lead`] past the latest DynamoDB's clock may read. Answers each pack as last written,
/// with the error that stopped it, if any (after the last attempt, or an error not worth retrying).
pub async fn write_packs<S: Store, T>(
    store: &S,
    schema: &TableSchema,
    clock: &dyn Clock,
    packs: Vec<(Pack, Vec<T>)>,
) -> Vec<(Pack, Vec<T>, Option<(ErrorKind, String)>)> {
    let mut out = Vec::with_capacity(packs.len());
    let mut pending = packs;
    let mut backoff = Backoff::new(WRITES);
    let e = loop {
        let (attempt, last) = (backoff.made(), backoff.made() >= WRITES.attempts);
        let writes = pending
            .iter()
            .map(|(pack, _)| EntryWrite::Put(pack.to_item()))
            .collect();
        let sent = std::mem::take(&mut pending);
        let started = tokio::time::Instant::now();
        let (written, wait) = match store.write_entries(schema, writes).await {
            Ok(left) => {
                let left: HashSet<String> = left.iter().filter_map(sort_of).collect();
                let (unprocessed, written) = sent
                    .into_iter()
                    .partition::<Vec<_>, _>(|(pack, _)| left.contains(&pack.sort));
                let wait = !unprocessed.is_empty();
                pending = unprocessed;
                (written, wait)
            }
            Err(e) => {
                pending = sent;
                if last || !e.kind.is_retryable() {
                    break e;
                }
                (Vec::new(), true)
            }
        };
        // Acknowledged: due far enough ahead that no sweep has read past it, or again, later:
        // by more than twice the round trip just seen, and twice as far each attempt, so that
        // slow writes still end.
        let latest = clock.latest();
        let lead = rewrite_lead(started.elapsed(), attempt);
        for (pack, tags) in written {
            if pack.due().is_some_and(|due| due >= latest + ACK_MARGIN) {
                out.push((pack, tags, None));
                continue;
            }
            let due = latest + lead;
            let origin = format!("{:016x}", fastrand::u64(..));
            let again = pack.entries.into_iter().zip(tags).map(|(e, t)| (due, e, t));
            let (repacked, _) = group(schema, &origin, again.collect());
            pending.extend(repacked);
        }
        if pending.is_empty() {
            return out;
        }
        match backoff.next_wait() {
            Some(pause) if wait => tokio::time::sleep(pause).await,
            Some(_) => {}
            None => {
                let message = format!("packs still unwritten after {} attempts", WRITES.attempts);
                break StoreError::new(ErrorKind::Throttled, "BatchWriteItem", message);
            }
        }
    };
    let why = (e.kind, e.to_string());
    out.extend(pending.into_iter().map(|(p, t)| (p, t, Some(why.clone()))));
    out
}

/// What [`write_grouped`] came to: each pack as last written, with the error that stopped it, if
/// any; and the entries answered apart, whose keys have no window (not keys of the table).
pub type Grouped<T> = (Vec<Written<T>>, Vec<(PackEntry, T)>);

/// A pack as last written, its entries' tags, and the error that stopped it, if any.
pub type Written<T> = (Pack, Vec<T>, Option<(ErrorKind, String)>);

/// Writes `entries`, each due by its instant and tagged, as packs ([`group`]`(schema, origin,
/// …)`), [`PACKS_PER_REQUEST`] to a request and `concurrency` requests at once, each through
/// [`write_packs`]. The one way entries become packs: the stream indexer's batches, the
/// follower's gathered entries and a sweep's carried keys.
pub async fn write_grouped<S: Store, T: Clone>(
    store: &S,
    schema: &TableSchema,
    clock: &dyn Clock,
    origin: &str,
    entries: Vec<(Timestamp, PackEntry, T)>,
    concurrency: usize,
) -> Grouped<T> {
    let (grouped, apart) = group(schema, origin, entries);
    let written = stream::iter(grouped)
        .chunks(PACKS_PER_REQUEST)
        .map(|chunk| write_packs(store, schema, clock, chunk))
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
    (written.into_iter().flatten().collect(), apart)
}

/// The most a pack written again is due past the latest instant DynamoDB's clock may read.
pub const MAX_REWRITE_LEAD: Duration = Duration::from_secs(30);

/// How far past the latest instant DynamoDB's clock may read a pack acknowledged too late at
/// `attempt` is due when written again: [`PACK_LEAD`] or twice the `round_trip` of the write
/// that was too late, whichever is more, doubled for each attempt before (at most
/// [`MAX_REWRITE_LEAD`]).
pub fn rewrite_lead(round_trip: Duration, attempt: u32) -> Duration {
    let base = PACK_LEAD.max(round_trip * 2);
    base.saturating_mul(1 << attempt.saturating_sub(1).min(16))
        .min(MAX_REWRITE_LEAD)
}

/// The sort key of the index item a write puts.
fn sort_of(write: &EntryWrite) -> Option<String> {
    match write {
        EntryWrite::Put(item) => item.get(ENTRY)?.as_s().ok().cloned(),
        EntryWrite::Remove(_) => None,
    }
}
