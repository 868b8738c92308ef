#!/usr/bin/env bash
# `make image`: the daemon's container image (docs/container.md), built without a container
# engine. Per architecture (amd64, arm64): `ttl-sweeper` linked statically (glibc, +crt-static),
# Debian's CA bundle and a passwd entry for the non-root user 65532, on an empty base (`scratch`),
# assembled with umoci as an OCI image layout, written as an OCI archive:
#
#   dist/ttl-sweeper-<version>-image-amd64.tar
#   dist/ttl-sweeper-<version>-image-arm64.tar
#   dist/SHA256SUMS-image                          their sha256sum
#
# then checked by scripts/image-test.sh. IMAGE_ARCHS="amd64" builds one.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
archs=${IMAGE_ARCHS:-amd64 arm64}
work=target/image
mkdir -p dist "$work"

step() { echo; echo "== image: $* ($(date +%T))"; }

# umoci assembles the image; skopeo (image-test.sh) reads it back as registries' tools do; the
# arm64 binary needs a cross linker and glibc's static libraries for arm64, and qemu to run it.
need=()
command -v umoci >/dev/null || need+=(umoci)
command -v skopeo >/dev/null || need+=(skopeo)
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
if [[ " $archs " == *" arm64 "* ]]; then
  command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
  [ -f /usr/aarch64-linux-gnu/lib/libc.a ] || need+=(libc6-dev-arm64-cross)
  command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
fi
if [ ${#need[@]} -gt 0 ]; then
  step "installing ${need[*]} (Debian packages)"
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

triple() { case $1 in amd64) echo x86_64-unknown-linux-gnu ;; arm64) echo aarch64-unknown-linux-gnu ;; esac; }

build() { # arch: the static binary, in a target directory of its own (other flags than target/)
  local arch=$1 target
  target=$(triple "$arch")
  rustup target list --installed | grep -qx "$target" || rustup target add "$target"
  step "static release build, $arch ($target)"
  RUSTFLAGS="-C target-feature=+crt-static" \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar \
    nice -n 10 cargo build --release --locked --bin ttl-sweeper --target "$target" --target-dir target/static
}

assemble() { # arch: the OCI archive
  local arch=$1 layout="$work/oci-$1" bundle="$work/bundle-$1" binary
  binary="target/static/$(triple "$arch")/release/ttl-sweeper"
  step "assembling the $arch image (umoci)"
  rm -rf "$layout" "$bundle"
  umoci init --layout "$layout"
  umoci new --image "$layout:$version"
  umoci unpack --rootless --image "$layout:$version" "$bundle"
  local rootfs="$bundle/rootfs"
  install -m 0755 "$binary" "$rootfs/ttl-sweeper"
  install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  printf 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' >"$rootfs/etc/passwd"
  printf 'nonroot:x:65532:\n' >"$rootfs/etc/group"
  chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
  umoci repack --image "$layout:$version" "$bundle"
  umoci config --image "$layout:$version" \
    --os linux --architecture "$arch" \
    --config.user 65532:65532 \
    --config.workingdir / \
    --config.entrypoint /ttl-sweeper \
    --config.cmd run --config.cmd --metrics-addr --config.cmd 0.0.0.0:9464 \
    --config.exposedports 9464/tcp \
    --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --config.label "org.opencontainers.image.title=ttl-sweeper" \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.licenses=Apache-2.0" \
    --config.label "org.opencontainers.image.description=Precise item expiry for Amazon DynamoDB: ttl-sweeper run"
  umoci gc --layout "$layout"
  rm -rf "$bundle"
  local archive="dist/ttl-sweeper-$version-image-$arch.tar"
  (cd "$layout" && tar --sort=name --owner=0 --group=0 --numeric-owner -cf "$root/$archive" .)
  echo "image: $archive ($(du -h "$archive" | cut -f1))"
}

for arch in $archs; do
  build "$arch"
  assemble "$arch"
done
(cd dist && sha256sum ttl-sweeper-"$version"-image-*.tar >SHA256SUMS-image)
IMAGE_ARCHS="$archs" scripts/image-test.sh
