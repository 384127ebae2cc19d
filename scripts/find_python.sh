#!/usr/bin/env bash
# Print the path of a CPython of the given minor version (e.g. 3.12), or exit 1 saying where
# it looked. Order: an interpreter on PATH that really is that version (pyenv's shims answer
# to every name but refuse to run an inactive version), then pyenv's installed versions, then
# uv's managed Pythons. No path is hard-coded: a Spark (Ubuntu 24.04) has python3.12 on PATH,
# this image carries 3.12 and 3.13 under pyenv.
set -uo pipefail
WANT=${1:?usage: find_python.sh MAJOR.MINOR}
works() { [ -n "$1" ] && "$1" -c "import sys; sys.exit(0 if '%d.%d' % sys.version_info[:2] == '$WANT' else 1)" 2>/dev/null; }
for cand in "python$WANT" python3 python; do
  p=$(command -v "$cand" 2>/dev/null) || continue
  if works "$p"; then echo "$p"; exit 0; fi
done
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root 2>/dev/null)
  for d in $(ls -d "$root"/versions/"$WANT".* "$root"/versions/"$WANT" 2>/dev/null | sort -V -r); do
    if works "$d/bin/python$WANT"; then echo "$d/bin/python$WANT"; exit 0; fi
  done
fi
if command -v uv >/dev/null 2>&1; then
  p=$(uv python find "$WANT" 2>/dev/null) && works "$p" && { echo "$p"; exit 0; }
fi
echo "find_python.sh: no Python $WANT found (looked on PATH for python$WANT, in pyenv's versions and uv's)" >&2
exit 1
