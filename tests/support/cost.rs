//! The monthly cost model behind every cost figure in the docs: `make bench` writes it into
//! docs/BENCHMARKS.md (sections 4 and 7), and `tests/readme.rs` renders the same blocks for
//! docs/BENCHMARKS.md, docs/scaling.md and infra/README.md and checks that each doc holds them
//! (`UPDATE_DOCS=1 cargo test --test suite readme::cost` rewrites them) and that the README's figures
//! are theirs.
//!
//! Section 4 also compares the paths that give items their window attribute: writers that set
//! it, the stream indexer on Lambda (`followStream`) and the daemon following the stream. Its
//! prices are published ones; the daemon's polling rate is its code's; the indexer's duration per
//! invocation is an assumption, named `ASSUMED_*` below, until `make bench` measures it.
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

// Giving items their window: writers, the stream indexer on Lambda, the daemon on the stream.

/// DynamoDB Streams read request unit: one `GetRecords` call, whatever it returns (up to 1,000
/// records or 1 MB), beyond the free ones. Lambda triggers' `GetRecords` calls are not charged.
/// From the DynamoDB pricing page's Streams section; not re-read on [`PRICES_DATE`].
pub const PRICE_STREAMS_RRU: f64 = 0.02 / 1e5;
/// Streams read request units free each month, per account and Region.
pub const STREAMS_FREE_RRU: f64 = 2.5e6;
/// The stream indexer's event source mapping takes batches of at most this many records, with no
/// batching window (`STREAM.batchSize` and `maxBatchingWindow` in infra/src/ttl-sweeper.ts;
/// tests/readme.rs checks the batch size).
pub const STREAM_BATCH_SIZE: f64 = 100.0;
/// Lambda polls each shard of a DynamoDB stream 4 times a second and, with no batching window,
/// invokes the function with what one poll found (Lambda developer guide, "Polling and batching
/// streams").
pub const STREAM_POLLS_PER_S: f64 = 4.0;
/// Write units a second one stream shard carries, to plan: a stream has a shard per table
/// partition, and a partition takes about 1,000 write units a second.
pub const SHARD_WRU_PER_S: f64 = 1_000.0;
/// The indexer's memory: the construct's `memorySize` default, which the sweeper shares.
pub const INDEX_MB: f64 = 128.0;
/// Assumed, not measured: an indexer invocation's time besides its writes (read and judge the
/// batch, one log line).
pub const ASSUMED_INDEX_BASE_S: f64 = 0.005;
/// Assumed, not measured: one conditional `UpdateItem` in the Region (section 5's ~10 ms per
/// request).
pub const ASSUMED_WRITE_S: f64 = 0.010;
/// Assumed: bytes of the platform's start and report lines of one invocation.
pub const ASSUMED_PLATFORM_LOG_BYTES: f64 = 500.0;
/// The daemon's `GetRecords` calls per shard a second, at most: a shard with nothing new is read
/// again after `ttl_sweeper::tools::follow::POLL` (one with records, at once).
pub fn daemon_polls_per_s() -> f64 {
    1.0 / ttl_sweeper::tools::follow::POLL.as_secs_f64()
}
/// Item sizes modelled, KB, with the window attribute (about 65 bytes of it).
pub const ITEM_SIZES_KB: [f64; 2] = [1.0, 4.0];
/// The nearest peer that also asks nothing of writers (DynamoDB Streams → one EventBridge
/// Scheduler schedule per item; AWS Database Blog, "Implement event-driven architectures with
/// Amazon DynamoDB", part 1), per million items, as that post gives it.
pub const PEER_PER_MILLION: f64 = 1.63;

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
    /// Items the stream indexer writes at once: [`CONCURRENCY`](ttl_sweeper::indexer::CONCURRENCY).
    pub index_concurrency: usize,
}

/// Alarms the construct creates by default (`infra/test/conveniences.test.ts` checks it).
pub const DEFAULT_ALARMS: usize = 4;

