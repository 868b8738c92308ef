"""The Terraform module against the CDK construct, so that the two cannot drift: for the choices of
each module call in examples/ (and a few more variants below), the construct is synthesized with
the same choices (infra/scripts/synth-terraform-cases.ts) and its template compared with what
the module creates, read with hcl.py: each role's statements (Sids, actions, resources,
conditions) and trust, each function's environment and settings, the schedule, the event source
mapping, the alarms, the alarm topic and its key, the tables, queues, log groups, the queue and
topic policies and the dashboard.

Values known only after apply are compared as the same thing on both sides: the construct's
`{"Ref": "SweeperExpiryIndex..."}` and the module's `aws_dynamodb_table.expiry_index[0].name` are
both `{{ref:ExpiryIndex}}`, the construct's `Fn::GetAtt [..., Arn]` and the module's `.arn` both
`{{arn:ExpiryIndex}}` (a log group's with its `:*`), and an example's own attributes
(`aws_dynamodb_table.sessions.stream_arn`) are handed to the construct as they are.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
from typing import Any, Callable

import hcl

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.dirname(HERE)
INFRA = os.path.dirname(MODULE)
EXAMPLES = os.path.join(MODULE, "examples")
ACCOUNT = "123456789012"

# Module inputs that are not an example's, for what the examples leave out: other sinks, a cron
# schedule, customer managed keys, alarms off or on a topic of one's own, non-default sizes, and
# the stream indexer with expiry events (its sink grants and settings, and with a lease
# DELETE_WHEN_INDEXED=false).
VARIANTS: dict[str, dict[str, Any]] = {
    "variant-cron-bus-keys": {
        "table_name": "sessions",
        "local_existing_package": "ttl-sweeper-lambda-arm64.zip",
        "schedule_cron": "cron(0/2 * * * ? *)",
        "schedule_cron_period_seconds": 120,
        "schedule_timezone": "Europe/Paris",
        "table_kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-555555555555",
        "checkpoint_table_name": "sweeper-checkpoints",
        "checkpoint_table_kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/66666666-2222-3333-4444-555555555555",
        "expiry_events": {"event_bus_arn": "arn:aws:events:eu-west-1:123456789012:event-bus/default"},
        "alarm_emails": ["oncall@example.com"],
        "silence_alarm_after_seconds": 1800,
    },
    "variant-firehose-own-topic": {
        "table_name": "carts",
        "s3_existing_package": {"bucket": "artifacts", "key": "ttl-sweeper-lambda-arm64.zip"},
        "tick_seconds": 2,
        "delete_mode": "conditional",
        "lookback_windows": 30,
        "max_concurrency": 32,
        "max_retries": 4,
        "metrics_namespace": "Shop/Expiry",
        "expiry_events": {"delivery_stream_name": "expired-carts", "item": "off"},
        "alarm_topic_arn": "arn:aws:sns:eu-west-1:123456789012:oncall",
        "lag_alarm_threshold_seconds": 30,
        "schedule_retry_attempts": 5,
        "schedule_max_event_age_seconds": 600,
        "log_retention_days": 90,
        "log_group_skip_destroy": True,
    },
    "variant-stream-queue-key-no-alarms": {
        "table_name": "tokens",
        "local_existing_package": "ttl-sweeper-lambda-arm64.zip",
        "follow_stream": True,
        "table_stream_arn": "arn:aws:dynamodb:eu-west-1:123456789012:table/tokens/stream/2026-11-26T00:00:00.000",
        "table_kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/77777777-2222-3333-4444-555555555555",
        "ttl_attribute": "expiresAt",
        "window_seconds": 10,
        "window_shards": 2,
        "delete_mode": "conditional",
        "schedule_rate_minutes": 2,
        "expiry_events": {
            "queue_arn": "arn:aws:sqs:eu-west-1:123456789012:expired-tokens",
            "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/expired-tokens",
            "queue_kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/88888888-2222-3333-4444-555555555555",
            "mode": "archive",
        },
        "memory_size": 256,
        "timeout_seconds": 100,
        "reserved_concurrency": 3,
        "create_alarms": False,
        "create_dashboard": False,
        "schedule_enabled": False,
    },
    "variant-stream-lease-unencrypted-topic": {
        "table_name": "locks",
        "local_existing_package": "ttl-sweeper-lambda-arm64.zip",
        "follow_stream": True,
        "table_stream_arn": "arn:aws:dynamodb:eu-west-1:123456789012:table/locks/stream/2026-11-26T00:00:00.000",
        "create_checkpoint_table": True,
        "leader_lease_seconds": 120,
        # The events in notify mode with item auto: the stream indexer's grants for them, and
        # both roles' read of the table, which settles a delete whose answer was lost.
        "expiry_events": {"event_bus_arn": "arn:aws:events:eu-west-1:123456789012:event-bus/expiries", "item": "auto"},
        "encrypt_alarm_topic": False,
    },
}

# The module's resources and the construct's logical ids (less `Sweeper` and the hash) they are.
KINDS = {
    "aws_dynamodb_table.expiry_index": "ExpiryIndex",
    "aws_dynamodb_table.checkpoint": "CheckpointTable",
    "aws_cloudwatch_log_group.sweeper": "Logs",
    "aws_cloudwatch_log_group.stream": "StreamLogs",
    "aws_sqs_queue.failed_invocations": "FailedInvocations",
    "aws_sqs_queue.stream_failures": "StreamFailures",
    "aws_lambda_function.sweeper": "Function",
    "aws_lambda_function.stream": "StreamFunction",
    "aws_iam_role.sweeper": "Role",
    "aws_iam_role.stream": "StreamRole",
    "aws_iam_role.schedule": "ScheduleRole",
    "aws_sns_topic.alarms": "Alarms",
    "aws_kms_key.alarms": "AlarmsKey",
}
# What a resource's attribute is in CloudFormation: its Ref, or a Fn::GetAtt.
FORMS = {
    "aws_dynamodb_table": {"name": "ref", "id": "ref", "arn": "arn"},
    "aws_cloudwatch_log_group": {"name": "ref", "id": "ref", "arn": "arn"},
    "aws_sqs_queue": {"arn": "arn", "id": "ref", "url": "ref", "name": "queuename"},
    "aws_lambda_function": {"function_name": "ref", "arn": "arn"},
    "aws_iam_role": {"arn": "arn", "id": "ref", "name": "ref"},
    "aws_sns_topic": {"arn": "ref"},
    "aws_kms_key": {"arn": "arn"},
}
PLACEHOLDER = re.compile(r"\{\{(aws_[a-z0-9_]+)\.([a-z0-9_]+)\.([a-z_]+)\}\}")


def tf_norm(value: Any) -> Any:
    """The module's value with its own resources' placeholders in the construct's terms."""
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            address = f"{m.group(1)}.{m.group(2)}"
            if address not in KINDS:
                return m.group(0)  # an example's resource: handed to the construct as it is
            form = FORMS[m.group(1)].get(m.group(3))
            if form is None:
                raise AssertionError(f"{address}.{m.group(3)}: no CloudFormation form known")
            return "{{" + f"{form}:{KINDS[address]}" + "}}"

        return PLACEHOLDER.sub(sub, value)
    if isinstance(value, list):
        return [tf_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: tf_norm(v) for k, v in value.items()}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def kind(logical_id: str) -> str:
    return re.sub(r"^Sweeper", "", re.sub(r"[0-9A-F]{8}$", "", logical_id))


