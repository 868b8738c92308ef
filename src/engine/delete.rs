//! Deleting what a sweep found: one chunk at a time, in `BatchWriteItem` requests of 25 keys or
//! one conditional `DeleteItem` per item, with backoff and full jitter on unprocessed keys,
//! throttling and 5xx answers; keys that still fail are returned, never dropped. Each mode's
//! loop is in its own file ([`batch`], [`conditional`]); what they share is here.

mod batch;
mod conditional;
mod events;
mod journal;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use tracing::debug;

pub(super) use events::{delete_with_events, settle_unsettled};
pub(super) use journal::{settle as settle_journal, write_index};

use super::hook::{Events, Notifier};
use super::report::{EventTally, FailedKey};
use super::retry::Stop;
use super::{DeleteMode, SweepOptions};
use crate::expiry::Timestamp;
use crate::store::{key_to_json, lock, Backoff, ErrorKind, Key, Store, StoreError, TableSchema};

/// Why keys were not sent: the sweep had to stop first.
const STOPPED: &str = "the sweep stopped before the keys were sent";

/// Whether a failed delete may have been applied all the same: a timeout, a dropped connection
/// or a 5xx can come after DynamoDB deleted the item; throttling and validation errors cannot.
fn may_have_applied(e: &StoreError) -> bool {
    e.kind == ErrorKind::Transient
}

/// An expired item ready to delete.
#[derive(Debug, Clone, Default)]
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
    /// Listed from a pack of the expiry index table ([`super::packs`]): if it is not settled, it
    /// is carried into a new pack.
    pub(super) packed: bool,
}

/// When a read of the table was asked, by both clocks: the monotonic one does not run while a
/// Lambda is frozen or a host sleeps, the wall one can be stepped; the read is as old as the
/// larger of its two ages.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dated {
    pub(super) at: Instant,
    pub(super) wall: Timestamp,
}

impl Dated {
    /// Now: the monotonic clock's reading and `wall`'s.
    pub(super) fn now(wall: Timestamp) -> Self {
        let at = Instant::now();
        Dated { at, wall }
    }

    /// How old something dated `self` is at `now`, by the clock that says older.
    fn age_at(&self, now: Dated) -> Duration {
        let wall_ms = now.wall.millis_since(self.wall).max(0).unsigned_abs();
        let mono = now.at.saturating_duration_since(self.at);
        mono.max(Duration::from_millis(wall_ms))
    }
}

/// Keys confirmed by the table ahead of a tick: by key ([`TableSchema::key_token`]), the ttl read
/// and when the read was asked ([`Dated`]). Kept across sweeps (and a Lambda's invocations), so
/// a read is fresh only while its age by both clocks is within the batch bound. Bounded by the
/// sweep's read-ahead budget; the stale entries are dropped at each confirmation.
#[derive(Debug, Default)]
pub(super) struct Confirmed(Mutex<HashMap<String, (String, Dated)>>);

impl Confirmed {
    /// Records reads asked at `asked`: (key token, the ttl as read) each.
    pub(super) fn insert(&self, reads: impl IntoIterator<Item = (String, String)>, asked: Dated) {
        let mut confirmed = lock(&self.0);
        confirmed.extend(reads.into_iter().map(|(token, ttl)| (token, (ttl, asked))));
    }

    /// Drops the reads older than `max_age` at `now` by either clock.
    pub(super) fn forget_older(&self, now: Dated, max_age: Duration) {
        lock(&self.0).retain(|_, (_, asked)| asked.age_at(now) <= max_age);
    }

