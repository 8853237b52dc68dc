#!/usr/bin/env bash
# Generates the Python client of the v1 contracts (messages, stubs and type stubs) from proto/
# into examples/python/gen (gitignored) with grpcio-tools.
#   PYTHON=path/to/python ./gen.sh [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
out="${1:-$here/gen}"
rm -rf "$out" && mkdir -p "$out"
mapfile -t protos < <(cd "$root/proto" && find thinkus -name '*.proto' | sort)
# grpc_tools.protoc adds the include path of the well-known types (google/protobuf/*.proto).
(cd "$root/proto" && "$python" -m grpc_tools.protoc -I . \
  --python_out="$out" --grpc_python_out="$out" --pyi_out="$out" "${protos[@]}")
echo "generated the Python client of ${#protos[@]} files into $out" >&2
