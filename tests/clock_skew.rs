//! A host clock running fast must not delete items early: the CLI under libfaketime (`faketime`,
//! installed by `make tools`) with the clock two minutes ahead, against DynamoDB Local, whose
//! answers carry the real time in their `Date` header.

use crate::support;

use std::process::Command;

use support::*;

/// `ttl-sweeper` on the test server under `faketime -f +<ahead>s`: the wall clock is faked, the
/// monotonic clock is left alone (tokio's timers keep working).
fn fast_clock_cli(ahead_secs: u32) -> Command {
    let faketime = ["/usr/bin/faketime", "/usr/local/bin/faketime"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("faketime is not installed: `make tools` installs it (Debian package faketime)");
    let mut cmd = Command::new(faketime);
    cmd.env_clear()
        .envs(LOCAL_AWS_ENV)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_ENDPOINT_URL", endpoint())
        .arg("-f")
        .arg(format!("+{ahead_secs}s"))
        .arg(env!("CARGO_BIN_EXE_ttl-sweeper"));
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_clock_two_minutes_fast_deletes_nothing_early() {
    let (client, table) = simple_table("fast_clock").await;
    let now = now();
    // 60 items with 30 to 90 s to live, and 10 that expired a minute ago.
    let mut items = sessions("live", 60, |i| now + 30 + i);
    items.extend(sessions("expired", 10, |i| now - 60 - i));
    put_items(&client, &table, items).await;

    // The fake clock really is ahead: `date` under the same wrapper.
    let mut date = fast_clock_cli(120);
    date.args(["--version"]);
    let (code, _, _) = run(&mut date);
    assert_eq!(code, 0, "faketime could not run ttl-sweeper");

    let mut cmd = fast_clock_cli(120);
    cmd.args(["sweep", "--table-name", &table]);
    let (code, stdout, stderr) = run(&mut cmd);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect(&stdout);
    let left = ids(&client, &table).await;
    let live_left = left.iter().filter(|id| id.starts_with("live-")).count();
    assert_eq!(live_left, 60, "items deleted before their ttl: {report}");
    let none_expired = !left.iter().any(|id| id.starts_with("expired-"));
    assert!(none_expired, "{left:?}");
    assert_eq!(removed_json(&report), 10, "{report}");
    // The report and the log say how far the host clock was ahead.
    let ahead = report["clock_ahead_ms"].as_u64().unwrap();
    assert!((115_000..=125_000).contains(&ahead), "{report}");
    assert!(stderr.contains("ahead of DynamoDB"), "{stderr}");

    // A future --at is refused, and no flag lets a sweep run ahead of the clock.
    let at = chrono::DateTime::from_timestamp(now + 200, 0)
        .unwrap()
        .to_rfc3339();
    for extra in [None, Some("--allow-future")] {
        let mut cmd = fast_clock_cli(120);
        cmd.args(["sweep", "--table-name", &table, "--at", &at])
            .args(extra);
        let (code, _, stderr) = run(&mut cmd);
        assert_eq!(code, 2, "a future --at is refused: {stderr}");
        let refused = ["is in the future", "unexpected argument '--allow-future'"];
        assert!(
            stderr.contains(refused[usize::from(extra.is_some())]),
            "{stderr}"
        );
    }
    assert_eq!(ids(&client, &table).await.len(), 60);
}
