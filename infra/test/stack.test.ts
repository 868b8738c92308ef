// Template assertions and cdk-nag checks for the sweeper stack, offline (no credentials).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as cdk from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks } from 'cdk-nag';
import { SweeperStack, type SweeperStackProps } from '../lib/sweeper-stack.ts';

const assetDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ttl-sweeper-asset-'));
fs.writeFileSync(path.join(assetDir, 'bootstrap'), '#!/bin/sh\n');

function synth(overrides: Partial<SweeperStackProps> = {}) {
  const app = new cdk.App();
  const stack = new SweeperStack(app, 'Test', {
    assetDir,
    table: { kind: 'create', partitionKey: 'id' },
    tickSeconds: 1,
    env: { account: '123456789012', region: 'eu-west-1' },
    ...overrides,
  });
  return { stack, template: Template.fromStack(stack) };
}

/** The policy statements attached to the function's role, by Sid. */
function statements(template: Template): Record<string, { Action: unknown; Resource: unknown }> {
  const policies = template.findResources('AWS::IAM::Policy');
  const out: Record<string, { Action: unknown; Resource: unknown }> = {};
  for (const p of Object.values(policies)) {
    for (const s of (p as any).Properties.PolicyDocument.Statement) {
      out[s.Sid ?? JSON.stringify(s.Action)] = { Action: s.Action, Resource: s.Resource };
    }
  }
  return out;
}

test('creates the table with TTL, PITR and a KEYS_ONLY (window, ttl) index', () => {
  const { template } = synth();
  template.hasResourceProperties('AWS::DynamoDB::Table', {
    KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
    TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
    PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    BillingMode: 'PAY_PER_REQUEST',
    GlobalSecondaryIndexes: [
      {
        IndexName: 'expirationWindowIndex',
        KeySchema: [
          { AttributeName: 'expirationWindow', KeyType: 'HASH' },
          { AttributeName: 'ttl', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'KEYS_ONLY' },
      },
    ],
    AttributeDefinitions: Match.arrayWith([
      { AttributeName: 'expirationWindow', AttributeType: 'S' },
      { AttributeName: 'ttl', AttributeType: 'N' },
    ]),
  });
});

test('the function is arm64 on provided.al2023 with reserved concurrency 1 and tick-mode timeout', () => {
  const { template } = synth();
  template.hasResourceProperties('AWS::Lambda::Function', {
    Runtime: 'provided.al2023',
    Architectures: ['arm64'],
    Handler: 'bootstrap',
    MemorySize: 128,
    Timeout: 70,
    ReservedConcurrentExecutions: 1,
    Environment: {
      Variables: Match.objectLike({
        INDEX_NAME: 'expirationWindowIndex',
        TICK_SECONDS: '1',
        SCHEDULE_SECONDS: '60',
        DELETE_MODE: 'batch',
        METRICS_NAMESPACE: 'TtlSweeper',
      }),
    },
  });
  template.hasResourceProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
});

test('an EventBridge rule invokes it every minute, failures go to a queue', () => {
  const { template } = synth();
  template.hasResourceProperties('AWS::Events::Rule', {
    ScheduleExpression: 'rate(1 minute)',
    State: 'ENABLED',
    Targets: [
      Match.objectLike({
        RetryPolicy: { MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 300 },
        DeadLetterConfig: Match.objectLike({ Arn: Match.anyValue() }),
      }),
    ],
  });
  template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
    MaximumRetryAttempts: 0,
    DestinationConfig: { OnFailure: { Destination: Match.anyValue() } },
  });
  const { template: hourly } = synth({ scheduleMinutes: 5 });
  hourly.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(5 minutes)' });
  hourly.hasResourceProperties('AWS::Lambda::Function', { Timeout: 310 });
});

