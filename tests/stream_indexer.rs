//! The stream indexer against DynamoDB Local: batches of stream records, shaped as an event
//! source mapping delivers them to Lambda, for a table that has nothing of the sweeper's (no GSI,
//! no window attribute) and the sweeper's own expiry index table; then sweeps through that index.
//! The application's items are never written, and an entry left behind by a ttl since extended
//! or removed, or by an item since deleted, deletes nothing. Also the packs of entries a sweep
//! reads between its cursor and its instant (`store::packs`, tests/packs.rs for the rest).

use crate::support;

use aws_sdk_dynamodb::types::{AttributeValue as AV, StreamViewType};
use serde_json::{json, Value};
use support::mem_store::{Fault, MemStore, Op, When};
use support::*;
use ttl_sweeper::engine::{Stop, Sweeper};
use ttl_sweeper::expiry::{Layout, Timestamp};
use ttl_sweeper::index::{index_records, Indexed};
use ttl_sweeper::lambda::stream::index_batch;
use ttl_sweeper::store::packs::Pack;
use ttl_sweeper::store::{key_to_json, DynamoStore, ErrorKind, Key};

/// A stream record of `item` (its new image, and `old` as its old image) in DynamoDB JSON, as
/// Lambda receives it.
fn record_with(name: &str, sequence: u64, item: &Key, old: Option<&Key>) -> Value {
    let image = key_to_json(item);
    let mut change = json!({
        "Keys": { "id": image["id"].clone() },
        "NewImage": image,
        "SequenceNumber": format!("{sequence:021}"),
        "SizeBytes": 64, "StreamViewType": "NEW_IMAGE"
    });
    if let Some(old) = old {
        change["OldImage"] = key_to_json(old);
        change["StreamViewType"] = json!("NEW_AND_OLD_IMAGES");
    }
    json!({
        "eventID": format!("event-{sequence}"), "eventName": name, "eventVersion": "1.1",
        "eventSource": "aws:dynamodb", "awsRegion": "us-east-1", "dynamodb": change
    })
}

fn record(name: &str, sequence: u64, item: &Key) -> Value {
    record_with(name, sequence, item, None)
}

fn batch(records: Vec<Value>) -> Value {
    json!({ "Records": records })
}

/// `INSERT` records of `items`, their sequence numbers from `first` on.
fn inserts(items: &[Key], first: u64) -> Vec<Value> {
    let records = items.iter().enumerate();
    records
        .map(|(i, item)| record("INSERT", first + i as u64, item))
        .collect()
}

/// Indexes `records` through the Lambda handler's path and asserts that none failed.
async fn assert_indexed_ok(sweeper: &Sweeper<DynamoStore>, records: Vec<Value>) {
    let answer = index_batch(sweeper, &clock, &batch(records), None).await;
    assert_eq!(answer.unwrap(), json!({ "batchItemFailures": [] }));
}

/// The batch of `records` as the Lambda handler parses it.
fn parsed(records: Vec<Value>) -> aws_lambda_events::dynamodb::Event {
    serde_json::from_value(batch(records)).unwrap()
}

/// `records` indexed by [`index_records`] for `sweeper`.
async fn index_all(sweeper: &Sweeper<DynamoStore>, records: Vec<Value>) -> Indexed {
    index_records(
        sweeper.store(),
        sweeper.schema(),
        &clock,
        &parsed(records).records,
    )
    .await
}

/// A table with a stream and no GSI, its expiry index table, and a sweeper of it (`pairs`: more
/// settings): (client, table, index table, sweeper).
async fn setup(
    prefix: &str,
    pairs: &[(&str, &str)],
) -> (
    aws_sdk_dynamodb::Client,
    String,
    String,
    Sweeper<DynamoStore>,
) {
    let (client, table, index) = indexed_table(prefix, StreamViewType::NewAndOldImages).await;
    let mut settings = vec![("EXPIRY_INDEX_TABLE", index.as_str())];
    settings.extend_from_slice(pairs);
    let sweeper = sweeper_for(&config(&table, &settings)).await;
    (client, table, index, sweeper)
}

/// The packs of the index table that hold an entry of item `id`, each as its index item.
async fn packs_of(client: &aws_sdk_dynamodb::Client, index: &str, id: &str) -> Vec<Key> {
    let holds = |item: &Key| {
        Pack::from_item(item).is_some_and(|p| p.entries.iter().any(|e| e.key == id_key(id)))
    };
    let mut packs = scan_entries(client, index).await;
    packs.retain(holds);
    packs.sort_by_key(|p| p["entry"].as_s().unwrap().clone());
    packs
}

