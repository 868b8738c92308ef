// Expiry event sinks: each sets EXPIRY_EVENTS / EXPIRY_EVENTS_MODE (and EXPIRY_EVENTS_ITEM when
// given) and lets the function send to that sink only; exactly one sink; archive mode only with
// conditional deletes; BatchGetItem on the table with expiry events in any mode (and, apart from
// events, for batch mode's re-read of stale keys), never without.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cdk from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as events from 'aws-cdk-lib/aws-events';
import * as firehose from 'aws-cdk-lib/aws-kinesisfirehose';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { DeleteMode, ExpiryEventsItem, ExpiryEventsMode, type ExpiryEventsOptions, type TtlSweeperProps } from '../src';
import { env, nagViolations, newStack, statements, synth } from './support';

const resolve = (stack: cdk.Stack, v: unknown) => JSON.stringify(stack.resolve(v));

function sweeperFunctions(template: Template): any[] {
  return Object.values(template.findResources('AWS::Lambda::Function'));
}

/** The statements of the function roles whose Sid starts with ExpiryEvents. */
function sinkStatements(template: Template): Record<string, any>[] {
  return sweeperFunctions(template).map((f) => {
    const s = statements(template, f.Properties.Role['Fn::GetAtt'][0]);
    return Object.fromEntries(Object.entries(s).filter(([sid]) => sid.startsWith('ExpiryEvents')));
  });
}

/** No statement of any policy in the template has a wildcard action or resource. */
function assertNoWildcard(template: Template) {
  for (const policy of Object.values(template.findResources('AWS::IAM::Policy'))) {
    for (const st of (policy as any).Properties.PolicyDocument.Statement) {
      for (const a of [st.Action].flat()) assert.ok(!String(a).includes('*'), `wildcard action ${a}`);
      assert.ok(!JSON.stringify(st.Resource).includes('*'), `wildcard resource ${JSON.stringify(st.Resource)}`);
    }
  }
}

function withSink(make: (stack: cdk.Stack) => ExpiryEventsOptions, overrides: Partial<TtlSweeperProps> = {}) {
  const stack = newStack();
  return synth({ expiryEvents: make(stack), ...overrides }, stack);
}

test('no expiry events: no variables, no sink permissions', () => {
  const { template } = synth();
  const vars = sweeperFunctions(template)[0].Properties.Environment.Variables;
  assert.equal(vars.EXPIRY_EVENTS, undefined);
  assert.equal(vars.EXPIRY_EVENTS_MODE, undefined);
  assert.deepEqual(sinkStatements(template), [{}]);
});

test('an event bus: eventbridge:<bus ARN>, notify by default, events:PutEvents on that bus only', () => {
  const { stack, template } = withSink((s) => ({ eventBus: new events.EventBus(s, 'Expiries') }));
  const vars = sweeperFunctions(template)[0].Properties.Environment.Variables;
  assert.equal(resolve(stack, vars.EXPIRY_EVENTS), JSON.stringify({ 'Fn::Join': ['', ['eventbridge:', { 'Fn::GetAtt': [busId(template), 'Arn'] }]] }));
  assert.equal(vars.EXPIRY_EVENTS_MODE, 'notify');
  const [s] = sinkStatements(template);
  assert.deepEqual(Object.keys(s).sort(), ['ExpiryEventsPutEvents', 'ExpiryEventsReadItems']);
  assert.equal(s.ExpiryEventsPutEvents.Action, 'events:PutEvents');
  assert.deepEqual(s.ExpiryEventsPutEvents.Resource, { 'Fn::GetAtt': [busId(template), 'Arn'] });
  assertNoWildcard(template);
});

function busId(template: Template): string {
  return Object.keys(template.findResources('AWS::Events::EventBus'))[0];
}

test('an imported bus by name: its ARN in this account and region', () => {
  const { stack, template } = withSink((s) => ({ eventBus: events.EventBus.fromEventBusName(s, 'Default', 'default') }));
  const [s] = sinkStatements(template);
  assert.match(resolve(stack, s.ExpiryEventsPutEvents.Resource), /arn:.*:events:eu-west-1:123456789012:event-bus\/default/);
  assertNoWildcard(template);
});

