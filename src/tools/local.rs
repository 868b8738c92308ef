//! TTL for a local test server (DynamoDB Local has none): `sweep --local` and `run --local`. A
//! sweep reads the whole table with Scan and deletes each item whose ttl, as read, expired by
//! [`ttl_state`], on the condition that it is still the value read; no GSI, window attribute,
//! stream or index table is needed. Its instant may be ahead of the clock (`sweep --local --at`),
//! so it sweeps only a server proved local by its table's ARN, never by the endpoint's address (a
//! port-forward on `localhost` can reach real DynamoDB): `docs/local-testing.md`.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;

use crate::expiry::window::{parse_ttl, ttl_state, TtlState};
use crate::expiry::Timestamp;
use crate::store::{key_in, ConditionalOutcome, DynamoStore, ErrorKind, Key, Scan, StoreError};

/// The Region that DynamoDB Local's table ARNs name.
pub const DYNAMODB_LOCAL_REGION: &str = "ddblocal";
/// The account that LocalStack's table ARNs name by default (no AWS account has this number).
pub const LOCAL_ACCOUNT: &str = "000000000000";

/// The operation named by the refusal of a table no local server's ARN proves.
const OPEN: &str = "local test server check";

/// A test server, as a table's ARN proves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LocalServer {
    /// Amazon DynamoDB Local: the ARN's Region is `ddblocal`.
    DynamodbLocal,
    /// LocalStack: the ARN's account is `000000000000`.
    Emulator,
}

/// Which test server the table ARN `arn` proves, if any ([`LocalServer`]).
pub fn local_server(arn: &str) -> Option<LocalServer> {
    let parts: Vec<&str> = arn.split(':').collect();
    let ["arn", _partition, "dynamodb", region, account, ..] = parts[..] else {
        return None;
    };
    match (region, account) {
        (DYNAMODB_LOCAL_REGION, _) => Some(LocalServer::DynamodbLocal),
        (_, LOCAL_ACCOUNT) => Some(LocalServer::Emulator),
        _ => None,
    }
}

/// A table on a server proved local.
#[derive(Debug, Clone)]
pub struct LocalTable {
    /// The table's name, as configured.
    pub name: String,
    /// Its key attributes, the partition key first.
    pub key: Vec<String>,
    /// The Number attribute holding the ttl (`TTL_ATTRIBUTE`).
    pub ttl_attribute: String,
    /// The server its ARN proves.
    pub server: LocalServer,
}

/// Opens `table`, refusing it unless its ARN proves a local test server.
pub async fn open(
    store: &DynamoStore,
    table: &str,
    ttl_attribute: &str,
) -> Result<LocalTable, StoreError> {
    let (arn, key) = store.table_arn_and_key(table).await?;
    let Some(server) = local_server(&arn) else {
        let message = format!(
            "--local sweeps only a local test server's tables, and table {table:?} (ARN {arn:?}) \
             is not one: DynamoDB Local's ARNs name the Region `{DYNAMODB_LOCAL_REGION}`, \
             LocalStack's the account {LOCAL_ACCOUNT}. The endpoint's address proves nothing \
             (a port-forward can reach real DynamoDB)"
        );
        return Err(StoreError::new(ErrorKind::Other, OPEN, message));
    };
    Ok(LocalTable {
        name: table.to_owned(),
        key,
        ttl_attribute: ttl_attribute.to_owned(),
        server,
    })
}

/// What one local sweep found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LocalReport {
    /// The table swept.
    pub table: String,
    /// The sweep instant (RFC 3339).
    pub at: String,
    /// Items read.
    pub scanned: u64,
    /// Items whose ttl, as read, had expired as of `at`.
    pub expired: u64,
    /// Expired items deleted.
    pub deleted: u64,
    /// Expired items kept: their ttl changed between the read and the delete.
    pub kept: u64,
    /// Expired items already gone when the delete arrived.
    pub gone: u64,
    /// Items with a ttl over 5 years before `at`: kept (a ttl in milliseconds or a wrong unit
    /// reads as far in the past or future; native TTL skips them too).
    pub too_old: u64,
}

/// Deletes every item of `table` expired as of `at`: one Scan of the table, a conditional delete
/// per expired item.
pub async fn sweep(
    store: &DynamoStore,
    table: &LocalTable,
    at: Timestamp,
) -> Result<LocalReport, StoreError> {
    let mut report = LocalReport {
        table: table.name.clone(),
        at: at.to_string(),
        ..LocalReport::default()
    };
    let mut attributes = table.key.clone();
    if !attributes.contains(&table.ttl_attribute) {
        attributes.push(table.ttl_attribute.clone());
    }
    let mut start = None;
    loop {
        let page = store
            .scan_page(&table.name, 0, 1, start, &attributes, None)
            .await?;
        for item in page.items {
            report.scanned += 1;
            let Some((key, ttl)) = expired(table, &item, at, &mut report) else {
                continue;
            };
            let (outcome, _) = store
                .delete_if_ttl_unchanged(&table.name, key, &table.ttl_attribute, ttl)
                .await?;
            match outcome {
                ConditionalOutcome::Deleted => report.deleted += 1,
                ConditionalOutcome::Kept => report.kept += 1,
                ConditionalOutcome::Gone => report.gone += 1,
            }
        }
        start = page.next;
        if start.is_none() {
            return Ok(report);
        }
    }
}

