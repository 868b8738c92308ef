// Template assertions and cdk-nag checks for the TtlSweeper construct and the example stack,
// offline (no credentials).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cdk from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Checkpoint, DeleteMode, SweepSchedule, TtlSweeper } from '../src';
import { SweeperStack, type SweeperStackProps } from '../examples/sweeper-stack';
import { assetDir, env, expiryGsi, itemsLeftAlarm, logicalId, nagViolations, newStack, settingsUnlikeTheDefaults, statements, synth } from './support';

function example(overrides: Partial<SweeperStackProps> = {}) {
  const app = new cdk.App({ analyticsReporting: false });
  const stack = new SweeperStack(app, 'Example', {
    table: { kind: 'create', partitionKey: 'id' },
    env,
    ...overrides,
    sweeper: { code: lambda.Code.fromAsset(assetDir), tickSeconds: 1, ...overrides.sweeper },
  });
  return { stack, template: Template.fromStack(stack) };
}

const resolve = (stack: cdk.Stack, v: unknown) => JSON.stringify(stack.resolve(v));

// ---------------------------------------------------------------- the example stack

test('the example creates the table with TTL, PITR and a KEYS_ONLY (window, ttl) index', () => {
  const { template } = example();
  template.hasResourceProperties('AWS::DynamoDB::Table', {
    KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
    TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
    PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    BillingMode: 'PAY_PER_REQUEST',
    GlobalSecondaryIndexes: [
      expiryGsi('expirationWindowIndex', 'expirationWindow', 'ttl'),
    ],
    AttributeDefinitions: Match.arrayWith([
      { AttributeName: 'expirationWindow', AttributeType: 'S' },
      { AttributeName: 'ttl', AttributeType: 'N' },
    ]),
  });
  // IAM follows the created table.
  const s = statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperRole'));
  assert.match(JSON.stringify(s.QueryExpiryIndex.Resource), /\{"Fn::GetAtt":\["Table[0-9A-F]+","Arn"\]\},"\/index\/expirationWindowIndex"/);
});

