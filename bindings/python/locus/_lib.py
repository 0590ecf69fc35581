"""The ctypes view of liblocus: loading it, the structs of locus.h, the
status codes and their exceptions.

ctypes, not a C extension module: a CDLL call releases the GIL for the
whole C call (every op, as issue #26 asks), the package then needs no
compiler at install time against an installed liblocus, and the same
files run against any liblocus.so.0 (docs/PYTHON.md, "Why ctypes").
The structs below mirror locus.h field for field; _check_layout compares
each size with the struct_size the library's _init function writes, so a
drifted mirror fails at import instead of corrupting memory.
"""

import ctypes
import ctypes.util
import os
import pathlib

c_size = ctypes.c_size_t
c_int = ctypes.c_int
c_double = ctypes.c_double
c_u64 = ctypes.c_uint64
c_str = ctypes.c_char_p
c_void = ctypes.c_void_p


def _find_library():
    """LIBLOCUS_PATH (a path to liblocus.so; not a LOCUS_* name, which
    liblocus would warn about as no variable of its own), then the library built into
    this package (pip install from the source tree), then the one the
    package was built against (pip install with -Dliblocus=system), then
    the dynamic loader's search."""
    tried = []
    explicit = os.environ.get("LIBLOCUS_PATH")
    if explicit:
        return [explicit]
    here = pathlib.Path(__file__).resolve().parent
    tried += sorted(str(p) for p in here.glob("_liblocus*.so"))
    try:
        from . import _config  # written by meson at build time

        if _config.LIBRARY:
            tried.append(_config.LIBRARY)
    except ImportError:
        pass
    found = ctypes.util.find_library("locus")
    tried.append(found or "liblocus.so.0")
    return tried


def _load():
    errors = []
    for candidate in _find_library():
        try:
            return ctypes.CDLL(candidate), candidate
        except OSError as error:
            errors.append(f"{candidate}: {error}")
    raise ImportError(
        "locus: liblocus could not be loaded ("
        + "; ".join(errors)
        + "); set LIBLOCUS_PATH to the path of liblocus.so"
    )


lib, library_path = _load()


class ContextOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size),
        ("device", c_str),
        ("backends", c_str),
        ("threads", c_str),
        ("numa", c_str),
        ("strict", c_str),
        ("log", c_str),
        ("record", c_str),
        ("topology", c_str),
        ("plugin_path", c_str),
        ("cpu_isa", c_str),
        ("ignore_environment", c_int),
        ("calibration", c_str),
    ]


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size),
        ("selector", ctypes.c_char * 32),
        ("backend", ctypes.c_char * 16),
        ("name", ctypes.c_char * 128),
        ("vendor", ctypes.c_char * 64),
        ("version", ctypes.c_char * 64),
        ("kind", c_int),
        ("nearest_numa_mask", c_u64),
        ("memory_bytes", c_u64),
        ("compute_units", c_int),
        ("index_in_backend", c_int),
        ("pci_bus_id", ctypes.c_char * 16),
    ]


class BackendInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size),
        ("name", ctypes.c_char * 16),
        ("available", c_int),
        ("reason", ctypes.c_char * 256),
        ("device_count", c_size),
    ]


class Estimate(ctypes.Structure):
    _fields_ = [("device", ctypes.c_char * 32), ("seconds", c_double)]


class Record(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size),
        ("op", ctypes.c_char * 16),
        ("device", ctypes.c_char * 32),
        ("algorithm", ctypes.c_char * 32),
        ("seconds", c_double),
        ("flops", c_double),
        ("bytes", c_u64),
        ("bytes_to_device", c_u64),
        ("bytes_from_device", c_u64),
        ("workspace_bytes", c_u64),
        ("local_bytes", c_u64),
        ("remote_bytes", c_u64),
        ("provenance", c_int),
        ("chosen_by", ctypes.c_char * 16),
        ("estimated_seconds", c_double),
        ("estimate_count", c_size),
        ("estimates", Estimate * 8),
        ("dtype", ctypes.c_char * 8),
        ("migrated_bytes", c_u64),
        ("migrate_seconds", c_double),
        ("migrate_node", c_int),
        ("buffer_id", c_u64),
        ("buffer_address", c_u64),
    ]


class ReduceDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size),
        ("dtype", c_int),
        ("op", c_int),
        ("count", c_size),
        ("allow_atomic", c_int),
    ]


class GemmDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size),
        ("dtype", c_int),
        ("trans_a", c_int),
        ("trans_b", c_int),
        ("m", c_size),
        ("n", c_size),
        ("k", c_size),
        ("lda", c_size),
        ("ldb", c_size),
        ("ldc", c_size),
        ("alpha", c_double),
        ("beta", c_double),
        ("math", c_int),
    ]


class Conv2dDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size),
        ("dtype", c_int),
        ("batch", c_size),
        ("in_channels", c_size),
        ("in_height", c_size),
        ("in_width", c_size),
        ("out_channels", c_size),
        ("kernel_height", c_size),
        ("kernel_width", c_size),
        ("stride_h", c_size),
        ("stride_w", c_size),
        ("pad_h", c_size),
        ("pad_w", c_size),
        ("algorithm", c_int),
        ("math", c_int),
        ("groups", c_size),
        ("pad_bottom", c_size),
        ("pad_right", c_size),
        ("dilation_h", c_size),
        ("dilation_w", c_size),
        ("activation", c_int),
        ("input_layout", c_int),
        ("output_layout", c_int),
    ]


P = ctypes.POINTER
_signatures = {
    "locus_version": (c_int, []),
    "locus_version_string": (c_str, []),
    "locus_status_str": (c_str, [c_int]),
    "locus_status_name": (c_str, [c_int]),
    "locus_last_error": (c_str, []),
    "locus_context_options_init": (None, [P(ContextOptions)]),
    "locus_context_create": (c_int, [P(ContextOptions), P(c_void)]),
    "locus_context_destroy": (c_int, [c_void]),
    "locus_device_count": (c_int, [c_void, P(c_size)]),
    "locus_device_get": (c_int, [c_void, c_size, P(c_void)]),
    "locus_device_find": (c_int, [c_void, c_str, P(c_void)]),
    "locus_device_info_init": (None, [P(DeviceInfo)]),
    "locus_device_get_info": (c_int, [c_void, P(DeviceInfo)]),
    "locus_device_kind_str": (c_str, [c_int]),
    "locus_device_offers": (c_int, [c_void, c_int, c_int, c_int, P(c_int)]),
    "locus_backend_info_init": (None, [P(BackendInfo)]),
    "locus_backend_count": (c_int, [c_void, P(c_size)]),
    "locus_backend_get": (c_int, [c_void, c_size, P(BackendInfo)]),
    "locus_buffer_wrap": (c_int, [c_void, c_void, c_size, P(c_void)]),
    "locus_buffer_destroy": (None, [c_void]),
    "locus_record_init": (None, [P(Record)]),
    "locus_record_to_json": (c_size, [P(Record), ctypes.c_char_p, c_size]),
    "locus_reduce_desc_init": (None, [P(ReduceDesc)]),
    "locus_reduce": (
        c_int,
        [c_void, c_void, P(ReduceDesc), c_void, P(c_double), P(Record)],
    ),
    "locus_gemm_desc_init": (None, [P(GemmDesc)]),
    "locus_gemm": (
        c_int,
        [c_void, c_void, P(GemmDesc), c_void, c_void, c_void, P(Record)],
    ),
    "locus_conv2d_desc_init": (None, [P(Conv2dDesc)]),
    "locus_conv2d_output_shape": (c_int, [P(Conv2dDesc), P(c_size), P(c_size)]),
    "locus_conv2d_layer": (
        c_int,
        [c_void, c_void, P(Conv2dDesc), c_void, c_void, c_void, c_void,
         P(Record)],
    ),
}
# Added during 0.3; the package still runs on a library without it,
# where device memory is refused (HAS_WRAP_DEVICE False) as it was.
_optional_signatures = {
    "locus_buffer_wrap_device": (
        c_int, [c_void, c_void, c_void, c_size, P(c_void)]),
}
for _name, (_restype, _argtypes) in _signatures.items():
    _function = getattr(lib, _name)
    _function.restype = _restype
    _function.argtypes = _argtypes
