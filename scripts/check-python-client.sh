#!/usr/bin/env bash
# Runs the example Python client (examples/python) against the all-in-one server: generates the
# client from proto/ with grpcio-tools, starts `thinkus all` on free loopback ports with a
# temporary data dir and the hash embedder (embedder.uri=hash://384, no model to load), waits
# until it is SERVING, runs client.py (remember, recall, prepare a turn), stops the server.
#
#   THINKUS_BIN=path/to/thinkus ./scripts/check-python-client.sh
# The binary defaults to target/debug/thinkus (`cargo build --bin thinkus`). Python packages go
# into a venv under .cache/tools (gitignored).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bin="${THINKUS_BIN:-target/debug/thinkus}"
if [ ! -x "$bin" ]; then
  echo "check-python-client: no thinkus binary at $bin: cargo build --bin thinkus (or set THINKUS_BIN)" >&2
  exit 1
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

venv="$root/.cache/tools/python-client"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import grpc, grpc_tools, google.protobuf' 2>/dev/null; then
  echo "==> Python client venv ($venv): pip install -r examples/python/requirements.txt" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r examples/python/requirements.txt
fi

work=$(mktemp -d /tmp/thinkus-pyclient.XXXXXX)
server_pid=""
stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
trap 'stop_server; rm -rf "$work"' EXIT

PYTHON="$venv/bin/python" examples/python/gen.sh "$work/gen"

read -r grpc_port metrics_port < <("$venv/bin/python" - <<'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
for s in socks:
    s.close()
PY
)

echo "==> thinkus all on 127.0.0.1:$grpc_port (metrics $metrics_port, data $work/data)" >&2
(cd "$work" && exec "$bin" \
  --set "server.grpc_addr=127.0.0.1:$grpc_port" \
  --set "server.metrics_addr=127.0.0.1:$metrics_port" \
  --set "server.data_dir=$work/data" \
  --set "embedder.uri=hash://384" \
  all >"$work/server.log" 2>&1) &
server_pid=$!

status=0
THINKUS_PY_GEN="$work/gen" "$venv/bin/python" examples/python/client.py \
  --addr "127.0.0.1:$grpc_port" --wait 60 || status=$?
if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "check-python-client: the server exited early" >&2
  status=1
fi
stop_server
if [ "$status" -ne 0 ]; then
  echo "---- server log (last 40 lines) ----" >&2
  tail -n 40 "$work/server.log" >&2
  echo "python client: FAILED" >&2
  exit 1
fi
echo "python client: remember, recall and prepare-turn passed against thinkus all" >&2
