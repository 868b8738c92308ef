//! Two Regions of one global table, each with an expiry index table of its own
//! (`EXPIRY_INDEX_TABLE`), on DynamoDB Local. One table with a stream stands for the global
//! table's two replicas (each replica's stream carries every write, the other Region's replicated
//! ones included); two `ttl-sweeper run --follow-stream` daemons, east and west, each through a
//! proxy of its own that records what it sends, share the checkpoint table and the leader lease.
//! Both follow the stream into their own index tables; east holds the lease and sweeps until it is
//! killed with SIGKILL, and west, whose index is current, takes over. Every expired item is deleted
//! within the lease and a few ticks, none before its ttl, none whose ttl was extended or removed;
//! and the application's table is written by nothing but the application and the deletes.

use crate::support::{self, fault_proxy};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::StreamViewType;
use aws_sdk_dynamodb::Client;
use fault_proxy::{FaultProxy, Plan};
use serde_json::Value;
use support::*;
use ttl_sweeper::store::Key;

/// `LEADER_LEASE` (s): the shortest allowed, two sweeps of `SCHEDULE_SECONDS=2`.
const LEASE: f64 = 5.0;
/// A sweep's tick (`run --every 1s`).
const TICK: f64 = 1.0;
/// How long after an item is due it may still be there: the tick, the follower's lag behind the
/// stream (it polls every 250 ms), the sweep itself, a test poll (250 ms and a scan), and a
/// second for a loaded machine. After the kill, also the second a `Date` header's resolution adds
/// to the standby's wait for the lease to lapse, and its watch of the lease (every 100 ms).
const SLACK: f64 = TICK + 2.0;

/// What one Region's proxy saw its daemon send, timed by the wall clock (s).
#[derive(Debug, Default)]
struct Sent {
    /// Each delete of an item of the application's table: (when it reached the proxy, id).
    deletes: Vec<(f64, String)>,
    /// Every write: (table, what: `put`, `update` or `delete`).
    writes: Vec<(String, &'static str)>,
    /// By index table: the ids of the items whose entries were put there.
    entries: HashMap<String, HashSet<String>>,
}

impl Sent {
    /// Records the writes of one request (`op`, its body `json`) to `app`, the application's
    /// table, and to any other.
    fn record(&mut self, app: &str, op: &str, json: &Value) {
        let at = wall_clock();
        for (table, what, value) in fault_proxy::writes(op, json) {
            if table == app && what == "delete" {
                let id = value["id"]["S"].as_str().unwrap_or("?").to_owned();
                self.deletes.push((at, id));
            }
            if table != app && what == "put" {
                // An entry of one item names its item in `key`; a pack, each of its items in
                // `keys`.
                let one = value["key"]["M"]["id"]["S"].as_str();
                let packed = value["keys"]["L"].as_array().into_iter().flatten();
                let packed = packed.filter_map(|k| k["M"]["id"]["S"].as_str());
                for id in one.into_iter().chain(packed) {
                    let ids = self.entries.entry(table.clone()).or_default();
                    ids.insert(id.to_owned());
                }
            }
            self.writes.push((table, what));
        }
    }
}

/// A `ttl-sweeper run --follow-stream` standing for one Region, with its own index table, through
/// a proxy that records what it sends.
struct Region {
    /// Killed first, before its proxy stops.
    daemon: Daemon,
    _proxy: FaultProxy,
    index: String,
    sent: Arc<Mutex<Sent>>,
}

impl Region {
    async fn start(region: &str, table: &str, index: &str, checkpoint: &str) -> Region {
        let sent: Arc<Mutex<Sent>> = Arc::default();
        let (seen, app) = (sent.clone(), table.to_owned());
        let plan = Plan::script(move |op, json| {
            seen.lock().unwrap().record(&app, op, json);
            None
        });
        let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(3), plan).await;
        let name = format!("index-failover-{table}-{region}");
        let daemon = Daemon::run(&proxy.endpoint, &name, |cmd| {
            cmd.args(["--every", "1s", "--follow-stream", "--table-name", table])
                .env("EXPIRY_INDEX_TABLE", index)
                .env("CHECKPOINT_TABLE", checkpoint)
                .env("LEADER_LEASE", (LEASE as u64).to_string())
                .env("SCHEDULE_SECONDS", "2")
                // Every entry written with its batch: the test kills east once both indexes list
                // every item written, live ones included (held entries are written only near
                // their due).
                .env("FOLLOW_HOLD", "0")
                .env("AWS_REGION", region);
        });
        tokio::task::block_in_place(|| daemon.wait_for_log("following the table's stream"));
        Region {
            daemon,
            _proxy: proxy,
            index: index.to_owned(),
            sent,
        }
    }

