// The IAM lists of the documentation against the policies the construct synthesizes for the same
// choices. Two formats, found by their markers in README.md, docs/*.md and infra/README.md:
//
// - `<!-- iam: <role> <choice>... -->` ... `<!-- /iam -->`: the DynamoDB actions a role needs, by
//   resource, as a JSON policy fragment (resources as ARNs) or as a table `| resource | actions |`
//   (resources named as below). Roles: `function` (the sweeper's Lambda) and `daemon`
//   (`ttl-sweeper run`; with `gsi`, the same as the function's, checked here; with `follow-stream`,
//   tests/iam_docs.rs runs it and compares the requests it sends) and `tool` (`backfill` and
//   `audit`, each with `gsi` or `index-table`: tests/iam_docs.rs runs them). Choices: `batch` or
//   `conditional`, `gsi` or `follow-stream`, `checkpoint`, `lease`, `events-read`.
// - `<!-- iam-statements: <role> -->` ... `<!-- /iam-statements -->`: infra/README.md's tables of
//   statements, `| \`Sid\` (when) | actions | resource |`, role `function` or `indexer`: for every
//   combination of delete mode, index, checkpoint or lease and expiry events, each statement the
//   role gets has its row with exactly its actions, and a row whose condition names one of those
//   choices is there exactly when the choice is.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as cdk from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as firehose from 'aws-cdk-lib/aws-kinesisfirehose';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Checkpoint, DeleteMode, ExpiryEventsItem, ExpiryEventsMode, TtlSweeper, type TtlSweeperProps } from '../src';
import { assetDir, env, newStack, statements } from './support';

const root = path.join(__dirname, '..', '..');
const STREAM_ARN = `arn:aws:dynamodb:${env.region}:${env.account}:table/sessions/stream/2026-11-26T00:00:00.000`;

/** The documents that may hold IAM lists. */
function documents(): string[] {
  const docs = fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => path.join('docs', f));
  return ['README.md', ...docs.sort(), path.join('infra', 'README.md')];
}

interface Block {
  file: string;
  header: string[];
  body: string;
}

/** The blocks between `<!-- name ... -->` and `<!-- /name -->` of every document. */
function blocks(name: string): Block[] {
  const out: Block[] = [];
  const open = new RegExp(`<!-- ${name}: ([^>]*?) ?(?:\\([^)]*\\))? ?-->\\n([\\s\\S]*?)<!-- /${name} -->`, 'g');
  for (const file of documents()) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    for (const m of text.matchAll(open)) out.push({ file, header: m[1].trim().split(/\s+/), body: m[2] });
    const opened = text.split(`<!-- ${name}:`).length - 1;
    const found = out.filter((b) => b.file === file).length;
    assert.equal(found, opened, `${file}: a <!-- ${name}: --> block without its <!-- /${name} -->, or a header not understood`);
  }
  return out;
}

// ---------------------------------------------------------------- the choices and the policies

type Resource = 'the table' | "the table's index" | 'the expiry index table' | 'the checkpoint table' | "the table's stream";
const RESOURCES: Resource[] = ['the table', "the table's index", 'the expiry index table', 'the checkpoint table', "the table's stream"];

interface Choices {
  deleteMode: DeleteMode;
  followStream: boolean;
  state: 'none' | 'checkpoint' | 'lease';
  events: 'none' | 'bus' | 'queue-read' | 'archive';
}

const CHOICE_WORDS = ['batch', 'conditional', 'gsi', 'follow-stream', 'checkpoint', 'lease', 'events-read'];

/** The choices an `iam:` header names (what it leaves out: GSI, batch, no checkpoint, no events). */
function choicesOf(words: string[], where: string): Choices {
  for (const w of words) assert.ok(CHOICE_WORDS.includes(w), `${where}: unknown choice ${w} (known: ${CHOICE_WORDS.join(', ')})`);
  const has = (w: string) => words.includes(w);
  assert.ok(!(has('batch') && has('conditional')) && !(has('gsi') && has('follow-stream')), `${where}: contradictory choices`);
  return {
    deleteMode: has('conditional') ? DeleteMode.CONDITIONAL : DeleteMode.BATCH,
    followStream: has('follow-stream'),
    state: has('lease') ? 'lease' : has('checkpoint') ? 'checkpoint' : 'none',
    events: has('events-read') ? 'queue-read' : 'none',
  };
}

