-- A worker takes a queued job for one run: the job (and its followers) in progress, its
-- first attempt counted, a lease of lease_s. Claiming again with the same run answers the
-- same, so a worker may retry a claim whose answer it lost. The start is announced only if
-- a request follows the job's events (watch.lua): the others wait for its end.
--
-- A tenant (the job's owner) may have at most its cap of jobs running: over it, the job stays
-- queued and is parked (the worker drops its message; the sweeper sends it again once its
-- lease of park_s runs out). Only a capped tenant's jobs are counted in its running set
-- (the job's field `counted` says so); the running and parked sets are kept on one Redis
-- only: on a Cluster they would be in another slot, and no cap is passed.
--
-- Arguments: id, run, lease_s, park_s, cap (the owners' cap, 0: none), then caps: owner/cap
--       pairs that override it.
-- Answers {'claimed', request, owner, created_at, prompt_tokens ('' when not counted),
--          traceparent, tracestate, trace_link ('' when the job has none)}: a batch line's
--          trace_link is its batch's traceparent, which its run links to.
-- {'capped'}, or {status} of a job it cannot take ('missing' when there is none).
local v = redis.call('HMGET', K('job', id), 'status', 'run', 'request', 'owner', 'created_at',
                     'priority', 'attempts', 'started_at', 'parked', 'followed', 'watched',
                     'prompt_tokens', 'traceparent', 'tracestate', 'trace_link')
if not v[1] then return {'missing'} end
local again = v[1] == IN_PROGRESS and v[2] == run
if v[1] ~= QUEUED and not again then return {v[1]} end

local function cap_of(owner)
  for i = caps_at, #ARGV, 2 do
    if ARGV[i] == owner then return tonumber(ARGV[i + 1]) end
  end
  return cap
end

if not again then
  local t = now()
  local owner, lane = v[4] or '', v[6] or ''
  local attempts = tonumber(v[7]) or 0
  local started_at = (not v[8] or v[8] == '') and stamp(t) or v[8]
  -- The job itself in one write (set_status's, less a read: started_at is known).
  local written = {'run', run, 'run_attempt', 1, 'attempts', attempts + 1,
                   'status', IN_PROGRESS, 'started_at', started_at}
  if not SHARDED then
    local cap = cap_of(owner)
    if cap > 0 and redis.call('SCARD', K('running', owner)) >= cap then
      redis.call('ZADD', K('parked', lane), t, id)
      redis.call('ZADD', leases_of(id), t + park_s, id)
      redis.call('HSET', K('job', id), 'parked', '1')
      redis.call('HDEL', K('job', id), 'broker_sent')  -- RabbitMQ: its message is gone
      return {'capped'}
    end
    if cap > 0 then
      redis.call('SADD', K('running', owner), id)
      table.insert(written, 'counted')
      table.insert(written, '1')
    end
    if v[9] == '1' then
      redis.call('ZREM', K('parked', lane), id)
      table.insert(written, 'parked')
      table.insert(written, '0')
    end
  end
  redis.call('HSET', K('job', id), unpack(written))
  redis.call('ZADD', leases_of(id), t + lease_s, id)
  -- Only an earlier run can have left text (a job taken over is claimed again).
  for i, j in ipairs(group(id, v[10] == '1')) do
    if attempts > 0 then reset_text(j) end
    if i == 1 then
      event(j, 'status', IN_PROGRESS)
      if v[11] == '1' then notify(j, IN_PROGRESS) end
    else
      set_status(j, IN_PROGRESS, t)
    end
  end
end
return {'claimed', v[3], v[4], v[5], v[12] or '', v[13] or '', v[14] or '', v[15] or ''}
