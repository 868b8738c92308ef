//! The daemon's loop (`ttl_sweeper::daemon::run`, what `ttl-sweeper run` runs) on the in-memory
//! table and Tokio's paused clock, without a process: deterministic, and fast however many
//! periods a scenario lasts. The shutdown future each test passes in is its script: it waits,
//! looks at the tables, and returns when the daemon should stop.
//!
//! - a table that does not open is reported every period, opened again every period, and swept
//!   once it opens, while the others are swept from the start;
//! - ticks delete each item within a tick of its ttl; every period of a table ends with one EMF
//!   record, and the endpoint's counters and gauges follow;
//! - shutdown stops it within `SHUTDOWN_GRACE` however long a request (or an opening) hangs;
//! - a follower runs beside each table's ticks until shutdown, and one that cannot be opened
//!   stops the run and is its error.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use support::hook::Recorder;
use support::mem_store::{Fault, MemStore, Op, When};
use support::JsonLines;
use tokio::time::{sleep_until, Instant};

use ttl_sweeper::daemon::{self, Follow, Options};
use ttl_sweeper::engine::retry::SHUTDOWN_GRACE;
use ttl_sweeper::engine::tables::{Open, Table};
use ttl_sweeper::engine::{Stop, SweepOptions, Sweeper};
use ttl_sweeper::expiry::{Clock, Layout, Timestamp};
use ttl_sweeper::index::follow::{FollowError, FollowReport};
use ttl_sweeper::store::{ErrorKind, StoreError};

/// The virtual wall clock when each scenario starts, epoch seconds (a minute boundary).
const T0: i64 = 1_800_000_000;

/// Ticks.
const EVERY: Duration = Duration::from_secs(1);

/// Full sweeps, reports, and the retry of a table that did not open.
const PERIOD: Duration = Duration::from_secs(5);

type Store = MemStore;

/// An in-memory table whose clock reads `T0` now.
fn mem() -> Store {
    MemStore::new(Layout::default()).starting_at(T0)
}

/// A sweeper of `store` as the table `name`.
fn sweeper(store: &Store, name: &str) -> Sweeper<Store> {
    let mut schema = store.schema();
    schema.table_name = name.into();
    Sweeper::new(store.clone(), schema, SweepOptions::default())
}

/// The virtual wall clock: `T0` at the start of the test, moving with Tokio's clock.
fn clock() -> impl Clock {
    let start = Instant::now();
    move || Timestamp::from_secs(T0) + start.elapsed()
}

/// Options with ticks every [`EVERY`], periods of [`PERIOD`], no endpoint and `follow`, the EMF
/// records into `records`.
fn following<F>(records: &JsonLines, follow: Option<F>) -> Options<F> {
    Options {
        every: EVERY,
        period: PERIOD,
        namespace: "DaemonTest".into(),
        endpoint: None,
        follow,
        emf: Mutex::new(Box::new(records.clone())),
    }
}

/// [`following`] nothing.
fn options(records: &JsonLines) -> Options<Following> {
    following(records, None)
}

/// A table `name` that fails to open (`NotFound`, as a table not yet created) until its
/// `fails`th attempt has been made, then opens as a sweeper of `store`; each attempt's instant is
/// recorded in `attempts`.
fn opens_after(
    name: &str,
    store: &Store,
    fails: usize,
    attempts: &Arc<Mutex<Vec<Instant>>>,
) -> Table<Store> {
    let (name_for, store, attempts) = (name.to_owned(), store.clone(), attempts.clone());
    let open: Open<Store> = Box::new(move || {
        let mut made = attempts.lock().unwrap();
        made.push(Instant::now());
        let result = match made.len() > fails {
            true => Ok(sweeper(&store, &name_for)),
            false => Err(StoreError::new(
                ErrorKind::NotFound,
                "DescribeTable",
                "Requested resource not found",
            )),
        };
        Box::pin(async move { result })
    });
    Table::lazy(name, open, PERIOD)
}