    fn deletes(&self) -> Vec<(f64, String)> {
        self.sent.lock().unwrap().deletes.clone()
    }

    /// The ids of the items whose entries it put into its index table.
    fn indexed(&self) -> HashSet<String> {
        let sent = self.sent.lock().unwrap();
        sent.entries.get(&self.index).cloned().unwrap_or_default()
    }

    fn wait_for_log(&self, what: &str) {
        tokio::task::block_in_place(|| self.daemon.wait_for_log(what));
    }
}

/// One item of the application, as it last wrote it.
#[derive(Debug, Clone)]
struct Written {
    item: Key,
    /// Its ttl when first written.
    ttl: i64,
    /// When its last write was answered (wall clock, s).
    at: f64,
    /// Whether it must be deleted: its ttl passes during the test and stays.
    expires: bool,
}

/// An item with `id`, a payload and a `ttl`, nothing else: what a writer that knows nothing of
/// the sweeper writes.
fn app_item(id: &str, ttl: i64) -> Key {
    let mut item = unwindowed(id, ttl);
    item.insert("payload".into(), AV::S(format!("the payload of {id}")));
    item.insert("version".into(), num(1));
    item
}

/// What the application does to an item whose ttl it changes before it passes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Change {
    /// The ttl moves an hour ahead.
    Extend,
    /// The ttl attribute goes: the item never expires.
    Unset,
}

async fn change(client: &Client, table: &str, item: &mut Key, change: Change, t0: i64) {
    let id = item["id"].as_s().unwrap().clone();
    let update = client
        .update_item()
        .table_name(table)
        .set_key(Some(id_key(&id)))
        .expression_attribute_names("#t", "ttl")
        .expression_attribute_names("#v", "version")
        .expression_attribute_values(":v", num(2));
    match change {
        Change::Extend => {
            let ttl = num(t0 + 3600);
            let set = update.update_expression("SET #t = :t, #v = :v");
            set.expression_attribute_values(":t", ttl.clone())
                .send()
                .await
                .expect("extend the ttl");
            item.insert("ttl".into(), ttl);
        }
        Change::Unset => {
            let remove = update.update_expression("REMOVE #t SET #v = :v");
            remove.send().await.expect("remove the ttl");
            item.remove("ttl");
        }
    }
    item.insert("version".into(), num(2));
}

