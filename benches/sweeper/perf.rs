//! The performance rows of `make bench`: CPU per delete measured from outside the sweeper (a
//! release `ttl-sweeper sweep` process against the instant fake endpoint, on one and two cores),
//! DynamoDB Local's own delete ceiling against ours over a concurrency sweep, and the duration of
//! a 1 s tick over 64 shards.

use std::fmt::Write as _;
use std::io::Read as _;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue as AV;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use ttl_sweeper::engine::Stop;
use ttl_sweeper::expiry::window::Window;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::Key;

use crate::spread3;
use crate::support::observed::{Call, Observer};
use crate::support::*;

fn fmt3(v: &[f64], f: impl Fn(f64) -> String) -> String {
    let (lo, mid, hi) = spread3(v);
    format!("{} ({}–{})", f(mid), f(lo), f(hi))
}

// ------------------------------------------------------------------------------ outside CPU

/// How the fake endpoint answers during an outside run.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Pace {
    /// At once.
    Instant,
    /// After a seeded random delay of `lo_ms` to `hi_ms` milliseconds, as DynamoDB answers
    /// in-Region.
    Delayed { lo_ms: u64, hi_ms: u64 },
}

impl Pace {
    /// The fake endpoint's DELAY argument.
    pub fn arg(self) -> String {
        match self {
            Pace::Instant => "0".into(),
            Pace::Delayed { lo_ms, hi_ms } => format!("{lo_ms}-{hi_ms}"),
        }
    }

    pub fn label(self) -> String {
        match self {
            Pace::Instant => "at once".into(),
            Pace::Delayed { lo_ms, hi_ms } => format!("after {lo_ms}–{hi_ms} ms"),
        }
    }
}

/// The answer delay of the latency rows: DynamoDB's in-Region pace.
pub const LATENCY: Pace = Pace::Delayed {
    lo_ms: 5,
    hi_ms: 10,
};

/// The way the sweeper sends its requests: one route today, the SDK's request pipeline (a
/// baseline build is run with its own defaults).
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Route {
    pub label: &'static str,
}

/// The routes measured from outside, each with every row of [`OUTSIDE_CASES`].
pub const ROUTES: [Route; 1] = [Route {
    label: "SDK pipeline",
}];

/// The rows of each route: the fake endpoint's pace, the sweeper's cores and its runtime's
/// threads (1: the binaries' default, one thread; more: `TOKIO_WORKER_THREADS` workers).
pub const OUTSIDE_CASES: [(Pace, usize, usize); 6] = [
    (Pace::Instant, 1, 1),
    (Pace::Instant, 2, 1),
    (Pace::Instant, 2, 2),
    (LATENCY, 1, 1),
    (LATENCY, 2, 1),
    (LATENCY, 2, 2),
];

/// One `ttl-sweeper sweep` process measured from outside.
pub struct OutsideRun {
    /// Which binary: [`THIS_BUILD`], or the baseline given by `BENCH_BASELINE_SWEEPER`.
    pub build: &'static str,
    pub route: Route,
    pub pace: Pace,
    pub cores: usize,
    /// The runtime's threads: 1 is the default (`TOKIO_WORKER_THREADS` unset), more are set.
    pub threads: usize,
    /// `MAX_CONCURRENCY` of the sweep.
    pub concurrency: usize,
    pub deleted: u64,
    pub cpu_secs: f64,
    pub wall_secs: f64,
    /// Voluntary and involuntary context switches of the sweeper process (`nvcsw + nivcsw`).
    pub switches: u64,
    /// DynamoDB requests the fake endpoint answered.
    pub requests: u64,
    /// The sweeper's peak resident memory (`VmHWM` read while it ran, see [`measured`]), MiB.
    pub peak_mib: f64,
    /// User + system CPU of the fake endpoint process over the same run.
    pub fake_cpu_secs: f64,
}

impl OutsideRun {
    pub fn us_per_delete(&self) -> f64 {
        self.cpu_secs / self.deleted.max(1) as f64 * 1e6
    }
    pub fn per_sec(&self) -> f64 {
        self.deleted as f64 / self.wall_secs
    }
    /// The fake endpoint's CPU over the run's wall time: near 1, the fake is the limit.
    pub fn fake_busy(&self) -> f64 {
        self.fake_cpu_secs / self.wall_secs
    }
    pub fn switches_per_request(&self) -> f64 {
        self.switches as f64 / self.requests.max(1) as f64
    }
    pub fn us_per_request(&self) -> f64 {
        self.cpu_secs / self.requests.max(1) as f64 * 1e6
    }
}

