//! The Lambda handler, driven by JSON fixtures against the local server.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use serde_json::{json, Value};
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

fn settings() -> HandlerSettings {
    HandlerSettings {
        namespace: "Test".into(),
        tick: None,
        schedule: Duration::from_secs(60),
        handoff: Duration::from_secs(10),
    }
}

async fn setup(
    prefix: &str,
    now: i64,
) -> (
    aws_sdk_dynamodb::Client,
    String,
    Sweeper<ttl_sweeper::store::DynamoStore>,
) {
    let client = client().await;
    let table = table_name(prefix);
    create_table(&client, &TableSpec::simple(&table)).await;
    let mut items: Vec<_> = (0..30)
        .map(|i| session(&format!("old-{i}"), now - 2 - i))
        .collect();
    items.extend((0..5).map(|i| session(&format!("new-{i}"), now + 120 + i)));
    put_items(&client, &table, items).await;
    let cfg = config(&table, &[]);
    let (store, schema) = store_and_schema(&cfg).await;
    (
        client,
        table,
        Sweeper::new(store, schema, cfg.sweep_options()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_and_transformed_events_sweep_as_of_their_time() {
    let now = now();
    let clock = Timestamp::from_secs(now);
    for (name, prefix) in [
        ("scheduled-event.json", "h_sched"),
        ("transformed-event.json", "h_time"),
    ] {
        let (client, table, sweeper) = setup(prefix, now).await;
        let mut event = fixture(name);
        event["time"] = json!(at(now));
        let report = handle(
            &sweeper,
            &event,
            &|| clock,
            Some(Duration::from_secs(60)),
            &settings(),
        )
        .await
        .unwrap();
        assert_eq!(
            report.sweep_at,
            ttl_sweeper::expiry::iso_millis(now),
            "{name}"
        );
        assert_eq!(report.items_deleted, 30, "{name}");
        assert_eq!(scan_all(&client, &table).await.len(), 5, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_events_delete_nothing() {
    let now = now();
    let clock = Timestamp::from_secs(now);
    let (client, table, sweeper) = setup("h_bad", now).await;
    for event in [
        json!({"detail-type": "Object Created", "source": "aws.s3", "time": at(now)}),
        json!({"time": "not a time"}),
        json!({"time": now}),
        json!([at(now)]),
        json!({"Records": []}),
    ] {
        let err = handle(&sweeper, &event, &|| clock, None, &settings())
            .await
            .unwrap_err();
        assert!(matches!(err, HandlerError::Event(_)), "{event}: {err}");
        assert_eq!(err.error_type(), "InvalidEvent");
    }
    assert_eq!(scan_all(&client, &table).await.len(), 35);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_from_the_future_sweeps_only_what_has_expired_by_the_clock() {
    let now = now();
    let clock = Timestamp::from_secs(now);
    let (client, table, sweeper) = setup("h_future", now).await;
    let event = json!({"time": at(now + 86_400)});
    let report = handle(&sweeper, &event, &|| clock, None, &settings())
        .await
        .unwrap();
    assert_eq!(report.sweep_at, ttl_sweeper::expiry::iso_millis(now));
    assert_eq!(report.items_deleted, 30);
    assert_eq!(
        scan_all(&client, &table).await.len(),
        5,
        "unexpired items survive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tick_mode_sweeps_repeatedly_until_the_next_invocation_has_surely_started() {
    let now = now();
    let (client, table, sweeper) = setup("h_ticks", now).await;
    // Items that expire while the invocation is running.
    put_items(
        &client,
        &table,
        (0..3)
            .map(|i| session(&format!("soon-{i}"), now + 1 + i))
            .collect(),
    )
    .await;
    let settings = HandlerSettings {
        namespace: "Test".into(),
        tick: Some(Duration::from_secs(1)),
        schedule: Duration::from_secs(4),
        handoff: Duration::from_secs(2),
    };
    let started = std::time::Instant::now();
    let report = handle(
        &sweeper,
        &json!({}),
        &common::clock,
        Some(Duration::from_secs(60)),
        &settings,
    )
    .await
    .unwrap();
    let took = started.elapsed();
    // It ticks through its schedule period and the handoff overlap (6 s); the last tick starts
    // before that ends.
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert!(report.ticks >= 3, "{report:?}");
    assert_eq!(report.items_deleted, 33, "{report:?}");
    assert_eq!(scan_all(&client, &table).await.len(), 5);
}

/// The EventBridge documentation's sample Scheduled Event (2015) sent to a tick-mode function:
/// the invocation sweeps as of the clock, reads a bounded number of windows, and ends on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_event_in_tick_mode_sweeps_as_of_the_clock_and_reads_a_bounded_range() {
    let now = now();
    let (client, table, sweeper) = setup("h_old", now).await;
    let mut event = fixture("scheduled-event.json");
    event["time"] = json!("2015-10-08T16:53:06Z");
    let settings = HandlerSettings {
        namespace: "Test".into(),
        tick: Some(Duration::from_secs(1)),
        schedule: Duration::from_secs(4),
        handoff: Duration::from_secs(1),
    };
    let report = tokio::time::timeout(
        Duration::from_secs(30),
        handle(
            &sweeper,
            &event,
            &common::clock,
            Some(Duration::from_secs(60)),
            &settings,
        ),
    )
    .await
    .expect("an old event must not make the invocation read every window since 2015")
    .unwrap();
    assert!(
        report.sweep_at.starts_with(&at(now)[..10]),
        "{}",
        report.sweep_at
    );
    // A full sweep (one at the start, one per schedule period) reads at most the lookback (15)
    // and the current window; each tick at most three windows.
    assert!(
        report.windows_swept <= 2 * 16 + 3 * report.ticks as usize,
        "{report:?}"
    );
    assert_eq!(report.items_deleted, 30);
    assert_eq!(scan_all(&client, &table).await.len(), 5);
}

/// A log writer that keeps what it is given, to read the invocation's JSON lines back.
#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A tick-mode invocation whose ticks delete items logs exactly one `sweep finished` line, whose
/// `deleted` is the invocation's total; the ticks log `tick finished`, so summing `deleted` over
/// the `sweep finished` lines counts every item once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tick_mode_logs_one_summary_line_per_invocation() {
    use tracing::instrument::WithSubscriber;

    let now = now();
    let (client, table, sweeper) = setup("h_tick_logs", now).await;
    // Items that expire while the invocation ticks, so that later ticks delete something too.
    put_items(
        &client,
        &table,
        (0..3)
            .map(|i| session(&format!("soon-{i}"), now + 1 + i))
            .collect(),
    )
    .await;
    let settings = HandlerSettings {
        namespace: "Test".into(),
        tick: Some(Duration::from_secs(1)),
        schedule: Duration::from_secs(4),
        handoff: Duration::from_secs(1),
    };
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_writer(move || writer.clone())
        .finish();
    let report = handle(
        &sweeper,
        &json!({}),
        &common::clock,
        Some(Duration::from_secs(60)),
        &settings,
    )
    .with_subscriber(subscriber)
    .await
    .unwrap();
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    let logged: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let with = |message: &str| -> Vec<&Value> {
        logged.iter().filter(|l| l["message"] == message).collect()
    };
    let summaries = with("sweep finished");
    let ticks = with("tick finished");
    assert_eq!(
        summaries.len(),
        1,
        "one summary line per invocation:\n{text}"
    );
    assert_eq!(summaries[0]["deleted"], report.items_deleted, "{text}");
    assert_eq!(report.items_deleted, 33, "{report:?}");
    // Every tick that deleted something has its own line (the first tick at least: the 30 old
    // items), and those lines add up to the summary.
    assert!(!ticks.is_empty(), "tick lines:\n{text}");
    let tick_deleted: u64 = ticks.iter().map(|l| l["deleted"].as_u64().unwrap()).sum();
    assert_eq!(tick_deleted, report.items_deleted, "{text}");
}
