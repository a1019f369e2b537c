"""Writes the ONNX test fixtures into OUT_DIR, built with Debian's python3-onnx (onnx.helper):
small good models with hand-countable FLOPs, and one malformed file per failure class.

Usage: /usr/bin/python3 make_fixtures.py OUT_DIR
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name))


def init(name, shape):
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


# small_cnn: N x 3 x 8 x 8 -> Conv(4, 3x3, pad 1) -> Relu -> MaxPool 2 -> Flatten -> Gemm(64 -> 10)
# contraction FLOPs per sample: conv 2*4*64*3*9 = 13,824; gemm 2*64*10 = 1,280
nodes = [
    helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
    helper.make_node("Relu", ["c"], ["r"], name="relu"),
    helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
    helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="fc", transB=1),
]
graph = helper.make_graph(
    nodes,
    "small_cnn",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
    [init("w", [4, 3, 3, 3]), init("b", [4]), init("fc_w", [10, 64]), init("fc_b", [10])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "small_cnn.onnx")

# shared_weight: y = (x @ W) @ W with one initializer W [16, 16] used twice (counted once)
graph = helper.make_graph(
    [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="mm1"),
        helper.make_node("MatMul", ["h", "W"], ["y"], name="mm2"),
    ],
    "shared_weight",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
    [init("W", [16, 16])],
)
shared = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
save(shared, "shared_weight.onnx")

# external: the same model with W stored in external.bin
external = onnx.ModelProto()
external.CopyFrom(shared)
onnx.save(
    external,
    os.path.join(out, "external.onnx"),
    save_as_external_data=True,
    all_tensors_to_one_file=True,
    location="external.bin",
    size_threshold=0,
)
# missing_external: points at a file that does not exist
missing = onnx.load(os.path.join(out, "external.onnx"), load_external_data=False)
for t in missing.graph.initializer:
    for kv in t.external_data:
        if kv.key == "location":
            kv.value = "nowhere.bin"
onnx.save(missing, os.path.join(out, "missing_external.onnx"))
# escaping_external: locations outside the model's folder (absolute, or through ..)
for name, where in (("escaping_external_abs", "/etc/hostname"), ("escaping_external_up", "../external.bin")):
    escaping = onnx.load(os.path.join(out, "external.onnx"), load_external_data=False)
    for t in escaping.graph.initializer:
        for kv in t.external_data:
            if kv.key == "location":
                kv.value = where
    onnx.save(escaping, os.path.join(out, name + ".onnx"))
# wrapping_external: an offset + length past 2^64, which wraps to a small end inside the file
wrapping = onnx.load(os.path.join(out, "external.onnx"), load_external_data=False)
for t in wrapping.graph.initializer:
    del t.external_data[:]
    for key, value in (("location", "external.bin"), ("offset", str(2**64 - 8)), ("length", "1024")):
        t.external_data.add(key=key, value=value)
onnx.save(wrapping, os.path.join(out, "wrapping_external.onnx"))

# newer_opset: asks for an opset far beyond any ONNX release
newer = onnx.ModelProto()
newer.CopyFrom(shared)
newer.opset_import[0].version = 99
onnx.save(newer, os.path.join(out, "newer_opset.onnx"))

# negative_dim: an input with dimension -3
neg = onnx.ModelProto()
neg.CopyFrom(shared)
neg.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -3
onnx.save(neg, os.path.join(out, "negative_dim.onnx"))

# cyclic: two nodes that consume each other's outputs
graph = helper.make_graph(
    [helper.make_node("Relu", ["b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second")],
    "cyclic",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4])],
)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out, "cyclic.onnx"))

# resize_linear: x [1, 1, 4, 4] -> bilinear x2 -> [1, 1, 8, 8], scales from a Constant node
# (floats: the shape sweep must hand them to ONNX's inference). 2 resized dims: 3 + 2*3 = 9
# FLOPs per output element, 64 * 9 = 576
graph = helper.make_graph(
    [
        helper.make_node(
            "Constant",
            [],
            ["scales"],
            name="scales",
            value=numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32)),
        ),
        helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode="linear"),
    ],
    "resize_linear",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 8, 8])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "resize_linear.onnx")

# lrn_mvn: LRN (size 3 over 5 channels, 2x2) then MeanVarianceNormalization (axes 0, 2, 3).
# LRN windows per channel 2, 3, 3, 3, 2: per position sum(2w - 1 + 4) = 41; 4 positions: 164
# FLOPs, 20 pows. MVN over 1*2*2 = 4 elements per channel, 5 rows: 5 * (5*4 + 2) = 110 FLOPs
graph = helper.make_graph(
    [
        helper.make_node("LRN", ["x"], ["l"], name="lrn", size=3, alpha=1e-4, beta=0.75),
        helper.make_node("MeanVarianceNormalization", ["l"], ["y"], name="mvn"),
    ],
    "lrn_mvn",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 2, 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 2, 2])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "lrn_mvn.onnx")

# scan_rnn: an RNN as Scan over 5 steps: h = tanh(x_t W + h U), W and U [4, 4] outside the body.
# Per step: 2 matmuls 2*1*4*4 = 64 contraction FLOPs, add 4, tanh 4: 72; 5 steps: 360 FLOPs, 320 in
# contractions, 20 transcendentals; 32 parameters (counted once, not per step)
body = helper.make_graph(
    [
        helper.make_node("MatMul", ["x_t", "W"], ["a"]),
        helper.make_node("MatMul", ["h_in", "U"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["c"]),
        helper.make_node("Tanh", ["c"], ["h_out"]),
        helper.make_node("Identity", ["h_out"], ["y_t"]),
    ],
    "step",
    [
        helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, 4]),
        helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [1, 4]),
    ],
    [
        helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, 4]),
        helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [1, 4]),
    ],
)
graph = helper.make_graph(
    [helper.make_node("Scan", ["h0", "x"], ["h", "y"], name="rnn", body=body, num_scan_inputs=1)],
    "scan_rnn",
    [
        helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 4]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 1, 4]),
    ],
    [
        helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 4]),
        helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 1, 4]),
    ],
    [init("W", [4, 4]), init("U", [4, 4])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "scan_rnn.onnx")

# loop_const: Loop with M = 3 (a Constant) and a condition: v = v W2 three times, 32 FLOPs each
body = helper.make_graph(
    [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("MatMul", ["v_in", "W2"], ["v_out"])],
    "iteration",
    [
        helper.make_tensor_value_info("i", TensorProto.INT64, []),
        helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1, 4]),
    ],
    [
        helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
        helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1, 4]),
    ],
)
graph = helper.make_graph(
    [
        helper.make_node("Constant", [], ["M"], value=numpy_helper.from_array(np.array(3, dtype=np.int64))),
        helper.make_node("Constant", [], ["go"], value=numpy_helper.from_array(np.array(True))),
        helper.make_node("Loop", ["M", "go", "v0"], ["v"], name="repeat", body=body),
    ],
    "loop_const",
    [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1, 4])],
    [helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 4])],
    [init("W2", [4, 4])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "loop_const.onnx")

# cumsum: x [3, 4] summed along axis 1 (a Constant): 3 rows x 3 adds = 9 FLOPs
graph = helper.make_graph(
    [
        helper.make_node("Constant", [], ["axis"], value=numpy_helper.from_array(np.array(1, dtype=np.int64))),
        helper.make_node("CumSum", ["x", "axis"], ["y"], name="cumsum"),
    ],
    "cumsum",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "cumsum.onnx")

# if_known: If whose condition is a Constant true: the then branch (MatMul x W3, 2*1*4*4 = 32
# FLOPs) is counted, the else branch (a Relu) is not
then_branch = helper.make_graph(
    [helper.make_node("MatMul", ["x", "W3"], ["t"])],
    "then",
    [],
    [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4])],
)
else_branch = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["e"])],
    "else",
    [],
    [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4])],
)
graph = helper.make_graph(
    [
        helper.make_node("Constant", [], ["yes"], value=numpy_helper.from_array(np.array(True))),
        helper.make_node("If", ["yes"], ["y"], name="choose", then_branch=then_branch, else_branch=else_branch),
    ],
    "if_known",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    [init("W3", [4, 4])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "if_known.onnx")

# scalar_layernorm: a scalar fed to LayerNormalization. The checker accepts it; ONNX 1.12's shape
# inference then reads out of bounds (found by tests/fuzz): the importer must survive it
graph = helper.make_graph(
    [helper.make_node("LayerNormalization", ["x", "w", "b"], ["y", "mean", "inv_std"], name="norm")],
    "scalar_layernorm",
    [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, []),
        helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4, 5]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4, 5]),
    ],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 5])],
)
onnx.save(
    helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, "scalar_layernorm.onnx")
)

# zero_stride: MaxPool with a zero stride (ONNX 1.12's inference divides by it)
graph = helper.make_graph(
    [helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], strides=[0, 2])],
    "zero_stride",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 5, 5])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out, "zero_stride.onnx"))

# fixed_batch: small_cnn with its batch fixed at 2 in the file
graph = helper.make_graph(
    nodes,
    "fixed_batch",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])],
    [init("w", [4, 3, 3, 3]), init("b", [4]), init("fc_w", [10, 64]), init("fc_b", [10])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "fixed_batch.onnx")

# einsum_attention: softmax(q k^T) v written with Einsum, batch symbolic ("batch", as
# torch.onnx names it); per sample: 2 heads x 4 queries x 4 keys x 8 dims, twice: 2 x 2*256 FLOPs
graph = helper.make_graph(
    [
        helper.make_node("Einsum", ["q", "k"], ["s"], name="scores", equation="bhqd,bhkd->bhqk"),
        helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
        helper.make_node("Einsum", ["p", "v"], ["o"], name="mix", equation="bhqk,bhkd->bhqd"),
        helper.make_node("Relu", ["o"], ["y"], name="relu"),
    ],
    "einsum_attention",
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 2, 4, 8]) for n in ("q", "k", "v")],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, 4, 8])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "einsum_attention.onnx")

# shape15: opset 15 (Shape with start/end) over an input with a symbolic non-batch dimension S:
# S must be bound before ONNX's shape inference sees it
graph = helper.make_graph(
    [
        helper.make_node("Shape", ["x"], ["shp"], name="shape", start=0),
        helper.make_node("Reshape", ["x", "shp"], ["r"], name="reshape"),
        helper.make_node("Relu", ["r"], ["y"], name="relu"),
    ],
    "shape15",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S", 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "S", 8])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]), "shape15.onnx")

# token_ids: two inputs, int64 token ids and a float mask: embedding lookup times the mask
graph = helper.make_graph(
    [
        helper.make_node("Gather", ["table", "ids"], ["emb"], name="embed"),
        helper.make_node("Unsqueeze", ["mask", "axis2"], ["m"], name="unsqueeze"),
        helper.make_node("Mul", ["emb", "m"], ["y"], name="masked"),
    ],
    "token_ids",
    [
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "seq"]),
    ],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 16])],
    [init("table", [100, 16]), numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2")],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "token_ids.onnx")

# custom_ops: every op in a domain nothing knows: a report that is all unmodeled
graph = helper.make_graph(
    [
        helper.make_node("Frobnicate", ["x"], ["h"], name="f1", domain="com.example"),
        helper.make_node("Frobnicate", ["h"], ["y"], name="f2", domain="com.example"),
    ],
    "custom_ops",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
)
onnx.save(
    helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]),
    os.path.join(out, "custom_ops.onnx"),
)

# swin_pad: how torchvision's Swin computes its window padding, folded by the importer: a
# (before, after) pair per dim, last dim first, reshaped to rows, reversed (Slice with step -1),
# transposed and flattened into ONNX's pads; x N x 5 x 5 x 4 -> N x 7 x 6 x 4
i64 = lambda name, values: helper.make_node(
    "Constant", [], [name], name=name, value=numpy_helper.from_array(np.array(values, dtype=np.int64), name)
)
graph = helper.make_graph(
    [
        i64("pairs", [0, 0, 0, 1, 0, 2, 0, 0]),
        i64("rows_shape", [-1, 2]),
        i64("start", [-1]),
        i64("end", [-(2**63) + 1]),
        i64("axis0", [0]),
        i64("step", [-1]),
        i64("flat", [-1]),
        helper.make_node("Reshape", ["pairs", "rows_shape"], ["rows"], name="rows"),
        helper.make_node("Slice", ["rows", "start", "end", "axis0", "step"], ["reversed"], name="reverse"),
        helper.make_node("Transpose", ["reversed"], ["by_side"], name="by_side", perm=[1, 0]),
        helper.make_node("Reshape", ["by_side", "flat"], ["pads"], name="pads"),
        helper.make_node("Pad", ["x", "pads"], ["padded"], name="pad", mode="constant"),
        helper.make_node("Relu", ["padded"], ["y"], name="relu"),
    ],
    "swin_pad",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5, 5, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 7, 6, 4])],
)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "swin_pad.onnx")

# bad_raw_int64: an int64 initializer whose raw bytes (12) do not fit its declared size (1
# element): ONNX 1.12's ParseData writes past its buffer on it (issue 13); our reader refuses it
shape = TensorProto()
shape.name = "shape"
shape.data_type = TensorProto.INT64
shape.dims.extend([1])
shape.raw_data = bytes(12)
graph = helper.make_graph(
    [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
    "bad_raw_int64",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])],
    [shape],
)
onnx.save(
    helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out, "bad_raw_int64.onnx")
)

# hostile_name: a node name with an invalid UTF-8 byte, a terminal escape, a newline, a pipe
# and a spreadsheet formula (issue 13): written with a placeholder of the same length, then
# patched in the bytes (protobuf will not set an invalid UTF-8 string)
graph = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"], name="NAMEPLACEHOLDER")],
    "hostile_name",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
)
data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
hostile = b"=\xff\x1b[2J\n|x=1+1!z"
assert len(hostile) == len(b"NAMEPLACEHOLDER") and data.count(b"NAMEPLACEHOLDER") == 1
with open(os.path.join(out, "hostile_name.onnx"), "wb") as f:
    f.write(data.replace(b"NAMEPLACEHOLDER", hostile))

# not_a_model: a valid protobuf of another message (a tensor)
with open(os.path.join(out, "not_a_model.onnx"), "wb") as f:
    f.write(init("t", [2, 2]).SerializeToString())
# random: bytes that are not a protobuf
with open(os.path.join(out, "random.onnx"), "wb") as f:
    f.write(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())
# truncated: the first half of a good model
data = open(os.path.join(out, "small_cnn.onnx"), "rb").read()
with open(os.path.join(out, "truncated.onnx"), "wb") as f:
    f.write(data[: len(data) // 2])
print(f"fixtures written to {out}")
