//! Exact SDK edge cases, with `aws-smithy-mocks` standing in for DynamoDB: unprocessed keys,
//! throttling, permanent failures, pagination, and index items that must never be deleted.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::error::ErrorMetadata;
use aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemOutput;
use aws_sdk_dynamodb::operation::batch_write_item::{BatchWriteItemError, BatchWriteItemOutput};
use aws_sdk_dynamodb::operation::delete_item::{DeleteItemError, DeleteItemOutput};
use aws_sdk_dynamodb::operation::query::{QueryError, QueryOutput};
use aws_sdk_dynamodb::types::error::{
    ConditionalCheckFailedException, InternalServerError, ProvisionedThroughputExceededException,
    ReplicatedWriteConflictException, ResourceNotFoundException,
};
use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
use aws_sdk_dynamodb::Client;
use aws_smithy_mocks::{mock, mock_client, Rule, RuleMode};
use support::mem_store::{
    default_schema, key, mem_sweeper, ttl_of, Change, Fault, MemStore, Op, When,
};
use support::{bare, num, unwindowed, AssertFields, SweepAt, AV};
use tokio::time::Instant;
use ttl_sweeper::engine::{DeleteMode, Stop, SweepOptions, Sweeper};
use ttl_sweeper::expiry::{Layout, Timestamp};
use ttl_sweeper::store::{DynamoStore, ErrorKind, Index, Key, Retry, Store};

const NOW: i64 = 1_658_264_100; // 2022-07-19T20:55:00Z
const TABLE: &str = "sessions";

fn options(mode: DeleteMode) -> SweepOptions {
    SweepOptions {
        lookback_windows: 0,
        delete_mode: mode,
        max_concurrency: 4,
        retry: Retry {
            attempts: 4,
            cap: Duration::from_secs(2),
            ..Retry::default()
        },
        // These tests drive batch retries with paused time; the read-age fallback to
        // conditional deletes has its own test.
        batch_max_read_age: Duration::from_secs(3600),
        ..SweepOptions::default()
    }
}

fn expired(id: usize) -> Key {
    unwindowed(&format!("item-{id}"), NOW - 10)
}

/// An error's metadata with the error code `code`.
fn meta(code: &str) -> ErrorMetadata {
    ErrorMetadata::builder().code(code).build()
}

fn query_returning(items: Vec<Key>) -> Rule {
    mock!(Client::query).then_output(move || {
        QueryOutput::builder()
            .set_items(Some(items.clone()))
            .build()
    })
}

fn unprocessed(keys: &[Key]) -> BatchWriteItemOutput {
    let request = |k: &Key| {
        let delete = DeleteRequest::builder()
            .set_key(Some(k.clone()))
            .build()
            .unwrap();
        WriteRequest::builder().delete_request(delete).build()
    };
    let requests = keys.iter().map(request).collect();
    BatchWriteItemOutput::builder()
        .unprocessed_items(TABLE, requests)
        .build()
}

fn throttled() -> BatchWriteItemError {
    let error = ProvisionedThroughputExceededException::builder()
        .message("Rate of requests exceeds the allowed throughput")
        .meta(meta("ProvisionedThroughputExceededException"));
    BatchWriteItemError::ProvisionedThroughputExceededException(error.build())
}

/// What a Multi-Region strongly consistent table answers a write while another Region's write to
/// the same item is in progress.
fn write_conflict() -> ReplicatedWriteConflictException {
    let error = ReplicatedWriteConflictException::builder()
        .message("Write conflict with a concurrent write in another Region")
        .meta(meta("ReplicatedWriteConflictException"));
    error.build()
}

fn not_found() -> ResourceNotFoundException {
    let error = ResourceNotFoundException::builder().message("Requested resource not found");
    error.meta(meta("ResourceNotFoundException")).build()
}

fn sweeper(client: Client, mode: DeleteMode) -> Sweeper<DynamoStore> {
    sweeper_with(client, options(mode))
}

fn sweeper_with(client: Client, options: SweepOptions) -> Sweeper<DynamoStore> {
    Sweeper::new(DynamoStore::new(client), default_schema(), options)
}

