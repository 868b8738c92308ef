// The example CDK app (`make synth`, `make deploy`). Configure it with context values
// (`cdk synth -c tableName=sessions` or cdk.json):
//   tableName        sweep this existing table — else a table is created. Without followStream
//                    it is GSI mode: the table's (window, ttl) index must already exist and the
//                    writers set the window attribute
//   partitionKey     partition key of the created table (default "id")
//   indexName, ttlAttribute, windowAttribute, windowSeconds, windowShards, lookbackWindows,
//   deleteMode, maxConcurrency, maxRetries, tickSeconds, memorySize, reservedConcurrency
//                    as the construct's props of the same name
//   scheduleMinutes  the schedule's period: rate(N minutes) (default 1)
//   scheduleCron     a cron expression instead, e.g. "cron(0/2 * * * ? *)"; its period is scheduleMinutes
//   checkpoint       "true": create a checkpoint table for exact catch-up; maxCatchUpMinutes caps it
//   sweepers         split the shards (windowShards) between this many functions
//   expiryEvents     "eventbridge" (the default bus), "queue" (a new KMS-encrypted queue) or
//                    "firehose:<stream name>": publish an event per expired item; expiryEventsMode
//                    "notify" (default) or "archive" (needs deleteMode "conditional"); expiryEventsItem
//                    "auto" (default), "read" or "off"
//   followStream     "true" or "false" (default), the construct's followStream: "true" makes the
//                    stream indexer follow the table's stream and fill the sweeper's own expiry
//                    index table, so writers set only the ttl and the table needs no index (a
//                    created table gets a NEW_AND_OLD_IMAGES stream and no GSI); not with indexName
//   tableStreamArn   with tableName and followStream "true": the existing table's stream ARN (its
//                    LatestStreamArn, view NEW_IMAGE or NEW_AND_OLD_IMAGES), needed there
//   lagAlarmSeconds, alarmEmail   alarm on expiry lag above this; subscribe this address
//   assetDir         directory with the arm64 `bootstrap` (default: the `make package` output)
//   stackName        default TtlSweeper

import * as cdk from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { sweeperStackFromContext } from './from-context';

const app = new cdk.App({ analyticsReporting: false });
sweeperStackFromContext(app);
cdk.Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
