"""Locus from Python: contexts, devices and the reduce, gemm and conv2d
ops on numpy arrays and DLPack objects (on the host, or CUDA tensors and
arrays on their GPU), used in place.

    import numpy as np, locus
    with locus.Context() as ctx:
        a = np.random.rand(300, 200).astype(np.float32)
        b = np.random.rand(200, 100).astype(np.float32)
        c = ctx.gemm(a, b)                 # a @ b, computed by Locus
        total = ctx.reduce(c)              # float
        print(ctx.last_record["device"])   # where it ran

docs/PYTHON.md has the whole story: copies, DLPack, threads, errors.
"""

import ctypes
import json
import threading

import numpy as np

from . import _lib
from ._arrays import (DTYPES, DeviceArray, Matrix, Wrapped, as_array,
                      contiguous, new_like)
from ._lib import Error, STATUS_NAMES, error_for, library_path

__all__ = ["Context", "Device", "Error", "version", "library_path"]

# Every status's exception class, e.g. locus.InvalidArgumentError.
for _status, _cls in _lib._classes.items():
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)

__version__ = "0.3.0"


def version():
    """The loaded liblocus's version, "major.minor.patch"."""
    return _lib.lib.locus_version_string().decode()


_REDUCE_OPS = {"sum": 0, "min": 1, "max": 2}
_ALGORITHMS = {"auto": 0, "im2col": 1, "mec": 2, "implicit_gemm": 3,
               "winograd": 4}
_ACTIVATIONS = {None: 0, "none": 0, "relu": 1, "relu6": 2}
_LAYOUTS = {"NCHW": 0, "NHWC": 1}
_OP_KINDS = {"reduce": 0, "gemm": 1, "conv2d": 2}
_DTYPE_NAMES = {"f32": 1, "float32": 1, "f64": 2, "float64": 2,
                "bf16": 3, "bfloat16": 3, "f16": 4, "float16": 4}


def _text(raw):
    return raw.decode(errors="replace")


def _invalid(message):
    return _lib.binding_error("LOCUS_ERROR_INVALID_ARGUMENT", message)


def _pair(value, what):
    if isinstance(value, int):
        return value, value
    value = tuple(value)
    if len(value) != 2:
        raise _invalid(f"conv2d: {what} takes one int or two, got {value}")
    return value


class Device:
    """One device of a context (owned by it). selector, backend, name,
    vendor, version, kind ("cpu", "gpu", "accelerator"), memory_bytes,
    compute_units, pci_bus_id, nearest_numa_mask."""

    def __init__(self, context, handle):
        self._context = context
        self._handle = handle
        info = _lib.DeviceInfo()
        _lib.lib.locus_device_info_init(ctypes.byref(info))
        _lib.check(_lib.lib.locus_device_get_info(handle, ctypes.byref(info)),
                   "locus_device_get_info")
        self.selector = _text(info.selector)
        self.backend = _text(info.backend)
        self.name = _text(info.name)
        self.vendor = _text(info.vendor)
        self.version = _text(info.version)
        self.kind = _text(_lib.lib.locus_device_kind_str(info.kind))
        self.memory_bytes = info.memory_bytes
        self.compute_units = info.compute_units
        self.pci_bus_id = _text(info.pci_bus_id)
        self.nearest_numa_mask = info.nearest_numa_mask

    def offers(self, op, dtype="f32", algorithm="auto"):
        """locus_device_offers: whether the device offers the op kind
        ("reduce", "gemm", "conv2d") in this dtype (and, for conv2d, this
        algorithm). A conv2d feature (groups, dilation, bias, NHWC...)
        the device lacks shows only when the op is asked for: the op then
        raises locus.NotSupportedError."""
        if isinstance(dtype, np.dtype) or isinstance(dtype, type):
            dtype = np.dtype(dtype).name
        offered = ctypes.c_int()
        _lib.check(_lib.lib.locus_device_offers(
            self._handle, _OP_KINDS[op],
            _ALGORITHMS[algorithm] if op == "conv2d" else 0,
            _DTYPE_NAMES[dtype], ctypes.byref(offered)), "locus_device_offers")
        return bool(offered.value)

    def __repr__(self):
        return f"<locus.Device {self.selector} ({self.name})>"


