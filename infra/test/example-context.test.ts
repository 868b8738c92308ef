// The example app's context values (examples/from-context.ts, `make deploy CDK_ARGS="-c ..."`):
// an existing table alone is GSI mode; followStream with tableStreamArn follows its stream; the
// values that would deploy something else than asked are refused.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cdk from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { sweeperStackFromContext } from '../examples/from-context';
import { assetDir, env } from './support';

const STREAM_ARN = `arn:aws:dynamodb:${env.region}:${env.account}:table/sessions/stream/2026-11-26T00:00:00.000`;

function fromContext(context: Record<string, string>) {
  const app = new cdk.App({ analyticsReporting: false, context: { assetDir, tickSeconds: '1', ...context } });
  const stack = sweeperStackFromContext(app);
  return { stack, template: Template.fromStack(stack) };
}

function variables(stack: cdk.Stack, fn: lambda.Function): Record<string, string> {
  return stack.resolve((fn.node.defaultChild as lambda.CfnFunction).environment).variables;
}

test('tableName alone: the existing table through its GSI, no stream indexer', () => {
  const { stack, template } = fromContext({ tableName: 'sessions' });
  assert.equal(stack.sweeper.indexTable, undefined);
  assert.equal(stack.sweeper.streamFunction, undefined);
  assert.equal(variables(stack, stack.sweeper.function).INDEX_NAME, 'expirationWindowIndex');
  assert.equal(variables(stack, stack.sweeper.function).EXPIRY_INDEX_TABLE, undefined);
  assert.equal(template.findOutputs('ExpiryIndexTable').ExpiryIndexTable, undefined);
  template.resourceCountIs('AWS::Lambda::EventSourceMapping', 0);
});

test('followStream=true with tableStreamArn: the existing table through its stream and an expiry index table', () => {
  const { stack, template } = fromContext({ tableName: 'sessions', followStream: 'true', tableStreamArn: STREAM_ARN });
  assert.ok(stack.sweeper.indexTable, 'an expiry index table');
  assert.ok(stack.sweeper.streamFunction, 'a stream indexer');
  assert.equal(stack.table.tableStreamArn, STREAM_ARN);
  assert.equal(variables(stack, stack.sweeper.function).INDEX_NAME, undefined);
  template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { EventSourceArn: STREAM_ARN });
  assert.ok(template.findOutputs('ExpiryIndexTable').ExpiryIndexTable, 'the ExpiryIndexTable output, for backfill');
});

test('followStream=true on a created table: its own stream, no GSI', () => {
  const { stack, template } = fromContext({ followStream: 'true' });
  assert.ok(stack.sweeper.streamFunction);
  template.hasResourceProperties('AWS::DynamoDB::Table', { StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' } });
  for (const table of Object.values(template.findResources('AWS::DynamoDB::Table'))) {
    assert.equal((table as any).Properties.GlobalSecondaryIndexes, undefined);
  }
  assert.equal(fromContext({ followStream: 'false' }).stack.sweeper.streamFunction, undefined);
});

test('context values that would deploy something else than asked are refused', () => {
  assert.throws(() => fromContext({ tableName: 'sessions', followStream: 'yes', tableStreamArn: STREAM_ARN }), /context followStream=yes: expected true or false/);
  assert.throws(() => fromContext({ tableName: 'sessions', tableStreamArn: STREAM_ARN }), /tableStreamArn without followStream=true/);
  assert.throws(() => fromContext({ tableStreamArn: STREAM_ARN, followStream: 'true' }), /tableStreamArn: only with tableName/);
  assert.throws(() => fromContext({ tableName: 'sessions', followStream: 'true' }), /followStream needs the table's stream ARN/);
});
