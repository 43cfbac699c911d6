#!/usr/bin/env bash
# Issue 5's GPU figures in one time-boxed call (a lease allows 10 minutes a command):
#   bash tools/gpu-session.sh bash tools/gpu-figures.sh [SECONDS] [a|m|b|f|c|t|w|z|p|n|s|o|e|r|v|g|k|x|u|y|l|q|h|j|d|closing|rows|archive|ocl-archive|host|closing41]
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
cuda_tests() {  # cuda_tests LIMIT: the whole suite on the CUDA device (ResNet-18 aside); on a
    # new machine (nothing cached) it took about 180 s until stop 29 and more than 250 s at
    # stop 32 (cut at 95% by that limit), with its kernels cached about 45
    step tests-cuda "$1" env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 15 -q -rf -p no:cacheprovider -p no:warnings tests -k "cuda and not resnet18"
}
opencl_tests() {  # opencl_tests LIMIT: the OpenCL builds and the background device model
    step tests-opencl "$1" env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 4 -q -p no:cacheprovider -p no:warnings tests/devices/test_opencl_build.py tests/tune/test_device_model_background.py
}
tests_and_first_epochs() {  # tests_and_first_epochs OPENCL_TEST_LIMIT: modes r and v
    cuda_tests 300
    opencl_tests "$1"
    local round dev precision run
    for round in 1 2; do
        for run in "opencl:0 fp32" "cuda:0 fp32" "cuda:0 bf16"; do
            read -r dev precision <<< "$run"
            step "resnet9-first-${dev%:0}-$precision-r$round" 40 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" python3 tools/timeline.py -- $g bench model resnet9 --device "$dev" --precision "$precision" --no-torch
        done
    done
}
case "${2:-a}" in
a)  # correctness on the GPU, then the op targets of the issue
cuda_tests 150
step ops-gemm-cuda 70 $g bench ops --device cuda:0 --only gemm --dtype fp32,bf16 --gemm-sizes 4096,8192 --torch-compile off --json "$out/ops-gemm-cuda.json"
step ops-conv-cuda 45 $g bench ops --device cuda:0 --only conv --dtype fp32,bf16 --torch-compile off --json "$out/ops-conv-cuda.json"
;;
m)  # the model targets
step resnet9-bf16-cuda 80 $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step resnet9-bf16-kernels 40 env GINGHAM_DEBUG=2 $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch --steps 1
step story-cuda 60 $g bench model story --device cuda:0 --steps 20 --torch-compile off --json "$out/story-cuda.json"
step resnet9-fp32-cuda 60 $g bench model resnet9 --device cuda:0 --layout nhwc --torch-compile off --json "$out/resnet9-fp32-cuda.json"
;;
b)  # the all-devices table, OpenCL against CUDA, a tuned fresh process
step all-devices 240 $g bench model story resnet9 --all-devices --quick --torch-compile off --json "$out/all-devices.json"
step ops-opencl 70 $g bench ops --device opencl:0 --only gemm,conv --dtype fp32 --gemm-sizes 4096 --torch-compile off --json "$out/ops-opencl.json"
step tune-story-fresh 60 bash -c 'python3 -m gingham tune model story --device cuda:0 --budget 1 --quiet && GINGHAM_TUNE=on python3 tools/check_tuned_fresh.py story cuda:0'
;;
f)  # first runs: every command a fresh gingham cache and a fresh driver cache (a new machine)
for round in 1 2 3; do
    for overlap in 0 1; do
        step "overlap$overlap-r$round" 40 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" GINGHAM_COMPILE_OVERLAP=$overlap GINGHAM_DEBUG=1 $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch --steps 3
    done
