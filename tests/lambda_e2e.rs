//! End to end: the Lambda binary the tests built, polling cargo-lambda's local Lambda Runtime API
//! (`cargo lambda watch --only-lambda-apis`), invoked with `cargo lambda invoke` and an
//! EventBridge scheduled event, against the local DynamoDB server.
//!
//! Needs `cargo-lambda` (`make test` installs it into `.venv/`; or set `CARGO_LAMBDA`).
//!
//! Also: the Lambda binary's log lines under the local Runtime API (`tests/support/runtime_api.rs`),
//! checked for the Powertools keys, the cold start and the `ColdStart` metric.

use crate::support::{self, runtime_api, server};

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

fn cargo_lambda() -> PathBuf {
    if let Ok(path) = std::env::var("CARGO_LAMBDA") {
        return PathBuf::from(path);
    }
    let venv = server::repo_root().join(".venv/bin/cargo-lambda");
    if venv.exists() {
        return venv;
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("cargo-lambda"))
        .find(|p| p.exists());
    on_path.unwrap_or_else(|| {
        panic!(
            "cargo-lambda not found: run `make test` (installs it into .venv/), \
             `pip install cargo-lambda`, or set CARGO_LAMBDA"
        )
    })
}

/// cargo-lambda's Runtime API and the function polling it, each in its own process group, stopped
/// by its PID.
struct Watch {
    children: Vec<Child>,
    log: PathBuf,
}

impl Watch {
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log once `done` holds for it, or after 15 s.
    fn wait_log(&self, done: impl Fn(&str) -> bool) -> String {
        let (limit, every) = (Duration::from_secs(15), Duration::from_millis(100));
        poll(limit, every, || self.log_text(), |log| done(log))
    }
}

/// The JSON objects of `text`'s lines, the other lines left out.
fn json_lines(text: &str) -> Vec<Value> {
    (text.lines())
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(Value::is_object)
        .collect()
}

impl Drop for Watch {
    fn drop(&mut self) {
        for child in self.children.iter_mut().rev() {
            let pgid = child.id() as i32;
            // SAFETY: signals the process group this test created (its leader is our child).
            unsafe {
                libc::killpg(pgid, libc::SIGTERM);
            }
            let (limit, every) = (Duration::from_secs(10), Duration::from_millis(100));
            let exited = || child.try_wait().is_ok_and(|s| s.is_some());
            poll(limit, every, exited, |done| *done);
            // SAFETY: as above.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
            let _ = child.wait();
        }
    }
}

/// `cargo lambda watch --only-lambda-apis` on `port`, and the Lambda binary built for the tests
/// polling it with `env` and nothing else of the test's environment. Both write to one log file;
/// an invocation left unanswered fails after 60 s.
fn start_watch(port: u16, env: &[(String, String)]) -> Watch {
    let (log, out) = server::log_file("cargo-lambda-watch", port);
    let api = Command::new(cargo_lambda())
        .current_dir(server::repo_root())
        .args(["lambda", "watch", "--only-lambda-apis", "--timeout", "60"])
        .args(["--invoke-address", "127.0.0.1"])
        .args(["--invoke-port", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out.try_clone().unwrap())
        .process_group(0)
        .spawn()
        .expect("start cargo lambda watch");
    let mut watch = Watch {
        children: vec![api],
        log,
    };
    let (limit, every) = (Duration::from_secs(60), Duration::from_millis(100));
    let connect = || std::net::TcpStream::connect(("127.0.0.1", port));
    let listening = poll(limit, every, connect, Result::is_ok).is_ok();
    assert!(
        listening,
        "cargo lambda watch did not listen on port {port}"
    );
    let runtime_api = format!("http://127.0.0.1:{port}/.rt");
    let function = Command::new(env!("CARGO_BIN_EXE_ttl-sweeper-lambda"))
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api)
        .env("AWS_LAMBDA_FUNCTION_NAME", "ttl-sweeper-lambda")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "4096")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0)
        .spawn()
        .expect("start the Lambda binary");
    watch.children.push(function);
    watch
}

