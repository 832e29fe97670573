from wakeline.lifecycle import serve
from wakeline_brain.app import run
from wakeline_brain.settings import BrainSettings

if __name__ == "__main__":
    serve(run, BrainSettings(), "brain")
