//! Capacity units counted from item sizes by DynamoDB's published rules, at a pass-through proxy:
//! [`Meter`]. DynamoDB Local reports `ConsumedCapacity`, but not as DynamoDB bills it (a batch
//! delete, or a batch read of a missing item, comes back as nothing), so the units are counted
//! here from the items themselves.
//!
//! The rules (DynamoDB developer guide, "Item sizes and formats" and "Read/write capacity mode"):
//! - an item's size is the sum of its attribute names' UTF-8 bytes and its values' sizes: a String
//!   its UTF-8 bytes, a Binary its bytes, a Number about one byte per two significant digits plus
//!   one, a Boolean or Null one byte, a List or Map three bytes plus its elements plus one byte
//!   per element, a set the sum of its elements;
//! - a write is one write unit per KB (1,024 bytes) of the item, rounded up, at least one: a put
//!   bills the larger of the item it replaces and the new one, a delete the item it deletes (one
//!   if there was none), an update the larger of the item before and after; a write whose
//!   condition failed still bills the item as it is (at least one);
//! - a strongly consistent read is one read unit per 4 KB, rounded up, of each item a `GetItem` or
//!   `BatchGetItem` asks for (one for a missing item), and of the items a `Query` page reads
//!   together (at least one for an empty page, whatever its projection); an eventually consistent
//!   read half that.
//!
//! The meter keeps a ledger of every item written through it, by table and key, so that it knows
//! the size of what a delete removes or a read reads. The tables start empty and every write goes
//! through the meter (the application's through [`Meter::app_endpoint`], the same ledger): a key it
//! never saw is absent. What it cannot size (an item read that it never saw written, an update
//! expression it does not evaluate, a table it was not told of, an operation it does not know) is
//! billed at the minimum and listed in [`Meter::unknown`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Map, Value};

use super::recorder::Recorder;
use super::AV;

/// Bytes a write unit carries.
pub const WRITE_UNIT_BYTES: u64 = 1024;
/// Bytes a strongly consistent read unit carries.
pub const READ_UNIT_BYTES: u64 = 4096;

/// The size in bytes of an attribute value in DynamoDB's JSON (`{"S": "…"}`, `{"N": "…"}`, …).
pub fn value_size(value: &Value) -> u64 {
    let Some((ty, v)) = value.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    let text = |v: &Value| v.as_str().map_or(0, |s| s.len() as u64);
    let binary = |v: &Value| {
        v.as_str().map_or(0, |s| {
            let bytes = base64::engine::general_purpose::STANDARD.decode(s);
            bytes.map_or(s.len(), |b| b.len()) as u64
        })
    };
    let each = |v: &Value, size: &dyn Fn(&Value) -> u64| {
        v.as_array().map_or(0, |l| l.iter().map(size).sum::<u64>())
    };
    match ty.as_str() {
        "S" => text(v),
        "N" => number_size(v.as_str().unwrap_or("0")),
        "B" => binary(v),
        "BOOL" | "NULL" => 1,
        "SS" => each(v, &text),
        "NS" => each(v, &|n| number_size(n.as_str().unwrap_or("0"))),
        "BS" => each(v, &binary),
        "L" => {
            let elements = v.as_array().map_or(&[][..], Vec::as_slice);
            3 + elements.iter().map(|e| value_size(e) + 1).sum::<u64>()
        }
        "M" => {
            3 + v.as_object().map_or(0, |m| {
                m.iter()
                    .map(|(name, e)| name.len() as u64 + value_size(e) + 1)
                    .sum::<u64>()
            })
        }
        _ => 0,
    }
}

/// The size of a Number given as text: one byte per two significant digits, rounded up, plus
/// one (leading and trailing zeros are not significant; sign and exponent are not digits).
pub fn number_size(n: &str) -> u64 {
    let mantissa = n.split(['e', 'E']).next().unwrap_or("");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len() as u64;
    significant.div_ceil(2) + 1
}

