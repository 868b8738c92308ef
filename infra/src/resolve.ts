// The props resolved into the settings of the functions: defaults applied, every value and
// combination checked (all problems reported at once, each naming its prop), the tables with what
// each entry of `tables` sets, and the split of the shards between sweepers.

import { Duration, Stack, Token } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type { Construct } from 'constructs';
import { checkExpiryEvents, expiryEventEnvironment, ExpiryEventsMode, type ExpiryEventsOptions } from './expiry-events';
import { DeleteMode, type SweptTable, type TtlSweeperProps } from './props';
import { bounds, type Bounds, choices, defaultOf, LIMITS, setting } from './spec';
import { SweepSchedule } from './sweep-schedule';

// ---------------------------------------------------------------- shard ranges

/** The most functions one construct splits a table between. */
const MAX_SWEEPERS = 50;

/**
 * `shards` shards in `parts` contiguous inclusive ranges (`SHARD_RANGE` values) whose sizes differ
 * by at most one, with no gap and no overlap; the same split as the library's `ShardRange::split`.
 */
export function splitShards(shards: number, parts: number): string[] {
  return Array.from({ length: parts }, (_, i) => {
    const first = Math.floor((i * shards) / parts);
    const last = Math.floor(((i + 1) * shards) / parts) - 1;
    return `${first}-${last}`;
  });
}

// ---------------------------------------------------------------- validation

/** The defaults of the props that are also settings of the function: the binary's (`settings.json`). */
export const DEFAULTS = {
  indexName: defaultOf('INDEX_NAME') as string,
  ttlAttribute: defaultOf('TTL_ATTRIBUTE') as string,
  windowAttribute: defaultOf('WINDOW_ATTRIBUTE') as string,
  windowSeconds: defaultOf('WINDOW_SECONDS') as number,
  windowShards: defaultOf('WINDOW_SHARDS') as number,
  lookbackWindows: defaultOf('LOOKBACK_WINDOWS') as number,
  deleteMode: defaultOf('DELETE_MODE') as DeleteMode,
  maxConcurrency: defaultOf('MAX_CONCURRENCY') as number,
  maxRetries: defaultOf('MAX_RETRIES') as number,
  maxCatchUpSeconds: defaultOf('MAX_CATCHUP') as number,
  metricsNamespace: defaultOf('METRICS_NAMESPACE') as string,
};

/** The binary's ranges of the settings the construct checks props against (`settings.json`). */
const RANGE = {
  windowSeconds: bounds('WINDOW_SECONDS'),
  windowShards: bounds('WINDOW_SHARDS'),
  lookbackWindows: bounds('LOOKBACK_WINDOWS'),
  maxConcurrency: bounds('MAX_CONCURRENCY'),
  maxRetries: bounds('MAX_RETRIES'),
  tickSeconds: bounds('TICK_SECONDS'),
  maxCatchUp: bounds('MAX_CATCHUP'),
  leaderLease: bounds('LEADER_LEASE'),
};

/** A name's pattern (`INDEX_NAME`'s), and a namespace's (`METRICS_NAMESPACE`'s). */
const INDEX_PATTERN = new RegExp(setting('INDEX_NAME').rule.pattern!);
const NAMESPACE_PATTERN = new RegExp(setting('METRICS_NAMESPACE').rule.pattern!);

/** A table's own settings: the function-wide ones, or an entry of `tables` over them. */
export interface TableSettings {
  readonly indexName: string;
  readonly ttlAttribute: string;
  readonly windowAttribute: string;
  readonly windowSeconds: number;
  readonly windowShards: number;
  readonly lookbackWindows: number;
  readonly deleteMode: DeleteMode;
  readonly maxConcurrency: number;
  readonly maxRetries: number;
  readonly expiryEvents?: ExpiryEventsOptions;
}

/**
 * A table the function sweeps with its settings, and with `tables` its `TABLES` element: the
 * table's name and the variables of what its entry sets, nothing else.
 */
export interface SweptTableSettings {
  readonly table: dynamodb.ITable;
  readonly settings: TableSettings;
  readonly element?: Record<string, string>;
}

