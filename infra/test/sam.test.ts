// The SAM template (sam/template.yaml) against the construct: the same IAM actions on the same
// kinds of resource for the function and the schedule, the same environment for the same
// settings, and the same timeout and reserved concurrency with and without tick mode.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { parse, type CollectionTag, type ScalarTag } from 'yaml';
import { DeleteMode } from '../src';
import { logicalId, statements, synth } from './support';

/** CloudFormation's short forms, read as their long forms (`!Ref x` → `{ Ref: x }`). */
const cfnTags: (ScalarTag | CollectionTag)[] = ['Ref', 'Sub', 'GetAtt', 'If', 'Equals', 'Not', 'Join', 'Select', 'Split']
  .flatMap((name) => {
    const long = name === 'Ref' ? 'Ref' : `Fn::${name}`;
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

/**
 * The value of `v` for `parameters` (each parameter's default unless given): `Ref` to a parameter
 * and `Fn::If` on the template's conditions are evaluated; anything else must be a plain value.
 */
function evaluate(v: any, parameters: Record<string, string>): unknown {
  const param = (name: string) => parameters[name] ?? template.Parameters[name]?.Default;
  const condition = (name: string): boolean => {
    const c = template.Conditions[name];
    const eq = (e: any) => String(evaluate(e['Fn::Equals'][0], parameters)) === String(evaluate(e['Fn::Equals'][1], parameters));
    if (c['Fn::Not']) return !eq(c['Fn::Not'][0]);
    return eq(c);
  };
  if (v && typeof v === 'object' && 'Ref' in v) {
    const value = param(v.Ref);
    assert.notEqual(value, undefined, `no value for parameter ${v.Ref}`);
    return String(value);
  }
  if (v && typeof v === 'object' && 'Fn::If' in v) {
    const [name, yes, no] = v['Fn::If'];
    return evaluate(condition(name) ? yes : no, parameters);
  }
  assert.ok(typeof v !== 'object', `cannot evaluate ${JSON.stringify(v)}`);
  return typeof v === 'number' ? v : String(v);
}

/** A statement under `Fn::If`: the branch the condition picks, `undefined` for `AWS::NoValue`. */
function evaluateStatement(v: any, parameters: Record<string, string>): unknown {
  const [name, yes, no] = v['Fn::If'];
  const picked = evaluate({ 'Fn::If': [name, 'yes', 'no'] }, parameters) === 'yes' ? yes : no;
  return picked && typeof picked === 'object' && picked.Ref === 'AWS::NoValue' ? undefined : picked;
}

/** Actions by Sid of the inline policies of a role of the SAM template. */
function samActions(role: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const p of template.Resources[role].Properties.Policies) {
    for (const raw of p.PolicyDocument.Statement) {
      // A statement under `Fn::If` on a condition, with the parameters' defaults.
      const s = raw['Fn::If'] ? (evaluateStatement(raw, {}) as any) : raw;
      if (s) out[s.Sid] = [s.Action].flat();
    }
  }
  return out;
}

/** Actions of a construct's role, as sorted sets (the on-failure destination's has no Sid). */
function constructActions(synthesized: ReturnType<typeof synth>, rolePrefix: string): string[][] {
  const s = statements(synthesized.template, logicalId(synthesized.template, 'AWS::IAM::Role', rolePrefix));
  return Object.values(s).map((st) => [st.Action].flat().map(String).sort()).sort();
}

const sorted = (byId: Record<string, string[]>) => Object.values(byId).map((a) => [...a].sort()).sort();

test('the SAM template grants the construct IAM actions, for the function and the schedule', () => {
  const built = synth({ tickSeconds: undefined });
  assert.deepEqual(sorted(samActions('FunctionRole')), constructActions(built, 'SweeperRole'));
  assert.deepEqual(sorted(samActions('ScheduleRole')), constructActions(built, 'SweeperScheduleRole'));
  // And on the same resources: the index, the table, the log group, the failure queue.
  const policy = template.Resources.FunctionRole.Properties.Policies[0].PolicyDocument.Statement;
  const bySid = Object.fromEntries(policy.map((s: any) => [s.Sid, s.Resource]));
  assert.match(bySid.QueryExpiryIndex['Fn::Sub'], /:table\/\$\{TableName\}\/index\/\$\{IndexName\}$/);
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
    const actual = Object.fromEntries(
      Object.entries(fn.Environment.Variables).map(([k, v]) => [k, evaluate(v, parameters)]),
    );
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
  // The four alarms of the construct, on the same metrics.
  const alarms = (t: Record<string, any>) =>
    Object.values(t).filter((r: any) => r.Type === 'AWS::CloudWatch::Alarm').map((r: any) => r.Properties.MetricName).sort();
  assert.deepEqual(alarms(template.Resources), alarms(built.toJSON().Resources));
});
