--[[
10-enqueue.lua: jr_enqueue, jr_enqueue_many, jr_ready_prepare; the time
wheel; the decoder of the two stored formats (a delayed member, a bucket
item). Its names are not in a block of their own: the later parts use them
(check_job and put for follow-ups, the time wheel and the decoder).
]]
--[[
jr_enqueue
  KEYS: ready delayed wake seq ids wheel wheel:n [uniq]
        (uniq = jr:{Q}:uniq:ID, only with an id; revision 18: ids wheel
        wheel:n may be left out, the form before it: then they are built
        from Q, see reached)
  ARGV: when id uniq_ms field value [field value ...]
    when    "" or "0" = now; "+<ms>" = after a delay; "@<ms>" = at Unix ms
            (digits, optional fraction: "+1500", "@1764581400250.5"); due
            at most DELAY_MAX_MS after Redis's now
    id      "" = generate one; otherwise the job id (job_id_why: 1..158
            bytes, no NUL, not of a generated form), and the
            enqueue is idempotent: a second enqueue with the same id within
            the window (uniq_ms after the due time) does nothing
    uniq_ms digits, 0..UNIQ_MAX_MS
    fields  h <handler> (handler_why) first, then any of p, a, m, t, b once each (a, m:
            1..ATTEMPTS_MAX; t: 1..TIMEOUT_MAX_MS; b: 1..BACKOFF_MAX_MS)
  Returns {job id, 1 if enqueued or 0 if a duplicate}.
]]
-- Put a packed envelope into the delayed set at `due`; poke the schedulers
-- if it is now the earliest.
local function schedule(delayed, wake, due, packed)
  redis.call('ZADD', delayed, ms_str(due), packed)
  if redis.call('ZRANGE', delayed, 0, 0)[1] == packed then poke(wake) end
end

local PRODUCER_FIELDS = {[F_HANDLER] = true, [F_PAYLOAD] = true, [F_ATTEMPT] = ATTEMPTS_MAX, [F_MAX] = ATTEMPTS_MAX,
                         [F_TIMEOUT] = TIMEOUT_MAX_MS, [F_BACKOFF] = BACKOFF_MAX_MS}

-- Check one job (fields = args[first..last]) against Redis's now. Returns
-- its due time (Unix ms), or nil and an error reply. The due time of the
-- last WHEN parsed is kept with the now it was computed at (cj_*): the jobs
-- of a bulk call mostly share WHEN, and the parse (a format and a strtod)
-- was a tenth of a delayed job's cost.
local cj_when, cj_now, cj_due, cj_handler
local function check_job(fn, when, id, args, first, last, now)
  local due = now
  if when == cj_when and now == cj_now then
    due = cj_due
  elseif when ~= '' and when ~= '0' then
    local c, v = string.sub(when, 1, 1), dec_arg(string.sub(when, 2))
    if (c ~= '+' and c ~= '@') or not v then
      return nil, refuse(fn, 'bad due time ' .. shown(when) .. ' (use "", "+MS" or "@UNIXMS": decimal digits with an optional fraction)')
    end
    -- to the microsecond the score keeps (ms_str), so that the id of a
    -- delayed job (d<floor(due)>-<n>) names the millisecond it is stored in
    due = tonumber(ms_str(c == '+' and now + v or v))
    if due > now + DELAY_MAX_MS then
      return nil, refuse(fn, 'due time ' .. shown(when) .. ' is more than ' .. DELAY_MAX_MS .. ' ms (10 years) after now')
    end
    cj_when, cj_now, cj_due = when, now, due
  end
  local n = last - first + 1
  if n < 2 or n % 2 ~= 0 or args[first] ~= F_HANDLER or args[first + 1] == '' then
    return nil, refuse(fn, 'fields must start with h <handler> (not empty) and come in pairs')
  end
  for i = first, last, 2 do
    local f, v = args[i], args[i + 1]
    local rule = PRODUCER_FIELDS[f]
    if not rule then
      return nil, refuse(fn, 'unknown field ' .. shown(f) .. ' (a producer sends h, p, a, m, t, b)')
    end
    -- at most 6 fields: comparing with the earlier ones costs no table per job
    for j = first, i - 2, 2 do
      if args[j] == f then return nil, refuse(fn, 'field ' .. f .. ' given twice') end
    end
    if rule ~= true then
      local x = int_arg(v)
      if not x or x < 1 or x > rule then
        return nil, refuse(fn, 'field ' .. f .. ' must be an integer 1..' .. rule .. ', got ' .. shown(v))
      end
    end
  end
  local why = args[first + 1] ~= cj_handler and handler_why(args[first + 1])
  if why == nil then cj_handler = args[first + 1] end -- valid: the next job of a bulk call likely has it too
  if why then return nil, refuse(fn, 'handler name ' .. shown(args[first + 1]) .. ' ' .. why) end
  why = id ~= '' and job_id_why(id)
  if why then return nil, refuse(fn, 'job id ' .. shown(id) .. ' ' .. why) end
  return due
