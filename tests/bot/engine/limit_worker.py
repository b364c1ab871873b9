"""A worker process that only takes provider permits (`python -m tests.bot.engine.limit_worker`).

Arguments: database URL, `MASSGEN_PROVIDER_LIMITS` text, calls, seconds each call holds its permit,
the lease. It prints `ready`, waits for a line on stdin (the test's go), then prints one line per
call: `<start> <end>` (wall clock: the test's processes share it). With 0 calls it takes one
permit, prints `held` and holds it until it is killed.
"""

from __future__ import annotations

import asyncio
import sys
import time

from approvals.sql import make_engine
from bot.engine.limits import ProviderLimits
from bot.settings import parse_provider_limits

PROVIDER = "openai"


async def main(url: str, limits: str, calls: int, hold: float, lease: float) -> None:
    database = make_engine(url)
    admission = ProviderLimits(parse_provider_limits(limits), database, poll=0.02, holder="w", lease=lease)
    await admission.register(update=True)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # the test's go: every worker starts at once
    if calls == 0:
        async with admission.admit(PROVIDER, within=60):
            print("held", flush=True)
            await asyncio.sleep(3600)  # until killed
    for _ in range(calls):
        async with admission.admit(PROVIDER, within=60):
            start = time.time()
            await asyncio.sleep(hold)  # the provider's latency
            end = time.time()
        print(f"{start} {end}", flush=True)
    await database.dispose()


if __name__ == "__main__":
    url, limits, calls, hold, lease = sys.argv[1:6]
    asyncio.run(main(url, limits, int(calls), float(hold), float(lease)))
