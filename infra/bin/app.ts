// The CDK app. Configure it with context values (`cdk synth -c tableName=sessions` or cdk.json):
//   tableName        attach to this existing table (its GSI must already exist) — else a table is created
//   partitionKey     partition key of the created table (default "id")
//   indexName, ttlAttribute, windowAttribute, windowSeconds, windowShards, lookbackWindows,
//   deleteMode, tickSeconds, scheduleMinutes, checkpoint ("true"), lagAlarmSeconds, alarmEmail,
//   memorySize       as in the README's configuration table
//   assetDir         directory with the arm64 `bootstrap` (default ../target/lambda/ttl-sweeper-lambda)

import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as cdk from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { SweeperStack, type SweeperStackProps } from '../lib/sweeper-stack.ts';

const app = new cdk.App();
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
const here = path.dirname(fileURLToPath(import.meta.url));
const deleteMode = ctx('deleteMode');
if (deleteMode !== undefined && deleteMode !== 'batch' && deleteMode !== 'conditional') {
  throw new Error(`context deleteMode=${deleteMode}: expected batch or conditional`);
}
const tableName = ctx('tableName');

const props: SweeperStackProps = {
  assetDir: ctx('assetDir') ?? path.join(here, '..', '..', 'target', 'lambda', 'ttl-sweeper-lambda'),
  table: tableName
    ? { kind: 'existing', tableName }
    : { kind: 'create', partitionKey: ctx('partitionKey') ?? 'id' },
  indexName: ctx('indexName'),
  ttlAttribute: ctx('ttlAttribute'),
  windowAttribute: ctx('windowAttribute'),
  windowSeconds: num('windowSeconds'),
  windowShards: num('windowShards'),
  lookbackWindows: num('lookbackWindows'),
  deleteMode: deleteMode as SweeperStackProps['deleteMode'],
  tickSeconds: num('tickSeconds'),
  scheduleMinutes: num('scheduleMinutes'),
  checkpoint: ctx('checkpoint') === 'true',
  lagAlarmSeconds: num('lagAlarmSeconds'),
  alarmEmail: ctx('alarmEmail'),
  memorySize: num('memorySize'),
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
};

new SweeperStack(app, ctx('stackName') ?? 'TtlSweeper', props);
cdk.Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
