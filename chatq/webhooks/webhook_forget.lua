-- An endpoint is deleted (its record first, so that no delivery is added to it after:
-- webhook_add.lua): up to `page` of its deliveries are deleted, from its index of every
-- delivery that may still exist, then from its log (records made before the index). Each
-- leaves the schedule and the waiting sets; an attempt of one still running ends unrecorded
-- (its token is gone; its worker cuts it at its next renew, webhook_renew.lua), and the slot
-- it held at its key goes to the key's first delivery waiting. Called again until none is
-- left; then the endpoint's own sets go too.
--
-- Arguments: endpoint (its id), page. Answers how many are left (0: all gone).
local all, log = G .. 'webhooks:deliveries:' .. endpoint, G .. 'webhooks:log:' .. endpoint
local t = now()
local ids = redis.call('ZRANGE', all, 0, page - 1)
if #ids == 0 then ids = redis.call('ZRANGE', log, 0, page - 1) end
for _, id in ipairs(ids) do
  local owner = redis.call('HGET', G .. 'webhooks:delivery:' .. id, 'owner')
  drop_delivery(id, endpoint, owner, t)
end
local left = redis.call('ZCARD', all) + redis.call('ZCARD', log)
if left == 0 then
  local gate = endpoint_gate(endpoint)
  redis.call('DEL', gate.busy, gate.waiting)
  redis.call('ZREM', gate.index, endpoint)
end
return left
