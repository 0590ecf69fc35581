"""Checks of the `locus` SVG pictures from their own coordinates
(docs/PICTURES.md): well-formed XML, an opaque background, a legend, no
text outside the viewBox, no title over other text, heat-map shading that
means one thing, roofline points where their figures put them; and a
PNG reader for the rendered picture (rsvg-convert writes 8-bit RGB(A)).

Text extents use the model of tools/locus/svg.c: an advance width per
character class (em), an ascent and a descent; keep the two in step."""

import math
import struct
import xml.etree.ElementTree as ET
import zlib

SVG = "{http://www.w3.org/2000/svg}"
ASCENT, DESCENT, BOLD = 0.95, 0.3, 1.12


def char_em(ch):
    if ord(ch) > 127:
        return 1.0
    if ch in " .,:;'|!ijl`":
        return 0.34
    if ch in "ftrI()[]{}/\\-\"*_?":
        return 0.52
    if ch in "mwMW%@#+=<>~^":
        return 1.0
    if "A" <= ch <= "Z":
        return 0.78
    return 0.66


def text_width(text, size, bold):
    return sum(char_em(c) for c in text) * size * (BOLD if bold else 1.0)


class Box:
    def __init__(self, x0, y0, x1, y1, what):
        self.x0, self.y0, self.x1, self.y1, self.what = x0, y0, x1, y1, what

    def overlaps(self, other, slack=0.01):
        return (self.x0 < other.x1 - slack and other.x0 < self.x1 - slack and
                self.y0 < other.y1 - slack and other.y0 < self.y1 - slack)

    def inside(self, x0, y0, x1, y1, slack=0.01):
        return (self.x0 >= x0 - slack and self.y0 >= y0 - slack and
                self.x1 <= x1 + slack and self.y1 <= y1 + slack)

    def __repr__(self):
        return "%r at (%.1f, %.1f)-(%.1f, %.1f)" % (
            self.what, self.x0, self.y0, self.x1, self.y1)


def classes(element):
    return (element.get("class") or "").split()


def number(element, name):
    return float(element.get(name))


class Picture:
    """A parsed picture; problems holds what is wrong with it."""

    def __init__(self, path):
        self.path = path
        self.problems = []
        self.background = None  # its fill, once known to be opaque
        self.texts = []  # (Box, element)
        try:
            self.root = ET.parse(path).getroot()
        except ET.ParseError as error:
            self.root = None
            self.problem("not well-formed XML: %s" % error)
            return
        self.check_root()
        if self.root is not None:
            self.collect_text(self.root, {"font-size": "12",
                                          "text-anchor": "start",
                                          "font-weight": "normal"})
            self.check_text()
            self.check_legend()

    def problem(self, message):
        self.problems.append("%s: %s" % (self.path, message))

    def check_root(self):
        root = self.root
        if root.tag != SVG + "svg":
            self.problem("the root is %s, not an svg element" % root.tag)
            self.root = None
            return
        try:
            box = [float(v) for v in root.get("viewBox", "").split()]
        except ValueError:
            box = []
        if len(box) != 4 or box[0] != 0 or box[1] != 0:
            self.problem("no viewBox of the form '0 0 W H': %r"
                         % root.get("viewBox"))
            try:  # the other checks on the canvas width and height give
                box = [0, 0, float(root.get("width")),
                       float(root.get("height"))]
            except (TypeError, ValueError):
                self.root = None
                return
        self.width, self.height = box[2], box[3]
        if (float(root.get("width", "nan")) != self.width or
                float(root.get("height", "nan")) != self.height):
            self.problem("width and height differ from the viewBox")
        first = next(iter(root), None)
        opaque = (first is not None and first.tag == SVG + "rect" and
                  float(first.get("x", "0")) <= 0 and
                  float(first.get("y", "0")) <= 0 and
                  float(first.get("width", "0")) >= self.width and
                  float(first.get("height", "0")) >= self.height and
                  is_opaque_colour(first.get("fill")) and
                  float(first.get("opacity", "1")) == 1 and
                  float(first.get("fill-opacity", "1")) == 1)
        if not opaque:
            self.problem("the first element is not an opaque rectangle "
                         "covering the whole viewBox")
        else:
            self.background = first.get("fill")

    def collect_text(self, element, inherited):
        here = dict(inherited)
        for name in ("font-size", "text-anchor", "font-weight"):
            if element.get(name) is not None:
                here[name] = element.get(name)
        if element.get("transform") is not None:
            self.problem("a transform (%r) the check cannot place"
                         % element.get("transform"))
        if element.tag == SVG + "text":
            if len(element):
                self.problem("a text element with children (tspan)")
            content = element.text or ""
            size = float(here["font-size"])
            bold = here["font-weight"] == "bold"
            w = text_width(content, size, bold)
            x, y = number(element, "x"), number(element, "y")
            shift = {"start": 0.0, "middle": 0.5, "end": 1.0}[
                here["text-anchor"]]
            box = Box(x - shift * w, y - ASCENT * size, x - shift * w + w,
                      y + DESCENT * size, content)
            self.texts.append((box, element))
        for child in element:
            self.collect_text(child, here)

    def check_text(self):
        for box, _ in self.texts:
            if not box.inside(0, 0, self.width, self.height):
                self.problem("text outside the %gx%g viewBox: %r"
                             % (self.width, self.height, box))
        for i, (a, ea) in enumerate(self.texts):
            for b, eb in self.texts[i + 1:]:
                if not a.overlaps(b):
                    continue
                kind = ("title" if "title" in classes(ea) + classes(eb)
                        else "text")
                self.problem("%s boxes overlap: %r and %r" % (kind, a, b))

    def check_legend(self):
        for g in self.root.iter(SVG + "g"):
            if "legend" not in classes(g):
                continue
            has_text = any(e.tag == SVG + "text" for e in g.iter())
            has_mark = any(e.tag in (SVG + "rect", SVG + "circle",
                                     SVG + "line", SVG + "polygon",
                                     SVG + "path") for e in g.iter())
            if has_text and has_mark:
                return
        self.problem("no legend (a g of class legend with a marker and text)")

    def elements(self, tag, cls, under=None):
        return [e for e in (under if under is not None else self.root).iter(
            SVG + tag) if cls in classes(e)]


