//! [`Settings::validate`]: raw setting values to a [`Config`], every value checked once.

use std::time::Duration;

use super::values::*;
use super::*;
use crate::engine::lease::MIN_LEASE;
use crate::engine::DeleteMode;
use crate::events::{EventsConfig, EventsMode, ItemSource, SinkTarget};
use crate::expiry::Layout;
use crate::store::Retry;

/// A setting's raw value in [`Settings`].
type Field = for<'a> fn(&'a mut Settings) -> &'a mut Option<String>;

/// The settings a `TABLES` entry may set for its table, with their fields.
const PER_TABLE: [(&Setting, Field); 14] = [
    (&INDEX_NAME, |s| &mut s.index_name),
    (&EXPIRY_INDEX_TABLE, |s| &mut s.expiry_index_table),
    (&TTL_ATTRIBUTE, |s| &mut s.ttl_attribute),
    (&WINDOW_ATTRIBUTE, |s| &mut s.window_attribute),
    (&WINDOW_SECONDS, |s| &mut s.window_seconds),
    (&WINDOW_SHARDS, |s| &mut s.window_shards),
    (&LOOKBACK_WINDOWS, |s| &mut s.lookback_windows),
    (&SHARD_RANGE, |s| &mut s.shard_range),
    (&DELETE_MODE, |s| &mut s.delete_mode),
    (&MAX_CONCURRENCY, |s| &mut s.max_concurrency),
    (&MAX_RETRIES, |s| &mut s.max_retries),
    (&EXPIRY_EVENTS, |s| &mut s.expiry_events),
    (&EXPIRY_EVENTS_MODE, |s| &mut s.expiry_events_mode),
    (&EXPIRY_EVENTS_ITEM, |s| &mut s.expiry_events_item),
];

impl Settings {
    /// Validates the settings of every table named by `TABLE_NAME` (one or several) and `TABLES`
    /// (each entry with the settings that differ for its table; the others are the variables'),
    /// in that order: one [`Config`] per table. A table named twice is refused, and an error in
    /// one table's settings names the table when there are several.
    pub fn validate_tables(&self) -> Result<Vec<Config>, ConfigError> {
        self.tables_swept(None)
    }

    /// The tables of `ttl-sweeper run`, which sweeps every `every` (`--every`): as
    /// [`Settings::validate_tables`], `LEADER_LEASE` outlasting two `every`; `TICK_SECONDS`, the
    /// Lambda's, is refused.
    pub fn validate_run(&self, every: Duration) -> Result<Vec<Config>, ConfigError> {
        let tick = get(self.tick_seconds.as_deref(), &TICK_SECONDS)?;
        if !(tick.eq_ignore_ascii_case("off") || tick == "0") {
            return Err(ConfigError::NotUsed {
                var: TICK_SECONDS.var,
                value: tick,
                command: "run",
                instead: "it is the Lambda's tick period, and `run` sweeps every --every",
            });
        }
        self.tables_swept(Some(every))
    }

    /// [`Settings::validate_tables`], sweeping every `every` (`run`) or as the settings say.
    fn tables_swept(&self, every: Option<Duration>) -> Result<Vec<Config>, ConfigError> {
        let one = |table_name| Settings {
            table_name,
            tables: None,
            ..self.clone()
        };
        let names = self.table_names().into_iter();
        let mut each: Vec<Settings> = names.map(|name| one(vec![name])).collect();
        if let Some(raw) = self.tables.as_deref().filter(|raw| given(Some(raw))) {
            for entry in table_entries(raw)? {
                let mut settings = one(Vec::new());
                for (var, value) in entry {
                    let field = PER_TABLE.iter().find(|(s, _)| s.var == var);
                    match field {
                        _ if var == "TABLE_NAME" => settings.table_name = vec![value],
                        Some((_, field)) => *field(&mut settings) = Some(value),
                        None => {
                            let problem = format!(
                                "{var} is not a setting a table can have for itself (those are \
                                 TABLE_NAME, {})",
                                PER_TABLE.map(|(s, _)| s.var).join(", ")
                            );
                            return Err(rejected(&TABLES, raw, problem));
                        }
                    }
                }
                if settings.table_name.is_empty() {
                    let problem = "an entry has no TABLE_NAME".to_owned();
                    return Err(rejected(&TABLES, raw, problem));
                }
                each.push(settings);
            }
        }
        if each.is_empty() {
            // Nothing named: the error of the one required setting.
            return self.validate_swept(every).map(|config| vec![config]);
        }
        let several = each.len() > 1;
        let mut configs: Vec<Config> = Vec::with_capacity(each.len());
        for settings in each {
            let config = settings.validate_swept(every).map_err(|e| match several {
                false => e,
                true => ConfigError::InTable {
                    table: settings.table_name.concat(),
                    source: Box::new(e),
                },
            })?;
            let table = &config.target.table_name;
            if configs
                .iter()
                .any(|c| table_of(&c.target.table_name) == table_of(table))
            {
                return Err(ConfigError::DuplicateTable {
                    table: table.clone(),
                });
            }
            fn index_of(c: &Config) -> Option<&str> {
                c.target.index.table().map(table_of)
            }
            let sharing = configs
                .iter()
                .find(|c| index_of(c).is_some() && index_of(c) == index_of(&config));
            if let (Some(first), Some(index)) = (sharing, config.target.index.table()) {
                return Err(ConfigError::SharedIndexTable {
                    index: index.to_owned(),
                    first: first.target.table_name.clone(),
                    second: table.clone(),
                });
            }
            configs.push(config);
        }
        Ok(configs)
    }

    /// The one table of a command that works on one table: as [`Settings::validate`], and
    /// refused with several tables named.
    pub fn validate_one(&self, command: &'static str) -> Result<Config, ConfigError> {
        let count = self.table_names().len() + usize::from(given(self.tables.as_deref()));
        if count > 1 {
            return Err(ConfigError::OneTable { command, count });
        }
        self.validate()
    }

