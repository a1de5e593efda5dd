-- The feeder has made the jobs of the lines before `new_line` (every valid one has its job):
-- the cursor moves there, once, and only for the lease holder that read from `old_line`.
--
-- ARGV: batch id, lease holder, old line, new line, new byte offset, lines fed, '1' when the
--       whole file has been read.
-- Answers 1 when moved, 0 when the lease or the cursor was not what the caller thought.
local id, token = ARGV[1], ARGV[2]
if redis.call('GET', K('lease', id)) ~= token then return 0 end
if redis.call('HGET', K('batch', id), 'feed_line') ~= ARGV[3] then return 0 end
redis.call('HSET', K('batch', id), 'feed_line', ARGV[4], 'feed_offset', ARGV[5])
redis.call('HINCRBY', K('batch', id), 'fed', ARGV[6])
if ARGV[7] == '1' then redis.call('HSET', K('batch', id), 'feed_done', '1') end
return 1
