-- A worker process's heartbeat: renews the leases of the runs it holds, by Redis's clock.
-- (The caller records the worker itself, in a key of another slot.)
--
-- Arguments: lease_s, then runs: (job id, run id) pairs.
-- Answers {Redis time, then per pair 'held', 'cancelled' (stop it) or 'lost' (another run has
-- it, or it ended)}.
local t = now()
local answer = {stamp(t)}
for i = runs_at, #ARGV, 2 do
  local id, run = ARGV[i], ARGV[i + 1]
  local v = redis.call('HMGET', K('job', id), 'status', 'run')
  if v[1] == IN_PROGRESS and v[2] == run then
    redis.call('ZADD', leases_of(id), t + lease_s, id)
    redis.call('HDEL', K('job', id), 'suspect')
    table.insert(answer, 'held')
  elseif v[1] == CANCELLED then
    table.insert(answer, 'cancelled')
  else
    table.insert(answer, 'lost')
  end
end
return answer
