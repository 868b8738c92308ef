//! The `ttl-sweeper` binary, run as a user would.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

#[test]
fn window_prints_the_key_for_a_ttl() {
    let (code, out, _) = run(cli().args(["window", "1658265980"]));
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        "2022-07-19T21:26:00.000Z_2022-07-19T21:27:00.000Z"
    );
    let (code, out, _) = run(cli().args(["window", "1658265980", "--window-seconds", "300"]));
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        "2022-07-19T21:25:00.000Z_2022-07-19T21:30:00.000Z"
    );
    let (code, out, _) = run(cli()
        .args(["window", "1658265980"])
        .env("WINDOW_SECONDS", "3600"));
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        "2022-07-19T21:00:00.000Z_2022-07-19T22:00:00.000Z"
    );
}

#[test]
fn window_rejects_milliseconds_and_garbage_with_reasons() {
    let (code, out, err) = run(cli().args(["window", "1658265980000"]));
    assert_ne!(code, 0);
    assert!(out.is_empty());
    assert!(err.contains("milliseconds"), "{err}");
    let (code, _, err) = run(cli().args(["window", "tomorrow"]));
    assert_ne!(code, 0);
    assert!(err.contains("not a number"), "{err}");
    let (code, _, err) = run(cli().args(["window", "1658265980", "--window-seconds", "0"]));
    assert_ne!(code, 0);
    assert!(err.contains("WINDOW_SECONDS"), "{err}");
}

#[test]
fn sweep_config_errors_name_the_variable_and_exit_2() {
    let (code, out, err) = run(cli().arg("sweep"));
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.contains("TABLE_NAME") && err.contains("--table-name"),
        "{err}"
    );

    let (code, _, err) = run(cli()
        .args(["sweep", "--table-name", "sessions"])
        .env("DELETE_MODE", "yolo"));
    assert_eq!(code, 2);
    assert!(
        err.contains("DELETE_MODE") && err.contains("conditional"),
        "{err}"
    );

    let (code, _, err) = run(cli().args([
        "sweep",
        "--table-name",
        "sessions",
        "--at",
        "2999-01-01T00:00:00Z",
    ]));
    assert_eq!(code, 2);
    assert!(err.contains("future"), "{err}");

    let (code, _, err) =
        run(cli().args(["sweep", "--table-name", "sessions", "--at", "last tuesday"]));
    assert_eq!(code, 2);
    assert!(err.contains("RFC 3339"), "{err}");
}

