"""Training to a quality target (`neural-cost train-to-target`, docs/to-target.md): one seeded run
of a reference network on an offline dataset until its validation accuracy reaches the target,
evaluated every K steps on a held-out split. Served as `python -m neuralcost_worker to-target`:
one JSON request a line on stdin, one reply a line on stdout (as the other workers).

    {"cmd": "hello"}                      -> torch's version, the datasets
    {"cmd": "run", "model": "ff", ...}    -> the run's curve and where it reached the target
    {"cmd": "dataset", "dataset": ...}    -> the split itself (for the LibTorch engine, which trains
                                             on exactly these images)

Datasets ship inside a package and are never downloaded: `digits` is scikit-learn's copy of the
UCI optical digits (1,797 images of 8 x 8 pixels, 16 grey levels, 10 classes), inside the wheel.
The split is a seeded stratified shuffle (the split seed is the contract's, not the run's), so
every run of a study validates on the same images.

Engines: `"backend": "torch"` (TorchEngine, here), `"jax"` (jax/to_target.py) or `"tensorflow"`
(tensorflow/to_target.py); all are driven
by run()'s loop (batch order, evaluations, the curve), so they differ only in the step and the
evaluation. The LibTorch engine is a C++ executable with the same loop.

The run's seed draws its initial weights (torch's generator, after torch.manual_seed) and its batch
order (torch.randperm on a generator of its own, seeded alike): the LibTorch engine
(src/backends/libtorch/to_target_engine.cpp) draws both the same way from the same CPU generator,
so a seed starts every engine from the same weights on the same batches (`first_loss` shows it;
the jax engine copies the seeded torch module's weights).
"""

import resource
import time

import numpy as np

from neuralcost_worker import line_server

DATASETS = ("digits",)
MODELS = ("ff", "cnn")
OPTIMIZERS = ("sgd", "adam")


class BadRequest(ValueError):
    pass


def load_dataset(name, val_fraction, split_seed):
    """(train x, train y, val x, val y, image shape) of a dataset, x in [0, 1] as float32."""
    if name != "digits":
        raise BadRequest(f"unknown dataset '{name}' (known: {', '.join(DATASETS)})")
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    rng = np.random.default_rng(split_seed)
    val = []
    for c in np.unique(y):  # stratified: each class in the same proportion in both splits
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        val.extend(idx[: int(round(val_fraction * len(idx)))])
    val = np.sort(np.array(val, dtype=np.int64))
    train = np.setdiff1d(np.arange(len(y)), val)
    if len(val) == 0 or len(train) == 0:
        raise BadRequest(
            f"--val-fraction {val_fraction} leaves {len(train)} training and {len(val)} validation images of "
            f"{len(y)}: both must be at least one"
        )
    return x[train], y[train], x[val], y[val], (1, 8, 8), int(y.max()) + 1


def build_model(name, width, depth, image, classes):
    """The reference networks (docs/reference-networks.md) adapted to the data: ff's first layer
    takes the image's pixels, cnn's first convolution its channels, both classify `classes`. Any
    other name is a file of the user's: a torch.export program (.pt2, load_program) or TorchScript
    (load_script)."""
    import torch
    from torch import nn

    from neuralcost_worker.torch import reference

    if name == "ff":
        net = reference.FeedForward(width, depth)
        net.block0.linear = nn.Linear(int(np.prod(image)), width)
    elif name == "cnn":
        if image[1] >> (depth - 1) < 1:
            raise BadRequest(f"cnn of depth {depth} pools {image[1]} x {image[2]} images below one pixel")
        net = reference.Cnn(width, depth)
        first = net.stage0.conv
        net.stage0.conv = nn.Conv2d(image[0], first.out_channels, 3, padding=1)
    else:
        load = load_program if name.endswith(".pt2") else load_script
        net, layout = load(name, image, classes)
        return net, torch, layout
    net.classifier = nn.Linear(net.classifier.in_features, classes)
    return net, torch, tuple(image) if name == "cnn" else (int(np.prod(image)),)


