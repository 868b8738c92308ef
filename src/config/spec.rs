//! [`spec`]: every setting as one JSON document, what `ttl-sweeper settings` prints and
//! `infra/settings.json` holds: the construct reads its defaults and ranges from it, and the SAM
//! template, the Terraform module and docs/configuration.md are tested against it.

use serde_json::{json, Value};

use super::rule::Rule;
use super::settings::flag;
use super::validate::is_per_table;
use super::{Setting, COVERAGE_SLACK_SECONDS, MAX_PARTITIONS_PER_SWEEP, SETTINGS};

/// The default of `setting` as the value the rule gives it: a number for a whole number, the
/// milliseconds of a duration, `null` for `off`, none or empty, else the text.
fn typed_default(setting: &Setting) -> Value {
    let Some(raw) = setting.default.filter(|d| !d.is_empty()) else {
        return Value::Null;
    };
    match setting.rule {
        _ if raw.eq_ignore_ascii_case("off") => Value::Null,
        Rule::Whole { .. } => json!(raw.parse::<u64>().expect("a whole default")),
        Rule::Duration { .. } => {
            let d = super::parse_duration(raw).expect("a duration default");
            json!(d.as_millis() as u64)
        }
        _ => json!(raw),
    }
}

/// Every setting's rule and words as one JSON document: the file `infra/settings.json`, which
/// `ttl-sweeper settings` prints.
pub fn spec() -> Value {
    let settings = SETTINGS.iter().map(|s| {
        json!({
            "var": s.var,
            "flag": format!("--{}", flag(s.var)),
            "default": s.default,
            "value": typed_default(s),
            "help": s.help,
            "accepts": s.expected(),
            "rule": s.rule.to_json(),
            "perTable": is_per_table(s),
            "commands": s.commands.iter().map(|c| c.name()).collect::<Vec<_>>(),
        })
    });
    json!({
        "about": "Every setting of ttl-sweeper: written by `ttl-sweeper settings` (make \
                  settings-spec) from src/config/settings.rs; do not edit it by hand. `default` is \
                  the raw default (null: required), `value` the default as the rule reads it \
                  (durations in milliseconds; null: off or none).",
        "limits": {
            "maxPartitionsPerSweep": MAX_PARTITIONS_PER_SWEEP,
            "lookbackSlackSeconds": COVERAGE_SLACK_SECONDS,
        },
        "settings": settings.collect::<Vec<_>>(),
    })
}

/// [`spec`] as the committed file holds it: keys sorted (whatever serde_json's features), pretty,
/// two-space indented, one final newline.
pub fn spec_text() -> String {
    fn sorted(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.sort_keys();
                map.values_mut().for_each(sorted);
            }
            Value::Array(items) => items.iter_mut().for_each(sorted),
            _ => {}
        }
    }
    let mut spec = spec();
    sorted(&mut spec);
    serde_json::to_string_pretty(&spec).expect("a JSON value") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_gives_every_setting_its_rule_and_typed_default() {
        let spec = spec();
        let settings = spec["settings"].as_array().unwrap();
        assert_eq!(settings.len(), SETTINGS.len());
        let of = |var: &str| settings.iter().find(|s| s["var"] == var).unwrap().clone();
        let concurrency = of("MAX_CONCURRENCY");
        assert_eq!(concurrency["value"], 8);
        assert_eq!(concurrency["rule"]["max"], 256);
        assert_eq!(concurrency["perTable"], true);
        assert_eq!(of("MAX_CATCHUP")["value"], 86_400_000u64);
        assert_eq!(of("LEADER_LEASE")["value"], Value::Null);
        assert_eq!(of("TABLE_NAME")["default"], Value::Null);
        assert_eq!(of("TICK_SECONDS")["commands"], json!([]));
        assert_eq!(spec["limits"]["maxPartitionsPerSweep"], 20_000);
    }
}