#[test]
fn tokio_worker_threads_is_checked_before_the_runtime_starts() {
    for bad in ["0", "many", "100000"] {
        let (code, out, err) = run(cli()
            .args(["window", "1700000000"])
            .env("TOKIO_WORKER_THREADS", bad));
        assert_eq!(code, 2, "TOKIO_WORKER_THREADS={bad}: {err}");
        assert!(out.is_empty(), "{out}");
        assert!(
            err.contains(&format!("TOKIO_WORKER_THREADS=\"{bad}\"")) && err.contains("1 to 256"),
            "{err}"
        );
    }
    for good in ["1", "3"] {
        let (code, out, err) = run(cli()
            .args(["window", "1700000000"])
            .env("TOKIO_WORKER_THREADS", good));
        assert_eq!(code, 0, "TOKIO_WORKER_THREADS={good}: {err}");
        assert!(!out.trim().is_empty());
    }
    // The Lambda logs the same refusal as one JSON line and exits before it asks the runtime
    // API for an invocation (none is running here).
    let out = Command::new(env!("CARGO_BIN_EXE_ttl-sweeper-lambda"))
        .env("TOKIO_WORKER_THREADS", "0")
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let logs =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{logs}");
    let line: serde_json::Value = logs
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON log line: {logs}"));
    assert_eq!(line["level"], "ERROR", "{line}");
    assert!(
        line.to_string().contains("TOKIO_WORKER_THREADS=\\\"0\\\""),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_deletes_expired_items_and_prints_one_json_report() {
    let (client, table) = simple_table("cli").await;
    let now = now();
    let mut items = sessions("old", 60, |i| now - 5 - i);
    items.extend(sessions("new", 10, |i| now + 600 + i));
    put_items(&client, &table, items).await;

    let (code, out, err) = run(cli()
        .args(["sweep", "--table-name", &table, "--max-concurrency", "4"])
        .env("AWS_ENDPOINT_URL", endpoint()));
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(out.lines().count(), 1, "stdout: {out}");
    eprintln!("report: {out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(removed_json(&report), 60, "{report}");
    assert_eq!(report["items_failed"], 0);
    assert_eq!(report["table"], table.as_str());
    assert!(
        err.contains("sweep finished"),
        "summary line goes to stderr: {err}"
    );
    assert_eq!(scan_all(&client, &table).await.len(), 10);
}

/// Two `sweep` runs with the two halves of a 4-shard table, one by flag and one by environment
/// variable: each deletes the expired items of its own shards only, and together all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeps_with_shard_ranges_delete_only_their_shards() {
    use ttl_sweeper::expiry::window::{shard_of, window_attribute};
    let (client, table) = simple_table("cli_shards").await;
    let now = now();
    let ids: Vec<String> = (0..80).map(|i| format!("old-{i}")).collect();
    let items = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let ttl = now - 5 - i as i64;
            std::collections::HashMap::from([
                ("id".to_string(), AV::S(id.clone())),
                ("ttl".to_string(), AV::N(ttl.to_string())),
                (
                    "expirationWindow".to_string(),
                    AV::S(window_attribute(ttl as f64, 60, 4, id.as_bytes()).unwrap()),
                ),
            ])
        })
        .collect();
    put_items(&client, &table, items).await;
    let in_shards = |shards: [u32; 2]| -> Vec<String> {
        let mut out: Vec<String> = ids
            .iter()
            .filter(|id| shards.contains(&shard_of(id.as_bytes(), 4)))
            .cloned()
            .collect();
        out.sort();
        out
    };
    let (low, high) = (in_shards([0, 1]), in_shards([2, 3]));
    assert!(!low.is_empty() && !high.is_empty());

    let (code, out, err) = run(cli()
        .args(["sweep", "--table-name", &table, "--window-shards", "4"])
        .args(["--shard-range", "2-3"])
        .env("AWS_ENDPOINT_URL", endpoint()));
    assert_eq!(code, 0, "stderr: {err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(removed_json(&report), high.len() as u64, "{out}");
    let mut left = common::ids(&client, &table).await;
    left.sort();
    assert_eq!(left, low);

    let (code, out, err) = run(cli()
        .args(["sweep", "--table-name", &table])
        .envs([("WINDOW_SHARDS", "4"), ("SHARD_RANGE", "0-1")])
        .env("AWS_ENDPOINT_URL", endpoint()));
    assert_eq!(code, 0, "stderr: {err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(removed_json(&report), low.len() as u64, "{out}");
    assert!(common::ids(&client, &table).await.is_empty());

    // A reversed range stops before any request, naming the setting.
    let (code, out, err) = run(cli()
        .args(["sweep", "--table-name", &table, "--window-shards", "4"])
        .args(["--shard-range", "3-1"])
        .env("AWS_ENDPOINT_URL", endpoint()));
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.contains("SHARD_RANGE") && err.contains("the first shard, 3, is after the last, 1"),
        "{err}"
    );
}

/// Splitting a checkpointed sweeper into shard ranges after an outage: the new ranges have no
/// checkpoint of their own yet, so each starts from the whole table's and catches up on the
/// items that expired since, beyond the lookback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_shard_ranges_start_from_the_whole_tables_checkpoint() {
    use ttl_sweeper::expiry::window::window_attribute;
    let (client, table) = simple_table("cli_split_cp").await;
    let checkpoints = checkpoint_table(&client, "cli_split_cp_state").await;
    let t = (now() / 60) * 60 - 60;
    let iso = |secs: i64| {
        chrono::DateTime::from_timestamp(secs, 0)
            .unwrap()
            .to_rfc3339()
    };
    // 40 items that expire between 3 h and 1 h before T: after the whole-table sweep at T-3h,
    // and before the lookback of a sweep at T.
    let items = (0..40)
        .map(|i| {
            let id = format!("gap-{i}");
            let ttl = t - 3 * 3600 + 300 + i * 180;
            std::collections::HashMap::from([
                ("id".to_string(), AV::S(id.clone())),
                ("ttl".to_string(), AV::N(ttl.to_string())),
                (
                    "expirationWindow".to_string(),
                    AV::S(window_attribute(ttl as f64, 60, 4, id.as_bytes()).unwrap()),
                ),
            ])
        })
        .collect();
    put_items(&client, &table, items).await;
    let sweep = |at: i64, range: &str| {
        let (code, out, err) = run(cli()
            .args(["sweep", "--table-name", &table, "--window-shards", "4"])
            .args(["--checkpoint-table", &checkpoints, "--shard-range", range])
            .args(["--at", &iso(at)])
            .env("AWS_ENDPOINT_URL", endpoint()));
        assert_eq!(code, 0, "stderr: {err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    // The single sweeper's last sweep, then the outage.
    assert_eq!(sweep(t - 3 * 3600, "all")["items_deleted"], 0);
    let low = sweep(t, "0-1");
    let high = sweep(t, "2-3");
    for report in [&low, &high] {
        assert!(
            report["checkpoint_before"].is_string(),
            "started from the whole table's checkpoint: {report}"
        );
    }
    assert_eq!(
        removed_json(&low) + removed_json(&high),
        40,
        "{low}\n{high}"
    );
    assert!(common::ids(&client, &table).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_of_a_missing_table_fails_clearly() {
    let (code, out, err) = run(cli()
        .args(["sweep", "--table-name", "table_that_is_not_there"])
        .env("AWS_ENDPOINT_URL", endpoint()));
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.contains("table_that_is_not_there") && err.contains("does not exist"),
        "{err}"
    );
}

/// Runs a command for at most `limit`: exit code (`None` if it was killed at the limit or by a
/// signal), stdout, stderr, and how long it ran. A hang fails the caller's assertion instead of
/// hanging the test.
fn run_for_at_most(cmd: &mut Command, limit: Duration) -> (Option<i32>, String, String, Duration) {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ttl-sweeper");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    (code, stdout.join().unwrap(), stderr.join().unwrap(), took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_arguments_exit_2_naming_the_flag_and_what_it_accepts() {
    // A real table with items to write, so that a value that slipped through would reach the
    // code that crashed or hung on it.
    let (client, table) = simple_table("hostile").await;
    let now = now();
    put_items(
        &client,
        &table,
        (0..5)
            .map(|i| {
                std::collections::HashMap::from([
                    ("id".to_string(), AV::S(format!("item-{i}"))),
                    ("ttl".to_string(), AV::N((now + 3600 + i).to_string())),
                ])
            })
            .collect(),
    )
    .await;
    let state = std::env::temp_dir().join(format!("{table}.backfill.json"));

    // (arguments, what the message says is accepted); the message names the flag, the
    // second argument up to any `=`.
    let cases: &[(&str, &str)] = &[
        ("backfill --max-wcu 0", "0.01 to 1000000"),
        ("backfill --max-wcu -5", "0.01 to 1000000"),
        ("backfill --max-wcu=-5", "0.01 to 1000000"),
        ("backfill --max-wcu NaN", "0.01 to 1000000"),
        ("backfill --max-wcu inf", "0.01 to 1000000"),
        ("backfill --max-wcu 1e-300", "0.01 to 1000000"),
        ("backfill --segments 1000000", "1 to 1000"),
        ("backfill --segments 0", "1 to 1000"),
        ("backfill --segments -1", "1 to 1000"),
        ("backfill --page-size 0", "1 to 1000"),
        ("backfill --page-size -1", "1 to 1000"),
        ("backfill --page-size 1001", "1 to 1000"),
        ("audit --segments 4000000000", "1 to 1000"),
        ("audit --segments 1000000", "1 to 1000"),
        ("audit --segments 0", "1 to 1000"),
        ("audit --sample 0", "at least 1"),
        ("audit --sample -1", "at least 1"),
        ("audit --max-expired-age soon", "a duration such as 5m"),
        ("run --every 300000000y", "100ms to 1d"),
        ("run --every 2d", "100ms to 1d"),
        ("run --every 50ms", "100ms to 1d"),
        ("run --every 0", "100ms to 1d"),
    ];
    let mut failures = Vec::new();
    for (args, accepts) in cases {
        let args: Vec<&str> = args.split_whitespace().collect();
        let flag = args[1].split('=').next().unwrap();
        let _ = std::fs::remove_file(&state);
        let mut cmd = cli();
        cmd.args(&args)
            .args(["--table-name", &table])
            .env("AWS_ENDPOINT_URL", endpoint());
        if args[0] == "backfill" {
            cmd.arg("--state").arg(&state);
        }
        let (code, _, err, took) = run_for_at_most(&mut cmd, Duration::from_secs(20));
        if code != Some(2) || !err.contains(flag) || !err.contains(accepts) {
            failures.push(format!(
                "{args:?}: exit {code:?} after {took:?}; stderr: {}",
                err.lines().take(3).collect::<Vec<_>>().join(" | ")
            ));
        }
    }
    let _ = std::fs::remove_file(&state);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        scan_all(&client, &table)
            .await
            .iter()
            .all(|item| !item.contains_key("expirationWindow")),
        "a refused command writes nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_with_less_than_one_wcu_per_second_finishes_at_that_rate() {
    let (client, table) = simple_table("slow_wcu").await;
    let now = now();
    let mut items: Vec<_> = (0..3)
        .map(|i| {
            std::collections::HashMap::from([
                ("id".to_string(), AV::S(format!("live-{i}"))),
                ("ttl".to_string(), AV::N((now + 3600 + i).to_string())),
            ])
        })
        .collect();
    items.push(std::collections::HashMap::from([
        ("id".to_string(), AV::S("expired".into())),
        ("ttl".to_string(), AV::N((now - 3600).to_string())),
    ]));
    put_items(&client, &table, items).await;
    let state = std::env::temp_dir().join(format!("{table}.backfill.json"));
    let _ = std::fs::remove_file(&state);

    let (code, out, err, took) = run_for_at_most(
        cli()
            .args([
                "backfill",
                "--max-wcu",
                "0.5",
                "--table-name",
                &table,
                "--state",
            ])
            .arg(&state)
            .env("AWS_ENDPOINT_URL", endpoint()),
        Duration::from_secs(60),
    );
    let _ = std::fs::remove_file(&state);
    assert_eq!(code, Some(0), "after {took:?}: {out} {err}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["written"], 3, "{report}");
    assert_eq!(report["deleted_expired"], 1, "{report}");
    assert_eq!(report["complete"], true, "{report}");
    // Four 1-WCU requests at 0.5 WCU/s: one at once, then one every 2 s.
    assert!(took >= Duration::from_millis(5500), "{took:?}: not paced");
    assert_eq!(scan_all(&client, &table).await.len(), 3);
}

/// A `ttl-sweeper run` child, killed by its PID if a failing test leaves it running.
struct Daemon(std::process::Child);

impl Daemon {
    /// `ttl-sweeper run` on `table` every `every` with `SCHEDULE_SECONDS=schedule`, serving
    /// metrics on a free port, its stderr written to a log file: the child, the port, the log.
    fn start(
        table: &str,
        every: &str,
        schedule: &str,
        stdout: Stdio,
    ) -> (Daemon, u16, std::path::PathBuf) {
        let port = free_port();
        let log = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("target/test-servers/daemon-{port}.log"));
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let child = cli()
            .args(["run", "--every", every, "--table-name", table])
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            .env("AWS_ENDPOINT_URL", endpoint())
            .env("SCHEDULE_SECONDS", schedule)
            .stdout(stdout)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        (Daemon(child), port, log)
    }

    /// Sends SIGTERM and waits (15 s at the most) for the exit.
    fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: signals the child this test started, by its PID.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let started = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < Duration::from_secs(15), "did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `GET path` over HTTP/1.0 from 127.0.0.1:`port`: (status, body), or `None` while nothing
/// listens.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n")?.1.to_owned();
    Some((status, body))
}

/// The value of the sample `name{table="<table>"}` in a Prometheus text exposition.
fn sample(text: &str, name: &str, table: &str) -> Option<f64> {
    let prefix = format!("{name}{{table=\"{table}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_prometheus_metrics_and_health_while_it_sweeps() {
    let (client, table) = simple_table("daemon").await;
    let start = now();
    put_items(&client, &table, sessions("a", 20, |i| start - 2 - i)).await;
    put_items(&client, &table, vec![session("future", start + 3600)]).await;

    let (mut child, port, log) = Daemon::start(&table, "200ms", "2", Stdio::piped());
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    // The expired items the counters account for: deleted, or found already gone (see
    // `removed`: on a slow machine a lost batch answer turns deletions into gone items).
    let removed_total = |text: &str| -> Option<f64> {
        let deleted = sample(text, "ttl_sweeper_items_deleted_total", &table)?;
        Some(deleted + sample(text, "ttl_sweeper_items_gone_total", &table)?)
    };
    // Waits until `/metrics` accounts for at least `want` removed items, or 30 s; returns the
    // last exposition.
    let wait_for = |want: f64| {
        let started = Instant::now();
        loop {
            let text = http_get(port, "/metrics").map(|(_, body)| body);
            let text = text.unwrap_or_default();
            if removed_total(&text).is_some_and(|n| n >= want)
                || started.elapsed() > Duration::from_secs(30)
            {
                return text;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let text = tokio::task::block_in_place(|| wait_for(20.0));
    assert_eq!(
        removed_total(&text),
        Some(20.0),
        "{text}\n--- log ---\n{}",
        log_text()
    );
    assert_eq!(
        scan_all(&client, &table).await.len(),
        1,
        "the expired items are gone, the unexpired one stays"
    );
    assert!(
        text.contains("# TYPE ttl_sweeper_items_deleted_total counter"),
        "{text}"
    );
    assert!(
        sample(&text, "ttl_sweeper_sweeps_total", &table).unwrap_or(0.0) >= 1.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "ttl_sweeper_items_failed_total", &table),
        Some(0.0)
    );

    // More items expire: the counters move.
    put_items(&client, &table, sessions("b", 15, |i| now() - 1 - i)).await;
    let text = tokio::task::block_in_place(|| wait_for(35.0));
    assert_eq!(removed_total(&text), Some(35.0), "{text}");
    assert!(
        sample(&text, "ttl_sweeper_items_found_total", &table).unwrap_or(0.0) >= 35.0,
        "{text}"
    );
    // After a reporting period (SCHEDULE_SECONDS=2) the gauges hold its values.
    let text = tokio::task::block_in_place(|| {
        let started = Instant::now();
        loop {
            let text = http_get(port, "/metrics")
                .map(|(_, b)| b)
                .unwrap_or_default();
            let lag = sample(&text, "ttl_sweeper_max_expiry_lag_seconds", &table);
            if lag.is_some_and(|l| l > 0.0) || started.elapsed() > Duration::from_secs(10) {
                return text;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    for name in [
        "ttl_sweeper_items_skipped_total",
        "ttl_sweeper_items_gone_total",
        "ttl_sweeper_windows_swept_total",
        "ttl_sweeper_items_left",
        "ttl_sweeper_p99_expiry_lag_seconds",
        "ttl_sweeper_clock_ahead_seconds",
        "ttl_sweeper_seconds_since_last_success",
    ] {
        assert!(
            sample(&text, name, &table).is_some(),
            "{name} missing:\n{text}"
        );
    }
    assert!(
        sample(&text, "ttl_sweeper_max_expiry_lag_seconds", &table).is_some_and(|l| l > 0.0),
        "{text}"
    );

    let (status, body) = http_get(port, "/healthz").expect("healthz answers");
    assert_eq!(status, 200, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["any_success"], true, "{health}");
    assert_eq!(
        health["unhealthy_after_seconds"], 6.0,
        "3 periods of 2 s: {health}"
    );
    assert_eq!(http_get(port, "/other").map(|(s, _)| s), Some(404));

    // SIGTERM stops it as before: exit 0, the whole run's report on stdout.
    let status = child.terminate();
    let mut stdout = String::new();
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", log_text());
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(removed_json(&report), 35, "{report}");
    // The period that set the gauges also wrote its summary line and EMF record on stderr.
    let log = log_text();
    let records: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| l.contains("\"CloudWatchMetrics\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!records.is_empty(), "no EMF record:\n{log}");
    assert_eq!(records[0]["TableName"], table.as_str(), "{}", records[0]);
    assert!(log.contains("sweep finished"), "{log}");
    assert!(
        log_text().contains("serving /metrics and /healthz"),
        "{}",
        log_text()
    );
    assert_eq!(
        scan_all(&client, &table).await.len(),
        1,
        "the unexpired item stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_health_turns_503_when_sweeps_keep_failing() {
    let (client, table) = simple_table("daemon_health").await;
    let (mut child, port, log) = Daemon::start(&table, "100ms", "1", Stdio::null());
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    // Polls /healthz until its answer has `want` in its body, or 20 s.
    let health_until = |want: &str| {
        let started = Instant::now();
        loop {
            let answer = http_get(port, "/healthz");
            if answer.as_ref().is_some_and(|(_, body)| body.contains(want))
                || started.elapsed() > Duration::from_secs(20)
            {
                return answer;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let (status, body) =
        tokio::task::block_in_place(|| health_until("\"any_success\":true")).expect("/healthz");
    assert_eq!(status, 200, "{body}\n{}", log_text());
    assert!(
        body.contains("\"any_success\":true"),
        "{body}\n{}",
        log_text()
    );

    // The table goes away under the running daemon: every sweep fails from now on, and three
    // reporting periods (3 × 1 s) later the process says so.
    let dropped = Instant::now();
    client
        .delete_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    let (status, body) =
        tokio::task::block_in_place(|| health_until("\"status\":\"unhealthy\"")).expect("/healthz");
    assert_eq!(status, 503, "{body}\n{}", log_text());
    assert!(
        dropped.elapsed() >= Duration::from_secs(2),
        "503 too early: {body}"
    );
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "unhealthy", "{health}");
    assert_eq!(health["unhealthy_after_seconds"], 3.0, "{health}");
    let (_, text) = http_get(port, "/metrics").unwrap();
    let failed = sample(&text, "ttl_sweeper_sweeps_failed_total", &table).unwrap_or(0.0);
    assert!(failed >= 3.0, "{text}");

    let status = child.terminate();
    assert_eq!(
        status.code(),
        Some(1),
        "failed sweeps exit 1: {}",
        log_text()
    );
}
