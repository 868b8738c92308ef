//! One run of the follower: its shard readers, the position they share, and the batches they
//! hand to the indexer.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use aws_lambda_events::dynamodb::EventRecord;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use super::gather::{Gathered, Held};
use super::hold::index_batch;
use super::plan::{compact, expand, ready, MAX_POSITION_BYTES};
use super::*;
use crate::expiry::Timestamp;
use crate::index::{delete_expired, CONCURRENCY};
use crate::store::packs::PackEntry;
use crate::store::packs::{write_grouped, Grouped, PACK_LEAD};
use crate::store::{key_to_json, ErrorKind};

/// How often held entries are looked at for what to write.
const GATHER_EVERY: Duration = Duration::from_secs(1);

/// Records read longer than this after they were written (a backlog) have their entries written
/// with their batch, not held: a record whose entries are held is read again after a restart,
/// and the stream keeps records 24 hours (`FOLLOW_HOLD` is at most 6 hours).
pub(super) const STALE_FOR_HOLD: Duration = Duration::from_secs(12 * 3600);

mod write;

/// One run of the follower: the shared position and report of its shard readers.
pub(super) struct Reader<'a, T, C> {
    pub(super) follower: &'a Follower<C>,
    pub(super) target: &'a T,
    pub(super) clock: &'a dyn Clock,
    pub(super) stop: &'a Stop,
    pub(super) progress: &'a dyn Fn(&FollowReport),
    /// Permits to hold a batch ([`MAX_BATCHES`]).
    pub(super) batches: tokio::sync::Semaphore,
    /// Per shard being read: how far behind it is (ms), [`FollowReport::record_age_ms`].
    pub(super) ages: RefCell<BTreeMap<String, u64>>,
    pub(super) position: RefCell<Position>,
    /// The shards of the last listing: what the compacted position's marks are read against.
    pub(super) listed: RefCell<Vec<Shard>>,
    pub(super) dirty: Cell<bool>,
    /// Entries held across batches, and the records holding each shard's position back.
    pub(super) gathered: RefCell<Gathered>,
    pub(super) report: RefCell<FollowReport>,
}

