//! `make demo`, the first of the README's two commands, run as the README gives it, against this
//! process's DynamoDB Local (`DYNAMODB_ENDPOINT`, which the recipe takes instead of starting one):
//! it starts its own moto for SQS, watches the expired items go and their expiry events arrive,
//! and ends with its result.

use std::process::Command;

use crate::support::{self, server::repo_root};

#[test]
fn make_demo_runs_as_the_readme_gives_it_and_ends_ok() {
    let endpoint = support::endpoint();
    let out = Command::new("make")
        .args(["--no-print-directory", "demo"])
        .env("DYNAMODB_ENDPOINT", &endpoint)
        .current_dir(repo_root())
        .output()
        .expect("run make");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let result = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("result "))
        .unwrap_or_default();
    assert!(
        out.status.success() && result.ends_with(": OK"),
        "make demo: {}\n{stdout}\n{stderr}",
        out.status
    );
    // What it shows a user: every expired item deleted, the packs left to native TTL.
    for shown in ["expired items deleted", "expiry index", "with `expires`"] {
        assert!(stdout.contains(shown), "no {shown:?} in:\n{stdout}");
    }
}
