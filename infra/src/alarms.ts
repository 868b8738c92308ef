// The alarms on the sweeper's own metrics, on its functions and, with `followStream`, on the
// stream indexer, and the topic they notify: one the caller gives, or one created with a KMS key of
// its own that CloudWatch may publish with.

import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';
import type { SweeperFunction } from './function';
import type { SweeperAlarmOptions } from './props';
import { namesEachTable, type Settings } from './resolve';
import type { SweeperView } from './sweeper-view';

/**
 * The page that says, for each alarm, what it means, what to check and what to do: each alarm's
 * description links to its section, `#<the alarm's id, in lower case>` (the SAM template's
 * descriptions link to the same, from its `Docs` mapping). The page as of this release: its tag,
 * `v<version>` (docs/releasing.md), in the repository Cargo.toml names; tests/release.rs holds
 * this link, the SAM template's and the Terraform module's to both.
 */
export const ALARMS_DOC_URL = 'https://github.com/ttl-sweeper/ttl-sweeper/blob/v0.1.0/docs/alarms.md';

/** `text`, then the link to the section of docs/alarms.md on the alarm `id`. */
export function alarmDescription(text: string, id: string): string {
  return `${text}. What to check and do: ${ALARMS_DOC_URL}#${id.toLowerCase()}`;
}

/**
 * The sweeper's alarms, in `sweeper` (and, with several functions or tables, in the scope of each),
 * each notifying the alarm topic, which `options.emails` are subscribed to.
 */
export function sweeperAlarms(
  sweeper: SweeperView,
  options: SweeperAlarmOptions,
  settings: Settings,
  parts: SweeperFunction[],
): { topic: sns.ITopic; alarms: cloudwatch.Alarm[] } {
  const topic = options.topic ?? newAlarmTopic(sweeper, options.encryptTopic ?? true);
  const alarms = [...functionAndTableAlarms(sweeper, parts, settings), ...streamAlarms(sweeper, settings)];
  for (const email of options.emails ?? []) {
    topic.addSubscription(new subscriptions.EmailSubscription(email));
  }
  for (const alarm of alarms) {
    alarm.addAlarmAction(new cwActions.SnsAction(topic));
  }
  return { topic, alarms };
}

