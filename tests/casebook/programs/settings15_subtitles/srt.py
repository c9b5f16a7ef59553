"""SRT parsing: cues are separated by blank lines; each has an index, a time range and 1-2 text lines."""
import re

TIME = re.compile(r"(\d\d):(\d\d):(\d\d),(\d\d\d) --> (\d\d):(\d\d):(\d\d),(\d\d\d)")


def _ms(h, m, s, ms):
    return ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000 + int(ms)


def blocks(text):
    """The raw cue blocks of a file, in order (cheap: no per-cue parsing yet)."""
    return text.replace("\r\n", "\n").split("\n\n")


def parse_block(block):
    """(start ms, end ms, text) of one cue block, or None for a malformed one."""
    lines = block.strip().split("\n")
    if len(lines) < 3:
        return None
    m = TIME.match(lines[1])
    if m is None:
        return None
    g = m.groups()
    return _ms(*g[:4]), _ms(*g[4:]), " ".join(lines[2:])


def cues(text):
    for block in blocks(text):
        cue = parse_block(block)
        if cue is not None:
            yield cue
