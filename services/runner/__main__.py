"""`wakeline-runner` (or `python -m wakeline_runner`): the runner service."""

from wakeline.runtime.lifecycle import serve
from wakeline_runner.app import run
from wakeline_runner.settings import RunnerSettings


def main() -> None:
    serve(run, RunnerSettings(), "runner")


if __name__ == "__main__":
    main()
