"""The constraint pipeline under every task: a value regex becomes per-position allowed sets of a canvas slot.

Stages, each module importing only those before it:

    regex.py      1  value regexes that keep their structure (`Rx`, `Choice`, `lit` / `seq` / `alt` / `repeat`)
    dfa.py        2  a parsed regex → its character DFA in one subset construction; DFA products (emptiness)
    chardfa.py    2  regex → character DFA (interegular front end, intersections, `Complement`); `CharLevel`
    tokens.py     3  token classes, token automata (`TokenAutomaton`), the tokenizer as outlines reads it
    compose.py    3  an `Rx`'s token automaton composed from its parts' automata
    automata.py   3  regex → token automaton (outlines-core's token index, enum tries, composition); `TokenAutomata`
    slots.py      4  token automaton → a slot's allowed sets and commit automaton (`Slot`, `Slots`)
    compiler.py      `Compiler`: the stages for one tokenizer, owning every cache (`clear()`)

`diffreason.canvas.CanvasTemplate.from_regex(regex, tokenizer, length)` is the public entry; the JSON-schema compiler
(`diffreason.tasks.json_schema`) writes value regexes with `regex.py` and asks a `Compiler` for slots.
"""

from diffreason.constrain.chardfa import AutomatonTooLarge, Complement, Intersections
from diffreason.constrain.compiler import Compiler

__all__ = ["AutomatonTooLarge", "Complement", "Compiler", "Intersections"]
