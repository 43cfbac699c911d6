"""Real kernels on every discovered compiled device, compared with NumPy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from device_kernels import BROKEN, SCALE_OFFSET, VECTOR_ADD, download, launch_sizes, upload
from gingham.errors import DeviceError, DeviceMemoryError, KernelCompileError
from gingham.tune.device_model import device_model

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("n", [1, 1000, 4099])
def test_vector_add(compiled_device, n):
    dev = compiled_device
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    kernel = dev.compile(VECTOR_ADD[dev.info.dialect], "vector_add")
    A, B, C = upload(dev, a), upload(dev, b), dev.alloc(a.nbytes)
    global_size, local_size = launch_sizes(dev, n)
    dev.launch(kernel, [C, A, B, np.int64(n)], global_size, local_size)
    dev.synchronize()
    np.testing.assert_array_equal(download(dev, C, a), a + b)


def test_int32_and_float_scalars(compiled_device):
    dev = compiled_device
    n = 777  # not a multiple of the work-group size
    a = np.linspace(-3, 3, n, dtype=np.float32)
    kernel = dev.compile(SCALE_OFFSET[dev.info.dialect], "scale_offset")
    A, OUT = upload(dev, a), dev.alloc(a.nbytes)
    global_size, local_size = launch_sizes(dev, n)
    dev.launch(kernel, [OUT, A, np.int32(-5), np.float32(0.25), np.int32(n)],
               global_size, local_size)
    expected = a * np.float32(0.25) + np.float32(-5)
    np.testing.assert_allclose(download(dev, OUT, a), expected, rtol=1e-6, atol=1e-6)


def test_python_scalars_follow_the_documented_types(compiled_device):
    # int -> int64 (long long), float -> float32 (float)
    dev = compiled_device
    n = 100
    a = np.arange(n, dtype=np.float32)
    A, B, C = upload(dev, a), upload(dev, a), dev.alloc(a.nbytes)
    kernel = dev.compile(VECTOR_ADD[dev.info.dialect], "vector_add")
    dev.launch(kernel, [C, A, B, n], *launch_sizes(dev, n))
    np.testing.assert_array_equal(download(dev, C, a), 2 * a)
    with pytest.raises(TypeError):
        dev.launch(kernel, [C, A, B, "100"], *launch_sizes(dev, n))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int32, np.uint16])
def test_copy_round_trip(compiled_device, dtype):
    dev = compiled_device
    data = (np.arange(3 * 5 * 7) % 120).astype(dtype).reshape(3, 5, 7)
    buffer = upload(dev, data)
    np.testing.assert_array_equal(download(dev, buffer, data), data)
    # a prefix of a larger buffer
    big = dev.alloc(data.nbytes * 2)
    dev.copy_in(big, data)
    np.testing.assert_array_equal(download(dev, big, data), data)


def test_copy_rejects_misuse(compiled_device):
    dev = compiled_device
    buffer = dev.alloc(16)
    with pytest.raises(ValueError, match="contiguous"):
        dev.copy_in(buffer, np.zeros((4, 4), np.float32)[:, :1])
    with pytest.raises(ValueError, match="bytes"):
        dev.copy_in(buffer, np.zeros(5, np.float32))
    buffer.free()
    buffer.free()  # idempotent
    with pytest.raises(DeviceError, match="freed"):
        dev.copy_in(buffer, np.zeros(4, np.float32))
    kernel = dev.compile(VECTOR_ADD[dev.info.dialect], "vector_add")
    live = dev.alloc(16)
    with pytest.raises(DeviceError, match="freed"):  # never a dangling pointer
        dev.launch(kernel, [live, live, buffer, np.int64(4)], *launch_sizes(dev, 4))


def test_stats_count_copies_launches_and_compiles(compiled_device):
    dev = compiled_device
    n = 300
    a = np.ones(n, np.float32)
    source = VECTOR_ADD[dev.info.dialect] + f"\n/* stats test {id(dev)} */\n"
    if dev.clocks_launches:
        # The device's context may have started measuring its model on a thread (a GPU's
        # does, at its first use in this process): its launches count in the same stats.
        device_model(dev)
    before = dev.stats.snapshot()
    kernel = dev.compile(source, "vector_add")
    A, B, C = upload(dev, a), upload(dev, a), dev.alloc(a.nbytes)
    for _ in range(3):
        dev.launch(kernel, [C, A, B, np.int64(n)], *launch_sizes(dev, n))
    download(dev, C, a)
    assert dev.compile(source, "vector_add") is kernel  # the in-process cache
    delta = dev.stats - before
    assert (delta.copies_in, delta.bytes_in) == (2, 2 * a.nbytes)
    assert (delta.copies_out, delta.bytes_out) == (1, a.nbytes)
    assert delta.launches == 3
    assert delta.compiles + delta.cache_hits == 2 and delta.cache_hits >= 1


def test_compile_error_has_the_compiler_output_and_the_saved_source(compiled_device):
    dev = compiled_device
    source = BROKEN[dev.info.dialect]
    with pytest.raises(KernelCompileError) as excinfo:
        dev.compile(source, "broken")
    error = excinfo.value
    assert "undeclared_thing" in error.log  # the compiler's own message
    assert "undeclared_thing" in str(error)
    assert error.source_path and error.source_path in str(error)
    assert Path(error.source_path).read_text() == source


def test_missing_entry_is_a_compile_error(compiled_device):
    dev = compiled_device
    with pytest.raises(KernelCompileError, match="no_such_function"):
        dev.compile(VECTOR_ADD[dev.info.dialect], "no_such_function")


def test_out_of_memory_raises_device_memory_error(compiled_device):
    dev = compiled_device
    with pytest.raises(DeviceMemoryError) as excinfo:
        dev.alloc(2 * dev.info.global_memory_bytes)
    assert dev.id in str(excinfo.value)
    assert isinstance(excinfo.value, MemoryError)
    # still usable afterwards
    small = dev.alloc(64)
    dev.copy_in(small, np.zeros(16, np.float32))


def test_opencl_running_out_by_many_allocations(compiled_device):
    # Allocate the device's largest buffer until its global memory is spent. On a GPU this
    # really fills the memory; PoCL maps host memory lazily, so it only spends address space.
    dev = compiled_device
    if dev.info.dialect != "opencl":
        pytest.skip("filling memory is tested on OpenCL, which reports it per allocation")
    chunk = dev.max_alloc_bytes
    limit = dev.info.global_memory_bytes // chunk + 2
    held = []
    with pytest.raises(DeviceMemoryError):
        for _ in range(limit):
            held.append(dev.alloc(chunk))
    for buffer in held:
        buffer.free()
    assert dev.allocated_bytes < chunk  # released again
    dev.alloc(chunk).free()


_CHILD = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[3])
from device_kernels import VECTOR_ADD, launch_sizes
from gingham.devices import get_device

dev = get_device(sys.argv[1])
# The device model's micro-benchmarks (measured by the first process, on a GPU in the
# background from the context's creation) compile and load kernels of their own: count after.
from gingham.tune.device_model import device_model
device_model(dev)
compiles, cache_hits = dev.stats.compiles, dev.stats.cache_hits
kernel = dev.compile(VECTOR_ADD[dev.info.dialect] + sys.argv[2], "vector_add")
n = 1000
a = np.arange(n, dtype=np.float32)
A, B, C = dev.alloc(a.nbytes), dev.alloc(a.nbytes), dev.alloc(a.nbytes)
dev.copy_in(A, a); dev.copy_in(B, a)
dev.launch(kernel, [C, A, B, np.int64(n)], *launch_sizes(dev, n))
out = np.empty_like(a); dev.copy_out(C, out)
print(json.dumps({"compiles": dev.stats.compiles - compiles,
                  "cache_hits": dev.stats.cache_hits - cache_hits,
                  "correct": bool((out == 2 * a).all())}))
"""


