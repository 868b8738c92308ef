//! `is_expiry_removal` three times — the library's, and the Python and TypeScript snippets of
//! docs/events.md as printed there — against the same DynamoDB Streams records,
//! `spec/expiry-removal-vectors.json`.
//!
//! The Python snippet runs under `python3`; the TypeScript one is compiled by `tsc --strict`
//! (infra/node_modules, installed by `make test`; `TSC` names another) and run under `node`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::server::repo_root as root;
use aws_lambda_events::dynamodb::EventRecord;
use serde_json::Value;
use ttl_sweeper::streams::is_expiry_removal;

/// The vectors' file.
const VECTORS: &str = "spec/expiry-removal-vectors.json";

fn vectors() -> Vec<Value> {
    let text = std::fs::read_to_string(root().join(VECTORS)).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let vectors = doc["vectors"].as_array().unwrap().clone();
    assert!(vectors.len() >= 20);
    // Both answers occur: the vectors can tell a function that always says one thing.
    assert!(vectors.iter().any(|v| v["expected"] == true));
    assert!(vectors.iter().any(|v| v["expected"] == false));
    vectors
}

/// The first fenced block in `language` under the docs' Streams section.
fn snippet(language: &str) -> String {
    let doc = std::fs::read_to_string(root().join("docs/events.md")).unwrap();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Telling expiries from deletes in DynamoDB Streams"))
        .expect("docs/events.md has the Streams section");
    let fence = format!("```{language}\n");
    let block = section.split_once(&fence).map(|(_, rest)| rest);
    let block = block.unwrap_or_else(|| panic!("no {language} block in the Streams section"));
    block[..block.find("```").unwrap()].to_owned()
}

/// Compares a snippet's answers with the vectors' expectations.
fn check(answers: &str, who: &str) {
    let vectors = vectors();
    let answers: Vec<bool> = serde_json::from_str(answers.trim())
        .unwrap_or_else(|e| panic!("{who} printed {answers:?}: {e}"));
    assert_eq!(answers.len(), vectors.len(), "{who}");
    let wrong: Vec<String> = vectors
        .iter()
        .zip(&answers)
        .filter(|(v, got)| v["expected"].as_bool() != Some(**got))
        .map(|(v, got)| format!("{} (said {got})", v["name"]))
        .collect();
    assert!(wrong.is_empty(), "{who} disagrees on: {wrong:#?}");
}

fn work_dir(name: &str) -> PathBuf {
    let dir = root().join("target/tmp/stream-snippets").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output();
    let out = out.unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed: {stdout}\n{stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// Writes `code` to `file` and runs it with `program`, the vectors' file its argument: what it
/// printed.
fn run_on_vectors(program: &str, file: &Path, code: &str) -> String {
    std::fs::write(file, code).unwrap();
    run(
        Command::new(program).arg(file).arg(root().join(VECTORS)),
        program,
    )
}

#[test]
fn the_library_agrees_with_every_vector() {
    let answers: Vec<bool> = vectors()
        .iter()
        .map(|v| {
            let record: EventRecord = serde_json::from_value(v["record"].clone())
                .unwrap_or_else(|e| panic!("{}: {e}", v["name"]));
            is_expiry_removal(&record, v["ttl_attribute"].as_str().unwrap())
        })
        .collect();
    check(&serde_json::to_string(&answers).unwrap(), "the library");
}

#[test]
fn the_python_snippet_agrees_with_every_vector() {
    let script = format!(
        "{}\n\nimport json, sys\nvectors = json.load(open(sys.argv[1]))[\"vectors\"]\n\
         print(json.dumps([is_expiry_removal(v[\"record\"], v[\"ttl_attribute\"]) \
         for v in vectors]))\n",
        snippet("python")
    );
    let out = run_on_vectors("python3", &work_dir("python").join("check.py"), &script);
    check(&out, "the Python snippet");
}

fn tsc() -> PathBuf {
    if let Ok(tsc) = std::env::var("TSC") {
        return PathBuf::from(tsc);
    }
    let tsc = root().join("infra/node_modules/typescript/bin/tsc");
    assert!(
        tsc.exists(),
        "TypeScript is not installed ({}): run `make test` (or `cd infra && npm ci`), or set TSC",
        tsc.display()
    );
    tsc
}

#[test]
fn the_typescript_snippet_type_checks_and_agrees_with_every_vector() {
    let dir = work_dir("typescript");
    let source = dir.join("snippet.ts");
    std::fs::write(&source, snippet("typescript")).unwrap();
    let out_dir = dir.join("out");
    let _ = std::fs::remove_dir_all(&out_dir);
    run(
        Command::new("node").arg(tsc()).args([
            "--strict",
            "--noUnusedLocals",
            "--target",
            "es2022",
            "--module",
            "commonjs",
            "--outDir",
            out_dir.to_str().unwrap(),
            source.to_str().unwrap(),
        ]),
        "tsc",
    );
    let harness = "const { isExpiryRemoval } = require('./out/snippet.js');\n\
         const vectors = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8')).vectors;\n\
         console.log(JSON.stringify(vectors.map(v => isExpiryRemoval(v.record, v.ttl_attribute))));\n";
    let out = run_on_vectors("node", &dir.join("check.cjs"), harness);
    check(&out, "the TypeScript snippet");
}

/// The snippets' reader finds what it should, so the checks above test the printed code.
#[test]
fn the_snippets_are_the_ones_in_the_docs() {
    assert!(snippet("python").contains("def is_expiry_removal("));
    assert!(snippet("typescript").contains("export function isExpiryRemoval("));
    assert!(root().join(VECTORS).exists());
}
