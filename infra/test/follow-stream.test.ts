// followStream: the expiry index table, the stream indexer function on the table's stream, its
// event source mapping and filter, the IAM of both functions (the indexer writes the index table
// only and deletes items of the table, never puts or updates one; the sweeper queries no index of
// the table), the indexer's expiry events and DELETE_WHEN_INDEXED, the on-failure queue and the
// alarms; the tables and props it refuses; nothing of it without the prop.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cdk from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as firehose from 'aws-cdk-lib/aws-kinesisfirehose';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Checkpoint, DeleteMode, ExpiryEventsItem, ExpiryEventsMode, TtlSweeper, type ExpiryEventsOptions, type TtlSweeperProps } from '../src';
import { assetDir, env, logicalId, nagViolations, newStack, settingsUnlikeTheDefaults, statements } from './support';

const STREAM_ARN = `arn:aws:dynamodb:${env.region}:${env.account}:table/sessions/stream/2026-11-26T00:00:00.000`;
const TABLE_ARN = `arn:aws:dynamodb:${env.region}:${env.account}:table/sessions`;

/** A sweeper following the stream of `sessions`, imported by name with its stream ARN. */
function following(overrides: Partial<TtlSweeperProps> = {}, stack = newStack()) {
  const table = dynamodb.Table.fromTableAttributes(stack, 'Sessions', { tableName: 'sessions', tableStreamArn: STREAM_ARN });
  const sweeper = new TtlSweeper(stack, 'Sweeper', {
    table,
    code: lambda.Code.fromAsset(assetDir),
    tickSeconds: 1,
    followStream: true,
    ...overrides,
  });
  return { stack, sweeper, template: Template.fromStack(stack) };
}

/** A sweeper following the stream of a table created in the stack with `stream`. */
function followingCreated(stream: dynamodb.StreamViewType | undefined, overrides: Partial<TtlSweeperProps> = {}) {
  const stack = newStack();
  const table = new dynamodb.Table(stack, 'Table', {
    partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    stream,
  });
  // No GSI: the sweeper reads its own expiry index table.
  const sweeper = new TtlSweeper(stack, 'Sweeper', { table, code: lambda.Code.fromAsset(assetDir), followStream: true, ...overrides });
  return { stack, sweeper, template: Template.fromStack(stack) };
}

const resources = (template: Template, type: string) => Object.entries(template.findResources(type)) as [string, any][];
const mappingOf = (template: Template) => {
  const found = resources(template, 'AWS::Lambda::EventSourceMapping');
  assert.equal(found.length, 1);
  return found[0][1].Properties;
};

/** The environment variables of `fn`. */
const variables = (stack: cdk.Stack, fn: lambda.IFunction): Record<string, any> =>
  stack.resolve((fn.node.defaultChild as lambda.CfnFunction).environment).variables;

/** The actions of every statement of `role`'s policies, with the statement's Sid and resources. */
const grants = (template: Template, role: string) =>
  Object.entries(statements(template, logicalId(template, 'AWS::IAM::Role', role))).flatMap(([sid, st]) =>
    [st.Action].flat().map((action) => ({ sid, action: action as string, resource: JSON.stringify(st.Resource) })),
  );

const invalid = (make: () => unknown, message: RegExp) =>
  assert.throws(make, (e: Error) => {
    assert.match(e.message, /^TtlSweeper Test\/Sweeper: invalid props:/);
    assert.match(e.message, message);
    return true;
  });

// ---------------------------------------------------------------- off

