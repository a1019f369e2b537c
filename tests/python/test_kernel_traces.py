"""Kernel traces (python/neuralcost_worker/xla_trace.py, tensorflow/trace.py, xspace.py): the mapping of
captured ops to the kernels that ran them, on hand-written HLO and op records, and once on a
real jitted program under XLA's profiler."""

import jax
import jax.numpy as jnp
import numpy as np

from neuralcost_worker import xla_trace, xspace
from neuralcost_worker.jax import capture as jax_capture
from neuralcost_worker.tensorflow import trace as tf_trace
from neuralcost_worker.protocol import tensor

HLO = """HloModule jit_f, is_scheduled=true

FileNames
1 "/m.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=4 end_column=9}
2 {file_name_id=1 function_name_id=1 line=11 end_line=11 column=4 end_column=9}

StackFrames
1 {file_location_id=1}
2 {file_location_id=2 parent_frame_id=1}

%fused_add_tanh (p0: f32[2,4]) -> f32[2,4] {
  %p0 = f32[2,4]{1,0} parameter(0)
  %c = f32[2,4]{1,0} broadcast(%p0), metadata={op_name="jit(f)/add" stack_frame_id=1}
  %a = f32[2,4]{1,0} add(%p0, %c), metadata={op_name="jit(f)/add" stack_frame_id=1}
  ROOT %t = f32[2,4]{1,0} tanh(%a), metadata={op_name="jit(f)/tanh" stack_frame_id=2}
}

%fused_dot (p0: f32[2,4], p1: f32[4,4]) -> f32[2,4] {
  %p0 = f32[2,4]{1,0} parameter(0)
  %p1 = f32[4,4]{1,0} parameter(1)
  ROOT %d = f32[2,4]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general" stack_frame_id=1}
}

ENTRY %main (x: f32[2,4], w: f32[4,4]) -> f32[2,4] {
  %x = f32[2,4]{1,0} parameter(0), metadata={op_name="x"}
  %w = f32[4,4]{1,0} parameter(1), metadata={op_name="w"}
  %dot_fusion = f32[2,4]{1,0} fusion(%x, %w), kind=kCustom, calls=%fused_dot, metadata={op_name="jit(f)/dot_general" stack_frame_id=1}
  ROOT %add_tanh_fusion = f32[2,4]{1,0} fusion(%dot_fusion), kind=kLoop, calls=%fused_add_tanh, metadata={op_name="jit(f)/tanh" stack_frame_id=2}
}
"""


def op(name, ins, outs):
    return {
        "op": name,
        "in": [tensor(t, [2, 4], "float32") for t in ins],
        "out": [tensor(t, [2, 4], "float32") for t in outs],
    }


def test_hlo_kernels_carry_the_keys_of_what_they_fuse():
    kernels, containers = xla_trace.parse_hlo(HLO, jax_capture.hlo_key)
    assert not containers
    fused = kernels["add_tanh_fusion"]
    assert fused.own == ("tanh", ("/m.py", 11, 4))
    assert fused.keys[("add", ("/m.py", 10, 4))] == 2
    assert kernels["dot_fusion"].keys == {("dot_general", ("/m.py", 10, 4)): 2}  # the fusion and its root


def test_a_fused_kernel_takes_every_op_it_fused_and_an_op_is_never_taken_twice():
    kernels, _ = xla_trace.parse_hlo(HLO, jax_capture.hlo_key)
    order = ["dot_fusion", "add_tanh_fusion"]
    ops = [
        op("jax::dot_general", ["x"], ["%1"]),
        op("jax::add", ["%1"], ["%2"]),
        op("jax::tanh", ["%2"], ["%3"]),
        op("jax::reshape", ["%3"], ["%4"]),
    ]
    keys = [
        ("dot_general", ("/m.py", 10, 4)),
        ("add", ("/m.py", 10, 4)),
        ("tanh", ("/m.py", 11, 4)),
        ("reshape", ("/m.py", 99, 0)),
    ]
    assert xla_trace.attribute(keys, ops, kernels, order) == [0, 1, 1, None]  # the reshape: no kernel has it


