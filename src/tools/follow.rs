//! The daemon's stream follower (`ttl-sweeper run --follow-stream`, `FOLLOW_STREAM`): reads the
//! table's DynamoDB stream itself, as an event source mapping does for the Lambda, and hands each
//! batch of records to the stream indexer ([`crate::indexer`]), so that writers need set only the
//! ttl. Its guarantees (a child shard read only after its parent, the position saved beside the
//! checkpoint, expired iterators, trimmed records, failing records retried then passed) are
//! described in `docs/operations.md`, "Writers set only the ttl". At most [`MAX_BATCHES`] batches
//! are held at once, read and not yet indexed, so memory stays bounded however many shards the
//! stream has.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use aws_lambda_events::dynamodb::EventRecord;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use crate::engine::{Stop, Sweeper};
use crate::expiry::Clock;
use crate::indexer::{index_records, item_id, IndexReport};
use crate::store::stream::{From, ReadError, Shard, StreamClient, TableStream};
use crate::store::{full_jitter, DynamoStore, TableSchema};
use plan::{compact, expand, ready, to_retry, MAX_POSITION_BYTES};
pub use plan::{Position, ShardPosition};
pub use report::{FollowError, FollowReport};

mod plan;
mod report;

/// Wait between reads of a shard that had nothing new.
pub const POLL: Duration = Duration::from_millis(250);
/// How often the shard list is read again (and at once when a shard was read to its end).
const DISCOVER_EVERY: Duration = Duration::from_secs(10);
/// The position is saved at most this often.
pub const SAVE_EVERY: Duration = Duration::from_secs(1);
/// Attempts at a failing record before it is reported and passed (about 5 s of waits).
pub const MAX_ATTEMPTS: u32 = 10;
/// The longest wait between attempts at a failing record.
const RETRY_CAP: Duration = Duration::from_secs(2);
/// Batches read and not yet indexed, at most (each up to 1,000 records, 1 MB).
pub const MAX_BATCHES: usize = 8;
/// Shards read at once; a stream with more open shards than this waits for a slot.
pub const MAX_SHARDS: usize = 256;
/// A progress line is logged at most this often, when records came.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Refuses to follow `table`'s stream without an expiry index table (`index_table`, as
/// `EXPIRY_INDEX_TABLE` names it): the stream's records are indexed into it, and nowhere else.
/// Nothing is read: a daemon checks every table before it starts.
pub fn require_index_table(table: &str, index_table: Option<&str>) -> Result<(), FollowError> {
    match index_table {
        Some(_) => Ok(()),
        None => Err(FollowError::NoIndexTable {
            table: table.to_owned(),
        }),
    }
}

/// The follower of one table's stream, checked and with its saved position loaded.
#[derive(Debug)]
pub struct Follower {
    streams: StreamClient,
    stream: TableStream,
    /// The checkpoint table and the position item's id, when the position is saved.
    saved_at: Option<(String, String)>,
    start: Position,
    stream_replaced: bool,
}

impl Follower {
    /// Checks that `schema`'s table has an expiry index table ([`require_index_table`]) and a
    /// stream whose records carry the new image, and that its shards can be listed, and loads the
    /// position saved in `saved_at` (checkpoint table, item id), if any.
    pub async fn open(
        store: &DynamoStore,
        streams: StreamClient,
        schema: &TableSchema,
        saved_at: Option<(String, String)>,
    ) -> Result<Follower, FollowError> {
        let table = schema.table_name.as_str();
        require_index_table(table, schema.index_table.as_deref())?;
        let Some(stream) = store.table_stream(table).await? else {
            return Err(FollowError::NoStream {
                table: table.to_owned(),
            });
        };
        if !stream.has_new_image() {
            return Err(FollowError::NoNewImage {
                table: table.to_owned(),
                view: stream.view,
            });
        }
        // The streams API answers (and may be called) before anything starts.
        streams.shards(&stream.arn).await?;
        let fresh = Position {
            stream: stream.arn.clone(),
            shards: BTreeMap::new(),
        };
        let saved = match &saved_at {
            Some((table, id)) => store.read_stream_position(table, id).await?,
            None => {
                tracing::warn!("no CHECKPOINT_TABLE: the stream position is not saved, and a restart reads the stream again from its oldest records (up to 24 hours)");
                None
            }
        };
        let (start, stream_replaced) = match saved.map(|s| serde_json::from_str::<Position>(&s)) {
            None => (fresh, false),
            Some(Ok(position)) if position.stream == stream.arn => (position, false),
            Some(Ok(position)) => {
                tracing::warn!(
                    saved = %position.stream, stream = %stream.arn,
                    "the table's stream is not the one the saved position is for (was it disabled and enabled again?): records written in between were not seen; run `ttl-sweeper backfill` to give their items a window"
                );
                (fresh, true)
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the saved stream position does not parse; reading every shard from its oldest record");
                (fresh, false)
            }
        };
        tracing::info!(stream = %stream.arn, view = %stream.view, shards_known = start.shards.len(), "following the table's stream");
        Ok(Follower {
            streams,
            stream,
            saved_at,
            start,
            stream_replaced,
        })
    }

