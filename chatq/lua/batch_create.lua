-- A client creates a batch on one of its files: recorded as validating, in its owner's list
-- and in the set of unfinished batches that the workers' batch loop looks after. The file
-- cannot be deleted while the batch reads it. Times come from Redis's clock.
--
-- ARGV: batch id, owner, input file id, window_s, then the record's field/value pairs.
-- Answers {'created', created_at}, or {'missing'} when the file is gone, another owner's or
-- expired.
local id, owner, file_id, window_s = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local t = now()
local v = redis.call('HMGET', K('file', file_id), 'owner', 'expires_at')
if v[1] ~= owner or (v[2] and v[2] ~= '' and tonumber(v[2]) <= t) then return {'missing'} end
redis.call('HSET', K('batch', id), unpack(ARGV, 5))
redis.call('HSET', K('batch', id), 'created_at', stamp(t), 'expires_at', stamp(t + window_s))
redis.call('SADD', K('file_batches', file_id), id)
redis.call('ZADD', G .. 'batches:' .. owner, t, id)
redis.call('SADD', G .. 'batches_active', id)
return {'created', stamp(t)}
