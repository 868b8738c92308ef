// With `followStream`: the expiry index table, the sweeper's own, and the stream indexer that fills
// it from the table's stream (a function of the sweeper's code, its role, log group and policy,
// the event source mapping and the mapping's on-failure queue).

import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { logsAndRole } from './function';
import { streamIndexerStatements, writeOwnLogs } from './grants';
import type { TtlSweeperProps } from './props';
import type { Settings } from './resolve';

/** The stream indexer and what was created with it. */
export interface StreamIndexer {
  readonly fn: lambda.Function;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;
  readonly mapping: lambda.EventSourceMapping;
  readonly queue: sqs.Queue;
}

/**
 * The sweeper's settings the stream indexer gets too: the table, the expiry index table, the
 * layout, the metrics, and the expiry events of the items it deletes as it indexes them.
 */
const STREAM_SETTINGS = [
  'TABLE_NAME',
  'EXPIRY_INDEX_TABLE',
  'TTL_ATTRIBUTE',
  'WINDOW_ATTRIBUTE',
  'WINDOW_SECONDS',
  'WINDOW_SHARDS',
  'DELETE_MODE',
  'MAX_CONCURRENCY',
  'MAX_RETRIES',
  'METRICS_NAMESPACE',
  'EXPIRY_EVENTS',
  'EXPIRY_EVENTS_MODE',
  'EXPIRY_EVENTS_ITEM',
];

/**
 * The stream indexer's function and event source mapping. The function stops 3 s before its
 * timeout and has what it did not handle delivered again; the mapping gives up on a record after
 * 10 retries or an hour, well inside the stream's 24 hours of retention, so the on-failure
 * queue's message still points at records that can be read.
 */
const STREAM = {
  timeoutSeconds: 30,
  batchSize: 100,
  retryAttempts: 10,
  maxRecordAgeSeconds: 3600,
} as const;

/** The expiry index table's attributes: its keys, and the native TTL of entries no sweep removed. */
const INDEX_TABLE = { window: 'window', entry: 'entry', expires: 'expires' } as const;

/**
 * The expiry index table of `followStream`: one entry per item and ttl, keyed by window
 * (`window`) and by ttl, item and write (`entry`), each removed by native TTL (`expires`) if no
 * sweep removed it first. Derived data: `ttl-sweeper backfill` rebuilds it, so it goes with the
 * stack and keeps no backups.
 */
