<?php
// A php-memcached client for a pool of memcached-pm nodes, with the
// settings doc/POOL.md explains: keys spread by libketama's ring (the same
// node for every key as pylibmc's ketama, contrib/pool_pylibmc.py), and a
// node that restarts keeps its keys.
//
//   require 'pool_php_memcached.php';
//   $mc = pool_client([['10.0.0.1', 11211], ['10.0.0.2', 11211],
//                      ['10.0.0.3', 11211]]);

function pool_client(array $servers): Memcached
{
    // A persistent id: each PHP worker keeps its connections across
    // requests, and sets the options once.
    $mc = new Memcached('memcached-pm-pool');
    if ($mc->getServerList()) {
        return $mc;
    }
    $mc->setOptions([
        // consistent hashing over md5, libketama's ring
        Memcached::OPT_LIBKETAMA_COMPATIBLE => true,
        // a failed node stays in the ring: its keys fail while it
        // restarts instead of moving to a node that would serve them
        // stale once it is back
        Memcached::OPT_REMOVE_FAILED_SERVERS => false,
        // retry a failed node from the next second of the wall clock on
        // (libmemcached counts whole seconds; its default is two)
        Memcached::OPT_RETRY_TIMEOUT => 0,
        // milliseconds to connect and to wait on a reply
        Memcached::OPT_CONNECT_TIMEOUT => 100,
        Memcached::OPT_POLL_TIMEOUT => 400,
        Memcached::OPT_TCP_NODELAY => true,
    ]);
    $mc->addServers($servers);
    return $mc;
}