/// The size in bytes of an item in DynamoDB's JSON: its attribute names and values.
pub fn item_size(item: &Map<String, Value>) -> u64 {
    item.iter()
        .map(|(name, v)| name.len() as u64 + value_size(v))
        .sum()
}

/// The items' keys an index item lists: a pack's `keys`, or one for an entry of one item.
pub fn keys_listed(item: &Map<String, Value>) -> u64 {
    match item.get("keys") {
        Some(keys) => keys["L"].as_array().map_or(0, Vec::len) as u64,
        None => 1,
    }
}

/// Write units of a write of `bytes`: one per KB, rounded up, at least one.
pub fn write_units(bytes: u64) -> f64 {
    bytes.div_ceil(WRITE_UNIT_BYTES).max(1) as f64
}

/// Read units of a read of `bytes`: one per 4 KB, rounded up, at least one; half if eventually
/// consistent.
pub fn read_units(bytes: u64, consistent: bool) -> f64 {
    let units = bytes.div_ceil(READ_UNIT_BYTES).max(1) as f64;
    if consistent {
        units
    } else {
        units / 2.0
    }
}

/// An SDK attribute value in DynamoDB's JSON.
pub fn wire(value: &AV) -> Value {
    let b64 = |b: &aws_sdk_dynamodb::primitives::Blob| {
        Value::from(base64::engine::general_purpose::STANDARD.encode(b.as_ref()))
    };
    let (ty, v) = match value {
        AV::S(s) => ("S", Value::from(s.as_str())),
        AV::N(n) => ("N", Value::from(n.as_str())),
        AV::B(b) => ("B", b64(b)),
        AV::Bool(b) => ("BOOL", Value::from(*b)),
        AV::Null(n) => ("NULL", Value::from(*n)),
        AV::Ss(l) => ("SS", l.iter().map(|s| Value::from(s.as_str())).collect()),
        AV::Ns(l) => ("NS", l.iter().map(|s| Value::from(s.as_str())).collect()),
        AV::Bs(l) => ("BS", l.iter().map(b64).collect()),
        AV::L(l) => ("L", l.iter().map(wire).collect()),
        AV::M(m) => ("M", Value::Object(wire_item(m))),
        _ => ("NULL", Value::from(true)),
    };
    Value::Object(Map::from_iter([(ty.to_owned(), v)]))
}

/// An SDK item in DynamoDB's JSON.
pub fn wire_item(item: &HashMap<String, AV>) -> Map<String, Value> {
    item.iter().map(|(k, v)| (k.clone(), wire(v))).collect()
}

/// `item` with a String attribute `name` added that makes its size exactly `bytes` (panics if
/// the item is already too large for it).
pub fn padded(mut item: HashMap<String, AV>, name: &str, bytes: u64) -> HashMap<String, AV> {
    let size = item_size(&wire_item(&item)) + name.len() as u64;
    let fill = bytes
        .checked_sub(size)
        .expect("an item smaller than the size asked");
    item.insert(name.to_owned(), AV::S("x".repeat(fill as usize)));
    item
}

/// What a table is to the sweeper: the swept table, its expiry index table, its checkpoint table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Table,
    Index,
    Checkpoint,
}

