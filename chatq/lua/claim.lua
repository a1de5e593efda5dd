-- A worker takes a queued job for one run: the job (and its followers) in progress, its
-- first attempt counted, a lease of lease_s. Claiming again with the same run answers the
-- same, so a worker may retry a claim whose answer it lost.
--
-- ARGV: job id, run id, lease_s.
-- Answers {'claimed', request, owner, created_at}, or {status} of a job it cannot take
-- ('missing' when there is none).
local id, run, lease_s = ARGV[1], ARGV[2], tonumber(ARGV[3])
local v = redis.call('HMGET', K('job', id), 'status', 'run', 'request', 'owner', 'created_at')
if not v[1] then return {'missing'} end
local again = v[1] == IN_PROGRESS and v[2] == run
if v[1] ~= QUEUED and not again then return {v[1]} end
if not again then
  local t = now()
  redis.call('HSET', K('job', id), 'run', run, 'run_attempt', 1)
  redis.call('HINCRBY', K('job', id), 'attempts', 1)
  redis.call('ZADD', S(shard(id), 'leases'), t + lease_s, id)
  for _, j in ipairs(group(id)) do
    reset_text(j)
    set_status(j, IN_PROGRESS, t)
  end
end
return {'claimed', v[3], v[4], v[5]}