/// `cargo lambda invoke` with `event`; returns (success, stdout+stderr).
fn invoke(port: u16, event: &Value) -> (bool, String) {
    let file = std::env::temp_dir().join(format!(
        "ttl-sweeper-event-{}-{port}.json",
        std::process::id()
    ));
    std::fs::write(&file, event.to_string()).unwrap();
    let out = Command::new(cargo_lambda())
        // No function name: the emulator hands the event to the function polling it.
        .args(["lambda", "invoke", "--invoke-address", "127.0.0.1"])
        .args(["--invoke-port", &port.to_string(), "--data-file"])
        .arg(&file)
        .output()
        .expect("run cargo lambda invoke");
    let _ = std::fs::remove_file(&file);
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text.into_owned())
}

/// The scheduled event of now, through the emulator on `port`: the function's response, once
/// the invocation succeeded (its failure is shown with `watch`'s log).
fn invoke_scheduled(port: u16, watch: &Watch) -> Value {
    let mut event: Value =
        serde_json::from_slice(include_bytes!("fixtures/scheduled-event.json")).unwrap();
    event["time"] = json!(chrono::Utc::now().to_rfc3339());
    let (ok, output) = invoke(port, &event);
    let log = watch.log_text();
    assert!(ok, "invoke failed: {output}\n--- watch log ---\n{log}");
    response(&output)
}

/// The function's response: the first JSON value in `cargo lambda invoke`'s output.
fn response(output: &str) -> Value {
    let json_start = output.find('{').expect("a JSON response");
    serde_json::Deserializer::from_str(&output[json_start..])
        .into_iter::<Value>()
        .next()
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lambda_binary_sweeps_on_a_scheduled_event() {
    let (client, table) = simple_table("lambda_e2e").await;
    let now = now();
    let mut items = sessions("old", 120, |i| now - 3 - i % 200);
    items.extend(sessions("keep", 20, |i| now + 900 + i));
    put_items(&client, &table, items).await;

    let port = free_port();
    let env = local_env([
        ("TABLE_NAME", table.clone()),
        ("AWS_ENDPOINT_URL", endpoint()),
        ("METRICS_NAMESPACE", "TtlSweeperTest".into()),
    ]);
    let watch = start_watch(port, &env);

    // start_watch returns once the Runtime API listens; the emulator holds the invocation until
    // the function asks for it.
    let report = invoke_scheduled(port, &watch);
    assert_eq!(removed_json(&report), 120, "{report}");
    assert_eq!(report["items_failed"], 0);
    let left = scan_all(&client, &table).await.len();
    assert_eq!(left, 20, "only unexpired items remain");

    // A malformed event is an error and deletes nothing.
    put_items(&client, &table, vec![session("late", now - 1)]).await;
    let (ok, output) = invoke(port, &json!({"Records": [{"eventSource": "aws:s3"}]}));
    assert!(!ok, "a malformed event must fail: {output}");
    let said = output.contains("InvalidEvent") || output.contains("unsupported event");
    assert!(said, "{output}");
    assert_eq!(scan_all(&client, &table).await.len(), 21);

    // A batch of the table's stream records is for the stream indexer, which needs an expiry index
    // table: this table is swept through its GSI, so the batch is refused as a whole, saying
    // what to set, and nothing is written.
    let writer = unwindowed("writer", now + 600);
    put_items(&client, &table, vec![writer.clone()]).await;
    let record = json!({
        "eventID": "1", "eventName": "INSERT", "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "Keys": {"id": {"S": "writer"}},
            "NewImage": {"id": {"S": "writer"}, "ttl": {"N": (now + 600).to_string()}},
            "SequenceNumber": "100", "SizeBytes": 30, "StreamViewType": "NEW_IMAGE"
        }
    });
    let (ok, output) = invoke(port, &json!({ "Records": [record] }));
    assert!(!ok, "{output}");
    assert!(output.contains("EXPIRY_INDEX_TABLE"), "{output}");
    assert_eq!(get(&client, &table, "writer").await, Some(writer));
    // Its error line carries the invocation's request id, like a sweep's summary.
    let refused = |log: &str| {
        json_lines(log).iter().any(|l| {
            l["message"] == "rejected the stream batch; nothing written"
                && l["function_request_id"].is_string()
        })
    };
    let log = watch.wait_log(refused);
    assert!(refused(&log), "{log}");

    // CloudWatch sees one JSON summary line and one EMF record per sweep (written to the log
    // file a moment after the invocation ends).
    let relayed = |log: &str| {
        log.contains("\"sweep finished\"")
            && log.contains("\"CloudWatchMetrics\"")
            && log.contains("TtlSweeperTest")
    };
    let log = watch.wait_log(relayed);
    assert!(relayed(&log), "{log}");
    drop(watch);
}

