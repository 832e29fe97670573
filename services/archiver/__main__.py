"""`wakeline-archiver` (or `python -m wakeline_archiver`): the archiver process (SIGTERM or SIGINT stops it cleanly)."""

from wakeline.runtime.lifecycle import serve
from wakeline_archiver.app import run
from wakeline_archiver.settings import ArchiverSettings


def main() -> None:
    serve(run, ArchiverSettings(), "archiver")


if __name__ == "__main__":
    main()
