//! The local servers tests talk to (DynamoDB Local, moto): each started once per test process,
//! on first use, on a free port of 127.0.0.1; stopped by its PID when the process exits, and by
//! the kernel (parent-death signal) if the process is killed outright.
#![allow(dead_code, unreachable_pub)]

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

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
