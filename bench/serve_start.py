"""How long `costgate serve` takes to answer its first health check, and what the libraries a
config may not use (redis, FAISS, onnxruntime) would add to every start if they were imported
with the app (issue 25: each test that boots a gateway pays its start).

- boots: `python -m gateway.cli serve` on a one-model config, from the exec to /healthz
  answering, `--boots` times; the median and the spread;
- imports: in a fresh interpreter each time, `import gateway.app`, then the three libraries on
  top; the second figure is what they cost beyond the app (medians of `--rounds`).

    .venv/bin/python bench/serve_start.py [--boots 8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import ROOT, base_env, free_port

OPTIONAL = ("redis.exceptions", "faiss", "onnxruntime")
IMPORTS = """
import sys, time
t = time.perf_counter(); import gateway.app; app = time.perf_counter() - t
t = time.perf_counter(); {optional}; more = time.perf_counter() - t
print(app, more, *[m for m in ("redis", "faiss", "onnxruntime") if m in sys.modules and m not in {loaded}])
"""


def boot_s(work: Path) -> float:
    config = {
        "admin_key": "sk-cg-admin-bench",
        "database_url": f"sqlite:///{work}/costgate.db",
        "data_dir": str(work / "data"),
        "models": [{"name": "m", "provider": "openai", "api_base": "http://127.0.0.1:9/v1",
                    "price": {"input_per_mtok": "1", "output_per_mtok": "2"}}],
    }  # fmt: skip
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    start = time.perf_counter()
    command = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(work / "config.yaml"), "--port", str(port)]
    proc = subprocess.Popen(command, env=base_env(), cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return time.perf_counter() - start
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise RuntimeError("costgate serve exited before answering")
            time.sleep(0.02)
    finally:
        proc.terminate()
        proc.wait(30)


def import_s() -> tuple[float, float, list[str]]:
    """(import gateway.app, the optional libraries beyond it, those the app had not loaded)."""
    probe = "import sys; import gateway.app; print(*sorted(sys.modules))"
    loaded = set(subprocess.run([sys.executable, "-c", probe], env=base_env(), cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.split())  # fmt: skip
    code = IMPORTS.format(optional="; ".join(f"import {m}" for m in OPTIONAL), loaded=sorted(loaded))
    out = subprocess.run([sys.executable, "-c", code], env=base_env(), cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    return float(out[0]), float(out[1]), out[2:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        boots = []
        for i in range(args.boots):
            work = Path(tmp) / str(i)
            work.mkdir()
            boots.append(boot_s(work))
    spread = f"{min(boots):.2f}-{max(boots):.2f}, {len(boots)} boots"
    print(f"serve -> /healthz: median {statistics.median(boots):.2f} s ({spread})")
    rounds = [import_s() for _ in range(args.rounds)]
    app = statistics.median(r[0] for r in rounds)
    more = statistics.median(r[1] for r in rounds)
    print(f"import gateway.app: median {app:.2f} s; {', '.join(OPTIONAL)} on top: {more:.2f} s "
          f"(not loaded by the app: {' '.join(rounds[0][2]) or 'none'})")  # fmt: skip


if __name__ == "__main__":
    main()
