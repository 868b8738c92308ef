// The SAM template (sam/template.yaml) against the construct: the same IAM actions on the same
// kinds of resource for the function and the schedule, the same environment for the same
// settings, and the same timeout and reserved concurrency with and without tick mode; with
// FollowStream (the construct's followStream), the same expiry index table, stream indexer,
// mapping, alarms, and the same grants of both functions.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Duration } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { parse, type CollectionTag, type ScalarTag } from 'yaml';
import { Checkpoint, DeleteMode, type TtlSweeperProps } from '../src';
import { env, logicalId, newStack, statements, synth } from './support';

/** CloudFormation's short forms, read as their long forms (`!Ref x` → `{ Ref: x }`). */
const cfnTags: (ScalarTag | CollectionTag)[] = ['Ref', 'Sub', 'GetAtt', 'If', 'Equals', 'Not', 'And', 'Condition', 'Join', 'Select', 'Split', 'FindInMap']
  .flatMap((name) => {
    const long = name === 'Ref' || name === 'Condition' ? name : `Fn::${name}`;
    const value = (v: unknown) =>
      name === 'GetAtt' && typeof v === 'string' ? { [long]: v.split('.') } : { [long]: v };
    return [
      { tag: `!${name}`, resolve: (s: string) => value(s) } as ScalarTag,
      { tag: `!${name}`, collection: 'seq', resolve: (seq: any) => value(seq.toJSON()) } as CollectionTag,
    ];
  });

const template = parse(fs.readFileSync(path.join(__dirname, '..', 'sam', 'template.yaml'), 'utf8'), {
  customTags: cfnTags,
}) as any;

/** Whether the template's condition `name` holds for `parameters` (defaults unless given). */
function condition(name: string, parameters: Record<string, string>): boolean {
  const holds = (c: any): boolean => {
    if (c['Fn::Not']) return !holds(c['Fn::Not'][0]);
    if (c['Fn::And']) return c['Fn::And'].every(holds);
    if (c.Condition) return condition(c.Condition, parameters);
    assert.ok(c['Fn::Equals'], `cannot evaluate condition ${JSON.stringify(c)}`);
    return String(evaluate(c['Fn::Equals'][0], parameters)) === String(evaluate(c['Fn::Equals'][1], parameters));
  };
  return holds(template.Conditions[name]);
}

/**
 * The value of `v` for `parameters` (each parameter's default unless given): `Ref` to a parameter,
 * `Fn::Sub` of parameters and `Fn::If` on the template's conditions are evaluated, `AWS::NoValue`
 * is `undefined`, a `Ref` to a resource of the template is `ref:<its logical id>`; anything else
 * must be a plain value.
 */
function evaluate(v: any, parameters: Record<string, string>): unknown {
  if (v && typeof v === 'object' && v.Ref === 'AWS::NoValue') return undefined;
  if (v && typeof v === 'object' && typeof v.Ref === 'string' && v.Ref in template.Resources) return `ref:${v.Ref}`;
  const param = (name: string) => {
    const value = parameters[name] ?? template.Parameters[name]?.Default;
    assert.notEqual(value, undefined, `no value for parameter ${name}`);
    return String(value);
  };
  if (v && typeof v === 'object' && 'Ref' in v) return param(v.Ref);
  if (v && typeof v === 'object' && typeof v['Fn::Sub'] === 'string') {
    return v['Fn::Sub'].replace(/\$\{([A-Za-z0-9]+)\}/g, (_: string, name: string) => param(name));
  }
  if (v && typeof v === 'object' && 'Fn::If' in v) {
    const [name, yes, no] = v['Fn::If'];
    return evaluate(condition(name, parameters) ? yes : no, parameters);
  }
  assert.ok(typeof v !== 'object', `cannot evaluate ${JSON.stringify(v)}`);
  return typeof v === 'number' ? v : String(v);
}

/** The template's resources that exist for `parameters`, by logical id. */
function present(parameters: Record<string, string>): Record<string, any> {
  return Object.fromEntries(
    Object.entries(template.Resources).filter(([, r]: [string, any]) => r.Condition === undefined || condition(r.Condition, parameters)),
  );
}

/** The environment of a SAM function's properties for `parameters`, without the variables left out. */
function samEnvironment(fn: any, parameters: Record<string, string>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(fn.Environment.Variables)
      .map(([k, v]) => [k, evaluate(v, parameters)])
      .filter(([, v]) => v !== undefined),
  );
}

/** A statement under `Fn::If`: the branch the condition picks, `undefined` for `AWS::NoValue`. */
function evaluateStatement(v: any, parameters: Record<string, string>): unknown {
  const [name, yes, no] = v['Fn::If'];
  const picked = evaluate({ 'Fn::If': [name, 'yes', 'no'] }, parameters) === 'yes' ? yes : no;
  return picked && typeof picked === 'object' && picked.Ref === 'AWS::NoValue' ? undefined : picked;
}

