#!lua name=jobrunner
--[[
The Redis side of jobrunner: a Redis Function library (Redis >= 7.0), loaded
by every jobrunner process at start with FUNCTION LOAD REPLACE. Any client in
any language may FCALL these functions; docs/redis-contract.md is the contract.

Keys of queue Q (all share the hash tag {Q}, so every call touches one slot):
  jr:{Q}:ready    stream, consumer group "jr": jobs ready to run
  jr:{Q}:delayed  sorted set: member = the whole envelope of a delayed job as
                  a sequence of msgpack strings: id, field, value, ...;
                  score = due time (Unix ms, fractional part = us)
  jr:{Q}:wake     stream of length 1: an entry is added when a job becomes the
                  earliest delayed one; every scheduler XREADs it (a broadcast,
                  unlike a list pop, so no scheduler keeps a stale timer)
  jr:{Q}:seq      counter for ids of delayed jobs enqueued without an id
  jr:{Q}:uniq:ID  idempotency window of an explicit job id
Registry (its own slot): jr:{queues} set of queue names, jr:{queues}:wake stream.

Every scheduling decision uses Redis's clock (TIME), never the caller's.
]]

local GROUP = 'jr'

-- Redis time in ms with microsecond fraction.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- Scores and times travel as fixed-point strings: Lua's default number
-- formatting keeps 14 digits, which would round a due time by up to 50 us.
local function ms_str(x)
  return string.format('%.3f', x)
end

-- The consumer group exists whenever the stream does.
local function ensure_group(ready)
  if redis.call('EXISTS', ready) == 0 then
    redis.call('XGROUP', 'CREATE', ready, GROUP, '0', 'MKSTREAM')
  end
end

local function poke(wake)
  redis.call('XADD', wake, 'MAXLEN', '1', '*', 'w', '1')
end

-- Id of the last wake entry ("0-0" if none): a scheduler XREADs after it.
local function last_wake(wake)
  local last = redis.call('XREVRANGE', wake, '+', '-', 'COUNT', 1)
  return last[1] and last[1][1] or '0-0'
end

-- Ids of the form "d<digits>" and "<digits>-<digits>" are made by jobrunner.
local function reserved_id(id)
  return string.find(id, '^d%d+$') ~= nil or string.find(id, '^%d+%-%d+$') ~= nil
end

--[[
jr_enqueue
  KEYS: ready delayed wake seq [uniq]   (uniq only with an explicit id)
  ARGV: when id uniq_ms field value [field value ...]
    when    "" or "0" = now; "+<ms>" = after a delay; "@<ms>" = at Unix ms
            (decimals allowed: "+1500", "@1764581400250.5")
    id      "" = generate one; otherwise the job id, and the enqueue is
            idempotent: a second enqueue with the same id within the window
            (uniq_ms after the due time) does nothing
    fields  envelope fields in canonical order: h p [a] [m] [t] [b]
  Returns {job id, 1 if enqueued or 0 if a duplicate}.
]]
-- Put a packed envelope into the delayed set at `due`; poke the schedulers
-- if it is now the earliest.
local function schedule(delayed, wake, due, packed)
  redis.call('ZADD', delayed, ms_str(due), packed)
  if redis.call('ZRANGE', delayed, 0, 0)[1] == packed then poke(wake) end
end

-- Check one job's arguments (fields are args[first..last]); returns an
-- error reply or nil. Nothing is written before every job of a call passed.
local function check(when, id, args, first, last)
  local c = string.sub(when, 1, 1)
  if c == '+' or c == '@' then
    if not tonumber(string.sub(when, 2)) then
      return redis.error_reply('ERR jobrunner: bad due time "' .. when .. '"')
    end
  elseif when ~= '' and when ~= '0' then
    return redis.error_reply('ERR jobrunner: bad due time "' .. when .. '" (use "", "+MS" or "@UNIXMS")')
  end
  local n = last - first + 1
  if n < 2 or n % 2 ~= 0 or args[first] ~= 'h' or args[first + 1] == '' then
    return redis.error_reply('ERR jobrunner: fields must start with h <handler> and come in pairs')
  end
  if id ~= '' and reserved_id(id) then
    return redis.error_reply('ERR jobrunner: job id "' .. id .. '" has a reserved form (d<n> or <n>-<n>)')
  end
  return nil
end

