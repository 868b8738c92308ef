//! The stream indexer's reports ([`Reporter`]): how each execution environment's batches went,
//! written into the expiry index table (partition [`entries::INDEXER`]) where the sweeper's lease,
//! in other environments, reads them ([`crate::engine::lease::IndexHealth::reported`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use aws_lambda_events::dynamodb::EventRecord;

use crate::engine::lease::{REPORT_EVERY, REPORT_FRESH};
use crate::expiry::Timestamp;
use crate::index::{sequence, Indexed};
use crate::store::entries::{self, FailingRecord, IndexerReport};
use crate::store::{lock, Store};

/// What one execution environment reported of one table's stream, and when it last wrote it.
#[derive(Debug, Default)]
struct Reported {
    failing: Vec<FailingRecord>,
    indexed_through: Option<Timestamp>,
    /// When the report was last written (DynamoDB's clock, which goes on while the environment
    /// is frozen between invocations).
    written: Option<Timestamp>,
    /// A record started or stopped failing since the report was last written.
    changed: bool,
}

/// One execution environment's reports of the stream indexer, per table: which records its
/// batches failed to index and has not indexed since, and how far it indexed. A report is written
/// (one put) when a record starts or stops failing here, and otherwise at most every
/// [`REPORT_EVERY`], so that a busy table pays one write per environment every few seconds, not
/// one per batch.
#[derive(Debug)]
pub struct Reporter {
    environment: String,
    tables: Mutex<HashMap<String, Reported>>,
}

impl Reporter {
    /// The reports of the environment `environment` (the reports' sort key).
    pub fn new(environment: String) -> Self {
        Reporter {
            environment,
            tables: Mutex::default(),
        }
    }

    /// This process's, which is one execution environment: an id drawn at random once.
    pub fn of_this_environment() -> &'static Reporter {
        static REPORTER: OnceLock<Reporter> = OnceLock::new();
        REPORTER.get_or_init(|| Reporter::new(format!("{:016x}", fastrand::u64(..))))
    }

    /// Tells what indexing `records` (one batch of `table`'s stream) came to, `indexed`, at
    /// `now` (DynamoDB's clock): writes the report into `index_table` if it is due. The first
    /// failed record (the event source mapping delivers the batch again from it) fails from its
    /// creation on; the records before it were indexed. A report that cannot be written is
    /// written at the next batch.
    pub async fn report<S: Store>(
        &self,
        store: &S,
        (table, index_table): (&str, &str),
        records: &[EventRecord],
        indexed: &Indexed,
        now: Timestamp,
    ) {
        let Some(report) = self.update(table, records, indexed, now) else {
            return;
        };
        if let Err(e) = store.write_indexer_report(index_table, &report).await {
            tracing::warn!(index = index_table, error = %e, "could not write the stream indexer's report; writing it at the next batch");
            return;
        }
        let mut tables = lock(&self.tables);
        let reported = tables.entry(table.to_owned()).or_default();
        reported.written = Some(now);
        reported.changed = false;
    }

    /// Updates `table`'s report with the batch and answers it if it is due to be written.
    fn update(
        &self,
        table: &str,
        records: &[EventRecord],
        indexed: &Indexed,
        now: Timestamp,
    ) -> Option<IndexerReport> {
        let failed: HashSet<&str> = indexed.failures.iter().map(String::as_str).collect();
        let created = |r: &EventRecord| {
            let at = Timestamp::from_datetime(r.change.approximate_creation_date_time);
            (at.millis() > 0).then_some(at)
        };
        let first_failed = records.iter().position(|r| failed.contains(sequence(r)));
        let done = &records[..first_failed.unwrap_or(records.len())];
        let mut tables = lock(&self.tables);
        let reported = tables.entry(table.to_owned()).or_default();
        // Records indexed here stop failing; those no batch failed on lately are left out.
        let before = reported.failing.len();
        let done_sequences: HashSet<&str> = done.iter().map(sequence).collect();
        let fresh = now - REPORT_FRESH;
        reported
            .failing
            .retain(|f| !done_sequences.contains(f.sequence.as_str()));
        reported.changed |= reported.failing.len() != before;
        reported.failing.retain(|f| f.at >= fresh);
        if let Some(through) = done.iter().filter_map(created).max() {
            reported.indexed_through = reported.indexed_through.max(Some(through));
        }
        if let Some(at) = first_failed {
            // Every failed record is unindexed; the oldest counts (its creation, else now).
            let first = &records[at];
            let failed_records = (records[at..].iter()).filter(|r| failed.contains(sequence(r)));
            let since = failed_records.filter_map(created).min().unwrap_or(now);
            match (reported.failing.iter_mut()).find(|f| f.sequence == sequence(first)) {
                Some(known) => {
                    known.since = known.since.min(since);
                    known.at = now;
                }
                None => {
                    reported.failing.push(FailingRecord {
                        sequence: sequence(first).to_owned(),
                        since,
                        at: now,
                    });
                    reported.changed = true;
                }
            }
            // The most recently failed first, at most as many as a report lists.
            reported.failing.sort_by_key(|f| std::cmp::Reverse(f.at));
            reported.failing.truncate(entries::MAX_FAILING);
        }
        let every = REPORT_EVERY.as_millis() as i64;
        let due = (reported.written).is_none_or(|at| !(0..every).contains(&now.millis_since(at)));
        (reported.changed || due).then(|| IndexerReport {
            environment: self.environment.clone(),
            failing: reported.failing.clone(),
            indexed_through: reported.indexed_through,
            written_at: now,
        })
    }
}
