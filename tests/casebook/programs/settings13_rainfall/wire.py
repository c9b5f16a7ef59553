"""The frame wire between the decoder process and the trainer: a stream of pickles, one per batch.

Its settings come from a TOML file ([wire] table): the pickle protocol, and how often the writer flushes.
Protocol 0 is the ASCII-safe one the archive tap (a `tee` of the stream into the site archive, grepped by the
ops team) was written for; protocols 4-5 are binary."""
import pickle
import tomllib


def load_config(path):
    with open(path, "rb") as fh:
        cfg = tomllib.load(fh)["wire"]
    proto = cfg.get("pickle_protocol", pickle.DEFAULT_PROTOCOL)
    if proto == "highest":
        proto = pickle.HIGHEST_PROTOCOL
    cfg["pickle_protocol"] = int(proto)
    return cfg


class Writer:
    def __init__(self, stream, cfg):
        self.stream, self.protocol = stream, cfg["pickle_protocol"]
        self.flush_every = int(cfg.get("flush_every", 1))
        self.sent = 0

    def send(self, obj):
        pickle.dump(obj, self.stream, protocol=self.protocol)
        self.sent += 1
        if self.sent % self.flush_every == 0:
            self.stream.flush()


class Reader:
    def __init__(self, stream):
        self.unpickler = pickle.Unpickler(stream)

    def recv(self):
        return self.unpickler.load()
