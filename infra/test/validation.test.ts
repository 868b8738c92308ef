// Props are checked when the construct is created, with messages that name the prop, the value
// and what it accepts; the default code location fails with what to do about it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as cdk from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { Checkpoint, DeleteMode, SweepSchedule, TtlSweeper, type TtlSweeperProps } from '../src';
import { BUNDLED_CODE_ZIP, codeFromBuildOutput, DEFAULT_CODE_DIRECTORY, defaultCode } from '../src/code';
import { assetDir, newStack, synth } from './support';

const invalid = (overrides: Partial<TtlSweeperProps>, message: RegExp) =>
  assert.throws(() => synth(overrides), (e: Error) => {
    assert.match(e.message, /^TtlSweeper Test\/Sweeper: invalid props:/);
    assert.match(e.message, message);
    return true;
  });

test("the props that are settings are checked against the binary's ranges in settings.json", () => {
  const spec = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'settings.json'), 'utf8'));
  const rule = (v: string) => spec.settings.find((s: { var: string }) => s.var === v).rule;
  const props: [keyof TtlSweeperProps, string][] = [
    ['windowSeconds', 'WINDOW_SECONDS'],
    ['windowShards', 'WINDOW_SHARDS'],
    ['lookbackWindows', 'LOOKBACK_WINDOWS'],
    ['maxConcurrency', 'MAX_CONCURRENCY'],
    ['maxRetries', 'MAX_RETRIES'],
  ];
  for (const [prop, variable] of props) {
    const { kind, min, max } = rule(variable);
    assert.equal(kind, 'whole', variable);
    for (const value of [min - 1, max + 1]) {
      invalid({ [prop]: value }, new RegExp(`${prop} must be a whole number from ${min} to ${max}\\b.*, got ${value}`));
    }
  }
  // The tick: the binary's whole seconds (it also takes sub-second durations, set on the variable).
  const tick = rule('TICK_SECONDS');
  invalid({ tickSeconds: Math.floor(tick.maxMs / 1000) + 1 }, new RegExp(`from ${Math.ceil(tick.minMs / 1000)} to ${tick.maxMs / 1000}\\b`));
  const lease = rule('LEADER_LEASE');
  const checkpoint = Checkpoint.newTable();
  const schedule = SweepSchedule.rate(cdk.Duration.minutes(1));
  for (const seconds of [lease.min - 1, lease.max + 1]) {
    invalid({ leaderLease: cdk.Duration.seconds(seconds), checkpoint, schedule },
      new RegExp(`leaderLease must be from ${lease.min} s to ${lease.max} s, got ${seconds} s`));
  }
  const catchUp = rule('MAX_CATCHUP');
  invalid({ maxCatchUp: cdk.Duration.seconds(catchUp.maxMs / 1000 + 1), checkpoint },
    new RegExp(`maxCatchUp must be whole seconds from ${catchUp.minMs / 1000} to ${catchUp.maxMs / 1000}`));
  invalid({ deleteMode: 'fast' as DeleteMode }, new RegExp(`deleteMode must be ${rule('DELETE_MODE').choices.map((c: string) => `'${c}'`).join(' or ')}`));
});

test('tick must be 1..30 and less than the schedule period', () => {
  invalid({ tickSeconds: 0 }, /tickSeconds must be a whole number from 1 to 30 \(omit it to sweep once per invocation\), got 0/);
  invalid({ tickSeconds: 31 }, /tickSeconds must be a whole number from 1 to 30/);
  invalid({ tickSeconds: 1.5 }, /tickSeconds must be a whole number from 1 to 30/);
  invalid({ tickSeconds: 60 }, /tickSeconds \(60\) must be less than the schedule period \(60 s\)/);
  const stack = newStack();
  const table = dynamodb.Table.fromTableName(stack, 'T', 'sessions');
  assert.doesNotThrow(() => new TtlSweeper(stack, 'Ok', { table, code: cdk.aws_lambda.Code.fromAsset(assetDir), tickSeconds: 30 }));
});

