//! Configuration: every setting the sweeper reads, parsed and validated once at start-up.
//!
//! Settings come from environment variables (the Lambda) or CLI flags of the same name
//! (`TABLE_NAME` is `--table-name`), the fields of one clap struct, [`Settings`], validated by
//! [`Settings::validate`]: both accept the same values and fail with the same messages, which
//! name the variable and what it accepts ([`SETTINGS`]: each setting's default, help and values).

use std::time::Duration;

use crate::engine::lease::RangeLease;
use crate::engine::{Checkpoint, LeaseConfig, SweepOptions};
use crate::events::EventsConfig;
use crate::expiry::window::{ShardRange, DEFAULT_WINDOW_SECONDS};
use crate::lambda::HandlerSettings;
use crate::store::{Index, TableTarget};

mod rule;
mod runtime;
mod settings;
mod spec;
mod validate;
mod values;

pub use rule::Rule;
pub use runtime::{RuntimeError, Threads, MAX_WORKER_THREADS, WORKER_THREADS_VAR};
pub use settings::*;
pub use spec::{spec, spec_text};
pub use values::window_shape;

/// A configuration value that is missing or not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A required setting was not given.
    #[error(
        "{var} is required (environment variable {var} or flag --{}): {expected}",
        settings::flag(var)
    )]
    Missing {
        /// Environment variable name.
        var: &'static str,
        /// What the setting is and what it accepts.
        expected: String,
    },
    /// A setting has a value outside what it accepts.
    #[error(
        "invalid {var}={value:?} (flag --{}): expected {expected}",
        settings::flag(var)
    )]
    Invalid {
        /// Environment variable name.
        var: &'static str,
        /// The value as given.
        value: String,
        /// What the setting accepts.
        expected: String,
    },
    /// `SHARD_RANGE` is not a range of this layout's shards.
    #[error("invalid SHARD_RANGE={value:?} (flag --shard-range): {problem}. Expected {}", SHARD_RANGE.expected())]
    ShardRange {
        /// The value as given.
        value: String,
        /// What is wrong with it.
        problem: ShardRangeProblem,
    },
    /// A setting whose value is wrong in a way worth saying precisely.
    #[error(
        "invalid {var}={value:?} (flag --{}): {problem}; expected {expected}",
        settings::flag(var)
    )]
    Rejected {
        /// Environment variable name.
        var: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        problem: String,
        /// What the setting accepts.
        expected: String,
    },
    /// A setting the command does not use, given: refused rather than ignored.
    #[error(
        "{var}={value:?} (flag --{}) is not used by `{command}`: {instead}; unset it",
        settings::flag(var)
    )]
    NotUsed {
        /// Environment variable name.
        var: &'static str,
        /// The value as given.
        value: String,
        /// The command.
        command: &'static str,
        /// What the command does instead.
        instead: &'static str,
    },
    /// An environment variable read by the binaries alone (no flag), with a value it refuses.
    #[error("invalid {var}={value:?}: expected {expected}")]
    Environment {
        /// Environment variable name.
        var: &'static str,
        /// The value as given.
        value: String,
        /// What the variable accepts.
        expected: &'static str,
    },
    /// The lookback does not reach the previous sweep: ttls between two sweeps would go unread.
    #[error(
        "LOOKBACK_WINDOWS={lookback_windows} (flag --lookback-windows) of WINDOW_SECONDS={window_seconds} \
         covers {covered} s, less than SCHEDULE_SECONDS={schedule_seconds} plus 10 s: items expiring \
         between two sweeps would never be read. Set LOOKBACK_WINDOWS to at least {needed}, leave it \
         unset (it is then derived), or set CHECKPOINT_TABLE so sweeps catch up exactly",
        covered = u64::from(*lookback_windows) * u64::from(*window_seconds)
    )]
    Uncovered {
        /// `LOOKBACK_WINDOWS` as given.
        lookback_windows: u32,
        /// `WINDOW_SECONDS`.
        window_seconds: u32,
        /// `SCHEDULE_SECONDS`.
        schedule_seconds: u32,
        /// The fewest windows that cover the schedule period.
        needed: u32,
    },
    /// Every sweep would read more partitions than [`MAX_PARTITIONS_PER_SWEEP`].
    #[error(
        "LOOKBACK_WINDOWS={lookback_windows} (flag --lookback-windows; derived from \
         SCHEDULE_SECONDS and WINDOW_SECONDS when unset) with {shards} shard(s) read per window \
         makes every sweep read {partitions} partitions, more than the {max} allowed: lower \
         LOOKBACK_WINDOWS or WINDOW_SHARDS, widen WINDOW_SECONDS, split the shards between \
         sweepers (SHARD_RANGE), or set CHECKPOINT_TABLE so older windows are caught up once \
         instead of re-read by every sweep",
        max = MAX_PARTITIONS_PER_SWEEP
    )]
    TooManyPartitions {
        /// `LOOKBACK_WINDOWS`, as given or derived.
        lookback_windows: u32,
        /// Shards read per window (`WINDOW_SHARDS`, or the `SHARD_RANGE`).
        shards: u32,
        /// Partitions per sweep.
        partitions: u64,
    },
    /// A command that works on one table was given several.
    #[error(
        "{command} works on one table at a time, and TABLE_NAME and TABLES name {count}: run it \
         once per table (--table-name <name>)"
    )]
    OneTable {
        /// The command.
        command: &'static str,
        /// Tables named.
        count: usize,
    },
    /// One table, named twice across `TABLE_NAME` and `TABLES`.
    #[error(
        "table {table:?} is named twice across TABLE_NAME and TABLES: name each table once, \
         with the settings that differ for it in its TABLES entry"
    )]
    DuplicateTable {
        /// The table, as named the second time.
        table: String,
    },
    /// Two tables name one expiry index table.
    #[error(
        "tables {first:?} and {second:?} both name the expiry index table {index:?} \
         (EXPIRY_INDEX_TABLE): each table needs an expiry index table of its own (a sweep of one \
         would read the other's entries, find their items absent and remove them); give each \
         table its own in its TABLES entry"
    )]
    SharedIndexTable {
        /// The expiry index table named twice.
        index: String,
        /// The table that named it first.
        first: String,
        /// The table that named it again.
        second: String,
    },
    /// A setting of one of several tables is wrong.
    #[error("table {table:?}: {source}")]
    InTable {
        /// The table.
        table: String,
        /// What is wrong.
        source: Box<ConfigError>,
    },
}