/// A client answering with `query` and `batch`, and [`table_reads`].
fn batch_client(query: &Rule, batch: &Rule) -> Client {
    mock_client!(
        aws_sdk_dynamodb,
        RuleMode::MatchAny,
        [query, batch, &table_reads()]
    )
}

/// The table agreeing with the index: batch mode's consistent `BatchGetItem` finds every key
/// asked for, with the ttl [`expired`] gives.
fn table_reads() -> Rule {
    mock!(Client::batch_get_item).then_compute_output(|req| {
        let asked = req.request_items().unwrap()[TABLE].keys().to_vec();
        let with_ttl = |mut k: Key| {
            k.insert("ttl".into(), num(NOW - 10));
            k
        };
        found(asked.into_iter().map(with_ttl).collect())
    })
}

/// Asserts that time went on since `started` (paused clock: only a backoff's sleep advances it),
/// by at most `cap_ms`.
#[track_caller]
fn assert_waited(started: Instant, cap_ms: u64) {
    let waited = started.elapsed();
    let capped = waited > Duration::ZERO && waited <= Duration::from_millis(cap_ms);
    assert!(capped, "{waited:?}");
}

/// A BatchGetItem answer that finds `items`.
fn found(items: Vec<Key>) -> BatchGetItemOutput {
    BatchGetItemOutput::builder()
        .responses(TABLE, items)
        .build()
}

/// BatchWriteItem failing `times` times with `error`, then processing everything.
fn failing_then_processed(error: fn() -> BatchWriteItemError, times: usize) -> Rule {
    let rule = mock!(Client::batch_write_item)
        .sequence()
        .error(error)
        .times(times);
    rule.output(all_processed).build()
}

/// An answer to BatchWriteItem that leaves nothing unprocessed.
fn all_processed() -> BatchWriteItemOutput {
    BatchWriteItemOutput::builder().build()
}

#[tokio::test(start_paused = true)]
async fn unprocessed_keys_are_retried_until_accepted() {
    let items: Vec<Key> = (0..3).map(expired).collect();
    let query = query_returning(items);
    let first_key = key("item-1");
    let batch = mock!(Client::batch_write_item)
        .sequence()
        .output(move || unprocessed(std::slice::from_ref(&first_key)))
        .output(all_processed)
        .build();
    let client = batch_client(&query, &batch);
    let started = Instant::now();
    let report = sweeper(client, DeleteMode::Batch).sweep_at(NOW).await;

    assert_eq!(batch.num_calls(), 2, "one retry for the unprocessed key");
    report.assert_fields("items_found=3 items_deleted=3 items_retried=1 items_failed=0");
    assert!(report.is_success());
    // The retry waited, within the first step's cap.
    assert_waited(started, 50);
}

#[tokio::test(start_paused = true)]
async fn throttling_is_retried_with_growing_backoff() {
    let query = query_returning((0..25).map(expired).collect());
    let batch = failing_then_processed(throttled, 3);
    let client = batch_client(&query, &batch);
    let mut opts = options(DeleteMode::Batch);
    // The backoff caps for attempts 1..3 are 50 + 100 + 200 ms; full jitter picks anywhere in
    // [0, cap], so only the bounds are deterministic.
    opts.retry.attempts = 6;
    let started = Instant::now();
    let report = sweeper_with(client, opts).sweep_at(NOW).await;

    assert_eq!(batch.num_calls(), 4);
    assert_eq!(report.items_deleted, 25);
    assert_eq!(report.items_retried, 75, "25 keys re-sent three times");
    assert!(report.is_success());
    assert_waited(started, 350);
}

