-- Hand up to `limit` due deliveries to one worker's delivery pool: each gets a new dispatch
-- token (only its holder may run the attempt) and is held for hold_s: it stays in the due
-- set, due again when the hold runs out (its worker was lost), and counts among the
-- deliveries running, in all and at its endpoint. An endpoint with `endpoint_cap` deliveries
-- running is passed over: its due deliveries wait skip_s, so that they do not stand in
-- front of other endpoints' at the next take. At most `scan` due deliveries are looked at.
--
-- ARGV: hold_s, limit, endpoint_cap, scan, skip_s. Answers {id, token, id, token, ...}.
local hold_s, limit, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local scan, skip_s = tonumber(ARGV[4]), tonumber(ARGV[5])
local due = G .. 'webhooks:due'
local t = now()
redis.call('ZREMRANGEBYSCORE', G .. 'webhooks:running', '-inf', t)
local taken = {}
for i, id in ipairs(redis.call('ZRANGEBYSCORE', due, '-inf', t, 'LIMIT', 0, scan)) do
  if #taken >= 2 * limit then break end
  local v = redis.call('HMGET', G .. 'webhooks:delivery:' .. id, 'status', 'endpoint')
  if v[1] ~= 'pending' then
    redis.call('ZREM', due, id)  -- expired, or ended
  elseif busy_at(v[2], t) >= cap then
    redis.call('ZADD', due, t + skip_s, id)
  else
    local token = stamp(t) .. '-' .. i
    redis.call('HSET', G .. 'webhooks:delivery:' .. id, 'token', token)
    hold(id, v[2], t + hold_s)
    table.insert(taken, id)
    table.insert(taken, token)
  end
end
return taken
