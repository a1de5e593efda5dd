"""Lua sources of the job state machine; each runs as one atomic step in Redis.

The scripts build key names from job ids with the same scheme as chatq/keys.py (so a
leader can reach its followers); chatq runs on one Redis, not a cluster.
"""

from chatq import keys

# Shared helpers, prepended to every script.
PRELUDE = (
    "local P = '" + keys.PREFIX + "'\n"
    + """
local function K(kind, id) return P .. kind .. ':' .. id end
local function terminal(st)
  return st == 'completed' or st == 'failed' or st == 'cancelled'
end
local function event(id, kind, value, extra)
  if extra then
    return redis.call('XADD', K('events', id), '*', 't', kind, 'v', value, 'f', extra)
  end
  return redis.call('XADD', K('events', id), '*', 't', kind, 'v', value)
end
local function notify(id, st)
  redis.call('PUBLISH', P .. 'notify', id .. ' ' .. st)
end
local function owned(id, run)
  local v = redis.call('HMGET', K('job', id), 'status', 'run')
  return v[1] == 'in_progress' and v[2] == run
end
local function expire_all(id, ttl)
  redis.call('EXPIRE', K('job', id), ttl)
  redis.call('EXPIRE', K('events', id), ttl)
end
-- The job and the followers that share its upstream call.
local function group(id)
  local ids = redis.call('SMEMBERS', K('followers', id))
  table.insert(ids, 1, id)
  return ids
end
local function reset(id)
  if redis.call('HGET', K('job', id), 'output_text') ~= '' then
    redis.call('HSET', K('job', id), 'output_text', '')
    event(id, 'reset', '')
    notify(id, 'in_progress')
  end
end
local function append(id, text)
  local out = redis.call('HGET', K('job', id), 'output_text')
  redis.call('HSET', K('job', id), 'output_text', out .. text)
  event(id, 'delta', text)
  notify(id, 'in_progress')
end
local function set_status(id, st, now)
  redis.call('HSET', K('job', id), 'status', st)
  if st == 'in_progress' and redis.call('HGET', K('job', id), 'started_at') == '' then
    redis.call('HSET', K('job', id), 'started_at', now)
  end
  event(id, 'status', st)
  notify(id, st)
end
-- Per-second counters for /v1/queue's sliding window (arrivals, done, busy_s).
local function stat(field, amount, now)
  local key = K('stats', math.floor(tonumber(now)))
  redis.call('HINCRBYFLOAT', key, field, amount)
  redis.call('EXPIRE', key, 300)
end
local function release_flight(id)
  local flight = redis.call('HGET', K('job', id), 'flight')
  if flight and flight ~= '' and redis.call('GET', K('inflight', flight)) == id then
    redis.call('DEL', K('inflight', flight))
  end
end
-- The final record (less the request) rides on the last notification, so that a woken
-- waiter answers without reading it back.
local function snapshot(id)
  local flat = redis.call('HGETALL', K('job', id))
  local record = {}
  for i = 1, #flat, 2 do
    if flat[i] ~= 'request' then record[flat[i]] = flat[i + 1] end
  end
  return cjson.encode(record)
end
local function close(id, st, now, ttl, reason, fields)
  local key = K('job', id)
  local v = redis.call('HMGET', key, 'started_at', 'leader')
  if v[1] and v[1] ~= '' and not (v[2] and v[2] ~= '') then
    stat('done', 1, now)
    stat('busy_s', tonumber(now) - tonumber(v[1]), now)
  end
  redis.call('HSET', key, 'status', st, 'completed_at', now, 'run', '')
  if fields and #fields > 0 then redis.call('HSET', key, unpack(fields)) end
  event(id, 'status', st)
  event(id, 'end', st, reason)
  redis.call('ZREM', P .. 'leases', id)
  expire_all(id, ttl)
  redis.call('PUBLISH', P .. 'notify', id .. ' ' .. st .. ' ' .. snapshot(id))
end
-- Ends a leader and its followers alike; the cache keeps a completed result.
local function close_group(id, st, now, ttl, reason, fields)
  local ids = group(id)
  for _, j in ipairs(ids) do close(j, st, now, ttl, reason, fields) end
  redis.call('DEL', K('followers', id))
  release_flight(id)
end
"""
)

