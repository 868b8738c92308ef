// Expiry events on the construct: the settings reach the function, the role may publish to the
// sink and nowhere else, and archive mode without conditional deletes is refused.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as events from 'aws-cdk-lib/aws-events';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { DeleteMode, ExpiryEvents, ExpiryEventsItem, ExpiryEventsMode } from '../src';
import { logicalId, nagViolations, newStack, statements, synth } from './support';

function environment(template: any): Record<string, unknown> {
  const fns = Object.values(template.findResources('AWS::Lambda::Function')) as any[];
  assert.equal(fns.length, 1);
  return fns[0].Properties.Environment.Variables;
}

test('no events unless asked: no setting, no permission', () => {
  const { template } = synth();
  const env = environment(template);
  assert.equal(env.EXPIRY_EVENTS, undefined);
  const role = logicalId(template, 'AWS::IAM::Role', 'SweeperRole');
  assert.equal(statements(template, role).PublishExpiryEvents, undefined);
});

test('an event bus: its ARN in EXPIRY_EVENTS and PutEvents on it only', () => {
  const stack = newStack();
  const bus = new events.EventBus(stack, 'Bus', { eventBusName: 'expiries' });
  const { template } = synth({ expiryEvents: ExpiryEvents.toEventBus(bus) }, stack);
  const env = environment(template);
  assert.match(JSON.stringify(env.EXPIRY_EVENTS), /eventbridge:/);
  assert.match(JSON.stringify(env.EXPIRY_EVENTS), /Bus/);
  assert.equal(env.EXPIRY_EVENTS_MODE, 'notify');
  assert.equal(env.EXPIRY_EVENTS_ITEM, 'auto');
  const role = logicalId(template, 'AWS::IAM::Role', 'SweeperRole');
  const s = statements(template, role);
  assert.equal(s.PublishExpiryEvents.Action, 'events:PutEvents');
  assert.match(JSON.stringify(s.PublishExpiryEvents.Resource), /Bus/);
  assert.equal(s.ReadExpiredItems, undefined, 'auto reads nothing');
  assert.deepEqual(nagViolations(stack), []);
});

test('an encrypted queue in archive mode with read items: send, its key, and BatchGetItem', () => {
  const stack = newStack();
  const key = new kms.Key(stack, 'Key', { enableKeyRotation: true });
  const queue = new sqs.Queue(stack, 'Expiries', {
    encryption: sqs.QueueEncryption.KMS,
    encryptionMasterKey: key,
    enforceSSL: true,
  });
  const { template } = synth(
    {
      deleteMode: DeleteMode.CONDITIONAL,
      expiryEvents: ExpiryEvents.toQueue(queue, { mode: ExpiryEventsMode.ARCHIVE, item: ExpiryEventsItem.READ }),
    },
    stack,
  );
  const env = environment(template);
  assert.match(JSON.stringify(env.EXPIRY_EVENTS), /sqs:/);
  assert.equal(env.EXPIRY_EVENTS_MODE, 'archive');
  assert.equal(env.EXPIRY_EVENTS_ITEM, 'read');
  const role = logicalId(template, 'AWS::IAM::Role', 'SweeperRole');
  const s = statements(template, role);
  assert.deepEqual(s.PublishExpiryEvents.Action, ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl']);
  assert.match(JSON.stringify(s.PublishExpiryEvents.Resource), /Expiries/);
  assert.deepEqual(s.EncryptExpiryEvents.Action, ['kms:GenerateDataKey', 'kms:Decrypt']);
  assert.equal(s.ReadExpiredItems.Action, 'dynamodb:BatchGetItem');
  assert.match(JSON.stringify(s.ReadExpiredItems.Resource), /table\/sessions/);
});

test('a delivery stream: its name in EXPIRY_EVENTS and PutRecordBatch on its ARN', () => {
  const { template } = synth({ expiryEvents: ExpiryEvents.toDeliveryStream('archive') });
  assert.equal(environment(template).EXPIRY_EVENTS, 'firehose:archive');
  const role = logicalId(template, 'AWS::IAM::Role', 'SweeperRole');
  const s = statements(template, role);
  assert.equal(s.PublishExpiryEvents.Action, 'firehose:PutRecordBatch');
  assert.match(JSON.stringify(s.PublishExpiryEvents.Resource), /deliverystream\/archive/);
});

test('archive mode needs conditional deletes', () => {
  assert.throws(
    () => synth({ expiryEvents: ExpiryEvents.toDeliveryStream('archive', { mode: ExpiryEventsMode.ARCHIVE }) }),
    /expiryEvents in archive mode needs deleteMode: DeleteMode.CONDITIONAL/,
  );
});
