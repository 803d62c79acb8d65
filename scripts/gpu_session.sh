#!/bin/bash
# The script the third GPU session ran (evals/reports/gpu_session3/): two Sudoku trainings side by side on the one
# GPU, both from the then-embedded sudoku-base (commit 72eab75's weights; A's result has replaced them since) under
# bfloat16 autocast — (A) the same 6 layers, (B) deepened to 9 layers (`--grow-to 9`: the added layers start as
# identities) — to see whether depth or more steps moves the hard tier. `MIN=M bash scripts/gpu_session.sh` on a still
# warm machine resumes both runs with an M-minute budget in all.
# The device machine has torch but neither this package's pins nor network. Earlier sessions' scripts: this file (then
# evals/gpu_session.sh) at commits e5329f3 (first: GPU checks, training from scratch, JSON) and 72eab75 (second: GPU
# checks + FlashInfer).
#
# Prepare the carried folder .whl/ (git-ignored) here first:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     transformers==5.19.0 pydantic==2.13.5 pydantic-core==2.46.5 annotated-types typing-inspection
# Then run `bash scripts/gpu_session.sh` from the repository root on the device with .whl carried; results land in
# $OUT (bfloat16 weights: the shipped form, and what fits the 64 MiB that comes back).
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
export PYTHONUNBUFFERED=1 TERM=dumb COLUMNS=120
REPO=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
mkdir -p /tmp/pkg && cp -r diffreason /tmp/pkg/ && for d in backends tasks evals; do ln -s "$REPO/$d" /tmp/pkg/diffreason/$d; done
export PYTHONPATH=/tmp/pkg:/tmp/site PYTHONSAFEPATH=1  # the repo root must not shadow /tmp/pkg
el "setup done"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
DR="python3 -m diffreason.cli"
A=""; B=""; command -v taskset >/dev/null && { A="taskset -c 0-7"; B="taskset -c 8-15"; }
MIN=${MIN:-7.6}
COMMON="--init-from diffreason/weights/sudoku-base --device cuda --steps 100000 --batch-size 1024 --lr 3e-4
  --no-curriculum --eval-every 400 --eval-tier hard --precision bf16 --time-budget $MIN"
OMP_NUM_THREADS=6 timeout 560 $A $DR train sudoku $COMMON --run-dir runs/g3-six --seed 21 > /tmp/six.log 2>&1 &
P1=$!
OMP_NUM_THREADS=6 timeout 560 $B $DR train sudoku $COMMON --grow-to 9 --run-dir runs/g3-nine --seed 22 \
  > /tmp/nine.log 2>&1 &
P2=$!
sleep 120; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
for r in six nine; do tail -1 runs/g3-$r/log.jsonl | cut -c1-120; done
wait $P1; el "six rc=$?"; wait $P2; el "nine rc=$?"
for r in six nine; do
  echo "== $r"; tail -c 600 /tmp/$r.log | tr '\r' '\n' | grep -v "^\s*$" | tail -3
  grep '"eval"' runs/g3-$r/log.jsonl | python3 -c "import json,sys
for l in sys.stdin: r=json.loads(l); print(r['step'], r.get('elapsed'), r['eval'])"
  # the shipped form: bfloat16 weights (loading upcasts)
  python3 -c "import sys, torch; from diffreason.model import load_model; lm = load_model(sys.argv[1]); \
lm.model.to(torch.bfloat16); lm.save(sys.argv[2])" runs/g3-$r/model /tmp/bf16-$r 2>&1 | grep -v Loading
  cp runs/g3-$r/log.jsonl /tmp/bf16-$r/log.jsonl; cp runs/g3-$r/train_config.json /tmp/bf16-$r/
  tar cf - -C /tmp bf16-$r | split -b 15000000 - $OUT/$r.tar.
done
tar cf $OUT/logs.tar /tmp/six.log /tmp/nine.log 2>/dev/null
el "end"
