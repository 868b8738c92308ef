//! [`ConfigFlags`]: the CLI flags of every setting, made from [`SETTINGS`]. Each setting is one
//! `--kebab-case` flag that falls back to its environment variable; the values given are passed
//! on as they are to [`Config::from_lookup`], which applies the defaults and validates, so a flag
//! and a variable accept the same values and fail with the same message.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

use super::{Config, ConfigError, Setting, SETTINGS};

/// The heading the settings' flags are listed under in `--help`.
const HEADING: &str = "Settings (each flag falls back to its environment variable)";

/// The raw values of the settings given as flags or environment variables, for a clap command:
/// `#[command(flatten)] config: ConfigFlags`, then [`ConfigFlags::to_config`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigFlags {
    /// Raw value by environment variable name; absent settings are not in the map.
    values: BTreeMap<&'static str, String>,
}

impl ConfigFlags {
    /// The raw value given for the setting whose environment variable is `var`.
    /// A variable that is not a setting (`POWERTOOLS_METRICS_NAMESPACE`) comes from the
    /// environment.
    pub fn lookup(&self, var: &str) -> Option<String> {
        if SETTINGS.iter().any(|s| s.var == var) {
            self.values.get(var).cloned()
        } else {
            std::env::var(var).ok()
        }
    }

    /// Validates the values given, with the defaults for the rest.
    pub fn to_config(&self) -> Result<Config, ConfigError> {
        Config::from_lookup(|var| self.lookup(var))
    }
}

/// The flag of `setting`, without dashes, with the `'static` lifetime clap wants.
fn long_flag(setting: &Setting) -> &'static str {
    static FLAGS: OnceLock<Vec<String>> = OnceLock::new();
    let flags = FLAGS.get_or_init(|| SETTINGS.iter().map(Setting::flag).collect());
    let index = SETTINGS
        .iter()
        .position(|s| s.var == setting.var)
        .expect("every setting is in SETTINGS");
    &flags[index]
}

/// One setting's flag. The argument's id is the variable name.
fn arg(setting: &Setting) -> Arg {
    let default = match setting.default {
        None => "(required)".to_owned(),
        Some("") => "[default: none]".to_owned(),
        Some(value) => format!("[default: {value}]"),
    };
    let help = format!("{} {default}", setting.help);
    Arg::new(setting.var)
        .long(long_flag(setting))
        .env(setting.var)
        .value_name(setting.var)
        .action(ArgAction::Set)
        .help_heading(HEADING)
        .long_help(format!("{help}\n\nAccepts {}.", setting.expected))
        .help(help)
}

impl Args for ConfigFlags {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(SETTINGS.iter().map(arg))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for ConfigFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = ConfigFlags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for setting in &SETTINGS {
            if let Some(value) = matches.get_one::<String>(setting.var) {
                self.values.insert(setting.var, value.clone());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        config: ConfigFlags,
    }

    /// Parses `args` without the environment fallback, so that no variable set where the tests
    /// run can change the outcome.
    fn parse(args: &[&str]) -> Result<ConfigFlags, clap::Error> {
        let cmd = Cli::command().mut_args(|a| a.env(None));
        let matches =
            cmd.try_get_matches_from(std::iter::once("ttl-sweeper").chain(args.iter().copied()))?;
        ConfigFlags::from_arg_matches(&matches)
    }

    #[test]
    fn the_command_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_setting_is_a_kebab_case_flag_with_its_variable() {
        let cmd = Cli::command();
        for setting in &SETTINGS {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_id() == setting.var)
                .unwrap_or_else(|| panic!("no flag for {}", setting.var));
            assert_eq!(arg.get_long(), Some(setting.flag().as_str()));
            assert_eq!(arg.get_env(), Some(std::ffi::OsStr::new(setting.var)));
            let help = arg.get_long_help().unwrap().to_string();
            assert!(help.contains(setting.expected), "{help}");
        }
        assert_eq!(cmd.get_arguments().count(), SETTINGS.len());
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
    fn flags_reach_the_parser_and_only_given_values_are_passed() {
        let flags = parse(&[
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
        assert_eq!(flags.lookup("TABLE_NAME").as_deref(), Some("sessions"));
        assert_eq!(
            flags.lookup("INDEX_NAME"),
            None,
            "defaults come from SETTINGS"
        );
        let config = flags.to_config().unwrap();
        assert_eq!(config.window_shards, 16);
        assert_eq!(config.tick, Some(std::time::Duration::from_secs(1)));
        assert_eq!(config.metrics_namespace, "Mine");
        assert_eq!(config.index_name, "expirationWindowIndex");
    }

    #[test]
    fn a_bad_flag_value_fails_like_the_variable() {
        let err = parse(&["--table-name", "sessions", "--delete-mode", "yolo"])
            .unwrap()
            .to_config()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("DELETE_MODE") && err.contains("--delete-mode"),
            "{err}"
        );
        let missing = parse(&[]).unwrap().to_config().unwrap_err().to_string();
        assert!(
            missing.contains("TABLE_NAME") && missing.contains("--table-name"),
            "{missing}"
        );
    }
}
