// The construct's props: what the caller gives a TtlSweeper (the tables, their index and window
// layout, the schedule, the function, alarms, the stream indexer, the leader lease), the options
// of its parts, and how expired items are deleted.

import type { Duration, RemovalPolicy } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type { Checkpoint } from './checkpoint';
import type { ExpiryEventsOptions } from './expiry-events';
import type { SweepSchedule } from './sweep-schedule';
// For the docs' links to the construct.

/** How expired items are deleted (`DELETE_MODE`). */
export enum DeleteMode {
  /**
   * `BatchWriteItem`, 25 keys a request: cheapest and fastest. Each key is confirmed by a
   * strongly consistent `BatchGetItem` of the table first (never the index alone); an item whose
   * ttl is extended within 2 s of that read can still be deleted.
   */
  BATCH = 'batch',
  /**
   * `DeleteItem` on the condition that the ttl is still the value the sweep read, and expired
   * (`#ttl = :read AND #ttl < :now AND #ttl >= :oldest`): the table has the last word, so an
   * item whose ttl was extended or removed survives. One request per item.
   */
  CONDITIONAL = 'conditional',
}

/** Where alarms go and when they fire. */
export interface SweeperAlarmOptions {
  /**
   * Create the alarms (and, without `topic`, their topic and its key). Five alarms cost about
   * $0.50 a month (standard resolution, $0.10 each); with `sweepers` > 1 or several `tables`
   * there are more. Each alarm's description links to what to check and do (docs/alarms.md).
   *
   * @default true
   */
  readonly enabled?: boolean;

  /**
   * Encrypt the created alarm topic with a KMS key of its own (rotation on), whose policy lets
   * CloudWatch publish; about $1 a month for the key. CloudWatch cannot publish to a topic
   * encrypted with the AWS managed key `alias/aws/sns`, so without this key the created topic is
   * unencrypted (alarm messages carry alarm names and states, no item data). Ignored with `topic`.
   *
   * @default true
   */
  readonly encryptTopic?: boolean;

  /**
   * Alarm when the largest expiry lag (`MaxExpiryLagSeconds`: how long after its ttl an item was
   * deleted) stays above this for three consecutive schedule periods.
   *
   * @default Duration.minutes(2)
   */
  readonly lagThreshold?: Duration;

  /**
   * Alarm when no sweep has been reported for this long (whole minutes, at most one day, longer
   * than the schedule period).
   *
   * @default 10 minutes, or twice the schedule period if that is longer
   */
  readonly silenceAfter?: Duration;

  /**
   * The topic the alarms notify. Without it the sweeper creates one, encrypted with a KMS key
   * (rotation on) whose policy lets CloudWatch publish (see `encryptTopic`).
   *
   * @default a new encrypted topic
   */
  readonly topic?: sns.ITopic;

  /**
   * E-mail addresses subscribed to the alarm topic (each must confirm the subscription).
   *
   * @default none
   */
  readonly emails?: string[];
}

/** The index {@link TtlSweeper.addExpirationIndex} adds; each must match the sweeper's props. */
export interface ExpirationIndexOptions {
  /**
   * The index name (the sweeper's `indexName`).
   *
   * @default 'expirationWindowIndex'
   */
  readonly indexName?: string;

  /**
   * The String attribute holding the window key, the index's partition key (the sweeper's
   * `windowAttribute`).
   *
   * @default 'expirationWindow'
   */
  readonly windowAttribute?: string;

  /**
   * The Number attribute holding the expiry in epoch seconds, the index's sort key (the
   * sweeper's `ttlAttribute`).
   *
   * @default 'ttl'
   */
  readonly ttlAttribute?: string;
}

/**
 * One table of a sweeper's `tables`, with what differs for it. A setting left out takes the
 * sweeper's own (its prop of the same name, or that prop's default).
 */
export interface SweptTable {
  /**
   * The table to sweep: one defined in the same app, or one imported with
   * `Table.fromTableAttributes` / `Table.fromTableName`. It must already have its index, keyed on
   * (window attribute String, ttl attribute Number).
   */
  readonly table: dynamodb.ITable;

  /**
   * The table's (window, ttl) global secondary index.
   *
   * @default - the sweeper's `indexName`
   */
  readonly indexName?: string;

  /**
   * The Number attribute holding the expiry in epoch seconds; the index's sort key.
   *
   * @default - the sweeper's `ttlAttribute`
   */
  readonly ttlAttribute?: string;

