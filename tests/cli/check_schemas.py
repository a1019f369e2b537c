"""Validates the CLI's JSON against the documented schemas in docs/schema/.

Usage: check_schemas.py NEURAL_COST_BINARY SOURCE_DIR [MODEL.onnx ...]
Runs with Debian's /usr/bin/python3 and python3-jsonschema (installed by scripts/install-deps.sh).
"""

import glob
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

binary, source, onnx_models = sys.argv[1], sys.argv[2], sys.argv[3:]
analysis_schema = json.load(open(f"{source}/docs/schema/analysis.schema.json"))
hardware_schema = json.load(open(f"{source}/docs/schema/hardware.schema.json"))
profile_schema = json.load(open(f"{source}/docs/schema/profile.schema.json"))
calibration_schema = json.load(open(f"{source}/docs/schema/calibration.schema.json"))
interconnect_schema = json.load(open(f"{source}/docs/schema/interconnect.schema.json"))
checked = 0
failed = 0


def check(document, schema, what):
    global checked, failed
    checked += 1
    try:
        jsonschema.validate(document, schema)
    except jsonschema.ValidationError as e:
        failed += 1
        print(f"FAIL {what}: {e.message} at {list(e.absolute_path)}")


def expect(condition, what):
    global checked, failed
    checked += 1
    if not condition:
        failed += 1
        print(f"FAIL {what}")


def rejects(document, schema, what):
    try:
        jsonschema.validate(document, schema)
    except jsonschema.ValidationError:
        expect(True, what)
        return
    expect(False, what)


def cli(*args):
    return json.loads(subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout)


for model in ["ff", "cnn", "rnn", "lstm", "transformer"]:
    check(cli("analyze", "--model", model, "--format", "json"), analysis_schema, f"analyze {model}")
    step = cli("analyze", "--model", model, "--train", "--checkpoint", "every", "--format", "json")
    check(step, analysis_schema, f"analyze {model} --train")
    expect(
        "training" in step and step["training"]["checkpoint"] == "every",
        f"analyze {model} --train has its training object",
    )
for i, analysis in enumerate(cli("analyze", "--train", "--optimizer", "sgd", "--format", "json")["analyses"]):
    check(analysis, analysis_schema, f"analyze --train summary #{i}")
for i, analysis in enumerate(cli("analyze", "--format", "json")["analyses"]):
    check(analysis, analysis_schema, f"summary analysis {i}")
# ONNX files: bound (complete) and with their symbolic dimensions unbound (unmodeled ops)
for path in onnx_models:
    dims = {"small_cnn.onnx": ["--dim", "N=2"], "shared_weight.onnx": []}.get(path.split("/")[-1], ["--dim", "batch=2"])
    bound = cli("analyze", path, *dims, "--format", "json")
    check(bound, analysis_schema, f"analyze {path}")
    unbound = cli("analyze", path, "--format", "json")
    check(unbound, analysis_schema, f"analyze {path} (unbound)")
    expect(bound["totals"]["complete"], f"{path}: complete once bound")
for path in sorted(glob.glob(f"{source}/data/hardware/*.json")):
    check(json.load(open(path)), hardware_schema, path)
for spec in cli("hardware", "list", "--format", "json"):
    check(spec, hardware_schema, f"hardware list: {spec['id']}")
for path in sorted(glob.glob(f"{source}/data/interconnects/*.json")):
    check(json.load(open(path)), interconnect_schema, path)
for spec in cli("hardware", "interconnects", "--format", "json"):
    check(spec, interconnect_schema, f"hardware interconnects: {spec['id']}")
rejects(
    {
        "schema_version": 1,
        "id": "x",
        "name": "x",
        "kind": "carrier-pigeon",
        "scope": "intra-node",
        "bus_bandwidth_bytes_per_second": 1,
        "latency_seconds": 0,
    },
    interconnect_schema,
    "an unknown link kind",
)

# this machine: a quick calibration (into a scratch cache), then host and host-spec as specs

