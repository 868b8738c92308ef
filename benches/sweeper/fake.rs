//! A DynamoDB and Lambda Runtime API stand-in that answers at once (or after a seeded random
//! delay, [`Delay`]): `DescribeTable` with the sweeper's table shape, every `Query` with
//! `per_window` expired keys in pages of the request's `Limit` (without one, pages of
//! [`PAGE_ITEMS`], a 1 MB page of ~100-byte index items), `BatchWriteItem` with no unprocessed
//! items, `BatchGetItem` with every key asked and the ttl its id carries (`{i}@{window}@{ttl}`),
//! `DeleteItem` (conditional or not) as deleted; `/runtime/invocation/next` with one `{}` event.
//!
//! Served in process for section 3's start-up runs, and as a process of its own
//! (`--fake-dynamodb`, handled in `main`) for section 6's CPU rows, the rows at DynamoDB's pace
//! (`pace`) and `make profile`.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::{json, Value};

/// How long each DynamoDB answer waits: at once, or a random delay from `lo` to `hi`
/// (uniform, whole and fractional milliseconds), as DynamoDB answers in-Region.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Delay {
    pub lo: Duration,
    pub hi: Duration,
}

impl Delay {
    /// `0`, or `LO-HI` in milliseconds.
    pub fn parse(text: &str) -> Option<Delay> {
        if text == "0" {
            return Some(Delay::default());
        }
        let (lo, hi) = text.split_once('-')?;
        let (lo, hi): (u64, u64) = (lo.parse().ok()?, hi.parse().ok()?);
        (lo <= hi).then(|| Delay {
            lo: Duration::from_millis(lo),
            hi: Duration::from_millis(hi),
        })
    }
}

#[derive(Clone, Default)]
pub struct Shared {
    pub started: Arc<Mutex<Option<Instant>>>,
    pub first_request: Arc<Mutex<Option<Instant>>>,
    pub responses: Arc<Mutex<Vec<String>>>,
    pub invoked: Arc<Mutex<bool>>,
    /// DynamoDB requests answered so far.
    pub requests: Arc<AtomicU64>,
    /// Of those, the requests of each of [`OPS`].
    pub ops: Arc<[AtomicU64; 4]>,
    /// Of each of [`OPS`], the time its requests took to be answered, added up (microseconds):
    /// from the request's headers read to its answer, delay included.
    pub answer_us: Arc<[AtomicU64; 4]>,
    /// The first `BatchWriteItem` request's arrival and the last one's answer.
    pub deletes_span: Arc<Mutex<Option<(Instant, Instant)>>>,
    /// Whole items carry a String attribute `blob` of this many KiB (0: none): what a
    /// `DeleteItem` with `ReturnValues=ALL_OLD` returns, and a `BatchGetItem` of whole items.
    pub item_kib: usize,
    delay: Delay,
    rng: Arc<Mutex<Option<fastrand::Rng>>>,
}

impl Shared {
    /// Answers after `delay`, drawn from a generator seeded with `seed`.
    pub fn paced(delay: Delay, seed: u64) -> Self {
        Shared {
            delay,
            rng: Arc::new(Mutex::new(Some(fastrand::Rng::with_seed(seed)))),
            ..Shared::default()
        }
    }

    /// The wait before the next answer.
    fn next_delay(&self) -> Duration {
        let Delay { lo, hi } = self.delay;
        if hi.is_zero() {
            return Duration::ZERO;
        }
        let mut rng = self.rng.lock().unwrap();
        let rng = rng.get_or_insert_with(|| fastrand::Rng::with_seed(1));
        lo + (hi - lo).mul_f64(rng.f64())
    }
}

/// The operations counted one by one in [`Shared::ops`].
pub const OPS: [&str; 4] = ["Query", "BatchWriteItem", "DeleteItem", "BatchGetItem"];

/// Items of a `Query` page without a `Limit`: DynamoDB stops a page at 1 MB, about 10,000
/// index items of ~100 bytes.
pub const PAGE_ITEMS: usize = 10_000;

/// `ops Query=.. BatchWriteItem=.. DeleteItem=.. BatchGetItem=..`: what the fake endpoint
/// prints on SIGTERM after `requests N`.
pub fn ops_line(ops: &[AtomicU64; 4]) -> String {
    let mut line = String::from("ops");
    for (name, n) in OPS.iter().zip(ops) {
        let _ = write!(line, " {name}={}", n.load(Ordering::Relaxed));
    }
    line
}

