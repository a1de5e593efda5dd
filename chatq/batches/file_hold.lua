-- An upload in progress holds room in its key's file quota, so that uploads running at once
-- on any web cannot pass it together; it asks again, for more, as its bytes arrive.
--
-- Arguments: owner, id (the upload's), need (bytes it must hold now), want (bytes it would
-- hold, to ask less often; at least need), max_bytes and max_files (the key's), hold_s (the hold lapses
-- this long after its last call: its web died mid-upload).
-- Answers {'held', bytes held}, or {'bytes', bytes the key's files take} when the bytes
-- would pass the quota, or {'files', the key's files} when one more file would.
local t = now()
local until_key = G .. 'files_hold_until:' .. owner
for _, lapsed in ipairs(redis.call('ZRANGEBYSCORE', until_key, '-inf', t, 'LIMIT', 0, 100)) do
  release_file_hold(owner, lapsed)
end
local held = redis.call('HGET', G .. 'files_holds:' .. owner, id)
held = held and tonumber(held) or nil
local u = redis.call('HMGET', files_usage(owner), 'bytes', 'count', 'held_bytes', 'held_count')
local bytes, count = tonumber(u[1]) or 0, tonumber(u[2]) or 0
local held_bytes, held_count = tonumber(u[3]) or 0, tonumber(u[4]) or 0
if not held and count + held_count + 1 > max_files then return {'files', count} end
local room = max_bytes - bytes - held_bytes + (held or 0)
if need > room then return {'bytes', bytes} end
local grant = math.max(held or 0, math.min(want, room))
redis.call('HSET', G .. 'files_holds:' .. owner, id, grant)
redis.call('HINCRBY', files_usage(owner), 'held_bytes', grant - (held or 0))
if not held then redis.call('HINCRBY', files_usage(owner), 'held_count', 1) end
redis.call('ZADD', until_key, t + hold_s, id)
return {'held', grant}
