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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_deletes_expired_items_and_prints_one_json_report() {
    let client = client().await;
    let table = table_name("cli");
    create_table(&client, &TableSpec::simple(&table)).await;
    let now = now();
    let mut items: Vec<_> = (0..60)
        .map(|i| session(&format!("old-{i}"), now - 5 - i))
        .collect();
    items.extend((0..10).map(|i| session(&format!("new-{i}"), now + 600 + i)));
    put_items(&client, &table, items).await;

    let (code, out, err) = run(cli()
        .args(["sweep", "--table-name", &table, "--max-concurrency", "4"])
        .env("AWS_ENDPOINT_URL", endpoint()));
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(out.lines().count(), 1, "stdout: {out}");
    eprintln!("report: {out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["items_deleted"], 60);
    assert_eq!(report["items_failed"], 0);
    assert_eq!(report["table"], table.as_str());
    assert!(
        err.contains("sweep finished"),
        "summary line goes to stderr: {err}"
    );
    assert_eq!(scan_all(&client, &table).await.len(), 10);
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
    let client = client().await;
    let table = table_name("hostile");
    create_table(&client, &TableSpec::simple(&table)).await;
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

    // (arguments, the flag the message names, what it says is accepted)
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["backfill", "--max-wcu", "0"],
            "--max-wcu",
            "0.01 to 1000000",
        ),
        (
            &["backfill", "--max-wcu", "-5"],
            "--max-wcu",
            "0.01 to 1000000",
        ),
        (
            &["backfill", "--max-wcu=-5"],
            "--max-wcu",
            "0.01 to 1000000",
        ),
        (
            &["backfill", "--max-wcu", "NaN"],
            "--max-wcu",
            "0.01 to 1000000",
        ),
        (
            &["backfill", "--max-wcu", "inf"],
            "--max-wcu",
            "0.01 to 1000000",
        ),
        (
            &["backfill", "--max-wcu", "1e-300"],
            "--max-wcu",
            "0.01 to 1000000",
        ),
        (
            &["backfill", "--segments", "1000000"],
            "--segments",
            "1 to 1000",
        ),
        (&["backfill", "--segments", "0"], "--segments", "1 to 1000"),
        (&["backfill", "--segments", "-1"], "--segments", "1 to 1000"),
        (
            &["backfill", "--page-size", "0"],
            "--page-size",
            "1 to 1000",
        ),
        (
            &["backfill", "--page-size", "-1"],
            "--page-size",
            "1 to 1000",
        ),
        (
            &["backfill", "--page-size", "1001"],
            "--page-size",
            "1 to 1000",
        ),
        (
            &["audit", "--segments", "4000000000"],
            "--segments",
            "1 to 1000",
        ),
        (
            &["audit", "--segments", "1000000"],
            "--segments",
            "1 to 1000",
        ),
        (&["audit", "--segments", "0"], "--segments", "1 to 1000"),
        (&["audit", "--sample", "0"], "--sample", "at least 1"),
        (&["audit", "--sample", "-1"], "--sample", "at least 1"),
        (&["run", "--every", "300000000y"], "--every", "100ms to 1d"),
        (&["run", "--every", "2d"], "--every", "100ms to 1d"),
        (&["run", "--every", "50ms"], "--every", "100ms to 1d"),
        (&["run", "--every", "0"], "--every", "100ms to 1d"),
    ];
    let mut failures = Vec::new();
    for (args, flag, accepts) in cases {
        let _ = std::fs::remove_file(&state);
        let mut cmd = cli();
        cmd.args(*args)
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
    let client = client().await;
    let table = table_name("slow_wcu");
    create_table(&client, &TableSpec::simple(&table)).await;
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
