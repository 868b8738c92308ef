// The package's public surface: the construct, its props and what they take. The construct's parts
// (settings, function, grants, schedules, alarms, dashboard, stream indexer) are not exported.
export * from './checkpoint';
export { SweepSchedule } from './sweep-schedule';
export * from './props';
export * from './ttl-sweeper';
export * from './expiry-events';
