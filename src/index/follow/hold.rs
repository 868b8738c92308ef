//! One batch of a shard's records through the stream indexer. A record that fails is tried again
//! with backoff for as long as it takes (an operator may have to fix access or the index table),
//! the shard held at it and the records behind it waiting (at most [`MAX_BATCHES`] batches in
//! memory). Only a record that can never be indexed is passed ([`FollowReport::skipped_records`];
//! one refused beside others is tried alone first). The stop ends the wait at once; an attempt
//! in flight has the shutdown's grace. `docs/operations.md`, "Writers set only the ttl".

use std::cell::RefCell;

use aws_lambda_events::dynamodb::EventRecord;
use tokio::time::Instant;

use super::plan::to_retry;
use super::*;
use crate::index::{sequence, Indexed};

/// How a failing record is tried again: until it is indexed, passed or the stop, waits of 100 ms
/// doubling to [`RETRY_CAP`].
const RECORD_AGAIN: Retry = Retry {
    attempts: u32::MAX,
    base: Duration::from_millis(100),
    cap: RETRY_CAP,
};

/// Indexes `records`, one batch of `shard`, through `index` (which answers `None` when cut at the
/// stop), adding what was done to `report` and trying failed records again until they are indexed,
/// passed as never indexable, or `stop`. Before each wait, `held` sees the oldest record not yet
/// indexed. Answers how many of the leading records were handled: all of them unless stopped.
pub(super) async fn index_batch(
    shard: &str,
    records: &[EventRecord],
    index: impl AsyncFn(&[EventRecord]) -> Option<Indexed>,
    stop: &Stop,
    report: &RefCell<FollowReport>,
    held: impl Fn(&EventRecord),
) -> usize {
    let ids: Vec<String> = records.iter().map(item_id).collect();
    let mut todo: Vec<usize> = (0..records.len()).collect();
    let first_left = |todo: &[usize]| todo.first().copied().unwrap_or(records.len());
    let started = Instant::now();
    let mut told = started;
    let mut backoff = Backoff::new(RECORD_AGAIN);
    loop {
        let tried = todo.clone();
        let retry = backoff.made() > 1;
        let Some(indexed) = try_records(&index, records, &tried, retry, report).await else {
            return first_left(&todo);
        };
        if indexed.failures.is_empty() {
            break;
        }
        let failed;
        (failed, todo) = to_retry(records, &ids, &tried, &indexed.failures);
        let errors = &indexed.report.errors;
        for i in refused(records, &failed, &indexed.refused) {
            // Refused beside others, it is tried alone first: the fault may be another entry's.
            let refused_alone = if tried == [i] {
                Some(errors.clone())
            } else {
                let Some(alone) = try_records(&index, records, &[i], true, report).await else {
                    return first_left(&todo);
                };
                if alone.failures.is_empty() {
                    todo.retain(|&t| t != i);
                    continue;
                }
                (!alone.refused.is_empty()).then_some(alone.report.errors)
            };
            // Failed alone on something else: held with the others.
            if let Some(errors) = refused_alone {
                todo.retain(|&t| t != i);
                pass(shard, &records[i], &errors, report);
            }
        }
        if todo.is_empty() {
            break;
        }
        if stop.reached() {
            return first_left(&todo);
        }
        if backoff.made() == 1 {
            // The errors of the records held (not of those just passed).
            let of =
                |e: &String, i: usize| e.starts_with(&format!("record {} ", sequence(&records[i])));
            let held_errors = errors.iter().filter(|e| todo.iter().any(|&i| of(e, i)));
            for error in held_errors {
                tracing::warn!(shard, error, "a stream record failed; the shard is held at it and it is tried again until it is indexed");
            }
        } else if told.elapsed() >= LOG_EVERY {
            told = Instant::now();
            tracing::warn!(
                shard,
                held_s = started.elapsed().as_secs(),
                attempts = backoff.made(),
                records = todo.len(),
                error = errors.first().map(String::as_str).unwrap_or_default(),
                "the shard is still held at a failing stream record; trying it again"
            );
        }
        held(&records[todo[0]]);
        stop.sleep(backoff.wait()).await;
        if stop.reached() {
            return first_left(&todo);
        }
    }
    if backoff.made() > 1 {
        tracing::info!(
            shard,
            attempts = backoff.made(),
            held_s = started.elapsed().as_secs(),
            "the shard's held stream records were indexed; reading on"
        );
    }
    records.len()
}

