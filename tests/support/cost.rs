//! The monthly cost model behind every cost figure in the docs: `make bench` writes it into
//! docs/BENCHMARKS.md (sections 4 and 7), the one place the docs give it, and `tests/readme.rs`
//! renders the same blocks and checks that the doc holds them (`UPDATE_DOCS=1 cargo test --test
//! suite readme::cost` rewrites them) and that the README's figures are theirs.
//!
//! Section 4 also compares the paths that give items their window: the GSI on the table, which
//! writers fill by setting the window; the sweeper's own expiry index table, filled by the stream
//! indexer on Lambda (`followStream`); and the same table filled by the daemon following the
//! stream. In one Region and in a global table's three. Its prices are published ones; the
//! daemon's polling rate and the indexer's batches are its code's; the indexer's duration per
//! invocation and the price of a replicated write are assumptions, named `ASSUMED_*` below.
//!
//! The inputs come from the code, not from the prose: the tick-mode run time per schedule period
//! is the period plus `HANDOFF_OVERLAP` (an invocation ticks until that long after the next one's
//! scheduled time, docs/design.md "Handoff"), the number of custom metrics is what `emf_record`
//! declares plus `ColdStart`, the alarms are the construct's five.

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

// Giving items their window: the GSI (writers set it), the expiry index table fed by the stream
// indexer on Lambda, the same table fed by the daemon on the stream.

/// DynamoDB Streams read request unit: one `GetRecords` call, whatever it returns (up to 1,000
/// records or 1 MB), beyond the free ones. Lambda triggers' `GetRecords` calls are not charged.
/// From the DynamoDB pricing page's Streams section; not re-read on [`PRICES_DATE`].
pub const PRICE_STREAMS_RRU: f64 = 0.02 / 1e5;
/// Streams read request units free each month, per account and Region.
pub const STREAMS_FREE_RRU: f64 = 2.5e6;
/// Assumed: a replicated write request unit (a global table's write, billed in every Region it
/// reaches, the one it is made in included) costs what a write request unit does, as DynamoDB's
/// developer guide ("Understanding Amazon DynamoDB billing for global tables") gives it; not read
/// from the pricing page on [`PRICES_DATE`].
pub const ASSUMED_PRICE_RWRU: f64 = PRICE_WRU;
/// The stream indexer's event source mapping takes batches of at most this many records, with no
/// batching window (`STREAM.batchSize` and `maxBatchingWindow` in infra/src/stream-indexer.ts;
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
/// Assumed, not measured: one `BatchWriteItem` of entries in the Region (section 5's ~10 ms per
/// request).
pub const ASSUMED_WRITE_S: f64 = 0.010;
/// Bytes an indexer invocation logs when its batch was indexed whole: none at the functions'
/// levels (its `stream batch indexed` line is DEBUG then, tests/stream_esm.rs; the platform's
/// START, END and REPORT lines are INFO, left out by the indexer's system log level, WARN). A
/// batch that failed a record logs its line at info: rare, not counted.
pub const INDEXER_LOG_BYTES: f64 = 0.0;
/// The daemon's `GetRecords` calls per shard a second, at most: a shard with nothing new is read
/// again after `ttl_sweeper::index::follow::POLL` (one with records, at once).
pub fn daemon_polls_per_s() -> f64 {
    1.0 / ttl_sweeper::index::follow::POLL.as_secs_f64()
}
/// Bytes a strongly consistent read unit returns of a query.
pub const READ_UNIT_BYTES: f64 = 4096.0;
/// Item sizes modelled, KB.
pub const ITEM_SIZES_KB: [f64; 2] = [1.0, 4.0];
/// Regions modelled: one, and a global table's three (a sweeper in each, one holding the lease).
pub const REGIONS: [f64; 2] = [1.0, 3.0];
/// The nearest peer that also asks nothing of writers (DynamoDB Streams → one EventBridge
/// Scheduler schedule per item; AWS Database Blog, "Implement event-driven architectures with
/// Amazon DynamoDB", part 1), per million items, as that post gives it.
pub const PEER_PER_MILLION: f64 = 1.63;

/// The units the index-table path spends per expired item, counted (benches/sweeper/units.rs,
/// the `units-counted` block of docs/BENCHMARKS.md section 4): 1 KB items, one in ten refreshed
/// once, one in twenty deleted by the application before its ttl.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Counted {
    /// Items the counted run wrote, and those that expired (written less those the application
    /// deleted).
    pub written: usize,
    pub expired: usize,
    /// `DELETE_MODE=batch`: write units of the table's deletes, read units of the confirming reads.
    pub table_delete: f64,
    pub confirm_read: f64,
    /// `DELETE_MODE=conditional`: write units of the table's deletes, and of the conditional
    /// deletes whose condition failed (items refreshed or deleted by the application).
    pub conditional_delete: f64,
    pub failed_conditional: f64,
    /// Write units of the index entries' puts and removals, read units of the queries of the
    /// index's window partitions (at the run's rate of expiries).
    pub entry_put: f64,
    pub entry_removal: f64,
    pub index_query: f64,
    /// Bytes of an index entry, on average.
    pub entry_bytes: f64,
    /// Items' keys the index items put list, per expired item (an entry of one item lists one; a
    /// pack, its `keys`): one for each write of an item the stream reports, and each key carried.
    pub keys_listed: f64,
    /// Write units and bytes of an index item put that lists one key, on average.
    pub one_key_pack: f64,
    pub one_key_bytes: f64,
}

const COUNTED_OPEN: &str =
    "<!-- units-counted: benches/sweeper/units.rs, read by tests/support/cost.rs -->";
const COUNTED_CLOSE: &str = "<!-- /units-counted -->";

