//! Logs and metrics: tracing subscribers for the Lambda (JSON, for CloudWatch Logs) and the CLI
//! (text on stderr), the one-line sweep summary, and CloudWatch Embedded Metric Format (EMF)
//! records, which CloudWatch turns into metrics with no agent and no API calls.

use serde_json::{json, Value};
use tracing_subscriber::EnvFilter;

use crate::sweep::SweepReport;

/// CloudWatch namespace of the EMF metrics unless `METRICS_NAMESPACE` says otherwise.
pub const DEFAULT_NAMESPACE: &str = "TtlSweeper";

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber: `format` lines on stderr (the CLI keeps stdout for its report)
/// or stdout (Lambda), filtered by `RUST_LOG` / `AWS_LAMBDA_LOG_LEVEL`, else `default_level`.
pub fn init(format: LogFormat, default_level: &str, to_stdout: bool) {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .ok()
        .filter(|s| !s.is_empty())
        .map(|s| s.to_ascii_lowercase());
    let filter = match level {
        Some(l) => EnvFilter::new(l),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let result = match (format, to_stdout) {
        (LogFormat::Json, true) => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_writer(std::io::stdout)
            .try_init(),
        (LogFormat::Json, false) => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_writer(std::io::stderr)
            .try_init(),
        (LogFormat::Text, true) => builder.with_writer(std::io::stdout).try_init(),
        (LogFormat::Text, false) => builder.with_writer(std::io::stderr).try_init(),
    };
    // A second init (tests, embedding) keeps the first subscriber.
    let _ = result;
}

/// Logs a tick's summary when it found something or failed (quiet ticks stay quiet).
pub fn log_tick(report: &SweepReport) {
    if report.items_found > 0 || !report.is_success() {
        log_summary(report);
    }
}

/// Logs the one summary line of a sweep.
pub fn log_summary(report: &SweepReport) {
    if report.is_success() {
        tracing::info!(
            table = %report.table,
            sweep_at = %report.sweep_at,
            windows_swept = report.windows_swept,
            windows_left = report.windows_left,
            found = report.items_found,
            deleted = report.items_deleted,
            skipped = report.items_skipped,
            gone = report.items_gone,
            failed = report.items_failed,
            invalid = report.items_invalid,
            retried = report.items_retried,
            left = report.items_left,
            lag_p50_ms = report.lag.p50_ms,
            lag_p99_ms = report.lag.p99_ms,
            lag_max_ms = report.lag.max_ms,
            duration_ms = report.duration_ms,
            stopped_early = report.stopped_early,
            ticks = report.ticks,
            checkpoint = report.checkpoint_after.as_deref().unwrap_or(""),
            "sweep finished"
        );
    } else {
        tracing::error!(
            table = %report.table,
            sweep_at = %report.sweep_at,
            windows_swept = report.windows_swept,
            windows_left = report.windows_left,
            found = report.items_found,
            deleted = report.items_deleted,
            skipped = report.items_skipped,
            gone = report.items_gone,
            failed = report.items_failed,
            errors = report.errors.len(),
            first_error = report.errors.first().map(|e| e.message.as_str()).unwrap_or(""),
            duration_ms = report.duration_ms,
            "sweep finished with failures"
        );
    }
}

/// The EMF record of a sweep: one JSON object that CloudWatch Logs turns into the metrics
/// `ItemsDeleted`, `ItemsSkipped`, `ItemsGone`, `ItemsFailed`, `ItemsFound`, `ItemsLeft`, `WindowsSwept`,
/// `MaxExpiryLagSeconds` and `P99ExpiryLagSeconds`, dimensioned by `TableName`.
pub fn emf_record(report: &SweepReport, namespace: &str, timestamp_ms: i64) -> Value {
    let metrics = [
        ("ItemsDeleted", "Count", json!(report.items_deleted)),
        ("ItemsSkipped", "Count", json!(report.items_skipped)),
        ("ItemsGone", "Count", json!(report.items_gone)),
        ("ItemsFailed", "Count", json!(report.items_failed)),
        ("ItemsFound", "Count", json!(report.items_found)),
        ("ItemsLeft", "Count", json!(report.items_left)),
        ("WindowsSwept", "Count", json!(report.windows_swept)),
        (
            "MaxExpiryLagSeconds",
            "Seconds",
            json!(report.lag.max_ms as f64 / 1000.0),
        ),
        (
            "P99ExpiryLagSeconds",
            "Seconds",
            json!(report.lag.p99_ms as f64 / 1000.0),
        ),
    ];
    let mut record = serde_json::Map::new();
    record.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["TableName"]],
                "Metrics": metrics
                    .iter()
                    .map(|(name, unit, _)| json!({"Name": name, "Unit": unit}))
                    .collect::<Vec<_>>(),
            }],
        }),
    );
    record.insert("TableName".into(), json!(report.table));
    for (name, _, value) in metrics {
        record.insert(name.into(), value);
    }
    Value::Object(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_record_declares_every_metric_it_carries() {
        let report = SweepReport {
            table: "sessions".into(),
            items_deleted: 7,
            items_failed: 1,
            windows_swept: 16,
            lag: crate::sweep::LagStats {
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
        let names: Vec<&str> = decl["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        for required in [
            "ItemsDeleted",
            "ItemsSkipped",
            "ItemsFailed",
            "MaxExpiryLagSeconds",
            "WindowsSwept",
        ] {
            assert!(names.contains(&required), "{required} missing");
        }
        for name in names {
            assert!(
                v.get(name).is_some_and(Value::is_number),
                "{name} has no value"
            );
        }
        assert_eq!(v["ItemsDeleted"], 7);
        assert_eq!(v["ItemsFailed"], 1);
        assert_eq!(v["MaxExpiryLagSeconds"], 1.5);
    }
}