    /// The one table of `ttl-sweeper backfill` ([`Settings::validate_one`]). Backfill publishes
    /// no expiry events: of their settings it reads only `EXPIRY_EVENTS_MODE`, and with `archive`
    /// accepts only a `dry_run`.
    pub fn validate_backfill(&self, dry_run: bool) -> Result<Config, ConfigError> {
        let mode = get(self.expiry_events_mode.as_deref(), &EXPIRY_EVENTS_MODE)?;
        if choice(Some(&mode), &EXPIRY_EVENTS_MODE, EVENTS_MODES)? == EventsMode::Archive
            && !dry_run
        {
            let problem = "backfill deletes the items it finds already expired without publishing \
                           their expiry events, so they would not be archived. Run it with \
                           --dry-run to count them, or without EXPIRY_EVENTS_MODE=archive if those \
                           items need no archive"
                .to_owned();
            return Err(rejected(&EXPIRY_EVENTS_MODE, &mode, problem));
        }
        let without_events = Settings {
            expiry_events: None,
            expiry_events_mode: None,
            expiry_events_item: None,
            ..self.clone()
        };
        without_events.validate_one("backfill")
    }

    /// `TABLE_NAME`'s tables, trimmed, blanks left out.
    fn table_names(&self) -> Vec<String> {
        let names = self.table_name.iter().map(|name| name.trim());
        names.filter(|n| !n.is_empty()).map(str::to_owned).collect()
    }

    /// Validates every setting, defaulting those absent or blank: the one place raw values become
    /// a [`Config`], for the one table `TABLE_NAME` names. Every error names the variable, its
    /// flag and what it accepts.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        self.validate_swept(None)
    }

    /// [`Settings::validate`], sweeping every `every` (`run`), or else every `TICK_SECONDS` in tick
    /// mode and every `SCHEDULE_SECONDS` otherwise (the Lambda, `sweep`).
    fn validate_swept(&self, every: Option<Duration>) -> Result<Config, ConfigError> {
        let table_name = match self.table_names().as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            several => {
                return Err(ConfigError::OneTable {
                    command: "this command",
                    count: several.len(),
                })
            }
        };
        // Each value checked in the order of the settings, each error the first one's.
        let table_name = name(table_name.as_deref(), &TABLE_NAME)?;
        let index_name = name(self.index_name.as_deref(), &INDEX_NAME)?;
        let index = match table(self.expiry_index_table.as_deref(), &EXPIRY_INDEX_TABLE)? {
            Some(index_table) => Index::Table(index_table),
            None => Index::Gsi(index_name),
        };
        let ttl_attribute = attribute(self.ttl_attribute.as_deref(), &TTL_ATTRIBUTE)?;
        let window_attribute = attribute(self.window_attribute.as_deref(), &WINDOW_ATTRIBUTE)?;
        let window_seconds = window_seconds(self.window_seconds.as_deref())?;
        let lookback_windows = number(self.lookback_windows.as_deref(), &LOOKBACK_WINDOWS)? as u32;
        let delete_mode = choice(self.delete_mode.as_deref(), &DELETE_MODE, DELETE_MODES)?;
        let max_concurrency = number(self.max_concurrency.as_deref(), &MAX_CONCURRENCY)? as usize;
        let max_retries = number(self.max_retries.as_deref(), &MAX_RETRIES)? as u32;
        let window_shards = window_shards(self.window_shards.as_deref())?;
        let tick = duration(self.tick_seconds.as_deref(), &TICK_SECONDS)?;
        let schedule_seconds = number(self.schedule_seconds.as_deref(), &SCHEDULE_SECONDS)? as u32;
        let checkpoint_table = table(self.checkpoint_table.as_deref(), &CHECKPOINT_TABLE)?;
        let max_catchup_seconds = duration(self.max_catchup.as_deref(), &MAX_CATCHUP)?
            .expect("MAX_CATCHUP is never off")
            .as_secs();
        let leader_lease =
            whole_or_off(self.leader_lease.as_deref(), &LEADER_LEASE)?.map(Duration::from_secs);
        let sink = match get(self.expiry_events.as_deref(), &EXPIRY_EVENTS)? {
            raw if raw.is_empty() => None,
            raw => Some(
                SinkTarget::parse(&raw)
                    .map_err(|problem| rejected(&EXPIRY_EVENTS, &raw, problem))?,
            ),
        };
        let events_mode = choice(
            self.expiry_events_mode.as_deref(),
            &EXPIRY_EVENTS_MODE,
            EVENTS_MODES,
        )?;
        let events_item = choice(
            self.expiry_events_item.as_deref(),
            &EXPIRY_EVENTS_ITEM,
            [ItemSource::Auto, ItemSource::Read, ItemSource::Off],
        )?;
        let delete_when_indexed = choice(
            self.delete_when_indexed.as_deref(),
            &DELETE_WHEN_INDEXED,
            [true, false],
        )?;
        let namespace = {
            // METRICS_NAMESPACE wins; unset, Powertools' POWERTOOLS_METRICS_NAMESPACE.
            let powertools = self.powertools_metrics_namespace.as_deref();
            let (mut raw, mut source) = (self.metrics_namespace.as_deref(), METRICS_NAMESPACE);
            if !given(raw) && given(powertools) {
                (raw, source.var) = (powertools, POWERTOOLS_METRICS_NAMESPACE);
            }
            namespace(raw, &source)?
        };
        let shard_range = shard_range(
            &get(self.shard_range.as_deref(), &SHARD_RANGE)?,
            window_shards,
        )?;

        // Then what each depends on of the others.
        if let Index::Table(index_table) = &index {
            let taken = [Some(&table_name), checkpoint_table.as_ref()];
            if taken
                .into_iter()
                .flatten()
                .any(|t| table_of(t) == table_of(index_table))
            {
                let problem = "the expiry index table must be a table of its own, not the swept \
                               table nor the checkpoint table"
                    .to_owned();
                return Err(rejected(&EXPIRY_INDEX_TABLE, index_table, problem));
            }
        }
        let schedule = Duration::from_secs(u64::from(schedule_seconds));
        if let Some(tick) = tick.filter(|&tick| tick >= schedule) {
            return Err(invalid(&TICK_SECONDS, &format!("{tick:?}")));
        }
        if let Some(lease) = leader_lease {
            let every = match (every, tick) {
                (Some(every), _) => (every, "--every"),
                (None, Some(tick)) => (tick, "TICK_SECONDS"),
                (None, None) => (schedule, "SCHEDULE_SECONDS"),
            };
            leader_lease_lasts(lease, checkpoint_table.is_some(), every)?;
        }
        let needed = covering_lookback(window_seconds, schedule_seconds);
        let lookback_windows = if !given(self.lookback_windows.as_deref()) {
            lookback_windows.max(needed)
        } else if lookback_windows < needed && checkpoint_table.is_none() {
            return Err(ConfigError::Uncovered {
                lookback_windows,
                window_seconds,
                schedule_seconds,
                needed,
            });
        } else {
            lookback_windows
        };
        let shards_read = shard_range.map_or(window_shards, |r| r.len()).max(1);
        let partitions = (u64::from(lookback_windows) + 1) * u64::from(shards_read);
        if partitions > MAX_PARTITIONS_PER_SWEEP {
            return Err(ConfigError::TooManyPartitions {
                lookback_windows,
                shards: shards_read,
                partitions,
            });
        }
        let archive_problem = match (&sink, delete_mode) {
            _ if events_mode != EventsMode::Archive => None,
            (None, _) => Some("archive mode needs a sink: set EXPIRY_EVENTS".to_owned()),
            (_, DeleteMode::Batch) => Some(
                "archive mode needs DELETE_MODE=conditional (DELETE_MODE is batch): a batch delete \
                 cannot tell a ttl extended while the event was published"
                    .to_owned(),
            ),
            (_, DeleteMode::Conditional) => None,
        };
        if let Some(problem) = archive_problem {
            return Err(rejected(&EXPIRY_EVENTS_MODE, "archive", problem));
        }
        if ttl_attribute == window_attribute {
            return Err(ConfigError::Invalid {
                var: WINDOW_ATTRIBUTE.var,
                value: window_attribute,
                expected: "an attribute different from TTL_ATTRIBUTE".to_owned(),
            });
        }

        // The narrow structs each part takes.
        let events = sink.map(|target| EventsConfig {
            target,
            mode: events_mode,
            item: events_item,
            table: table_name.clone(),
            delete_mode,
            max_retries,
        });
        let layout = Layout {
            ttl_attribute,
            window_attribute,
            window_seconds,
            window_shards,
        };
        let target = TableTarget {
            table_name,
            index,
            layout,
            checkpoint_table,
        };
        let options = SweepOptions {
            lookback_windows,
            delete_mode,
            max_concurrency,
            retry: Retry::default().with_retries(max_retries),
            checkpoint: checkpoint(&target, shard_range),
            shard_range,
            max_catchup_seconds,
            delete_when_indexed,
            ..SweepOptions::default()
        };
        let handler = HandlerSettings {
            namespace,
            tick,
            schedule,
            handoff: crate::lambda::handler::HANDOFF_OVERLAP,
        };
        Ok(Config {
            target,
            options,
            handler,
            events,
            leader_lease,
        })
    }
}

