//! Deleting what a sweep found: one chunk at a time, in `BatchWriteItem` requests of 25 keys or
//! one conditional `DeleteItem` per item, with backoff and full jitter on unprocessed keys,
//! throttling and 5xx answers; keys that still fail are returned, never dropped.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use tokio::time::Instant;
use tracing::debug;

use super::report::{EventTally, FailedKey};
use super::retry::Stop;
use super::{DeleteMode, SweepOptions};
use crate::expiry::window::parse_ttl;
use crate::expiry::Timestamp;
use crate::store::{
    key_to_json, ConditionalOutcome, ErrorKind, Key, Store, StoreError, TableSchema,
};

/// Whether a failed delete may have been applied all the same: a timeout, a dropped connection
/// or a 5xx can come after DynamoDB deleted the item; throttling and validation errors cannot.
fn may_have_applied(e: &StoreError) -> bool {
    e.kind == ErrorKind::Transient
}

/// An expired item ready to delete.
#[derive(Debug, Clone)]
pub(super) struct Expired {
    pub(super) key: Key,
    pub(super) ttl: f64,
    /// The ttl exactly as read (a Number): a conditional delete requires it unchanged.
    pub(super) ttl_as_read: String,
    /// Batch mode: when the table itself was last read for it — a strongly consistent
    /// `BatchGetItem`, dated at its request; `None` while only the index has listed it (an index
    /// can lag the table without bound, so its view of a ttl never dates a send).
    pub(super) read_at: Option<Instant>,
    /// An earlier attempt to delete it may have been applied (a timeout, a dropped connection,
    /// a 5xx): a later attempt that finds it gone owes its event.
    pub(super) maybe_applied: bool,
    /// Batch mode: it aged past the bound once already and was read again.
    pub(super) reread: bool,
    /// Its entry in the expiry index table, when it was listed from one: removed once the item
    /// is judged ([`super::entries`]).
    pub(super) entry: Option<Key>,
}

/// What deleting needs of a sweeper.
pub(super) struct Deleter<'a, S> {
    pub(super) store: &'a S,
    pub(super) schema: &'a TableSchema,
    pub(super) options: &'a SweepOptions,
    /// Expiry events are published: keys whose delete may have been applied are settled before
    /// the sweep stops ([`Self::settle`]).
    pub(super) track_keys: bool,
    /// Conditional deletes return the deleted items (`ReturnValues=ALL_OLD`), for expiry events.
    pub(super) return_items: bool,
    /// Notify mode: where each delete's event is owed the moment the delete is known, and
    /// published before every wait, so a crash loses as few events as it can.
    pub(super) notify: Option<&'a dyn OwedEvents>,
}

/// Where notify mode keeps the events owed for a chunk's deletes (`super::hook::Notifier`).
pub(super) trait OwedEvents: Sync {
    /// The item with `key` (ttl as read) is deleted; `returned`: the item the delete returned.
    fn owe(&self, key: &Key, ttl: f64, returned: Option<Key>);
    /// Whether an event has been owed long enough to be published between deletes.
    fn due(&self) -> bool;
    /// Publishes what is owed; what publishing did.
    fn flush(&self) -> futures::future::BoxFuture<'_, EventTally>;
    /// Waits for room to hold one more whole item, before a delete that returns it; what
    /// publishing did, if it published what was owed to make room.
    fn room(&self) -> futures::future::BoxFuture<'_, EventTally>;
    /// Gives back the room taken for an item not returned (kept, gone, failed), keeping what
    /// the items owed take.
    fn unused_room(&self);
}

