//! A host clock running fast must not delete items early: the CLI under libfaketime (`faketime`,
//! installed by `make tools`) with the clock two minutes ahead, against DynamoDB Local, whose
//! answers carry the real time in their `Date` header.

use crate::support;

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::mem_store::{self, MemStore};
use support::observed::{Answer, Call, Observer};
use support::*;
use tokio::time::Instant;
use ttl_sweeper::engine::ticks::TICK_OFFSET_MS;
use ttl_sweeper::engine::{run_ticks, Stop, SweepOptions, Sweeper, Ticks};
use ttl_sweeper::expiry::{Clock, Layout, Timestamp};
use ttl_sweeper::store::{GuardedClock, ServerClock, Store, StoreError};

/// `ttl-sweeper` on the test server under `faketime -f +<ahead>s`: the wall clock is faked, the
/// monotonic clock is left alone (tokio's timers keep working).
fn fast_clock_cli(ahead_secs: u32) -> Command {
    let faketime = ["/usr/bin/faketime", "/usr/local/bin/faketime"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("faketime is not installed: `make tools` installs it (Debian package faketime)");
    let mut cmd = Command::new(faketime);
    cmd.env_clear()
        .envs(LOCAL_AWS_ENV)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_ENDPOINT_URL", endpoint())
        .arg("-f")
        .arg(format!("+{ahead_secs}s"))
        .arg(env!("CARGO_BIN_EXE_ttl-sweeper"));
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_clock_two_minutes_fast_deletes_nothing_early() {
    let (client, table) = simple_table("fast_clock").await;
    let now = now();
    // 60 items with 30 to 90 s to live, and 10 that expired a minute ago.
    let mut items = sessions("live", 60, |i| now + 30 + i);
    items.extend(sessions("expired", 10, |i| now - 60 - i));
    put_items(&client, &table, items).await;

    // The fake clock really is ahead: `date` under the same wrapper.
    let mut date = fast_clock_cli(120);
    date.args(["--version"]);
    let (code, _, _) = run(&mut date);
    assert_eq!(code, 0, "faketime could not run ttl-sweeper");

    let mut cmd = fast_clock_cli(120);
    cmd.args(["sweep", "--table-name", &table]);
    let (code, report, stderr) = run_json(&mut cmd);
    assert_eq!(code, 0, "{stderr}");
    let left = ids(&client, &table).await;
    let live_left = left.iter().filter(|id| id.starts_with("live-")).count();
    assert_eq!(live_left, 60, "items deleted before their ttl: {report}");
    let none_expired = !left.iter().any(|id| id.starts_with("expired-"));
    assert!(none_expired, "{left:?}");
    assert_eq!(removed_json(&report), 10, "{report}");
    // The report and the log say how far the host clock was ahead.
    let ahead = report["clock_ahead_ms"].as_u64().unwrap();
    assert!((115_000..=125_000).contains(&ahead), "{report}");
    assert!(stderr.contains("ahead of DynamoDB"), "{stderr}");

    // A future --at is refused, and no flag lets a sweep run ahead of the clock.
    let at = chrono::DateTime::from_timestamp(now + 200, 0)
        .unwrap()
        .to_rfc3339();
    for extra in [None, Some("--allow-future")] {
        let mut cmd = fast_clock_cli(120);
        cmd.args(["sweep", "--table-name", &table, "--at", &at])
            .args(extra);
        let (code, _, stderr) = run(&mut cmd);
        assert_eq!(code, 2, "a future --at is refused: {stderr}");
        let refused = ["is in the future", "unexpected argument '--allow-future'"];
        let said = stderr.contains(refused[usize::from(extra.is_some())]);
        assert!(said, "{stderr}");
    }
    assert_eq!(ids(&client, &table).await.len(), 60);
}

/// DynamoDB over an in-memory table whose clock reads `t0` at `base`, as the SDK's interceptor
/// sees it: every call takes `rtt`, answered half-way through with the `Date` of that instant (to
/// the whole second), which `server` learns; the keys a `BatchWriteItem` deleted are timed by
/// that clock at its answer.
struct DatedAnswers {
    server: Arc<ServerClock>,
    t0: Timestamp,
    base: Instant,
    rtt: Duration,
    acked: Mutex<HashMap<String, Timestamp>>,
}

impl DatedAnswers {
    fn dynamodb_at(&self, x: Instant) -> Timestamp {
        self.t0 + x.duration_since(self.base)
    }
}

impl Observer for DatedAnswers {
    type Guard = ();

    async fn before(&self, _call: Call<'_>) {
        let sent = Instant::now();
        tokio::time::sleep(self.rtt / 2).await;
        let date = Timestamp::from_secs(self.dynamodb_at(Instant::now()).secs());
        tokio::time::sleep(self.rtt / 2).await;
        self.server.observe(date, sent);
    }

    fn after(
        &self,
        call: Call<'_>,
        answer: Result<Answer<'_>, &StoreError>,
    ) -> Result<(), StoreError> {
        if let (Call::BatchDelete { keys }, Ok(Answer::Keys(left))) = (call, answer) {
            let at = self.dynamodb_at(Instant::now());
            let mut acked = self.acked.lock().unwrap();
            for key in keys.iter().filter(|k| !left.contains(k)) {
                acked.insert(mem_store::id_of(key), at);
            }
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn ticks_probe_dynamodbs_date_turn_and_delete_each_item_at_the_first_tick_after_its_ttl() {
    // The tick loop over a table whose answers are dated by DynamoDB's clock, which reads a
    // fraction of a second at the start; the host clock is right, or 0.8 s fast. The probes the
    // clock asks for locate its `Date` turn: the first second's items go at most 1 s / 16
    // (MAX_PROBES) plus a few round trips late, every later one at the first tick after its ttl,
    // TICK_OFFSET_MS past the second by DynamoDB's clock plus the tick's query and delete (a round trip of
    // 2 ms each) and a round trip of the lower bound's lag. Without the probes, the ticks keep
    // the phase of the lower bound learnt at the start, up to a second late.
    const T0: i64 = 1_800_000_000;
    let rtt = Duration::from_millis(2);
    for fast in [Duration::ZERO, Duration::from_millis(800)] {
        for fraction_ms in [0, 300, 700, 950] {
            let table = MemStore::new(Layout::default()).starting_at(T0);
            let base = Instant::now();
            tokio::time::advance(Duration::from_millis(fraction_ms)).await;
            for s in 1..=12 {
                table.put(&format!("s{s:02}"), (T0 + s) as f64);
            }
            let server = Arc::new(ServerClock::default());
            let answers = DatedAnswers {
                server: server.clone(),
                t0: Timestamp::from_secs(T0),
                base,
                rtt,
                acked: Mutex::default(),
            };
            let schema = table.schema();
            let store = Observed {
                inner: table.clone(),
                observer: answers,
            };
            // The start-up's answer.
            store.read_checkpoint("checkpoints", "start").await.unwrap();
            let sweeper = Sweeper::new(store, schema, SweepOptions::default());
            let t0 = Timestamp::from_secs(T0);
            let host = move || t0 + Instant::now().duration_since(base) + fast;
            let clock = GuardedClock::new(host, server);
            let ticks = Ticks {
                every: Duration::from_secs(1),
                full_every: Duration::from_secs(60),
                until: Some(base + Duration::from_secs(14)),
            };
            let never = Stop::never();
            run_ticks(&sweeper, clock.now(), &clock, &ticks, &never, |_| {}).await;
            let acked = sweeper.store().acked.lock().unwrap().clone();
            let lags: Vec<i64> = (1..=12)
                .map(|s| {
                    let at = acked.get(&format!("s{s:02}")).expect("every item deleted");
                    at.millis_since(Timestamp::from_secs(T0 + s))
                })
                .collect();
            let case =
                format!("start at .{fraction_ms:03} s, host {fast:?} fast: lags {lags:?} ms");
            eprintln!("{case}");
            assert!(table.destroyed_live.lock().unwrap().is_empty(), "{case}");
            assert!(lags[0] <= TICK_OFFSET_MS + 1_000 / 16 + 6, "{case}");
            let on_time = lags[1..].iter().all(|l| *l <= TICK_OFFSET_MS + 10);
            assert!(on_time, "{case}");
        }
    }
}
