//! The local servers tests talk to (DynamoDB Local, moto): each started once per test process,
//! on first use, on a free port of 127.0.0.1; stopped by its PID when the process exits (or
//! earlier, by [`stop`]), and by the kernel (parent-death signal) if the process is killed
//! outright. And the HTTP plumbing of
//! the servers and proxies the tests run themselves.

use std::fs::File;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::http::request::Parts;
use hyper::{HeaderMap, Method, Request, Response};
use hyper_util::rt::TokioIo;

/// One server per test process, started on first use.
pub struct LocalServer {
    endpoint: OnceLock<String>,
    start_lock: Mutex<()>,
}

impl LocalServer {
    pub const fn new() -> Self {
        LocalServer {
            endpoint: OnceLock::new(),
            start_lock: Mutex::new(()),
        }
    }

    /// The endpoint named by the environment variable `override_var`, or the one `start`
    /// answers, called once per process.
    pub fn endpoint(&self, override_var: &str, start: impl FnOnce() -> String) -> String {
        if let Ok(ep) = std::env::var(override_var) {
            return ep;
        }
        let _guard = self.start_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.endpoint.get_or_init(start).clone()
    }
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

/// `target/test-servers/<name>-<port>.log`, created.
pub fn log_file(name: &str, port: u16) -> (PathBuf, File) {
    let dir = repo_root().join("target/test-servers");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-{port}.log"));
    let file = File::create(&path).unwrap();
    (path, file)
}

static PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

extern "C" fn stop_all() {
    let pids = std::mem::take(&mut *PIDS.lock().unwrap_or_else(|e| e.into_inner()));
    for pid in pids {
        // SAFETY: plain syscalls on the PID of a child this process started.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
            let mut status = 0;
            libc::waitpid(pid as i32, &mut status, 0);
        }
    }
}

/// Starts `cmd` (stdin closed, stdout and stderr to `log`) and answers its PID, stopped when
/// this process exits. It is spawned from a thread that lives as long as the process, so that
/// the parent-death signal (tied to the spawning thread) stops it even if this process is killed.
pub fn spawn(mut cmd: Command, log: File, what: &str) -> u32 {
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    let what = what.to_owned();
    let (tx, rx) = std::sync::mpsc::channel::<Child>();
    std::thread::spawn(move || {
        // SAFETY: prctl is async-signal-safe; it only asks for SIGTERM when the parent dies.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        tx.send(child).unwrap();
        loop {
            std::thread::park();
        }
    });
    let child = rx.recv().expect("server started");
    let pid = child.id();
    PIDS.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
    // SAFETY: registers a plain extern "C" function to run at process exit.
    AT_EXIT.call_once(|| unsafe {
        libc::atexit(stop_all);
    });
    // Reaped by `stop_all`.
    std::mem::forget(child);
    pid
}

/// Stops a server [`spawn`] started, before this process exits: SIGTERM by its PID, then waits
/// for it to exit (SIGKILL after 30 s).
pub fn stop(pid: u32) {
    PIDS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&p| p != pid);
    let started = Instant::now();
    // SAFETY: plain syscalls on the PID of a child this process started and has not reaped.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
        let mut status = 0;
        while libc::waitpid(pid as i32, &mut status, libc::WNOHANG) == 0 {
            if started.elapsed() > Duration::from_secs(30) {
                libc::kill(pid as i32, libc::SIGKILL);
                libc::waitpid(pid as i32, &mut status, 0);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Polls `ready` until it holds; panics after `timeout`, pointing at `log`.
pub fn wait_until(what: &str, log: &Path, timeout: Duration, ready: impl Fn() -> bool) {
    let started = Instant::now();
    while !ready() {
        assert!(
            started.elapsed() < timeout,
            "{what} did not answer within {timeout:?}; see {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `request` (its head) sent over HTTP/1.0 to 127.0.0.1:`port`, its answer awaited `timeout` at
/// the most: the answer's status and body, or `None` while nothing listens.
pub fn http(port: u16, request: &str, timeout: Duration) -> Option<(u16, Vec<u8>)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let split = out.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, out[split + 4..].to_vec()))
}

/// A listener on a free port of 127.0.0.1.
pub async fn listen() -> tokio::net::TcpListener {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0));
    listener.await.expect("bind on 127.0.0.1")
}

/// Serves HTTP/1 on `listener`, each request answered by `handle` (given the socket of the
/// connection it arrived on), until the task is aborted.
pub fn serve<F, A, E>(listener: tokio::net::TcpListener, handle: F) -> tokio::task::JoinHandle<()>
where
    F: Fn(RawFd, Request<Incoming>) -> A + Clone + Send + Sync + 'static,
    A: std::future::Future<Output = Result<Response<Full<Bytes>>, E>> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (fd, handle) = (stream.as_raw_fd(), handle.clone());
            let service = hyper::service::service_fn(move |req| handle(fd, req));
            tokio::spawn(async move {
                let http = hyper::server::conn::http1::Builder::new();
                let _ = http.serve_connection(TokioIo::new(stream), service).await;
            });
        }
    })
}

/// The whole of `body` (empty if it could not be read).
pub async fn collected(body: Incoming) -> Bytes {
    let body = body.collect().await;
    body.map(|b| b.to_bytes()).unwrap_or_default()
}

/// A request's head, its whole body (empty if it could not be read) and the operation its
/// `x-amz-target` names (empty if none).
pub async fn read_request(req: Request<Incoming>) -> (Parts, Bytes, String) {
    let (parts, body) = req.into_parts();
    let body = collected(body).await;
    let op = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit('.').next())
        .unwrap_or("")
        .to_owned();
    (parts, body, op)
}

/// A request of `method` to `uri` with `headers` (but `host` and `content-length`) and `body`.
pub fn passed_on(
    method: Method,
    uri: String,
    headers: &HeaderMap,
    body: Bytes,
) -> Request<Full<Bytes>> {
    let mut req = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        if name != "host" && name != "content-length" {
            req = req.header(name, value);
        }
    }
    req.body(Full::new(body)).unwrap()
}

/// An answer with the JSON `body`.
pub fn json_reply(status: u16, body: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap()
}
