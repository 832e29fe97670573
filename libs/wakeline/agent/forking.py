"""Opening a fork: `fork_drafts(prefix_state, prefix, command)`. Pure.

A `create_session` with `fork_of` makes a session whose history is its parent's events
1..N (the brain reads them from the archive: `SessionLoader.prefix`). Its own log starts
at N + 1 with a `forked` event linked to the parent's hash at N, then the fork's message;
from there it runs like a woken session: `next_step` starts a turn on the rebuilt
conversation, and the tool results the prefix holds are part of it, never run again. Its
budget is its config's (the parent's first one), against its own spend from zero.
A fork the gateway would have refused (a seq past the parent's log, a hash the parent
does not hold there, a tool call in flight, another tenant's parent) is refused here as
well, for a command that did not come through it: `ForkRefused`, dead-lettered.
"""

from __future__ import annotations

from collections.abc import Sequence

from wakeline.contract import commands as c
from wakeline.contract import events as e
from wakeline.contract.prices import DEFAULT_TABLE, PriceTable
from wakeline.log.chain import Draft
from wakeline.storage.lineage import unfinished_calls
from wakeline.log.state import SessionState


class ForkRefused(ValueError):
    """The command names no point of its parent's log a fork can start from."""


def fork_drafts(prefix_state: SessionState, prefix: Sequence[e.Event], cmd: c.CreateSession,
                prices: PriceTable = DEFAULT_TABLE) -> list[Draft]:
    """`prices`: where a budget the fork inherits binds its price from, as a new session's does."""
    origin = cmd.fork_of
    if origin is None:
        raise ForkRefused("not a fork")
    if prefix_state.tenant != cmd.tenant or prefix_state.last_seq != origin.seq:
        raise ForkRefused(f"session {origin.session_id} of tenant {cmd.tenant} has no seq {origin.seq}")
    if origin.hash is not None and origin.hash != prefix_state.last_hash:
        raise ForkRefused(f"seq {origin.seq} of {origin.session_id} has hash {prefix_state.last_hash}, "
                          f"not {origin.hash}")
    calls = unfinished_calls(prefix)
    if calls:
        raise ForkRefused(f"seq {origin.seq} is inside unfinished tool call(s) {', '.join(calls)}")
    config = prefix_state.config
    price = prices.price_for(config.model) if config.budget is not None else None
    forked = e.ForkedPayload(parent_session_id=origin.session_id, fork_seq=origin.seq,
                             parent_hash=prefix_state.last_hash, config=config, owner=cmd.actor,
                             title=cmd.title or prefix_state.title, price=price)
    drafts = [Draft(payload=forked, actor=cmd.actor, trust="instruction", causation_id=cmd.command_id)]
    if cmd.message:
        drafts.append(Draft(payload=e.UserMessagePayload(text=cmd.message), actor=cmd.actor, trust="instruction",
                            causation_id=cmd.command_id))
    return drafts
