// The sweeper function: one per shard range, each with its log group, its role and policy, and the
// environment that carries the sweeper's settings to the binary.

import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { expiryEventEnvironment } from './expiry-events';
import { sweeperStatements, writeOwnLogs } from './grants';
import type { TtlSweeperProps } from './props';
import { namesEachTable, type Settings } from './resolve';

/** One sweeper function and what was created with it, in `scope`. */
export interface SweeperFunction {
  readonly scope: Construct;
  /** Its `SHARD_RANGE`; undefined for a single sweeper, which reads every shard. */
  readonly range?: string;
  readonly fn: lambda.Function;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;
  readonly environment: Record<string, string>;
}

/** What every sweeper function shares: its code, its failure queue, and the tables it uses beside the swept ones. */
export interface SweeperResources {
  readonly code: lambda.Code;
  /** Where failed asynchronous invocations go. */
  readonly failureQueue: sqs.IQueue;
  /** With `followStream`, the expiry index table the sweep reads. */
  readonly indexTable?: dynamodb.ITable;
  readonly checkpointTable?: dynamodb.ITable;
}

/**
 * One sweeper function in `scope`: its log group, role and policy, and the function reading
 * the shards `range` (all shards when undefined).
 */
export function sweeperFunction(
  scope: Construct,
  props: TtlSweeperProps,
  settings: Settings,
  range: string | undefined,
  resources: SweeperResources,
): SweeperFunction {
  const { logGroup, role } = logsAndRole(
    scope,
    props,
    'ttl-sweeper: query the expiry index, delete expired items, write its logs',
  );
  const { indexTable, checkpointTable } = resources;
  const statements = sweeperStatements(scope, settings, { indexTable, checkpointTable, writeOwnLogs: writeOwnLogs(logGroup) });
  const policy = new iam.Policy(scope, 'Policy', { statements });
  policy.attachToRole(role);

  const environment = sweeperEnvironment(scope, props, settings, range, resources);
  const fn = new lambda.Function(scope, 'Function', {
    description:
      range === undefined
        ? 'ttl-sweeper: deletes expired DynamoDB items within seconds'
        : `ttl-sweeper: deletes expired DynamoDB items within seconds, shards ${range}`,
    runtime: lambda.Runtime.PROVIDED_AL2023,
    architecture: lambda.Architecture.ARM_64,
    handler: 'bootstrap',
    code: resources.code,
    memorySize: settings.memorySize,
    timeout: Duration.seconds(settings.timeoutSeconds),
    reservedConcurrentExecutions: settings.reservedConcurrency,
    role,
    logGroup,
    loggingFormat: lambda.LoggingFormat.JSON,
    environment,
    onFailure: new destinations.SqsDestination(resources.failureQueue),
    retryAttempts: 0,
    maxEventAge: Duration.minutes(5),
  });
  fn.node.addDependency(policy);
  return { scope, range, fn, role, logGroup, environment };
}

/** The sweeper function's environment: its settings, as the binary reads them. */
function sweeperEnvironment(
  scope: Construct,
  props: TtlSweeperProps,
  settings: Settings,
  range: string | undefined,
  resources: SweeperResources,
): Record<string, string> {
  const { indexTable, checkpointTable } = resources;
  // One table: TABLE_NAME. Several: TABLES, each element the table's name and what its entry
  // sets; the variables below are the function-wide settings the entries fall back to.
  const tables: Record<string, string> = namesEachTable(settings)
    ? { TABLES: Stack.of(scope).toJsonString(settings.tables.map((t) => t.element)) }
    : { TABLE_NAME: settings.tables[0].table.tableName };
  // The index the sweep reads: the table's GSI, or with followStream the expiry index table.
  const index: Record<string, string> = indexTable
    ? { EXPIRY_INDEX_TABLE: indexTable.tableName }
    : { INDEX_NAME: settings.indexName };
  const environment: Record<string, string> = {
    ...tables,
    ...index,
    TTL_ATTRIBUTE: settings.ttlAttribute,
    WINDOW_ATTRIBUTE: settings.windowAttribute,
    WINDOW_SECONDS: String(settings.windowSeconds),
    WINDOW_SHARDS: String(settings.windowShards),
    LOOKBACK_WINDOWS: String(settings.lookbackWindows),
    DELETE_MODE: settings.deleteMode,
    MAX_CONCURRENCY: String(settings.maxConcurrency),
    MAX_RETRIES: String(settings.maxRetries),
    SCHEDULE_SECONDS: String(settings.schedule.periodSeconds),
    TICK_SECONDS: settings.tickSeconds === undefined ? 'off' : String(settings.tickSeconds),
    METRICS_NAMESPACE: settings.metricsNamespace,
  };
  if (range !== undefined) {
    environment.SHARD_RANGE = range;
  }
  if (checkpointTable) {
    environment.CHECKPOINT_TABLE = checkpointTable.tableName;
    environment.MAX_CATCHUP = String(settings.maxCatchUpSeconds);
  }
  if (settings.leaderLeaseSeconds !== undefined) {
    environment.LEADER_LEASE = String(settings.leaderLeaseSeconds);
  }
  Object.assign(environment, expiryEventEnvironment(props.expiryEvents));
  return environment;
}

/** A function's log group and execution role in `scope`. */
export function logsAndRole(scope: Construct, props: TtlSweeperProps, description: string) {
  const logGroup = new logs.LogGroup(scope, 'Logs', {
    retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
    removalPolicy: props.logRemovalPolicy ?? RemovalPolicy.DESTROY,
  });
  const role = new iam.Role(scope, 'Role', { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'), description });
  return { logGroup, role };
}