def _input_layout(net, path, image, classes, exported):
    """The input layout a user's module takes (without the batch), found by a forward of two
    images, first as images [N, C, H, W], then flattened [N, C*H*W]; its output must be
    [N, classes] logits. An exported program must take another batch too (its batch dynamic)."""
    import torch

    def message_of(e, last):
        text = str(e).strip()
        return (text.splitlines()[-1] if last else text.splitlines()[0]) if text else type(e).__name__

    def fixed_batch(message):
        return BadRequest(
            f"--model {path}: its batch dimension was exported fixed ({message}); export it with a dynamic "
            "batch, dynamic_shapes={'x': {0: torch.export.Dim('batch')}}"
        )

    tried = []
    for shape in ((2,) + tuple(image), (2, int(np.prod(image)))):
        try:
            with torch.no_grad():
                out = net(torch.zeros(shape))
        except Exception as e:
            # TorchScript's last line names the failure; an exported program's guard is its first
            message = message_of(e, last=not exported)
            if exported and "size()[0] ==" in message:
                raise fixed_batch(message) from None
            tried.append(f"[{', '.join(map(str, shape))}]: {message}")
            continue
        if exported:
            try:  # a program exported at batch 2 takes the probe and no other batch
                with torch.no_grad():
                    net(torch.zeros((3,) + shape[1:]))
            except Exception as e:
                raise fixed_batch(message_of(e, last=False)) from None
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, classes):
            got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise BadRequest(
                f"--model {path}: its output for [{', '.join(map(str, shape))}] is {got}, not [2, {classes}] logits"
            )
        return shape[1:]
    raise BadRequest(f"--model {path}: takes neither the images nor them flattened ({'; '.join(tried)})")


def load_script(path, image, classes):
    """A user's TorchScript file: its module (with trainable parameters) and its input layout
    (_input_layout)."""
    import torch

    try:
        net = torch.jit.load(path, map_location="cpu")
    except Exception as e:
        why = str(e).strip().splitlines()[0].split(". ")[0] if str(e).strip() else type(e).__name__
        raise BadRequest(f"--model {path}: not ff or cnn, nor a TorchScript file torch can load ({why})") from None
    if not any(p.requires_grad for p in net.parameters()):
        raise BadRequest(f"--model {path}: it has no trainable parameters")
    net.eval()
    layout = _input_layout(net, path, image, classes, exported=False)
    net.train()
    return net, layout


def load_program(path, image, classes):
    """A user's torch.export program (.pt2, torch.export.save): ExportedProgram.module(), which
    trains as a GraphModule, and its input layout (_input_layout). Its batch dimension must be
    dynamic (runs train on --batch and evaluate on the whole validation split); what dropout and
    batch norm do is fixed as it was exported (the module refuses train() and eval())."""
    import torch

    try:
        net = torch.export.load(path).module()
    except Exception as e:
        why = str(e).strip().splitlines()[0].split(". ")[0] if str(e).strip() else type(e).__name__
        raise BadRequest(f"--model {path}: not a torch.export program torch can load ({why})") from None
    net._neuralcost_exported = True
    if not any(p.requires_grad for p in net.parameters()):
        raise BadRequest(f"--model {path}: it has no trainable parameters")
    return net, _input_layout(net, path, image, classes, exported=True)


def _training(net, on):
    """train() or eval(), except for an exported program, whose behaviour was fixed at export."""
    if not getattr(net, "_neuralcost_exported", False):
        net.train(on)


def seed_weights(net, torch, seed):
    """The run's own initial weights, drawn by its seed: Kaiming-uniform for matrices and kernels,
    U(-0.05, 0.05) for vectors, parameter by parameter from torch's CPU generator (the LibTorch
    engine and the JAX engine draw the same)."""
    torch.manual_seed(seed)
    for p in net.parameters():
        if p.dim() > 1:
            torch.nn.init.kaiming_uniform_(p, a=5**0.5)
        else:
            torch.nn.init.uniform_(p, -0.05, 0.05)


def optimizer_settings(s):
    """The run's optimizer as training.py's settings, for the engines that write torch.optim's
    formulas themselves (jax/training.update, tensorflow/training.Optimizer): SGD with momentum 0.9,
    or Adam with torch's defaults; no weight decay."""
    if s["optimizer"] == "sgd":
        return {"optimizer": "momentum", "learning_rate": s["lr"], "weight_decay": 0.0, "momentum": 0.9}
    return {"optimizer": "adam", "learning_rate": s["lr"], "weight_decay": 0.0, "betas": (0.9, 0.999), "eps": 1e-8}


