// What the construct's roles may do, statement by statement: the sweeper's (each table and its own
// index, the expiry index table, the checkpoint, the expiry events' sinks, customer managed keys,
// its own logs), the stream indexer's and EventBridge Scheduler's.

import { Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { IConstruct } from 'constructs';
import { expiryEventStatements, type ExpiryEventsOptions } from './expiry-events';
import { DeleteMode } from './props';
import type { Settings } from './resolve';

/** What a role needs of a table's customer managed key to read and delete items. */
const TABLE_KEY_ACTIONS = ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:ReEncrypt*', 'kms:GenerateDataKey*'];

/** What the stream indexer needs of the table's stream (the event source mapping reads it). */
const STREAM_READ_ACTIONS = ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:ListStreams'];

/** The statement that lets a function's role write to its own log group only. */
export function writeOwnLogs(logGroup: logs.ILogGroup): iam.PolicyStatement {
  return new iam.PolicyStatement({
    sid: 'WriteOwnLogs',
    actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
    resources: [logGroup.logGroupArn],
  });
}

/**
 * The sweeper function's statements, those alike merged: the tables and their indexes, the expiry
 * index table (with `followStream`), the checkpoint table, the expiry events' sinks (and, for
 * each table with expiry events, `BatchGetItem` on it in any mode), the tables' customer managed
 * keys and the function's own logs.
 */
export function sweeperStatements(
  scope: IConstruct,
  settings: Settings,
  resources: {
    indexTable?: dynamodb.ITable;
    checkpointTable?: dynamodb.ITable;
    writeOwnLogs: iam.PolicyStatement;
  },
): iam.PolicyStatement[] {
  const { indexTable, checkpointTable } = resources;
  // Each table's grants on that table and its own index only, by its own settings; statements
  // alike are merged below, each listing exactly the tables (or indexes) that need it. With
  // followStream the index is the expiry index table, not a GSI of the table: no Query on the
  // table.
  const statements = [
    ...settings.tables.flatMap(({ table, settings: own }) => [
      ...(indexTable
        ? []
        : [
            new iam.PolicyStatement({
              sid: 'QueryExpiryIndex',
              actions: ['dynamodb:Query'],
              resources: [`${table.tableArn}/index/${own.indexName}`],
            }),
          ]),
      new iam.PolicyStatement({
        sid: 'DeleteExpiredItems',
        // BatchWriteItem cannot be limited to deletes in IAM; DeleteItem serves conditional mode.
        actions: ['dynamodb:BatchWriteItem', 'dynamodb:DeleteItem', 'dynamodb:DescribeTable'],
        resources: [table.tableArn],
      }),
      // Batch mode confirms every key by a read of the table (its key attributes and ttl,
      // strongly consistent) before its first send, and again when that read has aged past the
      // bound for an unconditional delete.
      ...(own.deleteMode === DeleteMode.BATCH
        ? [
            new iam.PolicyStatement({
              sid: 'ConfirmKeysInTable',
              actions: ['dynamodb:BatchGetItem'],
              resources: [table.tableArn],
            }),
          ]
        : []),
    ]),
    // The expiry index table: the sweep's strongly consistent queries of its windows, and the
    // removal of the entries whose items a sweep has handled.
    ...(indexTable
      ? [
          new iam.PolicyStatement({
            sid: 'ReadExpiryIndex',
            actions: ['dynamodb:DescribeTable', 'dynamodb:Query'],
            resources: [indexTable.tableArn],
          }),
          new iam.PolicyStatement({
            sid: 'RemoveIndexEntries',
            actions: ['dynamodb:BatchWriteItem'],
            resources: [indexTable.tableArn],
          }),
        ]
      : []),
    resources.writeOwnLogs,
  ];
  if (checkpointTable) {
    statements.push(
      new iam.PolicyStatement({
        sid: 'Checkpoint',
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DescribeTable'],
        resources: [checkpointTable.tableArn],
      }),
    );
  }
  // Each table's expiry events: its sink, and BatchGetItem on that table in any mode (the reads
  // for the events, and the read that settles a delete whose answer was lost).
  for (const { table, settings: own } of settings.tables) {
    statements.push(...expiryEventStatements(own.expiryEvents, table.tableArn));
  }
  // Tables encrypted with a customer managed key: DynamoDB uses the key on the caller's behalf,
  // so the role needs the key for the reads and deletes (the set aws-cdk-lib's own
  // `grantReadWriteData` gives), through DynamoDB only.
  const keys: [string, dynamodb.ITable | undefined][] = [
    ...settings.tables.map(({ table }): [string, dynamodb.ITable] => ['TableKey', table]),
    ['CheckpointKey', checkpointTable],
  ];
  for (const [sid, table] of keys) {
    if (table?.encryptionKey) statements.push(tableKeyStatement(scope, sid, table.encryptionKey));
  }
  return mergeStatements(statements);
}

/**
 * The stream indexer's statements: `DescribeTable` on the table, and the sweeper's conditional
 * `DeleteItem` of items written already expired (never a put or an update: it writes none of the
 * application's items), entry writes into the expiry index table, reads of the table's stream,
 * its own logs, its on-failure queue, with expiry events the sweeper's grants for them (the sink,
 * and `BatchGetItem` on the table in any mode), and the table's customer managed key if it has
 * one.
 */
export function streamIndexerStatements(
  scope: IConstruct,
  resources: {
    table: dynamodb.ITable;
    streamArn: string;
    indexTable: dynamodb.ITable;
    failureQueue: sqs.IQueue;
    expiryEvents?: ExpiryEventsOptions;
    writeOwnLogs: iam.PolicyStatement;
  },
): iam.PolicyStatement[] {
  const { table, streamArn, indexTable, failureQueue } = resources;
  const statements = [
    new iam.PolicyStatement({
      sid: 'DescribeTable',
      // The start-up check and the table's key schema, which each entry's key follows.
      actions: ['dynamodb:DescribeTable'],
      resources: [table.tableArn],
    }),
    new iam.PolicyStatement({
      sid: 'DeleteExpiredItems',
      // An item whose record shows a ttl already passed is deleted as it is indexed, through the
      // sweeper's delete path: a DeleteItem conditional on that ttl. Never a put or an update.
      actions: ['dynamodb:DeleteItem'],
      resources: [table.tableArn],
    }),
    new iam.PolicyStatement({
      sid: 'WriteIndexEntries',
      // Packs of entries written in batches; PutItem stores the writers' mark once, on the
      // condition that none is there, before the first pack; DescribeTable is the start-up check.
      actions: ['dynamodb:DescribeTable', 'dynamodb:BatchWriteItem', 'dynamodb:PutItem'],
      resources: [indexTable.tableArn],
    }),
    new iam.PolicyStatement({
      sid: 'ReadTableStream',
      actions: STREAM_READ_ACTIONS,
      resources: [streamArn],
    }),
    resources.writeOwnLogs,
    new iam.PolicyStatement({
      sid: 'StreamFailures',
      actions: ['sqs:SendMessage'],
      resources: [failureQueue.queueArn],
    }),
    // The expiry events of the items it deletes, with the sweeper's grants for them: the sink,
    // and BatchGetItem on the table in any mode.
    ...expiryEventStatements(resources.expiryEvents, table.tableArn),
  ];
  // A table encrypted with a customer managed key: its stream is read, and its items read and
  // deleted, with that key (the same actions as the sweeper's).
  if (table.encryptionKey) statements.push(tableKeyStatement(scope, 'TableKey', table.encryptionKey));
  return statements;
}

/**
 * EventBridge Scheduler's statements: invoke the sweeper functions, and send the invocations it
 * could not deliver to the failure queue.
 */
export function scheduleStatements(functions: lambda.IFunction[], failureQueue: sqs.IQueue): iam.PolicyStatement[] {
  return [
    new iam.PolicyStatement({
      sid: 'InvokeSweeper',
      actions: ['lambda:InvokeFunction'],
      resources: functions.map((f) => f.functionArn),
    }),
    new iam.PolicyStatement({
      sid: 'DeadLetter',
      actions: ['sqs:SendMessage'],
      resources: [failureQueue.queueArn],
    }),
  ];
}

/** The use of a table's customer managed `key`, through DynamoDB only. */
function tableKeyStatement(scope: IConstruct, sid: string, key: kms.IKey): iam.PolicyStatement {
  return new iam.PolicyStatement({
    sid,
    actions: TABLE_KEY_ACTIONS,
    resources: [key.keyArn],
    conditions: { StringEquals: { 'kms:ViaService': `dynamodb.${Stack.of(scope).region}.amazonaws.com` } },
  });
}

/**
 * `statements` with those alike (the same Sid, effect, actions and conditions) merged into one
 * listing each of their resources once, in the order of first appearance. A statement without a
 * match is kept as it is.
 */
function mergeStatements(statements: iam.PolicyStatement[]): iam.PolicyStatement[] {
  const groups = new Map<string, iam.PolicyStatement[]>();
  for (const statement of statements) {
    const key = JSON.stringify([statement.sid, statement.effect, statement.actions, statement.conditions]);
    groups.set(key, [...(groups.get(key) ?? []), statement]);
  }
  return [...groups.values()].map((alike) => {
    if (alike.length === 1) return alike[0];
    const [first] = alike;
    return new iam.PolicyStatement({
      sid: first.sid,
      effect: first.effect,
      actions: first.actions,
      conditions: first.conditions,
      resources: [...new Set(alike.flatMap((s) => s.resources))],
    });
  });
}
