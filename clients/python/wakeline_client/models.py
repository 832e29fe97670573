# ruff: noqa: E501 (generated: descriptions and enums stay on one line)
"""The gateway's schemas as pydantic models. GENERATED from clients/openapi.json by
clients/python/codegen/models.py: do not edit; regenerate.

Every model keeps fields the server adds later (`extra="allow"`), so a newer gateway does not
break an older client. `Event` is any event of a session's log, told apart by `type`.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class AccessLogEntryPublic(Model):
    at: datetime
    id: int
    key_id: str
    method: str
    path: str
    principal: str
    query: dict[str, Any]
    role: str


class AccessLogPublic(Model):
    count: int
    data: list[AccessLogEntryPublic]
    next_after: int | None


class ApprovalDenied(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: ApprovalDeniedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['approval_denied'] = 'approval_denied'


class ApprovalDeniedPayload(Model):
    reason: str | None = None
    tool_call_id: str


class ApprovalGranted(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: ApprovalGrantedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['approval_granted'] = 'approval_granted'


class ApprovalGrantedPayload(Model):
    reason: str | None = None
    tool_call_id: str


class ApprovalRequested(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: ApprovalRequestedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['approval_requested'] = 'approval_requested'


class ApprovalRequestedPayload(Model):
    reason: str | None = None
    tool_call_id: str


class AuditEventsPublic(Model):
    count: int
    data: list[Event]
    next_cursor: str | None


class AuditSessionPublic(Model):
    actors: list[str]
    deleted_at: datetime | None
    events: int
    first_ts: datetime
    fork_seq: int | None = None
    last_ts: datetime
    owner: str | None
    parent_session_id: str | None = None
    session_id: str
    title: str | None
    types: list[str]


class AuditSessionsPublic(Model):
    count: int
    data: list[AuditSessionPublic]
    truncated: bool


class Budget(Model):
    "Caps on spending; a cap left out (None) does not bind. Reaching a cap is spending it\nall: the next call would go over."

    input_tokens: int | None = None
    output_tokens: int | None = None
    usd: float | None = None


class BudgetChanged(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: BudgetChangedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['budget_changed'] = 'budget_changed'


class BudgetChangedPayload(Model):
    "The owner set the budget in force from here (a message that carried one, sealed before\nthat message). `budget` is whole: the caps the message named over those of `previous`.\n`price`: the price the session's calls are figured at from here, the table's when it\nchanged (None: the table knows none, and the price bound before stays); calls made before\nkeep the price they were charged at."

    budget: Budget
    previous: Budget | None = None
    price: ModelPrice | None = None


class BudgetPublic(Model):
    "The budget in force, what the session's own model calls spent against it, and the caps\nthat spending has reached (any: the session stops, or stopped, before its next model call)."

    budget: Budget
    reached: list[Literal['input_tokens', 'output_tokens', 'usd']]
    spent: Spent


class CommandPublic(Model):
    "What became of a command: `done` once the brain recorded its outcome event."

    command_id: str
    note: str | None = None
    outcome: str | None = None
    queued: bool | None = None
    seq: int | None = None
    session: SessionPublic | None = None
    session_id: str
    status: Literal['done', 'pending']


class CompactionCostPublic(Model):
    covered_from_seq: int
    covered_to_seq: int
    resets_prompt_cache: bool = False
    seq: int
    tokens_after: int
    tokens_after_source: Literal['estimate', 'count_tokens'] = 'estimate'
    tokens_before: int
    tokens_before_source: Literal['estimate', 'count_tokens'] = 'estimate'


class CompactionPayload(Model):
    covered_from_seq: int
    covered_to_seq: int
    memory: str | None = None
    memory_file: str | None = None
    resets_prompt_cache: bool = False
    summary: str
    summary_model: str | None = None
    tokens_after: int
    tokens_after_source: Literal['estimate', 'count_tokens'] = 'estimate'
    tokens_before: int
    tokens_before_source: Literal['estimate', 'count_tokens'] = 'estimate'
    usage: Usage | None = None


class ContextCompacted(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: CompactionPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['compaction'] = 'compaction'


class CostPublic(Model):
    budget: BudgetPublic | None = None
    cache_hit_rate: float = 0.0
    cache_saved_input_tokens: float = 0.0
    compactions: list[CompactionCostPublic]
    fork_seq: int | None = None
    inherited_from: str | None = None
    model_calls: int
    model_wall_s: float
    models: list[ModelCostPublic]
    session_id: str
    tokens: dict[str, int]
    tool_calls: int
    tool_errors: int
    tool_wall_s: float
    turns: int
    upto_seq: int = 0
    usd: float | None = None


class DeletedPayload(Model):
    by: str
    reason: str | None = None


class DenialCreate(Model):
    reason: str | None = None


class DivergencePublic(Model):
    now: str
    recorded: str
    seq: int


class Envelope(Model):
    signature: str
    statement: str


class EventsPublic(Model):
    count: int
    data: list[Event]
    session_id: str


class FieldProblem(Model):
    problem: str
    where: str


class FileReferencePayload(Model):
    path: str
    tool_call_id: str | None = None


class FileReferenced(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: FileReferencePayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['file_reference'] = 'file_reference'


class ForkCreate(Model):
    at_seq: int
    message: str
    title: str | None = None
    wait: bool = True


class ForkedPayload(Model):
    "Opens a fork: its history is the parent's events 1..`fork_seq`, read from the parent\n(never copied); this event sits at `fork_seq + 1` and links to `parent_hash`, the\nparent's hash at `fork_seq`, so the fork's chain continues the parent's."

    config: SessionConfig
    fork_seq: int
    owner: str
    parent_hash: str
    parent_session_id: str
    price: ModelPrice | None = None
    title: str | None = None


class HandbackPayload(Model):
    by: str


class HandsHandedBack(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: HandbackPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['handback'] = 'handback'


class HandsTakenOver(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: TakeoverPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['takeover'] = 'takeover'


class Head(Model):
    hash: str
    seq: int


class HealthPublic(Model):
    ok: bool
    postgres: str


class InclusionProof(Model):
    checkpoint: Envelope
    head: Head
    path: list[Step]
    session_id: str


class InputRejected(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: InputRejectedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['input_rejected'] = 'input_rejected'


class InputRejectedPayload(Model):
    budget_change: BudgetChangedPayload | None = None
    code: Literal['conflict', 'wrong_tenant', 'deleted', 'already_exists', 'already_ended', 'not_awaiting_approval', 'not_pending', 'unknown_session', 'malformed', 'too_large', 'internal_error', 'budget_exhausted', 'quota_exceeded'] | None = None
    command_id: str
    expected_seq: int | None = None
    reason: str


class MePublic(Model):
    "Who the presented key is, and which actions (auth.PERMISSIONS) its role may take."

    actions: list[str]
    actor: str
    key_id: str
    principal: str
    role: str
    tenant: str


class MessageCreate(Model):
    budget: Budget | None = None
    expected_seq: int | None = None
    text: str


class MessageQueued(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: MessageQueuedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['message_queued'] = 'message_queued'


class MessageQueuedPayload(Model):
    "A message that arrived during a running turn; a `user_message` takes it when the turn ends."

    command_id: str
    text: str


class ModelCostPublic(Model):
    calls: int
    model: str
    tokens: dict[str, int]


class ModelPrice(Model):
    "One model's price in US dollars per million tokens. The cache prices default to the\nAPI's shares of the input price: 1.25x for a cache write, 0.1x for a cache read."

    cache_read_usd_per_mtok: float
    cache_write_usd_per_mtok: float
    input_usd_per_mtok: float
    output_usd_per_mtok: float


class ModelResponded(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: ModelTurnPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['model_turn'] = 'model_turn'


class ModelTurnPayload(Model):
    blocks: list[dict[str, Any]] = Field(default_factory=lambda: [])
    reasoning: list[str] = Field(default_factory=lambda: [])
    stop_reason: str = 'end_turn'
    text: str = ''
    tool_call_ids: list[str] = Field(default_factory=lambda: [])
    usage: Usage = Field(default_factory=lambda: {'input_tokens': 0, 'output_tokens': 0})


class ModelUnavailable(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: ModelUnavailablePayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['model_unavailable'] = 'model_unavailable'


class ModelUnavailablePayload(Model):
    "The model call failed after the adapter's retries (overload, rate limit, a cut\nconnection): the turn is parked `waiting_model`, not ended. The brain calls again after\n`retry_in_s`, on a wake, or when the session is woken by a new input."

    attempt: int
    error: str
    retry_in_s: float


class PrefixReport(Model):
    "A fork's inherited history, checked where it lives: in its parent, up to the fork point."

    events: int
    fork_seq: int
    ok: bool
    parent: Report
    parent_hash: str
    parent_session_id: str
    retained_out: int


class Problem(Model):
    reason: str
    seq: int | None


class ProblemDetails(Model):
    "An error (RFC 9457). Programs branch on `code`; people read `detail`."

    code: Literal['unauthorized', 'forbidden', 'not_found', 'method_not_allowed', 'invalid_request', 'idempotency_key_reused', 'too_large', 'not_implemented', 'unavailable', 'corrupt_event', 'server_error', 'unknown_seq', 'fork_inside_tool_call', 'prefix_unavailable', 'tool_call_already_answered', 'unknown_tool_call', 'quota_exceeded', 'above_ceiling', 'unpriced_model', 'conflict', 'wrong_tenant', 'deleted', 'already_exists', 'already_ended', 'not_awaiting_approval', 'not_pending', 'unknown_session', 'malformed', 'internal_error', 'budget_exhausted']
    command_id: str | None = None
    current_seq: int | None = None
    detail: str
    errors: list[FieldProblem] | None = None
    expected_seq: int | None = None
    limit: int | None = None
    limit_bytes: int | None = None
    quota: str | None = None
    seq: int | None = None
    session_id: str | None = None
    size_bytes: int | None = None
    status: int
    title: str
    type: str


class ProofPublic(Model):
    "A session's inclusion proof, or why there is none yet (`proof` null, `reason` says)."

    proof: InclusionProof | None
    reason: str | None = None
    session_id: str


class QuotaChangePublic(Model):
    new: QuotaValues
    old: QuotaValues | None
    set_at: datetime
    set_by: str


class QuotaValues(Model):
    commands_per_second: int | None = None
    running_sessions: int | None = None
    sessions_per_minute: int | None = None
    tokens_per_day: int | None = None
    tool_calls_in_flight: int | None = None


class QuotasPublic(Model):
    ceilings: QuotaValues
    defaults: QuotaValues
    effective: QuotaValues
    enforced: list[Literal['running_sessions', 'sessions_per_minute', 'commands_per_second', 'tool_calls_in_flight', 'tokens_per_day']]
    history: list[QuotaChangePublic]
    own: QuotaValues
    set_at: datetime | None
    set_by: str | None
    tenant: str


class QuotasSet(Model):
    "The tenant's quotas, all of them: one left out or null falls back to the gateway's default."

    commands_per_second: int | None = None
    running_sessions: int | None = None
    sessions_per_minute: int | None = None
    tokens_per_day: int | None = None
    tool_calls_in_flight: int | None = None


class ReplayCheckPublic(Model):
    clean: bool
    divergence: DivergencePublic | None = None
    events: int


class ReplayPublic(Model):
    check: ReplayCheckPublic | None = None
    count: int
    data: list[ReplayStepPublic]
    session_id: str


class ReplayStepPublic(Model):
    seq: int
    state: dict[str, Any]
    type: str


class Report(Model):
    checkpoint_id: str | None
    events: int
    evidence_checked: bool = False
    first_bad_seq: int | None
    found: bool
    last_seq: int | None
    ok: bool
    prefix: PrefixReport | None = None
    problems: list[Problem]
    reason: str | None
    retained_out: int = 0
    session_id: str
    signatures_checked: bool
    signed_checkpoint: int | None = None
    witnesses_checked: list[str] = Field(default_factory=lambda: [])


class RetentionChangePublic(Model):
    keep_days: float
    set_at: datetime
    set_by: str | None


class RetentionPublic(Model):
    history: list[RetentionChangePublic]
    keep_days: float | None
    note: str = 'Retention drops whole months, and only once every tenant with events in that month is past its window; run by the operator as the maintenance role (`wakeline retention apply`).'
    set_at: datetime | None
    set_by: str | None


class RetentionSet(Model):
    keep_days: int


class SessionConfig(Model):
    "Bound once by `session_created`; immutable for the session's lifetime."

    budget: Budget | None = None
    client_tool_timeout_s: float | None = None
    context_window: int = 200000
    max_tokens: int = 4096
    max_turns: int = 20
    memory_file: str | None = None
    model: str = 'scripted:default'
    require_approval: list[str] = Field(default_factory=lambda: [])
    system_prompt: str = 'You are a careful agent. Use the tools to do the task, then report.'
    thinking_budget: int | None = None
    tool_timeout_s: float = 30.0
    tools: list[str | ToolDefinition] = Field(default_factory=lambda: ['bash', 'read_file', 'write_file', 'list_files'])


class SessionCostBrief(Model):
    "What a listed session cost so far, from its own model calls, turns and summaries (a\nfork's inherited prefix is its parent's): `GET /v1/sessions/{id}/cost` has the whole account."

    input_tokens: int = 0
    model_calls: int = 0
    output_tokens: int = 0


class SessionCreate(Model):
    config: SessionConfig | None = None
    message: str | None = None
    title: str | None = None
    wait: bool = True


class SessionCreated(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: SessionCreatedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['session_created'] = 'session_created'


class SessionCreatedPayload(Model):
    config: SessionConfig
    fork_seq: int | None = None
    owner: str
    parent_session_id: str | None = None
    price: ModelPrice | None = None
    title: str | None = None


class SessionDeleted(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: DeletedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['deleted'] = 'deleted'


class SessionEnded(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: SessionEndedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['session_ended'] = 'session_ended'


class SessionEndedPayload(Model):
    budget: Budget | None = None
    detail: str | None = None
    reason: Literal['completed', 'max_turns', 'error', 'interrupted', 'cancelled', 'budget', 'quota']
    spent: Spent | None = None


class SessionForked(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: ForkedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['forked'] = 'forked'


class SessionListedPublic(Model):
    cost: SessionCostBrief = Field(default_factory=lambda: {'input_tokens': 0, 'model_calls': 0, 'output_tokens': 0})
    created_at: datetime
    ended_reason: Literal['completed', 'max_turns', 'error', 'interrupted', 'cancelled', 'budget', 'quota'] | str | None = None
    fork_seq: int | None = None
    last_seq: int
    model: str | None
    owner: str
    parent_session_id: str | None = None
    pending_client_calls: list[str] | None = None
    session_id: str
    status: str
    title: str | None
    updated_at: datetime


class SessionPublic(Model):
    created_at: datetime
    ended_reason: Literal['completed', 'max_turns', 'error', 'interrupted', 'cancelled', 'budget', 'quota'] | str | None = None
    fork_seq: int | None = None
    last_seq: int
    model: str | None
    owner: str
    parent_session_id: str | None = None
    pending_client_calls: list[str] | None = None
    session_id: str
    status: str
    title: str | None
    updated_at: datetime


class SessionsPublic(Model):
    count: int
    data: list[SessionListedPublic]
    next_cursor: str | None


class SnapshotPayload(Model):
    "The fold of every event before this one, as `wakeline.log.state_json` renders it, and its\nhash: a wake may start from it instead of the first event. Verify checks it against the\nfold of its prefix (`wakeline.log.snapshots`)."

    format: str
    state: dict[str, Any]
    state_hash: str


class SnapshotTaken(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: SnapshotPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['snapshot'] = 'snapshot'


class Spent(Model):
    "What model calls used: input tokens (uncached, written to the prompt cache and read from\nit), output tokens, and their price in US dollars (None: a model with no price made some\nof them, so the dollars cannot be counted)."

    input_tokens: int = 0
    output_tokens: int = 0
    usd: float | None = 0.0


class Step(Model):
    hash: str
    side: Literal['left', 'right']


class StepPublic(Model):
    actor: str
    detail: dict[str, Any] = Field(default_factory=lambda: {})
    kind: Literal['message', 'turn', 'tool_call', 'approval', 'compaction', 'forked', 'ended']
    seq: int
    summary: str


class TakeoverPayload(Model):
    by: str


class TenantCostPublic(Model):
    calls: int
    data: list[TenantCostRowPublic]
    since: datetime
    tokens: dict[str, int]
    until: datetime


class TenantCostRowPublic(Model):
    actor: str
    calls: int
    day: date
    model: str
    tokens: dict[str, int]


class TenantReport(Model):
    checkpoint_problems: list[Problem]
    ok: bool
    sessions: list[Report]
    tenant: str


class TitleGenerated(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: TitlePayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['title_generated'] = 'title_generated'


class TitlePayload(Model):
    title: str


class ToolCallPayload(Model):
    answered_by: Literal['client'] | None = None
    input: dict[str, Any]
    name: str
    tool_call_id: str


class ToolCallRequested(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: ToolCallPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['tool_call'] = 'tool_call'


class ToolDefinition(Model):
    "One declared tool, exactly as the model is shown it (the Messages API tool shape)."

    description: str = ''
    input_schema: dict[str, Any] | None = None
    name: str


class ToolResultCreate(Model):
    is_error: bool = False
    output: str


class ToolResultPayload(Model):
    answered_by: Literal['client'] | None = None
    duration_ms: int | None = None
    error_kind: str | None = None
    is_error: bool = False
    name: str
    output: str
    tool_call_id: str


class ToolResultReceived(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: ToolResultPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['tool_result'] = 'tool_result'


class TreeNodePublic(Model):
    fork_seq: int | None = None
    forks: list[TreeNodePublic] = Field(default_factory=lambda: [])
    last_seq: int
    owner: str
    parent_session_id: str | None = None
    session_id: str
    status: str
    steps: list[StepPublic]
    title: str | None


class TurnEnded(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: TurnEndedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['turn_ended'] = 'turn_ended'


class TurnEndedPayload(Model):
    stop_reason: str = 'end_turn'
    turn: int


class TurnQueued(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: TurnQueuedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['turn_queued'] = 'turn_queued'


class TurnQueuedPayload(Model):
    "The turn waits for one of its tenant's running-session slots (issue 34): the tenant had\n`running` sessions in a turn against its quota of `limit`. The session is `queued` until a\nslot is granted to it, in arrival order across the tenant's sessions, and then records\n`turn_started` as any turn does. What Postgres answered the brain, like a model reply: the\nreplay check takes it as recorded."

    limit: int
    running: int
    turn: int


class TurnStarted(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: TurnStartedPayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['turn_started'] = 'turn_started'


class TurnStartedPayload(Model):
    turn: int


class Usage(Model):
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class UserMessagePayload(Model):
    queued: bool = False
    text: str


class UserMessageReceived(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: UserMessagePayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['user_message'] = 'user_message'


class Woke(Model):
    actor: str
    causation_id: str | None = None
    event_id: str
    hash: str
    payload: WokePayload
    prev_hash: str
    seq: int
    session_id: str
    tenant: str
    trust: Literal['instruction', 'data']
    ts: datetime
    type: Literal['woke'] = 'woke'


class WokePayload(Model):
    from_seq: int
    host: str
    reason: str


Event = Annotated[Union[SessionCreated, UserMessageReceived, MessageQueued, TurnStarted, ModelResponded, ToolCallRequested, ApprovalRequested, ApprovalGranted, ApprovalDenied, ToolResultReceived, ContextCompacted, TurnEnded, SessionEnded, Woke, HandsTakenOver, HandsHandedBack, TitleGenerated, FileReferenced, InputRejected, SessionDeleted, SnapshotTaken, SessionForked, ModelUnavailable, BudgetChanged, TurnQueued], Field(discriminator="type")]


for _model in list(globals().values()):
    if isinstance(_model, type) and issubclass(_model, Model) and _model is not Model:
        _model.model_rebuild()
