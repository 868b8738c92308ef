// `npm pack` of the construct refuses a package without the arm64 Lambda zip, naming `make dist`
// (infra/scripts/prepack.js, the prepack script of package.json), and packs one with it. Run on a
// copy of package.json and the script in a temporary directory, so that a zip `make dist` left in
// assets/ changes nothing.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

// The package's directory (scripts/peer-test.sh runs the tests in a copy, and names the original).
const infra = process.env.TTL_SWEEPER_CDK_DIR ?? path.join(__dirname, '..');

/** `npm pack --dry-run` in a copy of the package's manifest and prepack script, with `env`. */
function packDryRun(withZip: boolean, env: Record<string, string> = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ttl-sweeper-pack-'));
  try {
    fs.copyFileSync(path.join(infra, 'package.json'), path.join(dir, 'package.json'));
    fs.mkdirSync(path.join(dir, 'scripts'));
    fs.copyFileSync(path.join(infra, 'scripts', 'prepack.js'), path.join(dir, 'scripts', 'prepack.js'));
    if (withZip) {
      fs.mkdirSync(path.join(dir, 'assets'));
      // A zip's local file header signature is enough for the check.
      fs.writeFileSync(path.join(dir, 'assets', 'ttl-sweeper-lambda-arm64.zip'), Buffer.from('PK\u0003\u0004', 'latin1'));
    }
    const started = Date.now();
    const { TTL_SWEEPER_PACK_WITHOUT_LAMBDA: _, ...inherited } = process.env;
    const out = spawnSync('npm', ['pack', '--dry-run', '--loglevel=error'], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...inherited, npm_config_update_notifier: 'false', ...env },
    });
    return { status: out.status, stderr: out.stderr, seconds: (Date.now() - started) / 1000 };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('npm pack without the Lambda zip refuses and names make dist', () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(infra, 'package.json'), 'utf8'));
  assert.equal(manifest.scripts.prepack, 'node scripts/prepack.js');
  assert.ok(manifest.files.includes('assets/ttl-sweeper-lambda-arm64.zip'), 'the package carries the zip');

  const refused = packDryRun(false);
  assert.notEqual(refused.status, 0, 'npm pack went on without the zip');
  assert.match(refused.stderr, /assets\/ttl-sweeper-lambda-arm64\.zip is missing/);
  assert.match(refused.stderr, /Run `make dist`/);

  const packed = packDryRun(true);
  assert.equal(packed.status, 0, packed.stderr);
  // Knowingly without it: the package test's and make infra-python's packages, whose apps pass `code`.
  const without = packDryRun(false, { TTL_SWEEPER_PACK_WITHOUT_LAMBDA: '1' });
  assert.equal(without.status, 0, without.stderr);
  assert.match(without.stderr, /apps must pass `code`/);
  console.log(`npm pack --dry-run: ${refused.seconds.toFixed(1)} s refused, ${packed.seconds.toFixed(1)} s packed`);
});
