"""What the in-process probes and the dflash-diag tool agree on, in the standard library only.

Both sides import this package and nothing else of each other: ``probes`` (which run inside the user's
program and may import only the standard library and torch) and ``dflash_diag`` (which reads what the
probes publish). One home for each shared idea:

- :mod:`dflash_contract.board`: the board document (schema, size and depth bounds, probe names, payload
  keys and types, its validation, when it is stale) and where boards live (directory rules);
- :mod:`dflash_contract.proc`: how a process is identified (/proc stat field 22) and whether it is alive;
- :mod:`dflash_contract.redact`: what a secret is, and how it is hidden, for the board and the bundle alike.

docs/board.md describes the board; docs/security.md the redaction rules.
"""