/// `1-5759e988-bd862e3fe1be46a994272793`: the Root id of an X-Ray trace header.
fn is_trace_root(id: &str) -> bool {
    let parts: Vec<&str> = id.split('-').collect();
    parts.len() == 3
        && parts[0] == "1"
        && parts[1].len() == 8
        && parts[2].len() == 24
        && parts[1..]
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lambda_logs_carry_the_powertools_keys_and_a_cold_start_metric() {
    use runtime_api::{Options, Outcome, RuntimeApi, Schedule};

    let (client, table) = simple_table("powertools").await;
    let now = now();
    put_items(&client, &table, sessions("old", 10, |i| now - 5 - i)).await;

    let env = local_env([
        ("TABLE_NAME", table.clone()),
        ("AWS_ENDPOINT_URL", endpoint()),
        ("POWERTOOLS_SERVICE_NAME", "orders-expiry".into()),
        ("POWERTOOLS_METRICS_NAMESPACE", "PowertoolsTest".into()),
    ]);
    let api = RuntimeApi::start(Options::lambda("powertools", 1, env)).await;
    api.run_schedule(&Schedule {
        first: now + 1,
        period: Duration::from_secs(2),
        count: 2,
        max_delay: Duration::ZERO,
        seed: 1,
    });
    api.wait_ended(wall_clock() + 60.0).await;
    let run = api.stop();
    let text = api.log_text();
    let lines = json_lines(&text);
    let shown: Vec<String> = lines.iter().map(Value::to_string).collect();
    let context = format!("{:#?}\n{}", run.invocations, shown.join("\n"));
    let succeeded = |i: &runtime_api::Invocation| matches!(i.outcome, Outcome::Succeeded(_));
    assert!(run.invocations.iter().all(succeeded), "{context}");

    // Every log line: the Powertools keys.
    let logged: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("message").is_some())
        .collect();
    assert!(logged.len() >= 3, "{context}");
    for line in &logged {
        for key in ["level", "message", "timestamp", "service"] {
            assert!(line.get(key).is_some(), "{key} missing: {line}");
        }
        assert_eq!(line["service"], "orders-expiry", "{line}");
        assert_eq!(line["function_name"], "ttl-sweeper-powertools", "{line}");
        let timestamp = line["timestamp"].as_str().unwrap_or_default();
        let rfc3339 = chrono::DateTime::parse_from_rfc3339(timestamp).is_ok();
        assert!(rfc3339, "{line}");
    }
    // The summary line of each invocation: its request id, its trace, the cold start once.
    let summaries: Vec<&&Value> = (logged.iter())
        .filter(|l| l["message"] == "sweep finished")
        .collect();
    assert_eq!(summaries.len(), 2, "{context}");
    for (k, (line, invocation)) in summaries.iter().zip(&run.invocations).enumerate() {
        assert_eq!(line["level"], "INFO", "{line}");
        let request_id = invocation.request_id.as_str();
        assert_eq!(line["function_request_id"], request_id, "{line}");
        assert_eq!(line["cold_start"], k == 0, "{line}");
        let trace = line["xray_trace_id"].as_str().unwrap_or_default();
        assert!(is_trace_root(trace), "xray_trace_id {trace:?}: {line}");
        let arn = line["function_arn"].as_str().unwrap_or_default();
        assert!(arn.ends_with(":function:ttl-sweeper-powertools"), "{line}");
    }
    // Deleted, or found gone by the conditional retry of a batch whose answer was lost after
    // DynamoDB applied it (a slow machine).
    let count = |field: &str| summaries[0][field].as_u64().unwrap();
    assert_eq!(count("deleted") + count("gone"), 10, "{context}");
    let left = scan_all(&client, &table).await;
    assert!(left.is_empty(), "every expired item is gone");
    // docs/operations.md shows this line.
    eprintln!("summary line: {}", summaries[0]);
    // Outside an invocation (start-up): no invocation keys.
    let ready = logged.iter().find(|l| l["message"] == "ready");
    let ready = ready.expect("a ready line");
    let keys = ready.get("function_request_id").is_some() || ready.get("cold_start").is_some();
    assert!(!keys, "{ready}");

    // Metrics: one ColdStart record, by function and service; both sweeps' records; all in
    // POWERTOOLS_METRICS_NAMESPACE (METRICS_NAMESPACE is unset).
    let emf_with = |key: &str| -> Vec<&Value> {
        let emf = lines.iter().filter(|l| l.get("_aws").is_some());
        emf.filter(|r| r.get(key).is_some()).collect()
    };
    let cold = emf_with("ColdStart");
    assert_eq!(cold.len(), 1, "{context}");
    let declaration = &cold[0]["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(declaration["Namespace"], "PowertoolsTest");
    let dimensions = json!([["function_name", "service"]]);
    assert_eq!(declaration["Dimensions"], dimensions);
    cold[0].assert_fields(r#"ColdStart=1 function_name="ttl-sweeper-powertools""#);
    assert_eq!(cold[0]["service"], "orders-expiry");
    let sweeps = emf_with("ItemsDeleted");
    assert_eq!(sweeps.len(), 2, "{context}");
    for record in sweeps {
        let namespace = &record["_aws"]["CloudWatchMetrics"][0]["Namespace"];
        assert_eq!(namespace, "PowertoolsTest");
    }
}

/// The Lambda binary as deployed for two tables, the second from `TABLES` with its own delete
/// mode: one scheduled invocation sweeps both, answers both reports in order, and writes one EMF
/// record per table with its `TableName` dimension.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lambda_binary_sweeps_every_table_of_one_function() {
    let (client, first) = simple_table("lambda_e2e_a").await;
    let (_, second) = simple_table("lambda_e2e_b").await;
    let now = now();
    for (table, expired) in [(&first, 40), (&second, 25)] {
        let mut items = sessions("old", expired, |i| now - 3 - i);
        items.extend(sessions("keep", 5, |i| now + 900 + i));
        put_items(&client, table, items).await;
    }
    let port = free_port();
    let tables = format!(r#"[{{"TABLE_NAME": "{second}", "DELETE_MODE": "conditional"}}]"#);
    let env = local_env([
        ("TABLE_NAME", first.clone()),
        ("TABLES", tables),
        ("AWS_ENDPOINT_URL", endpoint()),
        ("METRICS_NAMESPACE", "TtlSweeperTest".into()),
    ]);
    let watch = start_watch(port, &env);
    let answer = invoke_scheduled(port, &watch);
    let log = watch.log_text();
    let reports = answer["tables"].as_array().expect("one report per table");
    let names: Vec<&str> = reports.iter().filter_map(|r| r["table"].as_str()).collect();
    assert_eq!(names, [first.as_str(), second.as_str()], "{answer}");
    assert_eq!(removed_json(&reports[0]), 40, "{answer}");
    assert_eq!(removed_json(&reports[1]), 25, "{answer}");
    assert_eq!(reports[1]["delete_mode"], "conditional", "{answer}");
    let dimensioned: Vec<String> = (json_lines(&log).iter())
        .filter(|v| v.get("_aws").is_some() && v.get("ItemsDeleted").is_some())
        .filter_map(|v| v["TableName"].as_str().map(str::to_owned))
        .collect();
    for table in [&first, &second] {
        let left = scan_all(&client, table).await.len();
        assert_eq!(left, 5, "only unexpired items remain");
        let has = dimensioned.contains(table);
        assert!(has, "no EMF record for {table}: {dimensioned:?}\n{log}");
    }
}
