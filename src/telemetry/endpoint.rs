//! The optional HTTP endpoint of the daemon (`ttl-sweeper run`, `--metrics-addr`): `GET /metrics`
//! in the Prometheus text format and `GET /healthz`; nothing else. The metrics are the Lambda's
//! EMF metrics under Prometheus names ([`SWEEP_METRICS`]), each labelled `table`, kept by a
//! recorder local to this endpoint; `/healthz` turns 503 once no sweep has succeeded for the
//! `unhealthy_after` of [`DaemonMetrics::new`]. What each says: `docs/operations.md`, "Running as
//! a daemon".

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics::{counter, describe_counter, describe_gauge, gauge, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::counters::{Kind, SWEEP_METRICS};
use crate::engine::SweepReport;
use crate::index::follow::FollowReport;
use crate::store::lock;

const SWEEPS: &str = "ttl_sweeper_sweeps_total";
const SWEEPS_FAILED: &str = "ttl_sweeper_sweeps_failed_total";
const SINCE_SUCCESS: &str = "ttl_sweeper_seconds_since_last_success";
const STREAM_AGE: &str = "ttl_sweeper_stream_record_age_seconds";
const STREAM_HELD: &str = "ttl_sweeper_stream_entries_held";
const LEADER: &str = "ttl_sweeper_leader";
/// `run --follow-stream`: the stream follower's counters, with their help.
const STREAM_COUNTERS: [(&str, &str); 8] = [
    ("ttl_sweeper_stream_records_total", "run --follow-stream: stream records read"),
    ("ttl_sweeper_stream_entries_written_total", "run --follow-stream: expiry index entries written"),
    ("ttl_sweeper_stream_expired_when_written_total", "run --follow-stream: of those, items already expired when indexed (deleted at once, or by the next sweep)"),
    ("ttl_sweeper_stream_deleted_at_once_total", "run --follow-stream: of those, items deleted as they were indexed"),
    ("ttl_sweeper_stream_invalid_ttl_total", "run --follow-stream: items written with an unusable ttl (not a Number, milliseconds, more than five years old)"),
    ("ttl_sweeper_stream_retried_records_total", "run --follow-stream: records tried again after a failure (throttling, 5xx, timeouts, access denied), their shard held at them"),
    ("ttl_sweeper_stream_skipped_records_total", "run --follow-stream: records that can never be indexed and were passed: malformed, or their entry refused as invalid (their items need backfill)"),
    ("ttl_sweeper_stream_trimmed_total", "run --follow-stream: times records were trimmed from the stream before they were read (their items need backfill)"),
];
/// The help of the other metrics that are not EMF metrics; as for those, a name ending in
/// `_total` is a counter and one ending in `_seconds` (or [`SINCE_SUCCESS`]) is in seconds.
const HELP: [(&str, &str); 6] = [
    (SWEEPS, "Sweeps run: ticks and full sweeps"),
    (SWEEPS_FAILED, "Sweeps with failed keys or unread windows"),
    (SINCE_SUCCESS, "Time since the last successful sweep"),
    (LEADER, "LEADER_LEASE: 1 when the last sweep held the table's lease (always without a lease), 0 when it stood by"),
    (STREAM_HELD, "run --follow-stream: entries held to be packed with other batches' entries due at the same instant (FOLLOW_HOLD); their records are read again after a restart"),
    (STREAM_AGE, "run --follow-stream: how far behind the follower is, the largest over the shards: for a shard held at a failing record, the age of its oldest record not yet indexed (as of the last attempt); otherwise the age of the newest record of its last read, 0 when caught up (Lambda's IteratorAge)"),
];

/// The daemon's metrics and health.
#[derive(Debug)]
pub struct DaemonMetrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// Each table's start-up, then the end of its last successful sweep.
    last_success: Mutex<BTreeMap<String, (Instant, bool)>>,
    unhealthy_after: Duration,
}

