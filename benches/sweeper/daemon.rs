//! The release daemon, `ttl-sweeper run`, as a child of a section-1 benchmark (the stream rows,
//! the many-tables rows): started against DynamoDB Local through a pass-through proxy that
//! records when DynamoDB acknowledged each item's delete; its CPU, peak memory and JSON tick
//! lines read from outside; and how those rows write a spread of runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::pct;
use crate::spread3;
use crate::support::*;

/// The release binary `name` (`ttl-sweeper`, `ttl-sweeper-lambda`) as Cargo built it for the
/// benchmark, under `CARGO_TARGET_DIR` if set.
pub fn release_binary(name: &str) -> PathBuf {
    // Where Cargo built it for this benchmark (the bench profile is the release one), wherever
    // CARGO_TARGET_DIR puts it.
    let binary = PathBuf::from(match name {
        "ttl-sweeper" => env!("CARGO_BIN_EXE_ttl-sweeper"),
        "ttl-sweeper-lambda" => env!("CARGO_BIN_EXE_ttl-sweeper-lambda"),
        other => panic!("no binary {other:?} in this crate"),
    });
    assert!(
        binary.exists(),
        "{} is missing: `cargo build --release --bin {name}` builds it (make bench does)",
        binary.display()
    );
    binary
}

/// A `ttl-sweeper --log-format json run …` child reaching DynamoDB at an endpoint, its stderr
/// (JSON lines) in a log file; killed if dropped while running.
pub struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts `ttl-sweeper --log-format json run` followed by `args`, from an empty environment
    /// plus [`LOCAL_AWS_ENV`], `AWS_ENDPOINT_URL=endpoint` and `env`; its log is
    /// target/bench-servers/`log_name`.log. Returns once the log says `ready`.
    pub async fn start(
        endpoint: &str,
        log_name: &str,
        env: &[(&str, &str)],
        args: &[&str],
        ready: &str,
    ) -> Daemon {
        let log = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("target/bench-servers/{log_name}.log"));
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let child = Command::new(release_binary("ttl-sweeper"))
            .env_clear()
            .envs(LOCAL_AWS_ENV)
            .env("AWS_ENDPOINT_URL", endpoint)
            .envs(env.iter().copied())
            .args(["--log-format", "json", "run"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start ttl-sweeper run");
        let daemon = Daemon { child, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !daemon.log_text().contains(ready) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            daemon.log_text().contains(ready),
            "the daemon did not start:\n{}",
            daemon.log_text()
        );
        daemon
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// User + system CPU seconds of the process so far (`/proc/<pid>/stat`, every thread).
    pub fn cpu_secs(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("read /proc/<pid>/stat");
        // The fields after the command name (in parentheses, which may hold spaces): state is
        // the 3rd field, utime the 14th and stime the 15th.
        let after = &stat[stat.rfind(')').expect("stat has a command name") + 1..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: sysconf has no preconditions.
        let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        ticks as f64 / per_sec
    }

    /// Its peak resident memory so far (`VmHWM`, KiB); `None` once it has exited.
    pub fn peak_rss_kib(&self) -> Option<i64> {
        crate::vm_hwm_kib(self.child.id() as i32)
    }

    /// SIGTERM, then waits for it to exit.
    pub async fn stop(&mut self) {
        // SAFETY: signals the child this benchmark started, by its PID, not yet reaped.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Its tick lines (`tick finished`, with failures or not), every table's, in order. The
    /// daemon logs a tick of a table only when it found items or failed.
    pub fn tick_lines(&self) -> Vec<Value> {
        self.log_text()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| {
                l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("tick finished"))
            })
            .collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The lags of some of the items of a run (seconds, sorted), and how many were written.
#[derive(Default, Clone)]
pub struct Lags {
    pub items: usize,
    pub lags: Vec<f64>,
    /// Deleted by a `DeleteItem` (the indexer's, for an item written expired), not in a
    /// `BatchWriteItem` (the sweeper's).
    pub one_by_one: usize,
}

impl Lags {
    pub fn missed(&self) -> usize {
        self.items - self.lags.len()
    }
    pub fn p(&self, p: f64) -> f64 {
        pct(&self.lags, p)
    }
    pub fn max(&self) -> f64 {
        self.lags.last().copied().unwrap_or(f64::NAN)
    }

    /// As a run's line prints it: items, never deleted, by `DeleteItem`, p50, p99, max.
    pub fn line(&self) -> String {
        format!(
            "{} items, {} never deleted, {} by DeleteItem; p50 {:.3} s, p99 {:.3} s, max {:.3} s",
            self.items,
            self.missed(),
            self.one_by_one,
            self.p(0.5),
            self.p(0.99),
            self.max()
        )
    }
}

/// A lag row's cells: items, never deleted, `early` (deleted before their ttl), p50, p99, max.
pub fn lag_cells(lag: &Lags, early: usize) -> String {
    let (items, missed) = (lag.items, lag.missed());
    format!("{items} | {missed} | {early} | {}", lag_percentiles(lag))
}

/// A lag row's last cells: p50, p99, max.
pub fn lag_percentiles(lag: &Lags) -> String {
    let (p50, p99, max) = (secs(lag.p(0.5)), secs(lag.p(0.99)), secs(lag.max()));
    format!("{p50} | {p99} | {max}")
}

/// The same cells over runs, one lag of each: `min / median / max` of p50, of p99, of max.
pub fn lag_spread(lags: &[&Lags]) -> String {
    let col = |p: fn(&Lags) -> f64| three(&lags.iter().map(|l| p(l)).collect::<Vec<_>>(), secs);
    format!(
        "{} | {} | {}",
        col(|l| l.p(0.5)),
        col(|l| l.p(0.99)),
        col(Lags::max)
    )
}

/// `min / median / max` of `v`, each written by `f`.
pub fn three(v: &[f64], f: impl Fn(f64) -> String) -> String {
    let (lo, mid, hi) = spread3(v);
    format!("{} / {} / {}", f(lo), f(mid), f(hi))
}

/// Seconds, to the millisecond.
pub fn secs(v: f64) -> String {
    format!("{v:.3} s")
}
