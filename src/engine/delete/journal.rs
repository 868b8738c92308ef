//! Archive mode's journal in the expiry index table, written and read around a chunk's publish
//! and at each sweep's start ([`crate::engine::journal`] says how), and the one retried write to
//! the index table, which entry removals share.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::{error, warn};

use super::Deleter;
use crate::engine::hook::{Delivery, Events, Expiry, Publication};
use crate::engine::journal::{Journal, Settling, DUE_AFTER, READ_PER_ROUND, ROUNDS_PER_SWEEP};
use crate::engine::report::EventTally;
use crate::expiry::Timestamp;
use crate::store::entries::{self, Pending, PendingExpiry};
use crate::store::{key_to_json, write_all, EntryWrite, Key, Retry, Store, StoreError};

/// Attempts of one index write request, unprocessed writes sent again after a wait ([`write_all`]).
const ATTEMPTS: u32 = 4;

/// `instant` plus [`DUE_AFTER`].
fn due(instant: Timestamp) -> Timestamp {
    Timestamp::from_millis(instant.millis() + DUE_AFTER.as_millis() as i64)
}

/// Before a chunk's publish: `expiries` journaled, due [`DUE_AFTER`] after the sweep instant.
/// If the write fails, nothing of the chunk may be published.
pub(in crate::engine) async fn open<S: Store>(
    d: &Deleter<'_, S>,
    journal: &Journal,
    expiries: &[Expiry],
) -> Result<Pending, StoreError> {
    let n = journal.next.fetch_add(1, Ordering::Relaxed);
    let pending = Pending {
        sort: Pending::sort_for(due(d.now), &journal.writer, n),
        expiries: (expiries.iter())
            .map(|x| PendingExpiry {
                key: x.key.clone(),
                ttl: x.ttl,
                at: x.at,
            })
            .collect(),
    };
    let (_, failed) = write_index(d, vec![EntryWrite::Put(pending.to_item())]).await;
    failed.map_or(Ok(pending), Err)
}

/// When a chunk ends: its journal item removed if none of its expiries is `unsettled` (accepted,
/// or perhaps accepted, and neither deleted, found gone nor cancelled), else written again with
/// only those. A write that fails is logged: a later sweep reads the item and settles it.
pub(in crate::engine) async fn close<S: Store>(
    d: &Deleter<'_, S>,
    mut pending: Pending,
    unsettled: &[Key],
) {
    let write = if unsettled.is_empty() {
        EntryWrite::Remove(entries::id(entries::PENDING, &pending.sort))
    } else if unsettled.len() == pending.expiries.len() {
        return;
    } else {
        pending.expiries.retain(|x| unsettled.contains(&x.key));
        EntryWrite::Put(pending.to_item())
    };
    if let (_, Some(e)) = write_index(d, vec![write]).await {
        warn!(error = %e, "could not update the journal of this chunk's expiries; a later sweep reads it and settles them");
    }
}

/// Before a sweep's partitions: the journal items due, their items read from the table and each
/// expiry settled ([`crate::engine::journal`]), in up to [`ROUNDS_PER_SWEEP`] rounds; what publishing the
/// cancellations did. Nothing if another sweep of this sweeper is settling. A read that fails
/// leaves the journal as it is, for the next sweep.
pub(in crate::engine) async fn settle<S: Store>(d: &Deleter<'_, S>, events: &Events) -> EventTally {
    let mut tally = EventTally::default();
    let Some(journal) = &events.journal else {
        return tally;
    };
    if journal.settling.swap(true, Ordering::AcqRel) {
        return tally;
    }
    let _settling = Settling(&journal.settling);
    for _ in 0..ROUNDS_PER_SWEEP {
        let (done, full) = settle_round(d, events).await;
        tally.add(done);
        if !full || d.stop.reached() {
            break;
        }
    }
    tally
}

