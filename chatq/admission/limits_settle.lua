-- A job charged by limits_admit.lua ended (or was never made): what it held is replaced by
-- what it used. The tokens-per-minute bucket gets back (or loses) the difference, and so do
-- the day's and the month's use if the job was charged to the day and month still counted.
-- Once per job: its reservation is removed by the same step, so a repeat does nothing.
--
-- Keys: state, held (as limits_admit.lua).
-- Arguments: job (its id), how it ended ('exact': it used `tokens`; 'prompt': its prompt
--       count plus `tokens`; 'keep': unknown, what was held stands), tokens, tpm (tokens per
--       minute).
-- Answers the tokens it is now charged, or -1 when nothing was held for it.

local entry = redis.call('HGET', held, job)
if not entry then return -1 end
redis.call('HDEL', held, job)
local cost, prompt, day, month = string.match(entry, '^(%S+) (%S+) (%S+) (%S+)$')
cost, prompt, day, month = tonumber(cost), tonumber(prompt), tonumber(day), tonumber(month)
local used = cost
if how == 'exact' then used = tokens elseif how == 'prompt' then used = prompt + tokens end
local delta = used - cost

local t = now()
local v = redis.call('HMGET', state, 'tk', 'tk_at', 'day', 'day_tokens', 'month',
                     'month_tokens', 'reserved')
if tpm > 0 and v[1] then
  local tk = math.max(-tpm, math.min(tpm, level(tpm, v[1], v[2], t) - delta))
  redis.call('HSET', state, 'tk', tk, 'tk_at', t)
end
if tonumber(v[3]) == day then
  redis.call('HSET', state, 'day_tokens', math.max(0, (tonumber(v[4]) or 0) + delta))
end
if tonumber(v[5]) == month then
  redis.call('HSET', state, 'month_tokens', math.max(0, (tonumber(v[6]) or 0) + delta))
end
redis.call('HSET', state, 'reserved', math.max(0, (tonumber(v[7]) or 0) - cost))
return used
