// One sweeper for several tables (`tables`): one function and schedule, `TABLES` listing each
// table with only what its entry sets, grants per table (its own ARN and index), alarms and
// dashboard rows per table on the `TableName` dimension, and the props that refuse `tables`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cdk from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DeleteMode, ExpiryEventsItem, ExpiryEventsMode, type SweptTable, type TtlSweeperProps } from '../src';
import { ALARMS_DOC_URL } from '../src/alarms';
import { env, logicalId, nagViolations, newStack, statements, synth } from './support';

const arn = (name: string) => `arn:aws:dynamodb:${env.region}:${env.account}:table/${name}`;
const BUS = `arn:aws:events:${env.region}:${env.account}:event-bus/expired-carts`;

/** `orders`, `sessions` and `carts`, imported by ARN, in `stack`. */
function importTables(stack: cdk.Stack) {
  const table = (name: string) => dynamodb.Table.fromTableAttributes(stack, `Table-${name}`, { tableArn: arn(name) });
  return { orders: table('orders'), sessions: table('sessions'), carts: table('carts') };
}

/** A sweeper of `entries` (made from the stack's imported tables), without `table`. */
function synthTables(entries: (t: ReturnType<typeof importTables>, stack: cdk.Stack) => SweptTable[], props: Partial<TtlSweeperProps> = {}) {
  const stack = newStack();
  return synth({ table: undefined, tables: entries(importTables(stack), stack), ...props }, stack);
}

/** Three tables: one as the sweeper's settings, one with its own layout, one with its own events. */
const threeTables = (t: ReturnType<typeof importTables>, stack: cdk.Stack): SweptTable[] => [
  { table: t.orders },
  { table: t.sessions, indexName: 'byExpiry', windowSeconds: 300, windowShards: 4, deleteMode: DeleteMode.CONDITIONAL },
  {
    table: t.carts,
    ttlAttribute: 'expiresAt',
    windowAttribute: 'bucket',
    lookbackWindows: 30,
    maxConcurrency: 32,
    maxRetries: 3,
    expiryEvents: { eventBus: events.EventBus.fromEventBusArn(stack, 'Bus', BUS), item: ExpiryEventsItem.READ },
  },
];

const variables = (built: ReturnType<typeof synth>, fn = built.sweeper.function) =>
  built.stack.resolve((fn.node.defaultChild as lambda.CfnFunction).environment).variables as Record<string, any>;

test('three tables: one function and one schedule, TABLES listing each with only what its entry sets', () => {
  const built = synthTables(threeTables, { tickSeconds: undefined });
  built.template.resourceCountIs('AWS::Lambda::Function', 1);
  built.template.resourceCountIs('AWS::Scheduler::Schedule', 1);
  const vars = variables(built);
  assert.equal(vars.TABLE_NAME, undefined, 'every table is in TABLES');
  assert.equal(typeof vars.TABLES, 'string', 'known table names make a plain JSON string');
  assert.deepEqual(JSON.parse(vars.TABLES), [
    { TABLE_NAME: 'orders' },
    { TABLE_NAME: 'sessions', INDEX_NAME: 'byExpiry', WINDOW_SECONDS: '300', WINDOW_SHARDS: '4', DELETE_MODE: 'conditional' },
    {
      TABLE_NAME: 'carts',
      TTL_ATTRIBUTE: 'expiresAt',
      WINDOW_ATTRIBUTE: 'bucket',
      LOOKBACK_WINDOWS: '30',
      MAX_CONCURRENCY: '32',
      MAX_RETRIES: '3',
      EXPIRY_EVENTS: `eventbridge:${BUS}`,
      EXPIRY_EVENTS_MODE: 'notify',
      EXPIRY_EVENTS_ITEM: 'read',
    },
  ]);
  // The function-wide settings stay in their own variables, for the entries that leave them out.
  assert.deepEqual(
    [vars.INDEX_NAME, vars.TTL_ATTRIBUTE, vars.WINDOW_ATTRIBUTE, vars.WINDOW_SECONDS, vars.WINDOW_SHARDS, vars.DELETE_MODE],
    ['expirationWindowIndex', 'ttl', 'expirationWindow', '60', '1', 'batch'],
  );
  assert.equal(vars.EXPIRY_EVENTS, undefined, 'no function-wide sink');
  assert.equal(vars.SHARD_RANGE, undefined);
  assert.deepEqual(built.sweeper.tables.map((t) => t.tableName), ['orders', 'sessions', 'carts']);
  assert.equal(built.sweeper.table.tableName, 'orders', 'table is the first of tables');
});

