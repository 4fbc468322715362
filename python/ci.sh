#!/usr/bin/env bash
# CI for the passel Python package: a fresh venv under target/, the package built and
# installed the way the README says (`pip install ./python`, maturin as PEP 517 backend),
# then the pytest suite and mypy on the typed example. Exits non-zero on any failure,
# including "no tests collected" (pytest exit 5).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
venv="$root/target/python-ci-venv"

echo "== python package: fresh venv at $venv"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet maturin pytest numpy mypy

echo "== python package: pip install ./python"
# Built with cargo's dev profile (opt-level 1 for the workspace, 2 for dependencies: see the root
# Cargo.toml), which shares every engine artifact with `cargo test`, instead of a second, release
# build of the whole workspace. Users' `pip install ./python` builds the release profile.
MATURIN_PEP517_ARGS="${MATURIN_PEP517_ARGS:---profile dev}" "$venv/bin/python" -m pip install --quiet ./python

echo "== python package: pytest"
# Run from the repository root with the venv's pytest (not `python -m pytest`, which would
# put the working directory first on sys.path): the tests import the installed package.
set +e
"$venv/bin/pytest" -q -p no:cacheprovider python/tests
status=$?
set -e
if [ "$status" -ne 0 ]; then
  echo "pytest failed (exit $status; 5 means no tests were collected)" >&2
  exit 1
fi

echo "== python package: mypy --strict on the package sources and the typed examples"
"$venv/bin/mypy" --strict --no-incremental python/passel python/examples/typed_tour.py python/examples/pass_infra_tutorial.py \
  python/examples/pass_instrument_tutorial.py python/examples/rewrite_and_rename.py python/examples/tir_custom_pass.py

echo "python package: all checks passed"
