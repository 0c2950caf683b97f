#!/bin/bash
# Packs what a lent GPU machine needs to run this build (it has no Debian packages): the binary and
# its non-glibc shared libraries in .device/ (LD_LIBRARY_PATH=.device/lib), and bubblewrap with its
# libraries in .device/probe/ behind the wrapper bwrap.sh (KAGENT_BWRAP). Run from the repository
# root after scripts/build.sh; .device/ is ignored by git and named in the device call's carry.
set -euo pipefail
root=$(pwd)
rm -rf .device
mkdir -p .device/lib .device/probe/lib
cp build/app/kagent-actors .device/
libs() { ldd "$1" | awk '/=> \//{print $3}' | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so'; }
for l in $(libs build/app/kagent-actors); do cp -L "$l" .device/lib/; done
cp /usr/bin/bwrap .device/probe/bwrap
for l in $(libs /usr/bin/bwrap); do cp -L "$l" .device/probe/lib/; done
cat > .device/probe/bwrap.sh <<'W'
#!/bin/sh
here=$(cd "$(dirname "$0")" && pwd)
# Through the loader, so that the library path does not reach the sandboxed command.
exec /lib64/ld-linux-x86-64.so.2 --library-path "$here/lib" "$here/bwrap" "$@"
W
chmod +x .device/probe/bwrap.sh
du -sh .device
