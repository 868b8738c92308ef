//! An expiry hook for the in-memory sweeps: [`Recorder`].

use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use ttl_sweeper::engine::hook::{BoxFuture, Delivery, EventTally, Expiry, ExpiryHook, Publication};
use ttl_sweeper::engine::Stop;

use super::mem_store::id_of;

/// Records the `Item Expired` events it is given, and when, and the cancellations, and accepts them
/// all (after `delay`; or, `hang`ing, never: a sink that does not answer and ignores the stop).
/// Notify mode, or archive mode with `archive`.
#[derive(Debug, Default)]
pub struct Recorder {
    pub expired: Mutex<Vec<String>>,
    pub published_at: Mutex<Vec<(String, Instant)>>,
    pub hang: bool,
    /// Each call waits this long before it accepts.
    pub delay: Duration,
    /// Asks conditional deletes to return the items, and counts the events that carry one.
    pub items_published: Option<Arc<std::sync::atomic::AtomicUsize>>,
    /// Archive mode: events before deletes.
    pub archive: bool,
    /// The ids of the `Item Expiry Cancelled` events.
    pub cancelled: Mutex<Vec<String>>,
}

impl ExpiryHook for Recorder {
    fn archive(&self) -> bool {
        self.archive
    }

    fn read_items(&self) -> bool {
        false
    }

    fn returned_items(&self) -> bool {
        self.items_published.is_some()
    }

    fn event_id(&self, expiry: &Expiry) -> String {
        id_of(&expiry.key)
    }

    fn publish<'a>(
        &'a self,
        publications: Vec<Publication>,
        _stop: &'a Stop,
    ) -> BoxFuture<'a, (Vec<Delivery>, EventTally)> {
        Box::pin(async move {
            if self.hang {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(self.delay).await;
            let mut expired = self.expired.lock().unwrap();
            let mut published_at = self.published_at.lock().unwrap();
            for p in &publications {
                let e = match p {
                    Publication::Expired(e) => e,
                    Publication::Cancelled(e, _) => {
                        self.cancelled.lock().unwrap().push(id_of(&e.key));
                        continue;
                    }
                };
                if let (Some(count), Some(_)) = (&self.items_published, &e.item) {
                    count.fetch_add(1, SeqCst);
                }
                expired.push(id_of(&e.key));
                published_at.push((id_of(&e.key), Instant::now()));
            }
            let tally = EventTally {
                published: publications.len() as u64,
                ..EventTally::default()
            };
            (vec![Delivery::Accepted; publications.len()], tally)
        })
    }
}