/// `answer_us Query=.. BatchWriteItem=.. DeleteItem=.. BatchGetItem=..` (each operation's answer
/// times added up, microseconds) and `deletes_span_us N` (from the first `BatchWriteItem`'s
/// arrival to the last one's answer): what the fake endpoint prints on SIGTERM after the
/// [`ops_line`].
pub fn answer_lines(answer_us: &[AtomicU64; 4], span: Option<(Instant, Instant)>) -> String {
    let mut line = String::from("answer_us");
    for (name, n) in OPS.iter().zip(answer_us) {
        let _ = write!(line, " {name}={}", n.load(Ordering::Relaxed));
    }
    let span_us = span.map_or(0, |(first, last)| last.duration_since(first).as_micros());
    let _ = write!(line, "\ndeletes_span_us {span_us}");
    line
}

/// The ttl an item id of [`handle`]'s `Query` pages carries: `{i}@{window}@{ttl}`.
fn ttl_of(id: &str) -> Option<i64> {
    let (_, ttl) = id.rsplit_once('@')?;
    ttl.parse().ok()
}

pub async fn serve(port: u16, per_window: usize, shared: Shared) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |req| handle(req, per_window, shared.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

fn reply(
    status: u16,
    body: String,
    headers: &[(&str, String)],
) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut r = Response::builder()
        .status(status)
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amzn-requestid", "bench");
    for (k, v) in headers {
        r = r.header(*k, v);
    }
    Ok(r.body(Full::new(Bytes::from(body))).unwrap())
}