#[tokio::test(start_paused = true)]
async fn a_table_that_does_not_open_is_reported_and_retried_every_period_then_swept() {
    let started = Instant::now();
    let (ready, late) = (mem(), mem());
    for (store, prefix) in [(&ready, "a"), (&late, "b")] {
        store.put_n(prefix, 5, |i| T0 - 30 + i);
    }
    // Due after the late table opens: the ticks delete it.
    late.put("b-later", (T0 + 17) as f64);
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let tables = vec![
        Table::ready(sweeper(&ready, "ready")),
        opens_after("late", &late, 3, &attempts),
    ];
    let records = JsonLines::default();
    let script = async {
        // The ready table is swept from the start; the late one is not.
        sleep_until(started + Duration::from_millis(500)).await;
        assert!(ready.ids().is_empty(), "{:?}", ready.ids());
        assert_eq!(late.ids().len(), 6);
        sleep_until(started + 3 * PERIOD + Duration::from_millis(500)).await;
        let expired_left: Vec<String> = late.ids().into_iter().filter(|i| i != "b-later").collect();
        assert!(expired_left.is_empty(), "swept once open: {expired_left:?}");
        assert!(late.has("b-later"), "not due yet");
        sleep_until(started + 4 * PERIOD).await;
    };
    let clock = clock();
    let reports = daemon::run(&tables, &clock, options(&records), script)
        .await
        .unwrap();

    // Opened at the start and again every period, until the fourth attempt opened it.
    let attempts = attempts.lock().unwrap().clone();
    let at: Vec<Duration> = attempts.iter().map(|a| *a - started).collect();
    assert_eq!(at, [0, 1, 2, 3].map(|n| n * PERIOD), "attempts at {at:?}");
    assert!(late.ids().is_empty(), "{:?}", late.ids());

    // One report per table, in the order given, each of the whole run.
    let names: Vec<&str> = reports.iter().map(|r| r.table.as_str()).collect();
    assert_eq!(names, ["ready", "late"]);
    let (ready_report, late_report) = (&reports[0], &reports[1]);
    assert_eq!(ready_report.items_deleted, 5, "{ready_report:?}");
    assert!(ready_report.is_success(), "{ready_report:?}");
    // Each failed attempt is one error of the late table's report, beside what it deleted.
    assert_eq!(late_report.items_deleted, 6, "{late_report:?}");
    assert_eq!(late_report.errors.len(), 3, "{late_report:?}");
    assert!(late_report.errors[0].message.contains("not found"));
    assert!(!late_report.is_success(), "its failures count");
}

