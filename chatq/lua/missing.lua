-- Which of the given jobs have no message in the broker: not waiting in a queue's lists
-- (KEYS but the last), not reserved by a worker (the last KEY: kombu's `unacked` hash).
-- Lists are read from their oldest end, a page at a time, until every job is found: the
-- jobs asked about are the ones that have waited longest.
--
-- KEYS: the broker's lists, then its hash of reserved messages. ARGV: job ids.
-- Answers the ids of the jobs whose message is missing.
local PAGE = 1000
local wanted, left = {}, 0
for _, id in ipairs(ARGV) do
  if not wanted[id] then wanted[id], left = true, left + 1 end
end

local function see(message)
  local id = string.match(message, '"correlation_id": "([^"]+)"')
  if id and wanted[id] then wanted[id], left = nil, left - 1 end
end

local reserved = redis.call('HVALS', KEYS[#KEYS])
for _, message in ipairs(reserved) do see(message) end
for k = 1, #KEYS - 1 do
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
