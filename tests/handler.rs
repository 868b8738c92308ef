//! The Lambda handler, driven by JSON fixtures against the local server.

use crate::support::{self, fault_proxy};

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use support::*;
use ttl_sweeper::engine::Sweeper;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::lambda::{handle, HandlerError, HandlerSettings};

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn at(secs: i64) -> String {
    DateTime::<Utc>::from_timestamp(secs, 0)
        .unwrap()
        .to_rfc3339()
}

/// The fixture `name` with its `time` at `secs`.
fn event_at(name: &str, secs: i64) -> Value {
    let mut event = fixture(name);
    event["time"] = json!(at(secs));
    event
}

fn settings() -> HandlerSettings {
    support::handler_settings(None, 60, 10)
}

/// A clock that reads `secs`.
fn at_secs(secs: i64) -> impl Fn() -> Timestamp {
    move || Timestamp::from_secs(secs)
}

/// One scheduled invocation with `remaining` time left, at `clock`; panics if it is still
/// running when that time is up.
async fn handle_before_deadline<S: ttl_sweeper::store::Store>(
    sweeper: &Sweeper<S>,
    clock: Timestamp,
    remaining: Duration,
) -> Result<ttl_sweeper::engine::SweepReport, HandlerError> {
    let (event, settings, clock) = (json!({}), settings(), move || clock);
    let started = std::time::Instant::now();
    let handled = handle(sweeper, &event, &clock, Some(remaining), &settings);
    let ended = tokio::time::timeout(remaining, handled).await;
    let running = |_| panic!("still running at its deadline, {:?} in", started.elapsed());
    ended.unwrap_or_else(running)
}

/// Scheduled and transformed events sweep as of their time; an event from the future sweeps
/// only what has expired by the clock (and without a deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_sweep_as_of_their_time_and_no_later_than_the_clock() {
    let now = now();
    let minute = Some(Duration::from_secs(60));
    let cases = [
        ("scheduled-event.json", now, minute),
        ("transformed-event.json", now, minute),
        ("scheduled-event.json", now + 86_400, None),
    ];
    for (name, time, remaining) in cases {
        let (client, table, sweeper) = sessions_and_sweeper("h_time", now).await;
        let event = event_at(name, time);
        let handled = handle(&sweeper, &event, &at_secs(now), remaining, &settings()).await;
        let report = handled.unwrap();
        let sweep_at = ttl_sweeper::expiry::iso_millis(now);
        assert_eq!(report.sweep_at, sweep_at, "{name} at {time}");
        assert_eq!(removed(&report), 30, "{name} at {time}: {report:?}");
        let left = scan_all(&client, &table).await.len();
        assert_eq!(left, 5, "{name} at {time}: unexpired items survive");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_events_delete_nothing() {
    let now = now();
    let (client, table, sweeper) = sessions_and_sweeper("h_bad", now).await;
    for event in [
        json!({"detail-type": "Object Created", "source": "aws.s3", "time": at(now)}),
        json!({"time": "not a time"}),
        json!({"time": now}),
        json!([at(now)]),
        json!({"Records": []}),
    ] {
        let handled = handle(&sweeper, &event, &at_secs(now), None, &settings()).await;
        let err = handled.unwrap_err();
        assert!(matches!(err, HandlerError::Event(_)), "{event}: {err}");
        assert_eq!(err.error_type(), "InvalidEvent");
    }
    assert_eq!(scan_all(&client, &table).await.len(), 35);
}

/// The EventBridge documentation's sample Scheduled Event (2015) sent to a tick-mode function:
/// the invocation sweeps as of the clock, reads a bounded number of windows, and ends on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_event_in_tick_mode_sweeps_as_of_the_clock_and_reads_a_bounded_range() {
    let now = now();
    let (client, table, sweeper) = sessions_and_sweeper("h_old", now).await;
    let mut event = fixture("scheduled-event.json");
    event["time"] = json!("2015-10-08T16:53:06Z");
    let settings = support::handler_settings(Some(1), 4, 1);
    let remaining = Some(Duration::from_secs(60));
    let handled = handle(&sweeper, &event, &support::clock, remaining, &settings);
    let report = tokio::time::timeout(Duration::from_secs(30), handled)
        .await
        .expect("an old event must not make the invocation read every window since 2015")
        .unwrap();
    // As of the clock: not before the test began, not after it ended (not the event's 2015).
    let sweep_at = &report.sweep_at;
    let secs = DateTime::parse_from_rfc3339(sweep_at).unwrap().timestamp();
    assert!((now..=support::now()).contains(&secs), "{sweep_at}");
    // A full sweep (one at the start, one per schedule period) reads at most the lookback (15)
    // and the current window; each tick at most three windows.
    let bounded = report.windows_swept <= 2 * 16 + 3 * report.ticks as usize;
    assert!(bounded, "{report:?}");
    assert_eq!(removed(&report), 30, "{report:?}");
    assert_eq!(scan_all(&client, &table).await.len(), 5);
}

