'use strict';
// The helpers against the repository's vectors: spec/window-vectors.json (windows and shards),
// spec/expiry-vectors.json (the expiry check and edge-case ttls), spec/expiry-removal-vectors.json
// (Streams records). The Rust crate is tested against the same files.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const expiry = require('..');

const spec = (name) => JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'spec', name), 'utf8'));

test('window attributes match spec/window-vectors.json', () => {
  const { vectors } = spec('window-vectors.json');
  assert.ok(vectors.length >= 15);
  for (const v of vectors) {
    const got = expirationWindow(v);
    assert.equal(got, v.attribute, JSON.stringify(v));
    assert.equal(expiry.shardOf(v.partition_key, v.shards), v.shard, JSON.stringify(v));
  }
});

function expirationWindow(v) {
  return expiry.expirationWindow(v.ttl, { width: v.window_seconds, shards: v.shards, key: v.partition_key });
}

test('the ttl may be a number or Number text, the key a string or bytes', () => {
  const { vectors } = spec('window-vectors.json');
  for (const v of vectors) {
    const [[kind, value]] = Object.entries(v.partition_key);
    const key = kind === 'B' ? new Uint8Array(Buffer.from(value, 'base64')) : value;
    const got = expiry.expirationWindow(Number(v.ttl), { width: v.window_seconds, shards: v.shards, key });
    assert.equal(got, v.attribute, JSON.stringify(v));
  }
});

const ERRORS = { milliseconds: /milliseconds/, negative: /negative/, 'not a number': /not a number/ };

test('edge-case ttls match spec/expiry-vectors.json', () => {
  const { windows } = spec('expiry-vectors.json');
  for (const v of windows) {
    if (v.error) {
      assert.throws(() => expirationWindow(v), ERRORS[v.error], v.name);
    } else {
      assert.equal(expirationWindow(v), v.attribute, v.name);
    }
  }
});

test('the expiry check matches spec/expiry-vectors.json, marshalled and unmarshalled', () => {
  const { is_expired: cases } = spec('expiry-vectors.json');
  assert.ok(cases.some((c) => c.expected) && cases.some((c) => !c.expected));
  for (const c of cases) {
    const item = { id: { S: 'a' } };
    if (c.ttl !== null) item.ttl = c.ttl;
    assert.equal(expiry.isExpired(item, c.now), c.expected, c.name);
    // DocumentClient items hold Numbers as numbers; ttls that are Number text of a number read the same.
    if (c.ttl && typeof c.ttl.N === 'string' && /^\s*-?\d+(\.\d+)?(e\d+)?\s*$/.test(c.ttl.N)) {
      assert.equal(expiry.isExpired({ ttl: Number(c.ttl.N) }, c.now), c.expected, `${c.name} (DocumentClient)`);
    }
    assert.equal(expiry.isExpired({ expiresAt: item.ttl }, c.now, 'expiresAt'), c.expected, `${c.name} (attribute)`);
  }
});

test('stream records match spec/expiry-removal-vectors.json', () => {
  const { vectors } = spec('expiry-removal-vectors.json');
  assert.ok(vectors.length > 10);
  for (const v of vectors) {
    assert.equal(expiry.isExpiryRemoval(v.record, v.ttl_attribute), v.expected, v.name);
  }
});

test('the read filter keeps live items and items without a ttl', () => {
  assert.deepEqual(expiry.liveItemsFilter(1658265980), {
    FilterExpression: '(#ttl >= :now OR attribute_not_exists(#ttl))',
    ExpressionAttributeNames: { '#ttl': 'ttl' },
    ExpressionAttributeValues: { ':now': { N: '1658265980' } },
  });
  const doc = expiry.liveItemsFilter(1658265980, 'expiresAt', { documentClient: true });
  assert.deepEqual(doc.ExpressionAttributeNames, { '#ttl': 'expiresAt' });
  assert.deepEqual(doc.ExpressionAttributeValues, { ':now': 1658265980 });
  assert.throws(() => expiry.liveItemsFilter(NaN), /not a number/);
});

test('shapes out of range and a sharded window without a key are errors', () => {
  assert.throws(() => expiry.expirationWindow(1658265980, { width: 0 }), /width 0 is not a whole number from 1 to 86400/);
  assert.throws(() => expiry.expirationWindow(1658265980, { width: 86_401 }), /width/);
  assert.throws(() => expiry.expirationWindow(1658265980, { width: 1.5 }), /width/);
  assert.throws(() => expiry.expirationWindow(1658265980, { shards: 1001, key: 'a' }), /shards 1001/);
  assert.throws(() => expiry.expirationWindow(1658265980, { shards: 4 }), /needs key/);
  assert.throws(() => expiry.expirationWindow(1658265980, { shards: 4, key: { BOOL: true } }), /partition key/);
  assert.equal(expiry.expirationWindow(1658265980), '2022-07-19T21:26:00.000Z_2022-07-19T21:27:00.000Z');
});
