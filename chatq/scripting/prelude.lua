-- Helpers every script shares. Above this file the loader (chatq/scripting/loader.py) puts `P`
-- and `G` (the key prefixes of chatq/keys.py), `SHARDS` (the 64 shard characters),
-- `JOB_KINDS` (the kinds of key that are a job's, as a set), `SHARDED` (true on a Redis
-- Cluster: notifications use sharded pub/sub) and the status words of chatq/words.py.

-- Keys (chatq/keys.py): a job's carry its shard's hash tag {j<c>}, c the first character of
-- its id's token; the indexes of a shard too; every other kind is under the tag {g}.
local function shard(id) return string.sub(id, 5, 5) end
local function S(sh, name) return P .. '{j' .. sh .. '}:' .. name end
local function K(kind, id)
  if JOB_KINDS[kind] then return S(shard(id), kind .. ':' .. id) end
  return G .. kind .. ':' .. id
end
-- The shard a request digest (a cache key) is placed in.
local function digest_shard(hex)
  local i = (tonumber(string.sub(hex, 1, 2), 16) or 0) % #SHARDS + 1
  return string.sub(SHARDS, i, i)
end
local function flight_key(kind, flight) return S(digest_shard(flight), kind .. ':' .. flight) end
-- The leases of active jobs (chatq/keys.py leases_of): the job's shard's on a Cluster; on one
-- Redis, all in the first shard's key, so that a sweep reads one key, not one per shard.
local function leases_of(id)
  if SHARDED then return S(shard(id), 'leases') end
  return S(string.sub(SHARDS, 1, 1), 'leases')
end

local function publish(channel, message)
  if SHARDED then
    redis.call('SPUBLISH', channel, message)
  else
    redis.call('PUBLISH', channel, message)
  end
end

local function is_terminal(status)
  return status == COMPLETED or status == FAILED or status == CANCELLED
end

-- Redis's clock, not a host's: every worker and web agrees on when a lease runs out.
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function stamp(t) return string.format('%.6f', t) end

-- Webhook deliveries whose attempt is running count at two gates: their endpoint's and their
-- key's (the endpoint's owner, chatq/webhooks/deliveries.py), each with a cap. A gate has its
-- deliveries running (`busy`: delivery id -> Redis time its hold runs out; a lost worker's drop
-- out when theirs does) and those that came due while it had its cap running (`waiting`, by
-- due time), out of the due set, so that they never stand in front of other gates'; the gate
-- is in `index` while it has some, by when to look at it again (when its first hold runs out:
-- a lost worker's slot frees up then). All of them: webhooks:running.
local ENDPOINTS_WAITING, KEYS_WAITING = G .. 'webhooks:waiting', G .. 'webhooks:keys_waiting'
local function endpoint_gate(endpoint)
  return {name = endpoint, busy = G .. 'webhooks:busy:' .. endpoint,
          waiting = G .. 'webhooks:waiting:' .. endpoint, index = ENDPOINTS_WAITING}
end

local function key_gate(owner)
  return {name = owner, busy = G .. 'webhooks:key_busy:' .. owner,
          waiting = G .. 'webhooks:key_waiting:' .. owner, index = KEYS_WAITING}
end

-- A delivery's gates: its endpoint's, and its key's (a record made before deliveries carried
-- their key has none).
local function gates_of(endpoint, owner)
  if owner and owner ~= '' then return {endpoint_gate(endpoint), key_gate(owner)} end
  return {endpoint_gate(endpoint)}
end

local function busy_at(gate, t)
  redis.call('ZREMRANGEBYSCORE', gate.busy, '-inf', t)
  return redis.call('ZCARD', gate.busy)
end

-- Hold a delivery for its worker until `until_t`: due again then, running until then.
local function hold(id, gates, until_t)
  redis.call('ZADD', G .. 'webhooks:due', until_t, id)
  redis.call('ZADD', G .. 'webhooks:running', until_t, id)
  for _, gate in ipairs(gates) do
    redis.call('ZADD', gate.busy, until_t, id)
    redis.call('EXPIREAT', gate.busy, math.ceil(until_t) + 1)
  end