/// The key and the ttl as read of `item`, if it expired as of `at`; counts it.
fn expired(
    table: &LocalTable,
    item: &Key,
    at: Timestamp,
    report: &mut LocalReport,
) -> Option<(Key, AttributeValue)> {
    let text = item.get(&table.ttl_attribute)?.as_n().ok()?;
    match ttl_state(parse_ttl(text).ok()?, at) {
        TtlState::Live => return None,
        TtlState::TooOld => {
            report.too_old += 1;
            return None;
        }
        TtlState::Expired => report.expired += 1,
    }
    Some((key_in(&table.key, item)?, AttributeValue::N(text.clone())))
}

/// `run --local`: sweeps each of `tables` as of `now()` every `every` until `shutdown`, opening
/// each again before every sweep, so that a table dropped and created again between tests is
/// proved local and read with its key as it is now. A table not there yet (a suite creates its
/// tables after the sweeper starts) is looked for again at the next tick, and so is one whose
/// sweep failed on the way (a server not listening yet, a 5xx): logged, never silently. A table
/// that is not a local server's ends the run. Returns the sweeps' totals per table, and the error
/// that ended the run, if one did; a shutdown stops a sweep under way (each delete is conditional,
/// so one cut short deletes nothing it should not).
pub async fn run(
    store: &DynamoStore,
    tables: &[(String, String)],
    every: Duration,
    now: impl Fn() -> Timestamp,
    shutdown: impl std::future::Future,
) -> (Vec<LocalReport>, Result<(), StoreError>) {
    let mut totals: Vec<LocalReport> = (tables.iter())
        .map(|(name, _)| LocalReport {
            table: name.clone(),
            ..LocalReport::default()
        })
        .collect();
    // The last failure logged per table, so that a server down for minutes logs once, not at
    // every tick.
    let mut failing: Vec<Option<String>> = vec![None; tables.len()];
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            _ = &mut shutdown => return (totals, Ok(())),
            _ = ticks.tick() => {}
        }
        for (i, (name, ttl_attribute)) in tables.iter().enumerate() {
            let swept = async {
                let table = open(store, name, ttl_attribute).await?;
                sweep(store, &table, now()).await
            };
            let swept = tokio::select! {
                biased;
                _ = &mut shutdown => return (totals, Ok(())),
                swept = swept => swept,
            };
            match swept {
                Ok(report) => {
                    if failing[i].take().is_some() {
                        tracing::info!(table = %name, "sweeping again");
                    }
                    if report.deleted > 0 {
                        tracing::info!(table = %report.table, at = %report.at, deleted = report.deleted, "deleted expired items");
                    }
                    totals[i].at.clone_from(&report.at);
                    add_counts!(totals[i], report; scanned, expired, deleted, kept, gone, too_old);
                }
                Err(e) if e.kind == ErrorKind::NotFound => {
                    tracing::debug!(table = %name, "the table does not exist (yet)");
                }
                Err(e) if e.kind == ErrorKind::Other && e.operation == OPEN => {
                    return (totals, Err(e));
                }
                Err(e) => {
                    let said = e.to_string();
                    if failing[i].as_ref() != Some(&said) {
                        tracing::warn!(table = %name, error = %said, "sweep failed; tried again at the next tick");
                    }
                    failing[i] = Some(said);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_local_server_s_arn_proves_one() {
        let local = "arn:aws:dynamodb:ddblocal:000000000000:table/sessions";
        assert_eq!(local_server(local), Some(LocalServer::DynamodbLocal));
        let emulator = "arn:aws:dynamodb:us-east-1:000000000000:table/sessions";
        assert_eq!(local_server(emulator), Some(LocalServer::Emulator));
        for real in [
            "arn:aws:dynamodb:us-east-1:123456789012:table/sessions",
            // A table named like a mark proves nothing.
            "arn:aws:dynamodb:us-east-1:123456789012:table/ddblocal",
            "arn:aws:dynamodb:us-east-1:123456789012:table/000000000000",
            "arn:aws:sqs:ddblocal:000000000000:queue",
            "ddblocal",
            "",
        ] {
            assert_eq!(local_server(real), None, "{real}");
        }
    }

    fn table() -> LocalTable {
        LocalTable {
            name: "t".into(),
            key: vec!["id".into()],
            ttl_attribute: "ttl".into(),
            server: LocalServer::DynamodbLocal,
        }
    }

    fn item(ttl: AttributeValue) -> Key {
        Key::from([
            ("id".to_owned(), AttributeValue::S("a".into())),
            ("ttl".to_owned(), ttl),
        ])
    }

    #[test]
    fn an_item_is_expired_only_by_a_number_ttl_before_the_instant_and_not_too_old() {
        let at = Timestamp::from_millis(1_800_000_000_000);
        let mut report = LocalReport::default();
        let n = |s: &str| AttributeValue::N(s.into());
        let cases = [
            (n("1799999999"), true),
            (n("1800000000"), false),
            (n("1800000001"), false),
            // Milliseconds read as 57 000 years ahead; a 6-year-old ttl is too old.
            (n("1799999999000"), false),
            (n("1600000000"), false),
            (AttributeValue::S("1799999999".into()), false),
        ];
        for (ttl, want) in cases {
            let found = expired(&table(), &item(ttl.clone()), at, &mut report);
            assert_eq!(found.is_some(), want, "{ttl:?}");
            if let Some((key, read)) = found {
                assert_eq!(read, ttl);
                assert_eq!(key.len(), 1);
            }
        }
        assert_eq!((report.expired, report.too_old), (1, 1));
    }
}