/// Waits until the clock has passed the due of every pack holding an entry of item `id`: a
/// sweep from then on reads them all.
async fn wait_past_packs_of(client: &aws_sdk_dynamodb::Client, index: &str, id: &str) {
    let packs = packs_of(client, index, id).await;
    let due = packs.iter().filter_map(|p| Pack::from_item(p)?.due()).max();
    let due = due.unwrap_or_else(|| panic!("no pack holds {id}"));
    let wait = (due.millis() + 1 - clock().millis()).max(0) as u64;
    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
}

/// `entries` as (item id, ttl), sorted.
fn listed(entries: &[(&str, i64)]) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = entries.iter().map(|(id, t)| (id.to_string(), *t)).collect();
    out.sort();
    out
}

#[tokio::test]
async fn items_written_with_only_a_ttl_get_entries_the_table_is_not_written_and_sweeps_delete_the_expired(
) {
    // Items written already expired are left to the sweep here (deleted as indexed: stream_esm).
    let later = [("DELETE_WHEN_INDEXED", "false")];
    let (client, table, index, sweeper) = setup("index", &later).await;
    let now = now();
    let items = [
        unwindowed("live", now + 300),
        unwindowed("expired", now - 30),
        bare("no-ttl", None),
        unwindowed("millis", (now + 300) * 1000),
        bare("text", Some(AV::S((now - 30).to_string()))),
        unwindowed("ancient", 5),
    ];
    put_items(&client, &table, items.to_vec()).await;
    let records = inserts(&items, 1);

    assert_indexed_ok(&sweeper, records.clone()).await;
    let entries = index_entries(&client, &index).await;
    let want = listed(&[("expired", now - 30), ("live", now + 300)]);
    assert_eq!(entries, want, "only usable ttls are indexed");
    // Each in a pack of its own due: the live item's at its ttl, kept two days past it; the
    // expired item's just after it was indexed, kept two days past that.
    let keep = ttl_sweeper::store::packs::KEEP_SECONDS;
    let live_packs = packs_of(&client, &index, "live").await;
    assert_eq!(live_packs.len(), 1, "{live_packs:?}");
    assert_eq!(live_packs[0]["expires"], num(now + 300 + keep));
    let expired_packs = packs_of(&client, &index, "expired").await;
    assert_eq!(expired_packs.len(), 1, "{expired_packs:?}");
    let expires: i64 = expired_packs[0]["expires"].as_n().unwrap().parse().unwrap();
    assert!(
        (now + keep..=clock().secs() + 1 + keep).contains(&expires),
        "{expired_packs:?}"
    );
    // The application's items are exactly as written: no window, no attribute of ours.
    let mut table_items = scan_all(&client, &table).await;
    table_items.sort_by_key(|i| i["id"].as_s().unwrap().clone());
    let mut written = items.to_vec();
    written.sort_by_key(|i| i["id"].as_s().unwrap().clone());
    assert_eq!(table_items, written);

    // The same batch again (at-least-once delivery): the same entries once more, in packs of
    // their own.
    let again = index_all(&sweeper, records.clone()).await;
    assert!(again.failures.is_empty(), "{:?}", again.report);
    let r = &again.report;
    assert_eq!((r.entries_written, r.expired_when_written), (2, 1), "{r:?}");
    assert_eq!(r.packs_written, 2, "{r:?}");
    assert_eq!((r.no_ttl, r.invalid_ttl), (1, 3), "{r:?}");
    let twice: Vec<(String, i64)> = (entries.iter())
        .flat_map(|e| [e.clone(), e.clone()])
        .collect();
    assert_eq!(index_entries(&client, &index).await, twice);

    // Once the expired item's packs are due, a sweep deletes it, and only it, and judges its
    // entries; the packs stay, for native TTL.
    wait_past_packs_of(&client, &index, "expired").await;
    let report = sweeper.sweep(clock(), &Stop::never()).await;
    assert!(report.is_success(), "{report:?}");
    assert_eq!(report.items_deleted, 1, "{report:?}");
    assert_eq!(report.index_entries_removed, 0, "{report:?}");
    assert!(get(&client, &table, "expired").await.is_none());
    for kept in ["live", "no-ttl", "millis", "text", "ancient"] {
        assert!(get(&client, &table, kept).await.is_some(), "{kept}");
    }
    let live_twice = listed(&[("live", now + 300), ("live", now + 300)]);
    let left = unjudged_entries(&client, &index).await;
    assert_eq!(left, live_twice, "the live item's entries stay unjudged");
    assert_eq!(
        index_entries(&client, &index).await,
        twice,
        "the packs stay"
    );

    // A record delivered once more after the sweep brings the entry back; it deletes nothing more
    // and is judged at the next sweep.
    assert_indexed_ok(&sweeper, records).await;
    let mut back = live_twice.clone();
    back.extend(listed(&[("expired", now - 30), ("live", now + 300)]));
    back.sort();
    assert_eq!(unjudged_entries(&client, &index).await, back);
    wait_past_packs_of(&client, &index, "expired").await;
    let report = sweeper.sweep(clock(), &Stop::never()).await;
    assert!(report.is_success(), "{report:?}");
    assert_eq!(
        (report.items_found, report.items_deleted),
        (1, 0),
        "{report:?}"
    );
    let thrice = listed(&[("live", now + 300); 3]);
    assert_eq!(unjudged_entries(&client, &index).await, thrice);
}