test('without followStream: no second function, mapping, queue, role or alarm', () => {
  for (const followStream of [undefined, false]) {
    const stack = newStack();
    const table = dynamodb.Table.fromTableAttributes(stack, 'Sessions', { tableName: 'sessions', tableStreamArn: STREAM_ARN });
    const sweeper = new TtlSweeper(stack, 'Sweeper', { table, code: lambda.Code.fromAsset(assetDir), followStream });
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::Lambda::Function', 1);
    template.resourceCountIs('AWS::Lambda::EventSourceMapping', 0);
    template.resourceCountIs('AWS::SQS::Queue', 1);
    template.resourceCountIs('AWS::IAM::Role', 2); // the function's and the schedule's
    template.resourceCountIs('AWS::CloudWatch::Alarm', 5);
    template.resourceCountIs('AWS::DynamoDB::Table', 0);
    assert.equal(sweeper.indexTable, undefined);
    assert.equal(sweeper.streamFunction, undefined);
    assert.equal(sweeper.streamRole, undefined);
    assert.equal(sweeper.streamLogGroup, undefined);
    assert.equal(sweeper.streamEventSourceMapping, undefined);
    assert.equal(sweeper.streamFailureQueue, undefined);
    assert.doesNotMatch(JSON.stringify(template.toJSON()), /dynamodb:(GetRecords|UpdateItem)|\/stream\//);
    // The sweeper queries the table's GSI, as always.
    const vars = variables(stack, sweeper.function);
    assert.equal(vars.INDEX_NAME, 'expirationWindowIndex');
    assert.equal(vars.EXPIRY_INDEX_TABLE, undefined);
    const s = statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperRole'));
    assert.equal(s.QueryExpiryIndex.Action, 'dynamodb:Query');
    assert.equal(s.ReadExpiryIndex, undefined);
    assert.equal(s.RemoveIndexEntries, undefined);
  }
  // Nor is a stream needed.
  const stack = newStack();
  const table = dynamodb.Table.fromTableName(stack, 'T', 'sessions');
  assert.doesNotThrow(() => new TtlSweeper(stack, 'Sweeper', { table, code: lambda.Code.fromAsset(assetDir) }));
});

// ---------------------------------------------------------------- the expiry index table

test('the expiry index table: window and entry String keys, on-demand, native TTL on expires, destroyed with the stack', () => {
  const { sweeper, template } = following();
  template.resourceCountIs('AWS::DynamoDB::Table', 1);
  template.resourceCountIs('AWS::DynamoDB::GlobalTable', 0);
  const id = logicalId(template, 'AWS::DynamoDB::Table', 'SweeperExpiryIndex');
  const table = template.findResources('AWS::DynamoDB::Table')[id];
  assert.deepEqual(table.Properties, {
    KeySchema: [
      { AttributeName: 'window', KeyType: 'HASH' },
      { AttributeName: 'entry', KeyType: 'RANGE' },
    ],
    AttributeDefinitions: [
      { AttributeName: 'window', AttributeType: 'S' },
      { AttributeName: 'entry', AttributeType: 'S' },
    ],
    BillingMode: 'PAY_PER_REQUEST',
    TimeToLiveSpecification: { AttributeName: 'expires', Enabled: true },
  });
  // Derived data: `ttl-sweeper backfill` rebuilds it. No stream, no GSI, no replica.
  assert.equal(table.DeletionPolicy, 'Delete');
  assert.equal(table.UpdateReplacePolicy, 'Delete');
  assert.ok(sweeper.indexTable);
  assert.deepEqual(cdk.Stack.of(sweeper).resolve(sweeper.indexTable!.tableName), { Ref: id });
  // Its own whatever the application's table is: the same with a table created in the stack.
  const created = followingCreated(dynamodb.StreamViewType.NEW_IMAGE);
  const own = created.template.findResources('AWS::DynamoDB::Table')[logicalId(created.template, 'AWS::DynamoDB::Table', 'SweeperExpiryIndex')];
  assert.deepEqual(own.Properties, table.Properties);
  created.template.resourceCountIs('AWS::DynamoDB::Table', 2);
});

test('EXPIRY_INDEX_TABLE names the expiry index table for the sweepers and the stream indexer; no INDEX_NAME', () => {
  const { stack, sweeper, template } = following({ windowShards: 4, sweepers: 2 });
  const ref = { Ref: logicalId(template, 'AWS::DynamoDB::Table', 'SweeperExpiryIndex') };
  for (const fn of [...sweeper.functions, sweeper.streamFunction!]) {
    const vars = variables(stack, fn);
    assert.deepEqual(vars.EXPIRY_INDEX_TABLE, ref, fn.node.path);
    assert.equal(vars.INDEX_NAME, undefined, fn.node.path);
    assert.equal(vars.TABLE_NAME, 'sessions', fn.node.path);
  }
  assert.equal(sweeper.functions.length, 2);
});

// ---------------------------------------------------------------- the function

test('a second function from the same code, with the sweeper configuration but not the schedule settings', () => {
  const { stack, sweeper, template } = following({ ...settingsUnlikeTheDefaults(), windowAttribute: 'bucket' });
  template.resourceCountIs('AWS::Lambda::Function', 2);
  const fn = sweeper.streamFunction!;
  assert.ok(fn);
  assert.notEqual(fn, sweeper.function);
  const cfn = (f: lambda.Function) => {
    const c = f.node.defaultChild as lambda.CfnFunction;
    const keys = ['code', 'runtime', 'architectures', 'handler', 'memorySize', 'timeout', 'reservedConcurrentExecutions', 'loggingConfig', 'role', 'environment'] as const;
    return Object.fromEntries(keys.map((k) => [k, stack.resolve(c[k])])) as any;
  };
  const [stream, sweep] = [cfn(fn), cfn(sweeper.function)];
  // The same asset.
  assert.deepEqual(stream.code, sweep.code);
  assert.deepEqual([stream.runtime, stream.architectures, stream.handler, stream.memorySize], ['provided.al2023', ['arm64'], 'bootstrap', 256]);
  assert.equal(stream.timeout, 30);
  assert.equal(stream.reservedConcurrentExecutions, undefined);
  // The platform's per-invocation lines (INFO) left out; the sweeper's kept.
  assert.deepEqual(stream.loggingConfig, { logFormat: 'JSON', systemLogLevel: 'WARN', logGroup: { Ref: logicalId(template, 'AWS::Logs::LogGroup', 'SweeperStreamLogs') } });
  assert.equal(sweep.loggingConfig.systemLogLevel, undefined);
  assert.deepEqual(stream.role, { 'Fn::GetAtt': [logicalId(template, 'AWS::IAM::Role', 'SweeperStreamRole'), 'Arn'] });
  assert.deepEqual(stream.environment.variables, {
    TABLE_NAME: 'sessions',
    EXPIRY_INDEX_TABLE: { Ref: logicalId(template, 'AWS::DynamoDB::Table', 'SweeperExpiryIndex') },
    TTL_ATTRIBUTE: 'expiresAt',
    WINDOW_ATTRIBUTE: 'bucket',
    WINDOW_SECONDS: '300',
    WINDOW_SHARDS: '8',
    DELETE_MODE: 'conditional',
    MAX_CONCURRENCY: '16',
    MAX_RETRIES: '5',
    METRICS_NAMESPACE: 'Sweepers/Sessions',
  });
  // Each of those is the sweeper's own value.
  for (const [k, v] of Object.entries(stream.environment.variables)) assert.deepEqual(sweep.environment.variables[k], v, k);
  assert.equal(sweep.environment.variables.INDEX_NAME, undefined);
  // Not invoked asynchronously: no invoke configuration of its own.
  assert.equal(resources(template, 'AWS::Lambda::EventInvokeConfig').length, 1);
});

test('several sweepers: one stream indexer, reading every shard (no SHARD_RANGE)', () => {
  const { sweeper, stack, template } = following({ windowShards: 12, sweepers: 3 });
  template.resourceCountIs('AWS::Lambda::Function', 4);
  template.resourceCountIs('AWS::Lambda::EventSourceMapping', 1);
  const vars = stack.resolve((sweeper.streamFunction!.node.defaultChild as lambda.CfnFunction).environment).variables;
  assert.equal(vars.SHARD_RANGE, undefined);
  assert.equal(vars.WINDOW_SHARDS, '12');
});

// ---------------------------------------------------------------- the mapping

test('the mapping: LATEST, 100 records, no batching window, item failures reported, bisect, bounded retries and age, on-failure queue', () => {
  const { sweeper, template } = following();
  const m = mappingOf(template);
  assert.deepEqual(
    { ...m, FilterCriteria: undefined },
    {
      EventSourceArn: STREAM_ARN,
      FunctionName: { Ref: logicalId(template, 'AWS::Lambda::Function', 'SweeperStreamFunction') },
      StartingPosition: 'LATEST',
      BatchSize: 100,
      MaximumBatchingWindowInSeconds: 0,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: 10,
      MaximumRecordAgeInSeconds: 3600,
      DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [logicalId(template, 'AWS::SQS::Queue', 'SweeperStreamFailures'), 'Arn'] } } },
      FilterCriteria: undefined,
    },
  );
  assert.ok(sweeper.streamEventSourceMapping);
  // Created after the role may read the stream.
  const [, mapping] = resources(template, 'AWS::Lambda::EventSourceMapping')[0];
  assert.deepEqual(mapping.DependsOn, [logicalId(template, 'AWS::IAM::Policy', 'SweeperStreamPolicy')]);
});

