"""Arrays in and out: numpy arrays and DLPack objects seen as memory that
locus_buffer_wrap adopts in place (CUDA memory: locus_buffer_wrap_device),
and 2-D arrays seen as BLAS matrices (a row-major matrix with a leading
dimension, or the transpose of one).
"""

import ctypes

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


# dlpack.h's DLTensor, the head of the DLManagedTensor a "dltensor"
# capsule points to.
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_DL_FLOAT = 2
_DL_DTYPES = {(_DL_FLOAT, 16): np.dtype(np.float16),
              (_DL_FLOAT, 32): np.dtype(np.float32),
              (_DL_FLOAT, 64): np.dtype(np.float64)}


class DeviceArray:
    """A CUDA array (a PyTorch CUDA tensor, a CuPy array) seen through
    DLPack: address (its device memory), shape, strides in bytes (as
    numpy's), dtype and the CUDA ordinal. Holds the capsule, and so the
    producer's memory, for as long as it lives; the capsule is not
    consumed, so its own destructor calls the producer's deleter.

    The capsule is asked for with stream=1 (DLPack: the legacy default
    stream): the producer orders its pending work on the array before that
    stream, and locus_buffer_wrap_device orders Locus's stream after it,
    so an op never reads the array before the kernels that wrote it."""

    def __init__(self, obj, what):
        try:
            capsule = obj.__dlpack__(stream=1)
        except (TypeError, ValueError, RuntimeError, BufferError):
            # A producer that takes no stream (None: the legacy default
            # stream assumed, DLPack says).
            capsule = obj.__dlpack__()
        tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
        self.obj = obj
        self._capsule = capsule
        self.ordinal = int(tensor.device.device_id)
        self.ndim = int(tensor.ndim)
        self.shape = tuple(int(tensor.shape[i]) for i in range(self.ndim))
        key = (tensor.dtype.code, tensor.dtype.bits)
        if tensor.dtype.lanes != 1 or key not in _DL_DTYPES:
            raise _lib.binding_error(
                "LOCUS_ERROR_NOT_SUPPORTED",
                f"{what}: DLPack dtype code {key[0]}, {key[1]} bits, "
                f"{tensor.dtype.lanes} lanes is not a Locus dtype (float32, "
                "float64, float16)")
        self.dtype = _DL_DTYPES[key]
        self.itemsize = self.dtype.itemsize
        if tensor.strides:
            elements = [int(tensor.strides[i]) for i in range(self.ndim)]
        else:  # NULL: compact row-major
            elements, step = [], 1
            for extent in reversed(self.shape):
                elements.insert(0, step)
                step *= max(extent, 1)
        self.strides = tuple(e * self.itemsize for e in elements)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.address = (tensor.data or 0) + int(tensor.byte_offset)
        expected, step = True, self.itemsize
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent != 1 and stride != step:
                expected = False
            step *= extent
        self.c_contiguous = expected
        self.nbytes = self.size * self.itemsize

    def require_contiguous(self, what):
        """This array, when C-contiguous: device memory is never copied
        behind the caller's back."""
        if not self.c_contiguous:
            raise _lib.binding_error(
                "LOCUS_ERROR_NOT_SUPPORTED",
                f"{what}: a non-contiguous CUDA array (shape {self.shape}, "
                f"strides {self.strides} bytes) would need a copy of device "
                "memory, which the binding does not make behind your back; "
                "pass tensor.contiguous() (cupy.ascontiguousarray)")
        return self


def contiguous(array, what):
    """A C-contiguous version of array: numpy's copy where needed, a CUDA
    array only as it is (DeviceArray.require_contiguous)."""
    if isinstance(array, DeviceArray):
        return array.require_contiguous(what)
    return np.ascontiguousarray(array)


def new_like(template, shape, dtype, zero):
    """A new CUDA array of the template's library (torch or cupy) on its
    device, for an output the caller did not pass."""
    library = type(template.obj).__module__.split(".")[0]
    if library == "torch":
        import torch
        make = torch.zeros if zero else torch.empty
        return make(shape, dtype=getattr(torch, dtype.name),
                    device=template.obj.device)
    if library == "cupy":
        import cupy
        with cupy.cuda.Device(template.ordinal):
            return (cupy.zeros if zero else cupy.empty)(shape, dtype)
    raise _lib.binding_error(
        "LOCUS_ERROR_NOT_SUPPORTED",
        f"cannot make an output array like a {type(template.obj).__name__} "
        "(torch and cupy only): pass the output (c=, out=)")


def as_array(obj, what, writable=False):
    """A numpy array over obj's own memory: obj itself when it is a numpy
    array, numpy's view of a DLPack object on the CPU (a PyTorch CPU
    tensor, ...); for a DLPack object in CUDA memory, a DeviceArray over
    that memory (locus_buffer_wrap_device adopts it). Other device memory
    is refused: the only way in would be a copy, which this binding does
    not hide."""
    if isinstance(obj, np.ndarray):
        array = obj
    elif hasattr(obj, "__dlpack__"):
        device_type, device_id = obj.__dlpack_device__()
        if device_type == _DL_CUDA and _lib.HAS_WRAP_DEVICE:
            return DeviceArray(obj, what)
        if device_type != _DL_CPU:
            kind = _DL_NAMES.get(int(device_type), f"type {device_type}")
            why = ("this liblocus predates locus_buffer_wrap_device"
                   if device_type == _DL_CUDA else
                   "Locus adopts host memory and CUDA device memory only")
            raise _lib.binding_error(
                "LOCUS_ERROR_NOT_SUPPORTED",
                f"{what}: a {kind} array (DLPack device {int(device_type)}:"
                f"{device_id}) cannot be used in place: {why}, so it would "
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
    """locus_buffer_wrap over [address, address + nbytes), or
    locus_buffer_wrap_device on `device` (a device handle) for CUDA
    memory, destroyed on exit (which copies a result computed elsewhere
    back to the memory, locus.h)."""

    def __init__(self, context, address, nbytes, what, device=None):
        self.handle = _lib.c_void()
        if nbytes == 0:
            return  # an empty matrix: NULL, as locus.h allows
        if device is not None:
            _lib.check(
                _lib.lib.locus_buffer_wrap_device(
                    context, device, address, nbytes,
                    _lib.ctypes.byref(self.handle)),
                f"{what}: locus_buffer_wrap_device",
            )
            return
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
            if isinstance(array, DeviceArray):
                array.require_contiguous("gemm")
            self.array = np.ascontiguousarray(array)
            self.copied = True
            layout = (False, cols)
        self.transposed, self.ld = layout
        # The stored matrix's rows and columns.
        stored_rows, stored_cols = (cols, rows) if self.transposed else (
            rows, cols)
        self.device_array = isinstance(self.array, DeviceArray)
        self.address = (self.array.address if self.device_array else
                        self.array.ctypes.data)
        self.nbytes = 0 if rows == 0 or cols == 0 else (
            (stored_rows - 1) * self.ld + stored_cols) * item
