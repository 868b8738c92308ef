//! Adopting the sweeper on an existing table: backfill and audit, against the local server.

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use ttl_sweeper::expiry::window::window_key;
use ttl_sweeper::expiry::Layout;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::scan::UpdateOutcome;
use ttl_sweeper::store::{ConditionalOutcome, Key};
use ttl_sweeper::tools::backfill::{backfill, BackfillOptions, BackfillReport, BackfillState};

/// The CLI (from a cleared environment, see [`common::cli`]) on the test server, for `table`.
fn cli(table: &str) -> Command {
    let mut cmd = common::cli();
    cmd.env("AWS_ENDPOINT_URL", endpoint())
        .env("TABLE_NAME", table);
    cmd
}

fn run_json(cmd: &mut Command) -> (i32, serde_json::Value, String) {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout} / {stderr}"));
    (out.status.code().unwrap_or(-1), json, stderr)
}

fn bare(id: &str, ttl: Option<AV>) -> Key {
    let mut item = HashMap::from([("id".to_string(), AV::S(id.into()))]);
    if let Some(t) = ttl {
        item.insert("ttl".into(), t);
    }
    item
}

/// Every item with a numeric ttl that `windowed(id, ttl)` picks has the right window; everything
/// else has none. Returns how many have one.
async fn assert_windows(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    windowed: impl Fn(&str, &str) -> bool,
) -> usize {
    let items = scan_all(client, table).await;
    let mut with_window = 0;
    for item in &items {
        let id = item["id"].as_s().unwrap();
        match item.get("ttl") {
            Some(AV::N(n)) if windowed(id, n) => {
                let t: f64 = n.parse().unwrap();
                assert_eq!(
                    item.get("expirationWindow"),
                    Some(&AV::S(window_key(t, 60).unwrap())),
                    "{item:?}"
                );
                with_window += 1;
            }
            _ => assert!(!item.contains_key("expirationWindow"), "{item:?}"),
        }
    }
    with_window
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_of_50k_items_completes_resumes_after_a_kill_and_is_idempotent() {
    let client = client().await;
    let table = new_table(&client, "backfill", |t| t.index = false).await;
    let now = now();
    let mut items: Vec<Key> = Vec::with_capacity(50_000);
    for i in 0..50_000i64 {
        let id = format!("item-{i:05}");
        items.push(match i % 50 {
            0 => bare(&id, None),                                          // never expires
            1 => bare(&id, Some(AV::S((now + 600).to_string()))),          // string ttl
            2 => bare(&id, Some(AV::N(((now + 600) * 1000).to_string()))), // milliseconds
            3 => {
                // a wrong window written by a buggy writer
                let mut it = bare(&id, Some(AV::N((now + 600).to_string())));
                it.insert(
                    "expirationWindow".into(),
                    AV::S(window_key((now + 6000) as f64, 60).unwrap()),
                );
                it
            }
            4 => session(&id, now + 900), // already correct
            5..=9 => bare(&id, Some(AV::N((now - 100 - i % 3000).to_string()))), // expired already
            // live until well after the test (a resumed run's instant is its own)
            _ => bare(&id, Some(AV::N((now + 3600 + i % 7200).to_string()))),
        });
    }
    put_many(&client, &table, items).await;
    // All but no-ttl, string, millis, already-correct and expired (which are deleted instead).
    let needing = 50_000 - 1000 * 4 - 5000;
    let state = std::env::temp_dir().join(format!("{table}.backfill.json"));
    let _ = std::fs::remove_file(&state);

    // First run, rate-limited so that it is still going when it is killed.
    let mut child = cli(&table)
        .args([
            "backfill",
            "--segments",
            "4",
            "--max-wcu",
            "1500",
            "--state",
        ])
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once it has saved progress twice, so part-way through a later page. (A page of 500
    // items took DynamoDB Local about 10 s on a busy 2-core machine: a fixed wait could end
    // before the first save.)
    let started = std::time::Instant::now();
    let mut saves = Vec::new();
    while saves.len() < 2 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the first backfill run stopped before saving progress twice"
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "progress not saved twice within 120 s"
        );
        if let Ok(text) = std::fs::read_to_string(&state) {
            if saves.last() != Some(&text) {
                saves.push(text);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let written_before = saved["report"]["written"].as_u64().unwrap();
    let deleted_before = saved["report"]["deleted_expired"].as_u64().unwrap();
    assert!(
        written_before > 0 && written_before < needing as u64,
        "killed halfway: {written_before}"
    );
    assert!(saved["positions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p != "done"));

    // Without --resume it refuses to start over on top of the saved progress.
    let out = cli(&table)
        .args(["backfill", "--state"])
        .arg(&state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--resume") && stderr.contains("interrupted"),
        "{stderr}"
    );

    // Resume: finishes the job.
    let (code, report, stderr) = run_json(
        cli(&table)
            .args(["backfill", "--resume", "--state"])
            .arg(&state),
    );
    assert_eq!(code, 0, "{stderr}");
    eprintln!("resumed backfill: {report}");
    assert_eq!(report["complete"], true);
    let written = report["written"].as_u64().unwrap();
    assert!(
        written <= needing as u64 && written >= written_before,
        "{report}"
    );
    assert_eq!(report["no_ttl"], 1000, "{report}");
    assert_eq!(report["invalid_ttl"], 2000, "{report}");
    assert_eq!(report["too_old_ttl"], 0, "{report}");
    assert_eq!(report["changed_concurrently"], 0, "{report}");
    // Items the killed run deleted after its last save are simply not there to count again.
    let deleted = report["deleted_expired"].as_u64().unwrap();
    assert!(deleted <= 5000 && deleted >= deleted_before, "{report}");
    assert_eq!(report["expired_kept"], 0, "{report}");
    // Every item with a usable numeric ttl has the right window; everything else is untouched.
    let usable = |_: &str, ttl: &str| ttl_sweeper::expiry::window::parse_ttl(ttl).is_ok();
    assert_eq!(assert_windows(&client, &table, usable).await, 42_000);
    assert_eq!(
        scan_all(&client, &table).await.len(),
        45_000,
        "expired items deleted"
    );

    // Again, fresh: nothing left to write.
    let state2 = std::env::temp_dir().join(format!("{table}.backfill2.json"));
    let _ = std::fs::remove_file(&state2);
    let (code, report, _) = run_json(
        cli(&table)
            .args(["backfill", "--segments", "3", "--state"])
            .arg(&state2),
    );
    assert_eq!(code, 0);
    eprintln!("second backfill: {report}");
    assert_eq!(report["written"], 0, "{report}");
    assert_eq!(report["deleted_expired"], 0, "{report}");
    assert_eq!(report["already_ok"], 42_000, "{report}");
    assert_eq!(report["scanned"], 45_000);
    let _ = (std::fs::remove_file(&state), std::fs::remove_file(&state2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_never_overwrites_a_concurrent_change_or_recreates_a_deleted_item() {
    let (client, table) = simple_table("bf_race").await;
    let now = now();
    put_items(
        &client,
        &table,
        vec![
            bare("extended", Some(AV::N((now + 60).to_string()))),
            bare("deleted", Some(AV::N((now + 60).to_string()))),
        ],
    )
    .await;
    let store = common::store(client.clone());
    let layout = Layout::default();
    let stale_window = layout
        .window_for((now + 60) as f64, &AV::S("extended".into()))
        .unwrap();

    // Between the scan (which saw ttl = now+60 and no window) and the update, the application
    // extends the ttl and writes the matching window; and deletes the other item.
    let new_ttl = now + 7200;
    extend_ttl(&client, &table, id_key("extended"), new_ttl).await;
    client
        .delete_item()
        .table_name(&table)
        .key("id", AV::S("deleted".into()))
        .send()
        .await
        .unwrap();

    for id in ["extended", "deleted"] {
        let (outcome, _) = store
            .set_window_if_unchanged(
                &table,
                id_key(id),
                "ttl",
                AV::N((now + 60).to_string()),
                "expirationWindow",
                None,
                stale_window.clone(),
            )
            .await
            .unwrap();
        assert_eq!(outcome, UpdateOutcome::Changed, "{id}");
    }
    let items = scan_all(&client, &table).await;
    assert_eq!(items.len(), 1, "the deleted item stays deleted");
    assert_eq!(
        items[0]["expirationWindow"],
        AV::S(window_key(new_ttl as f64, 60).unwrap()),
        "the application's write stands"
    );
}

/// Five years and a day: a ttl this old is one native TTL never acts on.
const SIX_YEARS: i64 = 6 * 365 * 86_400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_deletes_items_long_expired_so_that_nothing_expired_is_left_after_a_sweep() {
    let (client, table) = simple_table("bf_expired").await;
    let now = now();
    let mut items: Vec<Key> = Vec::new();
    // Expired 1-2 h before the backfill: older than any window a sweep reads.
    for i in 0..200 {
        items.push(bare(
            &format!("expired-{i:03}"),
            Some(AV::N((now - 3600 - i * 18).to_string())),
        ));
    }
    // Expired 2 h ago with the right window: a sweep does not read that window either.
    for i in 0..10 {
        items.push(session(&format!("windowed-{i}"), now - 7200 - i));
    }
    // More than five years old: native TTL's rule keeps them, so does the backfill.
    for i in 0..20 {
        items.push(bare(
            &format!("ancient-{i:02}"),
            Some(AV::N((now - SIX_YEARS - i).to_string())),
        ));
    }
    for i in 0..50 {
        items.push(bare(
            &format!("live-{i:02}"),
            Some(AV::N((now + 3600 + i).to_string())),
        ));
    }
    for i in 0..5 {
        items.push(bare(&format!("no-ttl-{i}"), None));
    }
    put_items(&client, &table, items).await;
    let state = std::env::temp_dir().join(format!("{table}.backfill.json"));
    let _ = std::fs::remove_file(&state);

    // A dry run counts what it would delete and deletes nothing.
    let (code, report, stderr) = run_json(
        cli(&table)
            .args(["backfill", "--dry-run", "--state"])
            .arg(&state),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["deleted_expired"], 210, "{report}");
    assert_eq!(report["written"], 50, "{report}");
    assert_eq!(scan_all(&client, &table).await.len(), 285);

    let (code, report, stderr) = run_json(
        cli(&table)
            .args(["backfill", "--max-wcu", "400", "--state"])
            .arg(&state),
    );
    assert_eq!(code, 0, "{stderr}");
    eprintln!("backfill: {report}");
    assert_eq!(report["scanned"], 285, "{report}");
    assert_eq!(report["deleted_expired"], 210, "{report}");
    assert_eq!(report["expired_kept"], 0, "{report}");
    assert_eq!(report["expired_gone"], 0, "{report}");
    assert_eq!(report["written"], 50, "{report}");
    assert_eq!(report["already_ok"], 0, "{report}");
    assert_eq!(report["invalid_ttl"], 20, "{report}");
    assert_eq!(report["too_old_ttl"], 20, "{report}");
    assert_eq!(report["no_ttl"], 5, "{report}");
    assert!(
        report["consumed_wcu"].as_f64().unwrap() >= 260.0,
        "{report}"
    );

    let (code, out, stderr) = run(cli(&table).arg("sweep"));
    assert_eq!(code, 0, "{out} {stderr}");

    // Nothing expired is left: the live items have their windows, the ancient ones are as they
    // were (no window), the ones without a ttl untouched.
    let mut left = ids(&client, &table).await;
    left.retain(|id| !id.starts_with("live-") && !id.starts_with("no-ttl-"));
    let ancient: Vec<String> = (0..20).map(|i| format!("ancient-{i:02}")).collect();
    assert_eq!(left, ancient);
    // Only the items without a usable ttl and those more than five years old have no window.
    let windowed = |id: &str, _: &str| !id.starts_with("ancient-");
    assert_eq!(assert_windows(&client, &table, windowed).await, 50);

    // The audit agrees: nothing expired present, the ancient ttls are invalid.
    let (code, report, _) = run_json(cli(&table).args(["audit", "--max-problems", "20"]));
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["expired_present"], serde_json::json!({}), "{report}");
    assert_eq!(report["oldest_expired_age_seconds"], 0, "{report}");
    assert_eq!(report["invalid_ttl"], 20, "{report}");
    assert_eq!(report["too_old_ttl"], 20, "{report}");
    assert_eq!(report["missing_window"], 0, "{report}");
    let _ = std::fs::remove_file(&state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_deletes_an_expired_item_only_if_its_ttl_is_still_the_one_read() {
    let (client, table) = simple_table("bf_del_race").await;
    let now = now();
    let read_ttl = now - 3600;
    put_items(
        &client,
        &table,
        ["unchanged", "extended", "rewritten", "deleted"]
            .iter()
            .map(|id| bare(id, Some(AV::N(read_ttl.to_string()))))
            .collect(),
    )
    .await;
    let store = common::store(client.clone());

    // Between the scan (which saw every ttl expired) and the delete, the application extends one
    // ttl, rewrites another item with a ttl that is also expired but not the one read, and
    // deletes a third.
    client
        .put_item()
        .table_name(&table)
        .set_item(Some(session("extended", now + 7200)))
        .send()
        .await
        .unwrap();
    client
        .put_item()
        .table_name(&table)
        .set_item(Some(bare("rewritten", Some(AV::N((now - 60).to_string())))))
        .send()
        .await
        .unwrap();
    client
        .delete_item()
        .table_name(&table)
        .key("id", AV::S("deleted".into()))
        .send()
        .await
        .unwrap();

    for (id, expected) in [
        ("unchanged", ConditionalOutcome::Deleted),
        ("extended", ConditionalOutcome::Kept),
        ("rewritten", ConditionalOutcome::Kept),
        ("deleted", ConditionalOutcome::Gone),
    ] {
        let (outcome, consumed) = store
            .delete_if_ttl_unchanged(&table, id_key(id), "ttl", AV::N(read_ttl.to_string()))
            .await
            .unwrap();
        assert_eq!(outcome, expected, "{id}");
        assert!(consumed > 0.0, "{id}");
    }
    assert_eq!(
        ids(&client, &table).await,
        vec!["extended".to_string(), "rewritten".to_string()],
        "only the unchanged item is deleted; the deleted one stays deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_backfill_runs_again_fresh_and_resuming_it_reports_it_complete() {
    let (client, table) = simple_table("bf_rerun").await;
    let now = now();
    put_items(
        &client,
        &table,
        (0..30)
            .map(|i| {
                bare(
                    &format!("item-{i:02}"),
                    Some(AV::N((now + 3600 + i).to_string())),
                )
            })
            .collect(),
    )
    .await;
    let state = std::env::temp_dir().join(format!("{table}.backfill.json"));
    let _ = std::fs::remove_file(&state);
    let backfill = |extra: &[&str]| {
        let mut cmd = cli(&table);
        cmd.arg("backfill").args(extra).arg("--state").arg(&state);
        cmd
    };

    let (code, first, stderr) = run_json(&mut backfill(&["--segments", "2"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        (first["written"].as_u64(), first["complete"].as_bool()),
        (Some(30), Some(true))
    );

    // The weekly fix-up: the same command again, over the complete run's progress file.
    put_items(
        &client,
        &table,
        vec![bare("late", Some(AV::N((now + 3600).to_string())))],
    )
    .await;
    let (code, second, stderr) = run_json(&mut backfill(&["--segments", "3"]));
    assert_eq!(
        code, 0,
        "a complete run does not block the next one: {stderr}"
    );
    assert_eq!(second["scanned"], 31, "{second}");
    assert_eq!(second["already_ok"], 30, "{second}");
    assert_eq!(second["written"], 1, "{second}");
    assert_eq!(second["complete"], true, "{second}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(saved["positions"].as_array().unwrap().len(), 3, "replaced");
    assert_eq!(saved["report"], second);

    // --resume of a complete run: nothing to do, its summary, exit 0.
    let (code, resumed, stderr) = run_json(&mut backfill(&["--resume"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(resumed, second);
    assert!(stderr.contains("already complete"), "{stderr}");

    // An interrupted run's file is still refused without --resume, and kept.
    let mut interrupted = saved.clone();
    interrupted["positions"][1] = serde_json::json!("start");
    std::fs::write(&state, interrupted.to_string()).unwrap();
    let (code, out, stderr) = run(&mut backfill(&[]));
    assert_eq!(code, 2, "{out}");
    assert!(
        stderr.contains("interrupted") && stderr.contains("--resume"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        interrupted.to_string()
    );
    let (code, report, stderr) = run_json(&mut backfill(&["--resume"]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["complete"], true, "{report}");
    let _ = std::fs::remove_file(&state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_finds_each_planted_problem_and_nothing_on_a_clean_table() {
    let client = client().await;
    let now = now();
    let clean = new_table(&client, "audit_clean", |_| {}).await;
    let mut good = sessions("ok", 200, |i| now + 60 + i);
    good.push(bare("no-ttl", None));
    put_items(&client, &clean, good).await;
    let (code, report, stderr) = run_json(cli(&clean).args(["audit", "--segments", "2"]));
    assert_eq!(code, 0, "{report} {stderr}");
    assert_eq!(report["scanned"], 201);
    assert_eq!(report["no_ttl"], 1);
    for field in [
        "missing_window",
        "wrong_window",
        "millis_ttl",
        "invalid_ttl",
        "oldest_expired_age_seconds",
    ] {
        assert_eq!(report[field], 0, "{field}: {report}");
    }
    assert_eq!(report["expired_present"], serde_json::json!({}));

    let dirty = new_table(&client, "audit_dirty", |t| t.index = false).await;
    let mut wrong = bare("wrong", Some(AV::N((now + 60).to_string())));
    wrong.insert(
        "expirationWindow".into(),
        AV::S(window_key((now + 3600) as f64, 60).unwrap()),
    );
    put_items(
        &client,
        &dirty,
        vec![
            session("fine", now + 60),
            session("expired-30s", now - 30),
            session("expired-10m", now - 600),
            session("expired-2h", now - 7200),
            bare("missing-window", Some(AV::N((now + 60).to_string()))),
            wrong,
            bare("millis", Some(AV::N(((now + 60) * 1000).to_string()))),
            bare("string", Some(AV::S((now + 60).to_string()))),
        ],
    )
    .await;
    let (code, report, _) = run_json(cli(&dirty).args(["audit"]));
    assert_eq!(
        code, 1,
        "problems past the thresholds fail the audit: {report}"
    );
    assert_eq!(report["scanned"], 8);
    assert_eq!(
        report["expired_present"],
        serde_json::json!({"under_1m": 1, "5m_to_1h": 1, "1h_to_24h": 1})
    );
    let oldest = report["oldest_expired_age_seconds"].as_i64().unwrap();
    assert!((7200..7260).contains(&oldest), "{oldest}");
    assert_eq!(report["missing_window"], 1);
    assert_eq!(report["wrong_window"], 1);
    assert_eq!(report["millis_ttl"], 1);
    assert_eq!(report["invalid_ttl"], 1);
    let problems: Vec<&str> = report["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["problem"].as_str().unwrap())
        .collect();
    for p in [
        "missing_window",
        "wrong_window",
        "millis_ttl",
        "invalid_ttl",
    ] {
        assert!(problems.contains(&p), "{p} has an example");
    }
    // Generous thresholds pass the same table.
    let (code, _, _) =
        run_json(cli(&dirty).args(["audit", "--max-expired-age", "3h", "--max-problems", "4"]));
    assert_eq!(code, 0);
}

/// A backfill run against `table` (one segment, one item per page) whose clock is `clock`;
/// `on_page` sees the items scanned so far after every page.
async fn backfill_with_clock(
    table: &str,
    clock: &(dyn Fn() -> Timestamp + Send + Sync),
    on_page: &(dyn Fn(u64) + Sync),
    max_wcu: Option<f64>,
) -> BackfillReport {
    let (store, schema) = store_and_schema(&config(table, &[])).await;
    let options = BackfillOptions {
        dry_run: false,
        max_wcu,
        page_limit: Some(1),
    };
    let state = BackfillState::new(table, &schema.layout, 1);
    let done = backfill(&store, &schema, &options, &clock, state, &|_| {}, on_page).await;
    assert!(
        done.report.complete && done.report.errors.is_empty(),
        "{:?}",
        done.report
    );
    done.report
}

/// Each item is judged by the clock when the backfill writes it, not when the run started. The
/// clock moves 10 s per item scanned; every item's ttl is 25 s after the start: the first three
/// are live when written and get their window, the rest have expired by the time the backfill
/// reaches them and are deleted — none is given a window the sweeps may already have passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_judges_each_item_by_the_clock_when_it_writes_it() {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    let (client, table) = simple_table("bf_clock").await;
    let start = now();
    let ttl = start + 25;
    let items: Vec<Key> = (0..12)
        .map(|i| bare(&format!("item-{i:02}"), Some(AV::N(ttl.to_string()))))
        .collect();
    put_items(&client, &table, items).await;
    let scanned = AtomicU64::new(0);
    let clock = || Timestamp::from_secs(start + 10 * scanned.load(SeqCst) as i64);
    let report = backfill_with_clock(&table, &clock, &|n| scanned.store(n, SeqCst), None).await;
    assert_eq!(report.scanned, 12, "{report:?}");
    assert_eq!(
        report.written, 3,
        "live when written (at +0, +10, +20 s): {report:?}"
    );
    assert_eq!(
        report.deleted_expired, 9,
        "expired when reached: {report:?}"
    );
    assert_eq!(report.expired_while_written, 0, "{report:?}");
    let left = scan_all(&client, &table).await;
    assert_eq!(left.len(), 3);
    for item in &left {
        assert_eq!(
            item.get("expirationWindow"),
            Some(&AV::S(window_key(ttl as f64, 60).unwrap())),
            "{item:?}"
        );
    }
}

/// An item live when its window write is made, whose ttl has passed by the time the write is
/// acknowledged, is deleted after the write (with the ttl read as condition) rather than left
/// with a window the sweeps may already have passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_deletes_an_item_whose_ttl_passes_while_its_window_is_written() {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    let (client, table) = simple_table("bf_during").await;
    let start = now();
    put_items(
        &client,
        &table,
        vec![bare("slow", Some(AV::N((start + 5).to_string())))],
    )
    .await;
    // The clock reads `start` while the item is judged (when scanned, and when written), and a
    // minute later from the moment the write is acknowledged.
    let reads = AtomicU64::new(0);
    let clock = || {
        let n = reads.fetch_add(1, SeqCst);
        Timestamp::from_secs(if n < 2 { start } else { start + 60 })
    };
    let report = backfill_with_clock(&table, &clock, &|_| {}, None).await;
    assert_eq!(report.written, 1, "{report:?}");
    assert_eq!(report.expired_while_written, 1, "{report:?}");
    assert_eq!(report.deleted_expired, 1, "{report:?}");
    assert!(scan_all(&client, &table).await.is_empty());
}

/// The CLI, rate-limited so the run outlasts the items' common ttl: the items it reaches before
/// the ttl get their window, those it reaches after are deleted. Judged against a single start
/// instant, items with one ttl would all be treated alike (all windows, or all deletes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_backfill_judges_items_by_the_clock_as_it_reaches_them() {
    let (client, table) = simple_table("bf_slow").await;
    // 40 writes at 2 a second take 20 s (after a first burst of 2); the ttl falls mid-run,
    // 10 s in: room for a slow start (this binary's 50,000-item test may run beside it).
    let ttl = now() + 10;
    let items: Vec<Key> = (0..40)
        .map(|i| bare(&format!("item-{i:02}"), Some(AV::N(ttl.to_string()))))
        .collect();
    put_items(&client, &table, items).await;
    let state = std::env::temp_dir().join(format!("{table}.backfill.json"));
    let _ = std::fs::remove_file(&state);
    let (code, report, stderr) = run_json(
        cli(&table)
            .args(["backfill", "--segments", "1", "--page-size", "5"])
            .args(["--max-wcu", "2", "--state"])
            .arg(&state),
    );
    assert_eq!(code, 0, "{stderr}");
    eprintln!("slow backfill: {report}");
    let written = report["written"].as_u64().unwrap();
    let deleted = report["deleted_expired"].as_u64().unwrap();
    assert!(
        written >= 1,
        "items reached before the ttl get a window: {report}"
    );
    assert!(
        deleted >= 1,
        "items reached after the ttl are deleted: {report}"
    );
    assert_eq!(report["scanned"], 40, "{report}");
    let left = scan_all(&client, &table).await;
    let expected = written - report["expired_while_written"].as_u64().unwrap();
    assert_eq!(left.len() as u64, expected, "{report}");
    for item in &left {
        assert_eq!(
            item.get("expirationWindow"),
            Some(&AV::S(window_key(ttl as f64, 60).unwrap())),
            "{item:?}"
        );
    }
    let _ = std::fs::remove_file(&state);
}
