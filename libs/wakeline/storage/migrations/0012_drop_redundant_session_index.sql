-- Storage per archived event (issue 10). events_tenant_session_seq (tenant, session_id,
-- seq) duplicated the primary key (session_id, seq, ts) for every read it served: a
-- session id names one session across all tenants (0009, event_keys' primary key), so
-- a read by session finds the same rows through the primary key, in seq order, and RLS's
-- tenant test filters those few rows. It cost ~130 bytes per event, a tenth of the total.
-- No audit query uses it (their plans use events_audit_actor, events_tenant_ts,
-- events_tenant_type_ts, events_tenant_tool_ts).
DROP INDEX events_tenant_session_seq;