/// What `/healthz` says.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    /// No longer than `unhealthy_after` ([`DaemonMetrics::new`]) without a successful sweep.
    pub healthy: bool,
    /// Time since the last successful sweep, or since start-up before the first.
    pub since_success: Duration,
    /// Whether any sweep has succeeded yet.
    pub ever_succeeded: bool,
}

impl DaemonMetrics {
    /// Metrics of sweeps of `tables`; unhealthy after `unhealthy_after` without a successful sweep
    /// of one of them.
    pub fn new(tables: &[&str], unhealthy_after: Duration) -> DaemonMetrics {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let now = Instant::now();
        let last_success = tables.iter().map(|t| (t.to_string(), (now, false)));
        let this = DaemonMetrics {
            recorder,
            handle,
            last_success: Mutex::new(last_success.collect()),
            unhealthy_after,
        };
        let sweeps = SWEEP_METRICS.iter().map(|m| (m.prometheus, m.help));
        let help = sweeps.chain(HELP.iter().chain(&STREAM_COUNTERS).copied());
        metrics::with_local_recorder(&this.recorder, || {
            for (name, help) in help {
                let seconds = name.ends_with("_seconds") || name == SINCE_SUCCESS;
                let unit = if seconds { Unit::Seconds } else { Unit::Count };
                if name.ends_with("_total") {
                    describe_counter!(name, unit, help);
                } else {
                    describe_gauge!(name, unit, help);
                }
            }
        });
        for table in tables {
            let report = SweepReport {
                table: table.to_string(),
                ..SweepReport::default()
            };
            this.record_sweep(&report, false);
        }
        this
    }

    /// Adds one sweep (a tick or a full sweep) to the counters. A successful one that read at
    /// least one window resets the health clock (a tick with nothing to read proves nothing), as
    /// does one that stood by beside a lease holder of its own layout.
    pub fn record(&self, report: &SweepReport) {
        self.record_sweep(report, true);
        metrics::with_local_recorder(&self.recorder, || {
            let leader = if report.stood_by > 0 { 0.0 } else { 1.0 };
            gauge!(LEADER, "table" => report.table.clone()).set(leader);
        });
        // A standby beside a holder of another layout is misconfigured, not healthy.
        let stood_by_well = report.stood_by > report.lease_layout_mismatch;
        if report.is_success() && (report.windows_swept > 0 || stood_by_well) {
            lock(&self.last_success).insert(report.table.clone(), (Instant::now(), true));
        }
    }

    fn record_sweep(&self, r: &SweepReport, counts: bool) {
        let counted = SWEEP_METRICS.iter().filter(|m| m.kind == Kind::Counter);
        let counters = counted.map(|m| (m.prometheus, (m.read)(r))).chain([
            (SWEEPS, u64::from(counts)),
            (SWEEPS_FAILED, u64::from(counts && !r.is_success())),
        ]);
        metrics::with_local_recorder(&self.recorder, || {
            for (name, value) in counters {
                counter!(name, "table" => r.table.clone()).increment(value);
            }
        });
    }

    /// Sets the stream follower's counters and its record age to `r`, its totals so far for
    /// `table`.
    pub fn record_stream(&self, table: &str, r: &FollowReport) {
        metrics::with_local_recorder(&self.recorder, || {
            let values = [
                r.index.records,
                r.index.entries_written,
                r.index.expired_when_written,
                r.index.deleted_at_once,
                r.index.invalid_ttl,
                r.retried_records,
                r.skipped_records,
                r.trimmed,
            ];
            for ((name, _), value) in STREAM_COUNTERS.iter().zip(values) {
                counter!(*name, "table" => table.to_owned()).absolute(value);
            }
            gauge!(STREAM_AGE, "table" => table.to_owned()).set(r.record_age_ms as f64 / 1000.0);
            gauge!(STREAM_HELD, "table" => table.to_owned()).set(r.entries_held as f64);
        });
    }