impl Inputs {
    /// The inputs the code decides ([`HANDOFF_OVERLAP`](ttl_sweeper::lambda::handler::HANDOFF_OVERLAP),
    /// the metrics of `emf_record` and `ColdStart`, the stream indexer's concurrency), with a
    /// measured wall time per delete.
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
            index_concurrency: ttl_sweeper::indexer::CONCURRENCY,
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
            // Table delete + GSI entry removal, and batch mode's confirming read of the table (one
            // strongly consistent read unit per item of up to 4 KB).
            let deletes = n * (2.0 * PRICE_WRU + PRICE_RRU);
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

/// What giving `items` items of `kb` KB their window costs a month on each path (each item
/// written once, with its ttl).
#[derive(Debug, Clone, Copy)]
pub struct WindowPaths {
    /// Items written with a ttl a month.
    pub items: f64,
    /// Their size with the window, KB.
    pub kb: f64,
    /// Writers set the window: the GSI write of each item.
    pub writers: f64,
    /// The indexer's conditional `UpdateItem`, billed at the item's size.
    pub update: f64,
    /// The GSI write the indexer's `UpdateItem` makes.
    pub gsi: f64,
    /// Stream shards, to plan.
    pub shards: f64,
    /// Records the function gets per invocation, on average.
    pub per_invocation: f64,
    /// The function's invocations.
    pub invocations: f64,
    /// Assumed duration of one invocation, seconds, rounded up to the millisecond.
    pub duration_s: f64,
    /// The function's requests and duration.
    pub lambda: f64,
    /// The function's log ingestion.
    pub logs: f64,
    /// The stream indexer on Lambda: `update + gsi + lambda + logs`.
    pub on_lambda: f64,
    /// The daemon's `GetRecords` calls (before the free tier).
    pub stream_reads: f64,
    /// The daemon: `update + gsi + stream_reads`.
    pub daemon: f64,
}

impl Inputs {
    /// Giving `n` items of `kb` KB their window, a month, on each path.
    pub fn window_paths(&self, n: f64, kb: f64) -> WindowPaths {
        let units = kb.ceil();
        let writers = n * PRICE_WRU;
        let update = n * units * PRICE_WRU;
        let gsi = n * PRICE_WRU;
        // The table's write units a second (the application's writes, the indexer's, the
        // deletes) decide its partitions, and a stream has a shard per partition.
        let table_wru_s = n / MONTH_S * (2.0 * units + 1.0);
        let shards = (table_wru_s / SHARD_WRU_PER_S).ceil().max(1.0);
        // Two records per item pass the filter: the application's write and the indexer's own.
        let records = 2.0 * n;
        // Records arriving at random: a poll that finds any holds λ / (1 - e^-λ) on average.
        let per_poll = records / MONTH_S / shards / STREAM_POLLS_PER_S;
        let per_invocation = if per_poll > 1e-9 {
            (per_poll / (1.0 - (-per_poll).exp())).clamp(1.0, STREAM_BATCH_SIZE)
        } else {
            1.0
        };
        let invocations = records / per_invocation;
        // Half of the records need a write (the write-backs need none), `index_concurrency` at once.
        let rounds = (per_invocation / 2.0 / self.index_concurrency as f64)
            .ceil()
            .max(1.0);
        let duration_s =
            ((ASSUMED_INDEX_BASE_S + rounds * ASSUMED_WRITE_S) * 1000.0).ceil() / 1000.0;
        let lambda = invocations
            * ((INDEX_MB / 1024.0) * duration_s * PRICE_LAMBDA_GBS_ARM + PRICE_LAMBDA_REQ);
        let logs =
            invocations * (LOG_LINE_BYTES + ASSUMED_PLATFORM_LOG_BYTES) / 1e9 * PRICE_LOGS_GB;
        let stream_reads = shards * daemon_polls_per_s() * MONTH_S * PRICE_STREAMS_RRU;
        WindowPaths {
            items: n,
            kb,
            writers,
            update,
            gsi,
            shards,
            per_invocation,
            invocations,
            duration_s,
            lambda,
            logs,
            on_lambda: update + gsi + lambda + logs,
            stream_reads,
            daemon: update + gsi + stream_reads,
        }
    }
}

/// The rows of the window-paths table: every volume of the cost table, every item size.
pub fn window_rows(i: &Inputs) -> Vec<WindowPaths> {
    [1e6, 1e8, 1e9]
        .into_iter()
        .flat_map(|n| ITEM_SIZES_KB.map(|kb| i.window_paths(n, kb)))
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
    let _ = writeln!(d, "| expiries / month | deletes (table + GSI, batch mode's confirming read) | GSI upkeep of writes | sweeper Lambda, minute | sweeper Lambda, tick 1 s | queries, tick 1 s | schedule and logs | metrics, key, dashboard, alarms | **ours, tick 1 s, total** | ours, tick 1 s, alarms, dashboard and key off | native TTL | per-item EventBridge Scheduler |");
    let _ = writeln!(d, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (n, c) in month_rows(i) {
        let _ = writeln!(d, "| {} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | **${:.2}** | ${:.2} | $0 (late: within days) | ${:.2} |", human(n), c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[10]);
    }
    let _ = writeln!(d, "\nAssumptions: each delete costs one WRU on the table and one on the GSI (the index entry is removed), and batch mode's strongly consistent read of the item before it (one RRU for an item of up to 4 KB, a fifth of a WRU's price); every write that sets the window attribute costs one more WRU on the GSI (KEYS_ONLY entries are small). Minute mode runs about 0.2 s per invocation plus the measured wall time per delete ({:.2} µs, section 2). **Tick mode runs {:.0} s of every {:.0} s**: an invocation ticks from its scheduled time until `HANDOFF_OVERLAP` ({:.0} s, `src/lambda/handler.rs`) after the next one's, so two invocations overlap for {:.0} s of every period and both are billed; it makes {:.0} queries per tick (both invocations tick during the overlap) plus {:.0} per full sweep at 0.5 RRU each. The schedule: {} invocations a month (inside Scheduler's free tier of 14 million where it applies). Logs: a summary line and an EMF record per invocation and a `tick finished` line for each tick that deleted something, about {:.0} KB each. Defaults of the construct: {} custom metrics (the {} of each sweep's EMF record and `ColdStart`) ${:.2}, the alarm topic's KMS key ${:.2}, the dashboard ${:.2}, {} alarms ${:.2}; `alarms: {{ enabled: false }}`, `dashboard: false` and `alarms: {{ encryptTopic: false }}` (or `alarms.topic`) remove the last three. Per-item EventBridge Scheduler: one scheduler invocation, one Lambda request of ~50 ms at 128 MB, and the delete, per item (schedule creation API calls not counted). Native TTL deletes are free.", i.wall_per_delete_s * 1e6, i.tick_run_s(), PERIOD_S, i.overlap_s, i.overlap_s, TICK_QUERIES, FULL_SWEEP_QUERIES, thousands(i.invocations()), LOG_LINE_BYTES / 1000.0, i.metrics, i.metrics - 1, i.metrics_cost(), PRICE_KMS_KEY_MONTH, PRICE_DASHBOARD_MONTH, i.alarms, i.alarms_cost());
    d.push_str(&window_section(i));
    d
}

/// docs/BENCHMARKS.md section 4's comparison of the paths that give items their window (inside
/// the `cost-model` markers, after the cost table).
pub fn window_section(i: &Inputs) -> String {
    let rows = window_rows(i);
    let row = |n: f64, kb: f64| {
        *rows
            .iter()
            .find(|r| r.items == n && r.kb == kb)
            .expect("a modelled row")
    };
    let sizes: Vec<String> = ITEM_SIZES_KB
        .iter()
        .map(|kb| format!("{kb:.0} KB"))
        .collect();
    let mut d = String::new();
    let _ = writeln!(
        d,
        "\n### Giving items their window: writers or the stream\n"
    );
    let _ = writeln!(d, "Per month, for items written once each with a ttl, at the volumes above: what giving them their window costs when writers set it, with the stream indexer on Lambda (`followStream`), and with the daemon following the stream itself (`ttl-sweeper run --follow-stream`). The deletes, the sweeper and the extras above are the same on every path and not repeated. Items of {} (with the window); the indexer runs at {:.0} MB (the construct's `memorySize` default). Streams read request unit ${:.2} per 100,000 beyond {} free a month per account and Region (DynamoDB's pricing page; not re-read on {PRICES_DATE}).\n", sizes.join(" and "), INDEX_MB, PRICE_STREAMS_RRU * 1e5, thousands(STREAMS_FREE_RRU));
    let _ = writeln!(d, "| items written with a ttl / month | item size | writers set the window: GSI write | stream: `UpdateItem` | stream: GSI write | records per invocation | indexer Lambda: requests and duration | indexer Lambda: logs | **stream indexer on Lambda, total** | daemon: Streams reads | **daemon, total** |");
    let _ = writeln!(d, "|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let _ = writeln!(d, "| {} | {:.0} KB | ${:.2} | ${:.2} | ${:.2} | {:.1} | ${:.2} | ${:.2} | **${:.2}** | ${:.2} | **${:.2}** |", human(r.items), r.kb, r.writers, r.update, r.gsi, r.per_invocation, r.lambda, r.logs, r.on_lambda, r.stream_reads, r.daemon);
    }
    let light = row(1e6, 1.0);
    let heavy = row(1e9, 1.0);
    let _ = writeln!(d, "\nWhat is billed. *Writers set the window*: the item's own write carries it, so the GSI gets the item's entry, one write unit (KEYS_ONLY entries are small); the write itself is the application's on every path. *Stream indexer*: the application writes the item without a window; its stream record reaches the function, whose conditional `UpdateItem` sets the window, billed at the item's size (one write unit per KB, the larger of the item before and after), and the GSI gets the item's entry, one write unit. The mapping's filter (infra/src/ttl-sweeper.ts) passes `INSERT` and `MODIFY` records whose new image has the ttl as a Number or has the window: `REMOVE` records (the sweeper's deletes, native TTL's) and writes of items with neither never reach the function and cost nothing. It does not drop the indexer's own write-back, whose new image has both, nor a later write that leaves the ttl as it was: each reaches the function, which finds the window right and writes nothing. So an item written once is two records, its write and the write-back, and every further write of an item with a ttl is one more; a ttl moved to another window is written again at the item's size, and a conditional `UpdateItem` that fails because the item changed meanwhile still consumes write units. Neither is in the table.");
    let _ = writeln!(d, "\nThe function, per invocation: one request, its duration at {:.0} MB rounded up to the millisecond, one `stream batch indexed` line (about {:.0} KB) and the platform's start and report lines (about {:.1} KB, assumed). Batches: at most {:.0} records (`batchSize`), no batching window, so Lambda invokes the function with what one poll of a shard found; it polls each shard {:.0} times a second, so with records arriving at random a poll that finds any holds λ / (1 − e^−λ) of them on average, λ being the records a shard gets between two polls: {:.1} at 1M a month, where nearly every record is an invocation of its own, {:.1} at 1B. Shards: one per {} write units a second on the table (the application's writes, the indexer's and the deletes), at least one; a table with more partitions than its writes need has more shards and smaller batches, towards one record per invocation. **The duration is assumed, not measured** (the indexer has no benchmark on AWS yet): {:.0} ms per invocation plus {:.0} ms per round of conditional writes, {} items at a time (`ttl_sweeper::indexer::CONCURRENCY`), half the records needing a write: {:.0} ms at 1M a month, {:.0} ms at 1B. With alarms on, `followStream` also adds two alarms (`IteratorAge`, and a message in the on-failure queue), ${:.2} a month; the on-failure queue costs nothing while empty.", INDEX_MB, LOG_LINE_BYTES / 1000.0, ASSUMED_PLATFORM_LOG_BYTES / 1000.0, STREAM_BATCH_SIZE, STREAM_POLLS_PER_S, light.per_invocation, heavy.per_invocation, thousands(SHARD_WRU_PER_S), ASSUMED_INDEX_BASE_S * 1000.0, ASSUMED_WRITE_S * 1000.0, i.index_concurrency, light.duration_s * 1000.0, heavy.duration_s * 1000.0, 2.0 * PRICE_ALARM_MONTH);
    let calls = daemon_polls_per_s() * MONTH_S;
    let _ = writeln!(d, "\nThe daemon makes the same `UpdateItem` and GSI write and pays no Lambda; it reads the stream itself with `GetRecords`, one streams read request unit per call whatever it returns (Lambda's own calls are free). It reads a shard with nothing new every {:.0} ms (`ttl_sweeper::tools::follow::POLL`), so at most {:.0} calls a second per shard, as Lambda polls, and {} calls a month per shard, ${:.2}, whatever the traffic (before the free {} a month, {:.0} % of one shard's calls). The host it runs on is not counted.", ttl_sweeper::tools::follow::POLL.as_millis(), daemon_polls_per_s(), thousands(calls), calls * PRICE_STREAMS_RRU, thousands(STREAMS_FREE_RRU), STREAMS_FREE_RRU / calls * 100.0);
    let per_m = |r: WindowPaths, x: f64| x / (r.items / 1e6);
    let (light4, heavy4) = (row(1e6, 4.0), row(1e9, 4.0));
    let mid = row(1e8, 1.0);
    let deletes = 2.0 * PRICE_WRU * 1e6;
    let than = |a: f64, b: f64| if a < b { "less" } else { "more" };
    let _ = writeln!(d, "\n**When each pays.** Writers that set the window pay only the GSI write: ${:.2} per million items, whatever their size. The stream indexer adds a second write of every item, at its size, and the function's records: per million 1 KB items ${:.2} at 1M a month, where the requests and the logs of one invocation per record weigh most, and ${:.2} at 1B a month in batches of about {:.0} records, about one extra write per item; per million 4 KB items ${:.2} and ${:.2}. The daemon pays no Lambda but ${:.2} a month per shard for its reads, whatever the traffic: the function's requests, duration and logs cost {} at 1M a month (${:.2}), {} at 100M (${:.2}). So the stream pays where changing the writers costs more than that: many writers, in several languages or not yours, and small items. Writers that set the window win for large items (every KB is one more write unit on the stream) and when the writers are few and yours; the writers you control can set it and leave the others to the stream (the indexer writes nothing for an item whose window is right, though its record still reaches the function). The peer that also asks nothing of writers (DynamoDB Streams → one EventBridge Scheduler schedule per item; AWS Database Blog, event-driven TTL part 1) gives ${:.2} per million items, deleted within 1–2 minutes: its own figure, not recomputed here (the per-item EventBridge Scheduler column above is this model's estimate of its scheduler, Lambda and delete). Ours with the stream indexer comes to ${:.2} per million 1 KB items at 1M a month and ${:.2} at 1B (the deletes, table and GSI, and the indexer), plus the sweeper's fixed cost above, for deletes within a second.", per_m(light, light.writers), per_m(light, light.on_lambda), per_m(heavy, heavy.on_lambda), heavy.per_invocation, per_m(light4, light4.on_lambda), per_m(heavy4, heavy4.on_lambda), light.stream_reads, than(light.lambda + light.logs, light.stream_reads), light.lambda + light.logs, than(mid.lambda + mid.logs, mid.stream_reads), mid.lambda + mid.logs, PEER_PER_MILLION, deletes + per_m(light, light.on_lambda), deletes + per_m(heavy, heavy.on_lambda));
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
