-- Generated text, appended to the job and its followers as one delta event each. The job's
-- own notification is left to the caller (a worker's flush announces all its jobs in one
-- message); its followers are notified here.
--
-- ARGV: job id, run id, offset (bytes of text the attempt wrote before this piece), piece.
-- Answers 1, or 0 when the run no longer holds the job. A piece already appended (a retry
-- whose first answer was lost) is not appended twice.
local id, run, offset, piece = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if not owned(id, run) then return 0 end
local length = redis.call('STRLEN', K('text', id))
if length == offset + #piece then return 1 end
if length ~= offset then return 0 end
for _, j in ipairs(group(id)) do append_text(j, piece, j == id) end
return 1
