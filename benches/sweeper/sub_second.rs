//! Section 1 of docs/BENCHMARKS.md, its "Tick mode, repeated" part: sub-second precision,
//! repeated, in the 1 s tick loop alone and in the deployed shape (the release Lambda binary
//! under the local Lambda Runtime API, tests/support/runtime_api.rs).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::support::recorder::DeleteRecorder;
use crate::support::runtime_api;
use crate::support::*;
use crate::{median, pct, Scale};

struct LagRun {
    items: usize,
    /// Deleted items' lags (acknowledgement minus ttl, seconds), sorted.
    lags: Vec<f64>,
}

impl LagRun {
    fn missed(&self) -> usize {
        self.items - self.lags.len()
    }
    fn p(&self, p: f64) -> f64 {
        pct(&self.lags, p)
    }
    fn max(&self) -> f64 {
        self.lags.last().copied().unwrap_or(f64::NAN)
    }
}

struct DeployedRun {
    lag: LagRun,
    /// Deleted before their ttl (acknowledged earlier than the ttl).
    early: usize,
    /// Lags of the items whose ttl falls between an event's scheduled time and the moment an
    /// environment started that invocation: the ones a gap between invocations would leave.
    handoff_lags: Vec<f64>,
    started: usize,
    succeeded: usize,
    failed: usize,
    max_concurrency: usize,
    max_wait: f64,
    delays: Vec<f64>,
}

pub struct SubSecond {
    ticks: Vec<LagRun>,
    deployed: Vec<DeployedRun>,
    period: i64,
    handoffs: i64,
    per_second: i64,
    tick_spread: i64,
}

fn sorted_lags<'a>(
    ttls: impl Iterator<Item = &'a (String, i64)>,
    deleted: &HashMap<String, f64>,
) -> Vec<f64> {
    let mut lags: Vec<f64> = ttls
        .filter_map(|(id, ttl)| deleted.get(id).map(|at| at - *ttl as f64))
        .collect();
    lags.sort_by(f64::total_cmp);
    lags
}

/// `per_second` items expiring each whole second from `from` to `to` (inclusive).
fn expiring(prefix: &str, from: i64, to: i64, per_second: i64) -> Vec<(String, i64)> {
    (from..=to)
        .flat_map(|t| (0..per_second).map(move |j| (format!("{prefix}-{t}-{j:03}"), t)))
        .collect()
}

pub async fn sub_second(s: &Scale) -> SubSecond {
    let mut ticks = Vec::new();
    for run in 0..s.tick_runs {
        let r = tick_run(s).await;
        eprintln!(
            "1 s ticks, run {}: p50 {:.3} s, p99 {:.3} s, max {:.3} s, {} never deleted",
            run + 1,
            r.p(0.5),
            r.p(0.99),
            r.max(),
            r.missed()
        );
        ticks.push(r);
    }
    let mut deployed = Vec::new();
    for run in 0..s.deployed_runs {
        let r = deployed_run(s, run as u64).await;
        eprintln!(
            "deployed shape, run {}: p50 {:.3} s, p99 {:.3} s, max {:.3} s, {} never deleted; {} invocations, max concurrency {}",
            run + 1,
            r.lag.p(0.5),
            r.lag.p(0.99),
            r.lag.max(),
            r.lag.missed(),
            r.started,
            r.max_concurrency
        );
        deployed.push(r);
    }
    SubSecond {
        ticks,
        deployed,
        period: s.deployed_period,
        handoffs: s.deployed_handoffs,
        per_second: s.per_second,
        tick_spread: s.tick_spread,
    }
}

/// One run of the 1 s tick loop whose figures are printed and not kept: `BENCH_ONLY=ticks` starts
/// a DynamoDB Local of its own, whose first seconds (its JIT compiling) the full `make bench`'s
/// earlier sections have already spent.
pub async fn warm_up(s: &Scale) {
    let r = tick_run(s).await;
    eprintln!(
        "1 s ticks, warm-up run (not counted): p50 {:.3} s, p99 {:.3} s, max {:.3} s",
        r.p(0.5),
        r.p(0.99),
        r.max()
    );
}

/// The 1 s tick loop alone, in process (as `ttl-sweeper run --every 1s` or one long Lambda
/// invocation runs it), timed at each delete's acknowledgement.
async fn tick_run(s: &Scale) -> LagRun {
    let client = client().await;
    let table = table_name("tick_rep");
    create_table(&client, &TableSpec::simple(&table)).await;
    let t0 = now();
    let ttls = expiring("t", t0 + 3, t0 + 2 + s.tick_spread, s.per_second);
    put_many(
        &client,
        &table,
        ttls.iter().map(|(id, ttl)| session(id, *ttl)).collect(),
    )
    .await;
    let cfg = config(&table, &[]);
    let sweeper = sweeper_over(&cfg, Instrumented::new).await;
    tick_until(&sweeper, t0 + 2 + s.tick_spread + 2, |_| {}).await;
    let deleted = sweeper.store().deleted_at.lock().unwrap().clone();
    LagRun {
        items: ttls.len(),
        lags: sorted_lags(ttls.iter(), &deleted),
    }
}

