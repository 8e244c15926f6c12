#!/usr/bin/env bash
# Checks deploy/ against the things it names (run by scripts/test):
#   1. every Kubernetes manifest validates against the Kubernetes API schema, strictly (unknown
#      fields fail), with kubernetes-validate (from PyPI, in a throwaway virtual environment;
#      the schemas ship with it, no cluster needed);
#   2. Muster starts from deploy/muster/muster.yaml exactly as a pod would: the ConfigMap's
#      muster.toml, the container's args, every environment variable the Deployment sets (an
#      unknown MUSTER_* setting is an error), answers the probes' /healthcheck, joins the cluster
#      and stops cleanly on SIGTERM within the pod's grace period;
#   3. every muster_* metric the Grafana dashboard and Prometheus use is one Muster defines.
#
#   deploy/check.sh MUSTER_BIN        (TEST_NATS_URL: a NATS server for step 2)
set -euo pipefail
cd "$(dirname "$0")/.."
muster_bin=${1:?usage: deploy/check.sh MUSTER_BIN}
work=$(mktemp -d /tmp/deploy-check.XXXXXX)
pid=""
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "deploy-check: Kubernetes schemas (kubernetes-validate --strict)"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate PyYAML
"$work/venv/bin/kubernetes-validate" --strict deploy/*/*.yaml

echo "deploy-check: Muster as deploy/muster/muster.yaml runs it"
"$work/venv/bin/python" - "$work" <<'PY'
import json, shlex, sys, yaml
work = sys.argv[1]
docs = [d for d in yaml.safe_load_all(open("deploy/muster/muster.yaml")) if d]
config = next(d for d in docs if d["kind"] == "ConfigMap")
deployment = next(d for d in docs if d["kind"] == "Deployment")
container = deployment["spec"]["template"]["spec"]["containers"][0]
open(f"{work}/muster.toml", "w").write(config["data"]["muster.toml"])
# Secrets and downward-API values get stand-ins; plain values are kept.
env = {}
for e in container["env"]:
    if "value" in e:
        env[e["name"]] = e["value"]
    elif "secretKeyRef" in e.get("valueFrom", {}):
        env[e["name"]] = "" if e["name"] == "MUSTER_DATABASE_URL" else "check-" + e["valueFrom"]["secretKeyRef"]["key"]
    else:
        env[e["name"]] = {"metadata.name": "muster-check-0", "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1"}[e["valueFrom"]["fieldRef"]["fieldPath"]]
args = [a.replace("/etc/muster/muster.toml", f"{work}/muster.toml").replace("/home/muster/data", f"{work}/data") for a in container["args"]]
probe = container["readinessProbe"]["httpGet"]["path"]
grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
json.dump({"env": env, "args": args, "probe": probe, "grace": grace}, open(f"{work}/pod.json", "w"))
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mapfile -t args < <(python3 -c "import json; [print(a) for a in json.load(open('$work/pod.json'))['args']]")
mapfile -t envs < <(python3 -c "import json; [print(f'{k}={v}') for k, v in json.load(open('$work/pod.json'))['env'].items()]")
probe=$(python3 -c "import json; print(json.load(open('$work/pod.json'))['probe'])")
grace=$(python3 -c "import json; print(json.load(open('$work/pod.json'))['grace'])")
# This machine's addresses instead of the pod's ports, and the test's NATS server.
env -i PATH="$PATH" "${envs[@]}" \
  MUSTER_LISTEN="127.0.0.1:$port" MUSTER_ROOMS__TCP_LISTEN=127.0.0.1:0 \
  MUSTER_ENET__LISTEN=127.0.0.1:0 MUSTER_LINKS__LISTEN=127.0.0.1:0 \
  MUSTER_CLUSTER__NATS_URL="${TEST_NATS_URL:?deploy/check.sh needs TEST_NATS_URL}" \
  "$muster_bin" "${args[@]}" >"$work/muster.log" 2>&1 &
pid=$!
ready=""
for _ in $(seq 200); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$probe")" = 200 ]; then ready=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
if [ -z "$ready" ]; then echo "deploy-check: Muster did not answer $probe:" >&2; cat "$work/muster.log" >&2; exit 1; fi
metrics=$(curl -s -H "Authorization: Bearer check-metrics-token" "http://127.0.0.1:$port/metrics")
grep -q '^muster_cluster_nodes ' <<<"$metrics" || { echo "deploy-check: not in a cluster" >&2; exit 1; }
kill -TERM "$pid"
for _ in $(seq $((grace * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then echo "deploy-check: no clean stop within ${grace} s" >&2; exit 1; fi
wait "$pid" || { echo "deploy-check: Muster exited with an error on SIGTERM" >&2; cat "$work/muster.log" >&2; exit 1; }
pid=""

echo "deploy-check: metrics named by the dashboard and Prometheus exist"
python3 - <<'PY'
import glob, re, sys
source = "".join(open(f).read() for f in glob.glob("crates/muster/src/**/*.rs", recursive=True))
used = set()
for f in ["deploy/muster/grafana-dashboard.json", "deploy/muster/prometheus.yaml"]:
    used |= set(re.findall(r"muster_([a-z_]+)", open(f).read()))
missing = []
for name in sorted(used):
    base = re.sub(r"_(count|sum|bucket)$", "", name)
    if f'"{base}"' not in source and f'"{name}"' not in source:
        missing.append("muster_" + name)
if missing:
    sys.exit("deploy-check: metrics Muster does not define: " + ", ".join(missing))
print(f"deploy-check: {len(used)} metric names found in Muster's source")
PY
echo "deploy-check: passed"
