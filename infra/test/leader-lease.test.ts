// The leader lease (`leaderLease` → `LEADER_LEASE`): whole seconds, at least two ticks (or two
// schedule periods), only with a checkpoint, which holds the lease; no silence alarm with it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cdk from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { Checkpoint, SweepSchedule, type TtlSweeperProps } from '../src';
import { env, newStack, synth } from './support';

/** A checkpoint table imported by ARN, as a global table replicated elsewhere would be. */
function withCheckpoint(props: Partial<TtlSweeperProps>) {
  const stack = newStack();
  const global = dynamodb.Table.fromTableArn(stack, 'Global', `arn:aws:dynamodb:${env.region}:${env.account}:table/sweeper-checkpoints`);
  return synth({ checkpoint: Checkpoint.fromTable(global), ...props }, stack);
}

const variables = (built: ReturnType<typeof synth>, fn = built.sweeper.function) =>
  built.stack.resolve((fn.node.defaultChild as lambda.CfnFunction).environment).variables as Record<string, string>;

const invalid = (props: Partial<TtlSweeperProps>, message: RegExp, build = withCheckpoint) =>
  assert.throws(() => build(props), (e: Error) => {
    assert.match(e.message, /^TtlSweeper Test\/Sweeper: invalid props:/);
    assert.match(e.message, message);
    return true;
  });

test('no lease by default: no LEADER_LEASE', () => {
  const built = withCheckpoint({});
  assert.equal(variables(built).LEADER_LEASE, undefined);
  assert.equal(built.sweeper.leaderLeaseSeconds, undefined);
});

test('a lease becomes LEADER_LEASE in whole seconds, beside the checkpoint table that holds it', () => {
  const ticking = withCheckpoint({ tickSeconds: 1, leaderLease: cdk.Duration.seconds(5) });
  assert.equal(variables(ticking).LEADER_LEASE, '5');
  assert.equal(variables(ticking).CHECKPOINT_TABLE, 'sweeper-checkpoints');
  assert.equal(ticking.sweeper.leaderLeaseSeconds, 5);
  const once = withCheckpoint({ tickSeconds: undefined, leaderLease: cdk.Duration.minutes(2) });
  assert.equal(variables(once).LEADER_LEASE, '120');
  const newTable = synth({ checkpoint: Checkpoint.newTable(), leaderLease: cdk.Duration.seconds(30), tickSeconds: 5 });
  assert.equal(variables(newTable).LEADER_LEASE, '30');
});