with tempfile.TemporaryDirectory() as cache:
    os.environ["NEURALCOST_CACHE_DIR"] = cache
    # --force: saved even on a busy machine (a test suite's), where it would be printed but not saved
    calibration = cli("hardware", "calibrate", "--quick", "--force", "--format", "json")
    check(calibration, calibration_schema, "hardware calibrate --quick")
    expect(calibration["levels"][-1]["name"] == "DRAM", "calibration: the last level is DRAM")
    check(
        json.load(open(f"{cache}/host-calibration-{calibration['threads']}t.json")),
        calibration_schema,
        "the cache file",
    )
    for host in ["host", "host-spec"]:
        spec = cli("hardware", "show", host, "--format", "json")
        check(spec, hardware_schema, f"hardware show {host}")
        # the printed spec is a valid spec file
        path = f"{cache}/{host}.json"
        json.dump(spec, open(path, "w"))
        check(cli("hardware", "show", path, "--format", "json"), hardware_schema, f"{host} spec re-read from a file")
    check(
        cli("analyze", "--model", "cnn", "--hardware", "host", "--format", "json"), analysis_schema, "analyze on host"
    )
    detected = cli("hardware", "detect", "--format", "json")
    expect(detected["logical_cpus"] >= 1 and detected["cores"] >= 1, "hardware detect: CPUs and cores")
    del os.environ["NEURALCOST_CACHE_DIR"]

# neural-cost profile: short runs, then a run list with a failed run (exit code 1, JSON still
# printed). Skipped when the binary has no profiling backend (built without LibTorch).
# a fixed roof: no calibration per command (the calibration's own schema is checked above)
QUICK = [
    "--batch",
    "2",
    "--budget",
    "0.2",
    "--warmup",
    "2",
    "--warmup-seconds",
    "0",
    "--layer-runs",
    "3",
    "--target-ci",
    "0.5",
    "--format",
    "json",
    "--hardware",
    f"{source}/tests/inputs/good/test_cpu_2core.json",
]
profile = subprocess.run(
    [binary, "profile", "--model", "ff,rnn", "--mode", "eager,compiled", *QUICK], capture_output=True, text=True
)
profiled = None
if profile.returncode != 0 and "unknown backend" in profile.stderr:
    print(f"skipped profile checks: {profile.stderr.strip()}")
elif profile.returncode != 0:
    expect(False, f"profile exited {profile.returncode}: {profile.stderr.strip()}")
else:
    profiled = json.loads(profile.stdout)
    check(profiled, profile_schema, "profile ff,rnn eager,compiled")
    check(profiled["hardware"], hardware_schema, "profile hardware")
    # a TorchScript file and the four backends need LibTorch (-DNEURALCOST_WITH_LIBTORCH=OFF builds lack it)
    libtorch = any(b["name"] == "libtorch" for b in cli("backends", "--format", "json"))
    with_failure = subprocess.run(
        [binary, "profile", "--model", "ff,/nonexistent.pt", "--input-shape", "1x4", *QUICK],
        capture_output=True,
        text=True,
    )  # exits 1: one run failed
    if not libtorch:
        print("skipped the profile checks that need LibTorch (a failed TorchScript run, four backends)")
    else:
        expect(with_failure.returncode == 1, f"profile with a failed run exited {with_failure.returncode}, expected 1")
        document = json.loads(with_failure.stdout)
        check(document, profile_schema, "profile with a failed run")
        expect(
            [run["failed"] for run in document["runs"]] == [False, True],
            "profile with a failed run: expected runs [ok, failed]",
        )
    # several backends: the Python workers and the comparison
    compared = subprocess.run(
        [
            binary,
            "profile",
            "--model",
            "ff",
            "--backend",
            "libtorch,jax,tensorflow,torch" if libtorch else "jax,tensorflow,torch",
            "--mode",
            "eager",
            *QUICK,
        ],
        capture_output=True,
        text=True,
    )
    expect(
        compared.returncode == 0, f"profile of four backends exited {compared.returncode}: {compared.stderr.strip()}"
    )
    if compared.returncode == 0:
        document = json.loads(compared.stdout)
        check(document, profile_schema, "profile of four backends")
        expect(
            [run["backend"] for run in document["runs"]]
            == (["libtorch"] if libtorch else []) + ["jax", "tensorflow", "torch"],
            "profile of four backends: expected a run per backend",
        )
        expect(
            len(document["comparison"]) == 1 and document["comparison"][0]["same_model"],
            "profile of four backends: expected one comparison row with the same model",
        )
    # a training step in the torch worker's eager mode: a row per phase of each layer, with its pass
    step = subprocess.run(
        [binary, "profile", "--model", "ff", "--backend", "torch", "--mode", "eager", "--train", *QUICK],
        capture_output=True,
        text=True,
    )
    expect(step.returncode == 0, f"profile --train of the torch worker exited {step.returncode}: {step.stderr.strip()}")
    if step.returncode == 0:
        document = json.loads(step.stdout)
        check(document, profile_schema, "profile --train, torch eager")
        passes = {layer.get("pass") for layer in document["runs"][0]["layers"]}
        expect(passes == {"forward", "backward", "optimizer"}, f"profile --train, torch eager: passes {passes}")

