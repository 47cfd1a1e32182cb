#!lua name=jobrunner
-- jobrunner: contract 1, revision 24.
-- (Raise the revision with every change to any part of the library; tests/lua_revision.sh checks.
-- A jobrunner process never replaces a newer revision loaded in Redis.)
--[[
The Redis side of jobrunner: a Redis Function library (Redis >= 7.0), loaded
by every jobrunner process at start (FUNCTION LOAD REPLACE, unless Redis
holds this revision or a newer one). Any client in
any language may FCALL these functions; docs/redis-contract.md is the contract.

The library is one file joined by the build from the parts that
runner/lua/parts.txt lists, in its order (one Lua chunk: a part sees the
names of the parts before it): 00-common.lua (this: the contract block, the
rules of the values, the helpers every part shares), 10-enqueue.lua
(enqueue, the time wheel and the two stored formats), 20-promote.lua,
30-worker.lua (the calls of a running worker), 40-admin.lua (the registry,
the lookups by job id, the CLI's admin calls), 45-partitions.lua (the
number of partitions of a queue), 50-cron.lua, and
90-register.lua (the one list of the functions and their flags).

Keys of queue Q (all share the hash tag {Q}, so every call touches one slot;
revision 18: every key a function reaches is in its KEYS, but for the
time-wheel buckets jr:{Q}:wheel:<start>, which are found inside the call and
share the tag of its keys -- see `reached` below):
  jr:{Q}:ready    stream, consumer group "jr": jobs ready to run
  jr:{Q}:delayed  sorted set, the near tier of delayed jobs: member = the
                  whole envelope as a sequence of msgpack strings: id,
                  field, value, ...; score = due time (Unix ms, fractional
                  part = us)
  jr:{Q}:wheel:<start>  list, a time-wheel bucket: the delayed jobs due in
                  [start, start + WHEEL_MS) written NEAR_MS or more ahead,
                  as compact items (see The time wheel, 10-enqueue.lua)
  jr:{Q}:wheel    sorted set: the buckets that exist (member = score = start)
  jr:{Q}:wheel:n  counter: how many jobs the buckets hold
  jr:{Q}:wake     stream of length 1: an entry is added when a job becomes the
                  earliest delayed one; every scheduler XREADs it (a broadcast,
                  unlike a list pop, so no scheduler keeps a stale timer)
  jr:{Q}:seq      counter for ids of delayed jobs enqueued without an id, and
                  the numbers of the jobs that enter a bucket
  jr:{Q}:uniq:ID  idempotency window of an explicit job id; after the job
                  was cancelled or deleted, its tombstone until the window ends
  jr:{Q}:ids      hash: job id -> where the job is ("@<score>" in the delayed
                  set, "~<n>@<score>" in a bucket, or "<entry id>" in the
                  stream), only for jobs whose id does not say it (see index_set)
  jr:{Q}:cancelled hash: entry id -> Unix ms, running jobs asked to cancel
  jr:{Q}:dead     stream, capped: dead jobs (the envelope, err, why, raw)
  jr:{Q}:stats    hash: processed, failed, and a 60-slot ring t<k>/c<k>
  jr:{Q}:history  hash, at most 1440 fields: per minute of the last 24 h,
                  field k = minute mod 1440, value "<minute> <processed>
                  <failed>" (minute = Unix s / 60; revision 20, see count)
Not of one queue (each its own slot):
  jr:{queues}        set of queue names (the registry); jr:{queues}:wake stream
  jr:{queues}:paused hash: paused queues (jobrunner pause writes it, not
                     this library); jr:{queues}:resumed never written:
                     workers block on it
  jr:{queues}:partitions hash: queue -> number of partitions (absent = 1),
                     written by jr_partitions_set (45-partitions.lua); the
                     keys of partition J of queue Q are those of the
                     internal queue Q#J
  jr:{procs}         sorted set of live processes; jr:{procs}:<name> hash
                     with TTL, one process (the processes write them;
                     jr_procs_forget removes names of dead ones)
  jr:{cron}          hash: periodic schedules; jr:{cron}:last hash: the
                     latest tick fired; jr:{cron}:wake stream (50-cron.lua)
  jr:{lib}:loading, jr:{lib}:fence  the library-load lock and fence
                     (written by the loading processes)

Every scheduling decision uses Redis's clock (TIME), never the caller's.

Every function is all or nothing: it checks all its keys and arguments (and
the types of the keys it writes) before its first write, and refuses with an
error reply naming what is wrong; after its first write nothing can raise.
Garbage found in a key (a member that is not an envelope, an entry too large
to copy) goes to the dead stream, with what was wrong in `err`; nothing is
dropped unseen.
]]

