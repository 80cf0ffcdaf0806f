"""nutcracker_conf.py: contrib/nutcracker.yml for a pool on this host,
its listen address and servers replaced, so that tests/test_pool.py and
bench/pool.py run the configuration the project ships."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def nutcracker_conf(listen_port, ports):
    """The shipped configuration listening on 127.0.0.1:listen_port over
    nodes on 127.0.0.1 at `ports`, named node-0, node-1, ..."""
    with open(os.path.join(ROOT, "contrib", "nutcracker.yml")) as f:
        conf = f.read()
    conf = re.sub(r"listen: \S+", "listen: 127.0.0.1:%d" % listen_port, conf)
    servers = "".join("    - 127.0.0.1:%d:1 node-%d\n" % (p, i)
                      for i, p in enumerate(ports))
    conf = re.sub(r"(  servers:\n)(    - .*\n)+", r"\g<1>" + servers, conf)
    if len(re.findall(r"^    - 127", conf, re.M)) != len(ports) or \
            "listen: 127.0.0.1:%d\n" % listen_port not in conf:
        raise ValueError("contrib/nutcracker.yml no longer has the listen "
                         "and servers lines this expects")
    return conf