/// Most partitions (windows × shards read) every sweep may read, each at least one `Query`. Older
/// ones belong to a checkpoint's catch-up, which reads them once, oldest first.
pub const MAX_PARTITIONS_PER_SWEEP: u64 = 20_000;

/// Why a `SHARD_RANGE` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardRangeProblem {
    /// Not `all` and not two shard numbers joined by `-`.
    #[error("not a range: write the first and the last shard joined by '-', e.g. 0-3")]
    NotARange,
    /// The first shard is after the last.
    #[error("the first shard, {first}, is after the last, {last}")]
    Reversed {
        /// The first shard given.
        first: u32,
        /// The last shard given.
        last: u32,
    },
    /// The range reaches past the last shard of the layout.
    #[error("shard {last} does not exist: WINDOW_SHARDS={shards} numbers the shards 0 to {}", shards - 1)]
    BeyondShards {
        /// The last shard given.
        last: u32,
        /// `WINDOW_SHARDS`.
        shards: u32,
    },
    /// The layout is unsharded: each window is one partition, which cannot be split.
    #[error(
        "WINDOW_SHARDS=1 (unsharded) has one partition per window, which cannot be split between \
         sweepers; leave SHARD_RANGE unset, or shard the windows first (WINDOW_SHARDS > 1)"
    )]
    Unsharded,
}