/** The statements by Sid of the inline policies of a role of the SAM template, for `parameters`. */
function samStatements(role: string, parameters: Record<string, string> = {}): Record<string, any> {
  const out: Record<string, any> = {};
  for (const p of template.Resources[role].Properties.Policies) {
    for (const raw of p.PolicyDocument.Statement) {
      // A statement under `Fn::If` on a condition, with the parameters' defaults unless given.
      const s = raw['Fn::If'] ? (evaluateStatement(raw, parameters) as any) : raw;
      if (s) out[s.Sid] = s;
    }
  }
  return out;
}

/** Actions by Sid of the inline policies of a role of the SAM template, for `parameters`. */
function samActions(role: string, parameters: Record<string, string> = {}): Record<string, string[]> {
  return Object.fromEntries(Object.entries(samStatements(role, parameters)).map(([sid, s]) => [sid, [s.Action].flat()]));
}

/** Actions of a construct's role, as sorted sets (the on-failure destination's has no Sid). */
function constructActions(synthesized: ReturnType<typeof synth>, rolePrefix: string): string[][] {
  const s = statements(synthesized.template, logicalId(synthesized.template, 'AWS::IAM::Role', rolePrefix));
  return Object.values(s).map((st) => [st.Action].flat().map(String).sort()).sort();
}

const sorted = (byId: Record<string, string[]>) => Object.values(byId).map((a) => [...a].sort()).sort();

test("the template's settings are the binary's: defaults, ranges and choices of settings.json", () => {
  const spec = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'settings.json'), 'utf8'));
  const variables: Record<string, any> = template.Resources.Function.Properties.Environment.Variables;
  const parameterOf = (value: any): string | undefined => {
    if (value?.Ref !== undefined) return value.Ref;
    const branches = value?.['Fn::If']?.slice(1) ?? [];
    return branches.map(parameterOf).find((p: string | undefined) => p !== undefined && p !== 'AWS::NoValue');
  };
  let checked = 0;
  for (const [variable, value] of Object.entries(variables)) {
    const setting = spec.settings.find((s: { var: string }) => s.var === variable);
    assert.ok(setting, `${variable} is not a setting of settings.json`);
    const { rule } = setting;
    const name = parameterOf(value);
    if (name === undefined) {
      // A fixed value: the binary's default (a duration's in seconds).
      const literal = typeof value === 'string' ? value : value['Fn::If'].slice(1).find((b: unknown) => typeof b === 'string');
      const expected = rule.kind === 'duration' ? String(setting.value / 1000) : setting.default;
      assert.equal(literal, expected, `${variable}: the template sets ${literal}, the binary's default is ${expected}`);
      checked++;
      continue;
    }
    if (name === 'ExpiryIndexTable') continue; // a table the template creates
    const parameter = template.Parameters[name];
    assert.ok(parameter, `${variable}: no parameter ${name}`);
    assert.equal(parameter.Default === undefined ? null : String(parameter.Default), setting.default,
      `${name}'s Default is not ${variable}'s default`);
    if (rule.kind === 'whole' && parameter.Type === 'Number') {
      assert.deepEqual([parameter.MinValue, parameter.MaxValue], [rule.min, rule.max], `${name}: ${variable}'s range`);
    }
    const inRange = (text: string) => {
      if (rule.off && text === 'off') return true;
      const n = Number(text);
      if (rule.kind === 'whole') return Number.isInteger(n) && n >= rule.min && n <= rule.max;
      if (rule.kind === 'duration') return Number.isInteger(n) && n * 1000 >= rule.minMs && n * 1000 <= rule.maxMs;
      if (rule.kind === 'choice') return rule.choices.includes(text);
      return true;
    };
    for (const allowed of parameter.AllowedValues ?? []) {
      assert.ok(inRange(String(allowed)), `${name} allows ${allowed}, which ${variable} refuses (${setting.accepts})`);
    }
    if (parameter.AllowedPattern !== undefined && rule.kind === 'whole') {
      const pattern = new RegExp(parameter.AllowedPattern);
      for (let n = 0; n <= rule.max + 10; n++) {
        assert.ok(!pattern.test(String(n)) || inRange(String(n)), `${name}'s pattern takes ${n}, which ${variable} refuses`);
      }
      assert.ok(pattern.test(String(rule.max)), `${name}'s pattern refuses ${variable}'s most, ${rule.max}`);
    }
    if (parameter.AllowedPattern !== undefined && rule.pattern !== undefined) {
      assert.ok(parameter.AllowedPattern.includes(rule.pattern.slice(1, -1)), `${name}'s pattern is not ${variable}'s ${rule.pattern}`);
    }
    checked++;
  }
  assert.ok(checked >= 16, `${checked} settings checked`);
});

