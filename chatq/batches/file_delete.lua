-- Delete a file's metadata, unless an unfinished batch reads it (its bytes are the caller's to
-- remove once this answered 'deleted'); its room in its owner's quota is given back.
--
-- Arguments: id (the file's), owner ('' for the janitor, which deletes only a file that has expired).
-- Answers 'deleted', 'missing' (none, another owner's, or not yet expired) or 'in_use' (the
-- janitor then looks again in an hour, so that files in use never hide the others from it).
local v = redis.call('HMGET', K('file', id), 'owner', 'expires_at', 'bytes', 'counted')
if not v[1] then
  redis.call('ZREM', G .. 'files_expiry', id)
  return 'missing'
end
if owner ~= '' and v[1] ~= owner then return 'missing' end
if owner == '' and not (v[2] and v[2] ~= '' and tonumber(v[2]) <= now()) then return 'missing' end
if redis.call('SCARD', K('file_batches', id)) > 0 then
  if owner == '' then redis.call('ZADD', G .. 'files_expiry', now() + 3600, id) end
  return 'in_use'
end
redis.call('DEL', K('file', id))
redis.call('ZREM', G .. 'files:' .. v[1], id)
redis.call('ZREM', G .. 'files_expiry', id)
uncount_file(v[1], v[4], v[3])
return 'deleted'
