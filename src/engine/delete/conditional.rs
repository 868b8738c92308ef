//! Conditional mode: one `DeleteItem` per item, each requiring the ttl as read.

use tokio::time::Instant;

use super::{may_have_applied, ChunkOutcome, Deleter, Expired, STOPPED};
use crate::store::{Backoff, ConditionalOutcome, Store, StoreError};

impl<S: Store> Deleter<'_, S> {
    /// Deletes a chunk one conditional `DeleteItem` at a time, each requiring the item's ttl
    /// to be the one read and expired at `now`.
    pub(super) async fn delete_conditional(&self, chunk: Vec<Expired>) -> ChunkOutcome {
        let (now, stop) = (self.now, self.stop);
        let mut out = ChunkOutcome::default();
        let mut items = chunk.into_iter();
        let return_items = self.events.is_some_and(|e| e.hook.returned_items());
        while let Some(mut e) = items.next() {
            if stop.reached() {
                // Keys sent by batch mode before may have been deleted already: settled, not left.
                let rest = std::iter::once(e).chain(items).collect();
                self.give_up(rest, STOPPED, &mut out, true).await;
                return out;
            }
            // Events owed for a while go out between items, not only before a wait.
            self.publish_owed(&mut out, true).await;
            let mut backoff = Backoff::new(self.options.retry);
            let notify_items = self.notify.filter(|_| return_items);
            if let Some(notifier) = notify_items {
                out.events.add(notifier.room().await);
            }
            loop {
                let delete = self.store.delete_if_expired(
                    self.schema,
                    e.key.clone(),
                    &e.ttl_as_read,
                    now,
                    return_items,
                );
                let result = stop.bound("DeleteItem", delete).await;
                let err: StoreError = match result {
                    Ok((ConditionalOutcome::Deleted, returned)) => {
                        out.deleted.push((e.ttl, Instant::now()));
                        self.owe_event(&e, returned);
                        break;
                    }
                    Ok((ConditionalOutcome::Kept, _)) => {
                        self.changed(e, &mut out);
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
                let reason = err.to_string();
                let wait = self.backoff(&mut backoff, 1, &reason, Some(err.kind), &mut out);
                let Err(stopped) = wait.await else { continue };
                if stopped {
                    // The items after it stop here too (settled like it, if batch mode sent them).
                    self.give_up(items.by_ref().collect(), STOPPED, &mut out, true)
                        .await;
                }
                self.give_up(vec![e], &reason, &mut out, stopped).await;
                break;
            }
            if let Some(notifier) = notify_items {
                notifier.unused_room();
            }
        }
        out
    }
}
