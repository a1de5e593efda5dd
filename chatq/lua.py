"""Lua sources of the job state machine; each runs as one atomic step in Redis."""

# Shared helpers, prepended to every script. A job's events stream is KEYS[2].
PRELUDE = """
local function terminal(st)
  return st == 'completed' or st == 'failed' or st == 'cancelled'
end
local function event(kind, value, extra)
  if extra then
    return redis.call('XADD', KEYS[2], '*', 't', kind, 'v', value, 'f', extra)
  end
  return redis.call('XADD', KEYS[2], '*', 't', kind, 'v', value)
end
local function notify(job_id, st)
  redis.call('PUBLISH', 'chatq:notify', job_id .. ' ' .. st)
end
local function owned(run_id)
  local v = redis.call('HMGET', KEYS[1], 'status', 'run')
  return v[1] == 'in_progress' and v[2] == run_id
end
local function expire_all(ttl)
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
end
local function close(job_id, st, now, ttl, reason)
  redis.call('HSET', KEYS[1], 'status', st, 'completed_at', now, 'run', '')
  event('status', st)
  event('end', st, reason)
  redis.call('ZREM', KEYS[3], job_id)
  expire_all(ttl)
  notify(job_id, st)
end
"""

# KEYS job, events, leases, idem ('' for none). ARGV id, ttl, deadline, idem value, fields...
CREATE = """
if KEYS[4] ~= '' then
  local prev = redis.call('GET', KEYS[4])
  if prev then return prev end
  redis.call('SET', KEYS[4], ARGV[4], 'EX', ARGV[2])
end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
event('status', 'queued')
expire_all(ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return ''
"""

# KEYS job, events, leases. ARGV id, resend deadline. Once the message is sent, a queued
# job's lease only guards against a message the broker lost: it becomes long.
SENT = """
if redis.call('HGET', KEYS[1], 'status') == 'queued' then
  redis.call('ZADD', KEYS[3], 'XX', ARGV[2], ARGV[1])
end
return 1
"""

# KEYS job, events, leases. ARGV id, run id, now, lease deadline.
CLAIM = """
local st = redis.call('HGET', KEYS[1], 'status')
if st ~= 'queued' then return st or 'missing' end
if redis.call('HGET', KEYS[1], 'output_text') ~= '' then
  redis.call('HSET', KEYS[1], 'output_text', '')
  event('reset', '')
end
redis.call('HSET', KEYS[1], 'status', 'in_progress', 'run', ARGV[2])
if redis.call('HGET', KEYS[1], 'started_at') == '' then
  redis.call('HSET', KEYS[1], 'started_at', ARGV[3])
end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
event('status', 'in_progress')
notify(ARGV[1], 'in_progress')
return 'claimed'
"""

# KEYS job, events. ARGV id, run id. Counts an upstream attempt; resets partial text.
ATTEMPT = """
if not owned(ARGV[2]) then return 0 end
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
if redis.call('HGET', KEYS[1], 'output_text') ~= '' then
  redis.call('HSET', KEYS[1], 'output_text', '')
  event('reset', '')
  notify(ARGV[1], 'in_progress')
end
return 1
"""

# KEYS job, events. ARGV id, run id, text.
APPEND = """
if not owned(ARGV[2]) then return 0 end
local out = redis.call('HGET', KEYS[1], 'output_text')
redis.call('HSET', KEYS[1], 'output_text', out .. ARGV[3])
event('delta', ARGV[3])
notify(ARGV[1], 'in_progress')
return 1
"""

# KEYS job, events, leases. ARGV id, run id, status, now, ttl, finish reason, tail,
# then field/value pairs (result or error).
FINISH = """
if not owned(ARGV[2]) then return 0 end
if ARGV[7] ~= '' then
  local out = redis.call('HGET', KEYS[1], 'output_text')
  redis.call('HSET', KEYS[1], 'output_text', out .. ARGV[7])
  event('delta', ARGV[7])
end
if #ARGV > 7 then redis.call('HSET', KEYS[1], unpack(ARGV, 8)) end
close(ARGV[1], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
return 1
"""

# KEYS job, events, leases. ARGV id, now, ttl.
CANCEL = """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return 'missing' end
if terminal(st) then return st end
close(ARGV[1], 'cancelled', ARGV[2], ARGV[3], 'cancelled')
return 'cancelled'
"""

# KEYS job, events, leases. ARGV id, now, new deadline, max takeovers, ttl, error json.
# A queued job is sent again ('resend'); a running one whose worker stopped renewing its
# lease goes back to the queue ('requeued') or, taken over too often, fails.
REQUEUE = """
local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return 'fresh' end
local st = redis.call('HGET', KEYS[1], 'status')
if not st or terminal(st) then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return 'gone'
end
if st == 'queued' then
  redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
  return 'resend'
end
if redis.call('HINCRBY', KEYS[1], 'takeovers', 1) > tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[1], 'error', ARGV[6])
  close(ARGV[1], 'failed', ARGV[2], ARGV[5], 'error')
  return 'failed'
end
redis.call('HSET', KEYS[1], 'status', 'queued', 'run', '')
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
event('status', 'queued')
notify(ARGV[1], 'queued')
return 'requeued'
"""

# KEYS leases, job 1..n. ARGV deadline, then (id, run id) per job. Renews the leases
# still held; answers each job's status, or 'lost' when another run holds it now.
HEARTBEAT = """
local out = {}
for i = 2, #KEYS do
  local id, run = ARGV[2 * i - 2], ARGV[2 * i - 1]
  local v = redis.call('HMGET', KEYS[i], 'status', 'run')
  if v[2] == run and v[1] == 'in_progress' then
    redis.call('ZADD', KEYS[1], ARGV[1], id)
    out[#out + 1] = 'in_progress'
  elseif v[1] == 'cancelled' then
    out[#out + 1] = 'cancelled'
  else
    out[#out + 1] = 'lost'
  end
end
return out
"""
