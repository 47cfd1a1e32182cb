--[[
20-promote.lua: jr_promote and jr_promote_due, the scheduler's call. The
names of this part are local to its do-block (the joined chunk may hold at
most 200 locals at once), but for the two functions it gives the
registration list.
]]
local promote, promote_due
do -- 20-promote.lua

-- The fast path of decode_member for the usual small member, straight from
-- the values of cmsgpack: no table. 1 if `n` values are all strings.
local function strings(n, a, ...)
  if n == 0 then return true end
  if l_type(a) ~= 'string' then return false end
  return strings(n - 1, ...)
end

-- The value of the first h among field/value pairs, or nil.
local function handler_of(f, v, ...)
  if f == nil then return nil end
  if f == F_HANDLER then return v end
  return handler_of(...)
end

-- The fast check of a job's fields for the usual envelope of at most 4
-- pairs, without the varargs recursion of strings / handler_of (each level
-- copies the rest): the value of the first field h if the n values (n even,
-- 2..8) are all strings and one of the fields is h, else nil.
local function fields4(n, f1, v1, f2, v2, f3, v3, f4, v4)
  if l_type(f1) ~= 'string' or l_type(v1) ~= 'string' then return nil end
  local h = f1 == F_HANDLER and v1 or nil
  if n == 2 then return h end
  if l_type(f2) ~= 'string' or l_type(v2) ~= 'string' then return nil end
  if not h and f2 == F_HANDLER then h = v2 end
  if n == 4 then return h end
  if l_type(f3) ~= 'string' or l_type(v3) ~= 'string' then return nil end
  if not h and f3 == F_HANDLER then h = v3 end
  if n == 6 then return h end
  if l_type(f4) ~= 'string' or l_type(v4) ~= 'string' then return nil end
  if not h and f4 == F_HANDLER then h = v4 end
  return h
end

-- XADD job `id` as entry `eid` ("*" or an id above the stream's last) with
-- its n (2..8) field values f1, v1, ... and, when es is given, e = es and
-- d = ds after them (the envelope of a wheel item whose e and d were left
-- out): no table, no unpack. Returns the entry id.
local function xadd_job(ready, eid, id, es, ds, n, f1, v1, f2, v2, f3, v3, f4, v4)
  if es then
    if n == 4 then return l_call('XADD', ready, eid, F_ID, id, f1, v1, f2, v2, F_ENQUEUED, es, F_DUE, ds) end
    if n == 2 then return l_call('XADD', ready, eid, F_ID, id, f1, v1, F_ENQUEUED, es, F_DUE, ds) end
    if n == 6 then return l_call('XADD', ready, eid, F_ID, id, f1, v1, f2, v2, f3, v3, F_ENQUEUED, es, F_DUE, ds) end
    return l_call('XADD', ready, eid, F_ID, id, f1, v1, f2, v2, f3, v3, f4, v4, F_ENQUEUED, es, F_DUE, ds)
  end
  if n == 4 then return l_call('XADD', ready, eid, F_ID, id, f1, v1, f2, v2) end
  if n == 2 then return l_call('XADD', ready, eid, F_ID, id, f1, v1) end
  if n == 6 then return l_call('XADD', ready, eid, F_ID, id, f1, v1, f2, v2, f3, v3) end
  return l_call('XADD', ready, eid, F_ID, id, f1, v1, f2, v2, f3, v3, f4, v4)
end

--[[
Moves by number (revision 22): a job of a bucket wholly due whose id was
generated (d<due>-<n>: the bucket and n) enters the stream as the entry
T-n, T one millisecond for a run of such jobs, so that it needs no job
index entry of its own (an HSET at the move and an HGET/HDEL at the
acknowledgement per job, a third of a burst's cost): each run is recorded
once, in the index's field d<start> (a reserved id form, so no job's), as
"n_first n_last T," (locate: in_moved, 40-admin.lua), and the bucket in
jr:{Q}:moved (member start, score its last T) until the stream holds no
entry as old as that (moved_trim). mv = {ms, seq} is the stream's last
entry id as numbers (nil until read: XINFO STREAM's last-generated-id, so
deleted entries count), then per bucket the runs {n_first, n_last, T, ...}.
]]
-- mv.ms, mv.seq: stream id e ("<ms>-<seq>") as numbers. mv.off once its
-- ms part has more than 15 digits (a stream written by hand): a number
-- would not hold it exactly, so T-n could land at or below the stream's
-- last id and XADD refuse it after the bucket's items were taken; the rest
-- of the call then moves its jobs by "*", each with its index entry. (A
-- seq part past 2^53 is harmless: n < 1e15 stays below it, so T moves on.)
local function mv_set(mv, e)
  local a, b = string.match(e, '^(%d+)%-(%d+)$')
  if not a or #a > 15 then
    mv.off = true
    return
  end
  mv.ms, mv.seq = tonumber(a), tonumber(b)
end
local function mv_last(mv, ready)
  local info, last = redis.call('XINFO', 'STREAM', ready), '0-0'
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then last = info[i + 1] end
  end
  mv_set(mv, last)
end
-- The entry id of job number n of this run (a new run when T-n would not
-- be above the stream's last id, as after a "*" entry or another bucket's),
-- or nil when this call moves no more jobs by number (mv.off) or this job
-- would need a run past both Redis's now and the stream's last millisecond.
-- ns is n as digits; mv.pre the run's "T-".
local function mv_id(mv, ready, n, ns, now)
  if not mv.ms and not mv.off then mv_last(mv, ready) end
  if mv.off then return nil end
  local runs = mv.runs
  local k = #runs
  local t = k > 0 and runs[k] or nil
  if not t or not (t > mv.ms or (t == mv.ms and n > mv.seq)) then
    t = math.max(l_floor(now), mv.ms)
    -- revision 23: a run never starts past both Redis's now and the
    -- stream's last millisecond (a catch-up whose numbers go down put
    -- each new run 1 ms further ahead, and every "*" entry after it): a
    -- job that would need that goes by "*" (as XADD would place it)
    if t == mv.ms and n <= mv.seq then return nil end
    runs[k + 1], runs[k + 2], runs[k + 3], k = n, n, t, k + 3
    mv.pre = ms_int(t) .. '-'
  end
  runs[k - 1] = n
  mv.ms, mv.seq = t, n
  return mv.pre .. ns
