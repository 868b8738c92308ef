/** Default window width, in seconds. */
export declare const DEFAULT_WINDOW_SECONDS: number;
/** Largest window width (one day). */
export declare const MAX_WINDOW_SECONDS: number;
/** Largest number of shards per window. */
export declare const MAX_SHARDS: number;
/** The latest ttl accepted as epoch seconds: 9999-12-31T23:59:59Z. */
export declare const MAX_TTL_SECONDS: number;
/** A ttl more than five years (of 365 days) before now never expires. */
export declare const MAX_EXPIRED_AGE_SECONDS: number;

/** A partition key value: a string, bytes, or a DynamoDB key value. */
export type PartitionKey = string | Uint8Array | { S: string } | { N: string } | { B: Uint8Array | string };

export interface WindowOptions {
  /** Window width in seconds, 1 to 86400 (the sweeper's WINDOW_SECONDS; default 60). */
  readonly width?: number;
  /** Shards per window, 1 to 1000 (the sweeper's WINDOW_SHARDS; default 1). */
  readonly shards?: number;
  /** The item's partition key value; needed when shards > 1. */
  readonly key?: PartitionKey;
}

/** The window attribute to store beside the ttl (epoch seconds, a number or Number text). */
export declare function expirationWindow(ttl: number | string, options?: WindowOptions): string;

/** The shard of a partition key value for `shards` shards. */
export declare function shardOf(key: PartitionKey, shards: number): number;

/** True when the item's ttl is before `now` (epoch seconds) and not more than five years before it. */
export declare function isExpired(item: Record<string, unknown>, now?: number, ttlAttribute?: string): boolean;

export interface LiveItemsFilterOptions {
  /** `:now` as a plain number, for the DocumentClient (default: `{ N }` for the low-level client). */
  readonly documentClient?: boolean;
}

export interface LiveItemsFilter {
  FilterExpression: string;
  ExpressionAttributeNames: { [name: string]: string };
  ExpressionAttributeValues: { [value: string]: { N: string } | number };
}

/** The filter that hides expired-but-present items from a Query or Scan. */
export declare function liveItemsFilter(now?: number, ttlAttribute?: string, options?: LiveItemsFilterOptions): LiveItemsFilter;

/** A DynamoDB Streams record, as Lambda receives it (compatible with `DynamoDBRecord`). */
export interface StreamRecordLike {
  eventName?: string;
  dynamodb?: {
    ApproximateCreationDateTime?: number;
    OldImage?: { [attribute: string]: { N?: string } };
  };
}

/** True when a Streams REMOVE record deleted an item whose ttl had passed. */
export declare function isExpiryRemoval(record: StreamRecordLike, ttlAttribute?: string): boolean;