def _run_child(device_id: str, cache_dir: Path, tag: str) -> dict:
    env = dict(os.environ, GINGHAM_CACHE_DIR=str(cache_dir),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", _CHILD, device_id, tag,
                             str(Path(__file__).parent)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_second_process_compiles_nothing(compiled_device, tmp_path):
    tag = "\n/* second process test */\n"
    first = _run_child(compiled_device.id, tmp_path, tag)
    second = _run_child(compiled_device.id, tmp_path, tag)
    assert first == {"compiles": 1, "cache_hits": 0, "correct": True}
    assert second == {"compiles": 0, "cache_hits": 1, "correct": True}

    # A damaged binary is detected, discarded and rebuilt, never loaded.
    entries = [p for p in (tmp_path / compiled_device.cache_namespace).rglob("*")
               if p.is_file() and not p.name.startswith(".")]
    for entry in entries:
        data = bytearray(entry.read_bytes())
        data[len(data) // 2] ^= 0xFF
        entry.write_bytes(bytes(data))
    third = _run_child(compiled_device.id, tmp_path, tag)
    assert third == {"compiles": 1, "cache_hits": 0, "correct": True}


_SHARED_REVERSE = """
extern "C" __global__ void shared_reverse(float* out, const float* in, int n_shared) {
    extern __shared__ float tile[];
    int base = blockIdx.x * blockDim.x, i = threadIdx.x;
    tile[i] = in[base + i];
    tile[n_shared - 1 - i] = 1.0f;  // touches the far end: the whole size must exist
    __syncthreads();
    out[base + i] = tile[blockDim.x - 1 - i];
}
"""


def test_cuda_dynamic_shared_memory_above_48_kib(compiled_device):
    dev = compiled_device
    if dev.info.dialect != "cuda":
        pytest.skip("dynamic shared memory is a CUDA launch parameter")
    shared_bytes = min(100 * 1024, dev.info.local_memory_bytes)
    block = 128
    x = np.arange(4 * block, dtype=np.float32)
    kernel = dev.compile(_SHARED_REVERSE, "shared_reverse")
    IN, OUT = upload(dev, x), dev.alloc(x.nbytes)
    dev.launch(kernel, [OUT, IN, np.int32(shared_bytes // 4)], (x.size,), (block,),
               shared_bytes=shared_bytes)
    expected = x.reshape(4, block)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(download(dev, OUT, x), expected)