impl Counted {
    /// The block docs/BENCHMARKS.md carries: a one-row table between `units-counted` markers.
    pub fn block(&self) -> String {
        format!(
            "{COUNTED_OPEN}\n| items written | expired | batch mode: table delete, WRU | batch mode: confirming read, RRU | conditional mode: table delete, WRU | conditional mode: failed conditional delete, WRU | index entry put, WRU | index entry removal, WRU | index query, RRU | index entry, bytes | keys listed | one-key pack, WRU | one-key pack, bytes |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n| {} | {} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.1} | {:.4} | {:.4} | {:.1} |\n{COUNTED_CLOSE}\n",
            self.written,
            self.expired,
            self.table_delete,
            self.confirm_read,
            self.conditional_delete,
            self.failed_conditional,
            self.entry_put,
            self.entry_removal,
            self.index_query,
            self.entry_bytes,
            self.keys_listed,
            self.one_key_pack,
            self.one_key_bytes
        )
    }

    /// Write units of the index per expired item that the model bills: every key listed in a
    /// pack of its own. A stream batch packs the keys it holds that are due at the same instant;
    /// the counted run compresses a day of ttls to minutes, so its batches share dues a real
    /// day's would not (a batch of 100 records over the 86,340 seconds of a day shares almost
    /// none).
    pub fn index_write(&self) -> f64 {
        self.keys_listed * self.one_key_pack
    }

    /// The sentence that says where the per-item units come from.
    pub fn sentence(&self) -> String {
        format!(
            "Units per expired item: counted (section 4, \"Units counted per expired item\": {} items of 1 KB written, {} expired; one in ten refreshed once, one in twenty deleted by the application), not modelled; items of 4 KB scale them by DynamoDB's size rule. Every row multiplies them by its volume: the 100M and 1B rows are extrapolated from the counted run ({} written, {} expired).",
            thousands(self.written as f64),
            thousands(self.expired as f64),
            thousands(self.written as f64),
            thousands(self.expired as f64)
        )
    }

    /// The counts of the `units-counted` block of `markdown`, if it has one.
    pub fn parse(markdown: &str) -> Option<Counted> {
        let start = markdown.find(COUNTED_OPEN)?;
        let end = start + markdown[start..].find(COUNTED_CLOSE)?;
        let row = markdown[start..end].lines().nth(3)?;
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let f = |i: usize| cells.get(i)?.parse::<f64>().ok();
        Some(Counted {
            written: cells.get(1)?.parse().ok()?,
            expired: cells.get(2)?.parse().ok()?,
            table_delete: f(3)?,
            confirm_read: f(4)?,
            conditional_delete: f(5)?,
            failed_conditional: f(6)?,
            entry_put: f(7)?,
            entry_removal: f(8)?,
            index_query: f(9)?,
            entry_bytes: f(10)?,
            keys_listed: f(11)?,
            one_key_pack: f(12)?,
            one_key_bytes: f(13)?,
        })
    }
}

/// The ttls of the workload: uniformly 1 minute to 24 hours ahead, in whole seconds; each second
/// is a pack's group.
pub const TTL_SPREAD_S: f64 = 86_400.0 - 60.0;

/// Fargate on arm64 (Linux/ARM) in us-east-1, per vCPU-hour and per GB-hour, and a public IPv4
/// address per hour: **assumed**, as third parties quote AWS's pages (not re-read from AWS).
pub const ASSUMED_FARGATE_ARM_VCPU_H: f64 = 0.03238;
pub const ASSUMED_FARGATE_ARM_GB_H: f64 = 0.00356;
pub const ASSUMED_PUBLIC_IPV4_H: f64 = 0.005;
/// The daemon's host in the model: a Fargate task of this many vCPU and GB, per Region.
pub const DAEMON_VCPU: f64 = 0.25;
pub const DAEMON_GB: f64 = 1.0;

/// The daemon's host a month, per Region: a Fargate task ([`DAEMON_VCPU`], [`DAEMON_GB`]) with a
/// public IPv4 address.
pub fn daemon_host_month() -> f64 {
    let hourly = DAEMON_VCPU * ASSUMED_FARGATE_ARM_VCPU_H
        + DAEMON_GB * ASSUMED_FARGATE_ARM_GB_H
        + ASSUMED_PUBLIC_IPV4_H;
    hourly * MONTH_S / 3600.0
}

/// The bytes an entry adds to a pack ([`PackEntry::bytes`]) for a key of one String attribute
/// `id` of `chars` characters and a 10-digit ttl.
pub fn key_bytes(chars: usize) -> f64 {
    use ttl_sweeper::store::packs::PackEntry;
    let id = aws_sdk_dynamodb::types::AttributeValue::S("x".repeat(chars));
    let entry = PackEntry {
        key: [("id".to_owned(), id)].into_iter().collect(),
        ttl: "1800000000".into(),
    };
    entry.bytes() as f64
}

/// The counted run's keys (`u-<i>`, about 6 characters) and the model's (36, a UUID).
pub const COUNTED_KEY_CHARS: usize = 6;
pub const MODEL_KEY_CHARS: usize = 36;

/// Write units per key of packs that list `k` keys on average: a pack is the counted one-key
/// pack's bytes less the counted key's, plus `k` of the model's keys, cut at
/// [`ttl_sweeper::store::packs::MAX_PACK_BYTES`].
pub fn units_per_key(c: &Counted, k: f64) -> f64 {
    let overhead = c.one_key_bytes - key_bytes(COUNTED_KEY_CHARS);
    let key = key_bytes(MODEL_KEY_CHARS);
    let max = ttl_sweeper::store::packs::MAX_PACK_BYTES as f64;
    let fit = ((max - overhead) / key).floor().max(1.0);
    let k = k.max(1.0);
    let units = |keys: f64| ((overhead + keys * key) / 1024.0).ceil();
    if k <= fit {
        units(k) / k
    } else {
        units(fit) / fit
    }
}

/// Keys a pack of the daemon lists on average when the follower holds entries
/// (`FOLLOW_HOLD`, `hold_s`; at most `max_entries` held): `keys_per_s` keys reach it a second,
/// their ttls spread uniformly over `spread_s` whole seconds, each second a pack's group (one
/// window shard). A group's pack is written once its first entry has been held for the hold,
/// listing that entry and those that came meanwhile: 1 + keys_per_s × hold ÷ spread. Past the
/// bound, the soonest due are written early: as if held for the time the bound fills in.
pub fn held_keys_per_pack(keys_per_s: f64, hold_s: f64, max_entries: f64, spread_s: f64) -> f64 {
    if keys_per_s <= 0.0 || spread_s <= 0.0 {
        return 1.0;
    }
    let held_s = hold_s.min(max_entries / keys_per_s);
    1.0 + keys_per_s * held_s / spread_s
}