/// One table's validated settings, as the narrow structs each part of the sweeper takes: made
/// once by [`Settings::validate`] and its kin, never changed after.
#[derive(Debug, Clone)]
pub struct Config {
    /// The table every command opens: its name, the index it is swept through, its layout and
    /// the checkpoint table.
    pub target: TableTarget,
    /// The engine's options, the checkpoint's items named ([`SweepOptions::checkpoint`]: one per
    /// table, index, window layout and shard range).
    pub options: SweepOptions,
    /// How Lambda invocations behave: metrics namespace, tick period, schedule period.
    pub handler: HandlerSettings,
    /// The expiry-event settings, when `EXPIRY_EVENTS` is set.
    pub events: Option<EventsConfig>,
    /// The leader lease's duration (`LEADER_LEASE`), if only its holder sweeps; its item, for a
    /// holder: [`Config::lease`].
    pub leader_lease: Option<Duration>,
}

/// The shortest tick period (`TICK_SECONDS`): faster ticks only add requests.
pub const MIN_TICK: Duration = Duration::from_millis(100);

/// The longest tick period.
pub const MAX_TICK: Duration = Duration::from_secs(30);

/// Time a sweep's lookback covers beyond the schedule period: how late a scheduled invocation may
/// start (EventBridge Scheduler: within seconds) without leaving ttls unread.
pub const COVERAGE_SLACK_SECONDS: u32 = 10;

/// The fewest lookback windows of `window_seconds` that reach back past the previous sweep when
/// sweeps run every `schedule_seconds`: `ceil((SCHEDULE_SECONDS + 10 s) / WINDOW_SECONDS)`.
pub fn covering_lookback(window_seconds: u32, schedule_seconds: u32) -> u32 {
    (schedule_seconds + COVERAGE_SLACK_SECONDS).div_ceil(window_seconds.max(1))
}

impl Config {
    /// Reads and validates every setting through `lookup`, which maps a variable name
    /// (`TABLE_NAME`, ...) to its raw value. Empty values count as absent.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        Settings::from_lookup(lookup).validate()
    }

    /// The leader lease of the swept table, with `LEADER_LEASE`: its item in the checkpoint table,
    /// held as `holder` ([`crate::engine::lease::holder_id`]). The id is `<table name>#leader`,
    /// the name taken out of an ARN, so that every Region's sweeper of one global table takes the
    /// one lease, however it names its replica and whatever its layout or split of the shards; a
    /// shard range short of all shards holds it as its Region's split
    /// ([`crate::engine::lease::split_holder`]) and its range's own beside it,
    /// `<table name>/range<a>-<b>#leader`, as `holder` (`docs/global-tables.md`, "The lease").
    pub fn lease(&self, holder: String) -> Option<LeaseConfig> {
        let duration = self.leader_lease?;
        let table = self.target.checkpoint_table.clone()?;
        let name = values::table_of(&self.target.table_name);
        let (holder, range) = match self.options.shard_range {
            None => (holder, None),
            Some(range) => (
                crate::engine::lease::split_holder(&holder, self.target.layout.window_shards),
                Some(RangeLease {
                    id: format!("{name}/range{range}#leader"),
                    holder,
                }),
            ),
        };
        Some(LeaseConfig {
            table,
            id: format!("{name}#leader"),
            duration,
            holder,
            layout: self.lease_layout(),
            range,
        })
    }

    /// The layout a lease holder records in the lease item, so that a sweeper of another layout
    /// can tell: `index=<INDEX_NAME> ttl=<TTL_ATTRIBUTE> window=<WINDOW_ATTRIBUTE>
    /// width=<WINDOW_SECONDS>s shards=<WINDOW_SHARDS> range=<SHARD_RANGE>` (`range=all` for every
    /// shard). An expiry index table is `index=table:*` whatever its name: each Region's sweeper
    /// has one of its own, under a name of its own, and they sweep alike.
    pub fn lease_layout(&self) -> String {
        let range = self
            .options
            .shard_range
            .map_or_else(|| "all".to_owned(), |r| r.to_string());
        let index = match &self.target.index {
            Index::Table(_) => "table:*",
            Index::Gsi(name) => name.as_str(),
        };
        let layout = &self.target.layout;
        format!(
            "index={index} ttl={} window={} width={}s shards={} range={range}",
            layout.ttl_attribute,
            layout.window_attribute,
            layout.window_seconds,
            layout.window_shards
        )
    }
}

