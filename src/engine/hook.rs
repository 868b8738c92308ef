//! The seam through which expiry events are published around deletes: [`ExpiryHook`], which
//! `crate::events` implements. The engine knows no sink; with no hook it does no event work.
//! How notify and archive mode order events and deletes: `engine::delete::events`, and
//! `docs/events.md`, "Notify" and "Archive".

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

pub use super::report::{EventTally, FailedEvent};
use super::retry::Stop;
use crate::expiry::{Clock, Timestamp};
use crate::store::{lock, Key};

/// A boxed future, so that [`ExpiryHook`] (and the events' `Sink`) can be trait objects.
pub use futures::future::BoxFuture;

/// An item the sweep found expired as read, as an event describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Expiry {
    /// The primary key.
    pub key: Key,
    /// The ttl as read, epoch seconds.
    pub ttl: f64,
    /// The whole item, when one is available.
    pub item: Option<Key>,
    /// When it was deleted (notify) or about to be (archive).
    pub at: Timestamp,
}

impl Expiry {
    /// The expiry of `key` on `ttl`, at `at`, without an item.
    pub fn new(key: Key, ttl: f64, at: Timestamp) -> Expiry {
        let item = None;
        Expiry { key, ttl, item, at }
    }

    /// The same expiry without its item (which may be up to 400 KB), for what is remembered or
    /// cancelled.
    pub fn without_item(&self) -> Expiry {
        Expiry::new(self.key.clone(), self.ttl, self.at)
    }
}

/// One event to publish.
#[derive(Debug, Clone, PartialEq)]
pub enum Publication {
    /// `Item Expired`.
    Expired(Expiry),
    /// `Item Expiry Cancelled` of an expiry published before, found at the given time.
    Cancelled(Expiry, Timestamp),
}

/// What became of one publication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The sink accepted it.
    Accepted,
    /// It could not be published within the retries; why.
    Failed(String),
    /// The sweep had to stop (deadline or shutdown) before it was published.
    Stopped,
}

/// Publishes expiry events for the engine.
pub trait ExpiryHook: Send + Sync + fmt::Debug {
    /// Archive mode: events before deletes, deletes only of what the sink accepted.
    fn archive(&self) -> bool;

    /// Whether to read the whole items (a consistent `BatchGetItem`) before the events are built.
    fn read_items(&self) -> bool;

    /// Whether conditional deletes should return the items they delete, for the events (notify
    /// mode: the item comes with no extra read).
    fn returned_items(&self) -> bool {
        false
    }

    /// The id of the `Item Expired` event of `expiry`, for reporting one not published.
    fn event_id(&self, expiry: &Expiry) -> String;

    /// Publishes `publications` (at most one chunk's worth) with retries; one [`Delivery`] per
    /// publication, in order, and the tally. Never fails as a whole.
    fn publish<'a>(
        &'a self,
        publications: Vec<Publication>,
        stop: &'a Stop,
    ) -> BoxFuture<'a, (Vec<Delivery>, EventTally)>;
}

/// Events a sweep owes in notify mode: each is entered the moment its item's delete is known and
/// leaves once publishing it has an outcome; at most the chunks in flight are here. What a sweep
/// dropped part-way leaves behind is still reported, by id: [`Owed::take_all`].
#[derive(Debug, Default)]
pub(super) struct Owed {
    /// (chunk, the expiry, when it was entered).
    entries: Mutex<Vec<(u64, Expiry, Instant)>>,
    chunks: AtomicU64,
}

impl Owed {
    /// Everything still owed, taken: events of deleted items not (or not surely) published.
    pub(super) fn take_all(&self) -> Vec<Expiry> {
        std::mem::take(&mut *lock(&self.entries))
            .into_iter()
            .map(|(_, expiry, _)| expiry)
            .collect()
    }
}

