//! Differential tests of the fast path (`direct`) against the AWS SDK's request pipeline, on
//! DynamoDB's own wire format:
//!
//! - **responses**: every `Query` and `Scan` page and every error answer in
//!   `tests/fixtures/wire/` — recorded from DynamoDB, or written down by the AWS SDK for Rust
//!   (smithy-rs), Smithy's awsJson1_0 protocol tests and botocore's JSON protocol tests; each case
//!   names its repository, file, commit and case — is parsed by both routes, which must agree
//!   (items, `LastEvaluatedKey`, error type, request id, retry classification) and match what the
//!   source says it should parse to;
//! - **requests**: for the same inputs, the `Query` and `BatchWriteItem` each route sends are the
//!   same JSON, sign the same headers (besides the SDK's own telemetry headers), and carry a
//!   signature that an independent SigV4 computation verifies;
//! - a property test: a page of arbitrary attribute values parses the same on both routes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use aws_smithy_http_client::test_util::infallible_client_fn;
use aws_smithy_runtime_api::http::Headers;
use aws_smithy_types::body::SdkBody;
use proptest::prelude::*;
use serde_json::Value;

use super::direct::{error_from_response, query_page};
use super::{DynamoStore, ErrorKind, FastPath, Key, StoreError, StoreExt, TableSchema};
use crate::expiry::{Layout, Timestamp};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/wire");
const FILES: [&str; 4] = [
    "smithy-rs-dynamodb.json",
    "smithy-rs-json-errors.json",
    "smithy-awsjson1_0.json",
    "botocore-json.json",
];
const ACCESS_KEY: &str = "AKIDEXAMPLE";
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const SESSION_TOKEN: &str = "session-token-example";

/// An answer: status, headers, body.
type Answer = (Option<u16>, Vec<(String, String)>, Vec<u8>);

/// One sample of a fixture file.
struct Case {
    file: &'static str,
    json: Value,
}

impl Case {
    /// Where the sample comes from: repository, file, commit and case.
    fn source(&self) -> String {
        let s = &self.json["source"];
        format!(
            "{} ({} {}@{}: {})",
            self.file,
            s["repo"].as_str().unwrap_or("?"),
            s["path"].as_str().unwrap_or("?"),
            &s["commit"].as_str().unwrap_or("?")
                [..12.min(s["commit"].as_str().unwrap_or("?").len())],
            s["case"].as_str().unwrap_or("?")
        )
    }

    fn kind(&self) -> &str {
        self.json["kind"].as_str().unwrap_or("")
    }

    fn operation(&self) -> Option<&str> {
        self.json["operation"].as_str()
    }

    /// The answer: status (`None` when the source feeds a body without any HTTP response),
    /// headers and body (empty when the source gives none).
    fn response(&self) -> Option<Answer> {
        let r = self.json.get("response")?;
        let status = r["status"].as_u64().map(|s| s as u16);
        let headers = r["headers"]
            .as_object()
            .map(|h| {
                h.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let body = r["body"].as_str().unwrap_or("").as_bytes().to_vec();
        Some((status, headers, body))
    }
}

fn cases() -> Vec<Case> {
    FILES
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(format!("{FIXTURES}/{file}")).unwrap();
            let all: Vec<Value> = serde_json::from_str(&text).unwrap();
            all.into_iter().map(|json| Case { file, json })
        })
        .collect()
}

fn headers(pairs: &[(String, String)]) -> Headers {
    let mut out = Headers::new();
    for (k, v) in pairs {
        out.insert(k.to_ascii_lowercase(), v.clone());
    }
    out
}

fn config(
    http: aws_smithy_runtime_api::client::http::SharedHttpClient,
) -> aws_sdk_dynamodb::Config {
    aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            ACCESS_KEY,
            SECRET_KEY,
            Some(SESSION_TOKEN.into()),
            None,
            "wire-tests",
        ))
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .http_client(http)
        .build()
}