/** Whether `record` matches `pattern`, for the pattern forms the filter uses. */
function matches(pattern: any, record: any): boolean {
  return Object.entries(pattern).every(([key, rule]) => {
    const value = record?.[key];
    if (!Array.isArray(rule)) return value !== undefined && typeof value === 'object' && matches(rule, value);
    return rule.some((r) => (r && typeof r === 'object' && 'exists' in r ? (value !== undefined) === r.exists : value === r));
  });
}

test('the filter keeps INSERT and MODIFY with a Number ttl, and drops the rest', () => {
  const check = (template: Template, ttl: string, window: string) => {
    const filters = mappingOf(template).FilterCriteria.Filters.map((f: any) => JSON.parse(f.Pattern));
    assert.equal(filters.length, 1);
    const kept = (eventName: string, image?: Record<string, unknown>) =>
      filters.some((p: any) => matches(p, { eventName, eventSource: 'aws:dynamodb', dynamodb: { Keys: { id: { S: 'a' } }, NewImage: image } }));
    const key = { id: { S: 'a' } };
    for (const name of ['INSERT', 'MODIFY']) {
      assert.ok(kept(name, { ...key, [ttl]: { N: '1900000000' } }), `${name} with a ttl`);
      assert.ok(kept(name, { ...key, [ttl]: { N: '1900000000' }, [window]: { S: '29999' } }), `${name} with a ttl and a window`);
      // The indexer never writes the item: a window alone (left by the writers) is nothing to it.
      assert.ok(!kept(name, { ...key, [window]: { S: '29999' } }), `${name} with a window alone`);
      assert.ok(!kept(name, { ...key }), `${name} with neither`);
      assert.ok(!kept(name, { ...key, [ttl]: { S: '1900000000' } }), `${name} with a String ttl`);
      assert.ok(!kept(name, { ...key, other: { N: '1' } }), `${name} with other attributes`);
    }
    assert.ok(!kept('REMOVE', undefined), 'REMOVE');
    assert.ok(!kept('REMOVE', { ...key, [ttl]: { N: '1900000000' } }), 'REMOVE, whatever its image');
  };
  check(following().template, 'ttl', 'expirationWindow');
  check(following({ ttlAttribute: 'expiresAt', windowAttribute: 'bucket' }).template, 'expiresAt', 'bucket');
});