export interface Settings extends TableSettings {
  readonly tables: SweptTableSettings[];
  readonly sweepers: number;
  readonly tickSeconds?: number;
  readonly schedule: SweepSchedule;
  readonly scheduleRetryAttempts: number;
  readonly scheduleMaxEventAgeSeconds: number;
  readonly maxCatchUpSeconds: number;
  readonly leaderLeaseSeconds?: number;
  readonly metricsNamespace: string;
  readonly memorySize: number;
  readonly timeoutSeconds: number;
  readonly reservedConcurrency: number;
  readonly lagThresholdSeconds: number;
  readonly silenceAfterSeconds: number;
  readonly followStream: boolean;
}

/**
 * Whether the tables came from `tables` (even a list of one): the function then reads `TABLES`,
 * and the alarms and the dashboard name each table.
 */
export function namesEachTable(settings: Settings): boolean {
  return settings.tables.length > 1 || settings.tables[0].element !== undefined;
}

/** The settings an entry of `tables` may set, with the variable each becomes in `TABLES`. */
const TABLE_VARIABLES = [
  ['indexName', 'INDEX_NAME'],
  ['ttlAttribute', 'TTL_ATTRIBUTE'],
  ['windowAttribute', 'WINDOW_ATTRIBUTE'],
  ['windowSeconds', 'WINDOW_SECONDS'],
  ['windowShards', 'WINDOW_SHARDS'],
  ['lookbackWindows', 'LOOKBACK_WINDOWS'],
  ['deleteMode', 'DELETE_MODE'],
  ['maxConcurrency', 'MAX_CONCURRENCY'],
  ['maxRetries', 'MAX_RETRIES'],
] as const;

/** The checks of prop values, each adding a message naming the prop to `problems`. */
function validators(problems: string[]) {
  const known = (v: unknown) => !Token.isUnresolved(v);
  const whole = (name: string, value: number, range: Bounds, hint = ''): number => {
    if (known(value) && !within(value, range)) {
      problems.push(`${name} must be a whole number from ${range.min} to ${range.max}${hint}, got ${value}`);
    }
    return value;
  };
  const seconds = (name: string, d: Duration, range: Bounds, unit = 1): number => {
    const { min: lo, max: hi } = range;
    if (d.isUnresolved()) return NaN;
    const s = d.toSeconds();
    if (!(within(s, range) && s % unit === 0)) {
      const range = unit === 60 ? `whole minutes from ${lo / 60} to ${hi / 60} minutes` : `whole seconds from ${lo} to ${hi}`;
      problems.push(`${name} must be ${range}, got ${d.toHumanString()}`);
    }
    return s;
  };
  const name = (what: string, value: string, pattern: RegExp, expected: string) => {
    if (known(value) && !pattern.test(value)) problems.push(`${what} must be ${expected}, got ${JSON.stringify(value)}`);
    return value;
  };
  const attribute = (what: string, value: string) => {
    if (known(value) && (value.length === 0 || Buffer.byteLength(value, 'utf8') > 255)) {
      problems.push(`${what} must be a non-empty attribute name of at most 255 bytes, got ${JSON.stringify(value)}`);
    }
    return value;
  };
  return { known, whole, seconds, name, attribute };
}

/**
 * The settings of one table: `source`'s values over `base`'s. Each value `source` gives is
 * checked, its problem named `prefix` + the prop (`tables[1].windowSeconds`), and so is each
 * combination it takes part in; `base` was checked on its own.
 */