/// A client whose every request is answered with `status`, `headers` and `body`.
fn replaying(status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> Client {
    let http = infallible_client_fn(move |_| {
        let mut r = http::Response::builder().status(status);
        for (k, v) in &headers {
            r = r.header(k.as_str(), v.as_str());
        }
        r.body(SdkBody::from(body.clone())).unwrap()
    });
    Client::from_conf(config(http))
}

/// A page, as both routes hand it to the engine.
type Parsed = Result<(Vec<Key>, Option<Key>), StoreError>;

/// The SDK's reading of a `Query` answer (a `Scan` page has the same shape).
async fn sdk_page(status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> Parsed {
    replaying(status, headers, body)
        .query()
        .table_name("t")
        .send()
        .await
        .map(|o| {
            (
                o.items.unwrap_or_default(),
                o.last_evaluated_key.filter(|k| !k.is_empty()),
            )
        })
        .map_err(|e| StoreError::from_sdk("Query", e))
}

/// The fast path's reading of the same answer.
fn fast_page(status: u16, headers: &[(String, String)], body: &[u8]) -> Parsed {
    if status != 200 {
        return Err(error_from_response(
            "Query",
            status,
            &self::headers(headers),
            body,
        ));
    }
    query_page(body).map(|p| (p.items, p.next))
}

fn same(sdk: &Parsed, fast: &Parsed) -> Result<(), String> {
    match (sdk, fast) {
        (Ok(a), Ok(b)) if a == b => Ok(()),
        (Err(a), Err(b))
            if a.kind == b.kind && a.code == b.code && a.request_id == b.request_id =>
        {
            Ok(())
        }
        _ => Err(format!("SDK: {sdk:?}\nfast path: {fast:?}")),
    }
}

#[tokio::test]
async fn query_and_scan_pages_parse_alike_on_both_routes_and_as_their_sources_say() {
    let mut checked = 0;
    for case in cases() {
        let (Some("Query" | "Scan"), "response") = (case.operation(), case.kind()) else {
            continue;
        };
        let (Some(status), headers, body) = case.response().unwrap() else {
            continue;
        };
        let sdk = sdk_page(status, headers.clone(), body.clone()).await;
        let fast = fast_page(status, &headers, &body);
        same(&sdk, &fast).unwrap_or_else(|e| panic!("{}:\n{e}", case.source()));
        let (items, next) = fast.unwrap_or_else(|e| panic!("{}: {e}", case.source()));
        let expect = &case.json["expect"];
        if let Some(count) = expect["Count"].as_u64() {
            assert_eq!(items.len() as u64, count, "{}", case.source());
        }
        if let Some(want) = expect.get("Items").filter(|v| v.is_array()) {
            let want: Vec<Key> = want
                .as_array()
                .unwrap()
                .iter()
                .map(|i| super::keys::key_from_json(i).expect("an item"))
                .collect();
            assert_eq!(items, want, "{}", case.source());
        }
        if let Some(want) = expect.get("LastEvaluatedKey") {
            assert_eq!(
                next,
                super::keys::key_from_json(want).filter(|k| !k.is_empty()),
                "{}",
                case.source()
            );
        }
        checked += 1;
    }
    assert!(checked >= 9, "{checked} pages checked");
}

trait ErrOf {
    fn unwrap_err_or_else(self, case: &Case) -> StoreError;
}

impl ErrOf for Parsed {
    fn unwrap_err_or_else(self, case: &Case) -> StoreError {
        match self {
            Err(e) => e,
            Ok(page) => panic!(
                "{}: an error answer read as a page: {page:?}",
                case.source()
            ),
        }
    }
}

/// Cases whose expected error type is not DynamoDB's: the query-compatible ones, whose
/// expectation is the `x-amzn-query-error` code, a convention DynamoDB does not use. Both routes
/// still read them alike.
fn not_dynamodbs(case: &Case) -> bool {
    let query_error = case.json["response"]["headers"]
        .as_object()
        .is_some_and(|h| {
            h.keys()
                .any(|k| k.eq_ignore_ascii_case("x-amzn-query-error"))
        });
    query_error
        || case.json["source"]["path"]
            .as_str()
            .is_some_and(|p| p.contains("query-compatible"))
}

#[tokio::test]
async fn error_answers_parse_alike_on_both_routes_and_as_their_sources_say() {
    let mut checked = 0;
    let mut against_source = 0;
    for case in cases() {
        if case.kind() != "error" {
            continue;
        }
        let Some((status, headers, body)) = case.response() else {
            continue;
        };
        // A source that feeds the body straight to its error parser gives no status, or a
        // nominal 200 (DynamoDB answers errors with 4xx and 5xx): both routes read it as a 400.
        let status = status.filter(|s| *s >= 300).unwrap_or(400);
        let fast = fast_page(status, &headers, &body);
        let sdk = sdk_page(status, headers.clone(), body.clone()).await;
        same(&sdk, &fast).unwrap_or_else(|e| panic!("{}:\n{e}", case.source()));
        checked += 1;
        let err = fast.unwrap_err_or_else(&case);
        if not_dynamodbs(&case) {
            continue;
        }
        match case.json["expect"]["code"].as_str() {
            // botocore names an answer with no error type (an HTML page from a load balancer) by
            // its status; both routes leave the type empty and classify by the status.
            Some(code) if code.bytes().all(|b| b.is_ascii_digit()) => {
                assert_eq!(err.code, None, "{}", case.source());
                if code.starts_with('5') {
                    assert_eq!(err.kind, ErrorKind::Transient, "{}", case.source());
                }
                against_source += 1;
            }
            Some(code) => {
                assert_eq!(err.code.as_deref(), Some(code), "{}", case.source());
                against_source += 1;
            }
            None => {}
        }
        if let Some(id) = case.json["expect"]["RequestId"].as_str() {
            assert_eq!(err.request_id.as_deref(), Some(id), "{}", case.source());
        }
        if case.json["expect"]["retryable"].as_bool() == Some(true) {
            assert!(err.kind.is_retryable(), "{}: {err}", case.source());
        }
    }
    assert!(
        checked >= 40,
        "{checked} error answers checked on both routes"
    );
    assert!(
        against_source >= 40,
        "{against_source} checked against their source"
    );
}

#[tokio::test]
async fn dynamodbs_own_throttling_answer_is_retryable_on_both_routes() {
    // The answers DynamoDB gives when throttling, as the sources record them.
    let throttles: Vec<Case> = cases()
        .into_iter()
        .filter(|c| {
            c.kind() == "error"
                && matches!(
                    c.json["expect"]["code"].as_str(),
                    Some("ProvisionedThroughputExceededException" | "ThrottlingException")
                )
        })
        .collect();
    assert!(
        throttles.len() >= 2,
        "{} throttling answers",
        throttles.len()
    );
    for case in throttles {
        let (status, headers, body) = case.response().unwrap();
        let fast = fast_page(status.unwrap_or(400), &headers, &body).unwrap_err();
        assert_eq!(fast.kind, ErrorKind::Throttled, "{}: {fast}", case.source());
    }
}

// ------------------------------------------------------------------------------------ requests

/// Every request a client sends, recorded, each answered with what `answer` gives its
/// `X-Amz-Target`.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<http::Request<Vec<u8>>>>>);

impl Recorder {
    fn client(&self, answer: fn(&str) -> &'static str) -> Client {
        let seen = self.0.clone();
        let http = infallible_client_fn(move |req: http::Request<SdkBody>| {
            let target = req
                .headers()
                .get("x-amz-target")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let (parts, body) = req.into_parts();
            let bytes = body.bytes().expect("an in-memory body").to_vec();
            seen.lock()
                .unwrap()
                .push(http::Request::from_parts(parts, bytes));
            http::Response::builder()
                .status(200)
                .body(SdkBody::from(answer(&target)))
                .unwrap()
        });
        Client::from_conf(config(http))
    }

    /// The last request with `target`.
    fn last(&self, target: &str) -> http::Request<Vec<u8>> {
        let seen = self.0.lock().unwrap();
        let r = seen
            .iter()
            .rev()
            .find(|r| r.headers()["x-amz-target"] == target)
            .unwrap_or_else(|| panic!("no {target} request"));
        let mut out = http::Request::builder()
            .method(r.method())
            .uri(r.uri())
            .body(r.body().clone())
            .unwrap();
        *out.headers_mut() = r.headers().clone();
        out
    }
}

fn answer(target: &str) -> &'static str {
    match target.rsplit('.').next() {
        Some("Query") => r#"{"Items":[],"Count":0,"ScannedCount":0}"#,
        Some("BatchWriteItem") => r#"{"UnprocessedItems":{}}"#,
        _ => "{}",
    }
}

/// The Authorization header's parts: credential scope, signed headers, signature.
fn authorization(req: &http::Request<Vec<u8>>) -> (String, Vec<String>, String) {
    let auth = req.headers()["authorization"].to_str().unwrap();
    let rest = auth.strip_prefix("AWS4-HMAC-SHA256 ").expect("SigV4");
    let mut parts: HashMap<&str, &str> = HashMap::new();
    for p in rest.split(", ") {
        let (k, v) = p.split_once('=').unwrap();
        parts.insert(k, v);
    }
    (
        parts["Credential"].to_owned(),
        parts["SignedHeaders"]
            .split(';')
            .map(str::to_owned)
            .collect(),
        parts["Signature"].to_owned(),
    )
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Checks `req`'s SigV4 signature from scratch (the algorithm as AWS documents it: canonical
/// request, string to sign, derived key), not with the library that signed it.
fn verify_sigv4(req: &http::Request<Vec<u8>>) -> Result<(), String> {
    let (credential, signed, signature) = authorization(req);
    let (key_id, scope) = credential.split_once('/').unwrap();
    if key_id != ACCESS_KEY {
        return Err(format!("signed by {key_id}"));
    }
    let date = req.headers()["x-amz-date"].to_str().unwrap();
    let mut canonical_headers = String::new();
    for name in &signed {
        let value = match req.headers().get(name.as_str()) {
            Some(v) => v.to_str().unwrap().trim().to_owned(),
            // The host header is added when the request is sent, from the URI.
            None if name == "host" => req.uri().authority().unwrap().to_string(),
            None => return Err(format!("{name} is signed but not sent")),
        };
        canonical_headers.push_str(&format!("{name}:{value}\n"));
    }
    let canonical = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        req.method(),
        req.uri().path(),
        req.uri().query().unwrap_or(""),
        canonical_headers,
        signed.join(";"),
        sha256_hex(req.body())
    );
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let mut key = format!("AWS4{SECRET_KEY}").into_bytes();
    for part in scope.split('/') {
        key = hmac(&key, part.as_bytes());
    }
    let expected = hex::encode(hmac(&key, to_sign.as_bytes()));
    if expected == signature {
        Ok(())
    } else {
        Err(format!("signature {signature}, expected {expected}"))
    }
}

/// Headers the SDK adds for its own telemetry and retry bookkeeping, which the fast path does not
/// send: `amz-sdk-invocation-id`, `amz-sdk-request`, `x-amz-user-agent`.
fn semantic(signed: &[String]) -> Vec<String> {
    signed
        .iter()
        .filter(|h| !h.starts_with("amz-sdk-") && *h != "x-amz-user-agent")
        .cloned()
        .collect()
}

fn schema() -> TableSchema {
    TableSchema {
        table_name: "sessions".into(),
        index_name: "expirationWindowIndex".into(),
        key_attributes: vec!["pk".into(), "sk".into()],
        layout: Layout::default(),
    }
}

/// The same `Query` and `BatchWriteItem` through both routes, as recorded on the wire.
async fn both_routes(
    start: Option<Key>,
    keys: Vec<Key>,
) -> [(FastPath, http::Request<Vec<u8>>, http::Request<Vec<u8>>); 2] {
    let now = Timestamp::from_millis(1_795_000_000_123);
    let mut out = Vec::new();
    for route in [FastPath::On, FastPath::Off] {
        let recorder = Recorder::default();
        let store = DynamoStore::with_fast_path(recorder.client(answer), route);
        store
            .query_expired(
                &schema(),
                "2026-11-22T15:00:00.000Z_2026-11-22T15:01:00.000Z",
                now,
                start.clone(),
                Some(250),
            )
            .await
            .unwrap();
        store
            .batch_delete(&schema(), keys.iter().collect())
            .await
            .unwrap();
        if route == FastPath::On {
            assert!(store.direct_requests() >= 2, "the fast path sent them");
        }
        out.push((
            route,
            recorder.last("DynamoDB_20120810.Query"),
            recorder.last("DynamoDB_20120810.BatchWriteItem"),
        ));
    }
    out.try_into().unwrap_or_else(|_| unreachable!())
}

fn key(pk: AttributeValue, sk: AttributeValue) -> Key {
    [("pk".to_owned(), pk), ("sk".to_owned(), sk)].into()
}

#[tokio::test]
async fn both_routes_send_the_same_signed_requests() {
    // Keys of each type DynamoDB allows (S, N, B), text that needs escaping, and a start key
    // with number and binary values.
    let start = key(
        AttributeValue::N("-1.5e3".into()),
        AttributeValue::B(Blob::new(vec![0, 1, 0xfe, 0xff])),
    );
    let mut keys = vec![
        key(
            AttributeValue::S("user#42 \"quoted\" \\ ünï / \u{1F600}".into()),
            AttributeValue::N("7".into()),
        ),
        key(
            AttributeValue::B(Blob::new(b"\x00binary".to_vec())),
            AttributeValue::S("\n\t".into()),
        ),
    ];
    keys.extend((0..23).map(|i| {
        key(
            AttributeValue::S(format!("k{i}")),
            AttributeValue::N(i.to_string()),
        )
    }));
    let [(_, fast_query, fast_batch), (_, sdk_query, sdk_batch)] =
        both_routes(Some(start), keys).await;
    for (what, fast, sdk) in [
        ("Query", &fast_query, &sdk_query),
        ("BatchWriteItem", &fast_batch, &sdk_batch),
    ] {
        let body =
            |r: &http::Request<Vec<u8>>| -> Value { serde_json::from_slice(r.body()).unwrap() };
        assert_eq!(body(fast), body(sdk), "{what}: the same JSON");
        assert_eq!(fast.uri(), sdk.uri(), "{what}");
        assert_eq!(fast.method(), sdk.method(), "{what}");
        for h in ["content-type", "x-amz-target", "x-amz-security-token"] {
            assert_eq!(fast.headers().get(h), sdk.headers().get(h), "{what}: {h}");
        }
        let (fast_scope, fast_signed, _) = authorization(fast);
        let (sdk_scope, sdk_signed, _) = authorization(sdk);
        assert_eq!(
            fast_scope.split('/').skip(2).collect::<Vec<_>>(),
            sdk_scope.split('/').skip(2).collect::<Vec<_>>(),
            "{what}: region, service and terminator of the credential scope"
        );
        assert_eq!(
            semantic(&fast_signed),
            semantic(&sdk_signed),
            "{what}: the signed headers"
        );
        verify_sigv4(fast).unwrap_or_else(|e| panic!("{what}, fast path: {e}"));
        verify_sigv4(sdk).unwrap_or_else(|e| panic!("{what}, SDK: {e}"));
    }
    // A tampered body fails the check: it is not a check that cannot fail.
    let mut tampered = fast_batch;
    tampered.body_mut().push(b' ');
    assert!(verify_sigv4(&tampered).is_err());
}

// ------------------------------------------------------------------------------------ property

fn any_value() -> impl Strategy<Value = AttributeValue> {
    let text = "\\PC{0,12}";
    let number = "-?[0-9]{1,10}(\\.[0-9]{1,5})?";
    let leaf = prop_oneof![
        text.prop_map(AttributeValue::S),
        number.prop_map(AttributeValue::N),
        proptest::collection::vec(any::<u8>(), 0..12).prop_map(|b| AttributeValue::B(Blob::new(b))),
        any::<bool>().prop_map(AttributeValue::Bool),
        Just(AttributeValue::Null(true)),
        proptest::collection::btree_set(text, 1..4)
            .prop_map(|s| AttributeValue::Ss(s.into_iter().collect())),
        proptest::collection::btree_set(number, 1..4)
            .prop_map(|s| AttributeValue::Ns(s.into_iter().collect())),
        proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..6), 1..3)
            .prop_map(|s| AttributeValue::Bs(s.into_iter().map(Blob::new).collect())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(AttributeValue::L),
            proptest::collection::hash_map("[a-z#]{1,6}", inner, 0..4).prop_map(AttributeValue::M),
        ]
    })
}

fn any_item() -> impl Strategy<Value = Key> {
    proptest::collection::hash_map("\\PC{1,8}", any_value(), 1..5)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_page_of_arbitrary_values_parses_alike_on_both_routes(
        items in proptest::collection::vec(any_item(), 0..6),
        next in proptest::option::of(any_item()),
    ) {
        let mut page = serde_json::json!({
            "Items": items.iter().map(super::keys::item_to_json).collect::<Vec<_>>(),
            "Count": items.len(),
        });
        if let Some(next) = &next {
            page["LastEvaluatedKey"] = super::keys::item_to_json(next);
        }
        let body = serde_json::to_vec(&page).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let sdk = runtime.block_on(sdk_page(200, vec![], body.clone()));
        let fast = fast_page(200, &[], &body);
        prop_assert!(same(&sdk, &fast).is_ok(), "{:?}", same(&sdk, &fast));
        let (parsed, parsed_next) = fast.unwrap();
        prop_assert_eq!(parsed, items);
        prop_assert_eq!(parsed_next, next);
    }
}
