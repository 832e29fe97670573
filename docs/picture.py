"""Draws a picture of boxes and arrows as SVG from a small text description: the architecture
picture, `docs/architecture.picture` → `docs/architecture.svg`.

    python docs/picture.py            # writes docs/architecture.svg
    python docs/picture.py --check    # exit 1 when the committed SVG is not what the source draws

Standard library only, and deterministic: the same source always gives the same bytes, so a
test (tests/unit/test_architecture_picture.py) holds the committed SVG to its source. Nothing
is laid out automatically: every box says where it is. The description, one item a line
(`#` starts a comment; quoted strings may hold spaces):

    canvas W H "title"
    process|topic|store|outside ID X Y W H "label" ["second line"]
    arrow FROM TO ["label"] [dashed] [both] [via X,Y ...] [label@X,Y]
    legend KIND "text"

FROM and TO are a box's ID (the arrow leaves its border towards the next point) or
`ID:n|s|e|w[+-offset]`, a point on that side, offset from the side's middle.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

HERE = Path(__file__).resolve().parent
SOURCE, TARGET = HERE / "architecture.picture", HERE / "architecture.svg"
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
STYLE = {  # kind -> (fill, stroke, dash)
    "process": ("#dbe8f7", "#2f5d8a", ""),
    "topic": ("#fbe7c6", "#a8701d", ""),
    "store": ("#dcefd9", "#3d7a35", ""),
    "outside": ("#ffffff", "#666666", "5 4"),
}


@dataclass(frozen=True)
class Box:
    kind: str
    id: str
    x: int
    y: int
    w: int
    h: int
    lines: tuple[str, ...]

    @property
    def centre(self) -> tuple[float, float]:
        return self.x + self.w / 2, self.y + self.h / 2


@dataclass
class Arrow:
    start: str
    end: str
    label: str = ""
    dashed: bool = False
    both: bool = False
    via: list[tuple[int, int]] = field(default_factory=list)
    label_at: tuple[int, int] | None = None


@dataclass
class Picture:
    width: int = 800
    height: int = 600
    title: str = ""
    boxes: dict[str, Box] = field(default_factory=dict)
    arrows: list[Arrow] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)


def point(text: str) -> tuple[int, int]:
    x, y = text.split(",")
    return int(x), int(y)


def parse(source: str) -> Picture:
    """The picture a description names; a line it cannot read is a ValueError naming it."""
    picture = Picture()
    for number, line in enumerate(source.splitlines(), 1):
        words = shlex.split(line, comments=True)
        if not words:
            continue
        try:
            read_line(picture, words)
        except (ValueError, IndexError, KeyError) as e:
            raise ValueError(f"line {number}: {line.strip()!r}: {e}") from e
    for arrow in picture.arrows:
        for end in (arrow.start, arrow.end):
            if end.split(":")[0] not in picture.boxes:
                raise ValueError(f"an arrow names {end!r}, which no box is")
    return picture


def read_line(picture: Picture, words: list[str]) -> None:
    kind, rest = words[0], words[1:]
    if kind == "canvas":
        picture.width, picture.height, picture.title = int(rest[0]), int(rest[1]), rest[2]
    elif kind in STYLE:
        x, y, w, h = (int(n) for n in rest[1:5])
        picture.boxes[rest[0]] = Box(kind, rest[0], x, y, w, h, tuple(rest[5:7]))
    elif kind == "arrow":
        arrow = Arrow(rest[0], rest[1])
        for word in rest[2:]:
            if word in ("dashed", "both"):
                setattr(arrow, word, True)
            elif word.startswith("label@"):
                arrow.label_at = point(word.removeprefix("label@"))
            elif word[0].isdigit() and "," in word:
                arrow.via.append(point(word))
            elif word != "via":
                arrow.label = word
        picture.arrows.append(arrow)
    elif kind == "legend":
        picture.legend.append((rest[0], rest[1]))
    else:
        raise ValueError(f"unknown item {kind!r}")


def anchor(picture: Picture, end: str, towards: tuple[float, float]) -> tuple[float, float]:
    """Where an arrow meets a box: a named side's point, or the border towards `towards`."""
    name, _, side = end.partition(":")
    box = picture.boxes[name]
    cx, cy = box.centre
    if side:
        offset = int(side[1:] or 0)
        return {"n": (cx + offset, box.y), "s": (cx + offset, box.y + box.h),
                "w": (box.x, cy + offset), "e": (box.x + box.w, cy + offset)}[side[0]]
    dx, dy = towards[0] - cx, towards[1] - cy
    if dx == dy == 0:
        return cx, cy
    scale = min(box.w / 2 / abs(dx) if dx else float("inf"), box.h / 2 / abs(dy) if dy else float("inf"))
    return cx + dx * scale, cy + dy * scale


