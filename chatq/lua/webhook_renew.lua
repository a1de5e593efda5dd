-- A worker's attempts still running: each delivery whose token is still the one given is held
-- for hold_s more, so that no other worker takes it while its attempt runs.
--
-- ARGV: hold_s, then delivery id, token pairs. Answers how many were held.
local hold_s = tonumber(ARGV[1])
local t = now()
local held = 0
for i = 2, #ARGV - 1, 2 do
  local id = ARGV[i]
  local v = redis.call('HMGET', G .. 'webhooks:delivery:' .. id, 'token', 'status', 'endpoint')
  if v[1] == ARGV[i + 1] and v[2] == 'pending' then
    hold(id, v[3], t + hold_s)
    held = held + 1
  end
end
return held
