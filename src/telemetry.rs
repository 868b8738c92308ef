//! Logs and metrics: tracing subscribers for the Lambda (JSON with the Powertools keys) and the
//! CLI (text on stderr, or the same JSON), the one-line sweep summary, CloudWatch Embedded Metric
//! Format (EMF) records, and the daemon's Prometheus endpoint ([`endpoint`]).
//!
//! The EMF records are written here from the one [`SweepReport`], not through the `metrics`
//! facade, whose counters leave zeros out (the alarms on `ItemsFailed` rely on every record
//! carrying it): `docs/design.md`, "One route to DynamoDB".

pub mod counters;
mod powertools;

pub mod endpoint;

pub use powertools::{service_name, trace_root, Invocation, PowertoolsJson, DEFAULT_SERVICE};

use serde_json::{json, Value};
use tracing::Level;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::EnvFilter;

use crate::engine::SweepReport;
use counters::SWEEP_METRICS;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber: `format` lines on stderr (the CLI keeps stdout for its report)
/// or stdout (Lambda), filtered by `AWS_LAMBDA_LOG_LEVEL`, `POWERTOOLS_LOG_LEVEL` or `RUST_LOG`
/// (the first set), else `default_level`. Text lines are coloured only on a terminal, without
/// `NO_COLOR`.
pub fn init(format: LogFormat, default_level: &str, to_stdout: bool) {
    use std::io::{stderr, stdout, IsTerminal};
    let filter = ["AWS_LAMBDA_LOG_LEVEL", "POWERTOOLS_LOG_LEVEL"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|s| !s.trim().is_empty()))
        .map(|s| EnvFilter::new(s.trim().to_ascii_lowercase()))
        .unwrap_or_else(|| {
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level))
        });
    let (writer, terminal) = if to_stdout {
        (BoxMakeWriter::new(stdout), stdout().is_terminal())
    } else {
        (BoxMakeWriter::new(stderr), stderr().is_terminal())
    };
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(terminal && !no_color)
        .with_writer(writer);
    // A second init (tests, embedding) keeps the first subscriber.
    let _ = match format {
        LogFormat::Json => builder.event_format(PowertoolsJson::from_env()).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// The CLI's log filter for `-v` given `verbose` times: this crate's info lines alone (the CLI
/// says what failed, once); with `-v` its debug lines; with `-vv` its trace lines and every
/// library's debug lines; with `-vvv` everything.
pub fn cli_filter(verbose: u8) -> &'static str {
    match verbose {
        0 => "ttl_sweeper=info",
        1 => "ttl_sweeper=debug",
        2 => "debug,ttl_sweeper=trace",
        _ => "trace",
    }
}

/// One summary line of `$report` at `$level`: the same fields at every level, so the line an
/// operator reads after a failure says everything the success line says.
macro_rules! summary_event {
    ($level:expr, $report:expr, $message:literal) => {{
        let r: &SweepReport = $report;
        tracing::event!(
            $level,
            table = %r.table,
            sweep_at = %r.sweep_at,
            windows_swept = r.windows_swept,
            windows_left = r.windows_left,
            found = r.items_found,
            deleted = r.items_deleted,
            skipped = r.items_skipped,
            gone = r.items_gone,
            failed = r.items_failed,
            invalid = r.items_invalid,
            retried = r.items_retried,
            write_conflicts_retried = r.write_conflicts_retried,
            left = r.items_left,
            confirmed = r.items_confirmed,
            reread = r.items_reread,
            conditional = r.items_conditional,
            lag_p50_ms = r.lag.p50_ms,
            lag_p99_ms = r.lag.p99_ms,
            lag_max_ms = r.lag.max_ms,
            duration_ms = r.duration_ms,
            stopped_early = r.stopped_early,
            ticks = r.ticks,
            stood_by = r.stood_by,
            lease_layout_mismatch = r.lease_layout_mismatch,
            lease_released = r.lease_released,
            clock_ahead_ms = r.clock_ahead_ms,
            checkpoint = r.checkpoint_after.as_deref().unwrap_or(""),
            errors = r.errors.len() as u64 + r.errors_dropped,
            first_error = r.errors.first().map(|e| e.message.as_str()).unwrap_or(""),
            first_errors = %first_errors(r),
            failed_keys = %failed_keys(r),
            events_published = r.events_published,
            events_failed = r.events_failed,
            events_cancelled = r.events_cancelled,
            events_truncated = r.events_truncated,
            failed_event_ids = %failed_events(r),
            $message
        )
    }};
}