test('the SAM template grants the construct IAM actions, for the function and the schedule', () => {
  const built = synth({ tickSeconds: undefined });
  assert.deepEqual(sorted(samActions('FunctionRole')), constructActions(built, 'SweeperRole'));
  assert.deepEqual(sorted(samActions('ScheduleRole')), constructActions(built, 'SweeperScheduleRole'));
  // And on the same resources: the index, the table, the log group, the failure queue.
  const bySid = Object.fromEntries(Object.entries(samStatements('FunctionRole')).map(([sid, s]) => [sid, s.Resource]));
  assert.match(bySid.QueryExpiryIndex['Fn::Sub'], /:table\/\$\{TableName\}\/index\/\$\{IndexName\}$/);
  assert.equal(bySid.ReadExpiryIndex, undefined);
  assert.equal(bySid.RemoveIndexEntries, undefined);
  assert.match(bySid.DeleteExpiredItems['Fn::Sub'], /:table\/\$\{TableName\}$/);
  assert.deepEqual(bySid.WriteOwnLogs, { 'Fn::GetAtt': ['Logs', 'Arn'] });
  assert.deepEqual(bySid.FailedInvocations, { 'Fn::GetAtt': ['FailedInvocations', 'Arn'] });
});

test('the SAM template sets the construct environment, timeout and concurrency, ticking or not', () => {
  const fn = template.Resources.Function.Properties;
  const cases: [Record<string, string>, Parameters<typeof synth>[0]][] = [
    [{ TableName: 'sessions' }, { tickSeconds: undefined }],
    [{ TableName: 'sessions', TickSeconds: '1', DeleteMode: 'conditional' }, { tickSeconds: 1, deleteMode: DeleteMode.CONDITIONAL }],
    [
      { TableName: 'sessions', TickSeconds: '2', IndexName: 'byExpiry', TtlAttribute: 'expiresAt', WindowAttribute: 'bucket', WindowSeconds: '300', WindowShards: '4' },
      { tickSeconds: 2, indexName: 'byExpiry', ttlAttribute: 'expiresAt', windowAttribute: 'bucket', windowSeconds: 300, windowShards: 4 },
    ],
  ];
  for (const [parameters, props] of cases) {
    const { stack, sweeper } = synth(props);
    const cfn = sweeper.function.node.defaultChild as lambda.CfnFunction;
    const expected = stack.resolve(cfn.environment).variables;
    const actual = samEnvironment(fn, parameters);
    assert.deepEqual(actual, expected, JSON.stringify(parameters));
    assert.equal(evaluate(fn.Timeout, parameters), cfn.timeout, `timeout ${JSON.stringify(parameters)}`);
    assert.equal(evaluate(fn.ReservedConcurrentExecutions, parameters), cfn.reservedConcurrentExecutions);
    assert.equal(evaluate(fn.MemorySize, parameters), cfn.memorySize);
    assert.deepEqual([fn.Runtime, fn.Architectures, fn.Handler], [cfn.runtime, cfn.architectures, cfn.handler]);
  }
  // Every TickSeconds the template allows is one the construct accepts.
  for (const tick of template.Parameters.TickSeconds.AllowedValues.filter((v: string) => v !== 'off')) {
    assert.doesNotThrow(() => synth({ tickSeconds: Number(tick) }), `TickSeconds ${tick}`);
  }
});

test('the SAM schedule is the construct schedule: every minute, as of the scheduled time, failures queued', () => {
  const { template: built } = synth({ tickSeconds: undefined });
  const [schedule] = Object.values(built.findResources('AWS::Scheduler::Schedule')) as any[];
  const sam = template.Resources.Schedule.Properties;
  for (const key of ['ScheduleExpression', 'FlexibleTimeWindow', 'State'] as const) {
    assert.deepEqual(sam[key], schedule.Properties[key], key);
  }
  assert.equal(sam.Target.Input, schedule.Properties.Target.Input);
  assert.deepEqual(sam.Target.RetryPolicy, schedule.Properties.Target.RetryPolicy);
  const [invoke] = Object.values(built.findResources('AWS::Lambda::EventInvokeConfig')) as any[];
  const config = template.Resources.Function.Properties.EventInvokeConfig;
  assert.equal(config.MaximumRetryAttempts, invoke.Properties.MaximumRetryAttempts);
  assert.equal(config.MaximumEventAgeInSeconds, invoke.Properties.MaximumEventAgeInSeconds);
  const [logs] = Object.values(built.findResources('AWS::Logs::LogGroup')) as any[];
  assert.equal(template.Resources.Logs.Properties.RetentionInDays, logs.Properties.RetentionInDays);
  // The five alarms of the construct, on the same metrics.
  const alarms = (t: Record<string, any>) =>
    Object.values(t).filter((r: any) => r.Type === 'AWS::CloudWatch::Alarm').map((r: any) => r.Properties.MetricName).sort();
  const topic = { AlarmTopicArn: 'arn:aws:sns:eu-west-1:123456789012:alarms' };
  assert.deepEqual(alarms(present(topic)), alarms(built.toJSON().Resources));
  assert.deepEqual(alarms(present({})), []);
});

