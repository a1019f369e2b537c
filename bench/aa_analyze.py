"""The figures of an A/A test (bench/aa_bench.sh): two identical studies, their comparison and
their reports. Prints, for issue 23's criteria:
  - cells the A/A compare flags faster or slower (at most 7 of 80 at alpha 0.05)
  - how often each run's estimate lies in the other's 95% interval (at least 75%)
  - whether the winners the reports name agree (ties allowed)
  - the median interval half-width of cells >= 1 ms, and how many are `ok`
  - the compiled-over-eager speedups from paired rounds: their 95% intervals for cells >= 1 ms
  - the spread of the two runs' medians per cell (the issue measured 28% on median before rounds)
With --ab COMPARE.json --slowed BACKEND: the cells of BACKEND the A/B compare flags slower, and the
others it flags (the known change must be found where it is and nowhere else).
"""

import argparse
import json
import re
import statistics


def runs_of(path):
    runs = {}
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            if "model" not in j:
                continue
            key = (j["model"], j["backend"], j["mode"], j["batch"])
            runs[key] = j
    return runs


def measured(r):
    return not r["failed"]


def winners(md_path):
    """The winners the report names: 'B M is fastest on K of N models (m1, m2 and m3)'."""
    text = open(md_path).read()
    found = {}
    for backend, mode, models in re.findall(r"(\w+) (\w+) is fastest on \d+ of \d+ models? \(([^)]*)\)", text):
        for m in re.split(r", | and ", models):
            found[m.strip()] = f"{backend} {mode}"
    ties = re.findall(r"No winner on \d+ of \d+ models? \(([^)]*)\)", text)
    tied = [m.strip() for t in ties for m in re.split(r", | and ", t)]
    return found, tied


