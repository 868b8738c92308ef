//! The settings: [`Settings`], one clap struct whose every field is a `--kebab-case` flag falling
//! back to the environment variable of the same name, and [`SETTINGS`], each setting's variable,
//! default, help, accepted values and CLI commands (for `--help`, error messages and the table of
//! `docs/configuration.md`). The CLI fits each command to the settings it uses ([`Settings::fit`]);
//! the Lambda reads the same definitions from its environment ([`Settings::from_env`]). Either
//! way [`Settings::validate`] turns the raw values into a [`Config`](super::Config).

use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command, FromArgMatches};

use super::rule::Rule;
use super::{MAX_TICK, MIN_TICK};
use crate::engine::lease::{MAX_LEASE, MIN_LEASE};
use crate::expiry::window::{MAX_SHARDS, MAX_WINDOW_SECONDS};

use CliCommand::{Audit, Backfill, Run, Sweep};

/// A command of the `ttl-sweeper` CLI that takes settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliCommand {
    /// `ttl-sweeper sweep`: one sweep.
    Sweep,
    /// `ttl-sweeper run`: sweeps every `--every` until stopped.
    Run,
    /// `ttl-sweeper backfill`: windows (or expiry index entries) for the items already there.
    Backfill,
    /// `ttl-sweeper audit`: what the sweeper cannot see.
    Audit,
}

impl CliCommand {
    /// Every command that takes settings.
    pub const ALL: [CliCommand; 4] = [Sweep, Run, Backfill, Audit];

    /// The command's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Sweep => "sweep",
            Run => "run",
            Backfill => "backfill",
            Audit => "audit",
        }
    }

    /// Whether the command uses `setting` (shows it, reads its flag and variable).
    pub fn uses(self, setting: &Setting) -> bool {
        setting.commands.contains(&self)
    }
}

/// The commands that sweep.
const SWEEPS: &[CliCommand] = &[Sweep, Run];

/// Every command: the table and where its items keep their expiry.
const EVERY_COMMAND: &[CliCommand] = &CliCommand::ALL;

/// One setting: its environment variable, default, what it is and what it accepts.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Environment variable name; the CLI flag is its kebab-case form.
    pub var: &'static str,
    /// Default value, or `None` if required.
    pub default: Option<&'static str>,
    /// What the setting is, in a few words: the first line of its flag's `--help`.
    pub help: &'static str,
    /// What it accepts: the check, and the first words of [`Setting::expected`].
    pub rule: Rule,
    /// The rest of [`Setting::expected`]: what [`Setting::rule`] does not say (all of it for
    /// [`Rule::Parsed`]).
    pub accepts: &'static str,
    /// The CLI commands that use it (none: the Lambda's alone).
    pub commands: &'static [CliCommand],
}

impl Setting {
    /// What the setting accepts, for error messages and `--help`: its rule in words, then
    /// [`Setting::accepts`].
    pub fn expected(&self) -> String {
        format!("{}{}", self.rule.describe(), self.accepts)
    }

    /// Its flag's short `--help`: `help` (what it is) and its default.
    fn short_help(&self, help: &str) -> String {
        let default = match self.default {
            None => "(required)".to_owned(),
            Some("") => "[default: none]".to_owned(),
            Some(value) => format!("[default: {value}]"),
        };
        format!("{help} {default}")
    }

    /// Its flag's `--help`: the short help and what it accepts.
    fn long_help(&self, help: &str) -> String {
        format!("{}\n\nAccepts {}.", self.short_help(help), self.expected())
    }

