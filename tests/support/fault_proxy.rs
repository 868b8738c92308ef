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
//!
//! What a request names is read in `fault_proxy/requests.rs`; the faults that answer part of a
//! batch are in `fault_proxy/partial.rs`.

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
use super::wall_clock;

mod partial;
mod requests;

use partial::{hold_back, split_batch, split_entries};
pub use requests::*;

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Fault {
    Unprocessed,
    Throttle(&'static str),
    Status(u16),
    Delay,
    Reset,
    DropAfterApply,
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
