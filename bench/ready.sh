# Sourced by the benchmarks that start servers: wait until each answers HTTP.
#
# wait_ready TRIES PATH PORT...: for each PORT in turn, GET http://127.0.0.1:PORT/PATH every
# 0.1 s until it answers (any status), at most TRIES times. A server that never answers is
# found by the run that follows, which then fails on its errors.
wait_ready() {
    local tries=$1 path=$2 port
    shift 2
    for port in "$@"; do
        for _ in $(seq "$tries"); do
            curl -s -o /dev/null "http://127.0.0.1:$port/$path" && break
            sleep 0.1
        done
    done
}
