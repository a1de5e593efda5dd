-- A worker process's heartbeat: renews the leases of the runs it holds, and records the
-- worker as alive with its slots (for /v1/queue), by Redis's clock.
--
-- ARGV: lease_s, worker name, slots, busy, then (job id, run id) pairs.
-- Answers, per pair, 'held', 'cancelled' (stop it) or 'lost' (another run has it, or it ended).
local lease_s, worker, slots, busy = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local t = now()
redis.call('HSET', P .. 'workers', worker, slots .. ' ' .. busy .. ' ' .. stamp(t))
local answer = {}
for i = 5, #ARGV, 2 do
  local id, run = ARGV[i], ARGV[i + 1]
  local v = redis.call('HMGET', K('job', id), 'status', 'run')
  if v[1] == IN_PROGRESS and v[2] == run then
    redis.call('ZADD', P .. 'leases', t + lease_s, id)
    redis.call('HDEL', K('job', id), 'suspect')
    table.insert(answer, 'held')
  elseif v[1] == CANCELLED then
    table.insert(answer, 'cancelled')
  else
    table.insert(answer, 'lost')
  end
end
return answer
