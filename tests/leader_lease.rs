//! The leader lease (`LEADER_LEASE`):
//!
//! - in memory, in virtual time: two sweepers' leases over one store, with DynamoDB's clock known
//!   to each only within a second, never lead at once, and the standby takes over once the
//!   holder stops; a standby's sweep touches nothing but the lease; a Region naming the table by
//!   ARN takes the same lease as one naming it by name; a sweeper of another layout stands by
//!   beside the holder and says so; a holder whose sweeps fail gives the lease up and a healthy
//!   Region takes it, and the deployment's other invocations do not renew it; the Lambda's stream
//!   indexer's reports count in the lease: a holder whose batches have failed for a lease gives
//!   it up, a standby whose own fail leaves a lapsed lease to the others, no traffic is a current
//!   index, and the reports are written at each change and at most every 10 s otherwise;
//! - on DynamoDB Local: two `ttl-sweeper run` processes standing for two Regions, each through
//!   a proxy of its own that records its deletes: one leads, the other takes over after a
//!   SIGKILL, and never do both send deletes; the same two with every delete of the holder
//!   refused: the holder gives the lease up and the other deletes everything expired; the lease
//!   item's attributes as `DynamoStore` reads and writes them.

use crate::support::{self, fault_proxy};

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lambda_events::dynamodb::EventRecord;
use fault_proxy::{Fault, FaultProxy, Plan};
use support::mem_store::{Fault as MemFault, MemStore, Op, When};
use support::*;
use tokio::time::{sleep_until, Instant};
use ttl_sweeper::daemon;
use ttl_sweeper::engine::lease::REPORT_FRESH;
use ttl_sweeper::engine::lease::{Lease, LeaseConfig, SweepHealth, LEASE_MARGIN, WATCH_EVERY};
use ttl_sweeper::engine::tables::Table;
use ttl_sweeper::engine::{run_ticks, Stop, SweepOptions, SweepReport, Sweeper};
use ttl_sweeper::expiry::{Clock, Layout, Timestamp};
use ttl_sweeper::index::follow::{FollowError, FollowReport};
use ttl_sweeper::index::Indexed;
use ttl_sweeper::lambda::stream::Reporter;
use ttl_sweeper::store::entries::FailingRecord;
use ttl_sweeper::store::{ErrorKind, IndexerReport, LeaseItem, ServerTime};

/// DynamoDB's clock as one sweeper knows it in virtual time: the true time is `base` plus the
/// time since `t0`; the sweeper's upper bound is `ahead` past it, its lower bound `behind` short
/// of it (a `Date` header's second of resolution, a response's time in flight).
struct Bounds {
    t0: Instant,
    base: Timestamp,
    ahead: Duration,
    behind: Duration,
}

impl Bounds {
    fn true_time(&self) -> Timestamp {
        self.base + self.t0.elapsed()
    }
}

impl ServerTime for Bounds {
    fn upper_bound(&self) -> Option<Timestamp> {
        Some(self.true_time() + self.ahead)
    }

    fn lower_bound(&self) -> Option<Timestamp> {
        Some(self.true_time() - self.behind)
    }
}

fn lease_config(holder: &str, seconds: u64) -> LeaseConfig {
    LeaseConfig {
        table: "state".into(),
        id: "sessions#leader".into(),
        duration: Duration::from_secs(seconds),
        holder: holder.into(),
        layout: "index=expirationWindowIndex ttl=ttl window=expirationWindow width=60s shards=1 \
                 range=all"
            .into(),
        range: None,
    }
}

/// A lease of `config` judged by `time`, with a host wall clock that keeps DynamoDB's true time.
fn leased(config: LeaseConfig, time: Arc<Bounds>) -> Lease {
    let wall = time.clone();
    Lease::new(config, time, Arc::new(move || wall.true_time()))
}

fn bounds(t0: Instant, ahead_ms: u64, behind_ms: u64) -> Arc<Bounds> {
    Arc::new(Bounds {
        t0,
        base: Timestamp::from_secs(1_800_000_000),
        ahead: Duration::from_millis(ahead_ms),
        behind: Duration::from_millis(behind_ms),
    })
}

/// A lease item of `holder` until `expires_at`, of no recorded layout and not given up.
fn held(holder: &str, expires_at: Timestamp) -> LeaseItem {
    LeaseItem {
        holder: holder.into(),
        expires_at,
        layout: None,
        released: false,
    }
}

