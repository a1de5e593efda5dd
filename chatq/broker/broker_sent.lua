-- RabbitMQ broker only: the message of this job's current generation was confirmed by the
-- broker (durable queue, persistent message: it now outlives a broker restart). The mark is
-- the job's `takeovers` at the confirm: a takeover (sweep.lua) counts one more and so
-- invalidates it until the message of the new generation is confirmed in turn.
-- An ended job that has expired is not brought back as a stray hash.
--
-- Keys: job, the job's record. Answers 1 if marked, 0 if there is no such job.
if redis.call('EXISTS', job) == 0 then return 0 end
local takeovers = redis.call('HGET', job, 'takeovers') or '0'
redis.call('HSET', job, 'broker_sent', takeovers)
return 1
