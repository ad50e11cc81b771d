#!/usr/bin/env bash
# Install the two judge tools whose own output files the judge study's import tests read:
#
#   .tools/fastchat     fschat 0.2.36 (FastChat's MT-bench llm_judge: gen_judgment.py)
#                       -> tests/interop/test_judge_fastchat.py::test_fastchat_own_writer
#   .tools/alpaca_eval  alpaca-eval 0.6.6 (PairwiseAnnotator)
#                       -> tests/interop/test_judge_alpaca_eval.py::test_alpaca_eval_own_annotator
#
# Why separate `pip install --target` directories and not lmaudit's environment: their pins
# conflict with lmaudit's own dependencies (and with each other). FastChat's llm_judge imports
# openai<1 and anthropic, while lmaudit's interop extra needs openai>=1.60; alpaca_eval needs
# openai>=1 and imports pkg_resources, which the recent setuptools in lmaudit's environment no
# longer ships (so setuptools<80). Each tool gets its own directory, and the tests run each tool
# in a subprocess with PYTHONPATH=<its directory>: ahead of lmaudit's site-packages, in that
# process only (lmaudit's importer runs in the test process, on its own environment).
#
# Each directory holds (--no-deps) exactly the packages the tool's path needs that lmaudit's
# environment lacks or holds at a conflicting version; their other requirements (pydantic, httpx,
# aiohttp, tiktoken, numpy, pandas, datasets, ...) come from lmaudit's environment, which the
# directory extends. After installing, the tool's entry point is imported with this interpreter
# to prove the combination works.
#
# Idempotent: a directory whose stamp names the same pins and interpreter is left alone (the
# stamp is written once the check passed). An install goes to a scratch directory first and is
# moved into place at the end, so an interrupted run leaves no half directory (the tests would
# use it).
#
# Environment:
#   PYTHON                    interpreter the tests run with (default: python); the directories
#                             hold compiled wheels (jiter), so they belong to this interpreter
#   LMAUDIT_FASTCHAT_PATH     FastChat's directory (default: <repo>/.tools/fastchat)
#   LMAUDIT_ALPACA_EVAL_PATH  alpaca_eval's directory (default: <repo>/.tools/alpaca_eval)
#                             (the tests read the same two variables)
set -euo pipefail

PYTHON="${PYTHON:-python}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FASTCHAT_DIR="${LMAUDIT_FASTCHAT_PATH:-$ROOT/.tools/fastchat}"
ALPACA_EVAL_DIR="${LMAUDIT_ALPACA_EVAL_PATH:-$ROOT/.tools/alpaca_eval}"

FASTCHAT_PINS=(
    fschat==0.2.36
    openai==0.28.1 # llm_judge extra: openai<1 (the pre-1.0 module-level API)
    anthropic==2.17.0 # llm_judge extra: imported by fastchat.llm_judge.common
    distro==1.9.0
    docstring_parser==0.18.0
    jiter==0.19.0
)
# the fastchat check: gen_judgment's imports, with openai<1 and fastchat from the directory
FASTCHAT_CHECK='
import sys
import anthropic, fastchat, openai
import fastchat.llm_judge.gen_judgment
d = sys.argv[1]
assert fastchat.__version__ == "0.2.36", fastchat.__version__
assert openai.version.VERSION == "0.28.1" and openai.__file__.startswith(d), openai.__file__
assert anthropic.__file__.startswith(d), anthropic.__file__
'

ALPACA_EVAL_PINS=(
    alpaca-eval==0.6.6
    openai==3.63.0 # alpaca_eval: openai>=1.5 (pinned here, not left to lmaudit's open range)
    distro==1.9.0
    jiter==0.19.0
    setuptools==79.0.1 # alpaca_eval.utils imports pkg_resources
    fire==0.7.1
    termcolor==3.3.0
    patsy==1.0.3
)
ALPACA_EVAL_CHECK='
import sys
import alpaca_eval, openai, pkg_resources
from alpaca_eval.annotators import PairwiseAnnotator
d = sys.argv[1]
assert alpaca_eval.__version__ == "0.6.6", alpaca_eval.__version__
assert alpaca_eval.__file__.startswith(d) and openai.__file__.startswith(d), openai.__file__
assert pkg_resources.__file__.startswith(d), pkg_resources.__file__
'

# what a directory was installed for: the pins and the interpreter's ABI
stamp_of() {
    printf '%s\n' "$@"
    "$PYTHON" -c 'import sys; print(sys.implementation.cache_tag, sys.platform)'
}

check() { # check DIR CODE: the tool imports from DIR with this interpreter (no .pyc left behind)
    PYTHONPATH="$1" PYTHONDONTWRITEBYTECODE=1 "$PYTHON" -c "$2" "$1"
}

install_tool() { # install_tool NAME DIR CHECK PIN...
    local name="$1" dir="$2" code="$3"
    shift 3
    local stamp
    stamp="$(stamp_of "$@")"
    # the stamp is written only after the check passed (importing fastchat's judge takes ~10 s)
    if [ -f "$dir/.lmaudit-stamp" ] && [ "$(cat "$dir/.lmaudit-stamp")" = "$stamp" ]; then
        echo "$name already installed in $dir"
        return 0
    fi
    local start tmp
    start=$(date +%s)
    mkdir -p "$(dirname "$dir")"
    tmp="$(mktemp -d "$(dirname "$dir")/.install-$name.XXXXXX")"
    # shellcheck disable=SC2064  # expand $tmp now
    trap "rm -rf '$tmp'" EXIT
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
        --root-user-action=ignore --no-deps --target "$tmp" "$@"
    if ! check "$tmp" "$code"; then
        echo "install_judge_tools.sh: $name does not import from $tmp with $PYTHON" \
            "(a requirement missing from lmaudit's environment?)" >&2
        exit 1
    fi
    printf '%s\n' "$stamp" >"$tmp/.lmaudit-stamp"
    rm -rf "$dir"
    mv "$tmp" "$dir"
    trap - EXIT
    echo "$name installed in $dir ($(($(date +%s) - start)) s)"
}

install_tool fastchat "$FASTCHAT_DIR" "$FASTCHAT_CHECK" "${FASTCHAT_PINS[@]}"
install_tool alpaca_eval "$ALPACA_EVAL_DIR" "$ALPACA_EVAL_CHECK" "${ALPACA_EVAL_PINS[@]}"