def paired_speedups(runs):
    """Compiled over eager per (model, backend, batch) from rounds taken side by side."""
    out = []
    for (model, backend, mode, batch), c in runs.items():
        if mode == "eager" or not measured(c):
            continue
        e = runs.get((model, backend, "eager", batch))
        if not e or not measured(e):
            continue
        er = {(x["sweep"], x["pass"]): x["median_seconds"] for x in e["timing"].get("rounds", [])}
        ratios = sorted(
            er[(x["sweep"], x["pass"])] / x["median_seconds"]
            for x in c["timing"].get("rounds", [])
            if (x["sweep"], x["pass"]) in er
        )
        if len(ratios) < 6:
            continue
        n = len(ratios)
        # the order-statistic 95% interval of the median ratio (as src/measure/statistics.cpp)
        from math import comb

        k = 1
        for j in range(2, n // 2 + 1):
            if 1 - 2 * sum(comb(n, i) for i in range(j)) / 2**n >= 0.95:
                k = j
        median = statistics.median(ratios)
        half = max(median - ratios[k - 1], ratios[n - k] - median) / median
        out.append(
            (
                model,
                backend,
                batch,
                median,
                ratios[k - 1],
                ratios[n - k],
                half,
                min(e["timing"]["median_seconds"], c["timing"]["median_seconds"]),
            )
        )
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("compare")
    p.add_argument("a_md")
    p.add_argument("b_md")
    p.add_argument("--ab")
    p.add_argument("--slowed")
    args = p.parse_args()
    a, b = runs_of(args.a), runs_of(args.b)
    machine = json.load(open(args.compare)).get("machine")
    if machine:
        print(
            f"the machine's memory canary: {1e3 * machine['before_seconds']:.2f} ms in a, "
            f"{1e3 * machine['after_seconds']:.2f} ms in b ({100 * machine['change']:+.1f}%)"
        )
    pace = json.load(open(args.compare)).get("pace", {})
    for side, name in (("before", "a"), ("after", "b")):
        if side in pace:
            print(
                f"the machine's pace within {name} (read from its cells' rounds, p10..p90 over "
                f"{pace[side]['ticks']} ticks): {pace[side]['low']:.2f}..{pace[side]['high']:.2f}, "
                f"a spread of {100 * pace[side]['spread']:.0f}% (compare warns at 25%)"
            )
    both = [k for k in a if k in b and measured(a[k]) and measured(b[k])]
    print(f"cells: {len(a)} in a, {len(b)} in b, {len(both)} measured in both")
    cmp = json.load(open(args.compare))
    flagged = [c for c in cmp["cells"] if c["result"] in ("faster", "slower")]
    print(
        f"A/A compare flags {len(flagged)} of {len(cmp['cells'])} cells (criterion: at most 7 of 80; "
        f"alpha {cmp['alpha']}, minimum effect {100 * cmp['min_effect']:.0f}%)"
    )
    for c in flagged:
        print(
            f"  {c['model']} {c['backend']} {c['mode']} batch {c['batch']}: {c['result']} {100 * c['change']:+.1f}%"
            f" (p {c['u_test']['p_value']:.3g})"
        )
    st = cmp.get("between_studies")
    if st and "shift_ci95" in st:
        print(
            f"  the common shift: {100 * st['shift']:+.1f}% (95% CI {100 * st['shift_ci95']['low']:+.1f}% .. "
            f"{100 * st['shift_ci95']['high']:+.1f}%, p {st['shift_p_value']:.2g}; machine levels "
            f"{100 * st['level_before']:.1f}% and {100 * st['level_after']:.1f}% sd)"
        )
    for g in cmp.get("groups", []):
        if "u_test" in g:
            print(
                f"  A/A backend {g['backend']} against the others: {100 * g['change']:+.1f}% "
                f"(p {g['u_test']['p_value']:.3g}): {g['result']}"
            )
    inside = 0
    for k in both:
        ta, tb = a[k]["timing"], b[k]["timing"]
        inside += ta["ci95_low_seconds"] <= tb["median_seconds"] <= ta["ci95_high_seconds"]
        inside += tb["ci95_low_seconds"] <= ta["median_seconds"] <= tb["ci95_high_seconds"]
    print(
        f"a rerun's estimate inside the other run's 95% interval: {inside} of {2 * len(both)} "
        f"({100 * inside / max(1, 2 * len(both)):.0f}%; criterion: at least 75%)"
    )
    spread = sorted(
        max(a[k]["timing"]["median_seconds"], b[k]["timing"]["median_seconds"])
        / min(a[k]["timing"]["median_seconds"], b[k]["timing"]["median_seconds"])
        - 1
        for k in both
    )
    if spread:
        print(
            f"the two runs' estimates differ per cell by a median {100 * statistics.median(spread):.1f}% "
            f"(p90 {100 * spread[int(0.9 * (len(spread) - 1))]:.1f}%, max {100 * spread[-1]:.1f}%)"
        )
    for name, runs in (("a", a), ("b", b)):
        long = [r for r in runs.values() if measured(r) and r["timing"]["median_seconds"] >= 1e-3]
        halves = sorted(r["timing"]["estimate"]["relative_half_width"] for r in long if "estimate" in r["timing"])
        ok = sum(r["outcome"]["verdict"] == "ok" for r in runs.values())
        mistrusted = sum(r["outcome"]["verdict"] == "mistrusted" for r in runs.values())
        if halves:
            print(
                f"run {name}: {ok} ok, {mistrusted} mistrusted; median 95% half-width of the {len(halves)} cells "
                f">= 1 ms: {100 * statistics.median(halves):.1f}% (aim: at most 5%)"
            )
    wa, ta_ = winners(args.a_md)
    wb, tb_ = winners(args.b_md)
    named = sorted(set(wa) | set(wb))
    same = [m for m in named if m in wa and m in wb and wa[m] == wb[m]]
    changed = [m for m in named if m in wa and m in wb and wa[m] != wb[m]]
    print(
        f"winners named: a {wa or '{}'} (ties: {ta_}), b {wb or '{}'} (ties: {tb_}); "
        f"{len(same)} the same, {len(changed)} changed (criterion: none changed)"
    )
    for name, runs in (("a", a), ("b", b)):
        sp = paired_speedups(runs)
        long = [s for s in sp if s[7] >= 1e-3]
        within = [s for s in long if s[6] <= 0.05]
        if sp:
            print(
                f"run {name}: {len(sp)} compiled-over-eager speedups from paired rounds; {len(within)} of the "
                f"{len(long)} of cells >= 1 ms have a 95% interval within +-5% (median half-width "
                f"{100 * statistics.median([s[6] for s in long] or [0]):.1f}%)"
            )
    if args.ab:
        ab = json.load(open(args.ab))
        slowed = [c for c in ab["cells"] if c["backend"] == args.slowed]
        others = [c for c in ab["cells"] if c["backend"] != args.slowed]
        hit = sum(c["result"] == "slower" for c in slowed)
        false = sum(c["result"] in ("faster", "slower") for c in others)
        changes = [c["change"] for c in slowed if "change" in c]
        print(
            f"A/B ({args.slowed} 10% slower): {hit} of {len(slowed)} {args.slowed} cells flagged slower "
            f"(median change {100 * statistics.median(changes or [0]):+.1f}%), {false} of {len(others)} other "
            f"cells flagged"
        )
        for g in ab.get("groups", []):
            if "u_test" in g:
                print(
                    f"  A/B backend {g['backend']} against the others: {100 * g['change']:+.1f}% (95% CI "
                    f"{100 * g['change_ci95']['low']:+.1f}% .. {100 * g['change_ci95']['high']:+.1f}%, "
                    f"p {g['u_test']['p_value']:.3g}): {g['result']}"
                )


if __name__ == "__main__":
    main()
