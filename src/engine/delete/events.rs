//! Deletes with expiry events around them, as the sweep's
//! [`ExpiryHook`](crate::engine::hook::ExpiryHook) says: notify mode deletes, then publishes what
//! the deletes owe; archive mode publishes a chunk's events first, deletes only what the sink
//! accepted, and cancels an accepted expiry whose item stays with another ttl (`reconcile`).

use super::journal::{self, publish_cancellations};
use super::{ChunkOutcome, Deleter, Expired};
use crate::engine::hook::{
    item_kib, keep_room, take_room, Delivery, Events, Expiry, Notifier, Publication, MAX_ITEM_KIB,
    SETTLE_PER_SWEEP,
};
use crate::engine::report::{EventTally, FailedKey};
use crate::store::{key_to_json, Key, Store};
use std::collections::HashSet;

/// Deletes one chunk with its events published as `events.hook` says.
pub(in crate::engine) async fn delete_with_events<S: Store>(
    deleter: &Deleter<'_, S>,
    events: &Events,
    mut chunk: Vec<Expired>,
) -> ChunkOutcome {
    let (hook, stop) = (events.hook.as_ref(), deleter.stop);
    // Archive mode announces an expiry only for an item the table was read to hold, expired, on
    // the ttl listed, right before the publish: an index entry left by an item the application
    // deleted, or whose ttl it moved, announces nothing (docs/events.md, "Archive").
    let mut settled = ChunkOutcome::default();
    if hook.archive() && !stop.reached() && !chunk.is_empty() {
        settled.confirmed += chunk.len() as u64;
        let listed: Vec<(Key, f64)> = chunk.iter().map(|e| (e.key.clone(), e.ttl)).collect();
        chunk = match deleter.read_table(chunk, &mut settled).await {
            Ok(chunk) => chunk,
            Err((e, keys)) => {
                tracing::warn!(keys = keys.len(), error = %e, "could not read the keys before publishing their expiry; left for the next sweep");
                settled.leave(keys);
                Vec::new()
            }
        };
        let cancel = settle_remembered_read(deleter, events, &listed, &chunk, &settled);
        let tally = cancel_remembered(deleter, events, cancel).await;
        settled.events.add(tally);
    }
    if chunk.is_empty() {
        return settled;
    }
    let mut out = archive_or_notify(deleter, events, chunk).await;
    out.absorb(settled);
    out
}

/// Archive mode, after the read before publishing: of the keys `listed`, an expiry accepted
/// earlier and not settled ([`crate::engine::hook::Unsettled`]) is forgotten when the read found
/// its item gone (no cancellation: `docs/events.md`, "Archive"), and answered for cancelling
/// when it found the item with another ttl than the one that expiry announced, the ttl listed.
/// Keys left unread (the read failed) stay as they are.
fn settle_remembered_read<S: Store>(
    deleter: &Deleter<'_, S>,
    events: &Events,
    listed: &[(Key, f64)],
    still: &[Expired],
    read: &ChunkOutcome,
) -> Vec<Expiry> {
    let schema = deleter.schema;
    let token = |key: &Key| schema.key_token(key);
    let still: HashSet<String> = still.iter().filter_map(|e| token(&e.key)).collect();
    let left: HashSet<String> = read.left_keys.iter().filter_map(token).collect();
    let kept: HashSet<String> = read.kept_keys.iter().filter_map(token).collect();
    let mut cancel = Vec::new();
    for (key, ttl) in listed {
        let Some(t) = token(key) else { continue };
        if still.contains(&t) || left.contains(&t) {
            continue;
        }
        let Some(remembered) = events.unsettled.forget(&t) else {
            continue;
        };
        if !kept.contains(&t) {
            continue; // gone
        }
        if remembered.ttl == *ttl {
            cancel.push(remembered);
        } else {
            // Announced on another ttl than this listing's: the next sweep's read judges it.
            events.unsettled.remember(t, remembered);
        }
    }
    cancel
}

/// Publishes the cancellation of each of `expiries` (accepted, their items since found with
/// another ttl); one the sink did not accept is remembered again, for the next sweep.
async fn cancel_remembered<S: Store>(
    deleter: &Deleter<'_, S>,
    events: &Events,
    expiries: Vec<Expiry>,
) -> EventTally {
    if expiries.is_empty() {
        return EventTally::default();
    }
    for x in &expiries {
        tracing::info!(key = %key_to_json(&x.key), "an item whose expiry was accepted by an earlier sweep and not deleted has a new ttl: cancelling the expiry");
    }
    let (deliveries, tally) = publish_cancellations(deleter, events, &expiries).await;
    for (x, delivery) in expiries.into_iter().zip(deliveries) {
        match deleter.schema.key_token(&x.key) {
            Some(t) if delivery != Delivery::Accepted => events.unsettled.remember(t, x),
            _ => {}
        }
    }
    tally
}