end

-- The idempotency window argument, or nil and an error reply.
local function window_arg(fn, s)
  local w = int_arg(s)
  if not w or w > UNIQ_MAX_MS then
    return nil, refuse(fn, 'UNIQ_MS must be an integer 0..' .. UNIQ_MAX_MS .. ', got ' .. shown(s))
  end
  return w
end

--[[
The time wheel (revision 5). A delayed job due NEAR_MS or more after now
(revision 13: and in a bucket starting more than NEAR_MS after now, see
to_wheel) waits in a bucket, not in the sorted set: the list jr:{Q}:wheel:<start>
holds the jobs due in [start, start + WHEEL_MS) (start = Unix ms, a
multiple of WHEEL_MS), as compact items, in the order of their number n
(from jr:{Q}:seq: every job that enters a bucket takes one, so a job is
found by bisection). The sorted set jr:{Q}:wheel indexes the buckets
(member = start in digits, score = start), and jr:{Q}:wheel:n counts the
jobs in buckets (for stats). jr_promote cascades a bucket into the sorted
set jr:{Q}:delayed (the near tier, ordered to the microsecond) once its
start is less than NEAR_MS (+ 10 us per job in it, at most 30 s more) away,
or moves it straight into the stream when the whole bucket is already due. A compact item is the msgpack sequence
  n, due - start (us), id ("" = generated: d<due ms>-<n>), E, field, value, ...
where E >= 0 says the envelope ended with e = floor(due) - E and
d = ceil(due), which are left out; E = -1 keeps the fields as they were.
A cancelled item is replaced (LSET) by the tombstone msgpack(n), so the
positions and the order by n stay; a cascade drops tombstones.
]]
local WHEEL_MS = 1000 -- bucket width
local NEAR_MS = 2000  -- due sooner: the sorted set; a bucket starting sooner cascades
local function bucket_key(q, start) return qkey(q, K_WHEEL .. ':' .. string.format('%d', start)) end
-- A due time (ms with 3 decimals) as integer microseconds, and its bucket.
local function to_us(due) return math.floor(due * 1000 + 0.5) end
local function bucket_of(us) return math.floor(us / (WHEEL_MS * 1000)) * WHEEL_MS end
local function ms_int(x) return string.format('%d', x) end
-- Whether a job due at `due` waits in the wheel (issue 10, lateness with N
-- waiting): due NEAR_MS or more after now AND in a bucket that would not
-- cascade at once (start - NEAR_MS after now). A job due in 2-3 s used to
-- enter a bucket starting less than NEAR_MS away, which the next
-- jr_promote cascaded into the sorted set at once; as that cascade had
-- emptied and removed the bucket, the next such job re-created it as the
-- earliest bucket: one poke, one scheduler wake-up and one jr_promote per
-- job, on top of the one that promotes it. Such a job now goes straight
-- into the sorted set, where the cascade would have put it (same member).
local function to_wheel(due, now)
  return due - now >= NEAR_MS and bucket_of(to_us(due)) - NEAR_MS > now