done
step resnet9-opencl-first 60 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" GINGHAM_DEBUG=1 $g bench model resnet9 --device opencl:0 --no-torch --json "$out/resnet9-opencl-first.json"
step resnet9-fp32-cuda-first 60 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" $g bench model resnet9 --device cuda:0 --no-torch --json "$out/resnet9-fp32-cuda-first.json"
step resnet9-bf16-cuda 80 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
;;
c)  # a round's closing run: the CUDA tests, then the first-run and model figures (fresh caches)
cuda_tests 170
step resnet9-opencl-first 60 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" GINGHAM_DEBUG=1 $g bench model resnet9 --device opencl:0 --no-torch --json "$out/resnet9-opencl-first.json"
step resnet9-fp32-cuda-first 60 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" $g bench model resnet9 --device cuda:0 --no-torch --json "$out/resnet9-fp32-cuda-first.json"
step resnet9-bf16-cuda 80 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step resnet9-bf16-kernels 40 env GINGHAM_DEBUG=2 $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch --steps 1
step story-cuda 60 $g bench model story --device cuda:0 --steps 20 --torch-compile off --json "$out/story-cuda.json"
;;
t)  # ResNet-9 bf16 before and after `gingham tune model` (one cache through the whole call)
step resnet9-bf16-untuned 80 $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-untuned.json"
step tune-resnet9-bf16 330 env GINGHAM_DEBUG=1 $g tune model resnet9 --device cuda:0 --precision bf16 --budget 1 --quiet
step resnet9-bf16-tuned 80 $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-tuned.json"
step resnet9-bf16-tuned-kernels 40 env GINGHAM_DEBUG=2 $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch --steps 1
;;
w)  # the warpgroup (wgmma) tensor-core schedule against mma.sync
step tests-tc 150 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 8 -q -p no:cacheprovider -p no:warnings tests/compiler/test_tensor_cores.py tests/compiler/test_bf16_channels_last.py -k cuda
step ops-wgmma 70 $g bench ops --device cuda:0 --only gemm,conv --dtype bf16 --gemm-sizes 4096,8192 --torch-compile off --json "$out/ops-wgmma.json"
step ops-mma 70 env GINGHAM_WGMMA=0 $g bench ops --device cuda:0 --only gemm,conv --dtype bf16 --gemm-sizes 4096,8192 --torch-compile off --json "$out/ops-mma.json"
step resnet9-bf16-wgmma 80 $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-wgmma.json"
step resnet9-bf16-wgmma-kernels 40 env GINGHAM_DEBUG=2 $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch --steps 1
;;
z)  # a short closing run (about 4 minutes): the CUDA tests of the tensor-core and reduction
    # schedules, the first-run and model figures with fresh caches
step tests-cuda 80 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 15 -q -p no:cacheprovider -p no:warnings tests/compiler/test_tensor_cores.py tests/compiler/test_split_reduction.py tests/compiler/test_split_reduction_vectors.py tests/compiler/test_bf16_channels_last.py tests/frontend/test_amp.py -k cuda
opencl_tests 60
step resnet9-bf16-cuda 50 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step resnet9-opencl-first 45 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" GINGHAM_DEBUG=1 $g bench model resnet9 --device opencl:0 --no-torch --json "$out/resnet9-opencl-first.json"
step resnet9-fp32-cuda-first 40 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" $g bench model resnet9 --device cuda:0 --no-torch --json "$out/resnet9-fp32-cuda-first.json"
step story-cuda 40 $g bench model story --device cuda:0 --steps 20 --torch-compile off --json "$out/story-cuda.json"
step resnet9-bf16-kernels 30 env GINGHAM_DEBUG=2 $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch --steps 1
;;
p)  # where a bf16 ResNet-9 step's time goes: gingham's kernels on the device's clock beside
    # PyTorch's from its profiler, after the CUDA tests of the code the breakdown relies on
step tests-cuda 100 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 15 -q -p no:cacheprovider -p no:warnings tests/frontend/test_amp.py tests/compiler/test_tensor_cores.py tests/devices/test_launch_plan.py -k cuda
step resnet9-bf16-cuda 70 $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step resnet9-bf16-kernels 40 env GINGHAM_DEBUG=2 $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch --steps 1
step resnet9-bf16-torch-kernels 40 python3 tools/torch_step_kernels.py resnet9 --precision bf16 --top 60
;;
n)  # the step after a change: the tensor-core and CSE tests, the bf16 step beside PyTorch, its
    # kernels and overheads, then Nsight Compute on the kernels named in NCU_KERNELS (a regex
    # of entry names, gk_...; tools/kernel_bandwidth.py --out writes each kernel's source)
step tests-cuda 90 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 15 -q -p no:cacheprovider -p no:warnings tests/compiler/test_cse.py tests/compiler/test_tensor_cores.py tests/frontend/test_amp.py tests/frontend/test_training.py -k cuda
step resnet9-bf16-cuda 60 $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step resnet9-bf16-overhead 40 python3 tools/step_overhead.py resnet9 --device cuda:0 --precision bf16
step resnet9-bf16-kernels 30 env GINGHAM_DEBUG=2 $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch --steps 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "${NCU_KERNELS:-}" ] && step ncu 150 "$ncu" --clock-control none --cache-control none --kernel-name "regex:${NCU_KERNELS}" --launch-count 3 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch --steps 1
;;
s)  # the tensor-core sweep of ResNet-9's heaviest convolutions (each warpgroup candidate), the
    # tensor-core tests, the bf16 step and its overheads
