"""`wakeline verify-direct SID|--all --tenant T` (= `python -m wakeline.evidence.verify`): the
operator's verify, run with the operator's files (the public key, the HMAC key, the anchor
file, the sink) and straight against Postgres and the topic."""

from __future__ import annotations

import argparse
import asyncio
import sys

import asyncpg

from wakeline.evidence.checkpoints import load_key, read_anchor
from wakeline.storage.pg import TenantPool
from wakeline.evidence.proofs import InclusionProof, build_proof
from wakeline.evidence.witnesses import EvidenceSettings, gather, public_key
from wakeline.evidence.verify.reports import TenantReport
from wakeline.evidence.verify.sessions import verify_all, verify_session


class NoPublicKey(Exception):
    """Verify was asked to run without the signed checkpoints and was not told it may."""


async def _run(settings: EvidenceSettings, tenant: str, session_id: str | None,
               proof: bool = False, without_signed: bool = False) -> tuple[TenantReport, InclusionProof | None]:
    # The public key first: without it nothing below could tell a rewritten history from
    # the real one, so its absence is an error, not a quieter check (a host root need only
    # delete the file). Going on without it is a choice said out loud.
    public = public_key(settings)
    if public is None and not (without_signed or settings.verify_without_signed_checkpoints):
        raise NoPublicKey(
            f"no public key to check the signed checkpoints with (WAKELINE_EVIDENCE_PUBLIC_KEY, or the file "
            f"{settings.evidence_public_key_file}): refusing to verify on the hash chains and HMAC checkpoints alone. "
            "Configure the signer's public key (and pin it: WAKELINE_EVIDENCE_KEY_FINGERPRINT), or pass "
            "--without-signed-checkpoints (WAKELINE_VERIFY_WITHOUT_SIGNED_CHECKPOINTS=true) to check without them")
    if public is None:
        print("verify: --without-signed-checkpoints: signed checkpoints, their witnesses and signed retention cuts "
              "NOT checked (a consistent rewrite, a cut tail or a forged retention_log row go unseen)",
              file=sys.stderr)
    elif settings.evidence_key_fingerprint is None:
        print("verify: the public key is not pinned (WAKELINE_EVIDENCE_KEY_FINGERPRINT): whoever can replace "
              f"{settings.evidence_public_key_file} chooses the key checked", file=sys.stderr)
    key = load_key(settings.checkpoint_key_file, create=False)
    if key is None:
        print(f"verify: no key at {settings.checkpoint_key_file}: HMAC checkpoint signatures not checked",
              file=sys.stderr)
    anchored = read_anchor(settings.checkpoint_dir, tenant)
    async with TenantPool(settings.postgres_dsn, min_size=1, max_size=2) as pool:
        evidence = None if public is None else await gather(pool, settings, settings.signer_sink_dir, tenant, public)
        if session_id is None:
            return await verify_all(pool, tenant, key=key, anchored=anchored, evidence=evidence), None
        async with pool.transaction(tenant) as conn:
            report = await verify_session(conn, session_id, key=key, anchored=anchored, evidence=evidence)
    found = build_proof(evidence, session_id) if proof and evidence is not None else None
    return TenantReport(tenant=tenant, ok=report.ok, sessions=(report,), checkpoint_problems=()), found


def main(argv: list[str] | None = None) -> int:
    """One JSON line per session (and, with --all, one for the tenant's checkpoints; with
    --proof, the session's inclusion proof as the last line).

    Exit 0 if all verify, 1 if anything is bad, 2 if the session is unknown, verification
    could not run (no public key without --without-signed-checkpoints, a key that is not
    the pinned one), or --proof found no signed checkpoint naming the session.
    """
    parser = argparse.ArgumentParser(prog="wakeline verify-direct")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("session_id", nargs="?")
    target.add_argument("--all", action="store_true")
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--proof", action="store_true",
                        help="also print the session's head and Merkle path to a signed tenant root")
    parser.add_argument("--without-signed-checkpoints", action="store_true",
                        help="verify even with no public key: chains and HMAC checkpoints only (said on stderr)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.proof and args.all:
        parser.error("--proof is for one session")
    try:
        result, proof = asyncio.run(_run(EvidenceSettings(), args.tenant, None if args.all else args.session_id,
                                         args.proof, args.without_signed_checkpoints))
    except NoPublicKey as exc:
        print(f"verify: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError, asyncpg.PostgresError) as exc:
        print(f"verify: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for report in result.sessions:
        print(report.model_dump_json(), flush=True)
    if args.all:
        print(result.model_dump_json(exclude={"sessions"}), flush=True)
    elif not result.sessions[0].found:
        print(f"verify: no session {args.session_id} in tenant {args.tenant}", file=sys.stderr)
        return 2
    if args.proof:
        if proof is None:
            print(f"verify: no signed checkpoint names {args.session_id} (or no public key): no proof",
                  file=sys.stderr)
            return 2
        print(proof.model_dump_json(), flush=True)
    return 0 if result.ok else 1
