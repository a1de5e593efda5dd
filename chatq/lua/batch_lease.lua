-- Take or renew the lease of one batch: the worker holding it runs the batch's next step.
--
-- ARGV: batch id, holder token, lease in milliseconds.
-- Answers 1 when `token` holds the lease now, 0 when another does.
local key = K('lease', ARGV[1])
local holder = redis.call('GET', key)
if holder == ARGV[2] then
  redis.call('PEXPIRE', key, ARGV[3])
  return 1
end
if holder then return 0 end
redis.call('SET', key, ARGV[2], 'PX', ARGV[3])
return 1