end

local function look_again(gate, t)
  local first = redis.call('ZRANGE', gate.busy, 0, 0, 'WITHSCORES')
  redis.call('ZADD', gate.index, tonumber(first[2]) or t, gate.name)
end

-- No worker holds a delivery that waits (one whose hold ran out holds it no more).
local function wait_for_slot(id, gate, due_t, t)
  redis.call('HSET', G .. 'webhooks:delivery:' .. id, 'token', '')
  redis.call('ZREM', G .. 'webhooks:due', id)
  redis.call('ZADD', gate.waiting, due_t, id)
  look_again(gate, t)
end

-- Up to n of a gate's waiting deliveries are due again, first come first (the take checks
-- every gate of each again).
local function unpark(gate, n, t)
  if n > 0 then
    local popped = redis.call('ZPOPMIN', gate.waiting, n)
    for i = 1, #popped, 2 do redis.call('ZADD', G .. 'webhooks:due', popped[i + 1], popped[i]) end
  end
  if redis.call('ZCARD', gate.waiting) == 0 then
    redis.call('ZREM', gate.index, gate.name)
  else
    look_again(gate, t)
  end
end

-- An attempt ended: its slot at each gate goes to that gate's first waiting delivery, if any.
local function release(id, gates, t)
  redis.call('ZREM', G .. 'webhooks:running', id)
  for _, gate in ipairs(gates) do
    if redis.call('ZREM', gate.busy, id) == 1 and redis.call('EXISTS', gate.waiting) == 1 then
      unpark(gate, 1, t)
    end
  end
end

-- Every delivery of an endpoint that may still exist (webhooks:deliveries:<endpoint id>): its
-- id -> Redis time its record's expiry was last set, so that deleting the endpoint finds them
-- all, those pushed out of its log included (chatq/webhooks/webhook_forget.lua).
local function index_delivery(id, endpoint, t, ttl_s)
  local all = G .. 'webhooks:deliveries:' .. endpoint
  redis.call('ZADD', all, t, id)
  redis.call('EXPIRE', all, ttl_s)
end

-- A delivery is deleted: off the schedule, its gates' waiting sets and its endpoint's log and
-- index; an attempt of it still running ends unrecorded (its token is gone), its slots free.
local function drop_delivery(id, endpoint, owner, t)
  local gates = gates_of(endpoint, owner)
  redis.call('DEL', G .. 'webhooks:delivery:' .. id)
  redis.call('ZREM', G .. 'webhooks:due', id)
  for _, gate in ipairs(gates) do redis.call('ZREM', gate.waiting, id) end
  redis.call('ZREM', G .. 'webhooks:log:' .. endpoint, id)
  redis.call('ZREM', G .. 'webhooks:deliveries:' .. endpoint, id)
  release(id, gates, t)
end

local function event(id, kind, value, extra)
  if extra and extra ~= '' then
    return redis.call('XADD', K('events', id), '*', 't', kind, 'v', value, 'f', extra)
  end
  return redis.call('XADD', K('events', id), '*', 't', kind, 'v', value)
end

local function notify(id, status)
  publish(S(shard(id), 'notify'), id .. ' ' .. status)
end

-- Whether `run` holds the job now; and whether it has been followed (see group).
local function owned(id, run)
  local v = redis.call('HMGET', K('job', id), 'status', 'run', 'followed')
  return v[1] == IN_PROGRESS and v[2] == run, v[3] == '1'
end

-- The job's fields by name (nil: no such field); with no `names`, all of them, or nil when
-- there is no job.
local function fields_of(id, names)
  local job = {}
  if names then
    local v = redis.call('HMGET', K('job', id), unpack(names))
    for i, name in ipairs(names) do job[name] = v[i] or nil end
    return job
  end
  local flat = redis.call('HGETALL', K('job', id))
  if #flat == 0 then return nil end
  for i = 1, #flat, 2 do job[flat[i]] = flat[i + 1] end
  return job