#[tokio::test(start_paused = true)]
async fn ticks_delete_on_time_and_each_period_ends_with_one_emf_record_per_table() {
    let started = Instant::now();
    let store = mem();
    // One item due every 2.5 s from T0 + 1.5.
    let due: Vec<(String, f64)> = (0..8)
        .map(|i| (format!("k{i}"), T0 as f64 + 1.5 + 2.5 * i as f64))
        .collect();
    for (id, ttl) in &due {
        store.put(id, *ttl);
    }
    let tables = vec![Table::ready(sweeper(&store, "sessions"))];
    let records = JsonLines::default();
    let script = async {
        // Each item is gone by the tick after its ttl (ticks just after each second), and not
        // before its ttl.
        for (id, ttl) in &due {
            let since = Duration::from_secs_f64(ttl - T0 as f64);
            sleep_until(started + since - Duration::from_millis(10)).await;
            assert!(store.has(id), "{id} deleted before its ttl");
            sleep_until(started + since + EVERY).await;
            assert!(!store.has(id), "{id} still there a tick after its ttl");
        }
        sleep_until(started + 4 * PERIOD + Duration::from_millis(500)).await;
    };
    let clock = clock();
    let reports = daemon::run(&tables, &clock, options(&records), script)
        .await
        .unwrap();
    let report = &reports[0];
    assert_eq!(report.items_deleted, 8, "{report:?}");
    assert!(report.ticks >= 20, "a tick every second: {report:?}");

    // One record at the end of each of the four periods, for the table, in the namespace;
    // together they count every item the periods deleted.
    let records = records.lines();
    assert_eq!(records.len(), 4, "{records:#?}");
    for record in &records {
        assert_eq!(record["TableName"], "sessions", "{record}");
        let namespace = &record["_aws"]["CloudWatchMetrics"][0]["Namespace"];
        assert_eq!(namespace, "DaemonTest", "{record}");
    }
    let deleted: u64 = records
        .iter()
        .map(|r| r["ItemsDeleted"].as_u64().unwrap())
        .sum();
    assert_eq!(deleted, 8, "{records:#?}");
    // A record's time is the clock's at the end of its period, one period apart.
    let times: Vec<i64> = records
        .iter()
        .map(|r| r["_aws"]["Timestamp"].as_i64().unwrap())
        .collect();
    for pair in times.windows(2) {
        let apart = pair[1] - pair[0];
        assert!(
            (4_900..=6_100).contains(&apart),
            "records {apart} ms apart: {times:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_endpoint_counts_every_sweep_and_holds_each_period_in_its_gauges() {
    let store = mem();
    store.put_n("k", 7, |_| T0 - 10);
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let tables = vec![
        Table::ready(sweeper(&store, "sessions")),
        opens_after("missing", &mem(), usize::MAX, &attempts),
    ];
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let records = JsonLines::default();
    let options = Options {
        endpoint: Some(listener),
        ..options(&records)
    };
    let get = |path: &'static str| async move {
        let answer = tokio::task::spawn_blocking(move || support::http_get(port, path));
        answer.await.unwrap().expect("the endpoint answers")
    };
    let sample = |text: &str, name: &str, table: &str| -> Option<f64> {
        let prefix = format!("{name}{{table=\"{table}\"}} ");
        let line = text.lines().find_map(|l| l.strip_prefix(&prefix))?;
        line.trim().parse().ok()
    };
    let script = async {
        // Past the first period, whose end set the gauges.
        tokio::time::sleep(PERIOD + 2 * EVERY).await;
        let (status, text) = get("/metrics").await;
        assert_eq!(status, 200, "{text}");
        let value = |name: &str, table: &str| sample(&text, name, table);
        assert_eq!(
            value("ttl_sweeper_items_deleted_total", "sessions"),
            Some(7.0),
            "{text}"
        );
        let sweeps = value("ttl_sweeper_sweeps_total", "sessions").unwrap();
        assert!(sweeps >= 6.0, "every tick and full sweep: {text}");
        assert_eq!(value("ttl_sweeper_items_left", "sessions"), Some(0.0));
        let lag = value("ttl_sweeper_max_expiry_lag_seconds", "sessions");
        assert!(lag.is_some_and(|l| l >= 10.0), "the period's lag: {text}");
        // The table that does not open: one failed sweep per period.
        let failed = value("ttl_sweeper_sweeps_failed_total", "missing").unwrap();
        assert!(failed >= 2.0, "{text}");
        let (status, body) = get("/healthz").await;
        assert_eq!(status, 200, "{body}");
        let health: Value = serde_json::from_str(&body).unwrap();
        let after = daemon::UNHEALTHY_PERIODS as f64 * PERIOD.as_secs_f64();
        assert_eq!(health["unhealthy_after_seconds"], after, "{health}");
        // Three periods without a successful sweep of the table that does not open, by the
        // runtime's clock (paused here): unhealthy.
        tokio::time::sleep(daemon::UNHEALTHY_PERIODS * PERIOD).await;
        let (status, body) = get("/healthz").await;
        assert_eq!(status, 503, "{body}");
    };
    let clock = clock();
    daemon::run(&tables, &clock, options, script).await.unwrap();
    assert!(!records.lines().is_empty());
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_it_within_the_grace_however_long_a_request_or_an_opening_hangs() {
    let started = Instant::now();
    // Every delete of this table never answers.
    let stalled = Arc::new(mem().fault(Op::BatchDelete, When::Always, Fault::Stall));
    stalled.put_n("k", 30, |_| T0 - 30);
    // And this one's opening never answers.
    let open: Open<Store> = Box::new(|| Box::pin(std::future::pending()));
    let tables = vec![
        Table::ready(sweeper(&stalled, "stalled")),
        Table::lazy("hanging", open, PERIOD),
    ];
    let records = JsonLines::default();
    let asked = started + Duration::from_secs(3);
    let script = sleep_until(asked);
    let clock = clock();
    let reports = daemon::run(&tables, &clock, options(&records), script)
        .await
        .unwrap();
    let took = Instant::now() - asked;
    assert!(
        took <= SHUTDOWN_GRACE + Duration::from_millis(100),
        "stopped {took:?} after the shutdown"
    );
    // The keys whose deletes were cut are left to the next run, and said to be.
    let report = &reports[0];
    assert!(report.stopped_early, "{report:?}");
    assert_eq!(report.items_left, 30, "{report:?}");
    assert_eq!(stalled.ids().len(), 30, "nothing was deleted");
    // The table that never opened is reported as such.
    let hanging = &reports[1];
    assert_eq!(hanging.table, "hanging", "{hanging:?}");
    assert!(!hanging.is_success(), "{hanging:?}");
    assert!(
        hanging.errors[0].message.contains("SHUTDOWN_GRACE"),
        "{hanging:?}"
    );
}

/// A stand-in for the stream follower: counts what it is asked to do (in what its clones share);
/// its opening fails, `refuse_after` it begins, when `refuse` names the table.
#[derive(Clone, Default)]
struct Following {
    refuse: Option<String>,
    refuse_after: Duration,
    opened: Arc<AtomicUsize>,
    followed_until: Arc<Mutex<Vec<(String, Instant)>>>,
}

impl Follow<Store> for Following {
    type Follower = String;

    async fn open(&self, sweeper: &Sweeper<Store>) -> Result<String, FollowError> {
        let table = sweeper.schema().table_name.clone();
        if self.refuse.as_ref() == Some(&table) {
            tokio::time::sleep(self.refuse_after).await;
            return Err(FollowError::NoIndexTable { table });
        }
        self.opened.fetch_add(1, SeqCst);
        Ok(table)
    }

    async fn follow(
        &self,
        table: &String,
        _: &Sweeper<Store>,
        _: &dyn Clock,
        stop: &Stop,
        progress: &dyn Fn(&FollowReport),
    ) -> FollowReport {
        progress(&FollowReport::default());
        stop.token().cancelled().await;
        let done = (table.clone(), Instant::now());
        self.followed_until.lock().unwrap().push(done);
        FollowReport::default()
    }
}

/// Runs the daemon until it fails, and asserts that it failed for table b's follower, which
/// could not be opened.
async fn fails_for_b(tables: &[Table<Store>], clock: &dyn Clock, options: Options<Following>) {
    let never = std::future::pending::<()>();
    let error = daemon::run(tables, clock, options, never)
        .await
        .unwrap_err();
    let b = matches!(&error, FollowError::NoIndexTable { table } if table == "b");
    assert!(b, "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_follower_runs_beside_each_tables_ticks_and_one_that_does_not_open_stops_the_run() {
    let started = Instant::now();
    let (a, b) = (mem(), mem());
    a.put("due", (T0 + 2) as f64);
    let tables = || {
        vec![
            Table::ready(sweeper(&a, "a")),
            Table::ready(sweeper(&b, "b")),
        ]
    };
    let records = JsonLines::default();
    let follow = Following::default();
    let options = following(&records, Some(follow.clone()));
    let stop_at = started + Duration::from_secs(4);
    let clock = clock();
    let reports = daemon::run(&tables(), &clock, options, sleep_until(stop_at))
        .await
        .unwrap();
    // Both followed until the shutdown, while the ticks deleted what came due.
    assert_eq!(follow.opened.load(SeqCst), 2);
    let mut followed = follow.followed_until.lock().unwrap().clone();
    followed.sort();
    assert_eq!(followed, [("a".into(), stop_at), ("b".into(), stop_at)]);
    assert!(!a.has("due"));
    assert_eq!(reports[0].items_deleted, 1, "{:?}", reports[0]);

    // A follower that cannot be opened (b's) is the run's error, at once.
    let refusing = Following {
        refuse: Some("b".into()),
        ..Following::default()
    };
    let options = following(&records, Some(refusing));
    let begun = Instant::now();
    fails_for_b(&tables(), &clock, options).await;
    assert_eq!(Instant::now(), begun, "refused before any wait");
}

#[tokio::test(start_paused = true)]
async fn a_follower_that_fails_to_open_lets_the_other_tables_finish_their_sweeps() {
    // a deletes its items at once and publishes their events for 2 s; b's follower fails to open
    // 1 s in. The run's error waits for a's sweep to end as at a shutdown: dropping it would lose
    // the events of what it had deleted.
    let (a, b) = (mem(), mem());
    a.put_n("x", 3, |_| T0 - 30);
    let sink = Arc::new(Recorder {
        delay: Duration::from_secs(2),
        ..Recorder::default()
    });
    let tables = vec![
        Table::ready(sweeper(&a, "a").with_events(sink.clone())),
        Table::ready(sweeper(&b, "b")),
    ];
    let refusing = Following {
        refuse: Some("b".into()),
        refuse_after: Duration::from_secs(1),
        ..Following::default()
    };
    let options = following(&JsonLines::default(), Some(refusing));
    fails_for_b(&tables, &clock(), options).await;
    let left = a.ids();
    assert!(left.is_empty(), "a's first tick deleted them: {left:?}");
    let mut published = sink.expired.lock().unwrap().clone();
    published.sort();
    assert_eq!(
        published,
        ["x0", "x1", "x2"],
        "each deleted item gets its event"
    );
}
