#!/usr/bin/env bash
# The figures and the test run the issues ask for, on an NVIDIA machine, in one call:
#   bash tools/gpu-session.sh bash tools/gpu-acceptance.sh
# Logs and JSON records go to $OUT (or ./gpu-out).
set -uo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
export GINGHAM_CACHE_DIR=/tmp/gingham-cache
run() { python3 -c "from gingham.cli import main; import sys; sys.exit(main(sys.argv[1:]))" "$@"; }
python3 -m pytest -n 14 -q -p no:cacheprovider -p no:warnings tests 2>&1 | tee "$out/tests.log" | tail -15
# Ops on every device (ops-cuda_0.txt/.json, ...), then ResNet-9, ResNet-18 and the story net on
# all of them (models.txt/.json/.png). BENCH_ARGS="--quick" (or "--devices cuda:0 --models none",
# "--only gemm,conv", ...) makes it fit a shorter lease.
run bench all --out "$out" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log"
