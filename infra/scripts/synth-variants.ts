// Synthesizes the example app in several variants in one process, as `cdk synth -c ...` would
// (cdk.json's context, then the variant's), with cdk-nag's AwsSolutions checks, into
// <outdir>/<variant>/. Usage: tsx scripts/synth-variants.ts <outdir> <assetDir>

import * as fs from 'node:fs';
import * as path from 'node:path';
import * as cdk from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';
import { sweeperStackFromContext } from '../examples/from-context';
import { Checkpoint, DeleteMode, TtlSweeper } from '../src';

const [outdir, assetDir] = process.argv.slice(2);
if (!outdir || !assetDir) throw new Error('usage: tsx scripts/synth-variants.ts <outdir> <assetDir>');
const defaults: Record<string, string> = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'cdk.json'), 'utf8')).context;

const variants: Record<string, Record<string, string>> = {
  'existing-table': { tableName: 'sessions' },
  checkpoint: { checkpoint: 'true', deleteMode: 'conditional', windowShards: '8', maxCatchUpMinutes: '360' },
  'scale-out': {
    windowShards: '12',
    sweepers: '3',
    checkpoint: 'true',
    deleteMode: 'conditional',
    expiryEvents: 'queue',
    expiryEventsMode: 'archive',
    expiryEventsItem: 'read',
  },
  'events-bus': { expiryEvents: 'eventbridge' },
  'events-firehose': { expiryEvents: 'firehose:expired-items', sweepers: '2', windowShards: '4' },
  'follow-stream': { followStream: 'true', windowShards: '4', sweepers: '2' },
  'follow-stream-existing': {
    tableName: 'sessions',
    tableStreamArn: 'arn:aws:dynamodb:eu-west-1:123456789012:table/sessions/stream/2026-11-26T00:00:00.000',
    followStream: 'true',
  },
  // The stream indexer publishes the expiry events of the items it deletes.
  'follow-stream-events': { followStream: 'true', expiryEvents: 'eventbridge' },
  cron: { scheduleCron: 'cron(0/2 * * * ? *)', scheduleMinutes: '2', tickSeconds: '', alarmEmail: 'oncall@example.com' },
};

for (const [name, context] of Object.entries(variants)) {
  const app = new cdk.App({
    analyticsReporting: false,
    outdir: path.join(outdir, name),
    context: { ...defaults, assetDir, ...context },
  });
  sweeperStackFromContext(app);
  cdk.Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  app.synth();
}

// Several tables in one sweeper, with a leader lease held in a global checkpoint table (created
// here with a replica in a second Region), outside the example app's context values.
{
  const app = new cdk.App({ analyticsReporting: false, outdir: path.join(outdir, 'many-tables') });
  const stack = new cdk.Stack(app, 'TtlSweeper', { env: { account: '123456789012', region: 'eu-west-1' } });
  const sessions = new dynamodb.Table(stack, 'Sessions', {
    partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    timeToLiveAttribute: 'ttl',
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
  });
  TtlSweeper.addExpirationIndex(sessions);
  const checkpoints = new dynamodb.TableV2(stack, 'Checkpoints', {
    partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    replicas: [{ region: 'eu-central-1' }],
  });
  new TtlSweeper(stack, 'Sweeper', {
    code: lambda.Code.fromAsset(assetDir),
    tickSeconds: 1,
    checkpoint: Checkpoint.fromTable(checkpoints),
    leaderLease: cdk.Duration.seconds(10),
    tables: [
      { table: sessions },
      { table: dynamodb.Table.fromTableName(stack, 'Orders', 'orders'), windowShards: 4, deleteMode: DeleteMode.CONDITIONAL },
      { table: dynamodb.Table.fromTableName(stack, 'Carts', 'carts'), indexName: 'byExpiry', ttlAttribute: 'expiresAt' },
    ],
  });
  cdk.Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  app.synth();
}