def test_ops_of_one_source_line_go_to_the_kernel_after_their_inputs():
    # a Python loop over two layers: the same line, two kernels made for it, one op each in order
    own = ("dot_general", ("/m.py", 10, 4))
    kernels = {
        "k0": xla_trace.Kernel({own: 1}, own),
        "k1": xla_trace.Kernel({own: 1}, own),
        "k2": xla_trace.Kernel({("add", None): 1, own: 1}, ("add", None)),
    }
    ops = [
        op("jax::dot_general", ["x"], ["%1"]),
        op("jax::dot_general", ["%1"], ["%2"]),
        op("jax::add", ["%2"], ["%3"]),
    ]
    assert xla_trace.attribute([own, own, ("add", None)], ops, kernels, ["k0", "k1", "k2"]) == [0, 1, 2]
    # a loop's body: one kernel made for the key takes every step's op
    steps = [op("jax::dot_general", [f"%{i}"], [f"%{i + 1}"]) for i in range(4)]
    assert xla_trace.attribute([own] * 4, steps, {"body": kernels["k0"]}, ["body"]) == [0, 0, 0, 0]


def test_op_by_op_runs_are_matched_by_name_even_out_of_order():
    ops = ["MatMul", "Mean", "Sub", "StopGradient", "Mean"]
    runs = ["ReadVariableOp", "MatMul", "Mean", "StopGradient", "Mean", "Sub"]
    owner = xla_trace.match_in_order(ops, runs)
    assert owner == [1, 2, 5, 3, 4]
    assert len(set(owner)) == len(owner)


def test_grappler_fused_kernels_take_the_nodes_they_fused():
    ops = [
        op("tf::MatMul", ["x"], ["a"]),
        op("tf::BiasAdd", ["a"], ["b"]),
        op("tf::Relu", ["b"], ["c"]),
        op("tf::Identity", ["c"], ["d"]),
    ]
    owner, order = tf_trace.map_nodes(
        ops,
        ["MatMul", "BiasAdd", "Relu", "Identity"],
        {"MatMul/ReadVariableOp:ReadVariableOp": 1e-6, "Relu:_MklNativeFusedMatMul": 1e-5},
    )
    assert order[owner[2]] == "Relu:_MklNativeFusedMatMul"
    assert owner[:3] == [owner[2]] * 3  # MatMul and BiasAdd were fused into it
    assert owner[3] is None  # grappler removed the Identity: no kernel ran it


def test_the_trace_reader_reads_events_and_their_args():
    def varint(v):
        out = bytearray()
        while True:
            out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
            v >>= 7
            if not v:
                return bytes(out)

    def field(n, payload):
        return varint(n << 3 | 2) + varint(len(payload)) + payload

    arg = field(1, b"long_name") + field(2, b"Relu:_FusedMatMul\xff")  # not UTF-8: replaced, not refused
    event = field(3, b"_FusedMatMul") + varint(9 << 3) + varint(5000) + varint(10 << 3) + varint(2000) + field(11, arg)
    events = xspace.events(field(4, event))
    assert len(events) == 1
    assert events[0].name == "_FusedMatMul" and events[0].start_ns == 5 and events[0].duration_ns == 2
    assert events[0].args["long_name"].startswith("Relu:_FusedMatMul")


def test_a_jitted_program_maps_every_op_to_a_kernel_that_ran():
    w = jnp.asarray(np.random.default_rng(0).standard_normal((64, 64)), jnp.float32)
    x = jnp.ones((8, 64), jnp.float32)

    def f(p, x):
        for _ in range(2):
            x = jnp.tanh(x @ p["w"] + 1.0)
        return x

    params = {"w": w}
    keys = []
    ops = jax_capture.capture(jax.make_jaxpr(f)(params, x), params, x, {}, keys)
    jitted = jax.jit(f)
    kernels, containers = xla_trace.parse_hlo(jitted.lower(params, x).compile().as_text(), jax_capture.hlo_key)
    run = lambda: jax.block_until_ready(jitted(params, x))  # noqa: E731
    run()
    _, events = xla_trace.session_events(run)
    ran = {e[0] for e in events}
    order = [k for k in kernels if k in ran]
    owner = xla_trace.attribute(keys, ops, kernels, order)
    products = [o for o, r in zip(owner, ops) if r["op"] == "jax::dot_general"]
    assert None not in products and len(set(products)) == 2  # one kernel per layer's product
    reply = xla_trace.time_kernels(run, 2, order, order)
    assert reply["kernels"] and len(reply["wall"]) == 2 and len(reply["plain"]) == 2
    assert all(len(s) == 2 for s in reply["seconds"])
    assert sum(s[0] for s in reply["seconds"]) > 0
