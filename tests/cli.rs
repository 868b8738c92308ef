//! The `ttl-sweeper` binary, run as a user would.

use crate::support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use serde_json::Value;
use support::*;

/// A case `[VAR=value ...] <arguments> => <expected>`: [`cli`] with those settings and
/// arguments, and the expected text.
fn case(line: &str) -> (Command, &str) {
    let (command, expected) = line.split_once(" => ").unwrap_or((line, ""));
    let mut cmd = cli();
    for word in command.split_whitespace() {
        match word.split_once('=') {
            Some((var, value)) if cmd.get_args().next().is_none() => cmd.env(var, value),
            _ => cmd.arg(word),
        };
    }
    (cmd, expected)
}

/// Runs a [`case`] against a closed endpoint (a request would fail with another message): exit 2,
/// nothing on stdout, each of the comma-separated expected texts on stderr, which it returns.
fn refused(line: &str) -> String {
    let (mut cmd, wants) = case(line);
    let (code, out, err) = run(cmd.env("AWS_ENDPOINT_URL", "http://127.0.0.1:9"));
    assert_eq!((code, out.as_str()), (2, ""), "{line}: {err}");
    for want in wants.split(", ") {
        assert!(err.contains(want), "{line}: {err}");
    }
    err
}

/// A [`case`] whose DynamoDB endpoint is a closed port of 127.0.0.1: any request is refused, so a
/// command that got as far as opening its table fails with the message of an unreachable endpoint.
/// The command, the endpoint and the expected text.
fn unreachable(line: &str) -> (Command, String, &str) {
    let (mut cmd, expected) = case(line);
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    cmd.env("AWS_ENDPOINT_URL", &endpoint);
    (cmd, endpoint, expected)
}

