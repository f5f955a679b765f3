#!/usr/bin/env python3
"""The reference renderer for the chat template tests: renders each case with python3-jinja2
exactly as Hugging Face transformers renders chat templates (ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, loop controls, raise_exception, HF's tojson, strftime_now at a
fixed date).

Usage: render_reference.py CASES.json OUT.json
CASES.json: {"now": "2024-07-26T10:30:00", "cases": [{"template": "...", "context": {...}}]}
OUT.json: [{"ok": true, "text": "..."} or {"ok": false, "error": "..."}] in the same order.
"""
import datetime
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    now = datetime.datetime.fromisoformat(request["now"])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return now.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now

    compiled = {}
    results = []
    for case in request["cases"]:
        try:
            source = case["template"]
            if source not in compiled:
                compiled[source] = env.from_string(source)
            results.append({"ok": True, "text": compiled[source].render(**case["context"])})
        except Exception as error:  # the C++ side must fail too; the message is informative
            results.append({"ok": False, "error": f"{type(error).__name__}: {error}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
