//! Section 5 of docs/BENCHMARKS.md, "Scale on paper": window shards, requests in flight and cores
//! for a peak rate of expiries, from `c_us`, the CPU per delete measured from outside (`perf`).

use std::fmt::Write as _;

use crate::support::cost;

pub fn render(d: &mut String, c_us: f64) {
    let _ = writeln!(d, "## 5. Scale on paper\n");
    let _ = writeln!(d, "- **One window partition throttles** at about 1,000 writes/s (the per-partition-key write limit), counting both the writes that put items into the window and the sweeper's deletes from it. With 60 s windows and a fixed time to live, a peak of R writes/s of expiring items puts R writes/s on one window key: unsharded, R must stay under ~1,000/s; docs/scaling.md's rule is `WINDOW_SHARDS = ceil(R / 500)` (each key at half its limit).");
    for target in [10_000.0f64, 100_000.0] {
        let shards = (target / 500.0).ceil();
        let batches = target / 25.0;
        let cores = target * c_us / 1e6;
        let _ = writeln!(d, "- **{} expiries/s within 1 s**: `WINDOW_SHARDS = {}` ({:.0} deletes/s per window key); {:.0} BatchWriteItem requests/s; at ~10 ms per request on AWS, {:.0} requests in flight (`MAX_CONCURRENCY` ≥ {:.0}); our CPU at c = {:.2} µs/delete (section 7) is {:.2} cores{}; each tick queries {} shard partitions.", cost::human(target), shards, target / shards, batches, batches * 0.010, (batches * 0.010).ceil(), c_us, cores, if cores > 1.0 { " — more than one Lambda's share: split the shards across several functions (each sweeping a subset) or run `ttl-sweeper run` on bigger hosts" } else { "" }, shards * 2.0);
    }
    let _ = writeln!(d, "- **What bounds one invocation**: the table's write capacity (on-demand tables start at 4,000 WRU/s per partition-bound and double with traffic; provisioned tables at their setting — deletes use 2 WRU each with the GSI), the account's table-level throughput quota (40,000 WRU/s by default), connections (the SDK pools them; `MAX_CONCURRENCY` bounds requests in flight), and the function's CPU share (about 1/14 of a vCPU at 128 MB): section 7 gives the memory for a peak rate.\n");
}