/** The construct for `choices`, on `sessions` imported with its stream, in tick mode. */
function build(choices: Choices) {
  const stack = newStack();
  const table = dynamodb.Table.fromTableAttributes(stack, 'Sessions', { tableName: 'sessions', tableStreamArn: STREAM_ARN });
  const props: TtlSweeperProps = {
    table,
    code: lambda.Code.fromAsset(assetDir),
    tickSeconds: 1,
    deleteMode: choices.deleteMode,
    followStream: choices.followStream,
  };
  const extra: Partial<{ -readonly [K in keyof TtlSweeperProps]: TtlSweeperProps[K] }> = {};
  if (choices.state !== 'none') {
    extra.checkpoint = Checkpoint.fromTable(dynamodb.Table.fromTableName(stack, 'Checkpoints', 'sweeper-checkpoints'));
  }
  if (choices.state === 'lease') extra.leaderLease = cdk.Duration.seconds(10);
  if (choices.events === 'bus') extra.expiryEvents = { eventBus: events.EventBus.fromEventBusName(stack, 'Bus', 'default') };
  if (choices.events === 'queue-read') {
    extra.expiryEvents = {
      queue: sqs.Queue.fromQueueArn(stack, 'Queue', `arn:aws:sqs:${env.region}:${env.account}:expiries`),
      item: ExpiryEventsItem.READ,
    };
  }
  if (choices.events === 'archive') {
    extra.expiryEvents = {
      deliveryStream: firehose.DeliveryStream.fromDeliveryStreamName(stack, 'Archive', 'expired-items'),
      mode: ExpiryEventsMode.ARCHIVE,
    };
  }
  const sweeper = new TtlSweeper(stack, 'Sweeper', { ...props, ...extra });
  return { stack, sweeper, template: Template.fromStack(stack) };
}

/** The statements of `role`'s policies, by Sid (or by actions when it has none). */
function roleStatements(built: ReturnType<typeof build>, role: iam.Role) {
  const id = built.stack.getLogicalId(role.node.defaultChild as cdk.CfnElement);
  return statements(built.template, id);
}

