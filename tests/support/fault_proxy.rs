//! A fault-injecting HTTP proxy between the sweeper and a DynamoDB-API server.
//!
//! It listens on a free port on 127.0.0.1, forwards each request to the server and, when its
//! [`Plan`] says so, injects one [`Fault`] instead:
//!
//! - [`Fault::Unprocessed`]: a `BatchWriteItem` whose requests are split — part really applied by
//!   the server, the rest returned as `UnprocessedItems`; for the expiry-event sinks' batch calls
//!   (SQS `SendMessageBatch`, EventBridge `PutEvents`, Firehose `PutRecordBatch`) the same split
//!   answered as per-entry failures;
//! - [`Fault::Throttle`]: `ProvisionedThroughputExceededException`, `ThrottlingException` or
//!   `RequestLimitExceeded`;
//! - [`Fault::Status`]: HTTP 500 (`InternalServerError`) or 503 (`ServiceUnavailable`);
//! - [`Fault::Delay`]: the request waits past the client's attempt timeout, then is applied
//!   anyway (the client has given up: its retry races the late original);
//! - [`Fault::Reset`]: the connection is reset before the request reaches the server;
//! - [`Fault::DropAfterApply`]: the server applies the request, then the connection is reset
//!   before the answer reaches the client, so a retry repeats a write that already happened;
//! - [`Fault::WriteConflict`]: `ReplicatedWriteConflictException` (HTTP 400), what a
//!   Multi-Region strongly consistent table answers a write while another Region's write to the
//!   same item is in progress; nothing is applied;
//! - [`Fault::Reply`]: a scripted answer (credentials rejected, an index that changed...);
//! - [`Fault::HoldBack`]: a `BatchWriteItem` whose write requests naming one item are answered
//!   as `UnprocessedItems`, the others applied.
//!
//! The proxy routes by `X-Amz-Target`, so it stands as well in front of moto's SQS, EventBridge
//! and Firehose (AWS JSON protocols) as in front of DynamoDB.
//!
//! With [`FaultProxy::record`], it also keeps every request it receives ([`Seen`]): what a test
//! asserts about everything a process sent.
//!
//! A seeded plan decides each request from the seed, the request's identity (operation and the
//! keys or window it names, or the ids of the events it carries) and how many times that identity was seen before, so the faults do
//! not depend on the order in which concurrent requests arrive.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::server::{listen, passed_on, read_request, serve};

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Fault {
    Unprocessed,
    Throttle(&'static str),
    Status(u16),
    Delay,
    Reset,
    DropAfterApply,
    /// `ReplicatedWriteConflictException`: the write is refused, nothing applied.
    WriteConflict,
    /// A scripted answer: status, error code, message.
    Reply(u16, &'static str, &'static str),
    /// The write requests of a `BatchWriteItem` that name the item with this `id` (String) — as
    /// a key, an item, or the key an expiry index entry carries — are answered unprocessed; the
    /// others are applied.
    HoldBack(&'static str),
}

impl Fault {
    /// A short name for tables and messages.
    pub fn name(&self) -> String {
        match self {
            Fault::Unprocessed => "unprocessed".into(),
            Fault::Throttle(code) => (*code).into(),
            Fault::Status(s) => format!("http_{s}"),
            Fault::Delay => "delay".into(),
            Fault::Reset => "reset".into(),
            Fault::DropAfterApply => "drop_after_apply".into(),
            Fault::WriteConflict => "write_conflict".into(),
            Fault::Reply(s, code, _) => format!("{s} {code}"),
            Fault::HoldBack(id) => format!("held_back {id}"),
        }
    }
}

/// The throttling codes DynamoDB sends.
pub const THROTTLE_CODES: [&str; 3] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
];

/// Every fault a seeded plan draws from, each equally likely (a `BatchWriteItem` is answered
/// [`Fault::Unprocessed`] in half of its faults, otherwise one of these).
pub fn all_faults() -> Vec<Fault> {
    let mut faults = vec![Fault::Unprocessed];
    faults.extend(THROTTLE_CODES.iter().copied().map(Fault::Throttle));
    faults.extend([
        Fault::Status(500),
        Fault::Status(503),
        Fault::Delay,
        Fault::Reset,
        Fault::DropAfterApply,
    ]);
    faults
}

type Script = Box<dyn Fn(&str, &Value) -> Option<Fault> + Send + Sync>;

/// How the proxy decides what to do with a request.
pub enum Plan {
    /// Forward everything.
    Pass,
    /// Each request of one of `ops` gets a fault with probability `rate`, drawn from `faults`.
    Seeded {
        seed: u64,
        rate: f64,
        ops: Vec<&'static str>,
        faults: Vec<Fault>,
    },
    /// A function of the operation and the request body.
    Script(Script),
    /// The first request of one of `ops` gets `first` (so that a run is never without a
    /// fault); every later request goes by `then`.
    FirstThen {
        first: Fault,
        ops: Vec<&'static str>,
        then: Box<Plan>,
        used: std::sync::atomic::AtomicBool,
    },
}

impl Plan {
    pub fn script(f: impl Fn(&str, &Value) -> Option<Fault> + Send + Sync + 'static) -> Self {
        Plan::Script(Box::new(f))
    }
}

/// One request as it reached the proxy (kept with [`FaultProxy::record`]).
#[derive(Debug, Clone)]
pub struct Seen {
    /// The operation (the last part of `X-Amz-Target`).
    pub op: String,
    /// When it arrived (wall clock, epoch seconds).
    pub at: f64,
    /// Its body.
    pub body: Value,
    /// The fault injected instead of (or into) its answer, if any.
    pub fault: Option<Fault>,
}

impl Seen {
    /// The tables it names: its `TableName`, or the keys of its `RequestItems`.
    pub fn tables(&self) -> Vec<&str> {
        let batch = self.body["RequestItems"].as_object();
        let batch = batch.into_iter().flat_map(|items| items.keys());
        let one = self.body["TableName"].as_str();
        one.into_iter().chain(batch.map(String::as_str)).collect()
    }
}

/// Counters of what the proxy saw and did.
#[derive(Debug, Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub faults: Mutex<HashMap<String, u64>>,
    /// Requests still being handled (forwarded late, delayed...).
    pub in_flight: AtomicUsize,
    seen: Mutex<HashMap<u64, u64>>,
    /// When each item `id` was last listed by a `Query` or `BatchGetItem` answer passing through.
    read_at: Mutex<HashMap<String, std::time::Instant>>,
    /// The longest time from an item's last listing to a `BatchWriteItem` that deletes it
    /// reaching the server: how long batch mode trusts a read (ms).
    pub max_batch_window_ms: AtomicU64,
    /// Every request received, once [`FaultProxy::record`] was called.
    seen_requests: Mutex<Option<Vec<Seen>>>,
    /// Requests that arrived, faulted or not, by (operation, table) ([`by_table`]).
    pub by_table: Mutex<std::collections::BTreeMap<(String, String), u64>>,
}

