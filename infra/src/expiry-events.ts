// Expiry events: the sink the sweeper publishes an event to for every item it expires, as the
// function's environment (`EXPIRY_EVENTS`, `EXPIRY_EVENTS_MODE`, `EXPIRY_EVENTS_ITEM`) and the one
// IAM statement (two for a KMS-encrypted queue) that lets it send there and nowhere else, plus
// `dynamodb:BatchGetItem` on the table, in any mode: the items read for the events, read again in
// archive mode, and the read that settles a delete whose answer was lost.

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
   * finds the ttl changed emits a cancellation with the same event id. Needs
   * `deleteMode: DeleteMode.CONDITIONAL` (the function refuses batch deletes in this mode), else
   * synthesis stops.
   */
  ARCHIVE = 'archive',
}

/** How the expired item itself gets into its event (`EXPIRY_EVENTS_ITEM`). */
export enum ExpiryEventsItem {
  /**
   * Include the item when it comes without an extra read: with `ExpiryEventsMode.NOTIFY` and
   * `DeleteMode.CONDITIONAL` the `DeleteItem` returns the deleted item (`ReturnValues=ALL_OLD`, no
   * extra capacity). In batch mode and in archive mode the events carry no item.
   */
  AUTO = 'auto',
  /**
   * Read the items with one strongly consistent `BatchGetItem` per chunk of up to 25 keys before
   * the events are built, in both modes: read capacity for every expired item. An item the read
   * no longer finds, or a failed read, gives an event without the item. The read is allowed by
   * the `dynamodb:BatchGetItem` on the table that every function with expiry events gets.
   */
  READ = 'read',
  /** Never include the item: the events carry the key and the ttl only. */
  OFF = 'off',
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

  /**
   * Whether and how each event carries the expired item (`EXPIRY_EVENTS_ITEM`). An event that
   * would exceed the sink's size limit is published without it (`item_truncated: true`), so
   * consumers must treat the item as optional whatever this says. `READ` reads the table with
   * `dynamodb:BatchGetItem`, which expiry events grant on the table whatever this says.
   *
   * @default - `EXPIRY_EVENTS_ITEM` is not set: the function's default, `ExpiryEventsItem.AUTO`
   */
  readonly item?: ExpiryEventsItem;
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
  const item = options.item;
  if (
    item !== undefined &&
    !Token.isUnresolved(item) &&
    item !== ExpiryEventsItem.AUTO &&
    item !== ExpiryEventsItem.READ &&
    item !== ExpiryEventsItem.OFF
  ) {
    problems.push(`expiryEvents.item must be 'auto', 'read' or 'off', got ${JSON.stringify(item)}`);
  }
  return problems;
}

/**
 * The function's `EXPIRY_EVENTS` and `EXPIRY_EVENTS_MODE`, and `EXPIRY_EVENTS_ITEM` when `item` is
 * given; none without expiry events.
 */
export function expiryEventEnvironment(options: ExpiryEventsOptions | undefined): Record<string, string> {
  if (options === undefined) return {};
  const sink = options.eventBus
    ? `eventbridge:${options.eventBus.eventBusArn}`
    : options.queue
      ? `sqs:${options.queue.queueUrl}`
      : `firehose:${options.deliveryStream!.deliveryStreamName}`;
  const environment: Record<string, string> = {
    EXPIRY_EVENTS: sink,
    EXPIRY_EVENTS_MODE: options.mode ?? ExpiryEventsMode.NOTIFY,
  };
  if (options.item !== undefined) environment.EXPIRY_EVENTS_ITEM = options.item;
  return environment;
}

/**
 * What a function that deletes items of the table `tableArn` (the sweeper, the stream indexer) may
 * do for their events: send to the sink, on its ARN only, and `BatchGetItem` on that table only,
 * in any mode and whatever the item setting. The function reads the table with it for
 * `ExpiryEventsItem.READ` (the items, before their events are built) and in archive mode (the
 * items whose expiry was accepted but whose delete failed), and in either mode to settle a delete
 * whose answer was lost (a timeout, a 5xx): one strongly consistent read tells whether the item is
 * gone and owed its event. Without that read such a delete would be reported as failed.
 */
export function expiryEventStatements(options: ExpiryEventsOptions | undefined, tableArn: string): iam.PolicyStatement[] {
  if (options === undefined) return [];
  return [
    ...sinkStatements(options),
    new iam.PolicyStatement({
      sid: 'ExpiryEventsReadItems',
      // The strongly consistent reads of the table the events need: a chunk's items before their
      // events are built (item read), the items whose expiry was accepted but whose delete failed
      // (archive mode), and in any mode the items whose delete went unanswered.
      actions: ['dynamodb:BatchGetItem'],
      resources: [tableArn],
    }),
  ];
}

/** Send to the one sink of `options`, on its ARN only. */
function sinkStatements(options: ExpiryEventsOptions): iam.PolicyStatement[] {
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
