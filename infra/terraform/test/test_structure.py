"""The module's shape, read with python-hcl2 (terraform init, validate and plan need a provider
registry, which these machines do not reach): every variable typed, described and validated
where a value can be wrong; every output described; Terraform and the AWS provider pinned to a
floor; every reference to a variable, local, resource, data source or module output one that
exists; the examples call the module with inputs it has, its required ones set, and pass its
validations; the validations refuse what the construct refuses; the README's Inputs and Outputs
tables are variables.tf and outputs.tf.
"""

from __future__ import annotations

import os
import re
import unittest

import docs_tables
import hcl

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.dirname(HERE)
EXAMPLES = os.path.join(MODULE, "examples")
EXAMPLE_DIRS = sorted(os.path.join(EXAMPLES, d) for d in os.listdir(EXAMPLES))

# Meta-arguments of a module block, not inputs of the module.
MODULE_META = {"source", "version", "providers", "depends_on", "count", "for_each"}
# Names that are not a variable, local, resource, data source or module.
BUILTIN_ROOTS = {"each", "count", "path", "self", "terraform"}


def validations(inputs: dict) -> list[str]:
    """The error messages of the module's validations that fail for `inputs` (those whose
    condition meets a value known only after apply are not decided, as in Terraform)."""
    config = hcl.Configuration(MODULE, inputs)
    failed = []
    for name, block in config.variables.items():
        config.var(name)
        for validation in block.blocks_of("validation"):
            try:
                ok = config.eval(validation.attrs["condition"])
            except hcl.UnknownValue:
                continue
            if ok is not True:
                failed.append(f"{name}: {config.eval(validation.attrs['error_message'])}")
    return failed


class ModuleShape(unittest.TestCase):
    def setUp(self):
        self.config = hcl.Configuration(MODULE)

    def test_files_are_laid_out_as_terraform_aws_modules(self):
        for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"):
            self.assertTrue(os.path.isfile(os.path.join(MODULE, name)), name)
        for block in self.config.blocks:
            where = os.path.basename(block.file)
            expected = {"variable": "variables.tf", "output": "outputs.tf", "terraform": "versions.tf"}.get(block.type, "main.tf")
            self.assertEqual(where, expected, f"{block.type} {block.labels} in {where}")
        self.assertGreaterEqual(len(EXAMPLE_DIRS), 3)

    def test_every_variable_is_typed_described_and_validated(self):
        for name, block in self.config.variables.items():
            with self.subTest(variable=name):
                self.assertIn("type", block.attrs)
                description = self.config.eval(block.attrs["description"])
                self.assertGreater(len(description), 15)
                self.assertTrue(description.endswith("."), description)
                type_text = block.text("type")
                # A bool cannot be wrong, nor can tags; every other value has its validation.
                if type_text not in ("bool", "map(string)"):
                    self.assertTrue(block.blocks_of("validation"), f"{name} ({type_text}) has no validation")
                for validation in block.blocks_of("validation"):
                    self.assertIn("condition", validation.attrs)
                    self.assertTrue(self.config.eval(validation.attrs["error_message"]).endswith("."))

    def test_every_output_is_described(self):
        self.assertTrue(self.config.outputs)
        for name, block in self.config.outputs.items():
            with self.subTest(output=name):
                self.assertGreater(len(self.config.eval(block.attrs["description"])), 10)
                self.assertIn("value", block.attrs)

    def test_terraform_and_the_aws_provider_are_pinned_to_a_floor(self):
        for directory in [MODULE] + EXAMPLE_DIRS:
            with self.subTest(directory=os.path.relpath(directory, MODULE)):
                config = hcl.Configuration(directory, resolve_attributes=True)
                [terraform] = [b for b in config.blocks if b.type == "terraform"]
                self.assertEqual(os.path.basename(terraform.file), "versions.tf")
                self.assertEqual(config.eval(terraform.attrs["required_version"]), ">= 1.9.0")
                providers = config.eval(terraform.block("required_providers").attrs["aws"])
                self.assertEqual(providers["source"], "hashicorp/aws")
                self.assertEqual(providers["version"], ">= 6.0.0")

    def test_references_exist(self):
        for directory in [MODULE] + EXAMPLE_DIRS:
            config = hcl.Configuration(directory, resolve_attributes=True)
            called = {name: hcl.Configuration(os.path.join(directory, config.eval(b.attrs["source"]))) for name, b in config.modules.items()}
            for block in config.blocks:
                if block.type == "moved":
                    # A former address, and the resource it is now.
                    [before], [after] = hcl.references(block.attrs["from"]), hcl.references(block.attrs["to"])
                    self.assertNotIn(tuple(before[:2]), config.resources, f"moved from {before}")
                    self.assertIn(tuple(after[:2]), config.resources, f"moved to {after}")
                    continue
                trees = list(block.attrs.values())
                stack = list(block.blocks)
                while stack:
                    inner = stack.pop()
                    trees.extend(inner.attrs.values())
                    stack.extend(inner.blocks)
                for tree in trees:
                    for ref in hcl.references(tree):
                        what = ".".join(ref)
                        with self.subTest(file=os.path.relpath(block.file, MODULE), line=block.line, reference=what):
                            root = ref[0]
                            if root == "var":
                                self.assertIn(ref[1], config.variables)
                            elif root == "local":
                                self.assertIn(ref[1], config.local_exprs)
                            elif root == "data":
                                self.assertIn((ref[1], ref[2]), config.data)
                            elif root == "module":
                                self.assertIn(ref[1], called)
                                if len(ref) > 2:
                                    self.assertIn(ref[2], called[ref[1]].outputs)
                            elif re.match(r"^aws_[a-z0-9_]+$", root) and len(ref) > 1:
                                if block.type == "terraform" or (block.type == "module" and ref == ["aws", ref[1]]):
                                    continue
                                self.assertIn((root, ref[1]), config.resources)
                            elif root == "aws" and len(ref) == 2:
                                # A provider configuration (providers = { aws = aws.primary }).
                                self.assertTrue(any(config.attr(p, "alias") == ref[1] for p in config.providers))

    def test_module_resources_and_locals_are_used(self):
        def read(name: str) -> str:
            with open(os.path.join(MODULE, name), encoding="utf-8") as f:
                return f.read()

        text = read("main.tf") + read("outputs.tf")
        for name in self.config.local_exprs:
            with self.subTest(local=name):
                self.assertIn(f"local.{name}", text)
        variables_text = text + read("variables.tf")
        for name in self.config.variables:
            with self.subTest(variable=name):
                self.assertIn(f"var.{name}", variables_text)