test('the example attached to an existing table creates no table and scopes IAM to it', () => {
  const { stack, template } = example({ table: { kind: 'existing', tableName: 'sessions' } });
  template.resourceCountIs('AWS::DynamoDB::Table', 0);
  const s = statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperRole'));
  assert.match(resolve(stack, s.QueryExpiryIndex.Resource), /table\/sessions\/index\/expirationWindowIndex/);
  assert.match(resolve(stack, s.DeleteExpiredItems.Resource), /table\/sessions"/);
  template.hasResourceProperties('AWS::Lambda::Function', {
    Environment: { Variables: Match.objectLike({ TABLE_NAME: 'sessions' }) },
  });
});

// ---------------------------------------------------------------- the function

test('the function is arm64 on provided.al2023 with the tick-mode handoff: reserved concurrency 2, timeout period + 20 s', () => {
  const { template } = synth();
  template.hasResourceProperties('AWS::Lambda::Function', {
    Runtime: 'provided.al2023',
    Architectures: ['arm64'],
    Handler: 'bootstrap',
    MemorySize: 128,
    Timeout: 80,
    ReservedConcurrentExecutions: 2,
    LoggingConfig: Match.objectLike({ LogFormat: 'JSON', LogGroup: Match.anyValue() }),
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

test('every setting reaches the environment variable the binary reads', () => {
  const { stack, sweeper } = synth({
    ...settingsUnlikeTheDefaults(),
    indexName: 'byExpiry',
    windowAttribute: 'expiryBucket',
    schedule: SweepSchedule.rate(cdk.Duration.minutes(2)),
    maxCatchUp: cdk.Duration.hours(6),
  });
  const vars = stack.resolve((sweeper.function.node.defaultChild as lambda.CfnFunction).environment).variables;
  assert.deepEqual(Object.keys(vars).sort(), [
    'CHECKPOINT_TABLE', 'DELETE_MODE', 'INDEX_NAME', 'LOOKBACK_WINDOWS', 'MAX_CATCHUP', 'MAX_CONCURRENCY',
    'MAX_RETRIES', 'METRICS_NAMESPACE', 'SCHEDULE_SECONDS', 'TABLE_NAME', 'TICK_SECONDS', 'TTL_ATTRIBUTE',
    'WINDOW_ATTRIBUTE', 'WINDOW_SECONDS', 'WINDOW_SHARDS',
  ]);
  assert.deepEqual({ ...vars, CHECKPOINT_TABLE: undefined }, {
    TABLE_NAME: 'sessions',
    INDEX_NAME: 'byExpiry',
    TTL_ATTRIBUTE: 'expiresAt',
    WINDOW_ATTRIBUTE: 'expiryBucket',
    WINDOW_SECONDS: '300',
    WINDOW_SHARDS: '8',
    LOOKBACK_WINDOWS: '4',
    DELETE_MODE: 'conditional',
    MAX_CONCURRENCY: '16',
    MAX_RETRIES: '5',
    TICK_SECONDS: '2',
    SCHEDULE_SECONDS: '120',
    MAX_CATCHUP: '21600',
    METRICS_NAMESPACE: 'Sweepers/Sessions',
    CHECKPOINT_TABLE: undefined,
  });
  assert.match(JSON.stringify(vars.CHECKPOINT_TABLE), /CheckpointTable/);
  // Without a checkpoint there is no CHECKPOINT_TABLE nor MAX_CATCHUP; without ticks TICK_SECONDS is off.
  const plain = synth({ tickSeconds: undefined });
  const plainVars = plain.stack.resolve((plain.sweeper.function.node.defaultChild as lambda.CfnFunction).environment).variables;
  assert.equal(plainVars.TICK_SECONDS, 'off');
  assert.equal(plainVars.CHECKPOINT_TABLE, undefined);
  assert.equal(plainVars.MAX_CATCHUP, undefined);
  assert.equal(plainVars.LOOKBACK_WINDOWS, '15');
  assert.equal(plainVars.MAX_CONCURRENCY, '8');
  assert.equal(plainVars.MAX_RETRIES, '8');
  assert.equal(plainVars.WINDOW_SECONDS, '60');
  assert.equal(plainVars.WINDOW_SHARDS, '1');
});

test('memory, timeout, reserved concurrency and log retention can be set', () => {
  const { template } = synth({
    memorySize: 512,
    timeout: cdk.Duration.seconds(150),
    reservedConcurrency: 2,
    logRetention: 7,
  });
  template.hasResourceProperties('AWS::Lambda::Function', {
    MemorySize: 512,
    Timeout: 150,
    ReservedConcurrentExecutions: 2,
  });
  template.hasResourceProperties('AWS::Logs::LogGroup', { RetentionInDays: 7 });
  // The default timeout never passes Lambda's 15 minutes.
  const { template: hourly } = synth({ tickSeconds: undefined, schedule: SweepSchedule.rate(cdk.Duration.hours(1)) });
  hourly.hasResourceProperties('AWS::Lambda::Function', { Timeout: 900, Environment: { Variables: Match.objectLike({ SCHEDULE_SECONDS: '3600' }) } });
});

// ---------------------------------------------------------------- the schedule

test('EventBridge Scheduler invokes it every minute as of the scheduled time, failures go to a queue', () => {
  const { template } = synth();
  template.resourceCountIs('AWS::Events::Rule', 0);
  template.resourceCountIs('AWS::Scheduler::Schedule', 1);
  const queue = logicalId(template, 'AWS::SQS::Queue', 'SweeperFailedInvocations');
  const fn = logicalId(template, 'AWS::Lambda::Function', 'SweeperFunction');
  const role = logicalId(template, 'AWS::IAM::Role', 'SweeperScheduleRole');
  template.hasResourceProperties('AWS::Scheduler::Schedule', {
    ScheduleExpression: 'rate(1 minute)',
    FlexibleTimeWindow: { Mode: 'OFF' },
    State: 'ENABLED',
    Target: {
      Arn: { 'Fn::GetAtt': [fn, 'Arn'] },
      RoleArn: { 'Fn::GetAtt': [role, 'Arn'] },
      Input: '{"time":"<aws.scheduler.scheduled-time>"}',
      RetryPolicy: { MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 300 },
      DeadLetterConfig: { Arn: { 'Fn::GetAtt': [queue, 'Arn'] } },
    },
  });
  const input = JSON.parse(Object.values(template.findResources('AWS::Scheduler::Schedule'))[0].Properties.Target.Input);
  assert.deepEqual(input, { time: '<aws.scheduler.scheduled-time>' });
  template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
    MaximumRetryAttempts: 0,
    MaximumEventAgeInSeconds: 300,
    DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [queue, 'Arn'] } } },
  });
  // The failure queue is encrypted and refuses plain HTTP.
  template.hasResourceProperties('AWS::SQS::Queue', { SqsManagedSseEnabled: true, MessageRetentionPeriod: 1209600 });
  template.hasResourceProperties('AWS::SQS::QueuePolicy', {
    PolicyDocument: {
      Statement: Match.arrayWith([
        Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
      ]),
    },
  });
  // The schedule needs no resource policy on the function: it invokes through its role.
  template.resourceCountIs('AWS::Lambda::Permission', 0);
});