/// One call of `index` with `records[todo]` (the whole batch unless a `retry`), its counts added
/// to `report`: a retry's records counted as retried, not as read, and no failure counted as
/// failed (a record fails only once passed). The errors are kept in the answer's report. `None`
/// when cut at the stop.
async fn try_records(
    index: &impl AsyncFn(&[EventRecord]) -> Option<Indexed>,
    records: &[EventRecord],
    todo: &[usize],
    retry: bool,
    report: &RefCell<FollowReport>,
) -> Option<Indexed> {
    // Only a retry copies out its records.
    let copied: Vec<EventRecord>;
    let batch = if retry {
        copied = todo.iter().map(|&i| records[i].clone()).collect();
        &copied[..]
    } else {
        records
    };
    let mut indexed = index(batch).await?;
    let mut part = std::mem::take(&mut indexed.report);
    indexed.report.errors = std::mem::take(&mut part.errors);
    part.failed = 0;
    let mut report = report.borrow_mut();
    if retry {
        report.retried_records += part.records;
        part.records = 0;
    }
    report.index.merge(part);
    Some(indexed)
}

/// The places of the `failed` records whose failure the indexer answered as refused.
fn refused(records: &[EventRecord], failed: &[usize], refused: &[String]) -> Vec<usize> {
    (failed.iter().copied())
        .filter(|&i| refused.iter().any(|s| sequence(&records[i]) == s))
        .collect()
}

