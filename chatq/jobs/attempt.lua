-- Another upstream attempt of the run that holds the job: counted once, the partial text
-- of the job and its followers dropped (a `reset` event if there was any).
--
-- Arguments: id (the job's), run, n (the run's attempt number: 2, 3, ...).
-- Answers 1, or 0 when the run no longer holds the job. Repeating it changes nothing.
local ours, followed = owned(id, run)
if not ours then return 0 end
if tonumber(redis.call('HGET', K('job', id), 'run_attempt') or '0') >= n then return 1 end
redis.call('HSET', K('job', id), 'run_attempt', n)
redis.call('HINCRBY', K('job', id), 'attempts', 1)
for _, j in ipairs(group(id, followed)) do reset_text(j) end
return 1