/// Logs a tick's line when it found something or failed: the summary's fields as `tick finished`
/// (or `... with failures`), so that `sweep finished` lines stay the ones to sum over.
pub fn log_tick(report: &SweepReport) {
    if !report.is_success() {
        summary_event!(Level::ERROR, report, "tick finished with failures");
    } else if report.items_found > 0 {
        summary_event!(Level::INFO, report, "tick finished");
    }
}

/// Failed keys shown in a summary line; the report has them all (up to its cap).
pub const LOGGED_FAILED_KEYS: usize = 10;

/// Errors shown in a summary line.
pub const LOGGED_ERRORS: usize = 3;

/// The first failed keys with their reasons, as JSON: what an operator needs to find them.
fn failed_keys(r: &SweepReport) -> String {
    let keys = r.failed_keys.iter();
    first_as_json(keys.map(|f| json!({"key": f.key, "reason": f.reason})))
}

/// The first expiry events not published, with their reasons, as JSON.
fn failed_events(r: &SweepReport) -> String {
    let events = r.failed_event_ids.iter();
    first_as_json(events.map(|f| json!({"id": f.id, "key": f.key, "reason": f.reason})))
}

/// The first [`LOGGED_FAILED_KEYS`] of `shown` as a JSON array; empty when there are none.
fn first_as_json(shown: impl Iterator<Item = Value>) -> String {
    let shown: Vec<Value> = shown.take(LOGGED_FAILED_KEYS).collect();
    if shown.is_empty() {
        return String::new();
    }
    Value::Array(shown).to_string()
}

/// The first errors, with the partition they stopped, separated by ` | `.
fn first_errors(r: &SweepReport) -> String {
    r.errors
        .iter()
        .take(LOGGED_ERRORS)
        .map(|e| match &e.window {
            Some(w) => format!("{w}: {}", e.message),
            None => e.message.clone(),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Logs the one summary line of a sweep: `info` when it succeeded, `error` when not.
pub fn log_summary(report: &SweepReport) {
    if report.is_success() {
        summary_event!(Level::INFO, report, "sweep finished");
    } else {
        summary_event!(Level::ERROR, report, "sweep finished with failures");
    }
}

/// The EMF record of a sweep: one JSON object that CloudWatch Logs turns into the report's
/// metrics ([`SWEEP_METRICS`]), dimensioned by `TableName`; the leader lease's and
/// `WriteConflictsRetried` only where they are not 0.
pub fn emf_record(report: &SweepReport, namespace: &str, timestamp_ms: i64) -> Value {
    let metrics: Vec<(&str, &str, Value)> = SWEEP_METRICS
        .iter()
        .filter(|m| !m.only_when_not_zero || (m.read)(report) != 0)
        .map(|m| {
            let raw = (m.read)(report);
            let value = match m.seconds {
                true => json!(raw as f64 / 1000.0),
                false => json!(raw),
            };
            (m.emf, m.unit(), value)
        })
        .collect();
    let mut record = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["TableName"]],
                "Metrics": metrics
                    .iter()
                    .map(|(name, unit, _)| json!({"Name": name, "Unit": unit}))
                    .collect::<Vec<_>>(),
            }],
        },
        "TableName": report.table,
    });
    for (name, _, value) in metrics {
        record[name] = value;
    }
    record
}