/// Passes `record`, which can never be indexed: counted and logged with `errors` (its own).
fn pass(shard: &str, record: &EventRecord, errors: &[String], report: &RefCell<FollowReport>) {
    let sequence = sequence(record).to_owned();
    let error = (errors.iter())
        .find(|e| e.starts_with(&format!("record {sequence} ")))
        .cloned()
        .unwrap_or_else(|| format!("record {sequence} of item {}", item_id(record)));
    let mut report = report.borrow_mut();
    report.skipped_records += 1;
    report.index.merge(IndexReport {
        failed: 1,
        errors: vec![error.clone()],
        ..IndexReport::default()
    });
    tracing::error!(shard, error, "a stream record cannot be indexed and was passed: run `ttl-sweeper backfill` to index its item");
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Records of the items named by `items`, one word each, with sequence numbers 1, 2, ...
    fn records(items: &str) -> Vec<EventRecord> {
        let record = |(at, id): (usize, &str)| {
            serde_json::from_value(serde_json::json!({
                "eventID": format!("e{at}"), "eventName": "INSERT", "awsRegion": "eu-west-1",
                "eventSource": "aws:dynamodb",
                "dynamodb": { "Keys": {"id": {"S": id}}, "SequenceNumber": (at + 1).to_string(),
                              "SizeBytes": 10, "StreamViewType": "NEW_IMAGE" }
            }))
            .unwrap()
        };
        items.split_whitespace().enumerate().map(record).collect()
    }

    fn sequence(record: &EventRecord) -> String {
        record.change.sequence_number.clone().unwrap()
    }

    /// How a record fares in one call.
    #[derive(Clone, Copy, PartialEq)]
    enum Fate {
        Written,
        Failed,
        Refused,
    }

    /// An indexer whose answer for each record is `fate(sequence, records in the call, call
    /// number)`, failing the first failed record of each item as the stream indexer does; it keeps
    /// the sequence numbers of every call.
    struct Fake<F> {
        fate: F,
        calls: RefCell<Vec<Vec<String>>>,
    }

    impl<F: Fn(&str, usize, usize) -> Fate> Fake<F> {
        fn new(fate: F) -> Self {
            Fake {
                fate,
                calls: RefCell::default(),
            }
        }

        fn index(&self, batch: &[EventRecord]) -> Indexed {
            let call = self.calls.borrow().len();
            self.calls
                .borrow_mut()
                .push(batch.iter().map(sequence).collect());
            let mut out = Indexed::default();
            out.report.records = batch.len() as u64;
            let mut failed_items = HashSet::new();
            for record in batch {
                let s = sequence(record);
                let fate = (self.fate)(&s, batch.len(), call);
                if fate == Fate::Written {
                    out.report.entries_written += 1;
                    continue;
                }
                if !failed_items.insert(item_id(record)) {
                    continue;
                }
                out.report.failed += 1;
                out.report.errors.push(format!("record {s} of item x: no"));
                if fate == Fate::Refused {
                    out.refused.push(s.clone());
                }
                out.failures.push(s);
            }
            out
        }

        /// Indexes `records` of shard `s` through this indexer, with no stop: the records
        /// handled, the calls made and the report.
        async fn run(self, records: &[EventRecord]) -> (usize, Vec<Vec<String>>, FollowReport) {
            let report = RefCell::new(FollowReport::default());
            let index = async |batch: &[EventRecord]| Some(self.index(batch));
            let handled = index_batch("s", records, index, &Stop::never(), &report, |_| {}).await;
            (handled, self.calls.into_inner(), report.into_inner())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_record_holds_the_shard_however_long_until_it_is_indexed() {
        // b's first record throttled for the first 100 calls: minutes of backoff.
        let records = records("a b b c");
        let fake = Fake::new(|s: &str, _, call| match s == "2" && call < 100 {
            true => Fate::Failed,
            false => Fate::Written,
        });
        let report = RefCell::new(FollowReport::default());
        let oldest_held = RefCell::new(HashSet::new());
        let held = |r: &EventRecord| {
            oldest_held.borrow_mut().insert(sequence(r));
        };
        let index = async |batch: &[EventRecord]| Some(fake.index(batch));
        let started = Instant::now();
        let handled = index_batch("s", &records, index, &Stop::never(), &report, held).await;
        assert_eq!(handled, 4, "every record handled");
        let calls = fake.calls.into_inner();
        assert_eq!(calls.len(), 101);
        // Only b's records tried again, the failed one and the one after it, in order.
        assert!(calls[1..].iter().all(|c| *c == ["2", "3"]), "{calls:?}");
        assert_eq!(oldest_held.into_inner(), HashSet::from(["2".to_string()]));
        let report = report.into_inner();
        assert_eq!(report.skipped_records, 0);
        assert_eq!(report.retried_records, 200);
        assert_eq!((report.index.records, report.index.failed), (4, 0));
        // Longer than a failing record was ever tried before it was passed, each wait capped.
        let held_for = started.elapsed();
        assert!(held_for > Duration::from_secs(60), "{held_for:?}");
        assert!(held_for <= RETRY_CAP * 100, "{held_for:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_record_refused_alone_is_passed_the_others_refused_beside_it_are_written() {
        // A request holding p's entry with others is refused whole (ValidationException); alone,
        // p is still refused, the others written. m is malformed: refused whatever is beside it.
        let records = records("a p b m");
        let fake = Fake::new(|s: &str, in_call, _| match s {
            "4" => Fate::Refused,
            _ if in_call > 1 => Fate::Refused,
            "2" => Fate::Refused,
            _ => Fate::Written,
        });
        let (handled, calls, report) = fake.run(&records).await;
        assert_eq!(handled, 4);
        assert_eq!(
            calls,
            [
                vec!["1", "2", "3", "4"],
                vec!["1"],
                vec!["2"],
                vec!["3"],
                vec!["4"]
            ]
        );
        assert_eq!(report.skipped_records, 2, "p and m only");
        assert_eq!(report.index.failed, 2);
        assert_eq!(report.index.errors.len(), 2, "{:?}", report.index.errors);
        assert!(report.index.errors[0].starts_with("record 2 "));
        assert!(report.index.errors[1].starts_with("record 4 "));
        // A batch of one refused record is passed without another call.
        let fake = Fake::new(|_: &str, _, _| Fate::Refused);
        let (handled, calls, report) = fake.run(&records[3..]).await;
        assert_eq!((handled, calls.len(), report.skipped_records), (1, 1, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_record_refused_beside_others_and_throttled_alone_is_held_not_passed() {
        let records = records("a p");
        let fake = Fake::new(|s: &str, in_call, call| match (s, in_call, call) {
            (_, 2, _) => Fate::Refused,
            ("2", 1, c) if c < 5 => Fate::Failed,
            _ => Fate::Written,
        });
        let (handled, calls, report) = fake.run(&records).await;
        assert_eq!((handled, calls.len(), report.skipped_records), (2, 6, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_stop_ends_a_hold_at_once_with_the_shard_before_the_held_record() {
        let records = records("a b c");
        let fake = Fake::new(|s: &str, _, _| match s {
            "2" => Fate::Failed,
            _ => Fate::Written,
        });
        let stop = Stop::never();
        let report = RefCell::new(FollowReport::default());
        let index = async |batch: &[EventRecord]| Some(fake.index(batch));
        let following = index_batch("s", &records, index, &stop, &report, |_| {});
        let shutdown = async {
            tokio::time::sleep(Duration::from_secs(600)).await;
            stop.token().cancel();
            Instant::now()
        };
        let (handled, asked) = tokio::join!(following, shutdown);
        assert_eq!(handled, 1, "the position moves past a only");
        assert_eq!(Instant::now(), asked, "no wait past the stop");
        assert_eq!(report.into_inner().skipped_records, 0);
        // An attempt cut at the stop: nothing handled, nothing passed.
        let report = RefCell::new(FollowReport::default());
        let cut = async |_: &[EventRecord]| None;
        assert_eq!(
            index_batch("s", &records, cut, &stop, &report, |_| {}).await,
            0
        );
        assert_eq!(report.into_inner(), FollowReport::default());
    }
}
