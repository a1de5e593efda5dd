-- The sweeper's step: acts on up to `limit` jobs whose lease ran out by Redis's clock.
--   A queued job: its lease is pushed resend_s ahead; the caller sends its message again
--     only if the broker has lost it ('queued'), or at once if a claim parked it over its
--     tenant's running cap ('parked').
--   A running job whose lease ran out is first only noted ('suspect'): Redis may have been
--     away (paused, restarted) while its worker went on, and that worker's next heartbeat
--     clears the note. Still unrenewed a whole lease after the note, its worker is gone: back
--     to the queue with a short lease ('requeued'), or failed once taken over more than
--     max_takeovers times ('failed').
--   An ended or vanished job: dropped from the leases ('gone').
--
-- Arguments: limit (per shard), lease_s, resend_s, max_takeovers, ttl_s, error_json (of a
--       failed job), then shards: the shards whose leases to sweep (on a Cluster one, a
--       slot of its own; on one Redis the first, whose key holds every lease: leases_of).
-- A job that leaves the running (requeued) or is sent again (queued) leaves its tenant's
-- running and parked jobs too.
-- Answers {id, outcome, priority, owner, ...} for each job acted on.
local t = now()
local due = {}
for i = shards_at, #ARGV do
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', S(ARGV[i], 'leases'), '-inf', t,
                                 'LIMIT', 0, limit)) do
    table.insert(due, id)
  end
end
local answer = {}
for _, id in ipairs(due) do
  local v = redis.call('HMGET', K('job', id), 'status', 'priority', 'suspect', 'owner')
  local outcome
  if not v[1] or is_terminal(v[1]) then
    redis.call('ZREM', leases_of(id), id)
    outcome = 'gone'
  elseif v[1] == QUEUED then
    -- A claim that parked it dropped its message (claim.lua): no need to ask the broker.
    local parked = not SHARDED and redis.call('ZSCORE', K('parked', v[2] or ''), id)
    not_running(id)
    redis.call('ZADD', leases_of(id), t + resend_s, id)
    outcome = parked and 'parked' or 'queued'
  elseif t - tonumber(v[3] or t) < lease_s then
    if not v[3] then redis.call('HSET', K('job', id), 'suspect', stamp(t)) end
    outcome = 'suspect'
  elseif redis.call('HDEL', K('job', id), 'suspect') and
         redis.call('HINCRBY', K('job', id), 'takeovers', 1) > max_takeovers then
    close_group(id, {status = FAILED, t = t, ttl_s = ttl_s, reason = 'error',
                     fields = {'error', error_json}})
    outcome = 'failed'
  else
    not_running(id)
    redis.call('HSET', K('job', id), 'run', '')
    redis.call('ZADD', leases_of(id), t + lease_s, id)
    for _, j in ipairs(group(id)) do set_status(j, QUEUED, t) end
    outcome = 'requeued'
  end
  table.insert(answer, id)
  table.insert(answer, outcome)
  table.insert(answer, v[2] or '')
  table.insert(answer, v[4] or '')
end
return answer
