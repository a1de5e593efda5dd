-- One line of a batch has its result: recorded once, whoever reports it and however often
-- (the relay delivers at least once; the batch loop also looks for ended lines). The result is
-- the line as it will be written to the output ('o') or error ('e') file; the order list
-- gives the files' order; counts and token usage follow.
--
-- Arguments: id (the batch's), line (its number), kind ('o' or 'e'), text (the line),
--       outcome ('completed' or 'failed': the count to raise), input_tokens, cached_tokens,
--       output_tokens, reasoning_tokens, skipped (true: the line never had a job, its batch
--       ended first).
-- Answers 1 when recorded now, 0 when it was before (or the batch's files are written).
local v = redis.call('HMGET', K('batch', id), 'status', 'total', 'completed', 'failed')
if not v[1] or v[1] == 'completed' or v[1] == 'failed' or v[1] == 'cancelled'
    or v[1] == 'expired' then
  return 0
end
local total = tonumber(v[2]) or 0
if total > 0 and (tonumber(v[3]) or 0) + (tonumber(v[4]) or 0) >= total then return 0 end
if redis.call('HSETNX', K('results', id), line, kind .. text) == 0 then return 0 end
redis.call('RPUSH', K('order', id), line)
redis.call('HINCRBY', K('batch', id), outcome, 1)
local usage = {{'input_tokens', input_tokens}, {'cached_tokens', cached_tokens},
               {'output_tokens', output_tokens}, {'reasoning_tokens', reasoning_tokens}}
for _, used in ipairs(usage) do
  if used[2] > 0 then redis.call('HINCRBY', K('batch', id), used[1], used[2]) end
end
if skipped then redis.call('HINCRBY', K('batch', id), 'skipped', 1) end
return 1
