// An example stack using the TtlSweeper construct. It either creates the table (with the
// sweeper's index unless followStream gives the sweeper an expiry index table of its own, native
// TTL on the same attribute as the free backstop, and point-in-time recovery) or sweeps an
// existing table, imported by name, whose index already exists (with followStream none is needed,
// but the table's stream ARN is: tableStreamArn).

import * as cdk from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as firehose from 'aws-cdk-lib/aws-kinesisfirehose';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
// In an application of your own: import { ... } from 'ttl-sweeper-cdk';
import { ExpiryEventsItem, ExpiryEventsMode, TtlSweeper, type ExpiryEventsOptions, type TtlSweeperProps } from '../src';

/** Where the swept table comes from. */
export type TableSource =
  | { kind: 'create'; partitionKey: string; sortKey?: string }
  | { kind: 'existing'; tableName: string; tableStreamArn?: string };

/** Where expiry events go: the account's default event bus, a new queue, or a Firehose stream. */
export type ExpiryEventsSink = { kind: 'eventbridge' } | { kind: 'queue' } | { kind: 'firehose'; streamName: string };

export interface SweeperStackProps extends cdk.StackProps {
  readonly table: TableSource;
  /** Publish expiry events here (the construct's `expiryEvents`, made in this stack). */
  readonly expiryEvents?: ExpiryEventsSink;
  readonly expiryEventsMode?: ExpiryEventsMode;
  readonly expiryEventsItem?: ExpiryEventsItem;
  /** Everything but the table is passed to the construct as is. */
  readonly sweeper?: Omit<TtlSweeperProps, 'table'>;
}

export class SweeperStack extends cdk.Stack {
  public readonly table: dynamodb.ITable;
  public readonly sweeper: TtlSweeper;

  constructor(scope: Construct, id: string, props: SweeperStackProps) {
    super(scope, id, props);
    const ttlAttribute = props.sweeper?.ttlAttribute ?? 'ttl';
    if (props.table.kind === 'create') {
      const table = new dynamodb.Table(this, 'Table', {
        partitionKey: { name: props.table.partitionKey, type: dynamodb.AttributeType.STRING },
        sortKey: props.table.sortKey ? { name: props.table.sortKey, type: dynamodb.AttributeType.STRING } : undefined,
        billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
        // Native TTL on the same attribute stays on as the free backstop.
        timeToLiveAttribute: ttlAttribute,
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        removalPolicy: cdk.RemovalPolicy.RETAIN,
        // The stream indexer (followStream) reads the new image of each write.
        stream: props.sweeper?.followStream ? dynamodb.StreamViewType.NEW_AND_OLD_IMAGES : undefined,
      });
      // With followStream the sweeper reads an expiry index table of its own: no GSI here.
      if (!props.sweeper?.followStream) {
        TtlSweeper.addExpirationIndex(table, {
          indexName: props.sweeper?.indexName,
          windowAttribute: props.sweeper?.windowAttribute,
          ttlAttribute,
        });
      }
      this.table = table;
    } else {
      this.table = dynamodb.Table.fromTableAttributes(this, 'Table', {
        tableName: props.table.tableName,
        tableStreamArn: props.table.tableStreamArn,
      });
    }

    let expiryEvents: ExpiryEventsOptions | undefined;
    const mode = props.expiryEventsMode;
    const item = props.expiryEventsItem;
    if (props.expiryEvents?.kind === 'eventbridge') {
      expiryEvents = { eventBus: events.EventBus.fromEventBusName(this, 'DefaultBus', 'default'), mode, item };
    } else if (props.expiryEvents?.kind === 'queue') {
      const queue = new sqs.Queue(this, 'ExpiryEvents', {
        encryptionMasterKey: new kms.Key(this, 'ExpiryEventsKey', {
          description: 'ttl-sweeper example: encrypts the expiry events queue',
          enableKeyRotation: true,
          removalPolicy: cdk.RemovalPolicy.DESTROY,
        }),
        enforceSSL: true,
        retentionPeriod: cdk.Duration.days(14),
      });
      cdk.Validations.of(queue).acknowledge({
        id: 'AwsSolutions-SQS3',
        reason: 'the consumers of the expiry events choose their own dead-letter queue',
      });
      new cdk.CfnOutput(this, 'ExpiryEventsQueue', { value: queue.queueUrl });
      expiryEvents = { queue, mode, item };
    } else if (props.expiryEvents?.kind === 'firehose') {
      expiryEvents = {
        deliveryStream: firehose.DeliveryStream.fromDeliveryStreamName(this, 'ExpiryEventsStream', props.expiryEvents.streamName),
        mode,
        item,
      };
    }

    this.sweeper = new TtlSweeper(this, 'Sweeper', { ...props.sweeper, expiryEvents, table: this.table });

    new cdk.CfnOutput(this, 'FunctionName', { value: this.sweeper.function.functionName });
    new cdk.CfnOutput(this, 'TableName', { value: this.table.tableName });
    new cdk.CfnOutput(this, 'FailedInvocationsQueue', { value: this.sweeper.failureQueue.queueUrl });
    // With followStream: the expiry index table, for ttl-sweeper backfill --expiry-index-table.
    if (this.sweeper.indexTable) {
      new cdk.CfnOutput(this, 'ExpiryIndexTable', { value: this.sweeper.indexTable.tableName });
    }
    if (this.sweeper.alarmTopic) {
      new cdk.CfnOutput(this, 'AlarmTopic', { value: this.sweeper.alarmTopic.topicArn });
    }
  }
}
