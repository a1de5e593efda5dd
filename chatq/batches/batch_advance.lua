-- The batch loop moves a running batch on:
--   'expire'    its completion window has passed (by Redis's clock): `finalizing`, ending as
--               `expired` once its unfinished lines are stopped and accounted;
--   'finalize'  every line is fed and accounted: `finalizing`, its files to be written.
--
-- Arguments: id (the batch's), token (the lease holder's), op ('expire' or 'finalize').
-- Answers the batch's status now, or 'lost' when the lease is another's.
if redis.call('GET', K('lease', id)) ~= token then return 'lost' end
local v = redis.call('HMGET', K('batch', id), 'status', 'expires_at', 'total', 'completed',
                     'failed', 'feed_done')
if v[1] ~= 'in_progress' then return v[1] or 'missing' end
local t = now()
if op == 'expire' and t >= tonumber(v[2]) then
  redis.call('HSET', K('batch', id), 'status', 'finalizing', 'finalizing_at', stamp(t),
             'ending', 'expired')
elseif op == 'finalize' and v[6] == '1'
    and (tonumber(v[4]) or 0) + (tonumber(v[5]) or 0) >= tonumber(v[3]) then
  redis.call('HSET', K('batch', id), 'status', 'finalizing', 'finalizing_at', stamp(t))
else
  return v[1]
end
publish(G .. 'notify', id .. ' finalizing')
return 'finalizing'
