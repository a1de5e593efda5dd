-- Which of the given jobs have no message in the broker: not waiting in a queue's lists
-- (KEYS but the last two), not reserved by a worker within the last held_s seconds (kombu's
-- `unacked` hash and its index of delivery times, the last two KEYS). A worker claims a job
-- as soon as it receives its message, so a still-queued job reserved longer ago was
-- reserved by a worker that is gone: kombu would give its message back only after the
-- visibility timeout, many minutes later. Sending it again is safe, as only one claim wins.
-- Lists are read from their oldest end, a page at a time, until every job is found: the
-- jobs asked about are the ones that have waited longest.
--
-- KEYS: the broker's lists, then its hash of reserved messages and their index.
-- ARGV: held_s, then job ids.
-- Answers the ids of the jobs whose message is missing.
local PAGE = 1000
local held_s = tonumber(ARGV[1])
local wanted, left = {}, 0
for i = 2, #ARGV do
  local id = ARGV[i]
  if not wanted[id] then wanted[id], left = true, left + 1 end
end

local function see(message)
  local id = string.match(message, '"correlation_id": "([^"]+)"')
  if id and wanted[id] then wanted[id], left = nil, left - 1 end
end

local since = now() - held_s
local reserved = redis.call('HGETALL', KEYS[#KEYS - 1])
for i = 1, #reserved, 2 do
  local delivered = tonumber(redis.call('ZSCORE', KEYS[#KEYS], reserved[i]) or 0)
  if delivered >= since then see(reserved[i + 1]) end
end
for k = 1, #KEYS - 2 do
  local length = redis.call('LLEN', KEYS[k])
  local stop = -1
  while left > 0 and -stop <= length do
    for _, message in ipairs(redis.call('LRANGE', KEYS[k], stop - PAGE + 1, stop)) do
      see(message)
    end
    stop = stop - PAGE
  end
end

local missing = {}
for id in pairs(wanted) do table.insert(missing, id) end
return missing
