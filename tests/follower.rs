//! The daemon's stream follower (`run --follow-stream`) on the in-memory store and stream, in
//! paused time: an expired iterator costs no record, records trimmed before they were read are
//! counted and the shard read again from its oldest record, and a child shard is read only once
//! its parent is read to its end. The same follower on DynamoDB Local and its streams:
//! `stream_follow`.

use crate::support;

use std::future::Future;
use std::time::Duration;

use support::mem_store::{mem_sweeper, MemStore};
use support::mem_stream::{insert_record, MemStream};
use tokio::time::{sleep, Instant};
use ttl_sweeper::engine::{Stop, SweepOptions};
use ttl_sweeper::expiry::Layout;
use ttl_sweeper::index::follow::{FollowReport, Follower, Gathering};

const START: i64 = 1_700_000_000;

/// Records `from..=to` of items `item-<n>` due an hour after the start.
fn records(from: u64, to: u64) -> Vec<aws_lambda_events::dynamodb::EventRecord> {
    let record = |n: u64| insert_record(n, &format!("item-{n:03}"), START + 3600, START);
    (from..=to).map(record).collect()
}

/// Follows `stream` into `store`'s expiry index table for `secs` of virtual time while `script`
/// plays beside it; the follower's report.
async fn follow(
    store: &MemStore,
    stream: &MemStream,
    secs: u64,
    script: impl Future<Output = ()>,
) -> FollowReport {
    let schema = store.schema();
    let saved_at = Some(("checkpoints".to_owned(), "sessions#stream".to_owned()));
    let gathering = Gathering {
        hold: Duration::ZERO,
        ..Gathering::default()
    };
    let opened = Follower::open(store, stream.clone(), &schema, saved_at, gathering).await;
    let follower = opened.expect("the follower opens");
    let sweeper = mem_sweeper(store.clone(), SweepOptions::default());
    let clock = store.clock_fn(f64::round);
    let stop = Stop::at(Some(Instant::now() + Duration::from_secs(secs)));
    let (report, ()) = tokio::join!(follower.run(&sweeper, &clock, &stop, &|_| {}), script);
    report
}

/// The sequence numbers of every read, in the order read.
fn read(stream: &MemStream) -> Vec<u64> {
    let reads = stream
        .reads()
        .into_iter()
        .flat_map(|(_, sequences)| sequences);
    reads.map(|s| s.parse().unwrap()).collect()
}

fn store() -> MemStore {
    MemStore::new(Layout::default())
        .starting_at(START)
        .with_index_table()
}

/// The iterator of the first read has expired, and so has the one after new records arrive:
/// each time the follower asks for a new iterator where it was, and reads every record once.
#[tokio::test(start_paused = true)]
async fn an_expired_iterator_costs_no_record_and_reads_none_twice() {
    let store = store();
    let stream = MemStream::default().shard("s0", None);
    stream.push("s0", records(1, 5));
    stream.expire_next(1);
    let script = async {
        sleep(Duration::from_secs(3)).await;
        stream.expire_next(1);
        stream.push("s0", records(6, 10));
    };
    let report = follow(&store, &stream, 10, script).await;
    assert_eq!(read(&stream), (1..=10).collect::<Vec<_>>());
    assert_eq!(
        (report.index.records, report.index.entries_written),
        (10, 10)
    );
    assert_eq!(report.trimmed, 0);
}

/// Records are trimmed from the shard's start past where the follower stood: it counts the trim
/// (the items need a backfill) and reads the shard again from its oldest record left.
#[tokio::test(start_paused = true)]
async fn records_trimmed_before_they_were_read_are_counted_and_the_shard_read_from_its_oldest() {
    let store = store();
    let stream = MemStream::default().shard("s0", None);
    stream.push("s0", records(1, 4));
    let script = async {
        sleep(Duration::from_secs(3)).await;
        stream.push("s0", records(5, 10));
        stream.trim("s0", 8);
    };
    let report = follow(&store, &stream, 10, script).await;
    assert_eq!(read(&stream), [1, 2, 3, 4, 9, 10]);
    assert_eq!(report.trimmed, 1, "{report:?}");
    assert_eq!(report.index.records, 6);
}

/// A child shard listed before its parent is read only once the parent is read to its end.
#[tokio::test(start_paused = true)]
async fn a_child_shard_is_read_only_after_its_parent() {
    let store = store();
    let stream = MemStream::default()
        .shard("child", Some("parent"))
        .shard("parent", None);
    stream.push("child", records(6, 8));
    stream.push("parent", records(1, 3));
    let script = async {
        sleep(Duration::from_secs(2)).await;
        stream.push("parent", records(4, 5));
        stream.close("parent");
    };
    let report = follow(&store, &stream, 20, script).await;
    assert_eq!(read(&stream), (1..=8).collect::<Vec<_>>());
    let shards: Vec<String> = stream.reads().into_iter().map(|(shard, _)| shard).collect();
    let first_child = shards.iter().position(|s| s == "child").unwrap();
    assert!(
        shards[..first_child].iter().all(|s| s == "parent"),
        "{shards:?}"
    );
    assert_eq!(report.index.records, 8);
    assert_eq!(report.shards_done, 1, "the parent, read to its end");
}