    /// The read of `e`'s key with its ttl as read, if one was made ahead within `max_age` at
    /// `now` by both clocks; taken. Dated on the monotonic clock as old as the older clock says,
    /// so that the check before the send counts the age the wall clock saw.
    pub(super) fn take(
        &self,
        schema: &TableSchema,
        e: &Expired,
        max_age: Duration,
        now: Dated,
    ) -> Option<Instant> {
        let mut confirmed = lock(&self.0);
        if confirmed.is_empty() {
            return None;
        }
        let (ttl, asked) = confirmed.remove(&schema.key_token(&e.key)?)?;
        let age = asked.age_at(now);
        if ttl != e.ttl_as_read || age > max_age {
            return None;
        }
        now.at.checked_sub(age)
    }
}

/// What deleting needs of a sweeper: items expired at `now` are deleted, no request starts after
/// `stop`.
pub(super) struct Deleter<'a, S> {
    pub(super) store: &'a S,
    pub(super) schema: &'a TableSchema,
    pub(super) options: &'a SweepOptions,
    pub(super) now: Timestamp,
    pub(super) stop: &'a Stop,
    /// With expiry events, keys whose delete may have been applied are settled before the sweep
    /// stops ([`Self::give_up`]), and conditional deletes return the deleted items
    /// (`ReturnValues=ALL_OLD`) if the hook wants them.
    pub(super) events: Option<&'a Events>,
    /// Notify mode: where each delete's event is owed the moment the delete is known, and
    /// published before every wait, so a crash loses as few events as it can.
    pub(super) notify: Option<&'a Notifier<'a>>,
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
    /// Batch mode: keys listed by the index, confirmed by a read of the table before their first
    /// send.
    pub(super) confirmed: u64,
    /// Batch mode: keys read too long before their send, read again.
    pub(super) reread: u64,
    /// Batch mode: keys stale again after being read again, deleted conditionally instead.
    pub(super) conditional: u64,
    /// Expiry index table entries removed once their items were judged.
    pub(super) entries_removed: u64,
    /// Keys listed from packs and not settled (failed or left), written into a new pack for the
    /// next sweep ([`super::packs`]).
    pub(super) carried: u64,
    /// Whether everything of the chunk's packs to carry was carried (`None`: nothing was to
    /// carry): then the chunk needs no other sweep to read its packs again.
    pub(super) carried_all: Option<bool>,
    pub(super) failed: Vec<FailedKey>,
    /// The keys kept (their ttl changed).
    pub(super) kept_keys: Vec<Key>,
    /// The keys left: not attempted, or not retried, because the sweep had to stop (or, in
    /// archive mode, their events were not published before it). Each is named, so that its
    /// expiry index entry stays for the next sweep.
    pub(super) left_keys: Vec<Key>,
    /// What publishing the chunk's expiry events did.
    pub(super) events: EventTally,
}

impl ChunkOutcome {
    /// The keys (DynamoDB JSON) the chunk did not settle: failed, or left at the stop.
    pub(super) fn unsettled(&self) -> HashSet<String> {
        let failed = self.failed.iter().map(|f| f.key.to_string());
        let left = self.left_keys.iter().map(|k| key_to_json(k).to_string());
        failed.chain(left).collect()
    }

    /// Adds another outcome of the same chunk.
    pub(super) fn absorb(&mut self, other: ChunkOutcome) {
        add_counts!(self, other; skipped, gone, retried, write_conflicts, confirmed, reread,
            conditional, entries_removed, carried);
        self.deleted.extend(other.deleted);
        self.failed.extend(other.failed);
        self.kept_keys.extend(other.kept_keys);
        self.left_keys.extend(other.left_keys);
        self.events.add(other.events);
    }

    /// `chunk` not attempted because the sweep had to stop.
    pub(super) fn left(chunk: Vec<Expired>) -> Self {
        let mut out = ChunkOutcome::default();
        out.leave(chunk);
        out
    }

    /// `keys` not attempted, or not retried, because the sweep had to stop.
    pub(super) fn leave(&mut self, keys: impl IntoIterator<Item = Expired>) {
        self.left_keys.extend(keys.into_iter().map(|e| e.key));
    }
}

