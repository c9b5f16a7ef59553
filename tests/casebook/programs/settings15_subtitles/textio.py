"""Reading the archive's text files. [archive] encoding names the codec of the files; "auto" asks
charset_normalizer for the most probable one, file by file (the archive mixes releases of several studios)."""
import charset_normalizer


def decode_bytes(raw, encoding):
    if encoding == "auto":
        best = charset_normalizer.from_bytes(raw).best()
        if best is None:
            return raw.decode("utf-8", errors="replace"), "utf-8?"
        return str(best), best.encoding
    return raw.decode(encoding, errors="replace"), encoding


def read_text(path, encoding):
    with open(path, "rb") as fh:
        return decode_bytes(fh.read(), encoding)
