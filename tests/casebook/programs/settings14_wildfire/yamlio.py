"""YAML reading for the fire-weather ingest.

The loader is a setting ([yaml] loader in the ingest config):

    safe     yaml.SafeLoader, PyYAML's reference loader (pure Python; the same as yaml.safe_load)
    csafe    yaml.CSafeLoader, the same safe tag set on top of the libyaml C parser (only where PyYAML was
             built with libyaml)

Both construct the same Python objects for the relay's reports."""
import tomllib

import yaml

LOADERS = {"safe": yaml.SafeLoader, "csafe": getattr(yaml, "CSafeLoader", None)}


def load_config(path):
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def loader_for(name):
    loader = LOADERS[name]
    if loader is None:
        raise RuntimeError(f"YAML loader {name!r} needs PyYAML built with libyaml")
    return loader


def read_report(path, loader):
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh.read(), Loader=loader)