/// Writes `items` (each already expired or not as `expires` says) and records them.
async fn write_items(
    client: &Client,
    table: &str,
    written: &mut BTreeMap<String, Written>,
    items: Vec<(Key, bool)>,
) {
    let keys: Vec<Key> = items.iter().map(|(item, _)| item.clone()).collect();
    put_many(client, table, keys).await;
    let at = wall_clock();
    for (item, expires) in items {
        let id = item["id"].as_s().unwrap().clone();
        let ttl = item["ttl"].as_n().unwrap().parse().unwrap();
        let w = Written {
            item,
            ttl,
            at,
            expires,
        };
        written.insert(id, w);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn two_regions_with_their_own_index_tables_fail_over_and_delete_only_what_expired() {
    let (client, table, east_index) =
        indexed_table("failover", StreamViewType::NewAndOldImages).await;
    let west_index = index_table(&client, "failover_west_idx").await;
    let checkpoint = checkpoint_table(&client, "failovercp").await;
    let mut east = Region::start("us-east-1", &table, &east_index, &checkpoint).await;
    east.wait_for_log("took the lease from nobody");
    let west = Region::start("us-west-2", &table, &west_index, &checkpoint).await;
    west.wait_for_log("standing by");

    // 200 items due over 18 s from 2 s on; 20 written already expired; 20 live for an hour; 10
    // whose ttl is extended and 10 whose ttl is removed, each 2 s before it passes (the first
    // ones before the kill, the others after it).
    let t0 = now();
    let mut written: BTreeMap<String, Written> = BTreeMap::new();
    let mut items: Vec<(Key, bool)> = Vec::new();
    for i in 0..200 {
        items.push((app_item(&format!("due-{i}"), t0 + 2 + i * 18 / 200), true));
    }
    for i in 0..20 {
        items.push((app_item(&format!("expired-{i}"), t0 - 30 - i), true));
        items.push((app_item(&format!("live-{i}"), t0 + 3600), false));
    }
    let mut changes: Vec<(f64, String, Change)> = Vec::new();
    for i in 0..10 {
        for (name, how) in [("extended", Change::Extend), ("unset", Change::Unset)] {
            let (id, ttl) = (format!("{name}-{i}"), t0 + 4 + i);
            items.push((app_item(&id, ttl), false));
            changes.push(((ttl - 2) as f64, id, how));
        }
    }
    write_items(&client, &table, &mut written, items).await;

    // East deletes for a few seconds; once both indexes hold an entry for every item written,
    // it is killed. 9 s in, the application writes 10 items already expired and 10 due 12-16 s
    // in: only west indexes those.
    let mut killed_at: Option<f64> = None;
    let mut late_written = false;
    let mut gone_by: HashMap<String, f64> = HashMap::new();
    let mut west_index_at_kill = 0;
    let limit = t0 as f64 + 20.0 + LEASE + SLACK + 2.0;
    loop {
        let now = wall_clock();
        for (at, id, how) in changes.iter().filter(|(at, ..)| *at <= now) {
            let w = written.get_mut(id).unwrap();
            if w.item["version"] == num(1) {
                change(&client, &table, &mut w.item, *how, t0).await;
                w.at = wall_clock();
                assert!(w.at < *at + 2.0, "{id} changed after its ttl passed");
            }
        }
        if killed_at.is_none() && now >= t0 as f64 + 4.0 {
            let with_ttl: HashSet<String> = written
                .iter()
                .filter(|(_, w)| w.item.contains_key("ttl"))
                .map(|(id, _)| id.clone())
                .collect();
            let both_current = [&east, &west]
                .iter()
                .all(|r| with_ttl.is_subset(&r.indexed()));
            // Sent is not yet stored: a write may still be on its way to the standby's table.
            let mut unstored = None;
            if both_current && east.deletes().len() >= 5 {
                let entries = index_entries(&client, &west_index).await;
                let stored: HashSet<&str> = entries.iter().map(|(id, _)| id.as_str()).collect();
                let missing: Vec<&String> = with_ttl
                    .iter()
                    .filter(|id| !stored.contains(id.as_str()))
                    .collect();
                if missing.is_empty() {
                    west_index_at_kill = entries.len();
                    killed_at = Some(wall_clock());
                    east.daemon.signal(libc::SIGKILL);
                }
                unstored = Some(format!("{missing:?}"));
            }
            assert!(
                killed_at.is_some() || now < t0 as f64 + 12.0,
                "east never deleted or an index fell behind: east deleted {}, east indexed {} \
                 and west {} of {}, west's table lacks {unstored:?}\n{}\n{}",
                east.deletes().len(),
                east.indexed().len(),
                west.indexed().len(),
                with_ttl.len(),
                east.daemon.log_text(),
                west.daemon.log_text()
            );
        }
        if !late_written && now >= t0 as f64 + 9.0 {
            late_written = true;
            let mut later = Vec::new();
            for i in 0..10 {
                later.push((
                    app_item(&format!("late-expired-{i}"), now as i64 - 20),
                    true,
                ));
                later.push((app_item(&format!("late-due-{i}"), t0 + 12 + i / 2), true));
            }
            write_items(&client, &table, &mut written, later).await;
        }
        let items = items_by_id(&client, &table).await;
        let at = wall_clock();
        for id in written.keys() {
            if !items.contains_key(id) {
                gone_by.entry(id.clone()).or_insert(at);
            }
        }
        let expiring = written.iter().filter(|(_, w)| w.expires);
        let all_gone = expiring.clone().all(|(id, _)| gone_by.contains_key(id));
        let changed = changes.iter().all(|(at, ..)| *at < now);
        if (all_gone && changed && late_written) || now > limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let killed_at = killed_at.expect("east was killed");
    // Two more of west's ticks: nothing more goes.
    tokio::time::sleep(Duration::from_secs_f64(2.0 * TICK)).await;
    let items = items_by_id(&client, &table).await;
    let east_log = east.daemon.log_text();
    let west_log = west.daemon.log_text();
    let logs = format!("east:\n{east_log}\nwest:\n{west_log}");

    // Every expired item deleted in time: by east within the slack of when it was due; once east
    // was killed, by west within the lease (from east's last renewal, before the kill) and the
    // slack.
    let mut late: Vec<String> = Vec::new();
    // The longest from due to gone, of the items due before the kill and of those due after it.
    let (mut before_lag, mut after_lag) = (0.0f64, 0.0f64);
    for (id, w) in written.iter().filter(|(_, w)| w.expires) {
        let due = (w.ttl as f64).max(w.at);
        let deadline = if due + SLACK < killed_at {
            due + SLACK
        } else {
            due.max(killed_at + LEASE) + SLACK
        };
        match gone_by.get(id) {
            None => late.push(format!("{id} (ttl {}) never deleted", w.ttl)),
            Some(gone) if *gone > deadline => late.push(format!(
                "{id} (ttl {}, written {:.2}) gone by {gone:.2}, {:.2} s after {deadline:.2}",
                w.ttl,
                w.at,
                gone - deadline
            )),
            Some(gone) if due < killed_at => before_lag = before_lag.max(gone - due),
            Some(gone) => after_lag = after_lag.max(gone - due),
        }
    }
    assert!(
        late.is_empty(),
        "killed at {killed_at:.2}: {late:#?}\n{logs}"
    );

    // None deleted before its ttl, and no delete sent for an item that was not to expire.
    let east_deletes = east.deletes();
    let west_deletes = west.deletes();
    for (at, id) in east_deletes.iter().chain(&west_deletes) {
        let w = &written[id];
        assert!(w.expires, "a delete of {id} was sent at {at:.2}\n{logs}");
        assert!(
            *at >= w.ttl as f64,
            "{id} (ttl {}) delete sent at {at:.2}",
            w.ttl
        );
    }
    // East deleted until it was killed (a request in flight may reach its proxy just after the
    // signal), west only after it: never both.
    let first_west = west_deletes.iter().map(|(at, _)| *at).reduce(f64::min);
    let first_west = first_west.expect("west deleted nothing: it did not take over");
    let last_east = east_deletes.iter().map(|(at, _)| *at).reduce(f64::max);
    let last_east = last_east.expect("east deleted nothing");
    assert!(
        last_east < first_west,
        "east's last delete came {:.2} s after west's first",
        last_east - first_west
    );
    assert!(first_west > killed_at, "west deleted while east lived");
    let took = west_log.contains("took the lease from us-east-1/");
    assert!(took, "{west_log}");
    assert!(
        !west_log.contains("LeaseLayoutMismatch"),
        "west took east's layout for another one: {west_log}"
    );

    // What is left is exactly what the application wrote: every item not to expire, byte for
    // byte as last written, and nothing else.
    let kept: BTreeMap<&String, &Key> = written
        .iter()
        .filter(|(_, w)| !w.expires)
        .map(|(id, w)| (id, &w.item))
        .collect();
    let left: BTreeMap<&String, &Key> = items.iter().collect();
    assert_eq!(left, kept, "{logs}");

    // Each daemon wrote the application's table only to delete, its own index table, and the
    // checkpoint table (lease, checkpoint, stream position): nothing else.
    for (region, own, other) in [("east", &east, &west_index), ("west", &west, &east_index)] {
        let sent = own.sent.lock().unwrap();
        let app_writes: Vec<&'static str> = (sent.writes.iter())
            .filter(|(t, _)| *t == table)
            .map(|(_, what)| *what)
            .collect();
        assert!(
            app_writes.iter().all(|w| *w == "delete"),
            "{region} wrote the application's table: {app_writes:?}"
        );
        let allowed = [table.as_str(), own.index.as_str(), checkpoint.as_str()];
        let elsewhere: HashSet<&str> = (sent.writes.iter())
            .map(|(t, _)| t.as_str())
            .filter(|t| !allowed.contains(t))
            .collect();
        assert!(elsewhere.is_empty(), "{region} wrote {elsewhere:?}");
        assert!(!sent.entries.contains_key(other.as_str()), "{region}");
    }
    // West indexed what was written after the kill too, when it alone followed the stream.
    let late_ids: HashSet<String> = (written.keys())
        .filter(|id| id.starts_with("late-"))
        .cloned()
        .collect();
    assert!(late_ids.is_subset(&west.indexed()));
    assert!(!late_ids.iter().any(|id| east.indexed().contains(id)));

    let items_sent = |deletes: &[(f64, String)]| {
        let ids: HashSet<&String> = deletes.iter().map(|(_, id)| id).collect();
        ids.len()
    };
    eprintln!(
        "east sent deletes of {} items and was killed {:.2} s in; west held {west_index_at_kill} \
         entries then, sent its first delete {:.2} s after the kill (LEADER_LEASE={LEASE}, ticks \
         of {TICK} s) and deleted {} more; the longest from due to gone: {before_lag:.2} s of the \
         items due before the kill, {after_lag:.2} s of those due after it",
        items_sent(&east_deletes),
        killed_at - t0 as f64,
        first_west - killed_at,
        items_sent(&west_deletes),
    );
}