#[tokio::test]
async fn an_entry_left_by_a_ttl_extended_or_removed_or_an_item_deleted_deletes_nothing() {
    for mode in ["batch", "conditional"] {
        let (client, table, index, sweeper) =
            setup(&format!("index_stale_{mode}"), &[("DELETE_MODE", mode)]).await;
        let now = now();
        let due = now + 2;
        let names = ["extended", "no-longer", "deleted", "rewritten", "due"];
        let items = unwindowed_each(&names, due);
        put_items(&client, &table, items.clone()).await;
        assert_indexed_ok(&sweeper, inserts(&items, 1)).await;
        // The application changes its items; the indexer has not seen those records yet.
        extend_ttl(&client, &table, id_key("extended"), now + 3600).await;
        put_one(&client, &table, bare("no-longer", None)).await;
        delete_one(&client, &table, "deleted").await;
        let rewritten = bare("rewritten", Some(AV::S("later".into())));
        put_one(&client, &table, rewritten).await;

        let wait = ((due + 1) * 1000 - clock().millis()).max(0) as u64;
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        let report = sweeper.sweep(clock(), &Stop::never()).await;
        assert!(report.is_success(), "{mode}: {report:?}");
        assert_eq!(report.items_deleted, 1, "{mode}: only `due`: {report:?}");
        // Every entry read and judged against the table: the others kept, or found gone.
        let judged = report.items_deleted + report.items_skipped + report.items_gone;
        assert_eq!((report.items_found, judged), (5, 5), "{mode}: {report:?}");
        assert_eq!(report.items_gone, 1, "{mode}: `deleted`: {report:?}");
        assert_eq!(report.index_entries_removed, 0, "{mode}: {report:?}");
        assert!(get(&client, &table, "due").await.is_none());
        for kept in ["extended", "no-longer", "rewritten"] {
            assert!(get(&client, &table, kept).await.is_some(), "{mode}: {kept}");
        }
        let unjudged = unjudged_entries(&client, &index).await;
        assert!(unjudged.is_empty(), "{mode}: {unjudged:?}");
        // The pack stays, for native TTL.
        let all = names.map(|id| (id, due));
        assert_eq!(index_entries(&client, &index).await, listed(&all), "{mode}");
    }
}

#[tokio::test]
async fn a_modify_that_keeps_the_ttl_writes_nothing_and_one_that_changes_it_writes_an_entry() {
    let (client, _table, index, sweeper) = setup("index_modify", &[]).await;
    let now = now();
    let before = unwindowed("a", now + 300);
    let same = bare("a", Some(num(now + 300)));
    let longer = unwindowed("a", now + 900);
    let mut touched = same.clone();
    touched.insert("payload".into(), AV::S("changed".into()));
    let records = vec![
        record("INSERT", 1, &before),
        record_with("MODIFY", 2, &touched, Some(&before)),
        record_with("MODIFY", 3, &longer, Some(&touched)),
        record_with("REMOVE", 4, &longer, Some(&longer)),
    ];
    let indexed = index_all(&sweeper, records).await;
    let r = &indexed.report;
    assert!(indexed.failures.is_empty(), "{r:?}");
    let counts = (r.entries_written, r.ttl_unchanged, r.removes);
    assert_eq!(counts, (2, 1, 1), "{r:?}");
    assert_eq!(r.packs_written, 2, "{r:?}");
    let entries = index_entries(&client, &index).await;
    assert_eq!(entries, listed(&[("a", now + 300), ("a", now + 900)]));
}

