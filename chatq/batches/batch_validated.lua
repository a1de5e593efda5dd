-- The batch loop has read the whole input file: its line count, how many lines are invalid
-- (each already accounted as an error line, its bit set in the bitmap), the first errors and
-- the model. A validating batch starts running (the caller ends one with no valid line); one
-- cancelled meanwhile stays `cancelling`.
--
-- Arguments: id (the batch's), token (the lease holder's), total (lines), invalid (lines),
--       errors_json (a list), model.
-- Answers the batch's status now, or 'lost' when the lease is another's.
if redis.call('GET', K('lease', id)) ~= token then return 'lost' end
local status = redis.call('HGET', K('batch', id), 'status')
if status ~= 'validating' and status ~= 'cancelling' then return status or 'missing' end
redis.call('HSET', K('batch', id), 'total', total, 'invalid', invalid, 'errors', errors_json,
           'model', model, 'validated', '1')
if status == 'validating' and total > invalid then
  redis.call('HSET', K('batch', id), 'status', 'in_progress', 'in_progress_at', stamp(now()))
  publish(G .. 'notify', id .. ' in_progress')
  return 'in_progress'
end
return status