test('window, shards, lookback, concurrency and retries are range-checked', () => {
  invalid({ windowSeconds: 0 }, /windowSeconds must be a whole number from 1 to 86400 \(the width the writers use\), got 0/);
  invalid({ windowSeconds: 86401 }, /windowSeconds must be a whole number from 1 to 86400/);
  invalid({ windowShards: 0 }, /windowShards must be a whole number from 1 to 1000 \(the shard count the writers use\), got 0/);
  invalid({ windowShards: 1001 }, /windowShards must be a whole number from 1 to 1000/);
  invalid({ lookbackWindows: -1 }, /lookbackWindows must be a whole number from 0 to 10000, got -1/);
  invalid({ maxConcurrency: 257 }, /maxConcurrency must be a whole number from 1 to 256, got 257/);
  invalid({ maxRetries: 31 }, /maxRetries must be a whole number from 0 to 30, got 31/);
  invalid({ memorySize: 64 }, /memorySize must be a whole number from 128 to 10240, got 64/);
  invalid({ reservedConcurrency: 0 }, /reservedConcurrency must be a whole number from 1 to 1000 \(1 keeps invocations from overlapping; tick mode needs 2\), got 0/);
  invalid({ scheduleRetryAttempts: 186 }, /scheduleRetryAttempts must be a whole number from 0 to 185, got 186/);
});

test('names, attributes and modes are checked', () => {
  invalid({ indexName: 'ix' }, /indexName must be an index name of 3 to 255 letters, digits, '_', '-' or '.', got "ix"/);
  invalid({ indexName: 'has space' }, /indexName must be/);
  invalid({ ttlAttribute: '' }, /ttlAttribute must be a non-empty attribute name of at most 255 bytes, got ""/);
  invalid({ windowAttribute: 'x'.repeat(256) }, /windowAttribute must be a non-empty attribute name/);
  invalid({ windowAttribute: 'ttl' }, /windowAttribute must differ from ttlAttribute \(both are "ttl"\)/);
  invalid({ deleteMode: 'fast' as DeleteMode }, /deleteMode must be 'batch' or 'conditional', got "fast"/);
  invalid({ metricsNamespace: '' }, /metricsNamespace must be a CloudWatch namespace \(1 to 255 of letters/);
  invalid({ metricsNamespace: 'AWS/Lambda' }, /not starting with "AWS\/"\), got "AWS\/Lambda"/);
  invalid({ metricsNamespace: 'Sweeper;prod' }, /metricsNamespace must be a CloudWatch namespace/);
  invalid({ alarms: { emails: ['oncall'] } }, /alarms.emails: "oncall" is not an e-mail address/);
});

test('durations are checked', () => {
  invalid({ timeout: cdk.Duration.minutes(16) }, /timeout must be whole seconds from 1 to 900, got 16 minutes/);
  invalid({ scheduleMaxEventAge: cdk.Duration.seconds(30) }, /scheduleMaxEventAge must be whole seconds from 60 to 86400, got 30 seconds/);
  invalid({ checkpoint: Checkpoint.newTable(), maxCatchUp: cdk.Duration.days(31) }, /maxCatchUp must be whole seconds from 60 to 2592000, got 31 days/);
  invalid({ maxCatchUp: cdk.Duration.hours(1) }, /maxCatchUp needs a checkpoint: set checkpoint \(e.g. Checkpoint.newTable\(\)\) or drop maxCatchUp/);
  invalid({ alarms: { silenceAfter: cdk.Duration.seconds(90) } }, /alarms.silenceAfter must be whole minutes from 1 to 1440 minutes, got 1 minute 30 seconds/);
  invalid(
    { schedule: SweepSchedule.rate(cdk.Duration.minutes(10)), tickSeconds: undefined, alarms: { silenceAfter: cdk.Duration.minutes(10) } },
    /alarms.silenceAfter \(600 s\) must be longer than the schedule period \(600 s\)/,
  );
});

