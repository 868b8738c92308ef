//! The language-neutral spec vectors (`spec/window-vectors.json`, produced by the independent
//! Python reference `scripts/window_reference.py`) against the library and the CLI.

use std::process::Command;

use base64::Engine as _;
use serde_json::Value;
use ttl_sweeper::expiry::window::{parse_ttl, window_attribute};

fn vectors() -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/spec/window-vectors.json"
    ))
    .unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["vectors"].as_array().unwrap().clone()
}

fn key_bytes(pk: &Value) -> Vec<u8> {
    let (kind, value) = pk.as_object().unwrap().iter().next().unwrap();
    let value = value.as_str().unwrap();
    match kind.as_str() {
        "B" => base64::engine::general_purpose::STANDARD
            .decode(value)
            .unwrap(),
        _ => value.as_bytes().to_vec(),
    }
}

#[test]
fn library_matches_every_vector() {
    let vectors = vectors();
    assert!(vectors.len() >= 10);
    for v in &vectors {
        let ttl = parse_ttl(v["ttl"].as_str().unwrap()).unwrap();
        let width = v["window_seconds"].as_u64().unwrap() as u32;
        let shards = v["shards"].as_u64().unwrap() as u32;
        let got = window_attribute(ttl, width, shards, &key_bytes(&v["partition_key"])).unwrap();
        assert_eq!(got, v["attribute"].as_str().unwrap(), "{v}");
    }
}

#[test]
fn cli_matches_every_vector() {
    for v in vectors() {
        let out = Command::new(env!("CARGO_BIN_EXE_ttl-sweeper"))
            .env_clear()
            .args(["window", v["ttl"].as_str().unwrap()])
            .args(["--window-seconds", &v["window_seconds"].to_string()])
            .args(["--shards", &v["shards"].to_string()])
            .args(["--key", &v["partition_key"].to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{v}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8(out.stdout).unwrap().trim(),
            v["attribute"].as_str().unwrap(),
            "{v}"
        );
    }
}