class Examples(unittest.TestCase):
    def calls(self):
        for directory in EXAMPLE_DIRS:
            config = hcl.Configuration(directory, resolve_attributes=True)
            for name, block in config.modules.items():
                yield os.path.basename(directory), name, config, block

    def test_examples_call_the_module_with_inputs_it_has(self):
        module = hcl.Configuration(MODULE)
        required = {n for n, b in module.variables.items() if "default" not in b.attrs}
        seen = 0
        for example, name, config, block in self.calls():
            with self.subTest(example=example, module=name):
                seen += 1
                self.assertEqual(os.path.realpath(os.path.join(config.directory, config.eval(block.attrs["source"]))), os.path.realpath(MODULE))
                inputs = set(block.attrs) - MODULE_META
                self.assertEqual(inputs - set(module.variables), set(), "inputs the module does not have")
                self.assertEqual(required - inputs, set(), "required inputs not set")
                for variable in config.variables.values():
                    self.assertIn("type", variable.attrs)
                    self.assertIn("description", variable.attrs)
                for output in config.outputs.values():
                    self.assertIn("description", output.attrs)
        self.assertGreaterEqual(seen, 4)

    def test_examples_pass_the_module_validations(self):
        for example, name, config, block in self.calls():
            with self.subTest(example=example, module=name):
                self.assertEqual(validations({k: config.eval(v) for k, v in block.attrs.items() if k not in MODULE_META}), [])

    def test_the_examples_cover_what_the_issue_asks(self):
        calls = {(example, name): {k: block.attrs[k] for k in block.attrs} for example, name, _, block in self.calls()}
        configs = {(example, name): config for example, name, config, _ in self.calls()}
        ticking = [k for k, a in calls.items() if "tick_seconds" in a and configs[k].eval(a["tick_seconds"]) == 1]
        self.assertTrue(ticking, "a table with a 1 s tick")
        self.assertTrue([k for k, a in calls.items() if "follow_stream" in a and configs[k].eval(a["follow_stream"]) is True], "writers unchanged")
        leased = [k for k, a in calls.items() if "leader_lease_seconds" in a]
        self.assertGreaterEqual(len(leased), 2, "a global table with the lease: a sweeper in two Regions")
        self.assertTrue([k for k, a in calls.items() if "tick_seconds" not in a], "minute mode")
        self.assertTrue([k for k, a in calls.items() if "local_existing_package" in a], "a local zip")
        self.assertTrue([k for k, a in calls.items() if "s3_existing_package" in a], "a zip in S3")


