"""Fingerprints of the JSON-schema compiler's output, to prove a refactoring changes nothing.

For every schema file of a folder (jsonschemabench layout), compile it with the eval's tokenizer and hash what a
user gets: the template's fixed tokens, allowed sets and slots, the fixed choices named in the result, and a random
filling drawn through the slots' automata (so the automata are compared too, not only their per-position sets) —
or, for a schema that does not compile, its error type and message.

    python -m diffreason.evals.template_hashes --schemas ../shared/jsonschemabench/schemas --out runs/hashes.tsv
    python -m diffreason.evals.template_hashes --schemas ../shared/jsonschemabench/schemas --check runs/hashes.tsv

`--check` exits 1 and lists every file whose fingerprint differs. A compile bounded by `--cpu-seconds` (default 60)
can in principle end on a different side of its limit on a loaded machine; such a difference names the limit.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path


def fingerprint(schema, tokenizer, cpu_seconds: float) -> str:
    import numpy as np
    import torch

    from diffreason.errors import DiffreasonError
    from diffreason.tasks.json_schema import compile_schema

    digest = hashlib.sha256()
    try:
        compiled = compile_schema(schema, tokenizer, cpu_seconds=cpu_seconds)
    except DiffreasonError as e:
        return f"error {type(e).__name__}: {e}".replace("\t", " ").replace("\n", " ")
    t = compiled.template
    digest.update(repr((t.vocab_size, len(t), compiled.fixed)).encode())
    for array in (t.fixed, t.mask_index):
        digest.update(array.numpy().tobytes())
    digest.update(np.packbits(t.masks.numpy(), axis=1).tobytes())
    for slot in t.slots:
        digest.update(repr((slot.start, slot.length, type(slot.automaton).__name__)).encode())
    filling = compiled.random_filling(torch.Generator().manual_seed(0))
    digest.update(np.asarray(filling, dtype=np.int64).tobytes())
    return digest.hexdigest()


def run(files: list[Path], cpu_seconds: float, progress=None) -> dict[str, str]:
    from diffreason.tasks.json_schema.load import parse_json_text
    from diffreason.tokenizer import train_byte_bpe

    tokenizer = train_byte_bpe()
    out = {}
    for i, path in enumerate(files):
        try:
            doc = parse_json_text(path.read_bytes())
            schema = doc["schema"] if isinstance(doc, dict) and "schema" in doc else doc
        except Exception as e:  # noqa: BLE001 - an unreadable file has a fingerprint too
            out[path.name] = f"unreadable {type(e).__name__}"
            continue
        out[path.name] = fingerprint(schema, tokenizer, cpu_seconds)
        if progress and (i + 1) % 500 == 0:
            progress(f"{i + 1} / {len(files)}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m diffreason.evals.template_hashes", description=__doc__.split("\n")[0])
    p.add_argument("--schemas", required=True, help="folder of schema files (*.json)")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="write the fingerprints here (tab-separated: file, fingerprint)")
    group.add_argument("--check", help="compare with fingerprints written before by --out")
    p.add_argument("--cpu-seconds", type=float, default=60.0, help="compile limit per schema (CPU seconds)")
    args = p.parse_args(argv)
    files = sorted(Path(args.schemas).glob("*.json"))
    if not files:
        print(f"error: no *.json files in {args.schemas}", file=sys.stderr)
        return 2
    if args.check:
        try:
            before = dict(line.split("\t", 1) for line in Path(args.check).read_text().splitlines() if line)
        except (OSError, ValueError) as e:
            print(f"error: --check {args.check}: {e}", file=sys.stderr)
            return 2
    now = run(files, args.cpu_seconds, progress=lambda s: print(s, file=sys.stderr, flush=True))
    if args.out:
        Path(args.out).write_text("".join(f"{name}\t{value}\n" for name, value in now.items()))
        print(f"{len(now)} fingerprints written to {args.out}")
        return 0
    changed = [name for name in sorted(set(before) | set(now)) if before.get(name) != now.get(name)]
    for name in changed:
        print(f"{name}: {before.get(name)} -> {now.get(name)}")
    print(f"{len(now) - len(changed)} of {len(set(before) | set(now))} fingerprints the same, {len(changed)} differ")
    return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
