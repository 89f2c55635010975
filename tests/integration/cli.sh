#!/bin/sh
# SPDX-License-Identifier: MIT
# The command line: help, versions, errors users hit first.
set -u
fail=0
t() { # t EXPECTED-RC PATTERN CMD... (a server that should have been
	# refused but serves is stopped: rc 124)
	want=$1 pat=$2
	shift 2
	out=$(timeout 20 "$@" 2>&1)
	rc=$?
	if [ $rc -ne "$want" ] || ! printf '%s' "$out" | grep -q -- "$pat"; then
		echo "not ok: $* (rc $rc, want $want, pattern '$pat')"
		printf '%s\n' "$out" | head -5
		fail=1
	else
		echo "ok: $*"
	fi
}
t 0 "usage: tern" "$TERN" --help
t 2 "usage: tern" "$TERN"
t 2 "unknown command" "$TERN" frobnicate
t 0 "libfabric" "$TERN" version
t 2 "tern version: unknown option '--bogus'" "$TERN" version --bogus
t 2 "tern version: unexpected argument 'extra'" "$TERN" version extra
t 2 "tern --version: unexpected argument 'x'" "$TERN" --version x
t 0 "usage: tern version" "$TERN" version --help
for c in info fill demo ping atomic bench topo counters doctor; do
	t 0 "usage: tern $c" "$TERN" $c --help
done
t 0 "shm" "$TERN" info
t 0 '"provider": "shm"' "$TERN" info --json --provider shm
t 1 "no nosuch offering" "$TERN" info --provider nosuch
# The API version is negotiated at run time: the running library's, up to
# the newest tern is validated against (2.6, src/prov/version.c; so 1.17
# on Debian 12, 2.1 on Debian 13, 2.6 on 2.6 and later); TERN_FI_API asks
# for an older one, and a bad one is named.
run=$("$TERN" info --json --provider shm | sed -n 's/.*"libfabric": "\([0-9.]*\)".*/\1/p')
api=$(echo "$run" | awk -F. '{ print ($1 > 2 || ($1 == 2 && $2 > 6)) ? "2.6" : $0 }')
t 0 "\"libfabric_api\": \"$api\"" "$TERN" info --json --provider shm
t 0 '"libfabric_api": "1.12"' env TERN_FI_API=1.12 "$TERN" info --json --provider shm
# tern info shows every provider tern opens: on libfabric 2.x tcp's own RDM
# endpoint (what --provider tcp and the automatic choice open) besides
# tcp;ofi_rxm (atomics), by default and under --provider tcp; on 1.x
# "tcp" is tcp;ofi_rxm.
case $run in
1.*) t 0 '"provider": "tcp;ofi_rxm"' "$TERN" info --json --provider tcp ;;
*)
	t 0 '"provider": "tcp", ' "$TERN" info --json
	t 0 '"provider": "tcp", ' "$TERN" info --json --provider tcp
	t 0 '"provider": "tcp;ofi_rxm"' "$TERN" info --json --provider tcp
	;;
esac
t 0 "ignoring TERN_FI_API=9.x" env TERN_FI_API=9.x "$TERN" info --provider shm
t 0 "API 1.12" env TERN_FI_API=1.12 "$TERN" version
# A bad TERN_LOG is named once (not by each process) and warn is kept, as
# a bad TERN_FI_API is; --log with a bad level is a usage error.
t 0 "TERN_LOG=loud: not a log level (none, warn, info, debug" env TERN_LOG=loud "$TERN" version
n=$(TERN_LOG=loud "$TERN" ping --provider shm --sizes 8 --iters 5 --warmup 1 2>&1 >/dev/null |
	grep -c "TERN_LOG=loud: not a log level")
[ "$n" -eq 1 ] && echo "ok: a bad TERN_LOG is named once with a local peer" ||
	{ echo "not ok: a bad TERN_LOG named $n times with a local peer"; fail=1; }
t 0 "tern info: libfabric" env TERN_LOG=info "$TERN" version
t 2 "--log 'loud': expected none" "$TERN" ping --log loud
t 2 "not hex" "$TERN" fill zzzz --provider shm
t 2 "no server card" "$TERN" fill --provider shm
t 1 "server card unusable" "$TERN" fill 00112233 --provider shm
t 2 "expected a size" "$TERN" fill 00 --page-size 0
t 2 "expected a size" "$TERN" fill 00 --page-size 17M
t 2 "expected an integer" "$TERN" fill 00 --pages 0
t 2 "expected an integer" "$TERN" fill 00 --pages 100000
t 1 "not available" "$TERN" fill --listen --provider nosuch
# A fill that cannot fit is refused before connecting, naming the limit.
t 2 "48 MiB in one fill; the protocol's limit is 32 MiB" "$TERN" demo --page-size 16M --pages 3
t 2 "48 MiB in one fill" "$TERN" fill 00 --page-size 16M --pages 3
t 2 "two regions of 16 MiB hold 2 such pages" "$TERN" fill 00 --page-size 10M --pages 3