impl Stats {
    /// Starts a new measurement of [`Stats::max_batch_window_ms`].
    pub fn reset_batch_window(&self) {
        self.max_batch_window_ms.store(0, Ordering::SeqCst);
        self.read_at.lock().unwrap().clear();
    }

    /// Notes the items a read answers with ([`read_ids`]).
    fn saw_read_answer(&self, answer: &[u8]) {
        let answer: Value = serde_json::from_slice(answer).unwrap_or(Value::Null);
        let now = std::time::Instant::now();
        let mut read_at = self.read_at.lock().unwrap();
        for id in read_ids(&answer) {
            read_at.insert(id, now);
        }
    }

    /// Measures a `BatchWriteItem` reaching the server against the reads of its keys.
    fn saw_batch_applied(&self, body: &[u8]) {
        let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let read_at = self.read_at.lock().unwrap();
        for id in delete_ids(&body["RequestItems"]) {
            if let Some(at) = read_at.get(&id) {
                let ms = at.elapsed().as_millis() as u64;
                self.max_batch_window_ms.fetch_max(ms, Ordering::SeqCst);
            }
        }
    }

    /// Counts a request by the operations and tables it names ([`by_table`]).
    fn saw_request(&self, op: &str, json: &Value) {
        let mut counts = self.by_table.lock().unwrap();
        for key in by_table(op, json) {
            *counts.entry(key).or_default() += 1;
        }
    }