end

-- The compact item of a job: `flat` its fields without the id (e, d last
-- when put wrote them), sid its id or "" for a generated one.
local function wheel_item(us, n, sid, flat)
  local k, E = #flat, -1
  if k >= 4 and flat[k - 3] == F_ENQUEUED and flat[k - 1] == F_DUE and flat[k] == ms_int(math.ceil(us / 1000)) and
     string.find(flat[k - 2], '^%d+$') and #flat[k - 2] <= 15 and tonumber(flat[k - 2]) <= math.floor(us / 1000) then
    E, k = math.floor(us / 1000) - tonumber(flat[k - 2]), k - 4
  end
  return cmsgpack.pack(n, us - bucket_of(us) * 1000, sid, E, unpack(flat, 1, k))
end

-- The keys beside ready delayed wake seq that an enqueue (and a job moved
-- into the wheel) reaches, in their order in KEYS (see reached).
local ENQ_MORE = {K_IDS, K_WHEEL, K_WHEEL_N}

-- Refuse unless the wheel keys of queue k.q (k.wheel, k.wheel_n, k.seq), and
-- the bucket of each due time in `dues`, hold their types (and the counters
-- counts): the writes of wheel_add cannot raise then.
local function wheel_check(fn, k, dues)
  local q = k.q
  local spec = {{k.wheel, 'zset'}}
  local seen, last = {}, nil
  for _, due in ipairs(dues) do
    if due ~= last then -- the jobs of a bulk call mostly share their due time
      last = due
      local b = bucket_of(to_us(due))
      if not seen[b] then
        seen[b] = true
        spec[#spec + 1] = {bucket_key(q, b), 'list'}
      end
    end
  end
  return check_types(fn, spec) or check_seq(fn, k.wheel_n, #dues) or check_seq(fn, k.seq, #dues)
end

-- A bucket of k jobs cascades NEAR_MS + k x LEAD_US_PER_JOB us (at most
-- NEAR_MS + LEAD_MAX_MS) before its start: a dense second is in the sorted
-- set before it falls due (a cascade costs about one ZADD per job:
-- measured 8.5 us per job, jr_promote 1000 at a time on 2 loaded cores,
-- Redis 7.0; cascades take only the room due work leaves).
local LEAD_US_PER_JOB = 10
local LEAD_MAX_MS = 30000
local function cascade_at(start, len)
  return start - NEAR_MS - math.min(LEAD_MAX_MS, len * LEAD_US_PER_JOB / 1000)
end
-- The whole seconds of a bucket's lead (of k jobs): when they grow, its
-- cascade time has moved earlier by a second.
local function lead_step(len)
  return math.floor(math.min(LEAD_MAX_MS, len * LEAD_US_PER_JOB / 1000) / 1000)
end

-- Add a checked job to its bucket: k = {q, seq, wake, ids, wheel, wheel_n}; flat = its
-- fields without the id; id "" = generate one. Returns the id. With k.wbuf
-- (a table) the items are gathered per bucket and written by wheel_flush;
-- n still grows in call order, so each bucket stays in order of n.
local function wheel_flush(k)
  for _, b in ipairs(k.wbuf.order) do
    local items, bk, len = k.wbuf[b], bucket_key(k.q, b), 0
    for i = 1, #items, 1000 do
      len = redis.call('RPUSH', bk, unpack(items, i, math.min(i + 999, #items)))
    end
    local wheel = k.wheel
    if redis.call('ZADD', wheel, 'NX', b, ms_int(b)) == 1 and redis.call('ZRANGE', wheel, 0, 0)[1] == ms_int(b) then
      poke(k.wake) -- a new earliest bucket: the schedulers' next wake-up is sooner
    elseif lead_step(len) > lead_step(len - #items) then
      -- the bucket grew by a step: its cascade time moved a second earlier
      -- (at most LEAD_MAX_MS / 1 s pokes per bucket)
      poke(k.wake)
    end
    redis.call('INCRBY', k.wheel_n, #items)
  end
  k.wbuf = {order = {}}
end
-- With E (put's jobs: e = floor(now), d = ceil(due)) the fields are
-- args[first..last], packed as they are: no table, no check. What follows
-- from the due time (us, bucket, id prefix) is kept in k.m* for the next
-- job with the same due time (a bulk call's jobs mostly share it). A
-- generated id's number is formatted as an integer ("%d", as wheel_decode
-- does), not by Lua's "%.14g".
local function wheel_add(k, id, due, flat, E, args, first, last)
  if k.mdue ~= due then
    local us = to_us(due)
    k.mdue, k.mus, k.mb, k.mpre = due, us, bucket_of(us), 'd' .. ms_int(math.floor(us / 1000)) .. '-'
  end
  local us, b = k.mus, k.mb
  local n
  if k.nseq and k.nseq <= k.nseq_last then -- numbers reserved by the caller (one INCRBY)
    n, k.nseq = k.nseq, k.nseq + 1
  else
    n = redis.call('INCR', k.seq)
  end
  local sid = id
  if id == '' then
    id = k.mpre .. ms_int(n)
  else
    index_set(k.ids, id, '~' .. n .. '@' .. ms_str(us / 1000))
  end
  local own = not k.wbuf
  if own then k.wbuf = {order = {}} end
  local items = k.wbuf[b]
  if not items then
    items = {}
    k.wbuf[b] = items
    k.wbuf.order[#k.wbuf.order + 1] = b
  end
  if E then
    items[#items + 1] = cmsgpack.pack(n, us - b * 1000, sid, E, unpack(args, first, last))
  else
    items[#items + 1] = wheel_item(us, n, sid, flat)
  end
  if own then
    wheel_flush(k)
    k.wbuf = nil
  end
  return id
end

-- Enqueue one checked job: fields are args[first..last]; k = {q, ready,
-- delayed, wake, seq, uniq, ids, wheel, wheel_n}. Cannot raise. Returns {id, 0|1}.
local function put(k, id, due, window, args, first, last, now)
  if id ~= '' then
    local ttl = math.floor(math.max(due - now, 0) + math.max(window, 1))
    if not redis.call('SET', k.uniq, '1', 'NX', 'PX', ttl) then return {id, 0} end
  end
  if due <= now then
    if id ~= '' then
      index_set(k.ids, id, redis.call('XADD', k.ready, '*', F_ID, id, unpack(args, first, last)))
      return {id, 1}
    end
    return {redis.call('XADD', k.ready, '*', unpack(args, first, last)), 1}
  end
  if to_wheel(due, now) then
    -- e = floor(now) and d = ceil(due) are left out of the item (E)
    return {wheel_add(k, id, due, nil, math.floor(to_us(due) / 1000) - math.floor(now), args, first, last), 1}
  end
  if id == '' then
    id = 'd' .. string.format('%d', math.floor(due)) .. '-' .. redis.call('INCR', k.seq)
  else
    index_set(k.ids, id, '@' .. ms_str(due))
  end
  local env = {id, unpack(args, first, last)}
  env[#env + 1] = F_ENQUEUED
  env[#env + 1] = tostring(math.floor(now))
  env[#env + 1] = F_DUE
  env[#env + 1] = tostring(math.ceil(due))
  schedule(k.delayed, k.wake, due, cmsgpack.pack(unpack(env)))
  return {id, 1}
end

-- Add checked ready jobs without ids to stream `ready` (job j's fields are
-- args[span[2j-1]..span[2j]]), creating the group if missing. Returns the
-- entry ids, or nil and an error reply with nothing changed. The call's
-- only writes are these XADDs (and XGROUP CREATE after them: a group at
-- "0" takes the new entries too), so the first XADD is its first write and
-- its error is the refusal: a key of another type (WRONGTYPE) or a stream
-- whose last id is the last possible one (check_room says why). That holds
-- for one XADD only: a stream whose last id has the time 2^64-1 but not the
-- last sequence takes one more entry and then refuses, so a call of several
-- jobs checks the stream's room first (check_room refuses any time 2^64-1).
-- This saves check_types, check_room (EXISTS, XINFO STREAM) and
-- ensure_group's calls on the path of a single job enqueued now.
local function xadd_ready(fn, ready, args, span, n)
  if n > 1 then
    local err = check_types(fn, {{ready, 'stream'}}) or check_room(fn, ready)
    if err then return nil, err end
  end
  local has = grouped(ready) -- NOGROUP also when `ready` is missing; WRONGTYPE: the XADD refuses
  local e1 = redis.pcall('XADD', ready, '*', unpack(args, span[1], span[2]))
  if type(e1) ~= 'string' then
    local err = check_types(fn, {{ready, 'stream'}}) or check_room(fn, ready)
    return nil, err or refuse(fn, 'XADD to ' .. shown(ready) .. ' failed: ' .. shown(e1.err))
  end
  local out = {e1}
  for j = 2, n do
    out[j] = redis.call('XADD', ready, '*', unpack(args, span[2 * j - 1], span[2 * j]))
  end
  if not has then redis.call('XGROUP', 'CREATE', ready, GROUP, '0') end
  return out
end

local function queue_types(fn, keys, ids)
  return check_types(fn, {{keys[1], 'stream'}, {keys[2], 'zset'}, {keys[3], 'stream'}, {keys[4], 'string'},
                          {ids, 'hash'}})
end

-- queue_types for the keys an enqueue writes only: the ready stream for
-- jobs due now, the delayed set, wake stream and seq counter for jobs due
-- later, the index for jobs with an id (each TYPE is a call).
local function written_types(fn, keys, idskey, now, later, ids)
  local spec = {}
  if now then spec[#spec + 1] = {keys[1], 'stream'} end
  if later then
    spec[#spec + 1] = {keys[2], 'zset'}
    spec[#spec + 1] = {keys[3], 'stream'}
    spec[#spec + 1] = {keys[4], 'string'}
  end
  if ids then spec[#spec + 1] = {idskey, 'hash'} end
  return check_types(fn, spec)
end

local function enqueue(keys, args)
  local fn = 'jr_enqueue'
  local q, err = queue_of(fn, keys, {K_READY, K_DELAYED, K_WAKE, K_SEQ}, true)
  if not q then return err end
  local x, nx = reached(fn, keys, 5, q, ENQ_MORE)
  if not x then return nx end
  if #args < 5 then return refuse(fn, 'arguments: WHEN ID UNIQ_MS h HANDLER [field value ...]') end
  local when, id = args[1], args[2]
  local window, werr = window_arg(fn, args[3])
  if not window then return werr end
  local uniq, u = uniq_key(q, id), 5 + nx
  if id ~= '' and (#keys ~= u or keys[u] ~= uniq) then
    return refuse(fn, 'an explicit id needs key ' .. u .. ' = ' .. shown(uniq) .. ' (and no more keys)')
  elseif id == '' and #keys ~= u - 1 then
    return refuse(fn, 'a job without an id takes ' .. (u - 1) .. ' keys, got ' .. #keys)
  end
  -- Redis's TIME only for a job due later (a job due now is due at 0)
  local now = (when == '' or when == '0') and 0 or now_ms()
  local due, derr = check_job(fn, when, id, args, 4, #args, now)
  if not due then return derr end
  if id == '' and due <= now then
    local e, xerr = xadd_ready(fn, keys[1], args, {4, #args}, 1)
    if not e then return xerr end
    return {e[1], 1}
  end
  local k = {q = q, ready = keys[1], delayed = keys[2], wake = keys[3], seq = keys[4], uniq = uniq, ids = x[K_IDS],
             wheel = x[K_WHEEL], wheel_n = x[K_WHEEL_N]}
  err = written_types(fn, keys, k.ids, due <= now, due > now, id ~= '') or (due > now and check_seq(fn, keys[4], 1)) or
        check_room(fn, due <= now and keys[1] or keys[3]) or (to_wheel(due, now) and wheel_check(fn, k, {due}))
  if err then return err end
  if due <= now then ensure_group(keys[1]) end
  return put(k, id, due, window, args, 4, #args, now)
end

--[[
jr_enqueue_many: jr_enqueue for many jobs of one queue in one call (bulk).
  KEYS: ready delayed wake seq ids wheel wheel:n, then the uniq key of
        each job that has an explicit id, in the order of those jobs
        (ids wheel wheel:n may be left out, as for jr_enqueue)
  ARGV: uniq_ms, then per job: when id npairs field value ... (npairs
        field/value pairs)
  Every job is checked before any is written: one bad job refuses the whole
  call. Returns {id, 0|1, id, 0|1, ...}.
]]
local function enqueue_many(keys, args)
  local fn = 'jr_enqueue_many'
  local q, err = queue_of(fn, keys, {K_READY, K_DELAYED, K_WAKE, K_SEQ}, true)
  if not q then return err end
  local x, nx = reached(fn, keys, 5, q, ENQ_MORE)
  if not x then return nx end
  local nk = 4 + nx -- the keys before the uniq keys
  local window, werr = window_arg(fn, args[1])
  if not window then return werr end
  -- jobs: 5 slots per job (id, due, first, last, uniq) in one flat table,
  -- not a table per job; far: the due times of the jobs for the time wheel
  -- now: Redis's TIME, read at the first job due later (jobs due now before
  -- it are due at 0, which is <= now whatever it is)
  local now, jobs, nj, i, nuniq, any_now, any_later, far = 0, {}, 0, 2, 0, false, false, {}
  local timed = false
  local nargs = #args
  local np_s, np_n -- the last NPAIRS parsed: the jobs of a bulk call mostly share it
  while i <= nargs do
    nj = nj + 1
    local when, id, np = args[i], args[i + 1], args[i + 2]
    if np == np_s then
      np = np_n
    else
      np_s, np = np, int_arg(np)
      np_n = np
    end
    if not id or not np or i + 2 + 2 * np > nargs then
      return refuse(fn, 'job ' .. nj .. ' (argument ' .. i .. '): expected WHEN ID NPAIRS, then NPAIRS field/value pairs')
    end
    if not timed and when ~= '' and when ~= '0' then now, timed = now_ms(), true end
    local first, last = i + 3, i + 2 + 2 * np
    local due = check_job(fn, when, id, args, first, last, now)
    if not due then -- checked again for the message naming the job (a name per job costs a number formatting)
      local _, derr = check_job(fn .. ': job ' .. nj, when, id, args, first, last, now)
      return derr
    end
    local uniq = false
    if id ~= '' then
      nuniq = nuniq + 1
      uniq = uniq_key(q, id)
      if keys[nk + nuniq] ~= uniq then
        return refuse(fn, 'key ' .. (nk + nuniq) .. ' must be ' .. shown(uniq) .. ', the uniq key of job ' .. nj)
      end
    end
    if due <= now then any_now = true else any_later = true end
    if to_wheel(due, now) then far[#far + 1] = due end
    local b = 5 * nj
    jobs[b - 4], jobs[b - 3], jobs[b - 2], jobs[b - 1], jobs[b] = id, due, first, last, uniq
    i = last + 1
  end
  if #keys ~= nk + nuniq then
    return refuse(fn, 'takes ' .. nk .. ' keys plus one uniq key per job with an id: ' .. (nk + nuniq) .. ', got ' .. #keys)
  end
  if not any_later and nuniq == 0 then -- all due now, no ids: only XADDs to the ready stream
    local span = {}
    for j = 1, nj do span[2 * j - 1], span[2 * j] = jobs[5 * j - 2], jobs[5 * j - 1] end
    local e, xerr = xadd_ready(fn, keys[1], args, span, nj)
    if not e then return xerr end
    local out = {}
    for j = 1, nj do out[2 * j - 1], out[2 * j] = e[j], 1 end
    return out
  end
  local k, out = {q = q, ready = keys[1], delayed = keys[2], wake = keys[3], seq = keys[4], ids = x[K_IDS],
                  wheel = x[K_WHEEL], wheel_n = x[K_WHEEL_N], wbuf = {order = {}}}, {}
  err = written_types(fn, keys, k.ids, any_now, any_later, nuniq > 0) or (any_later and check_seq(fn, keys[4], #jobs)) or
        (any_now and check_room(fn, keys[1])) or (any_later and check_room(fn, keys[3])) or
        (#far > 0 and wheel_check(fn, k, far))
  if err then return err end
  if any_now then ensure_group(keys[1]) end
  if #far > 1 then -- the numbers of the jobs going to the wheel, in one INCRBY
    k.nseq_last = redis.call('INCRBY', keys[4], #far)
    k.nseq = k.nseq_last - #far + 1
  end
  local ready, fnow = keys[1], math.floor(now)
  for j = 1, nj do
    local b = 5 * j
    local id, due, first, last = jobs[b - 4], jobs[b - 3], jobs[b - 2], jobs[b - 1]
    if id == '' and due <= now then -- a ready job without an id: put's first case, without its reply table
      out[2 * j - 1], out[2 * j] = redis.call('XADD', ready, '*', unpack(args, first, last)), 1
    elseif id == '' and to_wheel(due, now) then -- one for the wheel without an id: put's third case, likewise
      out[2 * j - 1], out[2 * j] = wheel_add(k, '', due, nil, math.floor(to_us(due) / 1000) - fnow, args, first, last), 1
    else
      k.uniq = jobs[b] or nil
      local r = put(k, id, due, window, args, first, last, now)
      out[2 * j - 1], out[2 * j] = r[1], r[2]
    end
  end
  wheel_flush(k)
  return out
end

--[[
jr_ready_prepare (revision 14): make the ready stream of a queue take plain
XADDs, for producers that enqueue many jobs due now without ids (see
docs/redis-contract.md, "Bulk enqueue of ready jobs with plain XADD").
  KEYS: jr:{Q}:ready
  No arguments. Refuses if the key holds another type than a stream.
  Creates the stream and its group "jr" at 0 if missing (the group alone
  if the stream has none). Returns 1 if it created the group, else 0.
The producer then sends XADD jr:{Q}:ready NOMKSTREAM * <fields> per job:
NOMKSTREAM so that a stream deleted meanwhile is not made again without
its group (that XADD answers nil and writes nothing).
]]
local function ready_prepare(keys, args)
  local fn = 'jr_ready_prepare'
  local q, err = queue_of(fn, keys, {K_READY}, false)
  if not q then return err end
  if #args ~= 0 then return refuse(fn, 'takes no arguments, got ' .. #args) end
  if grouped(keys[1]) then return 0 end -- one call on the common path
  err = check_types(fn, {{keys[1], 'stream'}})
  if err then return err end
  ensure_group(keys[1])
  return 1
end

--[[
The decoder of the two stored formats, a delayed-set member (id, field,
value, ...) and a bucket item (n, due offset, id, E, field, value, ...: see
The time wheel): both a msgpack sequence of `head` values, then field/value
strings among which a non-empty h. decode_member and wheel_decode take it
in the same steps (unpack_seq, the format's head, strings_why, pairs_why;
the member checks the length of its id before pairs_why, as it always did,
so that every message stays the same). They never raise: cmsgpack runs
under pcall and never returns more values than Lua's stack takes. The
promotion's fast paths (20-promote.lua: promote_one, wheel_decode_fast,
wheel_xadd_fast) decode the usual small member or item straight from
cmsgpack's values, without a table, and leave anything else to these,
which say what is wrong: folding them into this decoder would cost a table
and a loop per job promoted.
]]
-- The values of the sequence `packed` of `head` values and at most
-- FIELDS_MAX field/value pairs: n and r as collect gives them (r[1], r[2]
-- pcall's ok and cmsgpack's offset; r[3..n] the values), or nil and what is
-- wrong (`what` follows "not a msgpack sequence").
local function unpack_seq(packed, head, what)
  local most = head + 1 + 2 * FIELDS_MAX
  local n, r = collect(l_pcall(l_unpack_limit, packed, most, 0))
  if not r[1] then
    return nil, 'not a msgpack sequence' .. what .. ' (' .. string.gsub(tostring(r[2]), '^.-: ', '') .. ')'
  end
  if n - 2 >= most and r[2] ~= -1 then return nil, 'more than ' .. FIELDS_MAX .. ' fields' end
  return n, r
end

-- What is wrong with the fields r[first..n] of a sequence, or nil: a value
-- that is not a string, named by its place in the sequence.
local function strings_why(r, first, n)
  for i = first, n do
    if l_type(r[i]) ~= 'string' then return 'item ' .. (i - 2) .. ' is a ' .. l_type(r[i]) .. ', not a string' end
  end
  return nil
end

-- What is wrong with the fields r[first..n] (strings) of a sequence, or
-- nil: an odd number of items, no field h, or an empty first one (`empty`:
-- the format's words for that).
local function pairs_why(r, first, n, empty)
  if (n - first + 1) % 2 ~= 0 then return 'an odd number of field/value items' end
  for i = first, n, 2 do
    if r[i] == F_HANDLER then
      if r[i + 1] == '' then return empty end
      return nil
    end
  end
  return 'no handler (field h)'
end

-- Decode a delayed-set member: a msgpack sequence of strings id, field,
-- value, ... with a non-empty h. Returns a table whose items 3..n are id,
-- field, value, ..., and n; or nil and what is wrong.
local function decode_member(packed)
  local n, r = unpack_seq(packed, 1, ' of strings')
  if not n then return nil, r end
  if n == 2 then return nil, 'empty' end
  if l_type(r[3]) ~= 'string' then return nil, 'the id is a ' .. l_type(r[3]) .. ', not a string' end
  local why = strings_why(r, 4, n)
  if not why and (r[3] == '' or #r[3] > ID_MAX) then why = 'the id is not 1..' .. ID_MAX .. ' bytes' end
  why = why or pairs_why(r, 4, n, 'an empty handler (field h)')
  if why then return nil, why end
  return r, n
end

-- Decode a bucket item (see The time wheel) of the bucket starting at
-- `start`. Returns id, due (us), flat (fields without the id); or
-- false for a tombstone; or nil and what is wrong.
local function wheel_decode(item, start)
  local n, r = unpack_seq(item, 4, '')
  if not n then return nil, r end
  if n == 3 and l_type(r[3]) == 'number' then return false end
  if n < 6 or l_type(r[3]) ~= 'number' or l_type(r[4]) ~= 'number' or l_type(r[5]) ~= 'string' or
     l_type(r[6]) ~= 'number' then
    return nil, 'not a bucket item (n, due offset, id, e delta, fields)'
  end
  local seq, off, sid, E = r[3], r[4], r[5], r[6]
  if off < 0 or off >= WHEEL_MS * 1000 or off ~= math.floor(off) or seq ~= math.floor(seq) then
    return nil, 'due offset ' .. tostring(off) .. ' is not in the bucket'
  end
  if #sid > ID_MAX then return nil, 'the id is longer than ' .. ID_MAX .. ' bytes' end
  local why = strings_why(r, 7, n) or pairs_why(r, 7, n, 'no handler (field h)')
  if why then return nil, why end
  local flat = {unpack(r, 7, n)}
  local us = start * 1000 + off
  local ms = math.floor(us / 1000)
  if E >= 0 then
    flat[#flat + 1] = F_ENQUEUED
    flat[#flat + 1] = ms_int(ms - E)
    flat[#flat + 1] = F_DUE
    flat[#flat + 1] = ms_int(math.ceil(us / 1000))
  end
  if sid == '' then sid = 'd' .. ms_int(ms) .. '-' .. ms_int(seq) end
  return sid, us, flat
end
