'use strict';
// Writer and reader helpers for DynamoDB tables swept by ttl-sweeper. The same rules as the Rust
// crate's `expiry` and `streams` modules, checked against the repository's spec/ vectors.

const { createHash } = require('node:crypto');

/** Default window width, in seconds. */
const DEFAULT_WINDOW_SECONDS = 60;
/** Largest window width (one day). */
const MAX_WINDOW_SECONDS = 86_400;
/** Largest number of shards per window. */
const MAX_SHARDS = 1000;
/** The latest ttl accepted as epoch seconds: 9999-12-31T23:59:59Z; later is milliseconds by mistake. */
const MAX_TTL_SECONDS = 253_402_300_799;
/** A ttl more than five years (of 365 days) before now never expires, by native TTL's rule. */
const MAX_EXPIRED_AGE_SECONDS = 5 * 365 * 86_400;

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** Epoch seconds from a ttl given as a number or as the text of a DynamoDB Number. */
function checkTtl(ttl) {
  let value;
  if (typeof ttl === 'number') {
    value = ttl;
  } else if (typeof ttl === 'string' && DECIMAL.test(ttl.trim())) {
    value = Number(ttl.trim());
  } else {
    throw new TypeError(`ttl ${JSON.stringify(ttl)} is not a number of epoch seconds`);
  }
  if (!Number.isFinite(value)) throw new TypeError(`ttl ${JSON.stringify(ttl)} is not a number of epoch seconds`);
  if (value < 0) throw new RangeError(`ttl ${value} is negative; expected epoch seconds (e.g. 1658265600)`);
  if (value > MAX_TTL_SECONDS) {
    throw new RangeError(
      `ttl ${value} is past the year 9999; it looks like epoch milliseconds — DynamoDB TTL uses epoch seconds (divide by 1000)`,
    );
  }
  return value;
}

function wholeNumber(value, name, max) {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new RangeError(`${name} ${value} is not a whole number from 1 to ${max}`);
  }
  return value;
}

function pad(n, width) {
  return String(n).padStart(width, '0');
}

/** ISO-8601 UTC with milliseconds, as the sweeper writes it (years past 9999 get a sign). */
function iso(secs) {
  const d = new Date(secs * 1000);
  const year = d.getUTCFullYear();
  const y = year > 9999 ? `+${year}` : pad(year, 4);
  return (
    `${y}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)}T` +
    `${pad(d.getUTCHours(), 2)}:${pad(d.getUTCMinutes(), 2)}:${pad(d.getUTCSeconds(), 2)}.000Z`
  );
}

/**
 * The bytes a partition key value is sharded by: UTF-8 of a string, the raw bytes of a
 * Uint8Array, or a DynamoDB attribute value `{ S }`, `{ N }` (its text) or `{ B }` (bytes, or base64
 * text as in DynamoDB JSON).
 */
function keyBytes(key) {
  if (typeof key === 'string') return Buffer.from(key, 'utf8');
  if (key instanceof Uint8Array) return Buffer.from(key);
  if (key && typeof key === 'object') {
    if (typeof key.S === 'string') return Buffer.from(key.S, 'utf8');
    if (typeof key.N === 'string') return Buffer.from(key.N, 'utf8');
    if (key.B instanceof Uint8Array) return Buffer.from(key.B);
    if (typeof key.B === 'string') return Buffer.from(key.B, 'base64');
  }
  throw new TypeError(
    'key must be a string, a Uint8Array, or a DynamoDB key value {S}, {N} or {B}: the item\'s partition key value',
  );
}

/** The shard of a partition key: the first four bytes of its SHA-256, big-endian, modulo `shards`. */
function shardOf(key, shards) {
  wholeNumber(shards, 'shards', MAX_SHARDS);
  if (shards === 1) return 0;
  return createHash('sha256').update(keyBytes(key)).digest().readUInt32BE(0) % shards;
}

/**
 * The window attribute to store beside the ttl on every put and ttl update: `<start>_<end>`, or
 * `<start>_<end>#<shard>` when the table is sharded (`shards` > 1, which needs `key`).
 */
