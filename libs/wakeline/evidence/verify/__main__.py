"""`python -m wakeline.evidence.verify`: the same as `wakeline verify-direct`."""

from wakeline.evidence.verify.command import main

if __name__ == "__main__":
    raise SystemExit(main())