/// Archive mode, before a sweep's partitions: the [`SETTLE_PER_SWEEP`] expiries
/// [`crate::engine::hook::Unsettled`] has remembered longest, read again from the table
/// (consistent, key and ttl, one request): another ttl, cancelled; gone, forgotten; still on its
/// ttl, remembered for the chunk that lists it again. If the read fails, they stay remembered.
pub(in crate::engine) async fn settle_unsettled<S: Store>(
    deleter: &Deleter<'_, S>,
    events: &Events,
) -> EventTally {
    let remembered = events.unsettled.take_oldest(SETTLE_PER_SWEEP);
    if remembered.is_empty() {
        return EventTally::default();
    }
    let keys = remembered.iter().map(|(_, x)| &x.key);
    let found = match deleter.read(keys, true).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, keys = remembered.len(), "could not read the items of accepted expiries not settled; trying again at the next sweep");
            for (t, x) in remembered {
                events.unsettled.remember(t, x);
            }
            return EventTally::default();
        }
    };
    let mut cancel = Vec::new();
    for (t, x) in remembered {
        match deleter.schema.find(&found, &x.key) {
            None => {}
            Some(item) if deleter.schema.ttl_of(item) == Some(x.ttl) => {
                events.unsettled.remember(t, x);
            }
            Some(_) => cancel.push(x),
        }
    }
    cancel_remembered(deleter, events, cancel).await
}

/// [`delete_with_events`] once archive mode's keys are read.
async fn archive_or_notify<S: Store>(
    deleter: &Deleter<'_, S>,
    events: &Events,
    chunk: Vec<Expired>,
) -> ChunkOutcome {
    let (hook, stop) = (events.hook.as_ref(), deleter.stop);
    // Items read for the events are held until they are published: room for the largest items
    // first, then what they take.
    let (items, _read_room) = if hook.read_items() {
        let most = MAX_ITEM_KIB.saturating_mul(chunk.len() as u32);
        let mut room = take_room(&events.items_room, most).await;
        let items = match deleter.read(chunk.iter().map(|e| &e.key), false).await {
            Ok(items) => chunk
                .iter()
                .map(|e| deleter.schema.find(&items, &e.key).cloned())
                .collect(),
            Err(err) => {
                tracing::warn!(error = %err, "could not read the items for their events; publishing without them");
                vec![None; chunk.len()]
            }
        };
        keep_room(&mut room, items.iter().flatten().map(item_kib).sum());
        (items, room)
    } else {
        (vec![None; chunk.len()], None)
    };
    if !hook.archive() {
        let described = chunk
            .iter()
            .zip(items)
            .map(|(e, item)| (e.key.clone(), item));
        let notifier = Notifier::new(events, deleter.now, described.collect(), stop);
        let deleter = Deleter {
            notify: Some(&notifier),
            ..*deleter
        };
        let mut out = deleter.delete_chunk(chunk).await;
        out.events.add(notifier.flush().await);
        return out;
    }
    // Archive: nothing is deleted before its event was accepted.
    if stop.reached() {
        return ChunkOutcome::left(chunk);
    }
    let at = events.wall.as_ref().map_or(deleter.now, |c| c.now());
    let expiries: Vec<Expiry> = chunk
        .iter()
        .zip(&items)
        .map(|(e, item)| Expiry {
            key: e.key.clone(),
            ttl: e.ttl,
            item: item.clone(),
            at,
        })
        .collect();
    // With the expiry index table, journaled before they are published: a process that dies
    // before settling them leaves them to the next sweep of any other ([`journal`]).
    let journaled = match &events.journal {
        Some(writer) => match journal::open(deleter, writer, &expiries).await {
            Ok(pending) => Some(pending),
            Err(e) => {
                tracing::warn!(keys = chunk.len(), error = %e, "could not journal the expiries before publishing them; left for the next sweep");
                return ChunkOutcome::left(chunk);
            }
        },
        None => None,
    };
    let publications = expiries.iter().cloned().map(Publication::Expired).collect();
    let (deliveries, mut tally) = hook.publish(publications, stop).await;
    let mut refused = ChunkOutcome::default();
    let mut admitted = Vec::with_capacity(chunk.len());
    // Not known to be accepted, but perhaps (a lost answer, also of an attempt before the stop
    // came): the journal keeps them.
    let mut perhaps = Vec::new();
    for (e, delivery) in chunk.into_iter().zip(deliveries) {
        match delivery {
            Delivery::Accepted => admitted.push(e),
            Delivery::Failed(why) => {
                let reason = format!("expiry event not accepted: {why}");
                refused.failed.push(FailedKey::new(&e.key, reason));
                perhaps.push(e.key);
            }
            Delivery::Stopped => {
                perhaps.push(e.key.clone());
                refused.leave([e]);
            }
        }
    }
    let admitted_keys: Vec<Key> = admitted.iter().map(|e| e.key.clone()).collect();
    let mut out = deleter.delete_chunk(admitted).await;
    // Accepted, not deleted: an item whose ttl has changed since is owed its cancellation now;
    // no later sweep would find it in the window it has left.
    let mut kept = std::mem::take(&mut out.kept_keys);
    for key in &kept {
        tracing::info!(key = %key_to_json(key), "an item whose expiry was accepted and whose conditional delete kept it has a new ttl: cancelling the expiry");
    }
    kept.extend(reconcile(deleter, &expiries, &mut out).await);
    // What is still unsettled is remembered for the next sweeps (journaled, or in memory); the
    // rest is settled here.
    let schema = deleter.schema;
    let unsettled = out.unsettled();
    for key in admitted_keys {
        let Some(token) = schema.key_token(&key) else {
            continue;
        };
        let json = key_to_json(&key);
        let expiry = expiries.iter().find(|x| x.key == key);
        match expiry.filter(|_| unsettled.contains(&json.to_string())) {
            Some(_) if journaled.is_some() => {
                tracing::info!(key = %json, "accepted expiry not settled by its chunk: journaled for the next sweeps");
                perhaps.push(key);
            }
            Some(x) => {
                tracing::info!(key = %json, "accepted expiry not settled by its chunk: remembered for the next sweeps");
                events.unsettled.remember(token, x.without_item());
            }
            None => _ = events.unsettled.forget(&token),
        }
    }
    out.absorb(refused);
    let cancelled: Vec<Expiry> = (kept.iter())
        .filter_map(|key| expiries.iter().find(|x| x.key == *key).cloned())
        .collect();
    if !cancelled.is_empty() {
        let (deliveries, published) = publish_cancellations(deleter, events, &cancelled).await;
        tally.add(published);
        // A cancellation the sink did not take: the next sweep's read tries again.
        for (x, delivery) in cancelled.into_iter().zip(deliveries) {
            if delivery == Delivery::Accepted {
                continue;
            }
            if journaled.is_some() {
                perhaps.push(x.key);
            } else if let Some(t) = deleter.schema.key_token(&x.key) {
                events.unsettled.remember(t, x.without_item());
            }
        }
    }
    if let Some(pending) = journaled {
        journal::close(deleter, pending, &perhaps).await;
    }
    out.events = tally;
    out
}

