// The ttl-sweeper construct: the Lambda, its EventBridge Scheduler schedule, least-privilege IAM,
// a failure queue, alarms on the sweeper's own metrics and a dashboard, for a table the caller
// owns (created in the same app or imported), or for several tables swept by one function.
// TtlSweeper wires the parts together and gives the sweeper's metrics; each part has a file of its
// own: props.ts and sweep-schedule.ts (what the caller gives), resolve.ts (props to settings, and
// their checks), function.ts, schedule.ts, grants.ts (IAM), alarms.ts and dashboard.ts (which see
// the construct through sweeper-view.ts) and stream-indexer.ts.

import { Duration, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { sweeperAlarms } from './alarms';
import { defaultCode } from './code';
import { sweeperDashboard } from './dashboard';
import { sweeperFunction } from './function';
import type { ExpirationIndexOptions, TtlSweeperProps } from './props';
import { newScheduleRole, sweeperSchedules } from './schedule';
import { DEFAULTS, resolveSettings, splitShards } from './resolve';
import { newIndexTable, streamIndexer } from './stream-indexer';

/**
 * Precise item expiry for a DynamoDB table: a Lambda invoked by EventBridge Scheduler queries the
 * (window, ttl) index (with `followStream`, an expiry index table of its own, fed by the table's
 * stream) and deletes expired items, with least-privilege IAM, a failure queue, alarms on an
 * encrypted SNS topic and a dashboard.
 */
export class TtlSweeper extends Construct {
  /** The namespace of the sweeper's metrics unless `metricsNamespace` says otherwise. */
  public static readonly DEFAULT_METRICS_NAMESPACE = DEFAULTS.metricsNamespace;

  /** The sweeper function (with `sweepers` > 1, the one for the first shard range). */
  public readonly function: lambda.Function;
  /** The function's execution role. */
  public readonly role: iam.Role;
  /** The function's log group (JSON logs). */
  public readonly logGroup: logs.LogGroup;
  /** The EventBridge Scheduler schedule invoking the function. */
  public readonly schedule: scheduler.Schedule;
  /** Every sweeper function, one per shard range, in the order of `shardRanges`. */
  public readonly functions: lambda.Function[];
  /** The execution role of each function, in the order of `functions`. */
  public readonly roles: iam.Role[];
  /** The log group of each function, in the order of `functions`. */
  public readonly logGroups: logs.LogGroup[];
  /** The schedule invoking each function, in the order of `functions`. */
  public readonly schedules: scheduler.Schedule[];
  /**
   * The `SHARD_RANGE` of each function, in the order of `functions`: `'all'` for a single
   * sweeper, else contiguous inclusive ranges such as `'0-3'`, `'4-7'`, `'8-11'`.
   */
  public readonly shardRanges: string[];
  /** The role EventBridge Scheduler assumes to invoke the functions. */
  public readonly scheduleRole: iam.Role;
  /**
   * Failed deliveries of the schedule and failed asynchronous invocations of the function
   * (encrypted, TLS only, 14 days).
   */
  public readonly failureQueue: sqs.Queue;
  /** The topic the alarms notify, unless alarms are off (`alarms.enabled: false`). */
  public readonly alarmTopic?: sns.ITopic;
  /**
   * The alarms: function errors, failed items, expiry lag, silence (without `leaderLease`), a
   * lease of another layout (with it); empty when alarms are off.
   */
  public readonly alarms: cloudwatch.Alarm[];
  /** The dashboard, unless `dashboard` is false. */
  public readonly dashboard?: cloudwatch.Dashboard;
  /** The checkpoint table, if any. */
  public readonly checkpointTable?: dynamodb.ITable;
  /** The table swept; with `tables`, the first of them. */
  public readonly table: dynamodb.ITable;
  /** Every table swept, in the order of `tables` (the one `table` without it). */
  public readonly tables: dynamodb.ITable[];
  /**
   * The index queried; with `tables`, the first table's. With `followStream` the sweeper queries
   * `indexTable` instead, and this is the default name, unused.
   */
  public readonly indexName: string;
  /** The leader lease in seconds (`LEADER_LEASE`), if any. */
  public readonly leaderLeaseSeconds?: number;
  /** The period between invocations, in seconds. */
  public readonly schedulePeriodSeconds: number;
  /** The CloudWatch namespace of the sweeper's metrics. */
  public readonly metricsNamespace: string;
  /**
   * With `followStream`: the expiry index table, the sweeper's own (partition key `window`, sort
   * key `entry`, both String; on-demand; native TTL on `expires`; removal policy `DESTROY`, as
   * its entries are derived data that `ttl-sweeper backfill` rebuilds). The stream indexer writes
   * one entry per item and ttl into it, the sweeper queries it and removes the entries it has
   * handled. Not replicated: on a global table each Region's stack has its own.
   */
  public readonly indexTable?: dynamodb.ITable;
  /**
   * With `followStream`: the stream indexer, the function the table's stream invokes (the same
   * code as the sweeper, its own role and log group).
   */
  public readonly streamFunction?: lambda.Function;
  /** With `followStream`: the stream indexer's execution role. */
  public readonly streamRole?: iam.Role;
  /** With `followStream`: the stream indexer's log group (JSON logs). */
  public readonly streamLogGroup?: logs.LogGroup;
  /** With `followStream`: the event source mapping from the table's stream to `streamFunction`. */
  public readonly streamEventSourceMapping?: lambda.EventSourceMapping;
  /**
   * With `followStream`: where the mapping sends the description of stream records it gave up on
   * (shard and sequence numbers, not the records; encrypted, TLS only, 14 days).
   */
  public readonly streamFailureQueue?: sqs.Queue;

  /**
   * Adds the (window, ttl) index the sweeper queries to a table defined in the same app:
   * partition key `windowAttribute` (String), sort key `ttlAttribute` (Number), keys only.
   * Returns the index name. For a table defined elsewhere, add the index there (see the
   * README's first steps for the AWS CLI command).
   */
  public static addExpirationIndex(
    table: dynamodb.Table | dynamodb.TableV2,
    options: ExpirationIndexOptions = {},
  ): string {
    const indexName = options.indexName ?? DEFAULTS.indexName;
    const index = {
      indexName,
      partitionKey: { name: options.windowAttribute ?? DEFAULTS.windowAttribute, type: dynamodb.AttributeType.STRING },
      sortKey: { name: options.ttlAttribute ?? DEFAULTS.ttlAttribute, type: dynamodb.AttributeType.NUMBER },
      projectionType: dynamodb.ProjectionType.KEYS_ONLY,
    };
    if (table instanceof dynamodb.TableV2) {
      table.addGlobalSecondaryIndex(index);
    } else {
      table.addGlobalSecondaryIndex(index);
    }
    return indexName;
  }

  constructor(scope: Construct, id: string, props: TtlSweeperProps) {
    super(scope, id);
    const settings = resolveSettings(this, props);
    this.tables = settings.tables.map((t) => t.table);
    this.table = this.tables[0];
    this.indexName = settings.tables[0].settings.indexName;
    this.leaderLeaseSeconds = settings.leaderLeaseSeconds;
    this.schedulePeriodSeconds = settings.schedule.periodSeconds;
    this.metricsNamespace = settings.metricsNamespace;
    this.checkpointTable = props.checkpoint?.bind(this);

    // ---------------------------------------------------------------- failures
    this.failureQueue = new sqs.Queue(this, 'FailedInvocations', {
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    Validations.of(this.failureQueue).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason: 'FailedInvocations is itself the dead-letter target of the schedule and the function',
    });

    // ---------------------------------------------------------------- the expiry index table
    // With followStream, the sweeper's own index, filled by the stream indexer; created before
    // the functions, whose environment names it.
    if (settings.followStream) {
      this.indexTable = newIndexTable(this);
    }

    // ---------------------------------------------------------------- the functions
    // One function per shard range, each with its own log group, role and schedule. The first
    // keeps the construct ids of a single sweeper, so going from one sweeper to several updates
    // it in place; the others live in `Sweeper2`, `Sweeper3`, ...
    const ranges = settings.sweepers === 1 ? [undefined] : splitShards(settings.windowShards, settings.sweepers);
    this.shardRanges = ranges.map((r) => r ?? 'all');
    this.scheduleRole = newScheduleRole(this);
    const code = props.code ?? defaultCode();
    const resources = { code, failureQueue: this.failureQueue, indexTable: this.indexTable, checkpointTable: this.checkpointTable };
    const parts = ranges.map((range, i) =>
      sweeperFunction(i === 0 ? this : new Construct(this, `Sweeper${i + 1}`), props, settings, range, resources),
    );
    this.functions = parts.map((p) => p.fn);
    this.roles = parts.map((p) => p.role);
    this.logGroups = parts.map((p) => p.logGroup);
    [this.function, this.role, this.logGroup] = [this.functions[0], this.roles[0], this.logGroups[0]];

    // ---------------------------------------------------------------- the schedules
    this.schedules = sweeperSchedules(this, parts, {
      role: this.scheduleRole,
      failureQueue: this.failureQueue,
      settings,
      enabled: props.scheduleEnabled ?? true,
    });
    this.schedule = this.schedules[0];

    // ---------------------------------------------------------------- the stream indexer
    if (settings.followStream) {
      const stream = streamIndexer(new Construct(this, 'Stream'), props, settings, {
        table: this.table,
        streamArn: this.table.tableStreamArn!, // checked by resolveSettings
        indexTable: this.indexTable!,
        code,
        sweeperEnvironment: parts[0].environment,
      });
      this.streamFunction = stream.fn;
      this.streamRole = stream.role;
      this.streamLogGroup = stream.logGroup;
      this.streamEventSourceMapping = stream.mapping;
      this.streamFailureQueue = stream.queue;
    }

    // ---------------------------------------------------------------- alarms and dashboard
    const alarmOptions = props.alarms ?? {};
    const alarms = (alarmOptions.enabled ?? true) ? sweeperAlarms(this, alarmOptions, settings, parts) : undefined;
    this.alarmTopic = alarms?.topic;
    this.alarms = alarms?.alarms ?? [];
    if (props.dashboard ?? true) {
      this.dashboard = sweeperDashboard(this, settings);
    }
  }

  /**
   * One of the sweeper's own metrics by name, dimensioned by the table name (with `tables`, the
   * first table's: see `tableMetric()` for the others); prefer the typed methods
   * (`metricItemsDeleted()`, ...), one for each metric the function emits.
   *
   * @default - statistic Sum over 1 minute
   */
  public metric(metricName: string, props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.tableMetric(this.table, metricName, props);
  }

  /**
   * One of the sweeper's own metrics by name for one of the tables it sweeps (`TableName` is that
   * table's name): each table of `tables` has its own. The typed methods take the first table's
   * unless their `dimensionsMap` says otherwise.
   *
   * @param table one of `tables` (or the one `table`)
   * @param metricName the metric's name, e.g. `ItemsDeleted`
   * @default - statistic Sum over 1 minute
   */
  public tableMetric(table: dynamodb.ITable, metricName: string, props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    if (!this.tables.includes(table)) {
      throw new Error(`TtlSweeper ${this.node.path}: tableMetric: ${table.node.path} is not one of the tables this sweeper sweeps`);
    }
    return new cloudwatch.Metric({
      namespace: this.metricsNamespace,
      metricName,
      dimensionsMap: { TableName: table.tableName },
      statistic: 'Sum',
      period: Duration.minutes(1),
      ...props,
    });
  }

  /**
   * `ItemsDeleted`: Items deleted.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricItemsDeleted(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('ItemsDeleted', { statistic: 'Sum', ...props });
  }

  /**
   * `ItemsSkipped`: Items kept because their ttl was extended or removed after the index read (conditional mode).
   *
   * @default - statistic Sum over 1 minute
   */
  public metricItemsSkipped(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('ItemsSkipped', { statistic: 'Sum', ...props });
  }

  /**
   * `ItemsGone`: Items already gone when their conditional delete arrived (deleted by the application, or by an earlier attempt whose answer was lost).
   *
   * @default - statistic Sum over 1 minute
   */
  public metricItemsGone(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('ItemsGone', { statistic: 'Sum', ...props });
  }

  /**
   * `ItemsFailed`: Expired items that could not be deleted within the retry limit; the `ItemsFailed` alarm watches it.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricItemsFailed(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('ItemsFailed', { statistic: 'Sum', ...props });
  }

  /**
   * `ItemsFound`: Expired items found in the index.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricItemsFound(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('ItemsFound', { statistic: 'Sum', ...props });
  }

  /**
   * `ItemsLeft`: Expired items found but not attempted because the sweep had to stop; the next sweep finds them.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricItemsLeft(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('ItemsLeft', { statistic: 'Sum', ...props });
  }

  /**
   * `WindowsSwept`: Windows (index partitions) read; its sample count is the number of sweeps reported, which the silence alarm watches.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricWindowsSwept(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('WindowsSwept', { statistic: 'Sum', ...props });
  }

  /**
   * `MaxExpiryLagSeconds`: The largest expiry lag of the period: how long after its ttl an item was deleted, in seconds.
   *
   * @default - statistic Maximum over 1 minute
   */
  public metricMaxExpiryLagSeconds(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('MaxExpiryLagSeconds', { statistic: 'Maximum', ...props });
  }

  /**
   * `P99ExpiryLagSeconds`: The 99th percentile of the expiry lag reported by each sweep, in seconds.
   *
   * @default - statistic Maximum over 1 minute
   */
  public metricP99ExpiryLagSeconds(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('P99ExpiryLagSeconds', { statistic: 'Maximum', ...props });
  }

  /**
   * `ClockAheadSeconds`: How far the host clock ran ahead of DynamoDB's and was pulled back, in seconds.
   *
   * @default - statistic Maximum over 1 minute
   */
  public metricClockAheadSeconds(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('ClockAheadSeconds', { statistic: 'Maximum', ...props });
  }

  /**
   * `SweepsStoodBy`: Sweeps that stood by because another sweeper held the table's leader lease (`LEADER_LEASE`, one sweeping Region of a global table); 0 in the Region that sweeps.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricSweepsStoodBy(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('SweepsStoodBy', { statistic: 'Sum', ...props });
  }

  /**
   * `LeaseLayoutMismatch`: Sweeps that stood by beside a leader lease (`LEADER_LEASE`) held with another layout (index, windows, ttl attribute or shard range) than this sweeper's: the Regions' sweepers of the table are not configured alike. Alarmed on with `leaderLease`.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricLeaseLayoutMismatch(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('LeaseLayoutMismatch', { statistic: 'Sum', ...props });
  }

  /**
   * `LeaseReleased`: Times a sweeper gave the leader lease (`LEADER_LEASE`) up: its sweeps had failed (a store error, or every delete failed) and none had succeeded for a lease; another Region's sweeper takes over when it lapses.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricLeaseReleased(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('LeaseReleased', { statistic: 'Sum', ...props });
  }

  /**
   * `WriteConflictsRetried`: Deletes refused with `ReplicatedWriteConflictException` (a multi-Region strongly consistent table, another Region writing the item) and sent again.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricWriteConflictsRetried(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('WriteConflictsRetried', { statistic: 'Sum', ...props });
  }

  /**
   * `EventsPublished`: Expiry events (`Item Expired`) the sink accepted (with `expiryEvents`).
   *
   * @default - statistic Sum over 1 minute
   */
  public metricEventsPublished(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('EventsPublished', { statistic: 'Sum', ...props });
  }

  /**
   * `EventsFailed`: Expiry events and cancellations that could not be published.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricEventsFailed(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('EventsFailed', { statistic: 'Sum', ...props });
  }

  /**
   * `EventsCancelled`: Cancellations (`Item Expiry Cancelled`) the sink accepted.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricEventsCancelled(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('EventsCancelled', { statistic: 'Sum', ...props });
  }

  /**
   * `EventsTruncated`: Expiry events published without their item because of the sink's size limit.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricEventsTruncated(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metric('EventsTruncated', { statistic: 'Sum', ...props });
  }

  /**
   * The expiry lag: the largest of the period (`MaxExpiryLagSeconds`, statistic Maximum), what
   * the lag alarm watches. The same as `metricMaxExpiryLagSeconds()`.
   *
   * @default - statistic Maximum over 1 minute
   */
  public metricExpiryLag(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return this.metricMaxExpiryLagSeconds(props);
  }

  /**
   * `ColdStart`: execution environments started, in the Powertools layout (dimensions
   * `function_name` and `service`, the service being `ttl-sweeper` unless the function's
   * `POWERTOOLS_SERVICE_NAME` says otherwise). With `sweepers` > 1, the first function's.
   *
   * @default - statistic Sum over 1 minute
   */
  public metricColdStarts(props: cloudwatch.MetricOptions = {}): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: this.metricsNamespace,
      metricName: 'ColdStart',
      dimensionsMap: { function_name: this.function.functionName, service: 'ttl-sweeper' },
      statistic: 'Sum',
      period: Duration.minutes(1),
      ...props,
    });
  }
}
