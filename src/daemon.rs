//! The daemon, `ttl-sweeper run`: every table swept on its own until shutdown ([`run`]).
//!
//! [`run`] takes what its caller built (the tables, the clock, the [`Options`]) and the shutdown
//! as a future: it reads no environment, signal or clock of its own, so it runs as well on the
//! tests' in-memory store and paused time as on DynamoDB.

use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::engine::tables::{unopened, Table};
use crate::engine::{run_ticks, Lease, Stop, SweepErrorEntry, SweepReport, Sweeper, Ticks};
use crate::expiry::Clock;
use crate::index::follow::{FollowError, FollowReport, Follower, Following};
use crate::store::{DynamoStore, Store};
use crate::telemetry::{self, endpoint::DaemonMetrics};

/// `/healthz` is unhealthy after this many periods (`max(period, every)`) without a successful
/// sweep.
pub const UNHEALTHY_PERIODS: u32 = 3;

/// How the daemon runs, and where it reports.
pub struct Options<F> {
    /// Ticks: each table's newest windows swept this often (`--every`).
    pub every: Duration,
    /// A full sweep (lookback and checkpoint), a summary line and an EMF record this often, and
    /// a table that could not be opened opened again (`SCHEDULE_SECONDS`).
    pub period: Duration,
    /// The CloudWatch namespace of the EMF records (`METRICS_NAMESPACE`).
    pub namespace: String,
    /// Where `/metrics` and `/healthz` are served (`--metrics-addr`), if anywhere.
    pub endpoint: Option<TcpListener>,
    /// Each table's stream follower (`--follow-stream`), if any: [`Following`] on DynamoDB.
    pub follow: Option<F>,
    /// Where each period's EMF record goes, one JSON line per table: stderr in the CLI.
    pub emf: Mutex<Box<dyn Write + Send>>,
}

/// What the daemon runs beside a table's ticks once the table is open: the follower of its
/// DynamoDB stream ([`Following`] for [`DynamoStore`]).
pub trait Follow<S> {
    /// A table's follower, opened.
    type Follower;

    /// Opens the follower of `sweeper`'s table, before its ticks start: an error stops [`run`].
    fn open(
        &self,
        sweeper: &Sweeper<S>,
    ) -> impl Future<Output = Result<Self::Follower, FollowError>>;

    /// Follows until `stop`, deleting through `sweeper`; `progress` sees the totals so far.
    fn follow(
        &self,
        follower: &Self::Follower,
        sweeper: &Sweeper<S>,
        clock: &dyn Clock,
        stop: &Stop,
        progress: &dyn Fn(&FollowReport),
    ) -> impl Future<Output = FollowReport>;
}

impl Follow<DynamoStore> for Following {
    type Follower = Follower;

    /// The table's stream, its position saved beside the checkpoint: one position per table,
    /// whatever shard range this process sweeps.
    async fn open(&self, sweeper: &Sweeper<DynamoStore>) -> Result<Follower, FollowError> {
        let checkpoint = sweeper.options().checkpoint.as_ref();
        let saved_at = checkpoint.map(|c| (c.table.clone(), c.stream_id.clone()));
        let (store, schema) = (sweeper.store(), sweeper.schema());
        let streams = self.streams.clone();
        Follower::open(store, streams, schema, saved_at, self.gathering).await
    }

    async fn follow(
        &self,
        follower: &Follower,
        sweeper: &Sweeper<DynamoStore>,
        clock: &dyn Clock,
        stop: &Stop,
        progress: &dyn Fn(&FollowReport),
    ) -> FollowReport {
        follower.run(sweeper, clock, stop, progress).await
    }
}

/// What every table's loop shares.
struct Shared<'a, F> {
    /// The options, but for the endpoint.
    options: Options<F>,
    clock: &'a dyn Clock,
    stop: Stop,
    metrics: Option<Arc<DaemonMetrics>>,
}

/// Sweeps every table of `tables` until `shutdown` completes; returns one report per table, of
/// the whole run, in the order given. Each table is opened (again every [`Options::period`] until
/// it opens), then has its ticks and full sweeps ([`run_ticks`]) and, with [`Options::follow`],
/// its stream followed beside them.
///
/// On shutdown no new work starts, and the requests in flight (and the opening of a table) have
/// [`crate::engine::retry::SHUTDOWN_GRACE`] to answer. A follower that cannot be opened stops
/// every table as a shutdown does, and is the error.
pub async fn run<S, F>(
    tables: &[Table<S>],
    clock: &dyn Clock,
    mut options: Options<F>,
    shutdown: impl Future,
) -> Result<Vec<SweepReport>, FollowError>
where
    S: Store,
    F: Follow<S>,
{
    let (every, period) = (options.every, options.period);
    let token = CancellationToken::new();
    let names: Vec<&str> = tables.iter().map(|t| t.name()).collect();
    let unhealthy_after = UNHEALTHY_PERIODS * period.max(every);
    let metrics = options.endpoint.take().map(|listener| {
        let metrics = Arc::new(DaemonMetrics::new(&names, unhealthy_after));
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(addr = %addr, "serving /metrics and /healthz");
        }
        let serve = telemetry::endpoint::serve(listener, metrics.clone(), token.child_token());
        tokio::spawn(serve);
        metrics
    });
    let shared = Shared {
        options,
        clock,
        stop: Stop::never().with_cancel(token.clone()),
        metrics,
    };
    tracing::info!(tables = ?names, every = ?every, "running until SIGINT or SIGTERM");
    let each = tables.iter().map(|table| async {
        let run = run_table(table, &shared).await;
        if run.is_err() {
            // The other tables stop as at a shutdown, each ending its sweep (its deletes settled,
            // their events published): dropped, they could lose what they had deleted.
            shared.stop.token().cancel();
        }
        run
    });
    let watch = async {
        shutdown.await;
        token.cancel();
        std::future::pending::<std::convert::Infallible>().await
    };
    let reports = tokio::select! {
        reports = futures::future::join_all(each) => reports.into_iter().collect(),
        never = watch => match never {},
    };
    // Also ends the endpoint.
    token.cancel();
    tracing::info!("stopped");
    reports
}

