-- Record one attempt of a delivery in place of its `in_progress` entry, if the worker that
-- made it still holds the delivery (its token): the delivery is then 'delivered', 'failed'
-- (for good), or 'pending' again, due in delay_s. `disable` (an endpoint id) disables that
-- endpoint with `reason`.
--
-- Arguments: id (the delivery's), token, status, attempt (JSON object), delay_s, ttl_s,
-- disable, reason.
-- Answers 1 when recorded, 0 when the token was stale.
local key = G .. 'webhooks:delivery:' .. id
local due = G .. 'webhooks:due'
local v = redis.call('HMGET', key, 'token', 'endpoint', 'attempts', 'owner')
if v[1] ~= token then return 0 end

local t = now()
local attempts = cjson.decode(v[3] or '[]')
local last = attempts[#attempts]
if last and last.outcome == 'in_progress' then
  attempts[#attempts] = cjson.decode(attempt)
else
  table.insert(attempts, cjson.decode(attempt))
end
redis.call('HSET', key, 'attempts', cjson.encode(attempts), 'status', status, 'token', '')
if status == 'pending' then
  redis.call('HSET', key, 'next_at', stamp(t + delay_s))
  redis.call('ZADD', due, t + delay_s, id)
else
  redis.call('HSET', key, 'next_at', '')
  redis.call('ZREM', due, id)
end
release(id, gates_of(v[2], v[4]), t)
redis.call('EXPIRE', key, ttl_s)
index_delivery(id, v[2], t, ttl_s)
if disable ~= '' then redis.call('HSET', G .. 'webhooks:disabled', disable, reason) end
return 1