/** Which of the documented resources a synthesized resource is. */
function resourceOf(resource: unknown): Resource {
  const text = JSON.stringify(resource);
  if (text.includes('/stream/')) return "the table's stream";
  if (text.includes('/index/')) return "the table's index";
  if (text.includes('sweeper-checkpoints')) return 'the checkpoint table';
  if (/ExpiryIndex[0-9A-F]{8}"/.test(text)) return 'the expiry index table';
  if (text.includes(':table/sessions')) return 'the table';
  throw new Error(`a resource the IAM lists do not name: ${text}`);
}

type Actions = Map<Resource, Set<string>>;

/** The DynamoDB actions of `role`, by resource. */
function dynamoActions(built: ReturnType<typeof build>, role: iam.Role): Actions {
  const out: Actions = new Map();
  for (const st of Object.values(roleStatements(built, role))) {
    const actions = [st.Action].flat().map(String).filter((a) => a.startsWith('dynamodb:'));
    if (actions.length === 0) continue;
    for (const r of [st.Resource].flat()) {
      const kind = resourceOf(r);
      const set = out.get(kind) ?? new Set<string>();
      for (const a of actions) set.add(a);
      out.set(kind, set);
    }
  }
  return out;
}

const show = (actions: Actions) =>
  Object.fromEntries(RESOURCES.filter((r) => actions.has(r)).map((r) => [r, [...actions.get(r)!].sort()]));

// ---------------------------------------------------------------- `iam:` blocks

/** The DynamoDB actions a block lists, by resource: a JSON fragment or a resource table. */
function documented(block: Block): Actions {
  const out: Actions = new Map();
  const add = (kind: Resource, actions: string[]) => {
    const set = out.get(kind) ?? new Set<string>();
    for (const a of actions) set.add(a);
    out.set(kind, set);
  };
  const json = /```json\n([\s\S]*?)```/.exec(block.body);
  if (json) {
    const policy: { Action: string | string[]; Resource: string | string[] }[] = JSON.parse(`[${json[1]}]`);
    for (const st of policy) {
      for (const r of [st.Resource].flat()) {
        const kind = r.includes('/stream/') ? "the table's stream" : r.includes('/index/') ? "the table's index" : r.endsWith(':table/sessions') ? 'the table' : undefined;
        assert.ok(kind, `${block.file}: a resource the IAM lists do not name: ${r}`);
        add(kind, [st.Action].flat().filter((a) => a.startsWith('dynamodb:')));
      }
    }
    return out;
  }
  const rows = block.body.split('\n').filter((l) => l.startsWith('|') && !/^\|[-| ]+\|$/.test(l));
  assert.equal(rows[0], '| resource | actions |', `${block.file}: an iam block is a JSON fragment or a | resource | actions | table`);
  for (const row of rows.slice(1)) {
    const [resource, actions] = row.split('|').slice(1, 3).map((c) => c.trim());
    const kind = RESOURCES.find((r) => resource === r || resource.startsWith(`${r} (`));
    assert.ok(kind, `${block.file}: ${resource} is none of ${RESOURCES.join(', ')}`);
    add(kind, [...actions.matchAll(/`(dynamodb:[A-Za-z]+)`/g)].map((m) => m[1]));
  }
  return out;
}

test('every iam block of the docs lists the DynamoDB actions the construct grants for its choices', () => {
  const found = blocks('iam');
  assert.ok(found.length >= 3, `only ${found.length} iam blocks found`);
  let compared = 0;
  for (const block of found) {
    const [role, ...words] = block.header;
    const where = `${block.file} <!-- iam: ${block.header.join(' ')} -->`;
    assert.ok(['function', 'daemon', 'tool'].includes(role), `${where}: unknown role ${role}`);
    // The CLI's backfill and audit: tests/iam_docs.rs runs them and compares what they send.
    if (role === 'tool') continue;
    const choices = choicesOf(words, where);
    const listed = documented(block);
    assert.ok(listed.size > 0, `${where}: no actions`);
    // The daemon that follows the stream reads it itself and saves its position: tests/iam_docs.rs.
    if (role === 'daemon' && choices.followStream) continue;
    const built = build(choices);
    assert.deepEqual(show(listed), show(dynamoActions(built, built.sweeper.role)), where);
    compared += 1;
  }
  assert.ok(compared >= 2, `only ${compared} blocks compared`);
});

// ---------------------------------------------------------------- `iam-statements:` tables

interface Row {
  sid?: string;
  when: string;
  actions?: string[];
}

function statementRows(block: Block): Row[] {
  const rows = block.body.split('\n').filter((l) => l.startsWith('|') && !/^\|[-| ]+\|$/.test(l));
  assert.equal(rows[0], '| statement | actions | resource |', block.file);
  return rows.slice(1).map((row) => {
    const [first, actions] = row.split('|').slice(1, 3).map((c) => c.trim());
    const sid = /^`([A-Za-z]+)`/.exec(first)?.[1];
    const listed = [...actions.matchAll(/`([a-z0-9-]+:[A-Za-z*]+)`/g)].map((m) => m[1]);
    return { sid, when: sid ? first.slice(sid.length + 2).trim() : first, actions: listed.length > 0 ? listed.sort() : undefined };
  });
}

/**
 * Whether a row's condition, as written, holds for `choices`; `undefined` when it names none of
 * them (a customer managed key, a sink of another kind): then only its actions are compared.
 */
function holds(when: string, choices: Choices): boolean | undefined {
  if (when === '' || when === '(on-failure destination)') return true;
  if (when.startsWith('(not with `followStream`')) return !choices.followStream;
  if (when.startsWith('(with `followStream`')) return choices.followStream;
  if (when.startsWith('(batch mode')) return choices.deleteMode === DeleteMode.BATCH;
  if (when.startsWith('(with a checkpoint')) return choices.state !== 'none';
  if (when.startsWith('(with `expiryEvents.eventBus`')) return choices.events === 'bus';
  if (when.startsWith('(with `expiryEvents.queue`')) return choices.events === 'queue-read';
  if (when.startsWith('(with `expiryEvents.deliveryStream`')) return choices.events === 'archive';
  if (when.startsWith('(with `expiryEvents`')) return choices.events !== 'none';
  return undefined;
}

/** Every combination the statement tables are checked on. */
function combinations(): Choices[] {
  const out: Choices[] = [];
  for (const deleteMode of [DeleteMode.BATCH, DeleteMode.CONDITIONAL]) {
    for (const followStream of [false, true]) {
      for (const state of ['none', 'checkpoint', 'lease'] as const) out.push({ deleteMode, followStream, state, events: 'none' });
    }
  }
  out.push({ deleteMode: DeleteMode.BATCH, followStream: false, state: 'none', events: 'bus' });
  // Notify mode with conditional deletes and no item read: the table is still read, to settle a
  // delete whose answer was lost.
  out.push({ deleteMode: DeleteMode.CONDITIONAL, followStream: false, state: 'checkpoint', events: 'bus' });
  out.push({ deleteMode: DeleteMode.CONDITIONAL, followStream: true, state: 'checkpoint', events: 'queue-read' });
  out.push({ deleteMode: DeleteMode.CONDITIONAL, followStream: false, state: 'lease', events: 'archive' });
  // The stream indexer publishes the events of the items it deletes: in notify mode too.
  out.push({ deleteMode: DeleteMode.BATCH, followStream: true, state: 'lease', events: 'bus' });
  out.push({ deleteMode: DeleteMode.CONDITIONAL, followStream: true, state: 'none', events: 'archive' });
  return out;
}

test("infra/README's statement tables are the roles' statements, for every combination of choices", () => {
  const tables = blocks('iam-statements');
  assert.deepEqual(tables.map((t) => `${t.file} ${t.header[0]}`).sort(), [`${path.join('infra', 'README.md')} function`, `${path.join('infra', 'README.md')} indexer`]);
  for (const table of tables) {
    const role = table.header[0];
    const rows = statementRows(table);
    const seen = new Set<Row>();
    for (const choices of combinations()) {
      if (role === 'indexer' && !choices.followStream) continue;
      const built = build(choices);
      const iamRole = role === 'function' ? built.sweeper.role : built.sweeper.streamRole!;
      const granted = roleStatements(built, iamRole);
      const where = `${table.file} (${role}), ${JSON.stringify(choices)}`;
      for (const [key, st] of Object.entries(granted)) {
        const actions = [st.Action].flat().map(String).sort();
        const row = rows.find((r) => (st.Sid ? r.sid === key : r.sid === undefined && JSON.stringify(r.actions) === JSON.stringify(actions)));
        assert.ok(row, `${where}: no row for the statement ${key}`);
        seen.add(row);
        if (row.actions) assert.deepEqual(row.actions, actions, `${where}: the actions of ${key}`);
        assert.notEqual(holds(row.when, choices), false, `${where}: ${key} is granted, but its row says ${row.when}`);
      }
      for (const row of rows) {
        const present = Object.entries(granted).some(([key, st]) => (st.Sid ? key === row.sid : row.sid === undefined));
        if (holds(row.when, choices) === true) assert.ok(present, `${where}: ${row.sid ?? row.when} ${row.when} is not granted`);
      }
    }
    const unchecked = rows.filter((r) => !seen.has(r) && holds(r.when, combinations()[0]) !== undefined);
    assert.deepEqual(unchecked.map((r) => r.sid ?? r.when), [], `${table.file} (${role}): rows never granted`);
  }
});
