"""Checks docs/openapi.yaml's patterns in Python's re, as Python tools read them.

Usage: specpatterns.py OPENAPI_JSON CORPUS_JSON. Every "pattern" keyword of
the served description must compile and, for each value of its corpus
(made by internal/httpapi's TestSpecPatternsMeanTheSameInEveryEngine),
match exactly when the server accepts the value. Prints each disagreement;
exits 1 if there is any.
"""
import json
import re
import sys


def patterns(node, at):
    if isinstance(node, dict):
        for key, sub in node.items():
            where = at + "/" + key.replace("~", "~0").replace("/", "~1")
            if key == "pattern" and isinstance(sub, str):
                yield where, sub
            else:
                yield from patterns(sub, where)
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from patterns(sub, f"{at}/{i}")


def main(spec_file, corpus_file):
    with open(spec_file, encoding="utf-8") as f:
        spec = json.load(f)
    with open(corpus_file, encoding="utf-8") as f:
        corpus = json.load(f)
    problems = 0
    for where, pattern in sorted(patterns(spec, "")):
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            print(f"{where}: re cannot compile it: {e}")
            problems += 1
            continue
        entry = corpus.get(where)
        if entry is None or entry["pattern"] != pattern or not entry["values"]:
            print(f"{where}: the corpus has no values for this pattern")
            problems += 1
            continue
        wrong = 0
        for value, accepted in zip(entry["values"], entry["expected"]):
            m = compiled.search(value)
            # Python's $ also matches before a final newline, ECMA-262's
            # and Go's only at the end: a match must reach the end.
            matched = m is not None and m.end() == len(value)
            if matched != accepted:
                wrong += 1
                if wrong <= 5:
                    print(f"{where}: {json.dumps(value)}: re matches it: {matched}, the server accepts it: {accepted}")
        if wrong:
            print(f"{where}: {wrong} of {len(entry['values'])} values disagree")
            problems += 1
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main(*sys.argv[1:])
