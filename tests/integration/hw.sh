#!/bin/sh
# SPDX-License-Identifier: MIT
# The random-fill demo on a hardware provider (efa, verbs); skips with 77
# where the provider has no device here.
set -u
prov=$1
if ! "$TERN" info --provider "$prov" --json | grep -q '"usable": true'; then
	echo "SKIP: no usable $prov device on this host (see: tern info --all)"
	exit 77
fi
exec sh "$(dirname "$0")/demo.sh" --provider "$prov" --pages 16 --count 2