/// Outcome of deleting one chunk.
#[derive(Debug, Default)]
pub(super) struct ChunkOutcome {
    /// Each deleted item's ttl, and when its delete was acknowledged.
    pub(super) deleted: Vec<(f64, Instant)>,
    pub(super) skipped: u64,
    pub(super) gone: u64,
    pub(super) retried: u64,
    /// Requests refused by a replicated write conflict and sent again.
    pub(super) write_conflicts: u64,
    pub(super) left: u64,
    /// Batch mode: keys listed by the index, confirmed by a read of the table before their first
    /// send.
    pub(super) confirmed: u64,
    /// Batch mode: keys read too long before their send, read again.
    pub(super) reread: u64,
    /// Batch mode: keys stale again after being read again, deleted conditionally instead.
    pub(super) conditional: u64,
    /// Expiry index table entries removed once their items were judged.
    pub(super) entries_removed: u64,
    pub(super) failed: Vec<FailedKey>,
    /// The keys kept (their ttl changed).
    pub(super) kept_keys: Vec<Key>,
    /// The keys counted in `left` by a delete (not attempted, or not retried, because the sweep
    /// had to stop).
    pub(super) left_keys: Vec<Key>,
    /// What publishing the chunk's expiry events did.
    pub(super) events: EventTally,
}

impl ChunkOutcome {
    /// Adds another outcome of the same chunk.
    pub(super) fn absorb(&mut self, other: ChunkOutcome) {
        self.deleted.extend(other.deleted);
        self.skipped += other.skipped;
        self.gone += other.gone;
        self.retried += other.retried;
        self.write_conflicts += other.write_conflicts;
        self.left += other.left;
        self.confirmed += other.confirmed;
        self.reread += other.reread;
        self.conditional += other.conditional;
        self.entries_removed += other.entries_removed;
        self.failed.extend(other.failed);
        self.kept_keys.extend(other.kept_keys);
        self.left_keys.extend(other.left_keys);
        self.events.add(other.events);
    }

    /// `n` items not attempted because the sweep had to stop.
    pub(super) fn left(n: usize) -> Self {
        ChunkOutcome {
            left: n as u64,
            ..ChunkOutcome::default()
        }
    }

    /// `keys` not attempted, or not retried, because the sweep had to stop.
    fn leave(&mut self, keys: impl IntoIterator<Item = Expired>) {
        for e in keys {
            self.left += 1;
            self.left_keys.push(e.key);
        }
    }

    /// `e` is kept: its ttl changed since it was read.
    fn keep(&mut self, e: Expired) {
        self.skipped += 1;
        self.kept_keys.push(e.key);
    }
}

