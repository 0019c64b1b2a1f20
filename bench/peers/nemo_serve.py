"""NeMo Guardrails' server as `nemoguardrails server` sets it up (the same app and setup steps),
bound to loopback, one process, no access log and no per-request debug log, so that what is
measured is the guardrail's own work. Used by bench/peers.sh.

Usage: nemo_serve.py PORT CONFIG_DIR"""
import logging
import os
import sys

# The tool rails exist only in the IORails engine, which this variable turns on.
os.environ.setdefault("NEMO_GUARDRAILS_IORAILS_ENGINE", "true")
os.environ.setdefault("NEMO_GUARDRAILS_DISABLE_CHAT_UI", "true")
os.environ.setdefault("NEMO_GUARDRAILS_NO_USAGE_STATS", "1")
# IORails sends this key upstream as its bearer token.
os.environ.setdefault("OPENAI_API_KEY", "demo-key")

import uvicorn  # noqa: E402

import nemoguardrails.guardrails.guardrails as guardrails  # noqa: E402
from nemoguardrails.server import api  # noqa: E402
from nemoguardrails.telemetry import DeploymentTypeEnum, set_deployment_type  # noqa: E402

port, config_dir = int(sys.argv[1]), sys.argv[2].rstrip(os.path.sep)
# The server builds its rails with verbose=True, which sets the IORails logger to DEBUG and logs
# every request body; keep it at WARNING.
configure_logging = guardrails.configure_logging
guardrails.configure_logging = lambda *a, **k: configure_logging(logging.WARNING)
logging.getLogger("nemoguardrails").setLevel(logging.WARNING)

set_deployment_type(DeploymentTypeEnum.API.value)
api.app.rails_config_path = config_dir
api.app.disable_chat_ui = True
api.set_default_config_id(os.path.basename(config_dir))
uvicorn.run(api.app, host="127.0.0.1", port=port, log_level="warning", access_log=False, workers=1)
