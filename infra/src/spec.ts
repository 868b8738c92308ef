// The binary's settings, as `ttl-sweeper settings` writes them into `settings.json` at the root
// of this package: each setting's default and rule. The construct takes its defaults and the
// ranges it checks props against from here, not from a copy of its own.

import * as fs from 'node:fs';
import * as path from 'node:path';

/** What a setting accepts (the `rule` of `settings.json`). */
export interface SettingRule {
  readonly kind: 'whole' | 'duration' | 'choice' | 'tables' | 'table' | 'index' | 'attribute' | 'namespace' | 'parsed';
  /** A whole number's bounds. */
  readonly min?: number;
  readonly max?: number;
  /** A duration's bounds, in milliseconds. */
  readonly minMs?: number;
  readonly maxMs?: number;
  /** Whether `off` is accepted too. */
  readonly off?: boolean;
  /** A choice's words. */
  readonly choices?: string[];
  /** A name's pattern. */
  readonly pattern?: string;
}

/** One setting of `settings.json`. */
export interface SettingSpec {
  readonly var: string;
  /** The raw default (`null`: required). */
  readonly default: string | null;
  /** The default as its rule reads it: a number (a duration's in milliseconds), text, or `null` (off, none). */
  readonly value: number | string | null;
  readonly accepts: string;
  readonly rule: SettingRule;
  readonly perTable: boolean;
}

interface Spec {
  readonly limits: { readonly maxPartitionsPerSweep: number; readonly lookbackSlackSeconds: number };
  readonly settings: SettingSpec[];
}

/** `settings.json`, beside `src/` and `lib/` in the repository and in the package. */
export const SPEC_FILE = path.resolve(__dirname, '..', 'settings.json');

const SPEC: Spec = JSON.parse(fs.readFileSync(SPEC_FILE, 'utf8'));

/** The setting named `variable` (`MAX_CONCURRENCY`). */
export function setting(variable: string): SettingSpec {
  const found = SPEC.settings.find((s) => s.var === variable);
  if (found === undefined) throw new Error(`${SPEC_FILE} has no setting ${variable}`);
  return found;
}

/** A range's least and most. */
export interface Bounds {
  readonly min: number;
  readonly max: number;
}

/** A whole-number setting's bounds; a duration's in whole seconds. */
export function bounds(variable: string): Bounds {
  const rule = setting(variable).rule;
  if (rule.kind === 'whole') return { min: rule.min!, max: rule.max! };
  if (rule.kind === 'duration') return { min: Math.ceil(rule.minMs! / 1000), max: Math.floor(rule.maxMs! / 1000) };
  throw new Error(`${variable} is a ${rule.kind}, not a range`);
}

/** A choice setting's words. */
export function choices(variable: string): string[] {
  const rule = setting(variable).rule;
  if (rule.kind !== 'choice') throw new Error(`${variable} is a ${rule.kind}, not a choice`);
  return rule.choices!;
}

/** A setting's default as its rule reads it: a number (a duration's in whole seconds) or text. */
export function defaultOf(variable: string): number | string {
  const { value, rule } = setting(variable);
  if (value === null) throw new Error(`${variable} has no default value`);
  return rule.kind === 'duration' ? (value as number) / 1000 : value;
}

/** The binary's limits the construct checks ahead of deployment. */
export const LIMITS = SPEC.limits;