async fn handle(
    req: Request<Incoming>,
    per_window: usize,
    shared: Shared,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let arrived = Instant::now();
    let path = req.uri().path().to_string();
    let target = req
        .headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    if path.starts_with("/2018-06-01/runtime/invocation/next") {
        let first = !std::mem::replace(&mut *shared.invoked.lock().unwrap(), true);
        if !first {
            std::future::pending::<()>().await;
        }
        let deadline = chrono::Utc::now().timestamp_millis() + 60_000;
        return reply(
            200,
            "{}".into(),
            &[
                ("lambda-runtime-aws-request-id", "bench-1".into()),
                ("lambda-runtime-deadline-ms", deadline.to_string()),
                (
                    "lambda-runtime-invoked-function-arn",
                    "arn:aws:lambda:us-east-1:123456789012:function:bench".into(),
                ),
                (
                    "lambda-runtime-trace-id",
                    "Root=1-00000000-000000000000000000000000".into(),
                ),
            ],
        );
    }
    if path.starts_with("/2018-06-01/runtime/") {
        if path.ends_with("/response") {
            shared
                .responses
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&body).to_string());
        }
        return reply(202, "{}".into(), &[]);
    }
    {
        let mut first = shared.first_request.lock().unwrap();
        if first.is_none() {
            *first = Some(Instant::now());
        }
    }
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let op = target.rsplit('.').next().unwrap_or("");
    if let Some(i) = OPS.iter().position(|o| *o == op) {
        shared.ops[i].fetch_add(1, Ordering::Relaxed);
    }
    let delay = shared.next_delay();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    // The answer is built from here on at once, without another wait.
    let answered = Instant::now();
    if let Some(i) = OPS.iter().position(|o| *o == op) {
        let took = answered.duration_since(arrived).as_micros() as u64;
        shared.answer_us[i].fetch_add(took, Ordering::Relaxed);
    }
    if op == "BatchWriteItem" {
        let mut span = shared.deletes_span.lock().unwrap();
        let (first, _) = span.get_or_insert((arrived, answered));
        *span = Some(((*first).min(arrived), answered));
    }
    match op {
        // Every delete succeeds: the answer does not depend on the request, so it is not read.
        "BatchWriteItem" => return reply(200, r#"{"UnprocessedItems":{}}"#.into(), &[]),
        // The item was there and its condition held: deleted.
        "DeleteItem" if shared.item_kib == 0 => return reply(200, "{}".into(), &[]),
        _ => {}
    }
    let input: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    // A whole item: the key and ttl asked for, and `blob`.
    let whole = |key: &Value| {
        let mut item = key.clone();
        if let Some(ttl) = key["id"]["S"].as_str().and_then(ttl_of) {
            item["ttl"] = json!({"N": ttl.to_string()});
        }
        item["blob"] = json!({"S": "x".repeat(shared.item_kib * 1024)});
        item
    };
    match op {
        "DeleteItem" => {
            let returned = input["ReturnValues"] == "ALL_OLD";
            let body = if returned { json!({"Attributes": whole(&input["Key"])}) } else { json!({}) };
            reply(200, body.to_string(), &[])
        }
        // EventBridge: every entry accepted.
        "PutEvents" => {
            let n = input["Entries"].as_array().map_or(0, Vec::len);
            let entries: Vec<Value> = (0..n).map(|i| json!({"EventId": format!("bench-{i}")})).collect();
            reply(200, json!({"FailedEntryCount": 0, "Entries": entries}).to_string(), &[])
        }
        "DescribeTable" | "ListTables" => reply(200, json!({
            "TableNames": ["fake"],
            "Table": {
                "TableName": "fake", "TableStatus": "ACTIVE",
                "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
                "AttributeDefinitions": [
                    {"AttributeName": "id", "AttributeType": "S"},
                    {"AttributeName": "expirationWindow", "AttributeType": "S"},
                    {"AttributeName": "ttl", "AttributeType": "N"}],
                "GlobalSecondaryIndexes": [{"IndexName": "expirationWindowIndex",
                    "KeySchema": [{"AttributeName": "expirationWindow", "KeyType": "HASH"}, {"AttributeName": "ttl", "KeyType": "RANGE"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"}}]
            }}).to_string(), &[]),
        "Query" => {
            // The window as the sweeper names it (`:w`; `:win` in builds before de5bad4): each
            // window answers keys of its own, as a table does.
            let values = &input["ExpressionAttributeValues"];
            let window = values[":w"]["S"].as_str().or_else(|| values[":win"]["S"].as_str()).unwrap_or("w");
            // The sweep instant has milliseconds ("1763805600.123"): answer with whole-second ttls below it.
            let now: i64 = input["ExpressionAttributeValues"][":now"]["N"].as_str().and_then(|n| n.parse::<f64>().ok()).map(|n| n.ceil() as i64).unwrap_or(0);
            let offset: usize = input["ExclusiveStartKey"]["id"]["S"].as_str().and_then(|s| s.split('@').next()?.parse().ok()).map(|o: usize| o + 1).unwrap_or(0);
            // The request's `Limit`, else a full 1 MB page; never more than 1 MB either way.
            let page = input["Limit"].as_u64().map_or(PAGE_ITEMS, |l| (l.max(1) as usize).min(PAGE_ITEMS));
            let end = (offset + page).min(per_window);
            // Written as text: the fake should cost little next to the sweeper it serves.
            let window_json = Value::from(window).to_string();
            let window_text = &window_json[1..window_json.len() - 1];
            let ttl = now - 1;
            let mut out = String::with_capacity(64 + (end - offset) * (48 + window_text.len()));
            out.push_str("{\"Items\":[");
            for i in offset..end {
                if i > offset {
                    out.push(',');
                }
                let _ = write!(out, "{{\"id\":{{\"S\":\"{i}@{window_text}@{ttl}\"}},\"ttl\":{{\"N\":\"{ttl}\"}}}}");
            }
            let _ = write!(out, "],\"Count\":{}", end - offset);
            if end < per_window {
                let _ = write!(out, ",\"LastEvaluatedKey\":{{\"id\":{{\"S\":\"{}@{window_text}@{ttl}\"}},\"expirationWindow\":{{\"S\":{window_json}}},\"ttl\":{{\"N\":\"{ttl}\"}}}}", end - 1);
            }
            out.push('}');
            reply(200, out, &[])
        }
        "BatchGetItem" => {
            // A strongly consistent read (batch mode's confirming read, or a re-read): every key
            // asked is there, with the ttl its id carries (the one the query page listed), so
            // it is deleted as read.
            let mut responses = serde_json::Map::new();
            if let Some(tables) = input["RequestItems"].as_object() {
                for (table, asked) in tables {
                    // Without a projection, whole items (read for expiry events).
                    let projected = asked.get("ProjectionExpression").is_some() || shared.item_kib == 0;
                    let items: Vec<Value> = asked["Keys"].as_array().map_or(&[][..], Vec::as_slice).iter().map(|key| {
                        if !projected {
                            return whole(key);
                        }
                        let mut item = key.clone();
                        if let Some(ttl) = key["id"]["S"].as_str().and_then(ttl_of) {
                            item["ttl"] = json!({"N": ttl.to_string()});
                        }
                        item
                    }).collect();
                    responses.insert(table.clone(), Value::Array(items));
                }
            }
            reply(200, json!({"Responses": responses, "UnprocessedKeys": {}}).to_string(), &[])
        }
        _ => reply(400, json!({"__type": "com.amazon.coral.service#UnknownOperationException"}).to_string(), &[]),
    }
}
