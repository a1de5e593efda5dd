-- Generated text of several jobs (a worker's flush), each piece appended to its job and its
-- followers as one delta event; then one notification per shard lists the jobs that got
-- text and carries each new delta: "+ <id> <id> ...\n[[<id>, <previous entry id>, <entry
-- id>, <piece>], ...]" (chatq/jobs/events.py Carried), so that a woken follower whose cursor
-- is the previous entry answers without reading the stream. A web that reads only the ids
-- (split on blanks) wakes the same waiters.
--
-- Arguments: pieces: (job id, run id, offset, piece) per piece; offset: the bytes of text the attempt
-- wrote before the piece.
-- Answers, per piece, 1, or 0 when its run no longer holds its job. A piece already appended
-- (a retry whose first answer was lost) is not appended twice, nor carried.
local answer, by_shard = {}, {}

local function announce(j, carried)
  local sh = shard(j)
  local notice = by_shard[sh]
  if not notice then
    notice = {ids = {'+'}, carried = {}}
    by_shard[sh] = notice
  end
  table.insert(notice.ids, j)
  if carried then table.insert(notice.carried, carried) end
end

-- The piece as a new delta of `j`, with the id of the entry before it ('0' for none: the
-- cursor of a client that has read nothing).
local function append_carried(j, piece)
  local last = redis.call('XREVRANGE', K('events', j), '+', '-', 'COUNT', 1)[1]
  local previous = last and last[1] or '0'
  return {j, previous, append_text(j, piece, true), piece}
end

for i = pieces_at, #ARGV, 4 do
  local id, run, offset, piece = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  local ok, members, appended = 0, {}, false
  local ours, followed = owned(id, run)
  if ours then
    members = group(id, followed)
    local length = redis.call('STRLEN', K('text', id))
    if length == offset + #piece then
      ok = 1
    elseif length == offset then
      ok, appended = 1, true
    end
  end
  for _, j in ipairs(ok == 1 and members or {}) do
    announce(j, appended and append_carried(j, piece) or nil)
  end
  table.insert(answer, ok)
end
for sh, notice in pairs(by_shard) do
  local message = table.concat(notice.ids, ' ')
  if #notice.carried > 0 then message = message .. '\n' .. cjson.encode(notice.carried) end
  publish(S(sh, 'notify'), message)
end
return answer
