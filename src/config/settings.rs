//! The one list of settings: each setting's environment variable (the CLI flag is its kebab-case
//! form), default, a short description and what it accepts. The environment parser
//! ([`Config::from_lookup`](super::Config::from_lookup)), the CLI flags
//! ([`ConfigFlags`](super::ConfigFlags)) and the configuration table of `docs/configuration.md`
//! (checked by `tests/readme.rs`) all follow [`SETTINGS`].

/// One setting: its environment variable, default, what it is and what it accepts.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Environment variable name; the CLI flag is its kebab-case form.
    pub var: &'static str,
    /// Default value, or `None` if required.
    pub default: Option<&'static str>,
    /// What the setting is, in a few words: the first line of its flag's `--help`.
    pub help: &'static str,
    /// What the setting accepts, for error messages and `--help`.
    pub expected: &'static str,
}

impl Setting {
    /// The CLI flag for this setting, without the leading dashes.
    pub fn flag(&self) -> String {
        self.var.to_ascii_lowercase().replace('_', "-")
    }
}

/// `TABLE_NAME`.
pub const TABLE_NAME: Setting = Setting {
    var: "TABLE_NAME",
    default: None,
    help: "Table to sweep, by name or ARN",
    expected:
        "a DynamoDB table name (3-255 characters: letters, digits, '_', '-', '.') or table ARN",
};
/// `INDEX_NAME`.
pub const INDEX_NAME: Setting = Setting {
    var: "INDEX_NAME",
    default: Some("expirationWindowIndex"),
    help: "GSI keyed on (window, ttl)",
    expected: "a GSI name (3-255 characters: letters, digits, '_', '-', '.')",
};
/// `TTL_ATTRIBUTE`.
pub const TTL_ATTRIBUTE: Setting = Setting {
    var: "TTL_ATTRIBUTE",
    default: Some("ttl"),
    help: "Number attribute with the expiry in epoch seconds",
    expected: "a non-empty attribute name of at most 255 bytes",
};
/// `WINDOW_ATTRIBUTE`.
pub const WINDOW_ATTRIBUTE: Setting = Setting {
    var: "WINDOW_ATTRIBUTE",
    default: Some("expirationWindow"),
    help: "String attribute with the window key",
    expected: "a non-empty attribute name of at most 255 bytes",
};
/// `WINDOW_SECONDS`.
pub const WINDOW_SECONDS: Setting = Setting {
    var: "WINDOW_SECONDS",
    default: Some("60"),
    help: "Window width in seconds",
    expected: "a whole number of seconds from 1 to 86400 (the width writers used; default 60)",
};
/// `LOOKBACK_WINDOWS`.
pub const LOOKBACK_WINDOWS: Setting = Setting {
    var: "LOOKBACK_WINDOWS",
    default: Some("15"),
    help: "Past windows re-read by every sweep",
    expected: "a whole number from 0 to 10000 (past windows re-read by every sweep), covering at least SCHEDULE_SECONDS + 10 s unless CHECKPOINT_TABLE is set; default 15, or more when 15 windows do not cover that",
};
/// `DELETE_MODE`.
pub const DELETE_MODE: Setting = Setting {
    var: "DELETE_MODE",
    default: Some("batch"),
    help: "How to delete: `batch` or `conditional`",
    expected: "`batch` or `conditional`",
};
/// `MAX_CONCURRENCY`.
pub const MAX_CONCURRENCY: Setting = Setting {
    var: "MAX_CONCURRENCY",
    default: Some("8"),
    help: "Delete requests in flight",
    expected: "a whole number from 1 to 256 (delete requests in flight; default 8)",
};
/// `MAX_RETRIES`.
pub const MAX_RETRIES: Setting = Setting {
    var: "MAX_RETRIES",
    default: Some("8"),
    help: "Retries per delete request",
    expected: "a whole number from 0 to 30 (retries per delete request; default 8)",
};
/// `WINDOW_SHARDS`.
pub const WINDOW_SHARDS: Setting = Setting {
    var: "WINDOW_SHARDS",
    default: Some("1"),
    help: "Shards per window, as the writers use",
    expected:
        "a whole number from 1 to 1000 (shards per window; must match the writers; default 1)",
};
/// `SHARD_RANGE`.
pub const SHARD_RANGE: Setting = Setting {
    var: "SHARD_RANGE",
    default: Some("all"),
    help: "The shards of each window this sweeper reads, to split a table between sweepers",
    expected: "`all`, or `a-b`: shards a to b inclusive, 0 <= a <= b < WINDOW_SHARDS (sweepers with disjoint ranges covering 0 to WINDOW_SHARDS-1 split the table); audit and backfill read the whole table",
};
/// `TICK_SECONDS`.
pub const TICK_SECONDS: Setting = Setting {
    var: "TICK_SECONDS",
    default: Some("off"),
    help: "Lambda tick mode: sweep every this many seconds within one invocation",
    expected: "`off`, a whole number of seconds from 1 to 30, or a duration from 100ms to 30s such as `250ms`; less than SCHEDULE_SECONDS",
};
/// `SCHEDULE_SECONDS`.
pub const SCHEDULE_SECONDS: Setting = Setting {
    var: "SCHEDULE_SECONDS",
    default: Some("60"),
    help: "The schedule's period; `run` does a full sweep this often",
    expected: "a whole number of seconds from 1 to 3600 (the schedule's period; default 60)",
};
/// `CHECKPOINT_TABLE`.
pub const CHECKPOINT_TABLE: Setting = Setting {
    var: "CHECKPOINT_TABLE",
    default: Some(""),
    help: "Table holding the catch-up checkpoint",
    expected: "a DynamoDB table name with partition key `id` (String), or empty for no checkpoint",
};
/// `METRICS_NAMESPACE`.
pub const METRICS_NAMESPACE: Setting = Setting {
    var: "METRICS_NAMESPACE",
    default: Some("TtlSweeper"),
    help: "CloudWatch namespace of the Lambda's metrics",
    expected: "a CloudWatch namespace: up to 255 letters, digits or . - _ / # : and spaces, not starting with AWS/ (default TtlSweeper)",
};
/// `MAX_CATCHUP`.
pub const MAX_CATCHUP: Setting = Setting {
    var: "MAX_CATCHUP",
    default: Some("24h"),
    help: "Longest catch-up after an outage",
    expected: "a duration from 1m to 30d, e.g. `24h`, `90m`, `3600` (seconds); default 24h",
};

