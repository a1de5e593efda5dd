-- Record a webhook delivery, due at once: the delivery pool of some worker takes it
-- (webhook_take.lua). Idempotent: a delivery that exists already is left as it is (the relay
-- may repeat). None is made for an endpoint made through the API that is gone (deleted: its
-- deliveries were deleted with it, webhook_forget.lua).
--
-- Arguments: id (the delivery's), endpoint (its id), owner (its key name), made_here (true:
-- the endpoint was made through the API), ttl_s (the log's), then fields: field/value pairs.
-- Answers 1 when written, 0 when not.
local key = G .. 'webhooks:delivery:' .. id
if redis.call('EXISTS', key) == 1 then return 0 end
if made_here and redis.call('EXISTS', G .. 'webhooks:endpoint:' .. endpoint) == 0 then return 0 end

local t = now()
redis.call('HSET', key, unpack(ARGV, fields_at))
redis.call('HSET', key, 'id', id, 'endpoint', endpoint, 'owner', owner, 'status', 'pending',
           'attempts', '[]', 'token', '', 'created_at', stamp(t), 'next_at', stamp(t))
redis.call('EXPIRE', key, ttl_s)
index_delivery(id, endpoint, t, ttl_s)
redis.call('ZREMRANGEBYSCORE', G .. 'webhooks:deliveries:' .. endpoint, '-inf', t - ttl_s)
local log = G .. 'webhooks:log:' .. endpoint
redis.call('ZADD', log, t, id)
redis.call('ZREMRANGEBYSCORE', log, '-inf', t - ttl_s)
-- The log keeps the newest 1,000. One pushed out is deleted with it, unless it is an event's
-- first delivery still being retried (it ends on its schedule, then expires as any does): so
-- replays, which a key may make at will, leave at most 1,000 deliveries per endpoint.
for _, old in ipairs(redis.call('ZRANGE', log, 0, -1001)) do
  local v = redis.call('HMGET', G .. 'webhooks:delivery:' .. old, 'status', 'replay_of', 'owner')
  if v[1] ~= 'pending' or (v[2] or '') ~= '' then
    drop_delivery(old, endpoint, v[3], t)  -- an attempt of it running ends unrecorded
  end
end
redis.call('ZREMRANGEBYRANK', log, 0, -1001)
redis.call('ZADD', G .. 'webhooks:due', t, id)
return 1