class Synthesized:
    """A construct template with its intrinsic functions in the terms of `tf_norm`."""

    def __init__(self, template: dict, region: str):
        self.resources = template["Resources"]
        self.region = region

    def norm(self, value: Any) -> Any:
        if isinstance(value, dict):
            if "Ref" in value:
                ref = value["Ref"]
                pseudo = {"AWS::Partition": "aws", "AWS::Region": self.region, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com"}
                if ref in pseudo:
                    return pseudo[ref]
                return "{{ref:" + kind(ref) + "}}"
            if "Fn::GetAtt" in value:
                logical_id, attribute = value["Fn::GetAtt"]
                text = "{{" + f"{attribute.lower()}:{kind(logical_id)}" + "}}"
                # A log group's Arn attribute ends in :* (the provider's arn does not).
                if self.resources[logical_id]["Type"] == "AWS::Logs::LogGroup" and attribute == "Arn":
                    text += ":*"
                return text
            if "Fn::Join" in value:
                separator, parts = value["Fn::Join"]
                return separator.join(self.norm(p) for p in parts)
            return {k: self.norm(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.norm(v) for v in value]
        return value

    def of_type(self, cfn_type: str) -> dict[str, dict]:
        return {kind(i): r for i, r in self.resources.items() if r["Type"] == cfn_type}

    def properties(self, cfn_type: str) -> list[dict]:
        """The properties of each resource of a type, normalized."""
        return [self.norm(r["Properties"]) for r in self.of_type(cfn_type).values()]


def statements(document: dict) -> list[tuple]:
    """A policy's statements, order and list-or-string left aside."""
    out = []
    for s in document["Statement"]:
        listed = lambda v: tuple(sorted([v] if isinstance(v, str) else v))  # noqa: E731
        principal = s.get("Principal")
        if isinstance(principal, dict):
            principal = {k: listed(v) for k, v in principal.items()}
        condition = {t: {k: listed(v) for k, v in c.items()} for t, c in s.get("Condition", {}).items()}
        out.append((
            s.get("Sid"),
            s.get("Effect", "Allow"),
            listed(s.get("Action", [])),
            listed(s.get("Resource", [])),
            json.dumps(principal, sort_keys=True),
            json.dumps(condition, sort_keys=True),
        ))
    return sorted(out, key=repr)


def example_cases() -> list[dict]:
    """Each call of the module in examples/: its inputs, as the example sets them, and Region."""
    cases = []
    for example in sorted(os.listdir(EXAMPLES)):
        directory = os.path.join(EXAMPLES, example)
        config = hcl.Configuration(directory, resolve_attributes=True)
        for name, block in config.modules.items():
            source = config.eval(block.attrs["source"])
            assert os.path.realpath(os.path.join(directory, source)) == os.path.realpath(MODULE), f"{example}: {source}"
            meta = ("source", "version", "providers", "depends_on", "count", "for_each")
            inputs = {k: config.eval(v) for k, v in block.attrs.items() if k not in meta}
            alias = None
            if "providers" in block.attrs:
                refs = [r for r in hcl.references(block.attrs["providers"]) if r[0] == "aws"]
                assert len(refs) == 1 and len(refs[0]) == 2, f"{example}/{name}: providers"
                alias = refs[0][1]
            provider = [p for p in config.providers if p.labels == ["aws"] and config.attr(p, "alias") == alias]
            assert len(provider) == 1, f"{example}/{name}: the aws provider {alias}"
            region = config.attr(provider[0], "region")
            cases.append({"name": f"{example}.{name}", "region": region, "account": ACCOUNT, "inputs": inputs})
    return cases


def all_cases() -> list[dict]:
    return example_cases() + [
        {"name": name, "region": "eu-west-1", "account": ACCOUNT, "inputs": inputs} for name, inputs in VARIANTS.items()
    ]


CASES: list[dict] = []
TEMPLATES: dict[str, Synthesized] = {}
MODULES: dict[str, hcl.Configuration] = {}


def setUpModule() -> None:  # noqa: N802 (unittest's name)
    CASES.extend(all_cases())
    workdir = tempfile.mkdtemp(prefix="ttl-sweeper-tf-drift-")
    try:
        cases_file = os.path.join(workdir, "cases.json")
        with open(cases_file, "w", encoding="utf-8") as f:
            json.dump(CASES, f)
        # aws-cdk-lib's template validation warns about the examples' placeholders for values
        # known after apply (not ARNs); its output is shown only if the synthesis fails.
        synth = subprocess.run(
            ["node", "--import", "tsx", "scripts/synth-terraform-cases.ts", cases_file, os.path.join(workdir, "out")],
            cwd=INFRA,
            capture_output=True,
            text=True,
        )
        if synth.returncode != 0:
            raise RuntimeError(f"synth-terraform-cases.ts failed:\n{synth.stdout}\n{synth.stderr}")
        for case in CASES:
            with open(os.path.join(workdir, "out", f"{case['name']}.json"), encoding="utf-8") as f:
                TEMPLATES[case["name"]] = Synthesized(json.load(f), case["region"])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    blocks = hcl.load_dir(MODULE)
    for case in CASES:
        context = {"partition": "aws", "region": case["region"], "account_id": ACCOUNT}
        MODULES[case["name"]] = hcl.Configuration(MODULE, case["inputs"], context, blocks=blocks)


def instances(module: hcl.Configuration, address: str) -> list[tuple[hcl.Block, hcl.Scope]]:
    """The instances of a resource of the module, each with the scope of its count.index or each."""
    block = module.resources[tuple(address.split("."))]
    return [(block, scope) for _, scope in module.instance_scopes(block)]


def by_kind(module: hcl.Configuration, addresses: tuple[str, ...], describe: Callable[[hcl.Block, hcl.Scope], Any]) -> dict[str, Any]:
    """What `describe(block, scope)` says of each instance of the module's resources at
    `addresses`, by the construct's kind of resource (KINDS)."""
    return {KINDS[address]: describe(block, scope) for address in addresses for block, scope in instances(module, address)}


def value(module: hcl.Configuration, block: hcl.Block, path: str, scope: hcl.Scope | None = None) -> Any:
    """An argument of a resource, e.g. "target.retry_policy.maximum_retry_attempts" (None if unset)."""
    *blocks, attr = path.split(".")
    for b in blocks:
        found = block.blocks_of(b)
        if not found:
            return None
        block = found[0]
    return tf_norm(module.attr(block, attr, scope=scope))


class DriftTest(unittest.TestCase):
    maxDiff = None

    def cases(self) -> list[tuple[str, hcl.Configuration, Synthesized]]:
        return [(c["name"], MODULES[c["name"]], TEMPLATES[c["name"]]) for c in CASES]

    def paired(self, module: hcl.Configuration, address: str, cfn: Synthesized, cfn_type: str) -> list[tuple[hcl.Block, hcl.Scope, dict]]:
        """The instances of a resource of the module, each with the properties of the construct's
        resource of a type in the same place: as many of one as of the other."""
        found, properties = instances(module, address), cfn.properties(cfn_type)
        self.assertEqual(len(found), len(properties), address)
        return [(block, scope, p) for (block, scope), p in zip(found, properties)]

    def test_cases_cover_every_example_and_the_module_choices(self):
        names = [c["name"] for c in CASES]
        for example in os.listdir(EXAMPLES):
            self.assertTrue(any(n.startswith(f"{example}.") for n in names), f"{example} calls the module")
        inputs = {k for c in CASES for k in c["inputs"]}
        # Every input of the module is set by some case (tags only name things).
        missing = set(MODULES[names[0]].variables) - inputs - {"name", "tags"}
        self.assertEqual(missing, set(), "inputs no case sets")

    def test_roles_have_the_construct_statements(self):
        for name, module, cfn in self.cases():
            with self.subTest(case=name):
                # The construct: each role's statements from every policy attached to it.
                expected: dict[str, list] = {}
                for role_id in cfn.of_type("AWS::IAM::Role"):
                    expected[role_id] = []
                for policy in cfn.of_type("AWS::IAM::Policy").values():
                    doc = cfn.norm(policy["Properties"]["PolicyDocument"])
                    for role in cfn.norm(policy["Properties"]["Roles"]):
                        expected[role[len("{{ref:") : -2]].extend(doc["Statement"])
                actual: dict[str, list] = {}
                for address in ("aws_iam_role_policy.sweeper", "aws_iam_role_policy.stream", "aws_iam_role_policy.schedule"):
                    for block, scope in instances(module, address):
                        role = value(module, block, "role", scope)
                        actual.setdefault(role[len("{{ref:") : -2], []).extend(json.loads(value(module, block, "policy", scope))["Statement"])
                self.assertEqual(sorted(actual), sorted(expected), "roles")
                for role in expected:
                    want, got = statements({"Statement": expected[role]}), statements({"Statement": actual[role]})
                    # The construct's on-failure grant has no Sid; the module names it FailedInvocations.
                    want = [(("FailedInvocations",) + w[1:]) if w[0] is None else w for w in want]
                    self.assertEqual(got, sorted(want, key=repr), f"{name}: role {role}")

    def test_stream_indexer_deletes_but_never_puts_or_updates_the_table_items(self):
        # What test_roles_have_the_construct_statements holds the module to, said of the module
        # itself: of the application's table the stream indexer may delete items, and with expiry
        # events read them (in any mode); it never puts, updates, batch-writes or queries; with a
        # lease, whose holder alone deletes, its function gets DELETE_WHEN_INDEXED=false.
        following = 0
        for name, module, _ in self.cases():
            if not module.var("follow_stream"):
                continue
            following += 1
            with self.subTest(case=name):
                table_arn = module.local("table_arn")
                [(block, scope)] = instances(module, "aws_iam_role_policy.stream")
                on_table = set()
                for statement in json.loads(value(module, block, "policy", scope))["Statement"]:
                    resources = [statement["Resource"]] if isinstance(statement["Resource"], str) else statement["Resource"]
                    if table_arn in resources:
                        on_table.update([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
                events = module.var("expiry_events") is not None
                expected = {"dynamodb:DescribeTable", "dynamodb:DeleteItem"} | ({"dynamodb:BatchGetItem"} if events else set())
                self.assertEqual(on_table, expected, name)
                [(function, scope)] = instances(module, "aws_lambda_function.stream")
                environment = value(module, function, "environment.variables", scope)
                leased = module.var("leader_lease_seconds") is not None
                self.assertEqual(environment.get("DELETE_WHEN_INDEXED"), "false" if leased else None, name)
                self.assertEqual("EXPIRY_EVENTS" in environment, events, name)
        self.assertGreaterEqual(following, 3)

    def test_sweeper_reads_the_table_with_expiry_events_in_any_mode(self):
        # What test_roles_have_the_construct_statements holds the module to, said of the module
        # itself: the sweeper's BatchGetItem on the table is batch mode's confirming read and, with
        # expiry events, whatever their mode and item, ExpiryEventsReadItems (a delete whose answer
        # was lost is settled by a read); on the table only, and nothing else reads the table.
        modes = set()
        for name, module, _ in self.cases():
            with self.subTest(case=name):
                table_arn = module.local("table_arn")
                [(block, scope)] = instances(module, "aws_iam_role_policy.sweeper")
                reads = {}
                for statement in json.loads(value(module, block, "policy", scope))["Statement"]:
                    actions = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
                    if "dynamodb:BatchGetItem" in actions:
                        resources = [statement["Resource"]] if isinstance(statement["Resource"], str) else statement["Resource"]
                        reads[statement["Sid"]] = resources
                events = module.var("expiry_events")
                expected = {}
                if module.var("delete_mode") == "batch":
                    expected["ConfirmKeysInTable"] = [table_arn]
                if events is not None:
                    expected["ExpiryEventsReadItems"] = [table_arn]
                    modes.add((events.get("mode"), events.get("item"), module.var("delete_mode")))
                self.assertEqual(reads, expected, name)
        # Notify mode without item read, with conditional deletes among them: the read the
        # sweeper had only with item read or archive mode before.
        self.assertTrue([m for m in modes if m[0] != "archive" and m[1] != "read" and m[2] == "conditional"], modes)

    def test_roles_have_the_construct_trust(self):
        for name, module, cfn in self.cases():
            with self.subTest(case=name):
                roles = by_kind(
                    module,
                    ("aws_iam_role.sweeper", "aws_iam_role.stream", "aws_iam_role.schedule"),
                    lambda block, scope: (json.loads(value(module, block, "assume_role_policy", scope)), value(module, block, "description", scope)),
                )
                cfn_roles = cfn.of_type("AWS::IAM::Role")
                self.assertEqual(sorted(roles), sorted(cfn_roles))
                for role, (trust, description) in roles.items():
                    props = cfn.norm(cfn_roles[role]["Properties"])
                    self.assertEqual(statements(trust), statements(props["AssumeRolePolicyDocument"]), f"{name}: {role}")
                    self.assertEqual(description, props["Description"], f"{name}: {role}")

    def test_functions_have_the_construct_environment_and_settings(self):
        for name, module, cfn in self.cases():
            with self.subTest(case=name):
                functions = cfn.of_type("AWS::Lambda::Function")
                actual = by_kind(module, ("aws_lambda_function.sweeper", "aws_lambda_function.stream"), lambda block, _: block)
                self.assertEqual(sorted(actual), sorted(functions), f"{name}: functions")
                for fn, block in actual.items():
                    props = cfn.norm(functions[fn]["Properties"])
                    self.assertEqual(value(module, block, "environment.variables"), props["Environment"]["Variables"], f"{name}: {fn} environment")
                    settings = {
                        "Timeout": value(module, block, "timeout"),
                        "MemorySize": value(module, block, "memory_size"),
                        "ReservedConcurrentExecutions": value(module, block, "reserved_concurrent_executions"),
                        "Runtime": value(module, block, "runtime"),
                        "Architectures": value(module, block, "architectures"),
                        "Handler": value(module, block, "handler"),
                        "Description": value(module, block, "description"),
                        "Role": value(module, block, "role"),
                        "LoggingConfig": {
                            k: v
                            for k, v in {
                                "LogFormat": value(module, block, "logging_config.log_format"),
                                "SystemLogLevel": value(module, block, "logging_config.system_log_level"),
                                "LogGroup": value(module, block, "logging_config.log_group"),
                            }.items()
                            if v is not None
                        },
                    }
                    self.assertEqual(settings, {k: props.get(k) for k in settings}, f"{name}: {fn}")
                # Asynchronous invocations of the sweeper: no retry, 5 minutes, then the failure queue.
                [p] = cfn.properties("AWS::Lambda::EventInvokeConfig")
                [(block, _)] = instances(module, "aws_lambda_function_event_invoke_config.sweeper")
                self.assertEqual(
                    [value(module, block, "function_name"), value(module, block, "maximum_retry_attempts"), value(module, block, "maximum_event_age_in_seconds"), value(module, block, "destination_config.on_failure.destination")],
                    [p["FunctionName"], p["MaximumRetryAttempts"], p["MaximumEventAgeInSeconds"], p["DestinationConfig"]["OnFailure"]["Destination"]],
                    name,
                )

    def test_schedule_is_the_construct_schedule(self):
        for name, module, cfn in self.cases():
            with self.subTest(case=name):
                [p] = cfn.properties("AWS::Scheduler::Schedule")
                [(block, _)] = instances(module, "aws_scheduler_schedule.sweeper")
                actual = {
                    "ScheduleExpression": value(module, block, "schedule_expression"),
                    "ScheduleExpressionTimezone": value(module, block, "schedule_expression_timezone"),
                    "State": value(module, block, "state"),
                    "Description": value(module, block, "description"),
                    "FlexibleTimeWindow": {"Mode": value(module, block, "flexible_time_window.mode")},
                    "Target": {
                        "Arn": value(module, block, "target.arn"),
                        "RoleArn": value(module, block, "target.role_arn"),
                        "Input": value(module, block, "target.input"),
                        "RetryPolicy": {
                            "MaximumEventAgeInSeconds": value(module, block, "target.retry_policy.maximum_event_age_in_seconds"),
                            "MaximumRetryAttempts": value(module, block, "target.retry_policy.maximum_retry_attempts"),
                        },
                        "DeadLetterConfig": {"Arn": value(module, block, "target.dead_letter_config.arn")},
                    },
                }
                self.assertEqual(actual, {k: p.get(k) for k in actual}, name)
                self.assertEqual(value(module, block, "group_name"), "default", "the trust names the default group")

    def test_stream_mapping_is_the_construct_mapping(self):
        for name, module, cfn in self.cases():
            with self.subTest(case=name):
                for block, scope, p in self.paired(module, "aws_lambda_event_source_mapping.stream", cfn, "AWS::Lambda::EventSourceMapping"):
                    actual = {
                        "EventSourceArn": value(module, block, "event_source_arn", scope),
                        "FunctionName": value(module, block, "function_name", scope),
                        "StartingPosition": value(module, block, "starting_position", scope),
                        "BatchSize": value(module, block, "batch_size", scope),
                        "MaximumBatchingWindowInSeconds": value(module, block, "maximum_batching_window_in_seconds", scope),
                        "FunctionResponseTypes": value(module, block, "function_response_types", scope),
                        "BisectBatchOnFunctionError": value(module, block, "bisect_batch_on_function_error", scope),
                        "MaximumRetryAttempts": value(module, block, "maximum_retry_attempts", scope),
                        "MaximumRecordAgeInSeconds": value(module, block, "maximum_record_age_in_seconds", scope),
                        "DestinationConfig": {"OnFailure": {"Destination": value(module, block, "destination_config.on_failure.destination_arn", scope)}},
                    }
                    expected = {k: p.get(k) for k in actual}
                    # Lambda takes either the function's name or its ARN.
                    expected["FunctionName"] = expected["FunctionName"].replace("{{ref:", "{{arn:")
                    self.assertEqual(actual, expected, name)
                    patterns = [json.loads(value(module, f, "pattern", scope)) for f in block.block("filter_criteria").blocks_of("filter")]
                    self.assertEqual(patterns, [json.loads(f["Pattern"]) for f in p["FilterCriteria"]["Filters"]], name)

    def test_alarms_are_the_construct_alarms(self):
        for name, module, cfn in self.cases():
            with self.subTest(case=name):
                expected = {p["MetricName"]: p for p in cfn.properties("AWS::CloudWatch::Alarm")}
                actual = {}
                for block in (b for (t, _), b in module.resources.items() if t == "aws_cloudwatch_metric_alarm"):
                    for _, scope in instances(module, f"aws_cloudwatch_metric_alarm.{block.labels[1]}"):
                        get = lambda attr: value(module, block, attr, scope)  # noqa: E731
                        actual[get("metric_name")] = {
                            "AlarmDescription": get("alarm_description"),
                            "Namespace": get("namespace"),
                            "MetricName": get("metric_name"),
                            "Dimensions": sorted(({"Name": k, "Value": v} for k, v in get("dimensions").items()), key=repr),
                            "Statistic": get("statistic"),
                            "Period": get("period"),
                            "EvaluationPeriods": get("evaluation_periods"),
                            "DatapointsToAlarm": get("datapoints_to_alarm"),
                            "Threshold": get("threshold"),
                            "ComparisonOperator": get("comparison_operator"),
                            "TreatMissingData": get("treat_missing_data"),
                            "AlarmActions": get("alarm_actions"),
                        }
                self.assertEqual(sorted(actual), sorted(expected), f"{name}: alarms")
                for metric, alarm in actual.items():
                    want = {k: expected[metric].get(k) for k in alarm}
                    want["Dimensions"] = sorted(want["Dimensions"], key=repr)
                    self.assertEqual(alarm, want, f"{name}: {metric}")

    def test_alarm_topic_and_key_are_the_construct_ones(self):
        for name, module, cfn in self.cases():
            with self.subTest(case=name):
                topics, keys = cfn.of_type("AWS::SNS::Topic"), cfn.of_type("AWS::KMS::Key")
                self.assertEqual(len(instances(module, "aws_sns_topic.alarms")), len(topics), name)
                self.assertEqual(len(instances(module, "aws_kms_key.alarms")), len(keys), name)
                for block, scope in instances(module, "aws_sns_topic.alarms"):
                    p = cfn.norm(topics["Alarms"]["Properties"])
                    self.assertEqual([value(module, block, "display_name", scope), value(module, block, "kms_master_key_id", scope)], [p["DisplayName"], p.get("KmsMasterKeyId")])
                    subscriptions = sorted(r["Properties"]["Endpoint"] for r in cfn.of_type("AWS::SNS::Subscription").values())
                    self.assertEqual(sorted(module.var("alarm_emails")), subscriptions, name)
                for block, scope in instances(module, "aws_kms_key.alarms"):
                    p = cfn.norm(keys["AlarmsKey"]["Properties"])
                    self.assertEqual(
                        [value(module, block, "enable_key_rotation", scope), value(module, block, "deletion_window_in_days", scope), value(module, block, "description", scope)],
                        [p["EnableKeyRotation"], p["PendingWindowInDays"], p["Description"]],
                    )
                    self.assertEqual(statements(json.loads(value(module, block, "policy", scope))), statements(p["KeyPolicy"]), name)

    def test_tables_queues_and_log_groups_are_the_construct_ones(self):
        for name, module, cfn in self.cases():
            with self.subTest(case=name):

                def table(block: hcl.Block, _: hcl.Scope) -> dict:
                    keys = [{"AttributeName": value(module, block, "hash_key"), "KeyType": "HASH"}]
                    if "range_key" in block.attrs:
                        keys.append({"AttributeName": value(module, block, "range_key"), "KeyType": "RANGE"})
                    ttl = block.blocks_of("ttl")
                    pitr = block.blocks_of("point_in_time_recovery")
                    return {
                        "KeySchema": keys,
                        "AttributeDefinitions": [{"AttributeName": value(module, a, "name"), "AttributeType": value(module, a, "type")} for a in block.blocks_of("attribute")],
                        "BillingMode": value(module, block, "billing_mode"),
                        "TimeToLiveSpecification": {"AttributeName": value(module, ttl[0], "attribute_name"), "Enabled": value(module, ttl[0], "enabled")} if ttl else None,
                        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": value(module, pitr[0], "enabled")} if pitr else None,
                    }

                tables = cfn.of_type("AWS::DynamoDB::Table")
                actual = by_kind(module, ("aws_dynamodb_table.expiry_index", "aws_dynamodb_table.checkpoint"), table)
                self.assertEqual(sorted(actual), sorted(tables), f"{name}: tables")
                for kind_, props in actual.items():
                    self.assertEqual(props, {k: tables[kind_]["Properties"].get(k) for k in props}, f"{name}: {kind_}")
                queues = cfn.of_type("AWS::SQS::Queue")
                actual = by_kind(
                    module,
                    ("aws_sqs_queue.failed_invocations", "aws_sqs_queue.stream_failures"),
                    lambda block, _: {"MessageRetentionPeriod": value(module, block, "message_retention_seconds"), "SqsManagedSseEnabled": value(module, block, "sqs_managed_sse_enabled")},
                )
                self.assertEqual(actual, {q: queues[q]["Properties"] for q in queues}, f"{name}: queues")
                logs = cfn.of_type("AWS::Logs::LogGroup")
                actual = by_kind(
                    module,
                    ("aws_cloudwatch_log_group.sweeper", "aws_cloudwatch_log_group.stream"),
                    lambda block, _: (value(module, block, "retention_in_days"), "Retain" if value(module, block, "skip_destroy") else "Delete"),
                )
                self.assertEqual(actual, {g: (r["Properties"]["RetentionInDays"], r["DeletionPolicy"]) for g, r in logs.items()}, f"{name}: log groups")

    def test_queue_and_topic_policies_are_the_construct_ones(self):
        for name, module, cfn in self.cases():
            with self.subTest(case=name):
                expected = {}
                for cfn_type, targets in (("AWS::SQS::QueuePolicy", "Queues"), ("AWS::SNS::TopicPolicy", "Topics")):
                    for p in cfn.properties(cfn_type):
                        [target] = p[targets]
                        expected[target] = statements(p["PolicyDocument"])
                actual = {}
                for address, target in (("aws_sqs_queue_policy.failed_invocations", "queue_url"), ("aws_sqs_queue_policy.stream_failures", "queue_url"), ("aws_sns_topic_policy.alarms", "arn")):
                    for block, scope in instances(module, address):
                        actual[value(module, block, target, scope)] = statements(json.loads(value(module, block, "policy", scope)))
                self.assertEqual(actual, expected, name)

    def test_dashboard_is_the_construct_dashboard(self):
        for name, module, cfn in self.cases():
            with self.subTest(case=name):
                for block, scope, p in self.paired(module, "aws_cloudwatch_dashboard.sweeper", cfn, "AWS::CloudWatch::Dashboard"):
                    self.assertEqual(json.loads(value(module, block, "dashboard_body", scope)), json.loads(p["DashboardBody"]), name)


if __name__ == "__main__":
    unittest.main()