  /**
   * The String attribute holding the window key; the index's partition key.
   *
   * @default - the sweeper's `windowAttribute`
   */
  readonly windowAttribute?: string;

  /**
   * Window width in seconds, 1 to 86400; must equal the width this table's writers use.
   *
   * @default - the sweeper's `windowSeconds`
   */
  readonly windowSeconds?: number;

  /**
   * Shards per window, 1 to 1000; must equal what this table's writers use.
   *
   * @default - the sweeper's `windowShards`
   */
  readonly windowShards?: number;

  /**
   * Past windows every sweep of this table re-reads, 0 to 10000.
   *
   * @default - the sweeper's `lookbackWindows`
   */
  readonly lookbackWindows?: number;

  /**
   * How this table's expired items are deleted.
   *
   * @default - the sweeper's `deleteMode`
   */
  readonly deleteMode?: DeleteMode;

  /**
   * Delete requests in flight at once for this table, 1 to 256.
   *
   * @default - the sweeper's `maxConcurrency`
   */
  readonly maxConcurrency?: number;

  /**
   * Retries of one delete request of this table, 0 to 30.
   *
   * @default - the sweeper's `maxRetries`
   */
  readonly maxRetries?: number;

  /**
   * Where this table's expiry events go, in place of the sweeper's `expiryEvents` (the whole of
   * it: sink, mode and item). The function may send to this sink, and read this table's items
   * (`dynamodb:BatchGetItem` on this table, in any mode).
   *
   * @default - the sweeper's `expiryEvents`
   */
  readonly expiryEvents?: ExpiryEventsOptions;
}

/** Properties of a {@link TtlSweeper}. */
export interface TtlSweeperProps {
  /**
   * The table to sweep: one defined in the same app, or one imported with
   * `Table.fromTableAttributes` / `Table.fromTableName`. It must already have the index
   * `indexName`, keyed on (`windowAttribute` String, `ttlAttribute` Number), unless
   * `followStream` is on (then the sweeper reads an expiry index table of its own, and the table
   * needs no index). Give exactly one of `table` and `tables`.
   *
   * @default - none: `tables` must be given
   */
  readonly table?: dynamodb.ITable;

  /**
   * Several tables swept by one function on one schedule (`TABLES`): each entry a table and what
   * differs for it (index, attributes, window layout, lookback, delete mode, concurrency, retries,
   * expiry events); what an entry leaves out is the sweeper's own setting. Every tick sweeps
   * every table, each with its own checkpoint item, report and `TableName` metrics; the role may
   * touch each table and its own index only, and each table's alarms watch its own metrics.
   * Give exactly one of `table` and `tables`; a table is listed at most once. `sweepers` > 1 and
   * `followStream` work on one table and are refused with `tables`: give such a table a
   * `TtlSweeper` of its own.
   *
   * @default - none: `table` must be given
   */
  readonly tables?: SweptTable[];

  /**
   * The global secondary index keyed on (window, ttl) (`INDEX_NAME`). Not with `followStream`:
   * the expiry index table the construct then creates replaces the GSI, and giving both stops
   * synthesis.
   *
   * @default 'expirationWindowIndex'
   */
  readonly indexName?: string;

  /**
   * The Number attribute holding the expiry in epoch seconds; the index's sort key
   * (`TTL_ATTRIBUTE`).
   *
   * @default 'ttl'
   */
  readonly ttlAttribute?: string;

  /**
   * The String attribute holding the window key; the index's partition key (`WINDOW_ATTRIBUTE`).
   *
   * @default 'expirationWindow'
   */
  readonly windowAttribute?: string;

  /**
   * Window width in seconds, 1 to 86400; must equal the width the writers use (`WINDOW_SECONDS`).
   *
   * @default 60
   */
  readonly windowSeconds?: number;

  /**
   * Shards per window, 1 to 1000; must equal what the writers use (`WINDOW_SHARDS`).
   *
   * @default 1
   */
  readonly windowShards?: number;

  /**
   * How many functions split the table's shards between them, 1 to `windowShards` (at most 50).
   * Each gets a contiguous range of shards (`SHARD_RANGE`, e.g. `0-3`, `4-7`, `8-11` for 12
   * shards and 3 sweepers), its own log group, role and schedule, and, with a checkpoint, its own
   * checkpoint item. Use it when one function cannot delete fast enough; see the repository's
   * `docs/scaling.md` for how many.
   *
   * @default 1
   */
  readonly sweepers?: number;

