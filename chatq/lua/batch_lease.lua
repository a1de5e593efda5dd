-- Take or renew the leases of batches: the worker holding a batch's lease runs its next step.
--
-- ARGV: holder token, lease in milliseconds, then the batch ids.
-- Answers, for each id in order, 1 when `token` holds its lease now, 0 when another does.
local token, lease_ms = ARGV[1], ARGV[2]
local held = {}
for i = 3, #ARGV do
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
