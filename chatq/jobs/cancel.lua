-- A client cancels a job that has not ended. Its followers go back to the queue on their
-- own, each with a short lease (the caller sends their messages; if it cannot, the
-- sweeper will).
--
-- Arguments: id (the job's), lease_s, ttl_s.
-- Answers {'cancelled', ids of the followers to enqueue...}, or {status} of an ended job
-- ('missing' when there is none).
local v = redis.call('HMGET', K('job', id), 'status', 'leader')
if not v[1] then return {'missing'} end
if is_terminal(v[1]) then return {v[1]} end
local t = now()
if v[2] and v[2] ~= '' then redis.call('SREM', K('followers', v[2]), id) end
local answer = {CANCELLED}
for _, f in ipairs(redis.call('SMEMBERS', K('followers', id))) do
  redis.call('HDEL', K('job', f), 'leader')
  reset_text(f)
  set_status(f, QUEUED, t)
  redis.call('ZADD', leases_of(f), t + lease_s, f)
  table.insert(answer, f)
end
redis.call('DEL', K('followers', id))
release_flight(id)
close(id, {status = CANCELLED, t = t, ttl_s = ttl_s, reason = 'cancelled'}, true)
return answer