/// Archive mode: the expiries the sink accepted whose items a chunk neither deleted, found gone,
/// nor cancelled (delete failed or left, item unchanged or not read), by key
/// ([`crate::store::TableSchema::key_token`]), across one sweeper's sweeps until a later chunk or
/// the read each sweep makes first ([`super::delete::settle_unsettled`]) settles them. At most
/// [`MAX_UNSETTLED`]; lost with the process (`docs/events.md`, "Archive").
#[derive(Debug, Default)]
pub(super) struct Unsettled(Mutex<Remembered>);

/// [`Unsettled`]'s expiries by key, each with the order it was (last) remembered in.
#[derive(Debug, Default)]
struct Remembered {
    by_key: HashMap<String, (u64, Expiry)>,
    next: u64,
}

/// Accepted expiries a sweeper remembers unsettled, at most.
pub const MAX_UNSETTLED: usize = 10_000;

/// Remembered expiries a sweep reads again before its partitions, at most: one `BatchGetItem`.
/// The longest remembered go first; the others wait for the next sweeps.
pub const SETTLE_PER_SWEEP: usize = 100;

impl Unsettled {
    /// Remembers `expiry` (keyed `token`) as accepted and not settled, after the others.
    pub(super) fn remember(&self, token: String, expiry: Expiry) {
        let mut held = lock(&self.0);
        if held.by_key.len() >= MAX_UNSETTLED && !held.by_key.contains_key(&token) {
            let key = crate::store::key_to_json(&expiry.key);
            tracing::warn!(%key, "too many accepted expiries unsettled to remember one more; if its item's ttl changes before a sweep deletes it, no cancellation follows");
            return;
        }
        held.next += 1;
        let at = held.next;
        held.by_key.insert(token, (at, expiry));
    }

    /// Forgets `token`'s expiry, answering it if one was remembered.
    pub(super) fn forget(&self, token: &str) -> Option<Expiry> {
        lock(&self.0).by_key.remove(token).map(|(_, expiry)| expiry)
    }

    /// The `n` remembered longest, taken (to be read, then remembered again or settled).
    pub(super) fn take_oldest(&self, n: usize) -> Vec<(String, Expiry)> {
        let mut held = lock(&self.0);
        let mut order: Vec<(u64, String)> = (held.by_key.iter())
            .map(|(token, (at, _))| (*at, token.clone()))
            .collect();
        order.sort_unstable();
        order.truncate(n);
        order
            .into_iter()
            .filter_map(|(_, token)| held.by_key.remove_entry(&token))
            .map(|(token, (_, expiry))| (token, expiry))
            .collect()
    }

    pub(super) fn is_empty(&self) -> bool {
        lock(&self.0).by_key.is_empty()
    }
}

/// Whole items held for expiry events by one sweep at once, at most, KiB: items read for the
/// events or returned by conditional deletes, until their events are published. Requests wait
/// for room instead of growing the sweeper's memory.
pub const EVENT_ITEMS_BUDGET_KIB: u32 = 64 * 1024;

/// DynamoDB's largest item, KiB: the room an item not yet read takes.
pub(super) const MAX_ITEM_KIB: u32 = 400;

/// An item's size as held, KiB (rounded up): its attribute names and values.
pub(super) fn item_kib(item: &Key) -> u32 {
    fn value_bytes(v: &AttributeValue) -> usize {
        match v {
            AttributeValue::S(s) | AttributeValue::N(s) => s.len(),
            AttributeValue::B(b) => b.as_ref().len(),
            AttributeValue::Ss(l) | AttributeValue::Ns(l) => l.iter().map(String::len).sum(),
            AttributeValue::Bs(l) => l.iter().map(|b| b.as_ref().len()).sum(),
            AttributeValue::L(l) => l.iter().map(value_bytes).sum(),
            AttributeValue::M(m) => m.iter().map(|(k, v)| k.len() + value_bytes(v)).sum(),
            _ => 1,
        }
    }
    let bytes: usize = item.iter().map(|(k, v)| k.len() + value_bytes(v)).sum();
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
}

