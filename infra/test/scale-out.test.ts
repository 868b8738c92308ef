// Several functions splitting the table's shards (`sweepers`): one SHARD_RANGE each, contiguous,
// with no gap and no overlap; each with its own log group, role and schedule; IAM as narrow as
// for one function; one function keeps the template of a single sweeper.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cdk from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { Checkpoint } from '../src';
import { nagViolations, statements, synth } from './support';

const resolve = (stack: cdk.Stack, v: unknown) => JSON.stringify(stack.resolve(v));

/** The Lambda functions of the template (the on-failure and log-retention helpers have none). */
function functions(template: Template): [string, any][] {
  return Object.entries(template.findResources('AWS::Lambda::Function'));
}

function roleOf(fn: any): string {
  return fn.Properties.Role['Fn::GetAtt'][0];
}

test('three sweepers over 12 shards: functions for 0-3, 4-7 and 8-11, otherwise alike', () => {
  const { sweeper, template } = synth({ windowShards: 12, sweepers: 3 });
  assert.deepEqual(sweeper.shardRanges, ['0-3', '4-7', '8-11']);
  assert.equal(sweeper.functions.length, 3);
  assert.equal(sweeper.function, sweeper.functions[0]);
  const fns = functions(template);
  assert.equal(fns.length, 3);
  const envs = fns.map(([, f]) => f.Properties.Environment.Variables);
  assert.deepEqual(envs.map((e) => e.SHARD_RANGE).sort(), ['0-3', '4-7', '8-11']);
  // Everything but the range is the same.
  const rest = envs.map(({ SHARD_RANGE: _, ...other }) => JSON.stringify(other));
  assert.equal(new Set(rest).size, 1, rest.join('\n'));
  assert.equal(envs[0].WINDOW_SHARDS, '12');
  // Each function has its own role and log group.
  assert.equal(new Set(fns.map(([, f]) => roleOf(f))).size, 3);
  assert.equal(new Set(fns.map(([, f]) => JSON.stringify(f.Properties.LoggingConfig.LogGroup))).size, 3);
  template.resourceCountIs('AWS::Logs::LogGroup', 3);
  template.resourceCountIs('AWS::IAM::Role', 4); // three functions, one schedule role
  for (const [, f] of fns) {
    assert.equal(f.Properties.ReservedConcurrentExecutions, 2);
  }
});

test('each function has its own schedule, and the schedule role may invoke exactly these functions', () => {
  const { stack, sweeper, template } = synth({ windowShards: 12, sweepers: 3 });
  template.resourceCountIs('AWS::Scheduler::Schedule', 3);
  const schedules = Object.values(template.findResources('AWS::Scheduler::Schedule')) as any[];
  const targets = schedules.map((s) => JSON.stringify(s.Properties.Target.Arn)).sort();
  const fnArns = Object.keys(template.findResources('AWS::Lambda::Function'))
    .map((id) => JSON.stringify({ 'Fn::GetAtt': [id, 'Arn'] }))
    .sort();
  assert.deepEqual(targets, fnArns);
  for (const s of schedules) {
    assert.equal(s.Properties.ScheduleExpression, 'rate(1 minute)');
    assert.equal(s.Properties.FlexibleTimeWindow.Mode, 'OFF');
  }
  assert.equal(sweeper.schedules.length, 3);
  const roleId = stack.getLogicalId(sweeper.scheduleRole.node.defaultChild as cdk.CfnElement);
  const s = statements(template, roleId);
  assert.deepEqual(s.InvokeSweeper.Action, 'lambda:InvokeFunction');
  assert.deepEqual((s.InvokeSweeper.Resource as unknown[]).map((r) => JSON.stringify(r)).sort(), fnArns);
  assert.match(resolve(stack, s.DeadLetter.Resource), /FailedInvocations/);
});