# One grammar (docs/cli.md): a letter means one thing everywhere; an old
# spelling is refused with the new one, never reinterpreted.
t 2 "is now --warmup" "$TERN" ping -w 5
t 2 "is now --iters" "$TERN" ping -i 5
t 2 "is now 'tern ping --listen" "$TERN" ping serve
t 2 "is now 'tern atomic --listen" "$TERN" atomic serve
# tern serve is tern fill --listen: refused (one line on stderr, nothing
# on stdout), never run, whatever its options (a server started would be
# stopped by t's timeout: rc 124).
t 2 "^tern serve: 'tern serve' is now 'tern fill --listen \[HOST:PORT\]' (same options)$" "$TERN" serve
t 2 "is now 'tern fill --listen" "$TERN" serve --provider shm --once
t 2 "is now 'tern fill --listen" "$TERN" serve --listen 127.0.0.1:0 --token t
t 2 "is now 'tern fill --listen" "$TERN" serve --help
out=$(timeout 20 "$TERN" serve --provider shm 2>/dev/null)
rc=$?
err=$(timeout 20 "$TERN" serve --provider shm 2>&1 >/dev/null)
if [ $rc -eq 2 ] && [ -z "$out" ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]; then
	echo "ok: tern serve: exit 2, one line on stderr, nothing on stdout"
else
	echo "not ok: tern serve: exit $rc, stdout '$out', stderr '$err'"
	fail=1
fi
# One command, two roles: an option of the other role is refused, named.
t 2 "--pages is a client option: tern fill --listen does not take it" "$TERN" fill --listen --pages 4
t 2 "--reconnect is a client option" "$TERN" fill --reconnect 5 --listen=127.0.0.1:0
t 2 "--once is a server option: it needs --listen" "$TERN" fill 00 --once
t 2 "--max-clients is a server option" "$TERN" fill --max-clients 4 127.0.0.1:1
t 2 "exclude each other" "$TERN" fill --listen 00
t 2 "--token needs --listen HOST:PORT" "$TERN" fill --listen --token x
t 2 "is now --pages" "$TERN" fill 00 -n 4
t 2 "is now --page-size" "$TERN" demo -s 4K
t 2 "is now --clients" "$TERN" atomic 00 -n 2
t 2 "not an option of tern bench" "$TERN" bench --xml f.xml
t 2 "not an option of tern info" "$TERN" info --window 4
t 2 "write --json=out.json" "$TERN" bench --json out.json
t 2 "unknown option --frob" "$TERN" topo --frob
t 2 "--iters needs N" "$TERN" bench --iters
t 2 "exclude each other" "$TERN" ping --listen 00
t 2 "needs --listen HOST:PORT" "$TERN" atomic --listen --token x
for c in info fill demo ping atomic bench topo counters doctor; do
	t 0 "-h, --help" "$TERN" $c --help
done
# No option takes an empty value: each is named and refused up front.
for c in fill ping atomic bench; do
	t 2 "--token '': an empty token" "$TERN" $c --listen 127.0.0.1:0 --token ''
done
t 2 "--token '': an empty token" "$TERN" fill 127.0.0.1:1 --token ''
# A token is at most 256 bytes (TERN_BOOT_TOKEN_MAX), whichever command.
long=$(printf '%0257d' 0)
for c in fill ping atomic bench; do
	t 2 "--token '0000.*257 bytes, at most 256" "$TERN" $c --listen 127.0.0.1:0 --token "$long"