/// Takes room for `kib` KiB of items from `budget` (all of it at most), waiting for it.
pub(super) async fn take_room(budget: &Arc<Semaphore>, kib: u32) -> Option<OwnedSemaphorePermit> {
    let kib = kib.min(EVENT_ITEMS_BUDGET_KIB);
    // The budget is never closed.
    budget.clone().acquire_many_owned(kib).await.ok()
}

/// Keeps `kib` KiB of `room` (what the items turned out to take), returns the rest.
pub(super) fn keep_room(room: &mut Option<OwnedSemaphorePermit>, kib: u32) {
    if let Some(permit) = room {
        let spare = permit.num_permits().saturating_sub(kib as usize);
        drop(permit.split(spare));
    }
}

/// How long an owed event may wait for the deletes after it before it is published (notify,
/// conditional deletes, which have no natural pause between items).
const OWED_FOR_AT_MOST: Duration = Duration::from_secs(1);

/// Notify mode, one chunk: owes the events of what its deletes remove and publishes them, as the
/// deleter says, in the order they became owed.
pub(super) struct Notifier<'a> {
    /// The sweep's hook, ledger, clock and room for whole items.
    events: &'a Events,
    /// The sweep instant, what events are stamped with without a clock.
    now: Timestamp,
    chunk: u64,
    /// The chunk's keys, with the items read for their events (if any).
    described: Vec<(Key, Option<Key>)>,
    stop: &'a Stop,
    /// What this chunk holds of the sweep's room for whole items.
    returned_room: Mutex<ReturnedRoom>,
}

/// What a chunk holds of the sweep's room for the items its deletes return: their size until
/// their events are published, and the room of a delete in flight.
#[derive(Default)]
struct ReturnedRoom {
    permit: Option<OwnedSemaphorePermit>,
    owed_kib: u32,
    in_flight: bool,
}

impl ReturnedRoom {
    /// Keeps room for what is owed and the delete in flight, if any; returns the rest.
    fn trim(&mut self) {
        let in_flight = if self.in_flight { MAX_ITEM_KIB } else { 0 };
        keep_room(&mut self.permit, self.owed_kib + in_flight);
    }
}

impl<'a> Notifier<'a> {
    /// A chunk's notifier: `described` are its keys, with the items read for their events (if
    /// any); `now` the sweep instant.
    pub(super) fn new(
        events: &'a Events,
        now: Timestamp,
        described: Vec<(Key, Option<Key>)>,
        stop: &'a Stop,
    ) -> Self {
        Notifier {
            events,
            now,
            chunk: events.owed.chunks.fetch_add(1, Ordering::Relaxed),
            described,
            stop,
            returned_room: Mutex::default(),
        }
    }

    /// Waits for room to hold one more whole item, before a delete that returns it; what
    /// publishing did, if it published this chunk's owed events first to free its own room when
    /// there was none at once: chunks that wait for room hold none, and those that hold it finish.
    pub(super) async fn room(&self) -> EventTally {
        let mut tally = EventTally::default();
        let budget = &self.events.items_room;
        let more = match budget.clone().try_acquire_many_owned(MAX_ITEM_KIB) {
            Ok(more) => Some(more),
            Err(_) => {
                tally = self.flush().await;
                take_room(budget, MAX_ITEM_KIB).await
            }
        };
        let mut held = lock(&self.returned_room);
        match (&mut held.permit, more) {
            (Some(room), Some(more)) => room.merge(more),
            (room, more) => *room = room.take().or(more),
        }
        held.in_flight = true;
        tally
    }

    /// Gives back the room taken for an item not returned (kept, gone, failed), keeping what the
    /// items owed take.
    pub(super) fn unused_room(&self) {
        let mut held = lock(&self.returned_room);
        held.in_flight = false;
        held.trim();
    }

