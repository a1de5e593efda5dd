-- A worker's attempts still running: each delivery whose token is still the one given is held
-- for hold_s more, so that no other worker takes it while its attempt runs.
--
-- Arguments: hold_s, then held: delivery id, token pairs. Answers the ids held; the others' attempts are
-- to end at once (taken over, ended, or deleted with their endpoint).
local t = now()
local held = {}
for i = held_at, #ARGV - 1, 2 do
  local id = ARGV[i]
  local v = redis.call('HMGET', G .. 'webhooks:delivery:' .. id, 'token', 'status', 'endpoint',
                      'owner')
  if v[1] == ARGV[i + 1] and v[2] == 'pending' then
    hold(id, gates_of(v[3], v[4]), t + hold_s)
    table.insert(held, id)
  end
end
return held