end
-- After an entry "*" made (its id e): the stream's last id, if being followed.
local function mv_saw(mv, e)
  if mv and mv.ms and not mv.off then mv_set(mv, e) end
end
-- Record the runs of bucket `start` (see above) and start the next bucket's.
local function mv_record(mv, ids, moved, start)
  local runs = mv.runs
  if #runs == 0 then return end
  local field = 'd' .. ms_int(start)
  local cur = redis.call('HGET', ids, field) or ''
  -- a record ends with ",": anything else there (written by hand) stays
  -- apart from the runs appended to it
  if cur ~= '' and string.sub(cur, -1) ~= ',' then cur = cur .. ',' end
  local out = {cur}
  for i = 1, #runs, 3 do out[#out + 1] = string.format('%d %d %d,', runs[i], runs[i + 1], runs[i + 2]) end
  redis.call('HSET', ids, field, table.concat(out))
  redis.call('ZADD', moved, 'GT', runs[#runs], ms_int(start))
  mv.runs = {}
end
-- Forget the records of runs whose entries are all gone: their last T
-- below the stream's first entry (or the stream empty), at most 100 a call.
local function moved_trim(ready, ids, moved)
  local first = redis.call('XRANGE', ready, '-', '+', 'COUNT', 1)[1]
  local below = first and ('(' .. string.match(first[1], '^(%d+)')) or '+inf'
  local old = redis.call('ZRANGE', moved, '-inf', below, 'BYSCORE', 'LIMIT', 0, 100)
  if #old == 0 then return end
  local fields = {}
  for _, b in ipairs(old) do
    -- a member that is not a bucket start (garbage) names no record: d<it>
    -- could be a job's own index entry
    if string.find(b, '^%d+$') then fields[#fields + 1] = 'd' .. b end
  end
  if #fields > 0 then redis.call('HDEL', ids, unpack(fields)) end
  redis.call('ZREM', moved, unpack(old))
end

--[[
Moves by number of the near tier (revision 23): a due member of the
sorted set whose id is a generated one (d<ms>-<n>) and that the job index
does not name (a retried or deferred job has an entry there, which its
move rewrites as before) enters the stream as T-n, recorded as a bucket's
jobs are (mv_id, mv_record) under the bucket its due time falls in, where
in_moved (40-admin.lua) looks for it. Members of one score are in the
order of their bytes, so the jobs of one bulk call, due at one ms, come in
the order of n while n keeps its number of digits: long runs. Only the
jobs of a stretch of NEAR_RUN_MIN or more such members (in the call's
order, one bucket, n rising) move so: jobs due at distinct times, or
numbered out of due order, would each make a run of their own — a record
per job in its bucket's field (rewritten whole each call: quadratic in the
jobs of a second, and one more XRANGE per lookup), where an index entry
costs one HSET. The index is read with redis.pcall: a scheduler whose ACL
user lacks +hmget (the role's line before revision 23, in a rolling
upgrade) promotes by the index as before. mz = {mv, now, free, start}:
free maps such ids to their n as digits, start to their bucket
(near_free, nil when none); mv.start the bucket whose runs mv holds.
]]
local NEAR_RUN_MIN = 32
-- Returns free (id -> its n as digits) and start (id -> its bucket), or
-- nil when no stretch is long enough.
local function near_free(envs, ids)
  local cand, nss, starts = {}, {}, {}
  local last_ms, last_start
  for _, packed in ipairs(envs) do
    local b = string.byte(packed, 1) -- a fixstr: the id of at most 31 bytes
    if b and b >= 0xa0 and b <= 0xbf then
      local id = string.sub(packed, 2, 1 + b - 0xa0)
      local ms, ns = string.match(id, '^d([1-9]%d*)%-([1-9]%d*)$')
      if ms and #ms <= 15 and #ns <= 15 then
        if ms ~= last_ms then last_ms, last_start = ms, bucket_of(tonumber(ms) * 1000) end
        local k = #cand + 1
        cand[k], nss[k], starts[k] = id, ns, last_start
      end
    end
  end
  if #cand < NEAR_RUN_MIN then return nil end
  local named = {}
  for i = 1, #cand, 1000 do
    local v = redis.pcall('HMGET', ids, unpack(cand, i, math.min(i + 999, #cand)))
    if v.err then return nil end
    for j = 1, #v do named[i + j - 1] = v[j] ~= false end
  end
  -- the stretches among the ids the index does not name
  local free, start, run, prev = {}, {}, {}, nil
  local function take()
    if #run >= NEAR_RUN_MIN then
      for _, k in ipairs(run) do free[cand[k]], start[cand[k]] = nss[k], starts[k] end
    end
    run = {}
  end
  for k = 1, #cand do
    if not named[k] then
      if prev and not (starts[k] == starts[prev] and tonumber(nss[k]) > tonumber(nss[prev])) then take() end
      run[#run + 1], prev = k, k
    end
  end
  take()
  return next(free) and free or nil, start
end
-- The entry id of near-tier job `id` (in mz.free) moved by number, or nil.
local function near_id(mz, ready, id, ids, moved)
  local mv, ns, start = mz.mv, mz.free[id], mz.start[id]
  if mv.start ~= start then
    if mv.start then mv_record(mv, ids, moved, mv.start) end
    mv.start = start
  end
  return mv_id(mv, ready, tonumber(ns), ns, mz.now)
end

-- Promote one member: XADD it if it is an envelope, else add {member,
-- what is wrong} to `bad`. ok, off, id, ... are pcall(unpack_limit)'s values.
-- `idx` collects id, entry pairs for the job index (one HSET per call); mz
-- (nil: none) moves the members it may by number, see near_free.
local function promote_one(ready, idx, bad, mz, w, packed, ok, off, id, ...)
  local n = l_select('#', ...)
  if ok and off == -1 and n <= 32 and n > 0 and n % 2 == 0 and l_type(id) == 'string' and
     id ~= '' and #id <= ID_MAX then
    local h
    if n <= 8 then h = fields4(n, ...) elseif strings(n, ...) then h = handler_of(...) end
    if h and h ~= '' then
      local eid = mz and mz.free[id] and near_id(mz, ready, id, w.ids, w.moved)
      if eid then
        l_call('XADD', ready, eid, F_ID, id, ...)
        return
      end
      local k = #idx
      idx[k + 1], idx[k + 2] = id, l_call('XADD', ready, '*', F_ID, id, ...)
      if mz then mv_saw(mz.mv, idx[k + 2]) end
      return
    end
  end
  local items, m = decode_member(packed) -- the slow path says what is wrong
  if items then
    local k = #idx
    idx[k + 1], idx[k + 2] = items[3], redis.call('XADD', ready, '*', F_ID, unpack(items, 3, m))
    if mz then mv_saw(mz.mv, idx[k + 2]) end
  else
    bad[#bad + 1] = {packed, m}
  end
end

-- ms_int memoised within one jr_promote (reset by wheel_promote): the jobs
-- of a bucket mostly share their enqueue and due milliseconds.
local fmt_memo = {}
local function ms_memo(x)
  local s = fmt_memo[x]
  if not s then
    s = ms_int(x)
    fmt_memo[x] = s
  end
  return s
end

-- wheel_decode's fast path for the usual item (at most 16 string fields,
-- a handler), straight from the values of cmsgpack: one table. ok, off,
-- ... are pcall(unpack_limit)'s values; anything else takes wheel_decode.
local function wheel_decode_fast(item, start, ok, off, seq, o, sid, E, ...)
  local nf = l_select('#', ...)
  if ok and off == -1 and l_type(seq) == 'number' and l_type(o) == 'number' and l_type(sid) == 'string' and
     l_type(E) == 'number' and nf > 0 and nf <= 32 and nf % 2 == 0 and o >= 0 and o < WHEEL_MS * 1000 and
     o == math.floor(o) and seq == math.floor(seq) and #sid <= ID_MAX and strings(nf, ...) then
    local h = handler_of(...)
    if h and h ~= '' then
      local flat = {...}
      local us = start * 1000 + o
      local ms = math.floor(us / 1000)
      if E >= 0 then
        flat[nf + 1], flat[nf + 2], flat[nf + 3], flat[nf + 4] = F_ENQUEUED, ms_memo(ms - E), F_DUE, ms_memo(math.ceil(us / 1000))
      end
      if sid == '' then sid = 'd' .. ms_memo(ms) .. '-' .. ms_int(seq) end
      return sid, us, flat
    end
  end
  return wheel_decode(item, start)
end

-- Whether pcall(unpack_limit)'s values ok, off, seq, o, sid, E and nf
-- field values are the usual compact item the fast paths below take: read
-- whole, n and the offset whole numbers (the offset within the bucket), an
-- id string of at most ID_MAX bytes, an E, and 1 to 4 field/value pairs.
local function usual_item(ok, off, nf, seq, o, sid, E)
  return ok and off == -1 and nf > 0 and nf <= 8 and nf % 2 == 0 and l_type(seq) == 'number' and
         l_type(o) == 'number' and l_type(sid) == 'string' and l_type(E) == 'number' and o >= 0 and
         o < WHEEL_MS * 1000 and o == l_floor(o) and seq == l_floor(seq) and #sid <= ID_MAX
end

-- The fast path of a bucket wholly due (issue 10): XADD one item straight
-- from cmsgpack's values, for the usual item of at most 4 string pairs and
-- a handler: no table, no unpack, e / d / id strings memoised per ms.
-- Returns the job id, its entry id and whether it needs an index entry (a
-- job moved by number does not, see mv_id: mv = nil moves none so), or nil
-- (nothing written) for any other item: the caller takes
-- wheel_decode_fast's path, which also says what is wrong. ok, off, ... are
-- pcall(unpack_limit)'s values.
local function wheel_xadd_fast(ready, start, mv, now, ok, off, seq, o, sid, E, ...)
  local nf = l_select('#', ...)
  if not usual_item(ok, off, nf, seq, o, sid, E) then return nil end
  local h = fields4(nf, ...)
  if not h or h == '' then return nil end
  local us = start * 1000 + o
  local ms = l_floor(us / 1000)
  local es, ds
  if E >= 0 then es, ds = ms_memo(ms - E), ms_memo(math.ceil(us / 1000)) end
  if sid ~= '' then return sid, xadd_job(ready, '*', sid, es, ds, nf, ...), true end
  local ns = ms_int(seq)
  sid = 'd' .. ms_memo(ms) .. '-' .. ns
  if mv and seq >= 0 and seq < 1e15 then -- moved by number: no index entry
    local eid = mv_id(mv, ready, seq, ns, now)
    if eid then return sid, xadd_job(ready, eid, sid, es, ds, nf, ...), false end
  end
  return sid, xadd_job(ready, '*', sid, es, ds, nf, ...), true
end

-- The member of job `sid` for the sorted set (decode_member's form: id,
-- the fields, then e = es and d = ds when es is given), packed straight
-- from the n (2..8) field values: no table, no unpack.
local function pack_member(sid, es, ds, n, f1, v1, f2, v2, f3, v3, f4, v4)
  local pk = cmsgpack.pack
  if es then
    if n == 2 then return pk(sid, f1, v1, F_ENQUEUED, es, F_DUE, ds) end
    if n == 4 then return pk(sid, f1, v1, f2, v2, F_ENQUEUED, es, F_DUE, ds) end
    if n == 6 then return pk(sid, f1, v1, f2, v2, f3, v3, F_ENQUEUED, es, F_DUE, ds) end
    return pk(sid, f1, v1, f2, v2, f3, v3, f4, v4, F_ENQUEUED, es, F_DUE, ds)
  end
  if n == 2 then return pk(sid, f1, v1) end
  if n == 4 then return pk(sid, f1, v1, f2, v2) end
  if n == 6 then return pk(sid, f1, v1, f2, v2, f3, v3) end
  return pk(sid, f1, v1, f2, v2, f3, v3, f4, v4)
end

-- ms_str of a due time in us, memoised within one jr_promote as ms_memo.
local score_memo = {}
local function score_of(us)
  local s = score_memo[us]
  if not s then
    s = ms_str(us / 1000)
    score_memo[us] = s
  end
  return s
end

-- The fast path of a cascade (issue 23: the cascade was a delayed job's
-- dearest step, 9.7 us of Redis per job against 3.2 for a move): an item
-- not yet due becomes its sorted-set member straight from cmsgpack's
-- values, for the usual item of at most 4 string pairs and a handler, and
-- goes into zbuf as score, member (the caller ZADDs them 1,000 at a time).
-- Returns true, or nil (nothing done) for an item already due or any other
-- item: the caller takes wheel_decode_fast's path then. ok, off, ... are
-- pcall(unpack_limit)'s values.
local function wheel_cascade_fast(start, now, zbuf, ok, off, seq, o, sid, E, ...)
  local nf = l_select('#', ...)
  if not usual_item(ok, off, nf, seq, o, sid, E) then return nil end
  local us = start * 1000 + o
  if us / 1000 <= now then return nil end
  local h = fields4(nf, ...)
  if not h or h == '' then return nil end
  local ms = l_floor(us / 1000)
  local es, ds
  if E >= 0 then es, ds = ms_memo(ms - E), ms_memo(math.ceil(us / 1000)) end
  if sid == '' then sid = 'd' .. ms_memo(ms) .. '-' .. ms_int(seq) end
  local k = #zbuf
  zbuf[k + 1], zbuf[k + 2] = score_of(us), pack_member(sid, es, ds, nf, ...)
  return true
end

-- The buckets a jr_promote at `now` takes: those wholly due or whose
-- cascade time has come, among the first 64 starting before now + NEAR_MS
-- + LEAD_MAX_MS (1 s buckets: at most 33 of them are not yet due), their
-- keys' types checked. Returns {starts}, the earliest cascade time of the
-- others (nil if none; now if more buckets may be waiting past the 64), and
-- the garbage to clear by wheel_repair (nil if none); or nil and an error
-- reply. Garbage (written by hand) never stops the queue: an index member
-- that is not a bucket start or whose bucket key is not a list, one whose
-- score is not its start (revision 15), and a counter that is not a count.
-- w = {q, wheel, wheel_n}: the queue and its wheel keys (as in KEYS).
local function wheel_due_buckets(fn, w, now)
  local q, wheel, counter = w.q, w.wheel, w.wheel_n
  local err = check_types(fn, {{wheel, 'zset'}})
  if err then return nil, err end
  local fix = {members = {}}
  local ct = redis.call('TYPE', counter)['ok']
  if ct ~= 'none' and (ct ~= 'string' or check_seq(fn, counter, 0)) then fix.counter = ct end
  local scored = redis.call('ZRANGE', wheel, '-inf', '(' .. ms_str(now + NEAR_MS + LEAD_MAX_MS), 'BYSCORE',
                            'LIMIT', 0, 64, 'WITHSCORES')
  -- a score past any due time a function writes (revision 15)
  local far = redis.call('ZRANGE', wheel, '(' .. ms_str(now + DELAY_MAX_MS + 2 * WHEEL_MS), '+inf', 'BYSCORE',
                         'LIMIT', 0, 1, 'WITHSCORES')
  local cands, good = {}, {}
  fix.rescore = {}
  for i = 1, #scored, 2 do cands[#cands + 1] = scored[i] end
  for i = 1, #far, 2 do
    if string.find(far[i], '^%d+$') and #far[i] <= 15 and tonumber(far[i]) ~= tonumber(far[i + 1]) then fix.rescore[#fix.rescore + 1] = {far[i], far[i + 1]} end
  end
  for i, b in ipairs(cands) do
    if not string.find(b, '^%d+$') or #b > 15 then
      fix.members[#fix.members + 1] = {b, 'not a bucket start'}
    elseif tonumber(scored[2 * i]) ~= tonumber(b) then
      -- a score that is not its start (written by hand) would hold the
      -- bucket's jobs until then, or have every call find it due and take
      -- nothing: set to its start, taken at the next call (revision 15)
      fix.rescore[#fix.rescore + 1] = {b, scored[2 * i]}
    else
      local bt = redis.call('TYPE', bucket_key(q, tonumber(b)))['ok']
      if bt ~= 'list' and bt ~= 'none' then
        fix.members[#fix.members + 1] = {b, 'its bucket key ' .. shown(bucket_key(q, tonumber(b))) .. ' is a ' .. bt ..
                                            ', not a list (left as it is)'}
      else
        good[#good + 1] = b
      end
    end
  end
  local starts, later = {}, (#cands == 64) and now or nil
  if not later then -- the first bucket past the window cascades at the earliest NEAR_MS + LEAD_MAX_MS before it
    local beyond = redis.call('ZRANGE', wheel, ms_str(now + NEAR_MS + LEAD_MAX_MS), '+inf', 'BYSCORE', 'LIMIT', 0, 1)[1]
    if beyond and tonumber(beyond) then later = tonumber(beyond) - NEAR_MS - LEAD_MAX_MS end
  end
  for _, b in ipairs(good) do
    local start = tonumber(b)
    local at = start + WHEEL_MS <= now and now or cascade_at(start, redis.call('LLEN', bucket_key(q, start)))
    if at <= now then
      starts[#starts + 1] = b
    elseif not later or at < later then
      later = at
    end
  end
  if #fix.rescore > 0 then later = now end
  if #fix.members == 0 and not fix.counter and #fix.rescore == 0 then fix = nil end
  return starts, later, fix
end

-- Clear the garbage wheel_due_buckets found (after every refusal was
-- checked): each bad index member goes to the dead stream (why =
-- "invalid", raw = the member) and out of the index; a counter that is not
-- a count is set again to the number of items in the buckets (tombstones
-- included: the stats are an estimate until they are promoted).
local function wheel_repair(w, fix, dead, dead_max)
  local q, wheel, counter = w.q, w.wheel, w.wheel_n
  for _, m in ipairs(fix.members) do
    xadd_dead(dead, dead_max, {F_ERROR, 'time wheel index ' .. wheel .. ' member: ' .. m[2], F_WHY, 'invalid', F_RAW, m[1]})
    redis.call('ZREM', wheel, m[1])
  end
  for _, m in ipairs(fix.rescore) do
    xadd_dead(dead, dead_max, {F_ERROR, 'time wheel index ' .. wheel .. ' member ' .. m[1] .. ' had the score ' .. m[2] ..
                               ', not its start: set to its start', F_WHY, 'invalid', F_RAW, m[1]})
    redis.call('ZADD', wheel, 'XX', m[1], m[1])
  end
  if fix.counter then
    local n = 0
    for _, b in ipairs(redis.call('ZRANGE', wheel, 0, -1)) do
      if string.find(b, '^%d+$') and #b <= 15 and redis.call('TYPE', bucket_key(q, tonumber(b)))['ok'] == 'list' then
        n = n + redis.call('LLEN', bucket_key(q, tonumber(b)))
      end
    end
    xadd_dead(dead, dead_max, {F_ERROR, 'time wheel counter ' .. counter .. ' was a ' .. fix.counter ..
                               ' that is not a count: set to ' .. n, F_WHY, 'invalid', F_RAW, ''})
    redis.call('DEL', counter)
    redis.call('SET', counter, n)
  end
end

-- Take up to `room` items from the buckets `starts` (checked): with
-- `direct`, only the buckets wholly due, straight into the stream; else
-- only the others (cascades): each item already due into the stream, the
-- rest into the sorted set. Returns how many items were taken (tombstones
-- included), how many of them were live or garbage (moved), and how many
-- went into the sorted set; `idx`, `bad` as for promote_one.
local function wheel_promote(w, starts, room, now, ready, delayed, idx, bad, direct, mv)
  local q = w.q
  local taken, moved, live, cascaded = 0, 0, 0, 0
  for _, b in ipairs(starts) do
    if taken >= room then break end
    local start = tonumber(b)
    if (start + WHEEL_MS <= now) == direct then
      local bk = bucket_key(q, start)
      local items = redis.call('LPOP', bk, room - taken) or {}
      taken = taken + #items
      local k = #idx
      local zbuf = {}
      for _, item in ipairs(items) do
        local id, us, flat
        if not direct and wheel_cascade_fast(start, now, zbuf, l_pcall(l_unpack_limit, item, 5 + 2 * FIELDS_MAX, 0)) then
          live, cascaded, id = live + 1, cascaded + 1, true
        elseif direct then
          local indexed
          id, us, indexed = wheel_xadd_fast(ready, start, mv, now, l_pcall(l_unpack_limit, item, 5 + 2 * FIELDS_MAX, 0))
          if id then
            live = live + 1
            if indexed then
              idx[k + 1], idx[k + 2], k = id, us, k + 2
              mv_saw(mv, us)
            end
          end
        end
        if not id then
          id, us, flat = wheel_decode_fast(item, start, l_pcall(l_unpack_limit, item, 5 + 2 * FIELDS_MAX, 0))
        end
        if flat then
          live = live + 1
          if direct or us / 1000 <= now then
            local e = redis.call('XADD', ready, '*', F_ID, id, unpack(flat))
            idx[k + 1], idx[k + 2], k = id, e, k + 2
            if direct then mv_saw(mv, e) end
          else
            redis.call('ZADD', delayed, ms_str(us / 1000), cmsgpack.pack(id, unpack(flat)))
            cascaded = cascaded + 1
          end
        elseif id == nil then -- not written by wheel_add, so not counted
          bad[#bad + 1] = {item, 'in bucket ' .. bk .. ': ' .. us}
          moved = moved + 1
        end
      end
      for i = 1, #zbuf, 2000 do
        redis.call('ZADD', delayed, unpack(zbuf, i, math.min(i + 1999, #zbuf)))
      end
      if mv then mv_record(mv, w.ids, w.moved, start) end
      if redis.call('EXISTS', bk) == 0 then redis.call('ZREM', w.wheel, b) end
    end
  end
  if live > 0 then redis.call('DECRBY', w.wheel_n, live) end
  return taken, moved + live, cascaded
end

--[[
jr_promote
  KEYS: ready delayed wake dead ids wheel wheel:n [moved]   (revision 18;
        before it ready delayed wake [dead], still taken: the others are
        then built from Q, see reached; moved, revision 22: the jobs of a
        bucket wholly due with generated ids are moved by number, mv_id)
  ARGV: limit [dead_max]
  Moves up to `limit` (1..PROMOTE_MAX) members whose due time has come out
  of the delayed set, atomically: each envelope into the ready stream, each
  member that is not an envelope into the dead stream (trimmed to about
  dead_max) with why = "invalid", err = what is wrong and raw = the member.
  Returns {moved, next due ms or "" if none, now ms, last wake id, buried,
  cascaded} (times as strings with 3 decimals; moved counts every member
  and live or garbage bucket item taken, not cancelled ones' tombstones;
  buried the dead ones, cascaded the bucket items moved into the sorted
  set, not yet promoted). Call again while moved == limit, or at once when
  the next due time is now; block on the wake stream after the returned id.
  Due work first: the due members, then the buckets wholly due (straight
  into the stream), and only with the room left the cascades (a bucket
  whose cascade time has come: its items already due into the stream, the
  others into the sorted set).
  Not allow-oom: a cascade grows the memory used. In a Redis out of memory
  (maxmemory, noeviction) it is refused with OOM; the caller then calls
  jr_promote_due (allow-oom; same keys, arguments and reply): the due
  members and the buckets wholly due only, no cascade (a bucket due in part
  waits until it is wholly due, at most WHEEL_MS late); its next due time
  is at most 250 ms ahead while a cascade waits, so that it resumes once
  memory is freed.
]]
local function promote_impl(fn, keys, args, due_only)
  local q, err = queue_of(fn, keys, {K_READY, K_DELAYED, K_WAKE}, true)
  if not q then return err end
  local dead = qkey(q, K_DEAD)
  if keys[4] and keys[4] ~= dead then return refuse(fn, 'key 4 must be ' .. shown(dead) .. ' or left out') end
  local x, nx = reached(fn, keys, 5, q, {K_IDS, K_WHEEL, K_WHEEL_N})
  if not x then return nx end
  -- revision 22: jr:{Q}:moved may follow (moves by number, see mv_id)
  local movedk = nx > 0 and keys[8] == qkey(q, K_MOVED) and keys[8]
  if #keys > 4 + nx + (movedk and 1 or 0) then
    return refuse(fn, 'takes the keys jr:{Q}:ready jr:{Q}:delayed jr:{Q}:wake jr:{Q}:dead jr:{Q}:ids jr:{Q}:wheel ' ..
                  'jr:{Q}:wheel:n [jr:{Q}:moved], got ' .. #keys .. ' keys')
  end
  local w = {q = q, wheel = x[K_WHEEL], wheel_n = x[K_WHEEL_N]}
  local ready, delayed, wake = keys[1], keys[2], keys[3]
  local limit, dead_max = int_arg(args[1]), args[2] and count_arg(args[2])
  if not limit or limit < 1 or limit > PROMOTE_MAX or #args > 2 or (args[2] and not dead_max) then
    return refuse(fn, 'arguments: LIMIT (1..' .. PROMOTE_MAX .. ') [DEAD_MAX], got ' .. shown(table.concat(args, ' ')))
  end
  local ids = aux(x[K_IDS], 'hash') -- garbage there costs the lookups only (revision 15)
  local mv -- moves by number only with both keys usable
  if ids and movedk and aux(movedk, 'zset') then
    mv, w.ids, w.moved = {runs = {}}, ids, movedk
  end
  err = check_types(fn, {{ready, 'stream'}, {delayed, 'zset'}, {wake, 'stream'}, {dead, 'stream'}})
  if err then return err end
  local now = now_ms()
  local starts, later, fix = wheel_due_buckets(fn, w, now)
  if not starts then return later end
  local envs = redis.call('ZRANGE', delayed, '-inf', ms_str(now), 'BYSCORE', 'LIMIT', 0, limit)
  if #starts > 0 or #envs > 0 or fix then
    err = check_room(fn, ready) or check_room(fn, dead)
    if err then return err end
    ensure_group(ready)
  end
  if fix then wheel_repair(w, fix, dead, dead_max) end
  init_upvalues()
  fmt_memo, score_memo = {}, {}
  local bad, idx, moved, cascaded = {}, {}, #envs, 0
  -- 1. the due members, removed by rank (the lowest-scored ones) before a
  -- cascade adds any
  local free, fstart
  if mv and #envs >= NEAR_RUN_MIN then free, fstart = near_free(envs, ids) end
  local mz = free and {mv = mv, now = now, free = free, start = fstart}
  for _, packed in ipairs(envs) do
    promote_one(ready, idx, bad, mz, w, packed, l_pcall(l_unpack_limit, packed, 2 + 2 * FIELDS_MAX, 0))
  end
  if mz and mv.start then
    mv_record(mv, ids, movedk, mv.start)
    mv.start = nil
  end
  if #envs > 0 then redis.call('ZREMRANGEBYRANK', delayed, 0, #envs - 1) end
  local taken = #envs
  if #starts > 0 then
    -- 2. the buckets wholly due; 3. the cascades, with the room left
    local t, m, c = wheel_promote(w, starts, limit - taken, now, ready, delayed, idx, bad, true, mv)
    taken, moved = taken + t, moved + m
    if not due_only and taken < limit then
      t, m, c = wheel_promote(w, starts, limit - taken, now, ready, delayed, idx, bad, false)
      taken, moved, cascaded = taken + t, moved + m, c
    end
  end
  -- every promoted job has a new entry: into the job index, 1,000 per HSET
  for i = 1, ids and #idx or 0, 2000 do
    redis.call('HSET', ids, unpack(idx, i, math.min(i + 1999, #idx)))
  end
  for _, b in ipairs(bad) do
    xadd_dead(dead, dead_max, {F_ERROR, 'delayed member: ' .. b[2], F_WHY, 'invalid', F_RAW, b[1]})
  end
  if mv and redis.call('EXISTS', movedk) == 1 then moved_trim(ready, ids, movedk) end
  -- the next wake-up: the earliest member, or when the next bucket must
  -- cascade: among those looked at (`later`, or now for the ones this call
  -- left for lack of room), else the first beyond them, at its earliest
  local head = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  local nxt = head[2] and tonumber(head[2])
  local wl = later
  for _, b in ipairs(starts) do
    local start = tonumber(b)
    if redis.call('EXISTS', bucket_key(q, start)) == 1 then
      local at = now
      if due_only and start + WHEEL_MS > now then at = math.min(now + 250, start + WHEEL_MS) end
      if not wl or at < wl then wl = at end
    end
  end
  if wl and (not nxt or wl < nxt) then nxt = wl end
  return {moved, nxt and ms_str(nxt) or '', ms_str(now), last_wake(wake), #bad, cascaded}
end
function promote(keys, args) return promote_impl('jr_promote', keys, args, false) end
function promote_due(keys, args) return promote_impl('jr_promote_due', keys, args, true) end
end -- 20-promote.lua
