//! Section 5 of docs/BENCHMARKS.md, "Scale on paper": window shards, requests in flight and cores
//! for a peak rate of expiries, from `c_us`, the CPU per delete measured from outside (`perf`).

use std::fmt::Write as _;

use crate::support::cost;

/// A 25-key `BatchWriteItem`'s latency as the function sees it, for planning: docs/scaling.md's
/// figure (tests/readme.rs holds the two equal).
pub const PLANNING_LATENCY_S: f64 = 0.020;

pub fn render(d: &mut String, c_us: f64) {
    let _ = writeln!(d, "## 5. Scale on paper\n");
    let _ = writeln!(d, "- **One window partition throttles** at about 1,000 writes/s, counting the writes into the window and the sweeper's deletes from it: a peak of R writes/s of expiring items puts R/s on one window key; docs/scaling.md's rule is `WINDOW_SHARDS = ceil(R / 500)`.");
    for target in [10_000.0f64, 100_000.0] {
        let shards = (target / 500.0).ceil();
        let batches = target / 25.0;
        let cores = target * c_us / 1e6;
        let _ = writeln!(d, "- **{} expiries/s within 1 s**: `WINDOW_SHARDS = {}` ({:.0} deletes/s per key); {:.0} BatchWriteItem requests/s, {:.0} in flight at ~{:.0} ms each, docs/scaling.md's planning figure (`MAX_CONCURRENCY` ≥ {:.0}); at c = {:.2} µs/delete (section 7), {:.2} cores{}; {} shard partitions queried per tick.", cost::human(target), shards, target / shards, batches, batches * PLANNING_LATENCY_S, PLANNING_LATENCY_S * 1000.0, (batches * PLANNING_LATENCY_S).ceil(), c_us, cores, if cores > 1.0 { ", more than one Lambda: split the shards over functions or hosts" } else { "" }, shards * 2.0);
    }
    let _ = writeln!(d, "- **What bounds one invocation**: the table's write capacity (2 WRU per delete with the GSI), the account's table quota (40,000 WRU/s by default), `MAX_CONCURRENCY`, and the function's CPU (about 1/14 of a vCPU at 128 MB; section 7).\n");
}
