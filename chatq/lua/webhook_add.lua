-- Record a webhook delivery, due at once: the delivery pool of some worker takes it
-- (webhook_take.lua). Idempotent: a delivery that exists already is left as it is (the relay
-- may repeat).
--
-- ARGV: delivery id, endpoint id, log ttl_s, then field/value pairs.
-- Answers 1 when written, 0 when the delivery existed.
local id, endpoint, ttl_s = ARGV[1], ARGV[2], tonumber(ARGV[3])
local key = G .. 'webhooks:delivery:' .. id
if redis.call('EXISTS', key) == 1 then return 0 end

local t = now()
redis.call('HSET', key, unpack(ARGV, 4))
redis.call('HSET', key, 'id', id, 'endpoint', endpoint, 'status', 'pending', 'attempts', '[]',
           'token', '', 'created_at', stamp(t), 'next_at', stamp(t))
redis.call('EXPIRE', key, ttl_s)
local log = G .. 'webhooks:log:' .. endpoint
redis.call('ZADD', log, t, id)
redis.call('ZREMRANGEBYSCORE', log, '-inf', t - ttl_s)
-- The log keeps the newest 1,000. One pushed out is deleted with it, unless it is an event's
-- first delivery still being retried (it ends on its schedule, then expires as any does): so
-- replays, which a key may make at will, leave at most 1,000 deliveries per endpoint.
for _, old in ipairs(redis.call('ZRANGE', log, 0, -1001)) do
  local old_key = G .. 'webhooks:delivery:' .. old
  local v = redis.call('HMGET', old_key, 'status', 'replay_of')
  if v[1] ~= 'pending' or (v[2] or '') ~= '' then
    redis.call('DEL', old_key)
    redis.call('ZREM', G .. 'webhooks:due', old)
    redis.call('ZREM', G .. 'webhooks:waiting:' .. endpoint, old)
    release(old, endpoint, t)  -- an attempt of it running ends unrecorded (its token is gone)
  end
end
redis.call('ZREMRANGEBYRANK', log, 0, -1001)
redis.call('ZADD', G .. 'webhooks:due', t, id)
return 1
