"""conv2d against a float64 reference on every device (#23 item 3):
random layers covering groups (depthwise included), dilation 1-3,
asymmetric padding, strides 1-3, bias, ReLU and ReLU6, NCHW and NHWC, in
f32 and f64. The reference is torch.nn.functional.conv2d in float64 when
torch imports (the GPU machine), else conv2d_numpy below, written from the
definition (CI). LOCUS_TEST_CONV_REFERENCE: "numpy" or "torch" forces
one; "both" also compares the numpy reference with torch's on every case
(the one-time cross-check on the GPU machine; fails without torch).

A device that does not offer a request (locus_device_offers, or the op's
LOCUS_ERROR_NOT_SUPPORTED for a feature it lacks) is printed as "not
offered", never counted as a pass; the CPU offers every feature
(locus.h), so a refusal there fails."""

import os

import locus
import numpy as np
import pytest
from conftest import DEVICES

try:
    import torch
except ImportError:
    torch = None

CHOICE = os.environ.get("LOCUS_TEST_CONV_REFERENCE", "auto")
if CHOICE not in ("auto", "numpy", "torch", "both"):
    raise ValueError(f"LOCUS_TEST_CONV_REFERENCE={CHOICE!r}: auto, numpy, "
                     "torch or both")
if CHOICE in ("torch", "both") and torch is None:
    raise ImportError(f"LOCUS_TEST_CONV_REFERENCE={CHOICE} needs torch")
REFERENCE = "torch" if CHOICE in ("torch", "both") or (
    CHOICE == "auto" and torch is not None) else "numpy"
EPS = {np.float32: 2.0**-24, np.float64: 2.0**-53}


def conv2d_numpy(x, w, bias, stride, pads, dilation, groups):
    """float64 NCHW/KCRS cross-correlation from the definition:
    out[n, k, p, q] = bias[k] + sum over c, r, s in k's group of
    x[n, c, p*sh + r*dh - top, q*sw + s*dw - left] * w[k, c', r, s],
    x zero outside the image."""
    top, bottom, left, right = pads
    (sh, sw), (dh, dw) = stride, dilation
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, height, width = x.shape
    k, c_group, r_size, s_size = w.shape
    p_size = (height - ((r_size - 1) * dh + 1)) // sh + 1
    q_size = (width - ((s_size - 1) * dw + 1)) // sw + 1
    k_group = k // groups
    out = np.zeros((n, k, p_size, q_size))
    for g in range(groups):
        xs = x[:, g * c_group:(g + 1) * c_group]
        ws = w[g * k_group:(g + 1) * k_group]
        for r in range(r_size):
            for s in range(s_size):
                patch = xs[:, :, r * dh:r * dh + (p_size - 1) * sh + 1:sh,
                           s * dw:s * dw + (q_size - 1) * sw + 1:sw]
                out[:, g * k_group:(g + 1) * k_group] += np.einsum(
                    "ncpq,kc->nkpq", patch, ws[:, :, r, s])
    if bias is not None:
        out += bias[None, :, None, None]
    return out


def conv2d_torch(x, w, bias, stride, pads, dilation, groups):
    top, bottom, left, right = pads
    xt = torch.nn.functional.pad(torch.from_numpy(x),
                                 (left, right, top, bottom))
    return torch.nn.functional.conv2d(
        xt, torch.from_numpy(w),
        None if bias is None else torch.from_numpy(bias),
        stride=stride, dilation=dilation, groups=groups).numpy()


def activate(out, activation):
    if activation == "relu":
        return np.where(np.isnan(out), out, np.maximum(out, 0))
    if activation == "relu6":
        return np.where(np.isnan(out), out, np.clip(out, 0, 6))
    return out


