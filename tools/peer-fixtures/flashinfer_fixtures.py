"""Writes FlashInfer autotuner-cache fixtures with FlashInfer's own code.

Imports only the autotuner modules of an unpacked flashinfer-python wheel
(`flashinfer/autotuner/*.py`, `flashinfer/autotune_cache.py` where the
release has it, `flashinfer/tactics_blocklist.py`, `flashinfer/version.py`) and runs their real
`AutoTuner.save_configs` / `load_configs`, so every file written is what
that FlashInfer release writes. The cache keys are made by FlashInfer's own
`_get_cache_key` / `_find_nearest_profile` from real `TuningConfig`s
(bucketed dims, `-1` for constraint-pinned dims, `(0,)` for a non-tensor
input) and the runners' extras; 0.7.x policies and selection records by its
`_profiling_policy` and `_selection_record`.

Stood in (sys.modules): `torch` (only its environment *queries*: CUDA and
cuDNN versions, the device name, and dtype objects whose repr is
`torch.bfloat16`), its cuBLAS version probe, `tqdm`, the cuDNN frontend's version, and the parts of
the `flashinfer` package the autotuner imports that need a GPU or a build
(`flashinfer.utils`, `flashinfer.tllm_utils`, `flashinfer.jit.*`). No
FlashInfer code is copied here.

Usage (no GPU, no torch needed):
    pip download flashinfer-python==0.7.4 --no-deps -d /tmp/fi && cd /tmp/fi && unzip -q *.whl
    python3 tools/peer-fixtures/flashinfer_fixtures.py /tmp/fi \
        crates/formats/tests/fixtures/peers/flashinfer-0.7.4

    (same with 0.6.15 into .../flashinfer-0.6.15)

Also importable: `load_tuner(wheel_dir)` gives FlashInfer's `AutoTuner`
class with the same stand-ins (python/tests/test_peers_flashinfer.py uses it
to read ranktune's export with FlashInfer's `load_configs`).
"""

import importlib
import json
import logging
import os
import sys
import types

GPU_NAME = "NVIDIA B200"
CUDA_VERSION = "12.9"
CUDNN_BACKEND = 91002
CUDNN_FRONTEND = "1.16.0"
CUTE_DSL = (
    "cute-dsl-cache-v3;cpython-312-x86_64-linux-gnu;"
    "torch==2.9.1:5f0a1b;apache-tvm-ffi==0.1.4:c2d9e0;nvidia-cutlass-dsl==4.3.1:9b7e44"
)


