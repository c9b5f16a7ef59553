"""Regex dialect for the text stack.

The clause-rule packs maintained by the legal-ops team use the `regex`
module's version-1 syntax (nested sets and set operations such as
[\\p{L}--\\p{Lu}], Unicode-correct case-insensitive matching), so the
process standardizes on VERSION1 ('v1').  'v0' keeps the module's
re-compatible default.  Patterns take the dialect that is in force when they
are compiled.
"""
import regex

VERSIONS = {"v1": regex.VERSION1, "v0": regex.VERSION0}


def configure(version):
    regex.DEFAULT_VERSION = VERSIONS[version]
    return regex.DEFAULT_VERSION