#[tokio::test(start_paused = true)]
async fn replicated_write_conflicts_are_retried_counted_and_lose_nothing() {
    let query = query_returning((0..25).map(expired).collect());
    let conflict = || BatchWriteItemError::ReplicatedWriteConflictException(write_conflict());
    let batch = failing_then_processed(conflict, 2);
    let client = batch_client(&query, &batch);
    let report = sweeper(client, DeleteMode::Batch).sweep_at(NOW).await;
    assert_eq!(batch.num_calls(), 3);
    report.assert_fields(
        "items_deleted=25 items_retried=50 write_conflicts_retried=2 items_failed=0 items_left=0",
    );
    assert!(report.is_success(), "{report:?}");

    // Conditional mode: the DeleteItem refused by the conflict goes again.
    let query = query_returning(vec![expired(0), expired(1)]);
    let delete = mock!(Client::delete_item)
        .sequence()
        .error(|| DeleteItemError::ReplicatedWriteConflictException(write_conflict()))
        .output(|| DeleteItemOutput::builder().build())
        .times(2)
        .build();
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&query, &delete]);
    let report = sweeper(client, DeleteMode::Conditional).sweep_at(NOW).await;
    assert_eq!(delete.num_calls(), 3);
    report.assert_fields("items_deleted=2 write_conflicts_retried=1 items_failed=0");
    assert!(report.is_success(), "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn keys_that_keep_failing_are_reported_and_fail_the_run() {
    let items: Vec<Key> = (0..30).map(expired).collect();
    let query = query_returning(items);
    // Every batch leaves its first key unprocessed, forever.
    let batch = mock!(Client::batch_write_item).then_compute_output(|req| {
        let first = req.request_items().unwrap()[TABLE][0]
            .delete_request()
            .unwrap()
            .key()
            .clone();
        unprocessed(&[first])
    });
    let client = batch_client(&query, &batch);
    let report = sweeper(client, DeleteMode::Batch).sweep_at(NOW).await;

    // Two chunks (25 + 5), each: 1 call + 3 retries.
    assert_eq!(batch.num_calls(), 8);
    report.assert_fields("items_found=30 items_failed=2 items_deleted=28");
    assert_eq!(report.failed_keys.len(), 2);
    assert!(report.failed_keys[0].reason.contains("unprocessed"));
    assert!(report
        .failed_keys
        .iter()
        .all(|k| k.key["id"]["S"].is_string()));
    assert!(!report.is_success());
}

#[tokio::test(start_paused = true)]
async fn non_retryable_errors_fail_at_once() {
    let query = query_returning((0..5).map(expired).collect());
    let batch = mock!(Client::batch_write_item)
        .then_error(|| BatchWriteItemError::ResourceNotFoundException(not_found()));
    let client = batch_client(&query, &batch);
    let report = sweeper(client, DeleteMode::Batch).sweep_at(NOW).await;
    assert_eq!(batch.num_calls(), 1, "no retries for a missing table");
    assert_eq!(report.items_failed, 5);
    assert!(report.failed_keys[0].reason.contains("NotFound"));
    assert!(!report.is_success());
}

#[tokio::test(start_paused = true)]
async fn every_page_is_read() {
    let page1: Vec<Key> = (0..10).map(expired).collect();
    let page2: Vec<Key> = (10..15).map(expired).collect();
    let last = page1.last().unwrap().clone();
    let seen_starts: Arc<Mutex<Vec<Option<Key>>>> = Arc::default();
    let seen = seen_starts.clone();
    let query = mock!(Client::query)
        .match_requests(move |r| {
            seen.lock().unwrap().push(r.exclusive_start_key().cloned());
            true
        })
        .sequence()
        .output(move || {
            QueryOutput::builder()
                .set_items(Some(page1.clone()))
                .set_last_evaluated_key(Some(last.clone()))
                .build()
        })
        .output(move || {
            QueryOutput::builder()
                .set_items(Some(page2.clone()))
                .build()
        })
        .build();
    let batch = mock!(Client::batch_write_item).then_output(all_processed);
    let client = batch_client(&query, &batch);
    let report = sweeper(client, DeleteMode::Batch).sweep_at(NOW).await;
    assert_eq!(query.num_calls(), 2);
    assert_eq!(report.items_deleted, 15);
    let starts = seen_starts.lock().unwrap();
    assert_eq!(starts[0], None);
    assert_eq!(starts[1].as_ref().unwrap()["id"], AV::S("item-9".into()));
}

