"""Process-wide network environment from the [network] profile."""
import os


def apply(net, agent_port):
    if net.get("egress_agent"):
        os.environ["http_proxy"] = f"http://127.0.0.1:{agent_port}"
        os.environ["HTTP_PROXY"] = os.environ["http_proxy"]
    os.environ["no_proxy"] = net.get("no_proxy", "")
    os.environ["NO_PROXY"] = os.environ["no_proxy"]
