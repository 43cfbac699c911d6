"""Discovery and selection on whatever this machine has (no hard-coded device list)."""

from __future__ import annotations

import shutil
import time

import pytest

from gingham import devices
from gingham.config import get_config, write_config_file
from gingham.devices import (BACKENDS, DeviceInfo, default_device_id, get_device,
                             list_devices, unavailable)
from gingham.errors import DeviceError, DeviceNotFoundError


def test_reference_is_always_listed_with_its_info():
    ids = [d.id for d in list_devices()]
    assert "reference" in ids
    info = get_device("reference").info
    assert info.kind == "reference" and info.dialect is None
    assert info.global_memory_bytes > 0


def test_cpu_is_listed_when_a_c_compiler_exists():
    ids = [d.id for d in list_devices()]
    assert ("cpu" in ids) == (shutil.which(get_config().cc) is not None), unavailable()


GCC_VERSION = "cc (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc."


def test_gcc_gets_its_vectoriser_parameter_and_other_compilers_the_flags_as_given():
    # OpenMP's outlined loops lose restrict, and GCC's vectoriser stops at 10 alias checks.
    from gingham.devices.cpu import GCC_FLAGS, _tuned_flags

    flags = ("-O3", "-fopenmp")
    assert _tuned_flags(GCC_VERSION, flags) == flags + GCC_FLAGS
    assert _tuned_flags("Ubuntu clang version 17.0.6", flags) == flags
    assert _tuned_flags("Apple clang version 15.0.0 (clang-1500.3.9.4)", flags) == flags
    # The user's own value stands; the other parameter is still added.
    mine = flags + ("--param=vect-max-version-for-alias-checks=20",)
    assert _tuned_flags(GCC_VERSION, mine) == mine + ("--param=iv-max-considered-uses=20",)
    # AVX-512 hosts: GCC is told to use the 16-float vectors the schedules are built for.
    from gingham.devices.cpu import GCC_AVX512_FLAGS, host_cpu, host_simd_width

    assert _tuned_flags(GCC_VERSION, flags, 16) == flags + GCC_FLAGS + GCC_AVX512_FLAGS
    assert _tuned_flags(GCC_VERSION, flags, 8) == flags + GCC_FLAGS
    assert _tuned_flags("Ubuntu clang version 17.0.6", flags, 16) == flags
    narrow = flags + ("-mprefer-vector-width=256",)
    assert _tuned_flags(GCC_VERSION, narrow, 16) == narrow + GCC_FLAGS
    cpu = get_device("cpu")
    if "Free Software Foundation" in cpu.cc_version:
        # then the vector math functions the toolchain links (test_cpu_vector_math.py)
        tuned = tuple(f for f in cpu.cflags if not f.startswith("-DGH_SIMD_"))
        assert tuned == _tuned_flags(cpu.cc_version, get_config().cflags,
                                     host_simd_width(host_cpu()["flags"]))


def test_every_device_describes_itself():
    for device in list_devices():
        info = device.info
        assert isinstance(info, DeviceInfo) and info.id == device.id
        assert info.name and info.kind in ("cpu", "gpu", "accelerator", "reference")
        assert info.compute_units >= 1 and info.simd_width >= 1
        assert info.global_memory_bytes > 0
        if info.dialect is not None:
            assert info.cache_line_bytes in (32, 64, 128, 256)
            assert info.max_work_group_size >= 1


def test_every_backend_is_either_present_or_explained():
    present = {d.id.split(":")[0] for d in list_devices()}
    missing = unavailable()
    for prefix in BACKENDS:
        assert (prefix in present) != (prefix in missing), (prefix, missing)
        if prefix in missing:
            assert missing[prefix].strip()


def test_get_device_returns_one_object_per_id():
    for device in list_devices():
        assert get_device(device.id) is device
    assert list_devices(refresh=True) == list_devices()
    for device in list_devices():
        assert get_device(device.id) is device


