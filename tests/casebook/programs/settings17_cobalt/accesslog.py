"""Web access logs (combined log format) and their per-session features for bot detection."""
import numpy as np

BUCKETS = 1024
NUMERIC = 6
FEATURES = BUCKETS + NUMERIC

AGENTS_HUMAN = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/122.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_3) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.3 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:123.0) Gecko/20100101 Firefox/123.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_3 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
]
AGENTS_BOT = [
    "python-requests/2.31.0", "curl/8.5.0", "Go-http-client/1.1",
    "Mozilla/5.0 (compatible; ScrapeBot/2.1; +http://example.net/bot)",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/121.0",
]
SECTIONS = ["products", "cart", "search", "account", "blog", "api/v2/items", "static/img", "help"]


def write_archive(path, clients, lines_per_session, seed=0):
    """Synthetic uploads: each client produces sessions of `lines_per_session` requests."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for c in range(clients):
            bot = rng.random() < 0.4
            ip = f"198.51.{c // 250}.{c % 250}"
            agent = AGENTS_BOT[rng.integers(len(AGENTS_BOT))] if bot else AGENTS_HUMAN[rng.integers(len(AGENTS_HUMAN))]
            t = 1_700_000_000 + int(rng.integers(0, 86400))
            for _ in range(lines_per_session):
                t += int(rng.exponential(0.5 if bot else 12.0)) + 1
                sec = SECTIONS[rng.integers(len(SECTIONS))]
                item = int(rng.integers(1, 5000))
                q = f"?page={item % 40}&sort=price" if bot and rng.random() < 0.7 else f"?ref=nav{item % 7}"
                status = 404 if bot and rng.random() < 0.15 else 200
                size = int(rng.integers(200, 60000))
                ref = "-" if bot else f"https://shop.example.com/{SECTIONS[rng.integers(len(SECTIONS))]}"
                f.write(f'{ip} - - [{t}] "GET /{sec}/{item}{q} HTTP/1.1" {status} {size} "{ref}" '
                        f'"{agent}" {int(bot)}\n')


def split_fields(line):
    """Split a combined-log line into its fields: bare words, [bracketed] and "quoted"
    fields; servers escape quotes and backslashes inside quoted fields with a backslash."""
    fields = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == " ":
            i += 1
        elif c == '"':
            i += 1
            buf = []
            while i < n and line[i] != '"':
                if line[i] == "\\" and i + 1 < n:
                    i += 1
                buf.append(line[i])
                i += 1
            fields.append("".join(buf))
            i += 1
        elif c == "[":
            j = line.index("]", i)
            fields.append(line[i + 1:j])
            i = j + 1
        else:
            j = line.find(" ", i)
            j = n if j < 0 else j
            fields.append(line[i:j])
            i = j
    return fields


_SEPARATORS = str.maketrans({c: " " for c in "/?&=;()_.,:+-"})


def tokens(request, agent, referer):
    path = request.split(" ")[1] if " " in request else request
    out = ["p:" + t for t in path.lower().translate(_SEPARATORS).split() if not t.isdigit()]
    out += ["a:" + t for t in agent.lower().translate(_SEPARATORS).split()]
    out.append("r:" + ("none" if referer == "-" else referer.split("/")[2]))
    return out


class SessionFeaturizer:
    """Hashed bag of request/agent tokens plus timing and status statistics per session."""

    def __init__(self):
        self.vocab = {}

    def bucket(self, token):
        idx = self.vocab.get(token)
        if idx is None:
            idx = self.vocab[token] = len(self.vocab)
        return (idx * 2654435761) % BUCKETS

    def session(self, lines):
        counts = [0] * BUCKETS
        stamps, errors, sizes = [], 0, 0
        label = 0
        for line in lines:
            _ip, _ident, _user, stamp, request, status, size, referer, agent, tail = split_fields(line)
            stamps.append(int(stamp))
            errors += status.startswith("4")
            sizes += int(size)
            label = int(tail)
            for tok in tokens(request, agent, referer):
                counts[self.bucket(tok)] += 1
        n = len(lines)
        gaps = np.diff(np.asarray(stamps, dtype=np.float64))
        stats = (np.log1p(gaps.mean()), np.log1p(gaps.std()), np.log1p(gaps.min()),
                 errors / n, np.log1p(sizes / n), len(set(stamps)) / n)
        x = np.empty(FEATURES, dtype=np.float32)
        x[:BUCKETS] = counts
        x[:BUCKETS] /= n
        x[BUCKETS:] = stats
        return x, label
