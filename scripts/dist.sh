#!/usr/bin/env bash
# make dist: every release file in dist/, at the one version of Cargo.toml, with SHA256SUMS.
#
#   ttl-sweeper-lambda-<v>-{arm64,x86_64}.zip       the Lambda (bootstrap, provided.al2023)
#   ttl-sweeper-<v>-{x86_64,aarch64}-unknown-linux-gnu.tar.gz   the CLI
#   ttl-sweeper-cdk-<v>.tgz, ttl_sweeper_cdk-<v>-py3-none-any.whl   the construct, with the arm64 zip
#   ttl-sweeper-<v>.crate                             the crate (cargo package, verified)
#   ttl-sweeper-expiry-<v>.tgz, ttl_sweeper_expiry-<v>-py3-none-any.whl   the writer/reader helpers
#
# The two release cross-builds (cargo-lambda through zig) are most of the time; they run niced.
# Needs: .venv with cargo-lambda and ziglang (make zig), infra/node_modules (npm ci), rustup.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true CDK_DISABLE_VERSION_CHECK=true
SECONDS=0
step() { printf '\n== %s (%d s)\n' "$1" "$SECONDS"; }

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
[ -n "$version" ] || { echo "dist: no version in Cargo.toml" >&2; exit 1; }
out="$root/dist"
rm -rf "$out"
mkdir -p "$out"
echo "dist: ttl-sweeper $version into $out"

step "versions agree (tests/release.rs)"
cargo test --quiet --test suite release::

step "helper packages: tests"
(cd packages/expiry-js && node --test test/ >/dev/null)
(cd packages/expiry-py && python3 -m unittest discover -s tests -t . 2>&1 | tail -n 1)

lambda_zip() { # <target dir> <arch>: zips <target dir>/lambda/ttl-sweeper-lambda/bootstrap
  local zip="$out/ttl-sweeper-lambda-$version-$2.zip"
  (cd "$1/lambda/ttl-sweeper-lambda" && python3 -m zipfile -c "$zip" bootstrap)
}
cli_tarball() { # <target dir> <rust target>: cargo-lambda leaves the CLI in <target dir>/lambda/ttl-sweeper/bootstrap
  local name="ttl-sweeper-$version-$2" stage
  stage="$(mktemp -d)"
  mkdir "$stage/$name"
  cp "$1/lambda/ttl-sweeper/bootstrap" "$stage/$name/ttl-sweeper"
  cp README.md LICENSE CHANGELOG.md "$stage/$name/"
  tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$out/$name.tar.gz" "$name"
  rm -rf "$stage"
}
elf_machine() { # <file> <expected e_machine>: 183 AArch64, 62 x86-64
  python3 - "$1" "$2" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read(20)
machine = struct.unpack_from("<H", data, 18)[0] if data[:4] == b"\x7fELF" else None
if machine != int(sys.argv[2]):
    sys.exit(f"dist: {sys.argv[1]}: ELF machine {machine}, expected {sys.argv[2]}")
PY
}
cargo_lambda() {
  PATH="$root/.venv/bin:$PATH" nice -n 10 "$root/.venv/bin/cargo-lambda" lambda build --release "$@" \
    --bin ttl-sweeper-lambda --bin ttl-sweeper
}

rustup target list --installed | grep -q aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
# arm64 in target/, as `make package` builds it (target/lambda/ttl-sweeper-lambda is what the
# construct uses in a checkout); x86_64 last, in a target directory of its own, so it leaves that
# alone (and a build already under way there can finish while the packages are made).
step "release build, arm64 (cargo lambda build --arm64)"
cargo_lambda --arm64
elf_machine target/lambda/ttl-sweeper-lambda/bootstrap 183
elf_machine target/lambda/ttl-sweeper/bootstrap 183
lambda_zip target arm64
cli_tarball target aarch64-unknown-linux-gnu
(cd target/lambda/ttl-sweeper-lambda && rm -f ../ttl-sweeper-lambda.zip && python3 -m zipfile -c ../ttl-sweeper-lambda.zip bootstrap)

step "the construct: npm tarball and Python wheel, carrying the arm64 zip"
mkdir -p infra/assets
cp "$out/ttl-sweeper-lambda-$version-arm64.zip" infra/assets/ttl-sweeper-lambda-arm64.zip
trap 'rm -rf "$root/infra/assets"' EXIT
(
  cd infra
  npx jsii --fail-on-warnings
  npm pack --silent --pack-destination "$out" >/dev/null
  rm -rf dist/python
  npx jsii-pacmak --targets python
)
cp "infra/dist/python/ttl_sweeper_cdk-$version-py3-none-any.whl" "$out/"
rm -rf infra/assets
trap - EXIT

step "the crate (cargo package)"
cargo package --locked
cp "target/package/ttl-sweeper-$version.crate" "$out/"

step "helper packages: npm tarball and wheel"
(cd packages/expiry-js && npm pack --silent --pack-destination "$out" >/dev/null)
# pip builds it in an isolated environment with the build-system's setuptools (from PyPI).
python3 -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$out" packages/expiry-py
rm -rf packages/expiry-py/build packages/expiry-py/*.egg-info

step "release build, x86_64 (cargo lambda build --x86-64, in target/dist-x86_64)"
CARGO_TARGET_DIR="$root/target/dist-x86_64" cargo_lambda --x86-64
elf_machine target/dist-x86_64/lambda/ttl-sweeper-lambda/bootstrap 62
elf_machine target/dist-x86_64/lambda/ttl-sweeper/bootstrap 62
lambda_zip target/dist-x86_64 x86_64
cli_tarball target/dist-x86_64 x86_64-unknown-linux-gnu

step "checksums"
(cd "$out" && sha256sum -- * >SHA256SUMS && sha256sum -c --quiet SHA256SUMS)

expected=(
  "ttl-sweeper-lambda-$version-arm64.zip" "ttl-sweeper-lambda-$version-x86_64.zip"
  "ttl-sweeper-$version-x86_64-unknown-linux-gnu.tar.gz" "ttl-sweeper-$version-aarch64-unknown-linux-gnu.tar.gz"
  "ttl-sweeper-cdk-$version.tgz" "ttl_sweeper_cdk-$version-py3-none-any.whl" "ttl-sweeper-$version.crate"
  "ttl-sweeper-expiry-$version.tgz" "ttl_sweeper_expiry-$version-py3-none-any.whl" SHA256SUMS
)
for f in "${expected[@]}"; do
  [ -s "$out/$f" ] || { echo "dist: $f is missing" >&2; exit 1; }
done
[ "$(ls "$out" | wc -l)" -eq "${#expected[@]}" ] || { echo "dist: unexpected files in dist/:" >&2; ls "$out" >&2; exit 1; }
ls -l "$out"
echo "dist: built in ${SECONDS} s"
