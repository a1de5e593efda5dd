-- Pacing the calls to one upstream endpoint within its rate limits, for every worker at once.
--
-- Each limit is a bucket, as the upstream's `x-ratelimit-*` headers describe it: `limit`
-- requests (or tokens) that refill continuously at `rate` per second. A call takes its share
-- before it is sent. When the bucket holds too little, the call takes its share all the same
-- and is told how long to wait: the level goes below zero by what was promised to the calls
-- still waiting, so each waits for its own turn and they do not all rush in at once.
--
-- A bucket is kept HEADROOM short of full: calls do not reach the upstream in the order, nor
-- at the moment, they took their turns (connections open, processes are busy), and this
-- cushion absorbs that without a 429 while the refill rate, hence the throughput, is the
-- upstream's own.
--
-- What a response said corrects the buckets: its limit and rate (unless configured), and a
-- level no higher than its `remaining` plus what refilled since that request was sent (the
-- upstream counts other clients too). A 429 that carries no such headers holds every call for
-- its Retry-After.
--
-- Keys: state, the endpoint's hash (chatq:{g}:pacing:<endpoint id>): rq_limit, rq_rate,
--       rq_level (requests), tk_limit, tk_rate, tk_level (tokens), at (the Redis time of the
--       levels), hold_until (a Redis time).
-- Arguments: rpm and tpm, the configured requests and tokens per minute (0: learn them);
--       then what a response said, or nil: rq_limit, rq_remaining, rq_full_in (requests
--       limit, remaining, seconds until full), tk_limit, tk_remaining, tk_full_in (the same
--       of tokens), age_s (seconds since its request was sent), hold_s (Retry-After seconds
--       of a 429 without limits); then the call to make: tokens (nil to only learn) and
--       max_wait_s, the longest it may wait.
-- Answers {taken, wait_ms, known}: known 0 when no limit is known (then the call is sent at
--         once); taken 1 when the call took its share and may be sent after wait_ms, 0 when
--         it would have to wait longer than it may (nothing is taken then).
local configured = {rq = rpm, tk = tpm}
local seen = {
  rq = {limit = rq_limit, remaining = rq_remaining, full_in = rq_full_in},
  tk = {limit = tk_limit, remaining = tk_remaining, full_in = tk_full_in},
}
age_s = age_s or 0
local KEEP_S = 3600
local HEADROOM = 0.05

local function cap_of(limit)
  return limit - math.min(math.ceil(limit * HEADROOM), math.max(limit - 1, 0))
end

local t = now()
local v = redis.call('HMGET', state, 'rq_limit', 'rq_rate', 'rq_level',
                     'tk_limit', 'tk_rate', 'tk_level', 'at', 'hold_until')
local at, hold_until = tonumber(v[7]) or t, tonumber(v[8]) or 0

-- Each bucket as it stands now.
local buckets = {}
for i, kind in ipairs({'rq', 'tk'}) do
  local limit, rate = tonumber(v[3 * i - 2]) or 0, tonumber(v[3 * i - 1]) or 0
  if configured[kind] > 0 then
    limit, rate = configured[kind], configured[kind] / 60
  end
  local level = tonumber(v[3 * i]) or cap_of(limit)
  buckets[kind] = {limit = limit, rate = rate,
                   level = math.min(cap_of(limit), level + (t - at) * rate)}
end

-- What the upstream said, if anything.
for kind, b in pairs(buckets) do
  local s = seen[kind]
  if s.limit and s.remaining then
    if configured[kind] <= 0 then
      if b.limit == 0 then b.level = cap_of(s.limit) end
      b.limit = s.limit
      if s.remaining < s.limit and s.full_in and s.full_in > 0 then
        b.rate = (s.limit - s.remaining) / s.full_in
      elseif b.rate == 0 then
        b.rate = s.limit / 60
      end
    end
    b.level = math.min(b.level, s.remaining + age_s * b.rate)
  end
end
if hold_s then hold_until = math.max(hold_until, t - age_s + hold_s) end

local known = buckets.rq.limit > 0 or buckets.tk.limit > 0
local function save()
  if not known then return end
  redis.call('HSET', state, 'rq_limit', buckets.rq.limit, 'rq_rate', buckets.rq.rate,
             'rq_level', buckets.rq.level, 'tk_limit', buckets.tk.limit,
             'tk_rate', buckets.tk.rate, 'tk_level', buckets.tk.level, 'at', t,
             'hold_until', hold_until)
  redis.call('EXPIRE', state, KEEP_S)
end

if not known then return {1, 0, 0} end
if not tokens then
  save()
  return {1, 0, 1}
end

-- The call's share of each limit (a call larger than a whole bucket is let through when the
-- bucket is full: the upstream decides), and when the last of them is there.
local wants = {rq = 1, tk = tokens}
local wait_s = math.max(0, hold_until - t)
for kind, b in pairs(buckets) do
  wants[kind] = math.min(wants[kind], cap_of(b.limit))
  if b.limit > 0 and b.rate > 0 and b.level < wants[kind] then
    wait_s = math.max(wait_s, (wants[kind] - b.level) / b.rate)
  end
end
if wait_s > max_wait_s then
  save()
  return {0, math.ceil(wait_s * 1000), 1}
end
for kind, b in pairs(buckets) do
  if b.limit > 0 then b.level = b.level - wants[kind] end
end
save()
return {1, math.ceil(wait_s * 1000), 1}
