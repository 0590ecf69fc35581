"""Arrays in and out: numpy arrays and DLPack objects seen as memory that
locus_buffer_wrap adopts in place, and 2-D arrays seen as BLAS matrices
(a row-major matrix with a leading dimension, or the transpose of one).
"""

import numpy as np

from . import _lib

# DLPack device types (dlpack.h): kDLCPU, kDLCUDA, kDLCUDAHost, kDLROCM,
# kDLCUDAManaged.
_DL_CPU = 1
_DL_CUDA = 2
_DL_CUDA_HOST = 3
_DL_NAMES = {2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
             10: "ROCm", 13: "CUDA managed"}

DTYPES = {
    np.dtype(np.float32): 1,  # LOCUS_DTYPE_F32
    np.dtype(np.float64): 2,  # LOCUS_DTYPE_F64
    np.dtype(np.float16): 4,  # LOCUS_DTYPE_F16
}


def as_array(obj, what, writable=False):
    """A numpy array over obj's own memory: obj itself when it is a numpy
    array, numpy's view of a DLPack object on the CPU (a PyTorch CPU
    tensor, ...). Device memory is refused: locus.h has no call that
    wraps a device pointer (locus_buffer_wrap adopts host memory), so the
    only way in would be a copy, which this binding does not hide."""
    if isinstance(obj, np.ndarray):
        array = obj
    elif hasattr(obj, "__dlpack__"):
        device_type, device_id = obj.__dlpack_device__()
        if device_type != _DL_CPU:
            kind = _DL_NAMES.get(int(device_type), f"type {device_type}")
            raise _lib.binding_error(
                "LOCUS_ERROR_NOT_SUPPORTED",
                f"{what}: a {kind} array (DLPack device {int(device_type)}:"
                f"{device_id}) cannot be used in place: locus.h wraps host "
                "memory only (locus_buffer_wrap), so device memory would "
                "need a copy; pass a host array (tensor.cpu(), "
                "cupy.asnumpy) instead (docs/PYTHON.md, DLPack)",
            )
        array = np.from_dlpack(obj)
    else:
        raise _lib.binding_error(
            "LOCUS_ERROR_INVALID_ARGUMENT",
            f"{what}: expected a numpy array or an object with __dlpack__, "
            f"got {type(obj).__name__}",
        )
    if array.dtype not in DTYPES:
        raise _lib.binding_error(
            "LOCUS_ERROR_NOT_SUPPORTED",
            f"{what}: dtype {array.dtype} is not a Locus dtype "
            "(float32, float64, float16)",
        )
    if writable and not array.flags.writeable:
        raise _lib.binding_error(
            "LOCUS_ERROR_INVALID_ARGUMENT", f"{what}: the array is read-only"
        )
    return array


class Wrapped:
    """locus_buffer_wrap over [address, address + nbytes), destroyed on
    exit (which copies a device's result back to the memory, locus.h)."""

    def __init__(self, context, address, nbytes, what):
        self.handle = _lib.c_void()
        if nbytes == 0:
            return  # an empty matrix: NULL, as locus.h allows
        _lib.check(
            _lib.lib.locus_buffer_wrap(
                context, address, nbytes, _lib.ctypes.byref(self.handle)
            ),
            f"{what}: locus_buffer_wrap",
        )

    def close(self):
        if self.handle:
            _lib.lib.locus_buffer_destroy(self.handle)
            self.handle = _lib.c_void()


def contiguous_span(array):
    """Address and byte length of a C-contiguous array."""
    return array.ctypes.data, array.nbytes


class Matrix:
    """A 2-D array as a BLAS operand: stored (row-major with leading
    dimension ld) as the array itself (transposed False) or as its
    transpose (transposed True: a Fortran-ordered array, or a .T view).
    Anything else (negative or non-unit inner strides) is copied into a
    C-contiguous array first; self.copied says so."""

    def __init__(self, array):
        if array.ndim != 2:
            raise _lib.binding_error(
                "LOCUS_ERROR_INVALID_ARGUMENT",
                f"expected a 2-D array, got {array.ndim}-D",
            )
        self.array = array
        self.copied = False
        rows, cols = array.shape
        item = array.itemsize
        s0, s1 = array.strides
        layout = None
        if rows == 0 or cols == 0:
            layout = (False, max(cols, 1))
        elif (cols == 1 or s1 == item) and (rows == 1 or (
                s0 > 0 and s0 % item == 0 and s0 // item >= cols)):
            layout = (False, cols if rows == 1 else s0 // item)
        elif (rows == 1 or s0 == item) and (cols == 1 or (
                s1 > 0 and s1 % item == 0 and s1 // item >= rows)):
            layout = (True, rows if cols == 1 else s1 // item)
        if layout is None:
            self.array = np.ascontiguousarray(array)
            self.copied = True
            layout = (False, cols)
        self.transposed, self.ld = layout
        # The stored matrix's rows and columns.
        stored_rows, stored_cols = (cols, rows) if self.transposed else (
            rows, cols)
        self.address = self.array.ctypes.data
        self.nbytes = 0 if rows == 0 or cols == 0 else (
            (stored_rows - 1) * self.ld + stored_cols) * item