local GROUP = 'jr'

-- The maxima of runner/src/jr_limits.h, as literals: a test
-- (tests/integration/test_contract.c) checks that they equal the C constants.
local DELAY_MAX_MS = 315360000000 -- JR_DELAY_MAX_MS: a job is due at most 10 years after now
local TIMEOUT_MAX_MS = 604800000  -- JR_TIMEOUT_MAX_MS: envelope field t, 7 days
local BACKOFF_MAX_MS = 2592000000 -- JR_BACKOFF_MAX_MS: envelope field b, 30 days
local ATTEMPTS_MAX = 1000         -- JR_ATTEMPTS_MAX: envelope fields a and m
local UNIQ_MAX_MS = 315360000000  -- JR_UNIQ_MAX_MS: idempotency window, 10 years
local QUEUE_MAX = 128             -- JR_QUEUE_MAX: longest queue name
local ID_MAX = 158                -- JR_JOB_ID_MAX: longest job id, bytes
local HANDLER_MAX = 64            -- JR_HANDLER_NAME_MAX: longest handler name
local CRON_NAME_MAX = 100         -- JR_CRON_NAME_MAX: longest schedule name
local PROMOTE_MAX = 100000        -- largest LIMIT of one jr_promote call
-- An entry or delayed member with more field/value pairs than this cannot be
-- copied field by field (Lua's unpack stops near 8000 values, cmsgpack.pack
-- at 4000): it is buried whole, nothing lost. A real envelope has at most 10.
local FIELDS_MAX = 1000

-- The names of runner/src/contract.h, as literals, one line per entry of its
-- lists and no other F_/K_ line: a test (tests/integration/test_contract.c)
-- checks that they equal JR_ENVELOPE_FIELDS (F_<NAME>: the fields of a job's
-- stream entry) and JR_QUEUE_KEYS (K_<NAME>: key jr:{Q}:<suffix> of queue Q).
local F_ID = 'id'
local F_HANDLER = 'h'
local F_PAYLOAD = 'p'
local F_ATTEMPT = 'a'
local F_MAX = 'm'
local F_TIMEOUT = 't'
local F_BACKOFF = 'b'
local F_ENQUEUED = 'e'
local F_DUE = 'd'
local F_ERROR = 'err'
local F_WHY = 'why'
local F_RAW = 'raw'
local K_READY = 'ready'
local K_DELAYED = 'delayed'
local K_WAKE = 'wake'
local K_SEQ = 'seq'
local K_DEAD = 'dead'
local K_IDS = 'ids'
local K_CANCELLED = 'cancelled'
local K_STATS = 'stats'
local K_WHEEL = 'wheel'
local K_WHEEL_N = 'wheel:n'
local K_FINISHED = 'finished'
local K_FINISHED_IDS = 'finished:ids'
local K_WAITERS = 'waiters'
local K_DONE = 'done'
local K_HISTORY = 'history'
local K_MOVED = 'moved'
local DAY_MS = 86400000 -- JR_DAY_MS: one day, the default idempotency window of jobrunner's producers