    /// How many requests of operation `op` (as [`by_table`] names them) named `table`.
    pub fn count(&self, op: &str, table: &str) -> u64 {
        let counts = self.by_table.lock().unwrap();
        counts
            .get(&(op.to_owned(), table.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    pub fn faults_total(&self) -> u64 {
        self.faults.lock().unwrap().values().sum()
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// The requests received since [`FaultProxy::record`], in the order they arrived.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen_requests
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_default()
    }
}

/// The `id`s of the items a read answers with: a `Query`'s `Items`, or a `BatchGetItem`'s
/// `Responses` (batch mode reads stale keys again, strongly consistent: a read too).
pub fn read_ids(answer: &Value) -> impl Iterator<Item = String> + '_ {
    let got = answer["Responses"]
        .as_object()
        .into_iter()
        .flat_map(|tables| tables.values());
    std::iter::once(&answer["Items"])
        .chain(got)
        .flat_map(item_ids)
}

/// The `id`s (String) of the items of a list of items in DynamoDB JSON.
pub fn item_ids(v: &Value) -> impl Iterator<Item = String> + '_ {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item["id"]["S"].as_str().map(str::to_owned))
}

/// What a request does to which table, as (operation, table) pairs: one per request of a
/// `BatchWriteItem` (`BatchWriteItem:PutRequest`, `BatchWriteItem:DeleteRequest`) and per action of
/// a `TransactWriteItems` (`TransactWriteItems:Put`, `:Update`, `:Delete`, `:ConditionCheck`), per
/// table of a `BatchGetItem`; else the operation and its `TableName` (`-` when it names none: the
/// streams API, PartiQL).
pub fn by_table(op: &str, json: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match op {
        "BatchWriteItem" => {
            for (table, requests) in json["RequestItems"].as_object().into_iter().flatten() {
                for r in requests.as_array().into_iter().flatten() {
                    for kind in ["PutRequest", "DeleteRequest"] {
                        if r.get(kind).is_some() {
                            out.push((format!("{op}:{kind}"), table.clone()));
                        }
                    }
                }
            }
        }
        "BatchGetItem" => {
            for table in json["RequestItems"].as_object().into_iter().flatten() {
                out.push((op.to_owned(), table.0.clone()));
            }
        }
        "TransactWriteItems" => {
            for action in json["TransactItems"].as_array().into_iter().flatten() {
                for (kind, body) in action.as_object().into_iter().flatten() {
                    let table = body["TableName"].as_str().unwrap_or("-");
                    out.push((format!("{op}:{kind}"), table.to_owned()));
                }
            }
        }
        _ => {
            let table = json["TableName"].as_str().unwrap_or("-");
            out.push((op.to_owned(), table.to_owned()));
        }
    }
    out
}

/// The `id`s of the keys the delete requests of a `BatchWriteItem`'s items by table hold.
pub fn delete_ids(requests: &Value) -> Vec<String> {
    let requests = requests.as_object().into_iter().flat_map(|o| o.values());
    let keys = requests.flat_map(|v| v.as_array().into_iter().flatten());
    let keys: Vec<Value> = keys.map(|r| r["DeleteRequest"]["Key"].clone()).collect();
    item_ids(&Value::Array(keys)).collect()
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    pub endpoint: String,
    pub stats: Arc<Stats>,
    plan: Arc<Mutex<Plan>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Shared {
    upstream: String,
    delay: Duration,
    plan: Arc<Mutex<Plan>>,
    stats: Arc<Stats>,
    client: HttpClient<HttpConnector, Full<Bytes>>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` (an `http://127.0.0.1:port` endpoint). `delay` is how long a
    /// [`Fault::Delay`] holds a request: longer than the client's attempt timeout.
    pub async fn start(upstream: &str, delay: Duration, plan: Plan) -> FaultProxy {
        let listener = listen().await;
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let plan = Arc::new(Mutex::new(plan));
        let stats = Arc::new(Stats::default());
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            delay,
            plan: plan.clone(),
            stats: stats.clone(),
            client: HttpClient::builder(TokioExecutor::new()).build_http(),
        });
        let task = serve(listener, move |fd, req| handle(shared.clone(), fd, req));
        FaultProxy {
            endpoint,
            stats,
            plan,
            task,
        }
    }