end

-- The job and the followers that share its upstream call. `followed`: whether a follower
-- has ever joined it (its field `followed` is '1', create.lua), when already read, so that a
-- job nobody followed costs no read of its followers; nil: not read.
local function group(id, followed)
  if followed == false then return {id} end
  local ids = redis.call('SMEMBERS', K('followers', id))
  table.insert(ids, 1, id)
  return ids
end

local function set_status(id, status, t)
  redis.call('HSET', K('job', id), 'status', status)
  if status == IN_PROGRESS and redis.call('HGET', K('job', id), 'started_at') == '' then
    redis.call('HSET', K('job', id), 'started_at', stamp(t))
  end
  event(id, 'status', status)
  notify(id, status)
end

-- Generation starts again from nothing: clients drop what they had.
local function reset_text(id)
  if redis.call('STRLEN', K('text', id)) > 0 then
    redis.call('DEL', K('text', id))
    event(id, 'reset', '')
    notify(id, IN_PROGRESS)
  end
end

-- O(size of the piece): the text lives in a string of its own. `quiet`: the caller
-- announces the new text itself (a worker's flusher sends one notice for many jobs).
-- Answers the delta's entry id.
local function append_text(id, piece, quiet)
  redis.call('APPEND', K('text', id), piece)
  local entry = event(id, 'delta', piece)
  if not quiet then notify(id, IN_PROGRESS) end
  return entry
end

-- `flight`: the job's field of that name, when already read.
local function release_flight(id, flight)
  if flight == nil then flight = redis.call('HGET', K('job', id), 'flight') end
  if flight and flight ~= '' and redis.call('GET', flight_key('inflight', flight)) == id then
    redis.call('DEL', flight_key('inflight', flight))
  end
end

-- `text_expires`: whether the text already has its expiry (write_tail set it).
local function expire_all(id, ttl_s, text_expires)
  redis.call('EXPIRE', K('job', id), ttl_s)
  redis.call('EXPIRE', K('events', id), ttl_s)
  if not text_expires then redis.call('EXPIRE', K('text', id), ttl_s) end
end

-- The end's last piece of text. Answers the whole text when this piece is all of it (it is
-- then written with its expiry, `ttl_s`), else nil.
local function write_tail(id, tail, ttl_s)
  if tail == '' then return nil end
  if redis.call('SET', K('text', id), tail, 'NX', 'EX', ttl_s) then return tail end
  redis.call('APPEND', K('text', id), tail)
  return nil
end

-- The final record (`job`, all its fields as they are now; less the request, with the text)
-- rides on a leader's last notification, so that a woken waiter answers without reading it
-- back.
-- `text`: the whole text, when known.
local function snapshot(id, job, text)
  job['request'] = nil
  job['output_text'] = text or redis.call('GET', K('text', id)) or ''
  return cjson.encode(job)
end

-- A job leaves its tenant's running jobs and its lane's parked ones, if the claim put it
-- there (its fields `counted` and `parked` are '1', chatq/jobs/claim.lua); on one Redis only,
-- as the claim keeps them. `job`: its fields, when already read.
local function not_running(id, job)
  if SHARDED then return end
  job = job or fields_of(id, {'owner', 'priority', 'counted', 'parked'})
  if job.counted == '1' then redis.call('SREM', K('running', job.owner or ''), id) end
  if job.parked == '1' then redis.call('ZREM', K('parked', job.priority or ''), id) end
end

-- The job's last piece of text (`tail`), its last status and its end, in one entry:
-- readers show all three events (an `end` entry with `d` and `with_status`,
-- chatq/jobs/events.py).
local function end_event(id, status, reason, tail)
  local entry = {'t', 'end', 'v', status, 'f', reason or '', 'with_status', '1'}
  if tail and tail ~= '' then
    table.insert(entry, 'd')
    table.insert(entry, tail)
  end
  redis.call('XADD', K('events', id), '*', unpack(entry))
end

