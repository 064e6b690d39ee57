#!/usr/bin/env bash
# LiteLLM's proxy 1.110.2 in its own venv, for bench/overhead.py's baseline.
# `litellm[proxy]==1.110.2` names `litellm-proxy==1.110.2` and `litellm-proxy-extras==0.4.114.post1`,
# which the package registry lacks, so the proxy's dependencies are installed by hand: the ones
# `litellm/proxy/proxy_server.py` imports at start-up (found by importing it until it stops failing).
#   python3.11 -m venv /tmp/litellm-venv && bash bench/install_litellm.sh /tmp/litellm-venv
set -euo pipefail
venv="${1:-/tmp/litellm-venv}"
[ -x "$venv/bin/pip" ] || python3.11 -m venv "$venv"
"$venv/bin/pip" install -q "litellm==1.110.2" gunicorn uvicorn uvloop httptools "fastapi>=0.136.3" \
  "starlette>=1.0.1" backoff pyyaml rq orjson hiredis apscheduler fastapi-sso pyjwt python-multipart \
  "cryptography>=49" pynacl "websockets>=15,<16" "mcp>=2.3.0,<3" "httpx2>=2.10.0,<3" \
  "litellm-proxy-extras==0.4.110" litellm-enterprise restrictedpython "rich<14" tomlkit semver expression \
  backports-zstd soundfile
LITELLM_LOCAL_MODEL_COST_MAP=True "$venv/bin/python" -c "import litellm.proxy.proxy_server" \
  && echo "LiteLLM proxy ready in $venv"
