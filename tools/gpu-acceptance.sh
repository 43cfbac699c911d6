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
for device in cuda:0 opencl:0; do
    run bench ops --device "$device" --json "$out/ops-${device/:/}.json" 2>&1 | tee "$out/ops-${device/:/}.log"
    run bench model resnet9 --device "$device" --steps 5 --json "$out/resnet9-${device/:/}.json" 2>&1 | tee "$out/resnet9-${device/:/}.log"
done
run bench model story --device cuda:0 --steps 10 --json "$out/story-cuda0.json" 2>&1 | tee "$out/story-cuda0.log"