def make_cases():
    """Random layers; the lists are cycled so that every value of each
    feature appears, the rest is random."""
    rng = np.random.default_rng(23)
    kinds = ["dense", "grouped", "depthwise", "depthwise_x2"]
    activations = [None, "relu", "relu6"]
    cases = []
    for index in range(16):
        kind = kinds[index % 4]
        groups = {"dense": 1, "grouped": int(rng.choice([2, 3]))}.get(kind, 0)
        c_group = int(rng.integers(1, 4))
        if kind.startswith("depthwise"):
            channels = int(rng.integers(2, 6))
            groups, c_group = channels, 1
            k_out = channels * (2 if kind == "depthwise_x2" else 1)
        else:
            channels = groups * c_group
            k_out = groups * int(rng.integers(1, 4))
        r, s = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        dilation = (index % 3 + 1, int(rng.integers(1, 4)))
        stride = ((index // 3) % 3 + 1, int(rng.integers(1, 4)))
        pads = tuple(int(v) for v in rng.integers(0, 3, 4))
        span_h, span_w = (r - 1) * dilation[0] + 1, (s - 1) * dilation[1] + 1
        height = max(span_h - pads[0] - pads[1], 1) + int(rng.integers(0, 6))
        width = max(span_w - pads[2] - pads[3], 1) + int(rng.integers(0, 6))
        cases.append(dict(
            batch=int(rng.integers(1, 3)), channels=channels, height=height,
            width=width, k_out=k_out, r=r, s=s, groups=groups,
            stride=stride, pads=pads, dilation=dilation,
            bias=index % 2 == 0, activation=activations[index % 3],
            layout="NHWC" if (index // 2) % 2 else "NCHW",
            seed=int(rng.integers(1 << 30))))
    return cases


CASES = make_cases()
NOT_OFFERED = []
print(f"\ntest_conv_reference: reference {REFERENCE} (float64)"
      + (", numpy cross-checked against torch" if CHOICE == "both" else ""))


def case_id(case):
    return (f"{case['layout']}-g{case['groups']}-d{case['dilation']}"
            f"-s{case['stride']}-p{case['pads']}-{case['activation']}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_conv2d_matches_reference(ctx, device, dtype, case):
    rng = np.random.default_rng(case["seed"])
    n, c, h, w_ = case["batch"], case["channels"], case["height"], \
        case["width"]
    k, r, s, groups = case["k_out"], case["r"], case["s"], case["groups"]
    x64 = rng.standard_normal((n, c, h, w_))
    f64 = rng.standard_normal((k, c // groups, r, s))
    b64 = rng.standard_normal(k) if case["bias"] else None
    args = (case["stride"], case["pads"], case["dilation"], groups)
    if REFERENCE == "torch":
        expected = conv2d_torch(x64, f64, b64, *args)
    else:
        expected = conv2d_numpy(x64, f64, b64, *args)
    if CHOICE == "both":
        ours = conv2d_numpy(x64, f64, b64, *args)
        np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-12)
    magnitude = conv2d_numpy(abs(x64), abs(f64),
                             None if b64 is None else abs(b64), *args)
    expected = activate(expected, case["activation"])

    dev = ctx.device(device)
    if not dev.offers("conv2d", np.dtype(dtype).name):
        NOT_OFFERED.append(device)
        print(f"{device}: conv2d in {np.dtype(dtype).name} not offered")
        return
    nhwc = case["layout"] == "NHWC"
    x = x64.astype(dtype)
    f = f64.astype(dtype)
    if nhwc:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        f = np.ascontiguousarray(f.transpose(0, 2, 3, 1))
    bias = None if b64 is None else b64.astype(dtype)
    try:
        out = ctx.conv2d(x, f, bias, stride=case["stride"],
                         padding=case["pads"], dilation=case["dilation"],
                         groups=groups, activation=case["activation"],
                         layout=case["layout"], device=device)
    except locus.NotSupportedError as refusal:
        if dev.backend == "cpu":
            raise  # the CPU offers every feature (locus.h)
        NOT_OFFERED.append(device)
        print(f"{device}: not offered: {refusal.message}")
        return
    if nhwc:
        out = out.transpose(0, 3, 1, 2)
    assert out.shape == expected.shape
    terms = (c // groups) * r * s
    bound = 2 * (terms + 4) * EPS[dtype] * magnitude
    error = abs(out.astype(np.float64) - expected)
    assert (error <= bound).all(), (
        f"max error {error.max()} over bound {bound[error > bound].min()}")
