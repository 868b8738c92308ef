//! `ttl-sweeper run --follow-stream` against DynamoDB Local's real stream, with the sweeper's own
//! expiry index table (`EXPIRY_INDEX_TABLE`) beside an application's table that has a stream and
//! nothing of the sweeper's: writers that set only a ttl, a daemon killed and restarted
//! mid-stream, an application rewriting ttls, records whose entries the index table refuses, and
//! a demo-sized run through the fault proxy that checks every request the daemon sent. The
//! application's items are only ever deleted, never written. Each test starts its own daemon,
//! stopped by its PID.

use crate::support::{self, fault_proxy};

use std::collections::{BTreeMap, HashSet};
use std::process::Stdio;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::StreamViewType;
use aws_sdk_dynamodb::Client;
use fault_proxy::{Fault, FaultProxy, Plan, Seen};
use serde_json::Value;
use support::*;
use ttl_sweeper::store::Key;

/// A `ttl-sweeper run --follow-stream` child, killed if a test fails, and where it serves
/// `/metrics`.
struct Follower {
    daemon: Daemon,
    metrics_port: u16,
}

/// The tables a follower works on: the application's, its expiry index table, the checkpoint
/// table.
#[derive(Clone)]
struct Tables {
    table: String,
    index: String,
    checkpoint: String,
}

impl Follower {
    /// A follower reaching DynamoDB (and its stream) at `endpoint`, with the environment
    /// variables `env` besides, sweeping `every` (`--every`).
    fn start(
        endpoint: &str,
        tables: &Tables,
        name: &str,
        env: &[(&str, &str)],
        every: &str,
    ) -> Follower {
        let metrics_port = free_port();
        let log = format!("follow-{}-{name}", tables.table);
        let daemon = Daemon::run(endpoint, &log, |cmd| {
            // Entries written with their batch, unless a test holds them (`FOLLOW_HOLD`).
            cmd.env("FOLLOW_HOLD", "0").envs(env.iter().copied());
            cmd.args(["--every", every, "--follow-stream"]);
            cmd.args(["--table-name", &tables.table])
                .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
                .env("EXPIRY_INDEX_TABLE", &tables.index)
                .env("CHECKPOINT_TABLE", &tables.checkpoint);
        });
        // Following once the stream is open: the log says so.
        daemon.wait_for_log("following the table's stream");
        Follower {
            daemon,
            metrics_port,
        }
    }

    /// The value of metric `name` in `/metrics`.
    fn metric(&self, name: &str) -> Option<f64> {
        let (_, text) = http_get(self.metrics_port, "/metrics")?;
        let line = text.lines().find(|l| l.starts_with(&format!("{name}{{")))?;
        line.rsplit(' ').next()?.parse().ok()
    }

