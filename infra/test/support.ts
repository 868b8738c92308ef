// Shared helpers of the template tests: a stand-in bootstrap, a stack with an imported table, and
// the policy statements of a role by Sid.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as cdk from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';
import { Checkpoint, DeleteMode, TtlSweeper, type TtlSweeperProps } from '../src';

export const assetDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ttl-sweeper-asset-'));
fs.writeFileSync(path.join(assetDir, 'bootstrap'), '#!/bin/sh\n');
process.on('exit', () => fs.rmSync(assetDir, { recursive: true, force: true }));

export const env = { account: '123456789012', region: 'eu-west-1' };

export function newStack(): cdk.Stack {
  const app = new cdk.App({ analyticsReporting: false });
  return new cdk.Stack(app, 'Test', { env });
}

/** A sweeper on the table `sessions`, imported by ARN. */
export function synth(overrides: Partial<TtlSweeperProps> = {}, stack = newStack()) {
  const table = dynamodb.Table.fromTableAttributes(stack, 'Sessions', {
    tableArn: `arn:aws:dynamodb:${env.region}:${env.account}:table/sessions`,
  });
  const sweeper = new TtlSweeper(stack, 'Sweeper', {
    table,
    code: lambda.Code.fromAsset(assetDir),
    tickSeconds: 1,
    ...overrides,
  });
  return { stack, sweeper, template: Template.fromStack(stack) };
}

/** Settings each unlike its default, for the tests that follow them into the environment (a new checkpoint table each call). */
export function settingsUnlikeTheDefaults(): Partial<TtlSweeperProps> {
  return {
    ttlAttribute: 'expiresAt',
    windowSeconds: 300,
    windowShards: 8,
    lookbackWindows: 4,
    deleteMode: DeleteMode.CONDITIONAL,
    maxConcurrency: 16,
    maxRetries: 5,
    tickSeconds: 2,
    checkpoint: Checkpoint.newTable(),
    metricsNamespace: 'Sweepers/Sessions',
    memorySize: 256,
  };
}

export interface Statement {
  Sid?: string;
  Action: unknown;
  Resource: unknown;
  Effect: string;
  Condition?: unknown;
}

/** The statements of every IAM policy attached to `roleLogicalId`, by Sid (or by actions). */
export function statements(template: Template, roleLogicalId: string): Record<string, Statement> {
  const out: Record<string, Statement> = {};
  for (const p of Object.values(template.findResources('AWS::IAM::Policy'))) {
    const roles = JSON.stringify((p as any).Properties.Roles);
    if (!roles.includes(`"${roleLogicalId}"`)) continue;
    for (const s of (p as any).Properties.PolicyDocument.Statement) {
      out[s.Sid ?? JSON.stringify(s.Action)] = s;
    }
  }
  return out;
}

/** The logical id of the one resource of `type` whose id starts with `prefix`. */
export function logicalId(template: Template, type: string, prefix: string): string {
  const ids = Object.keys(template.findResources(type)).filter((id) => id.startsWith(prefix));
  if (ids.length !== 1) throw new Error(`expected one ${type} ${prefix}*, found ${ids.join(', ') || 'none'}`);
  return ids[0];
}

/** cdk-nag AwsSolutions findings that are not acknowledged. */
export function nagViolations(scope: cdk.Stack): string[] {
  const report = new AwsSolutionsChecks().validateScope(scope);
  return (report.violations ?? []).map((v: any) => `${v.ruleName}: ${v.description}`);
}

/** The synthesized `GlobalSecondaryIndexes` entry of a KEYS_ONLY (window, ttl) index. */
export function expiryGsi(indexName: string, windowAttribute: string, ttlAttribute: string) {
  return {
    IndexName: indexName,
    KeySchema: [
      { AttributeName: windowAttribute, KeyType: 'HASH' },
      { AttributeName: ttlAttribute, KeyType: 'RANGE' },
    ],
    Projection: { ProjectionType: 'KEYS_ONLY' },
  };
}

/** The `ItemsLeft` alarm's properties on the table `sessions` with every default. */
export const itemsLeftAlarm = {
  Namespace: 'TtlSweeper',
  MetricName: 'ItemsLeft',
  Dimensions: [{ Name: 'TableName', Value: 'sessions' }],
  Statistic: 'Sum',
  Period: 60,
  EvaluationPeriods: 3,
  DatapointsToAlarm: 3,
  Threshold: 0,
  ComparisonOperator: 'GreaterThanThreshold',
  TreatMissingData: 'notBreaching',
};