    /// Follows the stream for `sweeper`'s table until `stop`, then saves the position and returns
    /// what was done. Deletes' expiry events go through `sweeper`'s hook, as a sweep's do.
    /// `progress` sees the totals after every batch and every read that found nothing new.
    pub async fn run(
        &self,
        sweeper: &Sweeper<DynamoStore>,
        clock: &dyn Clock,
        stop: &Stop,
        progress: &dyn Fn(&FollowReport),
    ) -> FollowReport {
        let reader = Reader {
            follower: self,
            sweeper,
            clock,
            stop,
            progress,
            batches: tokio::sync::Semaphore::new(MAX_BATCHES),
            ages: RefCell::default(),
            position: RefCell::new(self.start.clone()),
            listed: RefCell::new(Vec::new()),
            dirty: Cell::new(false),
            report: RefCell::new(FollowReport {
                trimmed: u64::from(self.stream_replaced),
                ..FollowReport::default()
            }),
        };
        reader.run().await;
        reader.save().await;
        let report = reader.report.into_inner();
        tracing::info!(report = %serde_json::to_string(&report).unwrap_or_default(), "stopped following the stream");
        report
    }
}

/// One run of the follower: the shared position and report of its shard readers.
struct Reader<'a> {
    follower: &'a Follower,
    sweeper: &'a Sweeper<DynamoStore>,
    clock: &'a dyn Clock,
    stop: &'a Stop,
    progress: &'a dyn Fn(&FollowReport),
    /// Permits to hold a batch ([`MAX_BATCHES`]).
    batches: tokio::sync::Semaphore,
    /// Per shard being read: the age (ms) of the newest record of its last read, 0 when caught up.
    ages: RefCell<BTreeMap<String, u64>>,
    position: RefCell<Position>,
    /// The shards of the last listing: what the compacted position's marks are read against.
    listed: RefCell<Vec<Shard>>,
    dirty: Cell<bool>,
    report: RefCell<FollowReport>,
}

