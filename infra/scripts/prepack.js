#!/usr/bin/env node
// npm's prepack (npm pack, npm publish, and jsii-pacmak, which packs before it builds the Python
// package): the package must carry the arm64 Lambda zip that an app leaving out `code` deploys.
// `make dist` copies it to assets/ before it packs; a package without it fails at synthesis in
// every such app. TTL_SWEEPER_PACK_WITHOUT_LAMBDA=1 packs without it, for packages whose apps
// pass `code` (scripts/package-test.sh, and the Python build check of `make test-infra`).
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const ASSET = path.join('assets', 'ttl-sweeper-lambda-arm64.zip');

if (process.env.TTL_SWEEPER_PACK_WITHOUT_LAMBDA === '1') {
  console.error(`ttl-sweeper-cdk: packing without ${ASSET} (TTL_SWEEPER_PACK_WITHOUT_LAMBDA=1): apps must pass \`code\``);
  process.exit(0);
}

const zip = path.join(__dirname, '..', ASSET);
let problem;
if (!fs.existsSync(zip)) {
  problem = `${ASSET} is missing`;
} else {
  const head = Buffer.alloc(4);
  const fd = fs.openSync(zip, 'r');
  const read = fs.readSync(fd, head, 0, 4, 0);
  fs.closeSync(fd);
  if (read < 4 || head.toString('latin1') !== 'PK\u0003\u0004') problem = `${ASSET} is not a zip file`;
}
if (problem) {
  console.error(
    [
      `ttl-sweeper-cdk: npm pack refused: ${problem}, so the package would carry no Lambda and`,
      'every app that leaves out `code` would fail at synthesis.',
      'Run `make dist` at the root of the repository instead: it builds the arm64 Lambda and packs the',
      'construct with it into dist/ttl-sweeper-cdk-<version>.tgz (and the Python wheel beside it).',
    ].join('\n'),
  );
  process.exit(1);
}
