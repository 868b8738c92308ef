//! Adopting the sweeper on an existing table: backfill and audit, against the local server.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::*;
use ttl_sweeper::expiry::window::window_key;
use ttl_sweeper::expiry::Layout;
use ttl_sweeper::store::scan::UpdateOutcome;
use ttl_sweeper::store::{ConditionalOutcome, Key, Scan, TableSchema};

/// The CLI (from a cleared environment, see [`support::cli`]) on the test server, for `table`.
fn cli(table: &str) -> Command {
    let mut cmd = local_cli();
    cmd.env("TABLE_NAME", table);
    cmd
}

/// `ttl-sweeper backfill <args> --state <state>` on `table`.
fn backfill_cmd(table: &str, state: &Path, args: &str) -> Command {
    let mut cmd = cli(table);
    cmd.arg("backfill")
        .args(args.split_whitespace())
        .arg("--state")
        .arg(state);
    cmd
}

/// A backfill progress file for `table` (with `suffix`), not there yet.
fn fresh_state(table: &str, suffix: &str) -> PathBuf {
    let state = std::env::temp_dir().join(format!("{table}.backfill{suffix}.json"));
    let _ = std::fs::remove_file(&state);
    state
}

/// An item with `id` and the String ttl `ttl`: not a usable ttl.
fn string_ttl(id: &str, ttl: i64) -> Key {
    bare(id, Some(AV::S(ttl.to_string())))
}

/// Every item with a numeric ttl that `windowed(id, ttl)` picks has the right window; everything
/// else has none. Returns how many have one.
async fn assert_windows(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    windowed: impl Fn(&str, &str) -> bool,
) -> usize {
    let mut with_window = 0;
    for item in &scan_all(client, table).await {
        match item.get("ttl") {
            Some(AV::N(n)) if windowed(item["id"].as_s().unwrap(), n) => {
                let window = AV::S(window_key(n.parse().unwrap(), 60).unwrap());
                assert_eq!(item.get("expirationWindow"), Some(&window), "{item:?}");
                with_window += 1;
            }
            _ => assert!(!item.contains_key("expirationWindow"), "{item:?}"),
        }
    }
    with_window
}

