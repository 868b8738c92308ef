//! Batch mode: `BatchWriteItem`, which cannot check a ttl, sent only within the bound of each
//! key's strongly consistent read of the table.

use tokio::time::Instant;
use tracing::debug;

use super::{may_have_applied, ChunkOutcome, Deleter, Expired, STOPPED};
use crate::store::{Backoff, Key, Store};

impl<S: Store> Deleter<'_, S> {
    /// Deletes a chunk with `BatchWriteItem`, which cannot check the ttl, within
    /// `batch_max_read_age` of each key's read of the table, checked right before every send (see
    /// [`crate::engine::BATCH_MAX_READ_AGE`]): keys the table was never read for, or read too long
    /// ago, are read (again), in one `BatchGetItem` for the chunk. No request starts after the
    /// stop.
    pub(super) async fn delete_batch(&self, mut remaining: Vec<Expired>) -> ChunkOutcome {
        let stop = self.stop;
        let mut out = ChunkOutcome::default();
        let mut backoff = Backoff::new(self.options.retry);
        let mut reason = String::from(STOPPED);
        let max_age = self.options.batch_max_read_age;
        while !remaining.is_empty() {
            if stop.reached() {
                self.give_up(remaining, &reason, &mut out, true).await;
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
                        attempt = backoff.made(),
                        "keys not read from the table, or read too long ago: reading them"
                    );
                    out.confirmed += unread as u64;
                    out.reread += (once.len() - unread) as u64;
                    remaining.extend(self.read_again(once, &mut out).await);
                }
                if !twice.is_empty() {
                    debug!(
                        keys = twice.len(),
                        attempt = backoff.made(),
                        "keys stale again after their second read: deleting them conditionally"
                    );
                    out.conditional += twice.len() as u64;
                    out.absorb(Box::pin(self.delete_conditional(twice)).await);
                }
                // What that took counts: every key's age is checked again before the send.
                continue;
            }
            // Borrowed: the keys stay here for a retry.
            let keys: Vec<&Key> = remaining.iter().map(|e| &e.key).collect();
            let delete = self.store.batch_delete(self.schema, &keys);
            let kind = match stop.bound("BatchWriteItem", delete).await {
                Ok(unprocessed) => {
                    remaining = self.acknowledge(remaining, &unprocessed, &mut out);
                    if remaining.is_empty() {
                        return out;
                    }
                    reason = "left unprocessed by BatchWriteItem".to_owned();
                    None
                }
                Err(e) => {
                    reason = e.to_string();
                    if may_have_applied(&e) {
                        remaining.iter_mut().for_each(|k| k.maybe_applied = true);
                    }
                    Some(e.kind)
                }
            };
            let wait = self.backoff(&mut backoff, remaining.len(), &reason, kind, &mut out);
            if let Err(stopped) = wait.await {
                self.give_up(remaining, &reason, &mut out, stopped).await;
                return out;
            }
        }
        out
    }

    /// A `BatchWriteItem` answered: every key sent that `unprocessed` does not name is deleted
    /// (its event owed); returns the keys to send again. A returned key that matches no key sent
    /// (DynamoDB names them as sent) leaves it unknown which keys were deleted: then none is
    /// counted, and every key is sent again, marked as possibly deleted already.
    pub(super) fn acknowledge(
        &self,
        mut sent: Vec<Expired>,
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
            sent.iter_mut().for_each(|e| e.maybe_applied = true);
            return sent;
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

    /// [`Self::read_table`] of `keys` listed by the index only, or aged past the bound. If the
    /// read fails, the keys come back marked `reread`: stale, they go conditional.
    pub(super) async fn read_again(
        &self,
        keys: Vec<Expired>,
        out: &mut ChunkOutcome,
    ) -> Vec<Expired> {
        match self.read_table(keys, out).await {
            Ok(back) => back,
            Err((e, mut keys)) => {
                tracing::warn!(keys = keys.len(), error = %e, "could not read stale keys again; deleting them conditionally");
                keys.iter_mut().for_each(|e| e.reread = true);
                keys
            }
        }
    }

    /// One strongly consistent `BatchGetItem` of `keys`: those still there with the ttl listed
    /// come back dated at the request (marked `reread` if read before); one found gone counts as
    /// gone (its event owed if an earlier attempt may have deleted it), one with another ttl is
    /// kept ([`Self::changed`]). If the read fails, the error and every key.
    pub(super) async fn read_table(
        &self,
        keys: Vec<Expired>,
        out: &mut ChunkOutcome,
    ) -> Result<Vec<Expired>, (crate::store::StoreError, Vec<Expired>)> {
        // Read as of the request: DynamoDB may read a key any time from then to the (last)
        // answer, so its age counts from the earliest of those instants.
        let at = Instant::now();
        let found = match self.read(keys.iter().map(|e| &e.key), true).await {
            Ok(found) => found,
            Err(e) => return Err((e, keys)),
        };
        let found = self.schema.index(&found);
        let mut back = Vec::with_capacity(keys.len());
        for e in keys {
            match found.get(&e.key).map(|item| self.schema.ttl_of(item)) {
                None => {
                    out.gone += 1;
                    if e.maybe_applied {
                        self.owe_event(&e, None);
                    }
                }
                Some(ttl) if ttl == Some(e.ttl) => {
                    let reread = e.read_at.is_some();
                    back.push(Expired {
                        read_at: Some(at),
                        reread,
                        ..e
                    });
                }
                Some(_) => self.changed(e, out),
            }
        }
        Ok(back)
    }
}
