-- Accept a job. It is queued (with a short lease: if its message is never sent, the sweeper
-- finds that out), or follows an identical job in flight, or is written completed at once
-- (a cache hit). Its times come from Redis's clock. A job with a flight (a cache key) is in
-- that key's shard, so that identical requests meet here.
--
-- Arguments: id, ttl_s, lease_s, flight (a cache key, or ''), max_followers (per leader),
--       mode ('queue' or 'cached'), text (of a cache hit), may_exist (true: the id is not a
--       new one, look for its job first), queue and message (the broker's list and the run
--       message a worker takes it by, pushed when the job is to run, not when it follows
--       or is a cache hit; '' and '': the caller sends it), then the record's field/value
--       pairs.
-- Answers {kind, value, created_at}:
--   {'created', '', t}           written;
--   {'exists', '', ''}           a job with this id exists (a batch line made before; only
--                                looked for with may_exist): nothing written;
--   {'follower', leader id, t}   written, following the leader;
--   {'cached', result, ''}       an identical job finished since the caller looked in the
--                                cache: its result; nothing written.
if flight ~= '' and digest_shard(flight) ~= shard(id) then flight = '' end
if may_exist and redis.call('EXISTS', K('job', id)) == 1 then
  return {'exists', '', ''}
end

if flight ~= '' then
  local cached = redis.call('GET', flight_key('cache', flight))
  if cached then return {'cached', cached, ''} end
end

local t = now()
local record = {unpack(ARGV, record_at)}
table.insert(record, 'created_at')  -- Redis's clock, over any the caller gave
table.insert(record, stamp(t))
redis.call('HSET', K('job', id), unpack(record))

if mode == 'cached' then
  redis.call('HSET', K('job', id), 'started_at', stamp(t), 'completed_at', stamp(t))
  local whole = write_tail(id, text, ttl_s)
  end_event(id, COMPLETED, redis.call('HGET', K('job', id), 'finish_reason'), text)
  expire_all(id, ttl_s, whole ~= nil)
  -- Whoever must hear of a job's end (a webhook, a batch) hears of a cache hit's too.
  local said = redis.call('HMGET', K('job', id), 'announce', 'priority')
  if said[1] == '1' then announce_end(id, COMPLETED, said[2]) end
  return {'created', '', stamp(t)}
end

-- An active job never expires (its TTL starts when it ends): every one is in its shard's
-- leases, which the sweeper watches until it ends, or follows a job that is.
event(id, 'status', QUEUED)
if flight ~= '' then
  local leader = redis.call('GET', flight_key('inflight', flight))
  local status = leader and redis.call('HGET', K('job', leader), 'status')
  local live = status and not is_terminal(status)
  if live and redis.call('SCARD', K('followers', leader)) < max_followers then
    redis.call('HSET', K('job', id), 'leader', leader)
    redis.call('SADD', K('followers', leader), id)
    redis.call('HSET', K('job', leader), 'followed', '1')
    if status == IN_PROGRESS then set_status(id, IN_PROGRESS, t) end
    local so_far = redis.call('GET', K('text', leader))
    if so_far and so_far ~= '' then append_text(id, so_far) end
    return {'follower', leader, stamp(t)}
  end
  if not live then
    -- Nobody runs this request now: this job does, and later identical ones follow it.
    -- (With the leader full, this job runs on its own and leaves the flight to it.)
    redis.call('SET', flight_key('inflight', flight), id, 'EX', ttl_s)
    redis.call('HSET', K('job', id), 'flight', flight)
  end
end
redis.call('ZADD', leases_of(id), t + lease_s, id)
-- In the same step as the job, so that no job waits queued without its message: the wait a
-- worker sees starts when the job does.
if queue ~= '' then redis.call('LPUSH', queue, message) end
return {'created', '', stamp(t)}
