-- Make an endpoint of a key through the API unless the key has its most already: the count
-- and the write are one step, so concurrent creates never make more than the cap.
--
-- Keys: owned (the key name's set of endpoint ids), endpoint (the new endpoint's hash; both
-- under {g}).
-- Arguments: id (the endpoint's), most (endpoints the set may hold), then fields: the hash's
-- field/value pairs.
-- Answers 1 when made, 0 when the set holds its most already.
if redis.call('SCARD', owned) >= most then return 0 end
redis.call('HSET', endpoint, unpack(ARGV, fields_at))
redis.call('SADD', owned, id)
return 1
