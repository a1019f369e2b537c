"""The TensorFlow capture walker (python/neuralcost_worker/tensorflow/capture.py) on small tf.functions:
the op records it emits for plain ops, While loops (unrolled per step), If branches (the one
taken) and TensorLists (names, shapes, steps)."""

import numpy as np
import pytest
import tensorflow as tf

from neuralcost_worker.tensorflow import capture as tf_capture

RNG = np.random.default_rng(0)
W = tf.Variable(RNG.standard_normal((4, 4)).astype(np.float32), name="w")
X = tf.constant(RNG.standard_normal((2, 4)).astype(np.float32))


def capture(f, x=X):
    concrete = tf.function(f).get_concrete_function(tf.TensorSpec(x.shape, x.dtype))
    return tf_capture.Tracer(concrete, x).ops


def kinds(ops):
    """The ops' kinds, without the Identity ops a function's outputs pass through (the C++ table
    counts them as views)."""
    return [op["op"] for op in ops if op["op"] != "tf::Identity"]


def through_identities(ops, name):
    """The tensor `name` is, after the Identity ops it passes through."""
    alias = {op["out"][0]["tensor"]: op["in"][0]["tensor"] for op in ops if op["op"] == "tf::Identity"}
    while name in alias:
        name = alias[name]
    return name


def tensors(values):
    return [v["tensor"] for v in values if isinstance(v, dict)]


def test_a_dense_layer_reads_its_variable_by_name():
    b = tf.Variable(np.zeros(4, np.float32), name="b")
    frozen = tf.Variable(np.ones(4, np.float32), name="stats", trainable=False)
    ops = capture(lambda x: tf.tanh(tf.matmul(x, W) + b) * frozen)
    assert kinds(ops) == ["tf::MatMul", "tf::AddV2", "tf::Tanh", "tf::Mul"]
    matmul, add, tanh, mul = [op for op in ops if op["op"] != "tf::Identity"]
    assert matmul["in"][0]["tensor"] == "input0"
    assert matmul["in"][1] == {"tensor": "w", "shape": [4, 4], "dtype": "float32", "param": True}
    assert add["in"][1]["tensor"] == "b"
    assert mul["in"][1]["tensor"] == "buffer:stats"  # not trainable: a buffer
    assert tensors(add["in"])[0] == matmul["out"][0]["tensor"]
    assert tanh["out"][0]["shape"] == [2, 4]


def test_shape_arithmetic_folds_into_integers():
    ops = capture(lambda x: tf.reshape(x, [tf.shape(x)[0] * 4]))
    assert kinds(ops) == ["tf::Reshape"]  # Shape, StridedSlice and Mul are folded
    reshape = [op for op in ops if op["op"] == "tf::Reshape"][0]
    assert reshape["in"][1] == [8]
    assert reshape["out"][0]["shape"] == [8]


def test_a_while_is_its_steps_with_carries_chained():
    def f(x):
        return tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, W))), (0, x))[1]

    ops = capture(f)
    matmuls = [op for op in ops if op["op"] == "tf::MatMul"]
    assert len(matmuls) == 3
    assert all(m["in"][1]["tensor"] == "w" for m in matmuls)  # one weight, read every step
    steps = [m["out"][0]["tensor"].split("/")[1] for m in matmuls]
    assert steps == ["0", "1", "2"]  # "<While op>/<step>/..."
    tanhs = [op for op in ops if op["op"] == "tf::Tanh"]
    assert matmuls[0]["in"][0]["tensor"] == "input0"
    for prev, m in zip(tanhs, matmuls[1:]):  # step i's h is what step i+1 multiplies
        assert through_identities(ops, m["in"][0]["tensor"]) == prev["out"][0]["tensor"]
    assert not {"tf::While", "tf::StatelessWhile", "tf::Less"} & set(kinds(ops))  # the counter folds


def test_a_while_whose_bound_depends_on_data_counts_its_tests():
    def f(x):
        n = tf.reduce_sum(tf.cast(x > 0, tf.int32))
        return tf.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, tf.tanh(h)), (0, x))[1]

    trips = int(np.sum(X.numpy() > 0))
    ops = capture(f)
    assert kinds(ops).count("tf::Tanh") == trips
    assert kinds(ops).count("tf::Less") == trips + 1  # the test that ends the loop too


def test_a_while_too_long_to_unroll_stays_one_op_with_the_reason(monkeypatch):
    monkeypatch.setattr(tf_capture, "MAX_UNROLLED", 10)
    ops = capture(lambda x: tf.while_loop(lambda i, h: i < 50, lambda i, h: (i + 1, tf.tanh(h)), (0, x))[1])
    loops = [op for op in ops if op["op"] in ("tf::While", "tf::StatelessWhile")]
    assert len(loops) == 1 and "exceed" in loops[0]["attrs"]["not_unrolled"]
    assert "tf::Tanh" not in kinds(ops)


@pytest.mark.parametrize("sign,label", [(1.0, "then"), (-1.0, "else")])
def test_an_if_is_the_branch_it_takes_on_the_input(sign, label):
    def f(x):
        return tf.cond(tf.reduce_sum(x) > 0, lambda: tf.tanh(tf.matmul(x, W)), lambda: -x)

    ops = capture(f, sign * tf.abs(X))
    assert "tf::If" not in kinds(ops) and "tf::StatelessIf" not in kinds(ops)
    inlined = [op for op in ops if op["op"] != "tf::Identity" and any(f"/{label}/" in t for t in tensors(op["out"]))]
    assert inlined and all(op["op"] != "tf::Sum" for op in inlined)
    if label == "then":
        assert [op["op"] for op in inlined] == ["tf::MatMul", "tf::Tanh"]
        assert inlined[0]["in"][1]["tensor"] == "w"  # a weight read in a branch keeps its name
    else:
        assert [op["op"] for op in inlined] == ["tf::Neg"]
    other = "else" if label == "then" else "then"
    assert not any(f"/{other}/" in t for op in ops for t in tensors(op["out"]))


def test_a_tensor_list_is_a_tensor_of_its_length_and_element_shape():
    def f(x):  # a TensorArray filled in a loop: TensorListReserve, SetItem per step, Stack
        ta = tf.TensorArray(tf.float32, size=3)
        ta = tf.while_loop(lambda i, ta: i < 3, lambda i, ta: (i + 1, ta.write(i, tf.tanh(x))), (0, ta))[1]
        return ta.stack()

    ops = capture(f)
    assert kinds(ops).count("tf::Tanh") == 3
    assert kinds(ops).count("tf::TensorListSetItem") == 3
    stack = [op for op in ops if op["op"] == "tf::TensorListStack"]
    assert len(stack) == 1 and stack[0]["out"][0]["shape"] == [3, 2, 4]
    lists = [
        v
        for op in ops
        for v in op["in"] + op["out"]
        if isinstance(v, dict)
        and v["dtype"] == "float32"
        and v["shape"][:1] == [3]
        and len(v["shape"]) == 3
        and "TensorList" in op["op"]
    ]
    assert lists  # every version of the list is reported as [length, element...]