#[tokio::test(start_paused = true)]
async fn items_that_are_not_expired_as_read_are_never_deleted() {
    // An index should never return these for `ttl < now`, but a misconfigured index or a
    // misbehaving server might: the engine checks every item itself.
    let items = vec![
        unwindowed("future", NOW + 3600),
        unwindowed("now", NOW),
        unwindowed("millis", NOW * 1000),
        bare("string", Some(AV::S((NOW - 10).to_string()))),
        bare("garbage", Some(AV::N("not-a-number".into()))),
        bare("no-ttl", None),
    ];
    let query = query_returning(items);
    let batch = mock!(Client::batch_write_item).then_output(all_processed);
    let delete = mock!(Client::delete_item).then_output(|| DeleteItemOutput::builder().build());
    for mode in [DeleteMode::Batch, DeleteMode::Conditional] {
        let client = mock_client!(
            aws_sdk_dynamodb,
            RuleMode::MatchAny,
            [&query, &batch, &delete, &table_reads()]
        );
        let report = sweeper(client, mode).sweep_at(NOW).await;
        assert_eq!(report.items_found, 0, "{mode}");
        assert_eq!(report.items_invalid, 6, "{mode}");
        assert_eq!(report.items_deleted, 0, "{mode}");
    }
    assert_eq!(batch.num_calls(), 0);
    assert_eq!(delete.num_calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn conditional_mode_tells_kept_from_gone_and_retries_throttling() {
    fn condition_failed(item: Option<Key>) -> DeleteItemError {
        let error = ConditionalCheckFailedException::builder()
            .message("The conditional request failed")
            .set_item(item)
            .meta(meta("ConditionalCheckFailedException"));
        DeleteItemError::ConditionalCheckFailedException(error.build())
    }
    let query = query_returning(vec![expired(0), expired(1), expired(2), expired(3)]);
    let delete = mock!(Client::delete_item)
        .sequence()
        .output(|| DeleteItemOutput::builder().build())
        // ttl extended: the service returns the item as it is now
        .error(|| condition_failed(Some(expired(1))))
        .error(|| {
            let error = InternalServerError::builder().message("Internal server error");
            DeleteItemError::InternalServerError(error.meta(meta("InternalServerError")).build())
        })
        .output(|| DeleteItemOutput::builder().build())
        // the item no longer exists: nothing is returned
        .error(|| condition_failed(None))
        .build();
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&query, &delete]);
    let report = sweeper(client, DeleteMode::Conditional).sweep_at(NOW).await;
    assert_eq!(delete.num_calls(), 5);
    report.assert_fields("items_deleted=2 items_skipped=1 items_gone=1 items_retried=1");
    assert!(report.is_success());
}

#[tokio::test(start_paused = true)]
async fn a_missing_table_stops_the_sweep_with_an_error() {
    let query =
        mock!(Client::query).then_error(|| QueryError::ResourceNotFoundException(not_found()));
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&query]);
    let mut opts = options(DeleteMode::Batch);
    opts.lookback_windows = 5;
    let report = sweeper_with(client, opts).sweep_at(NOW).await;
    assert_eq!(query.num_calls(), 1, "stops after a non-retryable error");
    assert_eq!(report.windows_left, 6);
    assert_eq!(report.errors.len(), 1);
    assert_eq!(report.errors[0].kind, ErrorKind::NotFound);
    assert!(!report.is_success());
    assert!(!report.stopped_early);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_stops_new_work_and_reports_what_is_left() {
    // Each query takes 1 s (virtual); the deadline at 1.5 s lets the partitions that started
    // before it finish, and no others start: `concurrency` per second.
    for (concurrency, swept) in [(1, 2), (4, 8)] {
        let mut opts = options(DeleteMode::Batch);
        opts.lookback_windows = 9;
        opts.max_concurrency = concurrency;
        let store = MemStore::new(Layout::default()).delay(Op::Query, Duration::from_secs(1));
        let s = mem_sweeper(store, opts);
        let stop = Stop::at(Some(Instant::now() + Duration::from_millis(1500)));
        let report = s.sweep(Timestamp::from_secs(NOW), &stop).await;
        assert!(report.stopped_early, "{concurrency}");
        assert_eq!(report.windows_swept, swept, "{concurrency}");
        assert_eq!(report.windows_left, 10 - swept, "{concurrency}");
        assert!(report.is_success(), "running out of time is not a failure");
        assert!(!report.is_complete());
    }
}

