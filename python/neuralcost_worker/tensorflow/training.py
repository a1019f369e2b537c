"""The TensorFlow worker's training step (docs/worker-protocol.md, `build` with `train`): forward
and loss under tf.GradientTape, tape.gradient, and the optimizer update written in tf ops with
torch.optim's formulas (training.py), its state in tf.Variables updated in place. Hand-written,
not tf.keras.optimizers: Keras's Adam puts eps inside the bias correction (eps-hat) and its SGD
momentum scales the velocity by the learning rate, so the same hyperparameters would not mean
the same step as in torch and JAX.

Modes: eager (op by op), function (the whole step one tf.function), xla (tf.function with
jit_compile=True). A step ends by reading the loss (.numpy()), after the updates it depends on.

Memory (the `memory` request): TensorFlow's CPU allocator statistics,
tf.config.experimental.get_memory_info("CPU:0")["peak"] after reset_memory_stats("CPU:0"), over
one extra step: the peak of bytes allocated through TensorFlow's allocator, the variables
(parameters, optimizer state) and the input included. What it counts depends on the allocator
(TensorFlow 2.21 on x86): with oneDNN (the default) the MklCPUAllocator counts only its BFC pool
of allocations >= 256 KiB, smaller ones go uncounted; with TF_CPU_ALLOCATOR_USE_BFC=true in the
worker's environment (neural-cost starts training workers with it) one BFC allocator serves and
counts all; with TF_ENABLE_ONEDNN_OPTS=0 alone
there are no statistics. A 4 KiB probe tensor tells which, and the source says it. In xla mode
XLA's buffers (temporaries included) come from the same allocator (checked: a jit-compiled
function's 4 MB temporary shows in the peak); memory that oneDNN or Eigen allocate themselves,
outside TensorFlow's allocator, does not.
"""

import gc

import tensorflow as tf

from neuralcost_worker import training

DEVICE = "CPU:0"


def loss_function(loss):
    if loss == "cross_entropy":
        return lambda y, labels: tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, y))
    return lambda y, target: tf.reduce_mean(tf.square(y - target))


class Optimizer:
    """torch.optim's SGD, SGD with momentum, Adam and AdamW (training.py) over tf.Variables."""

    def __init__(self, train, variables):
        self.train, self.variables = train, list(variables)
        opt = train["optimizer"]

        def slots(name):
            return [
                tf.Variable(tf.zeros_like(v), trainable=False, name=f"{name}/{v.name.split(':')[0]}")
                for v in self.variables
            ]

        self.buf = slots("momentum") if opt == "momentum" else None
        self.m, self.v = (slots("m"), slots("v")) if opt in ("adam", "adamw") else (None, None)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")

    def state_variables(self):
        return [self.step] + (self.buf or []) + (self.m or []) + (self.v or [])

    def apply(self, grads):
        t = self.train
        opt, lr, wd = t["optimizer"], t["learning_rate"], t["weight_decay"]
        self.step.assign_add(1)
        if wd and opt != "adamw":  # L2 in the gradient (torch's weight_decay of SGD and Adam)
            grads = [g + wd * p for g, p in zip(grads, self.variables)]
        if opt == "sgd":
            for p, g in zip(self.variables, grads):
                p.assign_sub(lr * g)
            return
        if opt == "momentum":
            for p, g, b in zip(self.variables, grads, self.buf):
                p.assign_sub(lr * b.assign(t["momentum"] * b + g))
            return
        b1, b2 = t["betas"]
        for p, g, m, v in zip(self.variables, grads, self.m, self.v):
            step = tf.cast(self.step, p.dtype)
            if opt == "adamw" and wd:
                p.assign(p * (1.0 - lr * wd))
            m.assign(b1 * m + (1.0 - b1) * g)
            v.assign(b2 * v + (1.0 - b2) * g * g)
            denominator = tf.sqrt(v) / tf.sqrt(1.0 - tf.pow(tf.constant(b2, p.dtype), step)) + t["eps"]
            p.assign_sub(lr / (1.0 - tf.pow(tf.constant(b1, p.dtype), step)) * m / denominator)