for _name, (_restype, _argtypes) in _optional_signatures.items():
    _function = getattr(lib, _name, None)
    if _function is not None:
        _function.restype = _restype
        _function.argtypes = _argtypes
HAS_WRAP_DEVICE = hasattr(lib, "locus_buffer_wrap_device")


def _check_layout():
    for struct, init in [
        (ContextOptions, lib.locus_context_options_init),
        (DeviceInfo, lib.locus_device_info_init),
        (BackendInfo, lib.locus_backend_info_init),
        (Record, lib.locus_record_init),
        (ReduceDesc, lib.locus_reduce_desc_init),
        (GemmDesc, lib.locus_gemm_desc_init),
        (Conv2dDesc, lib.locus_conv2d_desc_init),
    ]:
        # Room past the mirror, so a larger struct in a newer library
        # shows up as a size mismatch instead of a write past the end.
        room = (ctypes.c_char * (ctypes.sizeof(struct) + 4096))()
        init(ctypes.cast(room, P(struct)))
        actual = c_size.from_buffer(room).value
        if actual != ctypes.sizeof(struct):
            raise ImportError(
                f"locus: {struct.__name__} is {ctypes.sizeof(struct)} bytes "
                f"here but {actual} in {library_path}: the binding and the "
                "library disagree on locus.h"
            )


_check_layout()

MIN_VERSION = 300
if lib.locus_version() < MIN_VERSION:
    raise ImportError(
        f"locus: {library_path} is version "
        f"{lib.locus_version_string().decode()}; this package needs 0.3.0 "
        "or later (the conv2d layer descriptor)"
    )


# ---------------------------------------------------------------- errors


class Error(Exception):
    """A Locus call failed: .status (the locus_status value, negative),
    .name (its enumerator, e.g. "LOCUS_ERROR_INVALID_ARGUMENT") and
    .message (locus_last_error()'s detail, or the binding's own)."""

    def __init__(self, status, message):
        self.status = status
        self.name = lib.locus_status_name(status).decode()
        self.message = message
        super().__init__(f"{message} ({self.name})")


_classes = {}


def _class_name(enumerator):
    words = enumerator.removeprefix("LOCUS_ERROR_").lower().split("_")
    return "".join(word.capitalize() for word in words) + "Error"


# One subclass per status, generated from the library's own list so a
# status appended to locus.h gets its class without a change here.
for _status in range(-1, -64, -1):
    _enumerator = lib.locus_status_name(_status).decode()
    if _enumerator == "LOCUS_STATUS_UNKNOWN":
        break
    _cls = type(_class_name(_enumerator), (Error,), {"status_code": _status})
    _cls.__doc__ = lib.locus_status_str(_status).decode()
    _classes[_status] = _cls

STATUS_NAMES = {status: cls.__name__ for status, cls in _classes.items()}


def error_for(status, message):
    return _classes.get(status, Error)(status, message)


def raise_status(status, what):
    """Raises the status's exception with the thread's detail; the detail
    is read at once, on the thread that failed (locus_last_error is per
    thread and valid until its next call)."""
    detail = lib.locus_last_error().decode(errors="replace")
    message = detail or lib.locus_status_str(status).decode()
    raise error_for(status, f"{what}: {message}")


def check(status, what):
    if status != 0:
        raise_status(status, what)


def binding_error(status_name, message):
    """An error the binding finds itself (a shape numpy gives that no
    Locus descriptor can hold), with the status Locus would give."""
    for status, cls in _classes.items():
        if lib.locus_status_name(status).decode() == status_name:
            return cls(status, message)
    return Error(-2, message)