#[tokio::test(start_paused = true)]
async fn the_deadline_stops_deletes_inside_a_page_and_reports_the_rest_as_left() {
    use std::sync::atomic::Ordering::SeqCst;
    // (mode, time per request, requests the whole page needs)
    for (mode, delete_time, all_requests) in [
        (DeleteMode::Batch, Duration::from_millis(100), 40),
        (DeleteMode::Conditional, Duration::from_millis(20), 1000),
    ] {
        // One 1,000-item page (as a 1 MB keys-only page would be), deletes taking `delete_time`.
        let store = MemStore::new(Layout::default())
            .any_partition()
            .page_size(1000)
            .delay(Op::BatchDelete, delete_time)
            .delay(Op::Delete, delete_time);
        (0..1000).for_each(|i| store.put_item(expired(i)));
        let mut opts = options(mode);
        opts.max_concurrency = 2;
        let s = mem_sweeper(store, opts);
        let deadline = Instant::now() + Duration::from_millis(500);
        let stop = Stop::at(Some(deadline));
        let report = s.sweep(Timestamp::from_secs(NOW), &stop).await;
        let sends = s.store().calls(Op::BatchDelete) + s.store().calls(Op::Delete);
        let deleted = s.store().deleted.load(SeqCst);
        // Two requests at a time for 0.5 s: a handful of requests, not the whole page.
        assert!(
            sends <= all_requests / 3,
            "{mode}: {sends} of {all_requests} requests sent after the deadline"
        );
        let on_time = Instant::now() <= deadline + delete_time * 2;
        assert!(on_time, "{mode}: ran past the deadline");
        assert_eq!(report.items_found, 1000, "{mode}");
        assert_eq!(report.items_deleted, deleted as u64, "{mode}");
        let left = report.items_left;
        assert_eq!(left, 1000 - deleted as u64, "{mode}: {report:?}");
        assert!(report.stopped_early && report.is_success(), "{mode}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_tick_after_a_long_gap_reads_no_more_windows_than_a_full_sweep() {
    use support::ticks_for;
    use ttl_sweeper::engine::run_ticks;
    let mut opts = options(DeleteMode::Batch);
    opts.lookback_windows = 15;
    let s = mem_sweeper(MemStore::new(Layout::default()), opts);
    let ticks = ticks_for(Duration::from_millis(3500));
    // The first sweep as of ten days ago, then ticks as of the clock: the gap is 14,400 windows.
    let first = Timestamp::from_secs(NOW - 10 * 86_400);
    let report = run_ticks(
        &s,
        first,
        &|| Timestamp::from_secs(NOW),
        &ticks,
        &Stop::never(),
        |_| {},
    )
    .await;
    let queries = s.store().calls(Op::Query);
    assert!(report.ticks >= 3, "{report:?}");
    // The first tick reads the gap's windows back to MAX_CATCHUP at most (older ones are left to
    // a checkpoint's catch-up), as a full sweep's catch-up would, not the 14,400 of ten days;
    // every other tick and full sweep at most the lookback's 16.
    let catchup = (s.options().max_catchup_seconds / 60) as usize + 2;
    assert!(
        queries <= catchup + 16 * report.ticks as usize,
        "{queries} queries in {} ticks",
        report.ticks
    );
}

#[tokio::test(start_paused = true)]
async fn batch_mode_reads_keys_read_long_ago_again_before_retrying_them() {
    // Three expired keys; the first BatchWriteItem is slow and applies nothing, and while it
    // hangs the application deletes item-1 and writes it again with a new, future ttl.
    let store = MemStore::new(Layout::default())
        .any_partition()
        .fault(
            Op::BatchDelete,
            When::Call(1),
            Fault::Delay(Duration::from_millis(300)),
        )
        .fault(Op::BatchDelete, When::Call(1), Fault::Unprocessed)
        .change(
            Op::BatchDelete,
            When::Call(1),
            "item-1",
            Change::Put((NOW + 3600) as f64),
        );
    (0..3).for_each(|i| store.put_item(expired(i)));
    let mut opts = options(DeleteMode::Batch);
    opts.batch_max_read_age = Duration::from_millis(200);
    let s = mem_sweeper(store, opts);
    let report = s.sweep_at(NOW).await;
    let left: Vec<(String, i64)> = (s.store().items().iter())
        .map(|(id, i)| (id.clone(), ttl_of(i) as i64))
        .collect();
    assert_eq!(left, [("item-1".to_string(), NOW + 3600)], "{report:?}");
    let counts = (report.items_deleted, report.items_skipped);
    assert_eq!(counts, (2, 1), "{report:?}");
    assert_eq!(report.items_reread, 3, "{report:?}");
    assert!(report.is_success(), "{report:?}");
}

/// Credentials that take `delay` to resolve, as a slow IMDS or STS refresh does.
#[derive(Debug)]
struct SlowCredentials {
    delay: Duration,
}

impl aws_credential_types::provider::ProvideCredentials for SlowCredentials {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        aws_credential_types::provider::future::ProvideCredentials::new(async move {
            tokio::time::sleep(self.delay).await;
            Ok(aws_credential_types::Credentials::new(
                "local", "local", None, None, "slow",
            ))
        })
    }
}

#[tokio::test]
async fn a_slow_credential_refresh_never_delays_a_batch_past_its_attempt_timeout() {
    // A key judged fresh is sent at once; a credential refresh taking 5 s must not carry the
    // request to DynamoDB later than the batch attempt timeout after that check.
    use aws_smithy_types::body::SdkBody;
    let arrived: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
    let http = aws_smithy_http_client::test_util::infallible_client_fn({
        let arrived = arrived.clone();
        move |_request| {
            arrived.lock().unwrap().push(std::time::Instant::now());
            http::Response::builder()
                .status(200)
                .body(SdkBody::from(r#"{"UnprocessedItems":{}}"#))
                .unwrap()
        }
    });
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(SlowCredentials {
            delay: Duration::from_secs(5),
        })
        .http_client(http)
        .build();
    let store = DynamoStore::new(Client::from_conf(config));
    let key = unwindowed("k1", NOW - 10);
    let checked = std::time::Instant::now();
    let result = store.batch_delete(&default_schema(), &[&key]).await;
    let bound = ttl_sweeper::store::BATCH_ATTEMPT_TIMEOUT;
    for at in arrived.lock().unwrap().iter() {
        let after = at.duration_since(checked);
        assert!(after <= bound, "sent {after:?} after the age check");
    }
    let took = checked.elapsed();
    assert!(took <= bound + Duration::from_millis(500), "{took:?}");
    let error = result.expect_err("the attempt timed out while the credentials were resolved");
    assert_eq!(error.kind, ErrorKind::Transient, "{error}");
}

#[tokio::test]
async fn keys_read_again_ask_for_their_key_and_ttl_only() {
    let projected = mock!(Client::batch_get_item)
        .match_requests(|r| {
            let asked = &r.request_items().unwrap()[TABLE];
            asked.consistent_read() == Some(true)
                && asked.projection_expression() == Some("#k0, #ttl")
                && asked.expression_attribute_names().unwrap()["#ttl"] == "ttl"
                && asked.expression_attribute_names().unwrap()["#k0"] == "id"
        })
        .then_output(|| found(vec![expired(0)]));
    let whole = mock!(Client::batch_get_item)
        .match_requests(|r| {
            r.request_items().unwrap()[TABLE]
                .projection_expression()
                .is_none()
        })
        .then_output(|| BatchGetItemOutput::builder().build());
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&projected, &whole]);
    let (store, schema) = (DynamoStore::new(client), default_schema());
    let read = |ttl_only| store.get_items(&schema, vec![key("item-0")], ttl_only);
    assert_eq!(read(true).await.unwrap(), vec![expired(0)]);
    assert!(read(false).await.unwrap().is_empty());
    assert_eq!((projected.num_calls(), whole.num_calls()), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn keys_a_read_leaves_unprocessed_are_asked_again_after_a_backoff() {
    use aws_sdk_dynamodb::types::KeysAndAttributes;
    let left = |k: Key| KeysAndAttributes::builder().keys(k).build().unwrap();
    let read = mock!(Client::batch_get_item)
        .sequence()
        .output(move || {
            BatchGetItemOutput::builder()
                .responses(TABLE, vec![expired(0)])
                .unprocessed_keys(TABLE, left(key("item-1")))
                .build()
        })
        .output(|| found(vec![expired(1)]))
        .build();
    let never = mock!(Client::batch_get_item).then_output(move || {
        BatchGetItemOutput::builder()
            .unprocessed_keys(TABLE, left(key("item-2")))
            .build()
    });
    let store = DynamoStore::new(mock_client!(
        aws_sdk_dynamodb,
        RuleMode::Sequential,
        [&read]
    ));
    let started = Instant::now();
    let keys = vec![key("item-0"), key("item-1")];
    let found = store.get_items(&default_schema(), keys, true).await;
    assert_eq!(found.unwrap(), vec![expired(0), expired(1)]);
    assert_eq!(read.num_calls(), 2);
    // Within the first retry's cap.
    assert_waited(started, 50);

    let store = DynamoStore::new(mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&never]));
    let started = Instant::now();
    let error = store
        .get_items(&default_schema(), vec![key("item-2")], true)
        .await
        .expect_err("keys still unprocessed after the last attempt");
    assert_eq!(error.kind, ErrorKind::Throttled, "{error}");
    assert_eq!(never.num_calls(), 3);
    assert_waited(started, 150);
}

#[tokio::test(start_paused = true)]
async fn the_writers_mark_seen_stored_is_not_asked_for_again_for_five_minutes() {
    use aws_sdk_dynamodb::operation::put_item::{PutItemError, PutItemOutput};
    // A missing table (not known: asked again), stored, then found there by its condition.
    let missing = || PutItemError::ResourceNotFoundException(not_found());
    let found = || {
        let e = ConditionalCheckFailedException::builder()
            .message("there")
            .meta(meta("ConditionalCheckFailedException"));
        PutItemError::ConditionalCheckFailedException(e.build())
    };
    let put = mock!(Client::put_item)
        .sequence()
        .error(missing)
        .output(|| PutItemOutput::builder().build())
        .error(found)
        .build();
    let store = DynamoStore::new(mock_client!(aws_sdk_dynamodb, RuleMode::Sequential, [&put]));
    let mut schema = default_schema();
    schema.index = Index::Table("sessions-expiry".into());
    let at = Timestamp::from_secs(1_800_000_000);
    let error = store.mark_packs(&schema, at).await.expect_err("missing");
    assert_eq!(error.kind, ErrorKind::NotFound, "{error}");
    store.mark_packs(&schema, at).await.unwrap();
    assert_eq!(put.num_calls(), 2);
    for _ in 0..10 {
        store.mark_packs(&schema, at).await.unwrap();
    }
    assert_eq!(
        put.num_calls(),
        2,
        "the mark seen stored is not asked for again"
    );
    tokio::time::sleep(ttl_sweeper::store::dynamo::MARK_KNOWN_FOR).await;
    store.mark_packs(&schema, at).await.unwrap();
    assert_eq!(
        put.num_calls(),
        3,
        "asked again once the time is up: found there"
    );
    store.mark_packs(&schema, at).await.unwrap();
    assert_eq!(put.num_calls(), 3);
}

/// `sweep --local` and `run --local` sweep as of any instant, so they refuse a table whose ARN
/// does not prove a local test server, before reading or deleting anything; on one that does,
/// an expired item is deleted on the condition that its ttl is still the value read.
#[tokio::test]
async fn a_local_sweep_refuses_a_table_no_local_server_s_arn_proves() {
    use aws_sdk_dynamodb::operation::describe_table::DescribeTableOutput;
    use aws_sdk_dynamodb::operation::scan::ScanOutput;
    use aws_sdk_dynamodb::types::{KeySchemaElement, KeyType, TableDescription};
    use ttl_sweeper::tools::local;
    let described = |arn: &'static str| {
        mock!(Client::describe_table).then_output(move || {
            let key = KeySchemaElement::builder()
                .attribute_name("id")
                .key_type(KeyType::Hash)
                .build()
                .unwrap();
            let table = TableDescription::builder()
                .table_arn(arn)
                .key_schema(key)
                .build();
            DescribeTableOutput::builder().table(table).build()
        })
    };
    let scan = mock!(Client::scan).then_output(|| {
        let items = vec![expired(0), unwindowed("live", NOW + 3600)];
        ScanOutput::builder().set_items(Some(items)).build()
    });
    let delete = mock!(Client::delete_item)
        .match_requests(|r| {
            let values = r.expression_attribute_values().unwrap();
            r.condition_expression() == Some("#ttl = :read_ttl")
                && values.get(":read_ttl") == Some(&num(NOW - 10))
                && r.key().unwrap().get("id") == Some(&AV::S("item-0".into()))
        })
        .then_output(|| DeleteItemOutput::builder().build());

    let real = described("arn:aws:dynamodb:us-east-1:123456789012:table/sessions");
    let rules = [&real, &scan, &delete];
    let store = DynamoStore::new(mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, rules));
    let error = local::open(&store, TABLE, "ttl").await.unwrap_err();
    assert!(error.to_string().contains("`ddblocal`"), "{error}");
    assert_eq!((scan.num_calls(), delete.num_calls()), (0, 0));

    let ddblocal = described("arn:aws:dynamodb:ddblocal:000000000000:table/sessions");
    let rules = [&ddblocal, &scan, &delete];
    let store = DynamoStore::new(mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, rules));
    let table = local::open(&store, TABLE, "ttl").await.unwrap();
    let at = Timestamp::from_secs(NOW);
    let report = local::sweep(&store, &table, at).await.unwrap();
    assert_eq!((report.scanned, report.expired, report.deleted), (2, 1, 1));
    assert_eq!(delete.num_calls(), 1);
}

