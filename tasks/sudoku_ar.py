"""The autoregressive baseline for Sudoku: what the bidirectional canvas buys, at equal size and data.

A causal LM from transformers (`Gemma4ForCausalLM`) with the diffusion model's width, depth, heads, experts,
vocabulary and embedding initialisation (`AR_CONFIG` maps a `sudoku.MODEL_PRESETS` entry onto it); it lacks only
the diffusion decoder's self-conditioning block. It reads the puzzle, then writes the grid cell by cell:

    [BOS] p_0 ... p_80  s_0 ... s_80        p_i: the given's token `r{r}c{c}#{d}`, or UNK for a blank
                                            s_i: cell i's token (a given's token again, or `r{r}c{c}={d}`)

Training (`ar_batches`, `ar_loss`): the same `SudokuStream` (same grids, symmetries, blank curriculum and seed) as
the diffusion model's `sft_batches`, teacher-forced cross-entropy on the blank cells' tokens, through the same
`diffreason.train.train` loop (AdamW, warmup + cosine, checkpoints, resume). Decoding (`solve_ar`): greedy, row-major,
constrained by the same template as the diffusion model — a given cell writes its given, a blank only its own nine
digits — with a KV cache: one forward pass per cell (81), reported as its steps.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from diffreason.errors import DiffreasonError, ModelLoadError, WrongModel, first_line
from diffreason.model import check_weights
from diffreason.tasks import sudoku as S

UNK_ID = 3  # `diffreason.tokenizer.SPECIAL_TOKENS`: pad, eos, bos, unk, ...
PROMPT_LEN = 1 + S.CELLS  # BOS + the puzzle
AR_SLIDING_WINDOW = 2 * PROMPT_LEN  # every layer sees the whole puzzle and what it wrote (the diffusion canvas: 81)
MODE = "autoregressive"


@dataclass
class ARSudoku:
    """A loaded baseline: the transformers model and the Sudoku tokenizer (`save` writes an HF directory)."""

    model: torch.nn.Module
    tokenizer: object
    path: Path | None = None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        self.model.save_pretrained(tmp)
        self.tokenizer.save_pretrained(tmp)
        if path.exists():
            import shutil

            shutil.rmtree(path)
        tmp.replace(path)
        return path


def ar_config(preset: str):
    """The Gemma4TextConfig of the baseline for a Sudoku preset: the diffusion model's text config, made causal."""
    from transformers import Gemma4TextConfig

    if preset not in S.MODEL_PRESETS:
        raise S.SudokuError(f"unknown Sudoku model preset {preset!r}; choose one of {', '.join(S.MODEL_PRESETS)}")
    text = S.build_sudoku_model(preset).config.text_config.to_dict()
    for key in ("model_type", "architectures", "transformers_version"):
        text.pop(key, None)
    return Gemma4TextConfig(**{
        **text,
        "sliding_window": AR_SLIDING_WINDOW,
        "enable_moe_block": True,  # the diffusion layers' experts (num_experts, top_k_experts)
        "hidden_size_per_layer_input": 0,  # no per-layer input embeddings (the diffusion model has none)
        "max_position_embeddings": 2 * PROMPT_LEN,
    })


def build_ar_model(preset: str = "sudoku-small", seed: int = 0) -> ARSudoku:
    from transformers import Gemma4ForCausalLM

    config = ar_config(preset)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Gemma4ForCausalLM(config)
    embed = model.get_input_embeddings()
    with torch.no_grad():
        embed.weight.copy_(S.structured_embeddings(embed.weight.shape[1], torch.Generator().manual_seed(seed)))
    model.eval()
    return ARSudoku(model=model, tokenizer=S.make_tokenizer())


def load_ar_model(path: str | Path) -> ARSudoku:
    from transformers import AutoTokenizer, Gemma4ForCausalLM

    path = Path(path)
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"{str(path)!r} is not a checkpoint directory (no config.json)")
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load {str(path)!r}: config.json: {exc}") from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type != "gemma4_text":
        raise WrongModel(f"{str(path)!r} is not an autoregressive Sudoku baseline (model_type {model_type!r})")
    try:
        model, info = Gemma4ForCausalLM.from_pretrained(path, dtype=torch.float32, output_loading_info=True,
                                                        ignore_mismatched_sizes=True)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception as exc:  # transformers raises many types for a broken directory; the user needs one message
        raise ModelLoadError(f"cannot load {str(path)!r}: {first_line(exc)}") from None
    check_weights(path, model, info)
    if tokenizer.get_vocab() != S.make_tokenizer().get_vocab():
        raise WrongModel(f"{str(path)!r} is not a Sudoku model (its vocabulary differs)")
    model.eval()
    return ARSudoku(model=model, tokenizer=tokenizer, path=path)


def parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def training_examples(model_dir: Path | None) -> int | None:
    """Examples a baseline trained on, from its run's log (RUN/log.jsonl beside RUN/model); None when unknown."""
    if model_dir is None:
        return None
    from diffreason.train import examples_trained

    return examples_trained(Path(model_dir).parent)


# ---- data -------------------------------------------------------------------------------------------------------

def prompt_tokens(puzzles: torch.Tensor) -> torch.Tensor:
    """[B, 81] digits (0 = blank) → [B, 82]: BOS, then per cell its given's token or UNK."""
    body = torch.where(puzzles > 0, S.grid_tokens(puzzles, puzzles == 0), torch.full_like(puzzles, UNK_ID))
    bos = torch.full((len(puzzles), 1), S.BOS_ID, dtype=torch.long, device=puzzles.device)
    return torch.cat([bos, body], 1)