#[tokio::test]
async fn a_malformed_record_is_answered_by_its_sequence_number_and_fails_only_its_own_item() {
    let (client, table, index, sweeper) = setup("index_bad", &[]).await;
    let now = now();
    let first = unwindowed("a", now + 300);
    let later = unwindowed("a", now + 600);
    let other = unwindowed("b", now + 300);
    let mut keyless = record("MODIFY", 7, &first);
    let image = keyless["dynamodb"]["NewImage"].as_object_mut().unwrap();
    image.remove("id");
    let mut imageless = record("INSERT", 9, &other);
    imageless["dynamodb"]
        .as_object_mut()
        .unwrap()
        .remove("NewImage");
    let records = vec![
        keyless,
        record("MODIFY", 8, &later),
        imageless,
        record("INSERT", 10, &unwindowed("c", now + 60)),
    ];
    let answer = index_batch(&sweeper, &clock, &batch(records), None).await;
    let mut answer = answer.unwrap();
    answer["batchItemFailures"]
        .as_array_mut()
        .unwrap()
        .sort_by_key(|f| f["itemIdentifier"].as_str().unwrap().to_string());
    let failures = json!({ "batchItemFailures": [
        { "itemIdentifier": format!("{:021}", 7) },
        { "itemIdentifier": format!("{:021}", 9) },
    ]});
    assert_eq!(answer, failures);
    let entries = index_entries(&client, &index).await;
    assert!(
        entries.contains(&("c".to_string(), now + 60)),
        "{entries:?}"
    );

    // A batch that is not DynamoDB Streams records fails as a whole.
    let bad = json!({ "Records": [{ "eventSource": "aws:dynamodb", "dynamodb": "?" }] });
    let err = index_batch(&sweeper, &clock, &bad, None).await;
    assert_eq!(err.unwrap_err().error_type(), "InvalidEvent");
    // So does a batch from another table's stream: its keys mean nothing here.
    let mut foreign = record("INSERT", 11, &unwindowed("d", now - 60));
    let arn = "arn:aws:dynamodb:us-east-1:000000000000:table/other/stream/2026-11-26T00:00:00.000";
    foreign["eventSourceARN"] = json!(arn);
    let before = scan_entries(&client, &index).await.len();
    let err = index_batch(&sweeper, &clock, &batch(vec![foreign.clone()]), None).await;
    let message = err.unwrap_err().to_string();
    assert!(message.contains("another table"), "{message}");
    assert_eq!(scan_entries(&client, &index).await.len(), before);
    assert_eq!(index_entries(&client, &index).await, entries);

    // A table swept through a GSI has no index to write to: its stream batches are refused.
    let gsi = sweeper_for(&config(&simple_table("index_gsi").await.1, &[])).await;
    let mut own = foreign;
    own["eventSourceARN"] = json!(format!(
        "arn:aws:dynamodb:us-east-1:000000000000:table/{}/stream/2026-11-26T00:00:00.000",
        gsi.schema().table_name
    ));
    let err = index_batch(&gsi, &clock, &batch(vec![own]), None).await;
    let message = err.unwrap_err().to_string();
    assert!(message.contains("EXPIRY_INDEX_TABLE"), "{message}");
    let _ = table;
}

/// Records whose entries the index table refuses are answered by their sequence numbers (the
/// first of each item) and written when delivered again. The batch's two packs (one per window
/// and due) go in one request, after the writers' mark; every attempt of it is throttled.
#[tokio::test(start_paused = true)]
async fn records_whose_entries_are_not_written_are_delivered_again() {
    let store = MemStore::new(Layout::default())
        .with_index_table()
        .starting_at(1_800_000_000)
        .fault(
            Op::WriteEntries,
            When::First(5),
            Fault::Fail(ErrorKind::Throttled),
        );
    let schema = store.schema();
    let records: Vec<Value> = vec![
        record("INSERT", 1, &unwindowed("a", 1_800_000_100)),
        record("MODIFY", 2, &unwindowed("a", 1_800_000_200)),
        record("INSERT", 3, &unwindowed("b", 1_800_000_100)),
    ];
    let records = parsed(records).records;
    let at = || Timestamp::from_secs(1_800_000_000);
    let failed = index_records(&store, &schema, &at, &records).await;
    let mut failures = failed.failures.clone();
    failures.sort();
    assert_eq!(failures, [format!("{:021}", 1), format!("{:021}", 3)]);
    let r = &failed.report;
    assert_eq!(
        (r.failed, r.entries_written, r.packs_written),
        (2, 0, 0),
        "{r:?}"
    );
    let calls = (store.calls(Op::MarkPacks), store.calls(Op::WriteEntries));
    assert_eq!(
        calls,
        (1, 5),
        "the mark, then every attempt of the one request"
    );
    assert_eq!(store.index_contents().listing(), []);
    let again = index_records(&store, &schema, &at, &records).await;
    assert!(again.failures.is_empty(), "{:?}", again.report);
    let r = &again.report;
    assert_eq!((r.entries_written, r.packs_written), (3, 2), "{r:?}");
    assert_eq!(store.calls(Op::WriteEntries), 6);
    let want = [
        ("a".to_string(), 1_800_000_100),
        ("a".to_string(), 1_800_000_200),
        ("b".to_string(), 1_800_000_100),
    ];
    assert_eq!(store.index_contents().listing(), want);
}

