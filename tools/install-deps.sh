#!/bin/sh
# Install the Debian packages tpexport needs to build and test, if missing.
# Safe to run repeatedly; does nothing when everything is present.
set -e
PKGS="gcc make cmake pkg-config libjansson-dev zlib1g-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata libdnnl-dev"
[ -n "$TP_EXTRA_PKGS" ] && PKGS="$PKGS $TP_EXTRA_PKGS"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "installing:$missing"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