/// Keys a pack lists on average when entries arrive at `rate` a second for `write_s` seconds,
/// each due a random whole second `ahead_s` to `ahead_s + spread_s` past its arrival, and are
/// held as the follower holds them (`src/index/follow/gather.rs`): a due second's entries are
/// written together once its first has been held `hold_s`, or once it is `WRITE_BEFORE` away,
/// and whatever is held is written at the stop, `stop_s` after the first arrival. Arrivals are
/// Poisson, drawn from `seed`. [`held_keys_per_pack`] is its steady state.
pub fn simulate_held_keys_per_pack(
    rate: f64,
    ahead_s: f64,
    spread_s: f64,
    hold_s: f64,
    write_s: f64,
    stop_s: f64,
    seed: u64,
) -> f64 {
    use std::collections::{BTreeMap, VecDeque};
    let before = ttl_sweeper::index::follow::WRITE_BEFORE.as_secs_f64();
    let mut rng = fastrand::Rng::with_seed(seed);
    // Per due second held: when its first entry came; and the due seconds in that order.
    let mut held: (BTreeMap<i64, f64>, VecDeque<(f64, i64)>) = Default::default();
    let (mut packs, mut keys) = (0u64, 0u64);
    type Held = (BTreeMap<i64, f64>, VecDeque<(f64, i64)>);
    let write_due = |now: f64, (by_due, order): &mut Held, packs: &mut u64| {
        while let Some(&(first, due)) = order.front() {
            if now - first < hold_s {
                break;
            }
            order.pop_front();
            if by_due.get(&due) == Some(&first) {
                by_due.remove(&due);
                *packs += 1;
            }
        }
        while let Some((&due, _)) = by_due.first_key_value() {
            if due as f64 - now > before {
                break;
            }
            by_due.remove(&due);
            *packs += 1;
        }
    };
    let mut now = 0.0;
    loop {
        now += -(1.0 - rng.f64()).ln() / rate;
        if now > write_s {
            break;
        }
        write_due(now, &mut held, &mut packs);
        let due = (now + ahead_s + rng.f64() * spread_s).ceil() as i64;
        if let std::collections::btree_map::Entry::Vacant(first) = held.0.entry(due) {
            first.insert(now);
            held.1.push_back((now, due));
        }
        keys += 1;
    }
    write_due(stop_s, &mut held, &mut packs);
    packs += held.0.len() as u64;
    keys as f64 / packs.max(1) as f64
}

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
    /// `BatchWriteItem` requests the stream indexer has in flight at once:
    /// [`CONCURRENCY`](ttl_sweeper::index::CONCURRENCY).
    pub index_concurrency: usize,
    /// Entries in one of the stream indexer's `BatchWriteItem` requests:
    /// [`ENTRIES_PER_REQUEST`](ttl_sweeper::index::ENTRIES_PER_REQUEST).
    pub entries_per_request: usize,
}

/// Alarms the construct creates by default (`infra/test/conveniences.test.ts` checks it).
pub const DEFAULT_ALARMS: usize = 5;