// ---------------------------------------------------------------- CheckpointTable and LeaderLease

/** The construct with the checkpoint table `sweeper-checkpoints` (imported) and `props`. */
function synthCheckpointed(props: Partial<TtlSweeperProps> = {}) {
  const stack = newStack();
  const checkpoint = Checkpoint.fromTable(dynamodb.Table.fromTableName(stack, 'Checkpoints', 'sweeper-checkpoints'));
  return synth({ checkpoint, ...props }, stack);
}

test("CheckpointTable and LeaderLease: the construct's environment, grants and alarms", () => {
  const fn = template.Resources.Function.Properties;
  const checkpointed = { TableName: 'sessions', CheckpointTable: 'sweeper-checkpoints' };
  const cases: [Record<string, string>, Partial<TtlSweeperProps>][] = [
    [checkpointed, { tickSeconds: undefined }],
    [{ ...checkpointed, LeaderLease: '120' }, { tickSeconds: undefined, leaderLease: Duration.seconds(120) }],
    [{ ...checkpointed, LeaderLease: '600', TickSeconds: '1' }, { tickSeconds: 1, leaderLease: Duration.minutes(10) }],
  ];
  const alarms = (t: Record<string, any>) =>
    Object.values(t).filter((r: any) => r.Type === 'AWS::CloudWatch::Alarm').map((r: any) => r.Properties.MetricName).sort();
  const topic = { AlarmTopicArn: 'arn:aws:sns:eu-west-1:123456789012:alarms' };
  for (const [parameters, props] of cases) {
    const built = synthCheckpointed(props);
    const cfn = built.sweeper.function.node.defaultChild as lambda.CfnFunction;
    assert.deepEqual(samEnvironment(fn, parameters), built.stack.resolve(cfn.environment).variables, JSON.stringify(parameters));
    assert.deepEqual(sorted(samActions('FunctionRole', parameters)), constructActions(built, 'SweeperRole'), JSON.stringify(parameters));
    // With a lease, no silence alarm but one on a lease of another layout, as in the construct.
    assert.deepEqual(alarms(present({ ...parameters, ...topic })), alarms(built.template.toJSON().Resources), JSON.stringify(parameters));
  }
  const built = synthCheckpointed({ tickSeconds: undefined, leaderLease: Duration.seconds(120) });
  const [mismatch] = Object.values(built.template.findResources('AWS::CloudWatch::Alarm'))
    .filter((a: any) => a.Properties.MetricName === 'LeaseLayoutMismatch') as any[];
  const sam = template.Resources.LeaseLayoutMismatch.Properties;
  for (const key of ['Namespace', 'Statistic', 'Period', 'EvaluationPeriods', 'Threshold', 'ComparisonOperator', 'TreatMissingData']) {
    assert.deepEqual(sam[key], mismatch.Properties[key], key);
  }
  assert.deepEqual(sam.Dimensions, [{ Name: 'TableName', Value: { Ref: 'TableName' } }]);
  // The checkpoint statement is on that table only.
  const statement = template.Resources.FunctionRole.Properties.Policies[0].PolicyDocument.Statement
    .map((raw: any) => (raw['Fn::If'] ? evaluateStatement(raw, checkpointed) : raw))
    .find((st: any) => st?.Sid === 'Checkpoint');
  assert.match(statement.Resource['Fn::Sub'], /:table\/\$\{CheckpointTable\}$/);
  // By default neither: no CHECKPOINT_TABLE, MAX_CATCHUP or LEADER_LEASE.
  const plain = samEnvironment(fn, { TableName: 'sessions' });
  assert.deepEqual([plain.CHECKPOINT_TABLE, plain.MAX_CATCHUP, plain.LEADER_LEASE], [undefined, undefined, undefined]);
  assert.equal(template.Parameters.LeaderLease.Default, 'off');
});