  /**
   * Past windows every sweep re-reads, 0 to 10000 (`LOOKBACK_WINDOWS`).
   *
   * @default 15
   */
  readonly lookbackWindows?: number;

  /**
   * How expired items are deleted (`DELETE_MODE`).
   *
   * @default DeleteMode.BATCH
   */
  readonly deleteMode?: DeleteMode;

  /**
   * Delete requests in flight at once, 1 to 256 (`MAX_CONCURRENCY`).
   *
   * @default 8
   */
  readonly maxConcurrency?: number;

  /**
   * Retries of one delete request after throttling or unprocessed keys, 0 to 30 (`MAX_RETRIES`).
   *
   * @default 8
   */
  readonly maxRetries?: number;

  /**
   * Tick mode: sweep every this many seconds inside one invocation, 1 to 30 and less than the
   * schedule period (`TICK_SECONDS`). Items are then deleted within a fraction of a second of
   * their ttl. Each invocation ticks through its schedule period and 10 s into the next one's
   * (the handoff overlap), so the function's default timeout and reserved concurrency follow.
   *
   * @default - off: one sweep per invocation
   */
  readonly tickSeconds?: number;

  /**
   * When the function is invoked (`SCHEDULE_SECONDS` is the schedule's period).
   *
   * @default SweepSchedule.rate(Duration.minutes(1))
   */
  readonly schedule?: SweepSchedule;

  /**
   * Whether the schedule is enabled.
   *
   * @default true
   */
  readonly scheduleEnabled?: boolean;

  /**
   * How often EventBridge Scheduler retries an invocation it could not deliver, 0 to 185.
   *
   * @default 2
   */
  readonly scheduleRetryAttempts?: number;

  /**
   * How long EventBridge Scheduler keeps trying to deliver one invocation, 1 minute to 1 day.
   * Undelivered invocations go to the failure queue.
   *
   * @default Duration.minutes(5)
   */
  readonly scheduleMaxEventAge?: Duration;

  /**
   * Keep a catch-up checkpoint (`CHECKPOINT_TABLE`): after an outage, the next sweep reads every
   * window since the last complete sweep, not only the lookback windows.
   *
   * @default - no checkpoint
   */
  readonly checkpoint?: Checkpoint;

  /**
   * How far back a checkpoint may take one sweep, 1 minute to 30 days (`MAX_CATCHUP`). Only with
   * `checkpoint`.
   *
   * @default Duration.hours(24)
   */
  readonly maxCatchUp?: Duration;

  /**
   * CloudWatch namespace of the sweeper's metrics (`METRICS_NAMESPACE`); the alarms and the
   * dashboard read it.
   *
   * @default 'TtlSweeper'
   */
  readonly metricsNamespace?: string;

  /**
   * The function's code: a directory or zip holding the arm64 `bootstrap` for `provided.al2023`.
   *
   * @default - the arm64 Lambda zip bundled in the published package (npm and PyPI); in a
   * checkout of the repository without it, `target/lambda/ttl-sweeper-lambda/` (the output of
   * `make package`), and synthesis fails if that is missing
   */
  readonly code?: lambda.Code;

  /**
   * Memory of the function in MB, 128 to 10240.
   *
   * @default 128
   */
  readonly memorySize?: number;

  /**
   * Timeout of one invocation, 1 second to 15 minutes. In tick mode an invocation runs until
   * 10 s after the next one is scheduled (the handoff overlap), or until this deadline; a shorter
   * timeout leaves gaps between invocations.
   *
   * @default - the schedule period plus 10 seconds; in tick mode plus 20 seconds; at most 15 minutes
   */
  readonly timeout?: Duration;

  /**
   * Reserved concurrency of the function. 1 keeps invocations from overlapping; tick mode needs
   * 2, so consecutive invocations overlap instead of leaving a gap.
   *
   * @default - 1; 2 in tick mode
   */
  readonly reservedConcurrency?: number;

  /**
   * How long the function's log group keeps its JSON logs.
   *
   * @default RetentionDays.ONE_MONTH
   */
  readonly logRetention?: logs.RetentionDays;

  /**
   * What happens to the function's log groups when they leave the stack (or the stack is
   * deleted). `RemovalPolicy.RETAIN` keeps the logs, which then keep costing storage.
   *
   * @default RemovalPolicy.DESTROY
   */
  readonly logRemovalPolicy?: RemovalPolicy;

