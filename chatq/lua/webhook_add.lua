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
redis.call('ZREMRANGEBYRANK', log, 0, -1001)
redis.call('ZADD', G .. 'webhooks:due', t, id)
return 1
