-- Take or renew the leases of batches: the worker holding a batch's lease runs its next step.
--
-- Arguments: token (the holder's), lease_ms, then ids: the batches'.
-- Answers, for each id in order, 1 when `token` holds its lease now, 0 when another does.
local held = {}
for i = ids_at, #ARGV do
  local key = K('lease', ARGV[i])
  local holder = redis.call('GET', key)
  if holder == token then
    redis.call('PEXPIRE', key, lease_ms)
    held[#held + 1] = 1
  elseif holder then
    held[#held + 1] = 0
  else
    redis.call('SET', key, token, 'PX', lease_ms)
    held[#held + 1] = 1
  end
end
return held
