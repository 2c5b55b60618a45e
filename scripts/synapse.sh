#!/usr/bin/env bash
# Installs the Synapse homeserver (PyPI package `matrix-synapse`) into a cached virtual environment
# for the Matrix adapter's tests: `bash scripts/synapse.sh`. Skips the install when the venv already
# has Synapse. The tests (adapters/frogbot-matrix/tests) start and stop Synapse themselves, on a free
# loopback port with a generated config; they find the venv at
# ${FROGBOT_SYNAPSE_VENV:-$HOME/.cache/frogbot-synapse-venv}.
# Needs python3 (3.9+) with the venv module; on Debian, installs python3-venv when missing (as root).
set -euo pipefail

venv="${FROGBOT_SYNAPSE_VENV:-$HOME/.cache/frogbot-synapse-venv}"

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import synapse.app.homeserver' 2>/dev/null; then
    echo "Synapse already installed in $venv ($("$venv/bin/python" -c 'import synapse; print(synapse.__version__)'))"
    exit 0
fi

python="${PYTHON:-python3}"
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing python3-venv (Debian)…"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        python=/usr/bin/python3
    else
        echo "python3 with the venv module is needed to install Synapse" >&2
        exit 1
    fi
fi

echo "installing matrix-synapse from PyPI into $venv…"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet matrix-synapse
echo "installed Synapse $("$venv/bin/python" -c 'import synapse; print(synapse.__version__)') in $venv"