    /// The item with `key` (ttl as read) is deleted; `returned`: the item the delete returned,
    /// preferred to the one read before.
    pub(super) fn owe(&self, key: &Key, ttl: f64, returned: Option<Key>) {
        if let Some(item) = &returned {
            lock(&self.returned_room).owed_kib += item_kib(item);
        }
        let item = returned.or_else(|| {
            self.described
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, item)| item.clone())
        });
        let at = self.events.wall.as_ref().map_or(self.now, |c| c.now());
        let key = key.clone();
        let expiry = Expiry { key, ttl, item, at };
        lock(&self.events.owed.entries).push((self.chunk, expiry, Instant::now()));
    }

    /// Whether an event of this chunk has been owed for [`OWED_FOR_AT_MOST`].
    pub(super) fn due(&self) -> bool {
        lock(&self.events.owed.entries)
            .iter()
            .find(|(chunk, _, _)| *chunk == self.chunk)
            .is_some_and(|(_, _, at)| at.elapsed() >= OWED_FOR_AT_MOST)
    }

    /// Publishes this chunk's owed events; they stay owed until publishing has an outcome. What
    /// publishing did.
    pub(super) async fn flush(&self) -> EventTally {
        let publications: Vec<Publication> = lock(&self.events.owed.entries)
            .iter()
            .filter(|(chunk, _, _)| *chunk == self.chunk)
            .map(|(_, expiry, _)| Publication::Expired(expiry.clone()))
            .collect();
        if publications.is_empty() {
            return EventTally::default();
        }
        let (_, tally) = self.events.hook.publish(publications, self.stop).await;
        // One chunk is one task: nothing of it was owed while it published.
        lock(&self.events.owed.entries).retain(|(chunk, _, _)| *chunk != self.chunk);
        // Its items are no longer held.
        let mut held = lock(&self.returned_room);
        held.owed_kib = 0;
        held.trim();
        tally
    }
}

/// Expiry events, for a sweep's delete tasks: the hook, the clock events are stamped with (none:
/// the sweep instant), and the sweep's ledger of events owed (notify).
pub(super) struct Events {
    pub(super) hook: Arc<dyn ExpiryHook>,
    pub(super) wall: Option<Arc<dyn Clock>>,
    pub(super) owed: Arc<Owed>,
    /// Archive mode: the accepted expiries not settled yet, across sweeps.
    pub(super) unsettled: Arc<Unsettled>,
    /// Archive mode with the expiry index table: the journal's writer, which replaces
    /// `unsettled` ([`super::journal`]).
    pub(super) journal: Option<Arc<super::journal::Journal>>,
    /// Room for whole items held for events, [`EVENT_ITEMS_BUDGET_KIB`] KiB a sweep.
    pub(super) items_room: Arc<Semaphore>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expiry(id: &str) -> (String, Expiry) {
        let key: Key = [("id".to_owned(), AttributeValue::S(id.to_owned()))].into();
        let x = Expiry::new(key, 1.0, Timestamp::from_secs(1_800_000_000));
        (id.to_owned(), x)
    }

    fn ids(taken: Vec<(String, Expiry)>) -> Vec<String> {
        taken.into_iter().map(|(token, _)| token).collect()
    }

    #[test]
    fn a_sweep_reads_the_expiries_remembered_longest_and_each_in_turn() {
        let unsettled = Unsettled::default();
        for id in ["a", "b", "c"] {
            let (token, x) = expiry(id);
            unsettled.remember(token, x);
        }
        assert_eq!(ids(unsettled.take_oldest(2)), ["a", "b"]);
        // Still unsettled after the read: remembered again, behind c.
        for id in ["a", "b"] {
            let (token, x) = expiry(id);
            unsettled.remember(token, x);
        }
        assert_eq!(ids(unsettled.take_oldest(2)), ["c", "a"]);
        assert!(unsettled.forget("b").is_some());
        assert!(unsettled.is_empty());
        assert!(unsettled.take_oldest(2).is_empty());
    }
}