    /// What the setting is, as `command` uses it: where a command uses it for something of its
    /// own, worded for that; elsewhere [`Setting::help`].
    pub fn help_for(&self, command: CliCommand) -> &'static str {
        match (command, self.var) {
            (Backfill, "TABLE_NAME") => "Table to backfill, by name or ARN (one table)",
            (Audit, "TABLE_NAME") => "Table to audit, by name or ARN (one table)",
            (Backfill, "EXPIRY_INDEX_TABLE") => {
                "The sweeper's own expiry index table: write each item's entry into it, and nothing into the table"
            }
            (Audit, "EXPIRY_INDEX_TABLE") => {
                "The sweeper's own expiry index table: count the items without their entry in it"
            }
            (Backfill | Audit, "INDEX_NAME") => "GSI keyed on (window, ttl), checked if it exists",
            (Sweep, "SCHEDULE_SECONDS") => {
                "How often this sweep runs (cron, a scheduler): the lookback reaches back that far, and LEADER_LEASE must outlast two"
            }
            (Run, "SCHEDULE_SECONDS") => {
                "Full-sweep period: this often `run` re-reads the lookback and catches up from the checkpoint, logs a summary line and an EMF record, and opens again a table it could not open (it ticks every --every)"
            }
            (Run, "LEADER_LEASE") => {
                "Leader lease: of the sweepers of one table (one per Region), only the holder sweeps; at least two --every"
            }
            (Run, "METRICS_NAMESPACE") => {
                "CloudWatch namespace of the EMF records `run` writes on stderr"
            }
            (Backfill, "EXPIRY_EVENTS_MODE") => {
                "The sweepers' expiry events mode: with `archive`, backfill runs only with --dry-run (it deletes expired items without publishing their events)"
            }
            _ => self.help,
        }
    }

    /// Its argument's id in [`Settings`]: the field's name.
    fn id(&self) -> String {
        self.var.to_ascii_lowercase()
    }
}

/// The CLI flag of the environment variable `var`, without the leading dashes.
pub(super) fn flag(var: &str) -> String {
    var.to_ascii_lowercase().replace('_', "-")
}

/// A whole number from `min` to `max`.
const fn whole(min: u64, max: u64) -> Rule {
    Rule::Whole {
        min,
        max,
        seconds: false,
        off: false,
    }
}

/// A whole number of seconds from `min` to `max`.
const fn seconds(min: u64, max: u64) -> Rule {
    Rule::Whole {
        min,
        max,
        seconds: true,
        off: false,
    }
}

/// Powertools' namespace variable: the metrics namespace when `METRICS_NAMESPACE` is unset.
pub const POWERTOOLS_METRICS_NAMESPACE: &str = "POWERTOOLS_METRICS_NAMESPACE";

/// The heading the settings' flags are listed under in `--help`.
const HEADING: &str = "Settings (each flag falls back to its environment variable)";

/// Defines every setting once, in documentation order: its [`Setting`] constant, its field of
/// [`Settings`] (the flag and variable of that name) and its place in [`SETTINGS`].
macro_rules! settings {
    ($($(#[$attr:meta])* $field:ident: $var:ident ($($ty:tt)+) {
        default: $default:expr, rule: $rule:expr, commands: $commands:expr,
        help: $help:expr,
        $(accepts: $accepts:expr,)?
    })*) => {
        $(
            #[doc = concat!("`", stringify!($var), "`.")]
            pub const $var: Setting = Setting {
                var: stringify!($var),
                default: $default,
                help: $help,
                rule: $rule,
                accepts: [$($accepts,)? ""][0],
                commands: $commands,
            };
        )*

        /// Every setting's raw value, as given by flag or environment variable (absent: `None`);
        /// each field is the flag and variable of the [`Setting`] of the same name.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
        #[command(next_help_heading = HEADING)]
        #[allow(missing_docs)] // each field is documented by its Setting, shown by --help
        pub struct Settings {
            $(
                #[arg(
                    long,
                    env = stringify!($var),
                    help = $var.short_help($help),
                    long_help = $var.long_help($help)
                )]
                $(#[$attr])*
                pub $field: $($ty)+,
            )*
            /// Powertools' namespace variable: the metrics namespace when `METRICS_NAMESPACE` is
            /// unset.
            #[arg(long, env = "POWERTOOLS_METRICS_NAMESPACE", hide = true)]
            pub powertools_metrics_namespace: Option<String>,
        }

        /// Every setting, in documentation order.
        pub const SETTINGS: [Setting; [$(stringify!($var)),*].len()] = [$($var),*];
    };
}

