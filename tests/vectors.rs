//! The language-neutral spec vectors (`spec/window-vectors.json`, produced by the independent
//! Python reference `scripts/window_reference.py`) against the library and the CLI.

use std::process::Command;

use crate::support::run;
use serde_json::Value;
use ttl_sweeper::expiry::window::{parse_ttl, window_attribute};

/// The list `section` of the spec file `spec/<file>`.
fn spec(file: &str, section: &str) -> Vec<Value> {
    let path = format!("{}/spec/{file}", env!("CARGO_MANIFEST_DIR"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc[section].as_array().unwrap().clone()
}

fn key_bytes(pk: &Value) -> Vec<u8> {
    use aws_sdk_dynamodb::types::AttributeValue;
    match ttl_sweeper::store::keys::attribute_from_json(pk).unwrap() {
        AttributeValue::B(b) => b.into_inner(),
        AttributeValue::S(s) | AttributeValue::N(s) => s.into_bytes(),
        other => panic!("{other:?} cannot be a key"),
    }
}

#[test]
fn library_matches_every_vector() {
    let vectors = spec("window-vectors.json", "vectors");
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
    for v in spec("window-vectors.json", "vectors") {
        let (code, printed, stderr) = run(Command::new(env!("CARGO_BIN_EXE_ttl-sweeper"))
            .env_clear()
            .args(["window", v["ttl"].as_str().unwrap()])
            .args(["--window-seconds", &v["window_seconds"].to_string()])
            .args(["--shards", &v["shards"].to_string()])
            .args(["--key", &v["partition_key"].to_string()]));
        assert_eq!(code, 0, "{v}: {stderr}");
        assert_eq!(printed.trim(), v["attribute"].as_str().unwrap(), "{v}");
    }
}

#[test]
fn library_matches_the_edge_case_windows() {
    use ttl_sweeper::expiry::TtlError;
    // spec/expiry-vectors.json: the edge cases the npm and PyPI helper packages are also held to.
    let vectors = spec("expiry-vectors.json", "windows");
    assert!(vectors.iter().any(|v| v.get("error").is_some()));
    for v in &vectors {
        let width = v["window_seconds"].as_u64().unwrap() as u32;
        let shards = v["shards"].as_u64().unwrap() as u32;
        let got = parse_ttl(v["ttl"].as_str().unwrap())
            .and_then(|ttl| window_attribute(ttl, width, shards, &key_bytes(&v["partition_key"])));
        match (v["error"].as_str(), got) {
            (None, Ok(attribute)) => assert_eq!(attribute, v["attribute"].as_str().unwrap(), "{v}"),
            (Some("not a number"), Err(TtlError::NotANumber(_)))
            | (Some("negative"), Err(TtlError::Negative(_)))
            | (Some("milliseconds"), Err(TtlError::LooksLikeMilliseconds(_))) => {}
            (want, got) => panic!("{v}: expected {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn expiry_check_matches_the_vectors() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use std::collections::HashMap;
    let cases = spec("expiry-vectors.json", "is_expired");
    assert!(
        cases.iter().any(|c| c["expected"] == true) && cases.iter().any(|c| c["expected"] == false)
    );
    for c in &cases {
        let mut item = HashMap::from([("id".to_string(), AttributeValue::S("a".into()))]);
        if let Some(ttl) = c["ttl"].as_object() {
            let value = match ttl.iter().next().unwrap() {
                (kind, Value::String(text)) if kind == "N" => AttributeValue::N(text.clone()),
                (kind, Value::String(text)) if kind == "S" => AttributeValue::S(text.clone()),
                (kind, Value::Bool(true)) if kind == "NULL" => AttributeValue::Null(true),
                other => panic!("unexpected ttl value {other:?}"),
            };
            item.insert("ttl".into(), value);
        }
        let expired = ttl_sweeper::expiry::is_expired(&item, "ttl", c["now"].as_i64().unwrap());
        assert_eq!(expired, c["expected"].as_bool().unwrap(), "{}", c["name"]);
    }
}
