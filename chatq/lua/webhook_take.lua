-- Hand up to `limit` due deliveries to one worker's delivery pool: each gets a new dispatch
-- token (only its holder may run the attempt) and is held for hold_s: it stays in the due
-- set, due again when the hold runs out (its worker was lost), and counts among the
-- deliveries running, in all and at its endpoint. A delivery whose endpoint has
-- `endpoint_cap` attempts running waits for one of them to end (prelude: wait_for_slot). At
-- most `scan` due deliveries, and endpoints to look at again, are looked at.
--
-- ARGV: hold_s, limit, endpoint_cap, scan. Answers {id, token, id, token, ...}.
local hold_s, limit, cap, scan = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
                                 tonumber(ARGV[4])
local due = G .. 'webhooks:due'
local t = now()
redis.call('ZREMRANGEBYSCORE', G .. 'webhooks:running', '-inf', t)
-- Endpoints whose first hold ran out: a lost worker's slots are free again.
for _, endpoint in ipairs(redis.call('ZRANGEBYSCORE', G .. 'webhooks:waiting', '-inf', t,
                                     'LIMIT', 0, scan)) do
  unpark(endpoint, cap - busy_at(endpoint, t), t)
end
local taken = {}
local found = redis.call('ZRANGEBYSCORE', due, '-inf', t, 'WITHSCORES', 'LIMIT', 0, scan)
for i = 1, #found, 2 do
  if #taken >= 2 * limit then break end
  local id = found[i]
  local v = redis.call('HMGET', G .. 'webhooks:delivery:' .. id, 'status', 'endpoint')
  if v[1] ~= 'pending' then
    redis.call('ZREM', due, id)  -- expired, or ended
  elseif busy_at(v[2], t) >= cap then
    wait_for_slot(id, v[2], tonumber(found[i + 1]), t)
  else
    local token = stamp(t) .. '-' .. i
    redis.call('HSET', G .. 'webhooks:delivery:' .. id, 'token', token)
    hold(id, v[2], t + hold_s)
    table.insert(taken, id)
    table.insert(taken, token)
  end
end
return taken
