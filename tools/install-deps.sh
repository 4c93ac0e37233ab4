#!/usr/bin/env bash
# Installs the Debian packages magpie needs that are missing, as root or through sudo.
#   tools/install-deps.sh test    — what `tools/test.sh` needs
#   tools/install-deps.sh bench   — what `tools/bench.sh` needs
set -euo pipefail

common=(meson ninja-build g++ pkg-config cmake python3 libconcurrentqueue-dev)
case "${1:-test}" in
  # CLI11: the soak; clang + its runtimes: the libFuzzer targets; doxygen: the API
  # reference (tools/docs.sh); cmake and pkg-config (in common): the install checks
  test) wanted=("${common[@]}" doctest-dev relacy-dev libbenchmark-dev nlohmann-json3-dev
                libcli11-dev clang libclang-rt-14-dev doxygen) ;;
  bench) wanted=("${common[@]}" doctest-dev libbenchmark-dev libtbb-dev nlohmann-json3-dev
                 libcli11-dev python3-matplotlib clang libomp-dev nettle-dev) ;;  # clang + libomp: the OpenMP peers; nettle: UTS
  *) echo "usage: $0 [test|bench]" >&2; exit 2 ;;
esac

missing=()
for package in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null; then
  as_root=(sudo)
else
  echo "error: missing packages (${missing[*]}) and neither root nor sudo" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
