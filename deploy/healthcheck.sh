#!/bin/bash
# The container's health check: GET /healthz on the address of FROGBOT_LISTEN (default
# 127.0.0.1:8787) through bash's /dev/tcp, since the slim image has no curl. Exit 0 on a 200,
# else 1 with the status line (or what failed) on stderr. A wildcard address (0.0.0.0, [::]) is
# checked on 127.0.0.1.
set -u
listen="${FROGBOT_LISTEN:-127.0.0.1:8787}"
port="${listen##*:}"
host="${listen%:*}"
host="${host#[}"
host="${host%]}"
case "$host" in "" | 0.0.0.0 | "::") host=127.0.0.1 ;; esac
if ! exec 3<>"/dev/tcp/$host/$port"; then
    echo "healthz: cannot connect to $host:$port" >&2
    exit 1
fi
# An IPv6 address is bracketed in Host (a loopback server answers only Host localhost, 127.0.0.1
# or [::1]).
host_header="$host"
case "$host" in *:*) host_header="[$host]" ;; esac
printf 'GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$host_header" >&3
status=""
IFS= read -r -t 4 status <&3
status="${status%$'\r'}"
case "$status" in
    "HTTP/1."?" 200 "* | "HTTP/1."?" 200") exit 0 ;;
esac
echo "healthz: ${status:-no answer} from $host:$port" >&2
exit 1