-- Enqueue one checked job: fields are args[first..last]. Returns {id, 0|1}.
-- `grouped`: the caller made sure the stream and its group exist.
local function put(keys, when, id, window, args, first, last, now, grouped)
  local ready, delayed, wake, seq, uniq = keys[1], keys[2], keys[3], keys[4], keys[5]
  local due = now
  local c = string.sub(when, 1, 1)
  if c == '+' then due = now + tonumber(string.sub(when, 2))
  elseif c == '@' then due = tonumber(string.sub(when, 2)) end
  if id ~= '' then
    if window < 1 then window = 1 end
    local ttl = math.floor(math.max(due - now, 0) + window)
    if not redis.call('SET', uniq, '1', 'NX', 'PX', ttl) then return {id, 0} end
  end
  if due <= now then
    if not grouped then ensure_group(ready) end
    if id ~= '' then
      redis.call('XADD', ready, '*', 'id', id, unpack(args, first, last))
      return {id, 1}
    end
    return {redis.call('XADD', ready, '*', unpack(args, first, last)), 1}
  end
  if id == '' then id = 'd' .. redis.call('INCR', seq) end
  local env = {id, unpack(args, first, last)}
  env[#env + 1] = 'e'
  env[#env + 1] = tostring(math.floor(now))
  env[#env + 1] = 'd'
  env[#env + 1] = tostring(math.ceil(due))
  schedule(delayed, wake, due, cmsgpack.pack(unpack(env)))
  return {id, 1}
end

local function enqueue(keys, args)
  local when, id = args[1], args[2]
  local err = check(when, id, args, 4, #args)
  if err then return err end
  if id ~= '' and not keys[5] then
    return redis.error_reply('ERR jobrunner: an explicit id needs its uniq key')
  end
  return put(keys, when, id, tonumber(args[3]) or 0, args, 4, #args, now_ms())
end

--[[
jr_enqueue_many: jr_enqueue for many jobs of one queue in one call (bulk).
  KEYS: ready delayed wake seq, then the uniq key of each job that has
        an explicit id, in the order of those jobs
  ARGV: uniq_ms, then per job: when id npairs field value ... (npairs
        field/value pairs)
  Every job is checked before any is written. Returns {id, 0|1, id, 0|1, ...}.
]]
local function enqueue_many(keys, args)
  local jobs, i, nuniq = {}, 2, 0
  while i <= #args do
    local when, id, np = args[i], args[i + 1], tonumber(args[i + 2])
    if not np or i + 2 + 2 * np > #args then
      return redis.error_reply('ERR jobrunner: jr_enqueue_many: bad job at argument ' .. i)
    end
    local first, last = i + 3, i + 2 + 2 * np
    local err = check(when, id, args, first, last)
    if err then return err end
    if id ~= '' then nuniq = nuniq + 1 end
    jobs[#jobs + 1] = {when, id, first, last, id ~= '' and keys[4 + nuniq] or nil}
    i = last + 1
  end
  if #keys ~= 4 + nuniq then
    return redis.error_reply('ERR jobrunner: jr_enqueue_many needs one uniq key per explicit id')
  end
  local window, now, out = tonumber(args[1]) or 0, now_ms(), {}
  local k = {keys[1], keys[2], keys[3], keys[4]}
  ensure_group(keys[1])
  for _, j in ipairs(jobs) do
    k[5] = j[5]
    local r = put(k, j[1], j[2], window, args, j[3], j[4], now, true)
    out[#out + 1] = r[1]
    out[#out + 1] = r[2]
  end
  return out
end

-- XADD one unpacked envelope (id, field, value, ...) straight from
-- pcall(cmsgpack.unpack, member): no table in between. A member that is not
-- an envelope (an odd count, or not msgpack) cannot be run and is dropped.
local function xadd_env(ready, ok, id, ...)
  if ok and type(id) == 'string' and select('#', ...) % 2 == 0 and select('#', ...) > 0 then
    redis.call('XADD', ready, '*', 'id', id, ...)
  end
end

--[[
jr_promote
  KEYS: ready delayed wake
  ARGV: limit
  Moves up to `limit` jobs whose due time has come from the delayed set into
  the ready stream, atomically. Returns {moved, next due ms or "" if none,
  now ms, last wake id} (times as strings with 3 decimals). Call again while
  moved == limit; block on the wake stream after the returned id.
]]
local function promote(keys, args)
  local ready, delayed, wake = keys[1], keys[2], keys[3]
  local limit = tonumber(args[1]) or 1000
  local now = now_ms()
  local envs = redis.call('ZRANGE', delayed, '-inf', ms_str(now), 'BYSCORE', 'LIMIT', 0, limit)
  if #envs > 0 then
    ensure_group(ready)
    for _, packed in ipairs(envs) do
      xadd_env(ready, pcall(cmsgpack.unpack, packed))
    end
    -- The promoted members are the lowest-scored ones: remove them by rank.
    redis.call('ZREMRANGEBYRANK', delayed, 0, #envs - 1)
  end
  local head = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  return {#envs, head[2] and ms_str(tonumber(head[2])) or '', ms_str(now), last_wake(wake)}
end

--[[
jr_ack
  KEYS: ready
  ARGV: stream entry ids
  Acknowledges the entries and deletes them from the stream, atomically.
  Returns how many were acknowledged.
]]
local function ack(keys, args)
  local n = redis.call('XACK', keys[1], GROUP, unpack(args))
  redis.call('XDEL', keys[1], unpack(args))
  return n
end

--[[
jr_register
  KEYS: jr:{queues} jr:{queues}:wake
  ARGV: queue names
  Adds queues to the registry; pokes schedulers when one is new.
  Returns how many were new.

jr_queues
  KEYS: jr:{queues} jr:{queues}:wake
  Returns {last wake id, queue names...}: a scheduler serving every queue
  reads this, then blocks on the wake stream after that id.
]]
local function register(keys, args)
  local added = redis.call('SADD', keys[1], unpack(args))
  if added > 0 then poke(keys[2]) end
  return added
end

local function queues(keys)
  local r = {last_wake(keys[2])}
  for _, q in ipairs(redis.call('SMEMBERS', keys[1])) do r[#r + 1] = q end
  return r
end

-- Field names in canonical order (docs/redis-contract.md).
local ORDER = {'h', 'p', 'a', 'm', 't', 'b', 'e', 'd', 'err'}

-- Stream entry fields {f1, v1, ...} -> map, plus the list of names not in
-- ORDER (kept, in their order, so nothing a producer wrote is lost).
local function to_map(flat)
  local m, extra = {}, {}
  local known = {id = true, why = true}
  for _, k in ipairs(ORDER) do known[k] = true end
  for i = 1, #flat, 2 do
    if m[flat[i]] == nil then
      m[flat[i]] = flat[i + 1]
      if not known[flat[i]] then extra[#extra + 1] = flat[i] end
    end
  end
  return m, extra
end

-- Map -> flat field list in canonical order (without id), then the extras.
local function to_flat(m, extra)
  local f = {}
  for _, k in ipairs(ORDER) do
    if m[k] ~= nil then f[#f + 1] = k; f[#f + 1] = m[k] end
  end
  for _, k in ipairs(extra) do f[#f + 1] = k; f[#f + 1] = m[k] end
  return f
end

-- The consumer that holds a pending entry, or nil.
local function owner(ready, entry)
  local p = redis.call('XPENDING', ready, GROUP, entry, entry, 1)
  return p[1] and p[1][2] or nil
end

-- The time part of a stream id, in ms.
local function id_ms(entry)
  return string.match(entry, '^(%d+)%-') or '0'
end

local function bury(dead, dead_max, m, extra, id, err, why)
  m.err = err
  local f = {'id', id}
  for _, x in ipairs(to_flat(m, extra)) do f[#f + 1] = x end
  f[#f + 1] = 'why'
  f[#f + 1] = why
  redis.call('XADD', dead, 'MAXLEN', '~', dead_max, '*', unpack(f))
end

--[[
jr_fail: an attempt failed (or the entry cannot be run): retry or bury it.
  KEYS: ready delayed wake dead
  ARGV: entry consumer action delay_ms error why dead_max
    action  "retry": attempt+1, due in delay_ms (0 = ready again now)
            "dead": into the dead stream with error and why
  Does nothing and returns 0 unless `consumer` still holds the entry (a
  worker that lost its lease must not retry a job another one now runs).
  Returns 1.
]]
local function fail(keys, args)
  local ready, delayed, wake, dead = keys[1], keys[2], keys[3], keys[4]
  local entry, consumer, action = args[1], args[2], args[3]
  local delay, err, why, dead_max = tonumber(args[4]) or 0, args[5], args[6], args[7]
  if owner(ready, entry) ~= consumer then return 0 end
  local e = redis.call('XRANGE', ready, entry, entry)
  redis.call('XACK', ready, GROUP, entry)
  redis.call('XDEL', ready, entry)
  if not e[1] then return 0 end
  local m, extra = to_map(e[1][2])
  local id = m.id or entry
  m.id = nil
  if m.e == nil then m.e = id_ms(entry) end
  if action == 'dead' then
    bury(dead, dead_max, m, extra, id, err, why)
    return 1
  end
  local now = now_ms()
  m.a = tostring((tonumber(m.a) or 1) + 1)
  m.err = err
  if delay <= 0 then
    m.d = nil
    ensure_group(ready)
    redis.call('XADD', ready, '*', 'id', id, unpack(to_flat(m, extra)))
    return 1
  end
  local due = now + delay
  m.d = tostring(math.ceil(due))
  schedule(delayed, wake, due, cmsgpack.pack(id, unpack(to_flat(m, extra))))
  return 1
end

--[[
jr_reclaim: take over entries whose worker stopped heartbeating.
  KEYS: ready dead
  ARGV: consumer min_idle_ms cursor count max_deliveries dead_max
  One XAUTOCLAIM step. Entries delivered more than max_deliveries times are
  poison: they go to the dead stream instead of being run again.
  Returns {next cursor, deleted, poisoned, {{ready, {{id, fields}, ...}}}}:
  the last element has XREADGROUP's shape; deleted counts ids XAUTOCLAIM
  found deleted from the stream (Redis 7 removes them from the PEL).
]]
local function reclaim(keys, args)
  local ready, dead = keys[1], keys[2]
  local consumer, min_idle, cursor, count = args[1], args[2], args[3], args[4]
  local max_deliveries, dead_max = tonumber(args[5]), args[6]
  if redis.call('EXISTS', ready) == 0 then return {'0-0', 0, 0, {}} end
  local r = redis.call('XAUTOCLAIM', ready, GROUP, consumer, min_idle, cursor, 'COUNT', count)
  local kept, poisoned = {}, 0
  for _, en in ipairs(r[2]) do
    if en and en[2] then
      local p = redis.call('XPENDING', ready, GROUP, en[1], en[1], 1)
      local delivered = p[1] and tonumber(p[1][4]) or 0
      if delivered > max_deliveries then
        local m, extra = to_map(en[2])
        local id = m.id or en[1]
        m.id = nil
        if m.e == nil then m.e = id_ms(en[1]) end
        bury(dead, dead_max, m, extra, id,
             'delivered ' .. delivered .. ' times: its worker died while running it each time', 'poison')
        redis.call('XACK', ready, GROUP, en[1])
        redis.call('XDEL', ready, en[1])
        poisoned = poisoned + 1
      else
        kept[#kept + 1] = en
      end
    end
  end
  local deleted = r[3] and #r[3] or 0
  return {r[1], deleted, poisoned, {{ready, kept}}}
end

--[[
jr_heartbeat: extend the lease of running entries.
  KEYS: ready
  ARGV: consumer entry ...
  Resets the idle time of each entry this consumer still holds (XCLAIM
  JUSTID: no delivery counted). Returns the entries it no longer holds.
]]
local function heartbeat(keys, args)
  local ready, consumer = keys[1], args[1]
  local lost = {}
  for i = 2, #args do
    if owner(ready, args[i]) == consumer then
      redis.call('XCLAIM', ready, GROUP, consumer, 0, args[i], 'JUSTID')
    else
      lost[#lost + 1] = args[i]
    end
  end
  return lost
end

--[[
jr_handback: give back entries fetched but never started (shutdown).
  KEYS: ready
  ARGV: consumer entry ...
  Each entry this consumer holds is added again as a new entry (so a
  blocked worker gets it at once) and the old one acknowledged and deleted.
  Returns how many were handed back.
]]
local function handback(keys, args)
  local ready, consumer, n = keys[1], args[1], 0
  for i = 2, #args do
    if owner(ready, args[i]) == consumer then
      local e = redis.call('XRANGE', ready, args[i], args[i])
      if e[1] then
        local m, extra = to_map(e[1][2])
        local id = m.id or args[i]
        m.id = nil
        if m.e == nil then m.e = id_ms(args[i]) end
        redis.call('XADD', ready, '*', 'id', id, unpack(to_flat(m, extra)))
        n = n + 1
      end
      redis.call('XACK', ready, GROUP, args[i])
      redis.call('XDEL', ready, args[i])
    end
  end
  return n
end

--[[
jr_dead_retry: run dead jobs again, attempts reset.
  KEYS: dead ready
  ARGV: dead entry ids
  Returns how many were re-enqueued.
]]
local function dead_retry(keys, args)
  local dead, ready, n = keys[1], keys[2], 0
  for _, entry in ipairs(args) do
    local e = redis.call('XRANGE', dead, entry, entry)
    if e[1] then
      local m, extra = to_map(e[1][2])
      local id = m.id or entry
      m.id, m.a, m.err, m.d = nil, nil, nil, nil
      ensure_group(ready)
      redis.call('XADD', ready, '*', 'id', id, unpack(to_flat(m, extra)))
      redis.call('XDEL', dead, entry)
      n = n + 1
    end
  end
  return n
end

-- The contract version of this library (docs/redis-contract.md).
local function version()
  return '1'
end

redis.register_function('jr_enqueue', enqueue)
redis.register_function('jr_enqueue_many', enqueue_many)
redis.register_function('jr_promote', promote)
redis.register_function('jr_ack', ack)
redis.register_function('jr_register', register)
redis.register_function('jr_fail', fail)
redis.register_function('jr_reclaim', reclaim)
redis.register_function('jr_heartbeat', heartbeat)
redis.register_function('jr_handback', handback)
redis.register_function('jr_dead_retry', dead_retry)
redis.register_function{function_name = 'jr_queues', callback = queues, flags = {'no-writes'}}
redis.register_function{function_name = 'jr_version', callback = version, flags = {'no-writes'}}
