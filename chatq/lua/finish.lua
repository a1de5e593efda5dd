-- The run that holds the job ends it, and its followers alike: the last piece of text
-- appended, `fields` written, status and end events, lease dropped, expiry set. A completed
-- result with a cache key goes to the cache.
--
-- ARGV: job id, run id, status, finish reason, last piece of text, ttl_s,
--       then field/value pairs.
-- Answers 1, or 0 when the run no longer holds the job. Repeating a finish that went
-- through answers 1 again and changes nothing.
local id, run, status, reason = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local tail, ttl_s = ARGV[5], tonumber(ARGV[6])
local v = redis.call('HMGET', K('job', id), 'status', 'ended_by', 'cache_key', 'cache_ttl', 'run',
                     'followed', 'flight')
if v[1] == status and v[2] == run then return 1 end
if not (v[1] == IN_PROGRESS and v[5] == run) then return 0 end
local members = group(id, v[6])
if tail ~= '' then
  -- Quiet: the end's notification, right after, carries the whole text.
  for _, j in ipairs(members) do append_text(j, tail, true) end
end
local fields = {unpack(ARGV, 7)}
table.insert(fields, 'ended_by')
table.insert(fields, run)
close_group(id, status, now(), ttl_s, reason, fields, members, v[7])
if status == COMPLETED and v[3] and v[3] ~= '' and digest_shard(v[3]) == shard(id) then
  local result = redis.call('HGET', K('job', id), 'result')
  redis.call('SET', flight_key('cache', v[3]), result, 'EX', v[4])
end
return 1