test('all problems are reported at once', () => {
  assert.throws(
    () => synth({ windowSeconds: 0, windowShards: 0, tickSeconds: 99 }),
    (e: Error) => {
      const lines = e.message.split('\n').filter((l) => l.startsWith('  - '));
      assert.equal(lines.length, 4, e.message); // tick range, tick vs period, window, shards
      return true;
    },
  );
});

test('schedules are checked when they are made', () => {
  assert.throws(() => SweepSchedule.rate(cdk.Duration.seconds(30)), /the period must be whole minutes from 1 to 60/);
  assert.throws(() => SweepSchedule.rate(cdk.Duration.seconds(90)), /the period must be whole minutes from 1 to 60/);
  assert.throws(() => SweepSchedule.rate(cdk.Duration.minutes(61)), /the period must be whole minutes from 1 to 60/);
  assert.throws(() => SweepSchedule.cron('* * * * *', cdk.Duration.minutes(1)), /expected six fields/);
  assert.throws(() => SweepSchedule.cron('0 12 * * ? *', cdk.Duration.days(1)), /must be whole seconds from 60 to 3600/);
});

test('without code, a bundled zip comes first, then the make package output', () => {
  assert.equal(BUNDLED_CODE_ZIP, path.resolve(__dirname, '..', 'assets', 'ttl-sweeper-lambda-arm64.zip'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ttl-sweeper-bundled-'));
  try {
    const zip = path.join(dir, 'code.zip');
    const missingZip = path.join(dir, 'none.zip');
    const missingDir = path.join(dir, 'none');
    fs.writeFileSync(zip, 'PK');
    const bound = (code: lambda.Code) => code.bind(newStack());
    assert.equal((defaultCode(zip, missingDir) as lambda.AssetCode).path, zip);
    assert.throws(() => defaultCode(missingZip, missingDir), /no Lambda code at .*Run `make package`/s);
    fs.mkdirSync(missingDir);
    fs.writeFileSync(path.join(missingDir, 'bootstrap'), '#!/bin/sh\n');
    assert.equal((defaultCode(missingZip, missingDir) as lambda.AssetCode).path, missingDir);
    assert.ok(bound(defaultCode(zip, missingDir)).s3Location, 'the zip becomes an S3 asset');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('unresolved tokens are not range-checked', () => {
  const stack = newStack();
  const memory = new cdk.CfnParameter(stack, 'Memory', { type: 'Number', default: 256 });
  assert.doesNotThrow(() => synth({ memorySize: memory.valueAsNumber }, stack));
});

test('without code, the make package output is used, or a clear error names the fix', () => {
  assert.equal(DEFAULT_CODE_DIRECTORY, path.resolve(__dirname, '..', '..', 'target', 'lambda', 'ttl-sweeper-lambda'));
  const missing = path.join(os.tmpdir(), 'ttl-sweeper-no-such-dir');
  assert.throws(() => codeFromBuildOutput(missing), (e: Error) => {
    assert.match(e.message, /no Lambda code at .*ttl-sweeper-no-such-dir/);
    assert.match(e.message, /Run `make package`/);
    assert.match(e.message, /or pass `code`/);
    return true;
  });
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'ttl-sweeper-empty-'));
  try {
    assert.throws(() => codeFromBuildOutput(empty), /has no `bootstrap`. Run `make package`/);
  } finally {
    fs.rmSync(empty, { recursive: true, force: true });
  }
  // The construct applies the same check to its default when no zip is bundled.
  const stack = newStack();
  const table = dynamodb.Table.fromTableName(stack, 'T', 'sessions');
  if (fs.existsSync(BUNDLED_CODE_ZIP) || fs.existsSync(path.join(DEFAULT_CODE_DIRECTORY, 'bootstrap'))) {
    assert.doesNotThrow(() => new TtlSweeper(stack, 'Default', { table }));
  } else {
    assert.throws(() => new TtlSweeper(stack, 'Default', { table }), /Run `make package`/);
  }
});
