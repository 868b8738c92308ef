//! Deleting what a sweep found: one chunk at a time, in `BatchWriteItem` requests of 25 keys or
//! one conditional `DeleteItem` per item, with backoff and full jitter on unprocessed keys,
//! throttling and 5xx answers; keys that still fail are returned, never dropped.

use tokio::time::Instant;
use tracing::debug;

use super::report::{EventTally, FailedKey};
use super::retry::Stop;
use super::{DeleteMode, SweepOptions};
use crate::expiry::Timestamp;
use crate::store::{
    key_to_json, ConditionalOutcome, ErrorKind, Key, Store, StoreError, StoreExt, TableSchema,
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
    /// When the index page that listed it arrived.
    pub(super) read_at: Instant,
}

/// What deleting needs of a sweeper.
pub(super) struct Deleter<'a, S> {
    pub(super) store: &'a S,
    pub(super) schema: &'a TableSchema,
    pub(super) options: &'a SweepOptions,
    /// Collect the keys deleted and kept, for expiry events.
    pub(super) track_keys: bool,
    /// Conditional deletes return the deleted items (`ReturnValues=ALL_OLD`), for expiry events.
    pub(super) return_items: bool,
    /// Notify mode: where each delete's event is owed the moment the delete is known, and
    /// published before every wait, so a crash loses as few events as it can.
    pub(super) notify: Option<&'a dyn OwedEvents>,
}

/// Where notify mode keeps the events owed for a chunk's deletes (`super::hook::Notifier`).
pub(super) trait OwedEvents: Sync {
    /// The item with `key` (ttl as read) is deleted; `returned`: the item as the delete
    /// returned it.
    fn owe(&self, key: &Key, ttl: f64, returned: Option<Key>);
    /// Whether an event has been owed long enough to be published between deletes.
    fn due(&self) -> bool;
    /// Publishes what is owed; what publishing did.
    fn flush(&self)
        -> std::pin::Pin<Box<dyn std::future::Future<Output = EventTally> + Send + '_>>;
}

/// Outcome of deleting one chunk.
#[derive(Debug, Default)]
pub(super) struct ChunkOutcome {
    pub(super) deleted_ttls: Vec<f64>,
    pub(super) deleted_at: Vec<Instant>,
    pub(super) skipped: u64,
    pub(super) gone: u64,
    pub(super) retried: u64,
    pub(super) left: u64,
    /// Batch mode: keys read too long before their send, deleted conditionally instead.
    pub(super) conditional: u64,
    pub(super) failed: Vec<FailedKey>,
    /// With `track_keys`: the keys kept (their ttl changed).
    pub(super) kept_keys: Vec<Key>,
    /// With `track_keys`: the keys counted in `left` by a conditional delete (not attempted, or
    /// not retried, because the sweep had to stop).
    pub(super) left_keys: Vec<Key>,
    /// What publishing the chunk's expiry events did.
    pub(super) events: EventTally,
}

impl ChunkOutcome {
    /// Adds another outcome of the same chunk.
    pub(super) fn absorb(&mut self, other: ChunkOutcome) {
        self.deleted_ttls.extend(other.deleted_ttls);
        self.deleted_at.extend(other.deleted_at);
        self.skipped += other.skipped;
        self.gone += other.gone;
        self.retried += other.retried;
        self.left += other.left;
        self.conditional += other.conditional;
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
        match self.options.delete_mode {
            DeleteMode::Batch => self.delete_batch(chunk, now, stop).await,
            DeleteMode::Conditional => self.delete_conditional(chunk, now, stop, false).await,
        }
    }