/// `audit --max-rcu` paces the look-ups of the expiry index table's entries too, not only the
/// scan: 30 live items, each found by a strongly consistent Query of 1 read unit, at 5 units a
/// second take at least 5 s (the bucket starts with 5). Before, the look-ups went unpaced and
/// the audit ended at once.
#[tokio::test(start_paused = true)]
async fn audit_paces_the_index_look_ups_within_max_rcu() {
    use aws_sdk_dynamodb::operation::query::QueryOutput;
    use aws_sdk_dynamodb::operation::scan::ScanOutput;
    use aws_sdk_dynamodb::types::ConsumedCapacity;
    use ttl_sweeper::tools::audit;
    let units = |n: f64| ConsumedCapacity::builder().capacity_units(n).build();
    let scan = mock!(Client::scan).then_output(move || {
        let items = (0..30)
            .map(|i| unwindowed(&format!("live-{i}"), NOW + 600))
            .collect();
        let out = ScanOutput::builder().set_items(Some(items));
        out.consumed_capacity(units(0.5)).build()
    });
    let query = mock!(Client::query).then_output(move || {
        QueryOutput::builder()
            .count(1)
            .consumed_capacity(units(1.0))
            .build()
    });
    let rules = [&scan, &query];
    let store = DynamoStore::new(mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, rules));
    let mut schema = default_schema();
    schema.index = Index::Table("sessions-expiry-index".into());
    let started = Instant::now();
    let now = Timestamp::from_secs(NOW);
    let seen = Mutex::new(Vec::new());
    let progress = |n: u64| seen.lock().unwrap().push(n);
    let report = audit::audit(&store, &schema, 1, None, Some(5.0), now, &progress);
    let report = report.await.unwrap();
    assert_eq!((report.scanned, report.missing_entry), (30, 0));
    assert_eq!(query.num_calls(), 30);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(5),
        "30 units at 5 a second took {took:?}"
    );
    assert_eq!(*seen.lock().unwrap(), vec![30], "progress after the page");
}