test('rate, cron and retry settings of the schedule', () => {
  const { template: five } = synth({ schedule: SweepSchedule.rate(cdk.Duration.minutes(5)) });
  five.hasResourceProperties('AWS::Scheduler::Schedule', { ScheduleExpression: 'rate(5 minutes)' });
  five.hasResourceProperties('AWS::Lambda::Function', {
    Timeout: 320,
    Environment: { Variables: Match.objectLike({ SCHEDULE_SECONDS: '300' }) },
  });

  const { template: cron } = synth({
    schedule: SweepSchedule.cron('0/2 * * * ? *', cdk.Duration.minutes(2), cdk.TimeZone.EUROPE_PARIS),
    scheduleRetryAttempts: 0,
    scheduleMaxEventAge: cdk.Duration.minutes(1),
    scheduleEnabled: false,
  });
  cron.hasResourceProperties('AWS::Scheduler::Schedule', {
    ScheduleExpression: 'cron(0/2 * * * ? *)',
    ScheduleExpressionTimezone: 'Europe/Paris',
    FlexibleTimeWindow: { Mode: 'OFF' },
    State: 'DISABLED',
    Target: Match.objectLike({ RetryPolicy: { MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 60 } }),
  });
  cron.hasResourceProperties('AWS::Lambda::Function', {
    Environment: { Variables: Match.objectLike({ SCHEDULE_SECONDS: '120' }) },
  });
  assert.equal(SweepSchedule.cron('cron( 0/2 * * * ? * )', cdk.Duration.minutes(2)).expressionString, 'cron(0/2 * * * ? *)');
  assert.equal(SweepSchedule.rate(cdk.Duration.hours(1)).expressionString, 'rate(60 minutes)');
  assert.equal(SweepSchedule.rate(cdk.Duration.hours(1)).periodSeconds, 3600);
});