/// Archive mode, after a chunk's deletes: the items whose expiry the sink accepted but whose
/// delete failed (`out.failed`) or was not made (`out.left_keys`), read again with one consistent
/// `BatchGetItem` (a single attempt, also when the sweep must stop) and settled as
/// `docs/events.md` ("Archive") says: gone counts as `gone`; another ttl as `skipped`, its key
/// returned, owed a cancellation. If the read fails, everything stays as it was (logged).
async fn reconcile<S: Store>(
    d: &Deleter<'_, S>,
    expiries: &[Expiry],
    out: &mut ChunkOutcome,
) -> Vec<Key> {
    let schema = d.schema;
    // A key has one outcome: failed or left, never both.
    let failed = out.failed.iter().map(|f| f.key.clone());
    let left = out.left_keys.iter().map(key_to_json);
    let unresolved: Vec<&Expiry> = failed
        .chain(left)
        .filter_map(|json| expiries.iter().find(|x| key_to_json(&x.key) == json))
        .collect();
    if unresolved.is_empty() {
        return Vec::new();
    }
    let items = match d.read(unresolved.iter().map(|x| &x.key), true).await {
        Ok(items) => items,
        Err(err) => {
            tracing::warn!(error = %err, keys = unresolved.len(), "could not re-read items whose expiry was accepted but not deleted; the next sweep publishes them again if their ttl is unchanged");
            return Vec::new();
        }
    };
    let mut cancel = Vec::new();
    for expiry in unresolved {
        let found = schema.find(&items, &expiry.key);
        let unchanged = found.map(|item| schema.ttl_of(item) == Some(expiry.ttl));
        if unchanged == Some(true) {
            continue;
        }
        let json = key_to_json(&expiry.key);
        out.failed.retain(|f| f.key != json);
        out.left_keys.retain(|k| *k != expiry.key);
        match unchanged {
            None => out.gone += 1,
            Some(_) => {
                tracing::info!(key = %json, "an item whose expiry was accepted but not deleted has a new ttl: cancelling the expiry");
                out.skipped += 1;
                cancel.push(expiry.key.clone());
            }
        }
    }
    cancel
}
