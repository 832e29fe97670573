"""Finding dead brains in seconds, not at the group's session timeout (issue 37).

A brain killed with kill -9 stays a member of the Kafka group until its session timeout
(6 s) runs out, and as a static member it is kept through every rebalance until then, its
partitions assigned to it and owned by nobody alive; a replacement under a new name joins,
and the round still hands the dead member its share. With brains dying every few seconds
those waits chained into 20-30 s without an owner (docs/reliability.md, runs 26-30).

Each brain holds a lease, a Postgres session of its own (wakeline.storage.group_leases), and
checks every `peer_check_s` for leases whose session has ended; one gone `peer_lapse_s` or
longer is a dead brain, and the checking brain removes it from the group by its instance id
(wakeline.transport.group_removal). The wait lets a brain restarted under its own name
(a supervisor, a StatefulSet pod) take its lease back and keep its partitions, with no
rebalance at all. Only speed rests on this: a brain removed while alive joins again, and
one writer per partition is the transactional fence's work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from wakeline.storage.group_leases import GroupLease
from wakeline_brain.metrics import DEAD_BRAINS_REMOVED

log = logging.getLogger(__name__)

Remove = Callable[[Sequence[str]], Awaitable[dict[str, str]]]


async def watch_peers(lease: GroupLease, remove: Remove, *, check_s: float, lapse_s: float,
                      retry_s: float = 0.5) -> None:
    """Runs until cancelled: keeps `lease` held (taking it again after a broken connection)
    and removes the members whose lease lapsed. `lease` is taken already: a brain takes it
    before it joins the group, so no check can find it a member without one."""
    while True:
        try:
            if not lease.held:
                await lease.take()
                log.info("lease of %s taken again", lease.instance_id)
            dead = await lease.lapsed(lapse_s)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - Postgres away: taken again when it is back
            log.warning("brain lease of %s: %s: %s; again in %.1f s", lease.instance_id, type(exc).__name__, exc,
                        retry_s)
            await lease.close()
            await asyncio.sleep(retry_s)
            continue
        if dead:
            try:
                answers = await remove(dead)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                # Their rows are gone, so no brain tries again: these fall back to the group's
                # own detection, the session timeout, as before leases.
                log.warning("removing dead brains %s from %s failed (%s: %s)", ", ".join(dead), lease.group_id,
                            type(exc).__name__, exc)
            else:
                for name in dead:
                    DEAD_BRAINS_REMOVED.labels(answer=answers.get(name, "none")).inc()
                log.warning("removed dead brains from %s (their Postgres sessions ended): %s", lease.group_id,
                            ", ".join(f"{i} {answers.get(i, '?')}" for i in dead))
        await asyncio.sleep(check_s)