// ---------------------------------------------------------------- IAM

test("the stream indexer's IAM: DescribeTable and DeleteItem on the table, packs and the writers' mark written to the index table, stream read on its stream, its logs and queue; nothing else", () => {
  const { template } = following();
  const role = logicalId(template, 'AWS::IAM::Role', 'SweeperStreamRole');
  const s = statements(template, role);
  assert.deepEqual(Object.keys(s).sort(), ['DeleteExpiredItems', 'DescribeTable', 'ReadTableStream', 'StreamFailures', 'WriteIndexEntries', 'WriteOwnLogs']);
  const tableArn = { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:dynamodb:${env.region}:${env.account}:table/sessions`]] };
  const indexArn = { 'Fn::GetAtt': [logicalId(template, 'AWS::DynamoDB::Table', 'SweeperExpiryIndex'), 'Arn'] };
  assert.equal(s.DescribeTable.Action, 'dynamodb:DescribeTable');
  assert.deepEqual(s.DescribeTable.Resource, tableArn);
  // Items written already expired, deleted as they are indexed: DeleteItem alone.
  assert.equal(s.DeleteExpiredItems.Action, 'dynamodb:DeleteItem');
  assert.deepEqual(s.DeleteExpiredItems.Resource, tableArn);
  assert.deepEqual(s.WriteIndexEntries.Action, ['dynamodb:DescribeTable', 'dynamodb:BatchWriteItem', 'dynamodb:PutItem']);
  assert.deepEqual(s.WriteIndexEntries.Resource, indexArn);
  assert.deepEqual(s.ReadTableStream.Action, ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:ListStreams']);
  assert.equal(s.ReadTableStream.Resource, STREAM_ARN);
  assert.deepEqual(s.WriteOwnLogs.Resource, { 'Fn::GetAtt': [logicalId(template, 'AWS::Logs::LogGroup', 'SweeperStreamLogs'), 'Arn'] });
  assert.equal(s.StreamFailures.Action, 'sqs:SendMessage');
  assert.deepEqual(s.StreamFailures.Resource, { 'Fn::GetAtt': [logicalId(template, 'AWS::SQS::Queue', 'SweeperStreamFailures'), 'Arn'] });
  for (const st of Object.values(s)) assert.equal(st.Effect, 'Allow');
  // One policy, no managed policies, no wildcard.
  const policies = resources(template, 'AWS::IAM::Policy').filter(([, p]) => JSON.stringify(p.Properties.Roles).includes(`"${role}"`));
  assert.equal(policies.length, 1);
  assert.equal(template.findResources('AWS::IAM::Role')[role].Properties.ManagedPolicyArns, undefined);
  assert.doesNotMatch(JSON.stringify(policies[0][1].Properties.PolicyDocument), /\*/);

  // Whatever the settings (expiry events aside), the indexer never puts, updates or reads an item
  // of the application's table: it deletes items there, its one write, and writes packs and its
  // mark into the index table only.
  const leased = { checkpoint: Checkpoint.newTable(), leaderLease: cdk.Duration.seconds(10) };
  for (const props of [{}, { deleteMode: DeleteMode.CONDITIONAL }, { checkpoint: Checkpoint.newTable() }, leased, { windowShards: 4, sweepers: 2 }]) {
    const built = following(props);
    const actions = grants(built.template, 'SweeperStreamRole');
    const builtIndexArn = { 'Fn::GetAtt': [logicalId(built.template, 'AWS::DynamoDB::Table', 'SweeperExpiryIndex'), 'Arn'] };
    const names = new Map([[JSON.stringify(tableArn), 'table'], [JSON.stringify(builtIndexArn), 'index table'], [JSON.stringify(STREAM_ARN), 'stream']]);
    const dynamo = actions.filter((g) => g.action.startsWith('dynamodb:')).map((g) => `${g.sid} ${g.action} ${names.get(g.resource) ?? g.resource}`).sort();
    assert.deepEqual(dynamo, [
      'DeleteExpiredItems dynamodb:DeleteItem table',
      'DescribeTable dynamodb:DescribeTable table',
      'ReadTableStream dynamodb:DescribeStream stream',
      'ReadTableStream dynamodb:GetRecords stream',
      'ReadTableStream dynamodb:GetShardIterator stream',
      'ReadTableStream dynamodb:ListStreams stream',
      'WriteIndexEntries dynamodb:BatchWriteItem index table',
      'WriteIndexEntries dynamodb:DescribeTable index table',
      'WriteIndexEntries dynamodb:PutItem index table',
    ], JSON.stringify(Object.keys(props)));
    for (const forbidden of ['UpdateItem', 'PutItem', 'BatchGetItem', 'GetItem', 'Query', 'Scan']) {
      // WriteIndexEntries is on the index table alone (above): its PutItem is the writers' mark.
      assert.ok(!actions.some((g) => g.action === `dynamodb:${forbidden}` && g.sid !== 'WriteIndexEntries'), forbidden);
    }
  }

  // Across the stack: no stream read on anything but this stream, and the sweeper's role reads no
  // stream and writes the index table only by BatchWriteItem (to remove entries).
  const all = resources(template, 'AWS::IAM::Policy').flatMap(([, p]) => p.Properties.PolicyDocument.Statement as any[]);
  for (const st of all) {
    const actions = [st.Action].flat();
    if (actions.some((a: string) => /^dynamodb:(DescribeStream|GetRecords|GetShardIterator|ListStreams)$/.test(a))) {
      assert.equal(st.Resource, STREAM_ARN, JSON.stringify(st));
      assert.equal(st.Sid, 'ReadTableStream');
    }
    assert.ok(!actions.includes('dynamodb:UpdateItem'), JSON.stringify(st));
  }
  assert.equal(all.filter((st) => st.Sid === 'ReadTableStream').length, 1);
  assert.ok(!JSON.stringify(statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperRole'))).includes('GetRecords'));
});

test("the sweeper's IAM with followStream: no Query on the table or its indexes; the index table read and its entries removed", () => {
  const tableArn = JSON.stringify({ 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:dynamodb:${env.region}:${env.account}:table/sessions`]] });
  for (const [props, confirm] of [
    [{}, true],
    [{ deleteMode: DeleteMode.CONDITIONAL }, false],
    [{ windowShards: 4, sweepers: 2 }, true],
  ] as [Partial<TtlSweeperProps>, boolean][]) {
    const { sweeper, template } = following(props);
    const indexArn = JSON.stringify({ 'Fn::GetAtt': [logicalId(template, 'AWS::DynamoDB::Table', 'SweeperExpiryIndex'), 'Arn'] });
    const roles = Object.keys(template.findResources('AWS::IAM::Role')).filter((id) => /^Sweeper(Sweeper\d+)?Role/.test(id));
    assert.equal(roles.length, sweeper.functions.length);
    for (const role of roles) {
      const actions = grants(template, role)
        .filter((g) => g.action.startsWith('dynamodb:'))
        .map((g) => `${g.sid} ${g.action} ${g.resource === tableArn ? 'table' : g.resource === indexArn ? 'index table' : g.resource}`)
        .sort();
      assert.deepEqual(actions, [
        ...(confirm ? ['ConfirmKeysInTable dynamodb:BatchGetItem table'] : []),
        'DeleteExpiredItems dynamodb:BatchWriteItem table',
        'DeleteExpiredItems dynamodb:DeleteItem table',
        'DeleteExpiredItems dynamodb:DescribeTable table',
        'ReadExpiryIndex dynamodb:DescribeTable index table',
        'ReadExpiryIndex dynamodb:Query index table',
        'RemoveIndexEntries dynamodb:BatchWriteItem index table',
      ], `${role} ${JSON.stringify(props)}`);
      assert.doesNotMatch(JSON.stringify(statements(template, role)), /\/index\//, role);
    }
  }
  // With a checkpoint and a lease, their grants as always, on the checkpoint table.
  const { template } = following({ checkpoint: Checkpoint.newTable(), leaderLease: cdk.Duration.seconds(10) });
  const s = statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperRole'));
  assert.deepEqual(s.Checkpoint.Action, ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DescribeTable']);
  assert.deepEqual(s.Checkpoint.Resource, { 'Fn::GetAtt': [logicalId(template, 'AWS::DynamoDB::Table', 'SweeperCheckpoint'), 'Arn'] });
  assert.ok(s.ReadExpiryIndex && s.RemoveIndexEntries && !s.QueryExpiryIndex);
});

