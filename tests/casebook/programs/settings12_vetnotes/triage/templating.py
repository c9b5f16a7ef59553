"""Jinja2 environment for the clinic-note templates (templates/*.j2, owned by the clinical content team).

Two profiles, picked with --template-profile:

    authoring   the content team's setting while templates are being edited: the environment keeps no compiled
                templates (cache_size=0), so an edited .j2 file is picked up by the very next batch without a restart
    frozen      the release setting: compiled templates are kept (cache_size=400, Jinja's default) and only
                re-checked against the file's mtime (auto_reload), as in authoring
"""
import os

import jinja2

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates")

PROFILES = {
    "authoring": {"cache_size": 0, "auto_reload": True},
    "frozen": {"cache_size": 400, "auto_reload": True},
}


def _vitals_flag(v, lo, hi):
    return "" if lo <= v <= hi else " (!)"


def build_environment(profile):
    opts = PROFILES[profile]
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        cache_size=opts["cache_size"],
        auto_reload=opts["auto_reload"],
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        undefined=jinja2.ChainableUndefined,
    )
    env.filters["flag"] = _vitals_flag
    return env


def lint(env):
    """Start-up check that every template parses (the content team's CI does the same)."""
    names = [n for n in env.list_templates() if n.endswith(".j2")]
    for name in names:
        env.get_template(name)
    return names
