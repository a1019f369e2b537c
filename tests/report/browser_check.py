#!/usr/bin/env python3
"""The HTML report in a real browser: Debian's Chromium, headless, with no network.

For each report it writes (the study with a price, a comparison of two studies, and a study whose
layer and model names carry markup and script), it loads the page, lets its scripts run, and reads
what the page's own check recorded (<pre id="nc-check">: errors, and per chart the marks it should
draw and the marks it drew). It fails on any console message or page error, on a chart that drew
nothing or other than it should, on a roofline whose run points are not one per measured run of the
results file (counted here, from the file), and on any markup or script from a name that became
part of the page. Last, it takes a screenshot of the study's report for a person to look at.

Usage: browser_check.py NEURAL_COST RESULTS_DIR OUT_DIR
"""

import html
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

FAILURES = []


def fail(message):
    FAILURES.append(message)
    print("FAIL: " + message)


def browser():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("error: Chromium is not installed (Debian's chromium: bash scripts/install-deps.sh)")


def chromium(args, page):
    """Runs headless Chromium on `page` with a fresh profile; returns (stdout, stderr)."""
    with tempfile.TemporaryDirectory(prefix="nc-chromium-") as profile:
        command = (
            [
                browser(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--user-data-dir=" + profile,
                "--virtual-time-budget=30000",
                "--enable-logging=stderr",
                "--v=0",
            ]
            + args
            + ["file://" + os.path.abspath(page)]
        )
        done = subprocess.run(command, capture_output=True, text=True, timeout=240)
        return done.stdout, done.stderr


def runs_of(path):
    text = open(path, encoding="utf-8").read()
    try:
        return json.loads(text)["runs"]
    except (ValueError, KeyError, TypeError):
        runs = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [r for r in runs if "model" in r]


def measured_runs(path):
    """Runs of a results file that did not fail, counted from the file itself."""
    return sum(1 for r in runs_of(path) if not r["failed"])


def first_run_layers(path):
    """The layers the roofline shows first: of the first measured run with a layer it can place
    (FLOPs, bytes and a measured time, for log axes)."""
    for run in runs_of(path):
        if run["failed"]:
            continue
        drawable = [l for l in run["layers"] if l["flops"] > 0 and l["bytes"] > 0 and l["measured_seconds"] > 0]
        if drawable:
            return len(drawable)
    return 0


class Elements(html.parser.HTMLParser):
    """The elements of a page: what a name's markup would have added (escaped, it is only text)."""

    def __init__(self):
        super().__init__()
        self.problems = []
        self.script = None

    def handle_starttag(self, tag, attrs):
        handlers = [a for a, _ in attrs if a.startswith("on")]
        if tag == "img" or handlers:
            self.problems.append(f"<{tag}> {' '.join(handlers)}")
        if tag == "body" and any(a == "data-pwned" for a, _ in attrs):
            self.problems.append("a name's script ran (body has data-pwned)")
        if tag == "script":
            self.script = dict(attrs).get("type", "")

    def handle_data(self, data):
        if self.script is not None and self.script != "application/json" and "data-pwned" in data:
            self.problems.append("a <script> element holds a name's script")

    def handle_endtag(self, tag):
        if tag == "script":
            self.script = None


def injected(dom):
    parser = Elements()
    parser.feed(dom)
    return parser.problems


def check_page(name, page, results, roofline_page=True):
    failures = len(FAILURES)
    dom, log = chromium(["--dump-dom"], page)
    console = [line for line in log.splitlines() if ":CONSOLE" in line]
    for line in console:
        fail(f"{name}: console: {line}")
    found = re.search(r'<pre id="nc-check">(.*?)</pre>', dom, re.S)
    if not found or not found.group(1).strip():
        fail(f'{name}: the page\'s check did not run (no report in <pre id="nc-check">)')
        return
    check = json.loads(html.unescape(found.group(1)))
    if not check.get("ready"):
        fail(f"{name}: the page did not finish drawing")
    for error in check.get("errors", []):
        fail(f"{name}: page error: {error}")
    charts = check.get("charts", {})
    ids = re.findall(r'<div class="chart" id="([^"]+)"', dom)
    if not ids:
        fail(f"{name}: no charts in the page")
    for chart in ids:
        drawn = charts.get(chart)
        if drawn is None:
            fail(f"{name}: chart {chart} was not drawn")
        elif drawn["drawn"] == 0 or drawn["drawn"] != drawn["expected"]:
            fail(f"{name}: chart {chart} drew {drawn['drawn']} marks, expected {drawn['expected']}")
        if not re.search(f'<div class="chart" id="{chart}"[^>]*><svg', dom):
            fail(f"{name}: chart {chart} has no SVG")
    if not roofline_page:  # a train-to-target page: its curves, counted above
        for problem in injected(dom):
            fail(f"{name}: a name's markup became part of the page: {problem}")
        if len(FAILURES) == failures:
            print(f"ok: {name}: {len(ids)} charts drawn as expected, no console message")
        return dom
    roofline = charts.get("chart-roofline", {}).get("drawn")
    expected = measured_runs(results)
    if roofline != expected:
        fail(f"{name}: the roofline has {roofline} run points, the results file {expected} measured runs")
    layers = charts.get("chart-roofline", {}).get("marks", {}).get("layer_points")
    if layers != first_run_layers(results):
        fail(f"{name}: the roofline shows {layers} layer points, the chosen run has {first_run_layers(results)}")
    for problem in injected(dom):
        fail(f"{name}: a name's markup became part of the page: {problem}")
    if len(FAILURES) == failures:
        print(
            f"ok: {name}: {len(ids)} charts drawn as expected, {roofline} run and {layers} layer points on the "
            "roofline, no console message"
        )
    return dom


def hostile_results(source, out):
    """The study with names from outside that carry markup and script: a layer, an op kind and a model."""
    payload = (
        "<img src=x onerror=\"document.body.setAttribute('data-pwned',1)\">"
        "</script><script>document.body.setAttribute('data-pwned',2)</script>"
    )
    lines = []
    renamed_layer = False
    for line in open(source, encoding="utf-8").read().splitlines():
        record = json.loads(line)
        if "model" in record and not renamed_layer and record.get("layers"):
            record["layers"][0]["name"] = "pwned " + payload
            record["ops"][0]["kind"] = "unknown"
            renamed_layer = True
        if record.get("model") == "ff" and record.get("mode") == "compiled":
            record["model"] = "pwned <svg onload=\"document.body.setAttribute('data-pwned',3)\">"
        lines.append(json.dumps(record))
    if not renamed_layer:
        sys.exit(f"error: {source} has no run with layers to rename")
    open(out, "w", encoding="utf-8").write("\n".join(lines) + "\n")


def screenshot(name, page, shot, height):
    """A screenshot of the page, for a person to look at."""
    chromium(["--hide-scrollbars", f"--window-size=1280,{height}", "--screenshot=" + shot], page)
    if not os.path.exists(shot) or os.path.getsize(shot) < 20000:
        fail(f"{name}: no screenshot")
    else:
        print(f"screenshot: {shot}")


def main():
    cli, results, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)

    def report(name, args, results_file):
        page = os.path.join(out, name + ".html")
        done = subprocess.run([cli, "report", results_file, "-o", page] + args, capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"{name}: neural-cost report exited {done.returncode}: {done.stderr}")
            return None
        return page

    study = os.path.join(results, "study.json")
    before, after = os.path.join(results, "before.jsonl"), os.path.join(results, "after.jsonl")
    page = report("study", ["--price-per-hour", "2.5"], study)
    if page:
        dom = check_page("study", page, study)
        if dom and "&lt;script&gt;window.ncInjected=1&lt;/script&gt;" not in dom:
            fail("study: the model path with markup is not shown as text")
        screenshot("study", page, os.path.join(out, "report.png"), 5200)
    page = report("compared", ["--baseline", before], after)
    if page:
        check_page("compared", page, after)
    hostile = os.path.join(out, "hostile.jsonl")
    hostile_results(before, hostile)
    page = report("hostile", ["--price-per-hour", "1"], hostile)
    if page:
        dom = check_page("hostile", page, hostile)
        if dom and "pwned &lt;svg onload=" not in dom:
            fail("hostile: the model name with markup is not shown as text")
    # a train-to-target study: validation accuracy against time and against cost, a point per evaluation
    to_target = os.path.join(results, "..", "to_target", "ff-digits.json")
    page = report("to-target", [], to_target)
    if page:
        dom = check_page("to-target", page, to_target, roofline_page=False)
        points = sum(len(r["curve"]) for r in json.load(open(to_target))["runs"])
        if dom and f'"expected":{points}' not in html.unescape(dom).replace(" ", ""):
            fail(f"to-target: the charts do not expect the study's {points} evaluations")
        screenshot("to-target", page, os.path.join(out, "to-target.png"), 2000)
    # a decoder's LLM page (analyze --format html): four charts, a point per batch and phase, per
    # batch and context; the model path carries markup that must stay text
    config = os.path.join(out, "<b>llm<i>.json")
    shutil.copyfile(os.path.join(results, "..", "..", "..", "data", "decoders", "smollm2-135m.json"), config)
    page = os.path.join(out, "llm.html")
    done = subprocess.run(
        [cli, "analyze", config, "--hardware", "h100-sxm", "--context", "2048", "-o", page],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        fail(f"llm: neural-cost analyze --format html exited {done.returncode}: {done.stderr}")
    else:
        dom = check_page("llm", page, None, roofline_page=False)
        if dom and "&lt;b&gt;llm&lt;i&gt;" not in dom:
            fail("llm: the config path with markup is not shown as text")
        screenshot("llm", page, os.path.join(out, "llm.png"), 2600)
    if FAILURES:
        print(f"{len(FAILURES)} failed")
        sys.exit(1)
    print("all reports passed in the browser")


if __name__ == "__main__":
    main()
