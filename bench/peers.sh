# Sourced by bench/cpu.sh (PEERS=1): the guardrails the issue compares Railyard with, on the tool
# request, in front of the same backend, each with its tool-call rails on and nothing else:
# - NeMo Guardrails 0.24.1, its server with the IORails engine's tool rails (`tool call
#   validation`: each call's tool declared and its arguments valid against the tool's schema;
#   `tool result validation` on tool results sent back); no extra model call;
# - LiteLLM proxy 1.108.7 with its `tool_permission` guardrail on every request (calls in the
#   reply checked against rules: get_weather allowed, anything else denied); no database.
# Installed with pip from bench/peers/*-requirements.txt (pinned, PyPI only) into venvs under
# $RAILYARD_PEERS_DIR (default ~/.cache/railyard-bench-peers), once.
#
# start_peers WORK_DIR BACKEND_PORT NEMO_PORT LITELLM_PORT: starts both in the background, waits
# until they answer; sets $nemo_pid and $litellm_pid.
peers_venv() { # name requirements -> prints the venv's python
    local dir="${RAILYARD_PEERS_DIR:-$HOME/.cache/railyard-bench-peers}/$1"
    if [ ! -x "$dir/bin/python" ] || ! cmp -s "$2" "$dir/requirements.txt"; then
        echo "installing $1 into $dir (once)" >&2
        rm -rf "$dir"
        python3 -m venv "$dir"
        "$dir/bin/pip" install -q --disable-pip-version-check -r "$2" >&2
        cp "$2" "$dir/requirements.txt"
    fi
    echo "$dir/bin/python"
}

start_peers() {
    local work="$1/peers" backend="$2" nemo_port="$3" litellm_port="$4" here
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/peers"
    mkdir -p "$work/nemo/config"
    local nemo_py litellm_py
    nemo_py=$(peers_venv nemo "$here/nemo-requirements.txt")
    litellm_py=$(peers_venv litellm "$here/litellm-requirements.txt")
    cat > "$work/nemo/config/config.yml" <<YAML
models:
  - type: main
    engine: openai
    model: demo
    parameters:
      base_url: http://127.0.0.1:$backend/v1
    api_key_env_var: OPENAI_API_KEY
passthrough: true
rails:
  tool_output:
    flows:
      - tool call validation
  tool_input:
    flows:
      - tool result validation
YAML
    cat > "$work/litellm.yaml" <<YAML
model_list:
  - model_name: demo
    litellm_params:
      model: openai/demo
      api_base: http://127.0.0.1:$backend/v1
      api_key: demo-key
guardrails:
  - guardrail_name: tool-permission
    litellm_params:
      guardrail: tool_permission
      mode: post_call
      default_on: true
      default_action: deny
      on_disallowed_action: block
      rules:
        - id: allow-get-weather
          tool_name: "^get_weather\$"
          decision: allow
litellm_settings:
  telemetry: false
general_settings:
  master_key: demo-key
YAML
    "$nemo_py" "$here/nemo_serve.py" "$nemo_port" "$work/nemo/config" >"$work/nemo.log" 2>&1 &
    nemo_pid=$!
    # Offline (bundled cost map and data, no telemetry), errors only in the log; DATABASE_URL
    # unset, not empty (an empty one is refused as an unsupported scheme).
    LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS=True \
    LITELLM_LOCAL_POLICY_TEMPLATES=True LITELLM_LOCAL_BLOG_POSTS=True \
    LITELLM_LOCAL_AUTOROUTER_PRESETS=True LITELLM_LOG=ERROR LITELLM_TELEMETRY=False \
    DISABLE_SCHEMA_UPDATE=True NO_DOCS=True env -u DATABASE_URL \
        "$(dirname "$litellm_py")/litellm" --config "$work/litellm.yaml" --host 127.0.0.1 \
        --port "$litellm_port" --num_workers 1 >"$work/litellm.log" 2>&1 &
    litellm_pid=$!
    local _
    # LiteLLM takes 15-20 s to import and start on this VM kind.
    for _ in $(seq 1200); do
        curl -sf -o /dev/null "http://127.0.0.1:$nemo_port/healthz" \
            && curl -sf -o /dev/null "http://127.0.0.1:$litellm_port/health/readiness" && return 0
        if ! kill -0 "$nemo_pid" 2>/dev/null || ! kill -0 "$litellm_pid" 2>/dev/null; then break; fi
        sleep 0.1
    done
    echo "the peers did not start; their logs:" >&2
    tail -n 20 "$work/nemo.log" "$work/litellm.log" >&2
    exit 1
}
