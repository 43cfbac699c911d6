set -x
export GINGHAM_CACHE_DIR=/tmp/gcA
t0=$(date +%s)
timeout 200 python3 -m pytest -q -n 4 tests/tune/test_algorithms.py tests/nn/test_winograd.py 2>&1 | tail -4
echo "tests done $(( $(date +%s) - t0 )) s"
timeout 240 python3 -m gingham tune model resnet9 --device cuda:0 --layout nhwc --budget 2 2>&1 | grep -v "^tune k" | tail -60
echo "tune done $(( $(date +%s) - t0 )) s"
timeout 120 python3 -m gingham bench model resnet9 --device cuda:0 --layout nhwc --torch-compile off 2>&1 | tail -14
echo "bench done $(( $(date +%s) - t0 )) s"
