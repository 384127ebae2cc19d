"""A FAKE older sparkctl, for the fleet tests: `status --json` as sparkctl wrote it before
the status carried a schema version (schema 1). That is exactly today's output without its
"schema" key, so this runs today's sparkctl in-process and drops the key; exit codes and
everything else are today's, its parser too: it takes the `--no-repair` every fleet ask
carries (a real sparkctl of schema 1 has no such flag and is refused as too old for it; what
this fake exercises is the reading of an older schema). Run as
`python old_sparkctl.py status --json --no-repair`."""

from __future__ import annotations

import contextlib
import io
import json
import sys

from sparkctl.cli import main

if __name__ == "__main__":
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(sys.argv[1:])
    text = out.getvalue()
    try:
        data = json.loads(text)
    except ValueError:
        sys.stdout.write(text)
    else:
        data.pop("schema", None)
        print(json.dumps(data, indent=2))
    sys.exit(code)