test('IAM grants exactly Query on the index and the deletes on the table, nothing broader', () => {
  const { stack, template } = synth();
  const s = statements(template);
  const resolve = (v: unknown) => JSON.stringify(stack.resolve(v));
  const sqsSend = '["sqs:SendMessage","sqs:GetQueueAttributes","sqs:GetQueueUrl"]';
  assert.deepEqual(Object.keys(s).sort(), [sqsSend, 'DeleteExpiredItems', 'QueryExpiryIndex', 'WriteOwnLogs'].sort());
  // The on-failure destination may only send to the failure queue.
  assert.match(resolve(s[sqsSend].Resource), /FailedInvocations/);
  assert.equal(s.QueryExpiryIndex.Action, 'dynamodb:Query');
  assert.match(resolve(s.QueryExpiryIndex.Resource), /\/index\/expirationWindowIndex/);
  assert.deepEqual(s.DeleteExpiredItems.Action, [
    'dynamodb:BatchWriteItem',
    'dynamodb:DeleteItem',
    'dynamodb:DescribeTable',
  ]);
  assert.doesNotMatch(resolve(s.DeleteExpiredItems.Resource), /index|\*/);
  assert.deepEqual(s.WriteOwnLogs.Action, ['logs:CreateLogStream', 'logs:PutLogEvents']);
  // No wildcard action anywhere, and no managed policies on the role.
  for (const st of Object.values(s)) {
    for (const a of [st.Action].flat()) assert.ok(!String(a).includes('*'), `wildcard action ${a}`);
  }
  template.hasResourceProperties('AWS::IAM::Role', { ManagedPolicyArns: Match.absent() });
});

test('the checkpoint table adds GetItem/UpdateItem on that table only', () => {
  const { stack, template } = synth({ checkpoint: true });
  const s = statements(template);
  assert.deepEqual(s.Checkpoint.Action, ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DescribeTable']);
  assert.match(JSON.stringify(stack.resolve(s.Checkpoint.Resource)), /CheckpointTable/);
  template.hasResourceProperties('AWS::Lambda::Function', {
    Environment: { Variables: Match.objectLike({ CHECKPOINT_TABLE: Match.anyValue() }) },
  });
  template.resourceCountIs('AWS::DynamoDB::Table', 2);
});

test('attaching to an existing table creates no table and scopes IAM to it', () => {
  const { stack, template } = synth({ table: { kind: 'existing', tableName: 'sessions' } });
  template.resourceCountIs('AWS::DynamoDB::Table', 0);
  const s = statements(template);
  assert.match(JSON.stringify(stack.resolve(s.QueryExpiryIndex.Resource)), /table\/sessions\/index\/expirationWindowIndex/);
  assert.match(JSON.stringify(stack.resolve(s.DeleteExpiredItems.Resource)), /table\/sessions"/);
  template.hasResourceProperties('AWS::Lambda::Function', {
    Environment: { Variables: Match.objectLike({ TABLE_NAME: 'sessions' }) },
  });
});

test('alarms on errors, failed items, lag and silence notify an SNS topic', () => {
  const { template } = synth({ lagAlarmSeconds: 30, alarmEmail: 'oncall@example.com' });
  template.resourceCountIs('AWS::CloudWatch::Alarm', 4);
  template.hasResourceProperties('AWS::CloudWatch::Alarm', {
    MetricName: 'ItemsFailed',
    Namespace: 'TtlSweeper',
    Threshold: 0,
    ComparisonOperator: 'GreaterThanThreshold',
    AlarmActions: [Match.anyValue()],
  });
  template.hasResourceProperties('AWS::CloudWatch::Alarm', {
    MetricName: 'MaxExpiryLagSeconds',
    Statistic: 'Maximum',
    Threshold: 30,
  });
  template.hasResourceProperties('AWS::CloudWatch::Alarm', { MetricName: 'Errors', Namespace: 'AWS/Lambda' });
  template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'oncall@example.com' });
  template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
});

test('cdk-nag AwsSolutions finds nothing unacknowledged', () => {
  for (const overrides of [{}, { checkpoint: true }, { table: { kind: 'existing' as const, tableName: 'sessions' } }]) {
    const { stack } = synth(overrides);
    const report = new AwsSolutionsChecks().validateScope(stack);
    const violations = (report.violations ?? []).map((v: any) => `${v.ruleName}: ${v.description}`);
    assert.deepEqual(violations, [], JSON.stringify(overrides));
  }
});

test('cdk-nag is live: an unencrypted, non-TLS queue is reported', () => {
  const { stack } = synth();
  new sqs.Queue(stack, 'Careless', { encryption: sqs.QueueEncryption.UNENCRYPTED });
  const report = new AwsSolutionsChecks().validateScope(stack);
  const rules = (report.violations ?? []).map((v: any) => String(v.ruleName));
  assert.ok(rules.some((r) => r.includes('SQS4')), rules.join(', '));
});
