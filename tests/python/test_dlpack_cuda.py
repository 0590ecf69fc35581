"""CUDA memory through DLPack (docs/PYTHON.md, DLPack): PyTorch CUDA
tensors (and CuPy arrays where CuPy is installed) go to
locus_buffer_wrap_device without copies, the ops run on the tensor's
device, outputs are written in place (the same object, the same
data_ptr) and checked against torch in float64. Skipped only where
neither torch with CUDA nor CuPy is present."""

import locus
import numpy as np
import pytest
from conftest import DEVICES

try:
    import torch
    TORCH_CUDA = torch.cuda.is_available()
except ImportError:
    torch, TORCH_CUDA = None, False
try:
    import cupy
    CUPY = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:
    cupy, CUPY = None, False

if not TORCH_CUDA and not CUPY:
    pytest.skip("neither torch with CUDA nor cupy with a GPU is present: "
                "the CUDA DLPack path has nothing to take",
                allow_module_level=True)

DTYPES = ["float32", "float64"]
# Relative to sum |a||b| per element (f32 runs in fp32 math, the default).
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def test_the_context_has_cuda(ctx):
    assert "cuda:0" in DEVICES, (
        f"a GPU is present but the context's devices are {DEVICES}: is "
        "LOCUS_PLUGIN_PATH set to the cuda module's folder?")


def no_copies(ctx):
    record = ctx.last_record
    assert record["device"] == "cuda:0", record
    assert record["bytes_to_device"] == 0, record
    assert record["bytes_from_device"] == 0, record


def close_to_product(got, a, b, dtype):
    a64, b64 = a.double().cpu(), b.double().cpu()
    want = a64 @ b64
    scale = a64.abs() @ b64.abs()
    error = (got.double().cpu() - want).abs()
    assert bool((error <= TOLERANCE[dtype] * scale + 1e-30).all()), (
        f"max error {float(error.max())}")


needs_torch = pytest.mark.skipif(not TORCH_CUDA, reason="no torch with CUDA")


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_in_place_on_the_tensors_device(ctx, dtype):
    t = getattr(torch, dtype)
    a = torch.rand(67, 33, dtype=t, device="cuda") - 0.5
    b = torch.rand(33, 45, dtype=t, device="cuda") - 0.5
    c = torch.full((67, 45), float("nan"), dtype=t, device="cuda")
    address = c.data_ptr()
    assert ctx.gemm(a, b, c) is c
    assert c.data_ptr() == address and c.is_cuda
    no_copies(ctx)
    close_to_product(c, a, b, dtype)
    # beta: C = 2 a b + C, read from the same device memory.
    before = c.clone()
    ctx.gemm(a, b, c, alpha=2.0, beta=1.0)
    no_copies(ctx)
    want = 2 * (a.double() @ b.double()) + before.double()
    assert torch.allclose(c.double(), want, rtol=1e-4 if dtype == "float32"
                          else 1e-11, atol=1e-5)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_new_result_is_a_cuda_tensor(ctx, dtype):
    t = getattr(torch, dtype)
    a = torch.rand(17, 9, dtype=t, device="cuda")
    b = torch.rand(9, 23, dtype=t, device="cuda")
    c = ctx.gemm(a, b)
    assert isinstance(c, torch.Tensor) and c.is_cuda and c.dtype == t
    assert c.device == a.device and tuple(c.shape) == (17, 23)
    no_copies(ctx)
    close_to_product(c, a, b, dtype)
    # And it goes on through DLPack without a copy.
    assert torch.from_dlpack(c).data_ptr() == c.data_ptr()


