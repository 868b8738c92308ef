// A CDK app of someone else's: the sweeper from the installed ttl-sweeper-cdk package, on a table
// imported with Table.fromTableAttributes. ASSET_DIR holds the bootstrap to deploy.

import * as assert from 'node:assert/strict';
import * as cdk from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Checkpoint, DeleteMode, ExpiryEventsItem, ExpiryEventsMode, SweepSchedule, TtlSweeper } from 'ttl-sweeper-cdk';

const assetDir = process.env.ASSET_DIR;
if (!assetDir) throw new Error('ASSET_DIR is not set');

const app = new cdk.App({ analyticsReporting: false });
const stack = new cdk.Stack(app, 'Consumer', { env: { account: '123456789012', region: 'eu-west-1' } });
const table = dynamodb.Table.fromTableAttributes(stack, 'Sessions', {
  tableArn: 'arn:aws:dynamodb:eu-west-1:123456789012:table/sessions',
});
const sweeper = new TtlSweeper(stack, 'Sweeper', {
  table,
  code: lambda.Code.fromAsset(assetDir),
  tickSeconds: 1,
  deleteMode: DeleteMode.CONDITIONAL,
  windowShards: 4,
  schedule: SweepSchedule.rate(cdk.Duration.minutes(1)),
  checkpoint: Checkpoint.newTable(),
  alarms: { lagThreshold: cdk.Duration.seconds(30) },
});
new cdk.CfnOutput(stack, 'FunctionArn', { value: sweeper.function.functionArn });

// Two functions splitting four shards, publishing expiry events, with the items read, to a queue
// before deleting.
const scaled = new cdk.Stack(app, 'ConsumerScaled', { env: { account: '123456789012', region: 'eu-west-1' } });
const split = new TtlSweeper(scaled, 'Sweeper', {
  table: dynamodb.Table.fromTableName(scaled, 'Sessions', 'sessions'),
  code: lambda.Code.fromAsset(assetDir),
  windowShards: 4,
  sweepers: 2,
  deleteMode: DeleteMode.CONDITIONAL,
  expiryEvents: {
    queue: new sqs.Queue(scaled, 'Expiries', { enforceSSL: true }),
    mode: ExpiryEventsMode.ARCHIVE,
    item: ExpiryEventsItem.READ,
  },
});
assert.deepEqual(split.shardRanges, ['0-1', '2-3']);

// Installed from the registry, the package is not next to a `make package` output: without
// `code` it says what to do.
const elsewhere = new cdk.Stack(new cdk.App(), 'Elsewhere');
assert.throws(
  () => new TtlSweeper(elsewhere, 'Sweeper', { table: dynamodb.Table.fromTableName(elsewhere, 'T', 'sessions') }),
  /no Lambda code at .*Run `make package`.*or pass `code`/s,
);

app.synth();
