#!/usr/bin/env bash
# Rebuilds offline.html: the page template `dvc plots show` fills (.dvc/config: plots.html_template),
# with vega, vega-lite and vega-embed inlined so that the page draws its figures with no network.
# The versions are those DVC's own template loads from a CDN (dvc_render's VegaRenderer.SCRIPTS).
# Needs npm (the npm registry); the packages' licences are in LICENSE.md beside this file.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --silent vega@5.20.2 vega-lite@5.2.0 vega-embed@6.18.2 >/dev/null
for f in *.tgz; do mkdir "${f%.tgz}" && tar xzf "$f" -C "${f%.tgz}"; done
python3 - "$here/offline.html" <<'PY'
import re
import sys
from pathlib import Path

builds = [
    ("vega-5.20.2", "vega.min.js"),
    ("vega-lite-5.2.0", "vega-lite.min.js"),
    ("vega-embed-6.18.2", "vega-embed.min.js"),
]
scripts = []
for folder, name in builds:
    js = (Path(folder) / "package" / "build" / name).read_text(encoding="utf-8")
    js = re.sub(r"//# sourceMappingURL=\S+\s*$", "", js)  # no map for the browser to ask for
    for placeholder in ("</script", "{plot_divs}", "{scripts}", "{refresh_tag}"):
        assert placeholder not in js, (name, placeholder)
    scripts.append(f"<!-- {folder} ({name}), BSD-3-Clause: plot_template/LICENSE.md -->\n<script>{js}</script>")
page = """<!DOCTYPE html>
<html>
<head>
    <meta charset="utf-8">
    {refresh_tag}
    <title>DVC Plot</title>
    %s
    <style>
        table {
            border-spacing: 15px;
        }
    </style>
</head>
<body>
    {plot_divs}
</body>
</html>
""" % "\n".join(scripts)
Path(sys.argv[1]).write_text(page, encoding="utf-8")
PY