step tests-tc 90 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 15 -q -p no:cacheprovider -p no:warnings tests/compiler/test_tensor_cores.py tests/devices/test_launch_plan.py -k cuda
step resnet9-sweep 200 python3 tools/bench_tensor_cores.py --repeats 10 --resnet9-sweep "${SWEEP_NAMES:-}"
step resnet9-bf16-cuda 60 $g bench model resnet9 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step resnet9-bf16-overhead 40 python3 tools/step_overhead.py resnet9 --device cuda:0 --precision bf16 --profile
;;
o)  # closing run, part 1: the CUDA tests, then the op targets on CUDA and NVIDIA OpenCL
cuda_tests 170
step ops-cuda 100 $g bench ops --device cuda:0 --only gemm,conv --dtype fp32,bf16 --gemm-sizes 4096,8192 --torch-compile off --json "$out/ops-cuda.json"
step ops-opencl 90 $g bench ops --device opencl:0 --only gemm,conv --dtype fp32 --gemm-sizes 4096 --torch-compile off --json "$out/ops-opencl.json"
opencl_tests 60
;;
e)  # closing run, part 2: first epochs (fresh caches), the model targets, the all-devices table
step resnet9-opencl-first 60 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" GINGHAM_DEBUG=1 $g bench model resnet9 --device opencl:0 --no-torch --json "$out/resnet9-opencl-first.json"
step resnet9-fp32-cuda-first 50 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" $g bench model resnet9 --device cuda:0 --torch-compile off --json "$out/resnet9-fp32-cuda-first.json"
step resnet9-bf16-cuda 50 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" $g bench model resnet9 --device cuda:0 --precision bf16 --steps 20 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step story-cuda 40 $g bench model story --device cuda:0 --steps 20 --torch-compile off --json "$out/story-cuda.json"
step resnet9-bf16-overhead 25 python3 tools/step_overhead.py resnet9 --device cuda:0 --precision bf16
step all-devices 240 $g bench model story resnet9 --all-devices --quick --torch-compile off --json "$out/all-devices.json"
;;
r)  # one closing run in a tight device budget: the CUDA tests, first epochs (fresh caches, two
    # rounds: OpenCL and CUDA fp32, CUDA bf16), the op and model targets, the all-devices
    # table with what time is left
tests_and_first_epochs 40
step ops-cuda 60 $g bench ops --device cuda:0 --only gemm,conv --dtype fp32,bf16 --gemm-sizes 4096,8192 --torch-compile off --json "$out/ops-cuda.json"
step ops-opencl 60 $g bench ops --device opencl:0 --only gemm,conv --dtype fp32 --gemm-sizes 4096 --torch-compile off --json "$out/ops-opencl.json"
step resnet9-bf16-cuda 50 $g bench model resnet9 --device cuda:0 --precision bf16 --steps 20 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step story-cuda 40 $g bench model story --device cuda:0 --steps 20 --torch-compile off --json "$out/story-cuda.json"
step all-devices 240 $g bench model story resnet9 --all-devices --quick --torch-compile off --json "$out/all-devices.json"
;;
g)  # NVRTC on threads against worker processes (GINGHAM_NVRTC_BUILD) in ResNet-9's fresh
    # first epochs, alternating (fp32 three rounds, bf16 two), after the NVRTC worker tests
step tests-nvrtc-workers 60 python3 -m pytest -q -p no:cacheprovider -p no:warnings tests/devices/test_nvrtc_workers.py
for round in 1 2 3; do
    for precision in fp32 bf16; do
        [ "$precision" = bf16 ] && [ "$round" = 3 ] && continue
        for mode in threads processes; do
            step "resnet9-first-$precision-$mode-r$round" 40 env GINGHAM_NVRTC_BUILD=$mode GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" python3 tools/timeline.py -- $g bench model resnet9 --device cuda:0 --precision "$precision" --no-torch
        done
    done
