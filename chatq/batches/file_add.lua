-- A committed upload becomes its owner's file: its metadata, its place in the owner's list
-- and in the janitor's, and its bytes in the owner's quota, in the same step as its upload's
-- hold is let go (so that its room is never counted twice, nor free in between).
--
-- Arguments: meta: the metadata's field/value pairs (chatq/batches/file_records.py new_meta). Answers 1.
local meta = {}
for i = meta_at, #ARGV, 2 do meta[ARGV[i]] = ARGV[i + 1] end
local id, owner = meta['id'], meta['owner']
redis.call('HSET', K('file', id), unpack(ARGV, meta_at))
redis.call('ZADD', G .. 'files:' .. owner, meta['created_at'], id)
if meta['expires_at'] and meta['expires_at'] ~= '' then
  redis.call('ZADD', G .. 'files_expiry', meta['expires_at'], id)
end
release_file_hold(owner, id)
count_file(owner, id, tonumber(meta['bytes']) or 0)
return 1