settings! {
    // Several tables: the flag given more than once, or names separated by commas.
    #[arg(action = clap::ArgAction::Append, value_delimiter = ',')]
    table_name: TABLE_NAME (Vec<String>) {
        default: None, rule: Rule::Tables, commands: EVERY_COMMAND,
        help: "Table to sweep, by name or ARN; several: the flag more than once, or separated by commas",
        accepts: ", or several separated by commas (sweep and run; backfill and audit take one)",
    }
    tables: TABLES (Option<String>) {
        default: Some(""), rule: Rule::Parsed, commands: SWEEPS,
        help: "More tables, each with the settings that differ for it, as a JSON array",
        accepts: "a JSON array of objects, each with TABLE_NAME and any of INDEX_NAME, EXPIRY_INDEX_TABLE, TTL_ATTRIBUTE, WINDOW_ATTRIBUTE, WINDOW_SECONDS, WINDOW_SHARDS, LOOKBACK_WINDOWS, SHARD_RANGE, DELETE_MODE, MAX_CONCURRENCY, MAX_RETRIES, EXPIRY_EVENTS, EXPIRY_EVENTS_MODE, EXPIRY_EVENTS_ITEM (string values; a setting left out takes the value of its variable), or empty; each table at most once across TABLE_NAME and TABLES",
    }
    index_name: INDEX_NAME (Option<String>) {
        default: Some("expirationWindowIndex"), rule: Rule::Index, commands: EVERY_COMMAND,
        help: "GSI keyed on (window, ttl)",
    }
    expiry_index_table: EXPIRY_INDEX_TABLE (Option<String>) {
        default: Some(""), rule: Rule::Table, commands: EVERY_COMMAND,
        help: "The sweeper's own expiry index table, fed by the table's stream, swept instead of a GSI",
        accepts: " (keyed on `window` and `entry`, both String), or empty to sweep through the GSI (INDEX_NAME)",
    }
    ttl_attribute: TTL_ATTRIBUTE (Option<String>) {
        default: Some("ttl"), rule: Rule::Attribute, commands: EVERY_COMMAND,
        help: "Number attribute with the expiry in epoch seconds",
    }
    window_attribute: WINDOW_ATTRIBUTE (Option<String>) {
        default: Some("expirationWindow"), rule: Rule::Attribute, commands: EVERY_COMMAND,
        help: "String attribute with the window key",
    }
    window_seconds: WINDOW_SECONDS (Option<String>) {
        default: Some("60"), rule: seconds(1, MAX_WINDOW_SECONDS as u64), commands: EVERY_COMMAND,
        help: "Window width in seconds",
        accepts: " (the width writers used)",
    }
    lookback_windows: LOOKBACK_WINDOWS (Option<String>) {
        default: Some("15"), rule: whole(0, 10_000), commands: SWEEPS,
        help: "Past windows re-read by every sweep",
        accepts: " (past windows re-read by every sweep), covering at least SCHEDULE_SECONDS + 10 s unless CHECKPOINT_TABLE is set; left unset, raised to cover that when the default does not",
    }
    delete_mode: DELETE_MODE (Option<String>) {
        default: Some("batch"), rule: Rule::Choice(&["batch", "conditional"]), commands: SWEEPS,
        help: "How to delete: `batch` or `conditional`",
    }
    max_concurrency: MAX_CONCURRENCY (Option<String>) {
        default: Some("8"), rule: whole(1, 256), commands: SWEEPS,
        help: "Delete requests in flight",
        accepts: " (delete requests in flight)",
    }
    max_retries: MAX_RETRIES (Option<String>) {
        default: Some("8"), rule: whole(0, 30), commands: SWEEPS,
        help: "Retries per delete request",
        accepts: " (retries per delete request)",
    }
    window_shards: WINDOW_SHARDS (Option<String>) {
        default: Some("1"), rule: whole(1, MAX_SHARDS as u64), commands: EVERY_COMMAND,
        help: "Shards per window, as the writers use",
        accepts: " (shards per window; must match the writers)",
    }
    shard_range: SHARD_RANGE (Option<String>) {
        default: Some("all"), rule: Rule::Parsed, commands: SWEEPS,
        help: "The shards of each window this sweeper reads, to split a table between sweepers",
        accepts: "`all`, or `a-b`: shards a to b inclusive, 0 <= a <= b < WINDOW_SHARDS (sweepers with disjoint ranges covering 0 to WINDOW_SHARDS-1 split the table); audit and backfill read the whole table",
    }
    tick_seconds: TICK_SECONDS (Option<String>) {
        default: Some("off"), rule: Rule::Duration { min: MIN_TICK, max: MAX_TICK, off: true }, commands: &[],
        help: "Lambda tick mode: sweep every this many seconds within one invocation",
        accepts: "; less than SCHEDULE_SECONDS; not for `run`, which sweeps every --every",
    }
    schedule_seconds: SCHEDULE_SECONDS (Option<String>) {
        default: Some("60"), rule: seconds(1, 3600), commands: SWEEPS,
        help: "The schedule's period; `run` does a full sweep this often",
        accepts: " (the schedule's period)",
    }
    checkpoint_table: CHECKPOINT_TABLE (Option<String>) {
        default: Some(""), rule: Rule::Table, commands: SWEEPS,
        help: "Table holding the catch-up checkpoint",
        accepts: " with partition key `id` (String), or empty for no checkpoint",
    }
    max_catchup: MAX_CATCHUP (Option<String>) {
        default: Some("24h"), rule: Rule::Duration { min: Duration::from_secs(60), max: Duration::from_secs(30 * 86_400), off: false },
        commands: SWEEPS,
        help: "Longest catch-up after an outage",
    }
    leader_lease: LEADER_LEASE (Option<String>) {
        default: Some("off"), rule: Rule::Whole { min: MIN_LEASE.as_secs(), max: MAX_LEASE.as_secs(), seconds: true, off: true },
        commands: SWEEPS,
        help: "Leader lease: of the sweepers of one table (one per Region), only the holder sweeps",
        accepts: ", at least two sweeps (TICK_SECONDS, else SCHEDULE_SECONDS; for `run`, --every); needs CHECKPOINT_TABLE, where the lease item lives",
    }
    metrics_namespace: METRICS_NAMESPACE (Option<String>) {
        default: Some("TtlSweeper"), rule: Rule::Namespace, commands: &[Run],
        help: "CloudWatch namespace of the Lambda's metrics",
    }
    expiry_events: EXPIRY_EVENTS (Option<String>) {
        default: Some(""), rule: Rule::Parsed, commands: SWEEPS,
        help: "Where to publish an event for each expired item",
        accepts: "`eventbridge:<bus name or ARN>`, `sqs:<queue URL>` or `firehose:<delivery stream name>`, or empty for no events",
    }
    expiry_events_mode: EXPIRY_EVENTS_MODE (Option<String>) {
        default: Some("notify"), rule: Rule::Choice(&["notify", "archive"]),
        commands: &[Sweep, Run, Backfill],
        help: "Expiry events: `notify` (delete, then publish) or `archive` (delete only what the sink accepted)",
        accepts: " (archive needs EXPIRY_EVENTS and DELETE_MODE=conditional)",
    }
    expiry_events_item: EXPIRY_EVENTS_ITEM (Option<String>) {
        default: Some("auto"), rule: Rule::Choice(&["auto", "read", "off"]), commands: SWEEPS,
        help: "Expiry events: include the item `auto` (when it needs no extra read), `read` (read it first) or `off`",
    }
    delete_when_indexed: DELETE_WHEN_INDEXED (Option<String>) {
        default: Some("true"), rule: Rule::Choice(&["true", "false"]), commands: &[Run],
        help: "With EXPIRY_INDEX_TABLE: the stream indexer deletes an item written already expired as it indexes it",
        accepts: ": `true`, a conditional delete, with its expiry event, as the record is indexed; `false`, left to the next sweep (the construct sets it with leaderLease, so that only the lease holder deletes)",
    }
}

