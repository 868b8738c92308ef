export * from './checkpoint';
export * from './schedule';
export * from './props';
export * from './ttl-sweeper';
export * from './expiry-events';
