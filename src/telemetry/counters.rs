//! [`SWEEP_METRICS`]: every metric of a sweep's report, once: its EMF name and unit, its
//! Prometheus name and kind, when an EMF record carries it, what it means, and the report field it
//! reads. The EMF record, the daemon's `/metrics` and docs/operations.md's table are made from it.

use crate::engine::SweepReport;

/// How `/metrics` shows a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A counter (`…_total`): each sweep's value added.
    Counter,
    /// A gauge: the reporting period's value (the interval report `run` logs).
    Gauge,
}

/// One metric of a sweep's report.
#[derive(Debug, Clone, Copy)]
pub struct SweepMetric {
    /// Its EMF (CloudWatch) name.
    pub emf: &'static str,
    /// Its Prometheus name.
    pub prometheus: &'static str,
    /// Whether it is in seconds (read from milliseconds); else a count.
    pub seconds: bool,
    /// How `/metrics` shows it.
    pub kind: Kind,
    /// Whether an EMF record carries it only when it is not 0: a custom metric is billed from its
    /// first data point, and most sweepers never have one.
    pub only_when_not_zero: bool,
    /// What it means (the Prometheus help, and the docs' table).
    pub help: &'static str,
    /// The report's value: a count, or milliseconds.
    pub read: fn(&SweepReport) -> u64,
}

impl SweepMetric {
    /// Its value in `report`: a count, or seconds.
    pub fn value(&self, report: &SweepReport) -> f64 {
        let raw = (self.read)(report);
        match self.seconds {
            true => raw as f64 / 1000.0,
            false => raw as f64,
        }
    }

    /// Its CloudWatch unit.
    pub fn unit(&self) -> &'static str {
        match self.seconds {
            true => "Seconds",
            false => "Count",
        }
    }
}

/// A counter; the other shapes below are made from it.
const COUNT: SweepMetric = SweepMetric {
    emf: "",
    prometheus: "",
    seconds: false,
    kind: Kind::Counter,
    only_when_not_zero: false,
    help: "",
    read: |_| 0,
};
/// A reporting period's count.
const GAUGE: SweepMetric = SweepMetric {
    kind: Kind::Gauge,
    ..COUNT
};
/// A reporting period's value in seconds, read from milliseconds.
const SECONDS: SweepMetric = SweepMetric {
    seconds: true,
    ..GAUGE
};
/// A counter in an EMF record only when it is not 0.
const RARE: SweepMetric = SweepMetric {
    only_when_not_zero: true,
    ..COUNT
};

/// `SHAPE "Emf" "prometheus" (read) "help";` a metric of one of the shapes above.
macro_rules! metrics {
    ($($shape:ident $emf:literal $prometheus:literal ($read:expr) $help:literal;)*) => {
        [$(SweepMetric { emf: $emf, prometheus: $prometheus, help: $help, read: $read, ..$shape }),*]
    };
}

