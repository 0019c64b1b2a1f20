# Sourced by bench/cpu.sh and bench/load.sh: nginx as a plain reverse proxy, the cost of one hop
# that judges nothing. Debian's nginx-light (installed when missing and apt-get is usable), one
# worker (or WORKERS), keep-alive upstream, no buffering, no access log. Also the configs the
# two scripts run Railyard with beside it: like_for_like (as many threads as nginx has workers)
# and floor_config (no plugins).
#
# start_nginx WORK_DIR LISTEN_PORT BACKEND_PORT: starts it in the background; sets $nginx_pid
# (the master; its workers are its children) and $nginx (the binary).
start_nginx() {
    local dir="$1/nginx" listen="$2" upstream="$3"
    if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
        apt-get install -y -q nginx-light >/dev/null 2>&1 || {
            echo "needs nginx: apt-get install -y nginx-light" >&2
            exit 2
        }
    fi
    nginx=$(command -v nginx || echo /usr/sbin/nginx)
    mkdir -p "$dir/logs"
    cat > "$dir/nginx.conf" <<CONF
worker_processes ${WORKERS:-1};
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_buffer_size 64k;
    upstream backend { server 127.0.0.1:$upstream; keepalive 64; }
    server {
        listen 127.0.0.1:$listen;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
CONF
    "$nginx" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' &
    nginx_pid=$!
}

# like_for_like CONFIG: CONFIG's path, or with WORKERS set, a copy beside it (its paths are
# relative to its directory) whose `[server] workers` is WORKERS, the count nginx runs with:
# Railyard then serves with as many threads as nginx has worker processes. Unset, Railyard keeps
# its default (one thread per CPU) and nginx runs one worker, as in BENCHMARKS.md §13-§35.
like_for_like() {
    local config="$1"
    if [ -z "${WORKERS:-}" ]; then
        echo "$config"
        return
    fi
    local copy
    copy="$(dirname "$config")/.workers-$$-$(basename "$config")"
    sed "s/^workers = .*/workers = $WORKERS/" "$config" >"$copy"
    grep -q "^workers = $WORKERS\$" "$copy" || { echo "$config sets no [server] workers" >&2; exit 1; }
    echo "$copy"
}

# floor_config CONFIG: a copy of CONFIG beside it (its paths are relative to its directory) with
# no plugins, nor the tenants' chains and extensions that name them: the daemon's own work on a
# request (keys, reading, records, the backend hop) with no policy. Its path is printed; the
# caller removes it.
floor_config() {
    local copy
    copy="$(dirname "$1")/.floor-$$.toml"
    awk '/^\[\[plugins\]\]/ { exit } !/^(chains|extend) *=/' "$1" >"$copy"
    echo "$copy"
}
