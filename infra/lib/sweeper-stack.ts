// The ttl-sweeper stack: the Lambda built by `make package`, its schedule, least-privilege IAM,
// a failure destination, alarms on the sweeper's own metrics, and a dashboard. It either
// creates the table (with the sweeper's GSI) or attaches to an existing table and index.

import * as cdk from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

/** Where the swept table comes from. */
export type TableSource =
  | { kind: 'create'; partitionKey: string; sortKey?: string }
  | { kind: 'existing'; tableName: string };

export interface SweeperStackProps extends cdk.StackProps {
  /** Directory holding the `bootstrap` built by `cargo lambda build --release --arm64`. */
  readonly assetDir: string;
  readonly table: TableSource;
  readonly indexName?: string;
  readonly ttlAttribute?: string;
  readonly windowAttribute?: string;
  readonly windowSeconds?: number;
  readonly windowShards?: number;
  readonly lookbackWindows?: number;
  readonly deleteMode?: 'batch' | 'conditional';
  /** Sweep every N seconds inside each invocation (tick mode); undefined: once per schedule. */
  readonly tickSeconds?: number;
  /** The schedule's period in minutes (EventBridge `rate`). */
  readonly scheduleMinutes?: number;
  /** Create a checkpoint table and enable exact catch-up. */
  readonly checkpoint?: boolean;
  /** Alarm when the maximum expiry lag exceeds this many seconds. */
  readonly lagAlarmSeconds?: number;
  /** E-mail address subscribed to the alarm topic; without it the topic has no subscription. */
  readonly alarmEmail?: string;
  readonly memorySize?: number;
  readonly logRetention?: logs.RetentionDays;
}

export const METRICS_NAMESPACE = 'TtlSweeper';

export class SweeperStack extends cdk.Stack {
  public readonly function: lambda.Function;
  public readonly table: dynamodb.ITable;
  public readonly alarmTopic: sns.Topic;