/// Every metric of a sweep's report, in the order of the EMF record.
#[rustfmt::skip]
pub const SWEEP_METRICS: [SweepMetric; 18] = metrics![
    COUNT "ItemsDeleted" "ttl_sweeper_items_deleted_total" (|r| r.items_deleted)
        "Items deleted";
    COUNT "ItemsSkipped" "ttl_sweeper_items_skipped_total" (|r| r.items_skipped)
        "Items kept: the table's ttl was not the one listed";
    COUNT "ItemsGone" "ttl_sweeper_items_gone_total" (|r| r.items_gone)
        "Items already deleted";
    COUNT "ItemsFailed" "ttl_sweeper_items_failed_total" (|r| r.items_failed)
        "Items whose delete failed past its retries; alarm on > 0";
    COUNT "ItemsFound" "ttl_sweeper_items_found_total" (|r| r.items_found)
        "Expired items the sweeps found";
    GAUGE "ItemsLeft" "ttl_sweeper_items_left" (|r| r.items_left)
        "Expired items a sweep left for the next (its deadline or read budget ran out); > 0 for 3 periods running: sweeps cannot keep up";
    COUNT "WindowsSwept" "ttl_sweeper_windows_swept_total" (|r| r.windows_swept as u64)
        "Windows (index partitions) read";
    SECONDS "MaxExpiryLagSeconds" "ttl_sweeper_max_expiry_lag_seconds" (|r| r.lag.max_ms)
        "The longest expiry lag: the delete's acknowledgement minus the ttl; alarm above your target";
    SECONDS "P99ExpiryLagSeconds" "ttl_sweeper_p99_expiry_lag_seconds" (|r| r.lag.p99_ms)
        "The 99th percentile of the expiry lag";
    SECONDS "ClockAheadSeconds" "ttl_sweeper_clock_ahead_seconds" (|r| r.clock_ahead_ms)
        "> 0: the host clock ran ahead of DynamoDB's and sweeps were held back";
    COUNT "EventsPublished" "ttl_sweeper_events_published_total" (|r| r.events_published)
        "Expiry events the sink accepted";
    COUNT "EventsFailed" "ttl_sweeper_events_failed_total" (|r| r.events_failed)
        "Expiry events not published past their retries (in archive mode their items were kept)";
    COUNT "EventsCancelled" "ttl_sweeper_events_cancelled_total" (|r| r.events_cancelled)
        "Archive mode: events cancelled, their item's ttl having changed after the publish";
    COUNT "EventsTruncated" "ttl_sweeper_events_truncated_total" (|r| r.events_truncated)
        "Expiry events sent without the item, which did not fit the sink's size limit";
    RARE "SweepsStoodBy" "ttl_sweeper_stood_by_total" (|r| u64::from(r.stood_by))
        "LEADER_LEASE: sweeps that stood by while another sweeper held the lease";
    RARE "LeaseLayoutMismatch" "ttl_sweeper_lease_layout_mismatch_total" (|r| u64::from(r.lease_layout_mismatch))
        "LEADER_LEASE: sweeps that stood by beside a lease held with another layout (index, windows, ttl attribute or shard range) than this sweeper's";
    RARE "LeaseReleased" "ttl_sweeper_lease_released_total" (|r| u64::from(r.lease_released))
        "LEADER_LEASE: times this sweeper gave the lease up: its sweeps had failed (a store error, or every delete failed) and none had succeeded for a lease";
    RARE "WriteConflictsRetried" "ttl_sweeper_write_conflicts_retried_total" (|r| r.write_conflicts_retried)
        "Delete requests refused with ReplicatedWriteConflictException (multi-Region strong consistency) and sent again";
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_say_their_kind_and_unit() {
        let mut emf: Vec<&str> = SWEEP_METRICS.iter().map(|m| m.emf).collect();
        let mut prometheus: Vec<&str> = SWEEP_METRICS.iter().map(|m| m.prometheus).collect();
        emf.sort();
        emf.dedup();
        prometheus.sort();
        prometheus.dedup();
        assert_eq!((emf.len(), prometheus.len()), (18, 18));
        for m in SWEEP_METRICS {
            assert!(m.prometheus.starts_with("ttl_sweeper_"), "{}", m.prometheus);
            let total = m.prometheus.ends_with("_total");
            assert_eq!(total, m.kind == Kind::Counter, "{}", m.prometheus);
            assert_eq!(m.seconds, m.emf.ends_with("Seconds"), "{}", m.emf);
            assert_eq!(
                m.seconds,
                m.prometheus.ends_with("_seconds"),
                "{}",
                m.prometheus
            );
        }
    }

    #[test]
    fn each_reads_its_own_field() {
        let report = SweepReport {
            items_deleted: 3,
            items_left: 4,
            windows_swept: 5,
            stood_by: 6,
            clock_ahead_ms: 1500,
            ..SweepReport::default()
        };
        let value = |emf: &str| {
            let m = SWEEP_METRICS.iter().find(|m| m.emf == emf).unwrap();
            m.value(&report)
        };
        assert_eq!(value("ItemsDeleted"), 3.0);
        assert_eq!(value("ItemsLeft"), 4.0);
        assert_eq!(value("WindowsSwept"), 5.0);
        assert_eq!(value("SweepsStoodBy"), 6.0);
        assert_eq!(value("ClockAheadSeconds"), 1.5);
        assert_eq!(value("ItemsFailed"), 0.0);
    }
}
