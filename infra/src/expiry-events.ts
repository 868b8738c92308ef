// Expiry events: the sink the sweeper publishes an event to for every item it expires, as the
// function's environment (`EXPIRY_EVENTS`, `EXPIRY_EVENTS_MODE`) and the one IAM statement (two
// for a KMS-encrypted queue) that lets it send there and nowhere else.

import { Token } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as firehose from 'aws-cdk-lib/aws-kinesisfirehose';
import * as sqs from 'aws-cdk-lib/aws-sqs';

/** When an expiry event is published, relative to the delete (`EXPIRY_EVENTS_MODE`). */
export enum ExpiryEventsMode {
  /**
   * Delete, then publish. A crash between the two loses the events of the items just deleted;
   * sink outages are reported, never silently dropped.
   */
  NOTIFY = 'notify',
  /**
   * Publish, then delete: no item is deleted before the sink accepted its event. A delete that
   * finds the ttl changed emits a cancellation with the same event id.
   */
  ARCHIVE = 'archive',
}

/** Where expiry events go: set exactly one of `eventBus`, `queue` and `deliveryStream`. */
export interface ExpiryEventsOptions {
  /**
   * An EventBridge event bus (`EXPIRY_EVENTS=eventbridge:<bus ARN>`); the function may
   * `events:PutEvents` on this bus only.
   *
   * @default - not an event bus
   */
  readonly eventBus?: events.IEventBus;

  /**
   * An SQS queue (`EXPIRY_EVENTS=sqs:<queue URL>`); the function may `sqs:SendMessage` to this
   * queue only, and, if the queue is encrypted with a customer-managed KMS key,
   * `kms:GenerateDataKey` and `kms:Decrypt` on that key.
   *
   * @default - not a queue
   */
  readonly queue?: sqs.IQueue;

  /**
   * An Amazon Data Firehose delivery stream, e.g. to archive expired items in S3
   * (`EXPIRY_EVENTS=firehose:<stream name>`); the function may `firehose:PutRecord` and
   * `firehose:PutRecordBatch` on this stream only. Import one by name with
   * `DeliveryStream.fromDeliveryStreamName`.
   *
   * @default - not a delivery stream
   */
  readonly deliveryStream?: firehose.IDeliveryStream;

  /**
   * Publish after the delete (`NOTIFY`) or before it (`ARCHIVE`).
   *
   * @default ExpiryEventsMode.NOTIFY
   */
  readonly mode?: ExpiryEventsMode;
}

/** Problems with `options`, as messages naming the prop. */
export function checkExpiryEvents(options: ExpiryEventsOptions | undefined): string[] {
  if (options === undefined) return [];
  const problems: string[] = [];
  const sinks = (['eventBus', 'queue', 'deliveryStream'] as const).filter((k) => options[k] !== undefined);
  if (sinks.length !== 1) {
    problems.push(
      'expiryEvents must name exactly one sink, eventBus, queue or deliveryStream, ' +
        (sinks.length === 0 ? 'got none' : `got ${sinks.join(' and ')}`),
    );
  }
  const mode = options.mode;
  if (mode !== undefined && !Token.isUnresolved(mode) && mode !== ExpiryEventsMode.NOTIFY && mode !== ExpiryEventsMode.ARCHIVE) {
    problems.push(`expiryEvents.mode must be 'notify' or 'archive', got ${JSON.stringify(mode)}`);
  }
  return problems;
}

/** The function's `EXPIRY_EVENTS` and `EXPIRY_EVENTS_MODE`; none without expiry events. */
export function expiryEventEnvironment(options: ExpiryEventsOptions | undefined): Record<string, string> {
  if (options === undefined) return {};
  const sink = options.eventBus
    ? `eventbridge:${options.eventBus.eventBusArn}`
    : options.queue
      ? `sqs:${options.queue.queueUrl}`
      : `firehose:${options.deliveryStream!.deliveryStreamName}`;
  return { EXPIRY_EVENTS: sink, EXPIRY_EVENTS_MODE: options.mode ?? ExpiryEventsMode.NOTIFY };
}

/** What the function may do with the sink: send to it, on its ARN only. */
export function expiryEventStatements(options: ExpiryEventsOptions | undefined): iam.PolicyStatement[] {
  if (options === undefined) return [];
  if (options.eventBus) {
    return [
      new iam.PolicyStatement({
        sid: 'ExpiryEventsPutEvents',
        actions: ['events:PutEvents'],
        resources: [options.eventBus.eventBusArn],
      }),
    ];
  }
  if (options.queue) {
    const statements = [
      new iam.PolicyStatement({
        sid: 'ExpiryEventsSendMessage',
        // SendMessageBatch is authorized as sqs:SendMessage.
        actions: ['sqs:SendMessage'],
        resources: [options.queue.queueArn],
      }),
    ];
    const key = options.queue.encryptionMasterKey;
    if (key) {
      statements.push(
        new iam.PolicyStatement({
          sid: 'ExpiryEventsQueueKey',
          actions: ['kms:GenerateDataKey', 'kms:Decrypt'],
          resources: [key.keyArn],
        }),
      );
    }
    return statements;
  }
  return [
    new iam.PolicyStatement({
      sid: 'ExpiryEventsPutRecords',
      actions: ['firehose:PutRecord', 'firehose:PutRecordBatch'],
      resources: [options.deliveryStream!.deliveryStreamArn],
    }),
  ];
}