    /// Waits (`secs` at the most, else fails) until metric `name` is one `done` accepts.
    async fn wait_metric(&self, name: &str, done: impl Fn(Option<f64>) -> bool, secs: u64) {
        let started = Instant::now();
        while !done(self.metric(name)) {
            let waited = started.elapsed() < Duration::from_secs(secs);
            assert!(
                waited,
                "{name} {:?}\n{}",
                self.metric(name),
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log_text(&self) -> String {
        self.daemon.log_text()
    }

    /// SIGTERM, a clean exit, and the report the follower logged when it stopped.
    fn stop(&mut self) -> Value {
        assert!(self.signal(libc::SIGTERM).success());
        self.final_report()
    }

    fn signal(&mut self, signal: i32) -> std::process::ExitStatus {
        self.daemon.signal(signal)
    }

    /// Waits (`secs` at the most) until none of `ids` is left in `table`: when each went.
    async fn all_gone(
        &self,
        client: &Client,
        table: &str,
        ids: &[String],
        secs: u64,
        what: &str,
    ) -> BTreeMap<String, f64> {
        let gone = watch_gone(client, table, ids, Duration::from_secs(secs)).await;
        let left: Vec<&String> = ids.iter().filter(|id| !gone.contains_key(*id)).collect();
        assert!(
            left.is_empty(),
            "{what}: {left:?} left\n{}",
            self.log_text()
        );
        gone
    }

    /// The report the follower logged when it stopped.
    fn final_report(&self) -> serde_json::Value {
        let text = self.log_text();
        let line = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|l| l["message"] == "stopped following the stream");
        let line = line.unwrap_or_else(|| panic!("no final report in:\n{text}"));
        serde_json::from_str(line["report"].as_str().unwrap()).unwrap()
    }
}

/// An application's table (a stream with `view`, no GSI), its expiry index table and a
/// checkpoint table, and a client.
async fn tables(prefix: &str, view: StreamViewType) -> (Client, Tables) {
    let (client, table, index) = indexed_table(prefix, view).await;
    let checkpoint = checkpoint_table(&client, &format!("{prefix}cp")).await;
    let tables = Tables {
        table,
        index,
        checkpoint,
    };
    (client, tables)
}

/// Reads what the index table lists that no sweep has judged, each entry once (a record read
/// again is written again, in a pack of its own), every 100 ms until it is `want` or `limit`
/// passed: the last read. (A sweep stores its cursor just after its deletes.)
async fn entries_until(
    client: &Client,
    index: &str,
    want: &[(String, i64)],
    limit: Duration,
) -> Vec<(String, i64)> {
    let started = Instant::now();
    loop {
        let mut entries = unjudged_entries(client, index).await;
        entries.dedup();
        if entries == want || started.elapsed() > limit {
            return entries;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `entries`, each once.
fn once(mut entries: Vec<(String, i64)>) -> Vec<(String, i64)> {
    entries.dedup();
    entries
}

/// Sleeps until the wall clock reads `at` (epoch seconds).
async fn sleep_until(at: f64) {
    tokio::time::sleep(Duration::from_secs_f64((at - wall_clock()).max(0.0))).await;
}

/// The application's table holds exactly what `app` wrote, but for the items `swept` picks.
async fn assert_as_written(app: &AppWriter, swept: impl Fn(&str, i64) -> bool) {
    assert_eq!(
        items_by_id(&app.client, &app.table).await,
        app.expected(swept)
    );
}

/// `entries` whose ttl is after `after`.
fn after(entries: Vec<(String, i64)>, after: i64) -> Vec<(String, i64)> {
    entries
        .into_iter()
        .filter(|(_, ttl)| *ttl > after)
        .collect()
}

#[tokio::test]
async fn follow_stream_refuses_a_table_without_an_index_table_a_stream_or_new_images_naming_the_fix(
) {
    let client = client().await;
    let index = index_table(&client, "refusedidx").await;
    let no_gsi = |view: Option<StreamViewType>| {
        move |t: &mut TableSpec<'_>| {
            t.index = false;
            t.stream = view;
        }
    };
    let plain = new_table(&client, "nostream", no_gsi(None)).await;
    let keys_only = new_table(&client, "keysonly", no_gsi(Some(StreamViewType::KeysOnly))).await;
    let streamed = new_table(&client, "noindex", no_gsi(Some(StreamViewType::NewImage))).await;
    // Without an expiry index table the records would have nowhere to go: refused before
    // anything is read, whether the table has a GSI or not.
    let gsi = new_table(&client, "gsi", |t| {
        t.stream = Some(StreamViewType::NewImage)
    })
    .await;
    // `run` with `flags` on `table`, the settings `env`: refused, naming `wants`.
    let refused = |flags: &[&str], table: &str, env: &[(&str, &str)], wants: &[&str]| {
        let mut cmd = local_cli();
        cmd.arg("run").args(flags).args(["--table-name", table]);
        cmd.envs(env.iter().copied());
        let (code, _, err) = run(&mut cmd);
        assert_eq!(code, 2, "{err}");
        for want in wants {
            assert!(err.contains(want), "{err}");
        }
    };
    for table in [&streamed, &gsi] {
        let missing = format!("table {table:?} has no expiry index table");
        let wants = [missing.as_str(), "EXPIRY_INDEX_TABLE", "`window` (String)"];
        refused(&["--follow-stream"], table, &[], &wants);
    }
    let enable = format!("aws dynamodb update-table --table-name {plain} --stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES");
    let wants = ["has no stream enabled", enable.as_str()];
    refused(
        &["--follow-stream"],
        &plain,
        &[("EXPIRY_INDEX_TABLE", &index)],
        &wants,
    );
    // Each table an index table of its own: an index table serves one table.
    let index = index_table(&client, "refusedidx2").await;
    let index = ("EXPIRY_INDEX_TABLE", index.as_str());
    let wants = ["view type KEYS_ONLY", "StreamEnabled=false"];
    refused(&[], &keys_only, &[index, ("FOLLOW_STREAM", "true")], &wants);
    // Not a boolean: refused before anything is read.
    refused(
        &[],
        &keys_only,
        &[index, ("FOLLOW_STREAM", "maybe")],
        &["maybe"],
    );
}

#[tokio::test]
async fn items_written_with_only_a_ttl_expire_with_sub_second_lag_across_a_kill_and_restart() {
    let (client, tables) = tables("follow", StreamViewType::NewAndOldImages).await;
    let Tables {
        table,
        index,
        checkpoint,
    } = tables.clone();
    let mut daemon = Follower::start(&endpoint(), &tables, "first", &[], "1s");
    let mut app = AppWriter::new(&client, &table);

    // Writers that set only a ttl: due in 3–5 s, already expired, and live for an hour.
    let now = now();
    let due = names("due", 20);
    let expired = names("expired", 5);
    let live = names("live", 5);
    let mut items: Vec<Key> = Vec::new();
    items.extend(
        due.iter()
            .enumerate()
            .map(|(i, id)| unwindowed(id, now + 3 + i as i64 % 3)),
    );
    items.extend(unwindowed_each(&expired, now - 10));
    items.extend(unwindowed_each(&live, now + 3600));
    let written = wall_clock();
    app.put_many(items).await;

    // Both kinds watched at once, so that each is seen gone when it goes.
    let watched: Vec<String> = expired.iter().chain(&due).cloned().collect();
    let gone = (daemon.all_gone(&client, &table, &watched, 20, "ttl-only writers")).await;
    for id in &expired {
        let at = gone[id];
        // Within a second or two (docs/BENCHMARKS.md); the bound leaves room for a busy machine.
        assert!(
            at - written < 5.0,
            "{id} went {:.2} s after it was written",
            at - written
        );
    }
    let mut lags: Vec<f64> = (gone.iter())
        .filter(|(id, _)| due.contains(id))
        .map(|(id, at)| at - app.ttl(id).unwrap() as f64)
        .collect();
    lags.sort_by(f64::total_cmp);
    let worst = lags.last().copied().unwrap();
    eprintln!(
        "lag from ttl to gone, ttl-only writers: min {:.3} s, max {worst:.3} s",
        lags[0]
    );
    // Never early; sub-second on a quiet machine (docs/BENCHMARKS.md), the bound leaves room for
    // a busy one.
    assert!(lags[0] > 0.0, "lags: {lags:?}");
    assert!(worst < 1.5, "lags: {lags:?}");
    // The live items are as written, and only their entries are left unjudged; the packs of
    // every write's entry stay, for native TTL.
    assert_as_written(&app, |_, ttl| ttl < now + 60).await;
    let want = after(app.entries(), now + 60);
    assert_eq!(want.len(), live.len());
    let entries = entries_until(&client, &index, &want, Duration::from_secs(5)).await;
    assert_eq!(entries, want);
    assert_eq!(listed_once(&client, &index).await, once(app.entries()));

    // Killed mid-stream: what is written while it is down is indexed after the restart, and an
    // item the application deleted meanwhile is not recreated.
    daemon.signal(libc::SIGKILL);
    let now = support::now();
    let later = names("later", 10);
    app.put_many(unwindowed_each(&later, now + 5)).await;
    app.put(unwindowed("deleted", now + 3600)).await;
    app.delete("deleted").await;
    app.put(unwindowed("live-0", now + 7200)).await;
    let mut daemon = Follower::start(&endpoint(), &tables, "second", &[], "1s");
    (daemon.all_gone(&client, &table, &later, 15, "written while down")).await;
    let present = items_by_id(&client, &table).await;
    assert_eq!(
        present.keys().collect::<Vec<_>>(),
        live.iter().collect::<Vec<_>>(),
        "only the live items are left; none recreated"
    );
    assert_eq!(present, app.expected(|_, ttl| ttl < now + 60));
    assert_eq!(app.ttl("live-0"), Some(now + 7200));
    // The entries of every write with an hour or more to go: the live items' (the first ttl of
    // live-0 too, until it passes) and the deleted item's, which will delete nothing.
    let want = after(app.entries(), now + 60);
    assert_eq!(want.len(), live.len() + 2);
    let entries = entries_until(&client, &index, &want, Duration::from_secs(5)).await;
    assert_eq!(entries, want);
    assert_eq!(listed_once(&client, &index).await, once(app.entries()));

    // SIGTERM: the position is saved, and the report says what was done.
    let report = daemon.stop();
    assert_eq!(report["skipped_records"], 0, "{report}");
    assert_eq!(report["trimmed"], 0, "{report}");
    assert_eq!(report["index"]["failed"], 0, "{report}");
    let position = format!("{table}/table:{index}#stream");
    let saved = get(&client, &checkpoint, &position).await;
    let everything = scan_all(&client, &checkpoint).await;
    let saved = saved.unwrap_or_else(|| panic!("no position saved: {everything:?}"));
    let after = saved["streamPosition"]
        .as_s()
        .unwrap()
        .contains("\"after\"");
    assert!(after, "{saved:?}");
}

/// The ids each pack of `index` lists, of those `keep` keeps; a pack listing none left out.
async fn packs_listing(
    client: &Client,
    index: &str,
    keep: impl Fn(&String) -> bool,
) -> Vec<Vec<String>> {
    let packs = scan_all(client, index).await.into_iter();
    let packs = packs.filter_map(|item| ttl_sweeper::store::packs::Pack::from_item(&item));
    let ids = |p: ttl_sweeper::store::packs::Pack| -> Vec<String> {
        let ids = p.entries.into_iter().map(|e| e.key);
        let ids = ids.filter_map(|k| k.get("id")?.as_s().ok().cloned());
        ids.filter(&keep).collect()
    };
    packs.map(ids).filter(|ids| !ids.is_empty()).collect()
}

/// The ids of the items the packs of `index` list.
async fn packed_ids(client: &Client, index: &str) -> HashSet<String> {
    let packs = packs_listing(client, index, |_| true).await;
    packs.into_iter().flatten().collect()
}

/// Entries held across batches (`FOLLOW_HOLD`): items written in separate batches with one ttl
/// an hour ahead are packed together, not a pack per batch; while they are held the saved
/// position stays before their records, so a kill loses none of them (read again after the
/// restart), and a stop writes what is held before it saves.
#[tokio::test]
async fn entries_held_across_batches_are_packed_together_and_none_is_lost_to_a_kill() {
    let (client, tables) = tables("hold", StreamViewType::NewAndOldImages).await;
    let Tables { table, index, .. } = tables.clone();
    let hold = [("FOLLOW_HOLD", "1h")];
    let mut daemon = Follower::start(&endpoint(), &tables, "held", &hold, "60s");
    let mut app = AppWriter::new(&client, &table);
    let due = now() + 3600;
    // Writes of five items a second apart, one per round: a stream batch each, one due instant.
    let write_rounds = async |app: &mut AppWriter, rounds: std::ops::Range<usize>| {
        let mut written = Vec::new();
        for round in rounds {
            let ids = names(&format!("r{round}"), 5);
            app.put_many(unwindowed_each(&ids, due)).await;
            written.extend(ids);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        written
    };
    let first = write_rounds(&mut app, 0..4).await;
    let records = "ttl_sweeper_stream_records_total";
    daemon.wait_metric(records, |n| n >= Some(20.0), 20).await;
    assert_eq!(daemon.metric("ttl_sweeper_stream_entries_held"), Some(20.0));
    assert_eq!(
        packs_listing(&client, &index, |id| first.contains(id)).await,
        Vec::<Vec<String>>::new(),
        "held, not written"
    );
    // Killed holding them (the position saved meanwhile stays before their records): the next
    // run, holding nothing, reads them again and writes them.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    daemon.signal(libc::SIGKILL);
    let no_hold = [("FOLLOW_HOLD", "0")];
    let mut daemon = Follower::start(&endpoint(), &tables, "again", &no_hold, "60s");
    let started = Instant::now();
    loop {
        let listed = packed_ids(&client, &index).await;
        if first.iter().all(|id| listed.contains(id)) {
            break;
        }
        let left: Vec<_> = first.iter().filter(|id| !listed.contains(*id)).collect();
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "lost to the kill: {left:?}\n{}",
            daemon.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(daemon.signal(libc::SIGTERM).success());

    // Held again, then stopped: one pack lists the four batches' entries, written at the stop.
    let mut daemon = Follower::start(&endpoint(), &tables, "stopped", &hold, "60s");
    let second = write_rounds(&mut app, 4..8).await;
    let held = "ttl_sweeper_stream_entries_held";
    daemon.wait_metric(held, |n| n >= Some(20.0), 20).await;
    let report = daemon.stop();
    assert_eq!(report["entries_held"], 0, "{report}");
    assert_eq!(report["index"]["packs_written"], 1, "{report}");
    let packs = packs_listing(&client, &index, |id| second.contains(id)).await;
    assert_eq!(packs.len(), 1, "one pack for one due instant: {packs:?}");
    assert_eq!(packs[0].len(), second.len(), "{packs:?}");
    assert_as_written(&app, |_, _| false).await;
}

/// An item written already expired goes as the follower indexes it (a conditional delete through
/// the sweeper's delete path), not at the next sweep: here the daemon sweeps once a minute, and
/// each goes within a couple of seconds of its write; its entry is in a pack due just after it
/// was indexed, for the next sweep to judge. The live items stay, their entries due at their
/// ttl.
#[tokio::test]
async fn items_written_already_expired_go_as_they_are_indexed_not_at_the_next_sweep() {
    let (client, tables) = tables("at_once", StreamViewType::NewAndOldImages).await;
    let daemon = Follower::start(&endpoint(), &tables, "at-once", &[], "60s");
    // Its first sweep is over: the next is a minute away.
    let sweeps = "ttl_sweeper_sweeps_total";
    daemon
        .wait_metric(sweeps, |n| n.is_some_and(|n| n >= 1.0), 30)
        .await;
    let mut app = AppWriter::new(&client, &tables.table);
    let now = now();
    let expired = names("expired", 10);
    let live = names("live", 3);
    let mut items = unwindowed_each(&expired, now - 30);
    items.extend(unwindowed_each(&live, now + 3600));
    let written = wall_clock();
    app.put_many(items).await;
    let gone = (daemon.all_gone(&client, &tables.table, &expired, 10, "written expired")).await;
    let worst = gone.values().fold(0.0f64, |w, at| w.max(at - written));
    eprintln!("written already expired: gone at most {worst:.3} s after the write");
    assert!(worst < 3.0, "{gone:?}\n{}", daemon.log_text());
    assert_as_written(&app, |_, ttl| ttl < now).await;
    let last_gone = gone.values().fold(written, |l, at| l.max(*at));
    // Every record's entry, in packs no sweep read yet.
    let entries = app.entries();
    assert_eq!(entries.len(), expired.len() + live.len());
    let unjudged = unjudged_entries(&client, &tables.index).await;
    assert_eq!(unjudged, entries, "{}", daemon.log_text());
    let packed = contents_of(scan_all(&client, &tables.index).await).packed;
    assert_eq!(packed.len(), entries.len(), "{packed:?}");
    for ((id, ttl), due) in packed {
        let soon = ttl < now && (now * 1000..(last_gone * 1000.0) as i64 + 3000).contains(&due);
        let at_ttl = ttl > now && due == ttl * 1000;
        assert!(soon || at_ttl, "{id} ({ttl}) due {due}");
    }
    let deleted = "ttl_sweeper_stream_deleted_at_once_total";
    daemon.wait_metric(deleted, |n| n == Some(10.0), 5).await;
    let swept = daemon.metric("ttl_sweeper_items_deleted_total");
    assert_eq!(
        swept,
        Some(0.0),
        "no sweep deleted them\n{}",
        daemon.log_text()
    );
}

#[tokio::test]
async fn rewrites_and_unusable_ttls_delete_nothing_live_and_never_stop_the_shard() {
    let (client, tables) = tables("rewrite", StreamViewType::NewImage).await;
    let Tables { table, index, .. } = tables.clone();
    let mut daemon = Follower::start(&endpoint(), &tables, "only", &[], "1s");
    let mut app = AppWriter::new(&client, &table);
    let now = now();
    // Items due in 2 s, rewritten (the whole item) with an hour more before then.
    let extended = names("extended", 10);
    app.put_many(unwindowed_each(&extended, now + 2)).await;
    app.put_many(unwindowed_each(&extended, now + 3600)).await;
    // ttls the sweeper cannot use: milliseconds, and more than five years old.
    app.put(unwindowed("millis", (now + 5) * 1000)).await;
    app.put(unwindowed("ancient", now - 6 * 366 * 86_400)).await;
    // ... and after them, an item the shard must still reach.
    app.put(unwindowed("after", now + 2)).await;

    let after = ["after".into()];
    let what = "the record after the unusable ones was not handled";
    daemon.all_gone(&client, &table, &after, 10, what).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Everything else is there, as written; the entries of the first ttls were judged once
    // their ttl passed (they deleted nothing), the unusable ttls have none.
    assert_as_written(&app, |id, _| id == "after").await;
    let want: Vec<(String, i64)> = extended.iter().map(|id| (id.clone(), now + 3600)).collect();
    let entries = entries_until(&client, &index, &want, Duration::from_secs(5)).await;
    assert_eq!(entries, want);
    let listed = listed_once(&client, &index).await;
    let unusable = ["millis", "ancient"];
    assert!(
        !listed.iter().any(|(id, _)| unusable.contains(&id.as_str())),
        "{listed:?}"
    );
    assert_eq!(listed.len(), 2 * extended.len() + 1, "{listed:?}");
    // What a scraper sees: the counters, and the follower caught up.
    let metric = |name: &str| daemon.metric(name).unwrap_or_else(|| panic!("no {name}"));
    assert_eq!(metric("ttl_sweeper_stream_invalid_ttl_total"), 2.0);
    assert!(metric("ttl_sweeper_stream_entries_written_total") >= 21.0);
    assert!(metric("ttl_sweeper_stream_records_total") >= 23.0);
    assert_eq!(metric("ttl_sweeper_stream_skipped_records_total"), 0.0);
    assert_eq!(metric("ttl_sweeper_stream_record_age_seconds"), 0.0);
    let report = daemon.stop();
    assert_eq!(report["index"]["invalid_ttl"], 2, "{report}");
    assert_eq!(report["skipped_records"], 0, "{report}");
}

// The proxy serves on the runtime's other worker while the test waits on the daemon's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_iterators_trimmed_records_and_refused_entries_are_recovered_or_reported() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let (client, tables) = tables("faulty", StreamViewType::NewAndOldImages).await;
    let Tables { table, index, .. } = tables.clone();
    // Every fourth GetRecords: the iterator expired, and stays so. From the first position asked
    // for on, the records were trimmed. Every entry of "poison": refused by the index table
    // (left unprocessed beside others, refused alone). The first two writes of entries of
    // "throttled": throttled.
    let reads = AtomicUsize::new(0);
    let expired: Mutex<HashSet<String>> = Mutex::default();
    let trimmed_up_to: Mutex<Option<u128>> = Mutex::default();
    let throttled = AtomicUsize::new(0);
    let plan = Plan::script(move |op, body| match op {
        "GetRecords" => {
            let iterator = body["ShardIterator"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let mut expired = expired.lock().unwrap();
            let now_expired = reads.fetch_add(1, Ordering::SeqCst) % 4 == 3;
            if now_expired {
                expired.insert(iterator.clone());
            }
            expired.contains(&iterator).then_some(Fault::Reply(
                400,
                "ExpiredIteratorException",
                "Iterator expired",
            ))
        }
        "GetShardIterator" if body["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER" => {
            let sequence: u128 = body["SequenceNumber"].as_str().unwrap().parse().unwrap();
            let mut trimmed = trimmed_up_to.lock().unwrap();
            let bound = *trimmed.get_or_insert(sequence);
            (sequence <= bound).then_some(Fault::Reply(
                400,
                "TrimmedDataAccessException",
                "the requested records were trimmed",
            ))
        }
        "BatchWriteItem" => {
            let ids = written_ids(body);
            if ids.iter().any(|id| id == "poison") {
                return Some(match ids.iter().all(|id| id == "poison") {
                    true => Fault::Reply(
                        400,
                        "ValidationException",
                        "One or more parameter values were invalid",
                    ),
                    false => Fault::HoldBack("poison"),
                });
            }
            let throttle = ids.iter().any(|id| id == "throttled")
                && throttled.fetch_add(1, Ordering::SeqCst) < 2;
            throttle.then_some(Fault::Throttle("ThrottlingException"))
        }
        _ => None,
    });
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(15), plan).await;
    let mut daemon = Follower::start(&proxy.endpoint, &tables, "faulty", &[], "1s");
    let mut app = AppWriter::new(&client, &table);
    let now = now();
    let mut due = names("due", 10);
    let mut items = unwindowed_each(&due, now + 3);
    items.push(unwindowed("poison", now + 3600));
    items.push(unwindowed("throttled", now + 3));
    app.put_many(items).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    app.put(unwindowed("after-poison", now + 4)).await;
    due.extend(["throttled".to_string(), "after-poison".to_string()]);
    daemon.all_gone(&client, &table, &due, 40, "faulty").await;
    // Reading goes on after the trim, from the oldest record kept.
    let log = poll(
        Duration::from_secs(20),
        Duration::from_millis(100),
        || daemon.log_text(),
        |log| log.contains("trimmed from the stream"),
    );
    assert!(log.contains("trimmed from the stream"), "{log}");
    app.put(unwindowed("after-trim", support::now() + 2)).await;
    let after = ["after-trim".into()];
    daemon
        .all_gone(&client, &table, &after, 15, "not read after the trim")
        .await;
    // The poison item is there as written, without an entry; the others' entries were judged
    // as their items went.
    assert_as_written(&app, |id, _| id != "poison").await;
    let entries = entries_until(&client, &index, &[], Duration::from_secs(5)).await;
    assert!(entries.is_empty(), "{entries:?}");
    let listed = listed_once(&client, &index).await;
    assert!(!listed.iter().any(|(id, _)| id == "poison"), "{listed:?}");
    assert!(!listed.is_empty(), "the packs stay");
    // The poison record, left unprocessed beside others and refused alone, is passed: it can
    // never be indexed. The throttled one was held and indexed.
    let log = daemon
        .daemon
        .wait_for_log("cannot be indexed and was passed");
    assert!(log.contains("run `ttl-sweeper backfill`"), "{log}");
    let report = daemon.stop();
    assert!(report["skipped_records"].as_u64().unwrap() >= 1, "{report}");
    assert!(report["retried_records"].as_u64().unwrap() >= 2, "{report}");
    assert!(report["trimmed"].as_u64().unwrap() >= 1, "{report}");
    assert!(
        report["index"]["errors"].to_string().contains("poison"),
        "{report}"
    );
}

/// How long the index table throttles every write in
/// [`a_throttled_index_table_holds_the_shard_and_loses_no_item`]: longer than a failing record was
/// once tried before it was passed.
const THROTTLED_FOR: f64 = 35.0;

/// A hot partition of the expiry index table: every write to it answered
/// `ProvisionedThroughputExceededException` for [`THROTTLED_FOR`] while items are written. The
/// shard is held, not passed: every item written meanwhile is deleted within a few seconds of its
/// ttl or of the throttling's end, whichever is later; nothing is skipped; and the follower's
/// record age grows while it is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_index_table_holds_the_shard_and_loses_no_item() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let (client, tables) = tables("hot", StreamViewType::NewAndOldImages).await;
    let Tables { table, index, .. } = tables.clone();
    let throttling = Arc::new(AtomicBool::new(false));
    let throttled = throttling.clone();
    let index_table = index.clone();
    let plan = Plan::script(move |op, body| {
        let to_index = op == "BatchWriteItem" && body["RequestItems"].get(&index_table).is_some();
        let fault = Fault::Throttle("ProvisionedThroughputExceededException");
        (to_index && throttled.load(Ordering::SeqCst)).then_some(fault)
    });
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(2), plan).await;
    // The SDK's own retries off: the follower's attempts are all there is, so that the throttling
    // outlasts what it once tried before passing a record in seconds rather than minutes.
    // Entries held (`FOLLOW_HOLD`): those a batch tried again holds go with its next attempts,
    // not waiting on the failing record.
    let no_sdk_retries = [("AWS_MAX_ATTEMPTS", "1"), ("FOLLOW_HOLD", "1h")];
    let mut app = AppWriter::new(&client, &table);

    throttling.store(true, Ordering::SeqCst);
    let started = wall_clock();
    let ends = started + THROTTLED_FOR;
    // Due while the index table throttles, and due a few seconds after it stops.
    let now = now();
    let during = names("during", 30);
    let after_it = names("after", 10);
    let far = names("far", 10);
    let mut items: Vec<Key> = Vec::new();
    for (i, id) in during.iter().enumerate() {
        items.push(unwindowed(id, now + 3 + i as i64 % 6));
        // Due in an hour, among the others: held by a batch's first attempt.
        if let Some(id) = far.get(i / 3).filter(|_| i % 3 == 0) {
            items.push(unwindowed(id, now + 3600));
        }
    }
    items.extend(unwindowed_each(&after_it, ends as i64 + 5));
    app.put_many(items).await;
    // Started once every record is there: its first read is one batch of them all.
    let mut daemon = Follower::start(&proxy.endpoint, &tables, "hot", &no_sdk_retries, "1s");
    // Two thirds of the way through, the follower says how far behind it is.
    sleep_until(started + THROTTLED_FOR * 2.0 / 3.0).await;
    let age_held = daemon.metric("ttl_sweeper_stream_record_age_seconds");
    sleep_until(ends).await;
    throttling.store(false, Ordering::SeqCst);
    let ended = wall_clock();

    let ids: Vec<String> = during.iter().chain(&after_it).cloned().collect();
    let what = "written while the index table throttled, never deleted";
    let gone = daemon.all_gone(&client, &table, &ids, 15, what).await;
    let past_due = (gone.iter())
        .map(|(id, at)| at - (app.ttl(id).unwrap() as f64).max(ended))
        .fold(f64::MIN, f64::max);
    eprintln!("the last item went {past_due:.2} s after its ttl or the throttling's end; record age while held: {age_held:?} s");
    let late: Vec<String> = (gone.iter())
        .filter_map(|(id, at)| {
            let ttl = app.ttl(id).unwrap() as f64;
            let due = ttl.max(ended);
            (*at < ttl || *at > due + 8.0).then(|| format!("{id}: ttl {ttl}, gone {at:.2}"))
        })
        .collect();
    assert!(
        late.is_empty(),
        "deleted early, or late (the throttling ended {ended:.2}): {late:?}"
    );
    let age_held = age_held.expect("no record age while held");
    assert!(
        age_held >= THROTTLED_FOR / 3.0,
        "record age {age_held} s while the shard was held for {:.0} s",
        THROTTLED_FOR * 2.0 / 3.0
    );
    let caught_up = poll(
        Duration::from_secs(5),
        Duration::from_millis(200),
        || daemon.metric("ttl_sweeper_stream_record_age_seconds"),
        |age| *age == Some(0.0),
    );
    assert_eq!(caught_up, Some(0.0), "the record age once caught up");
    // The far items' entries were written by the batch's attempts once the throttling ended,
    // not left held behind the failing records.
    let listed = packed_ids(&client, &index).await;
    let unlisted: Vec<&String> = far.iter().filter(|id| !listed.contains(*id)).collect();
    let held = daemon.metric("ttl_sweeper_stream_entries_held");
    assert!(
        unlisted.is_empty() && held == Some(0.0),
        "held {held:?}, not in a pack: {unlisted:?}\n{}",
        daemon.log_text()
    );
    let report = daemon.stop();
    assert_eq!(report["skipped_records"], 0, "{report}");
    assert!(report["retried_records"].as_u64().unwrap() > 0, "{report}");
    assert!(proxy.stats.faults_total() > 0);
}

/// DynamoDB stops answering (every request held for a minute) while the daemon follows the stream
/// and sweeps: SIGTERM still ends it within `SHUTDOWN_GRACE` and a few seconds, exit 0, instead of
/// waiting out the SDK's timeouts and retries of every call in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_daemon_within_the_grace_when_dynamodb_stops_answering() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use ttl_sweeper::engine::retry::SHUTDOWN_GRACE;
    let (client, tables) = tables("hung", StreamViewType::NewAndOldImages).await;
    let Tables { table, .. } = tables.clone();
    let hung = Arc::new(AtomicBool::new(false));
    let hanging = hung.clone();
    let plan = Plan::script(move |_, _| hanging.load(Ordering::SeqCst).then_some(Fault::Delay));
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(60), plan).await;
    let mut daemon = Follower::start(&proxy.endpoint, &tables, "hung", &[], "1s");
    let now = now();
    let items = unwindowed_each(&names("late", 5), now + 3600);
    put_many(&client, &table, items).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    hung.store(true, Ordering::SeqCst);
    // Requests of the ticks, the full sweep and the stream's shards are held from now on.
    let held = || proxy.stats.requests();
    let before = held();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(held() > before, "requests reach the held server");
    let asked = Instant::now();
    let status = daemon.signal(libc::SIGTERM);
    let took = asked.elapsed();
    eprintln!("stopped {took:?} after SIGTERM");
    assert_eq!(status.code(), Some(0), "{}", daemon.log_text());
    let bound = SHUTDOWN_GRACE + Duration::from_secs(3);
    assert!(
        took <= bound,
        "took {took:?} to stop (bound {bound:?}):\n{}",
        daemon.log_text()
    );
}

// ------------------------------------------------------------------ a demo-sized run, every request seen

/// How far (s) from a change any ttl it touches is, both ways: no change of the application races
/// a sweep of the item.
const MARGIN: i64 = 3;

/// An item as the application writes it: its own attribute and a ttl, nothing of the sweeper's.
fn app_item(id: &str, ttl: Option<i64>, version: &str) -> Key {
    let mut item = bare(id, ttl.map(num));
    item.insert("payload".into(), AV::S(format!("{id} {version}")));
    item
}

/// A random item not changed before whose ttl is at least `soon` and less than an hour away
/// (marked changed now).
fn pick(
    app: &AppWriter,
    rng: &mut fastrand::Rng,
    changed: &mut HashSet<String>,
    soon: i64,
) -> String {
    let candidates: Vec<&String> = (app.items.iter())
        .filter(|(id, item)| {
            let ttl = item.as_ref().and_then(ttl_of);
            !changed.contains(*id) && ttl.is_some_and(|t| t >= soon && t < soon + 600)
        })
        .map(|(id, _)| id)
        .collect();
    assert!(!candidates.is_empty(), "nothing left to change");
    let id = candidates[rng.usize(..candidates.len())].clone();
    changed.insert(id.clone());
    id
}

/// One round of the application's changes, `n` of each kind, each [`MARGIN`] from any ttl it
/// touches: rewrites (same key, a new payload and ttl), ttl extensions by an hour, ttl removals,
/// deletes, items written already expired, new items.
async fn churn(
    app: &mut AppWriter,
    rng: &mut fastrand::Rng,
    changed: &mut HashSet<String>,
    round: &str,
    n: usize,
) {
    for i in 0..n {
        for kind in 0..6 {
            let soon = wall_clock().ceil() as i64 + MARGIN;
            let id = match kind {
                0..=3 => pick(app, rng, changed, soon),
                4 => format!("{round}-expired-{i}"),
                _ => format!("{round}-new-{i}"),
            };
            match kind {
                1 => app.set_ttl(&id, soon + 3600).await,
                2 => app.remove_ttl(&id).await,
                3 => app.delete(&id).await,
                4 => app.put(app_item(&id, Some(soon - MARGIN - 2), round)).await,
                // A rewrite (0) or a new item (5).
                _ => {
                    app.put(app_item(&id, Some(soon + rng.i64(0..5)), round))
                        .await
                }
            }
        }
    }
}

/// What is wrong with a request the daemon sent that names the application's `table`: anything
/// but reading it or deleting from it (no `Query` either: the sweeps read the index table).
fn writes_the_table(seen: &Seen, table: &str) -> Option<String> {
    match seen.op.as_str() {
        "DescribeTable" | "GetItem" | "BatchGetItem" | "Scan" | "DeleteItem" => None,
        "BatchWriteItem" => {
            let requests = seen.body["RequestItems"][table].as_array();
            let requests = requests.into_iter().flatten();
            let only_deletes = requests
                .clone()
                .all(|r| r.get("DeleteRequest").is_some() && r.get("PutRequest").is_none());
            (!only_deletes).then(|| format!("a BatchWriteItem that puts: {}", seen.body))
        }
        other => Some(format!("{other}: {}", seen.body)),
    }
}

/// The unconditional deletes of the application's items the daemon sent: (item `id`, when it
/// arrived). A conditional `DeleteItem` is judged by DynamoDB against the ttl; these are not.
fn unconditional_deletes(seen: &[Seen], table: &str) -> Vec<(String, f64)> {
    let unconditional = seen
        .iter()
        .filter(|s| s.body.get("ConditionExpression").is_none());
    let writes = unconditional.flat_map(|s| {
        fault_proxy::writes(&s.op, &s.body)
            .into_iter()
            .map(|w| (w, s.at))
    });
    let deletes = writes.filter(|((t, what, _), _)| t == table && *what == "delete");
    let id = |key: &Value| key["id"]["S"].as_str().unwrap_or_default().to_owned();
    deletes.map(|((_, _, key), at)| (id(key), at)).collect()
}

/// The item `id` as the application had it at `at` (its last write sent before then): `None` when
/// deleted (or not yet written).
fn version_at<'a>(app: &'a AppWriter, id: &str, at: f64) -> Option<&'a Key> {
    let mut writes = app.writes.iter().filter(|w| w.id == id && w.sent < at);
    writes.next_back()?.item.as_ref()
}

