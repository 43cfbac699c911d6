export GINGHAM_CACHE_DIR=/tmp/gcB
t0=$(date +%s)
timeout 150 python3 -m pytest -q -n 6 tests/tune/test_algorithms.py tests/nn/test_winograd.py 2>&1 | tail -3
echo "tests done $(( $(date +%s) - t0 )) s"
for layout in nhwc nchw; do
  for m in resnet9 resnet18; do
    timeout 150 python3 -m gingham tune model $m --device cuda:0 --layout $layout --only algorithms 2>&1 | grep -v "^tune k"
    echo "tune $m $layout done $(( $(date +%s) - t0 )) s"
  done
  timeout 150 python3 -m gingham bench model resnet9 resnet18 --device cuda:0 --layout $layout --torch-compile off 2>&1 | tail -16
  echo "bench $layout done $(( $(date +%s) - t0 )) s"
done
