//! A pass-through proxy in front of an AWS JSON endpoint (DynamoDB, moto) that holds and
//! observes the requests: [`Recorder`], and [`DeleteRecorder`], which records when each delete
//! was acknowledged. Listens on 127.0.0.1 only.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::fault_proxy::delete_ids;
use super::server::{collected, json_reply, listen, passed_on, read_request, serve};
use super::wall_clock;

type HttpResponse = Response<Full<Bytes>>;

/// What a [`Recorder`] is told of each request the server answered with success: the operation
/// (the last part of `X-Amz-Target`), the request and answer bodies, and when the answer came
/// back (wall clock, epoch seconds).
pub type Observe = Box<dyn Fn(&str, &Value, &Value, f64) + Send + Sync>;
/// What a [`Recorder`] started with [`Recorder::start_all`] is told of every request the server
/// answered, failures too: the operation, the HTTP status, the request and answer bodies (a
/// failure's answer is its error, e.g. `{"__type": "…#ConditionalCheckFailedException", …}`), and
/// when the answer came back (wall clock, epoch seconds).
pub type ObserveAll = Box<dyn Fn(&str, u16, &Value, &Value, f64) + Send + Sync>;
/// How long a [`Recorder`] holds a request (its operation and body) before passing it on.
pub type Hold = Box<dyn Fn(&str, &Value) -> Duration + Send + Sync>;

/// A pass-through proxy in front of an AWS JSON endpoint (DynamoDB, moto) that holds each
/// request as `hold` says and tells `observe` what the server answered.
pub struct Recorder {
    /// `http://127.0.0.1:PORT`: point the client here.
    pub endpoint: String,
    task: JoinHandle<()>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Upstream {
    base: String,
    client: HttpClient<HttpConnector, Full<Bytes>>,
    hold: Hold,
    observe: ObserveAll,
}

impl Recorder {
    /// Starts a recorder in front of `upstream` (`http://127.0.0.1:PORT`) that tells `observe` of
    /// the requests answered with success.
    pub async fn start(upstream: &str, hold: Hold, observe: Observe) -> Recorder {
        let observe = move |op: &str, status: u16, request: &Value, answer: &Value, at: f64| {
            if (200..300).contains(&status) {
                observe(op, request, answer, at);
            }
        };
        Recorder::start_all(upstream, hold, Box::new(observe)).await
    }

    /// Starts a recorder in front of `upstream` that tells `observe` of every answer, failures
    /// (a failed conditional write, a throttled request) included, with its status.
    pub async fn start_all(upstream: &str, hold: Hold, observe: ObserveAll) -> Recorder {
        let listener = listen().await;
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let base = upstream.trim_end_matches('/').to_owned();
        let client = HttpClient::builder(TokioExecutor::new()).build_http();
        let up = Arc::new(Upstream {
            base,
            client,
            hold,
            observe,
        });
        let task = serve(listener, move |_, req| forward(up.clone(), req));
        Recorder { endpoint, task }
    }
}

async fn forward(up: Arc<Upstream>, req: Request<Incoming>) -> Result<HttpResponse, Infallible> {
    let (parts, body, op) = read_request(req).await;
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let pause = (up.hold)(&op, &request);
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
    let uri = format!("{}{}", up.base, parts.uri);
    let out = passed_on(parts.method, uri, &parts.headers, body);
    let resp = match up.client.request(out).await {
        Ok(resp) => resp,
        Err(e) => {
            return Ok(json_reply(
                502,
                &json!({ "message": e.to_string() }).to_string(),
            ))
        }
    };
    let (rparts, rbody) = resp.into_parts();
    let rbody = collected(rbody).await;
    let at = wall_clock();
    let answer: Value = serde_json::from_slice(&rbody).unwrap_or(Value::Null);
    (up.observe)(&op, rparts.status.as_u16(), &request, &answer, at);
    Ok(Response::from_parts(rparts, Full::new(rbody)))
}

/// When DynamoDB acknowledged each item's delete, by `id`: the wall clock (epoch seconds) at the
/// first `BatchWriteItem` answer that does not list it as unprocessed or the first successful
/// `DeleteItem`, and whether it was the latter.
pub type Acks = Arc<Mutex<HashMap<String, (f64, bool)>>>;

/// A [`Recorder`] in front of a DynamoDB endpoint that records [`Acks`].
pub struct DeleteRecorder {
    /// `http://127.0.0.1:PORT`: point the sweeper here.
    pub endpoint: String,
    pub acks: Acks,
    _recorder: Recorder,
}

impl DeleteRecorder {
    /// Starts a recorder in front of `upstream` (`http://127.0.0.1:PORT`).
    pub async fn start(upstream: &str) -> DeleteRecorder {
        let acks: Acks = Arc::default();
        let seen = acks.clone();
        let observe = move |op: &str, request: &Value, answer: &Value, at: f64| {
            let (deleted, one) = match op {
                "BatchWriteItem" => {
                    let left = delete_ids(&answer["UnprocessedItems"]);
                    let mut sent = delete_ids(&request["RequestItems"]);
                    sent.retain(|id| !left.contains(id));
                    (sent, false)
                }
                "DeleteItem" => {
                    let id = request["Key"]["id"]["S"].as_str().map(str::to_owned);
                    (id.into_iter().collect(), true)
                }
                _ => return,
            };
            let mut acks = seen.lock().unwrap();
            for id in deleted {
                acks.entry(id).or_insert((at, one));
            }
        };
        let recorder =
            Recorder::start(upstream, Box::new(|_, _| Duration::ZERO), Box::new(observe)).await;
        let endpoint = recorder.endpoint.clone();
        DeleteRecorder {
            endpoint,
            acks,
            _recorder: recorder,
        }
    }
}