test('function-wide settings are what the entries fall back to; an entry overrides only its own', () => {
  const built = synthTables((t) => [{ table: t.orders }, { table: t.sessions, windowShards: 2 }], {
    windowShards: 8,
    deleteMode: DeleteMode.CONDITIONAL,
  });
  const vars = variables(built);
  assert.deepEqual(JSON.parse(vars.TABLES), [{ TABLE_NAME: 'orders' }, { TABLE_NAME: 'sessions', WINDOW_SHARDS: '2' }]);
  assert.equal(vars.WINDOW_SHARDS, '8');
  assert.equal(vars.DELETE_MODE, 'conditional');
  // Conditional deletes for both: no re-read of stale keys on either table.
  const s = statements(built.template, logicalId(built.template, 'AWS::IAM::Role', 'SweeperRole'));
  assert.equal(s.ConfirmKeysInTable, undefined);
});

test("IAM: each table's actions on that table and its own index only, no wildcard", () => {
  const built = synthTables(threeTables);
  const s = statements(built.template, logicalId(built.template, 'AWS::IAM::Role', 'SweeperRole'));
  assert.deepEqual(s.QueryExpiryIndex.Resource, [
    `${arn('orders')}/index/expirationWindowIndex`,
    `${arn('sessions')}/index/byExpiry`,
    `${arn('carts')}/index/expirationWindowIndex`,
  ]);
  assert.deepEqual(s.DeleteExpiredItems.Resource, [arn('orders'), arn('sessions'), arn('carts')]);
  // Batch deletes re-read stale keys: orders and carts (the default), not sessions (conditional).
  assert.deepEqual(s.ConfirmKeysInTable.Resource, [arn('orders'), arn('carts')]);
  // carts' events: its bus, and a read of its own items only (the other tables have no events).
  assert.deepEqual(s.ExpiryEventsPutEvents.Resource, BUS);
  assert.deepEqual(s.ExpiryEventsReadItems.Resource, arn('carts'));
  for (const [sid, st] of Object.entries(s)) {
    const resources = [st.Resource].flat().map((r) => JSON.stringify(r));
    assert.ok(!resources.some((r) => r.includes('*')), `${sid}: ${resources}`);
    const actions = [st.Action].flat();
    // A table's writes and reads are on table ARNs only; the query on index ARNs only.
    if (actions.some((a) => /^dynamodb:(BatchWriteItem|DeleteItem|BatchGetItem)$/.test(String(a)))) {
      assert.ok([st.Resource].flat().every((r) => [arn('orders'), arn('sessions'), arn('carts')].includes(r as string)), sid);
    }
    if (actions.includes('dynamodb:Query')) {
      assert.ok([st.Resource].flat().every((r) => /\/index\//.test(r as string)), sid);
    }
  }
  assert.deepEqual(Object.keys(s).sort(), [
    'DeleteExpiredItems', 'ExpiryEventsPutEvents', 'ExpiryEventsReadItems', 'QueryExpiryIndex', 'ConfirmKeysInTable',
    'WriteOwnLogs', '["sqs:SendMessage","sqs:GetQueueAttributes","sqs:GetQueueUrl"]',
  ].sort());
});

test("events: an entry's sink replaces the function-wide one for that table; each sink and read granted once", () => {
  const stack = newStack();
  const t = importTables(stack);
  const shared = events.EventBus.fromEventBusArn(stack, 'Shared', `arn:aws:events:${env.region}:${env.account}:event-bus/shared`);
  const own = events.EventBus.fromEventBusArn(stack, 'Own', BUS);
  const built = synth({
    table: undefined,
    expiryEvents: { eventBus: shared, mode: ExpiryEventsMode.ARCHIVE },
    deleteMode: DeleteMode.CONDITIONAL,
    tables: [{ table: t.orders }, { table: t.sessions }, { table: t.carts, expiryEvents: { eventBus: own } }],
  }, stack);
  const vars = variables(built);
  assert.equal(vars.EXPIRY_EVENTS, `eventbridge:${shared.eventBusArn}`);
  assert.equal(vars.EXPIRY_EVENTS_MODE, 'archive');
  assert.deepEqual(JSON.parse(vars.TABLES)[2], { TABLE_NAME: 'carts', EXPIRY_EVENTS: `eventbridge:${BUS}`, EXPIRY_EVENTS_MODE: 'notify' });
  const s = statements(built.template, logicalId(built.template, 'AWS::IAM::Role', 'SweeperRole'));
  assert.deepEqual(s.ExpiryEventsPutEvents.Resource, [shared.eventBusArn, BUS]);
  // Each table with expiry events may be read, whatever its mode: archive mode reads again what it
  // could not delete (orders, sessions), and either mode settles a delete whose answer was lost
  // (carts, in notify mode, too). One statement lists them.
  assert.deepEqual(s.ExpiryEventsReadItems.Resource, [arn('orders'), arn('sessions'), arn('carts')]);
});

test('a table created in the stack: TABLES joins its name, the role gets its ARN', () => {
  const stack = newStack();
  const created = new dynamodb.Table(stack, 'Created', { partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING } });
  const t = importTables(stack);
  const built = synth({ table: undefined, tables: [{ table: t.orders }, { table: created, windowShards: 2 }] }, stack);
  const tables = variables(built).TABLES;
  const createdId = logicalId(built.template, 'AWS::DynamoDB::Table', 'Created');
  assert.ok(tables['Fn::Join'], JSON.stringify(tables));
  // The joined string, with the table's Ref in place of its name, is the JSON the function reads.
  const joined = tables['Fn::Join'][1].map((p: any) => (typeof p === 'string' ? p : p.Ref === createdId ? 'created-name' : '?')).join('');
  assert.deepEqual(JSON.parse(joined), [{ TABLE_NAME: 'orders' }, { TABLE_NAME: 'created-name', WINDOW_SHARDS: '2' }]);
  const s = statements(built.template, logicalId(built.template, 'AWS::IAM::Role', 'SweeperRole'));
  assert.deepEqual(s.DeleteExpiredItems.Resource, [arn('orders'), { 'Fn::GetAtt': [createdId, 'Arn'] }]);
});

test('alarms: the function error alarm once, failed items, lag, items left and silence for each table on its TableName', () => {
  const built = synthTables(threeTables);
  const alarms = Object.values(built.template.findResources('AWS::CloudWatch::Alarm')).map((a: any) => a.Properties);
  assert.equal(alarms.length, 1 + 3 * 4);
  assert.equal(alarms.filter((a) => a.MetricName === 'Errors').length, 1);
  for (const metric of ['ItemsFailed', 'MaxExpiryLagSeconds', 'ItemsLeft', 'WindowsSwept']) {
    const tables = alarms
      .filter((a) => a.MetricName === metric)
      .map((a) => {
        assert.equal(a.Namespace, 'TtlSweeper');
        assert.equal(a.Dimensions.length, 1);
        assert.equal(a.Dimensions[0].Name, 'TableName');
        return a.Dimensions[0].Value;
      });
    assert.deepEqual(tables, ['orders', 'sessions', 'carts'], metric);
  }
  const described = alarms.filter((a) => a.MetricName === 'ItemsFailed').map((a) => a.AlarmDescription);
  assert.deepEqual(
    described,
    ['orders', 'sessions', 'carts'].map((n) => `ttl-sweeper could not delete some expired items (table ${n}). What to check and do: ${ALARMS_DOC_URL}#itemsfailed`),
  );
  // The first table keeps a single table's ids; the others are under Table2, Table3.
  const ids = Object.keys(built.template.findResources('AWS::CloudWatch::Alarm'));
  assert.ok(ids.some((id) => id.startsWith('SweeperItemsFailed')), ids.join());
  assert.ok(ids.some((id) => id.startsWith('SweeperTable2ItemsFailed')), ids.join());
  assert.ok(ids.some((id) => id.startsWith('SweeperTable3SweeperSilent')), ids.join());
  // Every alarm notifies the topic.
  assert.ok(alarms.every((a) => a.AlarmActions?.length === 1));
});

test('dashboard: a row of items and lag for each table, titled by its name, and what each left', () => {
  const built = synthTables(threeTables);
  const [dashboard] = Object.values(built.template.findResources('AWS::CloudWatch::Dashboard')) as any[];
  const body = JSON.parse(built.stack.resolve(dashboard.Properties.DashboardBody)['Fn::Join'][1].map((p: any) => (typeof p === 'string' ? p : 'x')).join(''));
  const titles = body.widgets.map((w: any) => w.properties.title);
  assert.deepEqual(titles, [
    'Items deleted / skipped / gone / failed: orders', 'Expiry lag (s): orders',
    'Items deleted / skipped / gone / failed: sessions', 'Expiry lag (s): sessions',
    'Items deleted / skipped / gone / failed: carts', 'Expiry lag (s): carts',
    'Invocations and errors', 'Left for the next sweep',
  ]);
  const left = body.widgets[7].properties.metrics;
  assert.deepEqual(left.map((m: any[]) => m.slice(0, 4)), ['orders', 'sessions', 'carts'].map((n) => ['TtlSweeper', 'ItemsLeft', 'TableName', n]));
  const lag = body.widgets[3].properties.metrics;
  assert.ok(lag.every((m: any[]) => m[3] === 'sessions'), JSON.stringify(lag));
});

test('tableMetric: a metric of one of the tables; another table is refused', () => {
  const { stack, sweeper } = synthTables(threeTables);
  const metric = sweeper.tableMetric(sweeper.tables[1], 'ItemsDeleted');
  assert.deepEqual(metric.dimensions, { TableName: 'sessions' });
  assert.deepEqual(sweeper.metricItemsDeleted().dimensions, { TableName: 'orders' }, 'the typed methods: the first table');
  const other = dynamodb.Table.fromTableName(stack, 'Other', 'other');
  assert.throws(() => sweeper.tableMetric(other, 'ItemsDeleted'), /is not one of the tables this sweeper sweeps/);
});

test('one entry in tables: TABLES with that one element', () => {
  const built = synthTables((t) => [{ table: t.orders, maxRetries: 4 }]);
  const vars = variables(built);
  assert.equal(vars.TABLE_NAME, undefined);
  assert.deepEqual(JSON.parse(vars.TABLES), [{ TABLE_NAME: 'orders', MAX_RETRIES: '4' }]);
});

// ---------------------------------------------------------------- refused

type Props = Partial<TtlSweeperProps> | ((stack: cdk.Stack) => Partial<TtlSweeperProps>);
const invalid = (tables: ((t: ReturnType<typeof importTables>, stack: cdk.Stack) => SweptTable[]) | undefined, props: Props, message: RegExp) =>
  assert.throws(
    () => {
      const stack = newStack();
      const given = typeof props === 'function' ? props(stack) : props;
      synth({ table: undefined, tables: tables?.(importTables(stack), stack), ...given }, stack);
    },
    (e: Error) => {
      assert.match(e.message, /^TtlSweeper Test\/Sweeper: invalid props:/);
      assert.match(e.message, message);
      return true;
    },
  );

test('exactly one of table and tables; at least one entry', () => {
  assert.throws(
    () => {
      const stack = newStack();
      const t = importTables(stack);
      synth({ table: t.orders, tables: [{ table: t.sessions }] }, stack);
    },
    /table and tables cannot both be given: set table for one table, or tables for several/,
  );
  invalid(undefined, {}, /a table to sweep is needed: set table \(one table\) or tables \(several\)/);
  invalid(() => [], {}, /tables must list at least one table, got an empty list/);
});

test('a table listed twice is refused, by object or by name', () => {
  invalid((t) => [{ table: t.orders }, { table: t.sessions }, { table: t.orders, maxRetries: 2 }], {},
    /tables\[2\] is the same table as tables\[0\] \("orders"\): list each table once/);
  invalid((t, stack) => [{ table: t.sessions }, { table: dynamodb.Table.fromTableName(stack, 'Again', 'sessions') }], {},
    /tables\[1\] is the same table as tables\[0\] \("sessions"\)/);
  // A table created in the stack, listed twice.
  invalid((t, stack) => {
    const created = new dynamodb.Table(stack, 'Created', { partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING } });
    return [{ table: created }, { table: t.orders }, { table: created }];
  }, {}, /tables\[2\] is the same table as tables\[0\] \(Test\/Created\)/);
});

