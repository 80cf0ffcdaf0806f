"""A pylibmc (libmemcached) client for a pool of memcached-pm nodes, with
the settings doc/POOL.md explains: keys spread by ketama, and a node that
restarts keeps its keys.

    from pool_pylibmc import pool_client
    mc = pool_client(["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"])

php-memcached, also over libmemcached, takes the same settings:
contrib/pool_php_memcached.php.
"""

import pylibmc

POOL_BEHAVIORS = {
    # Consistent hashing over md5, libketama's ring: each node keeps its
    # share of the keys whatever the others do, and php-memcached with
    # OPT_LIBKETAMA_COMPATIBLE puts every key on the same node.  (Plain
    # "ketama" keeps libmemcached's default key hash: another ring.)
    "ketama_weighted": True,
    # Never take a failed node out of the ring: while it restarts (well
    # under a second, its items mapped back from its file) the requests
    # for its keys fail, which a cache-aside reader treats as a miss, and
    # no other node is handed keys it would serve stale once the node is
    # back.
    "remove_failed": 0,
    # After a failure, try the node again as soon as libmemcached will:
    # it counts in whole seconds of the wall clock, and 0 means "from the
    # next second on" (its default, 2, costs a restarted node two to
    # three seconds of errors however fast it is back).
    "retry_timeout": 0,
    # Milliseconds to connect, and to wait on a reply: a node that is down
    # refuses at once, a hung one costs this much.
    "connect_timeout": 100,
    "_poll_timeout": 400,
    "tcp_nodelay": True,
    # gets and cas
    "cas": True,
}


def pool_client(servers, binary=False):
    """A client over `servers` ("host:port" strings, each node once)."""
    return pylibmc.Client(servers, binary=binary, behaviors=POOL_BEHAVIORS)
