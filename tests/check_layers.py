"""The layering of docs/architecture.md, checked over the include graph (a CTest, `layering`).

Each file of include/neuralcost/LAYER/, src/LAYER/ and tools/neural-cost/ (the CLI) belongs to a
layer; a file may include only files of its own layer or of the layers before it in ORDER. Every
include that runs up the order is printed as FILE: includes INCLUDE (LAYER -> LAYER), and the exit
status is 1. `--self-test` checks that an upward include in a made-up tree is found.

    python3 tests/check_layers.py SOURCE_DIR
"""

import os
import re
import sys
import tempfile

ORDER = [
    "core",
    "cost",
    "hardware",
    "analysis",
    "training",
    "models",
    "parallel",
    "importers",
    "backends",
    "registry",
    "gpu",
    "measure",
    "calibrate",
    "report",
    "cli",
]
RANK = {layer: i for i, layer in enumerate(ORDER)}
# the headers and sources at the top of include/neuralcost/ and src/
TOP = {
    "backend.hpp": "backends",
    "importer.hpp": "importers",
    "model_inputs.hpp": "importers",
    "registry.hpp": "registry",
    "version.hpp": "core",
    "registry.cpp": "registry",
    "model_requests.cpp": "registry",
    "analyze_models.hpp": "registry",
    "analyze_models.cpp": "registry",
    "decoder_overview.hpp": "registry",
    "decoder_overview.cpp": "registry",
}
ROOTS = ["include/neuralcost", "src", "tools/neural-cost"]


def layer_of(path):
    parts = path.split("/")
    if parts[0] == "tools":
        return "cli"
    parts = parts[2:] if parts[0] == "include" else parts[1:]
    if len(parts) == 1:
        return TOP.get(parts[0])
    # folders of src/ that are one layer's parts: src/backends/... is backends, and so on
    return parts[0] if parts[0] in RANK else None


def violations(root):
    found = []
    for base in ROOTS:
        for folder, _, files in os.walk(os.path.join(root, base)):
            for name in sorted(files):
                if not name.endswith((".hpp", ".cpp", ".h", ".cu")):
                    continue
                rel = os.path.relpath(os.path.join(folder, name), root)
                layer = layer_of(rel)
                if layer is None:
                    continue
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for include in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
                    if include.startswith("neuralcost/"):
                        target = layer_of("include/" + include)
                    elif os.path.exists(os.path.join(root, "src", include)):
                        target = layer_of("src/" + include)
                    else:
                        continue  # generated headers, the file's own folder
                    if target is not None and RANK[target] > RANK[layer]:
                        found.append(f"{rel}: includes {include} ({layer} -> {target})")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "src/cost"))
        os.makedirs(os.path.join(root, "include/neuralcost/measure"))
        open(os.path.join(root, "include/neuralcost/measure/timing.hpp"), "w").close()
        with open(os.path.join(root, "src/cost/rule.cpp"), "w") as f:
            f.write('#include "neuralcost/measure/timing.hpp"\n')
        found = violations(root)
        assert found == ["src/cost/rule.cpp: includes neuralcost/measure/timing.hpp (cost -> measure)"], found
        with open(os.path.join(root, "src/cost/rule.cpp"), "w") as f:
            f.write('#include "neuralcost/core/error.hpp"\n')
        assert violations(root) == []
    print("check_layers: the self-test found the upward include it was given")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    found = violations(root)
    for v in found:
        print(v)
    if found:
        print(f"check_layers: {len(found)} include(s) run up the layers of docs/architecture.md: " + " -> ".join(ORDER))
        return 1
    print("check_layers: every include follows " + " -> ".join(ORDER))
    return 0


if __name__ == "__main__":
    sys.exit(main())
