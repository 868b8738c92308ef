//! A local AWS Lambda Runtime API that runs the real Lambda binary, unmodified, as K execution
//! environments and invokes it on a simulated schedule.
//!
//! - Each execution environment is one child process of the binary with its own Runtime API
//!   endpoint (`AWS_LAMBDA_RUNTIME_API=127.0.0.1:PORT`, one port per environment, as each Lambda
//!   sandbox has its own), started from a cleared environment plus the variables Lambda sets
//!   (`AWS_LAMBDA_FUNCTION_NAME`, `..._MEMORY_SIZE`, `..._VERSION`, `AWS_LAMBDA_LOG_STREAM_NAME`)
//!   and those the caller passes. Its output goes to a log file. It is stopped by its own PID
//!   when the API stops or is dropped.
//! - The endpoints: `GET /2018-06-01/runtime/invocation/next` (long poll; answers with the event
//!   and `Lambda-Runtime-Aws-Request-Id`, `Lambda-Runtime-Deadline-Ms` = now + the function's
//!   timeout, `Lambda-Runtime-Invoked-Function-Arn`, `Lambda-Runtime-Trace-Id`), `POST
//!   .../invocation/{id}/response`, `POST .../invocation/{id}/error`, `POST .../init/error`.
//!   `lambda_runtime` 1.x requires the request id and deadline headers and the
//!   `AWS_LAMBDA_FUNCTION_NAME`, `..._MEMORY_SIZE`, `..._VERSION` and `AWS_LAMBDA_RUNTIME_API`
//!   variables; the others are optional to it.
//! - The schedule: every period P, an event `{"time": "<scheduled time>"}` (whole seconds, like
//!   EventBridge Scheduler's `<aws.scheduler.scheduled-time>`) is delivered after a seeded random
//!   delay, uniform in [0, D]. A delivered event waits (first in, first out) while every
//!   environment is busy: K environments model a reserved concurrency of K.
//! - An invocation still running at its deadline times out: its environment is killed and a
//!   fresh one started, as Lambda does.
//! - [`RuntimeApi::invoke`] delivers any event (a stream batch, as an event source mapping
//!   invokes the function) and waits for its outcome, as a synchronous invocation does.
//!
//! Everything listens on 127.0.0.1 only.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::server::{json_reply, listen, read_request, serve};
use super::wall_clock;

/// The function and its execution environments.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Lambda binary (a `bootstrap`).
    pub binary: PathBuf,
    /// Execution environments (processes): the reserved concurrency.
    pub environments: usize,
    /// The function's timeout: each invocation's deadline is its start plus this.
    pub timeout: Duration,
    /// The function's environment variables (settings, AWS region, credentials, endpoint).
    pub env: Vec<(String, String)>,
    /// Where each environment's output goes (`runtime-api-<port>.log`).
    pub log_dir: PathBuf,
    /// `AWS_LAMBDA_FUNCTION_NAME`.
    pub function_name: String,
}

impl Options {
    /// The Lambda binary as the function `ttl-sweeper-<name>`: `environments` execution
    /// environments with `env` and a 30 s timeout, logging into a fresh
    /// `target/test-servers/<name>-<pid>`.
    pub fn lambda(name: &str, environments: usize, env: Vec<(String, String)>) -> Options {
        let log_dir = format!("target/test-servers/{name}-{}", std::process::id());
        let log_dir = super::server::repo_root().join(log_dir);
        let _ = std::fs::remove_dir_all(&log_dir);
        Options {
            binary: PathBuf::from(env!("CARGO_BIN_EXE_ttl-sweeper-lambda")),
            environments,
            timeout: Duration::from_secs(30),
            env,
            log_dir,
            function_name: format!("ttl-sweeper-{name}"),
        }
    }
}

/// A simulated schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Scheduled time of the first event, epoch seconds.
    pub first: i64,
    /// Period between scheduled times (whole seconds).
    pub period: Duration,
    /// Number of events.
    pub count: usize,
    /// Each event is delivered after a delay uniform in [0, max_delay].
    pub max_delay: Duration,
    /// Seed of the delays.
    pub seed: u64,
}