/// What no retry of the same request mends is answered apart (`refused`): a record that cannot be
/// indexed, and an entry refused as invalid; throttling through every attempt is not.
#[tokio::test(start_paused = true)]
async fn records_no_retry_mends_are_answered_apart_from_those_throttled() {
    let store = |kind| {
        MemStore::new(Layout::default())
            .with_index_table()
            .starting_at(1_800_000_000)
            .fault(Op::WriteEntries, When::Always, Fault::Fail(kind))
    };
    let item = |id: &str| unwindowed(id, 1_800_000_100);
    let mut odd = record("INSERT", 2, &item("b"));
    odd["eventName"] = json!("UPSERT");
    let records = parsed(vec![record("INSERT", 1, &item("a")), odd]).records;
    let at = || Timestamp::from_secs(1_800_000_000);
    let sequence = |n: u64| format!("{n:021}");
    for (kind, refused) in [
        (ErrorKind::Throttled, vec![sequence(2)]),
        (ErrorKind::Transient, vec![sequence(2)]),
        (ErrorKind::Auth, vec![sequence(2)]),
        (ErrorKind::Validation, vec![sequence(1), sequence(2)]),
    ] {
        let store = store(kind);
        let indexed = index_records(&store, &store.schema(), &at, &records).await;
        let mut failures = indexed.failures.clone();
        failures.sort();
        assert_eq!(failures, [sequence(1), sequence(2)], "{kind:?}");
        let mut answered = indexed.refused.clone();
        answered.sort();
        assert_eq!(answered, refused, "{kind:?}");
    }
}

/// A pack the index table leaves unprocessed through every attempt fails the records whose
/// entries are in it, and only those: the packs written beside it in the same request are
/// written, counted, and their records not delivered again. Packs go by window and due: `b`'s
/// two ttls make two packs of their own, `d`'s entry shares the first with `b`'s, and `a`'s and
/// `c`'s are each a pack of its own, all four in one request.
// The proxy serves on the runtime's other worker while the test waits on the indexer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pack_left_unprocessed_fails_only_the_records_in_it_not_those_written_beside_it() {
    use crate::support::fault_proxy::{Fault, FaultProxy, Plan};
    let (client, _table, index, sweeper) = setup("index_held", &[]).await;
    let names_b = format!("\"id\":{}", json!({ "S": "b" }));
    let plan = Plan::script(move |op, body| {
        let held = op == "BatchWriteItem" && body.to_string().contains(&names_b);
        held.then_some(Fault::HoldBack("b"))
    });
    let proxy = FaultProxy::start(&endpoint(), std::time::Duration::from_secs(5), plan).await;
    let through = store(client_of(&proxy.endpoint).await);
    let now = now();
    let records = vec![
        record("INSERT", 1, &unwindowed("a", now + 300)),
        record("INSERT", 2, &unwindowed("b", now + 310)),
        record("MODIFY", 3, &unwindowed("b", now + 600)),
        record("INSERT", 4, &unwindowed("c", now + 900)),
        record("INSERT", 5, &unwindowed("d", now + 310)),
    ];
    let records = parsed(records).records;
    let indexed = index_records(&through, sweeper.schema(), &clock, &records).await;
    let r = &indexed.report;
    let mut failures = indexed.failures.clone();
    failures.sort();
    assert_eq!(
        failures,
        [format!("{:021}", 2), format!("{:021}", 5)],
        "{r:?}"
    );
    assert!(indexed.refused.is_empty(), "{r:?}");
    let counts = (r.entries_written, r.packs_written, r.failed);
    assert_eq!(counts, (2, 2, 2), "{r:?}");
    assert!(r.errors[0].contains("unwritten"), "{r:?}");
    let entries = index_entries(&client, &index).await;
    assert_eq!(entries, listed(&[("a", now + 300), ("c", now + 900)]));
    assert!(proxy.stats.faults_total() >= 2);
}

