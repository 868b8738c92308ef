#!/usr/bin/env bash
# Type-checks and runs the construct's tests (template assertions, synthesis, cdk-nag's
# validateScope) against the lowest aws-cdk-lib the package accepts: the version in
# peerDependencies (`^X.Y.Z` → X.Y.Z), or the one given as the first argument. It installs that
# version into a temporary copy of infra/ (the sources, tests, examples, SAM template, settings and README;
# the Rust sources, test support and docs the tests read are linked), so the checkout's
# node_modules stay as they are.
set -euo pipefail
export CDK_DISABLE_CLI_TELEMETRY=true CDK_DISABLE_VERSION_CHECK=true
SECONDS=0
cd "$(dirname "$0")/.."
infra="$PWD"
peer="$(node -p "require('./package.json').peerDependencies['aws-cdk-lib']")"
version="${1:-${peer#^}}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/infra"
cp -r src test examples sam scripts tsconfig.json tsconfig.dev.json cdk.json README.md settings.json "$work/infra/"
ln -s "$infra/../src" "$work/src"
ln -s "$infra/../tests" "$work/tests"
ln -s "$infra/../docs" "$work/docs"
ln -s "$infra/../README.md" "$work/README.md"
# The pack test packs the package itself (its package.json and prepack), not this copy's.
export TTL_SWEEPER_CDK_DIR="$infra"
# The dev dependencies of the checkout, with aws-cdk-lib at `version`.
node - "$version" "$work/infra/package.json" <<'JS'
const [version, out] = process.argv.slice(2);
const pkg = require('./package.json');
const devDependencies = { ...pkg.devDependencies, 'aws-cdk-lib': version };
for (const tool of ['jsii', 'jsii-pacmak', 'jsii-rosetta', 'aws-cdk']) delete devDependencies[tool];
require('node:fs').writeFileSync(out, JSON.stringify({ name: 'peer-test', private: true, devDependencies }, null, 2));
JS
cd "$work/infra"
npm install --no-audit --no-fund --loglevel=error --prefer-offline >/dev/null
installed="$(node -p "require('aws-cdk-lib/package.json').version")"
[ "$installed" = "$version" ] || { echo "peer-test: installed aws-cdk-lib $installed, wanted $version" >&2; exit 1; }
"$infra/node_modules/.bin/tsc" -p tsconfig.dev.json
node --import tsx --test test/all.ts >"$work/test.log" 2>&1 || { cat "$work/test.log"; exit 1; }
grep -E '^# (tests|pass|fail)' "$work/test.log" | tr '\n' ' '
echo
echo "peer-test: the construct's tests pass against aws-cdk-lib $installed (${SECONDS} s)"
