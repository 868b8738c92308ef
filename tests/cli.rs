//! The `ttl-sweeper` binary, run as a user would.

mod common;

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
