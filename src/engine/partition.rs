//! One partition (one shard of one window) of a sweep: its pages read within the read-ahead
//! budget, each item checked as read ([`check_item`]), the expired ones cut into chunks and
//! deleted as tasks of their own, and every finished chunk folded into the partition's report.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::delete::{delete_with_events, ChunkOutcome, Confirmed, Dated, Deleter, Expired};
use super::entries::{carry_unsettled, entries_of, packed_of, remove_settled};
use super::hook::Events;
use super::pace::{read_ahead, split_permit, take_budget, PagePace};
use super::report::SweepReport;
use super::retry::Stop;
use super::{DeleteMode, SweepOptions, BATCH_SIZE};
use crate::expiry::window::{parse_ttl, ttl_state, TtlState};
use crate::expiry::{Clock, Timestamp};
use crate::store::{Key, Store, StoreError, TableSchema};

/// About how many keys a pack holds, for the pages of packs a partition's read-ahead budget asks
/// for ([`crate::store::packs::MAX_PACK_BYTES`] of entries of about 60 bytes).
const PACK_KEYS: i32 = 64;

/// Batch mode: chunks whose keys one `BatchGetItem` confirms together (it takes up to 100 keys).
const CONFIRM_GROUP_CHUNKS: usize = 4;

// A partition waiting for room in the read-ahead budget holds less than a group of keys; the
// budget holds `READ_AHEAD_ROUNDS` rounds of chunks, so a group always fits in it.
const _: () = assert!(super::READ_AHEAD_ROUNDS >= CONFIRM_GROUP_CHUNKS);

/// What the tasks of a sweep share.
pub(super) struct Shared<S> {
    pub(super) store: S,
    pub(super) schema: TableSchema,
    pub(super) options: SweepOptions,
    /// `options` with conditional deletes: those of [`Pass::at_once`].
    pub(super) at_once: SweepOptions,
    /// Batch mode in tick mode: keys confirmed by the table ahead of a tick.
    pub(super) confirmed: Confirmed,
    /// The keys of the groups being deleted now, across the sweeper's partitions and sweeps.
    pub(super) in_flight: InFlight,
}

/// The keys (with the ttl listed) of the groups being deleted, so that an item listed twice at
/// once — by two entries of the expiry index table with the same ttl (a back-filled entry and a
/// stream entry, or a ttl moved away and back), in two groups or two partitions, or by a tick
/// and a full sweep beside it — is sent by one group only: two groups would each confirm it and
/// send it, and batch mode would count it, and publish its expiry, twice. Bounded by the keys
/// held at once (the read-ahead budgets of the sweeps running).
#[derive(Debug, Default)]
pub(super) struct InFlight(std::sync::Mutex<std::collections::HashSet<String>>);

/// A group's claim on its keys in [`InFlight`]: released when the group is done (or its task
/// dropped).
pub(super) struct Claim<'a> {
    in_flight: &'a InFlight,
    tokens: Vec<String>,
}

impl InFlight {
    /// Claims `group`'s keys: answers the keys no other group holds, with the claim, and the
    /// keys another group holds already (left out: that group judges the item).
    pub(super) fn claim<'a>(
        &'a self,
        schema: &TableSchema,
        group: Vec<Expired>,
    ) -> (Vec<Expired>, Vec<Expired>, Claim<'a>) {
        let mut held = crate::store::lock(&self.0);
        let mut claim = Claim {
            in_flight: self,
            tokens: Vec::with_capacity(group.len()),
        };
        let mut others = Vec::new();
        let mut mine = Vec::with_capacity(group.len());
        for e in group {
            let Some(mut token) = schema.key_token(&e.key) else {
                mine.push(e);
                continue;
            };
            token.push('\u{1f}');
            token.push_str(&e.ttl_as_read);
            if held.insert(token.clone()) {
                claim.tokens.push(token);
                mine.push(e);
            } else if !claim.tokens.contains(&token) {
                debug!(key = %crate::store::key_to_json(&e.key), "key being deleted by another group: left to it");
                others.push(e);
            } else {
                // Twice in this group: `drop_repeats` sends it once.
                mine.push(e);
            }
        }
        (mine, others, claim)
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut held = crate::store::lock(&self.in_flight.0);
        for token in &self.tokens {
            held.remove(token);
        }
    }
}

/// The outcome of a finished task; a panic in the task goes on in the caller.
pub(super) fn joined<T>(result: Result<T, JoinError>) -> T {
    match result {
        Ok(value) => value,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Tasks are aborted only when their JoinSet is dropped, and then nobody joins them.
        Err(e) => unreachable!("sweep task cancelled while joined: {e}"),
    }
}

