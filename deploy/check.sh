#!/usr/bin/env bash
# Checks deploy/ against the things it names (run by scripts/test):
#   1. every Kubernetes manifest validates against the Kubernetes API schema, strictly (unknown
#      fields fail), with kubernetes-validate (from PyPI, in a throwaway virtual environment;
#      the schemas ship with it, no cluster needed);
#   2. Muster starts from deploy/muster/muster.yaml exactly as a pod would: the ConfigMap's
#      muster.toml, the container's args, every environment variable the Deployment sets (an
#      unknown MUSTER_* setting is an error), answers the probes' /healthcheck, joins the cluster
#      and stops cleanly on SIGTERM within the pod's grace period;
#   3. every muster_* metric the Grafana dashboard and Prometheus use is one Muster defines;
#   4. TLS at a proxy: docs/deploy.md's nginx block (nginx from Debian's packages, a certificate
#      made with openssl) in front of Muster; a device account authenticated over https and a
#      realtime socket over wss answering a ping, the request id coming back through the proxy;
#   5. the Grafana dashboard's queries, evaluated by a real Prometheus (Debian's package) scraping
#      that Muster as deploy/muster/prometheus.yaml does: every query parses and every metric it
#      names is scraped (Grafana itself is packaged neither by Debian nor by the registries this
#      runs with, so the dashboard is not imported into one here);
#   6. the container image: deploy/muster/Dockerfile's runtime stage built with podman (Debian's
#      package) on a base made from Debian's packages with debootstrap (no image registry is
#      needed), with MUSTER_BIN in place of its build stage, then started with its own CMD and a
#      mounted settings file: it answers /healthcheck as its unprivileged user and stops cleanly on
#      SIGTERM. Needs root; skipped with a message otherwise (unless TEST_REQUIRE_ROOT=1).
#
#   deploy/check.sh MUSTER_BIN        (TEST_NATS_URL: a NATS server for step 2)
set -euo pipefail
cd "$(dirname "$0")/.."
muster_bin=${1:?usage: deploy/check.sh MUSTER_BIN}
work=$(mktemp -d /tmp/deploy-check.XXXXXX)
pid=""
nginx_pid=""
prometheus_pid=""
container=""
cleanup() {
  [ -n "$prometheus_pid" ] && kill "$prometheus_pid" 2>/dev/null || true
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
  [ -n "$container" ] && podman --runtime runc rm -f "$container" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

echo "deploy-check: Kubernetes schemas (kubernetes-validate --strict)"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate PyYAML websockets
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
port=$(free_port)
mapfile -t args < <(python3 -c "import json; [print(a) for a in json.load(open('$work/pod.json'))['args']]")
mapfile -t envs < <(python3 -c "import json; [print(f'{k}={v}') for k, v in json.load(open('$work/pod.json'))['env'].items()]")
probe=$(python3 -c "import json; print(json.load(open('$work/pod.json'))['probe'])")
grace=$(python3 -c "import json; print(json.load(open('$work/pod.json'))['grace'])")
# This machine's addresses instead of the pod's ports, and the test's NATS server.
env -i PATH="$PATH" "${envs[@]}" \
  MUSTER_LISTEN="127.0.0.1:$port" MUSTER_ROOMS__TCP_LISTEN=127.0.0.1:0 \
  MUSTER_ENET__LISTEN=127.0.0.1:0 MUSTER_LINKS__LISTEN=127.0.0.1:0 MUSTER_GRPC__LISTEN=127.0.0.1:0 \
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
echo "deploy-check: TLS at a proxy (docs/deploy.md's nginx block)"
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  echo "deploy-check: installing nginx from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
fi
port=$(free_port)
tls_port=$(free_port)
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost \
  -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
mkdir -p "$work/nginx"
python3 - "$work" "$port" "$tls_port" <<'PY'
import re, sys
work, port, tls_port = sys.argv[1:]
block = re.search(r"```nginx\n(.*?)```", open("docs/deploy.md").read(), re.S).group(1)
for old, new in [("listen 443 ssl", f"listen 127.0.0.1:{tls_port} ssl"),
                 ("/etc/ssl/certs/game.example.com.crt", f"{work}/tls.crt"),
                 ("/etc/ssl/private/game.example.com.key", f"{work}/tls.key"),
                 ("http://127.0.0.1:7350", f"http://127.0.0.1:{port}")]:
    assert old in block, f"docs/deploy.md's nginx block no longer has {old!r}"
    block = block.replace(old, new)
temp = "".join(f"{kind}_temp_path {work}/nginx/{kind};\n" for kind in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"])
open(f"{work}/nginx.conf", "w").write(
    f"pid {work}/nginx/pid;\nerror_log {work}/nginx/error.log;\nevents {{}}\n"
    f"http {{\naccess_log {work}/nginx/access.log;\n{temp}{block}}}\n")
PY
env -i PATH="$PATH" MUSTER_LISTEN="127.0.0.1:$port" MUSTER_DATA_DIR="$work/tls-data" \
  MUSTER_ROOMS__TCP_LISTEN=127.0.0.1:0 MUSTER_ENET__LISTEN=127.0.0.1:0 MUSTER_LINKS__LISTEN=127.0.0.1:0 MUSTER_GRPC__LISTEN=127.0.0.1:0 \
  MUSTER_LIMITS__TRUSTED_PROXIES='["127.0.0.1"]' MUSTER_CLUSTER__NATS_URL="$TEST_NATS_URL" \
  "$muster_bin" >"$work/muster-tls.log" 2>&1 &
pid=$!
PATH="$PATH:/usr/sbin" nginx -c "$work/nginx.conf" -e "$work/nginx/error.log" -g 'daemon off;' &
nginx_pid=$!
"$work/venv/bin/python" - "$tls_port" "$work/tls.crt" <<'PY' || { cat "$work/muster-tls.log" "$work/nginx/error.log" >&2; exit 1; }
import base64, json, ssl, sys, time, urllib.request
from websockets.sync.client import connect
port, cert = sys.argv[1:]
tls = ssl.create_default_context(cafile=cert)
base = f"https://localhost:{port}"
for _ in range(200):  # until nginx and Muster both answer
    try:
        urllib.request.urlopen(f"{base}/healthcheck", context=tls, timeout=5)
        break
    except Exception:
        time.sleep(0.05)
request = urllib.request.Request(
    f"{base}/v2/account/authenticate/device?create=true",
    data=json.dumps({"id": "tls-check-device-0001"}).encode(),
    headers={"Authorization": "Basic " + base64.b64encode(b"defaultkey:").decode(),
             "Content-Type": "application/json", "x-request-id": "tls-check-1"})
answer = urllib.request.urlopen(request, context=tls, timeout=10)
assert answer.headers["x-request-id"] == "tls-check-1", answer.headers
token = json.load(answer)["token"]
with connect(f"wss://localhost:{port}/ws?token={token}", ssl=tls, open_timeout=10) as socket:
    def call(envelope):
        socket.send(json.dumps(envelope))
        while True:  # answers by cid; deliveries of the room's messages have none
            reply = json.loads(socket.recv(timeout=10))
            if reply.get("cid") == envelope["cid"]:
                return reply
    assert "pong" in call({"cid": "1", "ping": {}})
    # A chat message and a refused envelope, so that the dashboard's series have values below.
    channel = call({"cid": "2", "channel_join": {"target": "lobby", "type": 1}})["channel"]["id"]
    sent = call({"cid": "3", "channel_message_send": {"channel_id": channel, "content": '{"hi":1}'}})
    assert "channel_message_ack" in sent, sent
    assert "error" in call({"cid": "4", "no_such_kind": {}})
print("deploy-check: https and wss through nginx answered (authenticate, ping, chat)")
PY

echo "deploy-check: the dashboard's queries in Prometheus"
if [ ! -x /usr/bin/prometheus ]; then
  echo "deploy-check: installing prometheus from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
prometheus_port=$(free_port)
cat >"$work/prometheus.yml" <<YAML
global: { scrape_interval: 1s, evaluation_interval: 1s }
scrape_configs:
  - job_name: muster
    metrics_path: /metrics
    static_configs: [{ targets: ["127.0.0.1:$port"], labels: { node: check-0 } }]
YAML
/usr/bin/prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus" \
  --web.listen-address="127.0.0.1:$prometheus_port" >"$work/prometheus.log" 2>&1 &
prometheus_pid=$!
python3 - "$prometheus_port" <<'PY' || { tail -n 20 "$work/prometheus.log" >&2; exit 1; }
import json, re, sys, time, urllib.parse, urllib.request
api = f"http://127.0.0.1:{sys.argv[1]}/api/v1"
def get(path, **query):
    url = f"{api}/{path}?" + urllib.parse.urlencode(query)
    try:
        return json.load(urllib.request.urlopen(url, timeout=5))
    except urllib.error.HTTPError as error:
        return json.load(error)
# Two scrapes at least, so that rates have two points.
for _ in range(300):
    try:
        up = get("query", query='count_over_time(up{job="muster"}[1m])')["data"]["result"]
        if up and float(up[0]["value"][1]) >= 3:
            break
    # Not listening yet, or not ready: a starting Prometheus answers 503 in plain text.
    except (OSError, ValueError, KeyError):
        pass
    time.sleep(0.1)
else:
    sys.exit("deploy-check: Prometheus never scraped Muster three times")
scraped = set(get("label/__name__/values")["data"])
dashboard = json.load(open("deploy/muster/grafana-dashboard.json"))
problems, queries = [], 0
for panel in dashboard["panels"]:
    for target in panel.get("targets", []):
        queries += 1
        answer = get("query", query=target["expr"])
        if answer["status"] != "success":
            problems.append(f"{panel['title']}: {target['expr']}: {answer.get('error')}")
        for name in set(re.findall(r"\bmuster_[a-z_]+", target["expr"])) - scraped:
            problems.append(f"{panel['title']}: {name} is not among the scraped series")
if problems:
    sys.exit("deploy-check: the dashboard's queries:\n  " + "\n  ".join(problems))
print(f"deploy-check: {queries} dashboard queries evaluated by Prometheus, every metric scraped")
PY
kill "$prometheus_pid"
wait "$prometheus_pid" 2>/dev/null || true
prometheus_pid=""
kill "$nginx_pid" "$pid"
wait "$nginx_pid" "$pid" 2>/dev/null || true
nginx_pid=""
pid=""

echo "deploy-check: the container image (deploy/muster/Dockerfile)"
if [ "$(id -u)" != 0 ]; then
  if [ "${TEST_REQUIRE_ROOT:-}" = 1 ]; then echo "deploy-check: the image check needs root" >&2; exit 1; fi
  echo "deploy-check: SKIPPED the image check: podman and debootstrap need root here (run as root, or set TEST_REQUIRE_ROOT=1 to fail instead)"
  echo "deploy-check: passed (without the image)"
  exit 0
fi
if ! command -v podman >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1 \
  || ! command -v runc >/dev/null 2>&1; then
  echo "deploy-check: installing podman, runc and debootstrap from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null
fi
# runc rather than Debian's default crun, which refuses a machine with cgroups v1 and v2 mounted
# side by side; limits no higher than this process may grant (a container cannot raise them).
limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
pod() { podman --runtime runc "$@"; }
# The Dockerfile's base, made from Debian's packages when this machine has no copy of it.
base=$(sed -n 's/^FROM \([^ ]*\)$/\1/p' deploy/muster/Dockerfile | tail -n 1)
if ! pod image exists "$base"; then
  suite=$(sed -n 's/.*:\([a-z]*\)-slim$/\1/p' <<<"$base")
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
  echo "deploy-check: making $base with debootstrap ($suite, ${mirror:-http://deb.debian.org/debian})"
  debootstrap --variant=minbase "${suite:?cannot read the suite from $base}" "$work/rootfs" \
    "${mirror:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  # As the registry names it, so that the Dockerfile's short name finds it here.
  case "$base" in */*) named=$base ;; *) named=docker.io/library/$base ;; esac
  tar -C "$work/rootfs" -c . | pod import - "$named" >/dev/null
  rm -rf "$work/rootfs"
fi
# The build stage's output is the binary under test (compiling a release build inside the image
# would repeat the suite's build): a build context named after the stage replaces it.
mkdir -p "$work/build/src/target/release"
cp "$muster_bin" "$work/build/src/target/release/muster"
image="localhost/muster-check:$$"
pod build --quiet --network host "${limits[@]}" --build-context build="$work/build" -f deploy/muster/Dockerfile \
  -t "$image" . >"$work/image-build.log" 2>&1 || { cat "$work/image-build.log" >&2; exit 1; }
port=$(free_port)
printf 'server_key = "image-check-server-key"\n' >"$work/image.toml"
container=$(pod run -d --network host "${limits[@]}" -v "$work/image.toml:/etc/muster/muster.toml:ro,Z" \
  -e MUSTER_LISTEN="127.0.0.1:$port" -e MUSTER_ROOMS__TCP_LISTEN=127.0.0.1:0 \
  -e MUSTER_ENET__LISTEN=127.0.0.1:0 -e MUSTER_LINKS__LISTEN=127.0.0.1:0 -e MUSTER_GRPC__LISTEN=127.0.0.1:0 "$image")
ready=""
for _ in $(seq 200); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthcheck")" = 200 ]; then ready=1; break; fi
  [ "$(pod inspect -f '{{.State.Running}}' "$container")" = true ] || break
  sleep 0.05
done
if [ -z "$ready" ]; then echo "deploy-check: the image did not answer /healthcheck:" >&2; pod logs "$container" >&2; exit 1; fi
user=$(pod exec "$container" id -un)
[ "$user" = muster ] || { echo "deploy-check: the image runs as $user, not muster" >&2; exit 1; }
pod stop -t "$grace" "$container" >/dev/null
code=$(pod inspect -f '{{.State.ExitCode}}' "$container")
[ "$code" = 0 ] || { echo "deploy-check: the image exited with $code on SIGTERM:" >&2; pod logs "$container" >&2; exit 1; }
pod rm "$container" >/dev/null
container=""
pod rmi "$image" >/dev/null
echo "deploy-check: the image answered /healthcheck as user muster and stopped cleanly"
echo "deploy-check: passed"