test('a lease shorter than two ticks, or two schedule periods, is refused naming the props', () => {
  invalid({ tickSeconds: 5, leaderLease: cdk.Duration.seconds(9) },
    /leaderLease \(9 s\) must be at least two ticks: 2 × tickSeconds \(5\) = 10 s/);
  assert.doesNotThrow(() => withCheckpoint({ tickSeconds: 5, leaderLease: cdk.Duration.seconds(10) }));
  invalid({ tickSeconds: undefined, leaderLease: cdk.Duration.seconds(119) },
    /leaderLease \(119 s\) must be at least two schedule periods: 2 × the schedule's period \(60 s\) = 120 s/);
  invalid({ tickSeconds: undefined, schedule: SweepSchedule.rate(cdk.Duration.minutes(5)), leaderLease: cdk.Duration.minutes(9) },
    /leaderLease \(540 s\) must be at least two schedule periods: 2 × the schedule's period \(300 s\) = 600 s/);
  assert.doesNotThrow(() => withCheckpoint({ tickSeconds: undefined, schedule: SweepSchedule.rate(cdk.Duration.minutes(5)), leaderLease: cdk.Duration.minutes(10) }));
  invalid({ tickSeconds: 1, leaderLease: cdk.Duration.millis(2500) }, /leaderLease must be whole seconds, got 2 seconds 500 millis/);
  // The binary's range, LEADER_LEASE 5 to 3600 seconds.
  invalid({ tickSeconds: 1, leaderLease: cdk.Duration.seconds(4) }, /leaderLease must be from 5 s to 3600 s, got 4 s/);
  invalid({ tickSeconds: 1, leaderLease: cdk.Duration.seconds(3601) }, /leaderLease must be from 5 s to 3600 s, got 3601 s/);
  const lease = new cdk.CfnParameter(newStack(), 'Lease', { type: 'Number' });
  invalid({ leaderLease: cdk.Duration.seconds(lease.valueAsNumber) }, /leaderLease must be a literal duration, not a token/);
});

test('a lease without a checkpoint is refused', () => {
  invalid({ leaderLease: cdk.Duration.minutes(5) },
    /leaderLease needs a checkpoint, which holds the lease: set checkpoint \(for sweepers in several Regions, Checkpoint.fromTable of a global table replicated in each of them\) or drop leaderLease/,
    (props) => synth(props));
});

test('with a lease, no silence alarm (a standby sweeper reports no sweeps) but one on a lease of another layout; the other alarms stay', () => {
  const alarms = (built: ReturnType<typeof synth>) =>
    Object.values(built.template.findResources('AWS::CloudWatch::Alarm')).map((a: any) => a.Properties.MetricName).sort();
  assert.deepEqual(alarms(withCheckpoint({})), ['Errors', 'ItemsFailed', 'ItemsLeft', 'MaxExpiryLagSeconds', 'WindowsSwept']);
  assert.deepEqual(alarms(withCheckpoint({ leaderLease: cdk.Duration.minutes(1) })),
    ['Errors', 'ItemsFailed', 'ItemsLeft', 'LeaseLayoutMismatch', 'MaxExpiryLagSeconds']);
});

test('the lease layout alarm fires on the first sweep that stood by beside a lease of another layout', () => {
  const built = withCheckpoint({ leaderLease: cdk.Duration.minutes(1) });
  const [alarm] = Object.values(built.template.findResources('AWS::CloudWatch::Alarm', {
    Properties: { MetricName: 'LeaseLayoutMismatch' },
  })) as any[];
  assert.ok(alarm, 'a LeaseLayoutMismatch alarm');
  const p = alarm.Properties;
  assert.equal(p.Namespace, 'TtlSweeper');
  assert.deepEqual(p.Dimensions, [{ Name: 'TableName', Value: built.stack.resolve(built.sweeper.table.tableName) }]);
  assert.equal(p.Statistic, 'Sum');
  assert.equal(p.Period, 60);
  assert.equal(p.Threshold, 0);
  assert.equal(p.ComparisonOperator, 'GreaterThanThreshold');
  assert.equal(p.EvaluationPeriods, 1);
  assert.equal(p.TreatMissingData, 'notBreaching');
  assert.match(p.AlarmDescription, /another layout/);
  assert.ok(p.AlarmActions?.length, 'it notifies the alarm topic');
  assert.equal(built.sweeper.metricLeaseLayoutMismatch().metricName, 'LeaseLayoutMismatch');
  assert.equal(built.sweeper.metricLeaseReleased().metricName, 'LeaseReleased');
});

test('every function gets the lease: several sweepers, or several tables', () => {
  const split = withCheckpoint({ windowShards: 4, sweepers: 2, leaderLease: cdk.Duration.seconds(20) });
  assert.deepEqual(split.sweeper.functions.map((fn) => variables(split, fn).LEADER_LEASE), ['20', '20']);
  const stack = newStack();
  const tables = ['orders', 'carts'].map((name) => ({ table: dynamodb.Table.fromTableName(stack, name, name) }));
  const global = dynamodb.Table.fromTableName(stack, 'Global', 'sweeper-checkpoints');
  const many = synth({ table: undefined, tables, checkpoint: Checkpoint.fromTable(global), leaderLease: cdk.Duration.seconds(20) }, stack);
  assert.equal(variables(many).LEADER_LEASE, '20');
  assert.equal(variables(many).CHECKPOINT_TABLE, 'sweeper-checkpoints');
});