class Validations(unittest.TestCase):
    """The module refuses what the construct's synthesis refuses (infra/src/settings.ts)."""

    BASE = {"table_name": "sessions", "local_existing_package": "ttl-sweeper-lambda-arm64.zip"}
    REFUSED = {
        "tick_seconds=60 with the default one-minute schedule": {"tick_seconds": 60},
        "tick_seconds=31": {"tick_seconds": 31, "schedule_rate_minutes": 5},
        "a lease without a checkpoint": {"leader_lease_seconds": 120},
        "a lease shorter than two ticks": {"tick_seconds": 5, "leader_lease_seconds": 9, "create_checkpoint_table": True},
        "a lease shorter than two schedule periods": {"leader_lease_seconds": 119, "create_checkpoint_table": True},
        "index_name with follow_stream": {"follow_stream": True, "table_stream_arn": "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions/stream/x", "index_name": "byExpiry"},
        "follow_stream without a stream ARN": {"follow_stream": True},
        "follow_stream over 20000 partitions": {"follow_stream": True, "table_stream_arn": "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions/stream/x", "window_seconds": 1, "window_shards": 1000},
        "archive mode with batch deletes": {"expiry_events": {"event_bus_arn": "arn:aws:events:eu-west-1:123456789012:event-bus/default", "mode": "archive"}},
        "two sinks": {"expiry_events": {"event_bus_arn": "arn:aws:events:eu-west-1:123456789012:event-bus/default", "delivery_stream_name": "s"}},
        "a queue without its URL": {"expiry_events": {"queue_arn": "arn:aws:sqs:eu-west-1:123456789012:q"}},
        "no code": {"local_existing_package": None},
        "two codes": {"s3_existing_package": {"bucket": "artifacts", "key": "x.zip"}},
        "max_catch_up_seconds without a checkpoint": {"max_catch_up_seconds": 3600},
        "both checkpoints": {"create_checkpoint_table": True, "checkpoint_table_name": "checkpoints"},
        "a cron expression of five fields": {"schedule_cron": "cron(0/2 * * * ?)", "schedule_cron_period_seconds": 120},
        "a cron expression without its period": {"schedule_cron": "cron(0/2 * * * ? *)"},
        "a silence shorter than the schedule period": {"schedule_rate_minutes": 10, "silence_alarm_after_seconds": 600},
        "the window attribute as the ttl attribute": {"window_attribute": "ttl"},
        "a namespace of AWS's": {"metrics_namespace": "AWS/Lambda"},
        "a retention CloudWatch Logs does not take": {"log_retention_days": 31},
        "window_seconds=0": {"window_seconds": 0},
        "max_concurrency=1.5": {"max_concurrency": 1.5},
        "delete_mode=fast": {"delete_mode": "fast"},
        "a table name with a space": {"table_name": "my table"},
        "an e-mail without @": {"alarm_emails": ["oncall"]},
    }
    ACCEPTED = {
        "the defaults": {},
        "tick mode, a lease of two ticks": {"tick_seconds": 1, "leader_lease_seconds": 5, "checkpoint_table_name": "checkpoints"},
        "a cron schedule with its period": {"schedule_cron": "0/2 * * * ? *", "schedule_cron_period_seconds": 120, "tick_seconds": 1},
        "archive mode with conditional deletes": {"delete_mode": "conditional", "expiry_events": {"queue_arn": "arn:aws:sqs:eu-west-1:123456789012:q", "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q", "mode": "archive"}},
        "the code in S3": {"local_existing_package": None, "s3_existing_package": {"bucket": "artifacts", "key": "x.zip"}},
    }

    def test_refused(self):
        for what, inputs in self.REFUSED.items():
            with self.subTest(what):
                self.assertNotEqual(validations({**self.BASE, **inputs}), [], what)

    def test_accepted(self):
        for what, inputs in self.ACCEPTED.items():
            with self.subTest(what):
                self.assertEqual(validations({**self.BASE, **inputs}), [], what)


def readme_table(text: str, heading: str) -> list[list[str]]:
    """The rows of the first table after `heading` in a Markdown text."""
    section = text.split(f"\n{heading}\n", 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            rows.append(cells)
        elif rows:
            break
    return rows


class Readme(unittest.TestCase):
    def setUp(self):
        with open(os.path.join(MODULE, "README.md"), encoding="utf-8") as f:
            self.text = f.read()
        self.config = hcl.Configuration(MODULE)

    def test_inputs_table_is_variables_tf(self):
        rows = readme_table(self.text, "## Inputs")
        self.assertEqual(rows[0], docs_tables.INPUTS_HEADER)
        self.assertEqual(rows[2:], docs_tables.input_rows(self.config), "regenerate with: python3 test/docs_tables.py")

    def test_outputs_table_is_outputs_tf(self):
        rows = readme_table(self.text, "## Outputs")
        self.assertEqual(rows[0], docs_tables.OUTPUTS_HEADER)
        self.assertEqual(rows[2:], docs_tables.output_rows(self.config), "regenerate with: python3 test/docs_tables.py")

    def test_readme_names_every_example_and_says_what_was_not_run(self):
        for directory in EXAMPLE_DIRS:
            self.assertIn(f"examples/{os.path.basename(directory)}", self.text)
        self.assertRegex(self.text, r"`terraform init`, `validate` and `plan` (have not|were not) (been )?run")


if __name__ == "__main__":
    unittest.main()
