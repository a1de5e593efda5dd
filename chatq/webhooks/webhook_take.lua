-- Hand up to `limit` due deliveries to one worker's delivery pool: each gets a new dispatch
-- token (only its holder may run the attempt) and is held for hold_s: it stays in the due
-- set, due again when the hold runs out (its worker was lost), and counts among the
-- deliveries running, in all and at its gates (prelude: endpoint_gate, key_gate). A delivery
-- whose endpoint has `endpoint_cap` attempts running, or whose key has `key_cap`, waits for
-- one of them to end (prelude: wait_for_slot), so that it never stands in front of other
-- endpoints' or keys'. At most `scan` due deliveries, and gates of each kind to look at again,
-- are looked at.
--
-- Arguments: hold_s, limit, endpoint_cap, key_cap, scan. Answers {id, token, id, token, ...}.
local caps = {endpoint_cap, key_cap}  -- in the order of gates_of
local due = G .. 'webhooks:due'
local t = now()
redis.call('ZREMRANGEBYSCORE', G .. 'webhooks:running', '-inf', t)
-- Gates whose first hold ran out: a lost worker's slots are free again.
for i, kind in ipairs({{ENDPOINTS_WAITING, endpoint_gate}, {KEYS_WAITING, key_gate}}) do
  for _, name in ipairs(redis.call('ZRANGEBYSCORE', kind[1], '-inf', t, 'LIMIT', 0, scan)) do
    local gate = kind[2](name)
    unpark(gate, caps[i] - busy_at(gate, t), t)
  end
end

-- The first of the gates that has its cap of attempts running, if any.
local function full(gates)
  for i, gate in ipairs(gates) do
    if busy_at(gate, t) >= caps[i] then return gate end
  end
  return nil
end

local taken = {}
local found = redis.call('ZRANGEBYSCORE', due, '-inf', t, 'WITHSCORES', 'LIMIT', 0, scan)
for i = 1, #found, 2 do
  if #taken >= 2 * limit then break end
  local id = found[i]
  local v = redis.call('HMGET', G .. 'webhooks:delivery:' .. id, 'status', 'endpoint', 'owner')
  if v[1] ~= 'pending' then
    redis.call('ZREM', due, id)  -- expired, ended, or deleted
  else
    local gates = gates_of(v[2], v[3])
    local at_cap = full(gates)
    if at_cap then
      wait_for_slot(id, at_cap, tonumber(found[i + 1]), t)
    else
      local token = stamp(t) .. '-' .. i
      redis.call('HSET', G .. 'webhooks:delivery:' .. id, 'token', token)
      hold(id, gates, t + hold_s)
      table.insert(taken, id)
      table.insert(taken, token)
    end
  end
end
return taken
