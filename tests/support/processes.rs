//! The binaries as child processes of a test: their environment, their logs, waiting on them.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::{endpoint, server};

/// The AWS settings of a process that talks to the test server: a region, dummy credentials,
/// and no shared config files or instance metadata. The endpoint is added per test.
pub const LOCAL_AWS_ENV: [(&str, &str); 6] = [
    ("AWS_REGION", "us-east-1"),
    ("AWS_ACCESS_KEY_ID", "local"),
    ("AWS_SECRET_ACCESS_KEY", "local"),
    ("AWS_EC2_METADATA_DISABLED", "true"),
    ("AWS_CONFIG_FILE", "/dev/null"),
    ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
];

/// [`LOCAL_AWS_ENV`] followed by `settings`, as owned pairs for a
/// process to be started.
pub fn local_env<'a>(
    settings: impl IntoIterator<Item = (&'a str, String)>,
) -> Vec<(String, String)> {
    LOCAL_AWS_ENV
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain(settings.into_iter().map(|(k, v)| (k.to_string(), v)))
        .collect()
}

/// The `ttl-sweeper` binary started from an empty environment plus [`LOCAL_AWS_ENV`]: no setting,
/// `RUST_LOG` or `~/.aws` of the developer leaks in; each test adds
/// the settings it means.
pub fn cli() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ttl-sweeper"));
    cmd.env_clear().envs(LOCAL_AWS_ENV);
    cmd
}

/// [`cli`] pointed at the test server.
pub fn local_cli() -> Command {
    let mut cmd = cli();
    cmd.env("AWS_ENDPOINT_URL", endpoint());
    cmd
}

/// `ttl-sweeper <verb> --table-name <table> --expiry-index-table <index>` against the test
/// server ([`local_cli`]).
pub fn index_cli(verb: &str, table: &str, index: &str) -> Command {
    let mut cmd = local_cli();
    cmd.args([verb, "--table-name", table, "--expiry-index-table", index]);
    cmd
}

/// Runs a command that prints a JSON report: its exit code, the report, its stderr.
pub fn run_json(cmd: &mut Command) -> (i32, serde_json::Value, String) {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout} / {stderr}"));
    (out.status.code().unwrap_or(-1), json, stderr)
}

/// [`run_json`] of a command that must succeed: its report.
#[track_caller]
pub fn json_ok(cmd: &mut Command) -> serde_json::Value {
    let (code, json, stderr) = run_json(cmd);
    assert_eq!(code, 0, "{json} {stderr}");
    json
}

/// Calls `probe` every `every` until `done` holds for its answer or `limit` has passed: the last
/// answer.
pub fn poll<T>(
    limit: Duration,
    every: Duration,
    mut probe: impl FnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let started = Instant::now();
    loop {
        let answer = probe();
        if done(&answer) || started.elapsed() > limit {
            return answer;
        }
        std::thread::sleep(every);
    }
}

/// A child process of a test, its stderr in `target/test-servers/<name>.log`; killed by its PID
/// if the test ends with it still running.
pub struct Daemon {
    pub child: std::process::Child,
    pub log: PathBuf,
}

impl Daemon {
    /// `ttl-sweeper --log-format json run` against `endpoint` (a proxy's in front of the test
    /// server, or the server's), its stdout discarded, its stderr to the log `name`; `configure`
    /// adds the run's flags and settings. The daemon of the tests that watch what one sends.
    pub fn run(endpoint: &str, name: &str, configure: impl FnOnce(&mut Command)) -> Daemon {
        let mut cmd = cli();
        cmd.args(["--log-format", "json", "run"]);
        cmd.env("AWS_ENDPOINT_URL", endpoint);
        cmd.stdout(std::process::Stdio::null());
        configure(&mut cmd);
        Daemon::spawn(&mut cmd, name)
    }

    /// Starts `cmd` (its stdout as the caller set it), its stderr to the log `name`.
    pub fn spawn(cmd: &mut Command, name: &str) -> Daemon {
        let log = server::repo_root().join(format!("target/test-servers/{name}.log"));
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let child = cmd.stderr(std::fs::File::create(&log).unwrap()).spawn();
        let child = child.expect("start the child process");
        Daemon { child, log }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (30 s at the most) until the log says `what`: the log.
    pub fn wait_for_log(&self, what: &str) -> String {
        let (limit, every) = (Duration::from_secs(30), Duration::from_millis(50));
        let text = poll(limit, every, || self.log_text(), |t| t.contains(what));
        let log = self.log.display();
        assert!(text.contains(what), "no {what:?} in {log}:\n{text}");
        text
    }

    /// Sends `signal` by its PID and waits (20 s at the most) for the exit.
    pub fn signal(&mut self, signal: i32) -> std::process::ExitStatus {
        // SAFETY: signals the child this test started, by its PID.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
        let (limit, every) = (Duration::from_secs(20), Duration::from_millis(20));
        let exited = poll(
            limit,
            every,
            || self.child.try_wait().unwrap(),
            Option::is_some,
        );
        exited.expect("did not stop")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `GET path` over HTTP/1.0 from 127.0.0.1:`port`: (status, body), or `None` while nothing
/// listens.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    let (status, body) = server::http(port, &request, Duration::from_secs(5))?;
    Some((status, String::from_utf8(body).ok()?))
}

/// Runs a command: exit code, stdout, stderr.
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run ttl-sweeper");
    (
        status.code().unwrap_or(-1),
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}
