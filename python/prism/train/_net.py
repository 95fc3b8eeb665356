"""Rendezvous addresses for a framework's own collectives (torch.distributed, TF_CONFIG)."""

import socket


def free_port():
    """A TCP port free on this host now (bound to 0 and closed: ScriptTrainer's way)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def reachable_host():
    """This host's name when it resolves, else its first non-loopback IPv4 address (as
    ScriptTrainer's ReachableHost)."""
    host = socket.gethostname()
    try:
        socket.getaddrinfo(host, None, socket.AF_INET)
        return host
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
