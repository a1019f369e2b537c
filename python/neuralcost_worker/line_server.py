"""The request loop of the tool's single-purpose workers (`python -m neuralcost_worker collectives`,
`... to-target`): one JSON request a line on stdin, one JSON reply a line on stdout; stdout is kept
for the replies (anything else printed goes to stderr). `quit` ends the loop."""

import json
import os
import sys


def serve(commands, failure):
    """commands: cmd name -> function(request) -> reply (a dict with "ok"); failure: exception ->
    reply, for a command that raised (the worker stays usable). Returns the exit status."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def reply(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    known = ", ".join(list(commands) + ["quit"])
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError as e:
            reply({"ok": False, "kind": "invalid_argument", "error": f"not a JSON request: {e}"})
            continue
        cmd = req.get("cmd") if isinstance(req, dict) else None
        if cmd == "quit":
            reply({"ok": True})
            return 0
        if cmd not in commands:
            reply({"ok": False, "kind": "invalid_argument", "error": f"unknown cmd {cmd!r} (known: {known})"})
            continue
        try:
            reply(commands[cmd](req))
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            reply(failure(e))
    return 0