/// When a sweeper led: from its check to the end of the validity the check gave.
type Holds = Arc<Mutex<Vec<(&'static str, Instant, Instant)>>>;

/// Checks `lease` every second (from `offset`) until `until`, as ticks do, recording each hold.
async fn checking(
    name: &'static str,
    lease: Lease,
    store: MemStore,
    offset: Duration,
    until: Instant,
    holds: Holds,
) -> usize {
    let mut stood_by = 0;
    tokio::time::sleep(offset).await;
    while Instant::now() < until {
        let started = Instant::now();
        let check = lease.check(&store, &Stop::never()).await;
        // A check may watch the lease for a while before it takes it: the hold begins when it
        // returns, as a sweep does.
        match check.ok() {
            Some(end) => holds.lock().unwrap().push((name, Instant::now(), end)),
            None => stood_by += 1,
        }
        tokio::time::sleep_until(started + Duration::from_secs(1)).await;
    }
    stood_by
}

#[tokio::test(start_paused = true)]
async fn two_leases_never_lead_at_once_and_the_standby_takes_over_when_the_holder_stops() {
    // (A's upper bound ahead and lower bound behind, B's lower bound behind, delays of lease
    // writes): the worst bounds a second of `Date` resolution allows, and writes slow enough to
    // matter.
    let cases = [
        (1_000, 0, 999, Duration::from_millis(300)),
        (0, 0, 0, Duration::ZERO),
        (1_000, 0, 0, Duration::from_millis(1_500)),
        (400, 600, 500, Duration::from_millis(100)),
    ];
    for (ahead, a_behind, behind, write_delay) in cases {
        let t0 = Instant::now();
        let store = MemStore::new(Layout::default())
            .delay(Op::WriteLease, write_delay)
            .delay(Op::ReadLease, Duration::from_millis(50));
        let lease_s = 6;
        let a = leased(
            lease_config("us-east-1/a", lease_s),
            bounds(t0, ahead, a_behind),
        );
        let b = leased(lease_config("eu-west-1/b", lease_s), bounds(t0, 0, behind));
        let holds: Holds = Arc::default();
        let killed = t0 + Duration::from_secs(20);
        let (a_stood_by, b_stood_by) = tokio::join!(
            checking("a", a, store.clone(), Duration::ZERO, killed, holds.clone()),
            checking(
                "b",
                b,
                store.clone(),
                Duration::from_millis(370),
                killed + Duration::from_secs(20),
                holds.clone()
            ),
        );
        let holds = holds.lock().unwrap().clone();
        let case = format!(
            "a: ahead {ahead} ms, behind {a_behind} ms; b: behind {behind} ms; writes {write_delay:?}"
        );
        assert_eq!(a_stood_by, 0, "{case}: the first holder led at every check");
        assert!(b_stood_by > 0, "{case}");
        for (x, xs, xe) in &holds {
            for (y, ys, ye) in &holds {
                if x != y {
                    assert!(
                        xe <= ys || ye <= xs,
                        "{case}: {x} held {:?}..{:?} and {y} {:?}..{:?}",
                        *xs - t0,
                        *xe - t0,
                        *ys - t0,
                        *ye - t0
                    );
                }
            }
        }
        let first_b = holds
            .iter()
            .filter(|(n, ..)| *n == "b")
            .map(|(_, s, _)| *s)
            .min()
            .expect("b took over");
        assert!(first_b > killed, "{case}: b led while a lived");
        let last_a_end = holds
            .iter()
            .filter(|(n, ..)| *n == "a")
            .map(|(.., e)| *e)
            .max()
            .unwrap();
        let failover = first_b - killed;
        eprintln!(
            "{case}: a's last hold ended {:?} after its last check, b led {failover:?} after it stopped",
            last_a_end.saturating_duration_since(killed)
        );
        // A's last write was sent before it stopped, and wrote an expiry at most the lease after
        // DynamoDB's time then (from its lower bound). B, watching the lease as it lapses, takes
        // it within its own lower bound's lag, a watch period and a read, and its write's time.
        let within = Duration::from_secs(lease_s)
            + Duration::from_millis(behind)
            + WATCH_EVERY
            + Duration::from_millis(50)
            + write_delay;
        assert!(failover <= within, "{case}: {failover:?} > {within:?}");
        assert!(first_b >= last_a_end, "{case}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_standby_sweep_touches_nothing_but_the_lease_and_a_leader_stops_with_its_lease() {
    let t0 = Instant::now();
    let now = 1_800_000_000;
    let store = MemStore::new(Layout::default()).starting_at(now);
    store.put_n("old-", 10, |i| now - 5 - i);
    let time = bounds(t0, 500, 500);
    // Another Region holds it for another minute.
    let other = held("eu-west-1/other", Timestamp::from_secs(now + 60));
    store.set_lease(&lease_config("eu-west-1/other", 60).id, other);
    let options = SweepOptions {
        checkpoint: Some(ttl_sweeper::engine::Checkpoint {
            table: "state".into(),
            id: "sessions/expirationWindowIndex".into(),
            start_from: None,
            stream_id: "sessions/expirationWindowIndex#stream".into(),
        }),
        ..SweepOptions::default()
    };
    let sweeper = Sweeper::new(store.clone(), store.schema(), options)
        .with_lease(leased(lease_config("us-east-1/me", 30), time));
    let at = Timestamp::from_secs(now);
    let report = sweeper.sweep(at, &Stop::never()).await;
    report.assert_fields("stood_by=1 items_found=0 windows_swept=0");
    assert!(report.is_success(), "{report:?}");
    let windows = [ttl_sweeper::expiry::window::Window::containing_instant(
        at, 60,
    )];
    let report = sweeper.sweep_windows(at, &windows, &Stop::never()).await;
    report.assert_fields("stood_by=1 items_found=0");
    let (every, full_every) = (Duration::from_secs(1), Duration::from_secs(10));
    let ticks = support::ticks(every, full_every, Duration::from_secs(5));
    let clock = move || Timestamp::from_secs(now) + t0.elapsed();
    let report = run_ticks(&sweeper, at, &clock, &ticks, &Stop::never(), |_| {}).await;
    assert!(report.stood_by >= 5, "{report:?}");
    assert_eq!(report.items_found, 0);
    for op in [Op::Query, Op::BatchDelete, Op::Delete, Op::Get] {
        assert_eq!(store.calls(op), 0, "{op:?}");
    }
    assert_eq!(store.calls(Op::ReadCheckpoint), 0);
    assert_eq!(store.calls(Op::AdvanceCheckpoint), 0);
    assert_eq!(
        store.calls(Op::WriteLease),
        0,
        "it looked held: never written"
    );
    // At most one read a fifth of the lease (6 s) over the ~5 s of ticks, plus the two sweeps.
    let reads = store.calls(Op::ReadLease);
    assert!(reads <= 3, "{reads}");
    assert_eq!(store.ids().len(), 10);

    // The other Region's lease lapses: the next sweep takes it and deletes.
    tokio::time::advance(Duration::from_secs(60)).await;
    let at = Timestamp::from_secs(now) + t0.elapsed();
    let report = sweeper.sweep(at, &Stop::never()).await;
    report.assert_fields("stood_by=0 items_deleted=10");
    assert_eq!(store.lease().unwrap().holder, "us-east-1/me");

    // A leader's sweep stops sending when its hold runs out: queries slower than the validity
    // (30 s lease: 27 s) leave the windows after it for the next sweep.
    let slow = MemStore::new(Layout::default())
        .starting_at(now)
        .delay(Op::Query, Duration::from_secs(20));
    slow.put_n("old-", 5, |i| now - 5 - i * 60);
    let time = bounds(Instant::now(), 0, 0);
    let options = SweepOptions {
        lookback_windows: 5,
        max_concurrency: 1,
        ..SweepOptions::default()
    };
    let sweeper = Sweeper::new(slow.clone(), slow.schema(), options)
        .with_lease(leased(lease_config("us-east-1/me", 30), time));
    let started = Instant::now();
    let report = sweeper.sweep_at(now).await;
    assert!(report.stopped_early, "{report:?}");
    assert!(report.windows_left > 0, "{report:?}");
    let validity = Duration::from_secs(30) - LEASE_MARGIN;
    // Its last query started before the hold ran out; none after.
    assert!(
        started.elapsed() < validity + Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        slow.calls(Op::Query),
        2,
        "queries at 0 s and 20 s, none at 40 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_holder_whose_wall_clock_ran_ahead_of_its_monotonic_one_renews_before_it_sweeps() {
    let t0 = Instant::now();
    let store = MemStore::new(Layout::default());
    let time = bounds(t0, 0, 0);
    // The host's wall clock: DynamoDB's true time, plus a jump the test sets.
    let jump = Arc::new(Mutex::new(Duration::ZERO));
    let wall = {
        let (time, jump) = (time.clone(), jump.clone());
        move || time.true_time() + *jump.lock().unwrap()
    };
    let lease = Lease::new(lease_config("us-east-1/me", 30), time, Arc::new(wall));
    let until = lease.check(&store, &Stop::never()).await.expect("took it");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(lease.check(&store, &Stop::never()).await.ok(), Some(until));
    assert_eq!(
        store.calls(Op::WriteLease),
        1,
        "within its hold: not written"
    );
    // The wall clock moves a minute on in a second of the monotonic clock: a pause it missed.
    *jump.lock().unwrap() = Duration::from_secs(60);
    tokio::time::advance(Duration::from_secs(1)).await;
    let renewed = lease.check(&store, &Stop::never()).await.expect("renewed");
    assert_eq!(
        store.calls(Op::WriteLease),
        2,
        "confirmed by a write before it sweeps again"
    );
    assert!(renewed > until, "a new hold");
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_cannot_renew_leads_until_its_hold_runs_out_then_stands_by() {
    let t0 = Instant::now();
    let store = MemStore::new(Layout::default());
    let lease = leased(lease_config("us-east-1/me", 10), bounds(t0, 0, 0));
    let first = lease.check(&store, &Stop::never()).await;
    let until = first.expect("took it");
    assert_eq!(until - t0, Duration::from_secs(10) - LEASE_MARGIN);
    // Every later write fails: renewals are tried once half the hold is used, and the hold
    // stands until it runs out.
    let failing = MemStore::new(Layout::default()).fault(
        Op::WriteLease,
        When::Always,
        MemFault::Fail(ttl_sweeper::store::ErrorKind::Transient),
    );
    *failing.leases.lock().unwrap() = store.leases.lock().unwrap().clone();
    tokio::time::advance(Duration::from_secs(4)).await;
    let renewing = lease.check(&failing, &Stop::never()).await;
    assert_eq!(renewing.ok(), Some(until));
    assert_eq!(failing.calls(Op::WriteLease), 1);
    tokio::time::advance(Duration::from_secs(4)).await;
    let after = lease.check(&failing, &Stop::never()).await;
    assert_eq!(after.as_ref().ok(), None, "past its hold");
    assert!(
        after.is_err_and(|e| e.error.is_some()),
        "the failure is reported"
    );
}

/// When each delete request reached a proxy, with the ids it deletes.
type Sent = Arc<Mutex<Vec<(std::time::Instant, Vec<String>)>>>;

/// A `ttl-sweeper run` standing for one Region: its own proxy records each delete it sends.
struct Region {
    /// Killed first, before its proxy stops.
    daemon: Daemon,
    /// Stops with the region.
    _proxy: FaultProxy,
    /// When each `BatchWriteItem` or `DeleteItem` reached its proxy, with the ids it deletes.
    deletes: Sent,
    /// When each lease write (an `UpdateItem` of the `#leader` item) reached its proxy.
    lease_writes: Arc<Mutex<Vec<std::time::Instant>>>,
    /// When each write giving the lease up (`SET released`) reached its proxy.
    releases: Arc<Mutex<Vec<std::time::Instant>>>,
}

impl Region {
    /// East (`us-east-1`), which took the lease, and west (`eu-west-1`), standing by. East's
    /// proxy answers every delete with `refuse` (after recording it), if any.
    async fn pair(table: &str, checkpoint: &str, refuse: Option<Fault>) -> (Region, Region) {
        let east = Region::start("us-east-1", table, checkpoint, refuse).await;
        east.daemon.wait_for_log("took the lease from nobody");
        let west = Region::start("eu-west-1", table, checkpoint, None).await;
        west.daemon.wait_for_log("standing by");
        (east, west)
    }

    async fn start(
        name: &'static str,
        table: &str,
        checkpoint: &str,
        refuse: Option<Fault>,
    ) -> Region {
        let deletes: Sent = Arc::default();
        let lease_writes: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
        let releases: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
        let (d, l, r) = (deletes.clone(), lease_writes.clone(), releases.clone());
        let plan = Plan::script(move |op, json| {
            let at = std::time::Instant::now();
            if json["UpdateExpression"].as_str() == Some("SET #r = :true") {
                r.lock().unwrap().push(at);
            }
            match op {
                "BatchWriteItem" | "DeleteItem" => {
                    let deletes = fault_proxy::writes(op, json).into_iter();
                    let keys = deletes.filter(|(_, what, _)| *what == "delete");
                    let ids =
                        keys.map(|(_, _, key)| key["id"]["S"].as_str().unwrap_or("").to_owned());
                    d.lock().unwrap().push((at, ids.collect()));
                    return refuse.clone();
                }
                "UpdateItem"
                    if json["Key"]["id"]["S"]
                        .as_str()
                        .is_some_and(|id| id.ends_with("#leader")) =>
                {
                    l.lock().unwrap().push(at)
                }
                _ => {}
            }
            None
        });
        let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(3), plan).await;
        let log = format!("lease-{table}-{name}");
        let daemon = Daemon::run(&proxy.endpoint, &log, |cmd| {
            cmd.args(["--every", "1s", "--table-name", table])
                .env("CHECKPOINT_TABLE", checkpoint)
                .env("LEADER_LEASE", "6")
                .env("SCHEDULE_SECONDS", "3")
                .env("AWS_REGION", name);
        });
        Region {
            daemon,
            _proxy: proxy,
            deletes,
            lease_writes,
            releases,
        }
    }

    fn deletes(&self) -> Vec<(std::time::Instant, Vec<String>)> {
        self.deletes.lock().unwrap().clone()
    }

    /// When its first delete reached its proxy.
    fn first_delete(&self) -> Option<std::time::Instant> {
        self.deletes().iter().map(|(at, _)| *at).min()
    }

    /// When its lease writes reached its proxy, of those `keep` keeps.
    fn lease_writes(&self, keep: impl Fn(&std::time::Instant) -> bool) -> Vec<std::time::Instant> {
        let writes = self.lease_writes.lock().unwrap();
        writes.iter().copied().filter(keep).collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_region_sweeps_and_the_other_takes_over_within_the_lease_after_a_sigkill() {
    let (client, table) = simple_table("lease").await;
    let checkpoint = checkpoint_table(&client, "leasecp").await;
    let (mut east, west) = Region::pair(&table, &checkpoint, None).await;

    // Two items expire every second for 30 s, from 4 s on; fifty live for an hour.
    let start = now();
    let expiring = names("due", 60);
    let mut items = sessions("due", 60, |i| start + 4 + i / 2);
    items.extend(sessions("live", 50, |i| start + 3600 + i));
    put_items(&client, &table, items).await;

    // East sweeps a few seconds' worth, then dies.
    let deleted_some = poll(
        Duration::from_secs(30),
        Duration::from_millis(50),
        || east.deletes().len(),
        |n| *n >= 5,
    );
    assert!(deleted_some >= 5, "east deleted nothing");
    assert!(west.deletes().is_empty(), "west deleted while east led");
    let killed_at = std::time::Instant::now();
    east.daemon.signal(libc::SIGKILL);

    // West takes over; everything due goes.
    let left = left_after(&client, &table, &expiring, Duration::from_secs(60)).await;
    assert!(left.is_empty(), "expired items left: {left:?}");
    let present = id_set(&client, &table).await;
    for i in 0..50 {
        assert!(
            present.contains(&format!("live-{i}")),
            "live-{i} was deleted"
        );
    }

    let east_deletes = east.deletes();
    let west_deletes = west.deletes();
    let last_east = east_deletes.iter().map(|(at, _)| *at).max().unwrap();
    let first_west = west
        .first_delete()
        .expect("west deleted after the takeover");
    assert!(
        last_east < first_west,
        "east's last delete came {:?} after west's first",
        last_east - first_west
    );
    assert!(first_west > killed_at, "west deleted while east lived");
    let took = west.lease_writes(|at| *at > killed_at).into_iter().min();
    let took = took.expect("west wrote the lease");
    let renewed = east.lease_writes(|at| *at < killed_at).into_iter().max();
    let renewed = renewed.expect("east wrote the lease");
    let failover = first_west - killed_at;
    eprintln!(
        "failover: east renewed the lease last {:.2} s before it was killed; west wrote the \
         lease {:.2} s after the kill ({:.2} s after that renewal) and sent its first delete \
         {:.2} s after the kill (LEADER_LEASE=6, ticks of 1 s); east sent {} delete requests, \
         west {}",
        (killed_at - renewed).as_secs_f64(),
        (took - killed_at).as_secs_f64(),
        (took - renewed).as_secs_f64(),
        failover.as_secs_f64(),
        east_deletes.len(),
        west_deletes.len()
    );
    // East's last renewal wrote an expiry at most the lease after DynamoDB's time then; west,
    // watching the lease as it lapses, takes it within a fraction of a second of that, and
    // sweeps at once: the lease and a tick after the renewal, and after the kill, which came
    // later. (A tick's allowance on top for a loaded machine.)
    let within = Duration::from_secs(6 + 1);
    assert!(
        took - renewed < within + Duration::from_secs(1),
        "{:?}",
        took - renewed
    );
    assert!(failover < within + Duration::from_secs(1), "{failover:?}");
    let west_log = west.daemon.log_text();
    assert!(
        west_log.contains("took the lease from us-east-1/"),
        "{west_log}"
    );
    // Every deleted id was deleted by one of them.
    let deleted: HashSet<String> = east_deletes
        .iter()
        .chain(&west_deletes)
        .flat_map(|(_, ids)| ids.iter().cloned())
        .collect();
    assert!(expiring.iter().all(|id| deleted.contains(id)));
}

/// The configuration of one Region's sweeper of `sessions` with a lease of `lease_s` seconds,
/// naming the table as `table`, with `more` settings.
fn region_config(table: &str, lease_s: u64, more: &[(&str, &str)]) -> ttl_sweeper::config::Config {
    let lease = lease_s.to_string();
    let mut pairs = vec![
        ("CHECKPOINT_TABLE", "state"),
        ("SCHEDULE_SECONDS", "1"),
        ("LEADER_LEASE", lease.as_str()),
    ];
    pairs.extend_from_slice(more);
    config(table, &pairs)
}

/// A sweeper of `store` configured by `config`, holding the lease as `holder`, with DynamoDB's
/// clock known exactly (from `t0`).
fn region_sweeper(
    store: MemStore,
    config: &ttl_sweeper::config::Config,
    holder: &str,
    t0: Instant,
) -> Sweeper<MemStore> {
    let lease = config.lease(holder.into()).expect("a lease");
    let schema = store.schema();
    Sweeper::new(store, schema, config.options.clone()).with_lease(leased(lease, bounds(t0, 0, 0)))
}

/// East's and west's sweepers of `sessions` over `east` and `west`, each with a lease of
/// `lease_s` ([`region_sweeper`]).
fn regions(east: &MemStore, west: &MemStore, lease_s: u64, t0: Instant) -> [Sweeper<MemStore>; 2] {
    let config = region_config("sessions", lease_s, &[]);
    let regions = [(east, "us-east-1/sweeper"), (west, "eu-west-1/sweeper")];
    regions.map(|(store, holder)| region_sweeper(store.clone(), &config, holder, t0))
}

/// East's sweeper of `sessions` over `store`, with a lease of 30 s ([`region_sweeper`]).
fn east_sweeper(store: &MemStore, t0: Instant) -> Sweeper<MemStore> {
    let config = region_config("sessions", 30, &[]);
    region_sweeper(store.clone(), &config, "us-east-1/sweeper", t0)
}

const ARN: &str = "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions";

#[tokio::test(start_paused = true)]
async fn a_table_named_by_name_in_one_region_and_by_arn_in_another_has_one_lease() {
    let t0 = Instant::now();
    let now = 1_800_000_000;
    let east_store = MemStore::new(Layout::default()).starting_at(now);
    let west_store = east_store.sharing(Layout::default());
    let east = east_sweeper(&east_store, t0);
    let west = region_sweeper(
        west_store.clone(),
        &region_config(ARN, 30, &[]),
        "eu-west-1/sweeper",
        t0,
    );
    for round in 0..5 {
        east_store.put_n(&format!("old-{round}-"), 10, |i| now - 5 - i);
        let at = Timestamp::from_secs(now) + t0.elapsed();
        let e = east.sweep(at, &Stop::never()).await;
        let w = west.sweep(at, &Stop::never()).await;
        assert_eq!(
            e.stood_by, 0,
            "round {round}: east took the lease first: {e:?}"
        );
        assert_eq!(
            w.stood_by, 1,
            "round {round}: west swept beside east: {w:?}"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(west_store.calls(Op::Query), 0, "west read the table");
    assert_eq!(west_store.calls(Op::BatchDelete), 0, "west deleted");
    assert_eq!(
        east_store.deleted.load(std::sync::atomic::Ordering::SeqCst),
        50
    );
    assert_eq!(east_store.lease().unwrap().holder, "us-east-1/sweeper");
}

/// A sweep at `at` by each of the sweepers of `sessions` over `store` in `region`, one per shard
/// range of `ranges` (4 shards per window; `all` for one sweeper of every shard), each its own
/// holder ([`region_sweeper`]), in turn: each range with its sweep's report.
async fn split_sweeps<'r>(
    store: &MemStore,
    region: &str,
    ranges: &[&'r str],
    t0: Instant,
    at: Timestamp,
) -> Vec<(&'r str, SweepReport)> {
    let (sharded, mut reports) = (("WINDOW_SHARDS", "4"), Vec::new());
    for (i, range) in ranges.iter().enumerate() {
        let config = region_config("sessions", 30, &[sharded, ("SHARD_RANGE", range)]);
        let holder = format!("{region}/sweeper-{i}");
        let sweeper = region_sweeper(store.sharing(store.schema().layout), &config, &holder, t0);
        reports.push((*range, sweeper.sweep(at, &Stop::never()).await));
    }
    reports
}

#[tokio::test(start_paused = true)]
async fn regions_that_split_the_shards_otherwise_do_not_sweep_side_by_side() {
    let now = 1_800_000_000;
    let sharded = Layout {
        window_shards: 4,
        ..Layout::default()
    };
    // (the first Region's split, the second's, whether the second says LeaseLayoutMismatch):
    // whichever sweeps first, the other does not sweep beside it. A sweeper of every shard and
    // one of a range tell each other apart; two splits into ranges do not (either may be the
    // other's sibling), but neither sweeps beside the other.
    let cases: [(&[&str], &[&str], u32); 3] = [
        (&["0-1", "2-3"], &["all"], 1),
        (&["all"], &["0-1", "2-3"], 1),
        (&["0-0", "1-3"], &["0-1", "2-3"], 0),
    ];
    for (first, second, mismatch) in cases {
        let t0 = Instant::now();
        let store = MemStore::new(sharded.clone())
            .starting_at(now)
            .any_partition();
        let at = Timestamp::from_secs(now);
        for (range, r) in split_sweeps(&store, "us-east-1", first, t0, at).await {
            assert_eq!(
                r.stood_by, 0,
                "{first:?}: {range} swept beside its own Region's split: {r:?}"
            );
        }
        store.put_n("old-", 10, |i| now - 5 - i);
        for (range, r) in split_sweeps(&store, "eu-west-1", second, t0, at).await {
            assert_eq!(
                r.stood_by, 1,
                "{second:?}: {range} swept beside another Region split {first:?}: {r:?}"
            );
            assert_eq!(
                r.lease_layout_mismatch, mismatch,
                "{second:?}: {range}: {r:?}"
            );
        }
        assert_eq!(store.ids().len(), 10, "{first:?} / {second:?}");
    }
    // The same split in both Regions: one Region's ranges lead side by side, the other's stand
    // by, with no mismatch.
    let t0 = Instant::now();
    let store = MemStore::new(sharded).starting_at(now).any_partition();
    let at = Timestamp::from_secs(now);
    for (_, r) in split_sweeps(&store, "us-east-1", &["0-1", "2-3"], t0, at).await {
        assert_eq!(r.stood_by, 0, "{r:?}");
    }
    for (_, r) in split_sweeps(&store, "eu-west-1", &["0-1", "2-3"], t0, at).await {
        assert_eq!((r.stood_by, r.lease_layout_mismatch), (1, 0), "{r:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_sweeper_of_another_layout_does_not_sweep_beside_the_holder() {
    let t0 = Instant::now();
    let now = 1_800_000_000;
    // Queries list every expired item whatever partition they ask for: a sweeper of either layout
    // that swept would find them.
    let east_store = MemStore::new(Layout::default())
        .starting_at(now)
        .any_partition();
    let wide = Layout {
        window_seconds: 300,
        ..Layout::default()
    };
    let west_store = east_store.sharing(wide);
    let east = east_sweeper(&east_store, t0);
    let west_config = region_config(ARN, 30, &[("WINDOW_SECONDS", "300")]);
    let west = region_sweeper(west_store.clone(), &west_config, "eu-west-1/sweeper", t0);
    let at = Timestamp::from_secs(now);
    let e = east.sweep(at, &Stop::never()).await;
    assert_eq!(e.stood_by, 0, "{e:?}");
    east_store.put_n("old-", 10, |i| now - 5 - i);
    let w = west.sweep(at, &Stop::never()).await;
    assert_eq!(
        w.stood_by, 1,
        "west swept beside a holder of another layout: {w:?}"
    );
    assert_eq!(w.lease_layout_mismatch, 1, "{w:?}");
    // Said at every sweep while it lasts, from the lease read last.
    tokio::time::advance(Duration::from_secs(1)).await;
    let w = west.sweep(at, &Stop::never()).await;
    assert_eq!((w.stood_by, w.lease_layout_mismatch), (1, 1), "{w:?}");
    assert_eq!(west_store.calls(Op::Query), 0, "west read the table");
    assert_eq!(east_store.ids().len(), 10, "west deleted");
    assert_eq!(east_store.lease().unwrap().holder, "us-east-1/sweeper");

    // East stops; once its lease lapsed, west takes it over (warning) and sweeps.
    tokio::time::advance(Duration::from_secs(31)).await;
    let at = Timestamp::from_secs(now) + t0.elapsed();
    let w = west.sweep(at, &Stop::never()).await;
    assert_eq!((w.stood_by, w.lease_layout_mismatch), (0, 0), "{w:?}");
    assert!(east_store.ids().is_empty(), "{:?}", east_store.ids());
    let lease = east_store.lease().unwrap();
    assert_eq!(lease.holder, "eu-west-1/sweeper");
    assert_eq!(lease.layout, Some(west_config.lease_layout()));
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_cannot_sweep_gives_the_lease_up_and_a_healthy_region_takes_it() {
    let t0 = Instant::now();
    let now = 1_800_000_000;
    let lease_s = 10;
    let west_store = MemStore::new(Layout::default()).starting_at(now);
    // East's endpoint answers every query and delete with an error; its lease calls work.
    let fail = MemFault::Fail(ttl_sweeper::store::ErrorKind::Transient);
    let east_store = west_store
        .sharing(Layout::default())
        .fault(Op::Query, When::Always, fail)
        .fault(Op::BatchDelete, When::Always, fail);
    let [east, west] = regions(&east_store, &west_store, lease_s, t0);
    west_store.put_n("old-", 20, |i| now - 5 - i);
    west_store.put_n("live-", 5, |_| now + 3600);
    // Both sweep every second, east first, for four leases.
    let (mut east_led, mut released_at, mut west_led_at) = (vec![], vec![], None);
    while t0.elapsed() < Duration::from_secs(4 * lease_s) {
        let at = Timestamp::from_secs(now) + t0.elapsed();
        let e = east.sweep(at, &Stop::never()).await;
        if e.stood_by == 0 {
            east_led.push(t0.elapsed());
            assert!(!e.is_success(), "east's sweeps fail: {e:?}");
        }
        if e.lease_released > 0 {
            released_at.push(t0.elapsed());
            let lease = east_store.lease().unwrap();
            assert!(lease.released, "{lease:?}");
            assert_eq!(lease.holder, "us-east-1/sweeper");
        }
        let w = west.sweep(at, &Stop::never()).await;
        if w.stood_by == 0 && west_led_at.is_none() {
            west_led_at = Some(t0.elapsed());
        }
        tokio::time::sleep_until(t0 + Duration::from_secs(t0.elapsed().as_secs() + 1)).await;
    }
    let led = west_led_at.expect("west never took the lease from the failing holder");
    let lease = Duration::from_secs(lease_s);
    eprintln!(
        "east led at {east_led:?}, gave the lease up at {released_at:?}; west led from {led:?}"
    );
    // East took it at once and gives it up a lease after (no sweep of its own was ever sound),
    // once; west takes it when what east was granted lapses, within a lease of that.
    assert_eq!(east_led.first(), Some(&Duration::ZERO));
    assert_eq!(
        released_at,
        vec![lease],
        "given up once, a lease after it was taken"
    );
    assert!(
        east_led.iter().all(|at| *at < lease),
        "east led after it gave up: {east_led:?}"
    );
    assert!(
        led > lease && led <= 2 * lease + Duration::from_secs(1),
        "west led from {led:?}"
    );
    let held = west_store.lease().unwrap();
    assert_eq!(
        (held.holder.as_str(), held.released),
        ("eu-west-1/sweeper", false)
    );
    // Everything expired deleted, by west; nothing live.
    assert_eq!(west_store.ids(), names("live", 5));
    assert_eq!(
        east_store.calls(Op::BatchDelete) + east_store.calls(Op::Delete),
        0
    );
}

#[tokio::test(start_paused = true)]
async fn a_lease_given_up_is_not_renewed_by_another_invocation_of_the_same_deployment() {
    let t0 = Instant::now();
    let store = MemStore::new(Layout::default());
    // Two execution environments of one function: one holder name.
    let first = leased(lease_config("us-east-1/sweeper", 10), bounds(t0, 0, 0));
    let second = leased(lease_config("us-east-1/sweeper", 10), bounds(t0, 0, 0));
    // The first's sweeps fail; the second's, later, do not, and it renews.
    let deleting = |deletes| SweepHealth {
        reads: Some(true),
        deletes: Some(deletes),
    };
    assert!(first.check(&store, &Stop::never()).await.is_ok());
    first.swept(deleting(false)).await;
    assert!(second.check(&store, &Stop::never()).await.is_ok());
    tokio::time::advance(Duration::from_secs(4)).await;
    assert!(second.check(&store, &Stop::never()).await.is_ok());
    second.swept(deleting(true)).await;
    let renewed = store.lease().unwrap().expires_at;
    tokio::time::advance(Duration::from_secs(6)).await;
    let given_up = first.check(&store, &Stop::never()).await.unwrap_err();
    assert!(
        given_up.released && given_up.error.is_none(),
        "{given_up:?}"
    );
    let item = store.lease().unwrap();
    assert!(item.released, "{item:?}");
    assert_eq!(item.expires_at, renewed, "its expiry stays as written");
    // The second's renewal is refused; it stands by, and so does the first, past the lapse.
    let renewal = second.check(&store, &Stop::never()).await;
    assert!(renewal.is_err(), "renewed a lease given up");
    assert_eq!(store.lease().unwrap(), item);
    tokio::time::advance(Duration::from_secs(10)).await;
    assert!(first.check(&store, &Stop::never()).await.is_err());
    assert!(second.check(&store, &Stop::never()).await.is_err());
    // Another Region takes it once it lapsed.
    let west = leased(lease_config("eu-west-1/sweeper", 10), bounds(t0, 0, 0));
    assert!(west.check(&store, &Stop::never()).await.is_ok());
    let taken = store.lease().unwrap();
    assert_eq!(
        (taken.holder.as_str(), taken.released),
        ("eu-west-1/sweeper", false)
    );
}

/// Two `ttl-sweeper run` processes for two Regions, as in the SIGKILL test; the holder's proxy
/// refuses every delete (`AccessDeniedException`): it gives the lease up a lease after its first
/// refused delete, and the standby takes it within the lease (and a tick) of that and deletes
/// everything expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_deletes_are_refused_gives_the_lease_up_and_the_standby_deletes() {
    let (client, table) = simple_table("leasegive").await;
    let checkpoint = checkpoint_table(&client, "leasegivecp").await;
    let refuse = Fault::Reply(
        400,
        "AccessDeniedException",
        "not authorized to perform dynamodb:BatchWriteItem (injected by the test)",
    );
    let (east, west) = Region::pair(&table, &checkpoint, Some(refuse)).await;

    // Two items expire every second for 10 s, from 2 s on; twenty live for an hour.
    let start = now();
    let expiring = names("due", 20);
    let mut items = sessions("due", 20, |i| start + 2 + i / 2);
    items.extend(sessions("live", 20, |i| start + 3600 + i));
    put_items(&client, &table, items).await;

    let left = left_after(&client, &table, &expiring, Duration::from_secs(40)).await;
    let east_log = east.daemon.log_text();
    let west_log = west.daemon.log_text();
    assert!(
        left.is_empty(),
        "expired items left: {left:?}\n{east_log}\n{west_log}"
    );
    let present = id_set(&client, &table).await;
    assert!(
        (0..20).all(|i| present.contains(&format!("live-{i}"))),
        "a live item was deleted"
    );

    let released = east.releases.lock().unwrap().clone();
    let [released] = released[..] else {
        panic!(
            "east gave the lease up {} times: {east_log}",
            released.len()
        );
    };
    assert!(east_log.contains("LeaseReleased"), "{east_log}");
    assert!(
        west_log.contains("took the lease from us-east-1/"),
        "{west_log}"
    );
    let east_deletes = east.deletes();
    let first_refused = east.first_delete().expect("east sent deletes (refused)");
    let took = west.lease_writes(|at| *at > released).into_iter().min();
    let took = took.expect("west wrote the lease");
    let west_deletes = west.deletes();
    let first_west = west
        .first_delete()
        .expect("west deleted after the takeover");
    eprintln!(
        "east's first delete was refused; it gave the lease up {:.2} s later; west wrote the \
         lease {:.2} s after that and sent its first delete {:.2} s after it (LEADER_LEASE=6, \
         ticks of 1 s); east sent {} delete requests (all refused), west {}",
        (released - first_refused).as_secs_f64(),
        (took - released).as_secs_f64(),
        (first_west - released).as_secs_f64(),
        east_deletes.len(),
        west_deletes.len()
    );
    // Given up at east's first check a lease after its first refused delete: within the lease
    // and a tick (and two seconds' allowance for a loaded machine).
    assert!(
        released - first_refused < Duration::from_secs(6 + 1 + 2),
        "{:?}",
        released - first_refused
    );
    // Taken once what east was granted lapsed: within the lease and a tick of the release (and
    // a second's allowance).
    let within = Duration::from_secs(6 + 1 + 1);
    assert!(took - released < within, "{:?}", took - released);
    assert!(
        first_west - released < within,
        "{:?}",
        first_west - released
    );
    // West sent nothing while east held the lease, and east took it back no more.
    assert!(first_west > released);
    let east_after = east.lease_writes(|at| *at > released).len();
    assert_eq!(east_after, 0, "east wrote the lease after giving it up");
}

/// On DynamoDB Local, the lease item's attributes as `DynamoStore` reads and writes them: an item
/// written before items recorded a layout is read as of an unknown layout (no mismatch); a lease
/// given up keeps its expiry and is not renewed by its holder, only taken once it lapsed, which
/// clears the mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_item_without_a_layout_is_read_and_a_given_up_one_is_only_taken_once_lapsed() {
    use ttl_sweeper::store::Store;
    let client = client().await;
    let checkpoint = checkpoint_table(&client, "leaseattrs").await;
    let id = "sessions#leader";
    let expires_ms = (now() + 60) * 1000;
    let mut item = id_key(id);
    item.insert("holder".into(), AV::S("eu-west-1/old".into()));
    item.insert("expiresAt".into(), num(expires_ms));
    put_one(&client, &checkpoint, item).await;
    let store = store(client.clone());
    let read = || store.read_lease(&checkpoint, id);
    let old = read().await.unwrap().unwrap();
    let expires_at = Timestamp::from_millis(expires_ms);
    assert_eq!(old, held("eu-west-1/old", expires_at));
    // A sweeper of any layout stands by beside it without a mismatch.
    let lease = Lease::new(
        LeaseConfig {
            table: checkpoint.clone(),
            id: id.into(),
            ..lease_config("us-east-1/new", 30)
        },
        store.server_clock().clone(),
        Arc::new(clock),
    );
    let check = lease.check(&store, &Stop::never()).await.unwrap_err();
    assert!(!check.layout_mismatch && check.error.is_none(), "{check:?}");

    // Given up by its holder (another's give-up is refused): marked, its expiry unchanged.
    let release = |holder| store.release_lease(&checkpoint, id, holder);
    assert!(!release("us-east-1/new").await.unwrap());
    assert!(release("eu-west-1/old").await.unwrap());
    let given_up = read().await.unwrap().unwrap();
    assert!(
        given_up.released && given_up.expires_at == expires_at,
        "{given_up:?}"
    );
    // Its holder cannot renew it; nobody takes it before it lapsed; once lapsed, it is taken and
    // the mark is gone.
    let write = |holder: &str, lapsed_before: Timestamp| {
        let item = LeaseItem {
            holder: holder.into(),
            expires_at: expires_at + Duration::from_secs(30),
            layout: Some("index=i ttl=ttl window=w width=60s shards=1 range=all".into()),
            released: false,
        };
        let (store, checkpoint) = (store.clone(), checkpoint.clone());
        async move {
            store
                .write_lease(&checkpoint, id, &item, lapsed_before)
                .await
        }
    };
    let before = expires_at - Duration::from_secs(1);
    assert!(
        !write("eu-west-1/old", before).await.unwrap(),
        "renewed a lease given up"
    );
    assert!(!write("us-east-1/new", before).await.unwrap());
    assert_eq!(read().await.unwrap().unwrap(), given_up);
    let after = expires_at + Duration::from_millis(1);
    assert!(write("us-east-1/new", after).await.unwrap());
    let taken = read().await.unwrap().unwrap();
    assert_eq!(taken.holder, "us-east-1/new");
    assert!(!taken.released, "{taken:?}");
    assert!(taken.layout.is_some());
    // The new holder renews it, its layout recorded.
    assert!(write("us-east-1/new", before).await.unwrap());
}

/// A stand-in for a Region's stream follower (`run --follow-stream`): every 250 ms it reports
/// its stream read to the end, until `stalls` after it begins, when it is held at a record it
/// cannot index: from then on it reports that record's age.
#[derive(Clone)]
struct Indexing {
    stalls: Option<Duration>,
}

impl daemon::Follow<MemStore> for Indexing {
    type Follower = ();

    async fn open(&self, _: &Sweeper<MemStore>) -> Result<(), FollowError> {
        Ok(())
    }

    async fn follow(
        &self,
        (): &(),
        _: &Sweeper<MemStore>,
        _: &dyn Clock,
        stop: &Stop,
        progress: &dyn Fn(&FollowReport),
    ) -> FollowReport {
        let begun = Instant::now();
        let stalls_at = self.stalls.map(|after| begun + after);
        while !stop.token().is_cancelled() {
            let now = Instant::now();
            let behind = stalls_at.map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
            progress(&FollowReport {
                record_age_ms: behind.as_millis() as u64,
                ..FollowReport::default()
            });
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(250)) => {}
                () = stop.token().cancelled() => {}
            }
        }
        FollowReport::default()
    }
}

/// Daemon options with ticks every second, periods of 5 s and `follow` as the Region's follower.
fn daemon_options(follow: Indexing) -> daemon::Options<Indexing> {
    daemon::Options {
        every: Duration::from_secs(1),
        period: Duration::from_secs(5),
        namespace: "LeaseTest".into(),
        endpoint: None,
        follow: Some(follow),
        emf: Mutex::new(Box::new(std::io::sink())),
    }
}

#[tokio::test(start_paused = true)]
async fn a_daemon_whose_stream_indexer_stalls_gives_the_lease_up_to_a_region_whose_index_is_current(
) {
    let t0 = Instant::now();
    let now = 1_800_000_000;
    let lease_s = 6;
    let lease = Duration::from_secs(lease_s);
    let west_store = MemStore::new(Layout::default()).starting_at(now);
    let east_store = west_store.sharing(Layout::default());
    let [east, west] = regions(&east_store, &west_store, lease_s, t0);
    let (east, west) = ([Table::ready(east)], [Table::ready(west)]);
    let clock = move || Timestamp::from_secs(now) + t0.elapsed();
    // East's indexer stalls 10 s in; west's stays current. East starts first.
    let stalls = Duration::from_secs(10);
    let east_options = daemon_options(Indexing {
        stalls: Some(stalls),
    });
    let west_options = daemon_options(Indexing { stalls: None });
    let end = t0 + stalls + 4 * lease;
    let holders = Arc::new(Mutex::new(Vec::new()));
    let script = {
        let (store, holders) = (west_store.clone(), holders.clone());
        async move {
            while Instant::now() < end {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let holder = store.lease().map(|l| (l.holder, l.released));
                holders.lock().unwrap().push((t0.elapsed(), holder));
            }
        }
    };
    let west_late = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        daemon::run(&west, &clock, west_options, sleep_until(end)).await
    };
    let (e, w, ()) = tokio::join!(
        daemon::run(&east, &clock, east_options, sleep_until(end)),
        west_late,
        script
    );
    let (e, w) = (&e.unwrap()[0], &w.unwrap()[0]);
    let holders = holders.lock().unwrap().clone();
    let held_by = |at: Duration| {
        holders
            .iter()
            .rev()
            .find(|(when, _)| *when <= at)
            .and_then(|(_, h)| h.clone())
    };
    // East held it while its index was current, and for a lease after it stalled.
    let east_holds = Some(("us-east-1/sweeper".to_owned(), false));
    assert_eq!(held_by(stalls), east_holds, "{holders:?}");
    assert_eq!(held_by(stalls + lease - Duration::from_secs(1)), east_holds);
    // Then gave it up, and west took it within about two leases of the stall.
    let west_holds = Some(("eu-west-1/sweeper".to_owned(), false));
    let taken = holders
        .iter()
        .find(|(_, h)| *h == west_holds)
        .map(|(at, _)| *at);
    let taken = taken.unwrap_or_else(|| panic!("west never took the lease: {holders:?}"));
    assert!(
        taken > stalls + lease && taken <= stalls + 2 * lease + Duration::from_secs(2),
        "west took it at {taken:?}: {holders:?}"
    );
    assert_eq!(held_by(end - t0), west_holds, "{holders:?}");
    assert_eq!(e.lease_released, 1, "{e:?}");
    assert!(w.stood_by > 0 && w.ticks > w.stood_by, "{w:?}");
}

#[tokio::test(start_paused = true)]
async fn a_standby_whose_index_lags_leaves_a_lapsed_lease_to_the_others_for_a_lease_more() {
    let t0 = Instant::now();
    let lease = Duration::from_secs(10);
    // A new store whose lease east takes, and west, its indexer watched from `watched`.
    let east_took = async |watched| {
        let store = MemStore::new(Layout::default());
        let [east, west] =
            ["us-east-1/a", "eu-west-1/b"].map(|r| leased(lease_config(r, 10), bounds(t0, 0, 0)));
        west.index().watch(watched);
        east.check(&store, &Stop::never())
            .await
            .expect("east took it");
        (store, west)
    };
    // West's indexer was watched from the start and has not reported since: behind by then.
    let (store, west) = east_took(t0).await;
    let expires = store.lease().unwrap().expires_at;
    let lapses = t0
        + Duration::from_millis(expires.millis_since(Timestamp::from_secs(1_800_000_000)) as u64);
    // East stops. West, checking every second, leaves it for a lease past its lapse.
    let took = first_success(t0 + 4 * lease, async |_| {
        west.check(&store, &Stop::never()).await.is_ok()
    });
    let took = took.await.expect("west never took it");
    assert_left_a_lease_more(took, lapses, lease, "with its index behind");
    assert_eq!(store.lease().unwrap().holder, "eu-west-1/b");

    // With its index current, a standby takes a lapsed lease at once.
    let t1 = Instant::now();
    let (store, west) = east_took(t1).await;
    let took = first_success(t1 + 4 * lease, async |started| {
        west.index().indexed(started, Duration::ZERO);
        west.check(&store, &Stop::never()).await.is_ok()
    });
    let took = took.await.expect("west never took it") - t1;
    assert!(
        took > lease && took <= lease + Duration::from_secs(1),
        "{took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_range_that_gave_its_split_s_lease_up_takes_it_again_once_lapsed_and_leads() {
    let t0 = Instant::now();
    let lease_s = 10;
    let store = MemStore::new(Layout {
        window_shards: 4,
        ..Layout::default()
    });
    let more = [("WINDOW_SHARDS", "4"), ("SHARD_RANGE", "0-1")];
    let config = region_config("sessions", lease_s, &more);
    let lease = leased(
        config.lease("us-east-1/a".into()).unwrap(),
        bounds(t0, 0, 0),
    );
    let (fail, work) = (Some(false), Some(true));
    let (mut released, mut led) = (vec![], vec![]);
    // Its reads fail for the first lease and a half, then work.
    while t0.elapsed() < Duration::from_secs(5 * lease_s) {
        let started = Instant::now();
        match lease.check(&store, &Stop::never()).await {
            Ok(_) => {
                led.push(t0.elapsed().as_secs());
                let reads = if t0.elapsed().as_secs() < 15 {
                    fail
                } else {
                    work
                };
                lease
                    .swept(SweepHealth {
                        reads,
                        deletes: None,
                    })
                    .await;
            }
            Err(not) if not.released => released.push(t0.elapsed().as_secs()),
            Err(_) => {}
        }
        tokio::time::sleep_until(started + Duration::from_secs(1)).await;
    }
    assert_eq!(
        released,
        [lease_s],
        "given up once, a lease after its first failure"
    );
    let again = led.iter().find(|at| **at > lease_s).copied();
    let again = again.unwrap_or_else(|| panic!("never led again: {led:?}"));
    // Its hold ran out before the lapse; then a lease more.
    assert!(again > 2 * lease_s && again <= 3 * lease_s, "{led:?}");
    let after: Vec<_> = led.iter().filter(|at| **at >= again).collect();
    assert_eq!(
        after.len() as u64,
        5 * lease_s - again,
        "led at every check once it took it again: {led:?}"
    );
}

// ------------------------------------------------------ the Lambda's stream indexer's reports

/// One execution environment of a Region's Lambda stream indexer, fed by an event source mapping
/// of one shard: each batch is every record not yet indexed and a new one, written now; a batch
/// that fails names its first record, which is delivered again with the rest.
struct LambdaIndexer {
    reporter: Reporter,
    store: MemStore,
    time: Arc<Bounds>,
    unindexed: Vec<EventRecord>,
    sequence: u64,
}

impl LambdaIndexer {
    fn new(environment: &str, store: &MemStore, time: &Arc<Bounds>) -> Self {
        LambdaIndexer {
            reporter: Reporter::new(environment.into()),
            store: store.clone(),
            time: time.clone(),
            unindexed: Vec::new(),
            sequence: 0,
        }
    }

    /// A record written now comes, and the batch from the first unindexed record is indexed
    /// (`fails`: not; its first record is named to be delivered again).
    async fn batch(&mut self, fails: bool) {
        self.sequence += 1;
        let now = self.time.true_time();
        self.unindexed.push(
            serde_json::from_value(serde_json::json!({
                "eventID": format!("e{}", self.sequence), "eventName": "INSERT",
                "awsRegion": "us-east-1", "eventSource": "aws:dynamodb",
                "dynamodb": {
                    "ApproximateCreationDateTime": now.as_secs_f64(),
                    "Keys": {"id": {"S": format!("i{}", self.sequence)}},
                    "SequenceNumber": format!("{:021}", self.sequence),
                    "SizeBytes": 10, "StreamViewType": "NEW_IMAGE"
                }
            }))
            .unwrap(),
        );
        let indexed = Indexed {
            failures: (self.unindexed.iter())
                .take(usize::from(fails))
                .filter_map(|r| r.change.sequence_number.clone())
                .collect(),
            ..Indexed::default()
        };
        let table = ("sessions", "sessions-expiry-index");
        (self.reporter)
            .report(&self.store, table, &self.unindexed, &indexed, now)
            .await;
        if !fails {
            self.unindexed.clear();
        }
    }
}

/// A lease of `config` judged by `time` that counts its Region's stream indexer's reports.
fn leased_with_reports(config: LeaseConfig, time: Arc<Bounds>) -> Lease {
    leased(config, time).with_reports_in(Some("sessions-expiry-index".into()))
}

/// Tries `attempt` every second (from each try's start, which it is given) until it succeeds or
/// `until` comes: when it succeeded.
async fn first_success(
    until: Instant,
    mut attempt: impl AsyncFnMut(Instant) -> bool,
) -> Option<Instant> {
    while Instant::now() < until {
        let started = Instant::now();
        if attempt(started).await {
            return Some(Instant::now());
        }
        sleep_until(started + Duration::from_secs(1)).await;
    }
    None
}

/// Two Regions' stores sharing the one lease item, each with the expiry index table's reports
/// of its own, and the lease of each: us-east-1's first, then eu-west-1's (10 s leases).
fn two_regions_with_reports(time: &Arc<Bounds>) -> ((MemStore, Lease), (MemStore, Lease)) {
    let east_store = MemStore::new(Layout::default());
    let west_store = east_store.sharing(Layout::default());
    let east = leased_with_reports(lease_config("us-east-1/a", 10), time.clone());
    let west = leased_with_reports(lease_config("eu-west-1/b", 10), time.clone());
    ((east_store, east), (west_store, west))
}

#[tokio::test(start_paused = true)]
async fn a_holder_whose_lambda_stream_batches_have_failed_for_a_lease_gives_it_up_to_a_current_region(
) {
    let t0 = Instant::now();
    let lease = Duration::from_secs(10);
    let time = bounds(t0, 0, 0);
    // One lease item; each Region's expiry index table (and its reports) its own.
    let ((east_store, east), (west_store, west)) = two_regions_with_reports(&time);
    let mut east_indexer = LambdaIndexer::new("east-env", &east_store, &time);
    let mut west_indexer = LambdaIndexer::new("west-env", &west_store, &time);
    let fails_from = Duration::from_secs(5);
    let (mut east_led, mut west_led, mut released) = (vec![], vec![], vec![]);
    while t0.elapsed() < 6 * lease {
        let started = Instant::now();
        let at = t0.elapsed();
        east_indexer.batch(at >= fails_from).await;
        west_indexer.batch(false).await;
        match east.check(&east_store, &Stop::never()).await {
            Ok(_) => east_led.push(at),
            Err(not) if not.released => released.push(at),
            Err(_) => {}
        }
        if west.check(&west_store, &Stop::never()).await.is_ok() {
            west_led.push(at);
        }
        sleep_until(started + Duration::from_secs(1)).await;
    }
    assert_eq!(
        east_led.first(),
        Some(&Duration::ZERO),
        "east took it first"
    );
    assert_eq!(
        released,
        [fails_from + lease],
        "east gives the lease up once its batches have failed for a lease: led {east_led:?}"
    );
    assert!(
        east_led.iter().all(|at| *at < fails_from + lease),
        "{east_led:?}"
    );
    let took = *west_led.first().expect("west never took the lease");
    assert!(
        took > fails_from + lease && took <= fails_from + 2 * lease + Duration::from_secs(2),
        "west took it {took:?}"
    );
    assert_eq!(east_store.lease().unwrap().holder, "eu-west-1/b");
    assert!(east_store.calls(Op::ReadReports) > 0 && west_store.calls(Op::ReadReports) > 0);
}

#[tokio::test(start_paused = true)]
async fn a_standby_whose_own_lambda_stream_indexer_fails_leaves_a_lapsed_lease_to_the_others() {
    let t0 = Instant::now();
    let lease = Duration::from_secs(10);
    let time = bounds(t0, 0, 0);
    let ((east_store, east), (west_store, west)) = two_regions_with_reports(&time);
    let mut west_indexer = LambdaIndexer::new("west-env", &west_store, &time);
    east.check(&east_store, &Stop::never())
        .await
        .expect("east took it");
    let expires = east_store.lease().unwrap().expires_at;
    let lapses = t0 + Duration::from_millis(expires.millis_since(time.base) as u64);
    // East stops. West's batches keep failing; it checks every second.
    let took = first_success(t0 + 4 * lease, async |_| {
        west_indexer.batch(true).await;
        west.check(&west_store, &Stop::never()).await.is_ok()
    });
    let took = took.await.expect("west never took it");
    assert_left_a_lease_more(took, lapses, lease, "with its own stream batches failing");
    assert_eq!(east_store.lease().unwrap().holder, "eu-west-1/b");
}

#[tokio::test(start_paused = true)]
async fn without_stream_traffic_or_with_only_old_reports_a_region_s_index_is_current() {
    let lease = Duration::from_secs(10);
    // (what west's index table holds): nothing; an environment's report of batches indexed an
    // hour ago; a record that failed but has not failed for longer than REPORT_FRESH (indexed
    // by another environment since, or passed by the mapping).
    for case in ["no reports", "indexed long ago", "failed long ago"] {
        let t0 = Instant::now();
        let time = bounds(t0, 0, 0);
        let ((east_store, east), (west_store, west)) = two_regions_with_reports(&time);
        let now = time.true_time();
        let hour_ago = now - Duration::from_secs(3600);
        let report = |failing| IndexerReport {
            environment: "west-env".into(),
            failing,
            indexed_through: Some(hour_ago),
            written_at: hour_ago,
        };
        let reports = west_store.reports.clone();
        let write = |r: IndexerReport| reports.lock().unwrap().insert(r.environment.clone(), r);
        match case {
            "indexed long ago" => _ = write(report(vec![])),
            "failed long ago" => {
                let at = now - REPORT_FRESH - Duration::from_secs(1);
                let since = at - Duration::from_secs(600);
                let failing = FailingRecord {
                    sequence: "7".into(),
                    since,
                    at,
                };
                _ = write(report(vec![failing]))
            }
            _ => {}
        }
        east.check(&east_store, &Stop::never())
            .await
            .expect("east took it");
        // East stops: west takes the lapsed lease at once, then holds it for leases on end.
        let mut led = vec![];
        while t0.elapsed() < 6 * lease {
            let started = Instant::now();
            match west.check(&west_store, &Stop::never()).await {
                Ok(_) => led.push(t0.elapsed().as_secs()),
                Err(not) => assert!(!not.released, "{case}: gave it up at {:?}", t0.elapsed()),
            }
            sleep_until(started + Duration::from_secs(1)).await;
        }
        assert!(
            led.first().is_some_and(|at| *at <= 11),
            "{case}: took it at {:?} (lapsing at 10 s)",
            led.first()
        );
        assert_eq!(led.len(), 60 - led[0] as usize, "{case}: {led:?}");
        assert!(west_store.calls(Op::ReadReports) > 0, "{case}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_indexer_writes_its_report_at_each_change_and_at_most_every_ten_seconds_else() {
    let t0 = Instant::now();
    let time = bounds(t0, 0, 0);
    let store = MemStore::new(Layout::default()).fault(
        Op::WriteReport,
        When::Call(4),
        MemFault::Fail(ErrorKind::Throttled),
    );
    let mut indexer = LambdaIndexer::new("env", &store, &time);
    let writes = || store.calls(Op::WriteReport);
    let reported = || store.reports.lock().unwrap()["env"].clone();
    // A busy table: a batch every 100 ms for 20 s, all indexed: the first batch's report and
    // one 10 s on.
    let batches_every = Duration::from_millis(100);
    while t0.elapsed() < Duration::from_secs(20) {
        indexer.batch(false).await;
        tokio::time::sleep(batches_every).await;
    }
    assert_eq!(writes(), 2, "200 batches");
    assert!(reported().failing.is_empty());
    // A batch fails: written at once, the record failing since its creation.
    let failed_at = time.true_time();
    indexer.batch(true).await;
    assert_eq!(writes(), 3);
    let failing = reported().failing;
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert_eq!(failing[0].since.millis() / 1000, failed_at.millis() / 1000);
    // It keeps failing, delivered again every 100 ms: refreshed 10 s on, not before.
    for _ in 0..99 {
        tokio::time::sleep(batches_every).await;
        indexer.batch(true).await;
    }
    assert_eq!(writes(), 3);
    tokio::time::sleep(batches_every).await;
    indexer.batch(true).await;
    assert_eq!(writes(), 4, "the refresh, 10 s on");
    assert_eq!(
        reported().failing,
        failing,
        "that write was refused (throttled)"
    );
    // So the next batch writes it.
    tokio::time::sleep(batches_every).await;
    indexer.batch(true).await;
    assert_eq!(writes(), 5);
    let refreshed = &reported().failing[0];
    assert_eq!(refreshed.since, failing[0].since);
    assert_eq!(refreshed.at, failed_at + Duration::from_millis(10_100));
    // Indexed: written at once, nothing failing.
    tokio::time::sleep(batches_every).await;
    indexer.batch(false).await;
    assert_eq!(writes(), 6);
    assert!(reported().failing.is_empty(), "{:?}", reported());
    assert!(reported().indexed_through.is_some_and(|t| t >= failed_at));
}

/// A standby whose index lags (`why`) took a lease that lapsed at `lapses` one lease later, not
/// at once, and within a second of that.
#[track_caller]
fn assert_left_a_lease_more(took: Instant, lapses: Instant, lease: Duration, why: &str) {
    let after = took - lapses;
    assert!(
        took > lapses + lease,
        "took it {after:?} after it lapsed, {why}"
    );
    assert!(took <= lapses + lease + Duration::from_secs(1), "{after:?}");
}
