"""Writes Triton autotune-cache fixtures with Triton's own code.

Runs the released `triton.runtime.autotuner.Autotuner` (its `run` ->
`check_disk_cache` -> `FileCacheManager.put` path) on a real `@triton.jit`
kernel, so every `*.autotune.json` written is what that Triton release
writes. Only what needs a GPU is stood in for: the benchmark (`do_bench`,
returning fixed timings, or raising Triton's `OutOfResources` as a config
that does not fit would), the driver's target query, and the kernel launch.

Usage (no GPU needed):
    python3 -m venv /tmp/venv-triton && /tmp/venv-triton/bin/pip install triton==3.9.0
    /tmp/venv-triton/bin/python tools/peer-fixtures/triton_fixtures.py \
        crates/formats/tests/fixtures/peers/triton-3.9.0
"""

import os
import shutil
import sys
import tempfile


class Dtype:
    """Stands in for a torch dtype: Triton records `str(arg.dtype)`."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name


class Tensor:
    """Stands in for a tensor argument: all the autotuner reads is `.dtype`."""

    def __init__(self, dtype):
        self.dtype = Dtype(dtype)


def setup(cache_dir):
    """Triton's real autotuner over two real kernels, caching in `cache_dir`,
    with the GPU parts stood in. Returns `(plan, calls)`: `plan` is the list
    of timings the stand-in benchmark hands out (None raises OutOfResources),
    `calls` the tuned calls as `(timings, tuned_kernel, args)`."""
    os.environ["TRITON_CACHE_DIR"] = cache_dir
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.runtime import autotuner
    from triton.runtime.errors import OutOfResources

    class ActiveDriver:
        """The driver's target query, as an H100 answers it."""

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

    class Driver:
        active = ActiveDriver()

    autotuner.driver = Driver()

    class Backend:
        def hash(self):
            return "ptxas-stand-in-sm90"

    import triton.compiler.compiler as compiler

    compiler.make_backend = lambda target: Backend()

    # Timings per call, in benchmark order; None raises OutOfResources.
    plan = []

    def do_bench(kernel_call, quantiles):
        assert quantiles == (0.5, 0.2, 0.8)
        t = plan.pop(0)
        if t is None:
            raise OutOfResources(300000, 232448, "shared memory")
        return t

    configs = [
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8,
                      num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4,
                      num_stages=4),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=8,
                      num_stages=5, maxnreg=128),
    ]

    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, ACTIVATION: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        tl.store(c_ptr + pid, tl.load(a_ptr + pid) + tl.load(b_ptr + pid))

    @triton.jit
    def scale_kernel(x_ptr, n, scale, EVEN: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        tl.store(x_ptr + pid, tl.load(x_ptr + pid) * scale)

    # The launch itself needs a GPU: stand it in (the autotuner's disk
    # cache is written before it).
    for jit_fn in (matmul_kernel, scale_kernel):
        jit_fn.run = lambda *args, **kwargs: None

    tuned_mm = triton.autotune(configs=configs, key=["M", "N", "K", "ACTIVATION"],
                               do_bench=do_bench, cache_results=True)(matmul_kernel)
    f16, bf16, f32 = Tensor("torch.float16"), Tensor("torch.bfloat16"), Tensor("torch.float32")
    # (timings per config, M, N, K, activation, dtypes)
    runs = [
        ([[0.0123456789, 0.0120001, 0.0131], [0.02, 0.019, 0.021], None], 1024, 512, 4096, "relu",
         (f16, f16, f16)),
        ([[1.1, 1.0, 1.2000000000000002], [1.1, 0.9, 1.3], [0.7071067811865476, 0.7, 0.8]], 8192,
         8192, 0, "", (bf16, bf16, f32)),
        ([[3e-05, 2.5e-05, 3.5e-05], [1.0, 1.0, 1.0], [3e-05, 2.4e-05, 9.9e-05]], 1, 7, 65536,
         "gelu,tanh", (f32, f32, f32)),
    ]
    calls = [(timings, tuned_mm, (a, b, c, m, n, k, act)) for timings, m, n, k, act, (a, b, c) in runs]

    scale_configs = [triton.Config({"BLOCK": 256}, num_warps=2), triton.Config({"BLOCK": 1024}, num_warps=4)]
    tuned_scale = triton.autotune(configs=scale_configs, key=["n", "scale", "EVEN"], do_bench=do_bench,
                                  cache_results=True)(scale_kernel)
    for timings, n, scale, even in [([0.25, 0.125], 4096, 1.5, True), ([[0.5, 0.4, 0.6], [0.5, 0.4, 0.6]], 3, 0.1, False)]:
        calls.append((timings, tuned_scale, (Tensor("torch.float16"), n, scale, even)))
    return plan, calls


def main(out_dir):
    cache_dir = tempfile.mkdtemp(prefix="triton-fixtures-")
    plan, calls = setup(cache_dir)
    for timings, tuned, args in calls:
        plan[:] = timings
        tuned.cache.clear()
        tuned.run(*args)
        assert not plan
    import triton

    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    written = 0
    for root, _, files in os.walk(cache_dir):
        for name in files:
            if name.endswith(".autotune.json"):
                rel = os.path.relpath(os.path.join(root, name), cache_dir)
                os.makedirs(os.path.join(out_dir, os.path.dirname(rel)), exist_ok=True)
                shutil.copyfile(os.path.join(root, name), os.path.join(out_dir, rel))
                written += 1
    shutil.rmtree(cache_dir)
    print(f"triton {triton.__version__}: {written} autotune files in {out_dir}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "crates/formats/tests/fixtures/peers/triton-3.9.0")