test('the schedule role may only invoke this function and write to its dead-letter queue', () => {
  // Two sweepers in one stack: each schedule role reaches its own function only.
  const stack = newStack();
  const other = new TtlSweeper(stack, 'Other', {
    table: dynamodb.Table.fromTableName(stack, 'Orders', 'orders'),
    code: lambda.Code.fromAsset(assetDir),
  });
  const { template } = synth({}, stack);
  for (const [prefix, fnPrefix, queuePrefix] of [
    ['SweeperScheduleRole', 'SweeperFunction', 'SweeperFailedInvocations'],
    ['OtherScheduleRole', 'OtherFunction', 'OtherFailedInvocations'],
  ]) {
    const role = logicalId(template, 'AWS::IAM::Role', prefix);
    const fn = logicalId(template, 'AWS::Lambda::Function', fnPrefix);
    const queue = logicalId(template, 'AWS::SQS::Queue', queuePrefix);
    const s = statements(template, role);
    assert.deepEqual(Object.keys(s).sort(), ['DeadLetter', 'InvokeSweeper']);
    assert.deepEqual(s.InvokeSweeper, {
      Sid: 'InvokeSweeper',
      Effect: 'Allow',
      Action: 'lambda:InvokeFunction',
      Resource: { 'Fn::GetAtt': [fn, 'Arn'] },
    });
    assert.deepEqual(s.DeadLetter, {
      Sid: 'DeadLetter',
      Effect: 'Allow',
      Action: 'sqs:SendMessage',
      Resource: { 'Fn::GetAtt': [queue, 'Arn'] },
    });
    const trust = template.toJSON().Resources[role].Properties;
    assert.equal(trust.ManagedPolicyArns, undefined);
    assert.deepEqual(trust.AssumeRolePolicyDocument.Statement, [
      {
        Action: 'sts:AssumeRole',
        Effect: 'Allow',
        Principal: { Service: 'scheduler.amazonaws.com' },
        Condition: {
          StringEquals: {
            'aws:SourceAccount': env.account,
            'aws:SourceArn': {
              'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:scheduler:${env.region}:${env.account}:schedule-group/default`]],
            },
          },
        },
      },
    ]);
  }
  assert.notEqual(other.schedule, undefined);
});

// ---------------------------------------------------------------- IAM of the function

test('IAM grants exactly Query on the index and the deletes on the table, nothing broader', () => {
  const { stack, template } = synth();
  const s = statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperRole'));
  const sqsSend = '["sqs:SendMessage","sqs:GetQueueAttributes","sqs:GetQueueUrl"]';
  assert.deepEqual(Object.keys(s).sort(), [sqsSend, 'DeleteExpiredItems', 'QueryExpiryIndex', 'ConfirmKeysInTable', 'WriteOwnLogs'].sort());
  // The on-failure destination may only send to the failure queue.
  assert.match(resolve(stack, s[sqsSend].Resource), /FailedInvocations/);
  assert.equal(s.QueryExpiryIndex.Action, 'dynamodb:Query');
  assert.equal(resolve(stack, s.QueryExpiryIndex.Resource), '"arn:aws:dynamodb:eu-west-1:123456789012:table/sessions/index/expirationWindowIndex"');
  assert.deepEqual(s.DeleteExpiredItems.Action, [
    'dynamodb:BatchWriteItem',
    'dynamodb:DeleteItem',
    'dynamodb:DescribeTable',
  ]);
  assert.equal(resolve(stack, s.DeleteExpiredItems.Resource), '"arn:aws:dynamodb:eu-west-1:123456789012:table/sessions"');
  // Batch mode (the default) reads stale keys again on the table; conditional mode does not.
  assert.equal(s.ConfirmKeysInTable.Action, 'dynamodb:BatchGetItem');
  assert.equal(resolve(stack, s.ConfirmKeysInTable.Resource), '"arn:aws:dynamodb:eu-west-1:123456789012:table/sessions"');
  const conditional = synth({ deleteMode: DeleteMode.CONDITIONAL });
  const c = statements(conditional.template, logicalId(conditional.template, 'AWS::IAM::Role', 'SweeperRole'));
  assert.equal(c.ConfirmKeysInTable, undefined);
  assert.deepEqual(s.WriteOwnLogs.Action, ['logs:CreateLogStream', 'logs:PutLogEvents']);
  assert.match(resolve(stack, s.WriteOwnLogs.Resource), /SweeperLogs/);
  // No wildcard action anywhere, and no managed policies on any role.
  for (const policy of Object.values(template.findResources('AWS::IAM::Policy'))) {
    for (const st of (policy as any).Properties.PolicyDocument.Statement) {
      for (const a of [st.Action].flat()) assert.ok(!String(a).includes('*'), `wildcard action ${a}`);
      assert.ok(!JSON.stringify(st.Resource).includes('*'), `wildcard resource ${JSON.stringify(st.Resource)}`);
    }
  }
  for (const role of Object.values(template.findResources('AWS::IAM::Role'))) {
    assert.equal((role as any).Properties.ManagedPolicyArns, undefined);
  }
  template.resourceCountIs('AWS::IAM::Role', 2);
});

