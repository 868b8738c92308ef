// When the sweeper runs: the SweepSchedule a caller gives (schedule.ts builds the schedules from
// it).

import { type Duration, type TimeZone, Token } from 'aws-cdk-lib';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
/**
 * When the sweeper is invoked: an EventBridge Scheduler `rate` or `cron` expression and the
 * period between invocations, which the function needs to know (`SCHEDULE_SECONDS`: tick mode
 * stops before the next invocation begins).
 */
export class SweepSchedule {
  /**
   * Invoke the sweeper every `period`: `rate(N minutes)`.
   *
   * @param period whole minutes, from 1 minute to 60 minutes (EventBridge Scheduler's finest
   * rate is one minute; the function accepts periods up to an hour)
   */
  public static rate(period: Duration): SweepSchedule {
    if (period.isUnresolved()) {
      throw new Error('SweepSchedule.rate: the period must be a literal duration, not a token');
    }
    const seconds = period.toSeconds();
    if (!Number.isInteger(seconds) || seconds % 60 !== 0 || seconds < 60 || seconds > 3600) {
      throw new Error(
        `SweepSchedule.rate(${period.toHumanString()}): the period must be whole minutes from 1 to 60 ` +
          '(EventBridge Scheduler rates start at one minute; SCHEDULE_SECONDS accepts at most 3600)',
      );
    }
    const minutes = seconds / 60;
    return new SweepSchedule(`rate(${minutes} ${minutes === 1 ? 'minute' : 'minutes'})`, seconds);
  }

  /**
   * Invoke the sweeper on a cron expression, e.g. `cron(0/2 * * * ? *)` (every two minutes).
   *
   * @param expression an EventBridge Scheduler cron expression, with or without the `cron(...)`
   * wrapper: six fields (minutes hours day-of-month month day-of-week year)
   * @param period the longest time between two consecutive invocations, from 1 to 60 minutes
   * in whole seconds; tick mode stops before this much time has passed
   * @param timeZone the time zone the expression is evaluated in (default: UTC)
   */
  public static cron(expression: string, period: Duration, timeZone?: TimeZone): SweepSchedule {
    if (Token.isUnresolved(expression) || period.isUnresolved()) {
      throw new Error('SweepSchedule.cron: the expression and period must be literals, not tokens');
    }
    const trimmed = expression.trim();
    const body = /^cron\((.*)\)$/s.exec(trimmed)?.[1]?.trim() ?? trimmed;
    const fields = body.split(/\s+/).filter((f) => f.length > 0);
    if (fields.length !== 6) {
      throw new Error(
        `SweepSchedule.cron(${JSON.stringify(expression)}): expected six fields ` +
          '(minutes hours day-of-month month day-of-week year), e.g. "cron(0/2 * * * ? *)"',
      );
    }
    const seconds = period.toSeconds();
    if (!Number.isInteger(seconds) || seconds < 60 || seconds > 3600) {
      throw new Error(
        `SweepSchedule.cron(${JSON.stringify(expression)}): the period (${period.toHumanString()}) must be ` +
          'whole seconds from 60 to 3600 (SCHEDULE_SECONDS)',
      );
    }
    return new SweepSchedule(`cron(${fields.join(' ')})`, seconds, timeZone);
  }

  /** The expression, `rate(...)` or `cron(...)`. */
  public readonly expressionString: string;
  /** The period between invocations, in seconds (`SCHEDULE_SECONDS`). */
  public readonly periodSeconds: number;
  /** The time zone of a cron expression; undefined means UTC. */
  public readonly timeZone?: TimeZone;

  private constructor(expressionString: string, periodSeconds: number, timeZone?: TimeZone) {
    this.expressionString = expressionString;
    this.periodSeconds = periodSeconds;
    this.timeZone = timeZone;
  }

  /** The EventBridge Scheduler expression. */
  public toScheduleExpression(): scheduler.ScheduleExpression {
    return scheduler.ScheduleExpression.expression(this.expressionString, this.timeZone);
  }
}