    /// Deletes a chunk with `BatchWriteItem`, which cannot check the ttl: a key whose read is
    /// older than `batch_max_read_age` when its turn comes — first send or retry — is deleted
    /// conditionally instead, so a key deleted and written again by the application while the
    /// chunk waited is kept.
    async fn delete_batch(&self, chunk: Vec<Expired>, now: Timestamp, stop: &Stop) -> ChunkOutcome {
        let mut out = ChunkOutcome::default();
        let mut remaining = chunk;
        let mut attempt = 0u32;
        loop {
            // Checked right before every send: a chunk may have waited for a permit, for the
            // chunks before it or for a backoff.
            // One clock reading per send; the chunk is split only when some key is stale.
            let max_age = self.options.batch_max_read_age;
            let sending_at = Instant::now();
            let stale_key = |e: &Expired| sending_at.duration_since(e.read_at) > max_age;
            if remaining.iter().any(stale_key) {
                let (stale, fresh): (Vec<Expired>, Vec<Expired>) =
                    remaining.into_iter().partition(stale_key);
                remaining = fresh;
                debug!(
                    keys = stale.len(),
                    attempt, "keys read too long ago: deleting them conditionally"
                );
                out.conditional += stale.len() as u64;
                // Keys sent before (attempt > 0) may already be gone: their conditional attempt
                // is a retry.
                out.absorb(Box::pin(self.delete_conditional(stale, now, stop, attempt > 0)).await);
            }
            if remaining.is_empty() {
                return out;
            }
            // Borrowed: the keys stay here for a retry.
            let keys: Vec<&Key> = remaining.iter().map(|e| &e.key).collect();
            let result = self.store.batch_delete(self.schema, keys).await;
            let (retry, reason, maybe_applied) = match result {
                Ok(unprocessed) => {
                    let at = Instant::now();
                    out.deleted_ttls.reserve(remaining.len());
                    out.deleted_at.reserve(remaining.len());
                    let mut left = Vec::with_capacity(unprocessed.len());
                    for e in remaining {
                        if unprocessed.is_empty() || !unprocessed.contains(&e.key) {
                            out.deleted_ttls.push(e.ttl);
                            out.deleted_at.push(at);
                            self.owe_event(&e, None);
                        } else {
                            left.push(e);
                        }
                    }
                    remaining = left;
                    if remaining.is_empty() {
                        return out;
                    }
                    (true, "left unprocessed by BatchWriteItem".to_owned(), false)
                }
                Err(e) => (e.kind.is_retryable(), e.to_string(), may_have_applied(&e)),
            };
            if !retry || attempt >= self.options.max_retries {
                out.failed.extend(remaining.iter().map(|e| FailedKey {
                    key: key_to_json(&e.key),
                    reason: reason.clone(),
                }));
                return out;
            }
            attempt += 1;
            let wait = self.options.backoff(attempt);
            if stop.would_pass(wait) {
                if maybe_applied {
                    self.settle(remaining, &reason, &mut out).await;
                } else {
                    out.left += remaining.len() as u64;
                }
                return out;
            }
            debug!(attempt, keys = remaining.len(), wait_ms = wait.as_millis() as u64, %reason, "retrying deletes");
            out.retried += remaining.len() as u64;
            self.publish_owed(&mut out, false).await;
            tokio::time::sleep(wait).await;
        }
    }