class TorchEngine:
    """A run's training in PyTorch: step(idx) trains on the training images idx (a torch index
    tensor) and returns the loss, accuracy() evaluates the validation split."""

    def __init__(self, s, data):
        xt, yt, xv, yv, image, classes = data
        net, torch, layout = build_model(s["model"], s["width"], s["depth"], image, classes)
        self.torch, self.net = torch, net
        if s["threads"] > 0:
            torch.set_num_threads(s["threads"])
        seed_weights(net, torch, s["seed"])
        shape = (-1,) + tuple(layout)
        self.xt, self.yt = torch.from_numpy(xt).reshape(shape), torch.from_numpy(yt)
        self.xv, self.yv = torch.from_numpy(xv).reshape(shape), torch.from_numpy(yv)
        _training(net, True)
        params = list(net.parameters())
        lr = s["lr"]
        self.opt = (
            torch.optim.SGD(params, lr=lr, momentum=0.9) if s["optimizer"] == "sgd" else torch.optim.Adam(params, lr=lr)
        )
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.autocast = s["precision"] == "bf16-mixed"
        self.parameters = int(sum(p.numel() for p in params))
        self.version = torch.__version__
        self.compile_seconds = 0.0
        self.model = net
        if s["mode"] == "compiled":
            # the module compiled (forward and, through AOTAutograd, backward; the optimizer stays
            # eager), on a training step and an evaluation of the data before the clock starts
            # (MLPerf's initialisation), then the initial weights and optimizer state put back
            t0 = time.perf_counter()
            self.model = torch.compile(net)
            state = {k: v.clone() for k, v in net.state_dict().items()}
            with self._cast():
                self.loss_fn(self.model(self.xt[: s["batch"]]), self.yt[: s["batch"]]).backward()
            self.accuracy()
            net.load_state_dict(state)
            self.opt.zero_grad(set_to_none=True)
            self.opt.state.clear()
            self.compile_seconds = time.perf_counter() - t0

    def _cast(self):
        return self.torch.autocast("cpu", dtype=self.torch.bfloat16, enabled=self.autocast)

    def step(self, idx):
        self.opt.zero_grad(set_to_none=True)
        with self._cast():
            loss = self.loss_fn(self.model(self.xt[idx]), self.yt[idx])
        loss.backward()
        self.opt.step()
        return loss.detach()

    def accuracy(self):
        _training(self.net, False)
        with self.torch.no_grad(), self._cast():
            acc = float((self.model(self.xv).argmax(1) == self.yv).float().mean())
        _training(self.net, True)
        return acc


def _settings(req):
    """The request's run settings, checked (the tool sends them resolved)."""
    s = {
        "backend": req.get("backend", "torch"),
        "model": req.get("model", "ff"),
        "batch": int(req.get("batch", 32)),
        "lr": float(req.get("lr", 0.05)),
        "target": float(req["target"]),
        "eval_every": int(req.get("eval_every", 20)),
        "max_steps": int(req.get("max_steps", 2000)),
        "seed": int(req.get("seed", 1)),
        "mode": req.get("mode", "eager"),
        "precision": req.get("precision", "fp32"),
        "optimizer": req.get("optimizer", "sgd"),
        "threads": int(req.get("threads", 0)),
        "width": int(req.get("width", 64)),
        "depth": int(req.get("depth", 2)),
    }
    if s["backend"] not in ("torch", "jax", "tensorflow"):
        raise BadRequest(f"--backend {s['backend']}: this worker trains in torch, jax or tensorflow")
    if s["precision"] not in ("fp32", "bf16-mixed"):
        raise BadRequest(f"--precision {s['precision']}: train-to-target runs fp32 or bf16-mixed on a CPU")
    if s["mode"] not in ("eager", "compiled"):
        raise BadRequest(f"--mode {s['mode']}: eager or compiled")
    if s["optimizer"] not in OPTIMIZERS:
        raise BadRequest(f"--optimizer {s['optimizer']}: one of {', '.join(OPTIMIZERS)}")
    model = s["model"]
    if s["backend"] == "jax" and model not in MODELS:
        raise BadRequest(
            f"--model {model}: the jax engine trains ff and cnn "
            "(a file of yours trains in torch, libtorch or tensorflow)"
        )
    if s["backend"] == "tensorflow":
        return s  # ff, cnn or a SavedModel directory (tensorflow/to_target.py checks it)
    if s["mode"] == "compiled" and model not in MODELS and not model.endswith(".pt2"):
        raise BadRequest(
            f"--mode compiled: {model} is TorchScript, which runs as it is in both modes; give --mode eager"
        )
    return s


