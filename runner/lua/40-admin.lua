--[[
40-admin.lua: the registry of queues, the lookup and change of one job by
its id (the CLI's job show, cancel, run-now, delete), the page of delayed
jobs, the clean-up of stopped consumers and processes, the version. The
names of this part are local to its do-block (the joined chunk may hold at
most 200 locals at once), but for the functions it gives the registration
list.
]]
local version, register, queues, job_locate, job_cancel, job_run_now, job_delete, delayed_page, prune_consumers, procs_forget
local queue_remove
local job_wait -- revision 20 (job wait)
do -- 40-admin.lua

--[[
jr_register
  KEYS: jr:{queues} jr:{queues}:wake
  ARGV: queue names (each 1-128 characters of A-Z a-z 0-9 _ . : -, or the
        internal name <queue>#<J> of a partition, revision 19)
  Adds queues to the registry; pokes schedulers when one is new.
  Returns how many were new.

jr_queues
  KEYS: jr:{queues} jr:{queues}:wake
  Returns {last wake id, queue names...}: a scheduler serving every queue
  reads this, then blocks on the wake stream after that id.
]]
local function registry_keys(fn, keys)
  if #keys ~= 2 or keys[1] ~= 'jr:{queues}' or keys[2] ~= 'jr:{queues}:wake' then
    return refuse(fn, 'takes the keys jr:{queues} jr:{queues}:wake')
  end
  return nil
end

function register(keys, args)
  local fn = 'jr_register'
  local err = registry_keys(fn, keys)
  if err then return err end
  if #args == 0 then return refuse(fn, 'name at least one queue') end
  for i = 1, #args do
    if not key_queue_ok(args[i]) then
      return refuse(fn, 'queue name ' .. shown(args[i]) .. ' is not valid (' .. QUEUE_RULE .. ')')
    end
  end
  err = check_types(fn, {{keys[1], 'set'}, {keys[2], 'stream'}}) or check_room(fn, keys[2])
  if err then return err end
  local added = 0
  for i = 1, #args, 1000 do
    added = added + redis.call('SADD', keys[1], unpack(args, i, math.min(i + 999, #args)))
  end
  if added > 0 then poke(keys[2]) end
  return added
end

function queues(keys)
  local err = registry_keys('jr_queues', keys)
  if err then return err end
  local r = {last_wake(keys[2])}
  for _, q in ipairs(redis.call('SMEMBERS', keys[1])) do r[#r + 1] = q end
  return r
end

--[[
jr_queue_remove (revision 20): delete the keys of a queue that holds no job.
  KEYS: every key of the queue Q, jr:{Q}:ready first (contract.h's
        JR_QUEUE_KEYS: jobrunner sends them all), among them at least
        jr:{Q}:delayed dead wheel wheel:n
  Refuses, naming what it holds, while Q holds a job: ready or running (its
  stream's length), delayed or retrying (the sorted set, the time wheel),
  dead; or while one of those keys holds another type. Otherwise deletes
  every key given; returns how many existed. The registry (jr:{queues},
  another slot) is the caller's to update, after.
]]
function queue_remove(keys, args)
  local fn = 'jr_queue_remove'
  local q = keys[1] and string.match(keys[1], '^jr:{(.*)}:' .. K_READY .. '$')
  if not key_queue_ok(q) then
    return refuse(fn, 'key 1 must be jr:{Q}:' .. K_READY .. ' with Q a queue name (' .. QUEUE_RULE .. '), got ' ..
                  shown(keys[1] or ''))
  end
  if #args ~= 0 then return refuse(fn, 'takes no arguments') end
  local prefix, k = qkey(q, ''), {}
  for i, key in ipairs(keys) do
    if #key <= #prefix or string.sub(key, 1, #prefix) ~= prefix then
      return refuse(fn, 'key ' .. i .. ' must be a key of queue ' .. shown(q) .. ' (' .. prefix .. '...), got ' .. shown(key))
    end
    k[string.sub(key, #prefix + 1)] = key
  end
  local spec = {{keys[1], 'stream'}}
  for _, s in ipairs({{K_DELAYED, 'zset'}, {K_DEAD, 'stream'}, {K_WHEEL, 'zset'}, {K_WHEEL_N, 'string'}}) do
    if not k[s[1]] then return refuse(fn, 'takes every key of the queue: ' .. qkey(q, s[1]) .. ' is missing') end
    spec[#spec + 1] = {k[s[1]], s[2]}
  end
  local err = check_types(fn, spec)
  if err then return err end
  local ready, delayed = redis.call('XLEN', keys[1]), redis.call('ZCARD', k[K_DELAYED])
  local dead, wheel = redis.call('XLEN', k[K_DEAD]), tonumber(redis.call('GET', k[K_WHEEL_N]) or '0') or 0
  if redis.call('ZCARD', k[K_WHEEL]) > 0 and wheel == 0 then wheel = 1 end
  if ready + delayed + dead + wheel > 0 then
    return refuse(fn, 'queue ' .. shown(q) .. ' holds jobs (' .. ready .. ' ready or running, ' .. delayed ..
                  ' delayed or retrying, ' .. wheel .. ' in the time wheel, ' .. dead .. ' dead): it is removed only empty')
  end
  return redis.call('DEL', unpack(keys))
end

-- The contract version of this library (docs/redis-contract.md).
function version()
  return '1'
end


--[[
Finding and controlling one job by its id. A lookup never scans a queue:
  1. the index jr:{Q}:ids (explicit ids, retried, promoted, run-now and
     dead-retried jobs): "@<score>" -> ZRANGE BYSCORE score score, or
     "<entry id>" -> XRANGE entry entry; a stale entry counts as not there;
  2. an id "<ms>-<n>" (enqueued now without an id) is its own stream entry;
  3. an id "d<due ms>-<n>" (enqueued for later without an id) is in the
     delayed set between due and due + 1 ms, or in the time-wheel bucket
     of that due time (by number), or, moved by number into the stream
     (revision 22), at the entry its bucket's runs name (in_moved);
  4. only jr_locate and jr_delete then look in the dead stream, which is
     capped (dead.max): bounded, not a queue scan.
The cost is one or two hash/stream/sorted-set reads, plus the members due
in that one millisecond (or at that exact score): independent of how many
jobs wait.
]]

-- 1 if the first #p bytes of s sort before p, bytewise (as Redis orders
-- members of one score; Lua's < would use the locale's collation).
local function prefix_before(s, p)
  for i = 1, #p do
    local x, y = string.byte(s, i), string.byte(p, i)
    if not x then return true end
    if x ~= y then return x < y end
  end
  return false
end

-- The delayed member of job `id` scored in [min, max] (ZRANGE BYSCORE
-- bounds), or nil. Members of one score are ordered by their bytes, and a
-- member starts with its id packed by msgpack: so within each distinct
-- score of the range the member is found by bisection over ranks (ZRANGE
-- by rank), O(log k) for k members of that score, never a scan of them.
-- A range of 1 ms holds at most 1,000 distinct scores (due times have a
-- microsecond resolution); usually one.
local function in_delayed(k, id, min, max)
  init_upvalues()
  local want = cmsgpack.pack(id)
  local from = min
  while true do
    local first = redis.call('ZRANGE', k.delayed, from, max, 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    if not first[1] then return nil end
    local sc = first[2]
    local base = redis.call('ZCOUNT', k.delayed, '-inf', '(' .. sc)
    local lo, hi = base, base + redis.call('ZCOUNT', k.delayed, sc, sc)
    local stop = hi
    while lo < hi do -- the first member of this score not before `want`
      local mid = math.floor((lo + hi) / 2)
      if prefix_before(redis.call('ZRANGE', k.delayed, mid, mid)[1], want) then lo = mid + 1 else hi = mid end
    end
    if lo < stop then
      local packed = redis.call('ZRANGE', k.delayed, lo, lo)[1]
      if string.sub(packed, 1, #want) == want then
        local items, n = decode_member(packed)
        if not items then return nil end
        local flat = {}
        for i = 4, n do flat[#flat + 1] = items[i] end
        local m = to_map(flat)
        return {state = (tonumber(m[F_ATTEMPT]) or 1) > 1 and 'retrying' or 'delayed', member = packed,
                score = ms_str(tonumber(sc)), flat = flat}
      end
    end
    from = '(' .. sc
  end
end

-- The bucket item of job `id` with number n in the bucket starting at
-- `start` (ms), or nil: a bisection over the bucket's positions by n (items
-- are in order of n), O(log k) LINDEX for k items in that one bucket.
local function in_wheel(k, id, n, start)
  init_upvalues()
  local bk = bucket_key(k.q, start)
  if redis.call('TYPE', bk)['ok'] ~= 'list' then return nil end
  local len = redis.call('LLEN', bk)
  local lo, hi = 0, len
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local ok, _, x = l_pcall(l_unpack_limit, redis.call('LINDEX', bk, mid), 1, 0)
    if not ok or l_type(x) ~= 'number' then return nil end -- not an item: no order to bisect
    if x < n then lo = mid + 1 else hi = mid end
  end
  if lo >= len then return nil end
  local item = redis.call('LINDEX', bk, lo)
  local ok, _, x = l_pcall(l_unpack_limit, item, 1, 0)
  if not ok or x ~= n then return nil end
  local jid, us, flat = wheel_decode(item, start)
  if not jid or jid ~= id then return nil end
  local m = to_map(flat)
  return {state = (tonumber(m[F_ATTEMPT]) or 1) > 1 and 'retrying' or 'delayed', bucket = bk, pos = lo, n = n,
          score = ms_str(us / 1000), flat = flat}
end

-- The ready-stream entry `entry` if it is job `id`, or nil; running (with
-- its consumer, idle ms and delivery count) when the group holds it.
local function in_stream(k, id, entry)
  local e = redis.call('XRANGE', k.ready, entry, entry)[1]
  if not e then return nil end
  local m = to_map(e[2])
  if (m[F_ID] or entry) ~= id then return nil end
  local r = {state = 'ready', entry = entry, flat = e[2]}
  if grouped(k.ready) then
    local p = redis.call('XPENDING', k.ready, GROUP, entry, entry, 1)[1]
    if p then r.state, r.consumer, r.idle, r.deliveries = 'running', p[2], p[3], p[4] end
  end
  return r
end

-- The entry of job `id`, number n of the bucket starting at `start`, if it
-- was moved by number (revision 22, mv_id in 20-promote.lua): the runs
-- recorded in the index's field d<start> name its entry T-n.
local function in_moved(k, id, n, start)
  local rec = k.ids and redis.call('HGET', k.ids, 'd' .. string.format('%d', start))
  if not rec then return nil end
  for a, b, t in string.gmatch(rec, '(%d+) (%d+) (%d+),') do
    if #a <= 15 and #b <= 15 and tonumber(a) <= n and n <= tonumber(b) and #t <= 15 then
      local r = in_stream(k, id, t .. '-' .. string.format('%d', n))
      if r then return r end
    end
  end
  return nil
end

-- The newest dead entry of job `id` (or whose entry id is `id`), or nil.
local function in_dead(k, id)
  local from = '+'
  while true do
    local page = redis.call('XREVRANGE', k.dead, from, '-', 'COUNT', 1000)
    for _, e in ipairs(page) do
      local m = to_map(e[2])
      -- a dead entry is this job when its id field says so, or (garbage
      -- kept whole, with no id) when its own entry id is the job id
      if m[F_ID] == id or (m[F_ID] == nil and e[1] == id) then return {state = 'dead', entry = e[1], flat = e[2]} end
    end
    if #page < 1000 then return nil end
    from = '(' .. page[#page][1]
  end
end

-- Where job `id` is: nil (not found) or {state, member, score, entry, flat,
-- consumer, idle, deliveries}. k = {ready, delayed, ids, dead}; without
-- k.dead the dead stream is not looked at.
local function locate(k, id)
  local r
  local where = k.ids and redis.call('HGET', k.ids, id)
  if where then
    local s = string.match(where, '^@(.+)$')
    local wn, ws = string.match(where, '^~(%d+)@(.+)$')
    if s then
      if dec_arg(s) then r = in_delayed(k, id, s, s) end
    elseif wn then
      -- in its bucket, or in the sorted set once the bucket cascaded
      if dec_arg(ws) and #wn <= 15 then
        r = in_wheel(k, id, tonumber(wn), bucket_of(to_us(tonumber(ws)))) or in_delayed(k, id, ws, ws)
      end
    elseif stream_id_ok(where) then
      r = in_stream(k, id, where)
    end
    if r then return r end
  end
  if string.find(id, '^%d+%-%d+$') and stream_id_ok(id) then
    r = in_stream(k, id, id)
    if r then return r end
  end
  local due, dn = string.match(id, '^d(%d+)%-(%d+)$')
  if due and #due <= 15 then
    local start = bucket_of(tonumber(due) * 1000)
    r = (#dn <= 15 and in_wheel(k, id, tonumber(dn), start)) or
        in_delayed(k, id, due, '(' .. string.format('%d', tonumber(due) + 1)) or
        (#dn <= 15 and in_moved(k, id, tonumber(dn), start))
    if r then return r end
  end
  if k.dead then return in_dead(k, id) end
  return nil
end

-- Check the keys (the keys of queue Q that `names` name, see JOB_KEYS,
-- then jr:{Q}:wheel jr:{Q}:wheel:n -- revision 18; left out in the form
-- before it, then built from Q, see reached --, then jr:{Q}:uniq:ID if
-- `uniq`, which jr:{Q}:waiters jr:{Q}:done may follow, revision 20: see
-- tell_waiters) and the one argument ID of a job function. Returns k (keys by
-- name) and id, or nil and an error reply.
local JOB_KEYS = {ready = {K_READY, 'stream'}, delayed = {K_DELAYED, 'zset'}, ids = {K_IDS, 'hash'},
                  cancelled = {K_CANCELLED, 'hash'}, dead = {K_DEAD, 'stream'}}
local function job_call(fn, keys, args, names, uniq)
  local suffixes = {}
  for i, n in ipairs(names) do suffixes[i] = JOB_KEYS[n][1] end
  local q, err = queue_of(fn, keys, suffixes, true)
  if not q then return nil, err end
  local x, nx = reached(fn, keys, #names + 1, q, {K_WHEEL, K_WHEEL_N})
  if not x then return nil, nx end
  local nk = #names + nx -- the keys before the uniq key
  if not uniq and #keys ~= nk then
    return nil, refuse(fn, 'takes the keys jr:{Q}:' .. table.concat(suffixes, ' jr:{Q}:') ..
                       ' [jr:{Q}:wheel jr:{Q}:wheel:n], got ' .. #keys .. ' keys')
  end
  local id = args[1]
  if #args ~= 1 or id == '' or #id > ID_MAX then
    return nil, refuse(fn, 'argument: ID (1..' .. ID_MAX .. ' bytes), got ' .. #args .. ' arguments')
  end
  local k, spec = {q = q, wheel = x[K_WHEEL], wheel_n = x[K_WHEEL_N]}, {{x[K_WHEEL], 'zset'}}
  for i, n in ipairs(names) do
    k[n] = keys[i]
    spec[#spec + 1] = {keys[i], JOB_KEYS[n][2]}
  end
  -- a job index holding garbage is not used (revision 15): the job is
  -- found by its id's form alone, as a job written before the index
  if k.ids and not aux(k.ids, 'hash') then
    k.ids = nil
    for i = #spec, 1, -1 do
      if spec[i][2] == 'hash' and spec[i][1] == qkey(q, K_IDS) then table.remove(spec, i) end
    end
  end
  if uniq then
    local want = uniq_key(q, id)
    -- revision 20: then jr:{Q}:waiters jr:{Q}:done may follow (tell_waiters)
    local told = #keys == nk + 3 and keys[nk + 2] == qkey(q, K_WAITERS) and keys[nk + 3] == qkey(q, K_DONE)
    if (#keys ~= nk + 1 and not told) or keys[nk + 1] ~= want then
      return nil, refuse(fn, 'key ' .. (nk + 1) .. ' must be ' .. shown(want) .. ' (then jr:{Q}:waiters ' ..
                         'jr:{Q}:done, or no more keys)')
    end
    k.uniq = want
    if told then
      k.waiters, k.done = aux(keys[nk + 2], 'hash'), aux(keys[nk + 3], 'stream')
      if k.done then
        err = check_room(fn, k.done)
        if err then return nil, err end
      end
    end
  end
  err = check_types(fn, spec) or check_seq(fn, k.wheel_n, 1)
  if err then return nil, err end
  return k, id
end

-- A waiting job removed (jr_cancel, jr_delete; revision 20): those waiting
-- for it (jr_wait) are told, outcome cancelled (with err saying how), as
-- the worker's calls tell the end of a job that ran (30-worker.lua).
-- Nothing when nobody waits on the queue, or its keys hold garbage. Cannot
-- raise (job_call checked the room of k.done).
local function tell_waiters(k, id, how)
  if not (k.waiters and k.done) or redis.call('EXISTS', k.waiters) == 0 then return end
  local d = redis.call('HGET', k.waiters, id)
  if not d then return end
  redis.call('HDEL', k.waiters, id)
  local now = now_ms()
  if (tonumber(d) or 0) < now then return end
  redis.call('XADD', k.done, 'MAXLEN', '~', 1000, '*', 'id', id, 'outcome', 'cancelled', 'finished_at',
             string.format('%d', math.floor(now)), 'err', how)
end

-- A tombstone (msgpack of a number alone, at most 9 bytes; a job's item
-- is longer) or not.
local function is_tombstone(item)
  if not item or #item > 9 then return false end
  local ok, off, x = l_pcall(l_unpack_limit, item, 1, 0)
  return ok and off == -1 and l_type(x) == 'number'
end

-- Take job r (found by in_wheel) out of its bucket: a tombstone keeps the
-- positions and the order by n; the tombstones at either end of the bucket
-- are popped (each one once: O(1) amortised), and a bucket left empty goes
-- with its index member. The counter was checked by job_call.
local function wheel_forget(k, r)
  redis.call('LSET', r.bucket, r.pos, cmsgpack.pack(r.n))
  redis.call('DECR', k.wheel_n)
  while is_tombstone(redis.call('LINDEX', r.bucket, 0)) do redis.call('LPOP', r.bucket) end
  while is_tombstone(redis.call('LINDEX', r.bucket, -1)) do redis.call('RPOP', r.bucket) end
  if redis.call('EXISTS', r.bucket) == 0 then
    redis.call('ZREM', k.wheel, string.match(r.bucket, ':(%d+)$'))
  end
end

-- Keep the idempotency key of a removed job as a tombstone for the rest of
-- its window (revision 15; it was deleted before): the mechanism that made
-- the job (a stalled scheduler firing the same tick, a producer retrying
-- its enqueue, a parent's follow-up) cannot make it again within the
-- window. The value says why; the TTL stays.
local function tombstone(k, why)
  redis.call('SET', k.uniq, why, 'XX', 'KEEPTTL')
end

-- Take a waiting job (delayed, retrying or ready, not running) out of its
-- queue, with its index entry; its idempotency key stays (tombstone).
local function remove_waiting(k, id, r, why)
  if r.member then
    redis.call('ZREM', k.delayed, r.member)
  elseif r.bucket then
    wheel_forget(k, r)
  else
    redis.call('XDEL', k.ready, r.entry)
  end
  index_forget(k.ids, id)
  tombstone(k, why)
end

--[[
jr_locate: where a job is, read atomically (flag no-writes).
  KEYS: ready delayed ids dead wheel wheel:n   (see job_call)
  ARGV: id
  Returns {state, id, entry, due, consumer, idle_ms, deliveries, fields}:
  state delayed | retrying | ready | running | dead | not found; entry the
  stream entry id (ready, running, dead; else ""); due the delayed score
  (Unix ms, 3 decimals; else ""); consumer, idle_ms, deliveries of a running
  job ("", 0, 0 otherwise); fields the job's field/value list (a stream or
  dead entry as stored; a delayed member without its leading id).
]]
function job_locate(keys, args)
  local k, id = job_call('jr_locate', keys, args, {'ready', 'delayed', 'ids', 'dead'})
  if not k then return id end
  local r = locate(k, id)
  if not r then return {'not found', id, '', '', '', 0, 0, {}} end
  return {r.state, id, r.entry or '', r.score or '', r.consumer or '', r.idle or 0, r.deliveries or 0, r.flat}
end

--[[
jr_cancel: cancel one job.
  KEYS: ready delayed ids cancelled wheel wheel:n uniq [waiters done]
        (uniq = jr:{Q}:uniq:ID; see job_call; with waiters and done,
        revision 20, those waiting for a waiting job it removes are told:
        see tell_waiters)
  ARGV: id
  A delayed, retrying or ready (not yet fetched) job is removed, with its
  index entry; its idempotency key stays until its window ends, as a
  tombstone "cancelled" (the id cannot be enqueued again within it): returns
  "cancelled". A running job is flagged (jr:{Q}:cancelled, entry -> Unix
  ms): its worker learns it at its next heartbeat or at its
  acknowledgement (jr_ack, jr_ack_follow), it is not retried and
  jr_reclaim drops it; returns "running". Otherwise "not found" (a dead job
  is not looked for). Locating and changing are one atomic step, so a
  promotion or fetch can never make a job both cancelled and run.
]]
function job_cancel(keys, args)
  local k, id = job_call('jr_cancel', keys, args, {'ready', 'delayed', 'ids', 'cancelled'}, true)
  if not k then return id end
  local r = locate(k, id)
  if not r then return 'not found' end
  if r.state == 'running' then
    redis.call('HSET', k.cancelled, r.entry, string.format('%d', math.floor(now_ms())))
    return 'running'
  end
  remove_waiting(k, id, r, 'cancelled')
  tell_waiters(k, id, 'cancelled before it ran (jobrunner cancel)')
  return 'cancelled'
end

--[[
jr_run_now: make a delayed or retrying job ready now.
  KEYS: ready delayed ids wheel wheel:n   (see job_call)
  ARGV: id
  Returns {state before, entry id}: for delayed and retrying, the new
  stream entry (the job keeps its id, attempt and fields); for ready and
  running, its entry, unchanged; {"not found", ""} otherwise.
]]
function job_run_now(keys, args)
  local fn = 'jr_run_now'
  local k, id = job_call(fn, keys, args, {'ready', 'delayed', 'ids'})
  if not k then return id end
  local r = locate(k, id)
  if not r then return {'not found', ''} end
  if not r.member and not r.bucket then return {r.state, r.entry} end
  local err = check_room(fn, k.ready)
  if err then return err end
  ensure_group(k.ready)
  local e = redis.call('XADD', k.ready, '*', F_ID, id, unpack(r.flat))
  if r.member then redis.call('ZREM', k.delayed, r.member) else wheel_forget(k, r) end
  index_set(k.ids, id, e)
  return {r.state, e}
end

--[[
jr_delete: delete one job that is not running.
  KEYS: ready delayed ids dead wheel wheel:n uniq [waiters done]
        (uniq = jr:{Q}:uniq:ID; see job_call and jr_cancel)
  ARGV: id
  Removes a delayed, retrying or ready job (with its index entry) or its
  newest dead entry; its idempotency key stays until its window ends, as a
  tombstone "deleted" (see tombstone). A running job is left alone
  (use jr_cancel). Returns {state, 1 if deleted else 0}.
]]
function job_delete(keys, args)
  local k, id = job_call('jr_delete', keys, args, {'ready', 'delayed', 'ids', 'dead'}, true)
  if not k then return id end
  local r = locate(k, id)
  if not r then return {'not found', 0} end
  if r.state == 'running' then return {'running', 0} end
  if r.state == 'dead' then
    redis.call('XDEL', k.dead, r.entry)
    tombstone(k, 'deleted')
  else
    remove_waiting(k, id, r, 'deleted')
    tell_waiters(k, id, 'deleted before it ran (jobrunner job delete)')
  end
  return {r.state, 1}
end

--[[
jr_delayed_page: a page of a queue's delayed jobs, both tiers (flag
no-writes), for `jobrunner jobs --state delayed`.
  KEYS: delayed wheel (jr:{Q}:delayed jr:{Q}:wheel; revision 18: the
        form before it, delayed alone, is still taken, see reached)
  ARGV: cursor count   cursor "" (first page) or the one a page returned;
        count 1..10000
  Returns {next cursor or "" at the end, member, score, member, score, ...}:
  members as in the sorted set (msgpack id, field, value, ...), scores
  the due time. The sorted set comes first, by due time (cursor
  "<score>/<skip>"), then the time wheel bucket by bucket (cursor
  "w<start>/<position>"), each bucket in enqueue order (by n). A bucket
  item that is not a job is returned as stored, scored at its bucket's start.
]]
function delayed_page(keys, args)
  local fn = 'jr_delayed_page'
  local q, err = queue_of(fn, keys, {K_DELAYED}, true)
  if not q then return err end
  local x, nx = reached(fn, keys, 2, q, {K_WHEEL})
  if not x then return nx end
  if #keys ~= 1 + nx then
    return refuse(fn, 'takes the keys jr:{Q}:delayed [jr:{Q}:wheel], got ' .. #keys .. ' keys')
  end
  local cursor, limit = args[1], int_arg(args[2])
  if #args ~= 2 or not limit or limit < 1 or limit > 10000 then
    return refuse(fn, 'arguments: CURSOR ("" or one a page returned) COUNT (1..10000)')
  end
  local wheel = x[K_WHEEL]
  err = check_types(fn, {{keys[1], 'zset'}, {wheel, 'zset'}})
  if err then return err end
  init_upvalues()
  local out, min, skip, wstart, wpos = {''}, nil, 0, nil, 0
  if cursor == '' then
    min = '-inf'
  else
    local a, b = string.match(cursor, '^([%d%.]+)/(%d+)$')
    if a and dec_arg(a) and #b <= 15 then
      min, skip = a, tonumber(b)
    else
      a, b = string.match(cursor, '^w(%d+)/(%d+)$')
      if not a or #a > 15 or #b > 15 then
        return refuse(fn, 'bad cursor ' .. shown(cursor) .. ' (use "" or one a page returned)')
      end
      wstart, wpos = tonumber(a), tonumber(b)
    end
  end
  if min then
    local z = redis.call('ZRANGE', keys[1], min, '+inf', 'BYSCORE', 'LIMIT', skip, limit, 'WITHSCORES')
    for i = 1, #z do out[#out + 1] = z[i] end
    if #z / 2 == limit then
      local last, same = z[#z], 0
      for i = #z, 2, -2 do
        if z[i] ~= last then break end
        same = same + 1
      end
      if same == limit and last == min then same = same + skip end
      out[1] = last .. '/' .. same
      return out
    end
  end
  local need = limit - (#out - 1) / 2
  local b = redis.call('ZRANGE', wheel, wstart or '-inf', '+inf', 'BYSCORE', 'LIMIT', 0, 1)[1]
  if b and tonumber(b) ~= wstart then wpos = 0 end
  while b and need > 0 do
    local start = tonumber(b)
    local bk = bucket_key(q, start)
    if redis.call('TYPE', bk)['ok'] ~= 'list' then
      return refuse(fn, 'key ' .. shown(bk) .. ' is not a list')
    end
    local asked = need
    local items = redis.call('LRANGE', bk, wpos, wpos + asked - 1)
    for _, item in ipairs(items) do
      local id, us, flat = wheel_decode(item, start)
      if id then
        out[#out + 1] = cmsgpack.pack(id, unpack(flat))
        out[#out + 1] = ms_str(us / 1000)
        need = need - 1
      elseif id == nil then
        out[#out + 1] = item
        out[#out + 1] = ms_str(start)
        need = need - 1
      end
    end
    wpos = wpos + #items
    if need == 0 then
      out[1] = 'w' .. ms_int(start) .. '/' .. wpos
      return out
    end
    if #items < asked then -- the end of this bucket: the next one
      b, wpos = redis.call('ZRANGE', wheel, '(' .. ms_int(start), '+inf', 'BYSCORE', 'LIMIT', 0, 1)[1], 0
    end
  end
  return out
end


-- Remove the consumers of stopped processes from a queue's group: each one
-- that holds no pending entry, has been idle at least min_idle ms, and is
-- not among the live names given. Check and XGROUP DELCONSUMER happen in
-- this one atomic call, because DELCONSUMER drops a consumer's pending
-- entries and a consumer could get one between a separate check and the
-- delete. KEYS: ready stream. ARGV: min_idle_ms, live consumer names...
-- Returns how many consumers were removed (0 without stream or group).
function prune_consumers(keys, args)
  local min_idle = tonumber(args[1])
  if not min_idle or min_idle < 0 then return redis.error_reply('ERR min_idle_ms must be a number >= 0') end
  local live = {}
  for i = 2, #args do live[args[i]] = true end
  local cons = redis.pcall('XINFO', 'CONSUMERS', keys[1], GROUP)
  if type(cons) ~= 'table' or cons.err then return 0 end
  local removed = 0
  for _, c in ipairs(cons) do
    local f = {}
    for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
    if f.pending == 0 and f.idle >= min_idle and not live[f.name] then
      redis.call('XGROUP', 'DELCONSUMER', keys[1], GROUP, f.name)
      removed = removed + 1
    end
  end
  return removed
end


-- Forget, from the index of live processes (KEYS[1], jr:{procs}), each name
-- given whose entry jr:{procs}:<name> is gone (expired or deleted). The
-- check and the ZREM are one atomic step: a process that announces itself
-- again between a reader's look and its removal stays listed (its later
-- refreshes only renew the entry's time to live, not the index).
-- KEYS: jr:{procs}, then jr:{procs}:<name> of each name, in their order
-- (revision 18; jr:{procs} alone, the form before it, is still taken: the
-- entries are then reached by name). ARGV: names. Returns how many were
-- forgotten.
function procs_forget(keys, args)
  local fn, n = 'jr_procs_forget', 0
  if #keys > 1 then
    if #keys ~= 1 + #args then
      return refuse(fn, 'takes the key jr:{procs}, then jr:{procs}:<name> of each of the ' .. #args ..
                    ' names, got ' .. #keys .. ' keys')
    end
    for i, name in ipairs(args) do
      if keys[i + 1] ~= keys[1] .. ':' .. name then
        return refuse(fn, 'key ' .. (i + 1) .. ' must be ' .. shown(keys[1] .. ':' .. name) .. ', got ' .. shown(keys[i + 1]))
      end
    end
  end
  for i, name in ipairs(args) do
    if redis.call('EXISTS', keys[i + 1] or keys[1] .. ':' .. name) == 0 then
      n = n + redis.call('ZREM', keys[1], name)
    end
  end
  return n
end

--[[
jr_wait: register a waiter for the end of a job, or tell its end now
(revision 20, `jobrunner job wait`).
  KEYS: ready delayed ids dead wheel wheel:n finished finished:ids waiters
        done
  ARGV: id timeout_ms (1..DELAY_MAX_MS)
  A job waiting or running (as jr_locate finds it): its id goes into
  jr:{Q}:waiters with the deadline (Redis's clock, the latest of its
  waiters') and {"wait", the last entry id of jr:{Q}:done} is returned:
  the waiter blocks (XREAD) on jr:{Q}:done after that id, where the call
  that ends the job writes its end (30-worker.lua, Finished jobs). The
  check and the registration are one step, so no end is missed. Else its
  finished record (keep_finished): {"finished", fields}; else its dead
  entry: {"dead", fields}; else {"unknown"} (never there, or finished
  without a record).
]]
function job_wait(keys, args)
  local fn = 'jr_wait'
  local k, id = job_call(fn, {unpack(keys, 1, 6)}, {args[1]}, {'ready', 'delayed', 'ids', 'dead'})
  if not k then return id end
  local q = k.q
  for i, suf in ipairs({K_FINISHED, K_FINISHED_IDS, K_WAITERS, K_DONE}) do
    if keys[6 + i] ~= qkey(q, suf) then
      return refuse(fn, 'key ' .. (6 + i) .. ' must be ' .. shown(qkey(q, suf)) .. ' (keys 7..10 are jr:{Q}:finished ' ..
                    'jr:{Q}:finished:ids jr:{Q}:waiters jr:{Q}:done; 10 keys)')
    end
  end
  local timeout = int_arg(args[2])
  if #keys ~= 10 or #args ~= 2 or not timeout or timeout < 1 or timeout > DELAY_MAX_MS then
    return refuse(fn, 'arguments: ID TIMEOUT_MS (1..' .. DELAY_MAX_MS .. '), 10 keys')
  end
  local err = check_types(fn, {{keys[7], 'stream'}, {keys[8], 'hash'}, {keys[9], 'hash'}, {keys[10], 'stream'}})
  if err then return err end
  local dead = k.dead
  k.dead = nil
  local r = locate(k, id)
  if r then
    local deadline = math.floor(now_ms()) + timeout
    local d = tonumber(redis.call('HGET', keys[9], id) or '')
    if not d or d < deadline then redis.call('HSET', keys[9], id, string.format('%d', deadline)) end
    local last = redis.call('XREVRANGE', keys[10], '+', '-', 'COUNT', 1)
    return {'wait', last[1] and last[1][1] or '0-0'}
  end
  local at = redis.call('HGET', keys[8], id)
  if at and stream_id_ok(at) then
    local e = redis.call('XRANGE', keys[7], at, at)
    if e[1] then
      local m = to_map(e[1][2])
      if m[F_ID] == id then return {'finished', e[1][2]} end
    end
  end
  k.dead = dead
  r = k.dead and in_dead(k, id)
  if r then return {'dead', r.flat} end
  return {'unknown'}
end

end -- 40-admin.lua