# Results files (tests/inputs/results, written by the real CLI: make_results.sh): the profile
# document, every line of the JSON Lines files, and what cost and compare print from them. The
# results-line schema's copies of the profile schema's definitions must be equal to them.
results_line_schema = json.load(open(f"{source}/docs/schema/results-line.schema.json"))
cost_schema = json.load(open(f"{source}/docs/schema/cost.schema.json"))
comparison_schema = json.load(open(f"{source}/docs/schema/comparison.schema.json"))
for name, definition in profile_schema["$defs"].items():
    expect(
        results_line_schema["$defs"].get(name) == definition,
        f"results-line.schema.json: $defs/{name} is not a copy of profile.schema.json's",
    )
results = f"{source}/tests/inputs/results"
check(json.load(open(f"{results}/study.json")), profile_schema, "results: study.json")
for name in ["before.jsonl", "after.jsonl"]:
    for number, line in enumerate(open(f"{results}/{name}"), 1):
        check(json.loads(line), results_line_schema, f"results: {name}:{number}")
# a study's own lines: its header, every round line and every run line (with its rounds)
with tempfile.TemporaryDirectory() as out:
    lines = f"{out}/study.jsonl"
    quick = [a for i, a in enumerate(QUICK) if a != "--format" and (i == 0 or QUICK[i - 1] != "--format")]
    done = subprocess.run(
        [binary, "study", "--model", "ff", "--backend", "libtorch", "--mode", "eager,compiled", *quick, "-o", lines],
        capture_output=True,
        text=True,
    )
    expect(done.returncode == 0, f"study exited {done.returncode}: {done.stderr.strip()}")
    kinds = set()
    for number, line in enumerate(open(lines), 1):
        j = json.loads(line)
        kinds.add("round" if "round" in j else "run" if "model" in j else "header")
        check(j, results_line_schema, f"study.jsonl:{number}")
        if "model" in j and not j["failed"]:
            expect(len(j["timing"]["rounds"]) >= 6, f"study.jsonl:{number}: fewer than 6 rounds")
    expect(kinds == {"header", "round", "run"}, f"study.jsonl: lines of kinds {kinds}")
rejects({"round": {"cell": "x"}}, results_line_schema, "the results-line schema accepted a round without its fields")
rejects({"benchmark": "foreign"}, results_line_schema, "the results-line schema accepted a foreign line")
rejects({"model": "ff"}, results_line_schema, "the results-line schema accepted a run without its fields")
check(
    cli("cost", f"{results}/study.json", "--price-per-hour", "2.5", "--format", "json"), cost_schema, "cost study.json"
)
check(
    cli("compare", f"{results}/before.jsonl", f"{results}/after.jsonl", "--format", "json"),
    comparison_schema,
    "compare before.jsonl after.jsonl",
)

# The schemas must reject what the code never emits: a missing required field.
broken = cli("analyze", "--model", "ff", "--format", "json")
del broken["ops"][0]["bytes_read"]
rejects(broken, analysis_schema, "the analysis schema accepted an op without bytes_read")
if profiled is not None:
    del profiled["runs"][0]["timing"]
    rejects(profiled, profile_schema, "the profile schema accepted a successful run without timing")

print(f"{checked - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