    /// The sweep must stop while `keys` wait for a retry after an attempt that may have been
    /// applied (`reason`). With expiry events (`track_keys`) their fate decides whether an event
    /// is owed, so one consistent read settles what it can: a key found gone was most likely
    /// deleted by that attempt and is owed its event (as a retry finding it gone would). A key
    /// still there is reported as failed, by key: the attempt that timed out may yet be applied
    /// after the read (a request outlives its client's timeout), and then no event would follow;
    /// the next sweep deletes it, with its event, if it was not. If the read fails too, the keys
    /// are reported as failed as well — never silently counted as left. Without events they are
    /// simply left.
    async fn settle(&self, keys: Vec<Expired>, reason: &str, out: &mut ChunkOutcome) {
        if !self.track_keys {
            out.left += keys.len() as u64;
            return;
        }
        let wanted: Vec<Key> = keys.iter().map(|e| e.key.clone()).collect();
        match self.store.get_items(self.schema, wanted).await {
            Ok(found) => {
                for e in keys {
                    let present = found
                        .iter()
                        .any(|item| self.schema.key_of(item).as_ref() == Some(&e.key));
                    if present {
                        out.failed.push(FailedKey {
                            key: key_to_json(&e.key),
                            reason: format!(
                                "stopped after an attempt that may still delete it ({reason}); \
                                 it was there when checked, and if that attempt deletes it later \
                                 no expiry event is sent"
                            ),
                        });
                    } else {
                        out.gone += 1;
                        self.owe_event(&e, None);
                    }
                }
            }
            Err(read) => {
                tracing::warn!(keys = keys.len(), error = %read, "stopping with deletes whose outcome is unknown; reported as failed");
                out.failed.extend(keys.iter().map(|e| FailedKey {
                    key: key_to_json(&e.key),
                    reason: format!(
                        "stopped after an attempt that may have deleted it ({reason}); \
                         the check that followed failed too ({read})"
                    ),
                }));
            }
        }
    }

    /// Deletes a chunk one conditional `DeleteItem` at a time; `retrying`: the keys were sent
    /// before (by a `BatchWriteItem` whose answer may have been lost).
    async fn delete_conditional(
        &self,
        chunk: Vec<Expired>,
        now: Timestamp,
        stop: &Stop,
        retrying: bool,
    ) -> ChunkOutcome {
        let mut out = ChunkOutcome::default();
        let mut items = chunk.into_iter();
        while let Some(e) = items.next() {
            if stop.reached() {
                out.left += 1 + items.len() as u64;
                if self.track_keys {
                    out.left_keys.push(e.key);
                    out.left_keys.extend(items.map(|e| e.key));
                }
                return out;
            }
            // Events owed for a while go out between items, not only before a wait.
            self.publish_owed(&mut out, true).await;
            let mut attempt = 0u32;
            loop {
                let result = if self.return_items {
                    self.store
                        .delete_if_expired_returning(self.schema, e.key.clone(), now)
                        .await
                } else {
                    self.store
                        .delete_if_expired(self.schema, e.key.clone(), now)
                        .await
                        .map(|outcome| (outcome, None))
                };
                let err: StoreError = match result {
                    Ok((ConditionalOutcome::Deleted, returned)) => {
                        out.deleted_ttls.push(e.ttl);
                        out.deleted_at.push(Instant::now());
                        self.owe_event(&e, returned);
                        break;
                    }
                    Ok((ConditionalOutcome::Kept, _)) => {
                        out.skipped += 1;
                        if self.track_keys {
                            out.kept_keys.push(e.key);
                        }
                        break;
                    }
                    Ok((ConditionalOutcome::Gone, _)) => {
                        out.gone += 1;
                        // Found gone on a retry: most likely deleted by the attempt whose answer
                        // was lost (a timeout, a dropped connection), so its event is owed (a
                        // duplicate, with the same id, if someone else deleted it).
                        if attempt > 0 || retrying {
                            self.owe_event(&e, None);
                        }
                        break;
                    }
                    Err(err) => err,
                };
                if !err.kind.is_retryable() || attempt >= self.options.max_retries {
                    out.failed.push(FailedKey {
                        key: key_to_json(&e.key),
                        reason: err.to_string(),
                    });
                    break;
                }
                attempt += 1;
                let wait = self.options.backoff(attempt);
                if stop.would_pass(wait) {
                    out.left += items.len() as u64;
                    if self.track_keys {
                        out.left_keys.extend(items.map(|e| e.key));
                    }
                    if may_have_applied(&err) {
                        self.settle(vec![e], &err.to_string(), &mut out).await;
                    } else {
                        out.left += 1;
                        if self.track_keys {
                            out.left_keys.push(e.key);
                        }
                    }
                    return out;
                }
                out.retried += 1;
                self.publish_owed(&mut out, false).await;
                tokio::time::sleep(wait).await;
            }
        }
        out
    }
}
