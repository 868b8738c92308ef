//! [`Settings::validate`]: raw setting values to a [`Config`], every value checked once.

use std::time::Duration;

use super::*;
use crate::engine::lease::{MAX_LEASE, MIN_LEASE};
use crate::engine::DeleteMode;
use crate::events::{EventsMode, ItemSource, SinkTarget};
use crate::expiry::window::{ShardRange, MAX_SHARDS, MAX_WINDOW_SECONDS};

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
        self.tables_swept(Sweeps::Settings)
    }

    /// The tables of `ttl-sweeper run`, which sweeps every `every` (`--every`): as
    /// [`Settings::validate_tables`], with `every` the period between sweeps that `LEADER_LEASE`
    /// must outlast twice. `TICK_SECONDS`, the Lambda's tick period, is refused: `run` would not
    /// use it.
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
        self.tables_swept(Sweeps::Every(every))
    }

    /// [`Settings::validate_tables`], the sweeps coming as `sweeps` says.
    fn tables_swept(&self, sweeps: Sweeps) -> Result<Vec<Config>, ConfigError> {
        let mut each = Vec::new();
        for name in self.table_names() {
            each.push(Settings {
                table_name: vec![name],
                tables: None,
                ..self.clone()
            });
        }
        if let Some(raw) = self.tables.as_deref().filter(|raw| given(Some(raw))) {
            for entry in table_entries(raw)? {
                let mut settings = Settings {
                    table_name: Vec::new(),
                    tables: None,
                    ..self.clone()
                };
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
            return self.validate_swept(sweeps).map(|config| vec![config]);
        }
        let several = each.len() > 1;
        let mut configs: Vec<Config> = Vec::with_capacity(each.len());
        for settings in each {
            let config = settings.validate_swept(sweeps).map_err(|e| match several {
                false => e,
                true => ConfigError::InTable {
                    table: settings.table_name.concat(),
                    source: Box::new(e),
                },
            })?;
            let same = |c: &Config| table_of(&c.table_name) == table_of(&config.table_name);
            if configs.iter().any(same) {
                return Err(ConfigError::DuplicateTable {
                    table: config.table_name,
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
    /// no expiry events, so of their settings it reads only `EXPIRY_EVENTS_MODE`, the sweepers':
    /// with `archive` only a `dry_run` is accepted, since a backfill deletes the items it finds
    /// already expired without publishing their expiry events.
    pub fn validate_backfill(&self, dry_run: bool) -> Result<Config, ConfigError> {
        let mode = get(self.expiry_events_mode.as_deref(), &EXPIRY_EVENTS_MODE)?;
        match mode.to_ascii_lowercase().as_str() {
            "notify" => {}
            "archive" if dry_run => {}
            "archive" => {
                let problem = "backfill deletes the items it finds already expired without \
                               publishing their expiry events, so they would not be archived. Run \
                               it with --dry-run to count them, or without \
                               EXPIRY_EVENTS_MODE=archive if those items need no archive"
                    .to_owned();
                return Err(rejected(&EXPIRY_EVENTS_MODE, &mode, problem));
            }
            _ => return Err(invalid(&EXPIRY_EVENTS_MODE, &mode)),
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

    /// Validates every setting, defaulting those absent or blank ([`SETTINGS`]): the one place raw
    /// values become a [`Config`]. Every error names the variable and its flag and what it accepts.
    /// For the one table `TABLE_NAME` names ([`Settings::validate_tables`] reads several).
    pub fn validate(&self) -> Result<Config, ConfigError> {
        self.validate_swept(Sweeps::Settings)
    }

    /// [`Settings::validate`], the sweeps coming as `sweeps` says.
    fn validate_swept(&self, sweeps: Sweeps) -> Result<Config, ConfigError> {
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
        let delete_mode = {
            let raw = get(self.delete_mode.as_deref(), &DELETE_MODE)?;
            match raw.to_ascii_lowercase().as_str() {
                "batch" => DeleteMode::Batch,
                "conditional" => DeleteMode::Conditional,
                _ => return Err(invalid(&DELETE_MODE, &raw)),
            }
        };
        let mut config = Config {
            table_name: name(table_name.as_deref(), &TABLE_NAME, true)?,
            index_name: name(self.index_name.as_deref(), &INDEX_NAME, false)?,
            expiry_index_table: match get(self.expiry_index_table.as_deref(), &EXPIRY_INDEX_TABLE)?
            {
                raw if raw.is_empty() => None,
                raw => Some(name(Some(&raw), &EXPIRY_INDEX_TABLE, true)?),
            },
            ttl_attribute: attribute(self.ttl_attribute.as_deref(), &TTL_ATTRIBUTE)?,
            window_attribute: attribute(self.window_attribute.as_deref(), &WINDOW_ATTRIBUTE)?,
            window_seconds: window_seconds(self.window_seconds.as_deref())?,
            lookback_windows: number(
                self.lookback_windows.as_deref(),
                &LOOKBACK_WINDOWS,
                0,
                10_000,
            )? as u32,
            delete_mode,
            max_concurrency: number(self.max_concurrency.as_deref(), &MAX_CONCURRENCY, 1, 256)?
                as usize,
            max_retries: number(self.max_retries.as_deref(), &MAX_RETRIES, 0, 30)? as u32,
            window_shards: window_shards(self.window_shards.as_deref())?,
            shard_range: None,
            tick: match get(self.tick_seconds.as_deref(), &TICK_SECONDS)? {
                raw if raw.eq_ignore_ascii_case("off") || raw == "0" => None,
                raw => Some(
                    parse_duration(&raw)
                        .filter(|d| (MIN_TICK..=MAX_TICK).contains(d))
                        .ok_or_else(|| invalid(&TICK_SECONDS, &raw))?,
                ),
            },
            schedule_seconds: number(self.schedule_seconds.as_deref(), &SCHEDULE_SECONDS, 1, 3600)?
                as u32,
            checkpoint_table: match get(self.checkpoint_table.as_deref(), &CHECKPOINT_TABLE)? {
                raw if raw.is_empty() => None,
                raw => Some(name(Some(&raw), &CHECKPOINT_TABLE, true)?),
            },
            max_catchup_seconds: {
                let raw = get(self.max_catchup.as_deref(), &MAX_CATCHUP)?;
                parse_duration(&raw)
                    .map(|d| d.as_secs())
                    .filter(|s| (60..=30 * 86_400).contains(s))
                    .ok_or_else(|| invalid(&MAX_CATCHUP, &raw))?
            },
            leader_lease: match get(self.leader_lease.as_deref(), &LEADER_LEASE)? {
                raw if raw.eq_ignore_ascii_case("off") => None,
                raw => Some(
                    raw.parse::<u64>()
                        .ok()
                        .map(Duration::from_secs)
                        .filter(|d| (MIN_LEASE..=MAX_LEASE).contains(d))
                        .ok_or_else(|| invalid(&LEADER_LEASE, &raw))?,
                ),
            },
            expiry_events: match get(self.expiry_events.as_deref(), &EXPIRY_EVENTS)? {
                raw if raw.is_empty() => None,
                raw => Some(
                    SinkTarget::parse(&raw)
                        .map_err(|problem| rejected(&EXPIRY_EVENTS, &raw, problem))?,
                ),
            },
            expiry_events_mode: {
                let raw = get(self.expiry_events_mode.as_deref(), &EXPIRY_EVENTS_MODE)?;
                match raw.to_ascii_lowercase().as_str() {
                    "notify" => EventsMode::Notify,
                    "archive" => EventsMode::Archive,
                    _ => return Err(invalid(&EXPIRY_EVENTS_MODE, &raw)),
                }
            },
            expiry_events_item: {
                let raw = get(self.expiry_events_item.as_deref(), &EXPIRY_EVENTS_ITEM)?;
                match raw.to_ascii_lowercase().as_str() {
                    "auto" => ItemSource::Auto,
                    "read" => ItemSource::Read,
                    "off" => ItemSource::Off,
                    _ => return Err(invalid(&EXPIRY_EVENTS_ITEM, &raw)),
                }
            },
            metrics_namespace: {
                // METRICS_NAMESPACE wins; unset, Powertools' POWERTOOLS_METRICS_NAMESPACE.
                let powertools = self.powertools_metrics_namespace.as_deref();
                let (mut raw, mut source) = (self.metrics_namespace.as_deref(), METRICS_NAMESPACE);
                if !given(raw) && given(powertools) {
                    (raw, source.var) = (powertools, POWERTOOLS_METRICS_NAMESPACE);
                }
                let raw = get(raw, &source)?;
                let ok = raw.len() <= 255
                    && !raw.starts_with("AWS/")
                    && raw.chars().all(|c| {
                        c.is_ascii_alphanumeric()
                            || matches!(c, '.' | '-' | '_' | '/' | '#' | ':' | ' ')
                    });
                if !ok {
                    return Err(invalid(&source, &raw));
                }
                raw
            },
        };
        config.shard_range = shard_range(
            &get(self.shard_range.as_deref(), &SHARD_RANGE)?,
            config.window_shards,
        )?;
        if let Some(index) = &config.expiry_index_table {
            let taken = [Some(&config.table_name), config.checkpoint_table.as_ref()];
            if taken
                .into_iter()
                .flatten()
                .any(|t| table_of(t) == table_of(index))
            {
                let problem = "the expiry index table must be a table of its own, not the swept \
                               table nor the checkpoint table"
                    .to_owned();
                return Err(rejected(&EXPIRY_INDEX_TABLE, index, problem));
            }
        }
        if let Some(tick) = config.tick {
            if tick >= Duration::from_secs(u64::from(config.schedule_seconds)) {
                return Err(invalid(&TICK_SECONDS, &format!("{tick:?}")));
            }
        }
        if let Some(lease) = config.leader_lease {
            leader_lease(lease, &config, sweeps)?;
        }
        let needed = covering_lookback(config.window_seconds, config.schedule_seconds);
        if !given(self.lookback_windows.as_deref()) {
            config.lookback_windows = config.lookback_windows.max(needed);
        } else if config.lookback_windows < needed && config.checkpoint_table.is_none() {
            return Err(ConfigError::Uncovered {
                lookback_windows: config.lookback_windows,
                window_seconds: config.window_seconds,
                schedule_seconds: config.schedule_seconds,
                needed,
            });
        }
        let shards_read = config
            .shard_range
            .map_or(config.window_shards, |r| r.len())
            .max(1);
        let partitions = (u64::from(config.lookback_windows) + 1) * u64::from(shards_read);
        if partitions > MAX_PARTITIONS_PER_SWEEP {
            return Err(ConfigError::TooManyPartitions {
                lookback_windows: config.lookback_windows,
                shards: shards_read,
                partitions,
            });
        }
        if config.expiry_events_mode == EventsMode::Archive {
            if config.expiry_events.is_none() {
                return Err(rejected(
                    &EXPIRY_EVENTS_MODE,
                    "archive",
                    "archive mode needs a sink: set EXPIRY_EVENTS".to_owned(),
                ));
            }
            if config.delete_mode != DeleteMode::Conditional {
                return Err(rejected(
                    &EXPIRY_EVENTS_MODE,
                    "archive",
                    format!(
                        "archive mode needs DELETE_MODE=conditional (DELETE_MODE is {}): a batch \
                         delete cannot tell a ttl extended while the event was published",
                        config.delete_mode
                    ),
                ));
            }
        }
        if config.ttl_attribute == config.window_attribute {
            return Err(ConfigError::Invalid {
                var: WINDOW_ATTRIBUTE.var,
                value: config.window_attribute,
                expected: "an attribute different from TTL_ATTRIBUTE",
            });
        }
        Ok(config)
    }
}

/// How often a command sweeps, for the checks that depend on it.
#[derive(Debug, Clone, Copy)]
enum Sweeps {
    /// As the settings say: every `TICK_SECONDS` in tick mode, else every `SCHEDULE_SECONDS` (the
    /// Lambda, `sweep`).
    Settings,
    /// Every `--every` (`run`).
    Every(Duration),
}

/// Checks `LEADER_LEASE` against the settings it depends on: the checkpoint table holds the lease
/// item, and a lease shorter than two sweeps would lapse between a holder's sweeps.
fn leader_lease(lease: Duration, config: &Config, sweeps: Sweeps) -> Result<(), ConfigError> {
    let value = lease.as_secs().to_string();
    if config.checkpoint_table.is_none() {
        return Err(rejected(
            &LEADER_LEASE,
            &value,
            "the lease item lives in the checkpoint table: set CHECKPOINT_TABLE".to_owned(),
        ));
    }
    let (every, var) = match (sweeps, config.tick) {
        (Sweeps::Every(every), _) => (every, "--every"),
        (Sweeps::Settings, Some(tick)) => (tick, "TICK_SECONDS"),
        (Sweeps::Settings, None) => (
            Duration::from_secs(u64::from(config.schedule_seconds)),
            "SCHEDULE_SECONDS",
        ),
    };
    if lease < 2 * every {
        return Err(rejected(
            &LEADER_LEASE,
            &value,
            format!(
                "shorter than two sweeps ({var} is {every:?}): the holder's lease would lapse \
                 between its sweeps; set LEADER_LEASE to at least {}",
                (2 * every)
                    .as_secs_f64()
                    .ceil()
                    .max(MIN_LEASE.as_secs_f64())
            ),
        ));
    }
    Ok(())
}

/// The entries of `TABLES`: each an object of setting names and their values (strings, or
/// numbers written as they are).
fn table_entries(raw: &str) -> Result<Vec<Vec<(String, String)>>, ConfigError> {
    let fail = |problem: String| rejected(&TABLES, raw, problem);
    let entries: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(raw).map_err(|e| fail(format!("not a JSON array of objects: {e}")))?;
    if entries.is_empty() {
        return Err(fail("the array is empty".to_owned()));
    }
    let value = |var: &str, v: serde_json::Value| match v {
        serde_json::Value::String(text) => Ok(text),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        other => Err(fail(format!("{var} is {other}: expected a string"))),
    };
    entries
        .into_iter()
        .map(|entry| {
            entry
                .into_iter()
                .map(|(var, v)| Ok((var.clone(), value(&var, v)?)))
                .collect()
        })
        .collect()
}

/// The table's name, whether given as a name or an ARN.
pub(super) fn table_of(name_or_arn: &str) -> &str {
    name_or_arn
        .split_once(":table/")
        .map_or(name_or_arn, |(_, name)| {
            name.split('/').next().unwrap_or(name)
        })
}

/// Parses `SHARD_RANGE` for `shards` shards per window: `None` for every shard (`all`, or a range
/// from 0 to the last shard), else the range.
pub(super) fn shard_range(raw: &str, shards: u32) -> Result<Option<ShardRange>, ConfigError> {
    let fail = |problem| ConfigError::ShardRange {
        value: raw.to_owned(),
        problem,
    };
    if raw.eq_ignore_ascii_case("all") {
        return Ok(None);
    }
    let number = |text: &str| {
        let text = text.trim();
        (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
            .then(|| text.parse::<u32>().ok())
            .flatten()
    };
    let (first, last) = raw
        .split_once('-')
        .and_then(|(a, b)| Some((number(a)?, number(b)?)))
        .ok_or(fail(ShardRangeProblem::NotARange))?;
    if first > last {
        return Err(fail(ShardRangeProblem::Reversed { first, last }));
    }
    let range = ShardRange { first, last };
    if range == ShardRange::all(shards) {
        return Ok(None);
    }
    if shards <= 1 {
        return Err(fail(ShardRangeProblem::Unsharded));
    }
    if last >= shards {
        return Err(fail(ShardRangeProblem::BeyondShards { last, shards }));
    }
    Ok(Some(range))
}

/// Window width and shard count on their own, for work that needs no table (`ttl-sweeper
/// window`): raw `WINDOW_SECONDS` and `WINDOW_SHARDS` values, defaulted and validated exactly as
/// [`Settings::validate`] does, with the same messages.
pub fn window_shape(
    seconds: Option<&str>,
    shards: Option<&str>,
) -> Result<(u32, u32), ConfigError> {
    Ok((window_seconds(seconds)?, window_shards(shards)?))
}

/// Whether a value was given: present and not blank.
fn given(raw: Option<&str>) -> bool {
    raw.is_some_and(|v| !v.trim().is_empty())
}

/// The trimmed value, or the default when absent or blank.
fn get(raw: Option<&str>, s: &Setting) -> Result<String, ConfigError> {
    match raw.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => Ok(v.to_owned()),
        None => s.default.map(str::to_owned).ok_or(ConfigError::Missing {
            var: s.var,
            expected: s.expected,
        }),
    }
}

/// A whole number from `lo` to `hi`.
fn number(raw: Option<&str>, s: &Setting, lo: u64, hi: u64) -> Result<u64, ConfigError> {
    let raw = get(raw, s)?;
    raw.parse::<u64>()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| invalid(s, &raw))
}

/// A table or index name (or, with `allow_arn`, a table ARN).
fn name(raw: Option<&str>, s: &Setting, allow_arn: bool) -> Result<String, ConfigError> {
    let raw = get(raw, s)?;
    let ok = (allow_arn && raw.starts_with("arn:") && raw.contains(":table/"))
        || ((3..=255).contains(&raw.len())
            && raw
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')));
    if ok {
        Ok(raw)
    } else {
        Err(invalid(s, &raw))
    }
}

/// An attribute name of at most 255 bytes.
fn attribute(raw: Option<&str>, s: &Setting) -> Result<String, ConfigError> {
    let raw = get(raw, s)?;
    if raw.len() <= 255 {
        Ok(raw)
    } else {
        Err(invalid(s, &raw))
    }
}

fn window_seconds(raw: Option<&str>) -> Result<u32, ConfigError> {
    Ok(number(raw, &WINDOW_SECONDS, 1, u64::from(MAX_WINDOW_SECONDS))? as u32)
}

fn window_shards(raw: Option<&str>) -> Result<u32, ConfigError> {
    Ok(number(raw, &WINDOW_SHARDS, 1, u64::from(MAX_SHARDS))? as u32)
}

fn rejected(s: &Setting, value: &str, problem: String) -> ConfigError {
    ConfigError::Rejected {
        var: s.var,
        value: value.to_owned(),
        problem,
        expected: s.expected,
    }
}

fn invalid(s: &Setting, value: &str) -> ConfigError {
    ConfigError::Invalid {
        var: s.var,
        value: value.to_owned(),
        expected: s.expected,
    }
}
