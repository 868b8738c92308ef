//! The Lambda's log lines in tick mode: one `sweep finished` summary per invocation. In a test
//! process of its own, because it installs a tracing subscriber for one invocation, and tracing
//! caches per call site whether anyone listens: a summary logged first by another test of the
//! same process, with no subscriber, could stay unheard.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;
use ttl_sweeper::lambda::handle;

/// A tick-mode invocation sweeps repeatedly until the next invocation has surely started, and
/// logs exactly one `sweep finished` line, whose `deleted` is the invocation's total; the ticks
/// log `tick finished`, so summing `deleted` over the `sweep finished` lines counts every item
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tick_mode_sweeps_until_the_next_invocation_and_logs_one_summary_line() {
    use tracing::instrument::WithSubscriber;

    let now = now();
    let (client, table, sweeper) = sessions_and_sweeper("h_tick_logs", now).await;
    // Items that expire while the invocation ticks, so that later ticks delete something too.
    put_items(&client, &table, sessions("soon", 3, |i| now + 1 + i)).await;
    let settings = support::handler_settings(Some(1), 4, 2);
    let lines = JsonLines::default();
    let writer = lines.clone();
    let json = tracing_subscriber::fmt().json().flatten_event(true);
    let subscriber = json.with_writer(move || writer.clone()).finish();
    let started = std::time::Instant::now();
    let (event, minute) = (json!({}), Some(Duration::from_secs(60)));
    let handled = handle(&sweeper, &event, &support::clock, minute, &settings);
    let report = handled.with_subscriber(subscriber).await.unwrap();
    let took = started.elapsed();
    // It ticks through its schedule period and the handoff overlap (6 s); the last tick starts
    // before that ends, and the invocation ends soon after (well before the 60 s deadline; up
    // to 4 s of slack for a slow last tick on a loaded machine).
    let on_time = took >= Duration::from_secs(5) && took < Duration::from_secs(10);
    assert!(on_time, "{took:?}");
    assert!(report.ticks >= 3, "{report:?}");
    let (text, logged) = (lines.text(), lines.lines());
    let with = |message: &str| -> Vec<&Value> {
        logged.iter().filter(|l| l["message"] == message).collect()
    };
    let summaries = with("sweep finished");
    let ticks = with("tick finished");
    let one = summaries.len() == 1;
    assert!(one, "one summary line per invocation:\n{text}");
    assert_eq!(summaries[0]["deleted"], report.items_deleted, "{text}");
    assert_eq!(removed(&report), 33, "{report:?}");
    assert_eq!(scan_all(&client, &table).await.len(), 5, "{report:?}");
    // Every tick that deleted something has its own line (the first tick at least: the 30 old
    // items), and those lines add up to the summary.
    assert!(!ticks.is_empty(), "tick lines:\n{text}");
    let tick_deleted: u64 = ticks.iter().map(|l| l["deleted"].as_u64().unwrap()).sum();
    assert_eq!(tick_deleted, report.items_deleted, "{text}");
}