/// The release Lambda binary under the local Runtime API: two execution environments, a
/// schedule every `deployed_period` s whose events arrive 0-5 s late, tick mode with 1 s ticks,
/// deletes timed at DynamoDB's acknowledgement by a recording proxy in front of the server.
async fn deployed_run(s: &Scale, seed: u64) -> DeployedRun {
    const MAX_DELAY: i64 = 5;
    let binary = crate::daemon::release_binary("ttl-sweeper-lambda");
    let period = s.deployed_period;
    let client = client().await;
    let table = table_name("deployed");
    create_table(&client, &TableSpec::simple(&table)).await;
    let recorder = DeleteRecorder::start(&endpoint()).await;
    let env = local_env([
        ("TABLE_NAME", table.clone()),
        ("AWS_ENDPOINT_URL", recorder.endpoint.clone()),
        ("TICK_SECONDS", "1".into()),
        ("SCHEDULE_SECONDS", period.to_string()),
    ]);
    let api = runtime_api::RuntimeApi::start(runtime_api::Options {
        binary,
        environments: 2,
        // The construct's default timeout in tick mode: the period plus 20 s.
        timeout: Duration::from_secs(period as u64 + 20),
        env,
        log_dir: std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-servers"),
        function_name: "ttl-sweeper-bench".into(),
    })
    .await;
    // Events at first + k * period, k = 0..=handoffs; items expire from after the first
    // invocation has surely started until the last event's latest delivery.
    let first = now() + 2;
    let last_event = first + s.deployed_handoffs * period;
    let ttls = expiring(
        "d",
        first + MAX_DELAY + 1,
        last_event + MAX_DELAY,
        s.per_second,
    );
    put_many(
        &client,
        &table,
        ttls.iter().map(|(id, ttl)| session(id, *ttl)).collect(),
    )
    .await;
    eprintln!(
        "deployed shape: {} items, {} handoffs of a {period} s schedule; running for {} s",
        ttls.len(),
        s.deployed_handoffs,
        last_event + MAX_DELAY + 1 - now()
    );
    let plan = api.run_schedule(&runtime_api::Schedule {
        first,
        period: Duration::from_secs(period as u64),
        count: s.deployed_handoffs as usize + 1,
        max_delay: Duration::from_secs(MAX_DELAY as u64),
        seed: 0x5eed + seed,
    });
    let deadline = (last_event + MAX_DELAY + 10) as f64;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let all = {
            let acks = recorder.acks.lock().unwrap();
            ttls.iter().all(|(id, _)| acks.contains_key(id))
        };
        if all || wall_clock() > deadline {
            break;
        }
    }
    let run = api.stop();
    let acks = recorder.acks.lock().unwrap();
    let acks: HashMap<String, f64> = acks.iter().map(|(id, (at, _))| (id.clone(), *at)).collect();
    let lag = LagRun {
        items: ttls.len(),
        lags: sorted_lags(ttls.iter(), &acks),
    };
    // Items whose ttl falls in [scheduled time of invocation k, its start), k >= 1.
    let gaps: Vec<(f64, f64)> = run
        .invocations
        .iter()
        .filter(|i| i.scheduled > first as f64)
        .map(|i| (i.scheduled, i.start.unwrap_or(run.stopped_at)))
        .collect();
    let handoff_lags = sorted_lags(
        ttls.iter().filter(|(_, ttl)| {
            gaps.iter()
                .any(|(from, to)| (*ttl as f64) >= *from && (*ttl as f64) < *to)
        }),
        &acks,
    );
    let outcome = |f: fn(&runtime_api::Outcome) -> bool| {
        run.invocations.iter().filter(|i| f(&i.outcome)).count()
    };
    let failed = outcome(|o| {
        matches!(
            o,
            runtime_api::Outcome::Failed(_) | runtime_api::Outcome::TimedOut
        )
    });
    if failed > 0 || !run.init_errors.is_empty() {
        eprintln!(
            "deployed shape: failed invocations:\n{}\ninit errors: {:?}\nlogs: {:?}",
            run.describe(first as f64),
            run.init_errors,
            api.logs()
        );
    }
    DeployedRun {
        early: ttls
            .iter()
            .filter(|(id, ttl)| acks.get(id).is_some_and(|at| *at < *ttl as f64))
            .count(),
        lag,
        handoff_lags,
        started: run.started().count(),
        succeeded: outcome(|o| matches!(o, runtime_api::Outcome::Succeeded(_))),
        failed: failed + run.init_errors.len(),
        max_concurrency: run.max_concurrency(),
        max_wait: run.started().filter_map(|i| i.waited()).fold(0.0, f64::max),
        delays: plan.iter().map(|(s, d)| d - s).collect(),
    }
}

/// `median (min–max)` of `values`, formatted with `f`.
fn spread(values: &[f64], f: impl Fn(f64) -> String) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.len() < 2 {
        f(median(values))
    } else {
        format!("{} ({}–{})", f(median(values)), f(min), f(max))
    }
}

