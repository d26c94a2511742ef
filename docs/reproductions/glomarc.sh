#!/bin/sh
# Seed 001 (G-LOMARC-TS) Figs. 13-16: the sweeps behind docs/reproductions/glomarc.md.
# Usage: docs/reproductions/glomarc.sh [OUT_DIR] [JOBS]   (defaults: glomarc-out, 10000)
set -e
OUT=${1:-glomarc-out}
JOBS=${2:-10000}
COSCHED=${COSCHED:-cosched}
# The figures go next to this script, drawn by cosched itself (SVG, and PNG at 300 dpi).
DOCS=$(dirname "$0")
common="--jobs $JOBS --own-load --seeds 1,2,3"
# Fig. 13 and 14: every scheduler under W1.
$COSCHED sim sweep --model w1 $common \
  --policies glomarc:variant=ssp,glomarc:variant=cst,glomarc:variant=cstws,glomarc:variant=glts,glomarc:variant=fbo,glomarc:variant=ns,glomarc:variant=nh \
  --out "$OUT/fig13" --title "Fig. 13: RR by scheduler, W1" \
  --plot "$DOCS/glomarc-fig13.svg" --plot "$DOCS/glomarc-fig13.png"
# Fig. 15: block size under W2 (SSP beside, as the reference).
$COSCHED sim sweep --model w2 $common \
  --policies glomarc:variant=glts,glomarc:variant=fbo,glomarc:variant=ns,glomarc:variant=nh \
  --vary block_size=2:4:8:12:16:20:24 --out "$OUT/fig15" --title "Fig. 15: RR against block size, W2" \
  --plot "$DOCS/glomarc-fig15.svg" --plot "$DOCS/glomarc-fig15.png"
$COSCHED sim sweep --model w2 $common --policies glomarc:variant=ssp --out "$OUT/fig15-ssp"
# Fig. 16: the fairness slack under W1.
$COSCHED sim sweep --model w1 $common --policies glomarc \
  --vary f_slack=1.0:1.25:1.5:1.75:2.0:2.5:3.0 --out "$OUT/fig16" \
  --title "Fig. 16: RR against F_slack, W1" \
  --plot "$DOCS/glomarc-fig16.svg" --plot "$DOCS/glomarc-fig16.png"
