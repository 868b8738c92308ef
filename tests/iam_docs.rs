//! The daemon's IAM lists in the docs (`<!-- iam: daemon <choice>... -->` blocks, tables of
//! `| resource | actions |`; infra/test/iam-docs.test.ts describes the format and checks the
//! function's) against what `ttl-sweeper run` sends: for each block, the daemon runs with those
//! choices through the fault proxy, recording every request, while items expire; each request's
//! operation and the resource it names must be in the block, and each action of the block must
//! have been sent, but `DeleteItem` in batch mode, which only a key read stale twice needs (the
//! code path is checked to exist instead). The tools' blocks (`<!-- iam: tool <command> <index>
//! -->`) the same way, against what `backfill` and `audit` send.

use crate::support::fault_proxy;
use crate::support::*;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::{types::StreamViewType, Client};
use fault_proxy::{FaultProxy, Plan, Seen};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

type Actions = BTreeMap<String, BTreeSet<String>>;

/// One `<!-- iam: daemon ... -->` block: where it is, its choices and its actions by resource.
#[derive(Debug)]
struct Block {
    file: String,
    choices: Vec<String>,
    actions: Actions,
}

/// The resources a daemon's block may name.
const RESOURCES: [&str; 5] = [
    "the table",
    "the table's index",
    "the expiry index table",
    "the checkpoint table",
    "the table's stream",
];

/// Every `<!-- iam: <kind> ... -->` block of README.md and docs/*.md.
fn blocks_of(kind: &str) -> Vec<Block> {
    let mut files: Vec<_> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    files.insert(0, Path::new(ROOT).join("README.md"));
    let mut blocks = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for piece in text.split(&format!("<!-- iam: {kind} ")).skip(1) {
            let (header, rest) = piece.split_once("-->").expect("a closed marker");
            let body = rest.split("<!-- /iam -->").next();
            let body = body.expect("a block ends with <!-- /iam -->");
            let choices = header.split('(').next().unwrap().split_whitespace();
            let choices = choices.map(str::to_owned).collect();
            let mut actions = Actions::new();
            let rows = body.lines().filter(|l| l.starts_with('|')).skip(2);
            for row in rows {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                let resource = RESOURCES
                    .iter()
                    .find(|r| cells[1] == **r || cells[1].starts_with(&format!("{r} (")))
                    .unwrap_or_else(|| panic!("{}: resource {:?}", path.display(), cells[1]));
                let spans = cells[2].split('`').skip(1).step_by(2);
                let listed = spans
                    .filter(|a| a.starts_with("dynamodb:"))
                    .map(str::to_owned);
                let of = actions.entry((*resource).to_owned()).or_default();
                of.extend(listed);
            }
            let file = path.strip_prefix(ROOT).unwrap().display().to_string();
            blocks.push(Block {
                file,
                choices,
                actions,
            });
        }
    }
    blocks
}

/// The tables of one run, by the resource each is.
struct Names {
    table: String,
    index_table: Option<String>,
    checkpoint: String,
}

/// The resource a request names and its action, `dynamodb:<operation>`.
fn resource_of(seen: &Seen, names: &Names) -> (String, String) {
    let action = format!("dynamodb:{}", seen.op);
    let resource = match seen.op.as_str() {
        "DescribeStream" | "GetShardIterator" | "GetRecords" => "the table's stream",
        _ => {
            let tables = seen.tables();
            assert_eq!(tables.len(), 1, "one table per request: {}", seen.body);
            let table = tables[0];
            if table == names.table && seen.body.get("IndexName").is_some() {
                "the table's index"
            } else if table == names.table {
                "the table"
            } else if Some(table) == names.index_table.as_deref() {
                "the expiry index table"
            } else if table == names.checkpoint {
                "the checkpoint table"
            } else {
                panic!("a request naming no table of the run: {}", seen.body)
            }
        }
    };
    (resource.to_owned(), action)
}

