#!/usr/bin/env bash
# Installs every Debian package kagent-actors needs to build and test. Idempotent: packages already
# present are skipped, so a second call costs one dpkg query.
set -euo pipefail
pkgs=(
  g++ cmake make pkg-config git ca-certificates
  libcaf-dev libyaml-cpp-dev nlohmann-json3-dev
  libboost-dev libboost-filesystem-dev libboost-iostreams-dev libssl-dev zlib1g-dev
  libsqlite3-dev sqlite3 libcli11-dev libspdlog-dev libfmt-dev openssl
  libkainjow-mustache-dev libcsv-dev libgtest-dev libbenchmark-dev
  python3 python3-dev python3-venv python3-pip bubblewrap util-linux
  chromium
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
