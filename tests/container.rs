//! infra/container: the ECS task definition and the Kubernetes manifest checked against their
//! schemas (scripts/check-manifests.py: botocore's ECS model, kubernetes-validate), and what they
//! give the binary: every flag of their command lines is one `ttl-sweeper` takes, every variable
//! a setting it reads, and the health check's `/healthz` port the one `--metrics-addr` serves.
//! The image itself is built and run by `make image` (scripts/image.sh, scripts/image-test.sh).

use serde_json::Value;

use crate::support::server::repo_root;
use crate::support::*;

#[test]
fn the_manifests_are_valid_against_their_schemas() {
    let python = repo_root().join(".venv/bin/python");
    let script = repo_root().join("scripts/check-manifests.py");
    let out = std::process::Command::new(python).arg(script).output();
    let out = out.expect("the tools' Python (`make tools`)");
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert_eq!(said.matches(": valid").count(), 2, "{said}");
}

/// `args` parse as `ttl-sweeper` parses them (`--help` after them: clap refuses an unknown flag
/// or a bad value before it prints the help), and `variables` are settings of that command.
fn takes(args: &[String], variables: &[String]) {
    let out = cli().args(args).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {said}");
    for variable in variables {
        let read = help.contains(&format!("[env: {variable}=")) || variable == "AWS_REGION";
        assert!(read, "{args:?} reads no {variable}");
    }
}

fn strings(value: &Value) -> Vec<String> {
    let list = value.as_array().expect("a list");
    list.iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_ecs_task_runs_flags_and_settings_the_binary_takes_and_checks_its_health() {
    let path = repo_root().join("infra/container/ecs-task-definition.json");
    let task: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let container = &task["containerDefinitions"][0];
    let command = strings(&container["command"]);
    let names: Vec<String> = (container["environment"].as_array().unwrap().iter())
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    takes(&command, &names);
    let check = strings(&container["healthCheck"]["command"]);
    assert_eq!(check[..3], ["CMD", "/ttl-sweeper", "health"], "{check:?}");
    takes(&check[2..], &[]);
    let served = command.iter().skip_while(|a| *a != "--metrics-addr").nth(1);
    let asked = check.iter().skip_while(|a| *a != "--addr").nth(1);
    assert_eq!(served, asked, "the health check asks where run serves");
}

#[test]
fn the_kubernetes_deployment_runs_one_replica_with_flags_and_settings_the_binary_takes() {
    let text = std::fs::read_to_string(repo_root().join("infra/container/kubernetes.yaml"));
    let text = text.unwrap();
    let field = |key: &str| {
        let line = text.lines().find_map(|l| l.trim().strip_prefix(key));
        line.unwrap_or_else(|| panic!("no {key}")).trim().to_owned()
    };
    assert_eq!(field("replicas:"), "1");
    assert_eq!(field("type: "), "Recreate");
    let args = field("args:");
    let args: Vec<String> = (args.trim_matches(['[', ']']).split(','))
        .map(|a| a.trim().trim_matches('"').to_owned())
        .collect();
    let config = text.split("kind: ConfigMap").nth(1).unwrap();
    let data = config.split_once("\ndata:\n").unwrap().1;
    let data = data.split("---").next().unwrap();
    let variables: Vec<String> = (data.lines())
        .filter_map(|l| l.trim().split_once(':').map(|(k, _)| k.to_owned()))
        .collect();
    let table = variables.iter().any(|v| v == "TABLE_NAME");
    assert!(table, "{variables:?}");
    takes(&args, &variables);
    let port = args
        .iter()
        .skip_while(|a| *a != "--metrics-addr")
        .nth(1)
        .unwrap();
    assert!(port.ends_with(":9464"), "{port}");
    let probes = text.matches("path: /healthz").count();
    assert_eq!(probes, 2, "liveness and readiness");
}
