-- Helpers every script shares. Above this file the store puts `P` (the key prefix, from
-- chatq/keys.py) and the status words (from chatq/jobs.py).

-- A key of one job; all of a job's keys share the hash tag {id} (one Cluster slot).
local function K(kind, id) return P .. '{' .. id .. '}:' .. kind end

local function is_terminal(status)
  return status == COMPLETED or status == FAILED or status == CANCELLED
end

-- Redis's clock, not a host's: every worker and web agrees on when a lease runs out.
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function stamp(t) return string.format('%.6f', t) end

local function event(id, kind, value, extra)
  if extra and extra ~= '' then
    return redis.call('XADD', K('events', id), '*', 't', kind, 'v', value, 'f', extra)
  end
  return redis.call('XADD', K('events', id), '*', 't', kind, 'v', value)
end

local function notify(id, status)
  redis.call('PUBLISH', P .. 'notify', id .. ' ' .. status)
end

-- Whether `run` holds the job now.
local function owned(id, run)
  local v = redis.call('HMGET', K('job', id), 'status', 'run')
  return v[1] == IN_PROGRESS and v[2] == run
end

-- The job and the followers that share its upstream call.
local function group(id)
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
local function append_text(id, piece, quiet)
  redis.call('APPEND', K('text', id), piece)
  event(id, 'delta', piece)
  if not quiet then notify(id, IN_PROGRESS) end
end

-- Per-second counters for /v1/queue's sliding window (arrivals, done, busy_s).
local function stat(field, amount, t)
  local key = P .. 'stats:' .. math.floor(t)
  redis.call('HINCRBYFLOAT', key, field, amount)
  redis.call('EXPIRE', key, 300)
end

local function release_flight(id)
  local flight = redis.call('HGET', K('job', id), 'flight')
  if flight and flight ~= '' and redis.call('GET', P .. 'inflight:' .. flight) == id then
    redis.call('DEL', P .. 'inflight:' .. flight)
  end
end

local function expire_all(id, ttl_s)
  for _, kind in ipairs({'job', 'events', 'text'}) do
    redis.call('EXPIRE', K(kind, id), ttl_s)
  end
end

-- The final record (less the request, with the text) rides on a leader's last
-- notification, so that a woken waiter answers without reading it back.
local function snapshot(id)
  local flat = redis.call('HGETALL', K('job', id))
  local record = {}
  for i = 1, #flat, 2 do
    if flat[i] ~= 'request' then record[flat[i]] = flat[i + 1] end
  end
  record['output_text'] = redis.call('GET', K('text', id)) or ''
  return cjson.encode(record)
end

-- Ends one job for good. `fields` are extra field/value pairs; `publish_record` puts the
-- record on the notification (followers' waiters read theirs back instead).
local function close(id, status, t, ttl_s, reason, fields, publish_record)
  local key = K('job', id)
  local v = redis.call('HMGET', key, 'started_at', 'leader')
  if v[1] and v[1] ~= '' and not (v[2] and v[2] ~= '') then
    stat('done', 1, t)
    stat('busy_s', t - tonumber(v[1]), t)
  end
  redis.call('HSET', key, 'status', status, 'completed_at', stamp(t))
  if fields and #fields > 0 then redis.call('HSET', key, unpack(fields)) end
  event(id, 'status', status)
  event(id, 'end', status, reason)
  redis.call('ZREM', P .. 'leases', id)
  expire_all(id, ttl_s)
  local message = id .. ' ' .. status
  if publish_record then message = message .. ' ' .. snapshot(id) end
  redis.call('PUBLISH', P .. 'notify', message)
  -- Whoever must hear of this end for sure (a webhook, a batch) reads it from the outbox.
  if redis.call('HGET', key, 'announce') == '1' then
    redis.call('XADD', P .. 'outbox', 'MAXLEN', '~', 1000000, '*', 'id', id, 'status', status)
  end
end

-- Ends a leader and its followers alike.
local function close_group(id, status, t, ttl_s, reason, fields)
  for i, j in ipairs(group(id)) do close(j, status, t, ttl_s, reason, fields, i == 1) end
  redis.call('DEL', K('followers', id))
  release_flight(id)
end