/// Two tables can not share one expiry index table: a sweep of one would read the other's
/// entries, find their items absent and remove them, and the other table's items would never
/// expire. Of one process's tables, the configuration is refused, naming both; across
/// deployments, the index table names the table it serves (its claim), and a second table's
/// sweeper is refused at start-up, naming the first, which goes on sweeping.
#[tokio::test]
async fn a_second_table_is_refused_an_expiry_index_table_that_serves_another() {
    let client = client().await;
    let index = index_table(&client, "sharedidx").await;
    let plain = |t: &mut TableSpec<'_>| {
        t.index = false;
        t.stream = Some(StreamViewType::NewImage);
    };
    let alpha = new_table(&client, "alpha", plain).await;
    let beta = new_table(&client, "beta", plain).await;
    let sweep = |table: &str| {
        let mut cmd = local_cli();
        cmd.args(["sweep", "--table-name", table])
            .env("EXPIRY_INDEX_TABLE", &index);
        run(&mut cmd)
    };
    // One process, both tables: refused before anything is read.
    let both = format!("{alpha},{beta}");
    let mut cmd = local_cli();
    cmd.args(["sweep", "--table-name", &both])
        .env("EXPIRY_INDEX_TABLE", &index);
    let (code, _, err) = run(&mut cmd);
    assert_eq!(code, 2, "{err}");
    for want in [
        alpha.as_str(),
        beta.as_str(),
        "EXPIRY_INDEX_TABLE",
        "of its own",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    // Two deployments: alpha's sweeper claims the index table; beta's is refused, naming alpha.
    let (code, _, err) = sweep(&alpha);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = sweep(&beta);
    assert_ne!(code, 0, "beta swept through alpha's index table: {err}");
    for want in [alpha.as_str(), index.as_str(), "of its own"] {
        assert!(err.contains(want), "{want}: {err}");
    }
    let (code, _, err) = sweep(&alpha);
    assert_eq!(code, 0, "alpha goes on: {err}");
    // A tool only checks: back-fill of beta into it is refused too, and writes no claim.
    let (code, _, err) = run(&mut index_cli("backfill", &beta, &index));
    assert_ne!(code, 0, "{err}");
    assert!(err.contains(alpha.as_str()), "{err}");
    let owners = AV::S(ttl_sweeper::store::entries::OWNERS.to_owned());
    let claims: Vec<String> = scan_all(&client, &index)
        .await
        .into_iter()
        .filter(|e| e.get("window") == Some(&owners))
        .map(|e| e["entry"].as_s().unwrap().clone())
        .collect();
    assert_eq!(claims, [alpha]);
}

/// A stream invocation reports how its batch went into the index table (partition `#indexer`),
/// and the sweeper reads the report there: a record that failed counts as unindexed from its
/// creation, until a batch indexes it. No sweep reads the report.
#[tokio::test]
async fn a_stream_invocation_reports_a_failing_record_into_the_index_table_and_the_sweeper_reads_it(
) {
    use ttl_sweeper::engine::lease::unindexed_for;
    use ttl_sweeper::store::entries::INDEXER;
    use ttl_sweeper::store::Store;
    let (client, table, index, sweeper) = setup("index_report", &[]).await;
    let now = now();
    let item = unwindowed("a", now + 300);
    put_items(&client, &table, vec![item.clone()]).await;
    let created = json!(now - 40);
    let mut first = record("INSERT", 1, &unwindowed("b", now + 300));
    first["dynamodb"]["ApproximateCreationDateTime"] = created.clone();
    // A record without its new image cannot be indexed: the mapping delivers it again.
    let mut imageless = record("MODIFY", 2, &item);
    imageless["dynamodb"]["ApproximateCreationDateTime"] = created.clone();
    let whole = imageless.clone();
    imageless["dynamodb"]
        .as_object_mut()
        .unwrap()
        .remove("NewImage");
    let answer = index_batch(&sweeper, &clock, &batch(vec![first, imageless]), None).await;
    let failed = json!({ "batchItemFailures": [{ "itemIdentifier": format!("{:021}", 2) }] });
    assert_eq!(answer.unwrap(), failed);

    let items = scan_all(&client, &index).await;
    let reports: Vec<&Key> = (items.iter())
        .filter(|i| i["window"] == AV::S(INDEXER.into()))
        .collect();
    assert_eq!(
        reports.len(),
        1,
        "one report of this environment: {items:?}"
    );
    let AV::L(failing) = &reports[0]["failing"] else {
        panic!("{:?}", reports[0])
    };
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert!(reports[0].contains_key("expires"), "{:?}", reports[0]);
    // The sweeper's read (its role's Query on the index table): a record 40 s unindexed.
    let read = sweeper.store().read_indexer_reports(&index).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].failing[0].sequence, format!("{:021}", 2));
    assert_eq!(read[0].failing[0].since.secs(), now - 40);
    let behind = unindexed_for(&read, clock()).expect("a record unindexed");
    assert!(
        behind.as_secs() >= 40 && behind.as_secs() < 60,
        "{behind:?}"
    );
    assert_eq!(
        index_entries(&client, &index).await,
        listed(&[("b", now + 300)]),
        "the report is no entry"
    );

    // Delivered again, whole this time: indexed, and the report says so at once.
    assert_indexed_ok(&sweeper, vec![whole]).await;
    let read = sweeper.store().read_indexer_reports(&index).await.unwrap();
    assert_eq!(read.len(), 1);
    assert!(read[0].failing.is_empty(), "{read:?}");
    assert_eq!(unindexed_for(&read, clock()), None);
    // A sweep reads the entries, not the report: both are left, unjudged until their ttl.
    let report = sweeper.sweep(clock(), &Stop::never()).await;
    assert!(report.is_success(), "{report:?}");
    let both = listed(&[("a", now + 300), ("b", now + 300)]);
    assert_eq!(unjudged_entries(&client, &index).await, both);
    assert_eq!(index_entries(&client, &index).await, both);
}