impl Reader<'_> {
    async fn run(&self) {
        let mut running: HashSet<String> = HashSet::new();
        let mut readers = FuturesUnordered::new();
        let mut discover_at = Instant::now();
        let mut save_at = Instant::now() + SAVE_EVERY;
        let mut log_at = Instant::now() + LOG_EVERY;
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
                        for shard in ready {
                            if running.len() >= MAX_SHARDS {
                                if !warned_full {
                                    tracing::warn!(max = MAX_SHARDS, "more open shards than are read at once; the others wait for a slot");
                                    warned_full = true;
                                }
                                break;
                            }
                            running.insert(shard.clone());
                            readers.push(self.read_shard(shard));
                        }
                    }
                }
            }
            let wake = discover_at.min(save_at).min(log_at);
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
            keep
        });
        let compacted = compact(&mut position, shards);
        if compacted || position.shards.len() != before {
            self.dirty.set(true);
        }
    }

    /// Drops `shard`'s entry (it is read again from its oldest record), keeping the marks it
    /// vouched for.
    fn forget(&self, shard: &str) {
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
        let mut errors = 0u32;
        while !self.stop.reached() {
            let current = match iterator.take() {
                Some(it) => it,
                None => {
                    let from = match self.position.borrow().shards.get(&shard) {
                        Some(ShardPosition::After(sequence)) => From::After(sequence.clone()),
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
                            self.pause(DISCOVER_EVERY).await;
                            return shard;
                        }
                        Err(ReadError::Trimmed) => {
                            self.trimmed(&shard);
                            self.forget(&shard);
                            self.dirty.set(true);
                            continue;
                        }
                        Err(e) => {
                            errors += 1;
                            tracing::warn!(shard, error = %e, "could not get a shard iterator; trying again");
                            self.pause(full_jitter(POLL, Duration::from_secs(30), errors))
                                .await;
                            continue;
                        }
                    }
                }
            };
            // The batch is held until it is indexed: at most MAX_BATCHES of them in memory.
            let Ok(permit) = self.batches.acquire().await else {
                return shard;
            };
            let Some(read) = self.unless_stopped(streams.records(&current)).await else {
                return shard;
            };
            match read {
                Ok(batch) => {
                    errors = 0;
                    let empty = batch.records.is_empty();
                    let newest = batch
                        .records
                        .last()
                        .map(|r| r.change.approximate_creation_date_time);
                    let age = newest.map_or(0, |at| {
                        let ms = self.clock.now().millis() - at.timestamp_millis();
                        u64::try_from(ms).unwrap_or(0)
                    });
                    if !empty {
                        self.index(&shard, batch.records).await;
                    }
                    self.aged(&shard, if batch.next.is_some() { age } else { 0 });
                    let Some(next) = batch.next else {
                        if !self.stop.reached() {
                            self.set(&shard, ShardPosition::Done);
                            self.report.borrow_mut().shards_done += 1;
                            tracing::info!(shard, "shard read to its end");
                        }
                        return shard;
                    };
                    iterator = Some(next);
                    drop(permit);
                    if empty {
                        self.pause(POLL).await;
                    }
                }
                Err(ReadError::ExpiredIterator) => {}
                Err(ReadError::Trimmed) => {
                    self.trimmed(&shard);
                    self.forget(&shard);
                }
                Err(e) => {
                    drop(permit);
                    errors += 1;
                    tracing::warn!(shard, error = %e, "could not read the shard; trying again");
                    self.pause(full_jitter(POLL, Duration::from_secs(30), errors))
                        .await;
                    iterator = Some(current);
                }
            }
        }
        shard
    }

    /// Indexes one batch of `shard`'s records, retrying failed items (see the module
    /// description), and moves the shard's position past what was handled.
    async fn index(&self, shard: &str, records: Vec<EventRecord>) {
        let ids: Vec<String> = records.iter().map(item_id).collect();
        let mut todo: Vec<usize> = (0..records.len()).collect();
        let mut attempt = 1;
        loop {
            // The first attempt is the whole batch; only a retry copies out its records.
            let retried: Vec<EventRecord>;
            let batch = if attempt == 1 {
                &records[..]
            } else {
                retried = todo.iter().map(|&i| records[i].clone()).collect();
                &retried[..]
            };
            let (store, schema) = (self.sweeper.store(), self.sweeper.schema());
            let indexing = index_records(store, schema, self.clock, batch);
            // Cut after the shutdown's grace: the position stays before the batch, which is read
            // again after a restart (every write is conditional).
            let Ok(indexed) = self.stop.within_limits(indexing).await else {
                return;
            };
            let mut part = indexed.report;
            if attempt > 1 {
                self.report.borrow_mut().retried_records += part.records;
                part.records = 0;
            }
            // A failure is retried; it is not a failed record unless it stays one.
            let errors = std::mem::take(&mut part.errors);
            part.failed = 0;
            self.report.borrow_mut().index.merge(part);
            if indexed.failures.is_empty() {
                break;
            }
            let first_failed;
            (first_failed, todo) = to_retry(&records, &ids, &todo, &indexed.failures);
            if self.stop.reached() {
                // Not handled: the shard resumes before them.
                let before = todo.first().and_then(|&i| i.checked_sub(1));
                if let Some(sequence) =
                    before.and_then(|i| records[i].change.sequence_number.clone())
                {
                    self.set(shard, ShardPosition::After(sequence));
                }
                return;
            }
            if attempt >= MAX_ATTEMPTS {
                let mut report = self.report.borrow_mut();
                report.skipped_records += todo.len() as u64;
                report.index.failed += first_failed.len() as u64;
                report.index.merge(IndexReport {
                    errors: errors.clone(),
                    ..IndexReport::default()
                });
                for error in &errors {
                    tracing::error!(shard, error, skipped = todo.len(), attempts = MAX_ATTEMPTS, "a stream record failed every attempt and was passed: run `ttl-sweeper backfill` to index its item");
                }
                break;
            }
            for error in &errors {
                tracing::warn!(
                    shard,
                    error,
                    attempt,
                    "a stream record failed; trying it again"
                );
            }
            self.pause(full_jitter(Duration::from_millis(100), RETRY_CAP, attempt))
                .await;
            attempt += 1;
        }
        self.report.borrow_mut().batches += 1;
        if let Some(sequence) = records
            .last()
            .and_then(|r| r.change.sequence_number.clone())
        {
            self.set(shard, ShardPosition::After(sequence));
        }
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
        self.position
            .borrow_mut()
            .shards
            .insert(shard.to_owned(), at);
        self.dirty.set(true);
    }

    /// `read`, or `None` once the stop is reached: a read of the stream is abandoned at the stop
    /// (what it would have read is read again after a restart, from the saved position).
    async fn unless_stopped<T>(&self, read: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::select! {
            done = read => Some(done),
            _ = self.stop.token().cancelled() => None,
        }
    }

    /// Sleeps for `wait`, or until the stop.
    async fn pause(&self, wait: Duration) {
        self.unless_stopped(tokio::time::sleep(wait)).await;
    }

    /// Saves the position when it changed (and a checkpoint table is configured).
    async fn save(&self) {
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
        let store = self.sweeper.store();
        let saving = store.save_stream_position(table, id, text, at);
        if let Err(e) = self.stop.bound("PutItem", saving).await {
            tracing::warn!(error = %e, "could not save the stream position; trying again");
            self.dirty.set(true);
        }
    }
}
