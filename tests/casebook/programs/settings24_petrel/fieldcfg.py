import os
import tomllib
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TlsConfig:
    ca_file: str = "certs/lab_ca.pem"
    ca_dir: str = "certs/trust"
    minimum_version: str = "TLSv1_2"
    server_cert: str = "certs/colonyd.pem"
    server_key: str = "certs/colonyd.key"


@dataclass
class ColonyConfig:
    colonies: int = 8
    birds: int = 48
    track_len: int = 4096
    behaviours: int = 4
    seed: int = 21


@dataclass
class FetchConfig:
    window: int = 256
    segment: int = 64
    timeout_s: float = 10.0
    queue_depth: int = 4


@dataclass
class TrainConfig:
    channels: int = 64
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class FieldConfig:
    name: str = "default"
    tls: TlsConfig = field(default_factory=TlsConfig)
    colony: ColonyConfig = field(default_factory=ColonyConfig)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def _resolve(path):
    if path == "certifi":
        import certifi
        return certifi.where()
    return path if os.path.isabs(path) else os.path.join(HERE, path)


def load(path):
    if not os.path.exists(path):
        path = os.path.join(HERE, path)
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    cfg = FieldConfig(name=raw.get("name", os.path.basename(path)))
    for section in ("tls", "colony", "fetch", "train"):
        target = getattr(cfg, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    # trust store for every TLS client in this process (OpenSSL reads these when a context loads its
    # default verify paths); the lab CA is also installed in the hashed directory
    os.environ["SSL_CERT_FILE"] = _resolve(cfg.tls.ca_file)
    os.environ["SSL_CERT_DIR"] = _resolve(cfg.tls.ca_dir)
    return cfg


def server_paths(cfg):
    return _resolve(cfg.tls.server_cert), _resolve(cfg.tls.server_key)
