-- A client creates a batch on one of its files: recorded as validating, in its owner's list
-- and in the sets of unfinished batches (all of them, which the workers' batch loop looks
-- after, and its owner's, which max_active caps). The file cannot be deleted while the batch
-- reads it. Times come from Redis's clock.
--
-- Arguments: id (the batch's), owner, file_id (its input file's), window_s, max_active,
--       then record: the record's field/value pairs.
-- Answers {'created', created_at}; {'missing'} when the file is gone, another owner's or
-- expired; {'limit'} when the owner has max_active unfinished batches already.
local t = now()
local v = redis.call('HMGET', K('file', file_id), 'owner', 'expires_at')
if v[1] ~= owner or (v[2] and v[2] ~= '' and tonumber(v[2]) <= t) then return {'missing'} end
local mine = G .. 'batches_active:' .. owner
if redis.call('SCARD', mine) >= max_active then
  -- At the cap: first drop the ids of batches no longer unfinished (a record lost with
  -- Redis's data leaves the loop's set without passing by the finish script).
  for _, other in ipairs(redis.call('SMEMBERS', mine)) do
    if redis.call('SISMEMBER', G .. 'batches_active', other) == 0 then
      redis.call('SREM', mine, other)
    end
  end
  if redis.call('SCARD', mine) >= max_active then return {'limit'} end
end
redis.call('HSET', K('batch', id), unpack(ARGV, record_at))
redis.call('HSET', K('batch', id), 'created_at', stamp(t), 'expires_at', stamp(t + window_s))
redis.call('SADD', K('file_batches', file_id), id)
redis.call('ZADD', G .. 'batches:' .. owner, t, id)
redis.call('SADD', G .. 'batches_active', id)
redis.call('SADD', mine, id)
return {'created', stamp(t)}
