-- Generated text of several jobs (a worker's flush), each piece appended to its job and its
-- followers as one delta event; then one notification per shard lists the jobs that got
-- text ("+ <id> <id> ..."), instead of one per job.
--
-- Arguments: pieces: (job id, run id, offset, piece) per piece; offset: the bytes of text the attempt
-- wrote before the piece.
-- Answers, per piece, 1, or 0 when its run no longer holds its job. A piece already appended
-- (a retry whose first answer was lost) is not appended twice.
local answer, by_shard = {}, {}
for i = pieces_at, #ARGV, 4 do
  local id, run, offset, piece = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  local ok, members = 0, {}
  local ours, followed = owned(id, run)
  if ours then
    members = group(id, followed)
    local length = redis.call('STRLEN', K('text', id))
    if length == offset + #piece then
      ok = 1
    elseif length == offset then
      for _, j in ipairs(members) do append_text(j, piece, true) end
      ok = 1
    end
  end
  if ok == 1 then
    for _, j in ipairs(members) do
      local sh = shard(j)
      by_shard[sh] = (by_shard[sh] or '+') .. ' ' .. j
    end
  end
  table.insert(answer, ok)
end
for sh, message in pairs(by_shard) do publish(S(sh, 'notify'), message) end
return answer