done
;;
v)  # a change's check: the CUDA and OpenCL tests, then first epochs with fresh caches (two
    # rounds: OpenCL and CUDA fp32, CUDA bf16)
tests_and_first_epochs 60
;;
k)  # a closing run after a `v` run (its first epochs), part 1: the CUDA and OpenCL tests,
    # the op and model targets
cuda_tests 150
opencl_tests 50
step ops-cuda 70 $g bench ops --device cuda:0 --only gemm,conv --dtype fp32,bf16 --gemm-sizes 1024,4096,8192 --torch-compile off --json "$out/ops-cuda.json"
step ops-opencl 60 $g bench ops --device opencl:0 --only gemm,conv --dtype fp32 --gemm-sizes 1024,4096 --torch-compile off --json "$out/ops-opencl.json"
step resnet9-bf16-cuda 50 $g bench model resnet9 --device cuda:0 --precision bf16 --steps 20 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step story-cuda 40 $g bench model story --device cuda:0 --steps 20 --torch-compile off --json "$out/story-cuda.json"
;;
x)  # ResNet-18 after a change to its kernels: the convolution-gradient tests on CUDA and
    # OpenCL, fp32 and bf16 beside PyTorch eager, the fp32 step's kernels, the all-devices row
step tests-conv 120 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 15 -q -p no:cacheprovider -p no:warnings tests/compiler/test_phases.py tests/nn/test_functional.py tests/nn/test_channels_last.py tests/nn/test_resnet18.py -k "cuda or opencl"
step resnet18-fp32-cuda 80 $g bench model resnet18 --device cuda:0 --torch-compile off --json "$out/resnet18-fp32-cuda.json"
step resnet18-bf16-cuda 80 $g bench model resnet18 --device cuda:0 --precision bf16 --torch-compile off --json "$out/resnet18-bf16-cuda.json"
step resnet18-fp32-kernels 40 env GINGHAM_DEBUG=2 $g bench model resnet18 --device cuda:0 --no-torch --steps 1
step all-devices-resnet18 200 $g bench model resnet18 --all-devices --json "$out/all-devices-resnet18.json"
;;
u)  # after a change to the CPU backend: the conv-gradient tests on CUDA and OpenCL, then
    # the GPU host's 16-core CPU beside PyTorch CPU (the all-devices table's cpu rows)
step tests-conv 120 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 15 -q -p no:cacheprovider -p no:warnings tests/compiler/test_phases.py tests/nn/test_functional.py -k "cuda or opencl"
step cpu-story 90 $g bench model story --device cpu --torch-compile off --json "$out/cpu-story.json"
step cpu-resnet9 150 $g bench model resnet9 --device cpu --torch-compile off --json "$out/cpu-resnet9.json"
step cpu-resnet18 150 $g bench model resnet18 --device cpu --torch-compile off --json "$out/cpu-resnet18.json"
;;
y)  # the tensor-core tests and bf16 figures after a change to the warpgroup kernels, then
    # where the GPU host's 16-core CPU loses to PyTorch: gingham's kernels (GINGHAM_DEBUG=2)
    # beside PyTorch's operators, on 16 threads and on one
step tests-tc 150 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 15 -q -p no:cacheprovider -p no:warnings tests/compiler/test_tensor_cores.py tests/compiler/test_bf16_channels_last.py tests/frontend/test_amp.py -k "cuda or pipelined"
step ops-bf16-cuda 60 $g bench ops --device cuda:0 --only gemm,conv --dtype bf16 --gemm-sizes 4096,8192 --torch-compile off --json "$out/ops-bf16-cuda.json"
step resnet9-bf16-cuda 50 $g bench model resnet9 --device cuda:0 --precision bf16 --steps 20 --torch-compile off --json "$out/resnet9-bf16-cuda.json"
step cpu-story-kernels 60 env GINGHAM_DEBUG=2 $g bench model story --device cpu --no-torch --steps 2
step cpu-story-torch 30 python3 tools/torch_step_kernels.py story --device cpu --precision fp32 --batch 16 --top 25
step cpu-story-kernels-1t 40 env OMP_NUM_THREADS=1 GINGHAM_DEBUG=2 $g bench model story --device cpu --no-torch --steps 1
step cpu-story-torch-1t 30 env OMP_NUM_THREADS=1 python3 tools/torch_step_kernels.py story --device cpu --precision fp32 --batch 16 --top 25
step cpu-resnet9-kernels 80 env GINGHAM_DEBUG=2 $g bench model resnet9 --device cpu --no-torch --steps 1
step cpu-resnet9-torch 40 python3 tools/torch_step_kernels.py resnet9 --device cpu --precision fp32 --batch 512 --top 25
;;
l)  # a closing run, part 2: the full all-devices table (5 timed steps, torch.compile where
    # PyTorch runs on the GPU), one model at a time so that each table survives a later limit