class Dtype:
    """Stands in for a torch dtype: the autotuner's keys hold its repr."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"

    __str__ = __repr__


class Device:
    """Stands in for `torch.device` (only named in annotations)."""


class Tensor:
    """Stands in for `torch.Tensor` (only named in annotations here)."""


def _torch_stand_in():
    torch = types.ModuleType("torch")
    torch.__path__ = []
    torch.Tensor = Tensor
    torch.device = Device
    torch.dtype = Dtype
    for name in ("bfloat16", "float16", "float32", "float8_e4m3fn", "uint8", "int32", "int64"):
        setattr(torch, name, Dtype(name))
    torch.version = types.SimpleNamespace(cuda=CUDA_VERSION, __version__="2.9.1")
    torch.__version__ = "2.9.1"
    cudnn = types.SimpleNamespace(version=lambda: CUDNN_BACKEND, is_available=lambda: True)
    torch.backends = types.SimpleNamespace(cudnn=cudnn)
    cuda = types.ModuleType("torch.cuda")
    cuda.get_device_name = lambda device=None: GPU_NAME
    cuda.current_device = lambda: 0
    cuda.is_initialized = lambda: False
    cuda.is_available = lambda: True
    cuda.is_current_stream_capturing = lambda: False
    cuda.Event = object
    cuda.Stream = object
    torch.cuda = cuda
    distributed = types.ModuleType("torch.distributed")
    distributed.ProcessGroup = object
    distributed.is_initialized = lambda: False
    torch.distributed = distributed
    return {"torch": torch, "torch.cuda": cuda, "torch.distributed": distributed}


def _package_stand_ins(wheel_dir):
    pkg = types.ModuleType("flashinfer")
    pkg.__path__ = [os.path.join(wheel_dir, "flashinfer")]
    utils = types.ModuleType("flashinfer.utils")
    utils.next_positive_power_of_2 = lambda x: 1 if x < 1 else 1 << (x - 1).bit_length()
    utils.is_confidential_compute = lambda: False
    utils.get_globaltimer_kernel = lambda: None
    tllm = types.ModuleType("flashinfer.tllm_utils")
    tllm.delay_kernel = lambda *a, **k: None
    tllm.get_trtllm_utils_module = lambda: None
    jit = types.ModuleType("flashinfer.jit")
    jit.__path__ = []
    core = types.ModuleType("flashinfer.jit.core")
    core.logger = logging.getLogger("flashinfer")
    dsl = types.ModuleType("flashinfer.jit.cute_dsl_core")
    dsl._get_cute_dsl_version = lambda: CUTE_DSL
    tqdm = types.ModuleType("tqdm")
    tqdm.tqdm = lambda it=None, *a, **k: it
    cudnn = types.ModuleType("cudnn")
    cudnn.__version__ = CUDNN_FRONTEND
    cudnn.backend_version = lambda: CUDNN_BACKEND
    return {
        "flashinfer": pkg,
        "flashinfer.utils": utils,
        "flashinfer.tllm_utils": tllm,
        "flashinfer.jit": jit,
        "flashinfer.jit.core": core,
        "flashinfer.jit.cute_dsl_core": dsl,
        "tqdm": tqdm,
        "cudnn": cudnn,
    }


def load_tuner(wheel_dir):
    """FlashInfer's real autotuner module from an unpacked wheel at
    `wheel_dir`, with the stand-ins above in sys.modules."""
    for name in list(sys.modules):
        if name == "flashinfer" or name.startswith("flashinfer."):
            del sys.modules[name]
    sys.modules.update(_torch_stand_in())
    sys.modules.update(_package_stand_ins(os.path.abspath(wheel_dir)))
    at = importlib.import_module("flashinfer.autotuner.autotuner")
    # cuBLAS's version is probed from the loaded library, then from any
    # installed nvidia-cublas package (torch's wheel brings one), before
    # torch.version.cuda: stand in for the probe too, so the environment is
    # the one the fixtures were written in, whatever this machine has.
    if hasattr(at, "_get_cublas_version"):
        at._get_cublas_version = lambda: f"cuda-toolkit-{CUDA_VERSION}"
    return at


def make_runner(at, name):
    """A TunableRunner subclass named `name` (FlashInfer keys by class name)."""

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        raise RuntimeError("never run: the fixtures need no kernel")

    def get_valid_tactics(self, inputs, profile, **kwargs):
        return []

    return type(name, (at.TunableRunner,), {"forward": forward, "get_valid_tactics": get_valid_tactics})()


class Fill:
    """Puts tuned results into FlashInfer's AutoTuner the way its tuning loop
    records them, with the keys its own methods make."""

    def __init__(self, at, tuner):
        self.at, self.tuner = at, tuner
        self.v07 = hasattr(at.AutoTuner, "_selection_record")

    def config(self, dynamic=(), constraints=(), **kw):
        at = self.at
        specs = tuple(
            at.DynamicTensorSpec(
                input_idx=(i,), dim_idx=(d,), gen_tuning_buckets=buckets,
                map_to_tuning_buckets=at.make_bucket_mapper(tuple(buckets)),
            )
            for i, d, buckets in dynamic
        )
        cons = tuple(
            at.ConstraintSpec(input_idx=i, dim_idx=d, infer_shape=lambda shapes: 0)
            for i, d in constraints
        )
        fields = at.TuningConfig.__dataclass_fields__
        return at.TuningConfig(
            dynamic_tensor_specs=specs, constraint_specs=cons,
            **{k: v for k, v in kw.items() if k in fields},
        )

    def put(self, op, runner, shapes, config, tactic, extras=(), times=None, winner=0,
            policy=True):
        at, tuner = self.at, self.tuner
        key = at.AutoTuner._get_cache_key(op, runner, tuple(map(tuple, shapes)), config, extras)
        if self.v07:
            tuner.profiling_cache[key] = (tactic, None)
            if policy:
                tuner._profiling_cache_policies[(None, key)] = at.AutoTuner._profiling_policy(config)
                if times is not None:
                    tuner._profiling_cache_selections[(None, key)] = (
                        at.AutoTuner._selection_record(times, winner)
                    )
        else:
            tuner.profiling_cache[key] = (0, tactic, None)


def tune_many(fill, seed):
    """Tuned results over several ops, shapes and runners (`seed` varies the
    tactics and timings between files)."""
    at = fill.at
    R = lambda name: make_runner(at, name)  # noqa: E731
    cudnn, cutlass, trtllm = R("CudnnFp4GemmRunner"), R("CutlassFp4GemmRunner"), R("TrtllmFp4GemmRunner")
    moe, moe_other = R("MoERunner"), R("MoERunner")
    dsl, bmm = R("CuteDslMoEWrapper"), R("BmmFp8Runner")
    gemm_cfg = fill.config(dynamic=[(0, 0, (1, 8, 64, 512, 4096))], constraints=[(2, 0)],
                           use_cuda_graph=True, cuda_graph_profile_replays=3)
    moe_cfg = fill.config(dynamic=[(0, 0, (1, 16, 256, 2048))], constraints=[(1, 0), (3, 0)],
                          use_cold_l2_cache=True)
    chain_cfg = fill.config(dynamic=[(0, 0, (8, 128))], use_cold_l2_cache=True,
                            use_cuda_graph=True, cold_chain_launches=4,
                            value_aware_input_indices=(0,))
    ind_cfg = fill.config(dynamic=[(0, 0, (16, 1024))], use_cuda_graph=True,
                          use_cuda_graph_individual_timing=True)
    plain = fill.config()
    bf16, fp8 = at.torch.bfloat16, at.torch.float8_e4m3fn
    for i, m in enumerate((1, 8, 64, 512, 4096, 1000)):
        n, k = 4608 + 64 * seed, 7168
        shapes = [(m, k // 2), (n, k // 2), (m, k // 16), (n, k // 16)]
        fill.put("fp4_gemm", cudnn, shapes, gemm_cfg,
                 [seed + i, [["CUDNN_KNOB_TYPE_TILE_SIZE", 3], ["CUDNN_KNOB_TYPE_SPLIT_K", i % 2]]],
                 extras=(bf16, True), times=[0.012 + 0.001 * i, 0.0131 + i / 7, float("inf")])
        fill.put("fp4_gemm", cutlass, shapes, gemm_cfg, (seed * 7 + i) % 23,
                 extras=(bf16, False), times=[0.02 + i / 3.0, 0.019 + i / 3.0], winner=0)
        fill.put("fp4_gemm", trtllm, shapes, gemm_cfg, [128, 256, i % 3 == 0],
                 extras=(at.torch.float16, None), times=[0.5 / (i + 1)])
    for i, m in enumerate((1, 16, 256, 2048, 3000)):
        shapes = [(m, 7168), (m, 256), (256, 4096, 3584), (0,), (m, 8)]
        tactic = [[seed + i, 2], [i, 7 - seed]]
        fill.put("trtllm::fused_moe::gemm1", moe, shapes, moe_cfg, tactic,
                 extras=(bf16, fp8, "swiglu", 2.5, (8, 1)), times=[0.3 + i, 0.31 + i, 0.29 + i],
                 winner=1)
        fill.put("trtllm::fused_moe::gemm2", moe_other, shapes, moe_cfg, -1,
                 extras=(bf16, "it's-gated", None), times=[0.7 * (i + 1)])
    for i, m in enumerate((8, 128, 33)):
        fill.put("cute_dsl_fused_moe_nvfp4", dsl, [(m, 4096), (m, 8), (0,)], chain_cfg,
                 (128, 64 * (i + 1), 1, "persistent", True, None), extras=("nvfp4", 1.0e-05),
                 times=[1.25e-4 * (i + 1), 3.5e-4])
    for i, m in enumerate((16, 1024)):
        fill.put("bmm_fp8", bmm, [(m, 64, 128), (m, 128, 64)], ind_cfg, seed + i,
                 extras=(fp8, bf16), times=[0.001 * (i + 1), 0.0012 * (i + 1)])
    # No provenance (its policy unknown): saved as a 2-element value.
    fill.put("gemm_fp8_nt_groupwise", R("CutlassFp8GroupwiseRunner"), [(5, 256), (256, 256)],
             plain, [1, 2, 1], policy=False)


def write(wheel_dir, out_dir):
    at = load_tuner(wheel_dir)
    version = importlib.import_module("flashinfer.version").__version__
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):
        if name.endswith(".json"):
            os.remove(os.path.join(out_dir, name))
    first = os.path.join(out_dir, "tuned.json")
    tuner = at.AutoTuner()
    fill = Fill(at, tuner)
    tune_many(fill, seed=0)
    if hasattr(tuner, "publish_namespaced_records"):
        tuner.publish_namespaced_records(
            "ranktune_fixture", {"moe_hint": {"experts": 256, "top_k": 8}, "note": "it's a record"}
        )
    tuner.save_configs(first)
    # A second process in the same environment: loads the file, tunes more
    # (some keys again), saves: FlashInfer merges into the file.
    merged = os.path.join(out_dir, "merged.json")
    with open(first) as f, open(merged, "w") as g:
        g.write(f.read())
    tuner2 = at.AutoTuner()
    assert tuner2.load_configs(merged)
    fill2 = Fill(at, tuner2)
    tune_many(fill2, seed=1)
    tuner2.save_configs(merged)
    for path in (first, merged):
        with open(path) as f:
            doc = json.load(f)
        print(f"flashinfer {version}: {path}: {sum(not k.startswith('_') for k in doc)} entries")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: flashinfer_fixtures.py <unpacked flashinfer-python wheel dir> <out dir>")
    write(sys.argv[1], sys.argv[2])