@needs_torch
def test_gemm_views_in_place_and_non_contiguous_refused(ctx):
    base = torch.rand(40, 60, dtype=torch.float64, device="cuda")
    b = torch.rand(30, 11, dtype=torch.float64, device="cuda")
    # A transposed view and a column slice (rows strided): in place.
    a_t = base[:30, :25].t()           # 25 x 30, a .T view
    c = torch.full((25, 11), float("nan"), dtype=torch.float64, device="cuda")
    assert ctx.gemm(a_t, b, c) is c
    no_copies(ctx)
    close_to_product(c, a_t, b, "float64")
    a_rows = base[:7, 5:35]            # 7 x 30, leading dimension 60
    c2 = ctx.gemm(a_rows, b)
    close_to_product(c2, a_rows, b, "float64")
    # Strided in both dimensions: a copy of device memory would be needed.
    with pytest.raises(locus.NotSupportedError) as caught:
        ctx.gemm(base[::2, ::2][:, :30], b)
    assert "contiguous" in caught.value.message


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_on_the_device(ctx, dtype):
    t = getattr(torch, dtype)
    x = torch.rand(100003, dtype=t, device="cuda") - 0.25
    for op, want in (("sum", x.double().sum()), ("min", x.min()),
                     ("max", x.max())):
        got = ctx.reduce(x, op)
        no_copies(ctx)
        assert got == pytest.approx(float(want), rel=1e-5 if op == "sum"
                                    and dtype == "float32" else 1e-12), op
    with pytest.raises(locus.NotSupportedError):
        ctx.reduce(x[::2])


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_conv2d_out_in_place(ctx, dtype):
    import torch.nn.functional as F
    t = getattr(torch, dtype)
    x = torch.rand(2, 6, 13, 11, dtype=t, device="cuda") - 0.5
    w = torch.rand(8, 3, 3, 3, dtype=t, device="cuda") - 0.5
    bias = torch.rand(8, dtype=t, device="cuda")
    want = F.conv2d(x.double().cpu(), w.double().cpu(), bias.double().cpu(),
                    stride=2, padding=1, groups=2).relu()
    out = torch.full(tuple(want.shape), float("nan"), dtype=t, device="cuda")
    address = out.data_ptr()
    try:
        got = ctx.conv2d(x, w, bias, stride=2, padding=1, groups=2,
                         activation="relu", out=out)
    except locus.NotSupportedError as refused:
        pytest.skip(f"not offered on cuda:0 in {dtype}: {refused.message}")
    assert got is out and out.data_ptr() == address
    no_copies(ctx)
    scale = F.conv2d(x.double().abs().cpu(), w.double().abs().cpu(),
                     bias.double().abs().cpu(), stride=2, padding=1, groups=2)
    error = (out.double().cpu() - want).abs()
    assert bool((error <= TOLERANCE[dtype] * 10 * scale + 1e-30).all()), (
        f"max error {float(error.max())}")
    fresh = ctx.conv2d(x, w, bias, stride=2, padding=1, groups=2,
                       activation="relu")
    assert isinstance(fresh, torch.Tensor) and fresh.is_cuda
    assert torch.allclose(fresh, out)


@needs_torch
def test_cuda_tensors_on_the_cpu_device(ctx):
    """device="cpu" with CUDA tensors: Locus copies them down, computes on
    the CPU, and C's device memory holds the result when gemm returns."""
    a = torch.rand(19, 8, dtype=torch.float64, device="cuda")
    b = torch.rand(8, 5, dtype=torch.float64, device="cuda")
    c = torch.full((19, 5), float("nan"), dtype=torch.float64, device="cuda")
    assert ctx.gemm(a, b, c, device="cpu") is c
    record = ctx.last_record
    assert record["device"] == "cpu"
    assert record["bytes_to_device"] == c.numel() * 8, record
    close_to_product(c, a, b, "float64")


@needs_torch
def test_host_and_cuda_operands_mixed(ctx):
    a = np.random.default_rng(3).random((12, 7))
    b = torch.rand(7, 9, dtype=torch.float64, device="cuda")
    c = ctx.gemm(a, b)  # on b's device; a goes up
    assert isinstance(c, torch.Tensor) and c.is_cuda
    assert ctx.last_record["device"] == "cuda:0"
    close_to_product(c, torch.from_numpy(a), b, "float64")


@pytest.mark.skipif(not CUPY, reason="no cupy")
def test_cupy_arrays(ctx):
    a = cupy.random.rand(31, 17).astype(cupy.float32)
    b = cupy.random.rand(17, 13).astype(cupy.float32)
    c = cupy.full((31, 13), cupy.nan, dtype=cupy.float32)
    assert ctx.gemm(a, b, c) is c
    no_copies(ctx)
    want = cupy.asnumpy(a).astype(np.float64) @ cupy.asnumpy(b).astype(
        np.float64)
    np.testing.assert_allclose(cupy.asnumpy(c), want, rtol=1e-5)
    fresh = ctx.gemm(a, b)
    assert isinstance(fresh, cupy.ndarray)