/// What became of an invocation.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Not yet delivered, or waiting for a free environment.
    Waiting,
    /// Handed to an environment, no answer yet.
    Running,
    /// `POST .../response`, with the function's result.
    Succeeded(Value),
    /// `POST .../error`, with the error body.
    Failed(String),
    /// No answer by the deadline: the environment was killed.
    TimedOut,
    /// Still running (or waiting) when the API stopped.
    Stopped,
}

/// One scheduled invocation.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub request_id: String,
    /// The event's scheduled time (epoch seconds).
    pub scheduled: f64,
    /// When the schedule delivered it: scheduled time plus the random delay.
    pub delivered: f64,
    /// The environment that ran it.
    pub env: Option<usize>,
    /// When an environment received it (`/next` answered).
    pub start: Option<f64>,
    /// Its deadline (start + timeout).
    pub deadline: Option<f64>,
    /// When it answered, timed out or was stopped.
    pub end: Option<f64>,
    pub outcome: Outcome,
}

impl Invocation {
    /// Time spent waiting for a free environment after delivery (the sub-second benchmark).
    pub fn waited(&self) -> Option<f64> {
        self.start.map(|s| s - self.delivered)
    }

    /// Ends it now with `outcome`, if it is running.
    fn end_running(&mut self, outcome: Outcome) {
        if self.outcome == Outcome::Running {
            self.outcome = outcome;
            self.end = Some(wall_clock());
        }
    }
}

/// What a run produced, after [`RuntimeApi::stop`].
#[derive(Debug, Clone)]
pub struct Run {
    pub invocations: Vec<Invocation>,
    /// Bodies of `POST /runtime/init/error`.
    pub init_errors: Vec<String>,
    /// When the API stopped (epoch seconds).
    pub stopped_at: f64,
}

impl Run {
    /// Invocations that reached an environment.
    pub fn started(&self) -> impl Iterator<Item = &Invocation> {
        self.invocations.iter().filter(|i| i.start.is_some())
    }

    /// The most invocations running at the same time.
    pub fn max_concurrency(&self) -> usize {
        let mut edges: Vec<(f64, i32)> = Vec::new();
        for i in self.started() {
            edges.push((i.start.unwrap(), 1));
            edges.push((i.end.unwrap_or(self.stopped_at), -1));
        }
        // Ends before starts at the same instant.
        edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let (mut now, mut max) = (0i32, 0i32);
        for (_, d) in edges {
            now += d;
            max = max.max(now);
        }
        max as usize
    }

