"""Client of the route/vessel feature service. Connection pooling comes from the [featurestore] settings:
keepalive_connections is httpx's max_keepalive_connections (how many idle connections the pool keeps for
reuse), keepalive_expiry how long an idle one is kept."""
import httpx


def make_client(base_url, store_cfg):
    limits = httpx.Limits(max_connections=store_cfg.get("max_connections", 16),
                          max_keepalive_connections=store_cfg["keepalive_connections"],
                          keepalive_expiry=store_cfg.get("keepalive_expiry", 30.0))
    # an in-cluster service: never through the host's HTTP proxies
    return httpx.Client(base_url=base_url, limits=limits, timeout=httpx.Timeout(5.0), trust_env=False)


def health(base_url):
    """One-off readiness probe on its own short-lived client."""
    with httpx.Client(base_url=base_url, limits=httpx.Limits(max_keepalive_connections=0), timeout=5.0,
                      trust_env=False) as c:
        r = c.get("/health")
        r.raise_for_status()
        return r.json()


class FeatureStore:
    def __init__(self, client):
        self.client = client
        self.requests = 0

    def _get(self, path, day):
        r = self.client.get(path, params={"day": day})
        r.raise_for_status()
        self.requests += 1
        return r.json()["features"]

    def route(self, rid, day):
        return self._get(f"/routes/{rid}", day)

    def vessel(self, vid, day):
        return self._get(f"/vessels/{vid}", day)
