#!/usr/bin/env bash
# Packs the construct library, installs the tarball into a fresh CDK app in a temporary directory
# (test/consumer: a pinned lockfile, so npm only reads its cache or the registry), compiles that
# app against the installed type declarations, synthesizes it offline with the CDK CLI and checks
# the template (and lints it when CFN_LINT is set).
set -euo pipefail
export CDK_DISABLE_CLI_TELEMETRY=true CDK_DISABLE_VERSION_CHECK=true
SECONDS=0
cd "$(dirname "$0")/.."
infra="$PWD"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
npm_quiet=(--no-audit --no-fund --loglevel=error --prefer-offline)

# Without the Lambda zip (make dist packs it): the consumer app passes `code` (ASSET_DIR).
tarball="$(TTL_SWEEPER_PACK_WITHOUT_LAMBDA=1 npm pack --silent --pack-destination "$work" 2>/dev/null | tail -n 1)"
mkdir -p "$work/app" "$work/asset"
printf '#!/bin/sh\n' >"$work/asset/bootstrap"
cp test/consumer/package.json test/consumer/package-lock.json test/consumer/.npmrc \
  test/consumer/tsconfig.json test/consumer/cdk.json test/consumer/app.ts "$work/app/"

cd "$work/app"
npm ci "${npm_quiet[@]}"
npm install --no-save "${npm_quiet[@]}" "$work/$tarball"
test -f node_modules/ttl-sweeper-cdk/.jsii || { echo "package-test: the tarball has no .jsii assembly" >&2; exit 1; }

"$infra/node_modules/.bin/tsc" -p tsconfig.json
ASSET_DIR="$work/asset" "$infra/node_modules/.bin/cdk" synth --quiet -o cdk.out >/dev/null

node - cdk.out/Consumer.template.json <<'JS'
const fs = require('node:fs');
const t = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const of = (type) => Object.values(t.Resources).filter((r) => r.Type === type);
const check = (ok, what) => { if (!ok) { console.error(`package-test: ${what}`); process.exit(1); } };
const [fn] = of('AWS::Lambda::Function');
check(fn && fn.Properties.Runtime === 'provided.al2023' && fn.Properties.Architectures[0] === 'arm64', 'arm64 provided.al2023 function');
const vars = fn.Properties.Environment.Variables;
check(vars.TABLE_NAME === 'sessions' && vars.DELETE_MODE === 'conditional' && vars.WINDOW_SHARDS === '4' && vars.TICK_SECONDS === '1', 'environment');
const [schedule] = of('AWS::Scheduler::Schedule');
check(schedule && schedule.Properties.ScheduleExpression === 'rate(1 minute)', 'schedule');
check(schedule.Properties.Target.Input === '{"time":"<aws.scheduler.scheduled-time>"}', 'schedule input');
check(of('AWS::Events::Rule').length === 0, 'no EventBridge rule');
check(of('AWS::DynamoDB::Table').length === 1, 'only the checkpoint table is created');
check(of('AWS::CloudWatch::Alarm').length === 5, 'five alarms');
console.log(`package-test: ${Object.keys(t.Resources).length} resources synthesized from the installed package`);
JS

node - cdk.out/ConsumerScaled.template.json <<'JS'
const fs = require('node:fs');
const t = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const fns = Object.values(t.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');
const vars = fns.map((f) => f.Properties.Environment.Variables);
const ok = fns.length === 2 && vars.map((v) => v.SHARD_RANGE).sort().join() === '0-1,2-3' &&
  vars.every((v) => v.EXPIRY_EVENTS_MODE === 'archive' && v.EXPIRY_EVENTS_ITEM === 'read' &&
    v.DELETE_MODE === 'conditional' && JSON.stringify(v.EXPIRY_EVENTS).includes('sqs:'));
if (!ok) { console.error('package-test: two sweepers with SHARD_RANGE and expiry events', JSON.stringify(vars)); process.exit(1); }
const reads = Object.values(t.Resources).filter((r) => r.Type === 'AWS::IAM::Policy')
  .flatMap((p) => p.Properties.PolicyDocument.Statement).filter((s) => s.Sid === 'ExpiryEventsReadItems');
if (reads.length !== 2 || !reads.every((s) => s.Action === 'dynamodb:BatchGetItem' && !JSON.stringify(s.Resource).includes('*'))) {
  console.error('package-test: BatchGetItem on the table for each sweeper', JSON.stringify(reads)); process.exit(1);
}
console.log('package-test: sweepers and expiryEvents from the installed package');
JS

if [ -n "${CFN_LINT:-}" ]; then
  "$CFN_LINT" --ignore-checks W3005 -- cdk.out/Consumer.template.json cdk.out/ConsumerScaled.template.json
  echo "cfn-lint: consumer templates clean"
fi
echo "package-test: ok ($tarball, ${SECONDS} s)"
