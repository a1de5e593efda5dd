-- Which of the given jobs have no message in the broker: not waiting in a queue's lists
-- (KEYS). A message a worker has taken is in no list (kombu keeps no record of it in Redis),
-- but a worker claims a job the moment it receives its message: a job still queued whose
-- message is in no list was taken by a worker that is gone, or never sent. Sending it again
-- is safe, as only one claim wins.
--
-- It blocks Redis while it reads (a few microseconds per message, most of it in copying the
-- message), so it reads as little as it can. The jobs asked about have waited longest, so
-- their messages are near the oldest end of their lists: each list is read from that end,
-- in pages that start at the number of jobs sought and double, only until the jobs expected
-- in it are all seen. A job not seen where it was expected is looked for in every list
-- before it is called missing (its message may have been sent before the tenants' queues
-- changed).
--
-- Keys: lists, the broker's lists (all of KEYS).
-- Arguments: expected: pairs of a job id and the index in KEYS of the list its message was
--       sent to.
-- Answers the ids of the jobs whose message is missing.
local FIRST_PAGE, LAST_PAGE = 8, 1024  -- messages; past the sought jobs, then their growth
local MARK = '"correlation_id": "'  -- the job id's place in a run message, as kombu writes it
local expected_in = {}  -- job id -> index of its list, while not seen
local unseen = {}  -- index of a list -> how many jobs expected in it are not seen yet
local left = 0  -- jobs not seen anywhere yet
local read_through = {}  -- index of a list -> true once read to its end

for i = expected_at, #ARGV, 2 do
  local id, list = ARGV[i], tonumber(ARGV[i + 1])
  if not expected_in[id] then
    expected_in[id], left = list, left + 1
    unseen[list] = (unseen[list] or 0) + 1
  end
end

-- A plain search, not a pattern: many times faster over messages of a kilobyte.
local function job_of(message)
  local at = string.find(message, MARK, 1, true)
  if not at then return nil end
  local from = at + #MARK
  local to = string.find(message, '"', from, true)
  return to and string.sub(message, from, to - 1)
end

local function see(message)
  local id = job_of(message)
  local list = id and expected_in[id]
  if list then
    expected_in[id], left, unseen[list] = nil, left - 1, unseen[list] - 1
  end
end

-- Read the list KEYS[index] from its oldest end (where BRPOP takes) until `sought()` is 0 or
-- the list ends.
local function read(index, sought)
  if sought() == 0 or read_through[index] then return end
  local length = redis.call('LLEN', KEYS[index])
  local stop, size = -1, sought() + FIRST_PAGE
  while -stop <= length do
    local page = redis.call('LRANGE', KEYS[index], stop - size + 1, stop)
    for i = #page, 1, -1 do
      see(page[i])
      if sought() == 0 then return end
    end
    stop, size = stop - size, math.min(2 * size, LAST_PAGE)
  end
  read_through[index] = true
end

for index = 1, #KEYS do
  read(index, function() return unseen[index] or 0 end)
end
for index = 1, #KEYS do
  read(index, function() return left end)
end

local missing = {}
for id in pairs(expected_in) do table.insert(missing, id) end
return missing