test("expiry events: the stream indexer publishes those of the items it deletes as the sweeper does, with its settings and grants: the sink, and the table read in any mode", () => {
  const cases: { what: string; sink: (stack: cdk.Stack) => ExpiryEventsOptions; props: Partial<TtlSweeperProps>; sids: string[]; mode: string; item?: string }[] = [
    {
      what: 'a bus, notify',
      sink: (stack) => ({ eventBus: events.EventBus.fromEventBusName(stack, 'Bus', 'default') }),
      props: {},
      sids: ['ExpiryEventsPutEvents'],
      mode: 'notify',
    },
    {
      what: 'a KMS-encrypted queue, archive, items read',
      sink: (stack) => ({
        queue: new sqs.Queue(stack, 'Expiries', { encryption: sqs.QueueEncryption.KMS, enforceSSL: true }),
        mode: ExpiryEventsMode.ARCHIVE,
        item: ExpiryEventsItem.READ,
      }),
      props: { deleteMode: DeleteMode.CONDITIONAL },
      sids: ['ExpiryEventsQueueKey', 'ExpiryEventsSendMessage'],
      mode: 'archive',
      item: 'read',
    },
    {
      what: 'a delivery stream, no item',
      sink: (stack) => ({ deliveryStream: firehose.DeliveryStream.fromDeliveryStreamName(stack, 'Archive', 'expired-items'), item: ExpiryEventsItem.OFF }),
      props: { deleteMode: DeleteMode.CONDITIONAL },
      sids: ['ExpiryEventsPutRecords'],
      mode: 'notify',
      item: 'off',
    },
  ];
  for (const { what, sink, props, sids, mode, item } of cases) {
    const stack = newStack();
    const { sweeper, template } = following({ expiryEvents: sink(stack), ...props }, stack);
    // The sweeper's EXPIRY_EVENTS, EXPIRY_EVENTS_MODE and EXPIRY_EVENTS_ITEM (those it has).
    const [stream, sweep] = [variables(stack, sweeper.streamFunction!), variables(stack, sweeper.function)];
    const eventVariables = (vars: Record<string, any>) => Object.fromEntries(Object.entries(vars).filter(([k]) => k.startsWith('EXPIRY_EVENTS')));
    assert.ok(sweep.EXPIRY_EVENTS, what);
    assert.deepEqual(eventVariables(stream), eventVariables(sweep), what);
    assert.deepEqual([stream.EXPIRY_EVENTS_MODE, stream.EXPIRY_EVENTS_ITEM], [mode, item], what);
    // The sweeper's statements for the events, the same for both roles: the sink, and
    // BatchGetItem on the table whatever the mode (a delete whose answer was lost is settled by a
    // read, by either function).
    const ofRole = (role: string) =>
      Object.fromEntries(Object.entries(statements(template, logicalId(template, 'AWS::IAM::Role', role))).filter(([sid]) => sid.startsWith('ExpiryEvents')));
    const [indexer, sweeping] = [ofRole('SweeperStreamRole'), ofRole('SweeperRole')];
    assert.deepEqual(Object.keys(indexer).sort(), [...sids, 'ExpiryEventsReadItems'].sort(), what);
    assert.deepEqual(Object.keys(sweeping).sort(), Object.keys(indexer).sort(), what);
    for (const sid of Object.keys(indexer)) assert.deepEqual(indexer[sid], sweeping[sid], `${what}: ${sid}`);
    assert.equal(indexer.ExpiryEventsReadItems.Action, 'dynamodb:BatchGetItem');
    assert.deepEqual(indexer.ExpiryEventsReadItems.Resource, statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperStreamRole')).DeleteExpiredItems.Resource);
  }
  // Without expiry events, none of their settings or grants.
  const { stack, sweeper, template } = following();
  assert.deepEqual(Object.keys(variables(stack, sweeper.streamFunction!)).filter((k) => k.startsWith('EXPIRY_EVENTS')), []);
  assert.deepEqual(Object.keys(statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperStreamRole'))).filter((sid) => sid.startsWith('ExpiryEvents')), []);
});

test('DELETE_WHEN_INDEXED=false for the stream indexer with a leader lease only: its function holds no lease', () => {
  const leased = following({ checkpoint: Checkpoint.newTable(), leaderLease: cdk.Duration.seconds(10) });
  assert.equal(variables(leased.stack, leased.sweeper.streamFunction!).DELETE_WHEN_INDEXED, 'false');
  assert.equal(variables(leased.stack, leased.sweeper.streamFunction!).LEADER_LEASE, undefined);
  // The sweeper holds the lease and deletes as always; the indexer deletes by default (true).
  assert.equal(variables(leased.stack, leased.sweeper.function).DELETE_WHEN_INDEXED, undefined);
  for (const props of [{}, { checkpoint: Checkpoint.newTable() }, { windowShards: 4, sweepers: 2 }]) {
    const { stack, sweeper } = following(props);
    for (const fn of [sweeper.streamFunction!, ...sweeper.functions]) {
      assert.equal(variables(stack, fn).DELETE_WHEN_INDEXED, undefined, `${fn.node.path} ${JSON.stringify(Object.keys(props))}`);
    }
  }
});

test('a table created in the stack: its stream ARN for the mapping and the policy', () => {
  const { template } = followingCreated(dynamodb.StreamViewType.NEW_IMAGE);
  const table = logicalId(template, 'AWS::DynamoDB::Table', 'Table');
  const streamArn = { 'Fn::GetAtt': [table, 'StreamArn'] };
  assert.deepEqual(mappingOf(template).EventSourceArn, streamArn);
  const s = statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperStreamRole'));
  assert.deepEqual(s.ReadTableStream.Resource, streamArn);
  assert.deepEqual(s.DescribeTable.Resource, { 'Fn::GetAtt': [table, 'Arn'] });
  // The table has no GSI, and none is asked of it.
  assert.equal(template.findResources('AWS::DynamoDB::Table')[table].Properties.GlobalSecondaryIndexes, undefined);
});

test('a table encrypted with a customer managed key: the key for the stream indexer too, through DynamoDB only', () => {
  const stack = newStack();
  const key = new kms.Key(stack, 'Key', { enableKeyRotation: true });
  const { template } = following({ table: dynamodb.Table.fromTableAttributes(stack, 'Enc', { tableName: 'sessions', tableStreamArn: STREAM_ARN, encryptionKey: key }) }, stack);
  const s = statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperStreamRole'));
  assert.deepEqual(s.TableKey.Resource, { 'Fn::GetAtt': [logicalId(template, 'AWS::KMS::Key', 'Key'), 'Arn'] });
  assert.deepEqual(s.TableKey.Condition, { StringEquals: { 'kms:ViaService': `dynamodb.${env.region}.amazonaws.com` } });
  // The stream read, and the items it reads and deletes: what the sweeper's deletes need of the key.
  assert.deepEqual(s.TableKey, statements(template, logicalId(template, 'AWS::IAM::Role', 'SweeperRole')).TableKey);
});

// ---------------------------------------------------------------- queue and alarm

test('the on-failure queue: SSE-SQS, TLS only, 14 days', () => {
  const { sweeper, template } = following();
  const id = logicalId(template, 'AWS::SQS::Queue', 'SweeperStreamFailures');
  assert.ok(sweeper.streamFailureQueue);
  assert.deepEqual(template.findResources('AWS::SQS::Queue')[id].Properties, { MessageRetentionPeriod: 1209600, SqsManagedSseEnabled: true });
  const [, policy] = resources(template, 'AWS::SQS::QueuePolicy').find(([, p]) => JSON.stringify(p.Properties.Queues).includes(id))!;
  assert.deepEqual(policy.Properties.PolicyDocument.Statement, [
    {
      Action: 'sqs:*',
      Condition: { Bool: { 'aws:SecureTransport': 'false' } },
      Effect: 'Deny',
      Principal: { AWS: '*' },
      Resource: { 'Fn::GetAtt': [id, 'Arn'] },
    },
  ]);
});

test('an IteratorAge alarm and one on the on-failure queue notify the alarm topic; none with alarms off', () => {
  const { sweeper, template } = following({ alarms: { lagThreshold: cdk.Duration.seconds(30) } });
  const alarm = resources(template, 'AWS::CloudWatch::Alarm').map(([, a]) => a.Properties).find((a) => a.MetricName === 'IteratorAge');
  assert.ok(alarm);
  assert.deepEqual(
    { ...alarm, AlarmDescription: undefined },
    {
      AlarmDescription: undefined,
      Namespace: 'AWS/Lambda',
      MetricName: 'IteratorAge',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: logicalId(template, 'AWS::Lambda::Function', 'SweeperStreamFunction') } }],
      Statistic: 'Maximum',
      Period: 60,
      EvaluationPeriods: 3,
      DatapointsToAlarm: 3,
      Threshold: 30000, // alarms.lagThreshold, in milliseconds
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
      AlarmActions: [{ Ref: logicalId(template, 'AWS::SNS::Topic', 'SweeperAlarms') }],
    },
  );
  assert.equal(sweeper.alarms.length, 7);
  assert.equal(following().template.toJSON().Resources[Object.keys(following().template.findResources('AWS::CloudWatch::Alarm')).find((id) => id.startsWith('SweeperStreamIteratorAge'))!].Properties.Threshold, 120000);
  // A record in the on-failure queue: one is enough to alarm.
  const failedAlarm = Object.values(following().template.findResources('AWS::CloudWatch::Alarm')).find(
    (a: any) => a.Properties.MetricName === 'ApproximateNumberOfMessagesVisible',
  ) as any;
  assert.equal(failedAlarm.Properties.Namespace, 'AWS/SQS');
  assert.equal(failedAlarm.Properties.Threshold, 0);
  assert.equal(failedAlarm.Properties.EvaluationPeriods, 1);
  assert.deepEqual(failedAlarm.Properties.Dimensions, [
    { Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalId(following().template, 'AWS::SQS::Queue', 'SweeperStreamFailures'), 'QueueName'] } },
  ]);

  const off = following({ alarms: { enabled: false } });
  off.template.resourceCountIs('AWS::CloudWatch::Alarm', 0);
  assert.deepEqual(off.sweeper.alarms, []);
  off.template.resourceCountIs('AWS::Lambda::EventSourceMapping', 1);
});