step all-devices-story 110 $g bench model story --all-devices --json "$out/all-devices-story.json"
step all-devices-resnet9 200 $g bench model resnet9 --all-devices --json "$out/all-devices-resnet9.json"
step all-devices-resnet18 250 $g bench model resnet18 --all-devices --json "$out/all-devices-resnet18.json"
;;
q)  # the program cache: the CUDA tests (its own on CUDA and OpenCL too), then ResNet-9's first
    # epochs twice per cache directory: fresh (a new machine), then warm (a second process:
    # kernels and programs on disk), and bf16 warm once more without the program cache
cuda_tests 170
step tests-program-cache 60 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 4 -q -p no:cacheprovider -p no:warnings tests/compiler/test_program_cache.py tests/compiler/test_nvrtc_models.py
for precision in bf16 fp32; do
    cache="$(mktemp -d)" driver="$(mktemp -d)"
    for run in fresh warm; do
        step "resnet9-first-cuda-$precision-$run" 45 env GINGHAM_CACHE_DIR="$cache" CUDA_CACHE_PATH="$driver" GINGHAM_DEBUG=1 $g bench model resnet9 --device cuda:0 --precision "$precision" --no-torch
    done
    [[ $precision == bf16 ]] && step resnet9-first-cuda-bf16-warm-noprogramcache 45 env GINGHAM_CACHE_DIR="$cache" CUDA_CACHE_PATH="$driver" GINGHAM_PROGRAM_CACHE=0 GINGHAM_DEBUG=1 $g bench model resnet9 --device cuda:0 --precision bf16 --no-torch
done
;;
h)  # where the fresh-machine CUDA suite spends its time past 95% (stops 32 and 33 ran out of
    # time there, 250 and 430 s, with no failure; stop 34 found the one test that waited for
    # its 600 s deadline): the NVRTC worker tests' tracebacks, the suite verbose with a stack
    # dump of any test running past 45 s, then the tests that never finished (collected minus
    # reported)
step tests-nvrtc-workers 60 python3 -m pytest -q -p no:cacheprovider -p no:warnings --tb=short tests/devices/test_nvrtc_workers.py
step tests-cuda-verbose 400 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 15 -v -p no:cacheprovider -p no:warnings -o faulthandler_timeout=45 tests -k "cuda and not resnet18"
grep -a -E "Timeout \(|^  File .*(tests/|gingham/)" "$out/tests-cuda-verbose.log" | head -60
# Test ids hold spaces (parameter ids): the whole rest of the line, less a faulthandler
# "Timeout" that follows it; sorted in one locale for comm.
python3 -m pytest --collect-only -q -p no:cacheprovider -p no:warnings tests -k "cuda and not resnet18" 2>/dev/null | grep "::" | LC_ALL=C sort -u > "$out/collected.txt"
grep -a -o -E "(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) tests/.*" "$out/tests-cuda-verbose.log" | sed -E 's/^[A-Z]+ //; s/ +Timeout \(.*$//; s/ +$//' | LC_ALL=C sort -u > "$out/finished.txt"
echo "== never finished"; LC_ALL=C comm -23 "$out/collected.txt" "$out/finished.txt" | head -40
;;
d)  # after stop 34: the CUDA suite (its stall and the FMA tolerance fixed), then fp32
    # ResNet-9 tuned once, kernels only: which tiled products the search gave the K-step
    # unroll (the report's schedules), the step untuned and tuned
cuda_tests 320
step resnet9-fp32-untuned 50 $g bench model resnet9 --device cuda:0 --torch-compile off --json "$out/resnet9-fp32-untuned.json"
step tune-resnet9-fp32 160 $g tune model resnet9 --device cuda:0 --budget 1 --only kernels --quiet
echo "== tuned schedules with the K-step unroll"; grep -a "unrolled" "$out/tune-resnet9-fp32.log"
step resnet9-fp32-tuned 50 $g bench model resnet9 --device cuda:0 --torch-compile off --json "$out/resnet9-fp32-tuned.json"
;;
rows)  # stop 36: the H100 row's figures stop 35 left out: ResNet-9 bf16 and ResNet-18 beside
    # PyTorch (eager and torch.compile), NVIDIA OpenCL's op targets against gingham's CUDA