def route(picture: Picture, arrow: Arrow) -> list[tuple[float, float]]:
    first = arrow.via[0] if arrow.via else picture.boxes[arrow.end.split(":")[0]].centre
    last = arrow.via[-1] if arrow.via else picture.boxes[arrow.start.split(":")[0]].centre
    return [anchor(picture, arrow.start, first), *arrow.via, anchor(picture, arrow.end, last)]


def num(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def draw_box(box: Box) -> list[str]:
    fill, stroke, dash = STYLE[box.kind]
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    x, y, w, h = box.x, box.y, box.w, box.h
    if box.kind == "store":  # a cylinder: the body, then the top's rim
        ry = 9
        shape = [f'<path d="M{x},{y + ry} L{x},{y + h - ry} A{num(w / 2)},{ry} 0 0 0 {x + w},{y + h - ry} '
                 f'L{x + w},{y + ry}" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>',
                 f'<ellipse cx="{num(x + w / 2)}" cy="{y + ry}" rx="{num(w / 2)}" ry="{ry}" fill="{fill}" '
                 f'stroke="{stroke}" stroke-width="1.5"/>']
        y, h = y + ry, h - ry
    else:
        radius = h // 2 if box.kind == "topic" else 8
        shape = [f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{radius}" fill="{fill}" '
                 f'stroke="{stroke}" stroke-width="1.5"{dashed}/>']
    return shape + draw_lines(box, x + w / 2, y + h / 2)


def draw_lines(box: Box, cx: float, cy: float) -> list[str]:
    label, *note = box.lines
    family = "DejaVu Sans Mono, Menlo, monospace" if box.kind == "topic" else FONT
    if not note:
        return [f'<text x="{num(cx)}" y="{num(cy + 5)}" font-family="{family}" font-size="14" '
                f'font-weight="bold" text-anchor="middle">{escape(label)}</text>']
    return [f'<text x="{num(cx)}" y="{num(cy - 3)}" font-family="{family}" font-size="14" font-weight="bold" '
            f'text-anchor="middle">{escape(label)}</text>',
            f'<text x="{num(cx)}" y="{num(cy + 13)}" font-family="{FONT}" font-size="11" fill="#333333" '
            f'text-anchor="middle">{escape(note[0])}</text>']


def draw_arrow(picture: Picture, arrow: Arrow) -> list[str]:
    points = route(picture, arrow)
    path = " ".join(f"{num(x)},{num(y)}" for x, y in points)
    style = ' stroke-dasharray="6 4"' if arrow.dashed else ""
    start = ' marker-start="url(#tail)"' if arrow.both else ""
    out = [f'<polyline points="{path}" fill="none" stroke="#444444" stroke-width="1.4"{style}{start} '
           f'marker-end="url(#head)"/>']
    if arrow.label:
        (x1, y1), (x2, y2) = points[(len(points) - 1) // 2], points[(len(points) - 1) // 2 + 1]
        lx, ly = arrow.label_at or ((x1 + x2) / 2 + 4, (y1 + y2) / 2 - 5)
        out.append(f'<text x="{num(lx)}" y="{num(ly)}" font-family="{FONT}" font-size="11" fill="#222222" '
                   f'font-style="italic">{escape(arrow.label)}</text>')
    return out


def draw_legend(picture: Picture) -> list[str]:
    out, x, y = [], 20, picture.height - 28
    for kind, text in picture.legend:
        fill, stroke, dash = STYLE[kind]
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        out += [f'<rect x="{x}" y="{y}" width="22" height="14" rx="4" fill="{fill}" stroke="{stroke}"{dashed}/>',
                f'<text x="{x + 28}" y="{y + 11}" font-family="{FONT}" font-size="11">{escape(text)}</text>']
        x += 34 + 6 * len(text)
    return out


def render(source: str) -> str:
    """The SVG document (text) the description draws."""
    picture = parse(source)
    head = ('<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
            'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#444444"/></marker>'
            '<marker id="tail" viewBox="0 0 10 10" refX="1" refY="5" markerWidth="8" markerHeight="8" '
            'orient="auto"><path d="M10,0 L0,5 L10,10 z" fill="#444444"/></marker></defs>')
    body = [f'<rect width="{picture.width}" height="{picture.height}" fill="#ffffff"/>']
    for box in picture.boxes.values():
        body += draw_box(box)
    for arrow in picture.arrows:
        body += draw_arrow(picture, arrow)
    body += draw_legend(picture)
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{picture.width}" height="{picture.height}" '
        f'viewBox="0 0 {picture.width} {picture.height}" role="img" aria-labelledby="title">',
        f'<title id="title">{escape(picture.title)}</title>', head, *body, "</svg>", ""])


def main(argv: list[str]) -> int:
    drawn = render(SOURCE.read_text(encoding="utf-8"))
    if "--check" in argv:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != drawn:
            print(f"{TARGET} is stale: run python docs/picture.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(drawn, encoding="utf-8")
    print(f"wrote {TARGET}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
