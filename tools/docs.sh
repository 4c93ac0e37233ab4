#!/usr/bin/env bash
# Builds the API reference from the public headers with Doxygen (docs/Doxyfile): README.md
# is its main page and the pages of docs/ its chapters. Fails, listing them, on any warning
# (an undocumented public name, a broken link or reference).
#   tools/docs.sh                  into build/docs/html (index.html)
#   MAGPIE_DOCS_DIR=out tools/docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v doxygen >/dev/null || { echo "$0: needs doxygen (tools/install-deps.sh test installs it)" >&2; exit 2; }
export MAGPIE_DOCS_DIR=${MAGPIE_DOCS_DIR:-build/docs}
MAGPIE_VERSION=$(sed -n "s/^ *version: '\([^']*\)'.*/\1/p" meson.build | head -n 1)
export MAGPIE_VERSION
mkdir -p "$MAGPIE_DOCS_DIR"
rm -f "$MAGPIE_DOCS_DIR/warnings.log"
doxygen docs/Doxyfile
if [ -s "$MAGPIE_DOCS_DIR/warnings.log" ]; then
  cat "$MAGPIE_DOCS_DIR/warnings.log" >&2
  echo "$0: $(grep -c 'warning:' "$MAGPIE_DOCS_DIR/warnings.log") Doxygen warnings (above)" >&2
  exit 1
fi
echo "API reference: $MAGPIE_DOCS_DIR/html/index.html"
