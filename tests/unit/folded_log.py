"""`Log`: a session's drafts sealed and folded in memory, as the brain would, with no I/O."""

import uuid
from datetime import datetime, timedelta, timezone

from wakeline.log.chain import seal
from wakeline.log.fold import apply
from wakeline.log.state import SessionState

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Log:
    def __init__(self):
        self.state, self.events = SessionState(), []

    def append(self, drafts, sid):
        for d in drafts:
            e = seal(d, session_id=sid, tenant="t", seq=self.state.last_seq + 1, prev_hash=self.state.last_hash,
                     ts=T0 + timedelta(seconds=len(self.events)), event_id=str(uuid.uuid4()))
            self.state = apply(self.state, e)
            self.events.append(e)