impl Inputs {
    /// The inputs the code decides ([`HANDOFF_OVERLAP`](ttl_sweeper::lambda::handler::HANDOFF_OVERLAP),
    /// the metrics of `emf_record` and `ColdStart`, the stream indexer's requests), with a
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
            index_concurrency: ttl_sweeper::index::CONCURRENCY,
            entries_per_request: ttl_sweeper::index::ENTRIES_PER_REQUEST,
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
fn month_rows(i: &Inputs, c: &Counted) -> Vec<(f64, [f64; 11])> {
    [1e6, 1e8, 1e9]
        .into_iter()
        .map(|n| {
            // The table delete and batch mode's confirming read as counted per expired item, and
            // the GSI entry's removal (one write unit by the rule: the GSI path is not counted).
            let deletes = n * ((c.table_delete + 1.0) * PRICE_WRU + c.confirm_read * PRICE_RRU);
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

/// What deleting `items` items of `kb` KB costs a month beyond the sweeper's fixed cost, on each
/// path that gives them their window, in `regions` Regions (each item written once, with its ttl;
/// in several Regions, a global table with a sweeper in each Region, one of them holding the lease
/// and sweeping). The application's writes are the application's, on every path.
#[derive(Debug, Clone, Copy)]
pub struct WindowPaths {
    /// Items written with a ttl a month.
    pub items: f64,
    /// Their size, KB.
    pub kb: f64,
    /// Regions of the table: 1, or a global table's replicas.
    pub regions: f64,
    /// Every path: the table's deletes, the counted write units per expired item (1 KB items)
    /// times the item's KB, in every Region they reach (replicated write units on a global table).
    pub table_delete: f64,
    /// Every path: batch mode's confirming reads, the counted read units per expired item times
    /// the item's 4 KB units, in the sweeping Region.
    pub confirm_read: f64,
    /// Conditional mode instead of batch mode's read: the deletes whose condition failed (items
    /// refreshed, or deleted by the application), as counted, in every Region they reach.
    pub failed_conditional: f64,
    /// GSI mode: each item's GSI write when written and its removal when deleted, one write unit
    /// each, in every replica.
    pub gsi: f64,
    /// Expiry index table: the packs put, a pack per key listed ([`Counted::index_write`]), by
    /// the indexer of every Region.
    pub entry_puts: f64,
    /// Expiry index table: the entries removed once judged, as counted per expired item, by the
    /// sweeping Region only.
    pub entry_removals: f64,
    /// Expiry index table: its strongly consistent queries beyond the GSI's eventually consistent
    /// ones (each query at least one read unit rather than half), and the entries read, of the
    /// counted size, 4 KB to the unit.
    pub index_reads: f64,
    /// Stream shards of each Region's table, to plan.
    pub shards: f64,
    /// Records that reach the indexers, every Region's: one per entry put, in each Region.
    pub records: f64,
    /// Records the function gets per invocation, on average.
    pub per_invocation: f64,
    /// The function's invocations, every Region's.
    pub invocations: f64,
    /// Assumed duration of one invocation, seconds, rounded up to the millisecond.
    pub duration_s: f64,
    /// The function's requests and duration.
    pub lambda: f64,
    /// The function's log ingestion.
    pub logs: f64,
    /// The expiry index table on Lambda: `entry_puts + entry_removals + index_reads + lambda +
    /// logs`.
    pub on_lambda: f64,
    /// The daemons' `GetRecords` calls, a daemon following each Region's stream (before the free
    /// tier).
    pub stream_reads: f64,
    /// The daemon's packs: its follower holds entries (`FOLLOW_HOLD` and `FOLLOW_HOLD_ENTRIES`
    /// at their defaults) and packs each due instant's together ([`held_keys_per_pack`]), by the
    /// follower of every Region.
    pub held_keys_per_pack: f64,
    pub daemon_puts: f64,
    /// The daemon's host in every Region ([`daemon_host_month`]).
    pub daemon_host: f64,
    /// The daemon: `daemon_puts + entry_removals + index_reads + stream_reads + daemon_host`.
    pub daemon: f64,
}

impl WindowPaths {
    /// `x` a month, per million items.
    pub fn per_million(&self, x: f64) -> f64 {
        x / (self.items / 1e6)
    }

    /// Ours with the expiry index table on Lambda: the table delete, batch mode's confirming read
    /// and the index, nothing else (not the sweeper's fixed cost).
    pub fn ours(&self) -> f64 {
        self.table_delete + self.confirm_read + self.on_lambda
    }

    /// Ours with the expiry index table on Lambda in `DELETE_MODE=conditional`: the table delete,
    /// the conditional deletes that failed and the index.
    pub fn ours_conditional(&self) -> f64 {
        self.table_delete + self.failed_conditional + self.on_lambda
    }

    /// Ours in GSI mode: the table delete, batch mode's confirming read and the GSI.
    pub fn ours_gsi(&self) -> f64 {
        self.table_delete + self.confirm_read + self.gsi
    }
}

/// Records per invocation of an event source mapping on a shard that gets `per_s` records a
/// second at random, with a batching window of `window_s` seconds (0: none), at most a batch.
pub fn records_per_invocation(per_s: f64, window_s: f64) -> f64 {
    // No window: what one poll found; a poll that finds any holds λ / (1 - e^-λ) on average.
    let per_poll = per_s / STREAM_POLLS_PER_S;
    let polled = if per_poll > 1e-9 {
        per_poll / (1.0 - (-per_poll).exp())
    } else {
        1.0
    };
    // A window: the first record and those that come within the window after it.
    let windowed = 1.0 + per_s * window_s;
    polled.max(windowed).clamp(1.0, STREAM_BATCH_SIZE)
}

impl Inputs {
    /// Deleting `n` items of `kb` KB in `regions` Regions, a month, on each path, with the
    /// construct's mapping (no batching window).
    pub fn window_paths(&self, n: f64, kb: f64, regions: f64, c: &Counted) -> WindowPaths {
        self.window_paths_batched(n, kb, regions, 0.0, c)
    }

    /// [`Inputs::window_paths`] with a batching window of `window_s` seconds on the mapping.
    pub fn window_paths_batched(
        &self,
        n: f64,
        kb: f64,
        regions: f64,
        window_s: f64,
        c: &Counted,
    ) -> WindowPaths {
        let units = kb.ceil();
        // A global table's writes are billed in replicated units, in every replica.
        let unit_price = if regions > 1.0 {
            ASSUMED_PRICE_RWRU
        } else {
            PRICE_WRU
        };
        let write_price = regions * unit_price;
        // Counted on 1 KB items; an item of `kb` KB bills `kb` write units to delete and a read
        // unit per 4 KB to read.
        let table_delete = n * c.table_delete * units * write_price;
        let confirm_read = n * c.confirm_read * (kb / 4.0).ceil() * PRICE_RRU;
        // A delete whose condition failed writes nothing, so nothing replicates: it is billed
        // once, in the Region that sent it.
        let failed_conditional = n * c.failed_conditional * units * unit_price;
        // GSI writes are ordinary write units on every replica: its write and its removal.
        let gsi = regions * n * 2.0 * PRICE_WRU;
        // Every Region's indexer puts the entry into its own Region's index table; only the
        // sweeping Region removes its own (the others' go by native TTL, free).
        let entry_puts = regions * n * c.index_write() * PRICE_WRU;
        let entry_removals = n * c.entry_removal * PRICE_WRU;
        // The same queries as the GSI's at one read unit rather than half cost as much again,
        // and every index item is read once, 4 KB to the unit.
        let entries_read = n * c.keys_listed * c.one_key_bytes / READ_UNIT_BYTES;
        let index_reads = self.queries_tick() + entries_read * PRICE_RRU;
        // The table's write units a second (the application's writes and the deletes) decide its
        // partitions, and a stream has a shard per partition.
        let table_wru_s = n / MONTH_S * 2.0 * units;
        let shards = (table_wru_s / SHARD_WRU_PER_S).ceil().max(1.0);
        // A record passes the filter in each Region for each write of an item: a key listed.
        let records = regions * n * c.keys_listed;
        let per_invocation = records_per_invocation(n / MONTH_S / shards, window_s);
        let invocations = records / per_invocation;
        // Entries written `entries_per_request` to a request, `index_concurrency` requests at once.
        let requests = (per_invocation / self.entries_per_request as f64).ceil();
        let rounds = (requests / self.index_concurrency as f64).ceil().max(1.0);
        let duration_s =
            ((ASSUMED_INDEX_BASE_S + rounds * ASSUMED_WRITE_S) * 1000.0).ceil() / 1000.0;
        let lambda = invocations
            * ((INDEX_MB / 1024.0) * duration_s * PRICE_LAMBDA_GBS_ARM + PRICE_LAMBDA_REQ);
        let logs = invocations * INDEXER_LOG_BYTES / 1e9 * PRICE_LOGS_GB;
        let stream_reads = regions * shards * daemon_polls_per_s() * MONTH_S * PRICE_STREAMS_RRU;
        let index = entry_puts + entry_removals + index_reads;
        // The daemon holds entries due later than `HOLD_FROM`, and packs each due instant's
        // together: those due sooner go a pack of their own.
        let keys_per_s = n * c.keys_listed / MONTH_S;
        let hold_s = ttl_sweeper::index::follow::DEFAULT_HOLD.as_secs_f64();
        let max_held = ttl_sweeper::index::follow::DEFAULT_MAX_ENTRIES as f64;
        let held_keys_per_pack = held_keys_per_pack(keys_per_s, hold_s, max_held, TTL_SPREAD_S);
        let hold_from = ttl_sweeper::index::follow::HOLD_FROM.as_secs_f64();
        let near = ((hold_from - 60.0) / TTL_SPREAD_S).clamp(0.0, 1.0);
        let per_key = near * c.one_key_pack + (1.0 - near) * units_per_key(c, held_keys_per_pack);
        let daemon_puts = regions * n * c.keys_listed * per_key * PRICE_WRU;
        let daemon_host = regions * daemon_host_month();
        WindowPaths {
            items: n,
            kb,
            regions,
            table_delete,
            confirm_read,
            failed_conditional,
            gsi,
            entry_puts,
            entry_removals,
            index_reads,
            shards,
            records,
            per_invocation,
            invocations,
            duration_s,
            lambda,
            logs,
            on_lambda: index + lambda + logs,
            stream_reads,
            held_keys_per_pack,
            daemon_puts,
            daemon_host,
            daemon: daemon_puts + entry_removals + index_reads + stream_reads + daemon_host,
        }
    }
}

/// The rows of the window-paths tables: every volume of the cost table, every item size, one
/// Region and three.
pub fn window_rows(i: &Inputs, c: &Counted) -> Vec<WindowPaths> {
    let mut rows = Vec::new();
    for n in [1e6, 1e8, 1e9] {
        for kb in ITEM_SIZES_KB {
            for regions in REGIONS {
                rows.push(i.window_paths(n, kb, regions, c));
            }
        }
    }
    rows
}

/// A row's volume: `1M`, and the rows far beyond the counted run marked so: `100M
/// (extrapolated)`, `1B (extrapolated)`.
pub fn volume(n: f64) -> String {
    if n >= 1e8 {
        format!("{} (extrapolated)", human(n))
    } else {
        human(n)
    }
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
pub fn benchmarks_section(i: &Inputs, c: &Counted) -> String {
    let mut d = String::new();
    let _ = writeln!(d, "Prices (us-east-1, on-demand, as published by AWS on {PRICES_DATE}; check current pricing): write request unit ${:.3}/million, read request unit ${:.3}/million, Lambda arm64 ${:.10}/GB-s and $0.20/million requests, EventBridge Scheduler $1.00/million invocations, CloudWatch custom metrics ${PRICE_METRIC_MONTH:.2} each a month, alarms ${PRICE_ALARM_MONTH:.2} each, a dashboard ${PRICE_DASHBOARD_MONTH:.2} (beyond an account's first three), a KMS key ${PRICE_KMS_KEY_MONTH:.2}, log ingestion ${PRICE_LOGS_GB:.2}/GB. Items ≤ 1 KB. The sweeper runs at 128 MB with the construct's defaults, one shard.\n", PRICE_WRU * 1e6, PRICE_RRU * 1e6, PRICE_LAMBDA_GBS_ARM);
    let _ = writeln!(d, "| expiries / month | deletes (table + GSI, batch mode's confirming read) | GSI upkeep of writes | sweeper Lambda, minute | sweeper Lambda, tick 1 s | queries, tick 1 s | schedule and logs | metrics, key, dashboard, alarms | **ours, tick 1 s, total** | ours, tick 1 s, alarms, dashboard and key off | native TTL | per-item EventBridge Scheduler |");
    let _ = writeln!(d, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (n, r) in month_rows(i, c) {
        let _ = writeln!(d, "| {} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | **${:.2}** | ${:.2} | $0 (late: within days) | ${:.2} |", volume(n), r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[10]);
    }
    let _ = writeln!(d, "\n{}", c.sentence());
    let (cd, cr) = (c.table_delete, c.confirm_read);
    let _ = writeln!(d, "\nAssumptions: per expired item the table delete's {cd:.3} WRU and batch mode's confirming read's {cr:.3} RRU, as counted, and one WRU on the GSI (by the rule, not counted); a write that sets the window, one more WRU on the GSI. Minute mode: about 0.2 s per invocation plus {:.2} µs per delete (section 2). **Tick mode runs {:.0} s of every {:.0} s**, invocations overlapping by `HANDOFF_OVERLAP` ({:.0} s), with {:.0} queries per tick plus {:.0} per full sweep at 0.5 RRU. {} invocations a month; logs about {:.0} KB a line. Construct defaults: {} custom metrics ${:.2}, the topic's KMS key ${:.2}, the dashboard ${:.2}, {} alarms ${:.2}, the last three optional. Per-item EventBridge Scheduler: a scheduler invocation, a ~50 ms Lambda request and the delete per item.", i.wall_per_delete_s * 1e6, i.tick_run_s(), PERIOD_S, i.overlap_s, TICK_QUERIES, FULL_SWEEP_QUERIES, thousands(i.invocations()), LOG_LINE_BYTES / 1000.0, i.metrics, i.metrics_cost(), PRICE_KMS_KEY_MONTH, PRICE_DASHBOARD_MONTH, i.alarms, i.alarms_cost());
    d.push_str(&window_section(i, c));
    d
}

/// docs/BENCHMARKS.md section 4's comparison of the paths that give items their window (inside
/// the `cost-model` markers, after the cost table).
pub fn window_section(i: &Inputs, c: &Counted) -> String {
    let rows = window_rows(i, c);
    let row = |n: f64, kb: f64, regions: f64| {
        *rows
            .iter()
            .find(|r| r.items == n && r.kb == kb && r.regions == regions)
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
    let _ = writeln!(d, "Per month, for items written once with a ttl, in one Region and in three (a global table, the lease holder sweeping): the index on each path, and ours per item. *GSI mode*: writers set the window. *Expiry index table* (`followStream`): writers set only the ttl and the stream indexer on Lambda writes an entry per item into the sweeper's own table; *the daemon* (`ttl-sweeper run --follow-stream`) writes them from the stream itself. Items of {}, the indexer at {:.0} MB; streams read request unit ${:.2} per 100,000 beyond {} free a month (not re-read on {PRICES_DATE}); **a replicated write request unit is assumed** to cost ${:.3} per million, as a write request unit.\n", sizes.join(" and "), INDEX_MB, PRICE_STREAMS_RRU * 1e5, thousands(STREAMS_FREE_RRU), ASSUMED_PRICE_RWRU * 1e6);
    let _ = writeln!(d, "| items written with a ttl / month | item size | Regions | table delete | confirming read (batch mode) | **GSI mode: GSI write and removal** | index table: entry puts | index table: entry removals | index table: strongly consistent queries, beyond the GSI's | records per invocation | indexer Lambda: requests and duration | indexer Lambda: logs | **expiry index table on Lambda, total** | daemon: Streams reads | **daemon, total** |");
    let _ = writeln!(
        d,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in &rows {
        let _ = writeln!(d, "| {} | {:.0} KB | {:.0} | ${:.2} | ${:.2} | **${:.2}** | ${:.2} | ${:.2} | ${:.2} | {:.1} | ${:.2} | ${:.2} | **${:.2}** | ${:.2} | **${:.2}** |", volume(r.items), r.kb, r.regions, r.table_delete, r.confirm_read, r.gsi, r.entry_puts, r.entry_removals, r.index_reads, r.per_invocation, r.lambda, r.logs, r.on_lambda, r.stream_reads, r.daemon);
    }
    let _ = writeln!(d, "\nPer million items, the same rows; ours is the table delete, the confirming read and the index, beside the peer's ${PEER_PER_MILLION:.2} (the peer: AWS's published per-item schedule, Streams → EventBridge Scheduler, below).\n");
    let _ = writeln!(d, "| per million items, at this many a month | item size | Regions | table delete and confirming read | GSI mode | expiry index table on Lambda | daemon | ours, GSI mode | **ours, expiry index table on Lambda** |");
    let _ = writeln!(d, "|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let m = |x: f64| r.per_million(x);
        let _ = writeln!(
            d,
            "| {} | {:.0} KB | {:.0} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | ${:.2} | **${:.2}** |",
            volume(r.items),
            r.kb,
            r.regions,
            m(r.table_delete + r.confirm_read),
            m(r.gsi),
            m(r.on_lambda),
            m(r.daemon),
            m(r.ours_gsi()),
            m(r.ours())
        );
    }
    let light = row(1e6, 1.0, 1.0);
    let mid = row(1e8, 1.0, 1.0);
    let heavy = row(1e9, 1.0, 1.0);
    let _ = writeln!(d, "\nWhat is billed: the delete (one write unit per KB on every replica) and batch mode's confirming read; a GSI entry's write and removal (two write units per item on every replica); the expiry index table's packs, put once and removed by native TTL (free): {:.3} keys listed per expired item (a write of an item the stream reports, refreshes and items the application deleted included), each billed as a pack of its own, {:.0} bytes and {:.0} write unit{}, {:.3} write units per expired item. **The rows bill a pack per key, not the counted {:.3} write units**: the counted run compresses a day of ttls to minutes, so a stream batch's records share the due instant a pack is keyed on far more often than a real day's (a batch of 100 records over a day's 86,340 seconds shares almost none). Strongly consistent queries at twice the GSI's (${:.2} a month more) plus about {:.3} read units per expired item for the packs read. The GSI's units are by the rule, not counted. In three Regions each Region indexes its own replica's stream; packs go by native TTL in every Region.", c.keys_listed, c.one_key_bytes, c.one_key_pack, if c.one_key_pack == 1.0 { "" } else { "s" }, c.index_write(), c.entry_put, i.queries_tick(), c.keys_listed * c.one_key_bytes / READ_UNIT_BYTES);
    let _ = writeln!(d, "\nThe indexer: per invocation a request and its duration at {:.0} MB; logs, {:.0} bytes for a batch indexed whole (its line is DEBUG then, and the platform's START, END and REPORT lines are left out by the function's system log level, WARN; a batch that failed a record logs a line at info); a batch holds what one poll found (at most {:.0}, {:.0} polls a second), λ / (1 − e^−λ) records for λ a shard's records between polls: {:.2} at 1M a month, {:.1} at 1B; one shard per {} write units a second. **The duration is assumed, not measured**: {:.0} ms plus {:.0} ms per round of `BatchWriteItem`s ({} entries, `ttl_sweeper::index::ENTRIES_PER_REQUEST`; {} at a time, `ttl_sweeper::index::CONCURRENCY`): {:.0} ms at 1M a month, {:.0} ms at 1B. Its two alarms: ${:.2} a month.", INDEX_MB, INDEXER_LOG_BYTES, STREAM_BATCH_SIZE, STREAM_POLLS_PER_S, light.per_invocation, heavy.per_invocation, thousands(SHARD_WRU_PER_S), ASSUMED_INDEX_BASE_S * 1000.0, ASSUMED_WRITE_S * 1000.0, i.entries_per_request, i.index_concurrency, light.duration_s * 1000.0, heavy.duration_s * 1000.0, 2.0 * PRICE_ALARM_MONTH);
    let calls = daemon_polls_per_s() * MONTH_S;
    let _ = writeln!(d, "\nThe daemon pays no Lambda but a streams read unit per `GetRecords`, every {:.0} ms on a quiet shard (`ttl_sweeper::index::follow::POLL`): {:.0} a second, {} a month per shard, ${:.2} whatever the traffic (the free {} a month is {:.0} % of it), three times that in three Regions; its host is not counted.", ttl_sweeper::index::follow::POLL.as_millis(), daemon_polls_per_s(), thousands(calls), calls * PRICE_STREAMS_RRU, thousands(STREAMS_FREE_RRU), STREAMS_FREE_RRU / calls * 100.0);
    let per_m = |r: WindowPaths, x: f64| r.per_million(x);
    let than = |a: f64, b: f64| if a < b { "less than" } else { "more than" };
    let heavy3 = row(1e9, 1.0, 3.0);
    let extra = |r: WindowPaths| {
        let x = per_m(r, r.on_lambda - r.gsi);
        if x < 0.0 {
            format!("−${:.2}", -x)
        } else {
            format!("+${x:.2}")
        }
    };
    let _ = writeln!(d, "\n**When each pays.** In one Region the GSI costs {}: per million 1 KB items the index table's indexer and queries come to {} against the GSI at 1M a month (an invocation per record, the queries' fixed ${:.2} a month) and {} at 1B; the daemon's reads, ${:.2} a month per shard, cost {} the function's requests, duration and logs at 1M a month (${:.2}), {} them at 100M (${:.2}). In three Regions the index table costs {}: ${:.2} per million 1 KB items at 1B a month against the GSI's ${:.2}, standbys' entries expiring by native TTL.", if heavy.gsi < heavy.on_lambda { "less" } else { "more" }, extra(light), i.queries_tick(), extra(heavy), light.stream_reads, than(light.stream_reads, light.lambda + light.logs), light.lambda + light.logs, than(mid.stream_reads, mid.lambda + mid.logs), mid.lambda + mid.logs, if heavy3.on_lambda < heavy3.gsi { "less" } else { "more" }, per_m(heavy3, heavy3.on_lambda), per_m(heavy3, heavy3.gsi));
    let ours = per_m(heavy, heavy.ours());
    let verdict = if ours <= PEER_PER_MILLION {
        format!(
            "is met: ours comes to ${ours:.2}, ${:.2} ({:.0} %) less",
            PEER_PER_MILLION - ours,
            (PEER_PER_MILLION - ours) / PEER_PER_MILLION * 100.0
        )
    } else {
        format!(
            "is not met: ours comes to ${ours:.2}, ${:.2} ({:.0} %) more",
            ours - PEER_PER_MILLION,
            (ours - PEER_PER_MILLION) / PEER_PER_MILLION * 100.0
        )
    };
    let floor = per_m(
        heavy,
        heavy.table_delete + heavy.confirm_read + heavy.entry_puts + heavy.entry_removals,
    );
    let conditional = per_m(heavy, heavy.ours_conditional());
    let _ = writeln!(d, "\n**Against the peer.** A schedule per item (DynamoDB Streams → EventBridge Scheduler; AWS Database Blog, event-driven TTL part 1), also asking nothing of writers, gives ${PEER_PER_MILLION:.2} per million items in one Region, deleted within 1–2 minutes (its own figure); ours, with the expiry index table on Lambda, deletes within a second: ${:.2} per million at 1M a month. **The goal, at most ${PEER_PER_MILLION:.2} per million 1 KB items at 1B a month in one Region, {verdict}**, nearly all of it requests per item: the delete (${:.2}), the confirming read (${:.2}), the index's writes (${:.2}: packs, which native TTL removes), ${floor:.2} together; `DELETE_MODE=conditional` drops the read and pays for the deletes whose condition failed, ${conditional:.2}, {}. In GSI mode ours is ${:.2}; in three Regions ${:.2} (GSI mode ${:.2}).", per_m(light, light.ours()), per_m(heavy, heavy.table_delete), per_m(heavy, heavy.confirm_read), per_m(heavy, heavy.entry_puts + heavy.entry_removals), if conditional <= PEER_PER_MILLION { format!("${:.2} under", PEER_PER_MILLION - conditional) } else { format!("still ${:.2} over", conditional - PEER_PER_MILLION) }, per_m(heavy, heavy.ours_gsi()), per_m(heavy3, heavy3.ours()), per_m(heavy3, heavy3.ours_gsi()));
    d.push_str(&goals(i, heavy, light, heavy3));
    d
}

/// The sweeper's part of a month that does not grow with the items (the index table on Lambda,
/// tick mode, in each Region): its function, the ticks' queries, the schedule, its logs, metrics,
/// key, dashboard and alarms, and the indexer's two alarms.
pub fn fixed_month(i: &Inputs, r: &WindowPaths) -> f64 {
    r.regions
        * (i.lambda_tick(128.0)
            + i.queries_tick()
            + i.schedule()
            + i.logs(r.items)
            + i.default_extras()
            + 2.0 * PRICE_ALARM_MONTH)
}

/// What grows with the items, per delete mode (batch, conditional): the table's deletes, batch
/// mode's read or conditional mode's failed deletes, the index's writes and the packs read, and
/// the indexer's requests, duration and logs; not the ticks' queries.
pub fn per_item_month(i: &Inputs, r: &WindowPaths) -> (f64, f64) {
    let index =
        r.entry_puts + r.entry_removals + (r.index_reads - i.queries_tick()) + r.lambda + r.logs;
    (
        r.table_delete + r.confirm_read + index,
        r.table_delete + r.failed_conditional + index,
    )
}

/// The daemon's part of a month that does not grow with the items (`run --every 1s
/// --follow-stream` in each Region): its host and streams reads, the ticks' queries, its logs,
/// metrics, key, dashboard and alarms, and the follower's two alarms.
pub fn fixed_month_daemon(i: &Inputs, r: &WindowPaths) -> f64 {
    r.daemon_host
        + r.stream_reads
        + r.regions
            * (i.queries_tick() + i.logs(r.items) + i.default_extras() + 2.0 * PRICE_ALARM_MONTH)
}

/// [`per_item_month`] for the daemon: its packs, gathered across batches, instead of the
/// indexer's, and no function.
pub fn per_item_month_daemon(i: &Inputs, r: &WindowPaths) -> (f64, f64) {
    let index = r.daemon_puts + r.entry_removals + (r.index_reads - i.queries_tick());
    (
        r.table_delete + r.confirm_read + index,
        r.table_delete + r.failed_conditional + index,
    )
}

/// The cost goals, each against its figure, in each delete mode, on Lambda and on the daemon:
/// 1 KB items.
fn goals(i: &Inputs, heavy: WindowPaths, light: WindowPaths, heavy3: WindowPaths) -> String {
    let mut d = String::new();
    let _ = writeln!(d, "
**Goals**, the expiry index table, 1 KB items, per million expired items, on Lambda (the stream indexer and the sweeper as functions) and on the daemon (`run --every 1s --follow-stream`, entries held at `FOLLOW_HOLD`'s defaults, its host included) (*all*: the per-item part and the fixed part, `fixed_month` or `fixed_month_daemon`, in every Region; *per-item*: the table's deletes, batch mode's read or conditional mode's failed deletes, the index's writes and reads, the indexer's requests, duration and logs):\n");
    let _ = writeln!(
        d,
        "| goal | at most | Lambda, batch | Lambda, conditional | daemon, batch | daemon, conditional | cheapest |"
    );
    let _ = writeln!(d, "|---|---|---|---|---|---|---|");
    let all = |r: &WindowPaths| {
        let (b, c) = per_item_month(i, r);
        let f = fixed_month(i, r);
        let (db, dc) = per_item_month_daemon(i, r);
        let df = fixed_month_daemon(i, r);
        let m = |x: f64| r.per_million(x);
        [m(b + f), m(c + f), m(db + df), m(dc + df)]
    };
    let per_item = |r: &WindowPaths| {
        let (b, c) = per_item_month(i, r);
        let (db, dc) = per_item_month_daemon(i, r);
        let m = |x: f64| r.per_million(x);
        [m(b), m(c), m(db), m(dc)]
    };
    let rows = [
        ("one Region, 1B a month, all", 1.00, all(&heavy)),
        ("one Region, 1B a month, all (stretch)", 0.90, all(&heavy)),
        ("one Region, 1M a month, per-item", 1.75, per_item(&light)),
        ("three Regions, 1B a month, all", 2.40, all(&heavy3)),
        (
            "one Region, 1B a month, all: AWS's minute-precise design",
            PEER_PER_MILLION,
            all(&heavy),
        ),
    ];
    let names = [
        "Lambda, batch",
        "Lambda, conditional",
        "daemon, batch",
        "daemon, conditional",
    ];
    for (goal, most, figures) in rows {
        let (at, best) = figures
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("four figures");
        let verdict = if best <= most { "met" } else { "not met" };
        let [lb, lc, db, dc] = figures;
        let _ = writeln!(
            d,
            "| {goal} | ${most:.2} | ${lb:.2} | ${lc:.2} | ${db:.2} | ${dc:.2} | ${best:.2} ({}): **{verdict}** |",
            names[at]
        );
    }
    let _ = writeln!(d, "\nThe fixed part at 1M a month in one Region: ${:.2} a month on Lambda (the per-item part: ${:.2} batch, ${:.2} conditional), ${:.2} on the daemon, its host ${:.2} of it.", fixed_month(i, &light), per_item_month(i, &light).0, per_item_month(i, &light).1, fixed_month_daemon(i, &light), light.daemon_host);
    let lambda = all(&heavy);
    let _ = writeln!(d, "\n**Why the daemon's packs are fuller.** A stream batch holds what one poll found, and a batch of 100 records over a day's {} due seconds shares almost none, so the Lambda indexer writes about a pack per key. The daemon's follower holds each entry due more than {:.0} s ahead (`HOLD_FROM`) for up to `FOLLOW_HOLD` ({:.0} min by default; at most `FOLLOW_HOLD_ENTRIES`, {}) and writes each due instant's entries together, at least {:.0} s before they are due: at 1B a month in one Region, {:.0} keys reach it a second, {:.2} keys a pack by the model's formula (its check against a counted run: \"Packs gathered across batches\" above), {:.3} write units a key against the Lambda's {:.3}; the saved stream position stays before the records whose entries are held, so a restart reads up to the hold's worth of records again. An invocation of the Lambda indexer cannot hold records past its return, so the Lambda path stays at ${:.2} (conditional) one Region, 1B a month. The host is assumed: a Fargate task on arm64 of {DAEMON_VCPU} vCPU and {DAEMON_GB:.0} GB with a public IPv4 address, ${:.2} a month a Region (${ASSUMED_FARGATE_ARM_VCPU_H} per vCPU-hour, ${ASSUMED_FARGATE_ARM_GB_H} per GB-hour, ${ASSUMED_PUBLIC_IPV4_H} per IPv4-hour, **assumed**, as third parties quote AWS's Fargate page; not re-read from AWS).", thousands(TTL_SPREAD_S), ttl_sweeper::index::follow::HOLD_FROM.as_secs_f64(), ttl_sweeper::index::follow::DEFAULT_HOLD.as_secs_f64() / 60.0, thousands(ttl_sweeper::index::follow::DEFAULT_MAX_ENTRIES as f64), ttl_sweeper::index::follow::WRITE_BEFORE.as_secs_f64(), heavy.records / heavy.regions / MONTH_S, heavy.held_keys_per_pack, wru_per_key(&heavy, heavy.daemon_puts), wru_per_key(&heavy, heavy.entry_puts), lambda[1], daemon_host_month());
    d
}

/// Write units per key listed that `puts` (a month's packs on `r`'s path) come to.
fn wru_per_key(r: &WindowPaths, puts: f64) -> f64 {
    puts / (r.records * PRICE_WRU)
}

/// The sentence of docs/BENCHMARKS.md section 7 on the cost of memory, between its
/// `cost-memory` markers.
pub fn memory_sentence(i: &Inputs) -> String {
    let per_mb: Vec<String> = [128.0, 256.0, 512.0]
        .iter()
        .map(|mb| format!("{mb:.0} MB ${:.2}/month", i.lambda_tick(*mb)))
        .collect();
    format!(
        "The tick loop's Lambda cost ({:.0} s of every {:.0} s) scales with memory: {}.\n",
        i.tick_run_s(),
        PERIOD_S,
        per_mb.join(", ")
    )
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