test('LeaderLease: the values the template allows are leases the construct accepts; it needs CheckpointTable', () => {
  const pattern = new RegExp(template.Parameters.LeaderLease.AllowedPattern);
  for (const ok of ['off', '120', '121', '199', '200', '999', '1000', '2999', '3599', '3600']) assert.ok(pattern.test(ok), ok);
  for (const bad of ['', '0', '2', '60', '119', '0120', '2m', 'on', '3601', '4000', '86400']) assert.ok(!pattern.test(bad), bad);
  // 120 s, the least allowed, is two schedule periods, and two ticks of the longest TickSeconds or more.
  for (const tick of template.Parameters.TickSeconds.AllowedValues as string[]) {
    const props = tick === 'off' ? { tickSeconds: undefined } : { tickSeconds: Number(tick) };
    assert.doesNotThrow(() => synthCheckpointed({ ...props, leaderLease: Duration.seconds(120) }), `TickSeconds ${tick}`);
  }
  assert.throws(() => synthCheckpointed({ tickSeconds: undefined, leaderLease: Duration.seconds(119) }), /at least two schedule periods/);
  // The floor is the template's, not the binary's (5 s): two of its one-minute schedule periods,
  // since the pattern cannot depend on TickSeconds. The description and docs/deploying.md say so.
  assert.equal(template.Resources.Function.Properties.Environment.Variables.SCHEDULE_SECONDS, '60');
  assert.equal(template.Resources.Schedule.Properties.ScheduleExpression, 'rate(1 minute)');
  assert.match(template.Parameters.LeaderLease.Description, /binary takes 5 to 3600.*every minute.*cannot depend on TickSeconds/s);
  const deploying = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'deploying.md'), 'utf8');
  assert.match(deploying, /`LeaderLease` \(`off`, or whole seconds from 120 to 3600\)[^]*?floor is 120 because its schedule runs every minute/);
  const rule = template.Rules.CheckpointForLeaderLease;
  assert.deepEqual(rule.RuleCondition, { 'Fn::Not': [{ 'Fn::Equals': [{ Ref: 'LeaderLease' }, 'off'] }] });
  assert.deepEqual(rule.Assertions[0].Assert, { 'Fn::Not': [{ 'Fn::Equals': [{ Ref: 'CheckpointTable' }, ''] }] });
});

test('TableName is one table: a list is refused, several tables are left to the construct', () => {
  const pattern = new RegExp(template.Parameters.TableName.AllowedPattern);
  assert.ok(pattern.test('sessions'));
  assert.ok(!pattern.test('sessions,orders'));
  assert.match(template.Description, /several tables .* is for the CDK construct \(its tables prop\)/s);
});

// ---------------------------------------------------------------- FollowStream

const STREAM_ARN = `arn:aws:dynamodb:${env.region}:${env.account}:table/sessions/stream/2026-11-26T00:00:00.000`;
const FOLLOW = { TableName: 'sessions', FollowStream: 'true', TableStreamArn: STREAM_ARN };

/** The construct with followStream on `sessions`, imported with its stream ARN. */
function synthFollowing(props: Partial<TtlSweeperProps> = {}) {
  const stack = newStack();
  const table = dynamodb.Table.fromTableAttributes(stack, 'Streamed', { tableName: 'sessions', tableStreamArn: STREAM_ARN });
  return synth({ followStream: true, table, ...props }, stack);
}

const STREAM_CASES: [Record<string, string>, Partial<TtlSweeperProps>][] = [
  [FOLLOW, { tickSeconds: undefined }],
  [{ ...FOLLOW, TickSeconds: '1', DeleteMode: 'conditional' }, { tickSeconds: 1, deleteMode: DeleteMode.CONDITIONAL }],
  [
    { ...FOLLOW, TtlAttribute: 'expiresAt', WindowAttribute: 'bucket', WindowSeconds: '300', WindowShards: '4' },
    { tickSeconds: undefined, ttlAttribute: 'expiresAt', windowAttribute: 'bucket', windowSeconds: 300, windowShards: 4 },
  ],
];

/**
 * A construct function's environment with the expiry index table's name as the SAM template's
 * (`ref:ExpiryIndexTable`), for comparison with `samEnvironment`.
 */
function constructEnvironment(built: ReturnType<typeof synth>, fn: lambda.IFunction): Record<string, unknown> {
  const vars = { ...built.stack.resolve((fn.node.defaultChild as lambda.CfnFunction).environment).variables };
  if (vars.EXPIRY_INDEX_TABLE !== undefined) {
    assert.deepEqual(vars.EXPIRY_INDEX_TABLE, { Ref: logicalId(built.template, 'AWS::DynamoDB::Table', 'SweeperExpiryIndex') });
    vars.EXPIRY_INDEX_TABLE = 'ref:ExpiryIndexTable';
  }
  return vars;
}

test('FollowStream: nothing of the stream indexer by default; with it, its function, role, queue, logs and event', () => {
  const streamIds = [
    'ExpiryIndexTable', 'StreamFailures', 'StreamFailuresPolicy', 'StreamLogs', 'StreamFunctionRole', 'StreamFunction', 'StreamIteratorAge',
    'StreamRecordsFailed',
  ];
  const topic = { AlarmTopicArn: 'arn:aws:sns:eu-west-1:123456789012:alarms' };
  for (const id of streamIds) {
    assert.equal(present({ TableName: 'sessions', ...topic })[id], undefined, id);
    assert.ok(present({ ...FOLLOW, ...topic })[id], id);
  }
  assert.equal(present(FOLLOW).StreamIteratorAge, undefined, 'no alarm without a topic');
  assert.equal(template.Parameters.FollowStream.Default, 'false');
  assert.deepEqual(template.Parameters.TableStreamArn.Default, '');
  // The template refuses FollowStream without a stream ARN.
  const rule = template.Rules.StreamArnForFollowStream;
  assert.deepEqual(rule.RuleCondition, { 'Fn::Equals': [{ Ref: 'FollowStream' }, 'true'] });
  assert.deepEqual(rule.Assertions[0].Assert, { 'Fn::Not': [{ 'Fn::Equals': [{ Ref: 'TableStreamArn' }, ''] }] });
  assert.ok(new RegExp(template.Parameters.TableStreamArn.AllowedPattern).test(STREAM_ARN));
  // The expiry index table's name is an output with it.
  assert.deepEqual(template.Outputs.ExpiryIndexTableName, { Condition: 'FollowingStream', Value: { Ref: 'ExpiryIndexTable' } });
});

