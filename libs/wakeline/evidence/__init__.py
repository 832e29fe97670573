"""Evidence that leaves the host: Merkle trees over the chain, signed checkpoints, the
signer program, witnesses, inclusion proofs and `verify`. Built on storage and
transport; the gateway serves it, no other service imports it."""