function tableSettings(
  problems: string[],
  source: Omit<SweptTable, 'table'>,
  base: TableSettings,
  prefix: string,
  baseDeleteModeIsDefault: boolean,
): TableSettings {
  const { known, whole, name, attribute } = validators(problems);
  const given = <T>(value: T | undefined, check: (v: T) => unknown, fallback: T): T => {
    if (value === undefined) return fallback;
    check(value);
    return value;
  };
  const indexName = given(source.indexName, (v) => name(`${prefix}indexName`, v, INDEX_PATTERN,
    "an index name of 3 to 255 letters, digits, '_', '-' or '.'"), base.indexName);
  const ttlAttribute = given(source.ttlAttribute, (v) => attribute(`${prefix}ttlAttribute`, v), base.ttlAttribute);
  const windowAttribute = given(source.windowAttribute, (v) => attribute(`${prefix}windowAttribute`, v), base.windowAttribute);
  const attributesGiven = source.ttlAttribute !== undefined || source.windowAttribute !== undefined;
  if (attributesGiven && known(ttlAttribute) && ttlAttribute === windowAttribute) {
    problems.push(`${prefix}windowAttribute must differ from ${prefix}ttlAttribute (both are ${JSON.stringify(ttlAttribute)})`);
  }
  const windowSeconds = given(source.windowSeconds, (v) => whole(`${prefix}windowSeconds`, v, RANGE.windowSeconds, ' (the width the writers use)'),
    base.windowSeconds);
  const windowShards = given(source.windowShards, (v) => whole(`${prefix}windowShards`, v, RANGE.windowShards, ' (the shard count the writers use)'),
    base.windowShards);
  if (source.expiryEvents !== undefined) {
    problems.push(...checkExpiryEvents(source.expiryEvents).map((p) => `${prefix}${p}`));
  }
  const expiryEvents = source.expiryEvents ?? base.expiryEvents;
  const lookbackWindows = given(source.lookbackWindows, (v) => whole(`${prefix}lookbackWindows`, v, RANGE.lookbackWindows), base.lookbackWindows);
  const deleteMode = given(source.deleteMode, (v) => {
    const modes = choices('DELETE_MODE');
    if (!modes.includes(v)) {
      problems.push(`${prefix}deleteMode must be ${modes.map((m) => `'${m}'`).join(' or ')}, got ${JSON.stringify(v)}`);
    }
  }, base.deleteMode);
  // The function refuses archive mode with batch deletes: BatchWriteItem cannot check the ttl, so a
  // ttl extended while the event was being published would not be noticed (and no cancellation
  // sent). Stop here rather than deploy a function that cannot start.
  const combinationGiven = source.expiryEvents !== undefined || source.deleteMode !== undefined;
  if (combinationGiven && expiryEvents?.mode === ExpiryEventsMode.ARCHIVE && deleteMode === DeleteMode.BATCH) {
    const origin = source.deleteMode !== undefined ? '' : baseDeleteModeIsDefault ? ' (the default)' : " (the sweeper's deleteMode)";
    problems.push(
      `${prefix}expiryEvents.mode ARCHIVE needs ${prefix}deleteMode CONDITIONAL, got deleteMode ${JSON.stringify(deleteMode)}` +
        `${origin}: a batch delete cannot tell a ttl extended while ` +
        `the event was published; set ${prefix}deleteMode: DeleteMode.CONDITIONAL or use ExpiryEventsMode.NOTIFY`,
    );
  }
  const maxConcurrency = given(source.maxConcurrency, (v) => whole(`${prefix}maxConcurrency`, v, RANGE.maxConcurrency), base.maxConcurrency);
  const maxRetries = given(source.maxRetries, (v) => whole(`${prefix}maxRetries`, v, RANGE.maxRetries), base.maxRetries);
  return {
    indexName,
    ttlAttribute,
    windowAttribute,
    windowSeconds,
    windowShards,
    lookbackWindows,
    deleteMode,
    maxConcurrency,
    maxRetries,
    expiryEvents,
  };
}

/** The `TABLES` element of `entry`: the table's name and the variables of what the entry sets. */
function tablesElement(entry: SweptTable): Record<string, string> {
  const element: Record<string, string> = { TABLE_NAME: entry.table.tableName };
  for (const [prop, variable] of TABLE_VARIABLES) {
    const value = entry[prop];
    if (value !== undefined) element[variable] = String(value);
  }
  return { ...element, ...expiryEventEnvironment(entry.expiryEvents) };
}

/**
 * The tables of `props` with their settings over the function-wide `base`: `table`, or each
 * entry of `tables` (checked: exactly one of the two, at least one entry, each table once, and
 * no prop that works on one table only).
 */