/// One round of [`settle`]: what publishing did, and whether it read a full
/// [`READ_PER_ROUND`] (there may be more due).
async fn settle_round<S: Store>(d: &Deleter<'_, S>, events: &Events) -> (EventTally, bool) {
    let read = d.store.read_pending(d.schema, d.now, READ_PER_ROUND);
    let items = match d.stop.bound("Query", read).await {
        Ok(items) => items,
        Err(e) => {
            warn!(error = %e, "could not read the journal of expiries published and not settled; trying again at the next sweep");
            return (EventTally::default(), false);
        }
    };
    let full = items.len() >= READ_PER_ROUND as usize;
    if items.is_empty() {
        return (EventTally::default(), false);
    }
    let mut writes = Vec::new();
    let mut held = Vec::new();
    for item in &items {
        match Pending::from_item(item) {
            Some(Ok(pending)) => held.push(pending),
            Some(Err(sort)) => {
                error!(%sort, "a journal item of archive mode does not read as one: removed");
                writes.push(EntryWrite::Remove(entries::id(entries::PENDING, &sort)));
            }
            None => {}
        }
    }
    // Each key once (two items may journal one key: a chunk that published it again), since
    // `BatchGetItem` refuses a request that names a key twice.
    let schema = d.schema;
    let mut seen = HashSet::new();
    let keys: Vec<&Key> = (held.iter())
        .flat_map(|p| p.expiries.iter())
        .filter(|x| seen.insert(schema.key_token(&x.key)))
        .map(|x| &x.key)
        .collect();
    let found = if keys.is_empty() {
        Vec::new()
    } else {
        match d.read(keys, true).await {
            Ok(found) => found,
            Err(e) => {
                warn!(error = %e, "could not read the items of the journal's expiries; trying again at the next sweep");
                return (EventTally::default(), false);
            }
        }
    };
    // Each expiry found with another ttl is cancelled once, however many items journal it; each
    // journal item keeps the ones whose cancellation the sink did not accept.
    let mut cancel: Vec<Expiry> = Vec::new();
    let mut cancel_of: HashMap<(Option<String>, u64), usize> = HashMap::new();
    let mut waiting: Vec<(usize, PendingExpiry, usize)> = Vec::new();
    let mut left: HashMap<usize, Vec<PendingExpiry>> = HashMap::new();
    for (i, pending) in held.iter().enumerate() {
        for x in &pending.expiries {
            match schema.find(&found, &x.key) {
                None => {}
                Some(item) if schema.ttl_of(item) == Some(x.ttl) => {
                    left.entry(i).or_default().push(x.clone());
                }
                Some(_) => {
                    let id = (schema.key_token(&x.key), x.ttl.to_bits());
                    let c = *cancel_of.entry(id).or_insert_with(|| {
                        cancel.push(Expiry::new(x.key.clone(), x.ttl, x.at));
                        cancel.len() - 1
                    });
                    waiting.push((i, x.clone(), c));
                }
            }
        }
    }
    let tally = if cancel.is_empty() {
        EventTally::default()
    } else {
        for x in &cancel {
            tracing::info!(key = %key_to_json(&x.key), "an item whose expiry a sweep journaled and did not settle has a new ttl: cancelling the expiry");
        }
        let (deliveries, tally) = publish_cancellations(d, events, &cancel).await;
        for (i, x, c) in waiting {
            if deliveries.get(c) != Some(&Delivery::Accepted) {
                left.entry(i).or_default().push(x);
            }
        }
        tally
    };
    // Each item read is removed; what is left of it is put again first, due later, behind the
    // others (a removal never goes before the put that keeps what is left).
    let mut puts = Vec::new();
    for (i, pending) in held.into_iter().enumerate() {
        let id = entries::id(entries::PENDING, &pending.sort);
        writes.push(EntryWrite::Remove(id));
        if let Some(expiries) = left.remove(&i) {
            let sort = pending.due_at(due(d.now));
            puts.push(EntryWrite::Put(Pending { sort, expiries }.to_item()));
        }
    }
    let mut failed = None;
    if !puts.is_empty() {
        failed = write_index(d, puts).await.1;
    }
    if failed.is_none() {
        failed = write_index(d, writes).await.1;
    }
    if let Some(e) = failed {
        warn!(error = %e, "could not update the journal after settling its expiries; the next sweeps read them again");
        return (tally, false);
    }
    (tally, full)
}

/// Up to 25 writes to the expiry index table in one `BatchWriteItem`, unprocessed ones sent again
/// ([`write_all`]), [`ATTEMPTS`] in all, each within the sweep's bound: how many were written,
/// and the error if any were not (unprocessed after every attempt: throttled).
pub(in crate::engine) async fn write_index<S: Store>(
    d: &Deleter<'_, S>,
    writes: Vec<EntryWrite>,
) -> (usize, Option<crate::store::StoreError>) {
    let send = |writes| {
        d.stop
            .bound("BatchWriteItem", d.store.write_entries(d.schema, writes))
    };
    let retry = Retry {
        attempts: ATTEMPTS,
        base: Duration::from_millis(50),
        cap: Duration::from_secs(1),
    };
    let (written, result) = write_all(send, writes, retry).await;
    (written, result.err().map(|(e, _)| e))
}

/// Publishes the cancellation of each of `expiries` (without its item), as of now by the events'
/// wall clock: the deliveries, in order, and the tally.
pub(super) async fn publish_cancellations<S: Store>(
    deleter: &Deleter<'_, S>,
    events: &Events,
    expiries: &[Expiry],
) -> (Vec<Delivery>, EventTally) {
    let at = events.wall.as_ref().map_or(deleter.now, |c| c.now());
    let cancellations = (expiries.iter())
        .map(|x| Publication::Cancelled(x.without_item(), at))
        .collect();
    events.hook.publish(cancellations, deleter.stop).await
}
