#!/bin/bash
# The script the second GPU session ran (evals/reports/gpu_session2/): the GPU checks, then Sudoku training alone on
# the card (continuing the first session's sudoku-base run), then the Sudoku eval, on one device machine that has
# torch but neither this package's pins nor network. The first session's script is this file at commit e5329f3.
#
# Prepare the carried folder .whl/ (git-ignored) here first:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     transformers==5.19.0 apache-tvm-ffi==0.1.11 pydantic==2.13.5 pydantic-core==2.46.5 annotated-types typing-inspection
#   .whl/flashinfer-trim.tar.xz: the flashinfer-python 0.7.2 wheel's flashinfer/ tree without the sources of kernels
#     the checks never build (it is 65 MB whole, over the 64 MiB carry); keep data/include, cutlass, cccl, spdlog, the
#     top-level csrc files for prefill, every .py; .whl/fi-extra.tar: csrc/quantization.cu and
#     csrc/flashinfer_quantization_binding.cu (the custom-mask packing), which the first trim lacked.
#   .whl/init-base: the weights to continue from, stored in bfloat16 to fit the carry (loading upcasts to float32).
# Then run `bash evals/gpu_session.sh` on the device with .whl carried; results land in $OUT.
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
export PYTHONUNBUFFERED=1 TERM=dumb COLUMNS=120
REPO=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
tar xf .whl/flashinfer-trim.tar.xz -C /tmp/site && tar xf .whl/fi-extra.tar -C /tmp/site || exit 3
mkdir -p /tmp/pkg && cp -r diffreason /tmp/pkg/ && for d in backends tasks evals; do ln -s "$REPO/$d" /tmp/pkg/diffreason/$d; done
export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONSAFEPATH=1  # the repo root must not shadow /tmp/pkg
el "setup done"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
DR="python3 -m diffreason.cli"
A=""; B=""; command -v taskset >/dev/null && { A="taskset -c 0-5"; B="taskset -c 6-15"; }
S=runs/gpu-sudoku-base2
# the checks compile FlashInfer kernels on cores 6-15; training drives the GPU from cores 0-5
( export FLASHINFER_WORKSPACE_BASE=/tmp/fi FLASHINFER_CUDA_ARCH_LIST=9.0 MAX_JOBS=10 OMP_NUM_THREADS=2
  timeout 330 $B python3 -m diffreason.evals.gpu_checks --skip-server > /tmp/gpu_checks.log 2>&1
  echo "gpu_checks rc=$?" >> /tmp/gpu_checks.log ) &
PG=$!
OMP_NUM_THREADS=4 timeout 420 $A $DR train sudoku --init-from .whl/init-base --device cuda --run-dir $S \
  --steps 100000 --batch-size 1024 --lr 6e-4 --no-curriculum --eval-every 500 --seed 7 --time-budget 6.0 \
  > /tmp/sudoku.log 2>&1 &
PS=$!
sleep 150; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
wait $PG; el "gpu checks done"; tr '\r' '\n' < /tmp/gpu_checks.log | grep -v "^\s*$" | tail -30
wait $PS; el "sudoku training rc=$?"; tail -c 1500 /tmp/sudoku.log | tr '\r' '\n' | grep -v "^\s*$" | tail -8
grep '"eval"' $S/log.jsonl | cut -c1-60,200-400
tar cf - $S/model $S/log.jsonl $S/train_config.json | split -b 15000000 - $OUT/sudoku.tar.
cp /tmp/gpu_checks.log $OUT/
left=$(( 565 - ($(date +%s) - T0) ))
el "packed; $left s left for the eval"
if [ $left -gt 30 ]; then
  # the then-embedded sudoku-small's schedule (2.0 -> 0.4 over 24 steps), both modes, for a like-for-like comparison
  OMP_NUM_THREADS=8 timeout $left $DR eval sudoku --model $S/model --n 64 --budgets 12,16,24 --t-max 2.0 --t-min 0.4 \
    --device cuda --out /tmp/eval > /tmp/eval.log 2>&1; el "eval rc=$?"
  cat /tmp/eval/sudoku.md 2>/dev/null | grep "^|"
  tar cf $OUT/eval.tar -C /tmp eval 2>/dev/null
fi
tar cf $OUT/logs.tar /tmp/sudoku.log /tmp/eval.log 2>/dev/null
el "end"
