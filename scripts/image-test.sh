#!/usr/bin/env bash
# Checks the images `make image` wrote (dist/ttl-sweeper-<version>-image-<arch>.tar), without a
# container engine:
#   - skopeo reads each archive as a registry's tools do; its config runs /ttl-sweeper as the
#     non-root 65532, `run --metrics-addr 0.0.0.0:9464` by default, port 9464 exposed, the CA
#     bundle named by SSL_CERT_FILE;
#   - umoci unpacks it: the root file system holds the static binary, the CA bundle, passwd and
#     group, and nothing else;
#   - amd64: the binary it carries runs from that root file system alone (chroot, as 65532)
#     against DynamoDB Local, reached by a host name (the static binary's name lookup): a
#     `run --local` deletes an expired item, and `health` answers 0 for a `run --metrics-addr`;
#   - arm64: the binary it carries runs under qemu (`--version`, `window`).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
archs=${IMAGE_ARCHS:-amd64 arm64}
python=${PYTHON:-$root/.venv/bin/python}
work=$(mktemp -d "${TMPDIR:-/tmp}/image-test.XXXXXX")
ddb_state="$work/dynamodb-local"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  [ -f "$ddb_state/pid" ] && scripts/dynamodb-local.sh stop "$ddb_state" || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "image-test: $*" >&2; exit 1; }
# chroot and unpacking with the layers' owners need root.
[ "$(id -u)" = 0 ] || fail "runs as root (chroot, umoci unpack): sudo make image-test"
chroot=$(command -v chroot) || fail "chroot (coreutils) is missing"

check_config() { # arch archive
  skopeo inspect --config "oci-archive:$2" >"$work/config-$1.json"
  "$python" - "$1" "$work/config-$1.json" <<'PY'
import json, sys
arch, path = sys.argv[1], sys.argv[2]
image = json.load(open(path))
config = image["config"]
want = {
    "architecture": (image.get("architecture"), arch),
    "os": (image.get("os"), "linux"),
    "User": (config.get("User"), "65532:65532"),
    "Entrypoint": (config.get("Entrypoint"), ["/ttl-sweeper"]),
    "Cmd": (config.get("Cmd"), ["run", "--metrics-addr", "0.0.0.0:9464"]),
    "ExposedPorts": (sorted(config.get("ExposedPorts", {})), ["9464/tcp"]),
    "SSL_CERT_FILE": ([e for e in config.get("Env", []) if e.startswith("SSL_CERT_FILE=")],
                      ["SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"]),
}
wrong = {k: v for k, v in want.items() if v[0] != v[1]}
if wrong:
    sys.exit(f"image-test: {arch}: config: {wrong} (found, wanted)")
print(f"image-test: {arch}: config: user 65532, entrypoint /ttl-sweeper, cmd run --metrics-addr 0.0.0.0:9464")
PY
}

unpack() { # arch archive: $work/rootfs-<arch>
  local layout="$work/oci-$1" bundle="$work/bundle-$1"
  mkdir -p "$layout"
  tar -C "$layout" -xf "$2"
  umoci unpack --image "$layout:$version" "$bundle" >/dev/null
  mv "$bundle/rootfs" "$work/rootfs-$1"
  local files
  files=$(cd "$work/rootfs-$1" && find . -type f | sort | tr '\n' ' ')
  [ "$files" = "./etc/group ./etc/passwd ./etc/ssl/certs/ca-certificates.crt ./ttl-sweeper " ] ||
    fail "$1: unexpected files in the image: $files"
  file "$work/rootfs-$1/ttl-sweeper" | grep -q "static" || fail "$1: the binary is not static"
  echo "image-test: $1: files: $files($(du -h "$work/rootfs-$1/ttl-sweeper" | cut -f1) binary, static)"
}

# A command run in the amd64 root file system as 65532, with DynamoDB Local's environment (an
# array, so that `"${in_image[@]}" ... &` records the PID of the process itself).
image_command() {
  in_image=(env -i AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local
    AWS_EC2_METADATA_DISABLED=true AWS_ENDPOINT_URL="http://dynamodb:${port:-8000}"
    "$chroot" --userspec=65532:65532 "$work/rootfs-amd64" /ttl-sweeper)
}

