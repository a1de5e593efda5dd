-- A client cancels a batch: one still validating or in progress becomes `cancelling`, and the
-- workers' batch loop stops feeding it, cancels its queued lines and writes what was done.
-- A batch already finalizing or ended is left as it is.
--
-- Arguments: id (the batch's).
-- Answers the batch's status now ('missing' when there is none).
local status = redis.call('HGET', K('batch', id), 'status')
if not status then return 'missing' end
if status ~= 'validating' and status ~= 'in_progress' then return status end
redis.call('HSET', K('batch', id), 'status', 'cancelling', 'cancelling_at', stamp(now()),
           'ending', 'cancelled')
publish(G .. 'notify', id .. ' cancelling')
return 'cancelling'