# ARGV id, ttl, lease deadline, idem key, idem value, flight, flight ttl, state, now,
# then fields...
# state 'new' queues the job; 'done' records a finished one (a cache hit).
# Answers {'created'}, {'idem', earlier value}, {'follower', leader id} or, with a flight
# whose result is cached by now, {'cached', result} (nothing written).
CREATE = """
local id, ttl = ARGV[1], ARGV[2]
if ARGV[4] ~= '' then
  local prev = redis.call('GET', ARGV[4])
  if prev then return {'idem', prev} end
end
if ARGV[6] ~= '' then
  -- An identical job may have finished since the caller looked in the cache.
  local cached = redis.call('GET', K('cache', ARGV[6]))
  if cached then return {'cached', cached} end
end
if ARGV[4] ~= '' then redis.call('SET', ARGV[4], ARGV[5], 'EX', ttl) end
redis.call('HSET', K('job', id), unpack(ARGV, 10))
if ARGV[8] == 'done' then
  event(id, 'status', 'completed')
  event(id, 'delta', redis.call('HGET', K('job', id), 'output_text'))
  event(id, 'end', 'completed', redis.call('HGET', K('job', id), 'finish_reason'))
  expire_all(id, ttl)
  return {'created'}
end
-- An active job never expires (its TTL starts when it ends): every one is either in the
-- leases set, which the sweeper watches until it ends, or a follower of one that is.
event(id, 'status', 'queued')
if ARGV[6] ~= '' then
  local leader = redis.call('GET', K('inflight', ARGV[6]))
  local lst = leader and redis.call('HGET', K('job', leader), 'status')
  if lst and not terminal(lst) then
    redis.call('HSET', K('job', id), 'leader', leader)
    redis.call('SADD', K('followers', leader), id)
    if lst == 'in_progress' then set_status(id, lst, ARGV[9]) end
    local out = redis.call('HGET', K('job', leader), 'output_text')
    if out ~= '' then append(id, out) end
    return {'follower', leader}
  end
  redis.call('SET', K('inflight', ARGV[6]), id, 'EX', ARGV[7])
  redis.call('HSET', K('job', id), 'flight', ARGV[6])
end
stat('arrivals', 1, ARGV[9])
redis.call('ZADD', P .. 'leases', ARGV[3], id)
return {'created'}
"""

# ARGV id, resend deadline. Once the message is sent, a queued job's lease only guards
# against a message the broker lost: it becomes long.
SENT = """
if redis.call('HGET', K('job', ARGV[1]), 'status') == 'queued' then
  redis.call('ZADD', P .. 'leases', 'XX', ARGV[2], ARGV[1])
end
return 1
"""

# ARGV id, run id, now, lease deadline.
CLAIM = """
local id = ARGV[1]
local st = redis.call('HGET', K('job', id), 'status')
if st ~= 'queued' then return st or 'missing' end
redis.call('HSET', K('job', id), 'run', ARGV[2])
redis.call('ZADD', P .. 'leases', ARGV[4], id)
for _, j in ipairs(group(id)) do
  reset(j)
  set_status(j, 'in_progress', ARGV[3])
end
return 'claimed'
"""

# ARGV id, run id. Counts an upstream attempt; resets partial text.
ATTEMPT = """
if not owned(ARGV[1], ARGV[2]) then return 0 end
redis.call('HINCRBY', K('job', ARGV[1]), 'attempts', 1)
for _, j in ipairs(group(ARGV[1])) do reset(j) end
return 1
"""