step resnet9-bf16-cuda 150 $g bench model resnet9 --device cuda:0 --precision bf16 --steps 20 --json "$out/resnet9-bf16-cuda.json"
step ops-opencl 80 $g bench ops --device opencl:0 --only gemm,conv --dtype fp32 --gemm-sizes 4096 --torch-compile off --json "$out/ops-opencl.json"
step ops-cuda-fp32 60 $g bench ops --device cuda:0 --only gemm,conv --dtype fp32 --gemm-sizes 4096 --torch-compile off --json "$out/ops-cuda-fp32.json"
step resnet18-fp32-cuda 100 $g bench model resnet18 --device cuda:0 --steps 10 --torch-compile off --json "$out/resnet18-fp32-cuda.json"
step resnet18-bf16-cuda 100 $g bench model resnet18 --device cuda:0 --precision bf16 --steps 10 --torch-compile off --json "$out/resnet18-bf16-cuda.json"
;;
closing)  # stop 35's closing run: the CUDA suite, fresh first epochs (fp32 twice, with the
    # compile threads' CPU in the timeline; bf16 once), the all-devices table, the op targets
    # (CUDA, then NVIDIA OpenCL's: stop 38)
lscpu | grep -E "Model name|Thread|Core|Socket" > "$out/lscpu.log"
cuda_tests 120
for run in "fp32 1" "fp32 2" "bf16 1"; do
    read -r precision round <<< "$run"
    step "resnet9-first-cuda-$precision-r$round" 45 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" python3 tools/timeline.py -- $g bench model resnet9 --device cuda:0 --precision "$precision" --no-torch
done
step all-devices 240 $g bench model story resnet9 --all-devices --quick --torch-compile off --json "$out/all-devices.json"
step ops-cuda 100 $g bench ops --device cuda:0 --only gemm,conv --dtype fp32,bf16 --gemm-sizes 4096,8192 --torch-compile off --json "$out/ops-cuda.json"
step ops-opencl 80 $g bench ops --device opencl:0 --only gemm,conv --dtype fp32 --gemm-sizes 4096 --torch-compile off --json "$out/ops-opencl.json"
;;
archive)  # stop 37: a warm cache carried to a fresh "machine" (new gingham and driver caches):
    # ResNet-9's first epoch fresh, then after `gingham cache import` of the first run's export
lscpu | grep -E "Model name|Thread|Core|Socket" > "$out/lscpu.log"
step tests-archive 60 env GINGHAM_CACHE_DIR=/tmp/gingham-test-cache python3 -m pytest -n 8 -q -p no:cacheprovider -p no:warnings tests/test_cache_archive.py
for precision in bf16 fp32; do
    warm="$(mktemp -d)"; fresh="$(mktemp -d)"
    step "resnet9-$precision-fresh" 60 env GINGHAM_CACHE_DIR="$warm" CUDA_CACHE_PATH="$(mktemp -d)" python3 tools/timeline.py -- $g bench model resnet9 --device cuda:0 --precision "$precision" --no-torch
    step "export-$precision" 30 env GINGHAM_CACHE_DIR="$warm" $g cache export "$out/resnet9-$precision.tar.gz"
    step "import-$precision" 30 env GINGHAM_CACHE_DIR="$fresh" $g cache import "$out/resnet9-$precision.tar.gz"
    step "resnet9-$precision-imported" 60 env GINGHAM_CACHE_DIR="$fresh" CUDA_CACHE_PATH="$(mktemp -d)" python3 tools/timeline.py -- $g bench model resnet9 --device cuda:0 --precision "$precision" --no-torch
    rm -f "$out/resnet9-$precision.tar.gz"
done
;;
ocl-archive)  # stop 38: a warm cache imported where the driver's cache is cold, on NVIDIA
    # OpenCL (whose binaries are PTX, compiled again as they load): the workers building
    # pieces from the back (processes) against this process alone (threads), then the floor