/// Outcome of sweeping one partition (one shard of one window), its chunks' outcomes folded into
/// counters and the lag histogram as they finished: its memory does not grow with what it deletes.
#[derive(Debug, Default)]
pub(super) struct PartitionOutcome {
    pub(super) read_all: bool,
    /// Every chunk's keys were deleted or knowingly kept: none failed, none left.
    pub(super) handled_all: bool,
    pub(super) report: SweepReport,
    pub(super) error: Option<StoreError>,
}

/// One pass of a sweep over its partitions: what the tasks of its partitions and chunks share.
pub(super) struct Pass<S> {
    pub(super) shared: Arc<Shared<S>>,
    /// The sweep instant: what expired before it is deleted.
    pub(super) now: Timestamp,
    /// The entry point's clock, if the sweeper has one: what the reads made ahead of a tick are
    /// dated by besides the monotonic clock (without one, the sweep instant).
    pub(super) wall: Option<Arc<dyn Clock>>,
    /// The sweep's stop, also triggered by an error that no partition could get past.
    pub(super) stop: Stop,
    pub(super) events: Option<Events>,
    /// Where lags are measured from: the wall clock when the pass started, and that instant.
    pub(super) started: (Timestamp, Instant),
    /// Delete requests sent at once (`MAX_CONCURRENCY`).
    pub(super) permits: Semaphore,
    /// Batch mode's confirming reads sent at once, as many as delete requests: a chunk is read
    /// before it waits for a send slot, so reads and deletes overlap.
    pub(super) reads: Semaphore,
    /// The read-ahead budget of keys held at once ([`read_ahead`]).
    pub(super) budget: Arc<Semaphore>,
    /// Partitions running.
    pub(super) running: Arc<AtomicUsize>,
    /// The stream indexer's items expired when written ([`super::Sweeper::delete_indexed`]):
    /// deleted conditionally, whatever `DELETE_MODE` says.
    pub(super) at_once: bool,
    /// A pass of the packs due in this range ([`super::packs`]) rather than of the entries of
    /// one item each or the GSI.
    pub(super) packs: Option<(Timestamp, Timestamp)>,
}

impl<S> Pass<S> {
    /// What its deletes need: the sweeper's options, conditional for [`Pass::at_once`].
    pub(super) fn deleter(&self) -> Deleter<'_, S> {
        Deleter {
            store: &self.shared.store,
            schema: &self.shared.schema,
            options: if self.at_once {
                &self.shared.at_once
            } else {
                &self.shared.options
            },
            now: self.now,
            stop: &self.stop,
            events: self.events.as_ref(),
            notify: None,
        }
    }
}

/// Adds one finished chunk to a partial report; returns whether every key was handled.
pub(super) fn fold_chunk(
    report: &mut SweepReport,
    chunk: ChunkOutcome,
    (wall, mono): (Timestamp, Instant),
) -> bool {
    for (ttl, at) in &chunk.deleted {
        let deleted_at = wall + at.duration_since(mono);
        let lag_ms = deleted_at.millis() as f64 - ttl * 1000.0;
        report.lags.record(lag_ms.max(0.0).round() as u64);
    }
    // Each failed key is logged as its chunk ends, not only in the sweep's summary: a process
    // killed before the sweep ends has still named it.
    for failed in &chunk.failed {
        warn!(key = %failed.key, reason = %failed.reason, "key not deleted");
    }
    // A key of a pack not settled but carried into a new pack needs no other sweep of its
    // pack: the next sweep reads the new one.
    let handled = chunk
        .carried_all
        .unwrap_or(chunk.failed.is_empty() && chunk.left_keys.is_empty());
    add_counts!(report, chunk; items_skipped = skipped, items_gone = gone, items_retried = retried,
        write_conflicts_retried = write_conflicts, items_confirmed = confirmed,
        items_reread = reread, items_conditional = conditional,
        index_entries_removed = entries_removed);
    report.items_deleted += chunk.deleted.len() as u64;
    report.items_left += chunk.left_keys.len() as u64;
    report.items_failed += chunk.failed.len() as u64;
    report.add_failed_keys(chunk.failed);
    report.add_events(chunk.events);
    handled
}