test("FollowStream: the construct's expiry index table, and IndexName refused with it as the construct refuses indexName", () => {
  const { template: built } = synthFollowing();
  const id = logicalId(built, 'AWS::DynamoDB::Table', 'SweeperExpiryIndex');
  const table = built.findResources('AWS::DynamoDB::Table')[id];
  const sam = template.Resources.ExpiryIndexTable;
  assert.equal(sam.Type, 'AWS::DynamoDB::Table');
  assert.equal(sam.Condition, 'FollowingStream');
  assert.deepEqual(sam.Properties, table.Properties);
  assert.deepEqual([sam.DeletionPolicy, sam.UpdateReplacePolicy], [table.DeletionPolicy, table.UpdateReplacePolicy]);
  assert.deepEqual(sam.Properties.KeySchema, [
    { AttributeName: 'window', KeyType: 'HASH' },
    { AttributeName: 'entry', KeyType: 'RANGE' },
  ]);
  assert.deepEqual(sam.Properties.TimeToLiveSpecification, { AttributeName: 'expires', Enabled: true });
  assert.equal(sam.Properties.BillingMode, 'PAY_PER_REQUEST');
  assert.equal(sam.DeletionPolicy, 'Delete');
  // IndexName other than its default with FollowStream stops the stack, as indexName stops synthesis.
  const rule = template.Rules.NoIndexNameWithFollowStream;
  assert.deepEqual(rule.RuleCondition, { 'Fn::Equals': [{ Ref: 'FollowStream' }, 'true'] });
  assert.deepEqual(rule.Assertions[0].Assert, { 'Fn::Equals': [{ Ref: 'IndexName' }, template.Parameters.IndexName.Default] });
  assert.match(rule.Assertions[0].AssertDescription, /the expiry index table the stack\s+creates replaces the table's GSI/);
  assert.throws(() => synthFollowing({ indexName: 'byExpiry' }), /replaces the table's GSI/);
});

test('FollowStream: the sweeper has the construct IAM actions and environment: the index table, no Query on the table', () => {
  const fn = template.Resources.Function.Properties;
  for (const [parameters, props] of STREAM_CASES) {
    const built = synthFollowing(props);
    const what = JSON.stringify(parameters);
    assert.deepEqual(sorted(samActions('FunctionRole', parameters)), constructActions(built, 'SweeperRole'), what);
    assert.deepEqual(samEnvironment(fn, parameters), constructEnvironment(built, built.sweeper.function), what);
    const s = samStatements('FunctionRole', parameters);
    assert.equal(s.QueryExpiryIndex, undefined, what);
    assert.deepEqual(s.ReadExpiryIndex.Action, ['dynamodb:DescribeTable', 'dynamodb:Query']);
    assert.deepEqual(s.ReadExpiryIndex.Resource, { 'Fn::GetAtt': ['ExpiryIndexTable', 'Arn'] });
    assert.equal(s.RemoveIndexEntries.Action, 'dynamodb:BatchWriteItem');
    assert.deepEqual(s.RemoveIndexEntries.Resource, { 'Fn::GetAtt': ['ExpiryIndexTable', 'Arn'] });
    assert.equal(s.ConfirmKeysInTable !== undefined, parameters.DeleteMode !== 'conditional', what);
    for (const st of Object.values(s)) {
      const actions = [st.Action].flat();
      assert.ok(!actions.includes('dynamodb:Query') || st.Sid === 'ReadExpiryIndex', JSON.stringify(st));
    }
    const env = samEnvironment(fn, parameters);
    assert.equal(env.INDEX_NAME, undefined);
    assert.equal(env.EXPIRY_INDEX_TABLE, 'ref:ExpiryIndexTable');
  }
});

test('FollowStream: the stream indexer has the construct IAM actions, environment, timeout and memory', () => {
  const built = synthFollowing();
  assert.deepEqual(sorted(samActions('StreamFunctionRole')), constructActions(built, 'SweeperStreamRole'));
  const policy = template.Resources.StreamFunctionRole.Properties.Policies[0].PolicyDocument.Statement;
  const bySid = Object.fromEntries(policy.map((s: any) => [s.Sid, s.Resource]));
  assert.match(bySid.DescribeTable['Fn::Sub'], /:table\/\$\{TableName\}$/);
  assert.deepEqual(samActions('StreamFunctionRole').DescribeTable, ['dynamodb:DescribeTable']);
  assert.deepEqual(bySid.WriteIndexEntries, { 'Fn::GetAtt': ['ExpiryIndexTable', 'Arn'] });
  assert.deepEqual(samActions('StreamFunctionRole').WriteIndexEntries, ['dynamodb:DescribeTable', 'dynamodb:BatchWriteItem', 'dynamodb:PutItem']);
  // Of the table, the indexer deletes items written already expired, and never puts, updates or
  // reads one (the template has no expiry events, whose reads the construct would grant).
  assert.match(bySid.DeleteExpiredItems['Fn::Sub'], /:table\/\$\{TableName\}$/);
  assert.deepEqual(samActions('StreamFunctionRole').DeleteExpiredItems, ['dynamodb:DeleteItem']);
  // WriteIndexEntries is on the index table alone (above): its PutItem is the writers' mark.
  const { WriteIndexEntries: _index, ...ofTable } = samActions('StreamFunctionRole');
  const actions = Object.values(ofTable).flat();
  for (const forbidden of ['UpdateItem', 'PutItem', 'BatchGetItem', 'GetItem', 'Query', 'Scan']) {
    assert.ok(!actions.includes(`dynamodb:${forbidden}`), forbidden);
  }
  assert.deepEqual(actions.filter((a) => a === 'dynamodb:BatchWriteItem'), [], 'on the expiry index table only');
  // The stream ARN's label, on TableName's stream.
  assert.match(bySid.ReadTableStream['Fn::Sub'][0], /:table\/\$\{TableName\}\/stream\/\$\{Label\}$/);
  assert.deepEqual(bySid.ReadTableStream['Fn::Sub'][1].Label, { 'Fn::Select': [3, { 'Fn::Split': ['/', { Ref: 'TableStreamArn' }] }] });
  assert.equal(STREAM_ARN.split('/')[3], '2026-11-26T00:00:00.000');
  assert.deepEqual(bySid.WriteOwnLogs, { 'Fn::GetAtt': ['StreamLogs', 'Arn'] });
  assert.deepEqual(bySid.StreamFailures, { 'Fn::GetAtt': ['StreamFailures', 'Arn'] });

  const fn = template.Resources.StreamFunction.Properties;
  for (const [parameters, props] of STREAM_CASES) {
    const synthesized = synthFollowing(props);
    const cfn = synthesized.sweeper.streamFunction!.node.defaultChild as lambda.CfnFunction;
    const actual = samEnvironment(fn, parameters);
    assert.deepEqual(actual, constructEnvironment(synthesized, synthesized.sweeper.streamFunction!), JSON.stringify(parameters));
    assert.equal(actual.EXPIRY_INDEX_TABLE, 'ref:ExpiryIndexTable');
    assert.equal(fn.Timeout, cfn.timeout);
    assert.equal(fn.MemorySize, cfn.memorySize);
    assert.equal(fn.ReservedConcurrentExecutions, cfn.reservedConcurrentExecutions);
    assert.deepEqual([fn.Runtime, fn.Architectures, fn.Handler], [cfn.runtime, cfn.architectures, cfn.handler]);
    assert.deepEqual(fn.CodeUri, template.Resources.Function.Properties.CodeUri, 'the same code');
    // The log format and system log level (the platform's lines left out) as the construct's.
    const logging = synthesized.stack.resolve(cfn.loggingConfig);
    assert.deepEqual([fn.LoggingConfig.LogFormat, fn.LoggingConfig.SystemLogLevel], [logging.logFormat, logging.systemLogLevel]);
    assert.equal(logging.systemLogLevel, 'WARN');
  }
  // The queue and log group as the construct's.
  const { template: built2 } = synthFollowing();
  const queue = built2.findResources('AWS::SQS::Queue')[logicalId(built2, 'AWS::SQS::Queue', 'SweeperStreamFailures')];
  assert.deepEqual(template.Resources.StreamFailures.Properties, queue.Properties);
  const logs = built2.findResources('AWS::Logs::LogGroup')[logicalId(built2, 'AWS::Logs::LogGroup', 'SweeperStreamLogs')];
  assert.equal(template.Resources.StreamLogs.Properties.RetentionInDays, logs.Properties.RetentionInDays);
});

test('FollowStream with LeaderLease: DELETE_WHEN_INDEXED=false on the stream indexer, as the construct sets it; unset without a lease', () => {
  const stream = template.Resources.StreamFunction.Properties;
  const fn = template.Resources.Function.Properties;
  const leased = { ...FOLLOW, CheckpointTable: 'sweeper-checkpoints', LeaderLease: '120' };
  const stack = newStack();
  const table = dynamodb.Table.fromTableAttributes(stack, 'Streamed', { tableName: 'sessions', tableStreamArn: STREAM_ARN });
  const checkpoint = Checkpoint.fromTable(dynamodb.Table.fromTableName(stack, 'Checkpoints', 'sweeper-checkpoints'));
  const built = synth({ followStream: true, table, checkpoint, tickSeconds: undefined, leaderLease: Duration.seconds(120) }, stack);
  const env = samEnvironment(stream, leased);
  assert.deepEqual(env, constructEnvironment(built, built.sweeper.streamFunction!));
  assert.equal(env.DELETE_WHEN_INDEXED, 'false');
  assert.deepEqual(samEnvironment(fn, leased), constructEnvironment(built, built.sweeper.function));
  assert.deepEqual(sorted(samActions('StreamFunctionRole', leased)), constructActions(built, 'SweeperStreamRole'));
  assert.deepEqual(sorted(samActions('FunctionRole', leased)), constructActions(built, 'SweeperRole'));
  // Without a lease, the function's default (true): not set.
  for (const parameters of [FOLLOW, { ...FOLLOW, CheckpointTable: 'sweeper-checkpoints' }]) {
    assert.equal(samEnvironment(stream, parameters).DELETE_WHEN_INDEXED, undefined, JSON.stringify(parameters));
  }
  assert.equal(samEnvironment(fn, leased).DELETE_WHEN_INDEXED, undefined);
});

test("FollowStream: the DynamoDB event is the construct's event source mapping, filter included", () => {
  const event = template.Resources.StreamFunction.Properties.Events.TableStream;
  assert.equal(event.Type, 'DynamoDB');
  const sam = event.Properties;
  for (const [parameters, props] of STREAM_CASES) {
    const { template: built } = synthFollowing(props);
    const [mapping] = Object.values(built.findResources('AWS::Lambda::EventSourceMapping')) as any[];
    const m = mapping.Properties;
    assert.equal(evaluate(sam.Stream, parameters), m.EventSourceArn);
    for (const key of [
      'StartingPosition', 'BatchSize', 'MaximumBatchingWindowInSeconds', 'FunctionResponseTypes', 'BisectBatchOnFunctionError',
      'MaximumRetryAttempts', 'MaximumRecordAgeInSeconds',
    ]) {
      assert.deepEqual(sam[key], m[key], key);
    }
    assert.deepEqual(sam.DestinationConfig, { OnFailure: { Destination: { 'Fn::GetAtt': ['StreamFailures', 'Arn'] } } });
    assert.deepEqual(Object.keys(m.DestinationConfig.OnFailure), ['Destination']);
    const patterns = (filters: any[], read: (p: unknown) => string) => filters.map((f) => JSON.parse(read(f.Pattern)));
    assert.deepEqual(
      patterns(sam.FilterCriteria.Filters, (p) => evaluate(p, parameters) as string),
      patterns(m.FilterCriteria.Filters, (p) => p as string),
      JSON.stringify(parameters),
    );
  }
});

// The alarms' descriptions, each with its link to docs/alarms.md: test/alarms-doc.test.ts.
test('FollowStream with an alarm topic: the construct alarms, IteratorAge included, with the same threshold', () => {
  const { template: built } = synthFollowing({ tickSeconds: undefined });
  const topic = { ...FOLLOW, AlarmTopicArn: 'arn:aws:sns:eu-west-1:123456789012:alarms' };
  const alarms = (t: Record<string, any>) =>
    Object.values(t).filter((r: any) => r.Type === 'AWS::CloudWatch::Alarm').map((r: any) => r.Properties.MetricName).sort();
  assert.deepEqual(alarms(present(topic)), alarms(built.toJSON().Resources));
  const [iteratorAge] = Object.values(built.findResources('AWS::CloudWatch::Alarm')).filter((a: any) => a.Properties.MetricName === 'IteratorAge') as any[];
  const sam = template.Resources.StreamIteratorAge.Properties;
  for (const key of ['Namespace', 'Statistic', 'Period', 'EvaluationPeriods', 'DatapointsToAlarm', 'Threshold', 'ComparisonOperator', 'TreatMissingData']) {
    assert.deepEqual(sam[key], iteratorAge.Properties[key], key);
  }
  assert.deepEqual(sam.Dimensions, [{ Name: 'FunctionName', Value: { Ref: 'StreamFunction' } }]);
  const [failed] = Object.values(built.findResources('AWS::CloudWatch::Alarm')).filter((a: any) => a.Properties.MetricName === 'ApproximateNumberOfMessagesVisible') as any[];
  const samFailed = template.Resources.StreamRecordsFailed.Properties;
  for (const key of ['Namespace', 'Statistic', 'Period', 'EvaluationPeriods', 'DatapointsToAlarm', 'Threshold', 'ComparisonOperator', 'TreatMissingData']) {
    assert.deepEqual(samFailed[key], failed.Properties[key], key);
  }
});
