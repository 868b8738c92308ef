export * from './checkpoint';
export * from './schedule';
export * from './ttl-sweeper';
