-- Which of the given jobs have no message in the broker: not waiting in a queue's lists
-- (KEYS). A message a worker has taken is in no list (kombu keeps no record of it in Redis),
-- but a worker claims a job the moment it receives its message: a job still queued whose
-- message is in no list was taken by a worker that is gone, or never sent. Sending it again
-- is safe, as only one claim wins.
-- Lists are read from their oldest end, a page at a time, until every job is found: the
-- jobs asked about are the ones that have waited longest.
--
-- KEYS: the broker's lists.
-- ARGV: job ids.
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

for _, list in ipairs(KEYS) do
  local length = redis.call('LLEN', list)
  local stop = -1
  while left > 0 and -stop <= length do
    for _, message in ipairs(redis.call('LRANGE', list, stop - PAGE + 1, stop)) do
      see(message)
    end
    stop = stop - PAGE
  end
end

local missing = {}
for id in pairs(wanted) do table.insert(missing, id) end
return missing
