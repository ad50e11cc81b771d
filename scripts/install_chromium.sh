#!/usr/bin/env bash
# Install headless Chromium (Debian package `chromium`) for the slow MLflow UI test
# (tests/tracking/test_mlflow_ui_slow.py). Idempotent: exits 0 at once if /usr/bin/chromium exists.
# Needs root (or passwordless sudo) and access to the Debian package mirrors.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    echo "chromium already installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "install_chromium.sh: need root (or sudo) to apt-get install chromium" >&2
    exit 1
fi

echo "installing chromium via apt-get"
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

if [ ! -x "$CHROMIUM" ]; then
    echo "install_chromium.sh: apt-get finished but $CHROMIUM is missing" >&2
    exit 1
fi
echo "chromium installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