#[tokio::test]
async fn on_dynamodb_local_a_sweep_reads_the_packs_between_the_cursor_and_its_instant() {
    // 400 items expired over the last 200 s, packed by window and ttl as a writer packs them,
    // and the mark it stores before its first pack: one sweep deletes them all through
    // `Query ... BETWEEN` pages of the index table and stores its cursor; the next finds nothing.
    use std::collections::BTreeMap;
    use ttl_sweeper::store::packs::{self, PackEntry};
    use ttl_sweeper::store::{EntryWrite, Store};
    let (client, table, index) = indexed_table("packs", StreamViewType::NewImage).await;
    let config = config(&table, &[("EXPIRY_INDEX_TABLE", index.as_str())]);
    let sweeper = sweeper_for(&config).await;
    let schema = sweeper.schema().clone();
    let now = now();
    let items: Vec<_> = (0..400)
        .map(|i| unwindowed(&format!("p-{i:03}"), now - 1 - (i % 200)))
        .collect();
    put_items(&client, &table, items.clone()).await;
    let mut groups: BTreeMap<(String, i64), Vec<PackEntry>> = BTreeMap::new();
    for item in &items {
        let ttl = ttl_of(item).unwrap();
        let window = schema.layout.window_for(ttl as f64, &item["id"]).unwrap();
        let key = id_key(item["id"].as_s().unwrap());
        let entry = PackEntry {
            key,
            ttl: ttl.to_string(),
        };
        groups.entry((window, ttl * 1000)).or_default().push(entry);
    }
    let first = Timestamp::from_secs(now - 201);
    let id = format!("{table}#all");
    let mark = packs::cursor_item(&table, first, first);
    let mut writes = vec![EntryWrite::Put(mark)];
    for ((window, due), entries) in groups {
        for pack in packs::pack(&window, Timestamp::from_millis(due), "stream-1", entries) {
            writes.push(EntryWrite::Put(pack.to_item()));
        }
    }
    let store = sweeper.store();
    for chunk in writes.chunks(25) {
        let left = store.write_entries(&schema, chunk.to_vec()).await.unwrap();
        assert!(left.is_empty());
    }
    let at = Timestamp::from_secs(now);
    let report = sweeper.sweep(at, &Stop::never()).await;
    assert!(ids(&client, &table).await.is_empty(), "{report:?}");
    assert_eq!(report.items_deleted, 400, "{report:?}");
    let cursor = || store.read_cursor(&schema, &id);
    assert_eq!(cursor().await.unwrap(), Some(at));
    let later = Timestamp::from_secs(now + 1);
    let again = sweeper.sweep(later, &Stop::never()).await;
    assert_eq!(again.items_found, 0, "{again:?}");
    assert_eq!(cursor().await.unwrap(), Some(later));
}

