// Builds the example stack from an app's context values (see app.ts for the list).

import * as cdk from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { Checkpoint, DeleteMode, ExpiryEventsItem, ExpiryEventsMode, SweepSchedule, type TtlSweeperProps } from '../src';
import type { ExpiryEventsSink } from './sweeper-stack';
import { SweeperStack } from './sweeper-stack';

export function sweeperStackFromContext(app: cdk.App): SweeperStack {
  const ctx = (key: string): string | undefined => {
    const v = app.node.tryGetContext(key);
    return v === undefined || v === null || v === '' ? undefined : String(v);
  };
  const num = (key: string): number | undefined => {
    const v = ctx(key);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`context ${key}=${v}: expected a whole number`);
    return n;
  };
  const deleteMode = ctx('deleteMode');
  if (deleteMode !== undefined && deleteMode !== 'batch' && deleteMode !== 'conditional') {
    throw new Error(`context deleteMode=${deleteMode}: expected batch or conditional`);
  }
  const tableName = ctx('tableName');
  // The construct's followStream (a boolean), and the stream of an existing table, for
  // Table.fromTableAttributes({ tableName, tableStreamArn }). Without followStream the sweeper
  // queries the table's (window, ttl) GSI, which must then exist.
  const followStream = ctx('followStream');
  if (followStream !== undefined && followStream !== 'true' && followStream !== 'false') {
    throw new Error(`context followStream=${followStream}: expected true or false`);
  }
  const tableStreamArn = ctx('tableStreamArn');
  if (tableStreamArn !== undefined && tableName === undefined) {
    throw new Error('context tableStreamArn: only with tableName (a created table gets a stream of its own with followStream=true)');
  }
  if (tableStreamArn !== undefined && followStream !== 'true') {
    throw new Error(
      "context tableStreamArn without followStream=true: the sweeper would query the table's (window, ttl) GSI; " +
        'add -c followStream=true for writers that set only the ttl, or drop tableStreamArn',
    );
  }
  const period = cdk.Duration.minutes(num('scheduleMinutes') ?? 1);
  const cron = ctx('scheduleCron');
  const assetDir = ctx('assetDir');
  const lagAlarmSeconds = num('lagAlarmSeconds');
  const alarmEmail = ctx('alarmEmail');
  const maxCatchUpMinutes = num('maxCatchUpMinutes');

  const sink = ctx('expiryEvents');
  let expiryEvents: ExpiryEventsSink | undefined;
  if (sink === 'eventbridge' || sink === 'queue') {
    expiryEvents = { kind: sink };
  } else if (sink?.startsWith('firehose:') && sink.length > 'firehose:'.length) {
    expiryEvents = { kind: 'firehose', streamName: sink.slice('firehose:'.length) };
  } else if (sink !== undefined) {
    throw new Error(`context expiryEvents=${sink}: expected eventbridge, queue or firehose:<stream name>`);
  }
  const mode = ctx('expiryEventsMode');
  if (mode !== undefined && mode !== 'notify' && mode !== 'archive') {
    throw new Error(`context expiryEventsMode=${mode}: expected notify or archive`);
  }
  const item = ctx('expiryEventsItem');
  if (item !== undefined && item !== 'auto' && item !== 'read' && item !== 'off') {
    throw new Error(`context expiryEventsItem=${item}: expected auto, read or off`);
  }

  const sweeper: Omit<TtlSweeperProps, 'table'> = {
    code: assetDir ? lambda.Code.fromAsset(assetDir) : undefined,
    indexName: ctx('indexName'),
    ttlAttribute: ctx('ttlAttribute'),
    windowAttribute: ctx('windowAttribute'),
    windowSeconds: num('windowSeconds'),
    windowShards: num('windowShards'),
    sweepers: num('sweepers'),
    lookbackWindows: num('lookbackWindows'),
    deleteMode: deleteMode === 'conditional' ? DeleteMode.CONDITIONAL : deleteMode === 'batch' ? DeleteMode.BATCH : undefined,
    maxConcurrency: num('maxConcurrency'),
    maxRetries: num('maxRetries'),
    tickSeconds: num('tickSeconds'),
    schedule: cron ? SweepSchedule.cron(cron, period) : SweepSchedule.rate(period),
    checkpoint: ctx('checkpoint') === 'true' ? Checkpoint.newTable() : undefined,
    maxCatchUp: maxCatchUpMinutes === undefined ? undefined : cdk.Duration.minutes(maxCatchUpMinutes),
    memorySize: num('memorySize'),
    reservedConcurrency: num('reservedConcurrency'),
    followStream: followStream === 'true',
    alarms: {
      lagThreshold: lagAlarmSeconds === undefined ? undefined : cdk.Duration.seconds(lagAlarmSeconds),
      emails: alarmEmail ? [alarmEmail] : undefined,
    },
  };

  return new SweeperStack(app, ctx('stackName') ?? 'TtlSweeper', {
    table: tableName
      ? { kind: 'existing', tableName, tableStreamArn }
      : { kind: 'create', partitionKey: ctx('partitionKey') ?? 'id' },
    sweeper,
    expiryEvents,
    expiryEventsMode: mode === 'archive' ? ExpiryEventsMode.ARCHIVE : mode === 'notify' ? ExpiryEventsMode.NOTIFY : undefined,
    expiryEventsItem: item === undefined ? undefined : ({ auto: ExpiryEventsItem.AUTO, read: ExpiryEventsItem.READ, off: ExpiryEventsItem.OFF } as const)[item],
    env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
  });
}