def test_get_device_asks_only_its_own_backend():
    """A fresh process that wants ``reference`` (or ``cpu``) does not start OpenCL or CUDA:
    NVIDIA's OpenCL platform alone took 0.4 s to start on the H200's host."""
    import os
    import subprocess
    import sys

    script = ("import sys\nfrom gingham import devices\n"
              "devices.get_device(sys.argv[1])\n"
              "print(sorted(devices._found), 'pyopencl' in sys.modules)\n")
    for wanted, asked in (("reference", "['reference']"), ("cpu", "['cpu']")):
        if wanted not in [d.id for d in list_devices()]:
            continue
        result = subprocess.run([sys.executable, "-c", script, wanted], capture_output=True,
                                text=True, timeout=120, env=dict(os.environ))
        assert result.stdout.split("\n")[0] == f"{asked} False", result.stdout + result.stderr


def test_discovery_is_fast_once_done():
    list_devices()
    start = time.perf_counter()
    for _ in range(100):
        list_devices()
    assert time.perf_counter() - start < 0.1


def test_gingham_device_selects_the_default(monkeypatch):
    for device in list_devices():
        monkeypatch.setenv("GINGHAM_DEVICE", device.id)
        assert default_device_id() == device.id
        assert get_device() is device


def test_config_file_selects_the_default_and_environment_wins(monkeypatch):
    write_config_file({"device": "reference"})
    assert default_device_id() == "reference"
    if "cpu" in [d.id for d in list_devices()]:
        monkeypatch.setenv("GINGHAM_DEVICE", "cpu")
        assert default_device_id() == "cpu"


def test_best_default_prefers_cuda_then_opencl_gpu_then_cpu():
    found = list_devices()
    cuda = [d.id for d in found if d.info.dialect == "cuda"]
    gpus = [d.id for d in found if d.info.dialect == "opencl" and d.info.kind == "gpu"]
    cpu = [d.id for d in found if d.id == "cpu"]
    assert default_device_id() == (cuda + gpus + cpu + ["reference"])[0]


def test_unknown_id_names_it_and_lists_the_available_ones():
    with pytest.raises(DeviceNotFoundError) as excinfo:
        get_device("tpu:3")
    message = str(excinfo.value)
    assert "tpu:3" in message
    for device in list_devices():
        assert device.id in message


def test_missing_index_is_reported():
    with pytest.raises(DeviceNotFoundError, match="opencl:999"):
        get_device("opencl:999")


@pytest.mark.parametrize("prefix", ["opencl", "cuda"])
def test_missing_runtime_package_says_how_to_install_it(monkeypatch, prefix):
    # Point the backend at a module that does not exist: exactly what a user without
    # pyopencl / cuda-python sees (no device is mocked).
    monkeypatch.setitem(BACKENDS, prefix, ("no_such_runtime_package", prefix))
    try:
        list_devices(refresh=True)
        with pytest.raises(DeviceNotFoundError) as excinfo:
            get_device(f"{prefix}:0")
        assert f"pip install gingham[{prefix}]" in str(excinfo.value)
    finally:
        monkeypatch.undo()
        list_devices(refresh=True)


def test_reference_device_refuses_to_compile():
    reference = get_device("reference")
    with pytest.raises(DeviceError, match="interpretation"):
        reference.compile("void f(void) {}", "f")


def test_cuda_module_imports_without_a_driver():
    # Import-safe wherever cuda-python is installed: with no driver the backend is simply
    # absent. (Without cuda-python, discovery reports the missing package instead.)
    import importlib.util

    try:
        installed = importlib.util.find_spec("cuda.bindings") or importlib.util.find_spec(
            "cuda.cuda")
    except ModuleNotFoundError:  # not even the "cuda" namespace package
        installed = None
    if installed is None:
        assert "pip install gingham[cuda]" in devices.unavailable().get("cuda", "")
        pytest.skip("cuda-python is not installed")
    import gingham.devices.cuda  # noqa: F401

    assert isinstance(devices.unavailable().get("cuda", ""), str)
