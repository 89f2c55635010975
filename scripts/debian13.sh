#!/bin/sh
# SPDX-License-Identifier: MIT
# tern in a Debian 13 root (libfabric 2.1): scripts/debroot.sh trixie.
# usage: scripts/debian13.sh check|demo|nonroot|crossver [TERN]|run CMD...|shell|fresh
# TERN_DEB13_ROOT names the root (default /var/cache/tern/trixie).
[ -n "${TERN_DEB13_ROOT:-}" ] && export TERN_ROOT_DIR="$TERN_DEB13_ROOT"
exec bash "$(dirname "$0")/debroot.sh" trixie "$@"