function sweptTables(scope: Construct, problems: string[], props: TtlSweeperProps, base: TableSettings): SweptTableSettings[] {
  if (props.table !== undefined && props.tables !== undefined) {
    problems.push('table and tables cannot both be given: set table for one table, or tables for several');
    return [];
  }
  if (props.tables === undefined) {
    if (props.table === undefined) {
      problems.push('a table to sweep is needed: set table (one table) or tables (several)');
      return [];
    }
    return [{ table: props.table, settings: base }];
  }
  if (props.tables.length === 0) {
    problems.push('tables must list at least one table, got an empty list');
    return [];
  }
  if ((props.sweepers ?? 1) !== 1) {
    problems.push(
      `sweepers (${props.sweepers}) cannot be used with tables: it splits one table's shards between functions; ` +
        'give a table that needs several sweepers a TtlSweeper of its own',
    );
  }
  if (props.followStream) {
    problems.push(
      "followStream cannot be used with tables: the stream indexer follows one table's stream; " +
        'give a table whose stream should be followed a TtlSweeper of its own',
    );
  }
  const stack = Stack.of(scope);
  const identity = (table: dynamodb.ITable) => {
    const tableName = table.tableName;
    return Token.isUnresolved(tableName) ? JSON.stringify(stack.resolve(tableName)) : tableName;
  };
  const seen = new Map<string, number>();
  const deleteModeIsDefault = props.deleteMode === undefined;
  return props.tables.map((entry, i) => {
    const key = identity(entry.table);
    const first = seen.get(key);
    if (first !== undefined) {
      const shown = Token.isUnresolved(entry.table.tableName) ? entry.table.node.path : JSON.stringify(entry.table.tableName);
      problems.push(`tables[${i}] is the same table as tables[${first}] (${shown}): list each table once`);
    } else {
      seen.set(key, i);
    }
    const before = problems.length;
    const settings = tableSettings(problems, entry, base, `tables[${i}].`, deleteModeIsDefault);
    // An entry with problems has no element: synthesis stops with them.
    return { table: entry.table, settings, element: problems.length === before ? tablesElement(entry) : {} };
  });
}

