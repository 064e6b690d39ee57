"""Dashboard page times over a large ledger, against a plain `SELECT count(*)` baseline.

    .venv/bin/python bench/dashboard.py [--rows 1000000] [--db PATH] [--repeat 5] [--screenshots DIR]

Inserts synthetic ledger rows (90 days, a dozen teams with skewed spend, direct models, a
cascade, exact and semantic cache hits, a few errors) into a fresh SQLite database, then
signs in to the dashboard and times every page through the app (ASGI, in-process: SQL,
roll-up and rendering; no network). The first load rolls every row older than an hour into
the daily roll-up ("cold"); later loads read the roll-up plus the last hour live ("warm", the
median of --repeat). The
baseline is `SELECT count(*) FROM ledger` on the same database, the cheapest question one
can ask of a million rows. With --screenshots, serves the same database with `costgate
serve` and saves each page as PNG through Debian's chromium (the docs' screenshots).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import yaml
from sqlalchemy import delete

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from gateway.app import create_app  # noqa: E402
from gateway.config.settings import Settings  # noqa: E402
from gateway.dashboard.rollup import LIVE_INDEX, ledger_daily, ledger_rollup  # noqa: E402
from gateway.storage.db import create_engine, create_tables  # noqa: E402

ADMIN_KEY = "sk-cg-admin-bench-0123456789"
TEAMS = [
    "search",
    "support-bot",
    "growth",
    "data-science",
    "mobile",
    "billing",
    "legal-review",
    "marketing",
    "infra",
    "recsys",
    "sales-assist",
    "docs-qa",
]
PICO = 10**12
PAGES = [
    "/admin/ui",
    "/admin/ui/spend",
    "/admin/ui/savings",
    "/admin/ui/requests",
    "/admin/ui/keys",
    "/admin/ui/budgets",
    "/admin/ui?days=90",
    "/admin/ui/spend?days=7",
]
# (requested, served, input $/Mtok, output $/Mtok)
ROUTES = [
    ("small", "small", 0.15, 0.6),
    ("large", "large", 2.5, 10.0),
    ("auto", "small", 0.15, 0.6),
    ("auto", "large", 2.5, 10.0),
    ("gpt-4o-mini", "gpt-4o-mini", 0.15, 0.6),
]
ROUTE_WEIGHTS = [40, 15, 25, 8, 12]


def config(db: Path) -> dict:
    def model(name: str) -> dict:
        return {
            "name": name,
            "provider": "openai",
            "api_base": "http://127.0.0.1:9/v1",
            "api_key": "unused",
            "price": {"input_per_mtok": "1", "output_per_mtok": "1"},
        }

    return {
        "admin_key": ADMIN_KEY,
        "database_url": f"sqlite:///{db}",
        "data_dir": str(db.parent / "data"),
        "models": [model("small"), model("large"), model("gpt-4o-mini")],
        "cascades": [{"name": "auto", "tiers": ["small", "large"]}],
    }


def seed(db: Path, rows: int) -> float:
    """Create the tables and insert `rows` synthetic ledger rows; returns seconds taken."""
    started = time.perf_counter()
    engine = create_engine(f"sqlite:///{db}")
    asyncio.run(create_tables(engine))
    asyncio.run(engine.dispose())
    rng = random.Random(7)
    now = time.time()
    team_ids = [f"team_{i:04d}" for i in range(len(TEAMS))]
    weights = [1 / (i + 1) ** 1.2 for i in range(len(TEAMS))]  # a few teams spend most: shameback
    conn = sqlite3.connect(db)
    conn.executemany(
        "INSERT INTO teams (id, name, created_at) VALUES (?, ?, ?)",
        [(t, n, now - 100 * 86400) for t, n in zip(team_ids, TEAMS)],
    )
    conn.executemany(
        "INSERT INTO api_keys (id, team_id, name, key_hash, key_prefix, plan, tags, created_at) "
        "VALUES (?, ?, ?, ?, ?, 'pro', '[]', ?)",
        [
            (f"key_{i:04d}", t, f"{n}-app", f"{i:064x}", "sk-cg-xxxx", now - 100 * 86400)
            for i, (t, n) in enumerate(zip(team_ids, TEAMS))
        ],
    )
    sql = (
        "INSERT INTO ledger (request_id, created_at, day, team_id, key_id, user, tags, trace_id, endpoint, "
        "requested_model, served_model, provider, prompt_tokens, completion_tokens, cached_tokens, cost_pusd, "
        "saved_pusd, latency_ms, ttft_ms, cache_status, status, error) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 'chat.completions', ?, ?, 'openai', ?, ?, 0, ?, ?, ?, NULL, ?, ?, ?)"
    )
    batch = []
    for n in range(rows):
        created = now - rng.random() ** 1.3 * 90 * 86400  # more traffic lately
        team = rng.choices(range(len(TEAMS)), weights)[0]
        requested, served, pin, pout = rng.choices(ROUTES, ROUTE_WEIGHTS)[0]
        pt, ct = rng.randint(50, 3000), rng.randint(10, 800)
        cost = pt * round(pin * 10**6) + ct * round(pout * 10**6)  # pico-dollars: $/Mtok x 1e12 / 1e6 per token
        cache, saved, status = "miss", 0, 200
        r = rng.random()
        if r < 0.18:
            cache, saved, cost = "exact", cost, 0
        elif r < 0.23:
            cache, saved, cost = "semantic", cost, 0
        elif r < 0.245:
            status, cost, pt, ct = 502, 0, 0, 0
        day = datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%d")
        batch.append(
            (
                f"req_{n:08x}",
                created,
                day,
                team_ids[team],
                f"key_{team:04d}",
                f"user{rng.randint(1, 500)}",
                ",batch," if rng.random() < 0.1 else None,
                requested,
                served,
                pt,
                ct,
                cost,
                saved,
                rng.uniform(80, 4000),
                cache,
                status,
                "upstream 502" if status >= 400 else None,
            )
        )
        if len(batch) == 50_000:
            conn.executemany(sql, batch)
            batch.clear()
    conn.executemany(sql, batch)
    conn.commit()
    conn.close()
    return time.perf_counter() - started


async def timings(db: Path, repeat: int) -> None:
    app = create_app(Settings.model_validate(config(db)))
    async with app.router.lifespan_context(app):
        engine = app.state.gateway.engine
        async with engine.begin() as conn:  # measure the roll-up from scratch; index a reused database
            await conn.run_sync(lambda sync: LIVE_INDEX.create(sync, checkfirst=True))
            await conn.execute(delete(ledger_daily))
            await conn.execute(delete(ledger_rollup))
        baseline = []
        for _ in range(repeat):
            started = time.perf_counter()
            async with engine.connect() as conn:
                await conn.exec_driver_sql("SELECT count(*) FROM ledger")
            baseline.append(time.perf_counter() - started)
        base = statistics.median(baseline)
        print(f"baseline SELECT count(*) FROM ledger: {base * 1000:.1f} ms (median of {repeat})")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
            assert (await client.post("/admin/ui/login", data={"admin_key": ADMIN_KEY})).status_code == 303
            print(f"{'page':28} {'cold ms':>9} {'warm ms':>9} {'warm/baseline':>14}")
            for page in PAGES:
                started = time.perf_counter()
                response = await client.get(page)
                cold = time.perf_counter() - started
                assert response.status_code == 200, (page, response.status_code)
                warm = []
                for _ in range(repeat):
                    started = time.perf_counter()
                    await client.get(page)
                    warm.append(time.perf_counter() - started)
                w = statistics.median(warm)
                print(f"{page:28} {cold * 1000:9.1f} {w * 1000:9.1f} {w / base:13.1f}x")


def screenshots(db: Path, target: Path) -> None:
    from playwright.sync_api import sync_playwright

    cfg = db.parent / "bench-config.yaml"
    cfg.write_text(yaml.safe_dump(config(db)))
    port = 4717
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "serve",
            "--config",
            str(cfg),
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(url + "/healthz")
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        budgets = [
            ("team", "search", "400", "monthly"),
            ("team", "support-bot", "120", "monthly"),
            ("team", "growth", "60", "monthly"),
            ("tag", "batch", "1.50", "daily"),
        ]
        for scope, subject, amount, period in budgets:
            httpx.put(
                url + "/admin/budgets",
                headers={"authorization": f"Bearer {ADMIN_KEY}"},
                json={"scope": scope, "id": subject, "amount_usd": amount, "period": period},
                timeout=120,
            )
        target.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                ],
            )
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(120_000)
            page.goto(url + "/admin/ui/login")
            page.screenshot(path=str(target / "login.png"))
            page.fill("input[name=admin_key]", ADMIN_KEY)
            page.click("button:has-text('Sign in')")
            page.wait_for_url(url + "/admin/ui")
            for name, path in [
                ("overview", "/admin/ui"),
                ("spend", "/admin/ui/spend"),
                ("budgets", "/admin/ui/budgets"),
                ("savings", "/admin/ui/savings"),
                ("requests", "/admin/ui/requests"),
            ]:
                page.goto(url + path)
                page.screenshot(path=str(target / f"{name}.png"), full_page=name != "requests")
            page.goto(url + "/admin/ui/keys")
            page.select_option("select[name=team]", "search")
            page.fill("form[action='/admin/ui/keys'] input[name=name]", "search-api")
            page.click("button:has-text('Create key')")
            page.screenshot(path=str(target / "keys.png"), full_page=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(20)
    print("screenshots in", target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path, help="reuse this database when it exists (else seed it)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--screenshots", type=Path)
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="costgate-bench-")) / "dashboard.db"
    if not db.exists():
        print(f"seeding {args.rows:,} ledger rows into {db} ... {seed(db, args.rows):.1f} s")
    asyncio.run(timings(db, args.repeat))
    if args.screenshots:
        screenshots(db, args.screenshots)


if __name__ == "__main__":
    main()
