# bench/pool_dalli.rb: bench/pool.py's cache-aside reader (and its fill)
# through dalli, with contrib/pool_dalli.rb's settings.
#
#   ruby bench/pool_dalli.rb fill SERVERS NKEYS
#   ruby bench/pool_dalli.rb read SERVERS NKEYS DIST T0 DB_MS BUCKET
#
# SERVERS is "host:port,...".  A reader runs until its stdin closes, then
# prints one JSON line: per bucket of BUCKET seconds since T0 (a
# CLOCK_MONOTONIC reading, pool.py's), [requests, hits, misses, errors,
# longest request in seconds], and every request's [start, seconds].
require 'json'
require_relative '../contrib/pool_dalli'

VALUE = 'v' * 100

def fill(mc, nkeys)
  (0...nkeys).each_slice(500) do |keys|
    mc.multi { keys.each { |i| mc.set("k#{i}", VALUE, 0, raw: true) } }
  end
end

# Ranks 0..n-1 with P(k) ~ 1/(k+1), by inverse CDF.
def zipf(n)
  acc = 0.0
  cdf = (0...n).map { |k| acc += 1.0 / (k + 1) }
  ->(rng) { cdf.bsearch_index { |c| c >= rng.rand * acc } || n - 1 }
end

def now
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

def read(mc, nkeys, dist, t0, db, bucket)
  rng = Random.new(7)
  perm = (0...nkeys).to_a.shuffle(random: Random.new(3))
  draw = dist == 'zipf' ? zipf(nkeys) : ->(r) { r.rand(nkeys) }
  buckets = Hash.new { |h, k| h[k] = [0, 0, 0, 0, 0.0] }
  lat = []
  stop = false
  Thread.new { $stdin.read; stop = true }
  until stop
    key = "k#{perm[draw.call(rng)]}"
    start = now
    b = buckets[((start - t0) / bucket).floor]
    b[0] += 1
    begin
      v = mc.get(key, raw: true)
    rescue Dalli::DalliError
      b[3] += 1 # to the database, no set
      took = now - start
      lat << [start - t0, took]
      b[4] = took if took > b[4]
      sleep(db)
      next
    end
    took = now - start
    if v
      b[1] += 1
    else
      b[2] += 1 # a miss: the database, then set
      sleep(db)
      s = now
      begin
        mc.set(key, VALUE, 0, raw: true)
      rescue Dalli::DalliError
        nil
      end
      took += now - s
    end
    lat << [start - t0, took]
    b[4] = took if took > b[4]
  end
  puts JSON.generate(buckets: buckets, lat: lat)
end

mode, servers, nkeys = ARGV
mc = pool_client(servers.split(','))
Dalli.logger.level = Logger::ERROR
if mode == 'fill'
  fill(mc, nkeys.to_i)
else
  read(mc, nkeys.to_i, ARGV[3], ARGV[4].to_f, ARGV[5].to_f / 1000,
       ARGV[6].to_f)
end