test('a KMS-encrypted queue: sqs:<queue URL>, SendMessage on the queue and GenerateDataKey/Decrypt on its key only', () => {
  const { stack, template } = withSink((s) => ({
    queue: new sqs.Queue(s, 'Expiries', { encryption: sqs.QueueEncryption.KMS, enforceSSL: true }),
    mode: ExpiryEventsMode.ARCHIVE,
  }), { deleteMode: DeleteMode.CONDITIONAL });
  const vars = sweeperFunctions(template)[0].Properties.Environment.Variables;
  const queueId = Object.keys(template.findResources('AWS::SQS::Queue')).find((id) => id.startsWith('Expiries'))!;
  assert.equal(resolve(stack, vars.EXPIRY_EVENTS), JSON.stringify({ 'Fn::Join': ['', ['sqs:', { Ref: queueId }]] }));
  assert.equal(vars.EXPIRY_EVENTS_MODE, 'archive');
  const [s] = sinkStatements(template);
  assert.deepEqual(Object.keys(s).sort(), ['ExpiryEventsQueueKey', 'ExpiryEventsReadItems', 'ExpiryEventsSendMessage']);
  assert.equal(s.ExpiryEventsSendMessage.Action, 'sqs:SendMessage');
  assert.deepEqual(s.ExpiryEventsSendMessage.Resource, { 'Fn::GetAtt': [queueId, 'Arn'] });
  assert.deepEqual(s.ExpiryEventsQueueKey.Action, ['kms:GenerateDataKey', 'kms:Decrypt']);
  const keyId = Object.keys(template.findResources('AWS::KMS::Key')).find((id) => id.startsWith('Expiries'))!;
  assert.deepEqual(s.ExpiryEventsQueueKey.Resource, { 'Fn::GetAtt': [keyId, 'Arn'] });
  assertNoWildcard(template);
});

test('a queue with a key of your own gets that key; an SQS-managed one no key statement', () => {
  const own = withSink((s) => ({
    queue: new sqs.Queue(s, 'Expiries', { encryptionMasterKey: new kms.Key(s, 'Mine', { enableKeyRotation: true }) }),
  }));
  const [s] = sinkStatements(own.template);
  assert.match(JSON.stringify(s.ExpiryEventsQueueKey.Resource), /"Mine[0-9A-F]+"/);
  const managed = withSink((st) => ({ queue: new sqs.Queue(st, 'Expiries', { encryption: sqs.QueueEncryption.SQS_MANAGED }) }));
  assert.deepEqual(Object.keys(sinkStatements(managed.template)[0]).sort(), ['ExpiryEventsReadItems', 'ExpiryEventsSendMessage']);
  const imported = withSink((st) => ({
    queue: sqs.Queue.fromQueueArn(st, 'Imported', `arn:aws:sqs:${env.region}:${env.account}:expiries`),
  }));
  const [i] = sinkStatements(imported.template);
  assert.equal(resolve(imported.stack, i.ExpiryEventsSendMessage.Resource), `"arn:aws:sqs:${env.region}:${env.account}:expiries"`);
  assert.match(resolve(imported.stack, sweeperFunctions(imported.template)[0].Properties.Environment.Variables.EXPIRY_EVENTS), /sqs:https:\/\/sqs\.eu-west-1\..*\/123456789012\/expiries/);
});