  constructor(scope: Construct, id: string, props: SweeperStackProps) {
    super(scope, id, props);
    const indexName = props.indexName ?? 'expirationWindowIndex';
    const ttlAttribute = props.ttlAttribute ?? 'ttl';
    const windowAttribute = props.windowAttribute ?? 'expirationWindow';
    const scheduleMinutes = props.scheduleMinutes ?? 1;
    const scheduleSeconds = scheduleMinutes * 60;

    // ---------------------------------------------------------------- the table
    if (props.table.kind === 'create') {
      const table = new dynamodb.Table(this, 'Table', {
        partitionKey: { name: props.table.partitionKey, type: dynamodb.AttributeType.STRING },
        sortKey: props.table.sortKey
          ? { name: props.table.sortKey, type: dynamodb.AttributeType.STRING }
          : undefined,
        billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
        // Native TTL on the same attribute stays on as the free backstop.
        timeToLiveAttribute: ttlAttribute,
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        removalPolicy: cdk.RemovalPolicy.RETAIN,
      });
      table.addGlobalSecondaryIndex({
        indexName,
        partitionKey: { name: windowAttribute, type: dynamodb.AttributeType.STRING },
        sortKey: { name: ttlAttribute, type: dynamodb.AttributeType.NUMBER },
        projectionType: dynamodb.ProjectionType.KEYS_ONLY,
      });
      this.table = table;
    } else {
      this.table = dynamodb.Table.fromTableName(this, 'Table', props.table.tableName);
    }
    const tableArn = this.table.tableArn;
    const indexArn = `${tableArn}/index/${indexName}`;

    const checkpointTable = props.checkpoint
      ? new dynamodb.Table(this, 'CheckpointTable', {
          partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
          billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
          pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
          removalPolicy: cdk.RemovalPolicy.DESTROY,
        })
      : undefined;

    // ---------------------------------------------------------------- logs and role
    const logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: cdk.RemovalPolicy.DESTROY,
    });

    const role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: 'ttl-sweeper: query the expiry index, delete expired items, write its logs',
    });
    const policy = new iam.Policy(this, 'Policy', {
      statements: [
        new iam.PolicyStatement({
          sid: 'QueryExpiryIndex',
          actions: ['dynamodb:Query'],
          resources: [indexArn],
        }),
        new iam.PolicyStatement({
          sid: 'DeleteExpiredItems',
          // BatchWriteItem cannot be limited to deletes in IAM; DeleteItem serves conditional mode.
          actions: ['dynamodb:BatchWriteItem', 'dynamodb:DeleteItem', 'dynamodb:DescribeTable'],
          resources: [tableArn],
        }),
        new iam.PolicyStatement({
          sid: 'WriteOwnLogs',
          actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
          resources: [logGroup.logGroupArn],
        }),
        ...(checkpointTable
          ? [
              new iam.PolicyStatement({
                sid: 'Checkpoint',
                actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DescribeTable'],
                resources: [checkpointTable.tableArn],
              }),
            ]
          : []),
      ],
    });
    policy.attachToRole(role);

    // ---------------------------------------------------------------- failures
    const failureQueue = new sqs.Queue(this, 'FailedInvocations', {
      retentionPeriod: cdk.Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });

    // ---------------------------------------------------------------- the function
    const environment: Record<string, string> = {
      TABLE_NAME: this.table.tableName,
      INDEX_NAME: indexName,
      TTL_ATTRIBUTE: ttlAttribute,
      WINDOW_ATTRIBUTE: windowAttribute,
      WINDOW_SECONDS: String(props.windowSeconds ?? 60),
      WINDOW_SHARDS: String(props.windowShards ?? 1),
      LOOKBACK_WINDOWS: String(props.lookbackWindows ?? 15),
      DELETE_MODE: props.deleteMode ?? 'batch',
      SCHEDULE_SECONDS: String(scheduleSeconds),
      TICK_SECONDS: props.tickSeconds ? String(props.tickSeconds) : 'off',
      METRICS_NAMESPACE,
    };
    if (checkpointTable) {
      environment.CHECKPOINT_TABLE = checkpointTable.tableName;
    }
    this.function = new lambda.Function(this, 'Function', {
      description: 'ttl-sweeper: deletes expired DynamoDB items within seconds',
      runtime: lambda.Runtime.PROVIDED_AL2023,
      architecture: lambda.Architecture.ARM_64,
      handler: 'bootstrap',
      code: lambda.Code.fromAsset(props.assetDir),
      memorySize: props.memorySize ?? 128,
      // Tick mode runs for most of the schedule's period; leave room for the deadline margin.
      timeout: cdk.Duration.seconds(scheduleSeconds + 10),
      // One sweeper at a time: invocations never overlap.
      reservedConcurrentExecutions: 1,
      role,
      logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      environment,
      onFailure: new destinations.SqsDestination(failureQueue),
      retryAttempts: 0,
      maxEventAge: cdk.Duration.minutes(5),
    });
    this.function.node.addDependency(policy);

    // ---------------------------------------------------------------- the schedule
    const rule = new events.Rule(this, 'Schedule', {
      description: 'Invokes ttl-sweeper',
      schedule: events.Schedule.rate(cdk.Duration.minutes(scheduleMinutes)),
    });
    rule.addTarget(
      new targets.LambdaFunction(this.function, {
        retryAttempts: 2,
        maxEventAge: cdk.Duration.minutes(5),
        deadLetterQueue: failureQueue,
      }),
    );

    // ---------------------------------------------------------------- alarms and dashboard
    this.alarmTopic = new sns.Topic(this, 'Alarms', {
      displayName: 'ttl-sweeper alarms',
      masterKey: kms.Alias.fromAliasName(this, 'SnsKey', 'alias/aws/sns'),
      enforceSSL: true,
    });
    if (props.alarmEmail) {
      this.alarmTopic.addSubscription(new subscriptions.EmailSubscription(props.alarmEmail));
    }
    const metric = (name: string, statistic: string) =>
      new cloudwatch.Metric({
        namespace: METRICS_NAMESPACE,
        metricName: name,
        dimensionsMap: { TableName: this.table.tableName },
        statistic,
        period: cdk.Duration.minutes(1),
      });
    const alarms = [
      new cloudwatch.Alarm(this, 'FunctionErrors', {
        alarmDescription: 'ttl-sweeper invocations failed (bad event, failed keys or unreadable windows)',
        metric: this.function.metricErrors({ period: cdk.Duration.minutes(5), statistic: 'Sum' }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      new cloudwatch.Alarm(this, 'ItemsFailed', {
        alarmDescription: 'ttl-sweeper could not delete some expired items',
        metric: metric('ItemsFailed', 'Sum'),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      new cloudwatch.Alarm(this, 'ExpiryLag', {
        alarmDescription: 'expired items stay longer than the precision target',
        metric: metric('MaxExpiryLagSeconds', 'Maximum'),
        threshold: props.lagAlarmSeconds ?? 120,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 3,
        datapointsToAlarm: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      new cloudwatch.Alarm(this, 'SweeperSilent', {
        alarmDescription: 'ttl-sweeper has not reported a sweep for 10 minutes',
        metric: metric('WindowsSwept', 'SampleCount').with({ period: cdk.Duration.minutes(10) }),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.BREACHING,
      }),
    ];
    for (const alarm of alarms) {
      alarm.addAlarmAction(new cwActions.SnsAction(this.alarmTopic));
    }

    new cloudwatch.Dashboard(this, 'Dashboard', {
      widgets: [
        [
          new cloudwatch.GraphWidget({
            title: 'Items deleted / skipped / gone / failed',
            left: [
              metric('ItemsDeleted', 'Sum'),
              metric('ItemsSkipped', 'Sum'),
              metric('ItemsGone', 'Sum'),
              metric('ItemsFailed', 'Sum'),
            ],
            width: 12,
          }),
          new cloudwatch.GraphWidget({
            title: 'Expiry lag (s)',
            left: [metric('MaxExpiryLagSeconds', 'Maximum'), metric('P99ExpiryLagSeconds', 'Maximum')],
            width: 12,
          }),
        ],
        [
          new cloudwatch.GraphWidget({
            title: 'Invocations and errors',
            left: [this.function.metricInvocations(), this.function.metricErrors()],
            width: 12,
          }),
          new cloudwatch.GraphWidget({
            title: 'Left for the next sweep',
            left: [metric('ItemsLeft', 'Sum')],
            width: 12,
          }),
        ],
      ],
    });

    // ---------------------------------------------------------------- cdk-nag, justified
    const v = cdk.Validations.of(this);
    v.acknowledge({
      id: 'AwsSolutions-SQS3',
      reason: 'FailedInvocations is itself the dead-letter target of the schedule and the function',
    });
    if (props.table.kind === 'existing') {
      v.acknowledge({
        id: 'AwsSolutions-DDB3',
        reason: 'The table is not created by this stack; its backups are its owner\'s concern',
      });
    }

    new cdk.CfnOutput(this, 'FunctionName', { value: this.function.functionName });
    new cdk.CfnOutput(this, 'TableName', { value: this.table.tableName });
    new cdk.CfnOutput(this, 'FailedInvocationsQueue', { value: failureQueue.queueUrl });
  }
}