test('a new checkpoint table adds GetItem/UpdateItem/DescribeTable on that table only', () => {
  const { stack, template } = synth({ checkpoint: Checkpoint.newTable() });
  const s = statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperRole'));
  assert.deepEqual(s.Checkpoint.Action, ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DescribeTable']);
  assert.match(resolve(stack, s.Checkpoint.Resource), /CheckpointTable/);
  template.hasResourceProperties('AWS::Lambda::Function', {
    Environment: { Variables: Match.objectLike({ CHECKPOINT_TABLE: Match.anyValue(), MAX_CATCHUP: '86400' }) },
  });
  template.resourceCountIs('AWS::DynamoDB::Table', 1);
  template.hasResourceProperties('AWS::DynamoDB::Table', {
    KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
    PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
  });
  const { template: example2 } = example({ sweeper: { checkpoint: Checkpoint.newTable() } });
  example2.resourceCountIs('AWS::DynamoDB::Table', 2);
});

test('an existing checkpoint table is used as is', () => {
  const stack = newStack();
  const shared = dynamodb.Table.fromTableName(stack, 'Shared', 'sweeper-checkpoints');
  const { sweeper, template } = synth({ checkpoint: Checkpoint.fromTable(shared) }, stack);
  template.resourceCountIs('AWS::DynamoDB::Table', 0);
  assert.equal(sweeper.checkpointTable, shared);
  const s = statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperRole'));
  assert.match(resolve(stack, s.Checkpoint.Resource), /:dynamodb:eu-west-1:123456789012:table\/sweeper-checkpoints"/);
  template.hasResourceProperties('AWS::Lambda::Function', {
    Environment: { Variables: Match.objectLike({ CHECKPOINT_TABLE: 'sweeper-checkpoints' }) },
  });
});

// ---------------------------------------------------------------- alarms and dashboard

test('alarms on errors, failed items, lag, items left and silence notify a KMS-encrypted SNS topic', () => {
  const { template } = synth({ alarms: { lagThreshold: cdk.Duration.seconds(30), emails: ['oncall@example.com'] } });
  template.resourceCountIs('AWS::CloudWatch::Alarm', 5);
  const topic = logicalId(template, 'AWS::SNS::Topic', 'SweeperAlarms');
  template.hasResourceProperties('AWS::CloudWatch::Alarm', {
    MetricName: 'ItemsFailed',
    Namespace: 'TtlSweeper',
    Dimensions: [{ Name: 'TableName', Value: 'sessions' }],
    Threshold: 0,
    ComparisonOperator: 'GreaterThanThreshold',
    AlarmActions: [{ Ref: topic }],
  });
  template.hasResourceProperties('AWS::CloudWatch::Alarm', {
    MetricName: 'MaxExpiryLagSeconds',
    Statistic: 'Maximum',
    Threshold: 30,
    Period: 60,
    EvaluationPeriods: 3,
  });
  // Expired items left for the next sweep in three periods running: sweeps that cannot keep up.
  template.hasResourceProperties('AWS::CloudWatch::Alarm', {
    ...itemsLeftAlarm,
    AlarmActions: [{ Ref: topic }],
  });
  template.hasResourceProperties('AWS::CloudWatch::Alarm', {
    MetricName: 'WindowsSwept',
    Statistic: 'SampleCount',
    Period: 600,
    ComparisonOperator: 'LessThanThreshold',
    TreatMissingData: 'breaching',
  });
  template.hasResourceProperties('AWS::CloudWatch::Alarm', { MetricName: 'Errors', Namespace: 'AWS/Lambda' });
  template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'oncall@example.com' });
  template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
  // The topic's key lets CloudWatch publish and rotates.
  const key = logicalId(template, 'AWS::KMS::Key', 'SweeperAlarmsKey');
  template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: { 'Fn::GetAtt': [key, 'Arn'] } });
  template.hasResourceProperties('AWS::KMS::Key', {
    EnableKeyRotation: true,
    KeyPolicy: {
      Statement: Match.arrayWith([
        Match.objectLike({
          Principal: { Service: 'cloudwatch.amazonaws.com' },
          Action: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        }),
      ]),
    },
  });
});