/// The item's key and ttl if — and only if — the item as read is expired at `now`: a Number ttl
/// in epoch seconds, before `now` and not more than five years before it (native TTL's rule),
/// and the table's key attributes present. Only the index has listed it (no `read_at`).
pub(super) fn check_item(schema: &TableSchema, mut item: Key, now: Timestamp) -> Option<Expired> {
    let ttl_as_read = match item.remove(&schema.layout.ttl_attribute) {
        Some(aws_sdk_dynamodb::types::AttributeValue::N(n)) => n,
        other => {
            warn!(ttl = ?other, "item without a numeric ttl ignored");
            return None;
        }
    };
    let ttl = parse_ttl(&ttl_as_read)
        .inspect_err(|e| warn!(error = %e, "item with an unusable ttl ignored"))
        .ok()?;
    match ttl_state(ttl, now) {
        TtlState::Expired => {}
        TtlState::Live => {
            warn!(ttl, now = %now, "index returned an item that is not yet expired; ignored");
            return None;
        }
        TtlState::TooOld => {
            warn!(ttl, now = %now, "ttl is more than five years in the past: native TTL's rule keeps the item; ignored");
            return None;
        }
    }
    // The projection asks for the key attributes and the ttl: what remains without the ttl
    // (taken above) is the key, if every key attribute is there.
    item.retain(|name, _| schema.key_attributes.contains(name));
    if item.len() != schema.key_attributes.len() {
        warn!("index item without the table's key attributes ignored");
        return None;
    }
    Some(Expired {
        key: item,
        ttl,
        ttl_as_read,
        ..Expired::default()
    })
}

/// Deletes one group of keys (`group_chunks` chunks of [`BATCH_SIZE`] at most): the keys another
/// group holds left to it ([`InFlight`]), batch mode's read of the table made before the wait for
/// a send slot (it holds none), each chunk sent when it has one, and the entries of the keys
/// settled removed. The one path every delete of a sweep, and of [`Pass::at_once`], takes.
pub(super) async fn delete_group<S: Store>(
    pass: &Pass<S>,
    group: Vec<Expired>,
    group_chunks: usize,
) -> ChunkOutcome {
    let (shared, events) = (&pass.shared, pass.events.as_ref());
    // A key another group is deleting is left to it, its entry with it: if that group does not
    // settle the item, the next sweep reads the entry again. A pack is not read again, and that
    // group may be one that carries nothing (the stream indexer's deletes at once): such a key
    // is carried, as one not settled here.
    let (group, others, _claim) = shared.in_flight.claim(&shared.schema, group);
    let repeats = others.len() as u64;
    let entries = entries_of(&group);
    let mut packed = packed_of(&group);
    let held_elsewhere = packed_of(&others);
    let deleter = pass.deleter();
    let (mut keys, mut out) = {
        let _read = pass.reads.acquire().await;
        deleter.confirm(group).await
    };
    out.skipped += repeats;
    let mut chunks = Vec::with_capacity(group_chunks);
    while !keys.is_empty() {
        chunks.push(keys.split_off(keys.len().saturating_sub(BATCH_SIZE)));
    }
    let (deleter, permits) = (&deleter, &pass.permits);
    let sends = chunks.into_iter().map(|chunk| async move {
        let _permit = permits.acquire().await;
        // The stop may have come while this chunk waited for a permit.
        if deleter.stop.reached() {
            return ChunkOutcome::left(chunk);
        }
        match events {
            None => deleter.delete_chunk(chunk).await,
            Some(events) => delete_with_events(deleter, events, chunk).await,
        }
    });
    for sent in futures::future::join_all(sends).await {
        out.absorb(sent);
    }
    out.entries_removed = remove_settled(deleter, entries, &out).await;
    if pass.packs.is_some() {
        // Carried packs are due past any instant a sweep has read to ([`carry_unsettled`]), by
        // the entry point's clock, or without one the pass's start aged by the monotonic clock.
        // Boxed: a delete task's future stays as small as it was without packs.
        let also = held_elsewhere.iter().map(|(t, _)| t.clone()).collect();
        packed.extend(held_elsewhere);
        let (wall, mono) = pass.started;
        let aged = move || wall + mono.elapsed();
        let clock: &dyn Clock = pass.wall.as_deref().unwrap_or(&aged);
        Box::pin(carry_unsettled(deleter, clock, packed, also, &mut out)).await;
    }
    out
}