test('each entry is checked as the single-table props are, named by its position', () => {
  invalid((t) => [{ table: t.orders }, { table: t.sessions, windowSeconds: 0 }], {},
    /tables\[1\]\.windowSeconds must be a whole number from 1 to 86400 \(the width the writers use\), got 0/);
  invalid((t) => [{ table: t.orders, windowShards: 1001 }], {}, /tables\[0\]\.windowShards must be a whole number from 1 to 1000/);
  invalid((t) => [{ table: t.orders, lookbackWindows: -1 }], {}, /tables\[0\]\.lookbackWindows must be a whole number from 0 to 10000, got -1/);
  invalid((t) => [{ table: t.orders, maxConcurrency: 257 }], {}, /tables\[0\]\.maxConcurrency must be a whole number from 1 to 256, got 257/);
  invalid((t) => [{ table: t.orders, maxRetries: 31 }], {}, /tables\[0\]\.maxRetries must be a whole number from 0 to 30, got 31/);
  invalid((t) => [{ table: t.orders, indexName: 'ix' }], {}, /tables\[0\]\.indexName must be an index name of 3 to 255/);
  invalid((t) => [{ table: t.orders, ttlAttribute: '' }], {}, /tables\[0\]\.ttlAttribute must be a non-empty attribute name/);
  invalid((t) => [{ table: t.orders, deleteMode: 'fast' as DeleteMode }], {}, /tables\[0\]\.deleteMode must be 'batch' or 'conditional', got "fast"/);
  // With the function-wide ttlAttribute the entry's window attribute would be the same.
  invalid((t) => [{ table: t.orders, windowAttribute: 'expiresAt' }], { ttlAttribute: 'expiresAt' },
    /tables\[0\]\.windowAttribute must differ from tables\[0\]\.ttlAttribute \(both are "expiresAt"\)/);
  invalid((t) => [{ table: t.orders, expiryEvents: {} }], {}, /tables\[0\]\.expiryEvents must name exactly one sink, eventBus, queue or deliveryStream, got none/);
  // Archive mode needs conditional deletes, whichever of the two the entry sets.
  invalid((t, stack) => [{ table: t.orders, expiryEvents: { eventBus: events.EventBus.fromEventBusArn(stack, 'B', BUS), mode: ExpiryEventsMode.ARCHIVE } }], {},
    /tables\[0\]\.expiryEvents\.mode ARCHIVE needs tables\[0\]\.deleteMode CONDITIONAL, got deleteMode "batch" \(the default\)/);
  invalid((t) => [{ table: t.orders, deleteMode: DeleteMode.BATCH }], (stack) => ({
    deleteMode: DeleteMode.CONDITIONAL,
    expiryEvents: { eventBus: events.EventBus.fromEventBusArn(stack, 'B', BUS), mode: ExpiryEventsMode.ARCHIVE },
  }), /tables\[0\]\.expiryEvents\.mode ARCHIVE needs tables\[0\]\.deleteMode CONDITIONAL, got deleteMode "batch":/);
  // Valid entries pass.
  assert.doesNotThrow(() => synthTables(threeTables));
});