test('alarm periods follow the schedule; a topic of your own replaces the created one', () => {
  const stack = newStack();
  const topic = new sns.Topic(stack, 'Pager', { enforceSSL: true });
  const { sweeper, template } = synth(
    { tickSeconds: undefined, schedule: SweepSchedule.rate(cdk.Duration.minutes(15)), alarms: { topic }, dashboard: false },
    stack,
  );
  assert.equal(sweeper.alarmTopic, topic);
  template.resourceCountIs('AWS::SNS::Topic', 1);
  template.resourceCountIs('AWS::KMS::Key', 0);
  template.resourceCountIs('AWS::CloudWatch::Dashboard', 0);
  assert.equal(sweeper.dashboard, undefined);
  template.hasResourceProperties('AWS::CloudWatch::Alarm', { MetricName: 'MaxExpiryLagSeconds', Period: 900 });
  template.hasResourceProperties('AWS::CloudWatch::Alarm', { MetricName: 'ItemsLeft', Period: 900 });
  template.hasResourceProperties('AWS::CloudWatch::Alarm', { MetricName: 'WindowsSwept', Period: 1800 });
  const pager = logicalId(template, 'AWS::SNS::Topic', 'Pager');
  for (const alarm of Object.values(template.findResources('AWS::CloudWatch::Alarm'))) {
    assert.deepEqual((alarm as any).Properties.AlarmActions, [{ Ref: pager }]);
  }
  const { template: custom } = synth({ alarms: { silenceAfter: cdk.Duration.minutes(30) } });
  custom.hasResourceProperties('AWS::CloudWatch::Alarm', { MetricName: 'WindowsSwept', Period: 1800 });
});

test('the construct exposes what it creates', () => {
  const { sweeper } = synth({ checkpoint: Checkpoint.newTable() });
  assert.ok(sweeper.function instanceof lambda.Function);
  assert.equal(sweeper.schedule.node.id, 'Schedule');
  assert.ok(sweeper.failureQueue instanceof sqs.Queue);
  assert.ok(sweeper.alarmTopic instanceof sns.Topic);
  assert.equal(sweeper.alarms.length, 5);
  assert.ok(sweeper.dashboard);
  assert.ok(sweeper.checkpointTable instanceof dynamodb.Table);
  assert.equal(sweeper.schedulePeriodSeconds, 60);
  assert.equal(sweeper.indexName, 'expirationWindowIndex');
  const m = sweeper.metric('ItemsDeleted');
  assert.equal(m.namespace, 'TtlSweeper');
  assert.deepEqual(cdk.Stack.of(sweeper).resolve(m.dimensions), { TableName: 'sessions' });
});

// ---------------------------------------------------------------- cdk-nag

test('cdk-nag AwsSolutions finds nothing unacknowledged', () => {
  const variants: [string, () => cdk.Stack][] = [
    ['construct, imported table', () => synth().stack],
    ['construct, checkpoint, conditional, cron', () => synth({
      checkpoint: Checkpoint.newTable(),
      deleteMode: DeleteMode.CONDITIONAL,
      schedule: SweepSchedule.cron('0/2 * * * ? *', cdk.Duration.minutes(2)),
    }).stack],
    ['example, created table', () => example().stack],
    ['example, existing table', () => example({ table: { kind: 'existing', tableName: 'sessions' } }).stack],
    ['example, checkpoint', () => example({ sweeper: { checkpoint: Checkpoint.newTable() } }).stack],
  ];
  for (const [name, make] of variants) {
    assert.deepEqual(nagViolations(make()), [], name);
  }
});

test('cdk-nag is live: an unencrypted, non-TLS queue is reported', () => {
  const { stack } = synth();
  new sqs.Queue(stack, 'Careless', { encryption: sqs.QueueEncryption.UNENCRYPTED });
  const rules = nagViolations(stack);
  assert.ok(rules.some((r) => r.includes('SQS4')), rules.join(', '));
});
