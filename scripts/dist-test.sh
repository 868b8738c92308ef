#!/usr/bin/env bash
# The construct as a stranger installs it: the tarball and the wheel from dist/, each in a fresh
# app in a temporary directory outside the checkout, `new TtlSweeper(stack, 'S', { table })` with
# no `code`, synthesized offline; the function's asset must hold an AArch64 `bootstrap`.
#   TypeScript/JavaScript: npm install of dist/ttl-sweeper-cdk-<v>.tgz beside the pinned aws-cdk-lib
#     and constructs of infra/test/consumer, then app.synth().
#   Python: a venv, pip install of dist/ttl_sweeper_cdk-<v>-py3-none-any.whl with pinned
#     aws-cdk-lib and constructs, then app.synth(). PY_AWS_CDK_LIB picks aws-cdk-lib's version
#     (default: the npm pin; PyPI may have it later than npm). pip installs the wheel with its
#     dependencies, so an aws-cdk-lib outside the wheel's requirement is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export CDK_DISABLE_CLI_TELEMETRY=true CDK_DISABLE_VERSION_CHECK=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
SECONDS=0
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
tarball="$root/dist/ttl-sweeper-cdk-$version.tgz"
wheel="$root/dist/ttl_sweeper_cdk-$version-py3-none-any.whl"
for f in "$tarball" "$wheel"; do
  [ -f "$f" ] || { echo "dist-test: $f is missing; run make dist" >&2; exit 1; }
done
cdk_lib="$(node -p "require('$root/infra/test/consumer/package.json').dependencies['aws-cdk-lib']")"
constructs="$(node -p "require('$root/infra/test/consumer/package.json').dependencies.constructs")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
case "$work" in "$root"/*) echo "dist-test: $work is inside the checkout" >&2; exit 1 ;; esac

# ---- npm
mkdir "$work/node-app"
cp infra/test/consumer/package.json infra/test/consumer/package-lock.json infra/test/consumer/.npmrc "$work/node-app/"
cd "$work/node-app"
npm ci --no-audit --no-fund --loglevel=error --prefer-offline
npm install --no-save --no-audit --no-fund --loglevel=error --prefer-offline "$tarball"
cat >app.js <<'JS'
const cdk = require('aws-cdk-lib');
const dynamodb = require('aws-cdk-lib/aws-dynamodb');
const { TtlSweeper } = require('ttl-sweeper-cdk');

const app = new cdk.App({ outdir: 'cdk.out', analyticsReporting: false });
const stack = new cdk.Stack(app, 'Stranger');
const table = dynamodb.Table.fromTableName(stack, 'Table', 'sessions');
new TtlSweeper(stack, 'S', { table });
app.synth();
JS
node app.js
python3 "$root/scripts/check-bootstrap-asset.py" cdk.out Stranger
echo "dist-test: npm package synthesized with its bundled Lambda (${SECONDS} s)"

# ---- Python
mkdir "$work/python-app"
cd "$work/python-app"
python3 -m venv .venv
py_cdk_lib="${PY_AWS_CDK_LIB:-$cdk_lib}"
pip=(.venv/bin/pip install --quiet --disable-pip-version-check)
# One install, the wheel with its dependencies: pip refuses an aws-cdk-lib outside the wheel's
# requirement (infra/README.md, "Python requirements").
echo "dist-test: the wheel with aws-cdk-lib $py_cdk_lib (npm: $cdk_lib); it requires" \
  "$(unzip -p "$wheel" '*.dist-info/METADATA' | sed -n 's/^Requires-Dist: aws-cdk-lib //p')"
"${pip[@]}" "$wheel" "aws-cdk-lib==$py_cdk_lib" "constructs==$constructs"
cat >app.py <<'PY'
import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from ttl_sweeper_cdk import TtlSweeper

app = cdk.App(outdir="cdk.out", analytics_reporting=False)
stack = cdk.Stack(app, "Stranger")
table = dynamodb.Table.from_table_name(stack, "Table", "sessions")
TtlSweeper(stack, "S", table=table)
app.synth()
PY
.venv/bin/python app.py
python3 "$root/scripts/check-bootstrap-asset.py" cdk.out Stranger
echo "dist-test: Python wheel synthesized with its bundled Lambda (${SECONDS} s)"
