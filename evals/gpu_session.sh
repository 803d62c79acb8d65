#!/bin/bash
# The script one GPU session ran (evals/reports/gpu_session/): train the Sudoku and JSON models GPU-long and run the
# GPU checks side by side on one device machine that has torch but neither this package's pins nor network.
#
# Prepare the carried folder .whl/ (git-ignored) here first:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     transformers==5.19.0 apache-tvm-ffi==0.1.11 pydantic==2.13.5 pydantic-core==2.46.5 annotated-types typing-inspection
#   .whl/flashinfer-trim.tar.xz: the flashinfer-python 0.7.2 wheel's flashinfer/ tree without the sources of kernels
#     the checks never build (it is 65 MB whole, over the 64 MiB carry); keep data/include, cutlass, cccl, spdlog, the
#     top-level csrc files for prefill and quantization.cu (its mask packing), every .py.
#   .whl/jsb-train.tar.xz: jsb/*.json, the non-held-out jsonschemabench files with their valid instances only.
# Then run `bash evals/gpu_session.sh` on the device with .whl carried; results land in $OUT.
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
export PYTHONUNBUFFERED=1 TERM=dumb COLUMNS=120
REPO=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
tar xf .whl/flashinfer-trim.tar.xz -C /tmp/site || exit 3
mkdir -p /tmp/data /tmp/pkg && tar xf .whl/jsb-train.tar.xz -C /tmp/data || exit 3
cp -r diffreason /tmp/pkg/ && for d in backends tasks evals; do ln -s "$REPO/$d" /tmp/pkg/diffreason/$d; done
export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONSAFEPATH=1  # the repo root must not shadow /tmp/pkg
el "setup done"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; which nvcc; nproc
python3 - <<'EOF' || { el "smoke test failed"; exit 4; }
import torch, transformers, diffreason.cli
from diffreason.tasks import sudoku
from diffreason.train import TrainConfig, sft_loss
print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name(0))
lm = sudoku.build_sudoku_model("sudoku-base", 0); lm.model.to("cuda"); lm.model.train()
batch = sudoku.sft_batches(sudoku.SudokuStream(0, pool_size=16), torch.Generator().manual_seed(0))(8, 1.0).to("cuda")
loss, m = sft_loss(lm.model, batch, TrainConfig(), torch.Generator("cuda").manual_seed(0)); loss.backward()
print("smoke ok", float(loss), sum(p.numel() for p in lm.model.parameters()))
EOF
el "smoke ok"
DR="python3 -m diffreason.cli"
export OMP_NUM_THREADS=4
S=runs/gpu-sudoku-base; J=runs/gpu-json-small
timeout 470 $DR train sudoku --preset sudoku-base --device cuda --run-dir $S --steps 100000 --batch-size 512 \
  --lr 1e-3 --eval-every 300 --time-budget 6.3 > /tmp/sudoku.log 2>&1 &
PS=$!
timeout 470 $DR train json --schemas /tmp/data/jsb --run-dir $J --init-from diffreason/weights/json-small \
  --steps 100000 --batch-size 128 --lr 6e-4 --seed 5 --device cuda --time-budget 6.0 > /tmp/json.log 2>&1 &
PJ=$!
( export FLASHINFER_WORKSPACE_BASE=/tmp/fi FLASHINFER_CUDA_ARCH_LIST=9.0 MAX_JOBS=8
  timeout 420 python3 -m diffreason.evals.gpu_checks --skip-server > /tmp/gpu_checks.log 2>&1; echo "gpu_checks rc=$?" >> /tmp/gpu_checks.log ) &
PG=$!
wait $PS; el "sudoku training rc=$?"; tail -c 1500 /tmp/sudoku.log | tr '\r' '\n' | grep -v "^\s*$" | tail -12
wait $PJ; el "json training rc=$?"; tail -c 800 /tmp/json.log | tr '\r' '\n' | grep -v "^\s*$" | tail -5
wait $PG; el "gpu checks done"; tr '\r' '\n' < /tmp/gpu_checks.log | grep -v "^\s*$" | tail -40
tar cf - $S/model $S/log.jsonl $S/train_config.json | split -b 15000000 - $OUT/sudoku.tar.
tar cf $OUT/json.tar $J/model $J/log.jsonl $J/train_config.json
cp /tmp/gpu_checks.log $OUT/
el "packed"
left=$(( 575 - ($(date +%s) - T0) ))
if [ $left -gt 30 ]; then
  OMP_NUM_THREADS=16 timeout $left $DR eval sudoku --model $S/model --n 64 --device cuda --out /tmp/eval > /tmp/eval.log 2>&1; el "eval rc=$?"
  tr '\r' '\n' < /tmp/eval.log | grep -v "^\s*$" | tail -5; cat /tmp/eval/sudoku.md 2>/dev/null | head -40
  tar cf $OUT/eval.tar -C /tmp eval 2>/dev/null
fi
tar cf $OUT/logs.tar /tmp/sudoku.log /tmp/json.log /tmp/eval.log 2>/dev/null
el "end"
