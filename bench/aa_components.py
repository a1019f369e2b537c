"""Where an A/A test's variance lives (issue 23): two identical studies' JSON lines (bench/aa_bench.sh's
a.jsonl and b.jsonl), decomposed by level, and what two other estimators would have printed.

Levels, on log round medians:
  - the machine's pace per tick (sweep, pass): a two-way fit, cell + tick, by median polish (Tukey);
  - rounds within one preparation of a cell (after the pace), robust sd;
  - preparations within a study: the step between a cell's two preparations' medians, less what its
    rounds explain, pooled over the cells (a preparation is a process, its allocations and placement);
  - studies: the cells' changes from a to b after removing their common shift.
Estimators compared (the A/A figures of issue 23 for each):
  - "as printed": the study's own intervals (order statistics of the round medians);
  - "pace-corrected": rounds divided by their tick's pace, the same order-statistic intervals;
  - "pace-corrected, hierarchical": the corrected rounds' median with a normal interval whose variance
    is the rounds' (1.2533·sd)²/n plus the pooled preparation variance over the cell's preparations.
A flag is |change| >= 5% and p < 0.05 (a z test on the two estimates, or the U test for "as printed").

  python3 bench/aa_components.py A.jsonl B.jsonl
"""

import collections
import json
import math
import statistics
import sys


def runs_of(path):
    out = {}
    for line in open(path):
        j = json.loads(line)
        if "model" in j and not j["failed"] and j["timing"].get("rounds"):
            out[(j["model"], j["backend"], j["mode"], j["batch"])] = j
    return out


def robust_sd(xs):
    m = statistics.median(xs)
    return 1.4826 * statistics.median(abs(x - m) for x in xs)


def polish(runs, iterations=10):
    """log(round median) = cell + tick + residual, by alternating medians; returns rounds with the pace taken off."""
    rounds = {
        k: [(x["sweep"], x["pass"], x.get("process", 0), math.log(x["median_seconds"])) for x in r["timing"]["rounds"]]
        for k, r in runs.items()
    }
    cell = {k: statistics.median(y for *_, y in v) for k, v in rounds.items()}
    pace = collections.defaultdict(float)
    for _ in range(iterations):
        ticks = collections.defaultdict(list)
        for k, v in rounds.items():
            for s, p, _, y in v:
                ticks[(s, p)].append(y - cell[k])
        pace = {t: statistics.median(v) for t, v in ticks.items()}
        cell = {k: statistics.median(y - pace[(s, p)] for s, p, _, y in v) for k, v in rounds.items()}
    spread = sorted(pace.values())
    pace_range = (math.exp(spread[len(spread) // 10]), math.exp(spread[9 * len(spread) // 10]))
    return {k: [(s, q, y - pace[(s, p)]) for s, p, q, y in v] for k, v in rounds.items()}, pace_range


def order_interval(xs):
    xs = sorted(xs)
    n, k = len(xs), 0
    for j in range(1, n // 2 + 1):
        if 1 - 2 * sum(math.comb(n, i) for i in range(j)) / 2**n >= 0.95:
            k = j
    return (xs[k - 1], xs[n - k]) if k else (xs[0], xs[-1])


def levels(corrected):
    """Within-preparation round sd (median over cells) and the pooled preparation variance."""
    within, steps = [], []
    for v in corrected.values():
        preps = collections.defaultdict(list)
        for s, q, y in v:
            preps[(s, q)].append(y)
        groups = [g for g in preps.values() if len(g) >= 3]
        resid = [y - statistics.median(g) for g in preps.values() for y in g]
        sd = robust_sd(resid) if len(resid) > 2 else 0.0
        within.append(sd)
        if len(groups) >= 2:
            m0, m1 = statistics.median(groups[0]), statistics.median(groups[1])
            steps.append(((m1 - m0) ** 2, (1.2533 * sd) ** 2 * (1 / len(groups[0]) + 1 / len(groups[1]))))
    squared = statistics.median(s for s, _ in steps) / 0.4549 if steps else 0.0  # median of chi2(1)
    explained = statistics.median(e for _, e in steps) if steps else 0.0
    return statistics.median(within), max(0.0, squared - explained) / 2


def z_p(z):
    return math.erfc(abs(z) / math.sqrt(2))


def figures(name, keys, estimate):
    flags = inside = 0
    halves = {"a": [], "b": []}
    for k in keys:
        (ea, la, ha, va), (eb, lb, hb, vb) = estimate("a", k), estimate("b", k)
        change = math.exp(eb - ea) - 1
        flags += abs(change) >= 0.05 and z_p((eb - ea) / math.sqrt(va + vb)) < 0.05
        inside += (la <= eb <= ha) + (lb <= ea <= hb)
        for side, (e, lo, hi) in (("a", (ea, la, ha)), ("b", (eb, lb, hb))):
            if math.exp(e) >= 1e-3:
                halves[side].append(max(math.exp(hi - e) - 1, 1 - math.exp(lo - e)))
    print(
        f"  {name}: A/A flags {flags} of {len(keys)}; a rerun inside the other's 95% interval "
        f"{100 * inside / (2 * len(keys)):.0f}%; median half-width of cells >= 1 ms "
        f"a {100 * statistics.median(halves['a']):.1f}%, b {100 * statistics.median(halves['b']):.1f}%"
    )


def main():
    a_runs, b_runs = runs_of(sys.argv[1]), runs_of(sys.argv[2])
    studies = {}
    for side, runs in (("a", a_runs), ("b", b_runs)):
        corrected, pace_range = polish(runs)
        within, prep_var = levels(corrected)
        studies[side] = (runs, corrected, prep_var)
        print(
            f"study {side}: the machine's pace over its ticks p10..p90 {pace_range[0]:.2f}..{pace_range[1]:.2f}; "
            f"rounds within a preparation sd {100 * within:.1f}%; preparations sd {100 * math.sqrt(prep_var):.1f}%"
        )
    keys = [k for k in a_runs if k in b_runs]
    shift = statistics.median(
        statistics.median(y for *_, y in studies["b"][1][k]) - statistics.median(y for *_, y in studies["a"][1][k])
        for k in keys
    )
    residual = robust_sd(
        [
            statistics.median(y for *_, y in studies["b"][1][k])
            - statistics.median(y for *_, y in studies["a"][1][k])
            - shift
            for k in keys
        ]
    )
    print(
        f"between the studies: a common shift of {100 * (math.exp(shift) - 1):+.1f}%; "
        f"cells apart from it by sd {100 * residual:.1f}%"
    )

    def printed(side, k):
        t = studies[side][0][k]["timing"]
        e = math.log(t["median_seconds"])
        lo, hi = math.log(t["ci95_low_seconds"]), math.log(t["ci95_high_seconds"])
        return e, lo, hi, ((hi - lo) / 3.92) ** 2

    def corrected(side, k):
        ys = [y for *_, y in studies[side][1][k]]
        lo, hi = order_interval(ys)
        return statistics.median(ys), lo, hi, ((hi - lo) / 3.92) ** 2

    def hierarchical(side, k):
        v = studies[side][1][k]
        ys = [y for *_, y in v]
        preps = len({(s, q) for s, q, _ in v})
        var = (1.2533 * robust_sd(ys)) ** 2 / len(ys) + studies[side][2] / preps
        e = statistics.median(ys)
        return e, e - 1.96 * math.sqrt(var), e + 1.96 * math.sqrt(var), var

    figures("as printed (z on the printed intervals)", keys, printed)
    figures("pace-corrected", keys, corrected)
    figures("pace-corrected, hierarchical", keys, hierarchical)


if __name__ == "__main__":
    main()