/// The checkpoint item's id of `target` for `range`: one per table, index, window layout and
/// shard range, so sweepers of two layouts (a shard migration) or of two shard ranges never move
/// each other's checkpoint; a range starts from the whole table's item until it has its own.
/// Its form, and that of the checkpoint table's other items (the stream position's,
/// [`checkpoint`]; the leases', [`Config::lease`]): the table atop `docs/upgrading.md`.
fn checkpoint_id(target: &TableTarget, range: Option<ShardRange>) -> String {
    let mut id = match &target.index {
        Index::Table(table) => format!("{}/table:{table}", target.table_name),
        Index::Gsi(name) => format!("{}/{name}", target.table_name),
    };
    let (width, shards) = (target.layout.window_seconds, target.layout.window_shards);
    if width != DEFAULT_WINDOW_SECONDS || shards != 1 {
        id.push_str(&format!("/{width}s/{shards}shards"));
    }
    if let Some(range) = range {
        id.push_str(&format!("/range{range}"));
    }
    id
}

/// The catch-up checkpoint of `target`'s sweeper of `range`, with a checkpoint table: its item,
/// the whole table's it starts from, and the stream position's ([`checkpoint_id`]).
fn checkpoint(target: &TableTarget, range: Option<ShardRange>) -> Option<Checkpoint> {
    let table = target.checkpoint_table.as_ref()?;
    let whole = checkpoint_id(target, None);
    Some(Checkpoint {
        table: table.clone(),
        id: checkpoint_id(target, range),
        stream_id: format!("{whole}#stream"),
        start_from: range.map(|_| whole),
    })
}

