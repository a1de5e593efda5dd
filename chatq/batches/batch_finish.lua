-- The batch ends as `completed`, `cancelled`, `expired` or `failed`: its output and error files
-- (already committed to the file storage) are recorded as its owner's (and count in its
-- quota: never refused, as the batch was accepted, but later uploads are), its per-line results
-- are dropped, it leaves the sets of unfinished batches (all, and its owner's), its input file
-- may be deleted again, and it expires ttl_s from now.
--
-- Arguments: id (the batch's), token (the lease holder's), final (status), ttl_s, then files:
--       for each file written, 'output_file_id' or 'error_file_id', file id, bytes, lines,
--       filename, expires_s.
-- Answers the batch's status now, or 'lost' when the lease is another's.
if redis.call('GET', K('lease', id)) ~= token then return 'lost' end
local v = redis.call('HMGET', K('batch', id), 'status', 'owner', 'input_file_id')
if not v[1] then return 'missing' end
if v[1] == 'completed' or v[1] == 'failed' or v[1] == 'cancelled' or v[1] == 'expired' then
  return v[1]
end
local t = now()
for i = files_at, #ARGV, 6 do
  local file_id = ARGV[i + 1]
  local expires_at = t + tonumber(ARGV[i + 5])
  redis.call('HSET', K('file', file_id), 'id', file_id, 'owner', v[2], 'bytes', ARGV[i + 2],
             'lines', ARGV[i + 3], 'filename', ARGV[i + 4], 'purpose', 'batch_output',
             'created_at', stamp(t), 'expires_at', stamp(expires_at))
  redis.call('ZADD', G .. 'files:' .. v[2], t, file_id)
  redis.call('ZADD', G .. 'files_expiry', expires_at, file_id)
  count_file(v[2], file_id, tonumber(ARGV[i + 2]))
  redis.call('HSET', K('batch', id), ARGV[i], file_id)
end
redis.call('HSET', K('batch', id), 'status', final, final .. '_at', stamp(t))
redis.call('SREM', G .. 'batches_active', id)
redis.call('SREM', G .. 'batches_active:' .. v[2], id)
redis.call('SREM', K('file_batches', v[3]), id)
redis.call('DEL', K('results', id), K('order', id), K('invalid', id), K('lease', id))
redis.call('EXPIRE', K('batch', id), ttl_s)
publish(G .. 'notify', id .. ' ' .. final)
return final
