"""Coverage of the grammar engines SGLang ships (xgrammar, llguidance) on a folder of JSON schemas.

The baseline for diffreason's compiler coverage (`diffreason eval json`) on the same files. For each schema file
(jsonschemabench layout: ``{"schema": ..., "tests": [{"data": ..., "valid": bool}, ...]}``, or a bare schema):

- xgrammar: does ``Grammar.from_json_schema`` (strict mode off, as SGLang calls it) build a grammar? For the
  labelled instances, does the grammar accept ``json.dumps(instance)``? An accepted invalid instance is an
  over-approximation (the engine would let the model write it); a rejected valid one an under-approximation.
- llguidance: does ``LLMatcher.validate_grammar`` accept the schema (no error, unimplemented keys included)?

    python -m diffreason.evals.json_baselines --schemas DIR [--diffreason runs/X/json.json ...] [--out DIR]

Prints a markdown table per collection (the collection is the file name before its last ``_`` or ``---``). With
``--diffreason``, the coverage of each given ``diffreason eval json`` report (``json.json``, run on the same folder)
is a column beside the engines', and ``--out`` also gets a bar chart ``json_baselines.png``.
"""

from __future__ import annotations

import argparse
import collections
import json
import shlex
import sys
from pathlib import Path

from diffreason.tasks.json_corpus import collection_of


def _xgrammar(schema, tests: list) -> dict:
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string

    try:
        grammar = xgr.Grammar.from_json_schema(json.dumps(schema))
    except Exception as e:  # noqa: BLE001 - any refusal is "not covered"
        return {"compiled": False, "reason": f"{type(e).__name__}: {str(e)[:120]}"}
    over = under = 0
    for test in tests:
        accepted = _is_grammar_accept_string(grammar, json.dumps(test["data"]))
        over += bool(accepted and not test["valid"])
        under += bool(test["valid"] and not accepted)
    return {"compiled": True, "accepted_invalid": over, "rejected_valid": under}


def _llguidance(schema) -> dict:
    import llguidance

    try:
        error = llguidance.LLMatcher.validate_grammar(llguidance.grammar_from("json_schema", json.dumps(schema)))
    except Exception as e:  # noqa: BLE001
        error = f"{type(e).__name__}: {e}"
    return {"compiled": not error, "reason": error[:120] if error else None}


def run(files: list[Path]) -> dict:
    rows = {}
    for path in files:
        coll = collection_of(path.name)
        row = rows.setdefault(coll, {"schemas": 0, "unreadable": 0, "xgrammar": 0, "llguidance": 0,
                                     "accepted_invalid": 0, "rejected_valid": 0, "schemas_over": 0})
        row["schemas"] += 1
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            row["unreadable"] += 1
            continue
        schema, tests = (doc["schema"], doc.get("tests", [])) if isinstance(doc, dict) and "schema" in doc \
            else (doc, [])
        x = _xgrammar(schema, tests)
        row["xgrammar"] += x["compiled"]
        if x["compiled"]:
            row["accepted_invalid"] += x["accepted_invalid"]
            row["rejected_valid"] += x["rejected_valid"]
            row["schemas_over"] += bool(x["accepted_invalid"])
        row["llguidance"] += _llguidance(schema)["compiled"]
    return rows


def _report_problem(report, counts: collections.Counter) -> str | None:
    """Why `report` is no `diffreason eval json` report of the folder whose files per collection are `counts`
    (None: it is one). A report of another folder would put its counts beside these (2 of 1 schemas: 200 %)."""
    collections_ = report.get("collections") if isinstance(report, dict) else None
    if not isinstance(collections_, dict) or not all(isinstance(c, dict) for c in collections_.values()):
        return "not a report of `diffreason eval json` (no \"collections\")"
    for coll in sorted(set(collections_) | set(counts)):
        c = collections_.get(coll, {"schemas": 0})
        if c.get("schemas") != counts.get(coll, 0):
            return (f"made on another folder: {c.get('schemas')} {coll} schemas there, {counts.get(coll, 0)} in "
                    "--schemas (give the report of an eval of the whole folder, without --limit)")
    return None


