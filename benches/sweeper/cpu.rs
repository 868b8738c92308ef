//! Section 6 of docs/BENCHMARKS.md, "CPU per delete, cores and the server's ceiling": the CPU
//! per delete measured inside the benchmark (its own rows), and the section put together with
//! `perf`'s rows measured from outside. The median one-thread run also stands for the others in
//! sections 2 and 4.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use aws_sdk_dynamodb::Client;
use ttl_sweeper::config::Threads;
use ttl_sweeper::engine::{Stop, Sweeper};
use ttl_sweeper::expiry::window::windows_to_sweep;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{DynamoStore, TableSchema};

use crate::perf;
use crate::support::mem_store::default_schema;
use crate::support::*;
use crate::Scale;

pub struct Cpu {
    pub deleted: u64,
    /// User + system CPU of the sweep's own threads: the thread that drives it and the threads
    /// of the runtime it runs on (tokio's workers and blocking pool), over their whole life.
    pub cpu_secs: f64,
    /// User + system CPU of the whole benchmark process over the same interval (`getrusage`
    /// `RUSAGE_SELF`, the method before): the sweep's threads and every other thread.
    pub process_cpu_secs: f64,
    pub wall_secs: f64,
}

impl Cpu {
    pub fn us_per_delete(&self) -> f64 {
        self.cpu_secs / self.deleted.max(1) as f64 * 1e6
    }
}

fn cpu_time() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// User + system CPU seconds of the calling thread so far.
fn thread_cpu_time() -> f64 {
    // SAFETY: clock_gettime fills the struct we pass.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

fn fake_client(port: u16) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "b", "b", None, None, "bench",
        ))
        .build();
    Client::from_conf(config)
}

/// Section 6's CPU measurements, inside the benchmark then from outside: run first, while no
/// local server is running beside them.
pub fn cpu_measurements(
    scale: &Scale,
    rt: &tokio::runtime::Runtime,
) -> (Vec<(CpuMethod, Cpu)>, Vec<perf::OutsideRun>) {
    let inside = inside_cpu(scale.outside_per_window, scale.cpu_runs, rt.handle());
    let (per_window, latency_per_window, runs) = (
        scale.outside_per_window,
        scale.outside_latency_per_window,
        scale.cpu_runs,
    );
    let outside = rt
        .block_on(
            rt.spawn_blocking(move || perf::outside_cpu(per_window, latency_per_window, runs)),
        )
        .unwrap();
    (inside, outside)
}

/// Section 6: the CPU figures, with the server's ceiling and the 64-shard ticks measured now.
pub async fn section6(
    scale: &Scale,
    outside: &[perf::OutsideRun],
    own_us: &[(String, Vec<f64>)],
) -> String {
    let ceiling = perf::ceiling(
        scale.ceiling_items,
        &scale.ceiling_levels,
        scale.ceiling_reps,
    )
    .await;
    let shards = perf::shard_ticks(64, scale.shard_tick_secs, scale.per_second).await;
    let mut rows = String::new();
    perf::render(&mut rows, outside, own_us, &ceiling, &shards);
    rows
}

/// The client `DynamoStore::from_env` builds (the binaries' timeouts and retry budget, the
/// standard credential chain), pointed at `endpoint`.
async fn binary_client(endpoint: String) -> Client {
    let shared = DynamoStore::config_loader()
        .endpoint_url(endpoint)
        .load()
        .await;
    Client::new(&shared)
}

/// How the inside measurement is taken: the method of this benchmark's row, or the one it
/// replaced (kept to show the difference).
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum CpuMethod {
    /// A runtime of its own with these threads (built by [`Threads::builder`], as the binaries
    /// build theirs), the binaries' client, only its threads' CPU: what `ttl-sweeper sweep`
    /// does with the same `TOKIO_WORKER_THREADS`.
    OwnThreads(Threads),
    /// The benchmark's shared 2-worker runtime, a client with default settings, and the CPU of
    /// the whole process (`RUSAGE_SELF`).
    WholeProcess,
}