/// Reads one partition to the end (or until the stop), deleting as it goes: each group of chunks
/// a task of its own, at most `max_concurrency` chunks of them per partition, and `Pass::permits`
/// sending at once across the sweep. Each page asks for no more keys than the read-ahead budget
/// has free; a key's share of it returns when its group is done.
pub(super) async fn sweep_partition<S: Store>(pass: &Arc<Pass<S>>, key: &str) -> PartitionOutcome {
    let (this, now, stop) = (&pass.shared, pass.now, &pass.stop);
    let mut out = PartitionOutcome {
        handled_all: true,
        ..PartitionOutcome::default()
    };
    if stop.reached() {
        return out;
    }
    let mut inflight = JoinSet::new();
    let mut pending: Vec<Expired> = Vec::new();
    // The budget held for `pending`: one permit a key.
    let mut held: Option<OwnedSemaphorePermit> = None;
    let mut start: Option<Key> = None;
    let mut pace = PagePace::new(&this.options);
    let budget_size = u32::try_from(read_ahead(&this.options)).unwrap_or(u32::MAX);
    // Batch mode reads the table for a group of chunks at once (one `BatchGetItem` takes up
    // to 100 keys); each chunk of the group then waits for a send slot of its own.
    let group_chunks = match this.options.delete_mode {
        DeleteMode::Batch => CONFIRM_GROUP_CHUNKS,
        DeleteMode::Conditional => 1,
    };
    let group_keys = BATCH_SIZE * group_chunks;
    let max_groups = this.options.max_concurrency.max(1).div_ceil(group_chunks);
    let delete = |inflight: &mut JoinSet<ChunkOutcome>,
                  group: Vec<Expired>,
                  held: &mut Option<OwnedSemaphorePermit>| {
        // The group's keys' share of the budget, returned when the group is done.
        let keys = split_permit(held, group.len());
        let pass = pass.clone();
        inflight.spawn(async move {
            let _keys = keys;
            delete_group(&pass, group, group_chunks).await
        });
    };
    loop {
        // A read still unanswered at shutdown (or after the sweep stopped itself on an
        // error it reports) is given up: nothing it finds would be deleted now, and its
        // retries (a slow or failing DynamoDB) must not hold a shutdown. The partition is
        // left for the next sweep, like those not started. (A deadline needs no such cut:
        // every call of the store ends before it, see `Stop::bound`.)
        let want = pace
            .limit
            .map_or(budget_size, |l| u32::try_from(l.max(1)).unwrap_or(1))
            .min(budget_size);
        let mut granted = tokio::select! {
            permit = take_budget(&pass.budget, &pass.running, pending.len(), want) => permit,
            () = stop.token().cancelled() => {
                debug!(partition = %key, "stopping while waiting for keys to be deleted");
                break;
            }
        };
        let limit = i32::try_from(granted.num_permits()).unwrap_or(i32::MAX);
        // Packs: each holds up to a few dozen keys, the page no more than the budget's keys.
        let (upto, since, limit) = match pass.packs {
            Some((since, upto)) => (upto, Some(since), (limit / PACK_KEYS).max(1)),
            None => (now, None, limit),
        };
        let query =
            this.store
                .query_expired(&this.schema, key, upto, since, start.take(), Some(limit));
        let answer = tokio::select! {
            answer = stop.bound("Query", query) => answer,
            () = stop.token().cancelled() => {
                debug!(partition = %key, "stopping mid-query");
                break;
            }
        };
        let page = match answer {
            Ok(page) => page,
            Err(e) => {
                warn!(partition = %key, error = %e, "query failed; partition left for the next sweep");
                if !e.kind.is_retryable() {
                    // A missing table or rejected credentials: nothing else will work either.
                    stop.token().cancel();
                }
                out.error = Some(e);
                break;
            }
        };
        let answered = Instant::now();
        // Batch mode: the page's keys confirmed ahead of the tick are taken by both clocks' age.
        let read_now = (this.options.delete_mode == DeleteMode::Batch)
            .then(|| Dated::now(pass.wall.as_ref().map_or(now, |c| c.raw_now())));
        let page_len = page.items.len();
        pending.reserve(page_len);
        let mut entries = page.entries.into_iter();
        for item in page.items {
            let entry = entries.next();
            match check_item(&this.schema, item, now) {
                Some(mut expired) => {
                    expired.entry = entry;
                    expired.packed = page.packed;
                    if let Some(at) = read_now {
                        let max_age = this.options.batch_max_read_age;
                        expired.read_at = this.confirmed.take(&this.schema, &expired, max_age, at);
                    }
                    out.report.items_found += 1;
                    pending.push(expired);
                }
                None => out.report.items_invalid += 1,
            }
        }
        // Keep one permit per key pending; what the page did not fill goes back at once.
        let kept = pending.len() - held.as_ref().map_or(0, |h| h.num_permits());
        drop(granted.split(granted.num_permits().saturating_sub(kept)));
        match &mut held {
            Some(h) => h.merge(granted),
            None => held = Some(granted),
        }
        // Whole groups go now, from the back (order does not matter); a partial one waits.
        while pending.len() >= group_keys && !stop.reached() {
            let group = pending.split_off(pending.len() - group_keys);
            delete(&mut inflight, group, &mut held);
            while inflight.len() >= max_groups {
                if let Some(c) = inflight.join_next().await {
                    out.handled_all &= fold_chunk(&mut out.report, joined(c), pass.started);
                }
            }
        }
        pace.observe(page_len, answered.elapsed());
        match page.next {
            Some(_) if stop.reached() => {
                debug!(partition = %key, "stopping mid-partition");
                break;
            }
            Some(next) => start = Some(next),
            None => {
                out.read_all = true;
                break;
            }
        }
    }
    if stop.reached() {
        // Found but not attempted: the next sweep finds them again.
        out.report.items_left += pending.len() as u64;
        out.handled_all &= pending.is_empty();
    } else {
        while !pending.is_empty() {
            let group = pending.split_off(pending.len().saturating_sub(group_keys));
            delete(&mut inflight, group, &mut held);
        }
    }
    while let Some(c) = inflight.join_next().await {
        out.handled_all &= fold_chunk(&mut out.report, joined(c), pass.started);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TableSchema {
        let layout = crate::expiry::Layout {
            window_attribute: "w".into(),
            ..Default::default()
        };
        crate::store::tests::schema(&["id"], None, layout)
    }

    proptest::proptest! {
        /// Whatever the index returns, an item qualifies only with a Number ttl in epoch
        /// seconds strictly before `now`, and keeps exactly its key.
        #[test]
        fn only_items_expired_as_read_qualify(
            ttl in proptest::prop_oneof![
                "[0-9]{1,14}(\\.[0-9]{1,3})?",
                "-?[0-9.eE+-]{1,12}",
                ".{0,12}",
            ],
            numeric in proptest::bool::ANY,
            now in 0i64..4_000_000_000,
        ) {
            use aws_sdk_dynamodb::types::AttributeValue as AV;
            let value = if numeric { AV::N(ttl.clone()) } else { AV::S(ttl.clone()) };
            let item: Key = [("id".to_string(), AV::S("a".into())), ("ttl".to_string(), value)].into();
            let expired_as_read = numeric
                && parse_ttl(&ttl).is_ok_and(|t| {
                    t < now as f64 && t >= (now - crate::expiry::window::MAX_EXPIRED_AGE_SECONDS) as f64
                });
            match check_item(&schema(), item.clone(), Timestamp::from_secs(now)) {
                Some(e) => {
                    proptest::prop_assert!(expired_as_read, "{ttl:?} at {now}");
                    proptest::prop_assert_eq!(Some(e.ttl), parse_ttl(&ttl).ok());
                    proptest::prop_assert_eq!(e.key.len(), 1);
                }
                None => proptest::prop_assert!(!expired_as_read, "{ttl:?} at {now} should qualify"),
            }
        }
    }

    #[test]
    fn items_without_a_ttl_or_key_never_qualify() {
        use aws_sdk_dynamodb::types::AttributeValue as AV;
        let no_ttl: Key = [("id".to_string(), AV::S("a".into()))].into();
        let no_key: Key = [("ttl".to_string(), AV::N("5".into()))].into();
        for item in [no_ttl, no_key] {
            let now = Timestamp::from_secs(2_000_000_000);
            assert!(
                check_item(&schema(), item.clone(), now).is_none(),
                "{item:?}"
            );
        }
        let item = |ttl: i64| -> Key {
            let ttl = AV::N(ttl.to_string());
            [
                ("id".to_string(), AV::S("a".into())),
                ("ttl".to_string(), ttl),
            ]
            .into()
        };
        let ok = item(5);
        assert!(check_item(&schema(), ok.clone(), Timestamp::from_secs(6)).is_some());
        assert!(
            check_item(&schema(), ok.clone(), Timestamp::from_secs(5)).is_none(),
            "ttl == now is not expired"
        );
        // native TTL's rule: a ttl more than five years old is never deleted
        let now = Timestamp::from_secs(1_800_000_000);
        assert!(
            check_item(&schema(), ok.clone(), now).is_none(),
            "ttl 5 is decades old"
        );
        let six_years = item(1_800_000_000 - 6 * 365 * 86_400);
        assert!(check_item(&schema(), six_years, now).is_none());
        let four_years = item(1_800_000_000 - 4 * 365 * 86_400);
        assert!(check_item(&schema(), four_years, now).is_some());
    }
}
