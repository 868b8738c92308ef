// Each alarm's description links to its section of docs/alarms.md, built from ALARMS_DOC_URL (the
// construct) or the `Docs` mapping (the SAM template, whose descriptions are the construct's);
// every section of the page is an alarm one of them creates. The ItemsLeft alarm, in both.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as cdk from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { parse, type CollectionTag, type ScalarTag } from 'yaml';
import { Checkpoint, type TtlSweeperProps } from '../src';
import { ALARMS_DOC_URL } from '../src/alarms';
import { env, itemsLeftAlarm, newStack, synth } from './support';

const page = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'alarms.md'), 'utf8');
/** The page's `## ` sections, as the anchors GitHub gives them. */
const sections = [...page.matchAll(/^## (.+)$/gm)].map((m) => m[1].trim().toLowerCase().replace(/[^a-z0-9 _-]/g, '').replace(/ /g, '-'));

const STREAM_ARN = `arn:aws:dynamodb:${env.region}:${env.account}:table/sessions/stream/2026-11-26T00:00:00.000`;

/** Every kind of alarm: one table, a lease, the stream indexer, several sweepers, several tables. */
function variants(): { name: string; built: ReturnType<typeof synth> }[] {
  const leased = newStack();
  const checkpoint = Checkpoint.fromTable(dynamodb.Table.fromTableName(leased, 'Checkpoints', 'sweeper-checkpoints'));
  const following = newStack();
  const streamed = dynamodb.Table.fromTableAttributes(following, 'Streamed', { tableName: 'sessions', tableStreamArn: STREAM_ARN });
  const many = newStack();
  const tables = ['orders', 'carts'].map((name) => ({ table: dynamodb.Table.fromTableName(many, name, name) }));
  const props: [string, Partial<TtlSweeperProps>, cdk.Stack?][] = [
    ['one table', {}],
    ['leaderLease', { checkpoint, leaderLease: cdk.Duration.seconds(10) }, leased],
    ['followStream', { table: streamed, followStream: true }, following],
    ['sweepers', { windowShards: 4, sweepers: 2 }],
    ['tables', { table: undefined, tables }, many],
  ];
  return props.map(([name, p, stack]) => ({ name, built: synth(p, stack) }));
}

/** The description of `alarm`, resolved. */
const describe = (built: ReturnType<typeof synth>, alarm: cloudwatch.Alarm) =>
  built.stack.resolve((alarm.node.defaultChild as cloudwatch.CfnAlarm).alarmDescription) as string;

test('every alarm of the construct links to its section of docs/alarms.md', () => {
  assert.match(ALARMS_DOC_URL, /^https:\/\/github\.com\/[^/]+\/[^/]+\/blob\/[^/]+\/docs\/alarms\.md$/);
  const linked = new Set<string>();
  for (const { name, built } of variants()) {
    assert.ok(built.sweeper.alarms.length > 0, name);
    for (const alarm of built.sweeper.alarms) {
      const description = describe(built, alarm);
      const anchor = alarm.node.id.toLowerCase();
      assert.ok(
        description.endsWith(`. What to check and do: ${ALARMS_DOC_URL}#${anchor}`),
        `${name}: ${alarm.node.path}: ${description}`,
      );
      assert.ok(sections.includes(anchor), `${name}: docs/alarms.md has no section #${anchor} (${sections.join(', ')})`);
      assert.ok(description.length <= 1024, `${name}: ${alarm.node.path}: longer than CloudWatch allows`);
      linked.add(anchor);
    }
  }
  // No section of the page for an alarm that no longer exists.
  assert.deepEqual([...linked].sort(), [...sections].sort());
});

// ---------------------------------------------------------------- the SAM template

const cfnTags: (ScalarTag | CollectionTag)[] = ['Ref', 'Sub', 'GetAtt', 'If', 'Equals', 'Not', 'And', 'Condition', 'Join', 'Select', 'Split', 'FindInMap']
  .flatMap((name) => {
    const long = name === 'Ref' || name === 'Condition' ? name : `Fn::${name}`;
    return [
      { tag: `!${name}`, resolve: (s: string) => ({ [long]: s }) } as ScalarTag,
      { tag: `!${name}`, collection: 'seq', resolve: (seq: any) => ({ [long]: seq.toJSON() }) } as CollectionTag,
    ];
  });
const template = parse(fs.readFileSync(path.join(__dirname, '..', 'sam', 'template.yaml'), 'utf8'), { customTags: cfnTags }) as any;

/** A SAM alarm's description: `!Sub [text, { Url: !FindInMap [...] }]` with the mapping's value. */
function samDescription(v: any): string {
  assert.ok(Array.isArray(v?.['Fn::Sub']), `not a !Sub with variables: ${JSON.stringify(v)}`);
  const [text, variables] = v['Fn::Sub'];
  return text.replace(/\$\{([A-Za-z]+)\}/g, (_: string, name: string) => {
    const [map, key, attribute] = variables[name]['Fn::FindInMap'];
    return template.Mappings[map][key][attribute];
  });
}

test('the SAM template links each alarm to the same section, from its Docs mapping', () => {
  assert.equal(template.Mappings.Docs.Alarms.Url, ALARMS_DOC_URL);
  const samAlarms = Object.entries(template.Resources).filter(([, r]: [string, any]) => r.Type === 'AWS::CloudWatch::Alarm') as [string, any][];
  assert.equal(samAlarms.length, 8);
  // The construct's alarm of the same id, in the variant that has it (the SAM template's defaults).
  const constructs = new Map<string, string>();
  for (const { name, built } of variants().filter((v) => ['one table', 'leaderLease', 'followStream'].includes(v.name))) {
    for (const alarm of built.sweeper.alarms) constructs.set(alarm.node.id, describe(built, alarm));
    assert.ok(built.sweeper.alarms.length > 0, name);
  }
  for (const [id, alarm] of samAlarms) {
    assert.equal(samDescription(alarm.Properties.AlarmDescription), constructs.get(id), id);
  }
});

test('ItemsLeft: expired items left for the next sweep three periods running, in the construct and the SAM template', () => {
  const { template: built } = synth({ tickSeconds: undefined });
  const [alarm] = Object.values(built.findResources('AWS::CloudWatch::Alarm')).filter((a: any) => a.Properties.MetricName === 'ItemsLeft') as any[];
  assert.deepEqual(
    { ...alarm.Properties, AlarmActions: undefined, AlarmDescription: undefined },
    { ...itemsLeftAlarm, AlarmActions: undefined, AlarmDescription: undefined },
  );
  const sam = template.Resources.ItemsLeft;
  assert.equal(sam.Condition, 'HasAlarms');
  for (const key of ['Namespace', 'MetricName', 'Statistic', 'Period', 'EvaluationPeriods', 'DatapointsToAlarm', 'Threshold', 'ComparisonOperator', 'TreatMissingData']) {
    assert.deepEqual(sam.Properties[key], alarm.Properties[key], key);
  }
  assert.deepEqual(sam.Properties.Dimensions, [{ Name: 'TableName', Value: { Ref: 'TableName' } }]);
  assert.deepEqual(sam.Properties.AlarmActions, [{ Ref: 'AlarmTopicArn' }]);
});