drv="$(mktemp -d)"; warm="$(mktemp -d)"
step resnet9-opencl-fresh 60 env GINGHAM_CACHE_DIR="$warm" CUDA_CACHE_PATH="$drv" GINGHAM_DEBUG=1 $g bench model resnet9 --device opencl:0 --no-torch
step export-opencl 30 env GINGHAM_CACHE_DIR="$warm" $g cache export "$out/resnet9-opencl.tar.gz"
for round in 1 2; do
    for mode in processes threads; do
        cache="$(mktemp -d)"
        GINGHAM_CACHE_DIR="$cache" $g cache import "$out/resnet9-opencl.tar.gz" > /dev/null
        step "resnet9-opencl-imported-$mode-r$round" 60 env GINGHAM_CACHE_DIR="$cache" CUDA_CACHE_PATH="$(mktemp -d)" GINGHAM_OPENCL_BUILD=$mode GINGHAM_DEBUG=1 $g bench model resnet9 --device opencl:0 --no-torch
    done
done
cache="$(mktemp -d)"
GINGHAM_CACHE_DIR="$cache" $g cache import "$out/resnet9-opencl.tar.gz" > /dev/null
step resnet9-opencl-imported-warm-driver 60 env GINGHAM_CACHE_DIR="$cache" CUDA_CACHE_PATH="$drv" GINGHAM_DEBUG=1 $g bench model resnet9 --device opencl:0 --no-torch
rm -f "$out/resnet9-opencl.tar.gz"
;;
j)  # after mode q: NVIDIA OpenCL fp32 fresh then warm, CUDA fp32 fresh twice more (the
    # spread of the fresh figure), the story net beside eager PyTorch (step unchanged?)
cache="$(mktemp -d)"
for run in fresh warm; do
    step "resnet9-first-opencl-fp32-$run" 50 env GINGHAM_CACHE_DIR="$cache" GINGHAM_DEBUG=1 $g bench model resnet9 --device opencl:0 --no-torch
done
for round in 2 3; do
    step "resnet9-first-cuda-fp32-fresh-r$round" 40 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" $g bench model resnet9 --device cuda:0 --no-torch
done
step story-cuda 60 $g bench model story --device cuda:0 --steps 20 --torch-compile off --json "$out/story-cuda.json"
;;
host)  # stop 41: the GPU host's own CPU (AMX, where it has it: bf16 weight gradients on the
    # tiles), then fresh fp32 first epochs on CUDA three times (their spread between hosts)
step cpu-flags 10 bash -c 'grep -o -w -E "amx_tile|amx_bf16|avx512_bf16" /proc/cpuinfo | sort | uniq -c; python3 -m gingham devices --json | grep -A2 features'
step tests-amx 120 python3 -m pytest -n 8 -q -p no:cacheprovider -p no:warnings tests/compiler/test_tiling_amx.py tests/compiler/test_tiling_cpu.py
step ops-cpu-bf16 90 $g bench ops --device cpu --only gemm,conv --dtype bf16 --gemm-sizes 1024,2048 --torch-compile off --json "$out/ops-cpu-bf16.json"
step ops-cpu-bf16-fma 60 env GINGHAM_AMX=0 $g bench ops --device cpu --only conv --dtype bf16 --torch-compile off
step resnet9-cpu-bf16 120 $g bench model resnet9 --device cpu --precision bf16 --quick --torch-compile off --json "$out/resnet9-cpu-bf16.json"
for round in 1 2 3; do
    step "resnet9-first-cuda-fp32-r$round" 40 env GINGHAM_CACHE_DIR="$(mktemp -d)" CUDA_CACHE_PATH="$(mktemp -d)" GINGHAM_DEBUG=1 $g bench model resnet9 --device cuda:0 --no-torch
done
;;
closing41)  # stop 41's closing run: the GPU host's CPU on AMX (tests, bf16 ops and ResNet-9),
    # then the all-devices table
step tests-amx 120 python3 -m pytest -n 8 -q -p no:cacheprovider -p no:warnings tests/compiler/test_tiling_amx.py tests/compiler/test_tiling_cpu.py
step ops-cpu-bf16 90 $g bench ops --device cpu --only gemm,conv --dtype bf16 --gemm-sizes 1024,2048 --torch-compile off --json "$out/ops-cpu-bf16.json"
step resnet9-cpu-bf16 120 $g bench model resnet9 --device cpu --precision bf16 --quick --torch-compile off --json "$out/resnet9-cpu-bf16.json"
step all-devices 300 $g bench model story resnet9 --all-devices --quick --torch-compile off --json "$out/all-devices.json"
;;
esac
