--[[
30-worker.lua: the calls of a running worker -- acknowledge (with the
follow-up jobs of a handler), fail (retry, defer, bury), reclaim,
heartbeat, hand back -- and jr_dead_retry. The names of this part are local
to its do-block (the joined chunk may hold at most 200 locals at once), but
for the functions it gives the registration list.
]]
local ack, ack_follow, fail, reclaim, heartbeat, handback, dead_retry
do -- 30-worker.lua

-- A list of stream entry ids args[first..]: nil, or an error reply.
-- Checks args[first..] are stream entry ids, and writes each "<ms>" as
-- "<ms>-0": XACK and XDEL read "<ms>" so, but XRANGE and XPENDING read it as
-- the whole millisecond, which would let a call act on one entry and read
-- another.
local function check_ids(fn, args, first)
  local find = string.find
  for i = first, #args do
    local s = args[i]
    -- fast path (the usual id, as Redis made it): "<ms>-<seq>", each part
    -- of at most 19 digits, so below 2^64 without the u64 comparison
    local d = type(s) == 'string' and #s <= 39 and find(s, '-', 1, true)
    if not (d and d >= 2 and d <= 20 and #s - d <= 19 and #s > d and find(s, '^%d+%-%d+$')) then
      if not stream_id_ok(s) then
        return refuse(fn, 'argument ' .. i .. ' is not a stream entry id: ' .. shown(s))
      end
      if not find(s, '-', 1, true) then args[i] = s .. '-0' end
    end
  end
  return nil
end

-- Whether every one of entries has a '-' with a digit at its start and
-- after it: an id XACK's strict parse tells from anything else (the other
-- form it takes, "<ms>" alone, XRANGE and XPENDING read otherwise: see
-- check_ids).
local function ids_quick(entries)
  local find, byte = string.find, string.byte
  for i = 1, #entries do
    local s = entries[i]
    local d = find(s, '-', 1, true)
    if not d then return false end
    local a, c = byte(s, 1), byte(s, d + 1)
    if not c or a < 48 or a > 57 or c < 48 or c > 57 then return false end
  end
  return true
end

