import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';

/** Options for a checkpoint table created by the sweeper. */
export interface CheckpointTableOptions {
  /**
   * What happens to the checkpoint table when it leaves the stack. The checkpoint only records
   * the last complete sweep; losing it means the next sweep reads `lookbackWindows` windows
   * instead of every window since the last sweep.
   *
   * @default RemovalPolicy.DESTROY
   */
  readonly removalPolicy?: RemovalPolicy;
}

/**
 * Where the sweeper keeps its catch-up checkpoint (`CHECKPOINT_TABLE`): a table with partition
 * key `id` (String). With a checkpoint, a sweep after an outage reads every window since the last
 * complete sweep (at most `maxCatchUp` back), not only the lookback windows.
 */
export abstract class Checkpoint {
  /** Create a checkpoint table (on-demand, point-in-time recovery on) next to the function. */
  public static newTable(options: CheckpointTableOptions = {}): Checkpoint {
    return new NewTableCheckpoint(options);
  }

  /**
   * Use an existing table with partition key `id` (String), e.g. one shared by several
   * sweepers: each keeps its own item, keyed by the swept table and index.
   */
  public static fromTable(table: dynamodb.ITable): Checkpoint {
    return new ExistingTableCheckpoint(table);
  }

  protected constructor() {}

  /** The table to use, created in `scope` if needed. Called once by the sweeper. */
  public abstract bind(scope: Construct): dynamodb.ITable;
}

class NewTableCheckpoint extends Checkpoint {
  constructor(private readonly options: CheckpointTableOptions) {
    super();
  }

  public bind(scope: Construct): dynamodb.ITable {
    return new dynamodb.Table(scope, 'CheckpointTable', {
      partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy: this.options.removalPolicy ?? RemovalPolicy.DESTROY,
    });
  }
}

class ExistingTableCheckpoint extends Checkpoint {
  constructor(private readonly table: dynamodb.ITable) {
    super();
  }

  public bind(_scope: Construct): dynamodb.ITable {
    return this.table;
  }
}