class Step:
    """A built model's training step: run() is one step, synchronised."""

    def __init__(self, forward, xs, variables, mode, train):
        self.xs = list(xs)
        y = forward(*self.xs)
        if not isinstance(y, tf.Tensor):
            raise ValueError(f"train: the network returns {type(y).__name__}, not one tensor")
        self.loss = training.loss_for(train, y.shape.as_list())
        target = training.targets(train, self.loss, y.shape.as_list(), y.dtype.as_numpy_dtype)
        self.target = tf.constant(target)
        self.optimizer = Optimizer(train, variables)
        loss_fn = loss_function(self.loss)

        def step(*xs):
            with tf.GradientTape() as tape:
                value = loss_fn(forward(*xs), self.target)
            self.optimizer.apply(tape.gradient(value, self.optimizer.variables))
            return value

        self.fn = step if mode == "eager" else tf.function(step, jit_compile=mode == "xla")
        self.mode = mode
        self.environment = dict(training.contract(train, self.loss, y.shape.as_list()))
        self.environment["train_step_implementation"] = (
            "tf.GradientTape, optimizer written in tf ops (torch.optim's formulas; not tf.keras.optimizers), "
            "its state in tf.Variables; "
            + {
                "eager": "eager, op by op",
                "function": "the whole step one tf.function",
                "xla": "the whole step one tf.function(jit_compile=True)",
            }[mode]
            + "; the loss read with .numpy()"
        )
        self.first_loss = self.last_loss = None
        self.steps = 0
        self.run()  # traces and compiles the compiled modes

    def run(self):
        self.last_loss = float(self.fn(*self.xs).numpy())
        self.steps += 1
        if self.first_loss is None:
            self.first_loss = self.last_loss

    def execution(self):
        facts = {
            "first_step_loss": f"{self.first_loss:.6g}",
            "last_step_loss": f"{self.last_loss:.6g}",
            "steps": self.steps,
        }
        if self.mode == "eager":
            facts.update(compiled_programs=0, compiler="none (eager)")
        else:
            facts.update(
                compiled_programs=self.fn.experimental_get_tracing_count(),
                compiler="tf.function graph of the whole step"
                + (", jit_compile=True (XLA)" if self.mode == "xla" else ""),
            )
        return facts

    def memory(self):
        info = tf.config.experimental.get_memory_info
        gc.collect()  # tensors of earlier models held only by reference cycles
        try:
            small = info(DEVICE)["current"]
            probe = tf.fill((1024,), tf.constant(1, tf.float32)) + 1  # a fresh 4 KiB tensor
            small = info(DEVICE)["current"] - small >= probe.shape[0] * 4
            del probe
            tf.config.experimental.reset_memory_stats(DEVICE)
            before = info(DEVICE)["current"]
        except (ValueError, tf.errors.OpError) as e:
            return {
                "source": f"none: TensorFlow keeps no allocator statistics for {DEVICE} in this process "
                f"({e}); TF_CPU_ALLOCATOR_USE_BFC=true in the worker's environment gives them"
            }
        self.run()
        after = info(DEVICE)
        counted = (
            "every allocation (a 4 KiB probe tensor shows)"
            if small
            else "only allocations of 256 KiB and more: oneDNN's CPU allocator keeps no statistics for smaller "
            "ones (a 4 KiB probe tensor does not show; TF_CPU_ALLOCATOR_USE_BFC=true in the worker's "
            "environment makes one BFC allocator that counts all)"
        )
        return {
            "peak_bytes": int(after["peak"]),
            "source": "TensorFlow's CPU allocator statistics over one extra training step: "
            "tf.config.experimental.get_memory_info('CPU:0')['peak'] after reset_memory_stats('CPU:0'); "
            "bytes allocated through TensorFlow's allocator, variables (parameters, optimizer state) "
            "and input included"
            + (", XLA's buffers too" if self.mode == "xla" else "")
            + ", counting "
            + counted
            + "; memory that oneDNN or Eigen allocate themselves is not in it",
            "allocator_bytes_before_step": int(before),
            "allocator_bytes_after_step": int(after["current"]),
        }