/** The alarms: function errors, failed items, expiry lag, items left, silence (and per function with several). */
function functionAndTableAlarms(sweeper: SweeperView, parts: SweeperFunction[], settings: Settings): cloudwatch.Alarm[] {
  const periodSeconds = settings.schedule.periodSeconds;
  const alarmPeriod = Duration.seconds(Math.ceil(periodSeconds / 60) * 60);
  const alarms: cloudwatch.Alarm[] = [
    new cloudwatch.Alarm(sweeper, 'FunctionErrors', {
      alarmDescription: alarmDescription('ttl-sweeper invocations failed (bad event, failed keys or unreadable windows)', 'FunctionErrors'),
      metric: sweeper.function.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }),
  ];
  // Each table's alarms on its own metrics (the TableName dimension). The first table's keep the
  // ids of a single table's; the others live in `Table2`, `Table3`, ...
  const several = namesEachTable(settings);
  sweeper.tables.forEach((table, i) => {
    const scope = i === 0 ? sweeper : new Construct(sweeper, `Table${i + 1}`);
    const of = several ? ` (table ${table.tableName})` : '';
    alarms.push(
      new cloudwatch.Alarm(scope, 'ItemsFailed', {
        alarmDescription: alarmDescription(`ttl-sweeper could not delete some expired items${of}`, 'ItemsFailed'),
        metric: sweeper.tableMetric(table, 'ItemsFailed', { statistic: 'Sum', period: Duration.minutes(1) }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      new cloudwatch.Alarm(scope, 'ExpiryLag', {
        alarmDescription: alarmDescription(`expired items stay longer than the precision target${of}`, 'ExpiryLag'),
        metric: sweeper.tableMetric(table, 'MaxExpiryLagSeconds', { statistic: 'Maximum', period: alarmPeriod }),
        threshold: settings.lagThresholdSeconds,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 3,
        datapointsToAlarm: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      // Items found but not attempted because the sweep had to stop (its deadline): once is a
      // backlog being worked off; every period for three, sweeps that cannot keep up.
      new cloudwatch.Alarm(scope, 'ItemsLeft', {
        alarmDescription: alarmDescription(`ttl-sweeper sweeps keep stopping with expired items left for the next one${of}`, 'ItemsLeft'),
        metric: sweeper.tableMetric(table, 'ItemsLeft', { statistic: 'Sum', period: alarmPeriod }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 3,
        datapointsToAlarm: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    // A sweeper that finds the lease held with another layout than its own (index, windows,
    // ttl attribute or shard range) stands by beside it for good: the Regions' sweepers of the
    // table are not configured alike.
    if (settings.leaderLeaseSeconds !== undefined) {
      alarms.push(
        new cloudwatch.Alarm(scope, 'LeaseLayoutMismatch', {
          alarmDescription: alarmDescription(
            `a ttl-sweeper stands by beside a leader lease held with another layout than its own${of}: configure every Region's sweeper of the table alike`,
            'LeaseLayoutMismatch',
          ),
          metric: sweeper.tableMetric(table, 'LeaseLayoutMismatch', { statistic: 'Sum', period: Duration.minutes(1) }),
          threshold: 0,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
    }
    // With a leader lease only the holder sweeps: the others report no sweep, and a silence
    // alarm would fire wherever a sweeper stands by.
    if (settings.leaderLeaseSeconds === undefined) {
      alarms.push(
        new cloudwatch.Alarm(scope, 'SweeperSilent', {
          alarmDescription: alarmDescription(`ttl-sweeper has not reported a sweep${of} for ${settings.silenceAfterSeconds / 60} minutes`, 'SweeperSilent'),
          metric: sweeper.tableMetric(table, 'WindowsSwept', {
            statistic: 'SampleCount',
            period: Duration.seconds(settings.silenceAfterSeconds),
          }),
          threshold: 1,
          comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cloudwatch.TreatMissingData.BREACHING,
        }),
      );
    }
  });
  if (parts.length > 1) {
    // The table's own metrics sum over every sweeper; each function also gets its own error
    // alarm and one for a schedule that stopped invoking it.
    parts.forEach(({ scope, fn }, i) => {
      if (i > 0) {
        alarms.push(
          new cloudwatch.Alarm(scope, 'FunctionErrors', {
            alarmDescription: alarmDescription(
              `ttl-sweeper invocations for shards ${sweeper.shardRanges[i]} failed (bad event, failed keys or unreadable windows)`,
              'FunctionErrors',
            ),
            metric: fn.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
            threshold: 0,
            comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluationPeriods: 1,
            treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
          }),
        );
      }
      alarms.push(
        new cloudwatch.Alarm(scope, 'NotInvoked', {
          alarmDescription: alarmDescription(
            `ttl-sweeper for shards ${sweeper.shardRanges[i]} has not been invoked for ${settings.silenceAfterSeconds / 60} minutes`,
            'NotInvoked',
          ),
          metric: fn.metricInvocations({ period: Duration.seconds(settings.silenceAfterSeconds), statistic: 'Sum' }),
          threshold: 1,
          comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cloudwatch.TreatMissingData.BREACHING,
        }),
      );
    });
  }
  return alarms;
}

/** With `followStream`, the stream indexer's alarms: its backlog, and records it gave up on. */
function streamAlarms(sweeper: SweeperView, settings: Settings): cloudwatch.Alarm[] {
  if (!sweeper.streamFunction) return [];
  // The stream's backlog: how long the newest record of a batch waited before the indexer
  // got it. An item gets its index entry (and can be swept) only after its record is handled.
  return [
    new cloudwatch.Alarm(sweeper, 'StreamIteratorAge', {
      alarmDescription: alarmDescription('the ttl-sweeper stream indexer falls behind the table\'s stream', 'StreamIteratorAge'),
      metric: sweeper.streamFunction.metric('IteratorAge', { statistic: 'Maximum', period: Duration.minutes(1) }),
      threshold: settings.lagThresholdSeconds * 1000,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 3,
      datapointsToAlarm: 3,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }),
    // Records that failed every retry: their items have no index entry, so no sweep sees
    // them until `backfill` writes it. One is enough to act on.
    new cloudwatch.Alarm(sweeper, 'StreamRecordsFailed', {
      alarmDescription: alarmDescription(
        'stream records failed every retry and went to the ttl-sweeper stream indexer\'s on-failure queue: their items need ttl-sweeper backfill, which writes their expiry index entries',
        'StreamRecordsFailed',
      ),
      metric: sweeper.streamFailureQueue!.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: Duration.minutes(1) }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }),
  ];
}

/** The alarm topic the sweeper creates: TLS only, encrypted with a key of its own if `encrypt`. */
function newAlarmTopic(scope: Construct, encrypt: boolean): sns.Topic {
  if (!encrypt) {
    const topic = new sns.Topic(scope, 'Alarms', { displayName: 'ttl-sweeper alarms', enforceSSL: true });
    Validations.of(topic).acknowledge({
      id: 'AwsSolutions-SNS2',
      reason: 'encryptTopic is false: the alarm topic carries alarm names and states only, no item data',
    });
    return topic;
  }
  const key = new kms.Key(scope, 'AlarmsKey', {
    description: 'ttl-sweeper: encrypts the alarm topic',
    enableKeyRotation: true,
    removalPolicy: RemovalPolicy.DESTROY,
    pendingWindow: Duration.days(7),
  });
  // CloudWatch alarms can publish to an encrypted topic only if the key lets them.
  key.addToResourcePolicy(
    new iam.PolicyStatement({
      sid: 'CloudWatchAlarmsPublish',
      principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
      actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
      resources: ['*'],
    }),
  );
  return new sns.Topic(scope, 'Alarms', {
    displayName: 'ttl-sweeper alarms',
    masterKey: key,
    enforceSSL: true,
  });
}
