"""The architecture picture is drawn from its text source (docs/architecture.picture, by
docs/picture.py): the committed SVG is exactly what the source draws, so the two never drift,
and it is a well-formed SVG document the handbook's pages show."""

from __future__ import annotations

import importlib.util
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SVG = "{http://www.w3.org/2000/svg}"


def picture_module():
    """docs/picture.py is a script beside the docs, not a package: loaded from its path."""
    spec = importlib.util.spec_from_file_location("docs_picture", DOCS / "picture.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_committed_svg_is_what_the_source_draws():
    drawn = picture_module().render((DOCS / "architecture.picture").read_text(encoding="utf-8"))
    assert (DOCS / "architecture.svg").read_text(encoding="utf-8") == drawn, \
        "docs/architecture.svg is stale: run python docs/picture.py"


def test_the_svg_is_well_formed_and_names_every_process_and_topic():
    root = ET.parse(DOCS / "architecture.svg").getroot()
    assert root.tag == f"{SVG}svg" and root.get("viewBox")
    assert root.find(f"{SVG}title").text
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert {"gateway", "brain × N", "runner × N", "archiver", "signer", "Postgres"} <= texts
    assert {"inbox", "events", "tool-calls", "tool-results", "dead-letter", "model-deltas", "checkpoints"} <= texts


def test_drawing_is_deterministic_and_refuses_an_arrow_to_no_box():
    picture = picture_module()
    source = 'canvas 200 100 "t"\nprocess a 10 10 60 30 "a"\nprocess b 120 10 60 30 "b"\narrow a b "x"\n'
    assert picture.render(source) == picture.render(source)
    ET.fromstring(picture.render(source))
    with pytest.raises(ValueError, match="'c'"):
        picture.render(source + "arrow a c\n")


def test_the_readme_and_the_architecture_page_show_the_picture():
    assert "docs/architecture.svg" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(architecture.svg)" in (DOCS / "architecture.md").read_text(encoding="utf-8")
