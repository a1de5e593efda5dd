-- A worker starts the attempt it took (webhook_take.lua), if its token is still the
-- delivery's, holding the delivery for hold_s from now. The attempt is in the log from now
-- on, `in_progress`; one that a lost worker left `in_progress` becomes `lost`. A delivery
-- that has had max_attempts attempts already fails instead.
--
-- Arguments: id (the delivery's), token, hold_s, max_attempts. Answers {} for a stale token
-- or a delivery failed now, else {Redis time, field, value, field, value, ...} of the delivery.
local key = G .. 'webhooks:delivery:' .. id
local v = redis.call('HMGET', key, 'token', 'status', 'endpoint', 'attempts', 'owner')
if v[1] ~= token or v[2] ~= 'pending' then return {} end

local t = now()
local attempts = cjson.decode(v[4] or '[]')
local last = attempts[#attempts]
if last and last.outcome == 'in_progress' then
  last.outcome = 'lost'
  last.reason = 'the worker making this attempt stopped before it ended'
end
if #attempts >= max_attempts then
  redis.call('HSET', key, 'attempts', cjson.encode(attempts), 'status', 'failed', 'token', '',
             'next_at', '')
  redis.call('ZREM', G .. 'webhooks:due', id)
  release(id, gates_of(v[3], v[5]), t)
  return {}
end
table.insert(attempts, {attempted_at = math.floor(t * 1000 + 0.5) / 1000,
                        outcome = 'in_progress', status_code = cjson.null,
                        duration_s = cjson.null, reason = cjson.null})
redis.call('HSET', key, 'attempts', cjson.encode(attempts))
hold(id, gates_of(v[3], v[5]), t + hold_s)
local answer = redis.call('HGETALL', key)
table.insert(answer, 1, stamp(t))
return answer