/// One table until the stop: opened (again every period until it opens), then swept.
async fn run_table<S: Store, F: Follow<S>>(
    table: &Table<S>,
    shared: &Shared<'_, F>,
) -> Result<SweepReport, FollowError> {
    let stop = &shared.stop;
    // The failures to open are part of the table's report for the whole run.
    let mut unopened_for = SweepReport::default();
    let sweeper = loop {
        // An opening that does not answer holds up the shutdown no longer than a request does.
        let opened = stop
            .bound("DescribeTable", async { Ok(table.sweeper().await) })
            .await;
        match opened.unwrap_or_else(|e| Err(SweepErrorEntry::new(None, &e))) {
            Ok(sweeper) => break sweeper,
            Err(error) => {
                let report = unopened(table.name(), error);
                telemetry::log_tick(&report);
                if let Some(metrics) = &shared.metrics {
                    metrics.record(&report);
                }
                unopened_for.merge(report);
            }
        }
        if !stop.sleep(shared.options.period).await {
            return Ok(unopened_for);
        }
    };
    let follower = match &shared.options.follow {
        None => None,
        Some(follow) => Some(follow.open(sweeper).await?),
    };
    unopened_for.merge(sweep_table(sweeper, follower.as_ref(), shared).await);
    Ok(unopened_for)
}

/// One opened table: its ticks and, with a follower, its stream, until the stop.
async fn sweep_table<S: Store, F: Follow<S>>(
    sweeper: &Sweeper<S>,
    follower: Option<&F::Follower>,
    shared: &Shared<'_, F>,
) -> SweepReport {
    let (clock, stop, metrics) = (shared.clock, &shared.stop, &shared.metrics);
    let options = &shared.options;
    let ticks = Ticks {
        every: options.every,
        full_every: options.period,
        until: None,
    };
    // Every period: a summary line and an EMF record of that period, so that a daemon that runs
    // for months reports as it goes.
    let mut period = SweepReport::default();
    let mut period_start = Instant::now();
    let on_tick = |r: &SweepReport| {
        telemetry::log_tick(r);
        if let Some(metrics) = metrics {
            metrics.record(r);
        }
        period.merge(r.clone());
        if period_start.elapsed() >= options.period {
            let mut done = std::mem::take(&mut period);
            done.clock_ahead_ms = done.clock_ahead_ms.max(clock.take_ahead_ms());
            done.duration_ms = period_start.elapsed().as_millis() as u64;
            telemetry::log_summary(&done);
            if let Some(metrics) = metrics {
                metrics.record_period(&done);
            }
            let record = telemetry::emf_record(&done, &options.namespace, clock.now().millis());
            let mut emf = crate::store::lock(&options.emf);
            if let Err(e) = writeln!(emf, "{record}") {
                tracing::warn!(error = %e, "could not write the period's EMF record");
            }
            period_start = Instant::now();
        }
    };
    let first = clock.now();
    // Boxed: the ticks' future is deep enough (sweeps, leases, deletes, events) that the
    // compiler's query depth would overflow computing the layout of this one around it.
    let sweeps = Box::pin(run_ticks(sweeper, first, clock, &ticks, stop, on_tick));
    let table = &sweeper.schema().table_name;
    let follow = async {
        if let (Some(follow), Some(follower)) = (&options.follow, follower) {
            // The lease counts how current the follower keeps this Region's index table.
            let index = sweeper.lease().map(Lease::index);
            if let Some(index) = index {
                index.watch(Instant::now());
            }
            let progress = |r: &FollowReport| {
                if let Some(metrics) = metrics {
                    metrics.record_stream(table, r);
                }
                if let Some(index) = index {
                    index.indexed(Instant::now(), Duration::from_millis(r.record_age_ms));
                }
            };
            follow
                .follow(follower, sweeper, clock, stop, &progress)
                .await;
        }
    };
    let (mut report, ()) = tokio::join!(sweeps, follow);
    report.clock_ahead_ms = report.clock_ahead_ms.max(clock.take_ahead_ms());
    report
}