/// DynamoDB answering no query for longer than a query's attempt timeout and retries: the
/// invocation still ends, and writes its summary, before its deadline. (A query's three 10 s
/// attempts would otherwise outlast a 5 s deadline several times over.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_dynamodb_cannot_keep_the_invocation_past_its_deadline() {
    use fault_proxy::{Fault, FaultProxy, Plan};
    use ttl_sweeper::store::dynamo::{ATTEMPT_TIMEOUT, CONNECT_TIMEOUT, OPERATION_TIMEOUT};

    let now = now();
    let (_client, table, _) = sessions_and_sweeper("slow_dynamodb", now).await;
    let held = Plan::script(|op, _| (op == "Query").then_some(Fault::Delay));
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(60), held).await;
    // The production client's timeouts and retries, through the proxy.
    let timeouts = [CONNECT_TIMEOUT, ATTEMPT_TIMEOUT, OPERATION_TIMEOUT];
    let store = support::store(retrying_client(&proxy.endpoint, timeouts));
    let sweeper = sweeper_over(&config(&table, &[]), |_| store).await;
    let deadline = Duration::from_secs(5);
    let handled = handle_before_deadline(&sweeper, Timestamp::from_secs(now), deadline).await;
    let Err(HandlerError::SweepFailed { report, .. }) = handled else {
        panic!("no query was answered: the sweep cannot have succeeded: {handled:?}");
    };
    report.assert_fields("stopped_early=true items_deleted=0");
    assert!(proxy.stats.faults_total() >= 1, "the queries were held");
}

/// A store whose calls never answer: the sweep ends each one when the handler's `Stop` says calls
/// end, and the invocation still ends, with a summary and a failure, before its deadline. (What
/// no bound covers, an expiry-event sink that does not answer, the handler drops: tests/safety.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_that_ignores_every_bound_is_dropped_before_the_deadline() {
    use support::mem_store::{mem_sweeper, Fault, MemStore, Op, When};

    let cfg = config("sessions", &[]);
    let stall = |store: MemStore, op| store.fault(op, When::Always, Fault::Stall);
    let stalled = Op::ALL
        .into_iter()
        .fold(MemStore::new(cfg.target.layout.clone()), stall);
    let sweeper = mem_sweeper(stalled, cfg.options.clone());
    let deadline = Duration::from_secs(4);
    let handled = handle_before_deadline(&sweeper, Timestamp::from_secs(now()), deadline).await;
    let Err(HandlerError::SweepFailed { report, first, .. }) = handled else {
        panic!("a dropped sweep is a failed invocation: {handled:?}");
    };
    assert!(report.stopped_early, "{report:?}");
    assert!(first.contains("deadline"), "{first}");
}

