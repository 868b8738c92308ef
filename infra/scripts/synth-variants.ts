// Synthesizes the example app in several variants in one process, as `cdk synth -c ...` would
// (cdk.json's context, then the variant's), with cdk-nag's AwsSolutions checks, into
// <outdir>/<variant>/. Usage: tsx scripts/synth-variants.ts <outdir> <assetDir>

import * as fs from 'node:fs';
import * as path from 'node:path';
import * as cdk from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { sweeperStackFromContext } from '../examples/from-context';

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
