-- Accept a job. It is queued (with a short lease: if its message is never sent, the sweeper
-- finds that out), or follows an identical job in flight, or is written completed at once
-- (a cache hit). Its times come from Redis's clock.
--
-- ARGV: job id, ttl_s, lease_s, idempotency key, idempotency value, flight (a cache key),
--       max followers per leader, mode ('queue' or 'cached'), text (of a cache hit),
--       then the record's field/value pairs.
-- Answers {kind, value, created_at}:
--   {'created', '', t}           written;
--   {'earlier', value, ''}       the idempotency key was used: its value, nothing written;
--   {'follower', leader id, t}   written, following the leader;
--   {'cached', result, ''}       an identical job finished since the caller looked in the
--                                cache: its result; nothing written.
local id, ttl_s, lease_s = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local idem_key, idem_value, flight = ARGV[4], ARGV[5], ARGV[6]
local max_followers, mode, text = tonumber(ARGV[7]), ARGV[8], ARGV[9]

if idem_key ~= '' then
  local earlier = redis.call('GET', idem_key)
  if earlier then return {'earlier', earlier, ''} end
end
if flight ~= '' then
  local cached = redis.call('GET', P .. 'cache:' .. flight)
  if cached then return {'cached', cached, ''} end
end

local t = now()
if idem_key ~= '' then redis.call('SET', idem_key, idem_value, 'EX', ttl_s) end
redis.call('HSET', K('job', id), unpack(ARGV, 10))
redis.call('HSET', K('job', id), 'created_at', stamp(t))

if mode == 'cached' then
  redis.call('HSET', K('job', id), 'started_at', stamp(t), 'completed_at', stamp(t))
  if text ~= '' then redis.call('SET', K('text', id), text) end
  event(id, 'status', COMPLETED)
  event(id, 'delta', text)
  event(id, 'end', COMPLETED, redis.call('HGET', K('job', id), 'finish_reason'))
  expire_all(id, ttl_s)
  -- It ends as it is made: announced here, as close() announces the others (the outbox).
  if redis.call('HGET', K('job', id), 'announce') == '1' then
    redis.call('XADD', P .. 'outbox', 'MAXLEN', '~', 1000000, '*', 'id', id, 'status', COMPLETED)
  end
  return {'created', '', stamp(t)}
end

-- An active job never expires (its TTL starts when it ends): every one is in the leases
-- set, which the sweeper watches until it ends, or follows a job that is.
event(id, 'status', QUEUED)
if flight ~= '' then
  local leader = redis.call('GET', P .. 'inflight:' .. flight)
  local status = leader and redis.call('HGET', K('job', leader), 'status')
  local live = status and not is_terminal(status)
  if live and redis.call('SCARD', K('followers', leader)) < max_followers then
    redis.call('HSET', K('job', id), 'leader', leader)
    redis.call('SADD', K('followers', leader), id)
    if status == IN_PROGRESS then set_status(id, IN_PROGRESS, t) end
    local so_far = redis.call('GET', K('text', leader))
    if so_far and so_far ~= '' then append_text(id, so_far) end
    return {'follower', leader, stamp(t)}
  end
  if not live then
    -- Nobody runs this request now: this job does, and later identical ones follow it.
    -- (With the leader full, this job runs on its own and leaves the flight to it.)
    redis.call('SET', P .. 'inflight:' .. flight, id, 'EX', ttl_s)
    redis.call('HSET', K('job', id), 'flight', flight)
  end
end
stat('arrivals', 1, t)
redis.call('ZADD', P .. 'leases', t + lease_s, id)
return {'created', '', stamp(t)}