/// One sweep of `windows × per_window` items from a fake endpoint process, measured by `method`.
/// Call it outside any runtime for [`CpuMethod::OwnThreads`]; `shared` runs
/// [`CpuMethod::WholeProcess`].
fn cpu_per_delete(
    windows: usize,
    per_window: usize,
    method: CpuMethod,
    shared: &tokio::runtime::Handle,
) -> Cpu {
    let (mut child, port) = perf::spawn_fake(&[per_window.to_string()], None);
    let schema = TableSchema {
        table_name: "fake".into(),
        ..default_schema()
    };
    let cfg = config("fake", &[]);
    let now = now();
    let ws = windows_to_sweep(Timestamp::from_secs(now), 60, windows as u32 - 1);
    let sweep = |store: DynamoStore| {
        let sweeper = Sweeper::new(store, schema.clone(), cfg.options.clone());
        let ws = ws.clone();
        async move {
            sweeper
                .sweep_windows(Timestamp::from_secs(now), &ws, &Stop::never())
                .await
        }
    };
    let (process0, wall0) = (cpu_time(), Instant::now());
    let (report, cpu_secs) = match method {
        CpuMethod::WholeProcess => {
            let report = shared.block_on(async {
                let store = DynamoStore::new(fake_client(port));
                sweep(store).await
            });
            (report, cpu_time() - process0)
        }
        CpuMethod::OwnThreads(threads) => {
            // Each thread of the runtime adds its CPU when it ends; dropping the runtime ends
            // them all (workers and blocking pool) before it returns. A current-thread runtime
            // runs its tasks on the thread driving it, counted below.
            let spent = Arc::new(Mutex::new(0.0f64));
            let at_stop = spent.clone();
            let rt = threads
                .builder()
                .on_thread_stop(move || *at_stop.lock().unwrap() += thread_cpu_time())
                .build()
                .unwrap();
            let driver0 = thread_cpu_time();
            let report = rt.block_on(async {
                let client = binary_client(format!("http://127.0.0.1:{port}")).await;
                sweep(DynamoStore::new(client)).await
            });
            drop(rt);
            let threads = *spent.lock().unwrap();
            (report, threads + thread_cpu_time() - driver0)
        }
    };
    let (process, wall) = (cpu_time() - process0, wall0.elapsed().as_secs_f64());
    let _ = child.kill();
    let _ = child.wait();
    Cpu {
        deleted: report.items_deleted,
        cpu_secs,
        process_cpu_secs: process,
        wall_secs: wall,
    }
}

/// The inside rows of section 6: label and CPU per delete (µs) of every run.
pub fn own_threads_us(inside: &[(CpuMethod, Cpu)]) -> Vec<(String, Vec<f64>)> {
    let of = |want: CpuMethod, whole: bool| -> Vec<f64> {
        inside
            .iter()
            .filter(|(m, _)| *m == want)
            .map(|(_, c)| {
                let secs = if whole {
                    c.process_cpu_secs
                } else {
                    c.cpu_secs
                };
                secs / c.deleted.max(1) as f64 * 1e6
            })
            .collect()
    };
    let one = CpuMethod::OwnThreads(Threads::One);
    let two = CpuMethod::OwnThreads(Threads::parse(Some("2")).expect("2 workers"));
    vec![
        (
            "own runtime, one thread (the binaries' default): its threads only (**the row**)"
                .into(),
            of(one, false),
        ),
        (
            "own runtime, 2 workers (`TOKIO_WORKER_THREADS=2`): its threads only".into(),
            of(two, false),
        ),
        (
            "the same one-thread runs: whole process".into(),
            of(one, true),
        ),
        (
            "before: shared runtime, default client, whole process".into(),
            of(CpuMethod::WholeProcess, true),
        ),
    ]
}

/// `runs` inside measurements of each method in alternating order, printed as they come.
fn inside_cpu(
    per_window: usize,
    runs: usize,
    shared: &tokio::runtime::Handle,
) -> Vec<(CpuMethod, Cpu)> {
    let windows = 16;
    let methods = [
        CpuMethod::OwnThreads(Threads::One),
        CpuMethod::OwnThreads(Threads::parse(Some("2")).expect("2 workers")),
        CpuMethod::WholeProcess,
    ];
    let mut out = Vec::new();
    for run in 0..runs {
        for k in 0..methods.len() {
            let method = methods[(k + run) % methods.len()];
            let c = cpu_per_delete(windows, per_window, method, shared);
            eprintln!(
                "CPU per delete (inside, {method:?}): {:.2} µs counted, {:.2} µs whole process, {} deletes, {:.0} deletes/s",
                c.us_per_delete(),
                c.process_cpu_secs / c.deleted.max(1) as f64 * 1e6,
                c.deleted,
                c.deleted as f64 / c.wall_secs
            );
            out.push((method, c));
        }
    }
    out
}