-- Whoever must hear of a job's end for sure (a webhook, a batch, a token limit) reads it
-- from the outbox of the job's lane (chatq/keys.py outbox): the workers of that lane relay it,
-- so that a batch's ends keep off the workers that serve interactive jobs.
local function announce_end(id, status, priority)
  local stream = S(shard(id), 'outbox')
  if priority == 'batch' then stream = S(shard(id), 'outbox:batch') end
  redis.call('XADD', stream, 'MAXLEN', '~', 100000, '*', 'id', id, 'status', status)
end

-- What close reads of a job that does not carry its record on the notification.
local CLOSE_FIELDS = {'owner', 'priority', 'announce', 'counted', 'parked'}

-- Ends one job for good, as `ending` says: {status, t, ttl_s, reason, fields (extra
-- field/value pairs), tail (the last piece of text)}. `publish_record` puts the record on the
-- notification (followers' waiters read theirs back instead). `job`: all its fields, when
-- already read.
local function close(id, ending, publish_record, job)
  if not job then
    if publish_record then job = fields_of(id) else job = fields_of(id, CLOSE_FIELDS) end
  end
  not_running(id, job)
  local written = {'status', ending.status, 'completed_at', stamp(ending.t)}
  for _, item in ipairs(ending.fields or {}) do table.insert(written, item) end
  redis.call('HSET', K('job', id), unpack(written))
  local text = write_tail(id, ending.tail or '', ending.ttl_s)
  end_event(id, ending.status, ending.reason, ending.tail)
  redis.call('ZREM', leases_of(id), id)
  expire_all(id, ending.ttl_s, text ~= nil)
  local message = id .. ' ' .. ending.status
  if publish_record then
    for i = 1, #written, 2 do job[written[i]] = written[i + 1] end
    message = message .. ' ' .. snapshot(id, job, text)
  end
  publish(S(shard(id), 'notify'), message)
  if job.announce == '1' then announce_end(id, ending.status, job.priority) end
end

-- Ends a leader and its followers alike, as `ending` says (see close). `members`: the group,
-- and `job`: all the leader's fields, when already read.
local function close_group(id, ending, members, job)
  members = members or group(id)
  for i, j in ipairs(members) do
    close(j, ending, i == 1, i == 1 and job or nil)
  end
  if #members > 1 then redis.call('DEL', K('followers', id)) end
  if job then release_flight(id, job.flight or '') else release_flight(id) end
end

-- Files' quotas (chatq/batches/file_quota.py, chatq/keys.py files_usage): what a key's files take
-- and what its uploads in progress hold.
local function files_usage(owner) return G .. 'files_usage:' .. owner end

-- An upload's hold gives its room back: it ended (a file, or nothing) or lapsed.
local function release_file_hold(owner, id)
  local held = redis.call('HGET', G .. 'files_holds:' .. owner, id)
  if not held then return end
  redis.call('HDEL', G .. 'files_holds:' .. owner, id)
  redis.call('ZREM', G .. 'files_hold_until:' .. owner, id)
  redis.call('HINCRBY', files_usage(owner), 'held_bytes', 0 - tonumber(held))  -- never -0
  redis.call('HINCRBY', files_usage(owner), 'held_count', -1)
end

-- A file joins its owner's usage, once; `counted` tells its delete to give the room back.
local function count_file(owner, id, bytes)
  if redis.call('HGET', K('file', id), 'counted') == '1' then return end
  redis.call('HSET', K('file', id), 'counted', '1')
  redis.call('HINCRBY', files_usage(owner), 'bytes', bytes)
  redis.call('HINCRBY', files_usage(owner), 'count', 1)
end

-- A deleted file gives its room back, if it was counted (its fields `counted` and `bytes`).
local function uncount_file(owner, counted, bytes)
  if counted ~= '1' then return end
  redis.call('HINCRBY', files_usage(owner), 'bytes', 0 - (tonumber(bytes) or 0))
  redis.call('HINCRBY', files_usage(owner), 'count', -1)
end