/** Defaults applied and every value checked; all problems are reported at once. */
export function resolveSettings(scope: Construct, props: TtlSweeperProps): Settings {
  const problems: string[] = [];
  const { known, whole, seconds } = validators(problems);

  const schedule = props.schedule ?? SweepSchedule.rate(Duration.minutes(1));
  const period = schedule.periodSeconds;
  const base = tableSettings(problems, props, {
    indexName: DEFAULTS.indexName,
    ttlAttribute: DEFAULTS.ttlAttribute,
    windowAttribute: DEFAULTS.windowAttribute,
    windowSeconds: DEFAULTS.windowSeconds,
    windowShards: DEFAULTS.windowShards,
    lookbackWindows: DEFAULTS.lookbackWindows,
    deleteMode: DEFAULTS.deleteMode,
    maxConcurrency: DEFAULTS.maxConcurrency,
    maxRetries: DEFAULTS.maxRetries,
  }, '', true);
  const { windowShards, windowSeconds } = base;
  const sweepers = props.sweepers ?? 1;
  if (Token.isUnresolved(sweepers)) {
    problems.push('sweepers must be a number known at synthesis: it decides how many functions are created');
  } else {
    if (sweepers > 1 && !known(windowShards)) {
      problems.push('windowShards must be a number known at synthesis when sweepers > 1: the shards are split then');
    }
    // An invalid windowShards is reported on its own; sweepers is then checked against 50 only.
    const shardsOk = known(windowShards) && within(windowShards, RANGE.windowShards);
    const most = shardsOk ? Math.min(windowShards, MAX_SWEEPERS) : MAX_SWEEPERS;
    if (!(Number.isInteger(sweepers) && sweepers >= 1 && sweepers <= most)) {
      problems.push(
        `sweepers must be a whole number from 1 to ${most} (each sweeper reads at least one of the ` +
          `windowShards=${windowShards} shards; at most ${MAX_SWEEPERS}), got ${sweepers}`,
      );
    }
  }
  const tables = sweptTables(scope, problems, props, base);

  let tickSeconds: number | undefined;
  const ticking = props.tickSeconds !== undefined;
  if (props.tickSeconds !== undefined) {
    tickSeconds = whole('tickSeconds', props.tickSeconds, RANGE.tickSeconds, ' (omit it to sweep once per invocation)');
    if (known(tickSeconds) && tickSeconds >= period) {
      problems.push(`tickSeconds (${tickSeconds}) must be less than the schedule period (${period} s)`);
    }
  }

  const scheduleRetryAttempts = whole('scheduleRetryAttempts', props.scheduleRetryAttempts ?? 2, { min: 0, max: 185 });
  const scheduleMaxEventAgeSeconds = seconds('scheduleMaxEventAge', props.scheduleMaxEventAge ?? Duration.minutes(5), { min: 60, max: 86400 });

  if (props.maxCatchUp !== undefined && props.checkpoint === undefined) {
    problems.push('maxCatchUp needs a checkpoint: set checkpoint (e.g. Checkpoint.newTable()) or drop maxCatchUp');
  }
  const maxCatchUpSeconds = seconds('maxCatchUp', props.maxCatchUp ?? Duration.seconds(DEFAULTS.maxCatchUpSeconds), RANGE.maxCatchUp);

  // The lease is an item of the checkpoint table; the function needs it to last at least two ticks.
  let leaderLeaseSeconds: number | undefined;
  if (props.leaderLease?.isUnresolved()) {
    problems.push('leaderLease must be a literal duration, not a token: it is checked against the tick or schedule period');
  } else if (props.leaderLease !== undefined) {
    leaderLeaseSeconds = props.leaderLease.toSeconds({ integral: false });
    if (!(Number.isInteger(leaderLeaseSeconds) && leaderLeaseSeconds >= 1)) {
      problems.push(`leaderLease must be whole seconds, got ${props.leaderLease.toHumanString()}`);
    } else if (!within(leaderLeaseSeconds, RANGE.leaderLease)) {
      // The binary's range: a holder stops sending 3 s before its lease runs out.
      problems.push(`leaderLease must be from ${RANGE.leaderLease.min} s to ${RANGE.leaderLease.max} s, got ${leaderLeaseSeconds} s`);
    } else if (ticking && known(tickSeconds) && leaderLeaseSeconds < 2 * tickSeconds!) {
      problems.push(
        `leaderLease (${leaderLeaseSeconds} s) must be at least two ticks: 2 × tickSeconds (${tickSeconds}) = ${2 * tickSeconds!} s`,
      );
    } else if (!ticking && leaderLeaseSeconds < 2 * period) {
      problems.push(
        `leaderLease (${leaderLeaseSeconds} s) must be at least two schedule periods: 2 × the schedule's period (${period} s) = ${2 * period} s`,
      );
    }
    if (props.checkpoint === undefined) {
      problems.push(
        'leaderLease needs a checkpoint, which holds the lease: set checkpoint (for sweepers in several Regions, ' +
          'Checkpoint.fromTable of a global table replicated in each of them) or drop leaderLease',
      );
    }
  }

  const metricsNamespace = props.metricsNamespace ?? DEFAULTS.metricsNamespace;
  if (
    known(metricsNamespace) &&
    (!NAMESPACE_PATTERN.test(metricsNamespace) || metricsNamespace.trim() === '' || metricsNamespace.startsWith('AWS/'))
  ) {
    problems.push(
      'metricsNamespace must be a CloudWatch namespace (1 to 255 of letters, digits, ".", "-", "_", "/", "#", ":" ' +
        `and spaces, not starting with "AWS/"), got ${JSON.stringify(metricsNamespace)}`,
    );
  }

  const memorySize = whole('memorySize', props.memorySize ?? 128, { min: 128, max: 10240 });
  // Tick mode: an invocation ticks until HANDOFF_OVERLAP (10 s) past the next scheduled one, and
  // stops 3 s before its deadline; the next invocation runs beside it meanwhile.
  const timeoutSeconds = props.timeout
    ? seconds('timeout', props.timeout, { min: 1, max: 900 })
    : Math.min(period + (ticking ? 20 : 10), 900);
  const reservedConcurrency = whole('reservedConcurrency', props.reservedConcurrency ?? (ticking ? 2 : 1), { min: 1, max: 1000 },
    ' (1 keeps invocations from overlapping; tick mode needs 2)');

  const alarms = props.alarms ?? {};
  const lagThresholdSeconds = seconds('alarms.lagThreshold', alarms.lagThreshold ?? Duration.minutes(2), { min: 1, max: 86400 });
  const silenceDefault = Math.max(600, 2 * Math.ceil(period / 60) * 60);
  const silenceAfterSeconds = alarms.silenceAfter
    ? seconds('alarms.silenceAfter', alarms.silenceAfter, { min: 60, max: 86400 }, 60)
    : silenceDefault;
  if (alarms.silenceAfter && !alarms.silenceAfter.isUnresolved() && silenceAfterSeconds <= period) {
    problems.push(`alarms.silenceAfter (${silenceAfterSeconds} s) must be longer than the schedule period (${period} s)`);
  }
  for (const email of alarms.emails ?? []) {
    if (known(email) && !/^[^@\s]+@[^@\s]+$/.test(email)) {
      problems.push(`alarms.emails: ${JSON.stringify(email)} is not an e-mail address`);
    }
  }

  const followStream = props.followStream ?? false;
  if (followStream && props.indexName !== undefined) {
    problems.push(
      `indexName (${JSON.stringify(props.indexName)}) cannot be used with followStream: the expiry index table the ` +
        "construct creates replaces the table's GSI, which the sweeper then does not query; drop indexName",
    );
  }
  // With tables (refused above) or without any table there is no one stream to check.
  if (followStream && props.table !== undefined && props.tables === undefined) {
    problems.push(...checkStream(props.table));
    // The indexer reads every shard: its start-up check must pass with the lookback the binary
    // derives for it (at least 15 windows, covering 70 s) over all of them.
    const shardsKnown = known(windowShards) && within(windowShards, RANGE.windowShards);
    const widthKnown = known(windowSeconds) && within(windowSeconds, RANGE.windowSeconds);
    if (shardsKnown && widthKnown) {
      const lookback = Math.max(DEFAULTS.lookbackWindows, Math.ceil((60 + LIMITS.lookbackSlackSeconds) / windowSeconds));
      const partitions = (lookback + 1) * windowShards;
      if (partitions > MAX_PARTITIONS_PER_SWEEP) {
        problems.push(
          `followStream with windowSeconds=${windowSeconds} and windowShards=${windowShards}: the stream indexer, ` +
            `which reads every shard, would fail its start-up check (${lookback + 1} windows of ${windowShards} ` +
            `shards are ${partitions} partitions, more than ${MAX_PARTITIONS_PER_SWEEP}); widen windowSeconds or use fewer windowShards`,
        );
      }
    }
  }

  if (problems.length > 0) {
    throw new Error(`TtlSweeper ${scope.node.path}: invalid props:\n  - ${problems.join('\n  - ')}`);
  }
  return {
    ...base,
    tables,
    sweepers,
    tickSeconds,
    schedule,
    scheduleRetryAttempts,
    scheduleMaxEventAgeSeconds,
    maxCatchUpSeconds,
    leaderLeaseSeconds,
    metricsNamespace,
    memorySize,
    timeoutSeconds,
    reservedConcurrency,
    lagThresholdSeconds,
    silenceAfterSeconds,
    followStream,
  };
}