    /// Keeps every request received from now on ([`Stats::seen`]).
    pub fn record(&self) {
        let mut seen = self.stats.seen_requests.lock().unwrap();
        seen.get_or_insert_with(Vec::new);
    }

    /// Replaces the plan (the counters keep running).
    pub fn set_plan(&self, plan: Plan) {
        *self.plan.lock().unwrap() = plan;
    }

    /// Waits until no request is being handled: a delayed request has reached the server.
    pub async fn wait_idle(&self) {
        while self.stats.in_flight.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Answers nothing and resets the connection (SO_LINGER 0, then hyper closes it on the error).
fn reset(fd: RawFd) -> std::io::Error {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `fd` is the socket of the connection this request arrived on; hyper still owns it.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    std::io::Error::other("connection reset by the fault proxy")
}

type Reply = Result<Response<Full<Bytes>>, std::io::Error>;

/// An answer in AWS JSON `version` (`1.0`, `1.1`): the proxy's own (with its request id), or
/// the server's passed on.
fn reply(status: u16, version: &str, body: impl Into<Bytes>, own: bool) -> Response<Full<Bytes>> {
    let content_type = format!("application/x-amz-json-{version}");
    let mut reply = Response::builder()
        .status(status)
        .header("content-type", content_type);
    if own {
        reply = reply.header("x-amzn-requestid", "fault-proxy");
    }
    reply.body(Full::new(body.into())).unwrap()
}

fn error_reply(status: u16, code: &str, message: &str) -> Response<Full<Bytes>> {
    let kind = format!("com.amazonaws.dynamodb.v20120810#{code}");
    let body = json!({ "__type": kind, "message": message }).to_string();
    reply(status, "1.0", body, true)
}

/// Sends `body` on to the server: its answer, or (the server refused it) its refusal, to pass on
/// as is.
async fn send_part(
    forward: &Forwarder,
    body: &Value,
    version: &str,
) -> Result<Value, Response<Full<Bytes>>> {
    let resp = forward.send(Bytes::from(body.to_string())).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    if !status.is_success() {
        return Err(reply(status.as_u16(), version, bytes, false));
    }
    Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Counts a request in flight until dropped, however the request ends.
struct InFlight(Arc<Stats>);

impl InFlight {
    fn enter(stats: &Arc<Stats>) -> InFlight {
        stats.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(stats.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn handle(shared: Arc<Shared>, fd: RawFd, req: Request<Incoming>) -> Reply {
    shared.stats.requests.fetch_add(1, Ordering::SeqCst);
    let guard = InFlight::enter(&shared.stats);
    let (parts, body, op) = read_request(req).await;
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.stats.saw_request(&op, &json);
    let fault = decide(&shared, &op, &json);
    if let Some(f) = &fault {
        let mut faults = shared.stats.faults.lock().unwrap();
        *faults.entry(f.name()).or_default() += 1;
    }
    if let Some(seen) = shared.stats.seen_requests.lock().unwrap().as_mut() {
        seen.push(Seen {
            op: op.clone(),
            at: wall_clock(),
            body: json.clone(),
            fault: fault.clone(),
        });
    }
    let forward = Forwarder {
        shared: shared.clone(),
        headers: parts.headers.clone(),
        path: parts.uri.path().to_owned(),
    };
    let reply = match fault {
        None => Ok(forward.send(body).await.unwrap()),
        Some(Fault::Unprocessed) if is_sink_batch(&op) => {
            Ok(split_entries(&op, &json, &forward).await)
        }
        Some(Fault::Unprocessed) => Ok(split_batch(&json, &forward).await),
        Some(Fault::HoldBack(id)) => Ok(hold_back(&json, id, &forward).await),
        Some(Fault::Throttle(code)) => Ok(error_reply(400, code, "Injected throttling")),
        Some(Fault::Status(500)) => Ok(error_reply(500, "InternalServerError", "Injected")),
        Some(Fault::Status(s)) => Ok(error_reply(s, "ServiceUnavailable", "Injected")),
        Some(Fault::Reply(s, code, message)) => Ok(error_reply(s, code, message)),
        Some(Fault::WriteConflict) => Ok(error_reply(
            400,
            "ReplicatedWriteConflictException",
            "Injected: a concurrent write to the item in another Region",
        )),
        Some(Fault::Delay) => {
            // Applied late, after the client gave up, whatever happens to this connection.
            let delay = shared.delay;
            let late = InFlight::enter(&shared.stats);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = forward.send(body).await;
                drop(late);
            });
            tokio::time::sleep(delay).await;
            Err(reset(fd))
        }
        Some(Fault::Reset) => Err(reset(fd)),
        Some(Fault::DropAfterApply) => {
            let _ = forward.send(body).await;
            Err(reset(fd))
        }
    };
    drop(guard);
    reply
}

/// Sends a request on to the server.
struct Forwarder {
    shared: Arc<Shared>,
    headers: hyper::HeaderMap,
    path: String,
}

impl Forwarder {
    /// Sends `body` in a task of its own, so the request reaches the server even if the client
    /// gave up on it.
    fn send(&self, body: Bytes) -> tokio::task::JoinHandle<Response<Full<Bytes>>> {
        let shared = self.shared.clone();
        let uri = format!("{}{}", shared.upstream, self.path);
        let target = self
            .headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if target.ends_with(".BatchWriteItem") {
            shared.stats.saw_batch_applied(&body);
        }
        let req = passed_on(Method::POST, uri, &self.headers, body);
        tokio::spawn(async move {
            let resp = shared
                .client
                .request(req)
                .await
                .expect("the proxy could not reach the server");
            let (parts, body) = resp.into_parts();
            let body = body.collect().await.expect("server answer").to_bytes();
            if target.ends_with(".Query") || target.ends_with(".BatchGetItem") {
                shared.stats.saw_read_answer(&body);
            }
            Response::from_parts(parts, Full::new(body))
        })
    }
}

/// Forwards part of a `BatchWriteItem` and answers the rest as unprocessed, merged with whatever
/// the server itself left unprocessed.
async fn split_batch(json: &Value, forward: &Forwarder) -> Response<Full<Bytes>> {
    let mut rng =
        fastrand::Rng::with_seed(fnv(request_identity("BatchWriteItem", json).as_bytes()));
    let mut sent = serde_json::Map::new();
    let mut held = serde_json::Map::new();
    for (table, requests) in json["RequestItems"].as_object().into_iter().flatten() {
        let requests = requests.as_array().cloned().unwrap_or_default();
        // hold back at least one request, at most all of them
        let first_held = rng.usize(..requests.len().max(1));
        let (mut s, mut h) = (Vec::new(), Vec::new());
        for (i, r) in requests.into_iter().enumerate() {
            if i == first_held || rng.bool() {
                h.push(r);
            } else {
                s.push(r);
            }
        }
        if !s.is_empty() {
            sent.insert(table.clone(), Value::Array(s));
        }
        held.insert(table.clone(), Value::Array(h));
    }
    send_and_hold(json, sent, held, forward).await
}

/// Forwards the write requests `sent` of the `BatchWriteItem` `json` and answers `held` as
/// unprocessed, merged with whatever the server itself left unprocessed. A refusal of the part
/// sent is passed on as it is.
async fn send_and_hold(
    json: &Value,
    sent: serde_json::Map<String, Value>,
    mut unprocessed: serde_json::Map<String, Value>,
    forward: &Forwarder,
) -> Response<Full<Bytes>> {
    if !sent.is_empty() {
        let mut body = json.clone();
        body["RequestItems"] = Value::Object(sent);
        let answer = match send_part(forward, &body, "1.0").await {
            Ok(answer) => answer,
            Err(refused) => return refused,
        };
        for (table, requests) in answer["UnprocessedItems"].as_object().into_iter().flatten() {
            let entry = unprocessed
                .entry(table.clone())
                .or_insert_with(|| Value::Array(vec![]));
            let more = requests.as_array().cloned().unwrap_or_default();
            entry.as_array_mut().unwrap().extend(more);
        }
    }
    // A new body: no x-amz-crc32 header, which would no longer match.
    let body = json!({ "UnprocessedItems": unprocessed }).to_string();
    reply(200, "1.0", body, true)
}

/// Forwards the write requests of a `BatchWriteItem` that do not name the item `id` and answers
/// those that do as unprocessed, with whatever the server itself left unprocessed.
async fn hold_back(json: &Value, id: &str, forward: &Forwarder) -> Response<Full<Bytes>> {
    let names = format!("\"id\":{}", json!({ "S": id }));
    let mut sent = serde_json::Map::new();
    let mut unprocessed = serde_json::Map::new();
    for (table, requests) in json["RequestItems"].as_object().into_iter().flatten() {
        let requests = requests.as_array().cloned().unwrap_or_default();
        let (held, passed): (Vec<Value>, Vec<Value>) = requests
            .into_iter()
            .partition(|r| r.to_string().contains(&names));
        if !passed.is_empty() {
            sent.insert(table.clone(), Value::Array(passed));
        }
        if !held.is_empty() {
            unprocessed.insert(table.clone(), Value::Array(held));
        }
    }
    send_and_hold(json, sent, unprocessed, forward).await
}

/// The wall clock, epoch seconds with fraction.
fn wall_clock() -> f64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.unwrap().as_secs_f64()
}

fn decide(shared: &Shared, op: &str, json: &Value) -> Option<Fault> {
    decide_by(&shared.plan.lock().unwrap(), shared, op, json)
}

fn decide_by(plan: &Plan, shared: &Shared, op: &str, json: &Value) -> Option<Fault> {
    match plan {
        Plan::Pass => None,
        Plan::Script(f) => f(op, json),
        Plan::FirstThen {
            first,
            ops,
            then,
            used,
        } => {
            if ops.contains(&op) && !used.swap(true, Ordering::SeqCst) {
                return Some(first.clone());
            }
            decide_by(then, shared, op, json)
        }
        Plan::Seeded {
            seed,
            rate,
            ops,
            faults,
        } => {
            if !ops.contains(&op) {
                return None;
            }
            let identity = fnv(request_identity(op, json).as_bytes());
            let nth = {
                let mut seen = shared.stats.seen.lock().unwrap();
                let n = seen.entry(identity).or_default();
                *n += 1;
                *n
            };
            let mut rng =
                fastrand::Rng::with_seed(seed ^ identity ^ nth.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            if rng.f64() >= *rate {
                return None;
            }
            // Partial batches are the most common batch fault: half of the batch faults.
            let batch = op == "BatchWriteItem" || is_sink_batch(op);
            if batch && faults.contains(&Fault::Unprocessed) && rng.bool() {
                return Some(Fault::Unprocessed);
            }
            let usable: Vec<&Fault> = faults
                .iter()
                .filter(|f| **f != Fault::Unprocessed || batch)
                .collect();
            Some(usable[rng.usize(..usable.len())].clone())
        }
    }
}

/// What a request is about, independent of table names and timing: the operation and the keys
/// it deletes, or the window and start key it reads.
pub fn request_identity(op: &str, json: &Value) -> String {
    let mut parts = vec![op.to_owned()];
    match op {
        "BatchWriteItem" => {
            for requests in json["RequestItems"].as_object().into_iter().flatten() {
                for r in requests.1.as_array().into_iter().flatten() {
                    parts.push(r["DeleteRequest"]["Key"].to_string());
                }
            }
        }
        "DeleteItem" => parts.push(json["Key"].to_string()),
        op if is_sink_batch(op) => parts.extend(sink_event_ids(op, json)),
        "Query" => {
            // A GSI's window (`:win`), or an expiry index table's (`:w`).
            let values = &json["ExpressionAttributeValues"];
            let window = values.get(":win").or_else(|| values.get(":w"));
            parts.push(window.unwrap_or(&Value::Null).to_string());
            parts.push(json["ExclusiveStartKey"].to_string());
        }
        _ => parts.push(json.to_string()),
    }
    parts.join("|")
}

/// FNV-1a, 64 bits: a stable hash for seeding.
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The expiry-event sinks' batch operations (the last part of their `X-Amz-Target`).
pub const SINK_BATCH_OPS: [&str; 3] = ["SendMessageBatch", "PutEvents", "PutRecordBatch"];

pub fn is_sink_batch(op: &str) -> bool {
    SINK_BATCH_OPS.contains(&op)
}

/// The field of a sink batch request that holds its entries: `Entries` (SQS, EventBridge) or
/// `Records` (Firehose).
fn entries_field(op: &str) -> &'static str {
    match op {
        "PutRecordBatch" => "Records",
        _ => "Entries",
    }
}

fn sink_entries(op: &str, json: &Value) -> Vec<Value> {
    json[entries_field(op)]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The event envelope or detail an entry carries, as JSON.
fn entry_event(op: &str, entry: &Value) -> Value {
    use base64::Engine as _;
    let text = match op {
        "SendMessageBatch" => entry["MessageBody"].as_str().map(str::to_owned),
        "PutEvents" => entry["Detail"].as_str().map(str::to_owned),
        _ => entry["Data"]
            .as_str()
            .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
            .and_then(|b| String::from_utf8(b).ok()),
    };
    text.and_then(|t| serde_json::from_str(t.trim_end()).ok())
        .unwrap_or(Value::Null)
}

/// The event ids a sink batch request carries, in order (`detail.id`; the detail itself for
/// EventBridge).
pub fn sink_event_ids(op: &str, json: &Value) -> Vec<String> {
    sink_entries(op, json)
        .iter()
        .map(|e| {
            let event = entry_event(op, e);
            let id = if op == "PutEvents" {
                &event["id"]
            } else {
                &event["detail"]["id"]
            };
            id.as_str().unwrap_or("?").to_owned()
        })
        .collect()
}

/// Forwards part of a sink batch and answers the rest as failed entries, in the operation's own
/// shape (SQS `Failed`; EventBridge and Firehose one result per entry, in order, with an error
/// code and a failed count), merged with what the server itself answered.
async fn split_entries(op: &str, json: &Value, forward: &Forwarder) -> Response<Full<Bytes>> {
    let entries = sink_entries(op, json);
    let mut rng = fastrand::Rng::with_seed(fnv(request_identity(op, json).as_bytes()));
    let first_held = rng.usize(..entries.len().max(1));
    let held: Vec<bool> = (0..entries.len())
        .map(|i| i == first_held || rng.bool())
        .collect();
    let sent: Vec<Value> = entries
        .iter()
        .zip(&held)
        .filter(|(_, h)| !**h)
        .map(|(e, _)| e.clone())
        .collect();
    let answer: Value = if sent.is_empty() {
        Value::Null
    } else {
        let mut body = json.clone();
        body[entries_field(op)] = Value::Array(sent);
        match send_part(forward, &body, "1.1").await {
            Ok(answer) => answer,
            Err(refused) => return refused,
        }
    };
    let body = match op {
        "SendMessageBatch" => {
            let mut failed = answer["Failed"].as_array().cloned().unwrap_or_default();
            for (e, _) in entries.iter().zip(&held).filter(|(_, h)| **h) {
                failed.push(json!({
                    "Id": e["Id"], "SenderFault": false, "Code": "InternalError",
                    "Message": "Injected per-entry failure",
                }));
            }
            json!({
                "Successful": answer["Successful"].as_array().cloned().unwrap_or_default(),
                "Failed": failed,
            })
        }
        _ => {
            let (results_field, count_field, ok_id, code) = if op == "PutEvents" {
                (
                    "Entries",
                    "FailedEntryCount",
                    "EventId",
                    "ThrottlingException",
                )
            } else {
                (
                    "RequestResponses",
                    "FailedPutCount",
                    "RecordId",
                    "ServiceUnavailableException",
                )
            };
            let mut from_server = answer[results_field]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter();
            let mut failed = 0;
            let results: Vec<Value> = held
                .iter()
                .map(|h| {
                    let r = if *h {
                        json!({ "ErrorCode": code, "ErrorMessage": "Injected per-entry failure" })
                    } else {
                        from_server.next().unwrap_or(Value::Null)
                    };
                    if r.get(ok_id).is_none() {
                        failed += 1;
                    }
                    r
                })
                .collect();
            let mut body = json!({ results_field: results, count_field: failed });
            if op == "PutRecordBatch" {
                body["Encrypted"] = json!(false);
            }
            body
        }
    };
    reply(200, "1.1", body.to_string(), true)
}