impl Settings {
    /// The settings of the process environment alone, as the Lambda reads them.
    pub fn from_env() -> Settings {
        Settings::from_lookup(|var| std::env::var(var).ok())
    }

    /// The settings through `lookup`, which maps a variable name (`TABLE_NAME`, ...) to its raw
    /// value (and no environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Settings {
        let command = Settings::augment_args(Command::new("settings").no_binary_name(true));
        let given = command
            .get_arguments()
            .filter_map(|arg| {
                let (long, var) = (arg.get_long()?, arg.get_env()?.to_str()?);
                lookup(var).map(|value| format!("--{long}={value}"))
            })
            .collect::<Vec<_>>();
        // Every field takes any string once, given as `--flag=value`: nothing can fail.
        let matches = command
            .mut_args(|arg| arg.env(None))
            .try_get_matches_from(given)
            .expect("each setting is one string-valued flag");
        Settings::from_arg_matches(&matches).expect("the matches are this struct's")
    }

    /// Fits `command`, a CLI command with [`Settings`] flattened into it, to `which`: the settings
    /// it uses are shown, with their help worded for it; the others are hidden and read from no
    /// variable (but those it refuses there), and [`Settings::unused_flag`] refuses them as flags.
    pub fn fit(command: Command, which: CliCommand) -> Command {
        let command = SETTINGS.iter().fold(command, |command, setting| {
            command.mut_arg(setting.id(), |arg| {
                // Not used, but read from the environment all the same, to be refused there too
                // rather than do something else than it says: `run` refuses `TICK_SECONDS` (it
                // sweeps every `--every`), and `backfill` and `audit` `TABLES` naming more tables.
                let read_to_refuse = matches!(
                    (which, setting.var),
                    (Run, "TICK_SECONDS") | (Backfill | Audit, "TABLES")
                );
                if which.uses(setting) {
                    let help = setting.help_for(which);
                    arg.help(setting.short_help(help))
                        .long_help(setting.long_help(help))
                } else if read_to_refuse {
                    arg.hide(true)
                } else {
                    arg.hide(true).env(None)
                }
            })
        });
        // Powertools' namespace variable goes with METRICS_NAMESPACE.
        match which.uses(&METRICS_NAMESPACE) {
            true => command,
            false => command.mut_arg(POWERTOOLS_ID, |arg| arg.env(None)),
        }
    }

    /// Of the settings given as flags to `which` (`matches`, its own), the first it does not use:
    /// the message refusing it, which names the commands that do use it.
    pub fn unused_flag(which: CliCommand, matches: &ArgMatches) -> Option<String> {
        let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        let (var, users) = match SETTINGS.iter().find(|s| !which.uses(s) && given(&s.id())) {
            Some(setting) => (setting.var, setting.commands),
            None if !which.uses(&METRICS_NAMESPACE) && given(POWERTOOLS_ID) => {
                (POWERTOOLS_METRICS_NAMESPACE, METRICS_NAMESPACE.commands)
            }
            None => return None,
        };
        let names: Vec<String> = users.iter().map(|c| format!("`{}`", c.name())).collect();
        let by = match names.as_slice() {
            [] => "it is the Lambda's alone".to_owned(),
            [one] => format!("only {one} uses it"),
            [first @ .., last] => format!("only {} and {last} use it", first.join(", ")),
        };
        let instead = match (which, var) {
            (Run, "TICK_SECONDS") => "; `run` sweeps every --every",
            _ => "",
        };
        let (command, flag) = (which.name(), flag(var));
        let refusal = format!("`{command}` does not use --{flag} ({var}): {by}{instead}");
        Some(refusal)
    }
}