/// One invocation for three tables, the second of which cannot be opened: the other two are swept
/// side by side, the answer holds every table's report in order, and the invocation fails naming
/// the table that could not be swept. The table is tried again only after its retry period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_table_that_cannot_be_opened_stops_none_of_the_others() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use ttl_sweeper::engine::tables::{Open, Table};
    use ttl_sweeper::lambda::handle_tables;
    use ttl_sweeper::store::{DynamoStore, ErrorKind, StoreError};

    let now = now();
    let (client, first, first_sweeper) = sessions_and_sweeper("h_many_a", now).await;
    let (_, third, third_sweeper) = sessions_and_sweeper("h_many_c", now).await;
    let opens = Arc::new(AtomicUsize::new(0));
    let counted = opens.clone();
    let open: Open<DynamoStore> = Box::new(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        let missing = StoreError::new(
            ErrorKind::NotFound,
            "DescribeTable",
            "table \"h_many_b\" does not exist",
        );
        Box::pin(async { Err(missing) })
    });
    let tables = [
        Table::ready(first_sweeper),
        Table::lazy("h_many_b", open, Duration::from_secs(3600)),
        Table::ready(third_sweeper),
    ];
    let event = event_at("scheduled-event.json", now);
    let handled = handle_tables(&tables, &event, &at_secs(now), None, &settings()).await;
    let Err(HandlerError::TablesFailed {
        failed,
        tables: swept,
        first: message,
        reports,
    }) = handled
    else {
        panic!("{handled:?}")
    };
    assert_eq!((failed, swept), (1, 3));
    let named = message.starts_with("h_many_b: ") && message.contains("does not exist");
    assert!(named, "{message}");
    let names: Vec<&str> = reports.iter().map(|r| r.table.as_str()).collect();
    assert_eq!(names, [first.as_str(), "h_many_b", third.as_str()]);
    for (report, table) in [(&reports[0], &first), (&reports[2], &third)] {
        assert_eq!(removed(report), 30, "{report:?}");
        assert!(report.is_success(), "{report:?}");
        let left = scan_all(&client, table).await.len();
        assert_eq!(left, 5, "unexpired items survive");
    }
    // The next invocation: the table is not tried again before its retry period.
    let again = handle_tables(&tables, &event, &at_secs(now), None, &settings()).await;
    let failed = matches!(again, Err(HandlerError::TablesFailed { failed: 1, .. }));
    assert!(failed, "{again:?}");
    let opened = opens.load(Ordering::SeqCst);
    assert_eq!(opened, 1, "opened once within the retry period");

    // One table answers its report, as before.
    let one = [Table::ready(sweeper(&first, &[]).await)];
    let answer = handle_tables(&one, &event, &at_secs(now), None, &settings()).await;
    let answer = answer.unwrap();
    assert_eq!(answer["table"], first.as_str(), "{answer}");
    assert!(answer.get("tables").is_none(), "{answer}");
}

/// A table opened during the invocation (it could not be at start-up) sweeps in the time that is
/// left, not the time there was when the invocation began: an opening that took most of it still
/// ends the invocation by its deadline.
#[tokio::test(start_paused = true)]
async fn a_table_opened_late_in_the_invocation_still_ends_by_its_deadline() {
    use support::mem_store::{mem_sweeper, MemStore, Op};
    use ttl_sweeper::engine::tables::{Open, Table};
    use ttl_sweeper::lambda::handle_tables;

    let cfg = config("sessions", &[]);
    let options = cfg.options.clone();
    let store = MemStore::new(cfg.target.layout.clone()).delay(Op::Query, Duration::from_secs(4));
    let open: Open<MemStore> = Box::new(move || {
        let sweeper = mem_sweeper(store.clone(), options.clone());
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(8)).await;
            Ok(sweeper)
        })
    });
    let tables = [Table::lazy("sessions", open, Duration::from_secs(3600))];
    let remaining = Duration::from_secs(10);
    let (event, settings, clock) = (json!({}), settings(), at_secs(now()));
    let begun = tokio::time::Instant::now();
    let handled = handle_tables(&tables, &event, &clock, Some(remaining), &settings).await;
    let took = begun.elapsed();
    assert!(
        took <= remaining,
        "ended {took:?} after it began, past its deadline: {handled:?}"
    );
}