impl<T: IndexTarget<Store: StreamPositions>, C: StreamRead> Reader<'_, T, C> {
    pub(super) async fn run(&self) {
        let mut running: HashSet<String> = HashSet::new();
        let mut readers = FuturesUnordered::new();
        let mut discover_at = Instant::now();
        let mut save_at = Instant::now() + SAVE_EVERY;
        let mut log_at = Instant::now() + LOG_EVERY;
        let mut gather_at = Instant::now() + GATHER_EVERY;
        let mut logged = 0;
        let mut warned_full = false;
        while !self.stop.reached() {
            if Instant::now() >= discover_at {
                discover_at = Instant::now() + DISCOVER_EVERY;
                let listed = self.follower.streams.shards(&self.follower.stream.arn);
                let Some(listed) = self.unless_stopped(listed).await else {
                    break;
                };
                match listed {
                    Err(e) => {
                        tracing::warn!(error = %e, "could not list the stream's shards; trying again")
                    }
                    Ok(shards) => {
                        self.forget_unlisted(&shards);
                        let ready = ready(&shards, &self.position.borrow(), &running);
                        let room = MAX_SHARDS.saturating_sub(running.len());
                        if ready.len() > room && !warned_full {
                            tracing::warn!(max = MAX_SHARDS, "more open shards than are read at once; the others wait for a slot");
                            warned_full = true;
                        }
                        for shard in ready.into_iter().take(room) {
                            running.insert(shard.clone());
                            readers.push(self.read_shard(shard));
                        }
                    }
                }
            }
            let wake = discover_at.min(save_at).min(log_at).min(gather_at);
            tokio::select! {
                Some(ended) = readers.next(), if !readers.is_empty() => {
                    running.remove(&ended);
                    self.ages.borrow_mut().remove(&ended);
                    // Its children may start now.
                    discover_at = Instant::now();
                }
                _ = tokio::time::sleep_until(wake) => {}
                _ = self.stop.token().cancelled() => {}
            }
            if Instant::now() >= gather_at && !self.stop.reached() {
                let latest = self.clock.latest();
                let taken = self.gathered.borrow_mut().take_due(latest, Instant::now());
                self.write(taken).await;
                gather_at = Instant::now() + GATHER_EVERY;
            }
            // Once stopped, the one save is `Follower::run`'s: two would each wait out the
            // shutdown grace on a DynamoDB that does not answer.
            if Instant::now() >= save_at && !self.stop.reached() {
                self.save().await;
                save_at = Instant::now() + SAVE_EVERY;
            }
            if Instant::now() >= log_at {
                let report = self.report.borrow().clone();
                if report.index.records > logged {
                    logged = report.index.records;
                    tracing::info!(
                        records = report.index.records,
                        entries_written = report.index.entries_written,
                        expired_when_written = report.index.expired_when_written,
                        invalid_ttl = report.index.invalid_ttl,
                        skipped_records = report.skipped_records,
                        shards = running.len(),
                        "following the stream"
                    );
                }
                log_at = Instant::now() + LOG_EVERY;
            }
        }
        // The readers see the stop between requests.
        while readers.next().await.is_some() {}
    }

    /// Drops the position of shards the stream no longer lists (trimmed after 24 hours); one not
    /// read to its end lost records.
    fn forget_unlisted(&self, shards: &[Shard]) {
        let listed: HashSet<&str> = shards.iter().map(|s| s.id.as_str()).collect();
        let mut position = self.position.borrow_mut();
        // The marks an entry about to go vouched for, as the last listing showed them.
        expand(&mut position, &self.listed.replace(shards.to_vec()));
        let before = position.shards.len();
        position.shards.retain(|id, at| {
            let keep = listed.contains(id.as_str());
            if !keep && *at != ShardPosition::Done {
                self.trimmed(id);
            }
            if !keep {
                self.gathered.borrow_mut().forget(id);
            }
            keep
        });
        let compacted = compact(&mut position, shards);
        if compacted || position.shards.len() != before {
            self.dirty.set(true);
        }
    }

    /// Counts `shard` trimmed and drops its entry (it is read again from its oldest record),
    /// keeping the marks it vouched for.
    fn forget_trimmed(&self, shard: &str) {
        self.trimmed(shard);
        self.gathered.borrow_mut().forget(shard);
        let mut position = self.position.borrow_mut();
        expand(&mut position, &self.listed.borrow());
        position.shards.remove(shard);
        self.dirty.set(true);
    }

    fn trimmed(&self, shard: &str) {
        self.report.borrow_mut().trimmed += 1;
        tracing::error!(shard, "records of this shard were trimmed from the stream (older than 24 hours) before they were read: items written then may lack their window; run `ttl-sweeper backfill`");
    }

    /// Reads `shard` until it is read to its end or the stop; returns its id.
    async fn read_shard(&self, shard: String) -> String {
        let arn = &self.follower.stream.arn;
        let streams = &self.follower.streams;
        let mut iterator: Option<String> = None;
        let mut errors = Backoff::new(READ_AGAIN);
        while !self.stop.reached() {
            let current = match iterator.take() {
                Some(it) => it,
                None => {
                    // Past what was handled: the saved position may be further back, before
                    // records whose entries are held.
                    let handled = self.gathered.borrow().handled(&shard);
                    let from = match (handled, self.position.borrow().shards.get(&shard)) {
                        (Some(sequence), _) => From::After(sequence),
                        (None, Some(ShardPosition::After(sequence))) => {
                            From::After(sequence.clone())
                        }
                        _ => From::Oldest,
                    };
                    let Some(got) = self
                        .unless_stopped(streams.iterator(arn, &shard, &from))
                        .await
                    else {
                        return shard;
                    };
                    match got {
                        Ok(it) => it,
                        Err(ReadError::Trimmed) if from == From::Oldest => {
                            // The whole shard is gone; a later listing forgets it.
                            self.stop.sleep(DISCOVER_EVERY).await;
                            return shard;
                        }
                        Err(ReadError::Trimmed) => {
                            self.forget_trimmed(&shard);
                            continue;
                        }
                        Err(e) => {
                            tracing::warn!(shard, error = %e, "could not get a shard iterator; trying again");
                            self.stop.sleep(errors.wait()).await;
                            continue;
                        }
                    }
                }
            };
            // No more reading while the entries held are at their bound (their writes failing).
            while self.gathered.borrow().full() {
                if self.stop.reached() {
                    return shard;
                }
                self.stop.sleep(POLL).await;
            }
            // The batch is held until it is indexed: at most MAX_BATCHES of them in memory.
            let Ok(permit) = self.batches.acquire().await else {
                return shard;
            };
            let Some(read) = self.unless_stopped(streams.records(&current)).await else {
                return shard;
            };
            match read {
                Ok(batch) => {
                    errors = Backoff::new(READ_AGAIN);
                    let empty = batch.records.is_empty();
                    if !empty {
                        self.index(&shard, &batch.records).await;
                    }
                    // As of now, after a hold too; caught up (0) once read to its end.
                    let newest = batch.records.last().filter(|_| batch.next.is_some());
                    self.aged(&shard, newest.map_or(0, |r| self.age_of(r)));
                    let Some(next) = batch.next else {
                        // Its children start once it is done: its held entries first.
                        if !self.write_shard(&shard).await {
                            return shard;
                        }
                        if !self.stop.reached() {
                            self.gathered.borrow_mut().forget(&shard);
                            self.set(&shard, ShardPosition::Done);
                            self.report.borrow_mut().shards_done += 1;
                            tracing::info!(shard, "shard read to its end");
                        }
                        return shard;
                    };
                    iterator = Some(next);
                    drop(permit);
                    if empty {
                        self.stop.sleep(POLL).await;
                    }
                }
                Err(ReadError::ExpiredIterator) => {}
                Err(ReadError::Trimmed) => self.forget_trimmed(&shard),
                Err(e) => {
                    drop(permit);
                    tracing::warn!(shard, error = %e, "could not read the shard; trying again");
                    self.stop.sleep(errors.wait()).await;
                    iterator = Some(current);
                }
            }
        }
        shard
    }

    /// Moves `shard`'s position as far as its records handled and held entries let it.
    fn advance(&self, shard: &str) {
        let Some(sequence) = self.gathered.borrow().position(shard) else {
            return;
        };
        let at = ShardPosition::After(sequence);
        if self.position.borrow().shards.get(shard) != Some(&at) {
            self.set(shard, at);
        }
    }

    /// How long ago `record` was written (ms), by the follower's clock.
    fn age_of(&self, record: &EventRecord) -> u64 {
        let at = record
            .change
            .approximate_creation_date_time
            .timestamp_millis();
        u64::try_from(self.clock.now().millis() - at).unwrap_or(0)
    }

    /// Records `shard`'s age as of its last read and reports the totals.
    fn aged(&self, shard: &str, age_ms: u64) {
        let mut ages = self.ages.borrow_mut();
        ages.insert(shard.to_owned(), age_ms);
        let mut report = self.report.borrow_mut();
        report.record_age_ms = ages.values().copied().max().unwrap_or(0);
        (self.progress)(&report);
    }

    fn set(&self, shard: &str, at: ShardPosition) {
        let mut position = self.position.borrow_mut();
        position.shards.insert(shard.to_owned(), at);
        self.dirty.set(true);
    }

    /// `read`, or `None` once the stop is reached: a read of the stream is abandoned at the stop
    /// (what it would have read is read again after a restart, from the saved position).
    async fn unless_stopped<R>(&self, read: impl std::future::Future<Output = R>) -> Option<R> {
        tokio::select! {
            done = read => Some(done),
            _ = self.stop.token().cancelled() => None,
        }
    }

    /// Saves the position when it changed (and a checkpoint table is configured).
    pub(super) async fn save(&self) {
        let Some((table, id)) = &self.follower.saved_at else {
            return;
        };
        if !self.dirty.replace(false) {
            return;
        }
        let text = serde_json::to_string(&*self.position.borrow()).unwrap_or_default();
        if text.len() > MAX_POSITION_BYTES {
            tracing::error!(
                bytes = text.len(),
                "the stream position is too large to save in one item; it is kept in memory only"
            );
            return;
        }
        let at = self.clock.now().iso();
        let store = self.target.store();
        let saving = store.save_stream_position(table, id, text, at);
        if let Err(e) = self.stop.bound("PutItem", saving).await {
            tracing::warn!(error = %e, "could not save the stream position; trying again");
            self.dirty.set(true);
        }
    }
}
