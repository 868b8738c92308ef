//! moto's server mode for the expiry-event tests: local SQS, EventBridge, Firehose and S3.
//!
//! The first test that needs it starts `moto_server -H 127.0.0.1 -p <free port>` (installed into
//! `.venv` by `make tools`; `MOTO_SERVER` names another binary), waits until it answers, and the
//! test process stops it by its PID when it exits, whether its tests passed or panicked (and the
//! kernel stops it if the test process is killed). Set `MOTO_ENDPOINT` to use a moto server you
//! run.
//!
//! The helpers build what a consumer would: a queue, a bus with a rule that forwards the
//! sweeper's events to a queue, a Firehose stream into an S3 bucket; and read back what arrived.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::server::{self, repo_root, LocalServer};

static MOTO: LocalServer = LocalServer::new();

/// The endpoint of the moto server, starting one on first use.
pub fn endpoint() -> String {
    MOTO.endpoint("MOTO_ENDPOINT", start)
}

fn start() -> String {
    let binary = std::env::var("MOTO_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join(".venv/bin/moto_server"));
    assert!(
        binary.exists(),
        "moto is not installed ({}): run `make tools` (or `make test`), or set MOTO_ENDPOINT \
         to a running moto server",
        binary.display()
    );
    let port = server::free_port();
    let (log_path, log) = server::log_file("moto", port);
    let mut cmd = Command::new(&binary);
    cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
    let pid = server::spawn(cmd, log, "moto_server");
    let endpoint = format!("http://127.0.0.1:{port}");
    server::wait_until("moto", &log_path, Duration::from_secs(60), || {
        http_get(port, "/moto-api/").is_some()
    });
    eprintln!("moto on {endpoint} (pid {pid})");
    endpoint
}

fn port_of(endpoint: &str) -> u16 {
    endpoint
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("endpoint http://127.0.0.1:PORT")
}

/// A plain HTTP/1.0 request to 127.0.0.1: status and body. moto checks no S3 signature, but
/// refuses anonymous reads of objects, so the request names the test credentials.
fn http(port: u16, method: &str, path: &str) -> Option<(u16, Vec<u8>)> {
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/s3/aws4_request, \
         SignedHeaders=host, Signature=0\r\n\r\n"
    );
    server::http(port, &request, Duration::from_secs(30))
}

fn http_get(port: u16, path: &str) -> Option<Vec<u8>> {
    match http(port, "GET", path) {
        Some((200, body)) => Some(body),
        _ => None,
    }
}

/// A name unique within this test run, [`table_name`](super::table_name)'s with hyphens (a
/// Firehose stream's bucket is named like it: no underscores).
pub fn unique(prefix: &str) -> String {
    super::table_name(prefix).replace('_', "-")
}

/// Shared SDK settings for moto (region, dummy credentials, the endpoint).
pub async fn sdk(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "local", "local", None, None, "tests",
        ))
        .load()
        .await
}

pub async fn sqs() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&sdk(&endpoint()).await)
}

/// A new queue: its URL. A FIFO queue (`<name>.fifo`) has no content-based de-duplication:
/// every message names its own `MessageDeduplicationId`. moto, like SQS, drops a message whose
/// de-duplication id it saw in the last five minutes, answering success.
pub async fn create_queue(sqs: &aws_sdk_sqs::Client, name: &str, fifo: bool) -> String {
    use aws_sdk_sqs::types::QueueAttributeName;
    let mut create = sqs.create_queue().queue_name(name);
    if fifo {
        create = (create.queue_name(format!("{name}.fifo")))
            .attributes(QueueAttributeName::FifoQueue, "true")
            .attributes(QueueAttributeName::ContentBasedDeduplication, "false");
    }
    let created = create.send().await.expect("create queue");
    created.queue_url.expect("queue URL")
}

/// Receives every message now in the queue (and deletes it): the bodies as JSON.
pub async fn drain_queue(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive message");
        let messages = got.messages.unwrap_or_default();
        if messages.is_empty() {
            return out;
        }
        let mut delete = sqs.delete_message_batch().queue_url(url);
        for (i, m) in messages.iter().enumerate() {
            let body: Value = serde_json::from_str(m.body().unwrap_or_default())
                .unwrap_or_else(|e| panic!("a message body that is not JSON ({e}): {m:?}"));
            out.push(body);
            delete = delete.entries(
                aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .unwrap(),
            );
        }
        delete.send().await.expect("delete messages");
    }
}

