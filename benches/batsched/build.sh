#!/bin/sh
# Builds batsched (Batsim's C++ schedulers) without Batsim's own interval library: our
# intervalset.hpp (beside this script, over Boost.ICL) stands in for it. batsched then runs
# under cosched through python/batsim_bridge.py (docs/sim.md, "EASY variants").
#
# usage: benches/batsched/build.sh BATSCHED_SRC LOGURU_SRC OUT_DIR
#   BATSCHED_SRC  a checkout of oar-team/batsched (measured at bab23fa, 1.4.0)
#   LOGURU_SRC    a checkout of emilk/loguru (loguru.cpp, loguru.hpp)
#   OUT_DIR       where the objects and the `batsched` binary go
# Debian 12 packages: g++ libboost-dev libboost-locale-dev libboost-regex-dev
#   libboost-system-dev rapidjson-dev libzmq3-dev libgmp-dev
# One file at a time (batsched's files are heavy on Boost; parallel builds exhaust memory
# on small machines); about 10 minutes on 2 cores.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$1" && pwd); loguru=$(cd "$2" && pwd); out=$3
mkdir -p "$out/obj"
# The sources batsched's own meson.build compiles.
files=$(sed -n "s/.*'\(src\/[^']*\.cpp\)'.*/\1/p" "$src/meson.build")
[ -n "$files" ] || { echo "no sources listed in $src/meson.build" >&2; exit 1; }
for f in $files; do
  o="$out/obj/$(echo "$f" | tr / _).o"
  if [ -f "$o" ] && [ "$o" -nt "$src/$f" ]; then continue; fi
  echo "compiling $f" >&2
  g++ -std=c++14 -O2 -w -DBATSCHED_VERSION=1.4.0 -DLOGURU_WITH_STREAMS=1 \
      -I"$here" -I"$loguru" -I"$src/src" -c "$src/$f" -o "$o"
done
g++ -std=c++14 -O2 -w -DLOGURU_WITH_STREAMS=1 -c "$loguru/loguru.cpp" -o "$out/obj/loguru.o"
g++ -o "$out/batsched" "$out"/obj/*.o -lboost_locale -lboost_regex -lboost_system -lzmq \
    -lgmpxx -lgmp -lpthread -ldl
echo "$out/batsched" >&2
