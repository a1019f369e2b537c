"""The JAX capture walker (python/neuralcost_worker/jax/capture.py) on small programs: the op
records it emits for plain ops, nested calls, scans, whiles and conds (names, shapes, steps)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from neuralcost_worker.jax import capture as jax_capture


def capture(f, params, x, buffers=None):
    return jax_capture.capture(jax.make_jaxpr(f)(params, x), params, x, buffers or {})


def names(ops):
    return [op["op"] for op in ops]


def tensors(values):
    return [v["tensor"] for v in values if isinstance(v, dict)]


RNG = np.random.default_rng(0)
W = jnp.asarray(RNG.standard_normal((4, 4)), jnp.float32)
X = jnp.asarray(RNG.standard_normal((2, 4)), jnp.float32)


def test_a_dense_layer_names_its_weights_input_and_edges():
    params = {"layers": [{"w": jnp.ones((4, 3)), "b": jnp.zeros(3)}]}
    ops = capture(lambda p, x: jnp.tanh(x @ p["layers"][0]["w"] + p["layers"][0]["b"]), params, X)
    assert names(ops) == ["jax::dot_general", "jax::broadcast_in_dim", "jax::add", "jax::tanh"]
    dot, broadcast, add, tanh = ops
    assert dot["in"][0] == {"tensor": "input0", "shape": [2, 4], "dtype": "float32"}  # no "param": the input
    assert dot["in"][1]["tensor"] == "layers.0.w" and dot["in"][1]["param"] is True
    assert dot["attrs"]["lhs_contracting"] == [1] and dot["attrs"]["rhs_contracting"] == [0]
    assert dot["out"][0]["shape"] == [2, 3]
    # the bias is ranked up to [1, 3] (add broadcasts size-1 dimensions): a layout op of a weight
    # that keeps its size, so its output is still the weight, under the weight's name
    assert tensors(broadcast["in"]) == ["layers.0.b"]
    assert broadcast["out"][0] == {"tensor": "layers.0.b", "shape": [1, 3], "dtype": "float32", "param": True}
    # edges chain op to op
    assert tensors(add["in"]) == [dot["out"][0]["tensor"], "layers.0.b"]
    assert dot["out"][0]["tensor"].startswith("%")
    assert tensors(tanh["in"]) == tensors(add["out"])


def test_a_layout_op_of_a_weight_keeps_its_name():
    ops = capture(lambda p, x: x @ p["w"].T, {"w": W}, X)
    assert names(ops) == ["jax::transpose", "jax::dot_general"]
    assert ops[0]["out"][0]["tensor"] == "w" and ops[0]["out"][0]["param"] is True
    assert ops[1]["in"][1]["tensor"] == "w"


def test_nested_jit_and_custom_jvp_are_inlined():
    inner = jax.jit(lambda a: jax.nn.relu(a @ W))  # relu is a custom_jvp function
    ops = capture(lambda p, x: inner(x) * p["s"], {"s": jnp.float32(2)}, X)
    assert "jax::pjit" not in names(ops) and "jax::custom_jvp_call" not in names(ops)
    assert names(ops)[:1] == ["jax::dot_general"]
    assert "jax::max" in names(ops)  # relu's body


def test_named_buffers_are_constants():
    stats = jnp.arange(4.0)
    buffers = {"bn": {"running_mean": stats}}
    ops = capture(lambda p, x: x - stats, {}, X, buffers)
    reads = [v for op in ops for v in op["in"] if isinstance(v, dict) and v["tensor"].startswith("const:")]
    assert reads and all(v["tensor"] == "const:bn.running_mean" and v["param"] for v in reads)


def test_a_scan_is_its_steps_with_carries_chained():
    def f(p, xs):
        def step(h, x):
            h = jnp.tanh(x @ p["wx"] + h @ p["wh"])
            return h, h

        return lax.scan(step, jnp.zeros((2, 4)), xs)[1]

    xs = jnp.asarray(RNG.standard_normal((5, 2, 4)), jnp.float32)
    ops = capture(f, {"wx": W, "wh": W}, xs)
    dots = [op for op in ops if op["op"] == "jax::dot_general"]
    assert len(dots) == 10  # 5 steps x 2 products
    assert [tensors(d["in"])[1] for d in dots] == ["wx", "wh"] * 5  # one weight, read every step
    slices = [op for op in ops if op["op"] == "jax::slice"]
    assert [s["attrs"]["start_indices"][0] for s in slices] == [0, 1, 2, 3, 4]
    tanhs = [op for op in ops if op["op"] == "jax::tanh"]
    for prev, dot in zip(tanhs, dots[3::2]):  # step i's h is what step i+1's h @ wh reads
        assert tensors(dot["in"])[0] == prev["out"][0]["tensor"]
    # the ys are stacked back: a reshape to [1, 2, 4] per step and one concatenate to [5, 2, 4]
    concat = [op for op in ops if op["op"] == "jax::concatenate"]
    assert len(concat) == 1 and concat[0]["out"][0]["shape"] == [5, 2, 4] and len(concat[0]["in"]) == 5


def test_a_reverse_scan_walks_its_steps_backwards():
    xs = jnp.ones((3, 2, 4))
    ops = capture(lambda p, xs: lax.scan(lambda c, x: (c + x, None), jnp.zeros((2, 4)), xs, reverse=True)[0], {}, xs)
    assert [op["attrs"]["start_indices"][0] for op in ops if op["op"] == "jax::slice"] == [2, 1, 0]


def test_a_while_with_a_literal_counter_is_its_steps_and_the_counter_folds():
    def f(p, x):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.tanh(c[1] @ p["w"])), (0, x))[1]

    ops = capture(f, {"w": W}, X)
    assert names(ops) == ["jax::dot_general", "jax::tanh"] * 3  # no compare, no counter add
    assert all(tensors(op["in"])[1] == "w" for op in ops[::2])


def test_a_while_whose_bound_depends_on_data_counts_its_tests():
    def f(p, x):
        n = jnp.sum(x > 0).astype(jnp.int32)  # a trip count from the input's values
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, jnp.tanh(c[1] @ p["w"])), (0, x))[1]

    trips = int(np.sum(np.asarray(X) > 0))
    ops = capture(f, {"w": W}, X)
    assert names(ops).count("jax::dot_general") == trips
    assert names(ops).count("jax::lt") == trips + 1  # the test that ends the loop too
    assert "jax::while" not in names(ops)


def test_a_while_too_long_to_unroll_stays_one_op_with_the_reason(monkeypatch):
    monkeypatch.setattr(jax_capture, "MAX_UNROLLED", 10)

    def f(p, x):  # a while_loop, not a fori_loop with static bounds (that one is a scan)
        return lax.while_loop(lambda c: c[0] < 50, lambda c: (c[0] + 1, jnp.tanh(c[1] @ p["w"])), (0, x))[1]

    ops = capture(f, {"w": W}, X)
    loops = [op for op in ops if op["op"] == "jax::while"]
    assert len(loops) == 1 and "exceed" in loops[0]["attrs"]["not_unrolled"]
    assert "jax::dot_general" not in names(ops)


def test_a_scan_inside_a_while_is_counted_per_step():
    def f(p, x):
        inner = lambda h: lax.scan(lambda c, _: (jnp.tanh(c @ p["w"]), None), h, None, length=2)[0]
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, inner(c[1])), (0, x))[1]

    assert names(capture(f, {"w": W}, X)).count("jax::dot_general") == 6


@pytest.mark.parametrize("sign,taken", [(1.0, "1 of 2"), (-1.0, "0 of 2")])
def test_a_cond_is_the_branch_it_takes_on_the_input(sign, taken):
    def f(p, x):
        return lax.cond(jnp.sum(x) > 0, lambda a: jnp.tanh(a @ p["w"]), lambda a: -a, x)

    x = sign * jnp.abs(X)
    ops = capture(f, {"w": W}, x)
    inlined = [op for op in ops if op.get("attrs", {}).get("cond_branch")]
    assert "jax::cond" not in names(ops)
    assert {op["attrs"]["cond_branch"] for op in inlined} == {taken}
    if taken == "1 of 2":
        assert [op["op"] for op in inlined] == ["jax::dot_general", "jax::tanh"]
    else:
        assert [op["op"] for op in inlined] == ["jax::neg"]


def test_a_switch_on_a_constant_index_folds_without_evaluating():
    branches = [lambda a: a + 1, lambda a: a @ W, lambda a: jnp.tanh(a)]
    ops = capture(lambda p, x: lax.switch(1, branches, x), {}, X)
    assert names(ops) == ["jax::dot_general"]
    assert ops[0]["attrs"]["cond_branch"] == "1 of 3"