/// What a request's units are spent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// The sweeper's delete of an item of the table (`BatchWriteItem`, or a `DeleteItem` that
    /// succeeded).
    TableDelete,
    /// The sweeper's conditional `DeleteItem` whose condition failed (the item was extended or is
    /// gone): billed all the same.
    FailedConditionalDelete,
    /// Batch mode's confirming read of the table (`BatchGetItem`).
    ConfirmRead,
    /// Expiry index entries written (the indexer's `BatchWriteItem` puts).
    EntryPut,
    /// Expiry index entries removed once judged.
    EntryRemoval,
    /// Queries of the index's window partitions (every tick, whatever they find).
    IndexQuery,
    /// Reads and writes of the index table's own partitions (`#owners`, `#indexer`, `#pending`).
    IndexFixed,
    /// The checkpoint table: the checkpoint, the lease, the stream position.
    Checkpoint,
    /// The application's writes, through [`Meter::app_endpoint`].
    App,
    /// Anything else on a table the meter knows (e.g. the sweeper writing an item's window).
    Other,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::TableDelete,
        Kind::FailedConditionalDelete,
        Kind::ConfirmRead,
        Kind::EntryPut,
        Kind::EntryRemoval,
        Kind::IndexQuery,
        Kind::IndexFixed,
        Kind::Checkpoint,
        Kind::App,
        Kind::Other,
    ];

    /// Its name in the tables the benchmark writes.
    pub fn label(self) -> &'static str {
        match self {
            Kind::TableDelete => "table delete",
            Kind::FailedConditionalDelete => "failed conditional delete",
            Kind::ConfirmRead => "confirming read",
            Kind::EntryPut => "index entry put",
            Kind::EntryRemoval => "index entry removal",
            Kind::IndexQuery => "index query (window partitions)",
            Kind::IndexFixed => "index table's own partitions",
            Kind::Checkpoint => "checkpoint table",
            Kind::App => "application's writes",
            Kind::Other => "other",
        }
    }

    /// Whether its units are write units (else read units).
    pub fn writes(self) -> bool {
        !matches!(self, Kind::ConfirmRead | Kind::IndexQuery)
    }
}

/// Requests, items and units of one [`Kind`]. Mixed kinds ([`Kind::IndexFixed`],
/// [`Kind::Checkpoint`], [`Kind::App`], [`Kind::Other`]) keep write and read units apart.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    pub requests: u64,
    pub items: u64,
    pub write_units: f64,
    pub read_units: f64,
}

impl Tally {
    /// Write and read units together.
    pub fn units(&self) -> f64 {
        self.write_units + self.read_units
    }
}

/// What the meter has counted: the tallies by kind, what it could not size, and the bytes of the
/// index entries it saw put (their mean is an entry's size).
#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub tallies: BTreeMap<Kind, Tally>,
    pub unknown: Vec<String>,
    pub entry_bytes: u64,
    pub entries: u64,
    /// Items' keys the index items put list (a pack's `keys`; an entry of one item, one).
    pub keys_listed: u64,
    /// Index items put that list one key, their write units and bytes: what a pack costs when a
    /// batch's records share no due (ttls spread over a real day).
    pub one_key_packs: u64,
    pub one_key_pack_units: f64,
    pub one_key_pack_bytes: u64,
}

impl Counts {
    pub fn of(&self, kind: Kind) -> Tally {
        self.tallies.get(&kind).copied().unwrap_or_default()
    }
}

/// The meter's state: the tables it knows, its ledger of items, what it counted.
#[derive(Default)]
pub struct Ledger {
    /// Table name → its role and key attributes (partition key first).
    tables: HashMap<String, (Role, Vec<String>)>,
    /// `table\0key` → the item as last written, or `None` once deleted.
    items: HashMap<String, Option<Map<String, Value>>>,
    /// `table\0key` → the size of the item last sent to be written, noted before DynamoDB
    /// answered: a read answered before the meter sees a concurrent write's answer (or one that
    /// read an item a concurrent delete then removed) is sized by it.
    sent: HashMap<String, u64>,
    pub counts: Counts,
}

/// How a request touched an item, for its kind.
#[derive(Clone, Copy, PartialEq)]
enum Access {
    Write,
    Delete,
    FailedDelete,
    Read,
    Query,
}

impl Ledger {
    /// A ledger that knows `tables`: (name, role, key attributes, partition key first).
    pub fn new(tables: &[(&str, Role, &[&str])]) -> Self {
        let tables = tables.iter().map(|(name, role, keys)| {
            let keys = keys.iter().map(|k| (*k).to_owned()).collect();
            ((*name).to_owned(), (*role, keys))
        });
        Ledger {
            tables: tables.collect(),
            ..Default::default()
        }
    }

