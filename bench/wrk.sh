# Sourced by bench/cpu.sh, bench/rss.sh and bench/profile.sh: wrk posting one JSON body again and
# again, and the count of what it sent, with any failure stopping the benchmark (a run that was
# refused measures nothing).
#
# wrk_script LUA BODY KEY: writes LUA, a wrk script that posts the file BODY with KEY as the
# bearer key, and when done prints `RESULT <requests> <errors and non-2xx answers>`.
wrk_script() {
    cat > "$1" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $3"
local f = io.open("$2", "r"); wrk.body = f:read("*a"); f:close()
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d\\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout))
end
LUA
}

# wrk_requests OUT NAME: the requests a run with such a script answered, from its output OUT;
# with any error or non-2xx answer, the output goes to stderr under NAME and the script exits.
wrk_requests() {
    local n errs
    read -r _ n errs < <(grep '^RESULT' "$1")
    [ "$errs" = 0 ] || { echo "$2: errors or non-2xx answers:" >&2; cat "$1" >&2; exit 1; }
    echo "$n"
}