/// Parses a duration: plain seconds (`3600`) or humantime (`24h`, `90m`, `1h 30m`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let secs = text.parse().ok().map(Duration::from_secs);
    secs.or_else(|| humantime::parse_duration(text).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The settings in `pairs` as the environment gives them: a variable's last pair wins.
    pub(super) fn lookup<'a>(pairs: &[(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        let map: HashMap<&str, &str> = pairs.iter().copied().collect();
        move |k| map.get(k).map(|v| v.to_string())
    }

    /// The configuration the settings in `pairs` give (the rest from their defaults).
    pub(super) fn parse(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_lookup(lookup(pairs))
    }

    /// The configuration of table `sessions` with `pairs`.
    pub(super) fn sessions(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        parse(&[&[("TABLE_NAME", "sessions")], pairs].concat())
    }

    /// The configuration of table `sessions` with checkpoint table `state` and `pairs`.
    fn with_state(pairs: &[(&str, &str)]) -> Config {
        sessions(&[&[("CHECKPOINT_TABLE", "state")], pairs].concat()).unwrap()
    }

    /// The checkpoint id of table `sessions` with checkpoint table `state` and `pairs`.
    fn checkpoint(pairs: &[(&str, &str)]) -> String {
        with_state(pairs).options.checkpoint.unwrap().id
    }

    #[test]
    fn each_layout_has_its_own_checkpoint_and_the_default_keeps_the_old_id() {
        let layouts: [(&[(&str, &str)], &str); 3] = [
            (&[], "sessions/expirationWindowIndex"),
            (
                &[("WINDOW_SHARDS", "8")],
                "sessions/expirationWindowIndex/60s/8shards",
            ),
            (
                &[("WINDOW_SECONDS", "300")],
                "sessions/expirationWindowIndex/300s/1shards",
            ),
        ];
        for (pairs, id) in layouts {
            assert_eq!(checkpoint(pairs), id, "{pairs:?}");
        }
        assert_ne!(
            checkpoint(&[("WINDOW_SHARDS", "8")]),
            checkpoint(&[("WINDOW_SHARDS", "4")])
        );
    }

    #[test]
    fn the_leader_lease_is_off_by_default_and_lives_beside_each_checkpoint() {
        let c = with_state(&[]);
        assert_eq!(c.leader_lease, None);
        assert_eq!(c.lease("me".into()), None);
        let c = with_state(&[("SCHEDULE_SECONDS", "15"), ("LEADER_LEASE", "30")]);
        assert_eq!(c.leader_lease, Some(Duration::from_secs(30)));
        let lease = c.lease("us-east-1/sweeper".into()).unwrap();
        assert_eq!(lease.table, "state");
        assert_eq!(lease.id, "sessions#leader");
        assert_eq!(lease.duration, Duration::from_secs(30));
        assert_eq!(lease.holder, "us-east-1/sweeper");
        assert_eq!(
            lease.layout,
            "index=expirationWindowIndex ttl=ttl window=expirationWindow width=60s shards=1 range=all"
        );
        // Each shard range has its own lease beside the table's, which the sweepers of one
        // Region's split share: they sweep side by side, and no other Region beside them.
        let ranged = |lease: &str| {
            with_state(&[
                ("WINDOW_SHARDS", "4"),
                ("SHARD_RANGE", "0-1"),
                ("LEADER_LEASE", lease),
            ])
        };
        assert_eq!(ranged("off").lease("x".into()), None);
        let lease = ranged("3600").lease("eu-west-1/x".into()).unwrap();
        assert_eq!(lease.id, "sessions#leader");
        assert_eq!(lease.holder, "eu-west-1/split of 4 shards");
        let range = lease.range.unwrap();
        assert_eq!(range.id, "sessions/range0-1#leader");
        assert_eq!(range.holder, "eu-west-1/x");
        assert!(
            lease.layout.ends_with("shards=4 range=0-1"),
            "{}",
            lease.layout
        );
    }

    #[test]
    fn every_regions_sweeper_of_a_table_takes_one_lease_however_it_names_the_table() {
        let lease_id = |more: &[(&str, &str)]| {
            let pairs = [&[("LEADER_LEASE", "120")], more].concat();
            with_state(&pairs).lease("x".into()).unwrap().id
        };
        let by_name = lease_id(&[]);
        for arn in [
            "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions",
            "arn:aws:dynamodb:us-east-1:123456789012:table/sessions",
            "arn:aws-cn:dynamodb:cn-north-1:123456789012:table/sessions",
        ] {
            assert_eq!(lease_id(&[("TABLE_NAME", arn)]), by_name, "{arn}");
        }
        // A Region whose index or windows differ takes the same lease (and stands by beside a
        // holder of another layout, engine::lease).
        let layout = |more: &[(&str, &str)]| sessions(more).unwrap().lease_layout();
        let mut layouts = std::collections::HashSet::from([layout(&[])]);
        for more in [
            &[("INDEX_NAME", "byWindow")][..],
            &[("WINDOW_SECONDS", "300")],
            &[("WINDOW_SHARDS", "4")],
            &[("TTL_ATTRIBUTE", "expiresAt")],
            &[("WINDOW_ATTRIBUTE", "bucket")],
        ] {
            assert_eq!(lease_id(more), by_name, "{more:?}");
            // ... and records its layout, which tells them apart.
            assert!(layouts.insert(layout(more)), "{more:?}");
        }
        let arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions";
        assert_eq!(layout(&[("TABLE_NAME", arn)]), layout(&[]));
        assert_ne!(lease_id(&[("TABLE_NAME", "orders")]), by_name);
    }

    #[test]
    fn an_expiry_index_table_is_a_table_of_its_own_with_checkpoints_apart_from_the_gsi_s() {
        let c = sessions(&[("EXPIRY_INDEX_TABLE", "sessions-idx")]).unwrap();
        assert_eq!(c.target.index, Index::Table("sessions-idx".into()));
        assert_eq!(
            sessions(&[]).unwrap().target.index,
            Index::Gsi("expirationWindowIndex".into())
        );
        assert_eq!(checkpoint(&[]), "sessions/expirationWindowIndex");
        assert_eq!(
            checkpoint(&[("EXPIRY_INDEX_TABLE", "sessions-idx")]),
            "sessions/table:sessions-idx"
        );
        assert_ne!(
            checkpoint(&[("EXPIRY_INDEX_TABLE", "idx-west")]),
            checkpoint(&[("EXPIRY_INDEX_TABLE", "idx-east")]),
            "each Region's index table has its own checkpoint"
        );
        let arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions";
        for (table, index) in [
            ("sessions", "sessions"),
            (arn, "sessions"),
            ("orders", "state"),
        ] {
            let pairs = [
                ("TABLE_NAME", table),
                ("CHECKPOINT_TABLE", "state"),
                ("EXPIRY_INDEX_TABLE", index),
            ];
            let msg = parse(&pairs).unwrap_err().to_string();
            assert!(
                msg.contains("EXPIRY_INDEX_TABLE") && msg.contains("of its own"),
                "{msg}"
            );
        }
    }

    #[test]
    fn regions_with_expiry_index_tables_of_their_own_share_the_lease_and_its_layout_not_their_checkpoints(
    ) {
        let region = |index: &str| {
            with_state(&[
                ("EXPIRY_INDEX_TABLE", index),
                ("SCHEDULE_SECONDS", "2"),
                ("LEADER_LEASE", "5"),
            ])
        };
        let (east, west) = (
            region("sessions-expiry-east"),
            region("sessions-expiry-west"),
        );
        let (east_lease, west_lease) = (
            east.lease("us-east-1/a".into()).unwrap(),
            west.lease("us-west-2/b".into()).unwrap(),
        );
        assert_eq!(east_lease.id, "sessions#leader");
        assert_eq!(west_lease.id, east_lease.id);
        // One layout: neither stands by beside the other as a sweeper of another layout.
        assert_eq!(
            east_lease.layout,
            "index=table:* ttl=ttl window=expirationWindow width=60s shards=1 range=all"
        );
        assert_eq!(west_lease.layout, east_lease.layout);
        // Their checkpoints (and the stream positions saved beside them) are their own.
        let checkpoint = |c: Config| c.options.checkpoint.unwrap().id;
        assert_eq!(checkpoint(east), "sessions/table:sessions-expiry-east");
        assert_eq!(checkpoint(west), "sessions/table:sessions-expiry-west");
        // A Region sweeping through the GSI, or with other windows, is of another layout.
        let gsi = sessions(&[]).unwrap();
        assert_ne!(gsi.lease_layout(), east_lease.layout);
        let wide = sessions(&[
            ("EXPIRY_INDEX_TABLE", "sessions-expiry-east"),
            ("WINDOW_SECONDS", "300"),
        ])
        .unwrap();
        assert_ne!(wide.lease_layout(), east_lease.layout);
    }

    #[test]
    fn each_shard_range_has_its_own_checkpoint_and_all_shards_keep_the_layout_id() {
        let config = |range: &str| with_state(&[("WINDOW_SHARDS", "12"), ("SHARD_RANGE", range)]);
        let id = |range: &str| config(range).options.checkpoint.unwrap().id;
        assert_eq!(id("all"), "sessions/expirationWindowIndex/60s/12shards");
        assert_eq!(id("0-11"), id("all"));
        assert_eq!(
            id("0-3"),
            "sessions/expirationWindowIndex/60s/12shards/range0-3"
        );
        let ids: std::collections::HashSet<String> = ["0-3", "4-7", "8-11", "all", "0-5"]
            .iter()
            .map(|r| id(r))
            .collect();
        assert_eq!(ids.len(), 5, "{ids:?}");
        assert_eq!(
            config("4-7").options.shard_range,
            Some(ShardRange { first: 4, last: 7 })
        );
        assert_eq!(config("all").options.shard_range, None);
        // A range starts from the whole table's checkpoint until it has its own.
        let start_from = |range: &str| config(range).options.checkpoint.unwrap().start_from;
        assert_eq!(start_from("4-7"), Some(id("all")));
        assert_eq!(start_from("all"), None);
        // The stream position is one per table, whatever range this process sweeps.
        let stream = |range: &str| config(range).options.checkpoint.unwrap().stream_id;
        assert_eq!(stream("4-7"), format!("{}#stream", id("all")));
        assert_eq!(stream("all"), stream("0-3"));
    }
}