/// Makes `cmd` run on the CPUs `cpus` only.
pub fn pin(cmd: &mut Command, cpus: Vec<usize>) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: only async-signal-safe calls (sched_setaffinity) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in &cpus {
                libc::CPU_SET(c, &mut set);
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The fake endpoint (`--fake-dynamodb PORT ARGS…`) as a process of its own, its stdout piped, on
/// the CPU `cpu` (any, with `None`); returned once it accepts connections, with its port.
pub fn spawn_fake(args: &[String], cpu: Option<usize>) -> (Child, u16) {
    let port = free_port();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.arg("--fake-dynamodb").arg(port.to_string()).args(args);
    if let Some(cpu) = cpu {
        pin(&mut cmd, vec![cpu]);
    }
    let fake = cmd.stdout(Stdio::piped()).spawn().unwrap();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    (fake, port)
}

/// Stops the fake endpoint `fake` (SIGTERM): what it printed, and what `wait4` tells of it.
pub fn stop_fake(mut fake: Child) -> (String, Reaped) {
    // SAFETY: signals our own child, not yet reaped.
    unsafe { libc::kill(fake.id() as i32, libc::SIGTERM) };
    let mut said = String::new();
    let _ = fake.stdout.take().unwrap().read_to_string(&mut said);
    (said, reap(fake.id()))
}

/// What `wait4` tells of a finished child.
pub struct Reaped {
    /// User + system CPU seconds.
    pub cpu_secs: f64,
    /// Voluntary + involuntary context switches.
    pub switches: u64,
}

/// Reaps our own child `pid`, with its rusage.
pub fn reap(pid: u32) -> Reaped {
    let mut status = 0;
    // SAFETY: waits for our own child and fills the rusage we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid as i32, "wait4");
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Reaped {
        cpu_secs: tv(usage.ru_utime) + tv(usage.ru_stime),
        switches: (usage.ru_nvcsw + usage.ru_nivcsw) as u64,
    }
}

/// Runs `cmd` to completion on the CPUs `cpus`; returns its stdout, what `wait4` tells of that
/// process alone, its peak resident memory (MiB) and wall seconds.
///
/// The peak is the last `VmHWM` read from /proc while it ran (every 2 ms), not `wait4`'s
/// `ru_maxrss`: that counts the memory of the parent at fork time too (Linux keeps the high-water
/// mark of the address space `exec` replaced), so every child of a big benchmark process would
/// report at least the benchmark's own size.
// The child is reaped by `wait4` (see `reap`), which `Child::wait` cannot replace.
#[allow(clippy::zombie_processes)]
pub fn measured(cmd: &mut Command, cpus: Vec<usize>) -> (String, Reaped, f64, f64) {
    pin(cmd, cpus);
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ttl-sweeper");
    let pid = child.id();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        // The child is not reaped before this thread ends, so `pid` stays its own.
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(Ordering::Relaxed) {
                // The start-up section's reading of /proc, the same for every child.
                match crate::vm_hwm_kib(pid as i32) {
                    Some(kib) => peak = peak.max(kib),
                    None if peak > 0 => break,
                    None => {}
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        })
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    done.store(true, Ordering::Relaxed);
    let peak_kib = watcher.join().unwrap();
    let reaped = reap(pid);
    (
        out,
        reaped,
        peak_kib as f64 / 1024.0,
        started.elapsed().as_secs_f64(),
    )
}

/// The build under test: `target/release/ttl-sweeper`.
pub const THIS_BUILD: &str = "this build";
/// A second binary measured beside it in the same runs, from `BENCH_BASELINE_SWEEPER` (a path).
pub const BASELINE_BUILD: &str = "baseline";

/// Batch mode's CPU per delete, as a multiple of the baseline's, that is its goal.
pub const CPU_GOAL_RATIO: f64 = 1.1;

/// The baseline as the text names it: `BENCH_BASELINE_COMMIT` (scripts/baseline.sh sets it), or
/// the binary's path.
fn baseline_name() -> String {
    match std::env::var("BENCH_BASELINE_COMMIT") {
        Ok(commit) if !commit.is_empty() => format!("the build of {commit}"),
        _ => format!(
            "`{}`",
            std::env::var("BENCH_BASELINE_SWEEPER").unwrap_or_default()
        ),
    }
}

/// `MAX_CONCURRENCY` of the outside runs: the default. (64 in flight was tried for the cores
/// rows: it cost more CPU per delete and was no faster on either core count.)
pub const OUTSIDE_CONCURRENCY: [usize; 1] = [8];

/// `runs` sweeps of each route and row ([`ROUTES`] × [`OUTSIDE_CASES`]) by the release CLI (and
/// by the binary `BENCH_BASELINE_SWEEPER` names, if set), each against a fresh fake endpoint process, at each of [`OUTSIDE_CONCURRENCY`]; the order of
/// the rows turns by one each run. Instant rows read `16 × per_window` fake items, latency rows
/// `16 × latency_per_window`.
// The fake endpoint is reaped by `wait4` (see `reap`), which `Child::wait` cannot replace.
#[allow(clippy::zombie_processes)]
pub fn outside_cpu(per_window: usize, latency_per_window: usize, runs: usize) -> Vec<OutsideRun> {
    let binary = crate::daemon::release_binary("ttl-sweeper");
    let mut builds = vec![(THIS_BUILD, binary)];
    let baseline = std::env::var_os("BENCH_BASELINE_SWEEPER").filter(|b| !b.is_empty());
    if let Some(baseline) = baseline {
        builds.push((BASELINE_BUILD, baseline.into()));
    }
    let cases: Vec<(&str, &std::path::Path, Route, Pace, usize, usize)> = builds
        .iter()
        .flat_map(|(build, binary)| {
            ROUTES.iter().flat_map(move |&route| {
                OUTSIDE_CASES.iter().map(move |&(pace, cores, threads)| {
                    (*build, binary.as_path(), route, pace, cores, threads)
                })
            })
        })
        .collect();
    let mut results = Vec::new();
    let last_cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    for run in 0..runs * OUTSIDE_CONCURRENCY.len() {
        let concurrency = OUTSIDE_CONCURRENCY[run % OUTSIDE_CONCURRENCY.len()];
        let turn = run / OUTSIDE_CONCURRENCY.len();
        for k in 0..cases.len() {
            let (build, binary, route, pace, cores, threads) = cases[(k + turn) % cases.len()];
            let items = match pace {
                Pace::Instant => per_window,
                Pace::Delayed { .. } => latency_per_window,
            };
            // The fake endpoint on the last CPU; one core for the sweeper is the first CPU, so
            // the two do not share a CPU; two cores are both, the second shared with the fake.
            let args = [items.to_string(), pace.arg(), (run + 1).to_string()];
            let (fake, port) = spawn_fake(&args, Some(last_cpu));
            let mut cmd = Command::new(binary);
            cmd.arg("sweep")
                .envs(LOCAL_AWS_ENV)
                .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
                .env("TABLE_NAME", "fake")
                .env("MAX_CONCURRENCY", concurrency.to_string());
            // Unset for one thread, the default: a baseline build older than that default then
            // runs as it would be deployed.
            cmd.env_remove("TOKIO_WORKER_THREADS");
            if threads > 1 {
                cmd.env("TOKIO_WORKER_THREADS", threads.to_string());
            }
            let (out, sweeper, peak_mib, wall_secs) = measured(&mut cmd, (0..cores).collect());
            let (said, fake_reaped) = stop_fake(fake);
            let fake_cpu_secs = fake_reaped.cpu_secs;
            // `requests N` comes first; the counts per operation follow on their own line.
            let requests = said
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .strip_prefix("requests ")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
            let deleted = report["items_deleted"].as_u64().unwrap_or(0);
            let r = OutsideRun {
                build,
                route,
                pace,
                cores,
                threads,
                concurrency,
                deleted,
                cpu_secs: sweeper.cpu_secs,
                wall_secs,
                switches: sweeper.switches,
                requests,
                peak_mib,
                fake_cpu_secs,
            };
            eprintln!(
                "outside CPU, {build}, {}, answers {}, {} core(s), {threads} thread(s), {concurrency} in flight: {} deletes, {} requests, {:.2} µs CPU/delete, {:.0} µs CPU/request, {:.2} context switches/request, peak {:.0} MiB, {:.0} deletes/s, fake endpoint busy {:.0} % of its CPU",
                route.label,
                pace.label(),
                cores,
                r.deleted,
                r.requests,
                r.us_per_delete(),
                r.us_per_request(),
                r.switches_per_request(),
                r.peak_mib,
                r.per_sec(),
                r.fake_busy() * 100.0
            );
            results.push(r);
        }
    }
    results
}

// ------------------------------------------------------------------------------ ceiling

/// Deletes/s at each concurrency, one value per repetition.
pub struct Ceiling {
    pub items: usize,
    pub levels: Vec<usize>,
    /// `raw[i][r]`: pre-built BatchWriteItem requests over raw hyper, `levels[i]` in flight.
    pub raw: Vec<Vec<f64>>,
    /// `ours[i][r]`: a sweep with MAX_CONCURRENCY = `levels[i]`.
    pub ours: Vec<Vec<f64>>,
    /// `gauges[i][r]`: what was in flight during `ours[i][r]`.
    pub gauges: Vec<Vec<Gauge>>,
}

/// BatchWriteItem requests in flight during one sweep.
#[derive(Clone, Copy, Default, Debug)]
pub struct Gauge {
    /// Time-weighted mean over the sweep, from its start to its end.
    pub mean: f64,
    pub max: usize,
    /// From the sweep's start to its first BatchWriteItem (the first Query pages).
    pub first_ms: f64,
}

#[derive(Default)]
struct GaugeState {
    now: usize,
    max: usize,
    area: f64,
    last: Option<Instant>,
}

/// Counts the BatchWriteItem calls of a [`Store`] in flight.
#[derive(Default)]
struct InFlight(std::sync::Mutex<GaugeState>);

impl InFlight {
    fn step(&self, up: bool) {
        let mut s = self.0.lock().unwrap();
        let t = Instant::now();
        if let Some(last) = s.last {
            s.area += s.now as f64 * (t - last).as_secs_f64();
        }
        s.last = Some(t);
        s.now = if up { s.now + 1 } else { s.now - 1 };
        s.max = s.max.max(s.now);
    }
}

struct Down(Arc<InFlight>);

impl Drop for Down {
    fn drop(&mut self) {
        self.0.step(false);
    }
}

/// Counts the BatchWriteItem calls in flight through an [`Observed`] store, and when the first
/// was sent.
struct Counted {
    gauge: Arc<InFlight>,
    first: Arc<std::sync::Mutex<Option<Instant>>>,
}

impl Observer for Counted {
    type Guard = Option<Down>;

    async fn before(&self, call: Call<'_>) -> Option<Down> {
        let Call::BatchDelete { .. } = call else {
            return None;
        };
        self.first.lock().unwrap().get_or_insert_with(Instant::now);
        self.gauge.step(true);
        Some(Down(self.gauge.clone()))
    }
}

/// Items of `n` spread over `windows` past windows, returned with the windows.
fn ceiling_items(prefix: &str, n: usize, windows: i64) -> (Vec<Key>, Vec<Window>) {
    let base = (now() / 60) * 60 - 120;
    let per = (n as i64 + windows - 1) / windows;
    let items = (0..n as i64)
        .map(|i| {
            session(
                &format!("{prefix}-{i:06}"),
                base - 60 * (i / per) - 1 - i % 50,
            )
        })
        .collect();
    let windows = (0..windows)
        .map(|k| Window {
            start: base - 60 * (k + 1),
            end: base - 60 * k,
        })
        .collect();
    (items, windows)
}

/// The lightest client we can build: every BatchWriteItem body built before the clock starts,
/// `inflight` requests at a time over keep-alive HTTP/1.1 connections; deletes/s.
async fn raw_deletes(endpoint: &str, table: &str, ids: &[String], inflight: usize) -> f64 {
    use hyper_util::client::legacy::Client as HyperClient;
    use hyper_util::rt::TokioExecutor;
    let client: HyperClient<_, Full<Bytes>> =
        HyperClient::builder(TokioExecutor::new()).build_http();
    let date = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    // DynamoDB Local reads the access key from the Authorization header; it does not check
    // the signature.
    let auth = format!(
        "AWS4-HMAC-SHA256 Credential=local/{}/us-east-1/dynamodb/aws4_request, \
         SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature={}",
        &date[..8],
        "0".repeat(64)
    );
    let bodies: Vec<Bytes> = ids
        .chunks(25)
        .map(|chunk| {
            let requests: Vec<serde_json::Value> = chunk
                .iter()
                .map(|id| serde_json::json!({"DeleteRequest": {"Key": {"id": {"S": id}}}}))
                .collect();
            Bytes::from(serde_json::json!({"RequestItems": {table: requests}}).to_string())
        })
        .collect();
    let uri: hyper::Uri = endpoint.parse().unwrap();
    let next = Arc::new(AtomicUsize::new(0));
    let bodies = Arc::new(bodies);
    let started = Instant::now();
    let workers: Vec<_> = (0..inflight)
        .map(|_| {
            let (client, bodies, next) = (client.clone(), bodies.clone(), next.clone());
            let (uri, auth, date) = (uri.clone(), auth.clone(), date.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(body) = bodies.get(i) else { break };
                    let req = hyper::Request::post(uri.clone())
                        .header("content-type", "application/x-amz-json-1.0")
                        .header("x-amz-target", "DynamoDB_20120810.BatchWriteItem")
                        .header("x-amz-date", &date)
                        .header("authorization", &auth)
                        .body(Full::new(body.clone()))
                        .unwrap();
                    let resp = client
                        .request(req)
                        .await
                        .expect("BatchWriteItem over hyper");
                    let status = resp.status();
                    let body = resp.into_body().collect().await.unwrap().to_bytes();
                    let answer: serde_json::Value =
                        serde_json::from_slice(&body).unwrap_or_default();
                    assert!(
                        status.is_success()
                            && answer["UnprocessedItems"]
                                .as_object()
                                .is_some_and(|m| m.is_empty()),
                        "BatchWriteItem: {status} {}",
                        String::from_utf8_lossy(&body)
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    ids.len() as f64 / started.elapsed().as_secs_f64()
}

/// Our sweep of `windows` with MAX_CONCURRENCY = `inflight`; deletes/s and what was in flight.
async fn our_deletes(
    table: &str,
    windows: &[Window],
    inflight: usize,
    expect: usize,
) -> (f64, Gauge) {
    let cfg = config(table, &[("MAX_CONCURRENCY", &inflight.to_string())]);
    let (gauge, first) = (
        Arc::new(InFlight::default()),
        Arc::new(std::sync::Mutex::new(None)),
    );
    let observer = Counted {
        gauge: gauge.clone(),
        first: first.clone(),
    };
    let sweeper = sweeper_over(&cfg, |inner| Observed { inner, observer }).await;
    let started = Instant::now();
    let report = sweeper
        .sweep_windows(Timestamp::from_secs(now()), windows, &Stop::never())
        .await;
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(report.items_deleted as usize, expect, "{report:?}");
    let s = gauge.0.lock().unwrap();
    let first_ms = first
        .lock()
        .unwrap()
        .map_or(f64::NAN, |t| (t - started).as_secs_f64() * 1e3);
    (
        expect as f64 / secs,
        Gauge {
            mean: s.area / secs,
            max: s.max,
            first_ms,
        },
    )
}

/// DynamoDB Local's delete ceiling and ours, at each of `levels`, `reps` times in alternating
/// order; each measurement on a fresh table of `items` items.
pub async fn ceiling(items: usize, levels: &[usize], reps: usize) -> Ceiling {
    let client = client().await;
    let endpoint = endpoint();
    let mut raw = vec![Vec::new(); levels.len()];
    let mut ours = vec![Vec::new(); levels.len()];
    let mut gauges = vec![Vec::new(); levels.len()];
    let mut seq = 0;
    // Warm-up, not counted: the local server compiles its hot paths during the first thousands
    // of requests, which would otherwise land in whichever measurement runs first.
    for raw_first in [true, false] {
        seq += 1;
        let (rate, _) = measure_once(&client, &endpoint, seq, items, 8, raw_first).await;
        eprintln!(
            "ceiling, warm-up at 8 in flight: {} {rate:.0} deletes/s (not counted)",
            if raw_first { "raw hyper" } else { "ours" }
        );
    }
    for rep in 0..reps {
        for (li, &level) in levels.iter().enumerate() {
            let order = if (rep + li) % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for raw_first in order {
                seq += 1;
                let (rate, gauge) =
                    measure_once(&client, &endpoint, seq, items, level, raw_first).await;
                eprintln!(
                    "ceiling, rep {} at {level} in flight: {} {rate:.0} deletes/s{}",
                    rep + 1,
                    if raw_first { "raw hyper" } else { "ours" },
                    gauge.map_or(String::new(), |g| format!(
                        " (BatchWriteItem in flight: mean {:.1}, max {}; first after {:.0} ms)",
                        g.mean, g.max, g.first_ms
                    ))
                );
                match gauge {
                    None => raw[li].push(rate),
                    Some(g) => {
                        ours[li].push(rate);
                        gauges[li].push(g);
                    }
                }
            }
        }
    }
    Ceiling {
        items,
        levels: levels.to_vec(),
        raw,
        ours,
        gauges,
    }
}

/// One measurement on a fresh table of `items` items: the raw client (`raw`) or a sweep, at
/// `level` in flight; checks the table is empty after it.
async fn measure_once(
    client: &aws_sdk_dynamodb::Client,
    endpoint: &str,
    seq: usize,
    items: usize,
    level: usize,
    raw: bool,
) -> (f64, Option<Gauge>) {
    let windows_n = 8;
    let table = table_name(&format!("ceil{seq}"));
    create_table(client, &TableSpec::simple(&table)).await;
    let (batch, windows) = ceiling_items(&table, items, windows_n);
    let ids: Vec<String> = batch
        .iter()
        .map(|k| match k.get("id") {
            Some(AV::S(s)) => s.clone(),
            _ => unreachable!(),
        })
        .collect();
    put_many(client, &table, batch).await;
    let (rate, gauge) = if raw {
        (raw_deletes(endpoint, &table, &ids, level).await, None)
    } else {
        let (rate, gauge) = our_deletes(&table, &windows, level, items).await;
        (rate, Some(gauge))
    };
    let left = client
        .scan()
        .table_name(&table)
        .select(aws_sdk_dynamodb::types::Select::Count)
        .send()
        .await
        .map(|o| o.count)
        .unwrap_or(-1);
    assert_eq!(left, 0, "{table}: items left after the deletes");
    let _ = client.delete_table().table_name(&table).send().await;
    (rate, gauge)
}

// ------------------------------------------------------------------------------ 64 shards

/// Durations (ms) of the 1 s ticks over a table with `shards` shards.
pub struct ShardTicks {
    pub shards: u32,
    pub items: usize,
    pub deleted: u64,
    pub tick_ms: Vec<f64>,
}

/// The 1 s tick loop over WINDOW_SHARDS = `shards` against DynamoDB Local for `secs` seconds,
/// `per_second` items expiring each second; the duration of every tick (the full sweeps running
/// beside the ticks are not counted as ticks).
pub async fn shard_ticks(shards: u32, secs: i64, per_second: i64) -> ShardTicks {
    let client = client().await;
    let table = table_name("tick64");
    create_table(&client, &TableSpec::simple(&table)).await;
    let t0 = now();
    let items: Vec<Key> = (t0 + 3..=t0 + 2 + secs)
        .flat_map(|t| (0..per_second).map(move |j| (format!("s-{t}-{j:03}"), t)))
        .map(|(id, ttl)| sharded(&id, ttl, 60, shards))
        .collect();
    let n = items.len();
    put_many(&client, &table, items).await;
    let cfg = config(&table, &[("WINDOW_SHARDS", &shards.to_string())]);
    let sweeper = sweeper_for(&cfg).await;
    let mut tick_ms = Vec::new();
    let total = tick_until(&sweeper, t0 + 2 + secs + 2, |r| {
        // A tick reads the window(s) since the previous tick; a full sweep, the lookback.
        if r.windows_swept + r.windows_left <= 2 {
            tick_ms.push(r.duration_ms as f64);
        }
    })
    .await;
    ShardTicks {
        shards,
        items: n,
        deleted: total.items_deleted,
        tick_ms,
    }
}

// ------------------------------------------------------------------------------ rendering

/// Lambda's CPU share at `mb` MB: one vCPU at 1,769 MB, proportional below.
/// c, the CPU per delete the docs plan with (sections 5 and 7, docs/scaling.md): the median of
/// the outside runs of the first route (the default) on the default one thread, against the
/// endpoint that answers at DynamoDB's pace ([`LATENCY`]), at the default concurrency, 1- and
/// 2-core. (Against an instant endpoint a sweep costs about half as much: responses arrive
/// while it is busy and it never waits idle.)
pub fn planning_us(outside: &[OutsideRun]) -> f64 {
    let (_, us, _) = spread3(
        &outside
            .iter()
            .filter(|r| {
                r.concurrency == OUTSIDE_CONCURRENCY[0]
                    && r.build == THIS_BUILD
                    && r.pace == LATENCY
                    && r.threads == 1
                    && r.route == ROUTES[0]
            })
            .map(|r| r.us_per_delete())
            .collect::<Vec<_>>(),
    );
    us
}

pub fn lambda_vcpu(mb: f64) -> f64 {
    (mb / 1769.0).min(1.0)
}

/// The table of the outside runs, with its method and the ratios between its rows.
pub fn render_outside(d: &mut String, outside: &[OutsideRun]) {
    let mut builds: Vec<&str> = outside.iter().map(|r| r.build).collect();
    builds.sort_by_key(|b| *b != THIS_BUILD);
    builds.dedup();
    let rows = |build: &str,
                route: Route,
                (pace, cores, threads): (Pace, usize, usize),
                concurrency: usize| {
        outside
            .iter()
            .filter(|r| {
                r.build == build
                    && r.route == route
                    && r.pace == pace
                    && r.cores == cores
                    && r.threads == threads
                    && r.concurrency == concurrency
            })
            .collect::<Vec<&OutsideRun>>()
    };
    let default_in_flight = OUTSIDE_CONCURRENCY[0];
    let deleted = |pace: Pace| {
        outside
            .iter()
            .find(|r| r.pace == pace)
            .map_or(0, |r| r.deleted)
    };
    let runs_each = rows(THIS_BUILD, ROUTES[0], OUTSIDE_CASES[0], default_in_flight).len();
    let baseline = if builds.len() > 1 {
        "; *baseline*: the binary `BENCH_BASELINE_SWEEPER` names, measured in the same runs (its rows take their turn with the others)"
    } else {
        ""
    };
    let routes = ROUTES
        .iter()
        .map(|r| format!("*{}*: the SDK's own request pipeline", r.label))
        .collect::<Vec<_>>()
        .join("; ");
    let Pace::Delayed { lo_ms, hi_ms } = LATENCY else {
        unreachable!("LATENCY is a delay")
    };
    let _ = writeln!(d, "**Measured from outside.** A release `ttl-sweeper sweep` (16 windows, `MAX_CONCURRENCY` {default_in_flight}) against the fake DynamoDB endpoint on the second CPU, answering *at once* ({} deletes per run) or *after {lo_ms}–{hi_ms} ms* as DynamoDB in-Region ({} deletes per run); CPU is user + system (`wait4`). *1 core*: the sweeper on the first CPU; *2 cores*: both, one shared with the fake. *Threads*: 1 (the default) or `TOKIO_WORKER_THREADS=2`. Route — {routes}{baseline}. *Fake endpoint busy*: its CPU share; near 100 %, it sets the pace. {runs_each} runs of each row; median (min–max).\n",
        deleted(Pace::Instant), deleted(LATENCY));
    crate::table_head(d, "| build | route | fake answers | cores | threads | in flight | CPU per delete | CPU per request | context switches per request | peak memory | deletes/s (wall) | fake endpoint busy |");
    for build in &builds {
        for route in ROUTES {
            for concurrency in OUTSIDE_CONCURRENCY {
                for case in OUTSIDE_CASES {
                    let (pace, cores, threads) = case;
                    let runs = rows(build, route, case, concurrency);
                    let of =
                        |f: fn(&OutsideRun) -> f64| runs.iter().map(|r| f(r)).collect::<Vec<_>>();
                    let _ = writeln!(
                        d,
                        "| {build} | {} | {} | {cores} | {threads} | {concurrency} | {} | {} | {} | {} | {} | {} |",
                        route.label,
                        pace.label(),
                        fmt3(&of(OutsideRun::us_per_delete), |v| format!("{v:.2} µs")),
                        fmt3(&of(OutsideRun::us_per_request), |v| format!("{v:.0} µs")),
                        fmt3(&of(OutsideRun::switches_per_request), |v| format!("{v:.2}")),
                        fmt3(&of(|r| r.peak_mib), |v| format!("{v:.0} MiB")),
                        fmt3(&of(OutsideRun::per_sec), |v| format!("{v:.0}")),
                        fmt3(&of(|r| r.fake_busy() * 100.0), |v| format!("{v:.0} %"))
                    );
                }
            }
        }
    }
    let median = |build, route, case, concurrency, f: fn(&OutsideRun) -> f64| {
        spread3(
            &rows(build, route, case, concurrency)
                .iter()
                .map(|r| f(r))
                .collect::<Vec<_>>(),
        )
        .1
    };
    for build in &builds {
        for route in ROUTES {
            for concurrency in OUTSIDE_CONCURRENCY {
                let m = |case, f| median(build, route, case, concurrency, f);
                let _ = writeln!(
                    d,
                    "\n{build}, {}, {concurrency} in flight, medians: deletes/s, 2 workers on 2 cores ÷ one thread on 1 core (answers at once), {:.2}×; CPU per delete, answers after {lo_ms}–{hi_ms} ms ÷ at once (one thread, 1 core), {:.2}×, and 2 workers ÷ one thread (2 cores, after {lo_ms}–{hi_ms} ms), {:.2}×.",
                    route.label,
                    m((Pace::Instant, 2, 2), OutsideRun::per_sec)
                        / m((Pace::Instant, 1, 1), OutsideRun::per_sec),
                    m((LATENCY, 1, 1), OutsideRun::us_per_delete)
                        / m((Pace::Instant, 1, 1), OutsideRun::us_per_delete),
                    m((LATENCY, 2, 2), OutsideRun::us_per_delete)
                        / m((LATENCY, 2, 1), OutsideRun::us_per_delete),
                );
            }
        }
    }
    // The CPU per delete at once and at DynamoDB's pace, the figures section 7 and
    // docs/scaling.md build on.
    let _ = writeln!(
        d,
        "\nCPU per delete of this build, one thread on 1 core (medians):\n"
    );
    for pace in [LATENCY, Pace::Instant] {
        for route in ROUTES {
            let _ = writeln!(
                d,
                "- {}, answers {}: {:.2} µs",
                route.label,
                pace.label(),
                median(
                    THIS_BUILD,
                    route,
                    (pace, 1, 1),
                    default_in_flight,
                    OutsideRun::us_per_delete
                )
            );
        }
    }
    if builds.len() > 1 {
        for route in ROUTES {
            for case in OUTSIDE_CASES {
                let (pace, cores, threads) = case;
                // Pair by pair: the two builds' runs of a row alternate.
                let ratios: Vec<f64> = rows(THIS_BUILD, route, case, default_in_flight)
                    .iter()
                    .zip(rows(BASELINE_BUILD, route, case, default_in_flight))
                    .map(|(a, b)| a.us_per_delete() / b.us_per_delete())
                    .collect();
                let _ = writeln!(
                    d,
                    "\nCPU per delete, this build / baseline, {}, answers {}, {cores} core(s), {threads} thread(s), run by run: {}.",
                    route.label,
                    pace.label(),
                    fmt3(&ratios, |v| format!("{v:.2}"))
                );
                if (cores, threads) == (1, 1) && !ratios.is_empty() {
                    let (lo, mid, hi) = spread3(&ratios);
                    let verdict = crate::met(mid <= CPU_GOAL_RATIO);
                    let _ = writeln!(
                        d,
                        "\n**Goal** (printed, not asserted), answers {}: `DELETE_MODE=batch` at most {CPU_GOAL_RATIO}× the CPU per delete of {} (no confirming read), one thread on 1 core, the two alternated in the same runs: min / median / max {lo:.2} / {mid:.2} / {hi:.2}, **{verdict}** by the median.",
                        pace.label(),
                        baseline_name()
                    );
                }
            }
        }
    }
}

pub fn render(
    d: &mut String,
    outside: &[OutsideRun],
    own_us: &[(String, Vec<f64>)],
    ceiling: &Ceiling,
    ticks: &ShardTicks,
) {
    let _ = writeln!(d, "## 6. CPU per delete, cores and the server's ceiling\n");
    render_outside(d, outside);
    let _ = writeln!(d, "\nThe second core is shared with the fake, which bounds what 2 workers gain. Section 8 shows where the CPU goes; mimalloc, delete clients built once and fewer copies cut it.\n");
    let runs = own_us.first().map_or(0, |(_, v)| v.len());
    let _ = writeln!(d, "**Measured inside the benchmark.** The same fake and items, the sweep run in the benchmark process as the binaries run it, counting its threads' CPU only; {runs} runs of each, median (min–max).\n");
    crate::table_head(d, "| inside: method | CPU per delete |");
    for (label, us) in own_us {
        let _ = writeln!(d, "| {label} | {} |", fmt3(us, |v| format!("{v:.2} µs")));
    }
    let _ = writeln!(d);

    let _ = writeln!(d, "**DynamoDB Local's delete ceiling.** {} items per measurement from a fresh table: *raw*, prebuilt unsigned `BatchWriteItem`s of 25 deletes over keep-alive HTTP/1.1, *n* in flight; *ours*, a sweep with `MAX_CONCURRENCY` = *n*, queries included. {} repetitions after a warm-up; deletes/s, median (min–max).\n", ceiling.items, ceiling.raw.first().map_or(0, Vec::len));
    crate::table_head(d, "| in flight | raw (ceiling) | ours | ours / raw (medians) | ours: BatchWriteItem in flight, mean (max) | ours: first delete after |");
    let med = |v: &[f64]| spread3(v).1;
    for (i, level) in ceiling.levels.iter().enumerate() {
        let _ = writeln!(
            d,
            "| {level} | {} | {} | {:.2} | {:.1} ({}) | {:.0} ms |",
            fmt3(&ceiling.raw[i], |v| format!("{v:.0}")),
            fmt3(&ceiling.ours[i], |v| format!("{v:.0}")),
            med(&ceiling.ours[i]) / med(&ceiling.raw[i]),
            med(&ceiling.gauges[i].iter().map(|g| g.mean).collect::<Vec<_>>()),
            ceiling.gauges[i].iter().map(|g| g.max).max().unwrap_or(0),
            med(&ceiling.gauges[i]
                .iter()
                .map(|g| g.first_ms)
                .collect::<Vec<_>>()),
        );
    }
    let best = |v: &[Vec<f64>]| {
        v.iter()
            .enumerate()
            .map(|(i, r)| (i, med(r)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, f64::NAN))
    };
    let (ri, rbest) = best(&ceiling.raw);
    let (oi, obest) = best(&ceiling.ours);
    let default_level = ceiling.levels.iter().position(|l| *l == 8);
    let _ = writeln!(d, "\nAt the best concurrency of each: ours {:.0} deletes/s at {} in flight, the ceiling {:.0} at {}: **{:.2} of the ceiling**.{}\n", obest, ceiling.levels[oi], rbest, ceiling.levels[ri], obest / rbest, default_level.map_or(String::new(), |i| format!(" At the default `MAX_CONCURRENCY` (8), ours / raw is {:.2}.", med(&ceiling.ours[i]) / med(&ceiling.raw[i]))));

    let _ = writeln!(d, "**Tick duration with {} shards.** The 1 s tick loop over `WINDOW_SHARDS={}` against DynamoDB Local, {} items expiring, {} deleted, a full sweep beside it every 60 s.\n", ticks.shards, ticks.shards, ticks.items, ticks.deleted);
    let mut t = ticks.tick_ms.clone();
    t.sort_by(f64::total_cmp);
    crate::table_head(d, "| ticks | p50 | p99 | max | tick period |");
    let _ = writeln!(
        d,
        "| {} | {:.0} ms | {:.0} ms | {:.0} ms | 1000 ms |\n",
        t.len(),
        crate::pct(&t, 0.5),
        crate::pct(&t, 0.99),
        t.last().copied().unwrap_or(f64::NAN)
    );

    let us = planning_us(outside);
    let _ = writeln!(d, "## 7. Lambda memory and deletes per second\n");
    let _ = writeln!(d, "Lambda gives CPU in proportion to memory, one vCPU at 1,769 MB. At the outside runs' median CPU per delete with answers after 5–10 ms ({us:.2} µs, x86_64; Graviton differs), one function's CPU allows:\n");
    crate::table_head(d, "| memory | vCPU share | deletes/s (CPU bound) |");
    for mb in [128.0, 256.0, 512.0, 1024.0, 1769.0] {
        let share = lambda_vcpu(mb);
        let rate = share / (us / 1e6);
        let _ = writeln!(d, "| {mb:.0} MB | {share:.3} | {rate:.0} |");
    }
    let _ = writeln!(d, "\nPick the row at least twice the peak deletes/s; past 1,769 MB, split the shards over several sweepers. <!-- cost-memory -->{}<!-- /cost-memory -->\n",
        crate::support::cost::memory_sentence(&crate::support::cost::Inputs::from_code(f64::NAN)).trim_end());
}