/// `audit` with the expiry index table finds the items the stream indexer packed (an entry in a
/// pack due at the item's ttl), and counts the item no record indexed as `missing_entry`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_finds_the_items_the_stream_indexer_packed_and_counts_the_one_it_did_not() {
    let (client, table, index, sweeper) = setup("audit", &[]).await;
    let now = now();
    let items: Vec<Key> = (0..12)
        .map(|i| unwindowed(&format!("live-{i:02}"), now + 300 + i % 3))
        .collect();
    put_items(&client, &table, items.clone()).await;
    let indexed = index_all(&sweeper, inserts(&items, 1)).await;
    assert!(indexed.failures.is_empty(), "{:?}", indexed.report);
    assert_eq!(indexed.report.packs_written, 3, "{:?}", indexed.report);
    put_items(&client, &table, vec![unwindowed("unindexed", now + 400)]).await;
    let mut audit = local_cli();
    audit
        .env("TABLE_NAME", &table)
        .env("EXPIRY_INDEX_TABLE", &index);
    let (_, report, stderr) = run_json(audit.arg("audit"));
    assert_eq!(report["missing_entry"], 1, "{report} {stderr}");
    assert_eq!(report["scanned"], 13, "{report} {stderr}");
}

/// The move of a deployment from entries of one item each to packs, on DynamoDB Local, in the
/// same index table (its key, `window`/`entry`, and the table itself unchanged): entries the
/// previous indexer wrote are read and removed by sweeps as before, while the new indexer writes
/// packs beside them, from its mark on. Nothing is stranded: every item expired is deleted, from
/// an entry or a pack, and the live ones stay listed, unjudged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_indexed_one_entry_per_item_keeps_being_swept_while_it_moves_to_packs() {
    use ttl_sweeper::store::entries::{index_item, EntryWrite, Indexing};
    use ttl_sweeper::store::Store;
    let (client, table, index, sweeper) = setup("migrate", &[]).await;
    let schema = sweeper.schema().clone();
    let describe = |name: String| {
        let client = client.clone();
        async move {
            let t = client.describe_table().table_name(name).send().await;
            let t = t.expect("describe").table.expect("table");
            (t.creation_date_time, t.key_schema)
        }
    };
    let before = describe(index.clone()).await;
    let now = now();
    // What the previous indexer wrote: an entry of one item each, from its record.
    let old = [
        unwindowed("old-expired", now - 30),
        unwindowed("old-soon", now + 2),
        unwindowed("old-live", now + 300),
    ];
    put_items(&client, &table, old.to_vec()).await;
    for (n, item) in old.iter().enumerate() {
        let at = Timestamp::from_secs(now);
        let Some(Indexing::Entry { entry, .. }) = index_item(&schema, item, &n.to_string(), at)
        else {
            panic!("{item:?} has an entry");
        };
        let put = vec![EntryWrite::Put(entry.to_item())];
        let left = sweeper.store().write_entries(&schema, put).await.unwrap();
        assert!(left.is_empty());
    }
    // The first sweep after the move: no writer has stored its mark, so no pack is read; the
    // old expired item goes through its entry.
    let report = sweeper.sweep(clock(), &Stop::never()).await;
    assert!(report.is_success(), "{report:?}");
    assert_eq!(report.items_deleted, 1, "{report:?}");
    assert!(get(&client, &table, "old-expired").await.is_none());
    // The new indexer: items written already expired, due soon and live, into packs.
    let new = [
        unwindowed("new-expired", now - 10),
        unwindowed("new-soon", now + 2),
        unwindowed("new-live", now + 300),
    ];
    put_items(&client, &table, new.to_vec()).await;
    let indexed = index_all(&sweeper, inserts(&new, 100)).await;
    assert!(indexed.failures.is_empty(), "{:?}", indexed.report);
    assert_eq!(indexed.report.packs_written, 3, "{:?}", indexed.report);
    // Sweeps past the soon items' ttls read both: the old entries and the new packs.
    wait_past_packs_of(&client, &index, "new-soon").await;
    let report = sweeper.sweep(clock(), &Stop::never()).await;
    assert!(report.is_success(), "{report:?}");
    let left = ids(&client, &table).await;
    assert_eq!(left, ["new-live", "old-live"], "{report:?}");
    let unjudged = unjudged_entries(&client, &index).await;
    let live = listed(&[("new-live", now + 300), ("old-live", now + 300)]);
    assert_eq!(unjudged, live, "the live items stay listed");
    let after = describe(index).await;
    assert_eq!(before, after, "the same index table, its key unchanged");
}
