"""Compares CTest runs of two trees from their JUnit files (ctest --output-junit), for
bench/suite_time_bench.sh: each run's tests, wall and test-seconds and failures; the tests both
suites have by name, summed in each; and the tests only one of them has, largest first (the
base's are what the current suite replaced or merged: name their new homes before calling the
common sum the whole story).

Usage: suite_time_compare.py BASE.xml[,BASE2.xml...] HEAD.xml[,HEAD2.xml...] [ROWS]
With several runs per side, a test's time is its median over them.
"""

import statistics
import sys
import xml.etree.ElementTree as ET


def load(paths):
    runs = []
    for path in paths.split(","):
        root = ET.parse(path).getroot()
        runs.append({tc.get("name"): (float(tc.get("time")), tc.get("status")) for tc in root.iter("testcase")})
    names = set().union(*runs)
    times = {n: statistics.median(r[n][0] for r in runs if n in r) for n in names}
    failed = {n for r in runs for n, (_, status) in r.items() if status == "fail"}
    return runs, times, failed


def label(name):
    return name.split("  # GetParam()")[0]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    sides = {"base": load(sys.argv[1]), "head": load(sys.argv[2])}
    for side, (runs, times, failed) in sides.items():
        print(
            f"{side}: {len(times)} tests, {sum(times.values()):.1f} test-seconds (median of {len(runs)} "
            f"run{'s' * (len(runs) > 1)}), failed in some run: {len(failed)}"
            + "".join(f"\n  failed: {label(n)}" for n in sorted(failed))
        )
    base, head = sides["base"][1], sides["head"][1]
    common = sorted(set(base) & set(head))
    b, h = sum(base[n] for n in common), sum(head[n] for n in common)
    change = f" ({(h / b - 1) * 100:+.1f} %)" if b > 0 else ""
    print(f"both suites by name: {len(common)} tests, base {b:.1f} s, head {h:.1f} s{change}")
    for side, mine, other in [("base", base, head), ("head", head, base)]:
        only = sorted(set(mine) - set(other), key=lambda n: -mine[n])
        print(f"only in {side}: {len(only)} tests, {sum(mine[n] for n in only):.1f} s")
        for n in only[:rows]:
            print(f"  {mine[n]:8.2f}  {label(n)}")
    print("both, largest changes:")
    for n in sorted(common, key=lambda n: -abs(base[n] - head[n]))[:rows]:
        print(f"  {base[n]:8.2f} -> {head[n]:8.2f}  {label(n)}")


main()
