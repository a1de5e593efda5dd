-- Hand the deliveries that are due to a worker: each gets a new dispatch token (so only the
-- message sent now may run the attempt) and stays in the due set, held for hold_s, so that a
-- message lost with a dead worker is sent again once the hold runs out.
--
-- ARGV: hold_s, most to take. Answers {id, token, id, token, ...}.
local hold_s, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local due = G .. 'webhooks:due'
local t = now()
local taken = {}
for i, id in ipairs(redis.call('ZRANGEBYSCORE', due, '-inf', t, 'LIMIT', 0, limit)) do
  local key = G .. 'webhooks:delivery:' .. id
  if redis.call('HGET', key, 'status') ~= 'pending' then
    redis.call('ZREM', due, id)  -- expired, or ended
  else
    local token = stamp(t) .. '-' .. i
    redis.call('HSET', key, 'token', token)
    redis.call('ZADD', due, t + hold_s, id)
    table.insert(taken, id)
    table.insert(taken, token)
  end
end
return taken