# ARGV id, run id, text.
APPEND = """
if not owned(ARGV[1], ARGV[2]) then return 0 end
for _, j in ipairs(group(ARGV[1])) do append(j, ARGV[3]) end
return 1
"""

# ARGV id, run id, status, now, ttl, finish reason, tail, then field/value pairs.
FINISH = """
local id = ARGV[1]
if not owned(id, ARGV[2]) then return 0 end
if ARGV[7] ~= '' then
  for _, j in ipairs(group(id)) do append(j, ARGV[7]) end
end
local fields = {unpack(ARGV, 8)}
local job = redis.call('HMGET', K('job', id), 'cache_key', 'cache_ttl', 'result')
close_group(id, ARGV[3], ARGV[4], ARGV[5], ARGV[6], fields)
if ARGV[3] == 'completed' and job[1] and job[1] ~= '' then
  local result = redis.call('HGET', K('job', id), 'result')
  redis.call('SET', K('cache', job[1]), result, 'EX', job[2])
end
return 1
"""

# ARGV id, now, ttl, lease deadline. Followers of a cancelled leader go back to the queue
# on their own; answers {state, ids of jobs to enqueue...}.
CANCEL = """
local id = ARGV[1]
local v = redis.call('HMGET', K('job', id), 'status', 'leader')
if not v[1] then return {'missing'} end
if terminal(v[1]) then return {v[1]} end
if v[2] and v[2] ~= '' then redis.call('SREM', K('followers', v[2]), id) end
local out = {'cancelled'}
for _, f in ipairs(redis.call('SMEMBERS', K('followers', id))) do
  redis.call('HDEL', K('job', f), 'leader')
  reset(f)
  set_status(f, 'queued', ARGV[2])
  redis.call('ZADD', P .. 'leases', ARGV[4], f)
  table.insert(out, f)
end
redis.call('DEL', K('followers', id))
release_flight(id)
close(id, 'cancelled', ARGV[2], ARGV[3], 'cancelled', nil)
return out
"""

# ARGV id, now, new deadline, max takeovers, ttl, error json.
# A queued job is sent again ('resend'); a running one whose worker stopped renewing its
# lease goes back to the queue ('requeued') or, taken over too often, fails.
REQUEUE = """
local id = ARGV[1]
local score = redis.call('ZSCORE', P .. 'leases', id)
if not score or tonumber(score) > tonumber(ARGV[2]) then return 'fresh' end
local st = redis.call('HGET', K('job', id), 'status')
if not st or terminal(st) then
  redis.call('ZREM', P .. 'leases', id)
  return 'gone'
end
if st == 'queued' then
  redis.call('ZADD', P .. 'leases', ARGV[3], id)
  return 'resend'
end
if redis.call('HINCRBY', K('job', id), 'takeovers', 1) > tonumber(ARGV[4]) then
  close_group(id, 'failed', ARGV[2], ARGV[5], 'error', {'error', ARGV[6]})
  return 'failed'
end
redis.call('HSET', K('job', id), 'run', '')
redis.call('ZADD', P .. 'leases', ARGV[3], id)
for _, j in ipairs(group(id)) do set_status(j, 'queued', ARGV[2]) end
return 'requeued'
"""

# KEYS none. ARGV deadline, then (id, run id) per job. Renews the leases still held;
# answers each job's status, or 'lost' when another run holds it now.
HEARTBEAT = """
local out = {}
for i = 2, #ARGV, 2 do
  local id, run = ARGV[i], ARGV[i + 1]
  local v = redis.call('HMGET', K('job', id), 'status', 'run')
  if v[2] == run and v[1] == 'in_progress' then
    redis.call('ZADD', P .. 'leases', ARGV[1], id)
    out[#out + 1] = 'in_progress'
  elseif v[1] == 'cancelled' then
    out[#out + 1] = 'cancelled'
  else
    out[#out + 1] = 'lost'
  end
end
return out
"""