def is_opaque_colour(fill):
    if not fill or fill in ("none", "transparent") or fill.startswith("url"):
        return False
    if fill.startswith("rgba") or fill.startswith("hsla"):
        return False
    if fill.startswith("#") and len(fill) in (5, 9):  # with alpha
        return fill[-1 if len(fill) == 5 else -2:] in ("f", "ff")
    return True


def luminance(fill):
    if not (fill.startswith("#") and len(fill) == 7):
        raise ValueError("fill %r is not #rrggbb" % fill)
    r, g, b = (int(fill[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def check_heat_maps(picture, nodes, panels, values=None):
    """Each panel: nodes x nodes cells whose shade follows one rule, darker
    is better; a panel whose cells hold one value has the same shade as
    every other such panel; unmeasured cells one grey of their own; each
    value's text inside its cell. values: expected cell values of every
    panel, in order, when known."""
    if picture.root is None:
        return
    found = picture.elements("g", "panel")
    if len(found) != panels:
        picture.problem("%d panels, expected %d" % (len(found), panels))
    flat_fills, missing_fills, measured_fills = set(), set(), set()
    for p, panel in enumerate(found):
        better = panel.get("data-better")
        if better not in ("higher", "lower"):
            picture.problem("panel %d says no data-better" % p)
            continue
        cells = picture.elements("rect", "cell", panel)
        if len(cells) != nodes * nodes:
            picture.problem("panel %d has %d cells, expected %d"
                            % (p, len(cells), nodes * nodes))
        measured = []
        for cell in cells:
            if "missing" in classes(cell):
                missing_fills.add(cell.get("fill"))
            else:
                measured.append((float(cell.get("data-value")),
                                 cell.get("fill")))
                measured_fills.add(cell.get("fill"))
        if values is not None and p < len(values):
            got = [None if "missing" in classes(c) else
                   float(c.get("data-value")) for c in cells]
            want = values[p]
            if len(got) != len(want) or any(
                    (g is None) != (w is None) or
                    (g is not None and abs(g - w) > 1e-6 * max(1.0, abs(w)))
                    for g, w in zip(got, want)):
                picture.problem("panel %d values %s, expected %s"
                                % (p, got, want))
        sign = 1.0 if better == "higher" else -1.0
        for va, fa in measured:
            for vb, fb in measured:
                if va == vb and fa != fb:
                    picture.problem("panel %d: one value %g in two shades "
                                    "%s and %s" % (p, va, fa, fb))
                if sign * (va - vb) > 0 and luminance(fa) > luminance(fb):
                    picture.problem("panel %d: %g is better than %g but "
                                    "paler (%s vs %s)" % (p, va, vb, fa, fb))
        if measured and len({v for v, _ in measured}) == 1:
            flat_fills.add(measured[0][1])
        check_cell_text(picture, panel, cells)
        if not picture.elements("g", "legend", panel):
            picture.problem("panel %d has no legend" % p)
    if len(flat_fills) > 1:
        picture.problem("panels of a single value are shaded differently: "
                        "%s" % sorted(flat_fills))
    if len(missing_fills) > 1 or missing_fills & measured_fills:
        picture.problem("unmeasured cells are not one grey of their own: %s"
                        % sorted(missing_fills))


def check_cell_text(picture, panel, cells):
    mine = set(panel.iter())
    texts = [box for box, e in picture.texts if e in mine]
    for cell in cells:
        x, y = number(cell, "x"), number(cell, "y")
        w, h = number(cell, "width"), number(cell, "height")
        inside = [t for t in texts if t.inside(x, y, x + w, y + h)]
        if len(inside) != 1:
            picture.problem("cell at (%g, %g) holds %d texts, expected its "
                            "value alone" % (x, y, len(inside)))


class Axis:
    """Screen position = a + b log10(value), from the grid lines."""

    def __init__(self, picture, panel, kind):
        lines = picture.elements("line", "grid-" + kind, panel)
        self.ok = len(lines) >= 2
        if not self.ok:
            picture.problem("fewer than two %s grid lines" % kind)
            return
        coordinate = "x1" if kind == "x" else "y1"
        pairs = sorted((math.log10(float(l.get("data-value"))),
                        number(l, coordinate)) for l in lines)
        (v0, p0), (v1, p1) = pairs[0], pairs[-1]
        self.b = (p1 - p0) / (v1 - v0)
        self.a = p0 - self.b * v0
        self.low, self.high = sorted((p0, p1))
        for v, p in pairs:
            if abs(self.at(10 ** v) - p) > 0.05:
                picture.problem("%s grid lines are not evenly spaced" % kind)

    def at(self, value):
        return self.a + self.b * math.log10(value)

    def value(self, position):
        return 10 ** ((position - self.a) / self.b)


def polygon_centre(element):
    points = [tuple(float(v) for v in pair.split(","))
              for pair in element.get("points").split()]
    return (sum(p[0] for p in points) / len(points),
            sum(p[1] for p in points) / len(points))


def check_roofline(picture, expected=None, tolerance=1.0):
    """Each panel: points and references where their figures put them on
    the panel's log axes, none above the peak, the roof drawn as
    min(peak, bandwidth x intensity). expected: {device: [(shape, gflops,
    intensity, reference count)]} from the bench's own JSON."""
    if picture.root is None:
        return
    for panel in picture.elements("g", "panel"):
        device = panel.get("data-device")
        x, y = Axis(picture, panel, "x"), Axis(picture, panel, "y")
        if not (x.ok and y.ok):
            continue
        roofs = picture.elements("polyline", "roof", panel)
        if len(roofs) != 1:
            picture.problem("%s: %d roofs" % (device, len(roofs)))
            continue
        peak = float(roofs[0].get("data-peak"))
        bandwidth = float(roofs[0].get("data-bandwidth"))
        vertices = [tuple(float(v) for v in pair.split(","))
                    for pair in roofs[0].get("points").split()]
        for vx, vy in vertices:
            model = peak if bandwidth <= 0 else min(
                peak, bandwidth * x.value(vx))
            if abs(y.at(model) - vy) > tolerance:
                picture.problem("%s: the roof passes (%.1f, %.1f), the model "
                                "puts it at y %.1f" % (device, vx, vy,
                                                       y.at(model)))
        if abs(vertices[-1][1] - y.at(peak)) > tolerance:
            picture.problem("%s: the roof does not end at the peak" % device)
        points = {}
        for point in picture.elements("circle", "point", panel):
            k = point.get("data-point")
            g = float(point.get("data-gflops"))
            ai = float(point.get("data-intensity"))
            cx, cy = number(point, "cx"), number(point, "cy")
            points[k] = (point.get("data-shape"), g, ai, cx, cy, [])
            if abs(cx - x.at(ai)) > tolerance or abs(cy - y.at(g)) > tolerance:
                picture.problem("%s point %s at (%.1f, %.1f), its figures put "
                                "it at (%.1f, %.1f)" % (device, k, cx, cy,
                                                        x.at(ai), y.at(g)))
            if g > peak * (1 + 1e-6):
                picture.problem("%s point %s (%g GFLOP/s) above the peak %g"
                                % (device, k, g, peak))
            if not (x.low - tolerance <= cx <= x.high + tolerance and
                    y.low - tolerance <= cy <= y.high + tolerance):
                picture.problem("%s point %s outside the axes" % (device, k))
        for ref in picture.elements("polygon", "reference", panel):
            k = ref.get("data-point")
            g = float(ref.get("data-gflops"))
            cx, cy = polygon_centre(ref)
            if k not in points:
                picture.problem("%s: a reference of no point (%s)"
                                % (device, k))
                continue
            points[k][5].append(g)
            if abs(cx - points[k][3]) > tolerance or abs(cy - y.at(g)) > \
                    tolerance:
                picture.problem("%s: reference of point %s at (%.1f, %.1f), "
                                "expected (%.1f, %.1f)" % (
                                    device, k, cx, cy, points[k][3], y.at(g)))
            if g > peak * (1 + 1e-6):
                picture.problem("%s: a reference (%g GFLOP/s) above the peak "
                                "%g" % (device, g, peak))
        if not picture.elements("g", "legend", panel):
            picture.problem("%s: no legend" % device)
        if expected is None:
            continue
        want = expected.get(device, [])
        if len(want) != len(points):
            picture.problem("%s: %d points, the JSON has %d results"
                            % (device, len(points), len(want)))
        drawn = {p[0]: p for p in points.values()}
        for shape, g, ai, references in want:
            if shape not in drawn:
                picture.problem("%s: no point for %s" % (device, shape))
                continue
            _, dg, dai, _, _, refs = drawn[shape]
            if abs(dg - g) > 1e-6 * g or abs(dai - ai) > 1e-6 * ai:
                picture.problem("%s %s: drawn at %g GFLOP/s, intensity %g; "
                                "the JSON says %g, %g" % (device, shape, dg,
                                                          dai, g, ai))
            if len(refs) != references:
                picture.problem("%s %s: %d references drawn, the JSON has %d"
                                % (device, shape, len(refs), references))
    if expected is not None:
        devices = {p.get("data-device") for p in picture.elements("g", "panel")}
        for device in expected:
            if device not in devices:
                picture.problem("no panel for %s" % device)


def read_png(path):
    """(width, height, rows) of an 8-bit RGB or RGBA PNG; rows of
    (r, g, b, a) tuples."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("%s is not a PNG" % path)
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError("%s: unsupported PNG (depth %d, colour %d, "
                         "interlace %d)" % (path, depth, colour, interlace))
    channels = 4 if colour == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = (left if pa <= pb and pa <= pc else
                        up if pb <= pc else corner)
                line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[x * channels:(x + 1) * channels]) +
                     ((255,) if channels == 3 else ())
                     for x in range(width)])
        previous = line
    return width, height, rows


def check_render(picture, png, border=4):
    """The rendered picture: its size, every pixel opaque, and a blank
    border of the background's colour (text or lines running into an
    edge would show there: what a clipped picture looks like)."""
    width, height, rows = read_png(png)
    if (width, height) != (round(picture.width), round(picture.height)):
        picture.problem("rendered %dx%d, the viewBox is %gx%g"
                        % (width, height, picture.width, picture.height))
    translucent = sum(1 for row in rows for p in row if p[3] != 255)
    if translucent:
        picture.problem("%d pixels of the render are not opaque"
                        % translucent)
    fill = picture.background or ""
    colour = (tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))
              if fill.startswith("#") and len(fill) == 7 else (255, 255, 255))
    edge = [(x, y) for y in range(height) for x in range(width)
            if (x < border or y < border or x >= width - border or
                y >= height - border) and rows[y][x][:3] != colour]
    if edge:
        picture.problem("%d drawn pixels in the %d px border, e.g. at %s: "
                        "something runs off the picture"
                        % (len(edge), border, edge[:3]))
    if all(p[:3] == colour for row in rows for p in row):
        picture.problem("the render is blank")