/// An event bus whose rule `{"source": ["ttl-sweeper"]}` forwards every event to a new queue:
/// the bus name and the queue URL.
pub async fn create_bus_to_queue(name: &str) -> (String, String) {
    use aws_sdk_sqs::types::QueueAttributeName::QueueArn;
    let shared = sdk(&endpoint()).await;
    let sqs = aws_sdk_sqs::Client::new(&shared);
    let events = aws_sdk_eventbridge::Client::new(&shared);
    let queue = create_queue(&sqs, &format!("{name}-target"), false).await;
    let asked = sqs.get_queue_attributes().queue_url(&queue);
    let answer = asked.attribute_names(QueueArn).send().await;
    let attributes = answer.expect("queue attributes").attributes;
    let arn = attributes.and_then(|mut a| a.remove(&QueueArn));
    let arn = arn.expect("queue ARN");
    let bus = events.create_event_bus().name(name).send().await;
    bus.expect("create bus");
    events
        .put_rule()
        .name(format!("{name}-rule"))
        .event_bus_name(name)
        .event_pattern(r#"{"source": ["ttl-sweeper"]}"#)
        .send()
        .await
        .expect("put rule");
    events
        .put_targets()
        .rule(format!("{name}-rule"))
        .event_bus_name(name)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("queue")
                .arn(arn)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("put targets");
    (name.to_owned(), queue)
}

/// A Firehose stream (direct PUT) delivering into a new S3 bucket of the same name.
pub async fn create_firehose_to_bucket(name: &str) {
    let port = port_of(&endpoint());
    let (status, body) = http(port, "PUT", &format!("/{name}")).expect("create bucket");
    assert_eq!(
        status,
        200,
        "create bucket: {}",
        String::from_utf8_lossy(&body)
    );
    let firehose = aws_sdk_firehose::Client::new(&sdk(&endpoint()).await);
    firehose
        .create_delivery_stream()
        .delivery_stream_name(name)
        .delivery_stream_type(aws_sdk_firehose::types::DeliveryStreamType::DirectPut)
        .extended_s3_destination_configuration(
            aws_sdk_firehose::types::ExtendedS3DestinationConfiguration::builder()
                .role_arn("arn:aws:iam::123456789012:role/firehose")
                .bucket_arn(format!("arn:aws:s3:::{name}"))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("create delivery stream");
}

/// How many objects the bucket holds (the first 1,000).
pub fn bucket_object_count(bucket: &str) -> usize {
    let port = port_of(&endpoint());
    let listing =
        String::from_utf8(http_get(port, &format!("/{bucket}?list-type=2")).expect("list objects"))
            .unwrap();
    xml_values(&listing, "Key").len()
}

/// Every JSON line of every object in the bucket.
pub fn bucket_json_lines(bucket: &str) -> Vec<Value> {
    let port = port_of(&endpoint());
    let mut lines = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut path = format!("/{bucket}?list-type=2");
        if let Some(t) = &token {
            path.push_str(&format!("&continuation-token={}", percent(t)));
        }
        let listing = String::from_utf8(http_get(port, &path).expect("list objects")).unwrap();
        for key in xml_values(&listing, "Key") {
            let body = http_get(port, &format!("/{bucket}/{}", percent(&key)))
                .unwrap_or_else(|| panic!("get object {key}"));
            for line in String::from_utf8(body).unwrap().lines() {
                lines.push(serde_json::from_str(line).unwrap_or_else(|e| {
                    panic!("object {key}: a line that is not JSON ({e}): {line}")
                }));
            }
        }
        token = xml_values(&listing, "NextContinuationToken").pop();
        if token.is_none() {
            return lines;
        }
    }
}

fn xml_values(xml: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    xml.split(&open)
        .skip(1)
        .filter_map(|rest| rest.split(&close).next())
        .map(|v| v.replace("&amp;", "&"))
        .collect()
}

fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