/// What the recording `proxy` saw sent: the actions by the resource each named.
fn sent_by_resource(proxy: &FaultProxy, names: &Names) -> Actions {
    let mut sent = Actions::new();
    for seen in proxy.stats.seen() {
        let (resource, action) = resource_of(&seen, names);
        sent.entry(resource).or_default().insert(action);
    }
    sent
}

/// A new table `prefix`, with an expiry index table fed by its stream if `indexed`.
async fn tables(client: &Client, prefix: &str, indexed: bool) -> (String, Option<String>) {
    if indexed {
        let (_, table, index) = indexed_table(prefix, StreamViewType::NewAndOldImages).await;
        return (table, Some(index));
    }
    (new_table(client, prefix, |_| {}).await, None)
}

/// Runs `ttl-sweeper run` with `choices` through a recording proxy while 12 items expire: what
/// it sent, by resource.
async fn requests_of_a_run(choices: &[String]) -> Actions {
    let has = |c: &str| choices.iter().any(|x| x == c);
    let follow = has("follow-stream");
    let mode = match has("conditional") {
        true => "conditional",
        false => "batch",
    };
    let client = client().await;
    let (table, index_table) = tables(&client, "iamdoc", follow).await;
    let checkpoint = checkpoint_table(&client, "iamdoc_cp").await;
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(2), Plan::Pass).await;
    proxy.record();

    let name = format!("iam-docs-{table}");
    let mut daemon = Daemon::run(&proxy.endpoint, &name, |cmd| {
        cmd.args(["--every", "1s", "--table-name", &table])
            .env("DELETE_MODE", mode)
            .env("CHECKPOINT_TABLE", &checkpoint);
        if let Some(index) = &index_table {
            cmd.arg("--follow-stream").env("EXPIRY_INDEX_TABLE", index);
        }
    });
    let ready = match follow {
        true => "following the table's stream",
        false => "running until SIGINT or SIGTERM",
    };
    tokio::task::block_in_place(|| daemon.wait_for_log(ready));

    // Items already expired and items expiring within the next seconds; with the stream, written
    // with only their ttl.
    let t0 = now();
    let item = |i: i64| {
        let (id, ttl) = (format!("item-{i}"), t0 - 3 + i % 6);
        match follow {
            true => unwindowed(&id, ttl),
            false => session(&id, ttl),
        }
    };
    put_items(&client, &table, (0..12).map(item).collect()).await;
    let started = Instant::now();
    while !id_set(&client, &table).await.is_empty() {
        let waited = started.elapsed() < Duration::from_secs(20);
        assert!(waited, "items left after 20 s:\n{}", daemon.log_text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let status = tokio::task::block_in_place(|| daemon.signal(libc::SIGTERM));
    assert!(status.success(), "{status}:\n{}", daemon.log_text());

    let names = Names {
        table,
        index_table,
        checkpoint,
    };
    sent_by_resource(&proxy, &names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_roles_in_the_docs_are_what_run_sends() {
    let blocks = blocks_of("daemon");
    let kinds: BTreeSet<bool> = (blocks.iter())
        .map(|b| b.choices.iter().any(|c| c == "follow-stream"))
        .collect();
    let both = kinds.len() == 2;
    assert!(
        both,
        "a daemon block with and one without the stream: {blocks:?}"
    );
    // Batch mode sends a key whose read is stale a second time as a conditional DeleteItem.
    let batch = Path::new(ROOT).join("src/engine/delete/batch.rs");
    let delete = std::fs::read_to_string(batch).unwrap();
    assert!(delete.contains("self.delete_conditional(twice)"));
    for block in &blocks {
        let choices = block.choices.join(" ");
        let where_ = format!("{} <!-- iam: daemon {choices} -->", block.file);
        for choice in &block.choices {
            let known = ["batch", "conditional", "gsi", "follow-stream", "checkpoint"];
            assert!(known.contains(&choice.as_str()), "{where_}: {choice}");
        }
        assert!(block.choices.iter().any(|c| c == "checkpoint"), "{where_}");
        let sent = requests_of_a_run(&block.choices).await;
        eprintln!("{where_}: sent {sent:?}");
        let batch = !block.choices.iter().any(|c| c == "conditional");
        let mut problems = Vec::new();
        for (resource, actions) in &sent {
            for action in actions {
                let listed = block
                    .actions
                    .get(resource)
                    .is_some_and(|a| a.contains(action));
                if !listed {
                    problems.push(format!("sent {action} to {resource}, not listed"));
                }
            }
        }
        for (resource, actions) in &block.actions {
            for action in actions {
                let rare = batch && resource == "the table" && action == "dynamodb:DeleteItem";
                let was_sent = sent.get(resource).is_some_and(|a| a.contains(action));
                if !was_sent && !rare {
                    problems.push(format!("lists {action} on {resource}, never sent"));
                }
            }
        }
        let problems = problems.join("\n  ");
        assert!(problems.is_empty(), "{where_}:\n  {problems}");
    }
}

/// Runs `ttl-sweeper <command>` (`backfill` or `audit`) on a table with items to back-fill and
/// judge (some expired), through a GSI (`gsi`) or an expiry index table (`index-table`), through a
/// recording proxy: what it sent, by resource.
async fn requests_of_a_tool(choices: &[String]) -> Actions {
    let has = |c: &str| choices.iter().any(|x| x == c);
    let client = client().await;
    let (table, index_table) = tables(&client, "iamtool", has("index-table")).await;
    let t0 = now();
    let items = (0..12).map(|i| unwindowed(&format!("item-{i}"), t0 - 600 + i * 100));
    put_items(&client, &table, items.collect()).await;
    let proxy = FaultProxy::start(&endpoint(), Duration::from_secs(2), Plan::Pass).await;
    proxy.record();
    let state = std::env::temp_dir().join(format!("ttl-sweeper-iam-{table}.json"));
    let mut cmd = cli();
    cmd.env("AWS_ENDPOINT_URL", &proxy.endpoint);
    if has("backfill") {
        cmd.arg("backfill").arg("--state").arg(&state);
    } else {
        cmd.arg("audit");
    }
    cmd.args(["--table-name", &table]);
    if let Some(index) = &index_table {
        cmd.args(["--expiry-index-table", index]);
    }
    let (code, out, err) = run(&mut cmd);
    let _ = std::fs::remove_file(&state);
    // Audit exits 1 on the expired items it finds: that is what it is for.
    assert!(
        code == 0 || (code == 1 && has("audit")),
        "{choices:?}: exit {code}\n{out}\n{err}"
    );
    let names = Names {
        table,
        index_table,
        checkpoint: String::new(),
    };
    sent_by_resource(&proxy, &names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_roles_in_the_docs_are_what_backfill_and_audit_send() {
    let blocks = blocks_of("tool");
    let mut runs = BTreeSet::new();
    let mut problems: Vec<String> = Vec::new();
    for block in &blocks {
        let choices = block.choices.join(" ");
        let where_ = format!("{} <!-- iam: tool {choices} -->", block.file);
        let known = ["backfill", "audit", "gsi", "index-table"];
        for choice in &block.choices {
            assert!(known.contains(&choice.as_str()), "{where_}: {choice}");
        }
        runs.insert(choices.clone());
        let sent = requests_of_a_tool(&block.choices).await;
        eprintln!("{where_}: sent {sent:?}");
        if sent != block.actions {
            problems.push(format!(
                "{where_}: sent {sent:?}, lists {:?}",
                block.actions
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let every: BTreeSet<String> = [
        "backfill gsi",
        "backfill index-table",
        "audit gsi",
        "audit index-table",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(runs, every, "a block for each command and index");
}
