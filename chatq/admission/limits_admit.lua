-- Admission of one request of a key, in one step: its token budgets of the UTC day and
-- month, then its requests-per-minute and tokens-per-minute buckets are checked, and only
-- when all pass is it charged: one request, and `cost` tokens (its prompt and the output it
-- may ask for) held for job `job` until the job's end corrects them (limits_settle.lua).
--
-- Keys: state (the key's, a hash), held (the key's reservations, a hash: job id -> "cost
--       prompt day month"); both in one slot (the hash tag {limits:<name>}).
-- Arguments: mode ('admit', or 'peek': read only), job (its id), cost, prompt (tokens), rpm
--       (requests per minute), tpm (tokens per minute), per_day, per_month (tokens; 0: no
--       limit), keep_s.
-- Answers {verdict, wait_ms, remaining requests, ms until the requests bucket is full,
--          remaining tokens, ms until the tokens bucket is full, tokens today, requests today,
--          tokens this month, requests this month, tokens reserved, day start, day end,
--          month start, month end}; verdict 'ok' (charged), 'held' (this job was charged
--          before: nothing more), 'peek', or a refusal: 'day', 'month' (a budget),
--          'too_large' (more tokens than a minute allows), 'requests', 'tokens' (then wait_ms
--          is how long until it would pass).

local t = now()
local day = math.floor(t / 86400)
local month, month_start, month_end = month_of(day)
local v = redis.call('HMGET', state, 'rq', 'rq_at', 'tk', 'tk_at', 'day', 'day_tokens',
                     'day_requests', 'month', 'month_tokens', 'month_requests', 'reserved')
local rq, tk = level(rpm, v[1], v[2], t), level(tpm, v[3], v[4], t)
local day_tokens, day_requests, month_tokens, month_requests = 0, 0, 0, 0
if tonumber(v[5]) == day then
  day_tokens, day_requests = tonumber(v[6]) or 0, tonumber(v[7]) or 0
end
if tonumber(v[8]) == month then
  month_tokens, month_requests = tonumber(v[9]) or 0, tonumber(v[10]) or 0
end
local reserved = tonumber(v[11]) or 0

local function full_in_ms(cap, lvl)
  if cap <= 0 then return 0 end
  return math.ceil((cap - lvl) * 60000 / cap)
end

local function answer(verdict, wait_ms)
  return {verdict, wait_ms, math.max(0, math.floor(rq)), full_in_ms(rpm, rq),
          math.max(0, math.floor(tk)), full_in_ms(tpm, tk), day_tokens, day_requests,
          month_tokens, month_requests, reserved, day * 86400, (day + 1) * 86400,
          month_start, month_end}
end

if mode == 'peek' then return answer('peek', 0) end
if redis.call('HEXISTS', held, job) == 1 then return answer('held', 0) end
if per_day > 0 and day_tokens + cost > per_day then return answer('day', 0) end
if per_month > 0 and month_tokens + cost > per_month then return answer('month', 0) end
if tpm > 0 and cost > tpm then return answer('too_large', 0) end
local wait_rq, wait_tk = 0, 0
if rpm > 0 and rq < 1 then wait_rq = (1 - rq) * 60 / rpm end
if tpm > 0 and cost > tk then wait_tk = (cost - tk) * 60 / tpm end
if wait_rq > 0 or wait_tk > 0 then
  local verdict = (wait_tk > wait_rq) and 'tokens' or 'requests'
  return answer(verdict, math.ceil(math.max(wait_rq, wait_tk) * 1000))
end

-- Every check passed: charge it.
day_tokens, day_requests = day_tokens + cost, day_requests + 1
month_tokens, month_requests = month_tokens + cost, month_requests + 1
reserved = reserved + cost
redis.call('HSET', state, 'day', day, 'day_tokens', day_tokens, 'day_requests', day_requests,
           'month', month, 'month_tokens', month_tokens, 'month_requests', month_requests,
           'reserved', reserved)
if rpm > 0 then
  rq = rq - 1
  redis.call('HSET', state, 'rq', rq, 'rq_at', t)
end
if tpm > 0 then
  tk = tk - cost
  redis.call('HSET', state, 'tk', tk, 'tk_at', t)
end
redis.call('EXPIRE', state, keep_s)
if cost > 0 then
  redis.call('HSET', held, job, cost .. ' ' .. prompt .. ' ' .. day .. ' ' .. month)
  redis.call('EXPIRE', held, keep_s)
end
return answer('ok', 0)