test('a Firehose stream: firehose:<name>, PutRecord and PutRecordBatch on that stream only', () => {
  const { stack, template } = withSink((s) => ({
    deliveryStream: firehose.DeliveryStream.fromDeliveryStreamName(s, 'Archive', 'expired-items'),
    mode: ExpiryEventsMode.ARCHIVE,
  }), { deleteMode: DeleteMode.CONDITIONAL });
  const vars = sweeperFunctions(template)[0].Properties.Environment.Variables;
  assert.equal(vars.EXPIRY_EVENTS, 'firehose:expired-items');
  assert.equal(vars.EXPIRY_EVENTS_MODE, 'archive');
  const [s] = sinkStatements(template);
  assert.deepEqual(Object.keys(s).sort(), ['ExpiryEventsPutRecords', 'ExpiryEventsReadItems']);
  assert.deepEqual(s.ExpiryEventsPutRecords.Action, ['firehose:PutRecord', 'firehose:PutRecordBatch']);
  assert.match(resolve(stack, s.ExpiryEventsPutRecords.Resource), /firehose:eu-west-1:123456789012:deliverystream\/expired-items"/);
  assertNoWildcard(template);
});

test('every function of several sweepers gets the sink and its permission', () => {
  const { template } = withSink((s) => ({ eventBus: new events.EventBus(s, 'Expiries') }), { windowShards: 12, sweepers: 3 });
  const sinks = sinkStatements(template);
  assert.equal(sinks.length, 3);
  for (const s of sinks) assert.deepEqual(Object.keys(s).sort(), ['ExpiryEventsPutEvents', 'ExpiryEventsReadItems']);
  for (const f of sweeperFunctions(template)) assert.equal(f.Properties.Environment.Variables.EXPIRY_EVENTS_MODE, 'notify');
});

test('exactly one sink, and a known mode', () => {
  const invalid = (make: (stack: cdk.Stack) => ExpiryEventsOptions, message: RegExp) =>
    assert.throws(() => withSink(make), (e: Error) => {
      assert.match(e.message, /^TtlSweeper Test\/Sweeper: invalid props:/);
      assert.match(e.message, message);
      return true;
    });
  invalid(
    (s) => ({ eventBus: new events.EventBus(s, 'B'), queue: new sqs.Queue(s, 'Q') }),
    /expiryEvents must name exactly one sink, eventBus, queue or deliveryStream, got eventBus and queue/,
  );
  invalid(
    (s) => ({
      queue: new sqs.Queue(s, 'Q'),
      deliveryStream: firehose.DeliveryStream.fromDeliveryStreamName(s, 'F', 'f'),
      eventBus: new events.EventBus(s, 'B'),
    }),
    /got eventBus and queue and deliveryStream/,
  );
  invalid(() => ({ mode: ExpiryEventsMode.ARCHIVE }), /expiryEvents must name exactly one sink.*got none/);
  invalid((s) => ({ eventBus: new events.EventBus(s, 'B'), mode: 'later' as ExpiryEventsMode }), /expiryEvents.mode must be 'notify' or 'archive', got "later"/);
});

test('cdk-nag AwsSolutions finds nothing unacknowledged with each sink', () => {
  const sinks: [string, (s: cdk.Stack) => ExpiryEventsOptions][] = [
    ['bus', (s) => ({ eventBus: new events.EventBus(s, 'Expiries') })],
    ['queue', (s) => ({ queue: sqs.Queue.fromQueueArn(s, 'Q', `arn:aws:sqs:${env.region}:${env.account}:expiries`) })],
    ['firehose', (s) => ({ deliveryStream: firehose.DeliveryStream.fromDeliveryStreamName(s, 'F', 'expired-items') })],
    ['bus, items read', (s) => ({ eventBus: new events.EventBus(s, 'Expiries'), item: ExpiryEventsItem.READ })],
  ];
  for (const [name, make] of sinks) {
    assert.deepEqual(nagViolations(withSink(make).stack), [], name);
  }
});

const tableArn = `arn:aws:dynamodb:${env.region}:${env.account}:table/sessions`;

test('item: EXPIRY_EVENTS_ITEM only when given, with the value the function reads', () => {
  const unset = withSink((s) => ({ eventBus: new events.EventBus(s, 'Expiries') }));
  assert.ok(!('EXPIRY_EVENTS_ITEM' in sweeperFunctions(unset.template)[0].Properties.Environment.Variables));
  const cases: [ExpiryEventsItem, string][] = [
    [ExpiryEventsItem.AUTO, 'auto'],
    [ExpiryEventsItem.READ, 'read'],
    [ExpiryEventsItem.OFF, 'off'],
  ];
  for (const [item, value] of cases) {
    const { template } = withSink((s) => ({ eventBus: new events.EventBus(s, 'Expiries'), item }), { windowShards: 4, sweepers: 2 });
    for (const f of sweeperFunctions(template)) {
      const vars = f.Properties.Environment.Variables;
      assert.equal(vars.EXPIRY_EVENTS_ITEM, value);
      assert.equal(vars.EXPIRY_EVENTS_MODE, 'notify');
    }
  }
});

test('with expiry events, dynamodb:BatchGetItem on the table ARN only, for every function, in any mode and whatever the item; nothing else grants it but the re-read of stale keys in batch mode', () => {
  const { template } = withSink(
    (s) => ({ queue: new sqs.Queue(s, 'Expiries'), mode: ExpiryEventsMode.ARCHIVE, item: ExpiryEventsItem.READ }),
    { deleteMode: DeleteMode.CONDITIONAL, windowShards: 4, sweepers: 2 },
  );
  const sinks = sinkStatements(template);
  assert.equal(sinks.length, 2);
  for (const s of sinks) {
    assert.deepEqual(Object.keys(s).sort(), ['ExpiryEventsReadItems', 'ExpiryEventsSendMessage']);
    assert.equal(s.ExpiryEventsReadItems.Effect, 'Allow');
    assert.equal(s.ExpiryEventsReadItems.Action, 'dynamodb:BatchGetItem');
    assert.equal(s.ExpiryEventsReadItems.Resource, tableArn);
    assert.equal(s.ExpiryEventsReadItems.Condition, undefined);
  }
  assertNoWildcard(template);

  // Item read reads the items before their events are built, archive mode those whose expiry was
  // accepted but whose delete failed, and in either mode a delete whose answer was lost (a
  // timeout, a 5xx) is settled by a read: granted in both modes, whatever the item setting, for
  // conditional deletes too (the only BatchGetItem they get).
  for (const mode of [undefined, ExpiryEventsMode.NOTIFY, ExpiryEventsMode.ARCHIVE]) {
    for (const item of [undefined, ExpiryEventsItem.AUTO, ExpiryEventsItem.READ, ExpiryEventsItem.OFF]) {
      const what = `mode ${mode}, item ${item}`;
      const built = withSink((s) => ({ eventBus: new events.EventBus(s, 'Expiries'), mode, item }), {
        deleteMode: DeleteMode.CONDITIONAL,
      });
      const [a] = sinkStatements(built.template);
      assert.deepEqual(Object.keys(a).sort(), ['ExpiryEventsPutEvents', 'ExpiryEventsReadItems'], what);
      assert.equal(a.ExpiryEventsReadItems.Action, 'dynamodb:BatchGetItem', what);
      assert.equal(a.ExpiryEventsReadItems.Resource, tableArn, what);
      const reads = Object.entries(statements(built.template, sweeperFunctions(built.template)[0].Properties.Role['Fn::GetAtt'][0]))
        .filter(([, st]) => [st.Action].flat().includes('dynamodb:BatchGetItem'))
        .map(([sid]) => sid);
      assert.deepEqual(reads, ['ExpiryEventsReadItems'], what);
    }
  }
  // Batch deletes with events: the events' read beside the re-read of stale keys, both on the table.
  const batch = withSink((s) => ({ eventBus: new events.EventBus(s, 'Expiries') }));
  const b = statements(batch.template, sweeperFunctions(batch.template)[0].Properties.Role['Fn::GetAtt'][0]);
  assert.deepEqual([b.ExpiryEventsReadItems.Resource, b.ConfirmKeysInTable.Resource], [tableArn, tableArn]);

  // Without expiry events, conditional deletes read nothing.
  const none = synth({ deleteMode: DeleteMode.CONDITIONAL });
  assert.ok(!JSON.stringify(none.template.findResources('AWS::IAM::Policy')).includes('BatchGetItem'), 'BatchGetItem granted without events');
});

test('item not known at synthesis (a parameter): the read is granted, as for any item', () => {
  const { template } = withSink((s) => ({
    eventBus: new events.EventBus(s, 'Expiries'),
    item: new cdk.CfnParameter(s, 'Item', { allowedValues: ['auto', 'read', 'off'] }).valueAsString as ExpiryEventsItem,
  }));
  const [s] = sinkStatements(template);
  assert.equal(s.ExpiryEventsReadItems.Resource, tableArn);
  assert.deepEqual(sweeperFunctions(template)[0].Properties.Environment.Variables.EXPIRY_EVENTS_ITEM, { Ref: 'Item' });
});

test('archive mode needs conditional deletes; an unknown item is refused', () => {
  const invalid = (make: (stack: cdk.Stack) => ExpiryEventsOptions, overrides: Partial<TtlSweeperProps>, message: RegExp) =>
    assert.throws(() => withSink(make, overrides), (e: Error) => {
      assert.match(e.message, /^TtlSweeper Test\/Sweeper: invalid props:/);
      assert.match(e.message, message);
      return true;
    });
  const archive = (s: cdk.Stack): ExpiryEventsOptions => ({ queue: new sqs.Queue(s, 'Q'), mode: ExpiryEventsMode.ARCHIVE });
  invalid(
    archive,
    {},
    /expiryEvents.mode ARCHIVE needs deleteMode CONDITIONAL, got deleteMode "batch" \(the default\): a batch delete cannot tell a ttl extended while the event was published; set deleteMode: DeleteMode.CONDITIONAL or use ExpiryEventsMode.NOTIFY/,
  );
  invalid(archive, { deleteMode: DeleteMode.BATCH }, /expiryEvents.mode ARCHIVE needs deleteMode CONDITIONAL, got deleteMode "batch":/);
  // Reported with the other problems, in one message.
  invalid(archive, { maxRetries: 31 }, / - expiryEvents.mode ARCHIVE needs deleteMode CONDITIONAL.*\n {2}- maxRetries must be a whole number/);
  invalid(
    (s) => ({ eventBus: new events.EventBus(s, 'B'), item: 'all' as ExpiryEventsItem }),
    {},
    /expiryEvents.item must be 'auto', 'read' or 'off', got "all"/,
  );
  assert.doesNotThrow(() => withSink(archive, { deleteMode: DeleteMode.CONDITIONAL }));
  assert.doesNotThrow(() => withSink((s) => ({ queue: new sqs.Queue(s, 'Q'), mode: ExpiryEventsMode.NOTIFY })));
  assert.doesNotThrow(() => withSink((s) => ({ queue: new sqs.Queue(s, 'Q') }), { deleteMode: DeleteMode.BATCH }));
});
