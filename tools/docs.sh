#!/usr/bin/env bash
# Builds the API reference from the public headers with Doxygen (docs/Doxyfile): README.md
# is its main page, the pages of docs/ and CHANGELOG.md its chapters. Fails, listing them,
# on any warning (an undocumented public name, a broken link or reference).
#   tools/docs.sh                  into build/docs/html (index.html)
#   MAGPIE_DOCS_DIR=out tools/docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v doxygen >/dev/null || { echo "$0: needs doxygen (tools/install-deps.sh test installs it)" >&2; exit 2; }
export MAGPIE_DOCS_DIR=${MAGPIE_DOCS_DIR:-build/docs}
MAGPIE_VERSION=$(sed -n "s/^ *version: '\([^']*\)'.*/\1/p" meson.build | head -n 1)
export MAGPIE_VERSION
mkdir -p "$MAGPIE_DOCS_DIR"
rm -f "$MAGPIE_DOCS_DIR/warnings.log" "$MAGPIE_DOCS_DIR/warnings.kept"
doxygen docs/Doxyfile
# Doxygen takes task<R>, which derives from its own specialization task<void>, for a class
# deriving from itself; that one warning is its mistake, and the only one let through.
grep -v "warning: Detected potential recursive class relation between class magpie::task and base class \(magpie::\)\?task< void >!$" \
  "$MAGPIE_DOCS_DIR/warnings.log" | grep -v '^\s*$' > "$MAGPIE_DOCS_DIR/warnings.kept" || true
if [ -s "$MAGPIE_DOCS_DIR/warnings.kept" ]; then
  cat "$MAGPIE_DOCS_DIR/warnings.kept" >&2
  echo "$0: $(grep -c 'warning:' "$MAGPIE_DOCS_DIR/warnings.kept") Doxygen warnings (above)" >&2
  exit 1
fi
echo "API reference: $MAGPIE_DOCS_DIR/html/index.html"
