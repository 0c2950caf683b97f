#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, and runs the whole test suite (GoogleTest
# through ctest, plus the harness's Python tests). Extra arguments go to ctest (e.g. -L unit, -LE slow).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/install-deps.sh
./scripts/setup-python.sh >/dev/null
./scripts/build.sh
cd build
# A fresh build directory has no test times, so ctest would start the suite in declaration order and
# end with the longest runs one after the other; the committed times (tests/ctest_cost_data.txt, from a
# full run on a 2-core machine) let it start the longest first. A local run keeps its own measurements.
if [ ! -s Testing/Temporary/CTestCostData.txt ]; then
  mkdir -p Testing/Temporary
  cp "$root/tests/ctest_cost_data.txt" Testing/Temporary/CTestCostData.txt
fi
rc=0
ctest -j"$(nproc 2>/dev/null || echo 2)" --output-on-failure --timeout 600 "$@" || rc=$?
# A CI log may keep only its last lines: say there why each failed test failed.
if [ "$rc" -ne 0 ]; then python3 "$root/scripts/why-failed.py" Testing/Temporary/LastTest.log || true; fi
exit "$rc"
