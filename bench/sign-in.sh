#!/usr/bin/env bash
# Sign-ins with Apple and Google identity tokens on one node (docs/sign-in.md), with the load of
# crates/muster/examples/sign_in_load.rs: a local stand-in serves the provider's key set (fetched
# once, then cached), PLAYERS accounts are created, then CONCURRENCY callers sign in to them for
# SECONDS. Prints one JSON line per run: sign-ins/s, latency percentiles, the server's CPU per
# sign-in, and the bare RS256 signature check's CPU (in the load's own process) for scale.
# Usage: bench/sign-in.sh   env: PROVIDERS="apple google" SECONDS=10 CONCURRENCY=32 PLAYERS=1000
#        RUNS=3
set -euo pipefail
source "$(dirname "$0")/swarm-common.sh"
PROVIDERS=${PROVIDERS:-"apple google"}
SECONDS_EACH=${SECONDS:-10}
CONCURRENCY=${CONCURRENCY:-32}
PLAYERS=${PLAYERS:-1000}
RUNS=${RUNS:-3}

build_release
(cd "$root" && cargo build --release -p muster --example sign_in_load --quiet) >&2
for run in $(seq 1 "$RUNS"); do
  for provider in $PROVIDERS; do
    "$release_dir/examples/sign_in_load" "$release_dir/muster" "$provider" "$SECONDS_EACH" \
      "$CONCURRENCY" "$PLAYERS" | sed "s/^{/{\"run\":$run,/"
  done
done
