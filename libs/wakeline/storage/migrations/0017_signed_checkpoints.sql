-- 0017: Ed25519-signed checkpoints (wakeline.signer, issue 16).
--
-- One row per signed statement: the statement's exact bytes (canonical JSON: tenant, its
-- number and the hash of the previous statement, the Merkle root over every session's
-- head, the retention cuts it anchors), the signature over them, and the heads the root
-- was computed from. The private key is never near the database: a row changed here no
-- longer verifies under the public key, and the same statement also lives in the Kafka
-- topic `<prefix>.checkpoints` and the signer's file sink, which verify compares with
-- this table. The old HMAC `checkpoints` (0005) stay as they are.

CREATE TABLE signed_checkpoints (
  id         uuid        PRIMARY KEY,
  tenant     text        NOT NULL CHECK (tenant <> ''),
  number     bigint      NOT NULL CHECK (number > 0),
  created_at timestamptz NOT NULL,
  statement  text        NOT NULL,
  signature  text        NOT NULL,
  -- {"<session_id>": {"seq": <last seq>, "hash": "<hash at that seq>"}, ...}; the
  -- statement signs their Merkle root, so these need no signature of their own.
  heads      jsonb       NOT NULL CHECK (jsonb_typeof(heads) = 'object'),
  -- A tenant's statements form a chain (number n names n-1's hash): one per number.
  UNIQUE (tenant, number)
);
CREATE INDEX signed_checkpoints_heads ON signed_checkpoints USING gin (heads);

SELECT wakeline_append_only('signed_checkpoints');
SELECT wakeline_tenant_scoped('signed_checkpoints');

GRANT SELECT, INSERT ON signed_checkpoints TO wakeline_service;
