"""Validates the CLI's JSON against the documented schemas in docs/schema/.

Usage: check_schemas.py NEURAL_COST_BINARY SOURCE_DIR
Runs with Debian's /usr/bin/python3 and python3-jsonschema (installed by scripts/install-deps.sh).
"""
import glob
import json
import subprocess
import sys

import jsonschema

binary, source = sys.argv[1], sys.argv[2]
analysis_schema = json.load(open(f"{source}/docs/schema/analysis.schema.json"))
hardware_schema = json.load(open(f"{source}/docs/schema/hardware.schema.json"))
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


def cli(*args):
    return json.loads(subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout)


for model in ["ff", "cnn", "rnn", "lstm", "transformer"]:
    check(cli("analyze", "--model", model, "--format", "json"), analysis_schema, f"analyze {model}")
for i, analysis in enumerate(cli("analyze", "--format", "json")["analyses"]):
    check(analysis, analysis_schema, f"summary analysis {i}")
for path in sorted(glob.glob(f"{source}/data/hardware/*.json")):
    check(json.load(open(path)), hardware_schema, path)
for spec in cli("hardware", "list", "--format", "json"):
    check(spec, hardware_schema, f"hardware list: {spec['id']}")

# The schemas must reject what the code never emits: a missing required field.
broken = cli("analyze", "--model", "ff", "--format", "json")
del broken["ops"][0]["bytes_read"]
try:
    jsonschema.validate(broken, analysis_schema)
    print("FAIL the analysis schema accepted an op without bytes_read")
    failed += 1
except jsonschema.ValidationError:
    pass

print(f"{checked - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
