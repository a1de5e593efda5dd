-- One line of a batch has its result: recorded once, whoever reports it and however often
-- (the relay delivers at least once; the batch loop also looks for ended lines). The result is
-- the line as it will be written to the output ('o') or error ('e') file; the order list
-- gives the files' order; counts and token usage follow.
--
-- ARGV: batch id, line number, 'o' or 'e', the line, 'completed' or 'failed' (the count to
--       raise), input tokens, cached input tokens, output tokens, reasoning tokens,
--       '1' when the line never had a job (its batch ended first).
-- Answers 1 when recorded now, 0 when it was before (or the batch's files are written).
local id, line = ARGV[1], ARGV[2]
local v = redis.call('HMGET', K('batch', id), 'status', 'total', 'completed', 'failed')
if not v[1] or v[1] == 'completed' or v[1] == 'failed' or v[1] == 'cancelled'
    or v[1] == 'expired' then
  return 0
end
local total = tonumber(v[2]) or 0
if total > 0 and (tonumber(v[3]) or 0) + (tonumber(v[4]) or 0) >= total then return 0 end
if redis.call('HSETNX', K('results', id), line, ARGV[3] .. ARGV[4]) == 0 then return 0 end
redis.call('RPUSH', K('order', id), line)
redis.call('HINCRBY', K('batch', id), ARGV[5], 1)
local usage = {'input_tokens', 'cached_tokens', 'output_tokens', 'reasoning_tokens'}
for i, field in ipairs(usage) do
  if tonumber(ARGV[5 + i]) > 0 then redis.call('HINCRBY', K('batch', id), field, ARGV[5 + i]) end
end
if ARGV[10] == '1' then redis.call('HINCRBY', K('batch', id), 'skipped', 1) end
return 1