  /**
   * Alarm settings.
   *
   * @default - alarms on a new encrypted topic, lag threshold 2 minutes
   */
  readonly alarms?: SweeperAlarmOptions;

  /**
   * Publish an event for every item the sweeper expires (`EXPIRY_EVENTS`,
   * `EXPIRY_EVENTS_MODE`, `EXPIRY_EVENTS_ITEM`), to exactly one sink, with permission to send to
   * that sink only, and `dynamodb:BatchGetItem` on the table in any mode: the reads of
   * `ExpiryEventsItem.READ` and archive mode, and the read that settles a delete whose answer was
   * lost. `ExpiryEventsMode.ARCHIVE` needs `deleteMode: DeleteMode.CONDITIONAL`.
   *
   * @default - no expiry events
   */
  readonly expiryEvents?: ExpiryEventsOptions;

  /**
   * Create a CloudWatch dashboard of deletes, lag, invocations and backlog (about $3 a month
   * beyond the first three dashboards of an account).
   *
   * @default true
   */
  readonly dashboard?: boolean;

  /**
   * Follow the table's DynamoDB stream, so that writers need set only the ttl, and the table
   * needs no index and no attribute of the sweeper's. The construct creates the sweeper's own
   * expiry index table (`indexTable`: partition key `window`, sort key `entry`, both String,
   * on-demand, native TTL on `expires`, removal policy `DESTROY`) and a second function from the
   * same code (the stream indexer), which reads the stream through an event source mapping and
   * writes one small entry per item and ttl into the expiry index table; it never writes the
   * application's items, and deletes those written already expired as it indexes them, as a
   * sweep would (`DELETE_WHEN_INDEXED`, set to `false` with `leaderLease`: then only the lease
   * holder's sweeps delete). The sweeper reads its windows from the expiry index table
   * (`EXPIRY_INDEX_TABLE`, given to both functions), removes the entries it has handled, and
   * only ever deletes from the application's table; `indexName` is not used and may not be given.
   *
   * The table needs a stream whose records carry the new image (`StreamViewType.NEW_IMAGE` or
   * `NEW_AND_OLD_IMAGES`); an imported table must be imported with its stream ARN
   * (`Table.fromTableAttributes(scope, id, { tableName, tableStreamArn })`). Synthesis stops
   * otherwise.
   *
   * The mapping starts at the stream's end (`LATEST`; items already in the table need
   * `ttl-sweeper backfill`, which writes their entries), reads up to 100 records a batch with no
   * batching window, keeps only `INSERT` and `MODIFY` records whose new image has the ttl
   * attribute as a Number, reports failed records by sequence number (`ReportBatchItemFailures`),
   * bisects a failing batch, retries a record at most 10 times and for at most an hour, then
   * sends its description to an on-failure queue (SQS, encrypted, TLS only, 14 days). The new
   * function gets its own role (`dynamodb:DescribeTable` and `dynamodb:DeleteItem` on the table,
   * `dynamodb:DescribeTable` and `dynamodb:BatchWriteItem` on the expiry index table, stream read
   * on the table's stream only, and with `expiryEvents` the sweeper's send to the sink and
   * `dynamodb:BatchGetItem` on the table), log group, and an `IteratorAge` alarm.
   *
   * On a global table, each Region's stack has an expiry index table of its own, which its own
   * indexer fills from its own replica's stream: the index table is not replicated.
   *
   * @default false
   */
  readonly followStream?: boolean;

  /**
   * Sweep only while holding a lease (`LEADER_LEASE`, whole seconds): a lease item in the
   * checkpoint table that one sweeper holds at a time and renews while it runs. For sweepers
   * deployed in several Regions on the same global table: the one holding the lease sweeps, and
   * when it stops renewing (its Region or function is down), another takes the lease over once
   * it has expired. The checkpoint table (`checkpoint`, e.g. `Checkpoint.fromTable(...)`) must
   * then be a DynamoDB global table replicated in every Region where a sweeper is deployed, so
   * that all of them see the one lease item; see the repository's `docs/global-tables.md`.
   *
   * Needs `checkpoint`; from 5 to 3600 seconds, and at least two ticks: two `tickSeconds` in tick
   * mode, else two schedule periods. A longer lease means a longer pause of the sweeps after its holder stops.
   * With `followStream` the stream indexer, whose function holds no lease, gets
   * `DELETE_WHEN_INDEXED=false`: the items written already expired are left to the holder's sweeps.
   *
   * @default - off: every sweeper sweeps
   */
  readonly leaderLease?: Duration;
}