run_amd64() {
  image_command
  "${in_image[@]}" --version | grep -qx "ttl-sweeper $version" || fail "amd64: --version"
  scripts/dynamodb-local.sh start "$ddb_state"
  port=$(cat "$ddb_state/port")
  # As a container runtime does: the server's name in the image's /etc/hosts.
  echo "127.0.0.1 dynamodb" >"$work/rootfs-amd64/etc/hosts"
  image_command
  "$python" - "$port" <<'PY'
import sys, time, boto3
c = boto3.client("dynamodb", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", region_name="us-east-1",
                 aws_access_key_id="local", aws_secret_access_key="local")
def attr(n, t): return {"AttributeName": n, "AttributeType": t}
c.create_table(TableName="image-local", AttributeDefinitions=[attr("id", "S")],
               KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
c.create_table(TableName="image-gsi", AttributeDefinitions=[attr("id", "S"), attr("expirationWindow", "S"), attr("ttl", "N")],
               KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST",
               GlobalSecondaryIndexes=[{"IndexName": "expirationWindowIndex", "Projection": {"ProjectionType": "KEYS_ONLY"},
                   "KeySchema": [{"AttributeName": "expirationWindow", "KeyType": "HASH"}, {"AttributeName": "ttl", "KeyType": "RANGE"}]}])
c.put_item(TableName="image-local", Item={"id": {"S": "expired"}, "ttl": {"N": str(int(time.time()) - 1)}})
PY
  "${in_image[@]}" run --local --every 200ms --table-name image-local >"$work/local.out" 2>"$work/local.err" &
  pids+=($!)
  local gone=""
  for _ in $(seq 1 50); do
    if "$python" - "$port" <<'PY'
import sys, boto3
c = boto3.client("dynamodb", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", region_name="us-east-1",
                 aws_access_key_id="local", aws_secret_access_key="local")
sys.exit(0 if "Item" not in c.get_item(TableName="image-local", Key={"id": {"S": "expired"}}) else 1)
PY
    then gone=1; break; fi
    sleep 0.2
  done
  [ -n "$gone" ] || { cat "$work/local.err" >&2; fail "amd64: run --local did not delete the expired item"; }
  echo "image-test: amd64: run --local from the image (as 65532, DynamoDB Local by host name) deleted the expired item"

  local metrics
  metrics=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "${in_image[@]}" run --every 200ms --metrics-addr "127.0.0.1:$metrics" --table-name image-gsi \
    >"$work/run.out" 2>"$work/run.err" &
  pids+=($!)
  local healthy=""
  for _ in $(seq 1 50); do
    if "${in_image[@]}" health --addr "127.0.0.1:$metrics" >"$work/health.out" 2>&1; then healthy=1; break; fi
    sleep 0.2
  done
  [ -n "$healthy" ] || { cat "$work/health.out" "$work/run.err" >&2; fail "amd64: health never answered 0"; }
  echo "image-test: amd64: ttl-sweeper health from the image: $(cat "$work/health.out")"
}

run_arm64() {
  local binary="$work/rootfs-arm64/ttl-sweeper"
  qemu-aarch64-static "$binary" --version | grep -qx "ttl-sweeper $version" || fail "arm64: --version"
  # The 60-second window of 2023-11-14T22:13:20Z, as docs/design.md computes it.
  local window
  window=$(qemu-aarch64-static "$binary" window 1700000000)
  [ "$window" = "2023-11-14T22:13:00.000Z_2023-11-14T22:14:00.000Z" ] || fail "arm64: window: $window"
  echo "image-test: arm64: the binary it carries runs under qemu (--version, window)"
}

for arch in $archs; do
  archive="dist/ttl-sweeper-$version-image-$arch.tar"
  [ -f "$archive" ] || fail "$archive is missing: make image"
  check_config "$arch" "$archive"
  unpack "$arch" "$archive"
  case $arch in amd64) run_amd64 ;; arm64) run_arm64 ;; esac
done
echo "image-test: passed"