/** The binary's limit on the partitions one sweep reads (`MAX_PARTITIONS_PER_SWEEP`). */
const MAX_PARTITIONS_PER_SWEEP = LIMITS.maxPartitionsPerSweep;

/** Whether `value` is a whole number within `range`. */
function within(value: number, range: Bounds): boolean {
  return Number.isInteger(value) && value >= range.min && value <= range.max;
}

/**
 * Why the stream indexer cannot follow `table`'s stream, if it cannot: no stream (a table created
 * without one, or imported without its ARN), or a stream whose records lack the new image. The
 * view is known only for a table created in the app.
 */
function checkStream(table: dynamodb.ITable): string[] {
  const resource = table.node.defaultChild;
  const created = resource instanceof dynamodb.CfnTable || resource instanceof dynamodb.CfnGlobalTable;
  const views = "StreamViewType.NEW_IMAGE or StreamViewType.NEW_AND_OLD_IMAGES";
  if (!created) {
    return table.tableStreamArn === undefined
      ? [
        "followStream needs the table's stream ARN: import the table with Table.fromTableAttributes(scope, id, " +
            `{ tableName, tableStreamArn }) (a stream with the new image: ${views})`,
      ]
      : [];
  }
  const spec = Stack.of(table).resolve(resource.streamSpecification) as { StreamViewType?: string; streamViewType?: string } | undefined;
  const view = spec?.StreamViewType ?? spec?.streamViewType;
  const option = resource instanceof dynamodb.CfnTable ? 'stream' : 'dynamoStream';
  if (spec === undefined || table.tableStreamArn === undefined) {
    return [`followStream needs a stream on the table: set its ${option} to ${views}`];
  }
  if (typeof view === 'string' && !Token.isUnresolved(view) && view !== 'NEW_IMAGE' && view !== 'NEW_AND_OLD_IMAGES') {
    return [
      `followStream needs the new image in the table's stream records, but its stream view is ${view}: ` +
        `set the table's ${option} to ${views}`,
    ];
  }
  return [];
}