fn secs(v: f64) -> String {
    format!("{v:.3} s")
}

/// Tick mode's goal: the p99 lag from the ttl to the delete acknowledged at the server, seconds.
pub const TICK_P99_GOAL: f64 = 0.050;

/// The line that holds `p99s` (one per run, seconds) of `shape` to [`TICK_P99_GOAL`].
fn tick_goal(d: &mut String, shape: &str, p99s: &[f64]) {
    if p99s.is_empty() {
        return;
    }
    let _ = writeln!(
        d,
        "\n**Goal, tick mode, {shape}:** p99 lag from the ttl to the delete acknowledged at the server ≤ {:.0} ms. {}.",
        TICK_P99_GOAL * 1000.0,
        crate::p99_verdict(p99s, TICK_P99_GOAL),
    );
}

pub fn render(d: &mut String, s: &Scale, sub: &SubSecond) {
    let _ = writeln!(d, "### Tick mode, repeated\n");
    let _ = writeln!(d, "Tick mode ticks at `s + {:.3}` each second (`TICK_OFFSET_MS`) and deletes an item at the first tick after its ttl. Each run has a new table and sweeper and the server to itself.\n", ttl_sweeper::engine::ticks::TICK_OFFSET_MS as f64 / 1000.0);
    let _ = writeln!(d, "**1 s ticks, continuous loop** (as `ttl-sweeper run --every 1s` runs it): {} items expiring each second for {} s per run.\n", sub.per_second, sub.tick_spread);
    crate::table_head(
        d,
        "| run | items | never deleted | p50 lag | p99 lag | max lag |",
    );
    for (i, r) in sub.ticks.iter().enumerate() {
        let _ = writeln!(
            d,
            "| {} | {} | {} | {} | {} | {} |",
            i + 1,
            r.items,
            r.missed(),
            secs(r.p(0.5)),
            secs(r.p(0.99)),
            secs(r.max())
        );
    }
    if sub.ticks.len() > 1 {
        let col =
            |f: fn(&LagRun) -> f64| spread(&sub.ticks.iter().map(f).collect::<Vec<_>>(), secs);
        let _ = writeln!(
            d,
            "| **median (min–max) of {} runs** | | | {} | {} | {} |",
            sub.ticks.len(),
            col(|r| r.p(0.5)),
            col(|r| r.p(0.99)),
            col(|r| r.max())
        );
    }
    let p99s: Vec<f64> = sub.ticks.iter().map(|r| r.p(0.99)).collect();
    tick_goal(d, "the continuous loop", &p99s);
    let _ = writeln!(d);
    let _ = writeln!(d, "**Deployed shape**: the release Lambda binary as two execution environments under a local Lambda Runtime API (`tests/support/runtime_api.rs`), a schedule every {} s, its events 0-5 s late; `TICK_SECONDS=1`, `SCHEDULE_SECONDS={}`, timeout {} s, each invocation ticking until 10 s after the next one's scheduled time. {} items expire each second over {} handoffs per run. *In a handoff*: items due between an invocation's scheduled time and its start.\n", sub.period, sub.period, sub.period + 20, sub.per_second, sub.handoffs);
    crate::table_head(d, "| run | items | never deleted | deleted before ttl | p50 lag | p99 lag | max lag | in a handoff: items, max lag | invocations started (ok / failed) | max concurrency | longest wait for an environment | schedule delays |");
    for (i, r) in sub.deployed.iter().enumerate() {
        let _ = writeln!(
            d,
            "| {} | {} | {} | {} | {} | {} | {} | {}, {} | {} ({} / {}) | {} | {:.2} s | {} |",
            i + 1,
            r.lag.items,
            r.lag.missed(),
            r.early,
            secs(r.lag.p(0.5)),
            secs(r.lag.p(0.99)),
            secs(r.lag.max()),
            r.handoff_lags.len(),
            r.handoff_lags.last().map_or("-".to_owned(), |m| secs(*m)),
            r.started,
            r.succeeded,
            r.failed,
            r.max_concurrency,
            r.max_wait,
            r.delays
                .iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if sub.deployed.len() > 1 {
        let col = |f: fn(&DeployedRun) -> f64| {
            spread(&sub.deployed.iter().map(f).collect::<Vec<_>>(), secs)
        };
        let _ = writeln!(
            d,
            "| **median (min–max) of {} runs** | | | | {} | {} | {} | | | | | |",
            sub.deployed.len(),
            col(|r| r.lag.p(0.5)),
            col(|r| r.lag.p(0.99)),
            col(|r| r.lag.max())
        );
    }
    let p99s: Vec<f64> = sub.deployed.iter().map(|r| r.lag.p(0.99)).collect();
    tick_goal(d, "the deployed shape", &p99s);
    let _ = writeln!(d, "\n*ok*: invocations that returned (each run's last is stopped). `BENCH_DEPLOYED_PERIOD=60` measures the production period (about {} minutes per run).\n", (s.deployed_handoffs * 60 + 20) / 60 + 1);
}
