-- Removes an ended job for good: its record, text, events and followers set, its place in
-- the leases, and the cached result it produced. A job that has not ended is left alone: the
-- caller cancels it first (an ended job never changes, so nothing can come in between).
--
-- Arguments: id (the job's).
-- Answers 'deleted', 'missing' (there is no such job), or the status of a job not ended.
local v = redis.call('HMGET', K('job', id), 'status', 'cache_key')
if not v[1] then return 'missing' end
if not is_terminal(v[1]) then return v[1] end
redis.call('DEL', K('job', id), K('text', id), K('events', id), K('followers', id))
redis.call('ZREM', leases_of(id), id)
if v[2] and v[2] ~= '' and digest_shard(v[2]) == shard(id) then
  redis.call('DEL', flight_key('cache', v[2]))
end
return 'deleted'
