#!/usr/bin/env bash
# Issue 5's GPU figures in one time-boxed call (a lease allows 10 minutes a command):
#   bash tools/gpu-session.sh bash tools/gpu-figures.sh [SECONDS]
# Steps run most important first; each gets at most its own limit and what is left of the
# total. Logs and JSON records go to $OUT (or ./gpu-out). A cold cache: the first steps are
# what a new user sees.
set -uo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
export GINGHAM_CACHE_DIR="${GINGHAM_CACHE_DIR:-/tmp/gingham-cache-$$}"
deadline=$(( $(date +%s) + ${1:-560} ))
g="python3 -m gingham"
step() {  # step NAME LIMIT COMMAND...
    local name=$1 limit=$2; shift 2
    local left=$(( deadline - $(date +%s) ))
    (( left < 10 )) && { echo "== $name: skipped, no time left"; return; }
    (( limit > left )) && limit=$left
    echo "== $name (limit ${limit}s) $(date +%T)"
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    echo "   rc $? $(date +%T)"; tail -n 25 "$out/$name.log"
}
step tests-cuda 140 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 15 -q -p no:cacheprovider -p no:warnings tests -k "cuda and not resnet18"
step ops-gemm-cuda 35 $g bench ops --device cuda:0 --only gemm --dtype fp32 --torch-compile off --json "$out/ops-gemm-cuda.json"
step resnet9-bf16-cuda 65 $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step resnet9-bf16-kernels 35 env GINGHAM_DEBUG=2 $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch --steps 1
step all-devices 200 $g bench model story resnet9 --all-devices --quick --torch-compile off --json "$out/all-devices.json"
step tune-story-fresh 55 bash -c 'python3 -m gingham tune model story --device cuda:0 --budget 1 --quiet && GINGHAM_TUNE=on python3 tools/check_tuned_fresh.py story cuda:0'
