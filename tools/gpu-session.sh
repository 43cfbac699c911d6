#!/usr/bin/env bash
# Set up a bare NVIDIA GPU machine (the team's H200 lease) to run gingham, then run a command.
#
#   bash tools/gpu-session.sh python3 -m pytest -n 12 -q tests
#
# The machine has CUDA, PyTorch, cuda-python and NVIDIA's OpenCL driver but no internet, no ICD
# file for that driver and no pyopencl: the wheels travel in .whl/ (ignored by git; fetch them
# with `pip download --only-binary=:all: --python-version 3.12 ... pyopencl pytools siphash24
# platformdirs -d .whl`), and the ICD file is written here.
set -euo pipefail
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gingham-site .whl/*.whl
    export PYTHONPATH="/tmp/gingham-site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
mkdir -p /tmp/gingham-icd
echo libnvidia-opencl.so.1 > /tmp/gingham-icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/gingham-icd
export PYTHONUNBUFFERED=1
python3 -c "from gingham.cli import main; main(['devices'])"
"$@"