/// The EMF record of a cold start, as Powertools writes it: `ColdStart` = 1 (Count) in
/// `namespace`, by `function_name` and `service`, in a record of its own (no `TableName`).
pub fn cold_start_record(
    namespace: &str,
    function_name: &str,
    service: &str,
    timestamp_ms: i64,
) -> Value {
    json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["function_name", "service"]],
                "Metrics": [{"Name": "ColdStart", "Unit": "Count"}],
            }],
        },
        "function_name": function_name,
        "service": service,
        "ColdStart": 1,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A log writer that keeps what it is given, for tests that read log lines back.
    #[derive(Clone, Default)]
    pub(crate) struct Buf(pub(crate) std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Buf {
        /// A subscriber writing JSON lines, their fields at the top level, into this buffer.
        pub(crate) fn json_subscriber(&self) -> impl tracing::Subscriber {
            let writer = self.clone();
            let format = tracing_subscriber::fmt().json().flatten_event(true);
            format.with_writer(move || writer.clone()).finish()
        }

        /// What was written, and its lines as JSON.
        pub(crate) fn json_lines(&self) -> (String, Vec<Value>) {
            let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            let lines = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            (text, lines)
        }
    }

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The names of the metrics EMF record `v` declares, each checked to have a number.
    fn declared(v: &Value) -> Vec<&str> {
        let metrics = v["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array();
        let names: Vec<&str> = metrics
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        for name in &names {
            assert!(v.get(name).is_some_and(Value::is_number), "{name}: {v}");
        }
        names
    }

    #[test]
    fn the_global_tables_metrics_appear_only_in_records_where_they_happened() {
        let record = |report: &SweepReport| emf_record(report, "TtlSweeper", 0);
        let quiet = record(&SweepReport::default());
        let names = declared(&quiet);
        assert_eq!(names.len(), 14, "{names:?}");
        assert!(!names.contains(&"SweepsStoodBy"));
        assert!(!names.contains(&"LeaseLayoutMismatch"));
        let v = record(&SweepReport {
            stood_by: 3,
            write_conflicts_retried: 2,
            ..SweepReport::default()
        });
        assert_eq!(v["SweepsStoodBy"], 3);
        assert_eq!(v["WriteConflictsRetried"], 2);
        assert_eq!(declared(&v).len(), 16);
        let v = record(&SweepReport {
            stood_by: 2,
            lease_layout_mismatch: 2,
            ..SweepReport::default()
        });
        assert_eq!(v["LeaseLayoutMismatch"], 2);
        assert_eq!(declared(&v).len(), 16);
    }

    #[test]
    fn emf_record_declares_every_metric_it_carries() {
        let report = SweepReport {
            table: "sessions".into(),
            items_deleted: 7,
            items_failed: 1,
            windows_swept: 16,
            lag: crate::engine::LagStats {
                p50_ms: 400,
                p99_ms: 900,
                max_ms: 1500,
            },
            ..SweepReport::default()
        };
        let v = emf_record(&report, "TtlSweeper", 1_658_264_100_000);
        let decl = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(decl["Namespace"], "TtlSweeper");
        assert_eq!(decl["Dimensions"], json!([["TableName"]]));
        assert_eq!(v["_aws"]["Timestamp"], 1_658_264_100_000i64);
        assert_eq!(v["TableName"], "sessions");
        let names = declared(&v);
        for required in [
            "ItemsDeleted",
            "ItemsSkipped",
            "ItemsFailed",
            "MaxExpiryLagSeconds",
            "WindowsSwept",
            "EventsPublished",
            "EventsFailed",
        ] {
            assert!(names.contains(&required), "{required} missing");
        }
        assert_eq!(v["ItemsDeleted"], 7);
        assert_eq!(v["ItemsFailed"], 1);
        assert_eq!(v["MaxExpiryLagSeconds"], 1.5);
    }

    #[test]
    fn cold_start_record_is_one_metric_by_function_and_service() {
        let v = cold_start_record("TtlSweeper", "sweeper-fn", "ttl-sweeper", 1_000);
        let decl = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(decl["Namespace"], "TtlSweeper");
        assert_eq!(decl["Dimensions"], json!([["function_name", "service"]]));
        assert_eq!(
            decl["Metrics"],
            json!([{"Name": "ColdStart", "Unit": "Count"}])
        );
        assert_eq!(v["ColdStart"], 1);
        assert_eq!(v["function_name"], "sweeper-fn");
        assert_eq!(v["service"], "ttl-sweeper");
        assert!(v.get("TableName").is_none());
    }

    #[test]
    fn success_and_failure_summaries_carry_the_same_fields() {
        use std::collections::BTreeSet;

        let buf = Buf::default();
        tracing::subscriber::with_default(buf.json_subscriber(), || {
            log_summary(&SweepReport::default());
            log_summary(&SweepReport {
                items_failed: 1,
                failed_keys: vec![crate::engine::FailedKey {
                    key: json!({"id": {"S": "user#42"}}),
                    reason: "BatchWriteItem failed (Throttled)".into(),
                }],
                errors: vec![crate::engine::SweepErrorEntry {
                    window: Some("w1".into()),
                    kind: crate::store::ErrorKind::Validation,
                    message: "index gone".into(),
                }],
                ..SweepReport::default()
            });
        });
        let (text, lines) = buf.json_lines();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(
            (lines[0]["level"].as_str(), lines[1]["level"].as_str()),
            (Some("INFO"), Some("ERROR"))
        );
        let fields = |v: &Value| -> BTreeSet<String> {
            v.as_object()
                .unwrap()
                .keys()
                .filter(|k| !matches!(k.as_str(), "timestamp" | "level" | "message" | "target"))
                .cloned()
                .collect()
        };
        assert_eq!(fields(&lines[0]), fields(&lines[1]));
        for field in [
            "left",
            "retried",
            "invalid",
            "lag_p99_ms",
            "stopped_early",
            "ticks",
            "checkpoint",
            "first_error",
            "events_published",
            "events_failed",
            "failed_event_ids",
        ] {
            assert!(
                fields(&lines[1]).contains(field),
                "failure line lacks {field}: {text}"
            );
        }
    }
}