/// The id of the hidden `POWERTOOLS_METRICS_NAMESPACE` argument of [`Settings`].
const POWERTOOLS_ID: &str = "powertools_metrics_namespace";

#[cfg(test)]
mod tests {
    use super::super::tests::lookup;
    use super::*;
    use clap::{Arg, CommandFactory, Parser};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        settings: Settings,
    }

    /// Parses `args` without the environment fallback, so that no variable set where the tests
    /// run can change the outcome.
    fn parse(args: &[&str]) -> Result<Settings, clap::Error> {
        let cmd = Cli::command().mut_args(|a| a.env(None));
        let matches =
            cmd.try_get_matches_from(std::iter::once("ttl-sweeper").chain(args.iter().copied()))?;
        Settings::from_arg_matches(&matches)
    }

    #[test]
    fn the_command_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_setting_is_a_kebab_case_flag_with_its_variable_in_order() {
        let cmd = Cli::command();
        let shown: Vec<&Arg> = cmd.get_arguments().filter(|a| !a.is_hide_set()).collect();
        assert_eq!(shown.len(), SETTINGS.len());
        for (arg, setting) in shown.iter().zip(&SETTINGS) {
            assert_eq!(arg.get_long(), Some(flag(setting.var).as_str()));
            assert_eq!(arg.get_env(), Some(std::ffi::OsStr::new(setting.var)));
            let help = arg.get_long_help().unwrap().to_string();
            assert!(help.contains(&setting.expected()), "{help}");
            assert!(help.starts_with(setting.help), "{help}");
        }
    }

    #[test]
    fn the_flag_names_scripts_use_are_kept() {
        let cmd = Cli::command();
        let longs: Vec<&str> = cmd.get_arguments().filter_map(Arg::get_long).collect();
        for flag in [
            "table-name",
            "index-name",
            "ttl-attribute",
            "window-attribute",
            "window-seconds",
            "lookback-windows",
            "delete-mode",
            "max-concurrency",
            "max-retries",
            "window-shards",
            "schedule-seconds",
            "checkpoint-table",
            "max-catchup",
        ] {
            assert!(longs.contains(&flag), "--{flag} is missing: {longs:?}");
        }
    }

    #[test]
    fn flags_reach_the_validation_and_only_given_values_are_passed() {
        let settings = parse(&[
            "--table-name",
            "sessions",
            "--window-shards",
            "16",
            "--tick-seconds",
            "1",
            "--metrics-namespace",
            "Mine",
        ])
        .unwrap();
        assert_eq!(settings.table_name, ["sessions"]);
        assert_eq!(settings.index_name, None, "defaults come from SETTINGS");
        let config = settings.validate().unwrap();
        assert_eq!(config.target.layout.window_shards, 16);
        assert_eq!(config.handler.tick, Some(std::time::Duration::from_secs(1)));
        assert_eq!(config.handler.namespace, "Mine");
        assert_eq!(
            config.target.index,
            crate::store::Index::Gsi("expirationWindowIndex".into())
        );
    }

    #[test]
    fn a_bad_flag_value_fails_like_the_variable() {
        let err = parse(&["--table-name", "sessions", "--delete-mode", "yolo"])
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("DELETE_MODE") && err.contains("--delete-mode"),
            "{err}"
        );
        let missing = parse(&[]).unwrap().validate().unwrap_err().to_string();
        assert!(
            missing.contains("TABLE_NAME") && missing.contains("--table-name"),
            "{missing}"
        );
    }

    #[test]
    fn variables_reach_every_field_whatever_their_value() {
        let odd = ["", " ", "-5", "--x", "a=b", "é", "all"];
        for value in odd {
            let settings = Settings::from_lookup(|_| Some(value.to_owned()));
            assert_eq!(settings.table_name.concat(), value);
            assert_eq!(settings.expiry_events_item.as_deref(), Some(value));
            assert_eq!(
                settings.powertools_metrics_namespace.as_deref(),
                Some(value)
            );
        }
        let by_flag = parse(&["--table-name=sessions", "--max-retries=3"]).unwrap();
        let by_var =
            Settings::from_lookup(lookup(&[("TABLE_NAME", "sessions"), ("MAX_RETRIES", "3")]));
        assert_eq!(by_flag, by_var);
    }

    #[test]
    fn several_tables_by_flag_or_commas_each_with_its_own_settings() {
        let by_flag = parse(&[
            "--table-name",
            "aaa",
            "--table-name",
            "bbb,ccc",
            "--window-shards",
            "4",
        ])
        .unwrap();
        let by_var = lookup(&[("TABLE_NAME", "aaa, bbb ,ccc"), ("WINDOW_SHARDS", "4")]);
        let by_var = Settings::from_lookup(by_var);
        for settings in [by_flag, by_var] {
            let configs = settings.validate_tables().unwrap();
            let names: Vec<&str> = configs
                .iter()
                .map(|c| c.target.table_name.as_str())
                .collect();
            assert_eq!(names, ["aaa", "bbb", "ccc"]);
            assert!(configs.iter().all(|c| c.target.layout.window_shards == 4));
            // Each its own checkpoint.
            let ids: std::collections::BTreeSet<_> = configs
                .iter()
                .map(|c| c.options.clone().checkpoint.map(|c| c.id))
                .collect();
            assert_eq!(ids.len(), 1, "no checkpoint table: none");
            let err = settings.validate_one("backfill").unwrap_err().to_string();
            assert!(err.contains("backfill works on one table"), "{err}");
        }
        let tables = r#"[{"TABLE_NAME": "locks", "DELETE_MODE": "conditional", "WINDOW_SECONDS": 10},
                         {"TABLE_NAME": "tokens", "INDEX_NAME": "byWindow"}]"#;
        let settings = Settings::from_lookup(lookup(&[
            ("TABLE_NAME", "sessions"),
            ("TABLES", tables),
            ("CHECKPOINT_TABLE", "checkpoints"),
            ("MAX_CONCURRENCY", "4"),
        ]));
        let configs = settings.validate_tables().unwrap();
        let [sessions, locks, tokens] = configs.as_slice() else {
            panic!("{configs:?}")
        };
        assert_eq!(
            sessions.options.delete_mode,
            crate::engine::DeleteMode::Batch
        );
        assert_eq!(
            locks.options.delete_mode,
            crate::engine::DeleteMode::Conditional
        );
        assert_eq!(
            (
                locks.target.layout.window_seconds,
                sessions.target.layout.window_seconds
            ),
            (10, 60)
        );
        assert_eq!(
            tokens.target.index,
            crate::store::Index::Gsi("byWindow".into())
        );
        assert!(
            configs.iter().all(|c| c.options.max_concurrency == 4),
            "the shared value"
        );
        let ids: Vec<String> = configs
            .iter()
            .map(|c| c.options.clone().checkpoint.unwrap().id)
            .collect();
        assert_eq!(
            ids,
            [
                "sessions/expirationWindowIndex",
                "locks/expirationWindowIndex/10s/1shards",
                "tokens/byWindow"
            ]
        );
    }

    #[test]
    fn wrong_tables_are_refused_naming_the_table_or_the_entry() {
        let with = |table_name, tables| {
            let settings =
                Settings::from_lookup(lookup(&[("TABLE_NAME", table_name), ("TABLES", tables)]));
            settings.validate_tables().unwrap_err().to_string()
        };
        let cases = [
            ("aaa,bbb,aaa", "", "\"aaa\" is named twice"),
            (
                "aaa",
                r#"[{"TABLE_NAME": "arn:aws:dynamodb:us-east-1:1:table/aaa"}]"#,
                "named twice",
            ),
            (
                "aaa",
                r#"{"TABLE_NAME": "bbb"}"#,
                "not a JSON array of objects",
            ),
            ("aaa", "[]", "the array is empty"),
            (
                "aaa",
                r#"[{"INDEX_NAME": "i"}]"#,
                "an entry has no TABLE_NAME",
            ),
            (
                "aaa",
                r#"[{"TABLE_NAME": "bbb", "TICK_SECONDS": "1"}]"#,
                "TICK_SECONDS is not a setting a table can have",
            ),
            (
                "aaa",
                r#"[{"TABLE_NAME": "bbb", "WINDOW_SHARDS": true}]"#,
                "expected a string",
            ),
            (
                "aaa",
                r#"[{"TABLE_NAME": "bbb", "DELETE_MODE": "yolo"}]"#,
                "table \"bbb\": invalid DELETE_MODE=\"yolo\"",
            ),
            ("aaa,bb c", "", "table \"bb c\": invalid TABLE_NAME"),
        ];
        for (table_name, tables, expected) in cases {
            let err = with(table_name, tables);
            assert!(err.contains(expected), "{table_name} {tables}: {err}");
        }
    }
}
