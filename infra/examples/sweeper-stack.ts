// An example stack using the TtlSweeper construct. It either creates the table (with the
// sweeper's index, native TTL on the same attribute as the free backstop, and point-in-time
// recovery) or sweeps an existing table, imported by name, whose index already exists.

import * as cdk from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
// In an application of your own: import { ... } from 'ttl-sweeper-cdk';
import { TtlSweeper, type TtlSweeperProps } from '../src';

/** Where the swept table comes from. */
export type TableSource =
  | { kind: 'create'; partitionKey: string; sortKey?: string }
  | { kind: 'existing'; tableName: string };

export interface SweeperStackProps extends cdk.StackProps {
  readonly table: TableSource;
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
      });
      table.addGlobalSecondaryIndex({
        indexName: props.sweeper?.indexName ?? 'expirationWindowIndex',
        partitionKey: { name: props.sweeper?.windowAttribute ?? 'expirationWindow', type: dynamodb.AttributeType.STRING },
        sortKey: { name: ttlAttribute, type: dynamodb.AttributeType.NUMBER },
        projectionType: dynamodb.ProjectionType.KEYS_ONLY,
      });
      this.table = table;
    } else {
      this.table = dynamodb.Table.fromTableAttributes(this, 'Table', { tableName: props.table.tableName });
    }

    this.sweeper = new TtlSweeper(this, 'Sweeper', { ...props.sweeper, table: this.table });

    new cdk.CfnOutput(this, 'FunctionName', { value: this.sweeper.function.functionName });
    new cdk.CfnOutput(this, 'TableName', { value: this.table.tableName });
    new cdk.CfnOutput(this, 'FailedInvocationsQueue', { value: this.sweeper.failureQueue.queueUrl });
    new cdk.CfnOutput(this, 'AlarmTopic', { value: this.sweeper.alarmTopic.topicArn });
  }
}
