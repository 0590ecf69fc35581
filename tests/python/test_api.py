"""The package's surface: contexts, devices, records, errors, the
in-place use of numpy and DLPack memory, and the GIL released during ops."""

import ctypes
import threading

import locus
import numpy as np
import pytest
from conftest import DEVICES

rng = np.random.default_rng(26)


def test_version_and_library():
    assert locus.version() == "0.3.0"
    assert locus.library_path


def test_struct_mirrors_match_the_library():
    # _check_layout ran at import; this checks it can fail: a mirror one
    # field short is caught by the same comparison.
    from locus import _lib

    class Short(ctypes.Structure):
        _fields_ = _lib.GemmDesc._fields_[:-1]

    room = (ctypes.c_char * 4096)()
    _lib.lib.locus_gemm_desc_init(ctypes.cast(room, ctypes.POINTER(
        _lib.GemmDesc)))
    written = ctypes.c_size_t.from_buffer(room).value
    assert written == ctypes.sizeof(_lib.GemmDesc)
    assert written != ctypes.sizeof(Short)


def test_devices_from_the_api(ctx):
    assert ctx.devices and ctx.devices[0].selector == "cpu"
    for device in ctx.devices:
        assert device.kind in ("cpu", "gpu", "accelerator")
        assert device.name and device.backend
        assert ctx.device(device.selector) is device
    names = {b["name"] for b in ctx.backends()}
    assert "cpu" in names
    assert ctx.devices[0].offers("gemm", "f64")
    assert not ctx.devices[0].offers("reduce", "f16")


def test_unknown_selector_raises_with_status(ctx):
    with pytest.raises(locus.Error) as caught:
        ctx.device("nonsense-backend")
    assert caught.value.status == -2
    assert caught.value.name == "LOCUS_ERROR_INVALID_ARGUMENT"
    assert isinstance(caught.value, locus.InvalidArgumentError)
    assert "nonsense-backend" in caught.value.message


def test_bad_environment_option_is_an_error():
    with pytest.raises(locus.BadEnvironmentError) as caught:
        locus.Context(threads="many", ignore_environment=True)
    assert "many" in caught.value.message


def test_every_status_has_a_class():
    assert locus.SizeOverflowError.status_code == -3
    assert issubclass(locus.NotSupportedError, locus.Error)
    assert len(locus.STATUS_NAMES) >= 17


def test_record_is_a_dict(ctx):
    x = rng.random(33, dtype=np.float32)
    ctx.reduce(x, device="cpu")
    record = ctx.last_record
    assert record["op"] == "reduce" and record["device"] == "cpu"
    assert record["dtype"] == "f32" and record["chosen_by"] == "caller"
    assert record["bytes"] == x.nbytes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce_against_numpy(ctx, device, dtype):
    for n in (1, 7, 1000, 1023):
        x = rng.standard_normal(n).astype(dtype)
        # locus.h: f32 within 1e-6 sum|x|; f64 within u sum|x| + 2u|S| +
        # 4n u^2 sum|x| (u = 2^-53), here 4u sum|x|.
        scale = float(np.sum(abs(x), dtype=np.float64))
        tolerance = (1e-6 if dtype == np.float32 else 4 * 2.0**-53) * scale
        exact = float(np.sum(x.astype(np.longdouble)))
        assert abs(ctx.reduce(x, device=device) - exact) <= tolerance
        assert ctx.reduce(x, "min", device=device) == float(x.min())
        assert ctx.reduce(x, "max", device=device) == float(x.max())


@pytest.mark.parametrize("device", DEVICES)
def test_reduce_nan_and_inf(ctx, device):
    x = rng.random(100, dtype=np.float32)
    x[17] = np.inf
    assert ctx.reduce(x, device=device) == np.inf
    x[40] = -np.inf
    assert np.isnan(ctx.reduce(x, device=device))
    y = rng.random(100, dtype=np.float32)
    y[3] = np.nan
    for op in ("sum", "min", "max"):
        assert np.isnan(ctx.reduce(y, op, device=device))
    big = np.full(4096, 3e38, np.float32)
    assert ctx.reduce(big, device=device) == pytest.approx(4096 * 3e38,
                                                           rel=1e-6)


def test_reduce_of_a_strided_view(ctx):
    x = rng.random((40, 6))
    assert ctx.reduce(x[:, 1]) == pytest.approx(x[:, 1].sum())


def test_reduce_errors(ctx):
    with pytest.raises(locus.Error) as caught:
        ctx.reduce(np.zeros(0, np.float32))
    assert caught.value.status < 0 and caught.value.message
    with pytest.raises(locus.NotSupportedError):
        ctx.reduce(np.ones(8, np.int32))
    with pytest.raises(locus.InvalidArgumentError):
        ctx.reduce(np.ones(8, np.float32), "mean")


def test_gemm_writes_the_array_given_in_place(ctx):
    a = rng.random((9, 4))
    b = rng.random((4, 5))
    c = np.full((9, 5), np.nan)
    address = c.ctypes.data
    result = ctx.gemm(a, b, c)
    assert result is c and c.ctypes.data == address
    np.testing.assert_allclose(c, a @ b, rtol=1e-14)
    # The record counts no host copy of C on the CPU: Locus wrote c itself.
    assert ctx.last_record["bytes_from_device"] == 0