/// The spec printed is `spec_text()`, which `readme::the_settings_spec_file_is_current` checks
/// is the committed infra/settings.json.
#[test]
fn settings_prints_the_committed_spec() {
    let (code, out, err) = run(cli().arg("settings"));
    assert_eq!(code, 0, "{err}");
    let spec_text = ttl_sweeper::config::spec_text();
    assert_eq!(out, spec_text, "`ttl-sweeper settings` is not spec_text()");
    let spec: Value = serde_json::from_str(&out).unwrap();
    let vars: Vec<&str> = spec["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["var"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = ttl_sweeper::config::SETTINGS
        .iter()
        .map(|s| s.var)
        .collect();
    assert_eq!(vars, expected);
}

#[test]
fn window_prints_the_key_for_a_ttl_and_refuses_milliseconds_and_garbage() {
    for line in [
        "window 1658265980 => 2022-07-19T21:26:00.000Z_2022-07-19T21:27:00.000Z",
        "window 1658265980 --window-seconds 300 => 2022-07-19T21:25:00.000Z_2022-07-19T21:30:00.000Z",
        "WINDOW_SECONDS=3600 window 1658265980 => 2022-07-19T21:00:00.000Z_2022-07-19T22:00:00.000Z",
        // Refused: nothing on stdout, the reason on stderr.
        "window 1658265980000 => milliseconds",
        "window tomorrow => not a number",
        "window 1658265980 --window-seconds 0 => WINDOW_SECONDS",
    ] {
        let (mut cmd, expected) = case(line);
        let (code, out, err) = run(&mut cmd);
        if expected.starts_with("2022-") {
            assert_eq!((code, out.trim()), (0, expected), "{line}: {err}");
        } else {
            assert!(code != 0 && out.is_empty(), "{line}: {code} {out}");
            assert!(err.contains(expected), "{line}: {err}");
        }
    }
}

/// Settings refused before any request (nothing listens at the endpoint: a request would fail
/// with another message) exit 2, print nothing on stdout, and name the setting: each of the
/// comma-separated texts is in the message.
#[test]
fn bad_settings_exit_2_naming_the_setting_before_any_request() {
    let at = |at: &str| ["sweep", "--table-name", "sessions", "--at", at].map(String::from);
    for line in [
        "sweep => TABLE_NAME, --table-name",
        "DELETE_MODE=yolo sweep --table-name sessions => DELETE_MODE, conditional",
        "sweep --table-name sessions --expiry-events kafka:x => unknown sink scheme",
        "EXPIRY_EVENTS=sqs: sweep --table-name sessions => empty target",
        "EXPIRY_EVENTS_MODE=archive DELETE_MODE=conditional run --table-name sessions => archive mode needs a sink",
        "EXPIRY_EVENTS_MODE=archive sweep --table-name sessions --expiry-events firehose:s => needs DELETE_MODE=conditional",
        "sweep --table-name sessions --expiry-events-item everything => EXPIRY_EVENTS_ITEM",
        "EXPIRY_EVENTS=eventbridge:default EXPIRY_EVENTS_MODE=archive DELETE_MODE=conditional backfill --table-name sessions => would not be archived",
        // Checked before the runtime starts.
        "TOKIO_WORKER_THREADS=0 window 1700000000 => TOKIO_WORKER_THREADS=\"0\", 1 to 256",
        "TOKIO_WORKER_THREADS=many window 1700000000 => TOKIO_WORKER_THREADS=\"many\", 1 to 256",
        "TOKIO_WORKER_THREADS=100000 window 1700000000 => TOKIO_WORKER_THREADS=\"100000\", 1 to 256",
    ] {
        refused(line);
    }
    for (args, why) in [
        (at("2999-01-01T00:00:00Z"), "future"),
        (at("last tuesday"), "RFC 3339"),
    ] {
        let (code, _, err) = run(cli()
            .args(args)
            .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9"));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(why), "{err}");
    }
    for good in ["1", "3"] {
        let (code, out, err) =
            run(&mut case(&format!("TOKIO_WORKER_THREADS={good} window 1700000000")).0);
        assert_eq!(code, 0, "TOKIO_WORKER_THREADS={good}: {err}");
        assert!(!out.trim().is_empty());
    }
    // The Lambda logs the same refusal as one JSON line and exits before it asks the runtime
    // API for an invocation (none is running here).
    let mut lambda = Command::new(env!("CARGO_BIN_EXE_ttl-sweeper-lambda"));
    lambda.env("TOKIO_WORKER_THREADS", "0").stdin(Stdio::null());
    let (code, out, err) = run(lambda.env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9"));
    let logs = out + &err;
    assert_eq!(code, 1, "{logs}");
    let line: Value = logs
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON log line: {logs}"));
    assert_eq!(line["level"], "ERROR", "{line}");
    let refusal = "TOKIO_WORKER_THREADS=\\\"0\\\"";
    assert!(line.to_string().contains(refusal), "{line}");
}

/// Runs a `sweep` with the test server and `args`, which must succeed: its one-line report.
fn sweep_report(args: &[&str], env: &[(&str, &str)]) -> Value {
    let (code, out, err) = run(local_cli()
        .arg("sweep")
        .args(args)
        .envs(env.iter().copied()));
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(out.lines().count(), 1, "stdout: {out}");
    assert!(err.contains("sweep finished"), "summary on stderr: {err}");
    serde_json::from_str(&out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_deletes_expired_items_and_prints_one_json_report() {
    let (client, table) = simple_table("cli").await;
    let now = now();
    let mut items = sessions("old", 60, |i| now - 5 - i);
    items.extend(sessions("new", 10, |i| now + 600 + i));
    put_items(&client, &table, items).await;

    let report = sweep_report(&["--table-name", &table, "--max-concurrency", "4"], &[]);
    eprintln!("report: {report}");
    assert_eq!(removed_json(&report), 60, "{report}");
    assert_eq!(report["items_failed"], 0);
    assert_eq!(report["table"], table.as_str());
    assert_eq!(scan_all(&client, &table).await.len(), 10);
}

/// Two `sweep` runs with the two halves of a 4-shard table, one by flag and one by environment
/// variable: each deletes the expired items of its own shards only, and together all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeps_with_shard_ranges_delete_only_their_shards() {
    use ttl_sweeper::expiry::window::shard_of;
    let (client, table) = simple_table("cli_shards").await;
    let now = now();
    let ids = names("old", 80);
    let items = (ids.iter().zip(0..))
        .map(|(id, i)| sharded(id, now - 5 - i, 60, 4))
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

    let flags = [
        "--table-name",
        &table,
        "--window-shards",
        "4",
        "--shard-range",
    ];
    let report = sweep_report(&[&flags[..], &["2-3"]].concat(), &[]);
    assert_eq!(removed_json(&report), high.len() as u64, "{report}");
    assert_eq!(support::ids(&client, &table).await, low);

    let env = [("WINDOW_SHARDS", "4"), ("SHARD_RANGE", "0-1")];
    let report = sweep_report(&["--table-name", &table], &env);
    assert_eq!(removed_json(&report), low.len() as u64, "{report}");
    assert!(support::ids(&client, &table).await.is_empty());

    // A reversed range stops before any request, naming the setting.
    let (code, out, err) = run(local_cli().arg("sweep").args(flags).arg("3-1"));
    assert_eq!((code, out.as_str()), (2, ""));
    let reversed = "the first shard, 3, is after the last, 1";
    let named = err.contains("SHARD_RANGE") && err.contains(reversed);
    assert!(named, "{err}");
}

/// Splitting a checkpointed sweeper into shard ranges after an outage: the new ranges have no
/// checkpoint of their own yet, so each starts from the whole table's and catches up on the
/// items that expired since, beyond the lookback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_shard_ranges_start_from_the_whole_tables_checkpoint() {
    let (client, table) = simple_table("cli_split_cp").await;
    let checkpoints = checkpoint_table(&client, "cli_split_cp_state").await;
    let t = (now() / 60) * 60 - 60;
    // 40 items that expire between 3 h and 1 h before T: after the whole-table sweep at T-3h,
    // and before the lookback of a sweep at T.
    let items = (0..40)
        .map(|i| sharded(&format!("gap-{i}"), t - 3 * 3600 + 300 + i * 180, 60, 4))
        .collect();
    put_items(&client, &table, items).await;
    let sweep = |at: i64, range: &str| {
        let at = chrono::DateTime::from_timestamp(at, 0)
            .unwrap()
            .to_rfc3339();
        let args = ["--table-name", &table, "--window-shards", "4", "--at", &at];
        let more = ["--checkpoint-table", &checkpoints, "--shard-range", range];
        sweep_report(&[&args[..], &more].concat(), &[])
    };
    // The single sweeper's last sweep, then the outage.
    assert_eq!(sweep(t - 3 * 3600, "all")["items_deleted"], 0);
    let (low, high) = (sweep(t, "0-1"), sweep(t, "2-3"));
    for report in [&low, &high] {
        let from_the_tables = report["checkpoint_before"].is_string();
        assert!(from_the_tables, "started from the whole table's: {report}");
    }
    let both = removed_json(&low) + removed_json(&high);
    assert_eq!(both, 40, "{low}\n{high}");
    assert!(support::ids(&client, &table).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_of_a_missing_table_fails_clearly() {
    let missing = "table_that_is_not_there";
    let (code, out, err) = run(local_cli().args(["sweep", "--table-name", missing]));
    assert_eq!((code, out.as_str()), (2, ""));
    let named = err.contains(missing) && err.contains("does not exist");
    assert!(named, "{err}");
}

/// The tables `<prefix>_a` and `<prefix>_c`, each with `old` items expired `ago` s and more
/// before now, and the name of a table `<prefix>_b` that does not exist; now.
async fn three_tables(prefix: &str, old: i64, ago: i64) -> (Client, [String; 3], i64) {
    let (client, first) = simple_table(&format!("{prefix}_a")).await;
    let (_, third) = simple_table(&format!("{prefix}_c")).await;
    let now = now();
    for table in [&first, &third] {
        put_items(&client, table, sessions("old", old, |i| now - ago - i)).await;
    }
    let missing = table_name(&format!("{prefix}_b"));
    (client, [first, missing, third], now)
}

/// One `sweep` of three tables, the second missing: the other two are swept, the missing one is
/// reported by name, one JSON line each in the order given, and the exit status says it failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_of_three_tables_one_missing_sweeps_the_other_two() {
    let (client, [first, missing, third], now) = three_tables("many_sweep", 12, 5).await;
    for table in [&first, &third] {
        put_items(&client, table, vec![session("new", now + 600)]).await;
    }
    let tables = format!("{first},{missing}");
    let entry = format!(r#"[{{"TABLE_NAME": "{third}", "DELETE_MODE": "conditional"}}]"#);
    let (code, out, err) = run(local_cli()
        .args(["sweep", "--table-name", &tables])
        .env("TABLES", &entry));
    assert_eq!(code, 1, "one table failed: {err}");
    let reports = table_reports(&out, [&first, &missing, &third]);
    for (report, mode) in [(&reports[0], "batch"), (&reports[2], "conditional")] {
        assert_eq!(removed_json(report), 12, "{report}");
        assert_eq!(report["delete_mode"], mode, "{report}");
        assert_eq!(
            report["errors"].as_array().map(Vec::len),
            Some(0),
            "{report}"
        );
    }
    let failure = reports[1]["errors"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(failure.contains("does not exist"), "{}", reports[1]);
    for table in [&first, &third] {
        assert_eq!(ids(&client, table).await, ["new"]);
    }
    // A command that works on one table refuses several before any request.
    let (code, _, err) = run(local_cli().args(["audit", "--table-name", &tables]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("audit works on one table at a time"), "{err}");
}

/// One `run` sweeps three tables, the second missing at start-up: the other two are swept from the
/// start, each its own series in `/metrics`; the missing one is reported, opened again every
/// period, and swept once it has been created. The run's report is one line per table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_sweeps_many_tables_and_a_missing_one_joins_when_created() {
    let (client, [first, missing, third], _) = three_tables("many_run", 10, 2).await;
    let tables = format!("{first},{missing},{third}");
    let (mut child, port) = daemon(&tables, "200ms", "2", Stdio::piped());
    let both = |t: &str| [&first, &third].iter().all(|x| removed(t, x) == Some(10.0));
    let text = metrics_until(port, 30, 100, both);
    assert!(both(&text), "{text}\n--- log ---\n{}", child.log_text());
    let failed = sample(&text, "ttl_sweeper_sweeps_failed_total", &missing);
    assert!(failed.unwrap_or(0.0) >= 1.0, "{text}");
    let log = child.log_text();
    assert!(log.contains("the table cannot be swept"), "{log}");

    // The missing table is created, with expired items: swept within a period or two.
    create_table(&client, &TableSpec::simple(&missing)).await;
    put_items(&client, &missing, sessions("late", 7, |i| now() - 2 - i)).await;
    let joined = |t: &str| removed(t, &missing) == Some(7.0);
    let text = metrics_until(port, 30, 100, joined);
    assert!(joined(&text), "{text}\n--- log ---\n{}", child.log_text());
    assert!(ids(&client, &missing).await.is_empty());

    let (status, stdout) = stop(&mut child);
    let failures_count = status.code() == Some(1);
    assert!(
        failures_count,
        "the missing table's failures count: {stdout}"
    );
    let reports = table_reports(&stdout, [&first, &missing, &third]);
    let report = &reports[1];
    assert_eq!(removed_json(report), 7, "{report}");
    assert!(!report["errors"].as_array().unwrap().is_empty(), "{report}");
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
    let every = Duration::from_millis(20);
    let code = poll(limit, every, || child.try_wait().unwrap(), Option::is_some);
    let code = code.map_or_else(
        || {
            child.kill().unwrap();
            child.wait().unwrap();
            None
        },
        |status| status.code(),
    );
    let took = started.elapsed();
    (code, stdout.join().unwrap(), stderr.join().unwrap(), took)
}

/// Where a backfill of `table` keeps its progress, not there yet.
fn backfill_state(table: &str) -> std::path::PathBuf {
    let state = std::env::temp_dir().join(format!("{table}.backfill.json"));
    let _ = std::fs::remove_file(&state);
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_arguments_exit_2_naming_the_flag_and_what_it_accepts() {
    // A real table with items to write, so that a value that slipped through would reach the
    // code that crashed or hung on it.
    let (client, table) = simple_table("hostile").await;
    let items = (0..5).map(|i| unwindowed(&format!("item-{i}"), now() + 3600 + i));
    put_items(&client, &table, items.collect()).await;
    let state = backfill_state(&table);

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
        ("run --follow-hold 7h", "from 0 (nothing held) to 6h"),
        ("run --follow-hold -1s", "from 0 (nothing held) to 6h"),
        ("run --follow-hold soon", "from 0 (nothing held) to 6h"),
        ("run --follow-hold-entries 999", "from 1000 to 10000000"),
        ("run --follow-hold-entries -5", "from 1000 to 10000000"),
        ("run --follow-hold-entries 1e6", "from 1000 to 10000000"),
    ];
    let mut failures = Vec::new();
    for (args, accepts) in cases {
        let args: Vec<&str> = args.split_whitespace().collect();
        let flag = args[1].split('=').next().unwrap();
        let _ = std::fs::remove_file(&state);
        let mut cmd = local_cli();
        cmd.args(&args).args(["--table-name", &table]);
        if args[0] == "backfill" {
            cmd.arg("--state").arg(&state);
        }
        let (code, _, err, took) = run_for_at_most(&mut cmd, Duration::from_secs(20));
        if code != Some(2) || !err.contains(flag) || !err.contains(accepts) {
            let err = err.lines().take(3).collect::<Vec<_>>().join(" | ");
            failures.push(format!(
                "{args:?}: exit {code:?} after {took:?}; stderr: {err}"
            ));
        }
    }
    let _ = std::fs::remove_file(&state);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let items = scan_all(&client, &table).await;
    let untouched = items.iter().all(|i| !i.contains_key("expirationWindow"));
    assert!(untouched, "a refused command writes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_with_less_than_one_wcu_per_second_finishes_at_that_rate() {
    let (client, table) = simple_table("slow_wcu").await;
    let now = now();
    let mut items: Vec<_> = (0..3)
        .map(|i| unwindowed(&format!("live-{i}"), now + 3600 + i))
        .collect();
    items.push(unwindowed("expired", now - 3600));
    put_items(&client, &table, items).await;
    let state = backfill_state(&table);
    let mut cmd = local_cli();
    cmd.args(["backfill", "--max-wcu", "0.5", "--table-name", &table]);
    cmd.arg("--state").arg(&state);
    let (code, out, err, took) = run_for_at_most(&mut cmd, Duration::from_secs(60));
    let _ = std::fs::remove_file(&state);
    assert_eq!(code, Some(0), "after {took:?}: {out} {err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["written"], 3, "{report}");
    assert_eq!(report["deleted_expired"], 1, "{report}");
    assert_eq!(report["complete"], true, "{report}");
    // Four 1-WCU requests at 0.5 WCU/s: one at once, then one every 2 s.
    assert!(took >= Duration::from_millis(5500), "{took:?}: not paced");
    assert_eq!(scan_all(&client, &table).await.len(), 3);
}

/// `ttl-sweeper run` on `table` every `every` with `SCHEDULE_SECONDS=schedule`, serving metrics
/// on a free port: the child and the port.
fn daemon(table: &str, every: &str, schedule: &str, stdout: Stdio) -> (Daemon, u16) {
    let port = free_port();
    let mut cmd = local_cli();
    cmd.args(["run", "--every", every, "--table-name", table])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .env("SCHEDULE_SECONDS", schedule)
        .stdout(stdout);
    (Daemon::spawn(&mut cmd, &format!("daemon-{port}")), port)
}

/// Sends SIGTERM to a [`daemon`] and waits for its exit: its status and what it wrote on its
/// (piped) stdout.
fn stop(child: &mut Daemon) -> (std::process::ExitStatus, String) {
    let status = child.signal(libc::SIGTERM);
    let mut stdout = String::new();
    let pipe = child.child.stdout.as_mut().unwrap();
    pipe.read_to_string(&mut stdout).unwrap();
    (status, stdout)
}

/// The JSON lines of `out`, one report per table, of `tables` in that order.
fn table_reports(out: &str, tables: [&str; 3]) -> Vec<Value> {
    let reports: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = reports
        .iter()
        .map(|r| r["table"].as_str().unwrap())
        .collect();
    assert_eq!(names, tables, "{out}");
    reports
}

/// The value of the sample `name{table="<table>"}` in a Prometheus text exposition.
fn sample(text: &str, name: &str, table: &str) -> Option<f64> {
    let prefix = format!("{name}{{table=\"{table}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// The expired items of `table` the counters account for: deleted, or found already gone (on a
/// slow machine a lost batch answer turns deletions into gone items).
fn removed(text: &str, table: &str) -> Option<f64> {
    let deleted = sample(text, "ttl_sweeper_items_deleted_total", table)?;
    Some(deleted + sample(text, "ttl_sweeper_items_gone_total", table)?)
}

/// `/metrics` on `port` every `every` ms until `done` holds for it, or `limit` s: the last
/// exposition.
fn metrics_until(port: u16, limit: u64, every: u64, done: impl Fn(&str) -> bool) -> String {
    let metrics = || {
        http_get(port, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default()
    };
    let (limit, every) = (Duration::from_secs(limit), Duration::from_millis(every));
    tokio::task::block_in_place(|| poll(limit, every, metrics, |t| done(t)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_prometheus_metrics_and_health_while_it_sweeps() {
    let (client, table) = simple_table("daemon").await;
    let start = now();
    put_items(&client, &table, sessions("a", 20, |i| start - 2 - i)).await;
    put_items(&client, &table, vec![session("future", start + 3600)]).await;

    let (mut child, port) = daemon(&table, "200ms", "2", Stdio::piped());
    let sample = |text: &str, name: &str| sample(text, name, &table);
    let removed_total = |text: &str| removed(text, &table);
    // Until `/metrics` accounts for at least `want` removed items, or 30 s.
    let wait_for = |want: f64| metrics_until(port, 30, 100, |t| removed(t, &table) >= Some(want));
    let text = wait_for(20.0);
    let log = child.log_text();
    assert_eq!(
        removed_total(&text),
        Some(20.0),
        "{text}\n--- log ---\n{log}"
    );
    let left = scan_all(&client, &table).await.len();
    assert_eq!(
        left, 1,
        "the expired items are gone, the unexpired one stays"
    );
    let counter = "# TYPE ttl_sweeper_items_deleted_total counter";
    assert!(text.contains(counter), "{text}");
    let sweeps = sample(&text, "ttl_sweeper_sweeps_total");
    assert!(sweeps.unwrap_or(0.0) >= 1.0, "{text}");
    assert_eq!(sample(&text, "ttl_sweeper_items_failed_total"), Some(0.0));

    // More items expire: the counters move.
    put_items(&client, &table, sessions("b", 15, |i| now() - 1 - i)).await;
    let text = wait_for(35.0);
    assert_eq!(removed_total(&text), Some(35.0), "{text}");
    let found = sample(&text, "ttl_sweeper_items_found_total");
    assert!(found.unwrap_or(0.0) >= 35.0, "{text}");
    // After a reporting period (SCHEDULE_SECONDS=2) the gauges hold its values.
    let lag = |t: &str| sample(t, "ttl_sweeper_max_expiry_lag_seconds");
    let text = metrics_until(port, 10, 200, |t| lag(t).is_some_and(|l| l > 0.0));
    for name in [
        "ttl_sweeper_items_skipped_total",
        "ttl_sweeper_items_gone_total",
        "ttl_sweeper_windows_swept_total",
        "ttl_sweeper_items_left",
        "ttl_sweeper_p99_expiry_lag_seconds",
        "ttl_sweeper_clock_ahead_seconds",
        "ttl_sweeper_seconds_since_last_success",
    ] {
        assert!(sample(&text, name).is_some(), "{name} missing:\n{text}");
    }
    assert!(lag(&text).is_some_and(|l| l > 0.0), "{text}");

    let (status, body) = http_get(port, "/healthz").expect("healthz answers");
    assert_eq!(status, 200, "{body}");
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["any_success"], true, "{health}");
    let after = &health["unhealthy_after_seconds"];
    assert_eq!(after, 6.0, "3 periods of 2 s: {health}");
    assert_eq!(http_get(port, "/other").map(|(s, _)| s), Some(404));

    // SIGTERM stops it at once: exit 0, the whole run's report on stdout.
    let stopping = Instant::now();
    let (status, stdout) = stop(&mut child);
    let took = stopping.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?} to stop");
    let log = child.log_text();
    assert_eq!(status.code(), Some(0), "{log}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(removed_json(&report), 35, "{report}");
    assert!(report["ticks"].as_u64().unwrap() >= 3, "{report}");
    // The period that set the gauges also wrote its summary line and EMF record on stderr.
    let records: Vec<Value> = log
        .lines()
        .filter(|l| l.contains("\"CloudWatchMetrics\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!records.is_empty(), "no EMF record:\n{log}");
    assert_eq!(records[0]["TableName"], table.as_str(), "{}", records[0]);
    assert!(log.contains("sweep finished"), "{log}");
    assert!(log.contains("serving /metrics and /healthz"), "{log}");
    assert!(log.contains("signal received"), "{log}");
    let left = scan_all(&client, &table).await.len();
    assert_eq!(left, 1, "the unexpired item stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_health_turns_503_when_sweeps_keep_failing() {
    let (client, table) = simple_table("daemon_health").await;
    let (mut child, port) = daemon(&table, "100ms", "1", Stdio::null());
    // Polls /healthz until its answer has `want` in its body, or 20 s.
    let health_until = |want: &str| {
        let (limit, every) = (Duration::from_secs(20), Duration::from_millis(100));
        let answered =
            |a: &Option<(u16, String)>| a.as_ref().is_some_and(|(_, b)| b.contains(want));
        let health = || http_get(port, "/healthz");
        tokio::task::block_in_place(|| poll(limit, every, health, answered)).expect("/healthz")
    };
    // `ttl-sweeper health`, a container's health check, at `addr`: exit code, stdout, stderr.
    let probe = |addr: String| run(cli().args(["health", "--addr", &addr]));
    let (status, body) = health_until("\"any_success\":true");
    assert_eq!(status, 200, "{body}\n{}", child.log_text());
    assert_eq!(probe(format!("127.0.0.1:{port}")).0, 0);
    let any_success = body.contains("\"any_success\":true");
    assert!(any_success, "{body}\n{}", child.log_text());

    // The table goes away under the running daemon: every sweep fails from now on, and three
    // reporting periods (3 × 1 s) later the process says so.
    let dropped = Instant::now();
    drop_table(&client, &table).await;
    let (status, body) = health_until("\"status\":\"unhealthy\"");
    assert_eq!(status, 503, "{body}\n{}", child.log_text());
    let early = dropped.elapsed() < Duration::from_secs(2);
    assert!(!early, "503 too early: {body}");
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "unhealthy", "{health}");
    assert_eq!(health["unhealthy_after_seconds"], 3.0, "{health}");
    // `ttl-sweeper health`, a container's health check, says the same: exit 1, and 0 while it
    // was healthy (above); 3 for an address nothing serves.
    let (code, said, _) = probe(format!("127.0.0.1:{port}"));
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("\"status\":\"unhealthy\""), "{said}");
    assert_eq!(probe(format!("127.0.0.1:{}", free_port())).0, 3);
    let (_, text) = http_get(port, "/metrics").unwrap();
    let failed = sample(&text, "ttl_sweeper_sweeps_failed_total", &table).unwrap_or(0.0);
    assert!(failed >= 3.0, "{text}");

    let status = child.signal(libc::SIGTERM);
    let log = child.log_text();
    assert_eq!(status.code(), Some(1), "failed sweeps exit 1: {log}");
}

/// `run` goes by `--every`: with `--every 1s` a `LEADER_LEASE` of 5 s is two sweeps and more, and
/// it runs (`SCHEDULE_SECONDS`, 60 by default, is the Lambda's sweep period, not `run`'s); 19 s
/// with `--every 10s` is refused, naming `--every`; `TICK_SECONDS`, the Lambda's, is refused, not
/// ignored. Refusals come before any request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_goes_by_every_and_refuses_tick_seconds() {
    for line in [
        "TICK_SECONDS=1 run --table-name sessions => TICK_SECONDS, --tick-seconds, `run`, --every",
        "CHECKPOINT_TABLE=state LEADER_LEASE=19 run --every 10s --table-name sessions => LEADER_LEASE, --every is 10s, at least 20",
    ] {
        refused(line);
    }
    let (client, table) = simple_table("every_lease").await;
    let checkpoint = checkpoint_table(&client, "every_lease_cp").await;
    let mut cmd = local_cli();
    cmd.args(["run", "--every", "1s", "--table-name", &table])
        .env("CHECKPOINT_TABLE", &checkpoint)
        .env("LEADER_LEASE", "5")
        .stdout(Stdio::null());
    let mut daemon = Daemon::spawn(&mut cmd, &format!("run-every-{table}"));
    daemon.wait_for_log("running until SIGINT or SIGTERM");
    let status = daemon.signal(libc::SIGTERM);
    assert_eq!(status.code(), Some(0), "{}", daemon.log_text());
}

/// Each command refuses, as an unknown argument and before anything else, a setting it does not
/// use given as a flag, naming the commands that use it; the same settings in the environment
/// (shared with the Lambda, or with `run`) are not read, and the command goes on (to the closed
/// endpoint: exit 3). `run` still refuses `TICK_SECONDS` from the environment, and does use
/// `SCHEDULE_SECONDS`, its full-sweep period.
#[test]
fn each_command_refuses_the_settings_it_does_not_use() {
    for line in [
        "audit --table-name sessions --leader-lease 30 => `audit` does not use --leader-lease (LEADER_LEASE), only `sweep` and `run` use it",
        "audit --table-name sessions --checkpoint-table state => `audit` does not use --checkpoint-table",
        "audit --table-name sessions --tables [] => `audit` does not use --tables",
        "audit --table-name sessions --expiry-events sqs:x => `audit` does not use --expiry-events (EXPIRY_EVENTS)",
        "backfill --table-name sessions --delete-mode conditional => `backfill` does not use --delete-mode",
        "backfill --table-name sessions --shard-range 0-1 => `backfill` does not use --shard-range",
        "backfill --table-name sessions --tick-seconds 1 => `backfill` does not use --tick-seconds, the Lambda's alone",
        "sweep --table-name sessions --tick-seconds 1 => `sweep` does not use --tick-seconds, the Lambda's alone",
        "sweep --table-name sessions --metrics-namespace Mine => `sweep` does not use --metrics-namespace, only `run` uses it",
        "run --table-name sessions --tick-seconds 1 => `run` does not use --tick-seconds, `run` sweeps every --every",
    ] {
        let err = refused(line);
        assert!(err.contains("Usage: ttl-sweeper "), "{line}: {err}");
        assert!(!err.contains("set CHECKPOINT_TABLE"), "{line}: {err}");
    }
    // In the environment they are someone else's: not read. `run` uses SCHEDULE_SECONDS (flag or
    // variable).
    for line in [
        "LEADER_LEASE=30 TICK_SECONDS=1 DELETE_MODE=yolo audit --table-name sessions",
        "LEADER_LEASE=30 SHARD_RANGE=0-1 MAX_RETRIES=x backfill --table-name sessions",
        "TICK_SECONDS=1 METRICS_NAMESPACE=AWS/Nope sweep --table-name sessions",
        "SCHEDULE_SECONDS=7 run --every 1s --table-name sessions --schedule-seconds 5",
        "SCHEDULE_SECONDS=7 run --every 1s --table-name sessions",
    ] {
        let (code, _, err) = run(&mut unreachable(line).0);
        assert_eq!(code, 3, "{line}: {err}");
        assert!(err.contains("could not reach DynamoDB"), "{err}");
    }
    // `run` refuses TICK_SECONDS in the environment.
    let (code, _, err) = run(&mut unreachable("TICK_SECONDS=1 run --table-name sessions").0);
    assert_eq!(code, 2, "{err}");
    let named = err.contains("TICK_SECONDS=\"1\"") && err.contains("--every");
    assert!(named, "{err}");
}

/// `--help` of each command lists the settings it uses, worded for it, and no other: `<command>
/// => <shown>, ... => <hidden>, ...`.
#[test]
fn each_commands_help_lists_only_its_settings() {
    for line in [
        "backfill => Table to backfill, --window-seconds, --window-shards, --expiry-index-table, --expiry-events-mode, --dry-run \
         => Table to sweep, --tick-seconds, --leader-lease, --delete-mode, --expiry-events <, --checkpoint-table, --shard-range, --tables, --schedule-seconds",
        "audit => Table to audit, --window-seconds, --window-shards, --expiry-index-table, --max-expired-age \
         => Table to sweep, --tick-seconds, --leader-lease, --delete-mode, --expiry-events, --checkpoint-table, --shard-range, --tables, --schedule-seconds, --lookback-windows",
        "sweep => Table to sweep, --leader-lease, --delete-mode, --expiry-events <, How often this sweep runs \
         => --tick-seconds, --metrics-namespace, --every <",
        "run => Table to sweep, --every, Full-sweep period, at least two --every, --metrics-namespace \
         => --tick-seconds, --at",
        "window => --window-seconds, --shards, --key => --table-name, --leader-lease",
    ] {
        let [command, shown, hidden] = [0, 1, 2].map(|i| line.split(" => ").nth(i).unwrap());
        let (code, text, err) = run(cli().args([command, "--help"]));
        assert_eq!(code, 0, "{command}: {err}");
        for want in shown.split(", ").chain(["--region", "--profile", "--verbose"]) {
            let has = text.contains(want);
            assert!(has, "{command} --help lacks {want}:\n{text}");
        }
        for unwanted in hidden.split(", ") {
            let has = text.contains(unwanted);
            assert!(!has, "{command} --help shows {unwanted}:\n{text}");
        }
        if matches!(command, "backfill" | "audit") {
            let lines = text.lines().count();
            assert!(lines < 120, "{command} --help is {lines} lines:\n{text}");
        }
    }
}

/// A closed endpoint: one line, naming the endpoint, the Region and what to set, exit 3 (each
/// command that opens a table); `--region` is the Region the requests went to.
#[test]
fn an_unreachable_endpoint_is_said_once_with_the_endpoint_and_region_and_exits_3() {
    for line in [
        "sweep --table-name sessions => us-east-1",
        "--region eu-west-3 sweep --table-name sessions => eu-west-3",
        "audit --table-name sessions --region ap-south-1 => ap-south-1",
        "backfill --table-name sessions --dry-run => us-east-1",
        "run --table-name sessions => us-east-1",
    ] {
        let (mut cmd, endpoint, region) = unreachable(line);
        let (code, out, err) = run(&mut cmd);
        assert_eq!((code, out.as_str()), (3, ""), "{line}: {err}");
        assert_eq!(err.lines().count(), 1, "{line}: {err}");
        let reached = format!("could not reach DynamoDB at {endpoint} (Region {region})");
        let said = err.starts_with("error: ") && err.contains(&reached);
        assert!(said, "{line}: {err}");
        assert_eq!(err.matches("Connection refused").count(), 1, "{err}");
        for what_to_set in ["AWS_ENDPOINT_URL", "AWS_REGION or --region"] {
            assert!(err.contains(what_to_set), "{line}: {err}");
        }
    }
}

/// Runs `line` (an [`unreachable`] case) without the variables `removed`: exit code, stderr and
/// the endpoint.
fn without(removed: &[&str], line: &str) -> (i32, String, String) {
    let (mut cmd, endpoint, _) = unreachable(line);
    for var in removed {
        cmd.env_remove(var);
    }
    let (code, _, err) = run(&mut cmd);
    (code, err, endpoint)
}

const CREDENTIALS: [&str; 2] = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"];

/// No Region, no credentials, a `--profile` that names no profile: each said once on one line,
/// with what to set, exit 2, before any request (the endpoint is closed: one would fail with
/// exit 3) and without the SDK's warnings.
#[test]
fn a_missing_region_credentials_or_profile_is_said_once_with_what_to_set() {
    let no_region = ["error: no AWS Region", "set AWS_REGION or pass --region"];
    let no_credentials = [
        "error: no AWS credentials found",
        "AWS_PROFILE",
        "--profile",
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    ];
    for (removed, line, once, wants) in [
        (
            &["AWS_REGION"][..],
            "sweep",
            "no AWS Region",
            &no_region[..],
        ),
        (&CREDENTIALS, "audit", "credentials", &no_credentials),
    ] {
        let (code, err, _) = without(removed, &format!("{line} --table-name sessions"));
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(err.matches(once).count(), 1, "{err}");
        for want in wants {
            assert!(err.contains(want), "{err}");
        }
        assert!(!err.contains("WARN"), "{err}");
    }

    // A profile of the config file gives the Region and the credentials; one that is not there
    // is refused, naming the file.
    let config =
        std::env::temp_dir().join(format!("ttl-sweeper-cli-{}.config", std::process::id()));
    let profile = "[profile other]\nregion = eu-west-2\naws_access_key_id = local\naws_secret_access_key = local\n";
    std::fs::write(&config, profile).unwrap();
    let with_profile = |name: &str| {
        let line = format!(
            "AWS_CONFIG_FILE={} --profile {name} sweep --table-name sessions",
            config.display()
        );
        without(&["AWS_REGION", CREDENTIALS[0], CREDENTIALS[1]], &line)
    };
    let (code, err, endpoint) = with_profile("other");
    assert_eq!(code, 3, "{err}");
    let region = format!("{endpoint} (Region eu-west-2)");
    assert!(err.contains(&region), "{err}");
    let (code, err, _) = with_profile("missing");
    let _ = std::fs::remove_file(&config);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let named = format!(
        "--profile missing: profile `missing` is not in {}",
        config.display()
    );
    assert!(err.contains(&named), "{err}");
}

/// Default: the one error line; `-v` adds this crate's debug lines, `-vv` the AWS SDK's too
/// (`config file loaded`, aws-config's). Piped, stderr has no colour codes.
#[test]
fn verbosity_adds_our_debug_lines_then_the_sdks_and_a_pipe_gets_no_colour() {
    let stderr = |verbose: &str| {
        let (code, err, _) = without(
            &CREDENTIALS,
            &format!("{verbose} sweep --table-name sessions"),
        );
        assert_eq!(code, 2, "{verbose:?}: {err}");
        let coloured = err.contains("\x1b[");
        assert!(!coloured, "{verbose:?}: colour codes in a pipe: {err:?}");
        err
    };
    let (ours, sdk) = ("the credential providers tried", "config file loaded");
    let quiet = stderr("");
    assert_eq!(quiet.lines().count(), 1, "{quiet}");
    let debug = stderr("-v");
    assert!(debug.contains(ours) && !debug.contains(sdk), "{debug}");
    let more = stderr("-vv");
    assert!(more.contains(ours) && more.contains(sdk), "{more}");
}
