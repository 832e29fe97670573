-- 0023: the audit-by-actor index keys (tenant, actor, ts) again (issue 10, storage).
--
-- 0006 made it (tenant, actor, ts, session_id, seq) so that a page in keyset order
-- (ts, session_id, seq) came straight off the index. The two trailing columns cost ~75 of
-- its ~150 bytes per event (session_id is a 36-character id), and they order only rows
-- with the same actor and the same microsecond. Postgres's incremental sort (13+) orders
-- each run of equal ts as the index yields it, so a first page still reads about `limit`
-- entries per month and stops (bench/audit_query: the same buffers read, one small sort
-- node per month, the page's time within a few percent of the wider index's). The planner
-- picks that plan by the statistics: on rows not yet analyzed it may count a busy actor's
-- matches as few and sort them all (tests/integration/test_audit_index.py); autovacuum
-- analyzes a partition at every 10% of its growth.
CREATE INDEX events_tenant_actor_ts ON events (tenant, actor, ts);
DROP INDEX events_audit_actor;