def test_gemm_fortran_c_in_place(ctx):
    a = rng.random((6, 3))
    b = rng.random((3, 8))
    c = np.asfortranarray(np.full((6, 8), np.nan))
    address = c.ctypes.data
    assert ctx.gemm(a, b, c) is c and c.ctypes.data == address
    np.testing.assert_allclose(c, a @ b, rtol=1e-14)


def test_conv2d_out_in_place(ctx):
    x = rng.random((1, 2, 5, 5))
    w = rng.random((3, 2, 3, 3))
    out = np.full((1, 3, 3, 3), np.nan)
    address = out.ctypes.data
    assert ctx.conv2d(x, w, out=out) is out and out.ctypes.data == address
    assert not np.isnan(out).any()


class HostDLPack:
    """An object that is not a numpy array and offers only DLPack (as a
    PyTorch CPU tensor does), over a numpy array's memory."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_inputs_and_output_in_place(ctx):
    a = rng.random((5, 7), dtype=np.float32)
    b = rng.random((7, 4), dtype=np.float32)
    c = np.full((5, 4), np.nan, np.float32)
    result = ctx.gemm(HostDLPack(a), HostDLPack(b), HostDLPack(c))
    assert isinstance(result, HostDLPack) and result.array is c
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    # A new result is a numpy array: usable through DLPack without a copy.
    fresh = ctx.gemm(a, b)
    view = np.from_dlpack(fresh)
    assert view.ctypes.data == fresh.ctypes.data
    assert ctx.reduce(HostDLPack(a)) == pytest.approx(a.sum(dtype=np.float64),
                                                      rel=1e-6)


class DeviceDLPack(HostDLPack):
    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA


def test_dlpack_cuda_claim_over_host_memory_is_refused(ctx):
    """Host memory that says it is CUDA memory goes to
    locus_buffer_wrap_device, which refuses it (CUDA's own check), or,
    without a cuda device, the binding does: never a copy."""
    a = rng.random((3, 3), dtype=np.float32)
    c = np.empty((3, 3), np.float32)
    if "cuda:0" in DEVICES:
        with pytest.raises(locus.InvalidArgumentError) as caught:
            ctx.gemm(DeviceDLPack(a), a, c)
        assert "host memory" in caught.value.message
    else:
        with pytest.raises(locus.Error) as caught:
            ctx.gemm(DeviceDLPack(a), a, c)
        assert caught.value.name == "LOCUS_ERROR_DEVICE_UNAVAILABLE"
        assert "no cuda:0" in caught.value.message


def test_torch_tensors_if_present(ctx):
    torch = pytest.importorskip("torch")
    a = torch.rand(6, 5, dtype=torch.float64)
    b = torch.rand(5, 4, dtype=torch.float64)
    c = torch.full((6, 4), float("nan"), dtype=torch.float64)
    assert ctx.gemm(a, b, c) is c
    assert torch.allclose(c, a @ b)
    # CUDA tensors: test_dlpack_cuda.py.


def test_gemm_shape_errors(ctx):
    a = rng.random((4, 3))
    with pytest.raises(locus.InvalidArgumentError) as caught:
        ctx.gemm(a, a)
    assert caught.value.status == -2 and "inner sizes differ" in str(
        caught.value)
    with pytest.raises(locus.InvalidArgumentError):
        ctx.gemm(a, a.T, np.zeros((3, 3)))
    with pytest.raises(locus.InvalidArgumentError):
        ctx.gemm(a, a.T.astype(np.float32))
    # c overlapping a: Locus refuses the aliasing itself.
    square = rng.random((4, 4))
    with pytest.raises(locus.InvalidArgumentError) as caught:
        ctx.gemm(square, rng.random((4, 4)), square)
    assert "overlap" in caught.value.message


def test_conv2d_errors_come_from_locus(ctx):
    x = rng.random((1, 2, 3, 3))
    w = rng.random((4, 2, 5, 5))  # larger than the padded input
    with pytest.raises(locus.Error) as caught:
        ctx.conv2d(x, w)
    assert caught.value.status == -2
    assert caught.value.message.startswith("locus_conv2d_output_shape")
    with pytest.raises(locus.InvalidArgumentError):
        ctx.conv2d(x, rng.random((4, 3, 1, 1)))


def test_two_threads_run_ops_at_once(ctx):
    """Thread A runs a gemm; thread B, running Python (reduces) meanwhile,
    must see A's C partly written: some elements done, some still NaN.
    That state exists only while A is inside locus_gemm, so B ran Python
    code and a Locus op during A's call: the GIL was released. Were it
    held, B could only ever see C all NaN or all written (no timing is
    measured; the op is repeated until B catches it, a bounded number of
    times)."""
    n = 384
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    x = rng.random(1000, dtype=np.float32)
    seen_partial = threading.Event()
    go, finished = threading.Event(), threading.Event()
    errors = []

    def run_gemms():
        try:
            for _ in range(200):
                if seen_partial.is_set():
                    break
                c.fill(np.nan)
                go.set()
                ctx.gemm(a, b, c, device="cpu")
        except Exception as error:  # reported by the main thread
            errors.append(error)
        finally:
            finished.set()

    def watch():
        go.wait()
        while not finished.is_set():
            ctx.reduce(x, device="cpu")  # a Locus op of this thread
            nan = np.isnan(c)
            if nan.any() and not nan.all():
                seen_partial.set()
                return

    threads = [threading.Thread(target=run_gemms), threading.Thread(
        target=watch)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert seen_partial.is_set(), "thread B never ran during a gemm"