def run(req):
    s = _settings(req)
    data = load_dataset(
        req.get("dataset", "digits"), float(req.get("val_fraction", 0.2)), int(req.get("split_seed", 0))
    )
    batch, yt = s["batch"], data[1]
    if batch > len(yt):
        raise BadRequest(f"--batch {batch} is larger than the {len(yt)} training images")
    if s["backend"] == "jax":
        from neuralcost_worker.jax import to_target as jax_to_target  # sets jax's threads first

        engine = jax_to_target.Engine(s, data)
    elif s["backend"] == "tensorflow":
        from neuralcost_worker.tensorflow import to_target as tf_to_target

        engine = tf_to_target.Engine(s, data)
    else:
        engine = TorchEngine(s, data)
    import torch

    # the batch order: a fresh randperm each epoch on a generator of the run's own, seeded alike
    # (the same in every engine)
    order_gen = torch.Generator().manual_seed(s["seed"])
    order, at = torch.randperm(len(yt), generator=order_gen), 0
    curve = []
    reached = None
    train_seconds = 0.0
    losses = []
    first_loss = None
    start = time.perf_counter()
    steps = 0
    while steps < s["max_steps"]:
        if at + batch > len(order):  # a new epoch: a fresh permutation, the last partial batch dropped
            order, at = torch.randperm(len(yt), generator=order_gen), 0
        idx = order[at : at + batch]
        at += batch
        t0 = time.perf_counter()
        loss = engine.step(idx)
        train_seconds += time.perf_counter() - t0
        steps += 1
        if steps == 1:
            first_loss = float(loss)
            first_loss = first_loss if np.isfinite(first_loss) else None  # JSON has no NaN
        if steps % s["eval_every"] == 0 or steps == s["max_steps"]:
            losses.append(float(loss))
            acc = engine.accuracy()
            curve.append(
                {
                    "step": steps,
                    "samples": steps * batch,
                    "seconds": time.perf_counter() - start,
                    "train_seconds": train_seconds,
                    "accuracy": acc,
                    "loss": losses[-1] if np.isfinite(losses[-1]) else None,  # JSON has no NaN
                }
            )
            if not np.isfinite(losses[-1]):
                break
            if acc >= s["target"]:
                reached = curve[-1]
                break
    return {
        "ok": True,
        "reached": reached is not None,
        "curve": curve,
        "steps": steps,
        "train_images": int(len(yt)),
        "val_images": int(len(data[3])),
        "classes": data[5],
        "compile_seconds": engine.compile_seconds,
        "parameters": engine.parameters,
        # the engine's version: "2.15.0" (torch), "JAX 0.10.2", "TensorFlow 2.21.0"
        "torch": engine.version,
        "diverged": bool(losses and not np.isfinite(losses[-1])),
        # the first batch's loss, before any update: the seed's weights on the seed's first batch
        "first_loss": first_loss,
        # the process's high-water resident memory over the run (Python, the framework, the data
        # and the training itself: a fresh process a run, so no other run's memory)
        "peak_rss_bytes": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024,
    }


def _dataset(req):
    """The split as `run` trains on it: x flattened row-major, y as class indices."""
    xt, yt, xv, yv, image, classes = load_dataset(
        req.get("dataset", "digits"), float(req.get("val_fraction", 0.2)), int(req.get("split_seed", 0))
    )
    return {
        "ok": True,
        "train_x": xt.ravel().tolist(),
        "train_y": yt.tolist(),
        "val_x": xv.ravel().tolist(),
        "val_y": yv.tolist(),
        "image": list(image),
        "classes": classes,
    }


def _hello(req):
    import sklearn
    import torch

    return {"ok": True, "torch": torch.__version__, "sklearn": sklearn.__version__, "datasets": DATASETS}


def _failure(e):
    if isinstance(e, BadRequest):
        return {"ok": False, "kind": "invalid_argument", "error": str(e)}
    if isinstance(e, ImportError):
        return {"ok": False, "kind": "not_found", "error": f"{e} (scripts/python-env.sh installs it)"}
    return {"ok": False, "kind": "internal", "error": f"{type(e).__name__}: {e}"}


def serve():
    return line_server.serve({"hello": _hello, "run": run, "dataset": _dataset}, _failure)