class Context:
    """A locus_context. Keyword options take precedence over the LOCUS_*
    variable of the same name (locus_context_options): device, backends,
    threads, numa, strict, log, record, topology, plugin_path, cpu_isa,
    calibration, ignore_environment. Use it as a context manager, or call
    close(). Several threads may use one context at once."""

    def __init__(self, *, ignore_environment=False, **options):
        opts = _lib.ContextOptions()
        _lib.lib.locus_context_options_init(ctypes.byref(opts))
        names = {f for f, _ in _lib.ContextOptions._fields_} - {
            "struct_size", "ignore_environment"}
        self._keep = []
        for key, value in options.items():
            if key not in names:
                raise TypeError(f"Context: unknown option {key!r}")
            if value is not None:
                raw = str(value).encode()
                self._keep.append(raw)
                setattr(opts, key, raw)
        opts.ignore_environment = 1 if ignore_environment else 0
        handle = _lib.c_void()
        _lib.check(_lib.lib.locus_context_create(ctypes.byref(opts),
                                                 ctypes.byref(handle)),
                   "locus_context_create")
        self._handle = handle
        self._local = threading.local()
        count = ctypes.c_size_t()
        _lib.check(_lib.lib.locus_device_count(handle, ctypes.byref(count)),
                   "locus_device_count")
        self.devices = []
        for index in range(count.value):
            device = _lib.c_void()
            _lib.check(_lib.lib.locus_device_get(handle, index,
                                                 ctypes.byref(device)),
                       "locus_device_get")
            self.devices.append(Device(self, device))

    # -------------------------------------------------------- lifecycle

    def close(self):
        if getattr(self, "_handle", None):
            status = _lib.lib.locus_context_destroy(self._handle)
            if status != 0:
                _lib.raise_status(status, "locus_context_destroy")
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _context(self):
        if not self._handle:
            raise _invalid("the context is closed")
        return self._handle

    # ---------------------------------------------------------- devices

    def device(self, selector):
        """locus_device_find: the first device matching a LOCUS_DEVICE
        selector ("cpu", "opencl", "cuda:0", ...)."""
        handle = _lib.c_void()
        _lib.check(_lib.lib.locus_device_find(self._context(),
                                              selector.encode(),
                                              ctypes.byref(handle)),
                   f"locus_device_find({selector!r})")
        for device in self.devices:
            if device._handle.value == handle.value:
                return device
        return Device(self, handle)

    def backends(self):
        """Every backend Locus knows of, as dicts: name, available,
        reason, device_count."""
        count = ctypes.c_size_t()
        _lib.check(_lib.lib.locus_backend_count(self._context(),
                                                ctypes.byref(count)),
                   "locus_backend_count")
        result = []
        for index in range(count.value):
            info = _lib.BackendInfo()
            _lib.lib.locus_backend_info_init(ctypes.byref(info))
            _lib.check(_lib.lib.locus_backend_get(self._context(), index,
                                                  ctypes.byref(info)),
                       "locus_backend_get")
            result.append({"name": _text(info.name),
                           "available": bool(info.available),
                           "reason": _text(info.reason),
                           "device_count": info.device_count})
        return result

    def _device_handle(self, device):
        if device is None:
            return None
        if isinstance(device, str):
            device = self.device(device)
        if not isinstance(device, Device) or device._context is not self:
            raise _invalid("device: expected a Device of this context or a "
                           "selector string")
        return device._handle

    def _cuda_device(self, ordinal, what):
        """The handle of this context's cuda:<ordinal>, for a CUDA array
        on that device (Locus numbers CUDA devices as CUDA does, unless
        it skipped one: then the wrap's own check says the memory is
        another device's)."""
        selector = f"cuda:{ordinal}"
        for device in self.devices:
            if device.selector == selector:
                return device._handle
        raise _lib.binding_error(
            "LOCUS_ERROR_DEVICE_UNAVAILABLE",
            f"{what}: a CUDA array on device {ordinal}, but this context "
            f"has no {selector} (devices: "
            f"{', '.join(d.selector for d in self.devices)}; is the cuda "
            "backend loaded? LOCUS_PLUGIN_PATH, docs/PYTHON.md)")

    def _device_for(self, device, arrays, what):
        """The op's device: the caller's, else the CUDA device of its CUDA
        arrays (all on one), else None (the scheduler's choice)."""
        ordinals = {a.ordinal for a in arrays if isinstance(a, DeviceArray)}
        if len(ordinals) > 1:
            raise _invalid(f"{what}: CUDA arrays on devices "
                           f"{sorted(ordinals)}; an op takes one device")
        if device is None and ordinals:
            return self._cuda_device(ordinals.pop(), what)
        return self._device_handle(device)

    def _wrap(self, context, array, address, nbytes, what):
        device = (self._cuda_device(array.ordinal, what)
                  if isinstance(array, DeviceArray) else None)
        return Wrapped(context, address, nbytes, what, device)

    # ---------------------------------------------------------- records

    @property
    def last_record(self):
        """The record of this thread's last successful op, as a dict with
        locus_record_to_json's keys (op, device, algorithm, seconds,
        flops, bytes, ...); None before the first."""
        return getattr(self._local, "record", None)

    def _keep_record(self, record):
        needed = _lib.lib.locus_record_to_json(ctypes.byref(record), None, 0)
        text = ctypes.create_string_buffer(needed + 1)
        _lib.lib.locus_record_to_json(ctypes.byref(record), text, needed + 1)
        self._local.record = json.loads(text.value.decode())
        return self._local.record

    @staticmethod
    def _new_record():
        record = _lib.Record()
        _lib.lib.locus_record_init(ctypes.byref(record))
        return record

    # ----------------------------------------------------------- reduce

    def reduce(self, x, op="sum", *, device=None, allow_atomic=False):
        """locus_reduce over every element of x (f32 or f64): the sum
        (as a float64 sum, locus.h's rules for NaN and inf), min or max.
        A non-contiguous x is copied first (docs/PYTHON.md)."""
        if op not in _REDUCE_OPS:
            raise _invalid(f"reduce: unknown op {op!r} (sum, min, max)")
        array = contiguous(as_array(x, "reduce: x"), "reduce: x")
        desc = _lib.ReduceDesc()
        _lib.lib.locus_reduce_desc_init(ctypes.byref(desc))
        desc.dtype = DTYPES[array.dtype]
        desc.op = _REDUCE_OPS[op]
        desc.count = array.size
        desc.allow_atomic = 1 if allow_atomic else 0
        context = self._context()
        dev = self._device_for(device, [array], "reduce")
        result = ctypes.c_double()
        record = self._new_record()
        address = (array.address if isinstance(array, DeviceArray) else
                   array.ctypes.data)
        buffer = self._wrap(context, array, address, array.nbytes, "reduce: x")
        try:
            status = _lib.lib.locus_reduce(context, dev, ctypes.byref(desc),
                                           buffer.handle, ctypes.byref(result),
                                           ctypes.byref(record))
            if status != 0:
                _lib.raise_status(status, "locus_reduce")
        finally:
            buffer.close()
        self._keep_record(record)
        return result.value

    # ------------------------------------------------------------- gemm

    def gemm(self, a, b, c=None, alpha=1.0, beta=0.0, *, trans_a=False,
             trans_b=False, device=None, math="fp32"):
        """C = alpha op(a) op(b) + beta C by locus_gemm, with numpy's
        view of a, b and c: op(a) is a.T when trans_a. a and b are f32,
        f64 or f16 (then c is f32), c is m x n or None (a new array;
        beta then applies to zeros). C-contiguous, Fortran-ordered and
        row-strided arrays are used in place (the layout becomes the
        transposes and leading dimensions); others are copied
        (docs/PYTHON.md). Returns c: the very object passed, when given."""
        result_object = c
        A = Matrix(as_array(a, "gemm: a"))
        B = Matrix(as_array(b, "gemm: b"))
        if A.array.dtype != B.array.dtype:
            raise _invalid(f"gemm: a is {A.array.dtype} but b is "
                           f"{B.array.dtype}")
        in_dtype = A.array.dtype
        out_dtype = np.dtype(np.float32) if in_dtype == np.float16 else in_dtype
        m, k = A.array.shape[::-1] if trans_a else A.array.shape
        k_b, n = B.array.shape[::-1] if trans_b else B.array.shape
        if k != k_b:
            raise _invalid(f"gemm: op(a) is {m} x {k} but op(b) is {k_b} x "
                           f"{n}: inner sizes differ")
        # A CUDA array's device is checked before an output is made there.
        self._device_for(device, [A.array, B.array], "gemm")
        if c is None and isinstance(A.array, DeviceArray):
            result_object = new_like(A.array, (m, n), out_dtype, beta != 0)
            c_array = as_array(result_object, "gemm: c", writable=True)
        elif c is None and isinstance(B.array, DeviceArray):
            result_object = new_like(B.array, (m, n), out_dtype, beta != 0)
            c_array = as_array(result_object, "gemm: c", writable=True)
        elif c is None:
            c_array = (np.empty if beta == 0 else np.zeros)((m, n), out_dtype)
            result_object = c_array
        else:
            c_array = as_array(c, "gemm: c", writable=True)
        if c_array.dtype != out_dtype:
            raise _invalid(f"gemm: c is {c_array.dtype}, {in_dtype} inputs "
                           f"give {out_dtype}")
        if c_array.shape != (m, n):
            raise _invalid(f"gemm: c is {' x '.join(map(str, c_array.shape))}"
                           f" but op(a) op(b) is {m} x {n}")
        C = Matrix(c_array)
        # Locus writes a row-major C. A C stored transposed is computed as
        # C^T = op(b)^T op(a)^T, which Locus writes row-major.
        ta = A.transposed != bool(trans_a)
        tb = B.transposed != bool(trans_b)
        first, second = A, B
        if C.transposed:
            first, second = B, A
            ta, tb = not tb, not ta
            m, n = n, m
        desc = _lib.GemmDesc()
        _lib.lib.locus_gemm_desc_init(ctypes.byref(desc))
        desc.dtype = DTYPES[in_dtype]
        desc.trans_a, desc.trans_b = int(ta), int(tb)
        desc.m, desc.n, desc.k = m, n, k
        desc.lda, desc.ldb, desc.ldc = first.ld, second.ld, C.ld
        desc.alpha, desc.beta = float(alpha), float(beta)
        desc.math = {"fp32": 0, "tf32": 1, "3xtf32": 2}[math]
        self._run_gemm(desc, first, second, C, device)
        if C.copied:
            c_array[...] = C.array
        return result_object

    def _run_gemm(self, desc, first, second, C, device):
        context = self._context()
        dev = self._device_for(device, [first.array, second.array, C.array],
                               "gemm")
        record = self._new_record()
        buffers = []
        try:
            for matrix, what in ((first, "gemm: a"), (second, "gemm: b"),
                                 (C, "gemm: c")):
                buffers.append(self._wrap(context, matrix.array,
                                          matrix.address, matrix.nbytes, what))
            status = _lib.lib.locus_gemm(context, dev, ctypes.byref(desc),
                                         *(w.handle for w in buffers),
                                         ctypes.byref(record))
            if status != 0:
                _lib.raise_status(status, "locus_gemm")
        finally:
            for buffer in buffers:
                buffer.close()
        self._keep_record(record)

    # ----------------------------------------------------------- conv2d

    def conv2d(self, x, w, bias=None, *, stride=1, padding=0, dilation=1,
               groups=1, activation=None, layout="NCHW", out_layout=None,
               algorithm="auto", device=None, out=None, math="fp32"):
        """locus_conv2d_layer: x is NCHW (or NHWC with layout="NHWC"), w
        KCRS (KRSC for NHWC) with C/groups input channels, bias None or
        K values of the output's dtype. padding: p, (ph, pw) or (top,
        bottom, left, right). Returns out (the object passed, when given)
        in out_layout (default: layout)."""
        if layout not in _LAYOUTS:
            raise _invalid(f"conv2d: unknown layout {layout!r} (NCHW, NHWC)")
        out_layout = layout if out_layout is None else out_layout
        if out_layout not in _LAYOUTS:
            raise _invalid(f"conv2d: unknown out_layout {out_layout!r}")
        if activation not in _ACTIVATIONS:
            raise _invalid(f"conv2d: unknown activation {activation!r} "
                           "(None, 'relu', 'relu6')")
        if algorithm not in _ALGORITHMS:
            raise _invalid(f"conv2d: unknown algorithm {algorithm!r}")
        xa = contiguous(as_array(x, "conv2d: x"), "conv2d: x")
        wa = contiguous(as_array(w, "conv2d: w"), "conv2d: w")
        if xa.ndim != 4 or wa.ndim != 4:
            raise _invalid(f"conv2d: x and w must be 4-D, got {xa.ndim}-D "
                           f"and {wa.ndim}-D")
        if xa.dtype != wa.dtype:
            raise _invalid(f"conv2d: x is {xa.dtype} but w is {wa.dtype}")
        if layout == "NCHW":
            batch, channels, height, width = xa.shape
            k_out, c_per_group, r, s = wa.shape
        else:
            batch, height, width, channels = xa.shape
            k_out, r, s, c_per_group = wa.shape
        if groups < 1 or channels % groups or c_per_group * groups != channels:
            raise _invalid(f"conv2d: w has {c_per_group} input channels per "
                           f"group, x {channels} channels in {groups} groups")
        sh, sw = _pair(stride, "stride")
        dh, dw = _pair(dilation, "dilation")
        if isinstance(padding, int):
            pads = (padding,) * 4
        else:
            pads = tuple(padding)
            if len(pads) == 2:
                pads = (pads[0], pads[0], pads[1], pads[1])
            if len(pads) != 4:
                raise _invalid("conv2d: padding takes p, (ph, pw) or (top, "
                               f"bottom, left, right), got {padding}")
        for name, value in (("stride", sh), ("stride", sw),
                            ("dilation", dh), ("dilation", dw)) + tuple(
                                ("padding", p) for p in pads):
            if not isinstance(value, (int, np.integer)) or value < 0:
                raise _invalid(f"conv2d: {name} {value} is not a size")
        desc = _lib.Conv2dDesc()
        _lib.lib.locus_conv2d_desc_init(ctypes.byref(desc))
        desc.dtype = DTYPES[xa.dtype]
        desc.batch, desc.in_channels = batch, channels
        desc.in_height, desc.in_width = height, width
        desc.out_channels, desc.kernel_height, desc.kernel_width = k_out, r, s
        desc.stride_h, desc.stride_w = sh, sw
        desc.pad_h, desc.pad_bottom, desc.pad_w, desc.pad_right = pads
        desc.dilation_h, desc.dilation_w = dh, dw
        desc.groups = groups
        desc.activation = _ACTIVATIONS[activation]
        desc.input_layout = _LAYOUTS[layout]
        desc.output_layout = _LAYOUTS[out_layout]
        desc.algorithm = _ALGORITHMS[algorithm]
        desc.math = {"fp32": 0, "tf32": 1, "3xtf32": 2}[math]
        p, q = ctypes.c_size_t(), ctypes.c_size_t()
        _lib.check(_lib.lib.locus_conv2d_output_shape(
            ctypes.byref(desc), ctypes.byref(p), ctypes.byref(q)),
            "locus_conv2d_output_shape")
        out_dtype = np.dtype(np.float32) if xa.dtype == np.float16 else xa.dtype
        shape = ((batch, k_out, p.value, q.value) if out_layout == "NCHW"
                 else (batch, p.value, q.value, k_out))
        result_object = out
        self._device_for(device, [xa, wa], "conv2d")
        if out is None and isinstance(xa, DeviceArray):
            result_object = new_like(xa, shape, out_dtype, False)
            out_array = as_array(result_object, "conv2d: out", writable=True)
        elif out is None:
            out_array = np.empty(shape, out_dtype)
            result_object = out_array
        else:
            out_array = as_array(out, "conv2d: out", writable=True)
            if out_array.shape != shape or out_array.dtype != out_dtype:
                raise _invalid(f"conv2d: out is {out_array.shape} "
                               f"{out_array.dtype}, the layer gives {shape} "
                               f"{out_dtype}")
            if not (out_array.c_contiguous if isinstance(
                    out_array, DeviceArray) else out_array.flags.c_contiguous):
                raise _invalid("conv2d: out must be C-contiguous")
        bias_array = None
        if bias is not None:
            bias_array = contiguous(as_array(bias, "conv2d: bias"),
                                    "conv2d: bias")
            if bias_array.shape != (k_out,) or bias_array.dtype != out_dtype:
                raise _invalid(f"conv2d: bias is {bias_array.shape} "
                               f"{bias_array.dtype}, the layer needs "
                               f"({k_out},) {out_dtype}")
        context = self._context()
        dev = self._device_for(device, [xa, wa, bias_array, out_array],
                               "conv2d")
        record = self._new_record()
        buffers = []
        try:
            for array, what in ((xa, "conv2d: x"), (wa, "conv2d: w"),
                                (bias_array, "conv2d: bias"),
                                (out_array, "conv2d: out")):
                if array is None:
                    buffers.append(Wrapped(context, 0, 0, what))
                elif isinstance(array, DeviceArray):
                    buffers.append(self._wrap(context, array, array.address,
                                              array.nbytes, what))
                else:
                    buffers.append(Wrapped(context, array.ctypes.data,
                                           array.nbytes, what))
            status = _lib.lib.locus_conv2d_layer(
                context, dev, ctypes.byref(desc),
                *(b.handle for b in buffers), ctypes.byref(record))
            if status != 0:
                _lib.raise_status(status, "locus_conv2d_layer")
        finally:
            for buffer in buffers:
                buffer.close()
        self._keep_record(record)
        return result_object
