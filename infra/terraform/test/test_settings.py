"""The module's inputs that are settings of the binary, against infra/settings.json (what
`ttl-sweeper settings` prints): each input reaches its variable in the sweeper's environment, its
default is the binary's (or, left out, lets the binary default it), its validations refuse every
value out of the binary's range or choices and take the binary's most."""

from __future__ import annotations

import json
import os
import unittest
from typing import Any

import hcl
from test_structure import MODULE, validations

SPEC = json.load(open(os.path.join(os.path.dirname(MODULE), "settings.json")))
SETTINGS = {s["var"]: s for s in SPEC["settings"]}

BASE = {"table_name": "sessions", "local_existing_package": "ttl-sweeper-lambda-arm64.zip"}
# What some bounds need to stand alone: a checkpoint (a lease lives in it; a catch-up needs it).
CONTEXT = {"checkpoint_table_name": "checkpoints"}

# The module's inputs that are a setting of the binary, as the sweeper's environment names it.
INPUTS = {
    "table_name": "TABLE_NAME",
    "ttl_attribute": "TTL_ATTRIBUTE",
    "window_attribute": "WINDOW_ATTRIBUTE",
    "window_seconds": "WINDOW_SECONDS",
    "window_shards": "WINDOW_SHARDS",
    "lookback_windows": "LOOKBACK_WINDOWS",
    "delete_mode": "DELETE_MODE",
    "max_concurrency": "MAX_CONCURRENCY",
    "max_retries": "MAX_RETRIES",
    "tick_seconds": "TICK_SECONDS",
    "metrics_namespace": "METRICS_NAMESPACE",
    "max_catch_up_seconds": "MAX_CATCHUP",
    "leader_lease_seconds": "LEADER_LEASE",
}
# Variables of the environment the module derives from inputs of another shape.
DERIVED = {"INDEX_NAME", "EXPIRY_INDEX_TABLE", "SCHEDULE_SECONDS", "CHECKPOINT_TABLE", "EXPIRY_EVENTS", "EXPIRY_EVENTS_MODE", "EXPIRY_EVENTS_ITEM"}


def environment(inputs: dict) -> dict[str, Any]:
    """The sweeper's environment for `inputs` (a null value leaves the variable out)."""
    config = hcl.Configuration(MODULE, {**BASE, **CONTEXT, **inputs})
    return {k: v for k, v in config.local("sweeper_environment_all").items() if v is not None}


def refused_by(name: str, value: Any) -> list[str]:
    """The messages of `name`'s own validations that fail with `value` (beside the context)."""
    return [m for m in validations({**BASE, **CONTEXT, name: value}) if m.startswith(f"{name}:")]


def bounds(rule: dict) -> tuple[int, int] | None:
    """A range's least and most, a duration's in whole seconds; None for other rules."""
    if rule["kind"] == "whole":
        return rule["min"], rule["max"]
    if rule["kind"] == "duration":
        return -(-rule["minMs"] // 1000), rule["maxMs"] // 1000
    return None


class SettingsSpec(unittest.TestCase):
    def test_every_setting_of_the_environment_is_an_input_or_derived(self):
        config = hcl.Configuration(MODULE, {**BASE, **CONTEXT})
        names = set(config.local("sweeper_environment_all"))
        self.assertEqual(names - set(SETTINGS), set(), "not settings of the binary")
        self.assertEqual(names - DERIVED, set(INPUTS.values()))

    def test_each_input_reaches_its_setting(self):
        for name, var in INPUTS.items():
            with self.subTest(name):
                rule = SETTINGS[var]["rule"]
                probe = {"whole": lambda r: bounds(r)[1], "duration": lambda r: bounds(r)[1], "choice": lambda r: r["choices"][-1]}.get(
                    rule["kind"], lambda r: "probe_value")(rule)
                self.assertEqual(environment({name: probe}).get(var), str(probe))

    def test_defaults_are_the_binary_s(self):
        env = environment({})
        for name, var in INPUTS.items():
            setting = SETTINGS[var]
            with self.subTest(name):
                if setting["default"] is None:
                    continue  # required: the table
                value = setting["value"]
                if setting["rule"]["kind"] == "duration" and value is not None:
                    expected = str(value // 1000)
                else:
                    expected = setting["default"]
                # Left out of the environment, the binary takes its own default.
                self.assertIn(env.get(var, expected), (expected, setting["default"]), f"{var}: {setting['default']}")

    def test_validations_refuse_what_the_binary_refuses_and_take_its_most(self):
        checked = 0
        for name, var in INPUTS.items():
            rule = SETTINGS[var]["rule"]
            with self.subTest(name):
                if (b := bounds(rule)) is not None:
                    least, most = b
                    for outside in (least - 1, most + 1, least + 0.5):
                        self.assertTrue(refused_by(name, outside), f"{name}={outside}: {var} refuses it ({SETTINGS[var]['accepts']})")
                    self.assertEqual(refused_by(name, most), [], f"{name}={most}: {var} takes it")
                    checked += 1
                elif rule["kind"] == "choice":
                    for word in rule["choices"]:
                        self.assertEqual(refused_by(name, word), [], f"{name}={word}")
                    self.assertTrue(refused_by(name, rule["choices"][0] + "x"))
                    checked += 1
        self.assertGreaterEqual(checked, 9)


if __name__ == "__main__":
    unittest.main()
