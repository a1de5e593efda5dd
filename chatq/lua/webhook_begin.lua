-- A worker starts the attempt its message names, if that message is still the one in charge
-- (its token is the delivery's), holding the delivery for hold_s from now.
--
-- ARGV: delivery id, token, hold_s. Answers {} for a stale message, else
-- {Redis time, field, value, field, value, ...} of the delivery.
local id, token, hold_s = ARGV[1], ARGV[2], tonumber(ARGV[3])
local key = G .. 'webhooks:delivery:' .. id
local v = redis.call('HMGET', key, 'token', 'status')
if v[1] ~= token or v[2] ~= 'pending' then return {} end
local t = now()
redis.call('ZADD', G .. 'webhooks:due', t + hold_s, id)
local answer = redis.call('HGETALL', key)
table.insert(answer, 1, stamp(t))
return answer
