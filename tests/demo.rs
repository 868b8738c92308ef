//! `make demo`, the first of the README's two commands, run as the README gives it, against this
//! process's DynamoDB Local (`DYNAMODB_ENDPOINT`, which the recipe takes instead of starting one):
//! it starts its own moto for SQS, watches the expired items go and their expiry events arrive,
//! and ends with its result.

use std::process::Command;

use crate::support::{self, server::repo_root};

#[test]
fn make_demo_runs_as_the_readme_gives_it_and_ends_ok() {
    let (code, stdout, stderr) = support::run(
        Command::new("make")
            .args(["--no-print-directory", "demo"])
            .env("DYNAMODB_ENDPOINT", support::endpoint())
            .current_dir(repo_root()),
    );
    let result = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("result "))
        .unwrap_or_default();
    let ok = code == 0 && result.ends_with(": OK");
    assert!(ok, "make demo: exit {code}\n{stdout}\n{stderr}");
    // What it shows a user: every expired item deleted, the packs left to native TTL.
    for shown in ["expired items deleted", "expiry index", "with `expires`"] {
        assert!(stdout.contains(shown), "no {shown:?} in:\n{stdout}");
    }
}
