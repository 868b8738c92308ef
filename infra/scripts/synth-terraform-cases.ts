// Synthesizes the construct for the choices of each case the Terraform module's drift test
// (infra/terraform/test/test_drift.py) reads from its examples: each case is the module's inputs,
// turned here into the construct's props, and its template is written to <outdir>/<case>.json.
// Usage: tsx scripts/synth-terraform-cases.ts <cases.json> <outdir>

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as cdk from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as firehose from 'aws-cdk-lib/aws-kinesisfirehose';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import {
  Checkpoint,
  DeleteMode,
  ExpiryEventsItem,
  ExpiryEventsMode,
  SweepSchedule,
  TtlSweeper,
  type ExpiryEventsOptions,
  type TtlSweeperProps,
} from '../src';

interface Case {
  name: string;
  region: string;
  account: string;
  inputs: Record<string, any>;
}

const [casesFile, outdir] = process.argv.slice(2);
if (!casesFile || !outdir) throw new Error('usage: tsx scripts/synth-terraform-cases.ts <cases.json> <outdir>');
const cases: Case[] = JSON.parse(fs.readFileSync(casesFile, 'utf8'));

const assetDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ttl-sweeper-tf-asset-'));
fs.writeFileSync(path.join(assetDir, 'bootstrap'), '#!/bin/sh\n');

/** The module's inputs that have no prop: where the code comes from, names and tags. */
const NOT_PROPS = new Set(['name', 'local_existing_package', 's3_existing_package', 'tags', 'schedule_cron_period_seconds', 'schedule_timezone']);

/**
 * An input known only after apply in Terraform (an example's `aws_sqs_queue.x.arn`, given as
 * "{{...}}"), as a token: aws-cdk-lib then writes it as it is rather than parsing it as an ARN.
 */
function late(value: string | undefined): string | undefined {
  return value !== undefined && value.includes('{{') ? cdk.Lazy.string({ produce: () => value }) : value;
}

/** The construct's props for the module's `inputs` (every input must be known here). */
function props(stack: cdk.Stack, inputs: Record<string, any>): TtlSweeperProps {
  const used = new Set<string>();
  const input = (name: string) => {
    used.add(name);
    return inputs[name] ?? undefined;
  };
  const seconds = (name: string) => (input(name) === undefined ? undefined : cdk.Duration.seconds(input(name)));
  const key = (id: string, arn: string | undefined) => (arn === undefined ? undefined : kms.Key.fromKeyArn(stack, id, late(arn)!));

  const table = dynamodb.Table.fromTableAttributes(stack, 'Table', {
    tableName: input('table_name'),
    tableStreamArn: late(input('table_stream_arn')),
    encryptionKey: key('TableKey', input('table_kms_key_arn')),
  });
  let checkpoint: Checkpoint | undefined;
  if (input('create_checkpoint_table')) checkpoint = Checkpoint.newTable();
  if (input('checkpoint_table_name') !== undefined) {
    checkpoint = Checkpoint.fromTable(
      dynamodb.Table.fromTableAttributes(stack, 'Checkpoints', {
        tableName: input('checkpoint_table_name'),
        encryptionKey: key('CheckpointKey', input('checkpoint_table_kms_key_arn')),
      }),
    );
  }
  const cron = input('schedule_cron');
  const rate = input('schedule_rate_minutes');
  const schedule = cron !== undefined
    ? SweepSchedule.cron(cron, cdk.Duration.seconds(inputs.schedule_cron_period_seconds), cdk.TimeZone.of(inputs.schedule_timezone ?? 'Etc/UTC'))
    : rate !== undefined ? SweepSchedule.rate(cdk.Duration.minutes(rate)) : undefined;
  const topicArn = input('alarm_topic_arn');
  const ev = input('expiry_events');
  let expiryEvents: ExpiryEventsOptions | undefined;
  if (ev) {
    expiryEvents = {
      eventBus: ev.event_bus_arn
        ? events.EventBus.fromEventBusAttributes(stack, 'Bus', { eventBusArn: late(ev.event_bus_arn)!, eventBusName: 'bus', eventBusPolicy: '' })
        : undefined,
      queue: ev.queue_arn
        ? sqs.Queue.fromQueueAttributes(stack, 'Queue', {
          queueArn: late(ev.queue_arn)!,
          queueUrl: late(ev.queue_url),
          queueName: 'expiry-events',
          keyArn: late(ev.queue_kms_key_arn ?? undefined),
        })
        : undefined,
      deliveryStream: ev.delivery_stream_name ? firehose.DeliveryStream.fromDeliveryStreamName(stack, 'Stream', ev.delivery_stream_name) : undefined,
      mode: ev.mode as ExpiryEventsMode | undefined,
      item: (ev.item ?? undefined) as ExpiryEventsItem | undefined,
    };
  }
  const result: TtlSweeperProps = {
    table,
    code: lambda.Code.fromAsset(assetDir),
    followStream: input('follow_stream'),
    indexName: input('index_name'),
    ttlAttribute: input('ttl_attribute'),
    windowAttribute: input('window_attribute'),
    windowSeconds: input('window_seconds'),
    windowShards: input('window_shards'),
    lookbackWindows: input('lookback_windows'),
    deleteMode: input('delete_mode') as DeleteMode | undefined,
    maxConcurrency: input('max_concurrency'),
    maxRetries: input('max_retries'),
    tickSeconds: input('tick_seconds'),
    schedule,
    scheduleEnabled: input('schedule_enabled'),
    scheduleRetryAttempts: input('schedule_retry_attempts'),
    scheduleMaxEventAge: seconds('schedule_max_event_age_seconds'),
    checkpoint,
    maxCatchUp: seconds('max_catch_up_seconds'),
    leaderLease: seconds('leader_lease_seconds'),
    metricsNamespace: input('metrics_namespace'),
    memorySize: input('memory_size'),
    timeout: seconds('timeout_seconds'),
    reservedConcurrency: input('reserved_concurrency'),
    logRetention: input('log_retention_days') as logs.RetentionDays | undefined,
    logRemovalPolicy: input('log_group_skip_destroy') ? cdk.RemovalPolicy.RETAIN : undefined,
    alarms: {
      enabled: input('create_alarms'),
      topic: topicArn ? sns.Topic.fromTopicArn(stack, 'Topic', late(topicArn)!) : undefined,
      encryptTopic: input('encrypt_alarm_topic'),
      emails: input('alarm_emails'),
      lagThreshold: seconds('lag_alarm_threshold_seconds'),
      silenceAfter: seconds('silence_alarm_after_seconds'),
    },
    expiryEvents,
    dashboard: input('create_dashboard'),
  };
  const unknown = Object.keys(inputs).filter((k) => !used.has(k) && !NOT_PROPS.has(k));
  if (unknown.length > 0) throw new Error(`no prop for the module's inputs ${unknown.join(', ')}: add them to ${__filename}`);
  return result;
}

fs.mkdirSync(outdir, { recursive: true });
for (const c of cases) {
  const app = new cdk.App({ analyticsReporting: false });
  const stack = new cdk.Stack(app, 'Test', { env: { account: c.account, region: c.region } });
  new TtlSweeper(stack, 'Sweeper', props(stack, c.inputs));
  fs.writeFileSync(path.join(outdir, `${c.name}.json`), JSON.stringify(Template.fromStack(stack).toJSON(), null, 1));
}
fs.rmSync(assetDir, { recursive: true, force: true });
console.log(`synth-terraform-cases: ${cases.length} templates in ${outdir}`);