done
t 2 "257 bytes, at most 256" "$TERN" fill 127.0.0.1:1 --token "$long"
t 2 "TERN_TOKEN '0000.*257 bytes" env TERN_TOKEN="$long" "$TERN" bench 127.0.0.1:1
t 1 "connecting to 127.0.0.1:1" "$TERN" bench 127.0.0.1:1 --token "${long#0}"
t 2 "--rails '': empty" "$TERN" bench --rails ''
t 2 "--rails '': empty" "$TERN" ping --rails '' --provider shm
t 2 "--provider '': empty" "$TERN" info --provider ''
t 2 "--provider '': empty" "$TERN" info -p ''
t 2 "--node '': empty" "$TERN" bench --node '' --provider shm
t 2 "--node '': empty" "$TERN" fill --listen --node ''
t 2 "--card-file '': empty" "$TERN" fill --card-file ''
t 2 "--card-file '': empty" "$TERN" ping --card-file ''
t 2 "--listen '': empty" "$TERN" ping --listen=
t 2 "--json '': empty" "$TERN" bench --json=
# A HOST:PORT that is not one is a usage error before anything runs; one
# nobody listens at is named with the reason.
t 2 "peer '127.0.0.1:99999': port '99999' is not a number" "$TERN" atomic 127.0.0.1:99999
t 2 "peer 'zz:zz': port 'zz'" "$TERN" ping zz:zz
t 2 "peer '\[::1': expected \[IPV6\]:PORT" "$TERN" fill '[::1'
t 2 "--listen '127.0.0.1:x': port 'x'" "$TERN" fill --listen 127.0.0.1:x
t 2 "--listen '1.2.3.4:abc': port 'abc'" "$TERN" bench --listen 1.2.3.4:abc
t 1 "connecting to 127.0.0.1:1: Connection refused" "$TERN" atomic 127.0.0.1:1 --provider shm
t 2 "'abc' is neither the hex card" "$TERN" atomic abc
# A size list has no empty element (a typo, not a shorter list).
t 2 "--sizes '8,,64': size 2 is empty" "$TERN" ping --sizes 8,,64 --provider shm
t 2 "--sizes ',': size 1 is empty" "$TERN" bench --sizes ,
t 2 "--sizes '64,': size 2 is empty" "$TERN" bench --sizes 64,
t 2 "--sizes '': empty" "$TERN" bench --sizes ''
t 2 "--sizes 'x': expected a size" "$TERN" bench --sizes 8,x
# --json means the same everywhere: stdout, or =FILE.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t 0 '"provider": "shm"' "$TERN" info --provider shm -j
"$TERN" info --provider shm --json="$tmp/i.json" &&
	grep -q '"provider": "shm"' "$tmp/i.json" && echo "ok: info --json=FILE" ||
	{ echo "not ok: info --json=FILE wrote no JSON"; fail=1; }
t 1 "No such file" "$TERN" info --json="$tmp/no/such/dir.json"
# bench makes its files before anything runs (the peer here is never
# reached), and a write that fails fails the command.
t 1 "--json=$tmp/no/x.json: No such file" "$TERN" bench 127.0.0.1:1 --json="$tmp/no/x.json"
t 1 "--csv $tmp/no/x.csv: No such file" "$TERN" bench 127.0.0.1:1 --csv "$tmp/no/x.csv"
t 1 "--plot $tmp/no/x.svg: No such file" "$TERN" bench 127.0.0.1:1 --plot "$tmp/no/x.svg"
t 1 "--csv /dev/full: writing it: No space" "$TERN" bench --provider shm --sizes 8 --iters 5 --csv /dev/full
t 1 "--json=/dev/full: writing it: No space" "$TERN" bench --provider shm --sizes 8 --iters 5 --json=/dev/full
t 2 "--csv x.csv: a --listen peer has no results" "$TERN" bench --listen --csv x.csv
# shm offers FI_HMEM in Debian's build, but tern stages GPU buffers there.
t 0 "GPU buffers    staged" "$TERN" info --provider shm
# The mode of transparent huge pages, and what tern does under it.
t 0 "transparent huge pages: " "$TERN" info --provider shm
t 0 '"tern_aligns": false, "tern_advises": false' env TERN_THP=0 "$TERN" info --json --provider shm
t 0 "TERN_THP=0: tern neither aligns nor advises" env TERN_THP=0 "$TERN" info --provider shm
# tern ping with no peer starts a local one, as tern bench does.
t 0 "rt/s" "$TERN" ping --provider shm --sizes 8 --iters 50 --warmup 5
# tern --help names every TERN_* variable the sources read.
top=$(cd "$(dirname "$0")/../.." && pwd)
help=$("$TERN" --help)
vars=$(grep -rhoE '"TERN_[A-Z0-9_]+"' "$top/src" "$top/apps" "$top/bench" \
	"$top/tools" --include='*.c' --include='*.h' | grep -v '^$' |
	tr -d '"' | sort -u)
[ -n "$vars" ] || { echo "not ok: found no TERN_* variable in the sources"; fail=1; }
for v in $vars; do
	printf '%s\n' "$help" | grep -q "^  $v " ||
		{ echo "not ok: tern --help does not name $v"; fail=1; }
done
echo "ok: tern --help names the $(echo "$vars" | wc -l) TERN_* variables the sources read"
[ $fail -eq 0 ] && echo "PASS: cli"
exit $fail
