"""tasks/infill/layout.py: the one layout of an infilling example (training and inference)."""

import pytest

from diffreason.tasks.infill.layout import HOLE, encode, hole_text, infill_layout, split_hole
from diffreason.tokenizer import train_byte_bpe

CODE = ["def add(a, b):\n    return a + b\n", "for i in range(10):\n    print(i)\n", "x = [1, 2, 3]\n"] * 20


@pytest.fixture(scope="module")
def tok():
    return train_byte_bpe(CODE, vocab_size=300)


def test_training_layout(tok):
    prefix, hole, suffix = "def add(a, b):\n    ret", "urn a + b", "\n\nprint(add(1, 2))\n"
    lay = infill_layout(prefix, hole, suffix, tok, canvas_length=32, slot_length=12, max_prompt_tokens=64)
    assert len(lay.canvas) == len(lay.free) == 32
    assert lay.prompt_ids == [tok.bos_token_id, *encode(tok, prefix)] and lay.prefix_cut == 0
    n = len(lay.hole_ids)
    assert lay.hole_ids == encode(tok, hole) and 0 < n <= 12
    assert lay.canvas[:n] == lay.hole_ids and lay.canvas[n:12] == [tok.pad_token_id] * (12 - n)
    assert lay.free == [True] * 12 + [False] * 20
    s = encode(tok, suffix)
    assert lay.canvas[12:12 + len(s)] == s == lay.suffix_ids and lay.suffix_cut == 0
    assert set(lay.canvas[12 + len(s):]) <= {tok.pad_token_id}
    # tokenized on their own: the pieces decode back to the text, whatever the split
    assert tok.decode(lay.prompt_ids[1:]) + hole_text(lay.canvas[lay.slot], tok) + tok.decode(lay.suffix_ids) == (
        prefix + hole + suffix)


def test_inference_layout_and_cuts(tok):
    prefix, suffix = "x = [1, 2, 3]\n" * 10, "for i in range(10):\n    print(i)\n" * 10
    lay = infill_layout(prefix, None, suffix, tok, canvas_length=24, slot_length=8, max_prompt_tokens=5)
    assert lay.hole_ids is None and lay.canvas[:8] == [tok.pad_token_id] * 8
    assert lay.prompt_ids == [tok.bos_token_id, *encode(tok, prefix)[-4:]]
    assert lay.prefix_cut == len(encode(tok, prefix)) - 4
    assert lay.suffix_ids == encode(tok, suffix)[:16] and lay.suffix_cut == len(encode(tok, suffix)) - 16
    assert lay.canvas[8:] == lay.suffix_ids
    # the same prefix and suffix give the same fixed parts with and without the hole's text
    train = infill_layout(prefix, "y = 1\n", suffix, tok, canvas_length=24, slot_length=8, max_prompt_tokens=5)
    assert train.prompt_ids == lay.prompt_ids and train.canvas[8:] == lay.canvas[8:] and train.free == lay.free
    # empty prefix: the prompt is BOS alone; empty hole: all pads; a hole too long for its slot is refused
    empty = infill_layout("", "", "", tok, canvas_length=8, slot_length=4, max_prompt_tokens=1)
    assert empty.prompt_ids == [tok.bos_token_id] and empty.canvas == [tok.pad_token_id] * 8
    with pytest.raises(ValueError):
        infill_layout("", "x = [1, 2, 3]\n" * 5, "", tok, canvas_length=8, slot_length=4, max_prompt_tokens=4)


def test_hole_marker_and_text(tok):
    assert split_hole(f"a = 1\n{HOLE}\nb = 2\n") == ("a = 1\n", "\nb = 2\n")
    with pytest.raises(ValueError):
        split_hole("no hole")
    with pytest.raises(ValueError):
        split_hole(HOLE + HOLE)
    ids = encode(tok, "print(i)")
    assert hole_text(ids + [tok.pad_token_id, *ids], tok) == "print(i)"


def test_code_holding_special_token_text_is_plain_text(tok):
    """(`return "<eos>" + a` after a hole put an EOS token in the canvas's fixed code: the request was refused, and
    "<pad>" reached the model as pad.)"""
    specials = {tok.pad_token_id, tok.eos_token_id, tok.bos_token_id, tok.unk_token_id}
    layout = infill_layout('x = "<bos>"\n', None, '\n    return "<eos>" + "<pad>"\n', tok, 64, 8, 32)
    assert not specials & set(layout.prompt_ids[1:]) and not specials & set(layout.suffix_ids)
    assert tok.decode(layout.suffix_ids) == '\n    return "<eos>" + "<pad>"\n'


def test_literal_encodes_leave_other_threads_their_special_tokens(tok):
    """(transformers' split_special_tokens=True flips a flag the tokenizer shares: a prompt encoded in another thread
    meanwhile read "<eos>" as text, and a literal could read "<pad>" as the pad token, memoised for the process.)"""
    import threading

    prompt = tok.encode("a <eos> b", add_special_tokens=False)
    literal = encode(tok, "a <eos> b")
    assert tok.eos_token_id in prompt and tok.eos_token_id not in literal
    stop, wrong = threading.Event(), []

    def literals():
        while not stop.is_set():
            if encode(tok, "a <eos> b") != literal:
                wrong.append("literal")

    worker = threading.Thread(target=literals)
    worker.start()
    try:
        for _ in range(2000):
            if tok.encode("a <eos> b", add_special_tokens=False) != prompt:
                wrong.append("prompt")
    finally:
        stop.set()
        worker.join()
    assert wrong == []