/// `EXPIRY_EVENTS`.
pub const EXPIRY_EVENTS: Setting = Setting {
    var: "EXPIRY_EVENTS",
    default: Some(""),
    help: "Where to publish an event for each expired item",
    expected: "`eventbridge:<bus name or ARN>`, `sqs:<queue URL>` or `firehose:<delivery stream name>`, or empty for no events",
};
/// `EXPIRY_EVENTS_MODE`.
pub const EXPIRY_EVENTS_MODE: Setting = Setting {
    var: "EXPIRY_EVENTS_MODE",
    default: Some("notify"),
    help: "Expiry events: `notify` (delete, then publish) or `archive` (delete only what the sink accepted)",
    expected: "`notify` or `archive` (archive needs EXPIRY_EVENTS and DELETE_MODE=conditional)",
};
/// `EXPIRY_EVENTS_ITEM`.
pub const EXPIRY_EVENTS_ITEM: Setting = Setting {
    var: "EXPIRY_EVENTS_ITEM",
    default: Some("auto"),
    help: "Expiry events: include the item `auto` (when it needs no extra read), `read` (read it first) or `off`",
    expected: "`auto`, `read` or `off`",
};

/// Every setting, in documentation order.
pub const SETTINGS: [Setting; 19] = [
    TABLE_NAME,
    INDEX_NAME,
    TTL_ATTRIBUTE,
    WINDOW_ATTRIBUTE,
    WINDOW_SECONDS,
    LOOKBACK_WINDOWS,
    DELETE_MODE,
    MAX_CONCURRENCY,
    MAX_RETRIES,
    WINDOW_SHARDS,
    SHARD_RANGE,
    TICK_SECONDS,
    SCHEDULE_SECONDS,
    CHECKPOINT_TABLE,
    MAX_CATCHUP,
    METRICS_NAMESPACE,
    EXPIRY_EVENTS,
    EXPIRY_EVENTS_MODE,
    EXPIRY_EVENTS_ITEM,
];
