-- Make an endpoint of a key through the API unless the key has its most already: the count
-- and the write are one step, so concurrent creates never make more than the cap.
--
-- KEYS: the key name's set of endpoint ids, the new endpoint's hash (both under {g}).
-- ARGV: endpoint id, most endpoints the set may hold, then the hash's field/value pairs.
-- Answers 1 when made, 0 when the set holds its most already.
local owned, endpoint = KEYS[1], KEYS[2]
local id, most = ARGV[1], tonumber(ARGV[2])
if redis.call('SCARD', owned) >= most then return 0 end
redis.call('HSET', endpoint, unpack(ARGV, 3))
redis.call('SADD', owned, id)
return 1
