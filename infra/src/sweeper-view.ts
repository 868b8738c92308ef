// What the alarms and the dashboard read of a sweeper: its functions, tables and metrics. The
// construct (ttl-sweeper.ts) has all of it; the parts it builds take this view, so that they
// depend on what they read and not on the construct that wires them together.

import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';

/** A sweeper as its alarms and dashboard see it. */
export interface SweeperView extends Construct {
  readonly function: lambda.Function;
  readonly functions: lambda.Function[];
  readonly shardRanges: string[];
  readonly tables: dynamodb.ITable[];
  readonly streamFunction?: lambda.Function;
  readonly streamFailureQueue?: sqs.Queue;
  metric(metricName: string, props?: cloudwatch.MetricOptions): cloudwatch.Metric;
  tableMetric(table: dynamodb.ITable, metricName: string, props?: cloudwatch.MetricOptions): cloudwatch.Metric;
}
