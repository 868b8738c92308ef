//! Section 2 of docs/BENCHMARKS.md, "Throughput": ours and the published routine deleting the
//! same past windows on the same server, and our own CPU cost per delete (from `cpu`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Instant;

use ttl_sweeper::engine::Stop;
use ttl_sweeper::expiry::window::Window;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::Key;

use crate::cpu::Cpu;
use crate::published::published_sweep;
use crate::support::*;
use crate::Scale;

pub struct Throughput {
    items: i64,
    windows: i64,
    ours_secs: f64,
    ours_deleted: u64,
    published_secs: f64,
    published_deleted: usize,
}

pub async fn throughput(s: &Scale) -> Throughput {
    let client = client().await;
    let now = now();
    let base = (now / 60) * 60 - 120;
    let per = s.throughput_items / s.throughput_windows;
    let items: Vec<Key> = (0..s.throughput_items)
        .map(|i| session(&format!("tp-{i:06}"), base - 60 * (i / per) - 1 - i % 50))
        .collect();
    let windows: Vec<Window> = (0..s.throughput_windows)
        .map(|k| Window {
            start: base - 60 * (k + 1),
            end: base - 60 * k,
        })
        .collect();
    let (ours, published) = (table_name("tp_ours"), table_name("tp_published"));
    for t in [&ours, &published] {
        create_table(&client, &TableSpec::simple(t)).await;
        let started = Instant::now();
        put_many(&client, t, items.clone()).await;
        eprintln!(
            "throughput: wrote {} items in {:.1} s",
            items.len(),
            started.elapsed().as_secs_f64()
        );
    }
    let cfg = config(&ours, &[]);
    let sweeper = sweeper_for(&cfg).await;
    let started = Instant::now();
    let report = sweeper
        .sweep_windows(Timestamp::from_secs(now), &windows, &Stop::never())
        .await;
    let ours_secs = started.elapsed().as_secs_f64();

    let deleted = Mutex::new(HashMap::new());
    let started = Instant::now();
    for w in &windows {
        // The published routine, pointed at each window in turn (as of the window's end).
        published_sweep(&client, &published, w.end, 60, &deleted).await;
    }
    let published_secs = started.elapsed().as_secs_f64();
    let published_deleted = deleted.lock().unwrap().len();
    Throughput {
        items: s.throughput_items,
        windows: s.throughput_windows,
        ours_secs,
        ours_deleted: report.items_deleted,
        published_secs,
        published_deleted,
    }
}

/// Section 2: the throughput table and the paragraph on our own CPU cost.
pub fn render(d: &mut String, tp: &Throughput, cpu: &Cpu) {
    let _ = writeln!(d, "## 2. Throughput\n");
    let _ = writeln!(d, "{} expired items in {} past windows, per table, both strategies reading the same windows on the same server.\n", tp.items, tp.windows);
    crate::table_head(d, "| strategy | deleted | wall time | items/s |");
    let _ = writeln!(
        d,
        "| ours (paginated, {} chunks in flight) | {} | {:.1} s | {:.0} |",
        8,
        tp.ours_deleted,
        tp.ours_secs,
        tp.ours_deleted as f64 / tp.ours_secs
    );
    let _ = writeln!(
        d,
        "| published routine (one page, sequential chunks) | {} | {:.1} s | {:.0} |",
        tp.published_deleted,
        tp.published_secs,
        tp.published_deleted as f64 / tp.published_secs
    );
    let _ = writeln!(d, "\nOurs is {:.1}× the published routine's rate here; real DynamoDB partitions scale further than DynamoDB Local.\n", (tp.ours_deleted as f64 / tp.ours_secs) / (tp.published_deleted as f64 / tp.published_secs));
    let _ = writeln!(d, "**Our own CPU cost.** Against a fake endpoint in another process answering at once, so that only our code, the SDK and HTTP count: {:.2} s of CPU for {} deletes = **{:.2} µs of CPU per deleted item** ({:.0} deletes/s wall, {:.1} s); 100,000 deletes take about {:.2} s.\n", cpu.cpu_secs, cpu.deleted, cpu.cpu_secs / cpu.deleted as f64 * 1e6, cpu.deleted as f64 / cpu.wall_secs, cpu.wall_secs, cpu.cpu_secs / cpu.deleted as f64 * 1e5);
}
