-- The run that holds the job ends it, and its followers alike: the last piece of text
-- appended, `fields` written, status and end events, lease dropped, expiry set. A completed
-- result with a cache key goes to the cache.
--
-- Arguments: id, run, status, reason (the finish reason), tail (the last piece of text),
--       ttl_s, then fields: field/value pairs.
-- Answers 1, or 0 when the run no longer holds the job. Repeating a finish that went
-- through answers 1 again and changes nothing.
-- One read of the whole record: the checks below, the end's, and the notification's copy.
local job = fields_of(id)
if not job then return 0 end
if job.status == status and job.ended_by == run then return 1 end
if not (job.status == IN_PROGRESS and job.run == run) then return 0 end
local cache_key, cache_ttl = job.cache_key, job.cache_ttl
local fields = {unpack(ARGV, fields_at)}
table.insert(fields, 'ended_by')
table.insert(fields, run)
local ending = {status = status, t = now(), ttl_s = ttl_s, reason = reason, fields = fields,
                tail = tail}
close_group(id, ending, group(id, job.followed == '1'), job)
local cacheable = cache_key and cache_key ~= '' and digest_shard(cache_key) == shard(id)
if status == COMPLETED and cacheable then
  for i = 1, #fields, 2 do
    if fields[i] == 'result' then
      redis.call('SET', flight_key('cache', cache_key), fields[i + 1], 'EX', cache_ttl)
    end
  end
end
return 1