/// `make demo`'s run as the daemon does it (`run --every 1s --follow-stream`, the expiry index
/// table, a checkpoint table), through the fault proxy, a few of its requests failing: an
/// application writes some 350 items with only its attributes and a ttl, and while the daemon
/// runs rewrites, deletes, extends and removes ttls, and writes items already expired; the daemon
/// is killed (SIGKILL) and started again in the middle. Every request the daemon sent is checked
/// at the proxy: the application's table is only described, read and deleted from. Every expired
/// item goes, none before its ttl, the others are exactly as the application wrote them, and
/// only the entries of ttls still to come are left unjudged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demo_sized_run_through_the_fault_proxy_deletes_only_expired_items_and_never_writes_the_table(
) {
    let (client, tables) = tables("demo", StreamViewType::NewAndOldImages).await;
    let Tables { table, index, .. } = tables.clone();
    let seed = (std::env::var("FAULT_SEED").ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(clock_seed() % 1_000_000);
    eprintln!("fault seed {seed} (FAULT_SEED={seed} repeats the faults, not the timing)");
    let faults = Plan::Seeded {
        seed,
        rate: 0.1,
        ops: vec![
            "GetRecords",
            "GetShardIterator",
            "BatchWriteItem",
            "BatchGetItem",
            "Query",
            "DeleteItem",
        ],
        faults: vec![
            Fault::Unprocessed,
            Fault::Throttle("ThrottlingException"),
            Fault::Status(500),
            Fault::Status(503),
            Fault::Reset,
            Fault::DropAfterApply,
        ],
    };
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(2), faults).await;
    proxy.record();
    let mut daemon = Follower::start(&proxy.endpoint, &tables, "first", &[], "1s");
    let mut app = AppWriter::new(&client, &table);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut changed = HashSet::new();

    // 300 items expiring over 5–12 s, 10 written already expired, 20 that outlive the test and
    // 10 without a ttl.
    let t0 = now();
    let mut items: Vec<Key> = (0..300)
        .map(|i| app_item(&format!("item-{i:03}"), Some(t0 + 5 + i % 8), "v1"))
        .collect();
    items.extend((0..10).map(|i| app_item(&format!("expired-{i}"), Some(t0 - 1 - i % 5), "v1")));
    items.extend((0..20).map(|i| app_item(&format!("survivor-{i}"), Some(t0 + 3600 + i), "v1")));
    items.extend((0..10).map(|i| app_item(&format!("no-ttl-{i}"), None, "v1")));
    app.put_many(items).await;
    churn(&mut app, &mut rng, &mut changed, "r1", 10).await;

    // Killed; the application goes on while it is down; started again.
    sleep_until(t0 as f64 + 4.0).await;
    daemon.signal(libc::SIGKILL);
    churn(&mut app, &mut rng, &mut changed, "r2", 5).await;
    let mut daemon = Follower::start(&proxy.endpoint, &tables, "second", &[], "1s");
    sleep_until(t0 as f64 + 7.0).await;
    churn(&mut app, &mut rng, &mut changed, "r3", 5).await;

    // Once the last short ttl has passed: every item whose ttl passed is gone, every other one is
    // as last written, and only the entries of ttls an hour away are left unjudged.
    let short = |_: &str, ttl: i64| ttl < t0 + 600;
    let last = (app.items.values().flatten())
        .filter_map(ttl_of)
        .filter(|t| *t < t0 + 600)
        .max()
        .unwrap();
    sleep_until(last as f64 + 0.5).await;
    let expected = app.expected(short);
    let started = Instant::now();
    let mut present = items_by_id(&client, &table).await;
    while present != expected && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        present = items_by_id(&client, &table).await;
    }
    let missing: Vec<&String> = (expected.keys())
        .filter(|id| present.get(*id) != expected.get(*id))
        .collect();
    let left: Vec<&String> = (present.keys())
        .filter(|id| !expected.contains_key(*id))
        .collect();
    assert!(
        missing.is_empty() && left.is_empty(),
        "live items destroyed or changed: {missing:?}; expired items left: {left:?}\n{}",
        daemon.log_text()
    );
    let want = after(app.entries(), t0 + 600);
    let entries = entries_until(&client, &index, &want, Duration::from_secs(10)).await;
    assert_eq!(entries, want, "{}", daemon.log_text());
    // Stopped by the signal, with the exit status its run's report gives: 1 when a request the
    // proxy failed past its retries left a window or a key to a later sweep (docs/operations.md),
    // else 0. The end state above is the same either way.
    let status = daemon.signal(libc::SIGTERM);
    let log = daemon.log_text();
    let run_report = (log.lines())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("sweep finished"))
        });
    let run_report = run_report.unwrap_or_else(|| panic!("no run report in:\n{log}"));
    let failures = run_report["message"] == "sweep finished with failures";
    assert_eq!(
        status.code(),
        Some(i32::from(failures)),
        "{run_report}\n{log}"
    );
    let report = daemon.final_report();
    assert_eq!(report["skipped_records"], 0, "{report}");

    // Every request the daemon sent, as the proxy saw it.
    let seen = proxy.stats.seen();
    let naming: Vec<&Seen> = (seen.iter())
        .filter(|s| s.tables().contains(&table.as_str()))
        .collect();
    let wrong: Vec<String> = (naming.iter())
        .filter_map(|s| writes_the_table(s, &table))
        .collect();
    assert!(wrong.is_empty(), "requests writing the table: {wrong:#?}");
    // None of the unconditional deletes came before the ttl of the item it deleted (the
    // application changed no item within MARGIN of its ttl, so the version is unambiguous).
    let deletes = unconditional_deletes(&seen, &table);
    let early: Vec<String> = (deletes.iter())
        .filter_map(|(id, at)| {
            let ttl = version_at(&app, id, *at).map(ttl_of)?;
            let early = ttl.is_none_or(|ttl| ttl as f64 > *at);
            early.then(|| format!("{id} at {at:.3}, its ttl {ttl:?}"))
        })
        .collect();
    assert!(early.is_empty(), "deleted before its ttl: {early:#?}");
    // Not a run that did nothing: the stream was read through the proxy too, entries written,
    // items deleted, faults met.
    let count = |op: &str| seen.iter().filter(|s| s.op == op).count();
    let puts_entries = (seen.iter())
        .filter(|s| s.op == "BatchWriteItem" && s.tables().contains(&index.as_str()))
        .count();
    let mut named: HashSet<&str> = deletes.iter().map(|(id, _)| id.as_str()).collect();
    let conditional = naming.iter().filter(|s| s.op == "DeleteItem");
    named.extend(conditional.filter_map(|s| s.body["Key"]["id"]["S"].as_str()));
    let swept: Vec<&String> = (app.items.iter())
        .filter(|(_, item)| item.as_ref().and_then(ttl_of).is_some_and(|t| short("", t)))
        .map(|(id, _)| id)
        .collect();
    let unnamed: Vec<&&String> = swept
        .iter()
        .filter(|id| !named.contains(id.as_str()))
        .collect();
    let faults = proxy.stats.faults.lock().unwrap().clone();
    eprintln!(
        "{} requests, {} naming the table, {} items deleted, faults {faults:?}",
        seen.len(),
        naming.len(),
        swept.len()
    );
    assert!(swept.len() > 250, "{}", swept.len());
    assert!(
        unnamed.is_empty(),
        "deleted by no request seen: {unnamed:?}"
    );
    assert!(count("GetRecords") > 0 && count("GetShardIterator") > 0);
    assert!(puts_entries > 0 && count("Query") > 0);
    assert!(proxy.stats.faults_total() > 0, "{faults:?}");
}