test('all problems of all entries are reported at once', () => {
  assert.throws(
    () => synthTables((t) => [{ table: t.orders, windowSeconds: 0 }, { table: t.sessions, maxRetries: 99 }, { table: t.orders }]),
    (e: Error) => {
      const lines = e.message.split('\n').filter((l) => l.startsWith('  - '));
      assert.equal(lines.length, 3, e.message);
      return true;
    },
  );
});

test('sweepers > 1 and followStream work on one table and are refused with tables', () => {
  invalid((t) => [{ table: t.orders }, { table: t.sessions }], { sweepers: 2, windowShards: 4 },
    /sweepers \(2\) cannot be used with tables: it splits one table's shards between functions; give a table that needs several sweepers a TtlSweeper of its own/);
  invalid((t) => [{ table: t.orders }, { table: t.sessions }], { followStream: true },
    /followStream cannot be used with tables: the stream indexer follows one table's stream; give a table whose stream should be followed a TtlSweeper of its own/);
  assert.doesNotThrow(() => synthTables((t) => [{ table: t.orders }], { sweepers: 1 }));
});

test('cdk-nag AwsSolutions finds nothing unacknowledged with several tables', () => {
  const { stack } = synthTables(threeTables);
  assert.deepEqual(nagViolations(stack), []);
});
