"""`wakeline-brain` (or `python -m wakeline_brain`): the brain process."""

from wakeline.runtime.lifecycle import serve
from wakeline_brain.app import run
from wakeline_brain.settings import BrainSettings


def main() -> None:
    serve(run, BrainSettings(), "brain")


if __name__ == "__main__":
    main()