/// An application that knows nothing of the sweeper — a PynamoDB model in Python with a
/// `TTLAttribute`, unmodified (tests/fixtures/orm_writer.py) — writes to a table with a stream
/// (`NEW_IMAGE`) and no GSI. `run --follow-stream` deletes every item whose ttl passed, with a
/// sub-second lag, and nothing else; the fault proxy saw no request write that table but deletes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orm_that_knows_nothing_of_the_sweeper_writes_and_only_its_expired_items_go_on_time() {
    let (client, tables) = tables("orm", StreamViewType::NewImage).await;
    let Tables { table, .. } = tables.clone();
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(2), Plan::Pass).await;
    proxy.record();
    let mut daemon = Follower::start(&proxy.endpoint, &tables, "orm", &[], "1s");

    // 40 sessions due 4–7 s after their save (the model keeps whole seconds: 3–7 s), 5 saved
    // already expired, 10 due in an hour and 5 without a ttl, saved one by one through the model.
    let mut plan: Vec<Value> = (0..40)
        .map(|i| serde_json::json!([format!("due-{i:02}"), 4 + i % 4]))
        .collect();
    plan.extend((0..5).map(|i| serde_json::json!([format!("late-{i}"), -5])));
    plan.extend((0..10).map(|i| serde_json::json!([format!("live-{i}"), 3600])));
    plan.extend((0..5).map(|i| serde_json::json!([format!("none-{i}"), null])));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (python, script) = (
        root.join(".venv/bin/python"),
        root.join("tests/fixtures/orm_writer.py"),
    );
    let out = std::process::Command::new(&python)
        .arg(&script)
        .args([
            endpoint().as_str(),
            table.as_str(),
            &Value::from(plan).to_string(),
        ])
        .envs(LOCAL_AWS_ENV)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (make tools installs PynamoDB)", python.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the ORM's writer failed (make tools installs PynamoDB):\n{stderr}"
    );
    let written: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(written.len(), 60, "{stderr}");
    let as_written = items_by_id(&client, &table).await;
    for item in as_written.values() {
        let mut names: Vec<&str> = item.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert!(
            names == ["id", "ttl", "user"] || names == ["id", "user"],
            "the model's attributes only: {names:?}"
        );
    }
    let ttl = |id: &str| {
        let w = written.iter().find(|w| w["id"] == id).unwrap();
        (w["ttl"].as_i64(), w["saved"].as_f64().unwrap())
    };
    let expiring: Vec<String> = (written.iter())
        .filter(|w| w["ttl"].as_i64().is_some_and(|t| t < now() + 600))
        .map(|w| w["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(expiring.len(), 45);
    let gone = watch_gone(&client, &table, &expiring, Duration::from_secs(15)).await;
    // Lag from the ttl; for an item saved already expired, from its save.
    let (mut due, mut late): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    for id in &expiring {
        let at = *gone
            .get(id)
            .unwrap_or_else(|| panic!("{id} never deleted\n{}", daemon.log_text()));
        let (ttl, saved) = ttl(id);
        let ttl = ttl.unwrap() as f64;
        assert!(at > ttl, "{id} gone at {at:.3}, before its ttl {ttl}");
        match id.starts_with("late-") {
            true => late.push(at - saved),
            false => due.push(at - ttl),
        }
    }
    due.sort_by(f64::total_cmp);
    late.sort_by(f64::total_cmp);
    let p99 = due[(due.len() * 99).div_ceil(100) - 1];
    eprintln!(
        "ORM writer: due items' lag p50 {:.3} s, p99 {p99:.3} s; saved expired, from the save: max {:.3} s (polled every 50 ms)",
        due[due.len() / 2],
        late[late.len() - 1]
    );
    assert!(p99 < 1.0, "p99 lag {p99:.3} s: {due:?}");
    assert!(late.iter().all(|l| *l < 5.0), "{late:?}");

    // The others are exactly as the model saved them.
    let present = items_by_id(&client, &table).await;
    let kept: Vec<&String> = present.keys().collect();
    assert_eq!(kept.len(), 15, "{kept:?}");
    for (id, item) in &present {
        assert_eq!(Some(item), as_written.get(id), "{id} changed");
    }
    assert!(daemon.signal(libc::SIGTERM).success());

    // Every request naming the table was a read, a DescribeTable or a delete.
    let seen = proxy.stats.seen();
    let wrong: Vec<String> = (seen.iter())
        .filter(|s| s.tables().contains(&table.as_str()))
        .filter_map(|s| writes_the_table(s, &table))
        .collect();
    assert!(wrong.is_empty(), "requests writing the table: {wrong:#?}");
    assert!(seen.iter().any(|s| s.op == "GetRecords"));
}

/// The move from GSI mode to the expiry index table, in docs/adoption.md's order, with no gap: a
/// table whose writers set the window, swept through its GSI; its stream enabled; a second
/// sweeper following the stream beside the first; back-fill into the index table; audit naming
/// it; the first sweeper stopped; writers then set only the ttl. Every item
/// that expires in any step goes on time, once, and the live items stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_from_the_gsi_to_the_index_table_in_the_documented_order_leaves_no_gap() {
    use aws_sdk_dynamodb::types::StreamSpecification;
    let client = client().await;
    let table = new_table(&client, "move", |_| {}).await;
    let index = index_table(&client, "move_idx").await;
    let checkpoint = checkpoint_table(&client, "movecp").await;
    let now = now();
    let mut ttls: BTreeMap<String, i64> = BTreeMap::new();
    let mut due = |prefix: &str, n: usize, from: i64| -> Vec<(String, i64)> {
        let ids = names(prefix, n).into_iter().enumerate();
        let due: Vec<(String, i64)> = ids.map(|(i, id)| (id, from + i as i64 % 4)).collect();
        ttls.extend(due.iter().cloned());
        due
    };
    // Writers set the window (GSI mode): some due before the back-fill (only the GSI lists
    // them then: the first sweeper deletes them), some after the first sweeper is gone (the
    // back-fill's entries), some live for an hour.
    let before = due("before", 10, now + 8);
    let later = due("later", 10, now + 26);
    let live: Vec<String> = names("live", 5);
    let mut items: Vec<Key> = before
        .iter()
        .chain(&later)
        .map(|(id, ttl)| session(id, *ttl))
        .collect();
    items.extend(live.iter().map(|id| session(id, now + 3600)));
    put_items(&client, &table, items).await;
    // Each step's items watched from their write, so that each is seen gone when it goes.
    let watch = |items: &[(String, i64)]| {
        let (client, table) = (client.clone(), table.clone());
        let ids: Vec<String> = items.iter().map(|(id, _)| id.clone()).collect();
        tokio::spawn(
            async move { watch_gone(&client, &table, &ids, Duration::from_secs(45)).await },
        )
    };
    let mut watched = vec![watch(&before), watch(&later)];
    let mut old = local_cli();
    old.args(["run", "--every", "1s", "--table-name", &table])
        .env("CHECKPOINT_TABLE", &checkpoint)
        .stdout(Stdio::null());
    let mut old = Daemon::spawn(&mut old, &format!("move-{table}-gsi"));
    old.wait_for_log("running until SIGINT or SIGTERM");

    // 1. The stream; 2. the second sweeper beside the first.
    let stream = StreamSpecification::builder()
        .stream_enabled(true)
        .stream_view_type(StreamViewType::NewAndOldImages)
        .build()
        .unwrap();
    let enabled = client
        .update_table()
        .table_name(&table)
        .stream_specification(stream);
    enabled.send().await.expect("enable the stream");
    let tables = Tables {
        table: table.clone(),
        index: index.clone(),
        checkpoint: checkpoint.clone(),
    };
    let mut new = Follower::start(&endpoint(), &tables, "move-new", &[], "1s");
    // Writers still set the window meanwhile.
    let now = support::now();
    let during = due("during", 10, now + 6);
    let items = during.iter().map(|(id, ttl)| session(id, *ttl));
    put_items(&client, &table, items.collect()).await;
    watched.push(watch(&during));

    // 3. Back-fill the index table, once the first items have expired; 4. audit naming it.
    sleep_until(now as f64 + 15.0).await;
    let state = std::env::temp_dir().join(format!("ttl-sweeper-move-{table}.json"));
    let mut backfill = index_cli("backfill", &table, &index);
    backfill.arg("--state").arg(&state);
    let (code, out, err) = run(&mut backfill);
    assert_eq!(code, 0, "backfill: {out}\n{err}");
    let report = json_ok(&mut index_cli("audit", &table, &index));
    assert_eq!(report["missing_entry"], 0, "{report}");

    // 5. The first sweeper stopped; writers set only the ttl from here (dropping the GSI, which
    // nothing reads now, is left out: DynamoDB Local fails writes racing its removal).
    assert!(old.signal(libc::SIGTERM).success());
    let now = support::now();
    let after = due("after", 10, now + 4);
    let items = after.iter().map(|(id, ttl)| unwindowed(id, *ttl));
    put_items(&client, &table, items.collect()).await;
    watched.push(watch(&after));

    let mut gone = BTreeMap::new();
    for w in watched {
        gone.extend(w.await.expect("a watcher"));
    }
    let left: Vec<&String> = ttls.keys().filter(|id| !gone.contains_key(*id)).collect();
    assert!(
        left.is_empty(),
        "never deleted: {left:?}\n{}",
        new.log_text()
    );
    let off: Vec<String> = (gone.iter())
        .filter_map(|(id, at)| {
            let ttl = ttls[id] as f64;
            (*at < ttl || *at > ttl + 3.0).then(|| format!("{id}: ttl {ttl}, gone {at:.2}"))
        })
        .collect();
    assert!(off.is_empty(), "early or late across the move: {off:?}");
    let left = id_set(&client, &table).await;
    assert_eq!(left, live.iter().cloned().collect::<HashSet<_>>());
    assert!(new.signal(libc::SIGTERM).success());
    let _ = std::fs::remove_file(&state);
}
