#!/usr/bin/env bash
# Lints the protobuf contracts under proto/ with buf (config: buf.yaml at the repository root):
# `buf lint` (STANDARD + COMMENTS) and `buf format --diff --exit-code`. buf comes from the npm
# package @bufbuild/buf, installed on first use into .cache/tools/node (gitignored).
set -euo pipefail
cd "$(dirname "$0")/.."

BUF_PKG="@bufbuild/buf@1.75.0"
prefix="$PWD/.cache/tools/node"
buf="$prefix/node_modules/.bin/buf"
if [ ! -x "$buf" ]; then
  echo "==> buf: npm install $BUF_PKG (into $prefix)" >&2
  mkdir -p "$prefix"
  npm install --silent --no-audit --no-fund --no-save --prefix "$prefix" "$BUF_PKG" >/dev/null
fi
export BUF_CACHE_DIR="$PWD/.cache/tools/buf"

files=$(find proto -name '*.proto' | wc -l)
echo "==> buf $("$buf" --version): lint and format of $files files under proto/" >&2
"$buf" lint
"$buf" format --diff --exit-code
echo "protos: $files files pass buf lint (STANDARD, COMMENTS) and buf format" >&2