impl<S: Store> Deleter<'_, S> {
    /// Notify mode: `e` is deleted (or found gone after an attempt that most likely deleted it);
    /// its event is owed from now on. `returned`: the item as the delete returned it.
    fn owe_event(&self, e: &Expired, returned: Option<Key>) {
        if let Some(notifier) = self.notify {
            notifier.owe(&e.key, e.ttl, returned);
        }
    }

    /// Notify mode: publishes the events owed so far, before a wait or when they have waited
    /// long enough (`due`); what publishing did goes into `out`.
    async fn publish_owed(&self, out: &mut ChunkOutcome, only_if_due: bool) {
        if let Some(notifier) = self.notify {
            if !only_if_due || notifier.due() {
                out.events.add(notifier.flush().await);
            }
        }
    }

    /// Deletes one chunk, retrying with backoff; never returns an error, only an outcome.
    pub(super) async fn delete_chunk(
        &self,
        chunk: Vec<Expired>,
        now: Timestamp,
        stop: &Stop,
    ) -> ChunkOutcome {
        let mut out = ChunkOutcome::default();
        let chunk = drop_repeats(self.schema, chunk, &mut out);
        out.absorb(match self.options.delete_mode {
            DeleteMode::Batch => self.delete_batch(chunk, now, stop).await,
            DeleteMode::Conditional => self.delete_conditional(chunk, now, stop).await,
        });
        out
    }

    /// Prepares a chunk before it waits for a slot to send: a key listed twice goes once, and in
    /// batch mode the keys only the index has listed are confirmed by one strongly consistent
    /// `BatchGetItem` of the table, so that the read holds no send slot. Returns the keys still
    /// to delete (dated at the read's request) and what the read settled: a key gone, or one
    /// whose ttl in the table is not the one the index listed (kept). Conditional deletes check
    /// the table themselves, so conditional mode reads nothing here.
    pub(super) async fn confirm(
        &self,
        chunk: Vec<Expired>,
        stop: &Stop,
    ) -> (Vec<Expired>, ChunkOutcome) {
        let mut out = ChunkOutcome::default();
        let chunk = drop_repeats(self.schema, chunk, &mut out);
        if self.options.delete_mode != DeleteMode::Batch || stop.reached() {
            return (chunk, out);
        }
        let (unread, mut ready): (Vec<Expired>, Vec<Expired>) =
            chunk.into_iter().partition(|e| e.read_at.is_none());
        if !unread.is_empty() {
            out.confirmed += unread.len() as u64;
            ready.extend(self.read_again(unread, &mut out, stop).await);
        }
        (ready, out)
    }

    /// Deletes a chunk with `BatchWriteItem`, which cannot check the ttl, within
    /// `batch_max_read_age` of each key's read of the table, checked right before every send (see
    /// [`super::BATCH_MAX_READ_AGE`]): keys the table was never read for, or read too long ago,
    /// are read (again), in one `BatchGetItem` for the chunk. No request starts after the stop.
    async fn delete_batch(&self, chunk: Vec<Expired>, now: Timestamp, stop: &Stop) -> ChunkOutcome {
        let mut out = ChunkOutcome::default();
        let mut remaining = chunk;
        let mut attempt = 0u32;
        let mut reason = String::from("the sweep stopped before the keys were sent");
        let max_age = self.options.batch_max_read_age;
        while !remaining.is_empty() {
            if stop.reached() {
                self.give_up(remaining, &reason, &mut out, stop).await;
                return out;
            }
            // One clock reading per send; the chunk is split only when some key is stale.
            let sending_at = Instant::now();
            let stale_key = |e: &Expired| {
                e.read_at
                    .is_none_or(|at| sending_at.duration_since(at) > max_age)
            };
            if remaining.iter().any(stale_key) {
                let (stale, fresh): (Vec<Expired>, Vec<Expired>) =
                    remaining.into_iter().partition(stale_key);
                remaining = fresh;
                let (twice, once): (Vec<Expired>, Vec<Expired>) =
                    stale.into_iter().partition(|e| e.reread);
                if !once.is_empty() {
                    let unread = once.iter().filter(|e| e.read_at.is_none()).count();
                    debug!(
                        keys = once.len(),
                        unread,
                        attempt,
                        "keys not read from the table, or read too long ago: reading them"
                    );
                    out.confirmed += unread as u64;
                    out.reread += (once.len() - unread) as u64;
                    remaining.extend(self.read_again(once, &mut out, stop).await);
                }
                if !twice.is_empty() {
                    debug!(
                        keys = twice.len(),
                        attempt,
                        "keys stale again after their second read: deleting them conditionally"
                    );
                    out.conditional += twice.len() as u64;
                    out.absorb(Box::pin(self.delete_conditional(twice, now, stop)).await);
                }
                // What that took counts: every key's age is checked again before the send.
                continue;
            }
            // Borrowed: the keys stay here for a retry.
            let keys: Vec<&Key> = remaining.iter().map(|e| &e.key).collect();
            let delete = self.store.batch_delete(self.schema, &keys);
            let answer = stop.bound("BatchWriteItem", delete).await;
            // A replicated write conflict is counted when the keys go again.
            let conflict = matches!(&answer, Err(e) if e.kind == ErrorKind::WriteConflict);
            match answer {
                Ok(unprocessed) => {
                    remaining = self.acknowledge(remaining, &unprocessed, &mut out);
                    if remaining.is_empty() {
                        return out;
                    }
                    reason = "left unprocessed by BatchWriteItem".to_owned();
                }
                Err(e) => {
                    reason = e.to_string();
                    if may_have_applied(&e) {
                        for k in &mut remaining {
                            k.maybe_applied = true;
                        }
                    }
                    if !e.kind.is_retryable() {
                        attempt = self.options.max_retries;
                    }
                }
            }
            if attempt >= self.options.max_retries {
                self.fail(remaining, &reason, &mut out, stop).await;
                return out;
            }
            attempt += 1;
            let wait = self.options.backoff(attempt);
            if stop.would_pass(wait) {
                self.give_up(remaining, &reason, &mut out, stop).await;
                return out;
            }
            debug!(attempt, keys = remaining.len(), wait_ms = wait.as_millis() as u64, %reason, "retrying deletes");
            out.retried += remaining.len() as u64;
            out.write_conflicts += u64::from(conflict);
            self.publish_owed(&mut out, false).await;
            tokio::time::sleep(wait).await;
        }
        out
    }

    /// A `BatchWriteItem` answered: every key sent that `unprocessed` does not name is deleted
    /// (its event owed); returns the keys to send again. A returned key that matches no key sent
    /// (DynamoDB names them as sent) leaves it unknown which keys were deleted: then none is
    /// counted, and every key is sent again, marked as possibly deleted already.
    fn acknowledge(
        &self,
        sent: Vec<Expired>,
        unprocessed: &[Key],
        out: &mut ChunkOutcome,
    ) -> Vec<Expired> {
        let is_left = |e: &Expired| !unprocessed.is_empty() && unprocessed.contains(&e.key);
        let matched = sent.iter().filter(|e| is_left(e)).count();
        if matched != unprocessed.len() {
            tracing::warn!(
                returned = unprocessed.len(),
                matched,
                "BatchWriteItem returned unprocessed keys that match no key sent; sending the whole chunk again"
            );
            return sent
                .into_iter()
                .map(|e| Expired {
                    maybe_applied: true,
                    ..e
                })
                .collect();
        }
        let at = Instant::now();
        let mut left = Vec::with_capacity(matched);
        out.deleted.reserve(sent.len() - matched);
        for e in sent {
            if is_left(&e) {
                left.push(e);
            } else {
                out.deleted.push((e.ttl, at));
                self.owe_event(&e, None);
            }
        }
        left
    }

    /// Reads `keys` from the table (listed by the index only, or aged past the bound) with one
    /// strongly consistent `BatchGetItem`; returns those still there with the ttl listed, read as
    /// of the request (a key read a second time is marked `reread`). A key found gone counts as
    /// gone (its event owed if an earlier attempt may have deleted it); one whose ttl differs is
    /// kept. If the read fails, the keys come back marked as read again: stale, they go
    /// conditional.
    async fn read_again(
        &self,
        keys: Vec<Expired>,
        out: &mut ChunkOutcome,
        stop: &Stop,
    ) -> Vec<Expired> {
        let wanted: Vec<Key> = keys.iter().map(|e| e.key.clone()).collect();
        // Read as of the request: DynamoDB may read a key any time from then to the (last)
        // answer, so its age counts from the earliest of those instants.
        let at = Instant::now();
        let get = self.store.get_items(self.schema, wanted, true);
        let found = match stop.bound("BatchGetItem", get).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(keys = keys.len(), error = %e, "could not read stale keys again; deleting them conditionally");
                return keys
                    .into_iter()
                    .map(|e| Expired { reread: true, ..e })
                    .collect();
            }
        };
        let found = self.schema.by_key(&found);
        let ttl_attribute = &self.schema.layout.ttl_attribute;
        let mut back = Vec::with_capacity(keys.len());
        for e in keys {
            let item = self
                .schema
                .key_token(&e.key)
                .and_then(|k| found.get(&k).copied());
            match item.map(|item| item.get(ttl_attribute)) {
                None => {
                    out.gone += 1;
                    if e.maybe_applied {
                        self.owe_event(&e, None);
                    }
                }
                Some(Some(AttributeValue::N(n))) if parse_ttl(n).is_ok_and(|t| t == e.ttl) => {
                    let reread = e.read_at.is_some();
                    back.push(Expired {
                        read_at: Some(at),
                        reread,
                        ..e
                    });
                }
                Some(_) if e.maybe_applied && self.notify.is_some() => {
                    out.failed.push(self.rewritten_after_attempt(&e));
                }
                Some(_) => out.keep(e),
            }
        }
        back
    }

    /// Notify mode: `e` is there with another ttl after an attempt that may have deleted it
    /// (its answer lost). If that attempt did, the item was deleted and written again, and no
    /// event was owed for the delete; if it did not, the ttl changed and nothing was deleted.
    /// Neither can be told apart, so the key is reported, never passed over in silence.
    fn rewritten_after_attempt(&self, e: &Expired) -> FailedKey {
        FailedKey {
            key: key_to_json(&e.key),
            reason: "its ttl changed after an attempt that may have deleted it (the answer was \
                     lost): if that attempt deleted it, the item was written again since and no \
                     expiry event was sent"
                .to_owned(),
        }
    }

    /// The sweep stops with `keys` unsent or waiting for a retry (`reason`: the last outcome). Keys
    /// an earlier attempt may have deleted are settled ([`Self::settle`]); the rest are left.
    async fn give_up(&self, keys: Vec<Expired>, reason: &str, out: &mut ChunkOutcome, stop: &Stop) {
        let (maybe, unsent): (Vec<Expired>, Vec<Expired>) =
            keys.into_iter().partition(|e| e.maybe_applied);
        out.leave(unsent);
        if !maybe.is_empty() {
            self.settle(maybe, "stopped", reason, out, stop).await;
        }
    }

    /// The retries of `keys` ran out (`reason`: the last outcome): they failed. With expiry
    /// events, the keys an earlier attempt may have deleted are settled first
    /// ([`Self::settle`]): one found gone was deleted, and its event is owed.
    async fn fail(&self, keys: Vec<Expired>, reason: &str, out: &mut ChunkOutcome, stop: &Stop) {
        let (maybe, failed): (Vec<Expired>, Vec<Expired>) = keys
            .into_iter()
            .partition(|e| e.maybe_applied && self.track_keys);
        out.failed.extend(failed.iter().map(|e| FailedKey {
            key: key_to_json(&e.key),
            reason: reason.to_owned(),
        }));
        if !maybe.is_empty() {
            self.settle(maybe, "gave up", reason, out, stop).await;
        }
    }

    /// The sweep must stop (`what`: "stopped"), or has given up (`what`: "gave up"), while `keys`
    /// wait for a retry after an attempt that may have been applied (`reason`: the last outcome).
    /// Without expiry events they are left. With them, one consistent read
    /// settles what it can (`docs/events.md`, "Notify"): a key found gone is owed its event; one
    /// still there, or every key if the read fails, is reported as failed, never counted as left
    /// (the attempt may yet be applied after the read, and then no event would follow).
    async fn settle(
        &self,
        keys: Vec<Expired>,
        what: &str,
        reason: &str,
        out: &mut ChunkOutcome,
        stop: &Stop,
    ) {
        if !self.track_keys {
            out.leave(keys);
            return;
        }
        let wanted: Vec<Key> = keys.iter().map(|e| e.key.clone()).collect();
        let get = self.store.get_items(self.schema, wanted, true);
        match stop.bound("BatchGetItem", get).await {
            Ok(found) => {
                for e in keys {
                    if self.schema.find(&found, &e.key).is_some() {
                        // Archive mode accepted the event before the delete; notify mode owes
                        // it only for a delete it sees.
                        let event = if self.notify.is_some() {
                            "if that attempt deletes it later no expiry event is sent"
                        } else {
                            "its expiry event was accepted before the delete"
                        };
                        out.failed.push(FailedKey {
                            key: key_to_json(&e.key),
                            reason: format!(
                                "{what} after an attempt that may still delete it ({reason}); \
                                 it was there when checked; {event}"
                            ),
                        });
                    } else {
                        out.gone += 1;
                        self.owe_event(&e, None);
                    }
                }
            }
            Err(read) => {
                tracing::warn!(keys = keys.len(), error = %read, "deletes whose outcome is unknown; reported as failed");
                out.failed.extend(keys.iter().map(|e| FailedKey {
                    key: key_to_json(&e.key),
                    reason: format!(
                        "{what} after an attempt that may have deleted it ({reason}); \
                         the check that followed failed too ({read})"
                    ),
                }));
            }
        }
    }

    /// Deletes a chunk one conditional `DeleteItem` at a time, each requiring the item's ttl
    /// to be the one read and expired at `now`.
    async fn delete_conditional(
        &self,
        chunk: Vec<Expired>,
        now: Timestamp,
        stop: &Stop,
    ) -> ChunkOutcome {
        let mut out = ChunkOutcome::default();
        let mut items = chunk.into_iter();
        while let Some(mut e) = items.next() {
            if stop.reached() {
                out.leave(std::iter::once(e).chain(items));
                return out;
            }
            // Events owed for a while go out between items, not only before a wait.
            self.publish_owed(&mut out, true).await;
            let mut attempt = 0u32;
            let notify_items = self.notify.filter(|_| self.return_items);
            if let Some(notifier) = notify_items {
                out.events.add(notifier.room().await);
            }
            loop {
                let delete = self.store.delete_if_expired(
                    self.schema,
                    e.key.clone(),
                    &e.ttl_as_read,
                    now,
                    self.return_items,
                );
                let result = stop.bound("DeleteItem", delete).await;
                let err: StoreError = match result {
                    Ok((ConditionalOutcome::Deleted, returned)) => {
                        out.deleted.push((e.ttl, Instant::now()));
                        self.owe_event(&e, returned);
                        break;
                    }
                    Ok((ConditionalOutcome::Kept, _))
                        if e.maybe_applied && self.notify.is_some() =>
                    {
                        out.failed.push(self.rewritten_after_attempt(&e));
                        break;
                    }
                    Ok((ConditionalOutcome::Kept, _)) => {
                        out.keep(e);
                        break;
                    }
                    Ok((ConditionalOutcome::Gone, _)) => {
                        out.gone += 1;
                        // Most likely deleted by an attempt whose answer was lost: its event is
                        // owed (a duplicate, same id, if someone else deleted it).
                        if e.maybe_applied {
                            self.owe_event(&e, None);
                        }
                        break;
                    }
                    Err(err) => err,
                };
                e.maybe_applied |= may_have_applied(&err);
                if !err.kind.is_retryable() || attempt >= self.options.max_retries {
                    self.fail(vec![e], &err.to_string(), &mut out, stop).await;
                    break;
                }
                attempt += 1;
                let wait = self.options.backoff(attempt);
                if stop.would_pass(wait) {
                    out.leave(items);
                    self.give_up(vec![e], &err.to_string(), &mut out, stop)
                        .await;
                    if let Some(notifier) = notify_items {
                        notifier.unused_room();
                    }
                    return out;
                }
                out.retried += 1;
                out.write_conflicts += u64::from(err.kind == ErrorKind::WriteConflict);
                self.publish_owed(&mut out, false).await;
                tokio::time::sleep(wait).await;
            }
            if let Some(notifier) = notify_items {
                notifier.unused_room();
            }
        }
        out
    }
}

/// A chunk with each key once: a key listed twice (its ttl rewritten between two query pages,
/// still expired) would make DynamoDB refuse the whole `BatchWriteItem` or `BatchGetItem`
/// (`ValidationException`). Of two listings the later ttl stays (a GSI sorted by ttl lists a
/// rewritten key again further on); the other counts as skipped. The delete that follows checks
/// the ttl kept against the table as always.
fn drop_repeats(schema: &TableSchema, chunk: Vec<Expired>, out: &mut ChunkOutcome) -> Vec<Expired> {
    let mut once: Vec<Expired> = Vec::with_capacity(chunk.len());
    let mut at: HashMap<String, usize> = HashMap::with_capacity(chunk.len());
    for e in chunk {
        // A key without its key attributes (never from `check_item`) is kept as it is.
        let Some(token) = schema.key_token(&e.key) else {
            once.push(e);
            continue;
        };
        match at.get(&token).map(|&i| &mut once[i]) {
            Some(first) => {
                debug!(key = %key_to_json(&e.key), "key listed twice in one chunk: sent once");
                out.skipped += 1;
                if e.ttl > first.ttl {
                    *first = e;
                }
            }
            None => {
                at.insert(token, once.len());
                once.push(e);
            }
        }
    }
    once
}