/// `DELETE_MODE`'s values, in the order of its words.
const DELETE_MODES: [DeleteMode; 2] = [DeleteMode::Batch, DeleteMode::Conditional];

/// `EXPIRY_EVENTS_MODE`'s values, in the order of its words.
const EVENTS_MODES: [EventsMode; 2] = [EventsMode::Notify, EventsMode::Archive];

/// Whether a `TABLES` entry may give `setting` for its table.
pub(super) fn is_per_table(setting: &Setting) -> bool {
    PER_TABLE.iter().any(|(s, _)| s.var == setting.var)
}

/// Checks `LEADER_LEASE` against the settings it depends on: the checkpoint table holds the lease
/// item, and a lease shorter than two sweeps (`every`, and the setting it comes from) would lapse
/// between a holder's sweeps.
fn leader_lease_lasts(
    lease: Duration,
    has_checkpoint: bool,
    (every, var): (Duration, &str),
) -> Result<(), ConfigError> {
    let problem = if !has_checkpoint {
        "the lease item lives in the checkpoint table: set CHECKPOINT_TABLE".to_owned()
    } else if lease < 2 * every {
        let least = (2 * every).max(MIN_LEASE).as_secs_f64().ceil();
        format!(
            "shorter than two sweeps ({var} is {every:?}): the holder's lease would lapse between \
             its sweeps; set LEADER_LEASE to at least {least}"
        )
    } else {
        return Ok(());
    };
    let value = lease.as_secs().to_string();
    Err(rejected(&LEADER_LEASE, &value, problem))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{lookup, parse, sessions};
    use super::*;

    #[test]
    fn defaults_apply_when_only_the_table_is_given() {
        let c = sessions(&[]).unwrap();
        assert_eq!(c.target.table_name, "sessions");
        assert_eq!(c.target.index, Index::Gsi("expirationWindowIndex".into()));
        assert_eq!(c.target.layout.ttl_attribute, "ttl");
        assert_eq!(c.target.layout.window_attribute, "expirationWindow");
        assert_eq!(c.target.layout.window_seconds, 60);
        assert_eq!(c.options.lookback_windows, 15);
        assert_eq!(c.options.delete_mode, DeleteMode::Batch);
        assert_eq!(c.options.max_concurrency, 8);
        assert_eq!(c.options.retry.retries(), 8);
        assert_eq!(c.target.layout.window_shards, 1);
        assert_eq!(c.options.shard_range, None);
        assert_eq!(c.handler.tick, None);
        assert_eq!(c.handler.schedule, Duration::from_secs(60));
        assert_eq!(c.target.checkpoint_table, None);
        assert_eq!(c.options.max_catchup_seconds, 86_400);
        assert_eq!(c.handler.namespace, "TtlSweeper");
    }

    #[test]
    fn metrics_namespace_falls_back_to_powertools_and_yields_to_its_own_setting() {
        let powertools = ("POWERTOOLS_METRICS_NAMESPACE", "Orders");
        let c = sessions(&[powertools]).unwrap();
        assert_eq!(c.handler.namespace, "Orders");
        let both = [powertools, ("METRICS_NAMESPACE", "Mine")];
        assert_eq!(sessions(&both).unwrap().handler.namespace, "Mine");
        let bad = [("POWERTOOLS_METRICS_NAMESPACE", "AWS/Lambda")];
        let e = sessions(&bad).unwrap_err().to_string();
        assert!(e.contains("POWERTOOLS_METRICS_NAMESPACE"), "{e}");
    }

    #[test]
    fn precision_and_scale_settings() {
        let c = sessions(&[
            ("WINDOW_SHARDS", "16"),
            ("TICK_SECONDS", "1"),
            ("CHECKPOINT_TABLE", "sweeper-state"),
            ("MAX_CATCHUP", "3h"),
        ])
        .unwrap();
        assert_eq!(c.target.layout.window_shards, 16);
        assert_eq!(c.handler.tick, Some(Duration::from_secs(1)));
        assert_eq!(c.target.checkpoint_table.as_deref(), Some("sweeper-state"));
        assert_eq!(c.options.max_catchup_seconds, 3 * 3600);
        assert_eq!(
            parse(&[("TABLE_NAME", "t_1"), ("TICK_SECONDS", "off")])
                .unwrap()
                .handler
                .tick,
            None
        );
        assert_eq!(
            parse(&[("TABLE_NAME", "t_1"), ("MAX_CATCHUP", "7200")])
                .unwrap()
                .options
                .max_catchup_seconds,
            7200
        );
    }

    #[test]
    fn missing_table_names_the_variable_and_flag() {
        let e = parse(&[]).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("TABLE_NAME") && msg.contains("--table-name"),
            "{msg}"
        );
        // blank counts as missing
        assert!(matches!(
            parse(&[("TABLE_NAME", "  ")]),
            Err(ConfigError::Missing {
                var: "TABLE_NAME",
                ..
            })
        ));
    }

    #[test]
    fn invalid_values_name_the_variable_and_accepted_values() {
        let cases: &[(&str, &str, &str)] = &[
            ("WINDOW_SECONDS", "0", "1 to 86400"),
            ("WINDOW_SECONDS", "60s", "1 to 86400"),
            ("WINDOW_SECONDS", "86401", "1 to 86400"),
            ("WINDOW_SECONDS", "-60", "1 to 86400"),
            ("LOOKBACK_WINDOWS", "10001", "0 to 10000"),
            ("LOOKBACK_WINDOWS", "many", "0 to 10000"),
            ("DELETE_MODE", "fast", "`batch` or `conditional`"),
            ("MAX_CONCURRENCY", "0", "1 to 256"),
            ("MAX_CONCURRENCY", "1000", "1 to 256"),
            ("MAX_RETRIES", "31", "0 to 30"),
            ("MAX_RETRIES", "2.5", "0 to 30"),
            ("INDEX_NAME", "ix", "3-255 characters"),
            ("INDEX_NAME", "bad name!", "3-255 characters"),
            ("TABLE_NAME", "t", "3-255 characters"),
            ("WINDOW_SHARDS", "0", "1 to 1000"),
            ("WINDOW_SHARDS", "1001", "1 to 1000"),
            ("TICK_SECONDS", "31", "1 to 30"),
            ("TICK_SECONDS", "fast", "1 to 30"),
            ("TICK_SECONDS", "50ms", "100ms to 30s"),
            ("TICK_SECONDS", "31s", "100ms to 30s"),
            ("SCHEDULE_SECONDS", "0", "1 to 3600"),
            ("CHECKPOINT_TABLE", "x", "partition key `id`"),
            ("MAX_CATCHUP", "10s", "1m to 30d"),
            ("MAX_CATCHUP", "forever", "1m to 30d"),
            ("MAX_CATCHUP", "31d", "1m to 30d"),
            ("METRICS_NAMESPACE", "AWS/DynamoDB", "CloudWatch namespace"),
            ("METRICS_NAMESPACE", "bad\u{1}ns", "CloudWatch namespace"),
        ];
        for (var, value, expected) in cases {
            // TABLE_NAME given here replaces the table `sessions`.
            let err = sessions(&[(var, value)]).unwrap_err();
            let msg = err.to_string();
            assert!(
                matches!(err, ConfigError::Invalid { var: v, .. } if v == *var),
                "{msg}"
            );
            assert!(msg.contains(var), "{msg}");
            assert!(msg.contains(expected), "{var}={value}: {msg}");
            assert!(msg.contains(&format!("--{}", var.to_ascii_lowercase().replace('_', "-"))));
        }
    }

    #[test]
    fn accepts_arns_case_insensitive_modes_and_limits() {
        let c = parse(&[
            (
                "TABLE_NAME",
                "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions",
            ),
            ("DELETE_MODE", "Conditional"),
            ("WINDOW_SECONDS", "86400"),
            ("LOOKBACK_WINDOWS", "0"),
            // no lookback is only complete with a checkpoint: sweeps catch up from it
            ("CHECKPOINT_TABLE", "sweeper-state"),
            ("MAX_CONCURRENCY", "256"),
            ("MAX_RETRIES", "0"),
        ])
        .unwrap();
        assert_eq!(c.options.delete_mode, DeleteMode::Conditional);
        assert_eq!(c.target.layout.window_seconds, 86_400);
        assert_eq!(c.options.lookback_windows, 0);
    }

    proptest::proptest! {
        /// Any value for any setting either parses into range or fails naming that setting.
        #[test]
        fn any_value_is_accepted_in_range_or_rejected_by_name(
            which in 0usize..SETTINGS.len(),
            value in proptest::prop_oneof!["[0-9]{1,6}", "-?[0-9a-z.:/_ -]{0,20}", ".{0,12}"],
        ) {
            let setting = SETTINGS[which];
            match sessions(&[(setting.var, value.as_str())]) {
                Ok(c) => {
                    proptest::prop_assert!((1..=86_400).contains(&c.target.layout.window_seconds));
                    proptest::prop_assert!(c.options.lookback_windows <= 10_000);
                    proptest::prop_assert!((1..=256).contains(&c.options.max_concurrency));
                    proptest::prop_assert!(c.options.retry.retries() <= 30);
                    proptest::prop_assert!((1..=1000).contains(&c.target.layout.window_shards));
                    proptest::prop_assert!(c.handler.tick.is_none_or(|t| (MIN_TICK..=MAX_TICK).contains(&t) && t < c.handler.schedule));
                    proptest::prop_assert!((60..=30 * 86_400).contains(&c.options.max_catchup_seconds));
                }
                Err(e) => {
                    // TICK_SECONDS is checked against SCHEDULE_SECONDS; the window attribute
                    // against the ttl attribute: those errors name the other setting.
                    let msg = e.to_string();
                    proptest::prop_assert!(
                        msg.contains(setting.var) || msg.contains("TICK_SECONDS") || msg.contains("WINDOW_ATTRIBUTE"),
                        "{msg}"
                    );
                }
            }
        }
    }

    #[test]
    fn each_rule_s_bounds_are_the_check_s() {
        // What the other settings need for a bound to stand alone: a checkpoint (any lookback,
        // a lease) and a 2 s schedule (a 5 s lease is two sweeps of it; a 30 s tick is not less
        // than it, so ticks get the default schedule).
        let context = |var: &str| match var {
            "TICK_SECONDS" => vec![],
            _ => vec![
                ("CHECKPOINT_TABLE", "checkpoints"),
                ("SCHEDULE_SECONDS", "2"),
            ],
        };
        let mut checked = 0;
        for setting in SETTINGS.iter().filter(|s| s.var != "SCHEDULE_SECONDS") {
            let (inside, outside): (Vec<String>, Vec<String>) = match setting.rule {
                Rule::Whole { min, max, .. } => (
                    vec![min.to_string(), max.to_string()],
                    [min.checked_sub(1), Some(max + 1)]
                        .into_iter()
                        .flatten()
                        .map(|n| n.to_string())
                        .collect(),
                ),
                Rule::Duration { min, max, .. } => (
                    vec![
                        format!("{}ms", min.as_millis()),
                        format!("{}ms", max.as_millis()),
                    ],
                    vec![
                        format!("{}ms", min.as_millis() - 1),
                        format!("{}ms", max.as_millis() + 1),
                    ],
                ),
                Rule::Choice(words) => (
                    words.iter().map(|w| w.to_uppercase()).collect(),
                    vec![format!("{}x", words[0])],
                ),
                _ => continue,
            };
            let with = |value: &str| {
                let mut pairs = context(setting.var);
                pairs.push((setting.var, value));
                if setting.var == "EXPIRY_EVENTS_MODE" {
                    pairs.push((
                        "EXPIRY_EVENTS",
                        "sqs:https://sqs.us-east-1.amazonaws.com/1/q",
                    ));
                    pairs.push(("DELETE_MODE", "conditional"));
                }
                sessions(&pairs)
            };
            for value in &inside {
                assert!(
                    with(value).is_ok(),
                    "{}={value}: {:?}",
                    setting.var,
                    with(value)
                );
            }
            for value in &outside {
                let err = with(value).unwrap_err().to_string();
                assert!(
                    err.contains(setting.var) && err.contains(&setting.rule.describe()),
                    "{}={value}: {err}",
                    setting.var
                );
            }
            checked += 1;
        }
        assert_eq!(
            checked, 12,
            "settings with bounds or words but SCHEDULE_SECONDS"
        );
    }

    #[test]
    fn expiry_events_settings() {
        let c = sessions(&[]).unwrap();
        assert_eq!(c.events, None, "off unless EXPIRY_EVENTS is set");
        let sink = ("EXPIRY_EVENTS", "eventbridge:default");
        let defaults = sessions(&[sink]).unwrap().events.unwrap();
        assert_eq!(defaults.mode, EventsMode::Notify);
        assert_eq!(defaults.item, ItemSource::Auto);
        let c = sessions(&[
            (
                "EXPIRY_EVENTS",
                "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/expiries",
            ),
            ("EXPIRY_EVENTS_MODE", "Archive"),
            ("EXPIRY_EVENTS_ITEM", "read"),
            ("DELETE_MODE", "conditional"),
            ("MAX_RETRIES", "3"),
        ])
        .unwrap();
        let events = c.events.clone().unwrap();
        assert_eq!(
            events.target,
            SinkTarget::Sqs("https://sqs.us-east-1.amazonaws.com/123456789012/expiries".into())
        );
        assert_eq!(events.mode, EventsMode::Archive);
        assert_eq!(events.item, ItemSource::Read);
        assert_eq!(events.table, "sessions");
        assert_eq!(events.max_retries, 3);
        // blank is off
        assert_eq!(
            parse(&[("TABLE_NAME", "t_1"), ("EXPIRY_EVENTS", " ")])
                .unwrap()
                .events,
            None
        );
    }

    #[test]
    fn bad_expiry_events_settings_say_what_is_wrong() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("EXPIRY_EVENTS", "kafka:topic")], "unknown sink scheme"),
            (&[("EXPIRY_EVENTS", "sqs:")], "empty target"),
            (&[("EXPIRY_EVENTS", "eventbridge")], "no sink scheme"),
            (&[("EXPIRY_EVENTS", "sqs:not-a-url")], "not a queue URL"),
            (
                &[(
                    "EXPIRY_EVENTS",
                    "eventbridge:arn:aws:events:us-east-1:1:event-bus/b",
                )],
                "not an event bus ARN",
            ),
            (&[("EXPIRY_EVENTS_MODE", "archiv")], "`notify` or `archive`"),
            (&[("EXPIRY_EVENTS_ITEM", "all")], "`auto`, `read` or `off`"),
            (
                &[
                    ("EXPIRY_EVENTS_MODE", "archive"),
                    ("DELETE_MODE", "conditional"),
                ],
                "archive mode needs a sink",
            ),
            (
                &[
                    ("EXPIRY_EVENTS_MODE", "archive"),
                    ("EXPIRY_EVENTS", "firehose:s"),
                ],
                "needs DELETE_MODE=conditional",
            ),
        ];
        for (pairs, why) in cases {
            // The setting named is the first one given.
            let var = pairs[0].0;
            let msg = sessions(pairs).unwrap_err().to_string();
            assert!(msg.contains(var) && msg.contains(why), "{pairs:?}: {msg}");
            let flag = format!("--{}", var.to_ascii_lowercase().replace('_', "-"));
            assert!(msg.contains(&flag), "{msg}");
        }
    }

    #[test]
    fn sub_second_ticks() {
        let tick =
            |v: &str| parse(&[("TABLE_NAME", "t_1"), ("TICK_SECONDS", v)]).map(|c| c.handler.tick);
        assert_eq!(tick("250ms"), Ok(Some(Duration::from_millis(250))));
        assert_eq!(tick("100ms"), Ok(Some(Duration::from_millis(100))));
        assert_eq!(tick("2"), Ok(Some(Duration::from_secs(2))));
        assert_eq!(tick("1s 500ms"), Ok(Some(Duration::from_millis(1500))));
        assert!(tick("99ms").is_err());
    }

    #[test]
    fn tick_must_be_shorter_than_the_schedule() {
        let e = sessions(&[("TICK_SECONDS", "10"), ("SCHEDULE_SECONDS", "10")]).unwrap_err();
        assert!(
            e.to_string().contains("TICK_SECONDS") && e.to_string().contains("SCHEDULE_SECONDS"),
            "{e}"
        );
    }

    #[test]
    fn window_shape_defaults_and_fails_like_the_settings() {
        assert_eq!(window_shape(None, None), Ok((60, 1)));
        assert_eq!(window_shape(Some(" 300 "), Some("")), Ok((300, 1)));
        assert_eq!(
            window_shape(Some("86400"), Some("1000")),
            Ok((86_400, 1000))
        );
        for (seconds, shards, var) in [
            ("0", "1", "WINDOW_SECONDS"),
            ("86401", "1", "WINDOW_SECONDS"),
            ("60", "0", "WINDOW_SHARDS"),
            ("60", "1001", "WINDOW_SHARDS"),
        ] {
            let alone = window_shape(Some(seconds), Some(shards)).unwrap_err();
            let in_config =
                sessions(&[("WINDOW_SECONDS", seconds), ("WINDOW_SHARDS", shards)]).unwrap_err();
            assert_eq!(alone, in_config, "the same message everywhere");
            assert!(matches!(alone, ConfigError::Invalid { var: v, .. } if v == var));
        }
    }

    #[test]
    fn ttl_and_window_attributes_must_differ() {
        let e = sessions(&[("TTL_ATTRIBUTE", "exp"), ("WINDOW_ATTRIBUTE", "exp")]).unwrap_err();
        assert!(e.to_string().contains("WINDOW_ATTRIBUTE"), "{e}");
    }

    #[test]
    fn the_lookback_covers_the_schedule_period_or_the_settings_are_refused() {
        // (settings, expected lookback or None for refused)
        #[allow(clippy::type_complexity)]
        let cases: &[(&[(&str, &str)], Option<u32>)] = &[
            (&[], Some(15)),
            // 3 s windows: 15 would cover 45 s of a 60 s schedule; derived: ceil(70 / 3)
            (&[("WINDOW_SECONDS", "3")], Some(24)),
            (&[("SCHEDULE_SECONDS", "3600")], Some(61)),
            (
                &[("WINDOW_SECONDS", "1"), ("SCHEDULE_SECONDS", "3600")],
                Some(3610),
            ),
            (&[("LOOKBACK_WINDOWS", "2")], Some(2)),
            (&[("LOOKBACK_WINDOWS", "1")], None),
            (&[("LOOKBACK_WINDOWS", "0"), ("TICK_SECONDS", "1")], None),
            (&[("WINDOW_SECONDS", "3"), ("LOOKBACK_WINDOWS", "15")], None),
            (
                &[("LOOKBACK_WINDOWS", "1"), ("SCHEDULE_SECONDS", "30")],
                Some(1),
            ),
            (
                &[
                    ("LOOKBACK_WINDOWS", "0"),
                    ("CHECKPOINT_TABLE", "sweeper-state"),
                ],
                Some(0),
            ),
        ];
        for (pairs, want) in cases {
            match (sessions(pairs), want) {
                (Ok(c), Some(n)) => assert_eq!(c.options.lookback_windows, *n, "{pairs:?}"),
                (Err(e @ ConfigError::Uncovered { .. }), None) => {
                    let msg = e.to_string();
                    let names = [
                        "LOOKBACK_WINDOWS",
                        "WINDOW_SECONDS",
                        "SCHEDULE_SECONDS",
                        "CHECKPOINT_TABLE",
                    ];
                    assert!(names.iter().all(|n| msg.contains(n)), "{pairs:?}: {msg}");
                }
                (other, _) => panic!("{pairs:?}: {other:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn a_sweep_that_would_reread_millions_of_partitions_is_refused() {
        let err =
            sessions(&[("LOOKBACK_WINDOWS", "10000"), ("WINDOW_SHARDS", "1000")]).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::TooManyPartitions {
                    partitions: 10_001_000,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("CHECKPOINT_TABLE"), "{err}");
        // derived lookbacks are held to the same bound: 1 s windows swept every hour
        let err = sessions(&[
            ("WINDOW_SECONDS", "1"),
            ("SCHEDULE_SECONDS", "3600"),
            ("WINDOW_SHARDS", "16"),
        ])
        .unwrap_err();
        assert!(
            matches!(err, ConfigError::TooManyPartitions { .. }),
            "{err:?}"
        );
        // at the bound, and with a shard range splitting the work, it is accepted
        assert!(sessions(&[("LOOKBACK_WINDOWS", "19"), ("WINDOW_SHARDS", "1000")]).is_ok());
        assert!(sessions(&[
            ("LOOKBACK_WINDOWS", "99"),
            ("WINDOW_SHARDS", "1000"),
            ("SHARD_RANGE", "0-199"),
        ])
        .is_ok());
    }

    #[test]
    fn shard_ranges_are_checked_against_the_shard_count() {
        let range = |shards: &str, value: &str| {
            sessions(&[("WINDOW_SHARDS", shards), ("SHARD_RANGE", value)])
                .map(|c| c.options.shard_range)
        };
        let r = |first, last| Ok(Some(ShardRange { first, last }));
        assert_eq!(range("12", "0-3"), r(0, 3));
        assert_eq!(range("12", " 4 - 7 "), r(4, 7));
        assert_eq!(range("12", "11-11"), r(11, 11));
        // every shard, however written, is the default: no range
        assert_eq!(range("12", "0-11"), Ok(None));
        assert_eq!(range("12", "ALL"), Ok(None));
        assert_eq!(range("12", ""), Ok(None));
        assert_eq!(range("1", "0-0"), Ok(None));

        let problem = |shards: &str, value: &str| match range(shards, value) {
            Err(e @ ConfigError::ShardRange { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("SHARD_RANGE") && msg.contains("--shard-range"),
                    "{msg}"
                );
                let ConfigError::ShardRange { problem, value: v } = e else {
                    unreachable!()
                };
                assert_eq!(v, value.trim());
                problem
            }
            other => panic!("WINDOW_SHARDS={shards} SHARD_RANGE={value}: {other:?}"),
        };
        for not_a_range in [
            "3",
            "0-",
            "-3",
            "a-b",
            "0-3-5",
            "0..3",
            "0 3",
            "+1-3",
            "0-x",
            "1-99999999999",
        ] {
            assert_eq!(
                problem("12", not_a_range),
                ShardRangeProblem::NotARange,
                "{not_a_range}"
            );
        }
        assert_eq!(
            problem("12", "5-3"),
            ShardRangeProblem::Reversed { first: 5, last: 3 }
        );
        assert_eq!(
            problem("12", "8-12"),
            ShardRangeProblem::BeyondShards {
                last: 12,
                shards: 12
            }
        );
        assert!(problem("12", "0-12").to_string().contains("0 to 11"));
        assert_eq!(problem("1", "0-1"), ShardRangeProblem::Unsharded);
        assert_eq!(problem("1", "1-1"), ShardRangeProblem::Unsharded);
    }

    #[test]
    fn every_split_parses_back_as_the_ranges_it_printed() {
        for shards in [2u32, 3, 12, 40, 1000] {
            for parts in 1..=shards.min(60) {
                for range in ShardRange::split(shards, parts) {
                    let want = (range != ShardRange::all(shards)).then_some(range);
                    assert_eq!(
                        shard_range(&range.to_string(), shards),
                        Ok(want),
                        "{shards} shards in {parts}: {range}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_leader_lease_needs_the_checkpoint_table_and_two_sweeps() {
        let refused = |pairs: &[(&str, &str)], names: &[&str]| {
            let msg = sessions(pairs).unwrap_err().to_string();
            for name in names {
                assert!(msg.contains(name), "{pairs:?}: {msg}");
            }
        };
        refused(
            &[("LEADER_LEASE", "30")],
            &["LEADER_LEASE", "--leader-lease", "CHECKPOINT_TABLE"],
        );
        let cp = ("CHECKPOINT_TABLE", "state");
        refused(
            &[cp, ("LEADER_LEASE", "119")],
            &["LEADER_LEASE", "SCHEDULE_SECONDS", "at least 120"],
        );
        refused(
            &[cp, ("TICK_SECONDS", "5"), ("LEADER_LEASE", "9")],
            &["LEADER_LEASE", "TICK_SECONDS", "at least 10"],
        );
        for value in ["4", "3601", "0", "1m", "soon", "-5", "6.5"] {
            refused(
                &[cp, ("LEADER_LEASE", value)],
                &["LEADER_LEASE", "5 to 3600"],
            );
        }
        // Two sweeps exactly, in tick mode and on the schedule.
        let ok = |pairs: &[(&str, &str)]| sessions(&[&[cp], pairs].concat()).unwrap().leader_lease;
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(ok(&[("LEADER_LEASE", "120")]), secs(120));
        assert_eq!(ok(&[("TICK_SECONDS", "1"), ("LEADER_LEASE", "5")]), secs(5));
        assert_eq!(
            ok(&[("SCHEDULE_SECONDS", "3"), ("LEADER_LEASE", "6")]),
            secs(6)
        );
        assert_eq!(ok(&[("LEADER_LEASE", " OFF ")]), None);
    }

    #[test]
    fn run_checks_its_lease_against_every_and_refuses_tick_seconds() {
        let run = |pairs: &[(&str, &str)], every_ms: u64| {
            let all = [
                &[("TABLE_NAME", "sessions"), ("CHECKPOINT_TABLE", "state")],
                pairs,
            ]
            .concat();
            Settings::from_lookup(lookup(&all)).validate_run(Duration::from_millis(every_ms))
        };
        let secs = |s| Some(Duration::from_secs(s));
        // `run --every 1s` sweeps every second: a 5 s lease is two sweeps and more, whatever
        // SCHEDULE_SECONDS (60 by default), which the Lambda and `sweep` still go by.
        let lease = |c: Vec<Config>| c[0].leader_lease;
        assert_eq!(run(&[("LEADER_LEASE", "5")], 1_000).map(lease), Ok(secs(5)));
        let lambda = [("CHECKPOINT_TABLE", "state"), ("LEADER_LEASE", "5")];
        let msg = sessions(&lambda).unwrap_err();
        assert!(msg.to_string().contains("SCHEDULE_SECONDS"), "{msg}");
        // Two sweeps of --every exactly; less is refused, naming --every and what is needed,
        // for every table of several.
        assert_eq!(
            run(&[("LEADER_LEASE", "20")], 10_000).map(lease),
            Ok(secs(20))
        );
        let tables = ("TABLES", r#"[{"TABLE_NAME": "other"}]"#);
        for pairs in [
            &[("LEADER_LEASE", "19")][..],
            &[tables, ("LEADER_LEASE", "19")],
        ] {
            let msg = run(pairs, 10_000).unwrap_err().to_string();
            for name in ["LEADER_LEASE", "--every is 10s", "at least 20"] {
                assert!(msg.contains(name), "{pairs:?}: {msg}");
            }
        }
        // TICK_SECONDS is the Lambda's: given to `run`, refused rather than ignored.
        for tick in ["1", "250ms"] {
            let msg = run(&[("TICK_SECONDS", tick)], 1_000)
                .unwrap_err()
                .to_string();
            for name in ["TICK_SECONDS", "--tick-seconds", "`run`", "--every"] {
                assert!(msg.contains(name), "{tick}: {msg}");
            }
        }
        for off in ["off", "0", " "] {
            assert!(run(&[("TICK_SECONDS", off)], 1_000).is_ok(), "{off:?}");
        }
    }

    #[test]
    fn backfill_in_archive_mode_is_a_dry_run_or_refused() {
        let pairs = [
            ("TABLE_NAME", "sessions"),
            ("EXPIRY_EVENTS", "eventbridge:default"),
            ("EXPIRY_EVENTS_MODE", "archive"),
            ("DELETE_MODE", "conditional"),
        ];
        let settings = Settings::from_lookup(lookup(&pairs));
        let msg = settings.validate_backfill(false).unwrap_err().to_string();
        for name in ["EXPIRY_EVENTS_MODE", "would not be archived", "--dry-run"] {
            assert!(msg.contains(name), "{msg}");
        }
        assert!(settings.validate_backfill(true).is_ok());
        // Without archive mode, deletes need no archive.
        let notify = Settings::from_lookup(|k| (k == "TABLE_NAME").then(|| "sessions".into()));
        assert!(notify.validate_backfill(false).is_ok());
    }

    #[test]
    fn two_tables_may_not_share_an_expiry_index_table() {
        let tables =
            |pairs: &[(&str, &str)]| Settings::from_lookup(lookup(pairs)).validate_tables();
        // One EXPIRY_INDEX_TABLE for TABLE_NAME=a,b, or a TABLES entry naming another's.
        for pairs in [
            &[("TABLE_NAME", "alpha,beta"), ("EXPIRY_INDEX_TABLE", "idx")][..],
            &[
                ("TABLE_NAME", "alpha"),
                ("EXPIRY_INDEX_TABLE", "idx"),
                ("TABLES", r#"[{"TABLE_NAME": "beta"}]"#),
            ],
            &[(
                "TABLES",
                r#"[{"TABLE_NAME": "alpha", "EXPIRY_INDEX_TABLE": "idx"},
                             {"TABLE_NAME": "beta", "EXPIRY_INDEX_TABLE": "arn:aws:dynamodb:eu-west-1:123456789012:table/idx"}]"#,
            )],
        ] {
            let msg = tables(pairs).unwrap_err().to_string();
            for name in [
                "\"alpha\"",
                "\"beta\"",
                "idx",
                "EXPIRY_INDEX_TABLE",
                "of its own",
            ] {
                assert!(msg.contains(name), "{pairs:?}: {msg}");
            }
        }
        let own = tables(&[(
            "TABLES",
            r#"[{"TABLE_NAME": "alpha", "EXPIRY_INDEX_TABLE": "alpha-idx"},
                         {"TABLE_NAME": "beta", "EXPIRY_INDEX_TABLE": "beta-idx"},
                         {"TABLE_NAME": "gamma"}, {"TABLE_NAME": "delta"}]"#,
        )]);
        assert_eq!(
            own.map(|c| c.len()),
            Ok(4),
            "one each, and GSI tables, are fine"
        );
    }
}
