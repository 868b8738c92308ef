// The construct's conveniences and its ties to the binary: typed metric methods for every metric
// the function emits, the expiration index helper, customer managed keys, log removal, alarms,
// topic key and dashboard that can be turned off, and defaults equal to the binary's settings.json.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as cdk from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { Checkpoint, TtlSweeper } from '../src';
import { assetDir, env, expiryGsi, logicalId, nagViolations, newStack, statements, synth } from './support';

const repo = path.resolve(__dirname, '..', '..');
const rust = (file: string) => fs.readFileSync(path.join(repo, file), 'utf8');

/**
 * The sweep metrics' EMF names: the first column of docs/operations.md's metrics table, which a
 * test of the binary keeps equal to its one table of the report's metrics (SWEEP_METRICS), in a
 * record where each is written (the Lambda's rare ones, lease and write conflicts, included).
 */
function sweepMetricNames(): string[] {
  const doc = fs.readFileSync(path.join(repo, 'docs', 'operations.md'), 'utf8');
  const block = doc.slice(doc.indexOf('<!-- metrics'), doc.indexOf('<!-- /metrics -->'));
  return [...block.matchAll(/^\| `([A-Za-z0-9]+)` \| [^|]*`ttl_sweeper_/gm)].map((m) => m[1]);
}

// ---------------------------------------------------------------- metrics

test('a typed metric method for every metric the function emits, in its namespace and dimensions', () => {
  const telemetry = rust('src/telemetry.rs');
  const names = sweepMetricNames();
  // The list is read from the generated table, not assumed: eighteen sweep metrics today.
  assert.ok(names.includes('ItemsDeleted') && names.includes('MaxExpiryLagSeconds') && names.length >= 18, names.join());
  const { stack, sweeper } = synth({ metricsNamespace: 'Sweepers/Sessions' });
  for (const name of names) {
    const method = (sweeper as any)[`metric${name}`];
    assert.equal(typeof method, 'function', `TtlSweeper has no metric${name}()`);
    const m: cloudwatch.Metric = method.call(sweeper);
    assert.equal(m.metricName, name);
    assert.equal(m.namespace, 'Sweepers/Sessions');
    assert.deepEqual(stack.resolve(m.dimensions), { TableName: 'sessions' });
    assert.equal(m.statistic, name.endsWith('Seconds') ? 'Maximum' : 'Sum', name);
    assert.equal(m.period.toSeconds(), 60);
  }
  // Options pass through.
  assert.equal(sweeper.metricItemsDeleted({ period: cdk.Duration.minutes(5) }).period.toSeconds(), 300);
  assert.equal(sweeper.metricExpiryLag().metricName, 'MaxExpiryLagSeconds');
  // The cold start record's metric, with its own dimensions.
  assert.match(telemetry, /"Metrics": \[\{"Name": "ColdStart", "Unit": "Count"\}\]/);
  assert.match(telemetry, /"Dimensions": \[\["function_name", "service"\]\]/);
  const cold = sweeper.metricColdStarts();
  assert.equal(cold.metricName, 'ColdStart');
  assert.deepEqual(Object.keys(stack.resolve(cold.dimensions)).sort(), ['function_name', 'service']);
  assert.equal(stack.resolve(cold.dimensions).service, rust('src/telemetry/powertools.rs').match(/DEFAULT_SERVICE: &str = "([^"]+)"/)![1]);
  // Alarms read the same metrics as the typed methods.
  const { template } = synth();
  template.hasResourceProperties('AWS::CloudWatch::Alarm', { MetricName: 'ItemsFailed', Statistic: 'Sum' });
});

// ---------------------------------------------------------------- the index

test('addExpirationIndex adds the KEYS_ONLY (window, ttl) index to a Table and to a TableV2', () => {
  const stack = newStack();
  const table = new dynamodb.Table(stack, 'Sessions', { partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING } });
  assert.equal(TtlSweeper.addExpirationIndex(table), 'expirationWindowIndex');
  const v2 = new dynamodb.TableV2(stack, 'Orders', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING } });
  assert.equal(TtlSweeper.addExpirationIndex(v2, { indexName: 'byExpiry', windowAttribute: 'bucket', ttlAttribute: 'expiresAt' }), 'byExpiry');
  new TtlSweeper(stack, 'Sweeper', { table, code: lambda.Code.fromAsset(assetDir) });
  const template = Template.fromStack(stack);
  template.hasResourceProperties('AWS::DynamoDB::Table', {
    GlobalSecondaryIndexes: [
      expiryGsi('expirationWindowIndex', 'expirationWindow', 'ttl'),
    ],
    AttributeDefinitions: Match.arrayWith([
      { AttributeName: 'expirationWindow', AttributeType: 'S' },
      { AttributeName: 'ttl', AttributeType: 'N' },
    ]),
  });
  template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
    GlobalSecondaryIndexes: [
      expiryGsi('byExpiry', 'bucket', 'expiresAt'),
    ],
  });
});

// ---------------------------------------------------------------- customer managed keys

test('a table encrypted with a customer managed key: its key for the role, through DynamoDB only', () => {
  const stack = newStack();
  const table = new dynamodb.Table(stack, 'Sessions', {
    partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
    encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED,
  });
  TtlSweeper.addExpirationIndex(table);
  const importedKey = kms.Key.fromKeyArn(stack, 'CheckpointKeyRef', `arn:aws:kms:${env.region}:${env.account}:key/1234abcd-12ab-34cd-56ef-1234567890ab`);
  const checkpoint = dynamodb.Table.fromTableAttributes(stack, 'Checkpoints', { tableName: 'checkpoints', encryptionKey: importedKey });
  new TtlSweeper(stack, 'Sweeper', { table, code: lambda.Code.fromAsset(assetDir), checkpoint: Checkpoint.fromTable(checkpoint) });
  const template = Template.fromStack(stack);
  const s = statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperRole'));
  const keyId = logicalId(template, 'AWS::KMS::Key', 'SessionsKey');
  const actions = ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:ReEncrypt*', 'kms:GenerateDataKey*'];
  assert.deepEqual(s.TableKey.Action, actions);
  assert.deepEqual(s.TableKey.Resource, { 'Fn::GetAtt': [keyId, 'Arn'] });
  assert.deepEqual(s.TableKey.Condition, { StringEquals: { 'kms:ViaService': `dynamodb.${env.region}.amazonaws.com` } });
  assert.deepEqual(s.CheckpointKey.Action, actions);
  assert.match(JSON.stringify(s.CheckpointKey.Resource), /key\/1234abcd/);
  // No key, no KMS statement.
  const { template: plain } = synth({ checkpoint: Checkpoint.newTable() });
  const p = statements(plain, logicalId(plain, 'AWS::IAM::Role', 'SweeperRole'));
  assert.equal(p.TableKey, undefined);
  assert.equal(p.CheckpointKey, undefined);
  assert.ok(!JSON.stringify(p).includes('kms:'));
});

// ---------------------------------------------------------------- logs, alarms, key, dashboard

test('log retention and removal policy reach every log group', () => {
  const { template } = synth({ sweepers: 2, windowShards: 2, logRetention: 90, logRemovalPolicy: cdk.RemovalPolicy.RETAIN });
  const groups = Object.values(template.findResources('AWS::Logs::LogGroup'));
  assert.equal(groups.length, 2);
  for (const g of groups) {
    assert.equal(g.Properties.RetentionInDays, 90);
    assert.equal(g.DeletionPolicy, 'Retain');
    assert.equal(g.UpdateReplacePolicy, 'Retain');
  }
  const { template: byDefault } = synth();
  for (const g of Object.values(byDefault.findResources('AWS::Logs::LogGroup'))) {
    assert.equal(g.DeletionPolicy, 'Delete');
    assert.equal(g.Properties.RetentionInDays, 30);
  }
});

test('alarms, the topic key and the dashboard can each be turned off', () => {
  const { sweeper, template, stack } = synth({ alarms: { enabled: false }, dashboard: false });
  template.resourceCountIs('AWS::CloudWatch::Alarm', 0);
  template.resourceCountIs('AWS::SNS::Topic', 0);
  template.resourceCountIs('AWS::KMS::Key', 0);
  template.resourceCountIs('AWS::CloudWatch::Dashboard', 0);
  assert.equal(sweeper.alarmTopic, undefined);
  assert.deepEqual(sweeper.alarms, []);
  assert.deepEqual(nagViolations(stack), []);

  const plainTopic = synth({ alarms: { encryptTopic: false, emails: ['oncall@example.com'] } });
  plainTopic.template.resourceCountIs('AWS::CloudWatch::Alarm', 5);
  plainTopic.template.resourceCountIs('AWS::KMS::Key', 0);
  plainTopic.template.resourceCountIs('AWS::SNS::Topic', 1);
  const topic = Object.values(plainTopic.template.findResources('AWS::SNS::Topic'))[0];
  assert.equal(topic.Properties.KmsMasterKeyId, undefined);
  plainTopic.template.hasResourceProperties('AWS::SNS::TopicPolicy', {
    PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
  });
  assert.deepEqual(nagViolations(plainTopic.stack), []);

  // By default: five alarms (the count the cost model prices), a topic with its own key, a dashboard.
  const { template: all } = synth();
  const priced = Number(rust('tests/support/cost.rs').match(/pub const DEFAULT_ALARMS: usize = (\d+);/)![1]);
  all.resourceCountIs('AWS::CloudWatch::Alarm', priced);
  assert.equal(priced, 5);
  all.resourceCountIs('AWS::KMS::Key', 1);
  all.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
});

// ---------------------------------------------------------------- defaults and SETTINGS

/** `var` and `default` of every setting in settings.json (`ttl-sweeper settings`). */
function settingsDefaults(): Map<string, string | undefined> {
  const spec = JSON.parse(fs.readFileSync(path.join(repo, 'infra', 'settings.json'), 'utf8'));
  return new Map(spec.settings.map((s: { var: string; default: string | null }) => [s.var, s.default ?? undefined]));
}

/** Seconds of a SETTINGS duration default such as `24h`, `90m` or `30s`, as the binary reads it. */
function durationSeconds(v: string): number {
  const m = /^(\d+)([smhd])$/.exec(v);
  assert.ok(m, `unexpected duration ${v}`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as 's' | 'm' | 'h' | 'd'];
}

test("the construct's defaults are the binary's SETTINGS defaults", () => {
  const defaults = settingsDefaults();
  assert.ok(defaults.size >= 19 && defaults.has('INDEX_NAME') && defaults.has('MAX_CATCHUP'), [...defaults.keys()].join());
  const envOf = (sweeper: TtlSweeper): Record<string, string> =>
    cdk.Stack.of(sweeper).resolve((sweeper.function.node.defaultChild as lambda.CfnFunction).environment).variables;

  const plain = envOf(synth({ tickSeconds: undefined }).sweeper);
  const withCheckpoint = envOf(synth({ tickSeconds: undefined, checkpoint: Checkpoint.newTable() }).sweeper);
  // What the construct leaves out, the binary defaults itself; everything it sets equals SETTINGS.
  const notSet = [
    'CHECKPOINT_TABLE', 'MAX_CATCHUP', 'SHARD_RANGE', 'EXPIRY_EVENTS', 'EXPIRY_EVENTS_MODE', 'EXPIRY_EVENTS_ITEM',
    'TABLES', 'LEADER_LEASE', // set only with several tables, or a lease
    'EXPIRY_INDEX_TABLE', // set only with followStream, in place of INDEX_NAME
    'DELETE_WHEN_INDEXED', // set (false) only on the stream indexer, with a lease
  ];
  assert.deepEqual(Object.keys(plain).sort(), [...defaults.keys()].filter((v) => !notSet.includes(v)).sort());
  for (const [name, value] of Object.entries(plain)) {
    if (name === 'TABLE_NAME') continue; // no default: the table given
    assert.equal(value, defaults.get(name), `${name}: construct ${value}, SETTINGS ${defaults.get(name)}`);
  }
  assert.equal(Number(withCheckpoint.MAX_CATCHUP), durationSeconds(defaults.get('MAX_CATCHUP')!));
  assert.equal(plain.TABLE_NAME, 'sessions');
  assert.equal(defaults.get('TABLE_NAME'), undefined);
});
