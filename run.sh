#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's two commands, from a pristine Debian 12 or 13 (or Ubuntu)
# machine, even one without make:
#   sh run.sh demo    install what is missing, build, run the random-fill demo
#   sh run.sh check   install what is missing, build (warnings are errors),
#                     run every test
# As root it installs the missing Debian packages; otherwise it prints the
# exact command to run as root, and stops. Anything after the first word
# goes to make (sh run.sh demo PROVIDER=tcp).
set -eu
cd "$(dirname "$0")"
what=${1:-}
case "$what" in
demo | check) shift ;;
-h | --help)
	sed -n '3,10p' "$0" | sed 's/^# \{0,1\}//'
	exit 0 ;;
*)
	echo "usage: sh run.sh demo|check [MAKE-ARGS...]" >&2
	exit 2 ;;
esac
# LIBFABRIC=PREFIX (a libfabric of one's own, docs/testing.md): then
# Debian's libfabric-dev is not needed
for a in "$@"; do
	case $a in LIBFABRIC=?*) export TERN_LIBFABRIC="${a#LIBFABRIC=}" ;; esac
done
sh scripts/deps.sh "$what"
exec make "$what" "$@"