/// Items back-filled by the kill-and-resume test, and how many of each of its 50 kinds of item.
const ITEMS: i64 = 4_000;
const EACH: i64 = ITEMS / 50;
/// Scan page size of the run that is killed: each of its 4 segments spans
/// `ITEMS / 4 / KILLED_PAGE` = 10 pages, so it is killed several pages before the end of any.
const KILLED_PAGE: i64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_of_4k_items_completes_resumes_after_a_kill_and_is_idempotent() {
    let client = client().await;
    let table = new_table(&client, "backfill", |t| t.index = false).await;
    let now = now();
    let wrong_window = window_key((now + 6000) as f64, 60).unwrap();
    let items = (0..ITEMS).map(|i| {
        let id = format!("item-{i:05}");
        match i % 50 {
            0 => bare(&id, None),                           // never expires
            1 => string_ttl(&id, now + 600),                // string ttl
            2 => unwindowed(&id, (now + 600) * 1000),       // milliseconds
            3 => windowed(&id, now + 600, &wrong_window),   // written by a buggy writer
            4 => session(&id, now + 900),                   // already correct
            5..=9 => unwindowed(&id, now - 100 - i % 3000), // expired already
            // live until well after the test (a resumed run's instant is its own)
            _ => unwindowed(&id, now + 3600 + i % 7200),
        }
    });
    put_many(&client, &table, items.collect()).await;
    // All but no-ttl, string, millis, already-correct and expired (which are deleted instead).
    let needing = ITEMS - EACH * 4 - EACH * 5;
    let state = fresh_state(&table, "");

    // First run, rate-limited so that it is still going when it is killed, in pages of
    // KILLED_PAGE items.
    let first = format!("--segments 4 --max-wcu 1500 --page-size {KILLED_PAGE}");
    let mut first = backfill_cmd(&table, &state, &first);
    let mut child = Daemon::spawn(first.stdout(Stdio::null()), &format!("backfill-{table}"));
    // Killed once it has saved progress twice, so part-way through a later page. (A page of 500
    // items took DynamoDB Local about 10 s on a busy 2-core machine: a fixed wait could end
    // before the first save.)
    let started = std::time::Instant::now();
    let mut saves = Vec::new();
    while saves.len() < 2 {
        let running = child.child.try_wait().unwrap().is_none();
        assert!(
            running,
            "the first backfill run stopped before saving progress twice"
        );
        let late = started.elapsed() >= Duration::from_secs(120);
        assert!(!late, "progress not saved twice within 120 s");
        if let Ok(text) = std::fs::read_to_string(&state) {
            if saves.last() != Some(&text) {
                saves.push(text);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.signal(libc::SIGKILL); // no chance to clean up
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let written_before = saved["report"]["written"].as_u64().unwrap();
    let deleted_before = saved["report"]["deleted_expired"].as_u64().unwrap();
    let halfway = written_before > 0 && written_before < needing as u64;
    assert!(halfway, "killed halfway: {written_before}");
    let positions = saved["positions"].as_array().unwrap();
    assert!(positions.iter().any(|p| p != "done"));

    // Without --resume it refuses to start over on top of the saved progress.
    let (code, _, stderr) = run(&mut backfill_cmd(&table, &state, ""));
    assert_eq!(code, 2);
    let refused = stderr.contains("--resume") && stderr.contains("interrupted");
    assert!(refused, "{stderr}");

    // Resume: finishes the job.
    let report = json_ok(&mut backfill_cmd(&table, &state, "--resume"));
    eprintln!("resumed backfill: {report}");
    let fields = format!(
        "complete=true no_ttl={EACH} invalid_ttl={} too_old_ttl=0 expired_kept=0",
        EACH * 2
    );
    report.assert_fields(&format!("{fields} changed_concurrently=0"));
    let written = report["written"].as_u64().unwrap();
    let grew = written <= needing as u64 && written >= written_before;
    assert!(grew, "{report}");
    // Items the killed run deleted after its last save are simply not there to count again.
    let deleted = report["deleted_expired"].as_u64().unwrap();
    assert!(
        deleted <= EACH as u64 * 5 && deleted >= deleted_before,
        "{report}"
    );
    // Every item with a usable numeric ttl has the right window; everything else is untouched.
    let usable = |_: &str, ttl: &str| ttl_sweeper::expiry::window::parse_ttl(ttl).is_ok();
    let windowed = assert_windows(&client, &table, usable).await;
    assert_eq!(windowed as i64, ITEMS - EACH * 8);
    let left = scan_all(&client, &table).await.len();
    assert_eq!(left as i64, ITEMS - EACH * 5, "expired items deleted");

    // Again, over the complete run's progress file (the weekly fix-up): a fresh run, which
    // replaces the file, with nothing left to write.
    let report = json_ok(&mut backfill_cmd(&table, &state, "--segments 3"));
    eprintln!("second backfill: {report}");
    let (ok, scanned) = (ITEMS - EACH * 8, ITEMS - EACH * 5);
    report.assert_fields(&format!(
        "written=0 deleted_expired=0 already_ok={ok} scanned={scanned}"
    ));
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(saved["positions"].as_array().unwrap().len(), 3, "replaced");
    assert_eq!(saved["report"], report);
    // --resume of a complete run: nothing to do, its summary, exit 0.
    let (code, resumed, stderr) = run_json(&mut backfill_cmd(&table, &state, "--resume"));
    assert_eq!((code, &resumed), (0, &report), "{stderr}");
    assert!(stderr.contains("already complete"), "{stderr}");
    let _ = std::fs::remove_file(&state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_never_overwrites_a_concurrent_change_or_recreates_a_deleted_item() {
    let (client, table) = simple_table("bf_race").await;
    let now = now();
    let items = vec![
        unwindowed("extended", now + 60),
        unwindowed("deleted", now + 60),
    ];
    put_items(&client, &table, items).await;
    let store = support::store(client.clone());
    let stale_window = Layout::default()
        .window_for((now + 60) as f64, &AV::S("extended".into()))
        .unwrap();

    // Between the scan (which saw ttl = now+60 and no window) and the update, the application
    // extends the ttl and writes the matching window; and deletes the other item.
    let new_ttl = now + 7200;
    extend_ttl(&client, &table, id_key("extended"), new_ttl).await;
    delete_one(&client, &table, "deleted").await;

    for id in ["extended", "deleted"] {
        let (ttl, window) = (num(now + 60), stale_window.clone());
        let schema = TableSchema {
            table_name: table.clone(),
            ..support::mem_store::default_schema()
        };
        let update = store.set_window_if_unchanged(&schema, id_key(id), ttl, None, window);
        assert_eq!(update.await.unwrap().0, UpdateOutcome::Changed, "{id}");
    }
    let items = scan_all(&client, &table).await;
    assert_eq!(items.len(), 1, "the deleted item stays deleted");
    let window = AV::S(window_key(new_ttl as f64, 60).unwrap());
    let stands = &items[0]["expirationWindow"];
    assert_eq!(*stands, window, "the application's write stands");
}

/// Five years and a day: a ttl this old is one native TTL never acts on.
const SIX_YEARS: i64 = 6 * 365 * 86_400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_deletes_items_long_expired_so_that_nothing_expired_is_left_after_a_sweep() {
    let (client, table) = simple_table("bf_expired").await;
    let now = now();
    let mut items: Vec<Key> = Vec::new();
    // Expired 1-2 h before the backfill: older than any window a sweep reads.
    items.extend((0..200).map(|i| unwindowed(&format!("expired-{i:03}"), now - 3600 - i * 18)));
    // Expired 2 h ago with the right window: a sweep does not read that window either.
    items.extend((0..10).map(|i| session(&format!("windowed-{i}"), now - 7200 - i)));
    // More than five years old: native TTL's rule keeps them, so does the backfill.
    items.extend((0..20).map(|i| unwindowed(&format!("ancient-{i:02}"), now - SIX_YEARS - i)));
    items.extend((0..50).map(|i| unwindowed(&format!("live-{i:02}"), now + 3600 + i)));
    items.extend((0..5).map(|i| bare(&format!("no-ttl-{i}"), None)));
    put_items(&client, &table, items).await;
    let state = fresh_state(&table, "");

    // A dry run counts what it would delete and deletes nothing.
    let report = json_ok(&mut backfill_cmd(&table, &state, "--dry-run"));
    report.assert_fields("deleted_expired=210 written=50");
    assert_eq!(scan_all(&client, &table).await.len(), 285);

    let report = json_ok(&mut backfill_cmd(&table, &state, "--max-wcu 400"));
    eprintln!("backfill: {report}");
    let fields = "scanned=285 deleted_expired=210 expired_kept=0 expired_gone=0 written=50";
    report.assert_fields(fields);
    report.assert_fields("already_ok=0 invalid_ttl=20 too_old_ttl=20 no_ttl=5");
    let consumed = report["consumed_wcu"].as_f64().unwrap();
    assert!(consumed >= 260.0, "{report}");

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
    let report = json_ok(cli(&table).args(["audit", "--max-problems", "20"]));
    let fields = "expired_present={} oldest_expired_age_seconds=0 invalid_ttl=20 too_old_ttl=20";
    report.assert_fields(&format!("{fields} missing_window=0"));
    let _ = std::fs::remove_file(&state);
}

/// `--index-only` writes windows and deletes nothing: the items already expired are counted and
/// left as they are. `--max-rcu` holds the scan to the read rate it names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_index_only_deletes_nothing_and_max_rcu_holds_the_scan_to_its_rate() {
    let (client, table) = simple_table("bf_index_only").await;
    let now = now();
    let mut items: Vec<Key> = Vec::new();
    items.extend((0..30).map(|i| unwindowed(&format!("expired-{i:02}"), now - 3600 - i)));
    items.extend((0..40).map(|i| unwindowed(&format!("live-{i:02}"), now + 3600 + i)));
    put_items(&client, &table, items).await;
    let state = fresh_state(&table, "");
    let args = "--index-only --segments 1 --page-size 5 --max-rcu 2";
    let started = std::time::Instant::now();
    let (code, report, stderr) = run_json(&mut backfill_cmd(&table, &state, args));
    let took = started.elapsed().as_secs_f64();
    assert_eq!(code, 0, "{stderr}");
    report.assert_fields("scanned=70 written=40 deleted_expired=0 expired_not_deleted=30");
    assert_eq!(scan_all(&client, &table).await.len(), 70, "nothing deleted");
    let windowed = |id: &str, _: &str| id.starts_with("live-");
    assert_eq!(assert_windows(&client, &table, windowed).await, 40);
    // The bucket holds 2 units at first, and the last page's units need no wait: the rest of
    // what the scan consumed took at least its time at 2 units a second.
    let consumed = report["consumed_rcu"].as_f64().unwrap();
    assert!(
        consumed >= 7.0,
        "14 pages, each at least half a unit: {report}"
    );
    let least = (consumed - 2.0 - 1.0) / 2.0;
    assert!(
        took >= least,
        "{took:.2} s for {consumed} read units at 2 a second"
    );
    let _ = std::fs::remove_file(&state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_deletes_an_expired_item_only_if_its_ttl_is_still_the_one_read() {
    use ConditionalOutcome::{Deleted, Gone, Kept};
    let (client, table) = simple_table("bf_del_race").await;
    let now = now();
    let read_ttl = now - 3600;
    let names = ["unchanged", "extended", "rewritten", "deleted"];
    let items = names.map(|id| unwindowed(id, read_ttl));
    put_items(&client, &table, items.into()).await;
    let store = support::store(client.clone());

    // Between the scan (which saw every ttl expired) and the delete, the application extends one
    // ttl, rewrites another item with a ttl that is also expired but not the one read, and
    // deletes a third.
    put_one(&client, &table, session("extended", now + 7200)).await;
    put_one(&client, &table, unwindowed("rewritten", now - 60)).await;
    delete_one(&client, &table, "deleted").await;

    let want = [Deleted, Kept, Kept, Gone];
    for (id, expected) in names.into_iter().zip(want) {
        let delete = store.delete_if_ttl_unchanged(&table, id_key(id), "ttl", num(read_ttl));
        let (outcome, consumed) = delete.await.unwrap();
        assert_eq!(outcome, expected, "{id}");
        assert!(consumed > 0.0, "{id}");
    }
    let left = ids(&client, &table).await;
    let why = "only the unchanged item is deleted; the deleted one stays deleted";
    assert_eq!(left, ["extended", "rewritten"], "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_finds_each_planted_problem_and_nothing_on_a_clean_table() {
    let client = client().await;
    let now = now();
    let clean = new_table(&client, "audit_clean", |_| {}).await;
    let mut good = sessions("ok", 200, |i| now + 60 + i);
    good.push(bare("no-ttl", None));
    put_items(&client, &clean, good).await;
    let report = json_ok(cli(&clean).args(["audit", "--segments", "2"]));
    let fields = "scanned=201 no_ttl=1 missing_window=0 wrong_window=0 millis_ttl=0 invalid_ttl=0";
    report.assert_fields(&format!(
        "{fields} oldest_expired_age_seconds=0 expired_present={{}}"
    ));

    let dirty = new_table(&client, "audit_dirty", |t| t.index = false).await;
    let wrong_window = window_key((now + 3600) as f64, 60).unwrap();
    let items = vec![
        session("fine", now + 60),
        session("expired-30s", now - 30),
        session("expired-10m", now - 600),
        session("expired-2h", now - 7200),
        unwindowed("missing-window", now + 60),
        windowed("wrong", now + 60, &wrong_window),
        unwindowed("millis", (now + 60) * 1000),
        string_ttl("string", now + 60),
    ];
    put_items(&client, &dirty, items).await;
    let (code, report, _) = run_json(cli(&dirty).args(["audit"]));
    let fails = code == 1;
    assert!(
        fails,
        "problems past the thresholds fail the audit: {report}"
    );
    let present = json!({"under_1m": 1, "5m_to_1h": 1, "1h_to_24h": 1});
    report.assert_fields(&format!("scanned=8 expired_present={present}"));
    let oldest = report["oldest_expired_age_seconds"].as_i64().unwrap();
    assert!((7200..7260).contains(&oldest), "{oldest}");
    let problems = [
        "missing_window",
        "wrong_window",
        "millis_ttl",
        "invalid_ttl",
    ];
    report.assert_fields(&problems.map(|p| format!("{p}=1")).join(" "));
    let examples: Vec<&Value> = report["examples"].as_array().unwrap().iter().collect();
    for p in problems {
        let example = examples.iter().any(|e| e["problem"] == p);
        assert!(example, "{p} has an example");
    }
    // Generous thresholds pass the same table.
    let generous = ["audit", "--max-expired-age", "3h", "--max-problems", "4"];
    assert_eq!(run_json(cli(&dirty).args(generous)).0, 0);
}

/// 30 items expiring 10 minutes after `now` (`live-00` …) and 5 with no ttl (`none-0` …).
fn live_and_untimed(now: i64) -> Vec<Key> {
    let live = (0..30).map(|i| unwindowed(&format!("live-{i:02}"), now + 600 + i));
    live.chain((0..5).map(|i| bare(&format!("none-{i}"), None)))
        .collect()
}

/// With an expiry index table, `backfill` writes every usable ttl's entry into it and nothing
/// into the table (an item already expired gets its entry in the current window, and the next
/// sweep deletes it); `audit` counts the items to come without an entry before, none after; and a
/// second run writes the same entries again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_with_an_expiry_index_table_writes_entries_only_and_audit_counts_the_missing() {
    use aws_sdk_dynamodb::types::StreamViewType;
    let (client, table, index) = indexed_table("bf_index", StreamViewType::NewImage).await;
    let now = now();
    let mut items = live_and_untimed(now);
    items.extend((0..10).map(|i| unwindowed(&format!("expired-{i}"), now - 3600 - i)));
    items.extend((0..5).map(|i| string_ttl(&format!("text-{i}"), now - 60)));
    items.push(unwindowed("ancient", 5));
    put_items(&client, &table, items.clone()).await;
    let before = items_by_id(&client, &table).await;

    let audit = |extra: &[&str]| {
        let mut cmd = cli(&table);
        cmd.env("EXPIRY_INDEX_TABLE", &index)
            .arg("audit")
            .args(extra);
        run_json(&mut cmd)
    };
    let (_, report, stderr) = audit(&[]);
    assert_eq!(report["missing_entry"], 30, "{report} {stderr}");

    let state = fresh_state(&table, "-index");
    let mut cmd = backfill_cmd(&table, &state, "--segments 2");
    cmd.env("EXPIRY_INDEX_TABLE", &index);
    let report = json_ok(&mut cmd);
    report.assert_fields("scanned=51 written=40 expired_indexed=10");
    report.assert_fields("deleted_expired=0 no_ttl=5 invalid_ttl=6");
    let after = items_by_id(&client, &table).await;
    assert_eq!(after, before, "the table is not written");
    let entries = scan_entries(&client, &index).await;
    assert_eq!(entries.len(), 40);

    let (code, report, stderr) = audit(&[]);
    assert_eq!(report["missing_entry"], 0, "{report} {stderr}");
    let fails = code == 1;
    assert!(
        fails,
        "the expired items still there fail the audit: {report}"
    );
    // A sample stops early and says so; by default (a sample of 100,000) and with --all this
    // table is read whole.
    let (_, report, _) = audit(&["--sample", "10", "--segments", "1"]);
    assert_eq!(report["sampled"], true, "{report}");
    let scanned = report["scanned"].as_u64().unwrap();
    assert!((10..51).contains(&scanned), "{report}");
    for whole in [&[][..], &["--all"][..]] {
        let (_, report, _) = audit(whole);
        assert_eq!(
            (report["sampled"].clone(), report["scanned"].clone()),
            (json!(false), json!(51))
        );
    }

    // A fresh run writes the same entries.
    let again = fresh_state(&table, "-index-again");
    let mut cmd = backfill_cmd(&table, &again, "");
    cmd.env("EXPIRY_INDEX_TABLE", &index);
    let _ = json_ok(&mut cmd);
    assert_eq!(scan_entries(&client, &index).await.len(), 40);
    let _ = (std::fs::remove_file(&state), std::fs::remove_file(&again));

    // A sweep through the index deletes the expired items, only them, and removes their entries.
    let config = config(&table, &[("EXPIRY_INDEX_TABLE", &index)]);
    let sweeper = sweeper_for(&config).await;
    let never = ttl_sweeper::engine::Stop::never();
    let report = sweeper.sweep(clock(), &never).await;
    report.assert_fields("items_deleted=10 index_entries_removed=10");
    let left = items_by_id(&client, &table).await;
    assert_eq!(left.len(), 41);
    assert!(left.keys().all(|id| !id.starts_with("expired-")));
    assert_eq!(scan_entries(&client, &index).await.len(), 30);
}

/// The README's verify step on a table swept through an expiry index table (writers set only the
/// ttl; step 5's back-fill wrote the entries): `audit --table-name <t> --expiry-index-table <i>`
/// passes; without `--expiry-index-table`, on a table with a stream and no GSI, audit refuses
/// (exit 2) naming the flag, where it once counted every live item as `missing_window` and exited
/// 1. (A table with neither is audited for its windows, as before adoption: the planted-problems
/// test above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verify_step_passes_on_a_table_swept_through_its_expiry_index_table() {
    use aws_sdk_dynamodb::types::StreamViewType;
    let (client, table, index) = indexed_table("verify", StreamViewType::NewAndOldImages).await;
    put_items(&client, &table, live_and_untimed(now())).await;
    let state = fresh_state(&table, "-verify");
    let mut cmd = index_cli("backfill", &table, &index);
    cmd.arg("--state").arg(&state);
    json_ok(&mut cmd).assert_fields("written=30");

    let report = json_ok(&mut index_cli("audit", &table, &index));
    report.assert_fields("missing_window=0 missing_entry=0");

    let (code, out, stderr) = run(local_cli().args(["audit", "--table-name", &table]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--expiry-index-table") && stderr.contains("has a stream and no global"),
        "{stderr}"
    );
    assert!(out.is_empty(), "no report: nothing was scanned");
    let _ = std::fs::remove_file(&state);
}

/// Runs `script` with bash as a user would, with the AWS CLI `make tools` installs in
/// `.tools/awscli` first on the PATH, against the local server (its endpoint and credentials, in an
/// environment otherwise cleared; the AWS CLI v1 takes its Region from AWS_DEFAULT_REGION, a
/// user's from the profile). Its standard output; a failure shows the script and its stderr.
fn aws_cli(script: &str) -> String {
    let aws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/awscli/bin");
    assert!(aws.join("aws").exists(), "the AWS CLI: `make tools`");
    let path = format!(
        "{}:{}",
        aws.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", script]).env_clear();
    cmd.envs(support::LOCAL_AWS_ENV.iter().copied());
    cmd.env("PATH", path).env("AWS_ENDPOINT_URL", endpoint());
    cmd.env("AWS_DEFAULT_REGION", "us-east-1");
    let (code, out, said) = run(&mut cmd);
    assert_eq!(code, 0, "{script}\n{said}");
    out
}

/// README step 7, "Watch one expire", run as written with the AWS CLI (`make tools` installs
/// it in `.tools/awscli`), against DynamoDB Local, the table's name aside: a sweeper deployed
/// as step 4 deploys it (`run --follow-stream`, ticks of 200 ms) deletes the item, so
/// `get-item` prints nothing. The same lines with no sweeper running print the item, so the
/// check can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_step_sees_an_item_written_5_s_ahead_gone_10_s_later() {
    use aws_sdk_dynamodb::types::StreamViewType;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block = between(&readme, "<!-- watch:begin", "<!-- watch:end -->").unwrap();
    let script = between(block, "```sh\n", "```").unwrap();
    let (_client, table, index) = indexed_table("watch", StreamViewType::NewAndOldImages).await;
    let script = script.replace("--table-name sessions", &format!("--table-name {table}"));
    // No sweeper: the item is still there (read back at once, not 10 s later).
    let unswept = aws_cli(&script.replace("sleep 10", "sleep 0"));
    assert!(unswept.contains("ttl-sweeper-check"), "{unswept}");

    let mut daemon = Daemon::run(&endpoint(), &format!("watch-{table}"), |cmd| {
        cmd.args(["--every", "200ms", "--follow-stream"]);
        cmd.args(["--table-name", &table, "--expiry-index-table", &index]);
    });
    // Following (from the stream's oldest record) before the item is written again, so that the
    // 10 s of the step are the sweeper's, not its start-up's.
    tokio::task::block_in_place(|| daemon.wait_for_log("following the table's stream"));
    let swept = tokio::task::block_in_place(|| aws_cli(&script));
    assert_eq!(swept.trim(), "", "get-item found the item");
    let running = daemon.child.try_wait().unwrap().is_none();
    assert!(running, "the sweeper exited:\n{}", daemon.log_text());
}

/// The text of `text` after `start` and before the next `end`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let to = text[from..].find(end)? + from;
    Some(&text[from..to])
}

/// The AWS CLI lines the README's step 1 gives (native TTL, the stream, the GSI) and those of
/// docs/upgrading.md's "Removing it" (native TTL, dropping the GSI, turning the stream off), run
/// as written with the AWS CLI against DynamoDB Local, the table's name aside; each one's effect
/// is read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_cli_lines_of_step_1_and_of_removing_it_run_as_written() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let client = client().await;
    let table = new_table(&client, "cli_lines", |t| t.index = false).await;
    let run = |script: &str| {
        aws_cli(&script.replace("--table-name sessions", &format!("--table-name {table}")))
    };
    let describe = || async {
        let out = client.describe_table().table_name(&table).send().await;
        out.unwrap().table.unwrap()
    };
    let ttl_on = || async {
        let ttl = client.describe_time_to_live().table_name(&table).send();
        let ttl = ttl.await.unwrap().time_to_live_description.unwrap();
        ttl.attribute_name().map(str::to_owned)
    };

    // Step 1: every ```sh block of it, in order.
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let step = between(&readme, "1. **Prepare the table**", "2. **Bootstrap**").unwrap();
    let blocks: Vec<&str> = step
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    assert_eq!(blocks.len(), 3, "native TTL, the stream, the GSI");
    for block in &blocks {
        run(block);
    }
    assert_eq!(ttl_on().await.as_deref(), Some("ttl"));
    let described = describe().await;
    let stream = described.stream_specification().map(|s| s.stream_enabled());
    assert_eq!(stream, Some(true));
    let indexes: Vec<&str> = (described.global_secondary_indexes())
        .iter()
        .filter_map(|i| i.index_name())
        .collect();
    assert_eq!(indexes, ["expirationWindowIndex"]);
    // Removing it comes long after step 1, when the GSI is built: DynamoDB (Local too) refuses
    // to drop an index still being created (`ResourceInUseException`).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let described = describe().await;
        let status = described.global_secondary_indexes()[0]
            .index_status()
            .cloned();
        if status == Some(aws_sdk_dynamodb::types::IndexStatus::Active) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the GSI is still {status:?} after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Removing it: the `aws dynamodb ...` spans of the section (line breaks are spaces), but
    // `delete-table`, which names no table there.
    let upgrading = std::fs::read_to_string(root.join("docs/upgrading.md")).unwrap();
    let section = upgrading.split("## Removing it").nth(1).unwrap();
    let section = section.split("\n## ").next().unwrap().replace('\n', " ");
    let lines: Vec<&str> = (section.split('`'))
        .filter(|s| s.starts_with("aws dynamodb ") && !s.contains("delete-table"))
        .collect();
    let [check, enable, drop_gsi, stream_off] = lines[..] else {
        panic!("the TTL check, turning it on, dropping the GSI, the stream off: {lines:?}");
    };
    // The check says what the section says it says; turning TTL on is step 1's line, which
    // fails on a table where it is on already (as the section warns).
    let said = run(check);
    assert!(said.contains("\"TimeToLiveStatus\": \"ENABLED\""), "{said}");
    assert!(said.contains("\"AttributeName\": \"ttl\""), "{said}");
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(words(enable), words(blocks[0]));
    for line in [drop_gsi, stream_off] {
        run(line);
    }
    let described = describe().await;
    let stream = described.stream_specification().map(|s| s.stream_enabled());
    assert_ne!(stream, Some(true), "the stream is off");
    let left = (described.global_secondary_indexes().iter())
        .filter(|i| {
            !matches!(
                i.index_status(),
                Some(aws_sdk_dynamodb::types::IndexStatus::Deleting)
            )
        })
        .count();
    assert_eq!(left, 0, "the GSI is gone");
    assert_eq!(ttl_on().await.as_deref(), Some("ttl"));
}