impl<S: Store> Deleter<'_, S> {
    /// One strongly consistent `BatchGetItem` of the items of `keys` (`ttl_only`: their key
    /// attributes and ttl), within the stop.
    async fn read<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k Key>,
        ttl_only: bool,
    ) -> Result<Vec<Key>, StoreError> {
        let keys = keys.into_iter().cloned().collect();
        let get = self.store.get_items(self.schema, keys, ttl_only);
        self.stop.bound("BatchGetItem", get).await
    }

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
        if let Some(notifier) = self.notify.filter(|n| !only_if_due || n.due()) {
            out.events.add(notifier.flush().await);
        }
    }

    /// Deletes one chunk of [`Self::confirm`]'s keys (each once), retrying with backoff; never
    /// returns an error, only an outcome.
    pub(super) async fn delete_chunk(&self, chunk: Vec<Expired>) -> ChunkOutcome {
        match self.options.delete_mode {
            DeleteMode::Batch => self.delete_batch(chunk).await,
            DeleteMode::Conditional => self.delete_conditional(chunk).await,
        }
    }

    /// Prepares a chunk before it waits for a slot to send: a key listed twice goes once, and in
    /// batch mode the keys only the index has listed are read from the table
    /// ([`Self::read_again`]), so that the read holds no send slot. Returns the keys still to
    /// delete and what the read settled. Conditional deletes check the table themselves, so
    /// conditional mode reads nothing here (archive mode reads the table right before it
    /// publishes: [`delete_with_events`]).
    pub(super) async fn confirm(&self, chunk: Vec<Expired>) -> (Vec<Expired>, ChunkOutcome) {
        let mut out = ChunkOutcome::default();
        let chunk = drop_repeats(self.schema, chunk, &mut out);
        if self.options.delete_mode != DeleteMode::Batch || self.stop.reached() {
            return (chunk, out);
        }
        let (unread, mut ready): (Vec<Expired>, Vec<Expired>) =
            chunk.into_iter().partition(|e| e.read_at.is_none());
        if !unread.is_empty() {
            out.confirmed += unread.len() as u64;
            ready.extend(self.read_again(unread, &mut out).await);
        }
        (ready, out)
    }

    /// `e` is there with another ttl than the one read: it is kept. In notify mode after an
    /// attempt that may have deleted it (its answer lost), though: if that attempt did, the item
    /// was deleted and written again, and no event was owed for the delete; if it did not, the
    /// ttl changed and nothing was deleted. Neither can be told apart, so the key is reported,
    /// never passed over in silence.
    fn changed(&self, e: Expired, out: &mut ChunkOutcome) {
        if !(e.maybe_applied && self.notify.is_some()) {
            out.skipped += 1;
            out.kept_keys.push(e.key);
            return;
        }
        let reason = "its ttl changed after an attempt that may have deleted it (the answer was \
                      lost): if that attempt deleted it, the item was written again since and no \
                      expiry event was sent";
        out.failed.push(FailedKey::new(&e.key, reason));
    }

    /// After a failed attempt of `keys` keys (`reason`, and `kind` the error's; `None`: left
    /// unprocessed): `Ok` once the backoff before the next attempt has passed, the events owed
    /// published first; `Err(stopped)`, with no wait, when the retries ran out, or (`stopped`)
    /// when the wait would pass the stop.
    async fn backoff(
        &self,
        backoff: &mut Backoff,
        keys: usize,
        reason: &str,
        kind: Option<ErrorKind>,
        out: &mut ChunkOutcome,
    ) -> Result<(), bool> {
        if !kind.is_none_or(ErrorKind::is_retryable) {
            return Err(false);
        }
        let Some(wait) = backoff.next_wait() else {
            return Err(false);
        };
        if self.stop.would_pass(wait) {
            return Err(true);
        }
        let (attempt, wait_ms) = (backoff.made(), wait.as_millis() as u64);
        debug!(attempt, keys, wait_ms, %reason, "retrying deletes");
        out.retried += keys as u64;
        out.write_conflicts += u64::from(kind == Some(ErrorKind::WriteConflict));
        self.publish_owed(out, false).await;
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// `keys` go no further (`reason`: the last outcome): the sweep must stop (`stopped`) with them
    /// unsent or waiting for a retry, and they are left, or their retries ran out, and they
    /// failed. With expiry events, the keys an earlier attempt may have deleted are settled
    /// instead: one consistent read settles what it can (`docs/events.md`, "Notify"): a key found
    /// gone is owed its event; one still there, or every key if the read fails, is reported as
    /// failed, never counted as left (the attempt may yet be applied after the read, and then no
    /// event would follow).
    async fn give_up(
        &self,
        keys: Vec<Expired>,
        reason: &str,
        out: &mut ChunkOutcome,
        stopped: bool,
    ) {
        let (keys, rest): (Vec<Expired>, Vec<Expired>) = keys
            .into_iter()
            .partition(|e| e.maybe_applied && self.events.is_some());
        if stopped {
            out.leave(rest);
        } else {
            out.failed
                .extend(rest.iter().map(|e| FailedKey::new(&e.key, reason)));
        }
        if keys.is_empty() {
            return;
        }
        let what = if stopped { "stopped" } else { "gave up" };
        let found = match self.read(keys.iter().map(|e| &e.key), true).await {
            Ok(found) => found,
            Err(read) => {
                // Named here too: a Lambda sweep dropped at its deadline reports no failed key.
                let named: Vec<String> = keys
                    .iter()
                    .map(|e| key_to_json(&e.key).to_string())
                    .collect();
                tracing::warn!(keys = %named.join(" "), error = %read, "deletes whose outcome is unknown; reported as failed");
                let reason = format!(
                    "{what} after an attempt that may have deleted it ({reason}); the check that \
                     followed failed too ({read})"
                );
                out.failed
                    .extend(keys.iter().map(|e| FailedKey::new(&e.key, &reason)));
                return;
            }
        };
        // Archive mode accepted the event before the delete; notify mode owes it only for a
        // delete it sees.
        let event = if self.notify.is_some() {
            "if that attempt deletes it later no expiry event is sent"
        } else {
            "its expiry event was accepted before the delete"
        };
        let conditional = self.options.delete_mode == DeleteMode::Conditional;
        for e in keys {
            let Some(item) = self.schema.find(&found, &e.key) else {
                out.gone += 1;
                self.owe_event(&e, None);
                continue;
            };
            // Another ttl: an attempt still in flight requires the one read, so none can delete
            // it any more. Kept, as a refused delete is (archive mode cancels its expiry).
            if conditional && self.schema.ttl_of(item) != Some(e.ttl) {
                self.changed(e, out);
                continue;
            }
            let reason = format!(
                "{what} after an attempt that may still delete it ({reason}); it was there when \
                 checked; {event}"
            );
            out.failed.push(FailedKey::new(&e.key, reason));
        }
    }
}

/// A chunk with each key once: a key listed twice (its ttl rewritten between two query pages,
/// still expired) would make DynamoDB refuse the whole `BatchWriteItem` or `BatchGetItem`
/// (`ValidationException`). Of two listings the later ttl stays (a GSI sorted by ttl lists a
/// rewritten key again further on); the other counts as skipped. The delete that follows checks
/// the ttl kept against the table as always.
fn drop_repeats(schema: &TableSchema, chunk: Vec<Expired>, out: &mut ChunkOutcome) -> Vec<Expired> {
    // Most chunks name each key once: told by the keys' hashes, without a token per key.
    let mut hashes: Vec<u64> = chunk
        .iter()
        .filter_map(|e| schema.key_hash(&e.key))
        .collect();
    hashes.sort_unstable();
    if hashes.windows(2).all(|pair| pair[0] != pair[1]) {
        return chunk;
    }
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