def add_diffreason(rows: dict, reports: dict[str, dict]) -> None:
    """Put each diffreason eval report's compiled count per collection into ``rows`` under its label."""
    for label, report in reports.items():
        for coll, row in rows.items():
            row[label] = report["collections"].get(coll, {}).get("compiled", 0)


def markdown(rows: dict, command: str, labels: list[str] = ()) -> str:
    head = "".join(f" {label} compiled |" for label in labels)
    lines = ["# Coverage: diffreason beside xgrammar / llguidance" if labels else
             "# xgrammar / llguidance coverage", "", f"Command: `{command}`", "",
             f"| collection | schemas |{head} xgrammar compiled | llguidance compiled | xgrammar: invalid instances "
             "accepted (schemas) | xgrammar: valid instances rejected |", "|---|---|" + "---|" * (4 + len(labels))]
    total = {k: 0 for k in next(iter(rows.values()), {})}
    for coll, r in sorted(rows.items()):
        for k in total:
            total[k] += r[k]
        lines.append(_row(coll, r, labels))
    if len(rows) > 1:
        lines.append(_row("**all**", total, labels))
    return "\n".join(lines) + "\n"


def _row(name: str, r: dict, labels=()) -> str:
    n = r["schemas"]
    pct = lambda k: f"{r[k]} ({100 * r[k] / n:.1f} %)" if n else "0"  # noqa: E731
    ours = "".join(f" {pct(label)} |" for label in labels)
    return (f"| {name} | {n} |{ours} {pct('xgrammar')} | {pct('llguidance')} | {r['accepted_invalid']} "
            f"({r['schemas_over']}) | {r['rejected_valid']} |")


def plot(rows: dict, labels: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colls = sorted(rows)
    series = [*labels, "xgrammar", "llguidance"]
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(colls), 3.6))
    width = 0.8 / len(series)
    for i, key in enumerate(series):
        ax.bar([c + i * width for c in range(len(colls))],
               [100 * rows[c][key] / rows[c]["schemas"] for c in colls], width, label=key)
    ax.set_xticks([c + 0.4 - width / 2 for c in range(len(colls))], [f"{c}\n({rows[c]['schemas']})" for c in colls])
    ax.set_ylabel("schemas compiled (%)")
    ax.set_ylim(0, 105)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m diffreason.evals.json_baselines", description=__doc__.split("\n")[0])
    p.add_argument("--schemas", required=True, help="folder of schema files (*.json)")
    p.add_argument("--diffreason", nargs="*", default=[], metavar="[LABEL=]REPORT",
                   help="json.json reports of `diffreason eval json` on the same folder, shown beside the engines")
    p.add_argument("--out", help="folder for json_baselines.md / .json (and .png with --diffreason)")
    args = p.parse_args(argv)
    folder = Path(args.schemas)
    if not folder.is_dir():
        print(f"error: --schemas {folder} is not a folder", file=sys.stderr)
        return 2
    files = sorted(folder.glob("*.json"))
    if not files:
        print(f"error: no *.json files in {folder}", file=sys.stderr)
        return 2
    reports = {}
    counts = collections.Counter(collection_of(f.name) for f in files)
    for spec in args.diffreason:
        label, _, path = spec.rpartition("=")
        try:
            reports[label or "diffreason"] = report = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            print(f"error: --diffreason {path}: {e}", file=sys.stderr)
            return 2
        problem = _report_problem(report, counts)
        if problem:
            print(f"error: --diffreason {path}: {problem}", file=sys.stderr)
            return 2
    rows = run(files)
    add_diffreason(rows, reports)
    command = "python -m diffreason.evals.json_baselines " + shlex.join(argv if argv is not None else sys.argv[1:])
    text = markdown(rows, command, list(reports))
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "json_baselines.md").write_text(text)
        (out / "json_baselines.json").write_text(json.dumps(rows, indent=1))
        if reports:
            plot(rows, list(reports), out / "json_baselines.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
