// The EventBridge Scheduler side of the construct, built from the SweepSchedule a caller gives
// (sweep-schedule.ts): the role Scheduler assumes, its policy, one schedule per sweeper function
// and their target.

import { Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import type { SweeperFunction } from './function';
import { scheduleStatements } from './grants';
import type { Settings } from './resolve';

/**
 * The role EventBridge Scheduler assumes to invoke the sweeper functions, only for schedules of the
 * stack's account in its default schedule group.
 */
export function newScheduleRole(scope: Construct): iam.Role {
  const stack = Stack.of(scope);
  return new iam.Role(scope, 'ScheduleRole', {
    description: 'ttl-sweeper: EventBridge Scheduler invokes the sweeper function',
    assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
      conditions: {
        StringEquals: {
          'aws:SourceAccount': stack.account,
          'aws:SourceArn': stack.formatArn({
            service: 'scheduler',
            resource: 'schedule-group',
            resourceName: 'default',
          }),
        },
      },
    }),
  });
}

/**
 * The policy of the schedule role in `scope`, and one schedule for each sweeper function, in that
 * function's scope: invoked on `settings.schedule` with the time it was scheduled for, retried as
 * the settings say, what could not be delivered sent to the failure queue.
 */
export function sweeperSchedules(
  scope: Construct,
  sweepers: SweeperFunction[],
  options: { role: iam.Role; failureQueue: sqs.IQueue; settings: Settings; enabled: boolean },
): scheduler.Schedule[] {
  const { role, failureQueue, settings } = options;
  const schedulePolicy = new iam.Policy(scope, 'SchedulePolicy', {
    statements: scheduleStatements(sweepers.map((s) => s.fn), failureQueue),
  });
  schedulePolicy.attachToRole(role);
  return sweepers.map(({ scope: fnScope, fn, range }) => {
    const schedule = new scheduler.Schedule(fnScope, 'Schedule', {
      description: range === undefined ? 'Invokes ttl-sweeper' : `Invokes ttl-sweeper for shards ${range}`,
      schedule: settings.schedule.toScheduleExpression(),
      timeWindow: scheduler.TimeWindow.off(),
      enabled: options.enabled,
      target: new SweeperTarget({
        arn: fn.functionArn,
        role,
        // Each invocation sweeps as of the time it was scheduled for.
        input: scheduler.ScheduleTargetInput.fromObject({ time: scheduler.ContextAttribute.scheduledTime }),
        retryPolicy: {
          maximumRetryAttempts: settings.scheduleRetryAttempts,
          maximumEventAgeInSeconds: settings.scheduleMaxEventAgeSeconds,
        },
        deadLetterConfig: { arn: failureQueue.queueArn },
      }),
    });
    schedule.node.addDependency(schedulePolicy);
    return schedule;
  });
}

/** The schedule's target: this function, with the role, input, retries and DLQ given. */
class SweeperTarget implements scheduler.IScheduleTarget {
  constructor(private readonly config: scheduler.ScheduleTargetConfig) {}

  public bind(_schedule: scheduler.ISchedule): scheduler.ScheduleTargetConfig {
    return this.config;
  }
}
