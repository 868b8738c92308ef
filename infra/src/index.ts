export * from './checkpoint';
export * from './expiry-events';
export * from './schedule';
export * from './ttl-sweeper';