function expirationWindow(ttl, options = {}) {
  const { width = DEFAULT_WINDOW_SECONDS, shards = 1, key } = options;
  const t = checkTtl(ttl);
  wholeNumber(width, 'width', MAX_WINDOW_SECONDS);
  wholeNumber(shards, 'shards', MAX_SHARDS);
  const end = Math.ceil(t / width) * width;
  const window = `${iso(end - width)}_${iso(end)}`;
  if (shards === 1) return window;
  if (key === undefined) throw new TypeError(`shards ${shards} needs key: the shard comes from the item's partition key`);
  return `${window}#${shardOf(key, shards)}`;
}

/** The ttl of an item's attribute: a DynamoDB `{ N }` value or a plain number (DocumentClient). */
function ttlOf(value) {
  if (typeof value === 'number') return value;
  if (value && typeof value === 'object' && typeof value.N === 'string') {
    const text = value.N.trim();
    return DECIMAL.test(text) ? Number(text) : NaN;
  }
  return NaN;
}

/**
 * True when `item`'s ttl is a usable Number of epoch seconds before `now` and not more than five
 * years before it: the rule native TTL and the sweeper delete by. Items without a ttl, or with
 * one neither can use, never expire. `item` is a marshalled item (`{ ttl: { N: '...' } }`) or a
 * DocumentClient one (`{ ttl: 1658265980 }`); `now` is in epoch seconds.
 */
function isExpired(item, now = Date.now() / 1000, ttlAttribute = 'ttl') {
  if (!item || typeof item !== 'object') return false;
  const ttl = ttlOf(item[ttlAttribute]);
  if (!Number.isFinite(ttl) || ttl < 0 || ttl > MAX_TTL_SECONDS) return false;
  return ttl < now && ttl >= now - MAX_EXPIRED_AGE_SECONDS;
}

/**
 * The filter that hides expired-but-present items from a Query or Scan, as parameters to spread
 * into its input: `(#ttl >= :now OR attribute_not_exists(#ttl))`. `:now` is `{ N }` for the
 * low-level client, a plain number with `{ documentClient: true }`. DynamoDB filters after
 * reading: hidden items still use read capacity and count towards the 1 MB page.
 */
function liveItemsFilter(now = Math.floor(Date.now() / 1000), ttlAttribute = 'ttl', options = {}) {
  if (!Number.isFinite(now)) throw new TypeError(`now ${now} is not a number of epoch seconds`);
  return {
    FilterExpression: '(#ttl >= :now OR attribute_not_exists(#ttl))',
    ExpressionAttributeNames: { '#ttl': ttlAttribute },
    ExpressionAttributeValues: { ':now': options.documentClient ? now : { N: String(now) } },
  };
}

/**
 * True when a DynamoDB Streams record (as Lambda receives it) is the REMOVE of an item whose ttl
 * had passed: its old image's ttl is before the record's ApproximateCreationDateTime (the end of
 * the second it names) and not more than five years before it. True for the sweeper's deletes and
 * native TTL's, in every Region.
 */
function isExpiryRemoval(record, ttlAttribute = 'ttl') {
  if (!record || record.eventName !== 'REMOVE') return false;
  const created = record.dynamodb?.ApproximateCreationDateTime;
  const text = record.dynamodb?.OldImage?.[ttlAttribute]?.N;
  if (typeof created !== 'number' || typeof text !== 'string' || !DECIMAL.test(text.trim())) return false;
  const ttl = Number(text.trim());
  if (!Number.isFinite(ttl) || ttl < 0 || ttl > MAX_TTL_SECONDS) return false;
  const second = Math.floor(created); // rounded down by DynamoDB Streams
  if (!(second > 0)) return false;
  const endOfSecond = second + 1;
  return ttl >= endOfSecond - MAX_EXPIRED_AGE_SECONDS && ttl < endOfSecond;
}

module.exports = {
  DEFAULT_WINDOW_SECONDS,
  MAX_WINDOW_SECONDS,
  MAX_SHARDS,
  MAX_TTL_SECONDS,
  MAX_EXPIRED_AGE_SECONDS,
  expirationWindow,
  shardOf,
  isExpired,
  liveItemsFilter,
  isExpiryRemoval,
};