    /// The ledger's key of the item of `table` whose key (or whole item) is `item`, and its
    /// partition key's value; `None` for a table the meter does not know.
    fn key_of(&self, table: &str, item: &Map<String, Value>) -> Option<(String, String)> {
        let (_, keys) = self.tables.get(table)?;
        let mut key = table.to_owned();
        for k in keys {
            key.push('\0');
            key.push_str(&item.get(k).map(Value::to_string).unwrap_or_default());
        }
        let partition = keys.first().and_then(|k| item.get(k));
        let partition = partition.and_then(|v| v.as_object()?.values().next()?.as_str());
        Some((key, partition.unwrap_or("").to_owned()))
    }

    /// The size of the item of `table` at `key` (or whole item) now: `None` if absent or
    /// unknown.
    pub fn size_of(&self, table: &str, key: &Map<String, Value>) -> Option<u64> {
        match self.items.get(&self.key_of(table, key)?.0) {
            Some(Some(item)) => Some(item_size(item)),
            _ => None,
        }
    }

    /// Items of `table` there now, by what was written and deleted through the meter, but those
    /// of partitions beginning with `#` (the index table's own) and packs (sort key beginning
    /// with `p`: native TTL removes them, no sweep).
    pub fn live(&self, table: &str) -> usize {
        let Some((_, keys)) = self.tables.get(table) else {
            return 0;
        };
        let prefix = format!("{table}\0");
        let own = |item: &Map<String, Value>| {
            let part = |k: Option<&String>| k.and_then(|k| item.get(k)?.get("S")?.as_str());
            part(keys.first()).is_some_and(|p| p.starts_with('#'))
                || (keys.len() == 2 && part(keys.get(1)).is_some_and(|s| s.starts_with('p')))
        };
        let live = self
            .items
            .iter()
            .filter(|(k, item)| k.starts_with(&prefix) && item.as_ref().is_some_and(|i| !own(i)));
        live.count()
    }

    /// The size of the item at the ledger's `key` now: `Some(0)` if absent (deleted, or never
    /// written).
    fn size_at(&self, key: &str) -> u64 {
        match self.items.get(key) {
            Some(Some(item)) => item_size(item),
            _ => 0,
        }
    }

    fn kind(&self, app: bool, table: &str, partition: &str, access: Access) -> Kind {
        let role = self.tables.get(table).map(|(r, _)| *r);
        match (app, role) {
            (true, _) => Kind::App,
            (_, None) => Kind::Other,
            (_, Some(Role::Checkpoint)) => Kind::Checkpoint,
            (_, Some(Role::Index)) if partition.starts_with('#') => Kind::IndexFixed,
            (_, Some(Role::Index)) => match access {
                Access::Write => Kind::EntryPut,
                Access::Delete | Access::FailedDelete => Kind::EntryRemoval,
                Access::Read | Access::Query => Kind::IndexQuery,
            },
            (_, Some(Role::Table)) => match access {
                Access::Delete => Kind::TableDelete,
                Access::FailedDelete => Kind::FailedConditionalDelete,
                Access::Read => Kind::ConfirmRead,
                Access::Query => Kind::IndexQuery,
                Access::Write => Kind::Other,
            },
        }
    }

    fn unknown(&mut self, what: String) {
        self.counts.unknown.push(what);
    }

    /// `op` on `table`, a table the meter was not told of: listed as unknown, of kind `Other`.
    fn untold(&mut self, op: &str, table: &str) -> Kind {
        self.unknown(format!(
            "{op} on {table:?}, a table the meter was not told of"
        ));
        Kind::Other
    }

    fn add(&mut self, kind: Kind, items: u64, write: f64, read: f64) {
        let t = self.counts.tallies.entry(kind).or_default();
        t.items += items;
        t.write_units += write;
        t.read_units += read;
    }

    fn request(&mut self, kinds: &[Kind]) {
        let mut seen: Vec<Kind> = kinds.to_vec();
        seen.sort();
        seen.dedup();
        for k in seen {
            self.counts.tallies.entry(k).or_default().requests += 1;
        }
    }

