-- The feeder has made the jobs of the lines before `new_line` (every valid one has its job):
-- the cursor moves there, once, and only for the lease holder that read from `old_line`.
--
-- Arguments: id (the batch's), token (the lease holder's), old_line, new_line, offset (the
--       new byte offset), lines (fed), done (true: the whole file has been read).
-- Answers 1 when moved, 0 when the lease or the cursor was not what the caller thought.
if redis.call('GET', K('lease', id)) ~= token then return 0 end
if redis.call('HGET', K('batch', id), 'feed_line') ~= tostring(old_line) then return 0 end
redis.call('HSET', K('batch', id), 'feed_line', new_line, 'feed_offset', offset)
redis.call('HINCRBY', K('batch', id), 'fed', lines)
if done then redis.call('HSET', K('batch', id), 'feed_done', '1') end
return 1
