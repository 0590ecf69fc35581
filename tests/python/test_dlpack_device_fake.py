"""The binding's CUDA DLPack path without a GPU: objects that say they are
kDLCUDA memory (over 256-byte aligned numpy memory) on a context whose
"cuda" backend is the unit tests' fake module, whose device memory is
heap memory and whose wrap takes 256-byte aligned pointers
(tests/unit/modules/fake_device). So the capsule parsing, the device
choice, the in-place outputs and the refusals run in CI; the real GPU
path is test_dlpack_cuda.py's. LOCUS_TEST_FAKE_MODULE_DIR names the
module's folder (tests/python/meson.build)."""

import os

import locus
import numpy as np
import pytest

FAKE_DIR = os.environ.get("LOCUS_TEST_FAKE_MODULE_DIR")
if not FAKE_DIR:
    pytest.skip("LOCUS_TEST_FAKE_MODULE_DIR is not set (meson sets it)",
                allow_module_level=True)

rng = np.random.default_rng(26)


class FakeCuda:
    """DLPack over numpy memory, claiming CUDA device 0, as a CUDA
    tensor would be (numpy refuses stream=1, as a producer may)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA


def aligned(shape, dtype, fill=None):
    """A C-contiguous array whose data starts on a 256-byte boundary (the
    fake's test of "its" memory)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    raw = np.empty(count * dtype.itemsize + 256, np.uint8)
    start = (-raw.ctypes.data) % 256
    array = raw[start:start + count * dtype.itemsize].view(dtype).reshape(
        shape)
    array[...] = rng.random(shape) - 0.5 if fill is None else fill
    return array


@pytest.fixture(scope="module")
def fake_ctx():
    with locus.Context(backends="cpu,cuda", plugin_path=FAKE_DIR,
                       ignore_environment=True) as context:
        assert "cuda:0" in [d.selector for d in context.devices]
        yield context


def test_gemm_in_place_on_the_device(fake_ctx):
    a, b = aligned((13, 5), np.float32), aligned((5, 7), np.float32)
    c = aligned((13, 7), np.float32, np.nan)
    out = FakeCuda(c)
    assert fake_ctx.gemm(FakeCuda(a), FakeCuda(b), out) is out
    record = fake_ctx.last_record
    assert record["device"] == "cuda:0"
    assert record["bytes_to_device"] == 0 and record["bytes_from_device"] == 0
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5)


def test_transposed_view_in_place(fake_ctx):
    a = aligned((5, 13), np.float32)  # used as its transpose
    b = aligned((5, 7), np.float32)
    c = aligned((13, 7), np.float32, np.nan)
    fake_ctx.gemm(FakeCuda(a.T), FakeCuda(b), FakeCuda(c))
    assert fake_ctx.last_record["bytes_to_device"] == 0
    np.testing.assert_allclose(c, a.T.astype(np.float64) @ b, rtol=1e-5)


def test_cpu_device_writes_back(fake_ctx):
    a, b = aligned((13, 5), np.float32), aligned((5, 7), np.float32)
    c = aligned((13, 7), np.float32, np.nan)
    fake_ctx.gemm(FakeCuda(a), FakeCuda(b), FakeCuda(c), device="cpu")
    record = fake_ctx.last_record
    assert record["device"] == "cpu"
    assert record["bytes_from_device"] == a.nbytes + b.nbytes
    assert record["bytes_to_device"] == c.nbytes
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5)


def test_reduce_and_conv2d(fake_ctx):
    x = aligned((1000,), np.float32)
    assert fake_ctx.reduce(FakeCuda(x)) == pytest.approx(
        x.sum(dtype=np.float64), rel=1e-5)
    assert fake_ctx.last_record["device"] == "cuda:0"
    images = aligned((1, 2, 6, 5), np.float32)
    filters = aligned((3, 2, 3, 3), np.float32)
    out = aligned((1, 3, 6, 5), np.float32, np.nan)
    result = FakeCuda(out)
    assert fake_ctx.conv2d(FakeCuda(images), FakeCuda(filters), padding=1,
                           out=result) is result
    assert fake_ctx.last_record["bytes_to_device"] == 0
    want = fake_ctx.conv2d(images, filters, padding=1, device="cpu")
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_refusals(fake_ctx):
    a = aligned((8, 8), np.float32)
    b = aligned((8, 8), np.float32)
    # Strides in both dimensions: a copy would be needed.
    with pytest.raises(locus.NotSupportedError) as caught:
        fake_ctx.gemm(FakeCuda(a[::2, ::2]), FakeCuda(b[:4, :4]),
                      FakeCuda(aligned((4, 4), np.float32)))
    assert "contiguous" in caught.value.message
    with pytest.raises(locus.NotSupportedError):
        fake_ctx.reduce(FakeCuda(a[:, ::2]))
    # No library to make an output with.
    with pytest.raises(locus.NotSupportedError) as caught:
        fake_ctx.gemm(FakeCuda(a), FakeCuda(b))
    assert "c=" in caught.value.message
    # Memory the backend says is not its own (misaligned for the fake).
    raw = aligned((65,), np.float32)
    c = FakeCuda(raw[1:].reshape(8, 8))
    with pytest.raises(locus.InvalidArgumentError) as caught:
        fake_ctx.gemm(FakeCuda(a), FakeCuda(b), c)
    assert "not memory of fake device" in caught.value.message
