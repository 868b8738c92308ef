#!/usr/bin/env bash
# make install-test: the README's install commands, exactly as written, then its quick-start app.
#
# The commands are read from README.md between `<!-- install:begin` and `<!-- install:end -->`
# (the ```sh block there), so that the page and this test cannot drift apart. Its placeholders
# become: <checkout> this repository, <version> Cargo.toml's version, <your CDK app> a new empty
# directory outside the checkout. They run in order in one shell, from the checkout, each timed.
# Then the quick start's TypeScript snippet (README step 4, no `code`) is written to `app.ts` in
# that directory with `<the LatestStreamArn of step 1>` set to a stream ARN of `sessions`,
# type-checked with the app's own `tsc` and synthesized with its own `npx cdk synth`, as step 4
# says; each function's asset must hold an AArch64 `bootstrap`.
#
# `make dist` is one of the commands: this takes as long as it does (release cross builds), so it
# is not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export CDK_DISABLE_CLI_TELEMETRY=true CDK_DISABLE_VERSION_CHECK=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
case "$work" in "$root"/*) echo "install-test: $work is inside the checkout" >&2; exit 1 ;; esac
app="$work/app"   # made by the README's own `mkdir`

# The commands of the README's install block: the lines of its ```sh fence, comments dropped.
commands="$(python3 - README.md <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"<!-- install:begin.*?-->(.*?)<!-- install:end -->", text, re.S)
if len(blocks) != 1:
    sys.exit(f"install-test: README.md has {len(blocks)} install blocks, expected 1")
fences = re.findall(r"```sh\n(.*?)```", blocks[0], re.S)
if len(fences) != 1:
    sys.exit("install-test: the install block has no single ```sh fence")
for line in fences[0].splitlines():
    command = re.sub(r"\s+#.*$", "", line).strip()
    if command:
        print(command)
PY
)"
script=""
while IFS= read -r command; do
  expanded="${command//<checkout>/$root}"
  expanded="${expanded//<version>/$version}"
  expanded="${expanded//<your CDK app>/$app}"
  case "$expanded" in *'<'*'>'*) echo "install-test: a placeholder left in: $command" >&2; exit 1 ;; esac
  printf -v quoted '%q' "$command"
  script+="t=\$SECONDS; echo \"install-test: \$ \"$quoted; $expanded"$'\n'
  script+="echo \"install-test: took \$((SECONDS - t)) s: \"$quoted"$'\n'
done <<<"$commands"
echo "install-test: ttl-sweeper $version; the README's install commands:"
echo "$commands" | sed 's/^/  /'
SECONDS=0
bash -euo pipefail -c "$script"
echo "install-test: the README's install commands took ${SECONDS} s"

# The quick start's app: the README's snippet as written, its stream ARN filled in.
cd "$app"
test -f node_modules/ttl-sweeper-cdk/package.json || { echo "install-test: ttl-sweeper-cdk is not installed in $app" >&2; exit 1; }
python3 - "$root/README.md" app.ts <<'PY'
import re, sys
text = open(sys.argv[1]).read()
quick = text.split("\n## Quick start: your own table\n", 1)[1].split("\n## ", 1)[0]
snippets = re.findall(r"```ts\n(.*?)```", quick, re.S)
if len(snippets) != 1:
    sys.exit(f"install-test: the quick start has {len(snippets)} ```ts snippets, expected 1")
snippet = "\n".join(line[3:] if line.startswith("   ") else line for line in snippets[0].splitlines())
placeholder = "<the LatestStreamArn of step 1>"
if placeholder not in snippet or "code:" in snippet:
    sys.exit("install-test: the snippet should import the table with its stream ARN and leave out `code`")
snippet = snippet.replace(placeholder, "arn:aws:dynamodb:us-east-1:123456789012:table/sessions/stream/2026-11-27T00:00:00.000")
open(sys.argv[2], "w").write(snippet + "\n")
PY
npx tsc --noEmit --strict --skipLibCheck --target es2022 --module node16 --moduleResolution node16 app.ts
npx cdk synth --quiet
stack="$(sed -n "s/.*new cdk.Stack(app, '\([A-Za-z0-9-]*\)').*/\1/p" app.ts)"
python3 "$root/scripts/check-bootstrap-asset.py" cdk.out "$stack"
node - "cdk.out/$stack.template.json" <<'JS'
const t = JSON.parse(require('node:fs').readFileSync(process.argv[2], 'utf8'));
const fns = Object.values(t.Resources).filter((r) => r.Type === 'AWS::Lambda::Function' && r.Properties.Runtime === 'provided.al2023');
const mapping = Object.values(t.Resources).filter((r) => r.Type === 'AWS::Lambda::EventSourceMapping');
if (fns.length !== 2 || mapping.length !== 1 || !t.Outputs.ExpiryIndexTable) {
  console.error(`install-test: expected the sweeper, the stream indexer, its mapping and the ExpiryIndexTable output; got ${fns.length} functions, ${mapping.length} mappings`);
  process.exit(1);
}
console.log(`install-test: the quick start's app synthesized: ${Object.keys(t.Resources).length} resources, the bundled Lambda in both functions`);
JS
echo "install-test: ok (${SECONDS} s)"
