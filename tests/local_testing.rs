//! docs/local-testing.md, run as a user's suite runs it: the Rust fixture here, the Jest and
//! pytest fixtures by their own runners (installed by `make test`), each against the shared
//! DynamoDB Local with the `ttl-sweeper` binary, each suite timed (`make local-testing` prints
//! the times the page quotes); the compose service's command as written; and the page's copies of
//! the fixture files equal to the files (`UPDATE_DOCS=1` rewrites them).

// `LocalTtl::start` finds the binary through TTL_SWEEPER or PATH; the tests name it.
#[allow(dead_code)]
#[path = "../examples/local-testing/rust/local_ttl.rs"]
mod local_ttl;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue as AV;
use aws_sdk_dynamodb::Client;

use crate::support::server::repo_root;
use crate::support::*;
use local_ttl::LocalTtl;

const PAGE: &str = "docs/local-testing.md";
const BIN: &str = env!("CARGO_BIN_EXE_ttl-sweeper");

/// Polls every 100 ms until item `id` is gone from `table` or `secs` passed: whether it went.
async fn gone_within(client: &Client, table: &str, id: &str, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while exists(client, table, id).await && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    !exists(client, table, id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_fixture_expires_items_on_time_and_moves_the_clock_forward() {
    let started = Instant::now();
    let client = client().await;
    let table = table_name("local-ttl-rust");
    // Started before the table exists, as a suite's fixture may be: the sweeper waits for it.
    let ttl = LocalTtl::start_with(BIN, &endpoint(), &table).unwrap();
    create_table(&client, &TableSpec::simple(&table)).await;

    put_one(&client, &table, unwindowed("soon", now() + 1)).await;
    assert!(exists(&client, &table, "soon").await);
    let gone = gone_within(&client, &table, "soon", 10).await;
    assert!(gone, "not swept in 10 s");

    let start = now();
    put_one(&client, &table, unwindowed("in-an-hour", start + 3600)).await;
    put_one(&client, &table, unwindowed("tomorrow", start + 86_400)).await;
    let moved = tokio::task::spawn_blocking(move || ttl.expire_as_of(start + 3601).map(|_| ttl));
    let _ttl = moved.await.unwrap().unwrap();
    assert!(!exists(&client, &table, "in-an-hour").await);
    assert!(exists(&client, &table, "tomorrow").await);
    println!(
        "local testing: rust suite: 2 tests in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Runs `program args` in `dir` against the test server, as a user's suite runs; prints its time.
/// Its output goes to files, not pipes (a sweeper a failed suite left running would hold a pipe
/// open), and it is killed past [`SUITE_LIMIT`].
fn run_suite(name: &str, dir: &Path, program: &Path, args: &[&str]) {
    assert!(
        program.exists(),
        "{} is not installed: `make local-testing-tools` (part of `make test`) installs it",
        program.display()
    );
    let logs = std::env::temp_dir().join(format!("local-testing-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&logs).unwrap();
    let file = |n: &str| std::fs::File::create(logs.join(n)).unwrap();
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("DYNAMODB_ENDPOINT", endpoint())
        .env("TTL_SWEEPER", BIN)
        .stdin(std::process::Stdio::null())
        .stdout(file("stdout"))
        .stderr(file("stderr"))
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > SUITE_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = started.elapsed().as_secs_f64();
    let said = |n: &str| std::fs::read_to_string(logs.join(n)).unwrap_or_default();
    let (stdout, stderr) = (said("stdout"), said("stderr"));
    let _ = std::fs::remove_dir_all(&logs);
    let Some(status) = status else {
        panic!("{name}: still running after {SUITE_LIMIT:?}\n{stdout}\n{stderr}");
    };
    assert!(status.success(), "{name}: {status}\n{stdout}\n{stderr}");
    println!("local testing: {name} suite: 2 tests in {elapsed:.1} s");
}

/// The longest a fixture's suite may take (it takes about 2 s).
const SUITE_LIMIT: Duration = Duration::from_secs(120);

#[test]
fn the_jest_fixture_runs() {
    let dir = repo_root().join("examples/local-testing/jest");
    let jest = dir.join("node_modules/.bin/jest");
    run_suite("jest", &dir, &jest, &["--ci"]);
}

#[test]
fn the_pytest_fixture_runs() {
    let dir = repo_root().join("examples/local-testing/pytest");
    let pytest = repo_root().join(".venv/bin/pytest");
    run_suite("pytest", &dir, &pytest, &["-q", "-p", "no:cacheprovider"]);
}

/// The `ttl-sweeper` service of the page's compose file, its command and environment as
/// written (the endpoint aside: `dynamodb` is the compose network's name for the server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_service_s_command_sweeps_as_written() {
    let page = std::fs::read_to_string(repo_root().join(PAGE)).unwrap();
    let compose = fenced_after(&page, "<!-- compose -->").expect("the page's compose file");
    let service = compose
        .split("\n  ttl-sweeper:\n")
        .nth(1)
        .expect("a ttl-sweeper service");
    let list = |key: &str| -> Vec<String> {
        let line = (service.lines())
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in the service"));
        let items = line.trim().trim_start_matches('[').trim_end_matches(']');
        items
            .split(',')
            .map(|s| s.trim().trim_matches('"').to_owned())
            .collect()
    };
    let command = list("command:");
    let table = command
        .iter()
        .skip_while(|a| *a != "--table-name")
        .nth(1)
        .expect("--table-name")
        .clone();
    let mut env = Vec::new();
    let mut in_env = false;
    for line in service.lines() {
        let line = line.trim_end();
        if line.trim() == "environment:" {
            in_env = true;
        } else if in_env && line.starts_with("      ") {
            let (k, v) = line.trim().split_once(": ").unwrap();
            env.push((k.to_owned(), v.trim_matches('"').to_owned()));
        } else {
            in_env = false;
        }
    }
    let endpoint_is =
        |(k, v): &(String, String)| k == "AWS_ENDPOINT_URL" && v == "http://dynamodb:8000";
    assert!(env.iter().any(endpoint_is), "{env:?}");
    let env = env.into_iter().filter(|(k, _)| k != "AWS_ENDPOINT_URL");

    // A table of its own with the service's name would collide across runs: the same command,
    // its table name made unique.
    let unique = table_name(&table);
    let client = client().await;
    let mut run = Command::new(BIN);
    run.env_clear()
        .envs(env)
        .env("AWS_ENDPOINT_URL", endpoint());
    let args = command
        .iter()
        .map(|a| if *a == table { &unique } else { a });
    let mut service = Daemon::spawn(run.args(args), &format!("compose-{unique}"));
    create_table(&client, &TableSpec::simple(&unique)).await;
    put_one(&client, &unique, unwindowed("expired", now() - 1)).await;
    assert!(gone_within(&client, &unique, "expired", 10).await);
    let running = service.child.try_wait().unwrap().is_none();
    assert!(running, "the service exited:\n{}", service.log_text());
}

/// The fenced block that follows `marker` in `markdown`, without its fences.
fn fenced_after<'a>(markdown: &'a str, marker: &str) -> Option<&'a str> {
    let after = &markdown[markdown.find(marker)? + marker.len()..];
    let open = after.find("```")?;
    let body = &after[open..];
    let start = body.find('\n')? + 1;
    let end = body[start..].find("\n```")? + start + 1;
    Some(&body[start..end])
}

/// The page's copy of each fixture file (the block after `<!-- file: <path> -->`) is the file.
#[test]
fn the_page_s_fixtures_are_the_files_run() {
    let path = repo_root().join(PAGE);
    let page = std::fs::read_to_string(&path).unwrap();
    let (mut updated, mut stale, mut copies) = (String::new(), Vec::new(), 0);
    let mut rest = page.as_str();
    while let Some(at) = rest.find("<!-- file: ") {
        let (before, mark) = rest.split_at(at);
        let file = mark["<!-- file: ".len()..].split(" -->").next().unwrap();
        let open = mark.find("```").unwrap();
        let start = open + mark[open..].find('\n').unwrap() + 1;
        let end = start + mark[start..].find("\n```").unwrap() + 1;
        let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
        if mark[start..end] != text {
            stale.push(file.to_owned());
        }
        updated.push_str(before);
        updated.push_str(&mark[..start]);
        updated.push_str(&text);
        rest = &mark[end..];
        copies += 1;
    }
    updated.push_str(rest);
    assert!(copies >= 5, "the page copies the fixture files");
    if std::env::var("UPDATE_DOCS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        stale.is_empty(),
        "{PAGE} copies these files differently (UPDATE_DOCS=1 cargo test --test suite \
         local_testing:: rewrites them): {stale:?}"
    );
}

/// `run --local` rides out what a suite's server does to it: DescribeTable failing with 500s
/// (past the SDK's own retries) is logged and tried again at the next tick, not the end of the
/// run; a table dropped and created again with another key is opened again, proved local again
/// and swept with its new key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_local_rides_out_a_failing_server_and_a_table_created_again() {
    use crate::support::fault_proxy::{Fault, FaultProxy, Plan};
    use aws_sdk_dynamodb::types::ScalarAttributeType;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let failed = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = failed.clone();
    let plan = Plan::script(move |op, _| {
        let fail = op == "DescribeTable" && counter.fetch_add(1, SeqCst) < 8;
        fail.then_some(Fault::Status(500))
    });
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(2), plan).await;
    let client = client().await;
    let table = table_name("local-ttl-again");
    create_table(&client, &TableSpec::simple(&table)).await;
    put_one(&client, &table, unwindowed("expired", now() - 1)).await;

    let name = format!("run-local-{table}");
    let mut run = Daemon::run(&proxy.endpoint, &name, |cmd| {
        cmd.args(["--local", "--every", "200ms", "--table-name", &table]);
    });
    let gone = gone_within(&client, &table, "expired", 15).await;
    assert!(gone, "not swept after the 500s");
    assert!(failed.load(SeqCst) >= 8, "the 500s were sent");

    // Dropped and created again with a sort key: swept with it.
    drop_table(&client, &table).await;
    let mut spec = TableSpec::simple(&table);
    spec.sort = Some(("sk", ScalarAttributeType::S));
    create_table(&client, &spec).await;
    let item = client
        .put_item()
        .table_name(&table)
        .item("id", AV::S("again".into()));
    let item = item
        .item("sk", AV::S("a".into()))
        .item("ttl", AV::N((now() - 1).to_string()));
    item.send().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let left = || async {
        let get = client.get_item().table_name(&table).consistent_read(true);
        let get = get
            .key("id", AV::S("again".into()))
            .key("sk", AV::S("a".into()));
        get.send().await.unwrap().item.is_some()
    };
    while left().await && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!left().await, "the table created again was not swept");
    let log = run.log_text();
    let running = run.child.try_wait().unwrap().is_none();
    assert!(running, "the run ended:\n{log}");
    let retried = log.contains("sweep failed; tried again at the next tick");
    assert!(retried, "{log}");
}