    /// Sets the gauges to a reporting period's values (the interval report `run` logs).
    pub fn record_period(&self, r: &SweepReport) {
        metrics::with_local_recorder(&self.recorder, || {
            for m in SWEEP_METRICS.iter().filter(|m| m.kind == Kind::Gauge) {
                gauge!(m.prometheus, "table" => r.table.clone()).set(m.value(r));
            }
        });
    }

    /// The health as of now.
    pub fn health(&self) -> Health {
        self.health_at(Instant::now())
    }

    /// The health as of `now`: that of the table that has gone longest without a successful
    /// sweep.
    pub fn health_at(&self, now: Instant) -> Health {
        let tables = lock(&self.last_success);
        let since = tables.values().map(|(since, _)| *since).min();
        let since_success = since.map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
        Health {
            healthy: since_success <= self.unhealthy_after,
            since_success,
            ever_succeeded: tables.values().all(|(_, ever)| *ever),
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let now = Instant::now();
        let since: Vec<_> = (lock(&self.last_success).iter())
            .map(|(table, (since, _))| (table.clone(), now.saturating_duration_since(*since)))
            .collect();
        metrics::with_local_recorder(&self.recorder, || {
            for (table, since) in since {
                gauge!(SINCE_SUCCESS, "table" => table).set(since.as_secs_f64());
            }
        });
        self.handle.render()
    }
}

/// Binds `addr` for [`serve`]; a busy or foreign address is an error naming it.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        let message = format!("--metrics-addr {addr}: cannot listen: {e}");
        std::io::Error::new(e.kind(), message)
    })
}

/// At most this many connections are served at once; more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 64;

/// A client must send a request's headers within this long of the connection being ready for
/// them (its start, or the end of its previous request); otherwise the connection is closed.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers `/metrics` and `/healthz` on `listener` until `shutdown`: a connection is accepted
/// only while fewer than [`MAX_CONNECTIONS`] are open, and closed when its headers take longer
/// than [`HEADER_TIMEOUT`] (hyper's `header_read_timeout`).
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<DaemonMetrics>,
    shutdown: CancellationToken,
) {
    let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let acquire = open.clone().acquire_owned();
        let Some(permit) = shutdown.run_until_cancelled(acquire).await else {
            return;
        };
        let permit = permit.expect("the semaphore is never closed");
        let Some(accepted) = shutdown.run_until_cancelled(listener.accept()).await else {
            return;
        };
        let Ok((stream, _)) = accepted else {
            // A failed accept (e.g. out of file descriptors) must not spin: pause, go on.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let metrics = metrics.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |request| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(answer(&metrics, &request)) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            shutdown.run_until_cancelled(connection).await;
        });
    }
}

/// The most of an answer's body [`probe`] reads: `/healthz`'s is under 200 bytes.
pub const PROBE_BODY_LIMIT: usize = 64 * 1024;

/// `ttl-sweeper health`: asks the endpoint at `addr` for `/healthz` within `timeout`; its status
/// and body. For a container's health check where no HTTP client is installed (the image has
/// nothing but the binary).
pub async fn probe(addr: SocketAddr, timeout: Duration) -> std::io::Result<(StatusCode, String)> {
    use http_body_util::{BodyExt, Empty, Limited};
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        std::io::Error::other(format!("http://{addr}/healthz: {what}: {e}"))
    };
    let asked = async {
        let stream = tokio::net::TcpStream::connect(addr).await;
        let stream = stream.map_err(|e| failed("cannot connect", &e))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| failed("handshake", &e))?;
        tokio::spawn(connection);
        let request = Request::get("/healthz")
            .header("host", addr.to_string())
            .body(Empty::<Bytes>::new())
            .expect("a request from a valid path and header");
        let response = (sender.send_request(request).await).map_err(|e| failed("request", &e))?;
        let status = response.status();
        // The answer of another server on that port is not read past a bound.
        let body = Limited::new(response.into_body(), PROBE_BODY_LIMIT)
            .collect()
            .await;
        let body = body.map_err(|e| failed("body", &*e))?.to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    };
    (tokio::time::timeout(timeout, asked).await)
        .unwrap_or_else(|_| Err(failed("no answer", &format!("within {timeout:?}"))))
}