export function newIndexTable(scope: Construct): dynamodb.Table {
  const table = new dynamodb.Table(scope, 'ExpiryIndex', {
    partitionKey: { name: INDEX_TABLE.window, type: dynamodb.AttributeType.STRING },
    sortKey: { name: INDEX_TABLE.entry, type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    timeToLiveAttribute: INDEX_TABLE.expires,
    removalPolicy: RemovalPolicy.DESTROY,
  });
  Validations.of(table).acknowledge({
    id: 'AwsSolutions-DDB3',
    reason: 'the expiry index table holds derived data only: ttl-sweeper backfill rebuilds it from the application table',
  });
  return table;
}

/**
 * The stream indexer in `scope`: its failure queue, log group, role and policy, and the function
 * (the sweeper's code and configuration, without the schedule's settings) writing the table's
 * items' entries into the expiry index table and deleting the items written already expired, and
 * the event source mapping from the table's stream.
 */
export function streamIndexer(
  scope: Construct,
  props: TtlSweeperProps,
  settings: Settings,
  shared: {
    table: dynamodb.ITable;
    streamArn: string;
    indexTable: dynamodb.ITable;
    code: lambda.Code;
    sweeperEnvironment: Record<string, string>;
  },
): StreamIndexer {
  const { table, streamArn, indexTable, code, sweeperEnvironment } = shared;
  const queue = new sqs.Queue(scope, 'Failures', {
    retentionPeriod: Duration.days(14),
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
  });
  Validations.of(queue).acknowledge({
    id: 'AwsSolutions-SQS3',
    reason: 'StreamFailures is itself the on-failure destination of the stream indexer',
  });
  const { logGroup, role } = logsAndRole(
    scope,
    props,
    "ttl-sweeper stream indexer: read the table's stream, write entries into the expiry index table, " +
      'delete items written already expired, write its logs',
  );
  const statements = streamIndexerStatements(scope, {
    table,
    streamArn,
    indexTable,
    failureQueue: queue,
    expiryEvents: settings.expiryEvents,
    writeOwnLogs: writeOwnLogs(logGroup),
  });
  const policy = new iam.Policy(scope, 'Policy', { statements });
  policy.attachToRole(role);

  // The sweeper's configuration but the sweep's own settings: the schedule, tick mode, lookback,
  // shard range, checkpoint and lease.
  const environment: Record<string, string> = Object.fromEntries(
    STREAM_SETTINGS.filter((v) => sweeperEnvironment[v] !== undefined).map((v) => [v, sweeperEnvironment[v]]),
  );
  // With a lease only its holder deletes, and this function holds none: an item written already
  // expired is left to the holder's next sweep (on a global table each Region runs an indexer).
  if (settings.leaderLeaseSeconds !== undefined) {
    environment.DELETE_WHEN_INDEXED = 'false';
  }
  const fn = new lambda.Function(scope, 'Function', {
    description:
      "ttl-sweeper stream indexer: writes one small entry per item and ttl into the sweeper's expiry index table; " +
      "never writes the application's items, deletes those written already expired",
    runtime: lambda.Runtime.PROVIDED_AL2023,
    architecture: lambda.Architecture.ARM_64,
    handler: 'bootstrap',
    code,
    memorySize: settings.memorySize,
    timeout: Duration.seconds(STREAM.timeoutSeconds),
    role,
    logGroup,
    loggingFormat: lambda.LoggingFormat.JSON,
    // The platform's START, END and REPORT lines, one set an invocation (at a record an
    // invocation, more log ingestion than the records' entries cost), are INFO: WARN leaves them
    // out. Its metrics (Duration, Errors, IteratorAge) stay.
    systemLogLevelV2: lambda.SystemLogLevel.WARN,
    environment,
  });
  fn.node.addDependency(policy);

  const change = lambda.FilterRule.or('INSERT', 'MODIFY');
  const mapping = new lambda.EventSourceMapping(scope, 'Mapping', {
    target: fn,
    eventSourceArn: streamArn,
    startingPosition: lambda.StartingPosition.LATEST,
    batchSize: STREAM.batchSize,
    maxBatchingWindow: Duration.seconds(0),
    reportBatchItemFailures: true,
    bisectBatchOnError: true,
    retryAttempts: STREAM.retryAttempts,
    maxRecordAge: Duration.seconds(STREAM.maxRecordAgeSeconds),
    onFailure: new QueueOnFailure(queue),
    // Records with something to do: an item written with a Number ttl (an entry to write).
    // REMOVE records, and writes of items without one, never reach the function: an entry left
    // by a ttl since removed deletes nothing, as a sweep judges every item by the table.
    filters: [
      lambda.FilterCriteria.filter({
        eventName: change,
        dynamodb: { NewImage: { [settings.ttlAttribute]: { N: lambda.FilterRule.exists() } } },
      }),
    ],
  });
  // The mapping checks at creation that the role may read the stream.
  mapping.node.addDependency(policy);
  return { fn, role, logGroup, mapping, queue };
}

/**
 * The on-failure destination of the stream's event source mapping, without the grant
 * `SqsDlq` adds (`sqs:SendMessage` alone is in the stream indexer's policy).
 */
class QueueOnFailure implements lambda.IEventSourceDlq {
  constructor(private readonly queue: sqs.IQueue) {}

  public bind(_target: lambda.IEventSourceMapping, _handler: lambda.IFunction): lambda.DlqDestinationConfig {
    return { destination: this.queue.queueArn };
  }
}
