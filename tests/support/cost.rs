//! The monthly cost model behind every cost figure in the docs: `make bench` writes it into
//! docs/BENCHMARKS.md (sections 4 and 7), and `tests/readme.rs` renders the same blocks for
//! docs/BENCHMARKS.md, docs/scaling.md and infra/README.md and checks that each doc holds them
//! (`UPDATE_DOCS=1 cargo test --test readme cost` rewrites them).
//!
//! The inputs come from the code, not from the prose: the tick-mode run time per schedule period
//! is the period plus `HANDOFF_OVERLAP` (an invocation ticks until that long after the next one's
//! scheduled time, docs/design.md "Handoff"), the number of custom metrics is what `emf_record`
//! declares plus `ColdStart`, the alarms are the construct's four.

#![allow(dead_code)]

use std::fmt::Write;

/// When the prices below were read from AWS's pricing pages (us-east-1, on-demand).
pub const PRICES_DATE: &str = "2026-11-22";
/// DynamoDB on-demand write request unit.
pub const PRICE_WRU: f64 = 0.625 / 1e6;
/// DynamoDB on-demand read request unit.
pub const PRICE_RRU: f64 = 0.125 / 1e6;
/// Lambda on arm64, per GB-second.
pub const PRICE_LAMBDA_GBS_ARM: f64 = 0.000_013_333_4;
/// Lambda, per request.
pub const PRICE_LAMBDA_REQ: f64 = 0.20 / 1e6;
/// EventBridge Scheduler, per invocation (beyond its free tier of 14 million a month).
pub const PRICE_SCHEDULER_INVOCATION: f64 = 1.00 / 1e6;
/// CloudWatch custom metric, per metric and month (the first 10,000 metrics).
pub const PRICE_METRIC_MONTH: f64 = 0.30;
/// KMS customer managed key, per month.
pub const PRICE_KMS_KEY_MONTH: f64 = 1.00;
/// CloudWatch dashboard, per month beyond an account's first three.
pub const PRICE_DASHBOARD_MONTH: f64 = 3.00;
/// CloudWatch standard-resolution alarm, per month.
pub const PRICE_ALARM_MONTH: f64 = 0.10;
/// CloudWatch Logs ingestion, per GB.
pub const PRICE_LOGS_GB: f64 = 0.50;

/// A 30-day month, in seconds.
pub const MONTH_S: f64 = 30.0 * 86_400.0;
/// The schedule period the tables assume (the construct's default `rate(1 minute)`).
pub const PERIOD_S: f64 = 60.0;
/// Bytes of one summary or tick log line (the Powertools keys and the summary's fields; the
/// sample line in docs/operations.md is about this long) and of one EMF record.
pub const LOG_LINE_BYTES: f64 = 1_000.0;
/// Full sweeps read `LOOKBACK_WINDOWS + 1` windows (the default 15 + 1), ticks one or two: 2 to plan.
pub const FULL_SWEEP_QUERIES: f64 = 16.0;
/// Queries per tick, to plan.
pub const TICK_QUERIES: f64 = 2.0;

/// What the model takes from the code and from measurements.
#[derive(Debug, Clone, Copy)]
pub struct Inputs {
    /// `HANDOFF_OVERLAP` in seconds.
    pub overlap_s: f64,
    /// Custom metrics the function emits per table: `emf_record`'s plus `ColdStart`.
    pub metrics: usize,
    /// Alarms the construct creates by default.
    pub alarms: usize,
    /// Measured wall time per delete of one sweep, seconds (minute mode's run time).
    pub wall_per_delete_s: f64,
}

/// Alarms the construct creates by default (`infra/test/conveniences.test.ts` checks it).
pub const DEFAULT_ALARMS: usize = 4;