// ---------------------------------------------------------------- cdk-nag

test('cdk-nag AwsSolutions finds nothing unacknowledged with followStream', () => {
  assert.deepEqual(nagViolations(following().stack), []);
  assert.deepEqual(nagViolations(following({ sweepers: 2, windowShards: 4, checkpoint: Checkpoint.newTable() }).stack), []);
  assert.deepEqual(nagViolations(followingCreated(dynamodb.StreamViewType.NEW_AND_OLD_IMAGES).stack), []);
  // With expiry events, the indexer's grants for them too.
  const stack = newStack();
  const queue = sqs.Queue.fromQueueAttributes(stack, 'Expiries', {
    queueArn: `arn:aws:sqs:${env.region}:${env.account}:expiries`,
    keyArn: `arn:aws:kms:${env.region}:${env.account}:key/11111111-2222-3333-4444-555555555555`,
  });
  assert.deepEqual(nagViolations(following({ expiryEvents: { queue, mode: ExpiryEventsMode.ARCHIVE }, deleteMode: DeleteMode.CONDITIONAL }, stack).stack), []);
});

// ---------------------------------------------------------------- refusals

test('a table whose stream the indexer cannot follow stops synthesis, saying what to enable', () => {
  // Imported without its stream ARN.
  invalid(() => following({ table: dynamodb.Table.fromTableName(newStack(), 'T', 'sessions') }),
    /followStream needs the table's stream ARN: import the table with Table\.fromTableAttributes\(scope, id, \{ tableName, tableStreamArn \}\)/);
  invalid(() => following({ table: dynamodb.TableV2.fromTableAttributes(newStack(), 'T', { tableArn: TABLE_ARN }) }), /tableStreamArn/);
  // Created without a stream, or with one that lacks the new image.
  invalid(() => followingCreated(undefined), /followStream needs a stream on the table: set its stream to StreamViewType\.NEW_IMAGE or StreamViewType\.NEW_AND_OLD_IMAGES/);
  invalid(() => followingCreated(dynamodb.StreamViewType.KEYS_ONLY),
    /followStream needs the new image in the table's stream records, but its stream view is KEYS_ONLY: set the table's stream to StreamViewType\.NEW_IMAGE or StreamViewType\.NEW_AND_OLD_IMAGES/);
  invalid(() => followingCreated(dynamodb.StreamViewType.OLD_IMAGE), /its stream view is OLD_IMAGE/);
  assert.doesNotThrow(() => followingCreated(dynamodb.StreamViewType.NEW_IMAGE));
  assert.doesNotThrow(() => followingCreated(dynamodb.StreamViewType.NEW_AND_OLD_IMAGES));

  // TableV2: dynamoStream.
  const v2 = (dynamoStream?: dynamodb.StreamViewType) => () => {
    const stack = newStack();
    const table = new dynamodb.TableV2(stack, 'Table', { partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING }, dynamoStream });
    TtlSweeper.addExpirationIndex(table);
    return new TtlSweeper(stack, 'Sweeper', { table, code: lambda.Code.fromAsset(assetDir), followStream: true });
  };
  invalid(v2(undefined), /followStream needs a stream on the table: set its dynamoStream to StreamViewType\.NEW_IMAGE/);
  invalid(v2(dynamodb.StreamViewType.KEYS_ONLY), /its stream view is KEYS_ONLY: set the table's dynamoStream/);
  assert.doesNotThrow(v2(dynamodb.StreamViewType.NEW_IMAGE));

  // The indexer reads every shard: a layout whose every sweep would read too many partitions.
  invalid(() => following({ windowSeconds: 1, windowShards: 300, sweepers: 30, lookbackWindows: 70 }),
    /followStream with windowSeconds=1 and windowShards=300: the stream indexer, which reads every shard, would fail its start-up check \(71 windows of 300 shards are 21300 partitions, more than 20000\)/);
  assert.doesNotThrow(() => following({ windowSeconds: 60, windowShards: 1000, sweepers: 50 }));

  // Reported with the other problems.
  assert.throws(() => following({ table: dynamodb.Table.fromTableName(newStack(), 'T', 'sessions'), windowSeconds: 0 }), (e: Error) => {
    assert.equal(e.message.split('\n').filter((l) => l.startsWith('  - ')).length, 2, e.message);
    return true;
  });
});

test('indexName with followStream stops synthesis: the expiry index table replaces the GSI', () => {
  for (const indexName of ['byExpiry', 'expirationWindowIndex']) {
    invalid(() => following({ indexName }),
      new RegExp(`indexName \\("${indexName}"\\) cannot be used with followStream: the expiry index table the construct creates replaces the table's GSI`));
  }
  invalid(() => followingCreated(dynamodb.StreamViewType.NEW_IMAGE, { indexName: 'byExpiry' }), /replaces the table's GSI/);
  // Without followStream, as always.
  assert.doesNotThrow(() => following({ indexName: 'byExpiry', followStream: false }));
  // A table that has the GSI anyway is followed as well: it is not used.
  const stack = newStack();
  const table = new dynamodb.Table(stack, 'Table', {
    partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
    stream: dynamodb.StreamViewType.NEW_IMAGE,
  });
  TtlSweeper.addExpirationIndex(table);
  assert.doesNotThrow(() => new TtlSweeper(stack, 'Sweeper', { table, code: lambda.Code.fromAsset(assetDir), followStream: true }));
});