    /// Notes the items a write request is about to write (their sizes), before it is passed on.
    pub fn sending(&mut self, op: &str, request: &Value) {
        let table = request["TableName"].as_str().unwrap_or("");
        let mut puts: Vec<(String, Map<String, Value>)> = Vec::new();
        match op {
            "PutItem" => {
                let item = request["Item"].as_object();
                puts.extend(item.map(|i| (table.to_owned(), i.clone())));
            }
            "BatchWriteItem" => {
                let tables = request["RequestItems"].as_object().into_iter().flatten();
                for (table, writes) in tables {
                    let writes = writes.as_array().into_iter().flatten();
                    let items = writes.filter_map(|w| w["PutRequest"]["Item"].as_object());
                    puts.extend(items.map(|i| (table.clone(), i.clone())));
                }
            }
            _ => {}
        }
        for (table, item) in puts {
            if let Some((key, _)) = self.key_of(&table, &item) {
                self.sent.insert(key, item_size(&item));
            }
        }
    }

    /// The size of an item a read returned: as the ledger holds it, else as last sent to be
    /// written, else its own if `whole` (not projected); `None` if none of these.
    fn returned_size(&self, table: &str, item: &Map<String, Value>, whole: bool) -> Option<u64> {
        let key = self.key_of(table, item)?.0;
        match self.items.get(&key) {
            Some(Some(i)) => Some(item_size(i)),
            _ => (self.sent.get(&key).copied()).or_else(|| whole.then(|| item_size(item))),
        }
    }