@dataclass
class ARBatch:
    input_ids: torch.Tensor  # [B, 163] BOS, puzzle, solution
    labels: torch.Tensor  # [B, 163] the solution's blank cells' tokens, -100 elsewhere (transformers shifts them)

    def to(self, device) -> "ARBatch":
        return ARBatch(self.input_ids.to(device), self.labels.to(device))


def ar_batches(stream: S.SudokuStream, curriculum: bool = True, device="cpu"):
    """Batches for `diffreason.train.train` from the diffusion model's stream (same grids, symmetries, blanks)."""

    def make(size: int, progress: float) -> ARBatch:
        solutions, blanks = stream.batch(size, progress if curriculum else 1.0)
        target = S.grid_tokens(solutions, blanks)
        puzzles = torch.where(blanks, torch.zeros_like(solutions), solutions)
        input_ids = torch.cat([prompt_tokens(puzzles), target], 1)
        labels = torch.full_like(input_ids, -100)
        labels[:, PROMPT_LEN:] = torch.where(blanks, target, torch.full_like(target, -100))
        return ARBatch(input_ids, labels).to(device)

    return make


def ar_loss(model, batch: ARBatch, cfg, generator) -> tuple[torch.Tensor, dict]:
    """Teacher-forced next-token cross-entropy on the blank cells (`diffreason.train.train`'s loss hook)."""
    with torch.autocast(batch.input_ids.device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16"):
        out = model(input_ids=batch.input_ids, labels=batch.labels)
    return out.loss.float(), {}


# ---- decoding ---------------------------------------------------------------------------------------------------

@torch.inference_mode()
def solve_ar(ar: ARSudoku, puzzles: Sequence[Sequence[int] | str], batch_size: int = 64) -> list[S.SolveResult]:
    """Greedy row-major decoding under the template (a given writes itself, a blank one of its nine digits);
    `steps` = forward passes (one per cell)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise S.SudokuError(f"batch_size must be an integer of at least 1, got {batch_size!r}")
    # (as `sudoku.solve` reads them: a list's -1, 1.5 or 10 was taken as a cell, 80 cells a torch error)
    grids = [S.parse(p if isinstance(p, str) else S.cells_text(p)) for p in puzzles]
    masks = S.cell_masks()  # [81, V]: cell i's nine free tokens
    device = ar.device
    results = []
    for start in range(0, len(grids), batch_size):
        chunk = torch.tensor(grids[start : start + batch_size], dtype=torch.long, device=device)
        t = time.perf_counter()
        prompt = prompt_tokens(chunk)  # (its cells: the givens' tokens, which decoding writes again)
        out = _decode(ar.model, prompt, chunk > 0, prompt[:, 1:], masks.to(device))
        seconds = (time.perf_counter() - t) / len(chunk)
        for g, tokens in zip(grids[start : start + batch_size], out.tolist()):
            cells_out = S.decode(tokens)
            results.append(S.SolveResult(
                puzzle=S.to_string(g), solution=None if cells_out is None else "".join(map(str, cells_out)),
                solved=S.verify(g, cells_out), steps=S.CELLS, mode=MODE, seconds=seconds))
    return results


def _decode(model, prompt: torch.Tensor, is_given: torch.Tensor, given: torch.Tensor, masks: torch.Tensor):
    """[B, 81] tokens: the prompt [B, 82] encoded once, then one cell per forward pass through the KV cache; a given
    cell writes `given` (its token; unused where blank), a blank the argmax over its nine tokens (`masks` [81, V])."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    logits = model(input_ids=prompt, past_key_values=cache, use_cache=True).logits[:, -1]
    written = []
    for i in range(S.CELLS):
        free = logits.float().masked_fill(~masks[i], float("-inf")).argmax(-1)
        token = torch.where(is_given[:, i], given[:, i], free)
        written.append(token)
        if i + 1 < S.CELLS:
            logits = model(input_ids=token[:, None], past_key_values=cache, use_cache=True).logits[:, -1]
    return torch.stack(written, 1)


def heldout_evaluator(n: int = 48, tier: str = "medium"):
    """The diffusion trainer's held-out set (generator seed 999), solved by the baseline, for training logs."""
    puzzles = S.generate_set(tier, n, seed=999)

    def evaluate(ar: ARSudoku) -> dict:
        results = solve_ar(ar, [p.puzzle for p in puzzles])
        return {f"{tier}_solved": sum(r.solved for r in results) / len(results)}

    return evaluate


def resume_or_build_ar(run_dir: str | Path, preset: str, seed: int) -> ARSudoku:
    """The run's baseline if it has one (the trainer state then overwrites its weights), else a new one. As for the
    diffusion trainers (`train.resume_or_build`): with the trainer state there, a model directory whose weights do
    not load (a crash mid-save) is rebuilt and the state fills it in; one that is another kind of model is refused."""
    from diffreason.train import resume_or_build

    try:
        return resume_or_build(run_dir, lambda: build_ar_model(preset, seed), load=load_ar_model)
    except ModelLoadError as exc:
        raise DiffreasonError(f"--run-dir {str(run_dir)!r} holds another model: {exc}") from None