-- The key of queue q with that suffix (K_*), and the keys with a variable
-- part: the idempotency key jr:{Q}:uniq:<id> of a job id (as jr_uniq_key
-- builds it in C); a time-wheel bucket is bucket_key (10-enqueue.lua).
local function qkey(q, suffix) return 'jr:{' .. q .. '}:' .. suffix end
local function uniq_key(q, id) return qkey(q, 'uniq:' .. id) end

--[[
The rules of the values: one function per value, the same rules and words
as runner/src/contract.c (the CLI, the config loader, the client library,
the plugin API and the worker's decoder use that one). A test
(tests/integration/test_contract.c) drives a table of inputs and random ones
through both and expects the same verdict. Each *_why returns nil for a
valid value, else what is wrong, to follow the value's name and the quoted
value in a refusal.
]]
local QUEUE_RULE = '1-128 characters of A-Z a-z 0-9 _ . : -'
local HANDLER_RULE = '1-64 characters of A-Z a-z 0-9 _ . : -'
local CRON_NAME_RULE = '1-100 characters of A-Z a-z 0-9 _ . : -'
local function name_why(s, max, rule)
  if type(s) ~= 'string' or s == '' then return 'is empty (' .. rule .. ')' end
  if #s > max or not string.find(s, '^[A-Za-z0-9_%.:%-]+$') then return 'is not valid (' .. rule .. ')' end
  return nil
end
local function queue_ok(q) return name_why(q, QUEUE_MAX, QUEUE_RULE) == nil end
-- The queue part of a key: a queue name, or the internal name of partition
-- J of one, "<queue>#<J>" with J 1-7 digits (runner/src/partition.h;
-- revision 19). Users never name one: their names go through queue_ok.
local function key_queue_ok(q)
  if type(q) ~= 'string' then return false end
  local base, j = string.match(q, '^(.*)#(%d+)$')
  if base and #j <= 7 then return queue_ok(base) end
  return queue_ok(q)
end
local function handler_why(h) return name_why(h, HANDLER_MAX, HANDLER_RULE) end
local function cron_name_ok(n) return name_why(n, CRON_NAME_MAX, CRON_NAME_RULE) == nil end
-- Ids of the forms "d<due ms>-<n>", "<digits>-<digits>" (and the older
-- "d<n>") are made by jobrunner, and so are those forms followed by
-- "~<digits>" (a job of partition <digits> of a partitioned queue).
local function reserved_id(id)
  local gen = string.match(id, '^(.*)~%d+$')
  if gen then id = gen end
  return string.find(id, '^d%d+$') ~= nil or string.find(id, '^d%d+%-%d+$') ~= nil or
         string.find(id, '^%d+%-%d+$') ~= nil
end
-- The id of a job that exists (generated forms allowed): 1..ID_MAX bytes,
-- no NUL (an id is a C string to handlers, logs and the CLI).
local function stored_id_why(id)
  if type(id) ~= 'string' or id == '' then return 'is empty (1-158 bytes)' end
  if #id > ID_MAX then return 'is longer than ' .. ID_MAX .. ' bytes' end
  if string.find(id, '\0', 1, true) then return 'contains a NUL byte' end
  return nil
end
-- An explicit id a producer gives: a stored id not of a generated form.
local function job_id_why(id)
  local why = stored_id_why(id)
  if why then return why end
  if reserved_id(id) then return 'has a reserved form (d<n>-<n>, d<n> or <n>-<n>, alone or with ~<n>)' end
  return nil
end

-- Every refusal is an error reply "ERR jobrunner: <function>: <what>".
local function refuse(fn, msg)
  return redis.error_reply('ERR jobrunner: ' .. fn .. ': ' .. msg)
end

-- A value quoted for an error message: at most 100 bytes, printable ASCII.
local function shown(s)
  s = tostring(s)
  local t = (string.gsub(string.sub(s, 1, 100), '[^%w%p ]', '?'))
  return '"' .. t .. (#s > 100 and '..."' or '"')
end

-- Decimal digits -> number, else nil (no sign, hex, exponent, inf or nan).
local function int_arg(s)
  if type(s) == 'string' and string.find(s, '^%d+$') then return tonumber(s) end
  return nil
end

-- A count Redis takes as a 64-bit integer (DEAD_MAX, MIN_IDLE_MS): 1..18
-- decimal digits, kept as the string. As a Lua number it would reach Redis
-- in exponent form past 1e16 ("1e+17") and be refused after earlier writes.
local function count_arg(s)
  if type(s) == 'string' and #s <= 18 and string.find(s, '^%d+$') then return s end
  return nil
end

-- Decimal digits with an optional fraction ("1500", "1764581400250.5").
local function dec_arg(s)
  if type(s) == 'string' and (string.find(s, '^%d+$') or string.find(s, '^%d+%.%d+$')) then
    return tonumber(s)
  end
  return nil
end

-- A stream entry id Redis accepts: "<ms>-<seq>" or "<ms>", each < 2^64.
local U64_MAX = '18446744073709551615'
local function u64(s) return #s < 20 or (#s == 20 and s <= U64_MAX) end
local function stream_id_ok(s)
  if type(s) ~= 'string' then return false end
  local a, b = string.match(s, '^(%d+)%-(%d+)$')
  if a then return u64(a) and u64(b) end
  return string.find(s, '^%d+$') ~= nil and u64(s)
end

-- Refuse unless XADD * can add to stream `key`: a stream whose last entry
-- id has the time 2^64-1 (made by an XADD or XSETID with that id, never by
-- jobrunner) would make it raise after earlier writes. Below that time the
-- next id rolls over to it with 2^64 ids still free. Every function checks
-- each stream it may XADD to, before its first write.
local function check_room(fn, key)
  if redis.call('EXISTS', key) == 0 then return nil end
  local info = redis.call('XINFO', 'STREAM', key)
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then
      if string.match(info[i + 1], '^(%d+)') == U64_MAX then
        return refuse(fn, 'stream ' .. shown(key) .. ' has used the last possible entry time (' ..
                      shown(info[i + 1]) .. '): it can take no more entries')
      end
      return nil
    end
  end
  return nil
end

-- Check that keys[1..#suffixes] are jr:{Q}:<suffix> of one valid queue Q,
-- and that there are no more keys unless `more`. Returns Q, or nil and an
-- error reply.
local function queue_of(fn, keys, suffixes, more)
  if #keys < #suffixes or (#keys > #suffixes and not more) then
    return nil, refuse(fn, 'takes the keys jr:{Q}:' .. table.concat(suffixes, ' jr:{Q}:') .. ', got ' .. #keys .. ' keys')
  end
  local q = string.match(keys[1], '^jr:{(.*)}:' .. suffixes[1] .. '$')
  if not key_queue_ok(q) then
    return nil, refuse(fn, 'key 1 must be jr:{Q}:' .. suffixes[1] .. ' with Q a queue name (' .. QUEUE_RULE .. '), got ' .. shown(keys[1]))
  end
  for i = 2, #suffixes do
    local want = qkey(q, suffixes[i])
    if keys[i] ~= want then
      return nil, refuse(fn, 'key ' .. i .. ' must be ' .. shown(want) .. ', got ' .. shown(keys[i]))
    end
  end
  return q
end

-- The keys of queue q a call reaches beyond those its form named before
-- revision 18, `suffixes` in that order (revision 18: every key a function
-- reaches is in its KEYS, so the library is Cluster-correct by the rules,
-- not by the luck of the slot): when keys[pos] is the first of them, keys
-- pos.. must be exactly jr:{Q}:<suffix> of each (the declared form);
-- otherwise (the form of revision 17 and before, still sent by older
-- processes during a rolling upgrade) they are built from q, in the same
-- slot. The one key never declared is a time-wheel bucket
-- jr:{Q}:wheel:<start> (which buckets a call reaches is found inside it):
-- it has the hash tag of the call's keys, so its slot. Returns a table
-- suffix -> key and how many keys were declared (0 or #suffixes), or nil
-- and an error reply naming the key position and the key expected. A
-- declared form gone wrong at its first key -- the first suffix of another
-- queue, or another of the keys in its place -- is refused so too (what
-- the older forms have at `pos`, a uniq key or a target queue's ready
-- stream, is neither).
local function reached(fn, keys, pos, q, suffixes)
  local t, given = {}, keys[pos] == qkey(q, suffixes[1])
  local other = keys[pos] and string.match(keys[pos], '^jr:{(.*)}:' .. suffixes[1] .. '$')
  local misplaced = other and queue_ok(other)
  for i, s in ipairs(suffixes) do
    t[s] = qkey(q, s)
    if keys[pos] == t[s] and i > 1 then misplaced = true end
  end
  if not given and misplaced then
    return nil, refuse(fn, 'key ' .. pos .. ' must be ' .. shown(t[suffixes[1]]) .. ' (keys ' .. pos .. '.. are jr:{Q}:' ..
                       table.concat(suffixes, ' jr:{Q}:') .. '), got ' .. shown(keys[pos]))
  end
  for i, s in ipairs(suffixes) do
    if given and keys[pos + i - 1] ~= t[s] then
      return nil, refuse(fn, 'key ' .. (pos + i - 1) .. ' must be ' .. shown(t[s]) .. ' (keys ' .. pos .. '.. are jr:{Q}:' ..
                         table.concat(suffixes, ' jr:{Q}:') .. '), got ' ..
                         (keys[pos + i - 1] and shown(keys[pos + i - 1]) or 'no key'))
    end
  end
  return t, given and #suffixes or 0
end

-- Refuse unless every key of spec ({{key, type}, ...}) is missing or holds
-- that type: a write to a key of another type would raise mid-way.
local function check_types(fn, spec)
  for _, s in ipairs(spec) do
    local t = redis.call('TYPE', s[1])['ok']
    if t ~= 'none' and t ~= s[2] then
      return refuse(fn, 'key ' .. shown(s[1]) .. ' holds a ' .. t .. ', not a ' .. s[2])
    end
  end
  return nil
end

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

-- true if the stream exists and has the group (a stream made by a plain
-- XADD has none). One call: XPENDING of 0 entries answers an empty array
-- when both exist and NOGROUP when either is missing (EXISTS + XINFO GROUPS
-- cost three calls and a reply per group). The caller has checked that
-- `ready` is missing or a stream.
local function grouped(ready)
  return not redis.pcall('XPENDING', ready, GROUP, '-', '+', 0).err
end

-- The consumer group exists whenever the stream does.
local function ensure_group(ready)
  if grouped(ready) then return end
  if redis.call('EXISTS', ready) == 0 then
    redis.call('XGROUP', 'CREATE', ready, GROUP, '0', 'MKSTREAM')
  else
    redis.call('XGROUP', 'CREATE', ready, GROUP, '0')
  end
end

-- Add the one entry of a wake stream (its field is no envelope field).
local function poke(wake)
  redis.call('XADD', wake, 'MAXLEN', '1', '*', 'w', '1')
end

-- Id of the last wake entry ("0-0" if none): a scheduler XREADs after it.
local function last_wake(wake)
  local last = redis.call('XREVRANGE', wake, '+', '-', 'COUNT', 1)
  return last[1] and last[1][1] or '0-0'
end

-- XADD to the dead stream, trimmed to about dead_max entries (nil: untrimmed).
local function xadd_dead(dead, dead_max, fields)
  if dead_max then
    redis.call('XADD', dead, 'MAXLEN', '~', dead_max, '*', unpack(fields))
  else
    redis.call('XADD', dead, '*', unpack(fields))
  end
end

--[[
The job index jr:{Q}:ids: job id -> location, kept ONLY for jobs whose
location their id does not give: a job enqueued now without an id is the
stream entry of that id, and one enqueued for later without an id is
"d<due ms>-<n>", found in the delayed set between due and due + 1 ms. Every
other job (an explicit id, a retried, promoted, run-now or dead-retried job)
has an entry "@<score>" (in the delayed set at that score) or "<entry id>"
(in the ready stream), set when it moves there and removed when it leaves
(ack, dead, cancel, delete). A reader checks the job is where its entry
says: a stale entry counts as not there. Small and local so any function
that moves a job can call them.
]]
-- Count n jobs in `stats`, the stats hash of their queue: `field` (processed: finished
-- with success; failed: attempts that failed) grows by n, and for processed
-- also this second's slot of a 60-second ring (t<k> = the Unix second,
-- c<k> = jobs in it, k = second mod 60), from which `stats` computes jobs
-- per second over the last minute. Cannot raise (the key's type is checked
-- by the caller).
-- A counter that is not a count (written by hand) starts again at n: HINCRBY
-- would raise after the caller's first write.
local function bump(key, field, n)
  local v = redis.call('HGET', key, field)
  if v and #v < 18 and string.match(v, '^%d+$') then
    redis.call('HINCRBY', key, field, n)
  else
    redis.call('HSET', key, field, n)
  end
end
-- The keys a worker's call only keeps up to date beside its work -- the job
-- index, the cancel flags, the stats -- are `key` if missing or of type t,
-- else nil: such a key holding garbage (written by hand) is neither read
-- nor written, and costs the lookups, cancels or counts of its queue, never
-- the acknowledgement, failure, lease or hand-back of a job (revision 15).
-- jr_heartbeat names them (aux_note: keys = those three).
local function aux(key, t)
  local kt = redis.call('TYPE', key)['ok']
  if kt == 'none' or kt == t then return key end
  return nil
end
local function aux_note(keys)
  local bad = {}
  for _, k in ipairs(keys) do
    local kt = redis.call('TYPE', k)['ok']
    if kt ~= 'none' and kt ~= 'hash' then bad[#bad + 1] = 'key ' .. shown(k) .. ' holds a ' .. kt .. ', not a hash' end
  end
  return table.concat(bad, '; ')
end
-- Whether entry had a cancel flag (removing it); never with garbage there.
local function flag_take(cancelled, entry)
  return cancelled ~= nil and redis.call('HDEL', cancelled, entry) == 1
end
-- History (revision 20): with `history` (jr:{Q}:history, declared by the
-- caller; nil for a caller of an older form), the same n also goes into
-- this minute's slot of a 1440-slot ring, one field per minute of the
-- last 24 h: field k = minute mod 1440, value "<minute> <processed>
-- <failed>"; a slot holding another minute (a day old, or garbage) starts
-- again. Bounded at 1440 fields whatever the load; one HGET and one HSET
-- per call, not per job. A history key of another type is left alone.
local HISTORY_SLOTS = 1440
local function count(stats, field, n, history)
  local key = aux(stats, 'hash')
  local sec
  if key then
    bump(key, field, n)
    if field == 'processed' then
      sec = redis.call('TIME')[1]
      local k = tonumber(sec) % 60
      if redis.call('HGET', key, 't' .. k) == sec then
        bump(key, 'c' .. k, n)
      else
        redis.call('HSET', key, 't' .. k, sec, 'c' .. k, n)
      end
    end
  end
  local h = history and aux(history, 'hash')
  if not h then return end
  local minute = math.floor(tonumber(sec or redis.call('TIME')[1]) / 60)
  local slot = tostring(minute % HISTORY_SLOTS)
  local m, p, f = string.match(redis.call('HGET', h, slot) or '', '^(%d+) (%d+) (%d+)$')
  if tonumber(m) ~= minute or #p > 15 or #f > 15 then p, f = 0, 0 end
  if field == 'processed' then p = tonumber(p) + n else f = tonumber(f) + n end
  redis.call('HSET', h, slot, string.format('%d %d %d', minute, p, f))
end
local function index_set(ids, id, loc)
  if ids then redis.call('HSET', ids, id, loc) end
end
-- Remove id's entry; if `loc` is given, only while it still says loc (the
-- job may have moved on under the same id).
local function index_forget(ids, id, loc)
  if not ids then return end
  if loc and redis.call('HGET', ids, id) ~= loc then return end
  redis.call('HDEL', ids, id)
end

-- index_forget for many jobs at once: the index entries of jobids[i] (""
-- = none: the job id is the entry id) that point at entries[i] go, by one
-- HMGET and at most one HDEL per 1000 jobs (an acknowledgement's batch).
local function index_forget_many(ids, jobids, entries)
  if not ids then return end
  local names, locs = {}, {}
  for i = 1, #jobids do
    if jobids[i] ~= '' then names[#names + 1], locs[#locs + 1] = jobids[i], entries[i] end
  end
  for i = 1, #names, 1000 do
    local last = math.min(i + 999, #names)
    local v, gone = redis.call('HMGET', ids, unpack(names, i, last)), {}
    for j = 1, #v do
      if v[j] == locs[i + j - 1] then gone[#gone + 1] = names[i + j - 1] end
    end
    if #gone > 0 then redis.call('HDEL', ids, unpack(gone)) end
  end
end

-- jr:{Q}:seq must be missing or an integer INCR can raise by n.
local function check_seq(fn, seq, n)
  local v = redis.call('GET', seq)
  if v and not ((string.find(v, '^%-?[1-9]%d*$') or v == '0') and #v <= 18 and tonumber(v) + n < 1e18) then
    return refuse(fn, 'key ' .. shown(seq) .. ' holds ' .. shown(v) .. ', not a job counter')
  end
  return nil
end

-- Field names in canonical order (docs/redis-contract.md).
local ORDER = {F_HANDLER, F_PAYLOAD, F_ATTEMPT, F_MAX, F_TIMEOUT, F_BACKOFF, F_ENQUEUED, F_DUE, F_ERROR}
local KNOWN = {[F_ID] = true}
for i = 1, #ORDER do KNOWN[ORDER[i]] = true end

-- Stream entry fields {f1, v1, ...} -> map of the first value of each
-- envelope field (and id), and `rest`: every other pair (unknown names,
-- repeated ones), in order, so nothing a producer wrote is lost.
local function to_map(flat)
  local m, rest = {}, {}
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    if KNOWN[f] and m[f] == nil then
      m[f] = v
    else
      rest[#rest + 1] = f
      rest[#rest + 1] = v
    end
  end
  return m, rest
end

-- Map -> flat field list in canonical order (without id), then `mid`'s
-- pairs, then the rest.
local function to_flat(m, rest, mid)
  local f = {}
  for _, k in ipairs(ORDER) do
    if m[k] ~= nil then f[#f + 1] = k; f[#f + 1] = m[k] end
  end
  for _, x in ipairs(mid or {}) do f[#f + 1] = x end
  for _, x in ipairs(rest) do f[#f + 1] = x end
  return f
end

-- Upvalues for the per-member path of jr_promote and the decoders (a
-- global lookup each time costs as much as the check itself); set by
-- init_upvalues on the first call that needs them, since a library cannot
-- read globals while it loads.
local l_type, l_select, l_pcall, l_unpack_limit
local l_call, l_floor -- redis.call, math.floor

-- The values of a call as a count and a table (nils kept in place).
local function collect(...)
  return l_select('#', ...), {...}
end

local function init_upvalues()
  if not l_type then
    l_type, l_select, l_pcall, l_unpack_limit = type, select, pcall, cmsgpack.unpack_limit
    l_call, l_floor = redis.call, math.floor
  end
end
