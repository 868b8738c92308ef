import { Stack } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

/** When expiry events are published relative to the delete (`EXPIRY_EVENTS_MODE`). */
export enum ExpiryEventsMode {
  /** Delete, then publish. A crash between the two can lose the events of the chunks in flight. */
  NOTIFY = 'notify',
  /**
   * Publish, then delete only the items whose event the sink accepted; a delete that finds the
   * ttl changed publishes a cancellation. Needs `deleteMode: DeleteMode.CONDITIONAL`.
   */
  ARCHIVE = 'archive',
}

/** How the item itself gets into an expiry event (`EXPIRY_EVENTS_ITEM`). */
export enum ExpiryEventsItem {
  /** When it needs no extra read: conditional deletes in notify mode return it. */
  AUTO = 'auto',
  /** A consistent `BatchGetItem` before the events are built (read capacity per expired item). */
  READ = 'read',
  /** Never. */
  OFF = 'off',
}

/** Options of every expiry-event sink. */
export interface ExpiryEventsOptions {
  /**
   * Notify or archive.
   *
   * @default ExpiryEventsMode.NOTIFY
   */
  readonly mode?: ExpiryEventsMode;

  /**
   * Whether events carry the item.
   *
   * @default ExpiryEventsItem.AUTO
   */
  readonly item?: ExpiryEventsItem;
}

/** What the sweeper needs of a sink: its `EXPIRY_EVENTS` value and the permissions to publish. */
export interface BoundExpiryEvents {
  /** The `EXPIRY_EVENTS` value. */
  readonly setting: string;
  /** Least-privilege statements for the sweeper's role. */
  readonly statements: iam.PolicyStatement[];
  /** The mode. */
  readonly mode: ExpiryEventsMode;
  /** The item source. */
  readonly item: ExpiryEventsItem;
}

/**
 * Where the sweeper publishes an expiry event for each item it expires (`EXPIRY_EVENTS`):
 * an EventBridge bus, an SQS queue or a Firehose delivery stream (the S3 archive path). See
 * `docs/events.md` in the repository for the events and their semantics.
 */
export abstract class ExpiryEvents {
  /** `PutEvents` to `bus` (source `ttl-sweeper`, detail-type `Item Expired`). */
  public static toEventBus(bus: events.IEventBus, options: ExpiryEventsOptions = {}): ExpiryEvents {
    return new SinkEvents(options, () => ({
      setting: `eventbridge:${bus.eventBusArn}`,
      statements: [
        new iam.PolicyStatement({ sid: 'PublishExpiryEvents', actions: ['events:PutEvents'], resources: [bus.eventBusArn] }),
      ],
    }));
  }

  /** `SendMessageBatch` to `queue` (with its KMS key's data-key permissions if it has one). */
  public static toQueue(queue: sqs.IQueue, options: ExpiryEventsOptions = {}): ExpiryEvents {
    return new SinkEvents(options, () => {
      const statements = [
        new iam.PolicyStatement({
          sid: 'PublishExpiryEvents',
          actions: ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'],
          resources: [queue.queueArn],
        }),
      ];
      if (queue.encryptionMasterKey) {
        statements.push(
          new iam.PolicyStatement({
            sid: 'EncryptExpiryEvents',
            actions: ['kms:GenerateDataKey', 'kms:Decrypt'],
            resources: [queue.encryptionMasterKey.keyArn],
          }),
        );
      }
      return { setting: `sqs:${queue.queueUrl}`, statements };
    });
  }

  /** `PutRecordBatch` to the delivery stream named `deliveryStreamName` in the sweeper's stack. */
  public static toDeliveryStream(deliveryStreamName: string, options: ExpiryEventsOptions = {}): ExpiryEvents {
    return new SinkEvents(options, (scope) => ({
      setting: `firehose:${deliveryStreamName}`,
      statements: [
        new iam.PolicyStatement({
          sid: 'PublishExpiryEvents',
          actions: ['firehose:PutRecordBatch'],
          resources: [
            Stack.of(scope).formatArn({ service: 'firehose', resource: 'deliverystream', resourceName: deliveryStreamName }),
          ],
        }),
      ],
    }));
  }

  protected constructor() {}

  /** The sink's setting and permissions. Called once by the sweeper. */
  public abstract bind(scope: Construct): BoundExpiryEvents;
}

class SinkEvents extends ExpiryEvents {
  constructor(
    private readonly options: ExpiryEventsOptions,
    private readonly sink: (scope: Construct) => { setting: string; statements: iam.PolicyStatement[] },
  ) {
    super();
  }

  public bind(scope: Construct): BoundExpiryEvents {
    return {
      ...this.sink(scope),
      mode: this.options.mode ?? ExpiryEventsMode.NOTIFY,
      item: this.options.item ?? ExpiryEventsItem.AUTO,
    };
  }
}
