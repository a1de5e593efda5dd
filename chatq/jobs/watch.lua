-- A request follows a queued job's events: its claim must announce that it started
-- (claim.lua announces it only then; everyone else waits for the end).
--
-- Arguments: id (the job's).
-- Answers 1, or 0 when the job is not queued (nothing to announce, or no such job).
if redis.call('HGET', K('job', id), 'status') ~= QUEUED then return 0 end
redis.call('HSET', K('job', id), 'watched', '1')
return 1
