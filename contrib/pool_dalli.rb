# A dalli client for a pool of memcached-pm nodes, with the settings
# doc/POOL.md explains: keys spread by dalli's own ring (not libketama's:
# use one client library per pool), and a node that restarts keeps its
# keys.
#
#   require_relative 'pool_dalli'
#   mc = pool_client(%w[10.0.0.1:11211 10.0.0.2:11211 10.0.0.3:11211])
require 'dalli'

POOL_OPTIONS = {
  # Never hand a failed node's keys to another node: while it restarts
  # (a pause under a takeover or systemd's fd store; well under a second
  # otherwise) its requests wait or fail, and no other node is given keys
  # it would serve stale once the node is back.
  failover: false,
  # After a node failed, try it again after this many seconds (dalli's
  # default, 30, costs a node that restarted plainly half a minute of
  # errors however fast it is back).
  down_retry_delay: 1,
  # Seconds to wait on a reply: a takeover's pause is far shorter.
  socket_timeout: 0.4
}.freeze

def pool_client(servers)
  Dalli::Client.new(servers, POOL_OPTIONS)
end
