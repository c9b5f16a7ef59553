"""Site credentials: the lab keeps one netrc for all of its services and exports NETRC.

[credentials] source = "netrc"    - leave auth to the HTTP client: requests looks the
                                     host up in $NETRC itself (trust_env, its default)
[credentials] source = "session"  - read the store's entry once and pin it on the session
"""
import netrc
import os
import random


def write_site_netrc(directory, n_hosts, store_host, user, password, seed=3):
    """Write the lab's shared netrc (every service account it has) and export NETRC."""
    rng = random.Random(seed)
    path = os.path.join(directory, "lab.netrc")
    kinds = ("archive", "annotator", "ci", "mirror", "wiki", "tiles", "sensors", "backup")
    with open(path, "w") as f:
        for i in range(n_hosts):
            host = f"{kinds[i % len(kinds)]}-{i:04d}.field.example.org"
            f.write(f"machine {host}\n  login svc-{rng.randrange(10**6):06d}\n"
                    f"  password {rng.getrandbits(128):032x}\n\n")
        f.write(f"machine {store_host}\n  login {user}\n  password {password}\n")
    os.chmod(path, 0o600)
    os.environ["NETRC"] = path
    return path


def session_credentials(path, host):
    login, _account, password = netrc.netrc(path).authenticators(host)
    return login, password


def configure_session(session, source, host):
    if source == "session":
        session.auth = session_credentials(os.environ["NETRC"], host)
    elif source == "netrc":
        session.auth = None
    else:
        raise ValueError(f"unknown credentials source {source!r}")
    return session