test('each function role: the index, the table, its own log group, the shared checkpoint table; no wildcard', () => {
  const { stack, template } = synth({ windowShards: 12, sweepers: 3, checkpoint: Checkpoint.newTable() });
  const fns = functions(template);
  const logGroups = new Set<string>();
  for (const [, f] of fns) {
    const s = statements(template, roleOf(f));
    assert.deepEqual(
      Object.keys(s).filter((k) => !k.startsWith('[')).sort(),
      ['Checkpoint', 'ConfirmKeysInTable', 'DeleteExpiredItems', 'QueryExpiryIndex', 'WriteOwnLogs'],
    );
    assert.match(resolve(stack, s.QueryExpiryIndex.Resource), /table\/sessions\/index\/expirationWindowIndex"$/);
    assert.match(resolve(stack, s.Checkpoint.Resource), /CheckpointTable/);
    // The log group it writes to is the one it logs to.
    assert.equal(JSON.stringify(s.WriteOwnLogs.Resource), JSON.stringify({ 'Fn::GetAtt': [f.Properties.LoggingConfig.LogGroup.Ref, 'Arn'] }));
    logGroups.add(JSON.stringify(s.WriteOwnLogs.Resource));
    assert.deepEqual(
      Object.keys(f.Properties.Environment.Variables).filter((k) => k.startsWith('CHECKPOINT') || k === 'SHARD_RANGE').sort(),
      ['CHECKPOINT_TABLE', 'SHARD_RANGE'],
    );
  }
  assert.equal(logGroups.size, 3);
  template.resourceCountIs('AWS::DynamoDB::Table', 1);
  for (const policy of Object.values(template.findResources('AWS::IAM::Policy'))) {
    for (const st of (policy as any).Properties.PolicyDocument.Statement) {
      for (const a of [st.Action].flat()) assert.ok(!String(a).includes('*'), `wildcard action ${a}`);
      assert.ok(!JSON.stringify(st.Resource).includes('*'), `wildcard resource ${JSON.stringify(st.Resource)}`);
    }
  }
});

test('shard ranges are contiguous, cover every shard once and differ in size by at most one', () => {
  for (const [shards, sweepers] of [[12, 3], [10, 3], [7, 7], [16, 5], [1000, 50], [2, 2], [9, 4]]) {
    const { sweeper } = synth({ windowShards: shards, sweepers });
    const ranges = sweeper.shardRanges.map((r) => r.split('-').map(Number));
    assert.equal(ranges.length, sweepers);
    let next = 0;
    for (const [first, last] of ranges) {
      assert.equal(first, next, `${shards}/${sweepers}: ${sweeper.shardRanges}`);
      assert.ok(last >= first);
      next = last + 1;
    }
    assert.equal(next, shards, `${shards}/${sweepers}: ${sweeper.shardRanges}`);
    const sizes = ranges.map(([a, b]) => b - a + 1);
    assert.ok(Math.max(...sizes) - Math.min(...sizes) <= 1, `${sizes}`);
  }
});

test('one sweeper sets no SHARD_RANGE and keeps the construct ids of a single function', () => {
  for (const sweepers of [undefined, 1]) {
    const { sweeper, template } = synth({ windowShards: 12, sweepers });
    assert.deepEqual(sweeper.shardRanges, ['all']);
    const fns = functions(template);
    assert.equal(fns.length, 1);
    assert.equal(fns[0][1].Properties.Environment.Variables.SHARD_RANGE, undefined);
    assert.match(fns[0][0], /^SweeperFunction[0-9A-F]{8}$/);
  }
  // With several, the first function keeps its id: going from one to several updates it in place.
  const { template } = synth({ windowShards: 12, sweepers: 2 });
  const ids = functions(template).map(([id]) => id).sort();
  assert.match(ids[0], /^SweeperFunction[0-9A-F]{8}$/);
  assert.match(ids[1], /^SweeperSweeper2Function[0-9A-F]{8}$/);
});

test('each of several functions has an error alarm and a not-invoked alarm; the table alarms stay single', () => {
  const { sweeper, template } = synth({ windowShards: 12, sweepers: 3 });
  const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')) as any[];
  // Errors and NotInvoked per function (3 + 3), ItemsFailed, ExpiryLag, ItemsLeft, SweeperSilent.
  assert.equal(alarms.length, 10);
  assert.equal(sweeper.alarms.length, 10);
  const perFunction = (metric: string) => alarms.filter((a) => a.Properties.MetricName === metric && a.Properties.Namespace === 'AWS/Lambda');
  assert.equal(perFunction('Errors').length, 3);
  const notInvoked = perFunction('Invocations');
  assert.equal(notInvoked.length, 3);
  for (const a of notInvoked) {
    assert.equal(a.Properties.ComparisonOperator, 'LessThanThreshold');
    assert.equal(a.Properties.TreatMissingData, 'breaching');
    assert.equal(a.Properties.Period, 600);
  }
  assert.equal(new Set(notInvoked.map((a) => JSON.stringify(a.Properties.Dimensions))).size, 3);
  for (const a of alarms) assert.equal(a.Properties.AlarmActions.length, 1);
  template.hasResourceProperties('AWS::CloudWatch::Alarm', {
    AlarmDescription: Match.stringLikeRegexp('shards 4-7 has not been invoked for 10 minutes'),
  });
});

test('sweepers is checked against the shard count', () => {
  const invalid = (props: Parameters<typeof synth>[0], message: RegExp) =>
    assert.throws(() => synth(props), (e: Error) => {
      assert.match(e.message, /^TtlSweeper Test\/Sweeper: invalid props:/);
      assert.match(e.message, message);
      return true;
    });
  invalid({ windowShards: 12, sweepers: 0 }, /sweepers must be a whole number from 1 to 12 .*got 0/);
  invalid({ windowShards: 12, sweepers: 13 }, /sweepers must be a whole number from 1 to 12 \(each sweeper reads at least one of the windowShards=12 shards; at most 50\), got 13/);
  invalid({ windowShards: 1000, sweepers: 51 }, /sweepers must be a whole number from 1 to 50/);
  invalid({ sweepers: 2 }, /sweepers must be a whole number from 1 to 1 /);
  invalid({ windowShards: 12, sweepers: 2.5 }, /sweepers must be a whole number/);
  invalid({ sweepers: cdk.Token.asNumber({ Ref: 'N' }) }, /sweepers must be a number known at synthesis/);
});

test('cdk-nag AwsSolutions finds nothing unacknowledged with several sweepers', () => {
  assert.deepEqual(nagViolations(synth({ windowShards: 12, sweepers: 3 }).stack), []);
  assert.deepEqual(nagViolations(synth({ windowShards: 8, sweepers: 8, checkpoint: Checkpoint.newTable(), tickSeconds: undefined }).stack), []);
});
