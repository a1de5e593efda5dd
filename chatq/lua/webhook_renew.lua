-- A worker's attempts still running: each delivery whose token is still the one given is held
-- for hold_s more, so that no other worker takes it while its attempt runs.
--
-- ARGV: hold_s, then delivery id, token pairs. Answers the ids held; the others' attempts are
-- to end at once (taken over, ended, or deleted with their endpoint).
local hold_s = tonumber(ARGV[1])
local t = now()
local held = {}
for i = 2, #ARGV - 1, 2 do
  local id = ARGV[i]
  local v = redis.call('HMGET', G .. 'webhooks:delivery:' .. id, 'token', 'status', 'endpoint',
                      'owner')
  if v[1] == ARGV[i + 1] and v[2] == 'pending' then
    hold(id, gates_of(v[3], v[4]), t + hold_s)
    table.insert(held, id)
  end
end
return held
