#!/usr/bin/env bash
# Builds the release `ttl-sweeper` of an older commit, for section 6 of docs/BENCHMARKS.md to
# measure beside this build (`BENCH_BASELINE_SWEEPER`), and prints its path.
#
#   scripts/baseline.sh [COMMIT]   # 75ffdf9 by default: batch mode before its confirming read
#
# The commit is checked out into target/baseline/src-COMMIT (a detached worktree) and built with
# its own Cargo.lock into target/baseline/target; a binary already built is reused. Prints
# nothing, and says why on stderr, where the checkout has no such commit (a shallow clone).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
COMMIT="${1:-75ffdf9}"
DIR="target/baseline"
SRC="$DIR/src-$COMMIT"
BIN="$DIR/ttl-sweeper-$COMMIT"

if [ -x "$BIN" ]; then
  echo "$ROOT/$BIN"
  exit 0
fi
if ! git rev-parse --verify --quiet "$COMMIT^{commit}" >/dev/null; then
  echo "baseline: no commit $COMMIT in this checkout (a shallow clone?); section 6 is measured without a baseline" >&2
  exit 0
fi
mkdir -p "$DIR"
if [ ! -d "$SRC" ]; then
  git worktree add --detach --force "$SRC" "$COMMIT" >&2
fi
echo "baseline: building ttl-sweeper at $COMMIT (its own lock file) into $DIR/target" >&2
(cd "$SRC" && CARGO_TARGET_DIR="$ROOT/$DIR/target" cargo build --release --locked --bin ttl-sweeper >&2)
cp "$DIR/target/release/ttl-sweeper" "$BIN"
git worktree remove --force "$SRC" >&2 || true
echo "$ROOT/$BIN"