    /// One line per invocation, times in seconds relative to `origin`.
    pub fn describe(&self, origin: f64) -> String {
        let rel = |t: Option<f64>| t.map_or("-".to_owned(), |t| format!("{:+.2}", t - origin));
        self.invocations
            .iter()
            .map(|i| {
                let outcome = match &i.outcome {
                    Outcome::Succeeded(v) => {
                        format!("ok (deleted {}, ticks {})", v["items_deleted"], v["ticks"])
                    }
                    Outcome::Failed(e) => format!("error {e}"),
                    other => format!("{other:?}"),
                };
                format!(
                    "  {} scheduled {} delivered {} start {} end {} env {} {}",
                    i.request_id,
                    rel(Some(i.scheduled)),
                    rel(Some(i.delivered)),
                    rel(i.start),
                    rel(i.end),
                    i.env.map_or("-".to_owned(), |e| e.to_string()),
                    outcome
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// What `/next` answers.
struct Delivery {
    request_id: String,
    body: String,
    deadline_ms: i64,
}

#[derive(Default)]
struct Env {
    port: u16,
    child: Option<Child>,
    /// The pending `/next` of an idle environment.
    waiter: Option<oneshot::Sender<Delivery>>,
    /// The invocation it is running (index).
    current: Option<usize>,
    /// Whether it has asked for an event since its process started.
    ready: bool,
    starts: usize,
}

#[derive(Default)]
struct State {
    envs: Vec<Env>,
    /// Delivered events waiting for an environment (indices into `invocations`).
    queue: VecDeque<usize>,
    invocations: Vec<Invocation>,
    by_id: HashMap<String, usize>,
    /// The events of invocations not from the schedule ([`RuntimeApi::invoke`]), by index.
    events: HashMap<usize, String>,
    init_errors: Vec<String>,
    stopped: bool,
    /// No more events are handed out ([`RuntimeApi::drain`]).
    draining: bool,
}

impl State {
    /// Adds invocation `request_id`, waiting for its delivery: its index.
    fn add(&mut self, request_id: String, scheduled: f64, delivered: f64) -> usize {
        let idx = self.invocations.len();
        self.by_id.insert(request_id.clone(), idx);
        self.invocations.push(Invocation {
            request_id,
            scheduled,
            delivered,
            env: None,
            start: None,
            deadline: None,
            end: None,
            outcome: Outcome::Waiting,
        });
        idx
    }
}

struct Inner {
    options: Options,
    state: Mutex<State>,
}

impl Inner {
    /// The state, even after a panic elsewhere (so that stopping on drop still works).
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running Runtime API and its execution environments.
pub struct RuntimeApi {
    inner: Arc<Inner>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl RuntimeApi {
    /// Starts the endpoints and the environments, and waits until every environment has finished
    /// its initialisation and asked for an event. Panics (with the log's tail) when one exits or
    /// fails to start within two minutes.
    pub async fn start(options: Options) -> RuntimeApi {
        std::fs::create_dir_all(&options.log_dir).unwrap();
        let mut listeners = Vec::new();
        for _ in 0..options.environments {
            listeners.push(listen().await);
        }
        let port = |l: &tokio::net::TcpListener| l.local_addr().unwrap().port();
        let envs = listeners.iter().map(|l| Env {
            port: port(l),
            ..Env::default()
        });
        let state = Mutex::new(State {
            envs: envs.collect(),
            ..State::default()
        });
        let inner = Arc::new(Inner { options, state });
        let mut tasks = Vec::new();
        for (env, listener) in listeners.into_iter().enumerate() {
            let inner = inner.clone();
            tasks.push(serve(listener, move |_, req| {
                handle(inner.clone(), env, req)
            }));
        }
        {
            let mut st = inner.state();
            for env in 0..st.envs.len() {
                spawn_env(&inner.options, &mut st.envs[env]);
            }
        }
        let api = RuntimeApi {
            inner,
            tasks: Mutex::new(tasks),
        };
        let started = std::time::Instant::now();
        loop {
            {
                let mut st = api.inner.state();
                if st.envs.iter().all(|e| e.ready) {
                    break;
                }
                for e in st.envs.iter_mut() {
                    if let Some(status) = e.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
                    {
                        panic!(
                            "execution environment on port {} exited during init ({status}):\n{}",
                            e.port,
                            log_tail(&api.inner.options, e.port)
                        );
                    }
                }
                if started.elapsed() > Duration::from_secs(120) {
                    let port = st.envs.iter().find(|e| !e.ready).unwrap().port;
                    panic!(
                        "execution environment on port {port} did not ask for an event within 120 s:\n{}",
                        log_tail(&api.inner.options, port)
                    );
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        api
    }

    /// Plans `schedule`'s events (seeded delays) and delivers each at its time. Returns the
    /// planned `(scheduled, delivered)` times.
    pub fn run_schedule(&self, schedule: &Schedule) -> Vec<(f64, f64)> {
        let mut rng = fastrand::Rng::with_seed(schedule.seed);
        let period = schedule.period.as_secs() as i64;
        let mut plan: Vec<(usize, f64)> = Vec::new();
        let mut planned = Vec::new();
        {
            let mut st = self.inner.state();
            for k in 0..schedule.count {
                let scheduled = schedule.first + k as i64 * period;
                let delay = rng.f64() * schedule.max_delay.as_secs_f64();
                // Millisecond delays, like every other time here.
                let delivered = scheduled as f64 + (delay * 1000.0).round() / 1000.0;
                let request_id = format!("{:08x}-{k:04}", rng.u32(..));
                let idx = st.add(request_id, scheduled as f64, delivered);
                plan.push((idx, delivered));
                planned.push((scheduled as f64, delivered));
            }
        }
        plan.sort_by(|a, b| a.1.total_cmp(&b.1));
        let inner = self.inner.clone();
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tokio::spawn(async move {
                for (idx, at) in plan {
                    let wait = at - wall_clock();
                    if wait > 0.0 {
                        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
                    }
                    let mut st = inner.state();
                    if st.stopped {
                        return;
                    }
                    st.queue.push_back(idx);
                    dispatch(&inner, &mut st);
                }
            }));
        planned
    }

    /// Delivers `event` to the first free environment (it waits while every one is busy) and
    /// waits until it answers, fails or times out: the invocation, its outcome final.
    pub async fn invoke(&self, event: &Value) -> Invocation {
        let idx = {
            let mut st = self.inner.state();
            let (idx, now) = (st.invocations.len(), wall_clock());
            let request_id = format!("{:08x}-e{idx:04}", fastrand::u32(..));
            st.events.insert(idx, event.to_string());
            st.add(request_id, now, now);
            st.queue.push_back(idx);
            dispatch(&self.inner, &mut st);
            idx
        };
        loop {
            let invocation = self.inner.state().invocations[idx].clone();
            if !matches!(invocation.outcome, Outcome::Waiting | Outcome::Running) {
                return invocation;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until no invocation is waiting or running, or the wall clock reads `until`.
    pub async fn wait_ended(&self, until: f64) {
        let pending = |i: &Invocation| matches!(i.outcome, Outcome::Waiting | Outcome::Running);
        self.wait_while(until, pending).await;
    }

    /// Waits until no invocation is `pending`, or the wall clock reads `until`.
    async fn wait_while(&self, until: f64, pending: impl Fn(&Invocation) -> bool) {
        while wall_clock() < until && self.invocations().iter().any(&pending) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Hands out no more events (those still waiting end [`Outcome::Stopped`] at
    /// [`RuntimeApi::stop`]) and waits until every invocation handed out has ended: answered, or
    /// killed at its deadline. So that stopping kills no process in the middle of an invocation.
    pub async fn drain(&self) {
        let running = |i: &Invocation| i.outcome == Outcome::Running;
        let until = {
            let mut st = self.inner.state();
            st.draining = true;
            let deadlines = st.invocations.iter().filter(|i| running(i));
            deadlines.filter_map(|i| i.deadline).fold(0.0, f64::max) + 5.0
        };
        self.wait_while(until, running).await;
    }

    /// A snapshot of the invocations so far.
    pub fn invocations(&self) -> Vec<Invocation> {
        self.inner.state().invocations.clone()
    }

    /// Stops the schedule and every environment (SIGTERM, then SIGKILL after 3 s, by PID) and
    /// returns what happened.
    pub fn stop(&self) -> Run {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        tasks.iter().for_each(JoinHandle::abort);
        let mut st = self.inner.state();
        st.stopped = true;
        let stopped_at = wall_clock();
        for env in st.envs.iter_mut() {
            env.waiter = None;
            if let Some(child) = env.child.take() {
                terminate(child);
            }
        }
        for i in st.invocations.iter_mut() {
            if matches!(i.outcome, Outcome::Waiting | Outcome::Running) {
                i.outcome = Outcome::Stopped;
            }
        }
        Run {
            invocations: st.invocations.clone(),
            init_errors: st.init_errors.clone(),
            stopped_at,
        }
    }

    /// Kills environment `env`'s process with SIGKILL, by its PID, as a crash would end it: the
    /// invocation it was running fails (`"killed"`) and a fresh process starts in its place (a
    /// cold start), as Lambda replaces a crashed environment. Returns the PID killed, or `None`
    /// when the environment had no running process or the API has stopped.
    pub fn kill_environment(&self, env: usize) -> Option<u32> {
        let mut st = self.inner.state();
        if st.stopped || env >= st.envs.len() {
            return None;
        }
        let mut child = st.envs[env].child.take()?;
        if !matches!(child.try_wait(), Ok(None)) {
            st.envs[env].child = Some(child);
            return None;
        }
        let pid = child.id();
        let _ = child.kill();
        let _ = child.wait();
        if let Some(idx) = st.envs[env].current.take() {
            st.invocations[idx].end_running(Outcome::Failed("killed".into()));
        }
        spawn_env(&self.inner.options, &mut st.envs[env]);
        Some(pid)
    }

    /// The log files of the environments.
    pub fn logs(&self) -> Vec<PathBuf> {
        let st = self.inner.state();
        st.envs
            .iter()
            .map(|e| log_path(&self.inner.options, e.port))
            .collect()
    }

    /// The environments' log lines, one log file after the other.
    pub fn log_text(&self) -> String {
        let logs = self.logs().into_iter();
        let text = logs.map(|log| std::fs::read_to_string(log).unwrap_or_default());
        text.collect::<Vec<_>>().join("\n")
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        if !self.inner.state().stopped {
            self.stop();
        }
    }
}

fn log_path(options: &Options, port: u16) -> PathBuf {
    options.log_dir.join(format!("runtime-api-{port}.log"))
}

fn log_tail(options: &Options, port: u16) -> String {
    let text = std::fs::read_to_string(log_path(options, port)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Starts (or restarts) an environment's process.
fn spawn_env(options: &Options, env: &mut Env) {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path(options, env.port))
        .unwrap();
    let child = Command::new(&options.binary)
        .env_clear()
        .envs(options.env.iter().map(|(k, v)| (k, v)))
        .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{}", env.port))
        .env("AWS_LAMBDA_FUNCTION_NAME", &options.function_name)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env(
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/{}", options.function_name),
        )
        .env(
            "AWS_LAMBDA_LOG_STREAM_NAME",
            format!("local/[$LATEST]{}-{}", env.port, env.starts),
        )
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", options.binary.display()));
    env.child = Some(child);
    env.ready = false;
    env.waiter = None;
    env.current = None;
    env.starts += 1;
}

/// SIGTERM, then SIGKILL if it has not exited within 3 s; reaps it.
fn terminate(mut child: Child) {
    // SAFETY: signals the child this API started, by its PID (not yet reaped: still ours).
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let until = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Hands waiting events to idle environments, oldest event first.
fn dispatch(inner: &Arc<Inner>, st: &mut State) {
    if st.draining {
        return;
    }
    while let Some(&idx) = st.queue.front() {
        let Some(env) = st.envs.iter().position(|e| e.waiter.is_some()) else {
            return; // every environment is busy: the event waits
        };
        let waiter = st.envs[env].waiter.take().unwrap();
        let start = wall_clock();
        let deadline = start + inner.options.timeout.as_secs_f64();
        let inv = &st.invocations[idx];
        let time = chrono::DateTime::from_timestamp(inv.scheduled as i64, 0)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let body = match st.events.get(&idx) {
            Some(event) => event.clone(),
            None => json!({ "time": time }).to_string(),
        };
        let delivery = Delivery {
            request_id: inv.request_id.clone(),
            body,
            deadline_ms: (deadline * 1000.0).round() as i64,
        };
        if waiter.send(delivery).is_err() {
            continue; // that poll was abandoned (its process is gone): try another environment
        }
        st.queue.pop_front();
        let inv = &mut st.invocations[idx];
        inv.env = Some(env);
        inv.start = Some(start);
        inv.deadline = Some(deadline);
        inv.outcome = Outcome::Running;
        st.envs[env].current = Some(idx);
        let inner = inner.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64((deadline - wall_clock()).max(0.0))).await;
            let mut st = inner.state();
            if st.stopped || st.invocations[idx].outcome != Outcome::Running {
                return;
            }
            // Lambda stops an invocation at its deadline; the environment is replaced.
            st.invocations[idx].end_running(Outcome::TimedOut);
            let e = &mut st.envs[env];
            if let Some(mut child) = e.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
            spawn_env(&inner.options, e);
        });
    }
}

/// An environment polls for its next event: it is idle, and takes the oldest waiting one.
fn idle(inner: &Arc<Inner>, st: &mut State, env: usize, tx: oneshot::Sender<Delivery>) {
    let e = &mut st.envs[env];
    e.ready = true;
    if let Some(idx) = e.current.take() {
        // Asked for the next event without answering this one.
        let outcome = Outcome::Failed("no response before the next /next".into());
        st.invocations[idx].end_running(outcome);
    }
    st.envs[env].waiter = Some(tx);
    dispatch(inner, st);
}

type HttpResponse = Response<Full<Bytes>>;

async fn handle(
    inner: Arc<Inner>,
    env: usize,
    req: Request<Incoming>,
) -> Result<HttpResponse, Infallible> {
    let (parts, body, _) = read_request(req).await;
    let (method, path) = (parts.method, parts.uri.path());
    let Some(rest) = path.strip_prefix("/2018-06-01/runtime/") else {
        return Ok(json_reply(404, r#"{"errorType":"NotFound"}"#));
    };
    if method == Method::GET && rest == "invocation/next" {
        return Ok(next(&inner, env).await);
    }
    if method != Method::POST {
        return Ok(json_reply(405, r#"{"errorType":"MethodNotAllowed"}"#));
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    if rest == "init/error" {
        let mut st = inner.state();
        st.init_errors.push(text);
        return Ok(json_reply(202, r#"{"status":"OK"}"#));
    }
    let Some((id, kind)) = rest
        .strip_prefix("invocation/")
        .and_then(|r| r.rsplit_once('/'))
    else {
        return Ok(json_reply(404, r#"{"errorType":"NotFound"}"#));
    };
    let outcome = match kind {
        "response" => {
            Outcome::Succeeded(serde_json::from_str(&text).unwrap_or(Value::String(text)))
        }
        "error" => Outcome::Failed(text),
        _ => return Ok(json_reply(404, r#"{"errorType":"NotFound"}"#)),
    };
    let mut st = inner.state();
    let Some(&idx) = st.by_id.get(id) else {
        return Ok(json_reply(400, r#"{"errorType":"InvalidRequestID"}"#));
    };
    if st.invocations[idx].outcome != Outcome::Running || st.envs[env].current != Some(idx) {
        return Ok(json_reply(400, r#"{"errorType":"InvalidStateTransition"}"#));
    }
    st.invocations[idx].end_running(outcome);
    st.envs[env].current = None;
    Ok(json_reply(202, r#"{"status":"OK"}"#))
}

/// `GET .../invocation/next`: the environment is idle until an event arrives.
async fn next(inner: &Arc<Inner>, env: usize) -> HttpResponse {
    let (tx, rx) = oneshot::channel();
    {
        let mut st = inner.state();
        if !st.stopped {
            idle(inner, &mut st, env, tx);
        }
    }
    let Ok(d) = rx.await else {
        // Stopped (`tx` dropped unused), or this environment was replaced: never answered.
        return std::future::pending().await;
    };
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("Lambda-Runtime-Aws-Request-Id", &d.request_id)
        .header("Lambda-Runtime-Deadline-Ms", d.deadline_ms.to_string())
        .header(
            "Lambda-Runtime-Invoked-Function-Arn",
            format!(
                "arn:aws:lambda:us-east-1:123456789012:function:{}",
                inner.options.function_name
            ),
        )
        .header(
            "Lambda-Runtime-Trace-Id",
            format!(
                "Root=1-{:08x}-{:024x};Parent={:016x};Sampled=0",
                d.deadline_ms / 1000,
                fastrand::u128(..) >> 32,
                fastrand::u64(..)
            ),
        )
        .body(Full::new(Bytes::from(d.body)))
        .unwrap()
}