impl Inputs {
    /// The inputs the code decides ([`HANDOFF_OVERLAP`](ttl_sweeper::lambda::handler::HANDOFF_OVERLAP),
    /// the metrics of `emf_record` and `ColdStart`), with a measured wall time per delete.
    pub fn from_code(wall_per_delete_s: f64) -> Self {
        let record = ttl_sweeper::telemetry::emf_record(&Default::default(), "TtlSweeper", 0);
        let sweep_metrics = record["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .map_or(0, Vec::len);
        Self {
            overlap_s: ttl_sweeper::lambda::handler::HANDOFF_OVERLAP.as_secs_f64(),
            metrics: sweep_metrics + 1,
            alarms: DEFAULT_ALARMS,
            wall_per_delete_s,
        }
    }

    /// Seconds a tick-mode function runs (and is billed) per schedule period.
    pub fn tick_run_s(&self) -> f64 {
        PERIOD_S + self.overlap_s
    }

    /// Invocations a month.
    pub fn invocations(&self) -> f64 {
        MONTH_S / PERIOD_S
    }

    /// Lambda duration and requests of a tick-mode function at `mb` MB, a month.
    pub fn lambda_tick(&self, mb: f64) -> f64 {
        self.invocations() * (mb / 1024.0) * self.tick_run_s() * PRICE_LAMBDA_GBS_ARM
            + self.invocations() * PRICE_LAMBDA_REQ
    }

    /// Lambda of a function that sweeps once a minute and deletes `n` items a month at 128 MB.
    pub fn lambda_minute(&self, n: f64) -> f64 {
        let inv = self.invocations();
        inv * 0.125 * (0.2 + n / inv * self.wall_per_delete_s) * PRICE_LAMBDA_GBS_ARM
            + inv * PRICE_LAMBDA_REQ
    }

    /// Queries of tick mode at 1 s ticks (both invocations tick during the overlap) plus one
    /// full sweep per invocation, one shard, 0.5 read units each.
    pub fn queries_tick(&self) -> f64 {
        let ticks = self.invocations() * self.tick_run_s();
        (ticks * TICK_QUERIES + self.invocations() * FULL_SWEEP_QUERIES) * 0.5 * PRICE_RRU
    }

    /// The schedule's invocations (beyond the free tier).
    pub fn schedule(&self) -> f64 {
        self.invocations() * PRICE_SCHEDULER_INVOCATION
    }

    /// Log ingestion: a summary line and an EMF record per invocation, and a tick line for each
    /// 1 s tick that deleted something (`n` expiries a month spread evenly over the ticks).
    pub fn logs(&self, n: f64) -> f64 {
        let ticks = self.invocations() * self.tick_run_s();
        let busy_ticks = ticks * (1.0 - (-n / ticks).exp());
        (self.invocations() * 2.0 + busy_ticks) * LOG_LINE_BYTES / 1e9 * PRICE_LOGS_GB
    }

    /// The custom metrics.
    pub fn metrics_cost(&self) -> f64 {
        self.metrics as f64 * PRICE_METRIC_MONTH
    }

    /// The alarms.
    pub fn alarms_cost(&self) -> f64 {
        self.alarms as f64 * PRICE_ALARM_MONTH
    }

    /// The extras the construct adds by default: metrics, topic key, dashboard, alarms.
    pub fn default_extras(&self) -> f64 {
        self.metrics_cost() + PRICE_KMS_KEY_MONTH + PRICE_DASHBOARD_MONTH + self.alarms_cost()
    }

    /// The extras that props turn off: topic key, dashboard, alarms.
    pub fn optional_extras(&self) -> f64 {
        PRICE_KMS_KEY_MONTH + PRICE_DASHBOARD_MONTH + self.alarms_cost()
    }
}

/// The rows of the BENCHMARKS cost table: (expiries, cells).
fn month_rows(i: &Inputs) -> Vec<(f64, [f64; 11])> {
    [1e6, 1e8, 1e9]
        .into_iter()
        .map(|n| {
            let deletes = n * 2.0 * PRICE_WRU; // table delete + GSI entry removal
            let gsi_upkeep = n * PRICE_WRU; // the GSI write when the item (with its window) is written
            let lambda_tick = i.lambda_tick(128.0);
            let queries = i.queries_tick();
            let schedule = i.schedule();
            let logs = i.logs(n);
            let extras = i.default_extras();
            let bare =
                deletes + gsi_upkeep + lambda_tick + queries + schedule + logs + i.metrics_cost();
            let total = bare + i.optional_extras();
            let scheduler = n
                * (PRICE_SCHEDULER_INVOCATION
                    + PRICE_LAMBDA_REQ
                    + 0.125 * 0.05 * PRICE_LAMBDA_GBS_ARM
                    + PRICE_WRU);
            (
                n,
                [
                    deletes,
                    gsi_upkeep,
                    i.lambda_minute(n),
                    lambda_tick,
                    queries,
                    schedule + logs,
                    extras,
                    total,
                    bare,
                    0.0,
                    scheduler,
                ],
            )
        })
        .collect()
}

/// `1M`, `100M`, `1B`.
pub fn human(n: f64) -> String {
    if n >= 1e9 {
        format!("{}B", n / 1e9)
    } else if n >= 1e6 {
        format!("{}M", n / 1e6)
    } else {
        format!("{}k", n / 1e3)
    }
}

/// docs/BENCHMARKS.md section 4, between its `cost-model` markers.
pub fn benchmarks_section(i: &Inputs) -> String {
    let mut d = String::new();
    let _ = writeln!(d, "Prices (us-east-1, on-demand, as published by AWS on {PRICES_DATE}; check current pricing): write request unit ${:.3}/million, read request unit ${:.3}/million, Lambda arm64 ${:.10}/GB-s and $0.20/million requests, EventBridge Scheduler $1.00/million invocations, CloudWatch custom metrics ${PRICE_METRIC_MONTH:.2} each a month, alarms ${PRICE_ALARM_MONTH:.2} each, a dashboard ${PRICE_DASHBOARD_MONTH:.2} (beyond an account's first three), a KMS key ${PRICE_KMS_KEY_MONTH:.2}, log ingestion ${PRICE_LOGS_GB:.2}/GB. Items ≤ 1 KB. The sweeper runs at 128 MB with the construct's defaults, one shard.\n", PRICE_WRU * 1e6, PRICE_RRU * 1e6, PRICE_LAMBDA_GBS_ARM);
    let _ = writeln!(d, "| expiries / month | deletes (table + GSI) | GSI upkeep of writes | sweeper Lambda, minute | sweeper Lambda, tick 1 s | queries, tick 1 s | schedule and logs | metrics, key, dashboard, alarms | **ours, tick 1 s, total** | ours, tick 1 s, alarms, dashboard and key off | native TTL | per-item EventBridge Scheduler |");
    let _ = writeln!(d, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (n, c) in month_rows(i) {
        let _ = writeln!(d, "| {} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | **${:.2}** | ${:.2} | $0 (late: within days) | ${:.2} |", human(n), c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[10]);
    }
    let _ = writeln!(d, "\nAssumptions: each delete costs one WRU on the table and one on the GSI (the index entry is removed); every write that sets the window attribute costs one more WRU on the GSI (KEYS_ONLY entries are small). Minute mode runs about 0.2 s per invocation plus the measured wall time per delete ({:.2} µs, section 2). **Tick mode runs {:.0} s of every {:.0} s**: an invocation ticks from its scheduled time until `HANDOFF_OVERLAP` ({:.0} s, `src/lambda/handler.rs`) after the next one's, so two invocations overlap for {:.0} s of every period and both are billed; it makes {:.0} queries per tick (both invocations tick during the overlap) plus {:.0} per full sweep at 0.5 RRU each. The schedule: {} invocations a month (inside Scheduler's free tier of 14 million where it applies). Logs: a summary line and an EMF record per invocation and a `tick finished` line for each tick that deleted something, about {:.0} KB each. Defaults of the construct: {} custom metrics (the {} of each sweep's EMF record and `ColdStart`) ${:.2}, the alarm topic's KMS key ${:.2}, the dashboard ${:.2}, {} alarms ${:.2}; `alarms: {{ enabled: false }}`, `dashboard: false` and `alarms: {{ encryptTopic: false }}` (or `alarms.topic`) remove the last three. Per-item EventBridge Scheduler: one scheduler invocation, one Lambda request of ~50 ms at 128 MB, and the delete, per item (schedule creation API calls not counted). Native TTL deletes are free.", i.wall_per_delete_s * 1e6, i.tick_run_s(), PERIOD_S, i.overlap_s, i.overlap_s, TICK_QUERIES, FULL_SWEEP_QUERIES, thousands(i.invocations()), LOG_LINE_BYTES / 1000.0, i.metrics, i.metrics - 1, i.metrics_cost(), PRICE_KMS_KEY_MONTH, PRICE_DASHBOARD_MONTH, i.alarms, i.alarms_cost());
    d
}

/// The sentence of docs/BENCHMARKS.md section 7 on the cost of memory, between its
/// `cost-memory` markers.
pub fn memory_sentence(i: &Inputs) -> String {
    let per_mb: Vec<String> = [128.0, 256.0, 512.0]
        .iter()
        .map(|mb| format!("{mb:.0} MB ${:.2}/month", i.lambda_tick(*mb)))
        .collect();
    format!("Each extra 128 MB costs the same per second as the base, so for a continuous tick loop ({:.0} s of every {:.0} s, with the handoff overlap) the Lambda line of the cost model scales with memory: {}.\n", i.tick_run_s(), PERIOD_S, per_mb.join(", "))
}

/// docs/scaling.md: what one sweeper function costs a month by memory, between its
/// `cost-scaling` markers.
pub fn scaling_table(i: &Inputs) -> String {
    let mut d = String::new();
    let _ = writeln!(
        d,
        "| memory | one function, tick 1 s ({:.0} s of every {:.0} s) | N functions |",
        i.tick_run_s(),
        PERIOD_S
    );
    let _ = writeln!(d, "|---|---|---|");
    for mb in [128.0, 256.0, 512.0, 1769.0] {
        let _ = writeln!(
            d,
            "| {} MB | ${:.2}/month | N × ${:.2}/month |",
            thousands(mb),
            i.lambda_tick(mb),
            i.lambda_tick(mb)
        );
    }
    let _ = writeln!(d, "\nEach further function also adds two alarms (${:.2} a month); the metrics, key and dashboard are per table, not per function (${:.2} a month by default: {} custom metrics ${:.2}, the alarm topic's key ${:.2}, the dashboard ${:.2}, {} alarms ${:.2}). DynamoDB's part does not change with N: the shards are split, not read twice. The whole model: [BENCHMARKS.md](BENCHMARKS.md) section 4.", 2.0 * PRICE_ALARM_MONTH, i.default_extras(), i.metrics, i.metrics_cost(), PRICE_KMS_KEY_MONTH, PRICE_DASHBOARD_MONTH, i.alarms, i.alarms_cost());
    d
}

/// infra/README.md's cost list, between its `cost-construct` markers.
pub fn construct_list(i: &Inputs) -> String {
    let mut d = String::new();
    let tick_gbs = i.invocations() * 0.125 * i.tick_run_s();
    let _ = writeln!(d, "- **The schedule**: EventBridge Scheduler charges per invocation, $1.00 per million after a free\n  tier of 14 million invocations a month (us-east-1). `rate(1 minute)` is {} invocations in a\n  30-day month: inside the free tier, or about ${:.2} a month beyond it.", thousands(i.invocations()), i.schedule());
    let _ = writeln!(d, "- **The function**: in tick mode it runs about {:.0} s of every {:.0} s (the period plus the\n  {:.0} s handoff overlap, when two invocations run side by side): at 128 MB on arm64 about\n  {} GB-s a month, ${:.2} a month with its {} requests (inside the Lambda free tier of\n  400,000 GB-s where it applies). Without ticks, an invocation lasts as long as one sweep (tens of\n  milliseconds when there is little to delete).", i.tick_run_s(), PERIOD_S, i.overlap_s, thousands(tick_gbs.round()), i.lambda_tick(128.0), thousands(i.invocations()));
    let _ = writeln!(d, "- **DynamoDB**: each sweep reads `lookbackWindows + 1` windows per shard and each tick one or\n  two (each query at least 0.5 read request units: ${:.2} a month for one shard at 1 s ticks);\n  each deleted item is one write request on the table and one on the index (native TTL deletes\n  are free).", i.queries_tick());
    let _ = writeln!(d, "- **Metrics**: the function writes {} custom metrics per table through EMF ({} per sweep and\n  `ColdStart`), ${:.2} a month at ${:.2} each; they cannot be turned off (the alarms read them).", i.metrics, i.metrics - 1, i.metrics_cost(), PRICE_METRIC_MONTH);
    let _ = writeln!(d, "- **Alarms**: {} standard alarms, ${:.2} a month (${:.2} each); `alarms: {{ enabled: false }}`\n  removes them with their topic and key.", i.alarms, i.alarms_cost(), PRICE_ALARM_MONTH);
    let _ = writeln!(d, "- **The alarm topic's key**: ${:.2} a month; none with `alarms.topic` or\n  `alarms: {{ encryptTopic: false }}`.", PRICE_KMS_KEY_MONTH);
    let _ = writeln!(d, "- **The dashboard**: ${:.2} a month beyond an account's first three; `dashboard: false`\n  removes it.", PRICE_DASHBOARD_MONTH);
    let _ = writeln!(d, "- **Logs**: a summary line and an EMF record per invocation and a line per tick that deleted\n  something, about 1 KB each: ${:.2} (1M expiries a month) to ${:.2} (100M) of ingestion at\n  ${:.2}/GB, plus storage for `logRetention`.", i.logs(1e6), i.logs(1e8), PRICE_LOGS_GB);
    let rows = month_rows(i);
    let _ = writeln!(d, "- **Altogether** at 1M expiries a month in tick mode, with the deletes: about ${:.2} a month\n  with the defaults, ${:.2} with alarms, dashboard and key off (docs/BENCHMARKS.md section 4\n  has the model and 100M and 1B a month).", rows[0].1[7], rows[0].1[8]);
    d
}

/// `43200` → `43,200`.
pub fn thousands(n: f64) -> String {
    let s = format!("{:.0}", n);
    let mut out = String::new();
    for (k, ch) in s.chars().enumerate() {
        if k > 0 && (s.len() - k) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}