--[[
Finished jobs (revision 20): keep_finished and job wait. A worker whose
queue or handler keeps finished jobs (its configuration says so, in
KEEP_COUNT and KEEP_AGE_MS of its call) has the acknowledgement, the
dead-lettering or the cancel of each job write a record into
jr:{Q}:finished (a stream; entry id = when, by Redis's clock) with the
job's index entry in jr:{Q}:finished:ids (job id -> record entry id), in
the same call. Both are trimmed in that call, once after its records: to
KEEP_COUNT records, and of records older than KEEP_AGE_MS (0 = no age
limit), at most TRIM_STEP_MAX a call (a call adds at most one record a job
and removes up to that many, so the trim keeps up), their index entries
with them; a call whose jobs have different settings (handlers of one
queue) trims to the largest count and age among them. A job
someone waits for (jr_wait put its id in jr:{Q}:waiters) has its end
written into jr:{Q}:done (capped at about DONE_MAX entries) whether or not
it is kept; one EXISTS of jr:{Q}:waiters a call tells whether anyone
waits at all.
]]
local KEEP_MAX = 1000000   -- JR_KEEP_FINISHED_MAX: the largest KEEP_COUNT
local TRIM_STEP_MAX = 1000 -- records an age trim removes in one call, at most
local DONE_MAX = 1000      -- about how many entries jr:{Q}:done keeps

-- The record of a finished job, as a flat field list (the fields of
-- docs/redis-contract.md, Finished jobs; err and result only when given).
local function finished_record(id, handler, outcome, attempt, duration, worker, at, err, result)
  local f = {'id', id, 'h', handler or '', 'outcome', outcome, 'a', attempt or '1', 'duration_ms', duration or '',
             'worker', worker or '', 'finished_at', at}
  if err and err ~= '' then f[#f + 1] = 'err'; f[#f + 1] = err end
  if result and result ~= '' then f[#f + 1] = 'result'; f[#f + 1] = result end
  return f
end

-- The keep arguments KEEP_COUNT KEEP_AGE_MS: the count (0 = not kept) and
-- the age, or nil and what is wrong.
local function keep_args(c, a)
  local n, age = int_arg(c), int_arg(a)
  if not n or n > KEEP_MAX then return nil, 'KEEP_COUNT must be an integer 0..' .. KEEP_MAX .. ', got ' .. shown(c) end
  if not age or age > DELAY_MAX_MS then
    return nil, 'KEEP_AGE_MS must be an integer 0..' .. DELAY_MAX_MS .. ', got ' .. shown(a)
  end
  return n, age
end

-- Forget the index entries of records `old` ({{entry, fields}, ...}) that
-- still point at them.
local function forget_records(fids, old)
  for _, en in ipairs(old) do
    local f = en[2]
    for i = 1, #f - 1, 2 do
      if f[i] == 'id' then
        if redis.call('HGET', fids, f[i + 1]) == en[1] then redis.call('HDEL', fids, f[i + 1]) end
        break
      end
    end
  end
end

-- Trim the records of a call's queue (fk) to `keep`, and of those older
-- than `age` ms (0: no age limit) at most TRIM_STEP_MAX, their index
-- entries with them: once per call, after its records (the trims of many
-- jobs in one). Cannot raise.
local function records_trim(fk, keep, age, now)
  local len = redis.call('XLEN', fk.finished)
  if len > keep then
    forget_records(fk.ids, redis.call('XRANGE', fk.finished, '-', '+', 'COUNT', len - keep))
    redis.call('XTRIM', fk.finished, 'MAXLEN', keep)
  end
  if age > 0 and now - age > 1 then
    local limit = string.format('%d', math.floor(now - age) - 1)
    local old = redis.call('XRANGE', fk.finished, '-', limit, 'COUNT', TRIM_STEP_MAX)
    if #old > 0 then
      forget_records(fk.ids, old)
      for i = 1, #old do redis.call('XDEL', fk.finished, old[i][1]) end
    end
  end
end

-- The end of a job: its record when kept (fk = {finished, ids}, keys of
-- the right types: see finished_keys; keep > 0), and its note in
-- jr:{Q}:done when someone waits for it (wk = {waiters, done}, nil when
-- nobody waits on the queue). Returns whether it wrote a record: the
-- caller then trims (records_trim) after the call's last one. Cannot
-- raise.
local function job_end(fk, wk, rec, keep, now)
  local wrote = false
  if fk and keep and keep > 0 then
    redis.call('HSET', fk.ids, rec[2], redis.call('XADD', fk.finished, '*', unpack(rec)))
    wrote = true
  end
  if wk then
    local d = redis.call('HGET', wk.waiters, rec[2])
    if d then
      redis.call('HDEL', wk.waiters, rec[2])
      if (tonumber(d) or 0) >= now then
        redis.call('XADD', wk.done, 'MAXLEN', '~', DONE_MAX, '*', unpack(rec))
      end
    end
  end
  return wrote
end

-- The keys of records and waits of a call, fk and wk for job_end (nil
-- where a key holds another type: garbage there costs the records or the
-- waits, never the acknowledgement; wk nil too when nobody waits), or
-- nil and an error reply when jr:{Q}:finished or jr:{Q}:done cannot take
-- an entry (see check_room).
local function finished_keys(fn, finished, fids, waiters, done, keeping)
  local fk, wk
  if keeping then
    local f, i = aux(finished, 'stream'), aux(fids, 'hash')
    if f and i then
      local err = check_room(fn, f)
      if err then return nil, nil, err end
      fk = {finished = f, ids = i}
    end
  end
  -- nobody waits (the usual case): one EXISTS, nothing else
  if redis.call('EXISTS', waiters) == 1 then
    local w, d = aux(waiters, 'hash'), aux(done, 'stream')
    if w and d then
      local err = check_room(fn, d)
      if err then return nil, nil, err end
      wk = {waiters = w, done = d}
    end
  end
  return fk, wk
end

-- The deletion of acknowledged entries as one trim (jr_ack): XDEL finds
-- each entry from the start of its stream node, past the entries deleted
-- before it (acknowledged jobs leave from the head, so about half a node
-- per entry, most of the cost of an acknowledgement), while XTRIM MINID
-- drops whole nodes. Given entries that were all pending until just now
-- (so delivered: not after the group's last-delivered id), returns the
-- MINID below which every entry is delivered and finished, and the
-- entries at or past it (nil when none). Entries below the lowest pending
-- entry P are delivered (XREADGROUP delivers in id order) and not pending:
-- finished, and jobrunner acknowledges and deletes together, so a trim
-- below min(P, highest + 1) deletes only entries of this call (the others
-- there are gone already); those at or past P are left to XDEL. With
-- nothing pending, or P past them all, MINID is the highest + 1 and the
-- trim takes them all. nil (XDEL them all) for an id too long to compare
-- as a number.
local function id_parts(e)
  local m, sq = string.match(e, '^(%d+)%-(%d+)$')
  if not m or #m > 15 or #sq > 15 then return nil end -- below 2^53: exact as Lua numbers
  return tonumber(m), tonumber(sq)
end

-- The shape of stream id t (as check_ids let it through) for later_than:
-- the place of its '-', its "<ms>-" and whether a part has a leading zero.
local function id_shape(t)
  local d = string.find(t, '-', 1, true)
  local b = string.byte
  return d, string.sub(t, 1, d), (b(t, 1) == 48 and d > 2) or (b(t, d + 1) == 48 and #t > d + 1)
end

-- Whether stream id e comes after t (td, tpre, tlz: id_shape(t)); nil if
-- either is too long to compare as numbers. Without a string per entry or
-- a number parsed, for ids as Redis writes them: of one length with the
-- '-' at one place they compare as strings (exact, leading zeros or not);
-- else, with no leading zero, the longer ms part is the later, and with
-- one ms part ("<ms>-" a prefix of both) the longer sequence. Any other
-- pair compares as numbers.
local function later_than(e, t, td, tpre, tlz)
  local d = string.find(e, '-', 1, true)
  if d == td and #e == #t then return e > t end
  local b = string.byte
  if not tlz and not ((b(e, 1) == 48 and d > 2) or (b(e, d + 1) == 48 and #e > d + 1)) then
    if d ~= td then return d > td end
    if string.find(e, tpre, 1, true) == 1 then return #e > #t end
    return e > t
  end
  local m, sq = id_parts(e)
  local tm, ts = id_parts(t)
  if not m or not tm then return nil end
  return m > tm or (m == tm and sq > ts)
end

-- The highest of entries (ids as check_ids let them through), or nil if
-- one is too long to compare as a number.
local function highest(entries)
  local top = entries[1]
  local td, tpre, tlz = id_shape(top)
  for i = 2, #entries do
    local e = entries[i]
    local l = later_than(e, top, td, tpre, tlz)
    if l == nil then return nil end
    if l then
      top = e
      td, tpre, tlz = id_shape(top)
    end
  end
  return top
end

local function trim_point(ready, entries)
  local top = highest(entries)
  if not top then return nil end
  local hm, hs = id_parts(top)
  if not hm then return nil end
  local p = redis.call('XPENDING', ready, GROUP, '-', '+', 1)
  local pe = p[1] and p[1][1]
  if not pe then return string.format('%d-%d', hm, hs + 1), nil end
  local pd, ppre, plz = id_shape(pe)
  local past = later_than(pe, top, id_shape(top))
  if past == nil then return nil end
  if past then return string.format('%d-%d', hm, hs + 1), nil end
  -- the entries past P (P is not theirs: it is still pending)
  local rest = {}
  for i = 1, #entries do
    local e = entries[i]
    local l = later_than(e, pe, pd, ppre, plz)
    if l == nil then return nil end
    if l then rest[#rest + 1] = e end
  end
  if #rest == #entries then return nil end -- none below P: no trim to make
  return pe, rest
end

--[[
jr_ack
  KEYS: ready                ARGV: stream entry ids
  KEYS: ready ids            ARGV: entry jobid [entry jobid ...]
  KEYS: ready [ids] cancelled  (either form, jr:{Q}:cancelled last)
  KEYS: ready [ids] cancelled stats  (revision 18: the forms that declare
        every key the call reaches; a form without cancelled or stats
        reaches them by name, see reached)
  KEYS: ready [ids] cancelled stats waiters done  (revision 20: the
        worker's form; the ends of jobs someone waits for go to done, see
        Finished jobs above)
  KEYS: ready ids cancelled stats waiters done finished finished:ids
        ARGV: CONSUMER, then per entry ENTRY JOBID KEEP_COUNT KEEP_AGE_MS
        HANDLER ATTEMPT DURATION_MS RESULT  (revision 20, the record form:
        each entry with KEEP_COUNT > 0 gets its record, outcome ok, or
        cancelled when flagged)
  Any of these forms may end with jr:{Q}:history (revision 21): the jobs
        acknowledged are counted in this minute's slot, see count; a form
        without it leaves the history alone.
  Acknowledges the entries and deletes them from the stream, atomically,
  and forgets their cancel flags (jr:{Q}:cancelled). With the ids key, each
  entry comes with its job id ("" when the job id is the entry id): the job
  index entry that points at that entry is removed too. The 1-key form
  leaves index entries behind, which readers treat as stale. The entries
  leave by one XTRIM, but for those past the oldest pending entry (see trim_point).
  Returns how many were acknowledged; with the cancelled key (last, or
  before stats),
  {how many, {the entries among them that were flagged cancelled}}: the
  check and the acknowledgement are one step, so a job cancelled before
  its acknowledgement arrives is reported as cancelled (revision 15).
  Runs while Redis is out of memory.
]]
function ack(keys, args)
  local fn = 'jr_ack'
  local q, err = queue_of(fn, keys, {K_READY}, true)
  if not q then return err end
  -- keys 2..: any of ids, cancelled, stats, waiters done, finished
  -- finished:ids, history, in this order (the names for a refusal made only then)
  local given, pos, left = {}, 2, {}
  for _, s in ipairs({K_IDS, K_CANCELLED, K_STATS, K_WAITERS, K_DONE, K_FINISHED, K_FINISHED_IDS, K_HISTORY}) do
    if pos > #keys then break end
    if keys[pos] == qkey(q, s) then
      given[s], pos, left = keys[pos], pos + 1, {}
    else
      left[#left + 1] = s
    end
  end
  if #keys >= pos then
    for i = 1, #left do left[i] = shown(qkey(q, left[i])) end
    return refuse(fn, 'key ' .. pos .. ' must be ' .. (#left > 0 and table.concat(left, ' or ') .. ' or ' or '') ..
                  'left out (the keys are jr:{Q}:ready [jr:{Q}:ids] [jr:{Q}:cancelled] [jr:{Q}:stats] ' ..
                  '[jr:{Q}:waiters jr:{Q}:done] [jr:{Q}:finished jr:{Q}:finished:ids] [jr:{Q}:history], in this ' ..
                  'order), got ' .. shown(keys[pos]))
  end
  local keeping = given[K_FINISHED] ~= nil
  if (given[K_WAITERS] == nil) ~= (given[K_DONE] == nil) or (given[K_FINISHED] == nil) ~= (given[K_FINISHED_IDS] == nil) or
     (keeping and not (given[K_IDS] and given[K_CANCELLED] and given[K_STATS] and given[K_WAITERS])) then
    return refuse(fn, 'the record form takes the keys jr:{Q}:ready jr:{Q}:ids jr:{Q}:cancelled jr:{Q}:stats ' ..
                  'jr:{Q}:waiters jr:{Q}:done jr:{Q}:finished jr:{Q}:finished:ids, and waiters comes with done')
  end
  local recs, consumer -- record form: per entry {keep, age, handler, attempt, duration, result}
  if keeping then
    consumer = args[1]
    if not consumer or consumer == '' or (#args - 1) % 8 ~= 0 then
      return refuse(fn, 'the record form takes the arguments CONSUMER, then per entry ENTRY JOBID KEEP_COUNT ' ..
                    'KEEP_AGE_MS HANDLER ATTEMPT DURATION_MS RESULT')
    end
    local pairs_ = {}
    recs = {}
    for i = 2, #args, 8 do
      local keep, age = keep_args(args[i + 2], args[i + 3])
      if not keep then return refuse(fn, 'argument ' .. (i + 2) .. ': ' .. age) end
      pairs_[#pairs_ + 1] = args[i]
      pairs_[#pairs_ + 1] = args[i + 1]
      recs[#recs + 1] = {keep, age, args[i + 4], args[i + 5], args[i + 6], args[i + 7]}
    end
    args = pairs_
  end
  local ready, ids = keys[1], given[K_IDS] and aux(given[K_IDS], 'hash')
  local cancelled = aux(given[K_CANCELLED] or qkey(q, K_CANCELLED), 'hash')
  local stats = given[K_STATS] or qkey(q, K_STATS)
  local entries, jobids = args, nil
  local report = given[K_CANCELLED] ~= nil
  if given[K_IDS] then
    if #args % 2 ~= 0 then return refuse(fn, 'with the ids key, arguments come in pairs: ENTRY JOBID ...') end
    entries, jobids = {}, {}
    for i = 1, #args, 2 do
      entries[#entries + 1] = args[i]
      if #args[i + 1] > ID_MAX then
        return refuse(fn, 'argument ' .. (i + 1) .. ': job id longer than ' .. ID_MAX .. ' bytes')
      end
      jobids[#jobids + 1] = args[i + 1]
    end
  end
  -- the usual batch (at most 1000 entries, each "<digit>...-<digit>...")
  -- is checked by XACK's own strict parse, which refuses before it
  -- acknowledges any entry (check_ids then names the one): a pattern match
  -- per entry was a fifth of the call
  local quick = #entries <= 1000 and ids_quick(entries)
  err = (not quick and check_ids(fn, entries, 1)) or check_types(fn, {{ready, 'stream'}})
  if err then return err end
  local fk, wk
  if given[K_WAITERS] then
    fk, wk, err = finished_keys(fn, given[K_FINISHED], given[K_FINISHED_IDS], given[K_WAITERS], given[K_DONE], keeping)
    if err then return err end
  end
  if quick and (fk or wk) then -- XPENDING reads them before XACK
    quick = false
    err = check_ids(fn, entries, 1)
    if err then return err end
  end
  if #entries == 0 or not grouped(ready) then return report and {0, {}} or 0 end
  -- which entries are ours to finish: pending now (XACK below acknowledges
  -- only those); read before the acknowledgement, for the records and waits
  -- (only those kept, or waited for)
  local ended
  if fk or wk then
    ended = {}
    for i = 1, #entries do
      local id = jobids and jobids[i] ~= '' and jobids[i] or entries[i]
      if ((fk and recs[i][1] > 0) or (wk and redis.call('HEXISTS', wk.waiters, id) == 1)) and
         redis.call('XPENDING', ready, GROUP, entries[i], entries[i], 1)[1] then
        ended[i] = true
      end
    end
  end
  local n = 0
  if quick then
    n = redis.pcall('XACK', ready, GROUP, unpack(entries))
    if type(n) ~= 'number' then
      -- "XACK to <key> failed": the form jri_explain reads the command from
      return check_ids(fn, entries, 1) or refuse(fn, 'XACK to ' .. shown(ready) .. ' failed: ' .. shown(n.err))
    end
  else
    for i = 1, #entries, 1000 do
      n = n + redis.call('XACK', ready, GROUP, unpack(entries, i, math.min(i + 999, #entries)))
    end
  end
  -- no cancel flags (the usual case): no HDEL of every entry for nothing
  local flags = cancelled and redis.call('EXISTS', cancelled) == 1
  local minid, rest
  if n == #entries then minid, rest = trim_point(ready, entries) end
  if minid then
    redis.call('XTRIM', ready, 'MINID', minid)
  end
  local del = not minid and entries or rest or {}
  for i = 1, #del, 1000 do
    redis.call('XDEL', ready, unpack(del, i, math.min(i + 999, #del)))
  end
  local flagged, was = {}, {}
  for i = 1, flags and #entries or 0, 1000 do
    local part = {unpack(entries, i, math.min(i + 999, #entries))}
    if report then
      local v = redis.call('HMGET', cancelled, unpack(part))
      for j = 1, #part do
        if v[j] then flagged[#flagged + 1] = part[j]; was[i + j - 1] = true end
      end
    end
    redis.call('HDEL', cancelled, unpack(part))
  end
  if jobids then index_forget_many(ids, jobids, entries) end
  if n > 0 then count(stats, 'processed', n, given[K_HISTORY]) end
  if ended then
    local now = now_ms()
    local at = string.format('%d', math.floor(now))
    local keep, age, wrote = 0, 0, false -- one trim for the call: its largest count and age
    for i = 1, #entries do
      if ended[i] then
        local id = jobids and jobids[i] ~= '' and jobids[i] or entries[i]
        local r = recs and recs[i] or {0, 0}
        if job_end(fk, wk, finished_record(id, r[3], was[i] and 'cancelled' or 'ok', r[4], r[5], consumer, at, nil, r[6]),
                   r[1], now) then
          wrote = true
          if r[1] > keep then keep = r[1] end
          if r[2] > age then age = r[2] end
        end
      end
    end
    if wrote then records_trim(fk, keep, age, now) end
  end
  if report then return {n, flagged} end
  return n
end

--[[
jr_ack_follow: acknowledge an entry together with the follow-up jobs its
handler enqueued (plugin api->enqueue), atomically.
  KEYS: ready cancelled ids stats (of Q, the job's queue), then for each
        of NQ target queues T: jr:{T}:ready jr:{T}:delayed jr:{T}:wake
        jr:{T}:seq jr:{T}:ids jr:{T}:wheel jr:{T}:wheel:n, then the uniq
        key jr:{T}:uniq:ID of each follow-up with an id, in order
        (revision 18; the form before it, still taken, leaves out Q's
        cancelled ids stats and each target's ids wheel wheel:n: they
        are built from the names, see reached); revision 21: after
        stats (and after the finished keys below when they are given),
        jr:{Q}:history may follow (the job is counted in this minute's
        slot, see count; left alone without it)
  ARGV: entry nq uniq_ms, then per follow-up: qi when id npairs field value
        ... (qi: 1..nq, its target queue; the rest as in jr_enqueue_many)
  Revision 20: after Q's four keys, jr:{Q}:finished jr:{Q}:finished:ids
  jr:{Q}:waiters jr:{Q}:done may follow (the worker's form), and then
  ARGV starts with CONSUMER KEEP_COUNT KEEP_AGE_MS DURATION_MS RESULT: the
  job's record (KEEP_COUNT > 0) and its note to waiters, outcome ok or
  cancelled (see Finished jobs above).
  Every follow-up is checked as jr_enqueue checks a job (check_job, same
  refusals) and every key it may write before anything is written. Then
  the entry is acknowledged: only if that XACK acknowledged it (it was
  pending) is it deleted and every follow-up written (put, as jr_enqueue:
  an id already enqueued within its window is not written again), and 1
  returned; otherwise nothing is written and 0 returned, so a follow-up is
  never written twice for one job, whichever worker acknowledges it. An
  entry flagged cancelled (jr:{Q}:cancelled) when this runs is
  acknowledged and deleted without its follow-ups, and 2 returned
  (revision 15: a cancelled job's follow-ups never appear).
]]
function ack_follow(keys, args)
  local fn = 'jr_ack_follow'
  local q, err = queue_of(fn, {keys[1] or ''}, {K_READY})
  if not q then return err end
  local x, nx = reached(fn, keys, 2, q, {K_CANCELLED, K_IDS, K_STATS})
  if not x then return nx end
  local fin -- revision 20: {consumer, keep, age, duration, result}, and the keys
  if nx > 0 and keys[5] == qkey(q, K_FINISHED) then
    for i, suf in ipairs({K_FINISHED, K_FINISHED_IDS, K_WAITERS, K_DONE}) do
      if keys[4 + i] ~= qkey(q, suf) then
        return refuse(fn, 'key ' .. (4 + i) .. ' must be ' .. shown(qkey(q, suf)) .. ' (keys 5..8 are jr:{Q}:finished ' ..
                      'jr:{Q}:finished:ids jr:{Q}:waiters jr:{Q}:done)')
      end
    end
    local keep, age = keep_args(args[2], args[3])
    if not keep or not args[1] or args[1] == '' or not args[5] then
      return refuse(fn, 'with jr:{Q}:finished, the arguments start with CONSUMER KEEP_COUNT KEEP_AGE_MS DURATION_MS ' ..
                    'RESULT' .. (keep and '' or ': ' .. tostring(age)))
    end
    fin = {args[1], keep, age, args[4], args[5]}
    local rest = {}
    for i = 6, #args do rest[i - 5] = args[i] end
    args = rest
    nx = nx + 4
  end
  local stride = nx > 0 and 7 or 4 -- keys per target queue
  local history = nx > 0 and keys[2 + nx] == qkey(q, K_HISTORY) and keys[2 + nx] or nil
  if history then nx = nx + 1 end
  local entry, nq = args[1], int_arg(args[2])
  if entry and stream_id_ok(entry) and not string.find(entry, '-', 1, true) then entry = entry .. '-0' end -- see check_ids
  if #args < 3 or not stream_id_ok(entry) or not nq or nq < 1 or nq > 1000 or #keys < 1 + nx + stride * nq then
    return refuse(fn, 'arguments: ENTRY NQ (1..1000) UNIQ_MS, then per follow-up QI WHEN ID NPAIRS field value ...; ' ..
                  'keys: jr:{Q}:ready [jr:{Q}:cancelled jr:{Q}:ids jr:{Q}:stats [jr:{Q}:history]], then 4 (7 with them) keys per ' ..
                  'target queue, then the uniq keys; got ' .. #keys ..
                  ' keys and ' .. shown(table.concat(args, ' ', 1, math.min(#args, 3))))
  end
  local window, werr = window_arg(fn, args[3])
  if not window then return werr end
  local targets, seen = {}, {}
  local tsuf = {K_READY, K_DELAYED, K_WAKE, K_SEQ, K_IDS, K_WHEEL, K_WHEEL_N}
  for t = 1, nq do
    local b = 1 + nx + stride * (t - 1)
    local tq, terr = queue_of(fn .. ': target queue ' .. t, {unpack(keys, b + 1, b + stride)},
                              {unpack(tsuf, 1, stride)})
    if not tq then return terr end
    if seen[tq] then return refuse(fn, 'target queue ' .. shown(tq) .. ' is given twice') end
    seen[tq] = true
    targets[t] = {name = tq, q = tq, ready = keys[b + 1], delayed = keys[b + 2], wake = keys[b + 3], seq = keys[b + 4],
                  ids = qkey(tq, K_IDS), wheel = qkey(tq, K_WHEEL), wheel_n = qkey(tq, K_WHEEL_N),
                  now = false, later = false, gen = 0, far = {}}
  end
  local nk = 1 + nx + stride * nq -- the keys before the uniq keys
  local now, jobs, i, nuniq = now_ms(), {}, 4, 0
  while i <= #args do
    local nj = #jobs + 1
    local t, when, id, np = int_arg(args[i]), args[i + 1], args[i + 2], int_arg(args[i + 3])
    if not t or t < 1 or t > nq or not id or not np or i + 3 + 2 * np > #args then
      return refuse(fn, 'follow-up ' .. nj .. ' (argument ' .. i .. '): expected QI (1..' .. nq ..
                    ') WHEN ID NPAIRS, then NPAIRS field/value pairs')
    end
    local first, last = i + 4, i + 3 + 2 * np
    local due, derr = check_job(fn .. ': follow-up ' .. nj, when, id, args, first, last, now)
    if not due then return derr end
    local tg, uniq = targets[t], nil
    if id ~= '' then
      nuniq = nuniq + 1
      uniq = uniq_key(tg.name, id)
      if keys[nk + nuniq] ~= uniq then
        return refuse(fn, 'key ' .. (nk + nuniq) .. ' must be ' .. shown(uniq) .. ', the uniq key of follow-up ' .. nj)
      end
    end
    if due <= now then tg.now = true else tg.later = true end
    if due > now and id == '' then tg.gen = tg.gen + 1 end
    if to_wheel(due, now) then tg.far[#tg.far + 1] = due end
    jobs[nj] = {tg, id, due, first, last, uniq}
    i = last + 1
  end
  if #jobs == 0 then return refuse(fn, 'no follow-up given (use jr_ack)') end
  if #keys ~= nk + nuniq then
    return refuse(fn, 'takes ' .. (1 + nx) .. ' + ' .. stride .. ' x NQ keys plus one uniq key per follow-up with an id: ' ..
                  (nk + nuniq) .. ', got ' .. #keys)
  end
  err = check_types(fn, {{keys[1], 'stream'}})
  local fk, wk
  if not err and fin then
    fk, wk, err = finished_keys(fn, keys[5], keys[6], keys[7], keys[8], fin[2] > 0)
  end
  for _, tg in ipairs(targets) do
    err = err or queue_types(fn, {tg.ready, tg.delayed, tg.wake, tg.seq}, tg.ids) or check_seq(fn, tg.seq, tg.gen) or
          (tg.now and check_room(fn, tg.ready)) or (tg.later and check_room(fn, tg.wake)) or
          (#tg.far > 0 and wheel_check(fn, tg, tg.far))
  end
  if err then return err end
  if not grouped(keys[1]) then return 0 end
  local e = redis.call('XRANGE', keys[1], entry, entry)
  if redis.call('XACK', keys[1], GROUP, entry) == 0 then return 0 end
  redis.call('XDEL', keys[1], entry)
  local was_cancelled = flag_take(aux(x[K_CANCELLED], 'hash'), entry)
  local flat = e[1] and e[1][2] or {}
  for f = 1, #flat - 1, 2 do -- its job id (absent: the entry id, never in the index)
    if flat[f] == F_ID then
      index_forget(aux(x[K_IDS], 'hash'), flat[f + 1], entry)
      break
    end
  end
  count(x[K_STATS], 'processed', 1, history)
  if fk or wk then
    local m = to_map(flat)
    local now = now_ms()
    if job_end(fk, wk, finished_record(m[F_ID] or entry, m[F_HANDLER], was_cancelled and 'cancelled' or 'ok',
                                       m[F_ATTEMPT], fin[4], fin[1], string.format('%d', math.floor(now)), nil, fin[5]),
               fin[2], now) then
      records_trim(fk, fin[2], fin[3], now)
    end
  end
  if was_cancelled then return 2 end
  for _, tg in ipairs(targets) do
    if tg.now then ensure_group(tg.ready) end
  end
  for _, j in ipairs(jobs) do
    local tg = j[1]
    put({q = tg.name, ready = tg.ready, delayed = tg.delayed, wake = tg.wake, seq = tg.seq, uniq = j[6],
         ids = tg.ids, wheel = tg.wheel, wheel_n = tg.wheel_n},
        j[2], j[3], window, args, j[4], j[5], now)
  end
  return 1
end



-- The consumer that holds a pending entry, or nil.
local function owner(ready, entry)
  local p = redis.call('XPENDING', ready, GROUP, entry, entry, 1)
  return p[1] and p[1][2] or nil
end

-- The time part of a stream id, in ms.
local function id_ms(entry)
  return string.match(entry, '^(%d+)') or '0'
end

-- 1 if an entry's field/value items cannot be copied one by one. `added`:
-- how many fields earlier copies may have added (bury adds id e err why).
local function too_large(flat, added)
  return #flat > 2 * (FIELDS_MAX + (added or 0))
end

-- Acknowledge stream entry `entry` and delete it: the old entry of a job
-- requeued, buried or dropped.
local function ack_delete(ready, entry)
  redis.call('XACK', ready, GROUP, entry)
  redis.call('XDEL', ready, entry)
end

--[[
The requeue of a job that leaves its stream entry (jr_fail, jr_handback,
jr_dead_retry), and the copy bury makes of it: entry_env reads the entry as
envelope map and rest (to_map), requeue writes it again.
]]
-- The job id and the envelope of stream entry `entry` (fields `flat`), to
-- be written anew: m without its id, and with e (enqueued at) when it was
-- absent, which meant the entry id's time: a new entry would not keep it;
-- rest as to_map gives it.
local function entry_env(entry, flat)
  local m, rest = to_map(flat)
  local id = m[F_ID] or entry
  m[F_ID] = nil
  if m[F_ENQUEUED] == nil then m[F_ENQUEUED] = id_ms(entry) end
  return id, m, rest
end

-- Write job `id` (envelope m, rest) into queue k = {q, ready, delayed,
-- wake, ids, seq, wheel, wheel_n} (ids nil: no job index; the last four
-- only for a due time): with `due` nil ready now, as a new
-- stream entry; else delayed until due, in the time wheel or the sorted
-- set as to_wheel says against `now`. The job index says where it went.
-- Cannot raise: the caller checked the keys, the room of the stream it
-- adds to and, for the wheel, wheel_check.
local function requeue(k, id, m, rest, due, now)
  if not due then
    index_set(k.ids, id, redis.call('XADD', k.ready, '*', F_ID, id, unpack(to_flat(m, rest))))
  elseif to_wheel(due, now) then
    wheel_add(k, id, due, to_flat(m, rest))
  else
    schedule(k.delayed, k.wake, due, cmsgpack.pack(id, unpack(to_flat(m, rest))))
    index_set(k.ids, id, '@' .. ms_str(due))
  end
end

-- Put a stream entry (id `entry`, fields `flat`) into the dead stream with
-- err and why: id, its envelope fields in canonical order (err replaced),
-- why, then every other field. An entry too large to copy field by field
-- goes in whole: id, h, err (saying so), why, and raw = all its fields as one
-- msgpack array. Cannot raise.
local function bury(dead, dead_max, entry, flat, err, why)
  local id, m, rest = entry_env(entry, flat)
  if too_large(flat) then
    local f = {F_ID, id}
    if m[F_HANDLER] then f[3], f[4] = F_HANDLER, m[F_HANDLER] end
    f[#f + 1] = F_ERROR
    f[#f + 1] = err .. ' (the entry has ' .. (#flat / 2) .. ' fields, more than ' .. FIELDS_MAX ..
                ': all of them are in raw, a msgpack array field, value, ...)'
    f[#f + 1] = F_WHY
    f[#f + 1] = why
    f[#f + 1] = F_RAW
    f[#f + 1] = cmsgpack.pack(flat)
    xadd_dead(dead, dead_max, f)
    return
  end
  m[F_ERROR] = err
  local f = {F_ID, id}
  for _, x in ipairs(to_flat(m, rest, {F_WHY, why})) do f[#f + 1] = x end
  xadd_dead(dead, dead_max, f)
end

--[[
jr_fail: an attempt failed (or the entry cannot be run): retry or bury it.
  KEYS: ready delayed wake dead ids cancelled stats wheel wheel:n seq
        (revision 18; the first four alone, the form before it, are
        still taken: the others are then built from Q, see reached)
        [history]  (revision 21, last, after the finished keys when they
        are given: a failed attempt -- retry or dead, not a defer -- is
        also counted in this minute's slot, see count)
  ARGV: entry consumer action delay_ms error why dead_max
  Revision 20: the 10 keys, then jr:{Q}:finished jr:{Q}:finished:ids
  jr:{Q}:waiters jr:{Q}:done, with ARGV ... dead_max KEEP_COUNT KEEP_AGE_MS
  DURATION_MS RESULT (the worker's form): a job that ends here -- dead
  (outcome failed, with its error) or cancelled -- gets its record
  (KEEP_COUNT > 0) and its note to waiters (see Finished jobs above).
    action  "retry": attempt+1, due in delay_ms (0 = ready again now,
            at most DELAY_MAX_MS)
            "defer": the same attempt again in delay_ms, with err = error and
            d (due) kept at the time the job first fell due: a worker that
            lacks the job's handler leaves it for one that has it (rolling
            upgrades); d tells it how long the job has waited
            "dead": into the dead stream with error and why
  An entry too large to copy (more than FIELDS_MAX fields) is buried whole
  (see bury) whatever the action, with why = "invalid" for a retry.
  Does nothing and returns 0 unless `consumer` still holds the entry (a
  worker that lost its lease must not retry a job another one now runs).
  A job cancelled while it ran (an entry in jr:{Q}:cancelled) is neither
  retried nor buried: it is acknowledged and deleted, and 2 returned.
  Keeps the job index (jr:{Q}:ids) true. Returns 1. Runs while Redis is out
  of memory.
]]
function fail(keys, args)
  local fn = 'jr_fail'
  local q, err = queue_of(fn, keys, {K_READY, K_DELAYED, K_WAKE, K_DEAD}, true)
  if not q then return err end
  local x, nx = reached(fn, keys, 5, q, {K_IDS, K_CANCELLED, K_STATS, K_WHEEL, K_WHEEL_N, K_SEQ})
  if not x then return nx end
  -- revision 21: jr:{Q}:history may end either form (key 11 or 15)
  local nk = #keys
  local history = nx > 0 and (nk == 11 or nk == 15) and keys[nk] == qkey(q, K_HISTORY) and keys[nk] or nil
  if history then nk = nk - 1 end
  local fin -- revision 20: {keep, age, duration, result}
  if nx > 0 and nk == 14 then
    for i, suf in ipairs({K_FINISHED, K_FINISHED_IDS, K_WAITERS, K_DONE}) do
      if keys[10 + i] ~= qkey(q, suf) then
        return refuse(fn, 'key ' .. (10 + i) .. ' must be ' .. shown(qkey(q, suf)) .. ' (keys 11..14 are ' ..
                      'jr:{Q}:finished jr:{Q}:finished:ids jr:{Q}:waiters jr:{Q}:done)')
      end
    end
    local keep, age = keep_args(args[8], args[9])
    if #args ~= 11 or not keep then
      return refuse(fn, 'with jr:{Q}:finished, the arguments are ENTRY CONSUMER ACTION DELAY_MS ERROR WHY DEAD_MAX ' ..
                    'KEEP_COUNT KEEP_AGE_MS DURATION_MS RESULT' .. (keep and '' or ': ' .. tostring(age)))
    end
    fin = {keep, age, args[10], args[11]}
    args = {unpack(args, 1, 7)}
  elseif nk ~= 4 + nx then
    return refuse(fn, 'takes the keys jr:{Q}:ready jr:{Q}:delayed jr:{Q}:wake jr:{Q}:dead [jr:{Q}:ids jr:{Q}:cancelled ' ..
                  'jr:{Q}:stats jr:{Q}:wheel jr:{Q}:wheel:n jr:{Q}:seq [jr:{Q}:finished jr:{Q}:finished:ids ' ..
                  'jr:{Q}:waiters jr:{Q}:done] [jr:{Q}:history]], got ' .. #keys .. ' keys')
  end
  local ready, delayed, wake, dead = keys[1], keys[2], keys[3], keys[4]
  local entry, consumer, action = args[1], args[2], args[3]
  if stream_id_ok(entry) and not string.find(entry, '-', 1, true) then entry = entry .. '-0' end -- see check_ids
  local delay, errtext, why, dead_max = int_arg(args[4]), args[5], args[6], count_arg(args[7])
  if #args ~= 7 then
    return refuse(fn, 'arguments: ENTRY CONSUMER retry|defer|dead DELAY_MS ERROR WHY DEAD_MAX')
  elseif not stream_id_ok(entry) then
    return refuse(fn, 'not a stream entry id: ' .. shown(entry))
  elseif consumer == '' then
    return refuse(fn, 'empty consumer name')
  elseif action ~= 'retry' and action ~= 'defer' and action ~= 'dead' then
    return refuse(fn, 'action must be retry, defer or dead, got ' .. shown(action))
  elseif not delay or delay > DELAY_MAX_MS then
    return refuse(fn, 'DELAY_MS must be an integer 0..' .. DELAY_MAX_MS .. ', got ' .. shown(args[4]))
  elseif not dead_max then
    return refuse(fn, 'DEAD_MAX must be an integer of at most 18 digits, got ' .. shown(args[7]))
  end
  local ids, cancelled = aux(x[K_IDS], 'hash'), aux(x[K_CANCELLED], 'hash')
  local k = {q = q, ready = ready, delayed = delayed, wake = wake, ids = ids, seq = x[K_SEQ], wheel = x[K_WHEEL],
             wheel_n = x[K_WHEEL_N]}
  err = check_types(fn, {{ready, 'stream'}, {delayed, 'zset'}, {wake, 'stream'}, {dead, 'stream'}}) or
        check_room(fn, dead) or (action ~= 'dead' and check_room(fn, (action == 'retry' and delay == 0) and ready or wake))
  -- a retry due NEAR_MS or later waits in the time wheel (the due time
  -- checked here is a lower bound: the buckets it may reach are checked)
  local now = now_ms()
  if not err and action ~= 'dead' and to_wheel(tonumber(ms_str(now + delay)), now) then
    err = wheel_check(fn, k, {tonumber(ms_str(now + delay))})
  end
  local fk, wk
  if not err and fin then fk, wk, err = finished_keys(fn, keys[11], keys[12], keys[13], keys[14], fin[1] > 0) end
  if err then return err end
  if not grouped(ready) or owner(ready, entry) ~= consumer then return 0 end
  local e = redis.call('XRANGE', ready, entry, entry)
  local was_cancelled = flag_take(cancelled, entry)
  if e[1] and (fk or wk) and (was_cancelled or action == 'dead') then
    local m = to_map(e[1][2])
    local t = now_ms()
    if job_end(fk, wk, finished_record(m[F_ID] or entry, m[F_HANDLER], was_cancelled and 'cancelled' or 'failed',
                                       m[F_ATTEMPT], fin[3], consumer, string.format('%d', math.floor(t)),
                                       not was_cancelled and errtext or nil, fin[4]),
               fin[1], t) then
      records_trim(fk, fin[1], fin[2], t)
    end
  end
  if e[1] then
    local flat = e[1][2]
    local id, m, rest = entry_env(entry, flat)
    if action ~= 'defer' and not was_cancelled then count(x[K_STATS], 'failed', 1, history) end
    if was_cancelled then
      index_forget(ids, id, entry)
    elseif action == 'dead' or too_large(flat) then
      index_forget(ids, id, entry)
      bury(dead, dead_max, entry, flat, errtext, action == 'dead' and why or 'invalid')
    else
      m[F_ERROR] = errtext
      if action == 'retry' then
        m[F_ATTEMPT] = tostring((tonumber(m[F_ATTEMPT]) or 1) + 1)
      elseif m[F_DUE] == nil then
        m[F_DUE] = m[F_ENQUEUED] -- defer: the same attempt, and d keeps the time it first fell due
      end
      if delay == 0 and action == 'retry' then
        m[F_DUE] = nil
        requeue(k, id, m, rest)
      else
        local due = tonumber(ms_str(now + delay))
        if action == 'retry' then m[F_DUE] = tostring(math.ceil(due)) end
        requeue(k, id, m, rest, due, now)
      end
    end
  end
  ack_delete(ready, entry)
  if not e[1] then return 0 end
  return was_cancelled and 2 or 1
end

--[[
jr_reclaim: take over entries whose worker stopped heartbeating.
  KEYS: ready dead ids cancelled   (revision 18; ready dead alone, the
        form before it, still taken: see reached)
  ARGV: consumer min_idle_ms cursor count max_deliveries dead_max
  One XAUTOCLAIM step. Entries delivered more than max_deliveries times are
  poison: they go to the dead stream instead of being run again. Entries
  cancelled while they ran (jr:{Q}:cancelled) are acknowledged and deleted,
  not delivered again (counted with poisoned).
  Returns {next cursor, deleted, poisoned, {{ready, {{id, fields}, ...}}}}:
  the last element has XREADGROUP's shape; deleted counts ids XAUTOCLAIM
  found deleted from the stream (Redis 7 removes them from the PEL).
  Runs while Redis is out of memory.
]]
function reclaim(keys, args)
  local fn = 'jr_reclaim'
  local q, err = queue_of(fn, keys, {K_READY, K_DEAD}, true)
  if not q then return err end
  local x, nx = reached(fn, keys, 3, q, {K_IDS, K_CANCELLED})
  if not x then return nx end
  if #keys ~= 2 + nx then
    return refuse(fn, 'takes the keys jr:{Q}:ready jr:{Q}:dead [jr:{Q}:ids jr:{Q}:cancelled], got ' .. #keys .. ' keys')
  end
  local ready, dead = keys[1], keys[2]
  local consumer, cursor = args[1], args[3]
  local min_idle, count = count_arg(args[2]), int_arg(args[4])
  local max_deliveries, dead_max = int_arg(args[5]), count_arg(args[6])
  if #args ~= 6 or consumer == '' or not min_idle or not stream_id_ok(cursor) or not count or
     count < 1 or count > PROMOTE_MAX or not max_deliveries or not dead_max then
    return refuse(fn, 'arguments: CONSUMER MIN_IDLE_MS CURSOR COUNT (1..' .. PROMOTE_MAX ..
                  ') MAX_DELIVERIES DEAD_MAX, got ' .. shown(table.concat(args, ' ')))
  end
  local ids, cancelled = aux(x[K_IDS], 'hash'), aux(x[K_CANCELLED], 'hash')
  err = check_types(fn, {{ready, 'stream'}, {dead, 'stream'}}) or check_room(fn, dead)
  if err then return err end
  if not grouped(ready) then return {'0-0', 0, 0, {}} end
  local r = redis.call('XAUTOCLAIM', ready, GROUP, consumer, min_idle, cursor, 'COUNT', count)
  local kept, poisoned = {}, 0
  for _, en in ipairs(r[2]) do
    if en and en[2] then
      local p = redis.call('XPENDING', ready, GROUP, en[1], en[1], 1)
      local delivered = p[1] and tonumber(p[1][4]) or 0
      local was_cancelled = flag_take(cancelled, en[1])
      if was_cancelled or delivered > max_deliveries then
        local m = to_map(en[2])
        index_forget(ids, m[F_ID] or en[1], en[1])
        if not was_cancelled then
          bury(dead, dead_max, en[1], en[2],
               'delivered ' .. delivered .. ' times: its worker died while running it each time', 'poison')
        end
        ack_delete(ready, en[1])
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
  KEYS: ready, or ready cancelled, or (revision 18) ready cancelled ids
        stats: with the cancel key, the keys the note reads too (left
        out, they are reached by name, see reached)
  ARGV: consumer entry ...
  Resets the idle time of each entry this consumer still holds (XCLAIM
  JUSTID: no delivery counted). Returns the entries it no longer holds;
  with the 2nd key jr:{Q}:cancelled, {lost entries, entries of those held
  that were cancelled}, and a third element when the queue's job index,
  cancel flags or stats hold another type (see aux): a text naming them.
  Runs while Redis is out of memory.
]]
function heartbeat(keys, args)
  local fn = 'jr_heartbeat'
  local q, err = queue_of(fn, keys, {K_READY}, true)
  if not q then return err end
  local ready, consumer = keys[1], args[1]
  if keys[2] and keys[2] ~= qkey(q, K_CANCELLED) then
    return refuse(fn, 'key 2 must be ' .. shown(qkey(q, K_CANCELLED)) .. ' or left out')
  end
  local x, nx = reached(fn, keys, 3, q, {K_IDS, K_STATS})
  if not x then return nx end
  if #keys > 2 + nx then
    return refuse(fn, 'takes the keys jr:{Q}:ready [jr:{Q}:cancelled [jr:{Q}:ids jr:{Q}:stats]], got ' .. #keys .. ' keys')
  end
  if not consumer or consumer == '' then return refuse(fn, 'arguments: CONSUMER ENTRY ...') end
  err = check_ids(fn, args, 2) or check_types(fn, {{ready, 'stream'}})
  if err then return err end
  local flags = keys[2] and aux(keys[2], 'hash')
  local lost, cancel, g = {}, {}, grouped(ready)
  for i = 2, #args do
    if g and owner(ready, args[i]) == consumer then
      redis.call('XCLAIM', ready, GROUP, consumer, 0, args[i], 'JUSTID')
      if flags and redis.call('HEXISTS', flags, args[i]) == 1 then cancel[#cancel + 1] = args[i] end
    else
      lost[#lost + 1] = args[i]
    end
  end
  if keys[2] then
    local note = aux_note({x[K_IDS], keys[2], x[K_STATS]})
    if note ~= '' then return {lost, cancel, note} end
    return {lost, cancel}
  end
  return lost
end

--[[
jr_handback: give back entries fetched but never started (shutdown).
  KEYS: ready ids cancelled   (revision 18; ready alone, the form before
        it, still taken: see reached)
  ARGV: consumer entry ...
  Each entry this consumer holds is added again as a new entry (so a
  blocked worker gets it at once) and the old one acknowledged and deleted.
  An entry too large to copy (more than FIELDS_MAX fields) stays pending
  as it is, for a reclaim to take over. A cancelled entry (jr:{Q}:cancelled)
  is acknowledged and deleted instead: it never started. Keeps the job
  index true. Returns how many were handed back.
  Runs while Redis is out of memory.
]]
function handback(keys, args)
  local fn = 'jr_handback'
  local q, err = queue_of(fn, keys, {K_READY}, true)
  if not q then return err end
  local x, nx = reached(fn, keys, 2, q, {K_IDS, K_CANCELLED})
  if not x then return nx end
  if #keys ~= 1 + nx then
    return refuse(fn, 'takes the keys jr:{Q}:ready [jr:{Q}:ids jr:{Q}:cancelled], got ' .. #keys .. ' keys')
  end
  local ready, consumer, n = keys[1], args[1], 0
  if not consumer or consumer == '' then return refuse(fn, 'arguments: CONSUMER ENTRY ...') end
  local ids, cancelled = aux(x[K_IDS], 'hash'), aux(x[K_CANCELLED], 'hash')
  err = check_ids(fn, args, 2) or check_types(fn, {{ready, 'stream'}}) or check_room(fn, ready)
  if err then return err end
  if not grouped(ready) then return 0 end
  local k = {q = q, ready = ready, ids = ids}
  for i = 2, #args do
    if owner(ready, args[i]) == consumer then
      local e = redis.call('XRANGE', ready, args[i], args[i])
      if not (e[1] and too_large(e[1][2])) then
        local was_cancelled = flag_take(cancelled, args[i])
        if e[1] then
          local id, m, rest = entry_env(args[i], e[1][2])
          if was_cancelled then
            index_forget(ids, id, args[i])
          else
            requeue(k, id, m, rest)
            n = n + 1
          end
        end
        ack_delete(ready, args[i])
      end
    end
  end
  return n
end

--[[
jr_dead_retry: run dead jobs again, attempts reset.
  KEYS: dead ready ids   (revision 18; dead ready alone, the form before
        it, still taken: see reached)
  ARGV: dead entry ids
  Re-enqueues each dead entry that can run; one without a handler, or
  buried whole (a raw field: garbage, or too large to copy), stays in the
  dead stream. Returns how many were re-enqueued.
]]
function dead_retry(keys, args)
  local fn = 'jr_dead_retry'
  local q, err = queue_of(fn, keys, {K_DEAD, K_READY}, true)
  if not q then return err end
  local x, nx = reached(fn, keys, 3, q, {K_IDS})
  if not x then return nx end
  if #keys ~= 2 + nx then
    return refuse(fn, 'takes the keys jr:{Q}:dead jr:{Q}:ready [jr:{Q}:ids], got ' .. #keys .. ' keys')
  end
  local dead, ready, n = keys[1], keys[2], 0
  local ids = x[K_IDS]
  err = check_ids(fn, args, 1) or check_types(fn, {{dead, 'stream'}, {ready, 'stream'}, {ids, 'hash'}}) or
        check_room(fn, ready)
  if err then return err end
  local k = {q = q, ready = ready, ids = ids}
  for _, entry in ipairs(args) do
    local e = redis.call('XRANGE', dead, entry, entry)
    if e[1] and not too_large(e[1][2], 4) then
      -- not entry_env: e absent stays absent (the entry id is when it died)
      local m, rest = to_map(e[1][2])
      local runnable = m[F_HANDLER] and m[F_HANDLER] ~= ''
      for i = 1, #rest, 2 do
        if rest[i] == F_RAW then runnable = false end
      end
      if runnable then
        -- the first `why` is the one bury added
        for i = 1, #rest, 2 do
          if rest[i] == F_WHY then table.remove(rest, i); table.remove(rest, i); break end
        end
        local id = m[F_ID] or entry
        m[F_ID], m[F_ATTEMPT], m[F_ERROR], m[F_DUE] = nil, nil, nil, nil
        ensure_group(ready)
        requeue(k, id, m, rest)
        redis.call('XDEL', dead, entry)
        n = n + 1
      end
    end
  end
  return n
end

end -- 30-worker.lua