    /// Counts one request that DynamoDB answered with `status` and `answer`, sent through the
    /// application's door (`app`) or the sweeper's.
    pub fn observe(&mut self, app: bool, op: &str, status: u16, request: &Value, answer: &Value) {
        let ok = (200..300).contains(&status);
        let condition_failed = status == 400
            && answer["__type"]
                .as_str()
                .is_some_and(|t| t.ends_with("ConditionalCheckFailedException"));
        if !ok && !condition_failed {
            return; // throttled, invalid, or a server error: nothing billed
        }
        let table = request["TableName"].as_str().unwrap_or("");
        match op {
            "PutItem" | "UpdateItem" | "DeleteItem" | "GetItem" => {
                let whole = if op == "PutItem" { "Item" } else { "Key" };
                let Some(item) = request[whole].as_object() else {
                    return;
                };
                let Some((key, partition)) = self.key_of(table, item) else {
                    let other = self.untold(op, table);
                    return self.request(&[other]);
                };
                self.single(app, op, table, &key, &partition, request, answer, ok);
            }
            "BatchWriteItem" => self.batch_write(app, request, answer),
            "BatchGetItem" => self.batch_get(app, request, answer),
            "Query" => self.query(app, table, request, answer),
            "Scan"
            | "TransactWriteItems"
            | "TransactGetItems"
            | "ExecuteStatement"
            | "BatchExecuteStatement"
            | "ExecuteTransaction" => {
                self.unknown(format!("{op}: not counted"));
            }
            _ => {} // control plane and streams: no request units
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn single(
        &mut self,
        app: bool,
        op: &str,
        table: &str,
        key: &str,
        partition: &str,
        request: &Value,
        answer: &Value,
        ok: bool,
    ) {
        let old = self.size_at(key);
        let consistent = request["ConsistentRead"].as_bool().unwrap_or(false);
        let access = match (op, ok) {
            ("GetItem", _) => Access::Read,
            ("DeleteItem", true) => Access::Delete,
            ("DeleteItem", false) => Access::FailedDelete,
            _ => Access::Write,
        };
        let kind = self.kind(app, table, partition, access);
        self.request(&[kind]);
        if !ok {
            // A write whose condition failed: the item as it is.
            return self.add(kind, 1, write_units(old), 0.0);
        }
        match op {
            "GetItem" => {
                let mut size = old;
                if let Some(found) = answer["Item"].as_object() {
                    let whole = request["ProjectionExpression"].is_null();
                    match self.returned_size(table, found, whole) {
                        Some(s) => size = s,
                        None => self.unknown(format!("GetItem on {table}: an item never written")),
                    }
                }
                self.add(kind, 1, 0.0, read_units(size, consistent));
            }
            "DeleteItem" => {
                self.items.insert(key.to_owned(), None);
                self.add(kind, 1, write_units(old), 0.0);
            }
            "PutItem" => {
                let item = request["Item"].as_object().cloned().unwrap_or_default();
                let new = item_size(&item);
                self.items.insert(key.to_owned(), Some(item));
                self.add(kind, 1, write_units(old.max(new)), 0.0);
            }
            _ => {
                // UpdateItem
                let before = match self.items.get(key) {
                    Some(Some(item)) => item.clone(),
                    _ => request["Key"].as_object().cloned().unwrap_or_default(),
                };
                match updated(before, request) {
                    Some(after) => {
                        let new = item_size(&after);
                        self.items.insert(key.to_owned(), Some(after));
                        self.add(kind, 1, write_units(old.max(new)), 0.0);
                    }
                    None => {
                        let expression = request["UpdateExpression"].as_str().unwrap_or("");
                        self.unknown(format!(
                            "UpdateItem on {table}: {expression:?} not evaluated"
                        ));
                        self.add(kind, 1, write_units(old), 0.0);
                    }
                }
            }
        }
    }

    fn batch_write(&mut self, app: bool, request: &Value, answer: &Value) {
        let mut kinds = Vec::new();
        let empty = Map::new();
        let tables = request["RequestItems"].as_object().unwrap_or(&empty);
        for (table, writes) in tables {
            let left: Vec<String> = answer["UnprocessedItems"][table]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|w| self.write_key(table, w))
                .map(|(k, _)| k)
                .collect();
            for w in writes.as_array().into_iter().flatten() {
                let Some((key, partition)) = self.write_key(table, w) else {
                    kinds.push(self.untold("BatchWriteItem", table));
                    continue;
                };
                if left.contains(&key) {
                    continue;
                }
                let old = self.size_at(&key);
                if let Some(item) = w["PutRequest"]["Item"].as_object() {
                    let kind = self.kind(app, table, &partition, Access::Write);
                    let new = item_size(item);
                    if kind == Kind::EntryPut {
                        let keys = keys_listed(item);
                        self.counts.entry_bytes += new;
                        self.counts.entries += 1;
                        self.counts.keys_listed += keys;
                        if keys == 1 {
                            self.counts.one_key_packs += 1;
                            self.counts.one_key_pack_units += write_units(new);
                            self.counts.one_key_pack_bytes += new;
                        }
                    }
                    self.items.insert(key, Some(item.clone()));
                    self.add(kind, 1, write_units(old.max(new)), 0.0);
                    kinds.push(kind);
                } else {
                    let kind = self.kind(app, table, &partition, Access::Delete);
                    self.items.insert(key, None);
                    self.add(kind, 1, write_units(old), 0.0);
                    kinds.push(kind);
                }
            }
        }
        self.request(&kinds);
    }

    /// The ledger's key and partition of one `WriteRequest` of `table`.
    fn write_key(&self, table: &str, w: &Value) -> Option<(String, String)> {
        let item = w["PutRequest"]["Item"]
            .as_object()
            .or_else(|| w["DeleteRequest"]["Key"].as_object())?;
        self.key_of(table, item)
    }

    fn batch_get(&mut self, app: bool, request: &Value, answer: &Value) {
        let mut kinds = Vec::new();
        let empty = Map::new();
        let tables = request["RequestItems"].as_object().unwrap_or(&empty);
        for (table, asked) in tables {
            let consistent = asked["ConsistentRead"].as_bool().unwrap_or(false);
            let key_list = |v: &Value| -> Vec<Map<String, Value>> {
                let keys = v["Keys"].as_array().into_iter().flatten();
                keys.filter_map(|k| k.as_object().cloned()).collect()
            };
            let left: Vec<String> = key_list(&answer["UnprocessedKeys"][table])
                .iter()
                .filter_map(|k| Some(self.key_of(table, k)?.0))
                .collect();
            let whole = asked["ProjectionExpression"].is_null();
            // The items returned, by the ledger's key, and their sizes.
            let returned = answer["Responses"][table].as_array().into_iter().flatten();
            let returned: Vec<Map<String, Value>> =
                returned.filter_map(|i| i.as_object().cloned()).collect();
            let mut found: HashMap<String, u64> = HashMap::new();
            for item in &returned {
                let key = self.key_of(table, item).map(|(k, _)| k);
                match (key, self.returned_size(table, item, whole)) {
                    (Some(key), Some(size)) => {
                        found.insert(key, size);
                    }
                    _ => self.unknown(format!(
                        "BatchGetItem on {table}: an item never written, {}",
                        Value::Object(item.clone())
                    )),
                }
            }
            for k in key_list(asked) {
                let Some((key, partition)) = self.key_of(table, &k) else {
                    kinds.push(self.untold("BatchGetItem", table));
                    continue;
                };
                if left.contains(&key) {
                    continue;
                }
                let kind = self.kind(app, table, &partition, Access::Read);
                // A missing item is read at the minimum.
                let size = found.get(&key).copied().unwrap_or(0);
                self.add(kind, 1, 0.0, read_units(size, consistent));
                kinds.push(kind);
            }
        }
        self.request(&kinds);
    }

    fn query(&mut self, app: bool, table: &str, request: &Value, answer: &Value) {
        let Some((_, keys)) = self.tables.get(table) else {
            let other = self.untold("Query", table);
            return self.request(&[other]);
        };
        let partition_key = keys[0].clone();
        let value = request["IndexName"]
            .is_null()
            .then(|| partition_value(request, &partition_key))
            .flatten();
        let text = |v: &Value| Some(v.as_object()?.values().next()?.as_str()?.to_owned());
        let partition = value.as_ref().and_then(text).unwrap_or_default();
        let kind = self.kind(app, table, &partition, Access::Query);
        let consistent = request["ConsistentRead"].as_bool().unwrap_or(false);
        let projected = !request["ProjectionExpression"].is_null();
        let mut bytes = 0;
        let mut items = 0;
        let returned: Vec<Map<String, Value>> = answer["Items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i.as_object().cloned())
            .collect();
        for mut item in returned {
            items += 1;
            // A projection may leave out the partition key: the key condition gives it.
            if let (false, Some(v)) = (item.contains_key(&partition_key), &value) {
                item.insert(partition_key.clone(), v.clone());
            }
            let whole = !projected && request["IndexName"].is_null();
            bytes += match self.returned_size(table, &item, whole) {
                Some(size) => size,
                None => {
                    let item = Value::Object(item);
                    self.unknown(format!("Query on {table}: an item never written, {item}"));
                    0
                }
            };
        }
        self.request(&[kind]);
        self.add(kind, items, 0.0, read_units(bytes, consistent));
    }
}

/// The value a `Query`'s key condition gives the partition key `name` (`#w = :w AND …`).
fn partition_value(request: &Value, name: &str) -> Option<Value> {
    let condition = request["KeyConditionExpression"].as_str()?;
    for clause in condition.split(" AND ") {
        let Some((left, right)) = clause.split_once('=') else {
            continue;
        };
        let left = left.trim().trim_start_matches('(');
        let left = request["ExpressionAttributeNames"][left]
            .as_str()
            .unwrap_or(left);
        if left == name {
            let right = right.trim().trim_end_matches(')');
            let v = &request["ExpressionAttributeValues"][right];
            return (!v.is_null()).then(|| v.clone());
        }
    }
    None
}

/// `item` after an `UpdateItem`'s `SET a = :v, …` and `REMOVE b, …`; `None` for any other
/// expression (`ADD`, `DELETE`, functions, arithmetic, paths).
fn updated(mut item: Map<String, Value>, request: &Value) -> Option<Map<String, Value>> {
    let expression = request["UpdateExpression"].as_str()?;
    let name = |n: &str| -> Option<String> {
        let n = n.trim();
        if n.is_empty() || n.contains(['.', '[', '(', ' ']) {
            return None;
        }
        Some(match n.strip_prefix('#') {
            Some(_) => request["ExpressionAttributeNames"][n].as_str()?.to_owned(),
            None => n.to_owned(),
        })
    };
    // Split into clauses at the keywords.
    let mut clauses: Vec<(String, String)> = Vec::new();
    for word in expression.split_whitespace() {
        match word.to_ascii_uppercase().as_str() {
            "SET" | "REMOVE" | "ADD" | "DELETE" => {
                clauses.push((word.to_ascii_uppercase(), String::new()));
            }
            _ => {
                let (_, text) = clauses.last_mut()?;
                text.push_str(word);
                text.push(' ');
            }
        }
    }
    for (keyword, text) in clauses {
        for part in text.split(',') {
            match keyword.as_str() {
                "SET" => {
                    let (left, right) = part.split_once('=')?;
                    let right = right.trim();
                    if !right.starts_with(':') || right.contains([' ', '+', '-', '(']) {
                        return None;
                    }
                    let value = request["ExpressionAttributeValues"][right].clone();
                    if value.is_null() {
                        return None;
                    }
                    item.insert(name(left)?, value);
                }
                "REMOVE" => {
                    item.remove(&name(part)?);
                }
                _ => return None,
            }
        }
    }
    Some(item)
}

/// A pass-through proxy in front of DynamoDB that counts the capacity units of every request
/// through it by [`Ledger`]'s rules (the items each write sends noted before it is passed on): the sweeper's through [`Meter::endpoint`], the
/// application's through [`Meter::app_endpoint`] (the same ledger, counted as [`Kind::App`]).
/// Listens on 127.0.0.1 only.
pub struct Meter {
    /// `http://127.0.0.1:PORT`: point the sweeper here.
    pub endpoint: String,
    /// `http://127.0.0.1:PORT`: point the application here.
    pub app_endpoint: String,
    ledger: Arc<Mutex<Ledger>>,
    _doors: [Recorder; 2],
}

impl Meter {
    /// Starts a meter in front of `upstream` (`http://127.0.0.1:PORT`) that knows `tables`
    /// (name, role, key attributes with the partition key first), all empty.
    pub async fn start(upstream: &str, tables: &[(&str, Role, &[&str])]) -> Meter {
        let ledger = Arc::new(Mutex::new(Ledger::new(tables)));
        let hold = || {
            let ledger = ledger.clone();
            Box::new(move |op: &str, request: &Value| {
                ledger.lock().unwrap().sending(op, request);
                Duration::ZERO
            })
        };
        let door = |app: bool| {
            let ledger = ledger.clone();
            move |op: &str, status: u16, request: &Value, answer: &Value, _at: f64| {
                let mut ledger = ledger.lock().unwrap();
                ledger.observe(app, op, status, request, answer);
            }
        };
        let sweeper = Recorder::start_all(upstream, hold(), Box::new(door(false))).await;
        let app = Recorder::start_all(upstream, hold(), Box::new(door(true))).await;
        Meter {
            endpoint: sweeper.endpoint.clone(),
            app_endpoint: app.endpoint.clone(),
            ledger,
            _doors: [sweeper, app],
        }
    }

    /// What it has counted so far.
    pub fn counts(&self) -> Counts {
        self.ledger.lock().unwrap().counts.clone()
    }

    /// Items of `table` there now, but the index table's own partitions ([`Ledger::live`]).
    pub fn live(&self, table: &str) -> usize {
        self.ledger.lock().unwrap().live(table)
    }

    /// What it could not size, so far.
    pub fn unknown(&self) -> Vec<String> {
        self.ledger.lock().unwrap().counts.unknown.clone()
    }
}