fn answer(metrics: &DaemonMetrics, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body)))
            .expect("a response from a valid status and header")
    };
    let text = "text/plain";
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, text, "GET only\n".into());
    }
    match request.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        "/healthz" => {
            let health = metrics.health();
            let status = if health.healthy {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            let body = json!({
                "status": if health.healthy { "ok" } else { "unhealthy" },
                "seconds_since_last_success": health.since_success.as_secs_f64(),
                "any_success": health.ever_succeeded,
                "unhealthy_after_seconds": metrics.unhealthy_after.as_secs_f64(),
            });
            reply(status, "application/json", format!("{body}\n"))
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            text,
            "not found: try /metrics or /healthz\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of metric `name` of table `table` in the exposition `text`.
    fn value(text: &str, name: &str, table: &str) -> Option<f64> {
        let series = format!("{name}{{table=\"{table}\"}}");
        text.lines()
            .find(|l| l.starts_with(&series) && !l.starts_with('#'))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    /// The value of metric `name` of table `sessions` in the exposition `text`.
    fn v(text: &str, name: &str) -> Option<f64> {
        value(text, name, "sessions")
    }

    #[test]
    fn a_standby_shows_as_not_leading_and_healthy_and_conflicts_add_up() {
        let m = DaemonMetrics::new(&["sessions"], Duration::from_secs(60));
        let stood_by = |mismatch, released| SweepReport {
            table: "sessions".into(),
            stood_by: 1,
            lease_layout_mismatch: mismatch,
            lease_released: released,
            ..SweepReport::default()
        };
        m.record(&SweepReport {
            table: "sessions".into(),
            windows_swept: 1,
            write_conflicts_retried: 2,
            ..SweepReport::default()
        });
        let text = m.render();
        assert_eq!(v(&text, "ttl_sweeper_leader"), Some(1.0), "{text}");
        assert_eq!(
            v(&text, "ttl_sweeper_write_conflicts_retried_total"),
            Some(2.0)
        );
        m.record(&stood_by(0, 0));
        let text = m.render();
        assert_eq!(v(&text, "ttl_sweeper_leader"), Some(0.0), "{text}");
        assert_eq!(v(&text, "ttl_sweeper_stood_by_total"), Some(1.0), "{text}");
        // A fresh daemon that only ever stood by is healthy.
        let standby = DaemonMetrics::new(&["sessions"], Duration::from_secs(60));
        standby.record(&stood_by(0, 0));
        assert!(standby.health().ever_succeeded);
        // One that stood by beside a holder of another layout is not, and is counted.
        let mismatched = DaemonMetrics::new(&["sessions"], Duration::from_secs(60));
        mismatched.record(&stood_by(1, 0));
        assert!(!mismatched.health().ever_succeeded);
        let text = mismatched.render();
        assert_eq!(
            v(&text, "ttl_sweeper_lease_layout_mismatch_total"),
            Some(1.0),
            "{text}"
        );
        m.record(&stood_by(0, 1));
        let text = m.render();
        assert_eq!(
            v(&text, "ttl_sweeper_lease_released_total"),
            Some(1.0),
            "{text}"
        );
    }

    #[test]
    fn the_follower_s_totals_and_record_age_are_served() {
        let m = DaemonMetrics::new(&["sessions"], Duration::from_secs(60));
        let mut report = FollowReport {
            retried_records: 40,
            record_age_ms: 36_500,
            ..FollowReport::default()
        };
        report.index.records = 50;
        m.record_stream("sessions", &report);
        let text = m.render();
        let retried = "ttl_sweeper_stream_retried_records_total";
        assert_eq!(v(&text, retried), Some(40.0), "{text}");
        assert_eq!(v(&text, "ttl_sweeper_stream_records_total"), Some(50.0));
        assert_eq!(
            v(&text, "ttl_sweeper_stream_skipped_records_total"),
            Some(0.0)
        );
        assert_eq!(v(&text, STREAM_AGE), Some(36.5), "{text}");
        assert!(
            text.contains(&format!("# TYPE {retried} counter")),
            "{text}"
        );
        // Caught up: the age goes back to 0, the totals stay.
        report.record_age_ms = 0;
        m.record_stream("sessions", &report);
        let text = m.render();
        assert_eq!(v(&text, STREAM_AGE), Some(0.0), "{text}");
        assert_eq!(v(&text, retried), Some(40.0), "{text}");
    }

    #[test]
    fn counters_add_up_sweeps_and_gauges_hold_the_period() {
        let m = DaemonMetrics::new(&["sessions"], Duration::from_secs(60));
        let text = m.render();
        assert_eq!(
            v(&text, "ttl_sweeper_items_deleted_total"),
            Some(0.0),
            "{text}"
        );
        assert!(
            text.contains("# TYPE ttl_sweeper_items_deleted_total counter"),
            "{text}"
        );
        let sweep = SweepReport {
            items_deleted: 5,
            items_found: 6,
            items_skipped: 1,
            windows_swept: 2,
            table: "sessions".into(),
            ..SweepReport::default()
        };
        m.record(&sweep);
        m.record(&sweep);
        m.record_period(&SweepReport {
            items_left: 3,
            lag: crate::engine::LagStats {
                p50_ms: 100,
                p99_ms: 250,
                max_ms: 1500,
            },
            table: "sessions".into(),
            ..SweepReport::default()
        });
        let text = m.render();
        let deleted = v(&text, "ttl_sweeper_items_deleted_total");
        assert_eq!(deleted, Some(10.0), "{text}");
        assert_eq!(v(&text, "ttl_sweeper_items_found_total"), Some(12.0));
        assert_eq!(v(&text, "ttl_sweeper_items_skipped_total"), Some(2.0));
        assert_eq!(v(&text, "ttl_sweeper_windows_swept_total"), Some(4.0));
        assert_eq!(v(&text, "ttl_sweeper_sweeps_total"), Some(2.0));
        assert_eq!(v(&text, "ttl_sweeper_sweeps_failed_total"), Some(0.0));
        assert_eq!(v(&text, "ttl_sweeper_items_left"), Some(3.0));
        assert_eq!(v(&text, "ttl_sweeper_max_expiry_lag_seconds"), Some(1.5));
        assert_eq!(v(&text, "ttl_sweeper_p99_expiry_lag_seconds"), Some(0.25));
        assert!(
            text.contains("# TYPE ttl_sweeper_items_left gauge"),
            "{text}"
        );
    }

    #[test]
    fn health_turns_503_without_a_successful_sweep_and_back_on_one() {
        // Instants are given, not waited for: a loaded machine cannot move the verdicts.
        let limit = Duration::from_secs(60);
        let later = |by: Duration| Instant::now() + by;
        let m = DaemonMetrics::new(&["t"], limit);
        let made = Instant::now();
        // A pause, so that whatever comes next happens strictly after `made`.
        std::thread::sleep(Duration::from_millis(10));
        assert!(m.health().healthy, "healthy right after start-up");
        assert!(!m.health().ever_succeeded);
        let past_limit = limit + Duration::from_secs(1);
        assert!(
            !m.health_at(later(past_limit)).healthy,
            "no sweep for longer than the limit"
        );
        let failed = SweepReport {
            items_failed: 1,
            windows_swept: 2,
            table: "t".into(),
            ..SweepReport::default()
        };
        m.record(&failed);
        assert!(
            !m.health_at(later(past_limit)).healthy,
            "a failed sweep does not count"
        );
        m.record(&SweepReport {
            table: "t".into(),
            ..SweepReport::default()
        });
        assert!(
            !m.health_at(later(past_limit)).healthy,
            "a sweep that read no window does not count"
        );
        // Still counted from start-up: the sweeps above came later (after the pause) and did
        // not reset it.
        let now = Instant::now();
        let health = m.health_at(now);
        assert!(!health.ever_succeeded, "{health:?}");
        assert!(health.since_success >= now - made, "{health:?}");
        let before = Instant::now();
        m.record(&SweepReport {
            windows_swept: 1,
            table: "t".into(),
            ..SweepReport::default()
        });
        let after = Instant::now();
        let health = m.health_at(after);
        assert!(health.healthy && health.ever_succeeded, "{health:?}");
        assert!(
            health.since_success <= after - before,
            "counted from the successful sweep, not from start-up: {health:?}"
        );
        assert!(!m.health_at(after + past_limit).healthy);
        assert_eq!(
            value(&m.render(), "ttl_sweeper_sweeps_failed_total", "t"),
            Some(1.0)
        );
    }

    #[test]
    fn health_is_the_table_longest_without_success() {
        let limit = Duration::from_secs(60);
        let m = DaemonMetrics::new(&["a", "b"], limit);
        let swept = |table: &str| SweepReport {
            table: table.into(),
            windows_swept: 1,
            ..SweepReport::default()
        };
        m.record(&swept("a"));
        let past_limit = Instant::now() + limit + Duration::from_secs(1);
        assert!(!m.health_at(past_limit).healthy, "b never swept");
        assert!(!m.health().ever_succeeded);
        m.record(&swept("b"));
        assert!(m.health().ever_succeeded && m.health().healthy);
        let text = m.render();
        for table in ["a", "b"] {
            let sweeps = value(&text, "ttl_sweeper_sweeps_total", table);
            assert_eq!(sweeps, Some(1.0), "{text}");
        }
    }

    /// A server on a free 127.0.0.1 port with the default limits, stopped when the token is.
    async fn server() -> (SocketAddr, CancellationToken) {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let metrics = Arc::new(DaemonMetrics::new(&["t"], Duration::from_secs(60)));
        tokio::spawn(serve(listener, metrics, shutdown.clone()));
        (addr, shutdown)
    }

    /// Sends a whole `GET /healthz` on `stream` and reads the status line, within `within`.
    async fn status_within(stream: &mut tokio::net::TcpStream, within: Duration) -> Option<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0; 64];
        let n = tokio::time::timeout(within, stream.read(&mut buf))
            .await
            .ok()?
            .ok()?;
        Some(
            String::from_utf8_lossy(&buf[..n])
                .lines()
                .next()?
                .to_owned(),
        )
    }

    #[tokio::test]
    async fn a_client_that_never_finishes_its_headers_is_dropped() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (addr, shutdown) = server().await;
        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n")
            .await
            .unwrap();
        let mut buf = [0; 256];
        let read = tokio::time::timeout(HEADER_TIMEOUT + Duration::from_secs(2), async {
            loop {
                match slow.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {} // an error response before the close is fine
                }
            }
        })
        .await;
        assert!(
            read.is_ok(),
            "the connection was still open after the header timeout"
        );
        shutdown.cancel();
    }

    #[tokio::test]
    async fn connections_beyond_the_cap_wait_until_one_ends() {
        let (addr, shutdown) = server().await;
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        // Give the server time to accept them all.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
        assert_eq!(
            status_within(&mut extra, Duration::from_millis(1000)).await,
            None,
            "a connection beyond the cap was served while {MAX_CONNECTIONS} were open"
        );
        drop(idle);
        let mut next = tokio::net::TcpStream::connect(addr).await.unwrap();
        let status = status_within(&mut next, Duration::from_secs(5)).await;
        assert_eq!(status.as_deref(), Some("HTTP/1.1 200 OK"));
        shutdown.cancel();
    }
}
