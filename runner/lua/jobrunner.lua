#!lua name=jobrunner
-- jobrunner: contract 1, revision 16.
-- (Raise the revision with every change to this file; tests/lua_revision.sh checks.
-- A jobrunner process never replaces a newer revision loaded in Redis.)
--[[
The Redis side of jobrunner: a Redis Function library (Redis >= 7.0), loaded
by every jobrunner process at start (FUNCTION LOAD REPLACE, unless Redis
holds this revision or a newer one). Any client in
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
  jr:{Q}:uniq:ID  idempotency window of an explicit job id; after the job
                  was cancelled or deleted, its tombstone until the window ends
  jr:{Q}:ids      hash: job id -> where the job is ("@<score>" in the delayed
                  set, or "<entry id>" in the stream), only for jobs whose id
                  does not say it (see index_set)
  jr:{Q}:cancelled hash: entry id -> Unix ms, running jobs asked to cancel
Registry (its own slot): jr:{queues} set of queue names, jr:{queues}:wake stream.

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
local DAY_MS = 86400000 -- JR_DAY_MS: one day, the default idempotency window of jobrunner's producers

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
local function handler_why(h) return name_why(h, HANDLER_MAX, HANDLER_RULE) end
local function cron_name_ok(n) return name_why(n, CRON_NAME_MAX, CRON_NAME_RULE) == nil end
-- Ids of the forms "d<due ms>-<n>", "<digits>-<digits>" (and the older
-- "d<n>") are made by jobrunner.
local function reserved_id(id)
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
  if reserved_id(id) then return 'has a reserved form (d<n>-<n>, d<n> or <n>-<n>)' end
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
  if not queue_ok(q) then
    return nil, refuse(fn, 'key 1 must be jr:{Q}:' .. suffixes[1] .. ' with Q a queue name (' .. QUEUE_RULE .. '), got ' .. shown(keys[1]))
  end
  for i = 2, #suffixes do
    local want = 'jr:{' .. q .. '}:' .. suffixes[i]
    if keys[i] ~= want then
      return nil, refuse(fn, 'key ' .. i .. ' must be ' .. shown(want) .. ', got ' .. shown(keys[i]))
    end
  end
  return q
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
local function index_key(q) return 'jr:{' .. q .. '}:ids' end
local function cancelled_key(q) return 'jr:{' .. q .. '}:cancelled' end
local function stats_key(q) return 'jr:{' .. q .. '}:stats' end
-- Count n jobs of queue q in its stats hash: `field` (processed: finished
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
-- jr_heartbeat names them (aux_note).
local function aux(key, t)
  local kt = redis.call('TYPE', key)['ok']
  if kt == 'none' or kt == t then return key end
  return nil
end
local function aux_note(q)
  local bad = {}
  for _, k in ipairs({index_key(q), cancelled_key(q), stats_key(q)}) do
    local kt = redis.call('TYPE', k)['ok']
    if kt ~= 'none' and kt ~= 'hash' then bad[#bad + 1] = 'key ' .. shown(k) .. ' holds a ' .. kt .. ', not a hash' end
  end
  return table.concat(bad, '; ')
end
-- Whether entry had a cancel flag (removing it); never with garbage there.
local function flag_take(cancelled, entry)
  return cancelled ~= nil and redis.call('HDEL', cancelled, entry) == 1
end
local function count(q, field, n)
  local key = aux(stats_key(q), 'hash')
  if not key then return end
  bump(key, field, n)
  if field == 'processed' then
    local sec = redis.call('TIME')[1]
    local k = tonumber(sec) % 60
    if redis.call('HGET', key, 't' .. k) == sec then
      bump(key, 'c' .. k, n)
    else
      redis.call('HSET', key, 't' .. k, sec, 'c' .. k, n)
    end
  end
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

-- jr:{Q}:seq must be missing or an integer INCR can raise by n.
local function check_seq(fn, seq, n)
  local v = redis.call('GET', seq)
  if v and not ((string.find(v, '^%-?[1-9]%d*$') or v == '0') and #v <= 18 and tonumber(v) + n < 1e18) then
    return refuse(fn, 'key ' .. shown(seq) .. ' holds ' .. shown(v) .. ', not a job counter')
  end
  return nil
end

--[[
jr_enqueue
  KEYS: ready delayed wake seq [uniq]   (uniq = jr:{Q}:uniq:ID, only with an id)
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

local PRODUCER_FIELDS = {h = true, p = true, a = ATTEMPTS_MAX, m = ATTEMPTS_MAX,
                         t = TIMEOUT_MAX_MS, b = BACKOFF_MAX_MS}

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
  if n < 2 or n % 2 ~= 0 or args[first] ~= 'h' or args[first + 1] == '' then
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
local function wheel_key(q) return 'jr:{' .. q .. '}:wheel' end
local function wheel_count_key(q) return 'jr:{' .. q .. '}:wheel:n' end
local function bucket_key(q, start) return 'jr:{' .. q .. '}:wheel:' .. string.format('%d', start) end
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
  if k >= 4 and flat[k - 3] == 'e' and flat[k - 1] == 'd' and flat[k] == ms_int(math.ceil(us / 1000)) and
     string.find(flat[k - 2], '^%d+$') and #flat[k - 2] <= 15 and tonumber(flat[k - 2]) <= math.floor(us / 1000) then
    E, k = math.floor(us / 1000) - tonumber(flat[k - 2]), k - 4
  end
  return cmsgpack.pack(n, us - bucket_of(us) * 1000, sid, E, unpack(flat, 1, k))
end

-- Refuse unless the wheel keys of queue q, and the bucket of each due time
-- in `dues`, hold their types (and the counter a count): the writes of
-- wheel_add cannot raise then.
local function wheel_check(fn, q, dues)
  local spec = {{wheel_key(q), 'zset'}}
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
  return check_types(fn, spec) or check_seq(fn, wheel_count_key(q), #dues) or
         check_seq(fn, 'jr:{' .. q .. '}:seq', #dues)
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

-- Add a checked job to its bucket: k = {q, seq, wake, ids}; flat = its
-- fields without the id; id "" = generate one. Returns the id. With k.wbuf
-- (a table) the items are gathered per bucket and written by wheel_flush;
-- n still grows in call order, so each bucket stays in order of n.
local function wheel_flush(k)
  for _, b in ipairs(k.wbuf.order) do
    local items, bk, len = k.wbuf[b], bucket_key(k.q, b), 0
    for i = 1, #items, 1000 do
      len = redis.call('RPUSH', bk, unpack(items, i, math.min(i + 999, #items)))
    end
    local wheel = wheel_key(k.q)
    if redis.call('ZADD', wheel, 'NX', b, ms_int(b)) == 1 and redis.call('ZRANGE', wheel, 0, 0)[1] == ms_int(b) then
      poke(k.wake) -- a new earliest bucket: the schedulers' next wake-up is sooner
    elseif lead_step(len) > lead_step(len - #items) then
      -- the bucket grew by a step: its cascade time moved a second earlier
      -- (at most LEAD_MAX_MS / 1 s pokes per bucket)
      poke(k.wake)
    end
    redis.call('INCRBY', wheel_count_key(k.q), #items)
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
    n = redis.call('INCR', 'jr:{' .. k.q .. '}:seq')
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

-- Enqueue one checked job: fields are args[first..last]; k = {ready,
-- delayed, wake, seq, uniq}. Cannot raise. Returns {id, 0|1}.
local function put(k, id, due, window, args, first, last, now)
  if id ~= '' then
    local ttl = math.floor(math.max(due - now, 0) + math.max(window, 1))
    if not redis.call('SET', k.uniq, '1', 'NX', 'PX', ttl) then return {id, 0} end
  end
  if due <= now then
    if id ~= '' then
      index_set(k.ids, id, redis.call('XADD', k.ready, '*', 'id', id, unpack(args, first, last)))
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
  env[#env + 1] = 'e'
  env[#env + 1] = tostring(math.floor(now))
  env[#env + 1] = 'd'
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

local function queue_types(fn, keys, q)
  return check_types(fn, {{keys[1], 'stream'}, {keys[2], 'zset'}, {keys[3], 'stream'}, {keys[4], 'string'},
                          {index_key(q), 'hash'}})
end

-- queue_types for the keys an enqueue writes only: the ready stream for
-- jobs due now, the delayed set, wake stream and seq counter for jobs due
-- later, the index for jobs with an id (each TYPE is a call).
local function written_types(fn, keys, q, now, later, ids)
  local spec = {}
  if now then spec[#spec + 1] = {keys[1], 'stream'} end
  if later then
    spec[#spec + 1] = {keys[2], 'zset'}
    spec[#spec + 1] = {keys[3], 'stream'}
    spec[#spec + 1] = {keys[4], 'string'}
  end
  if ids then spec[#spec + 1] = {index_key(q), 'hash'} end
  return check_types(fn, spec)
end

local function enqueue(keys, args)
  local fn = 'jr_enqueue'
  local q, err = queue_of(fn, keys, {'ready', 'delayed', 'wake', 'seq'}, true)
  if not q then return err end
  if #args < 5 then return refuse(fn, 'arguments: WHEN ID UNIQ_MS h HANDLER [field value ...]') end
  local when, id = args[1], args[2]
  local window, werr = window_arg(fn, args[3])
  if not window then return werr end
  local uniq = 'jr:{' .. q .. '}:uniq:' .. id
  if id ~= '' and (#keys ~= 5 or keys[5] ~= uniq) then
    return refuse(fn, 'an explicit id needs key 5 = ' .. shown(uniq))
  elseif id == '' and #keys ~= 4 then
    return refuse(fn, 'a job without an id takes 4 keys, got ' .. #keys)
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
  err = written_types(fn, keys, q, due <= now, due > now, id ~= '') or (due > now and check_seq(fn, keys[4], 1)) or
        check_room(fn, due <= now and keys[1] or keys[3]) or (to_wheel(due, now) and wheel_check(fn, q, {due}))
  if err then return err end
  if due <= now then ensure_group(keys[1]) end
  local k = {q = q, ready = keys[1], delayed = keys[2], wake = keys[3], seq = keys[4], uniq = uniq, ids = index_key(q)}
  return put(k, id, due, window, args, 4, #args, now)
end

--[[
jr_enqueue_many: jr_enqueue for many jobs of one queue in one call (bulk).
  KEYS: ready delayed wake seq, then the uniq key of each job that has
        an explicit id, in the order of those jobs
  ARGV: uniq_ms, then per job: when id npairs field value ... (npairs
        field/value pairs)
  Every job is checked before any is written: one bad job refuses the whole
  call. Returns {id, 0|1, id, 0|1, ...}.
]]
local function enqueue_many(keys, args)
  local fn = 'jr_enqueue_many'
  local q, err = queue_of(fn, keys, {'ready', 'delayed', 'wake', 'seq'}, true)
  if not q then return err end
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
      uniq = 'jr:{' .. q .. '}:uniq:' .. id
      if keys[4 + nuniq] ~= uniq then
        return refuse(fn, 'key ' .. (4 + nuniq) .. ' must be ' .. shown(uniq) .. ', the uniq key of job ' .. nj)
      end
    end
    if due <= now then any_now = true else any_later = true end
    if to_wheel(due, now) then far[#far + 1] = due end
    local b = 5 * nj
    jobs[b - 4], jobs[b - 3], jobs[b - 2], jobs[b - 1], jobs[b] = id, due, first, last, uniq
    i = last + 1
  end
  if #keys ~= 4 + nuniq then
    return refuse(fn, 'takes 4 keys plus one uniq key per job with an id: ' .. (4 + nuniq) .. ', got ' .. #keys)
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
  err = written_types(fn, keys, q, any_now, any_later, nuniq > 0) or (any_later and check_seq(fn, keys[4], #jobs)) or
        (any_now and check_room(fn, keys[1])) or (any_later and check_room(fn, keys[3])) or
        (#far > 0 and wheel_check(fn, q, far))
  if err then return err end
  if any_now then ensure_group(keys[1]) end
  local k, out = {q = q, ready = keys[1], delayed = keys[2], wake = keys[3], seq = keys[4], ids = index_key(q),
                  wbuf = {order = {}}}, {}
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
  local q, err = queue_of(fn, keys, {'ready'}, false)
  if not q then return err end
  if #args ~= 0 then return refuse(fn, 'takes no arguments, got ' .. #args) end
  if grouped(keys[1]) then return 0 end -- one call on the common path
  err = check_types(fn, {{keys[1], 'stream'}})
  if err then return err end
  ensure_group(keys[1])
  return 1
end

-- Upvalues for the per-member path of jr_promote (a global lookup each
-- time costs as much as the check itself); set on the first call, since a
-- library cannot read globals while it loads.
local l_type, l_select, l_pcall, l_unpack_limit
local l_call, l_floor -- redis.call, math.floor: set with them by promote_impl

-- The values of a call as a count and a table (nils kept in place).
local function collect(...)
  return l_select('#', ...), {...}
end

-- Decode a delayed-set member: a msgpack sequence of strings id, field,
-- value, ... with a non-empty h. Returns a table whose items 3..n are id,
-- field, value, ..., and n; or nil and what is wrong. Never raises: cmsgpack
-- runs under pcall and never returns more values than Lua's stack takes.
local function decode_member(packed)
  local most = 2 + 2 * FIELDS_MAX
  local n, r = collect(l_pcall(l_unpack_limit, packed, most, 0))
  if not r[1] then
    return nil, 'not a msgpack sequence of strings (' .. string.gsub(tostring(r[2]), '^.-: ', '') .. ')'
  end
  if n - 2 >= most and r[2] ~= -1 then return nil, 'more than ' .. FIELDS_MAX .. ' fields' end
  if n == 2 then return nil, 'empty' end
  for i = 3, n do
    if l_type(r[i]) ~= 'string' then
      return nil, (i == 3 and 'the id' or 'item ' .. (i - 2)) .. ' is a ' .. l_type(r[i]) .. ', not a string'
    end
  end
  if r[3] == '' or #r[3] > ID_MAX then return nil, 'the id is not 1..' .. ID_MAX .. ' bytes' end
  if n % 2 == 0 then return nil, 'an odd number of field/value items' end
  for i = 4, n, 2 do
    if r[i] == 'h' then
      if r[i + 1] == '' then return nil, 'an empty handler (field h)' end
      return r, n
    end
  end
  return nil, 'no handler (field h)'
end

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
  if f == 'h' then return v end
  return handler_of(...)
end

-- The fast check of a job's fields for the usual envelope of at most 4
-- pairs, without the varargs recursion of strings / handler_of (each level
-- copies the rest): the value of the first field h if the n values (n even,
-- 2..8) are all strings and one of the fields is h, else nil.
local function fields4(n, f1, v1, f2, v2, f3, v3, f4, v4)
  if l_type(f1) ~= 'string' or l_type(v1) ~= 'string' then return nil end
  local h = f1 == 'h' and v1 or nil
  if n == 2 then return h end
  if l_type(f2) ~= 'string' or l_type(v2) ~= 'string' then return nil end
  if not h and f2 == 'h' then h = v2 end
  if n == 4 then return h end
  if l_type(f3) ~= 'string' or l_type(v3) ~= 'string' then return nil end
  if not h and f3 == 'h' then h = v3 end
  if n == 6 then return h end
  if l_type(f4) ~= 'string' or l_type(v4) ~= 'string' then return nil end
  if not h and f4 == 'h' then h = v4 end
  return h
end

-- XADD job `id` with its n (2..8) field values f1, v1, ... and, when es is
-- given, e = es and d = ds after them (the envelope of a wheel item whose
-- e and d were left out): no table, no unpack. Returns the entry id.
local function xadd_job(ready, id, es, ds, n, f1, v1, f2, v2, f3, v3, f4, v4)
  if es then
    if n == 4 then return l_call('XADD', ready, '*', 'id', id, f1, v1, f2, v2, 'e', es, 'd', ds) end
    if n == 2 then return l_call('XADD', ready, '*', 'id', id, f1, v1, 'e', es, 'd', ds) end
    if n == 6 then return l_call('XADD', ready, '*', 'id', id, f1, v1, f2, v2, f3, v3, 'e', es, 'd', ds) end
    return l_call('XADD', ready, '*', 'id', id, f1, v1, f2, v2, f3, v3, f4, v4, 'e', es, 'd', ds)
  end
  if n == 4 then return l_call('XADD', ready, '*', 'id', id, f1, v1, f2, v2) end
  if n == 2 then return l_call('XADD', ready, '*', 'id', id, f1, v1) end
  if n == 6 then return l_call('XADD', ready, '*', 'id', id, f1, v1, f2, v2, f3, v3) end
  return l_call('XADD', ready, '*', 'id', id, f1, v1, f2, v2, f3, v3, f4, v4)
end

-- Promote one member: XADD it if it is an envelope, else add {member,
-- what is wrong} to `bad`. ok, off, id, ... are pcall(unpack_limit)'s values.
-- `idx` collects id, entry pairs for the job index (one HSET per call).
local function promote_one(ready, idx, bad, packed, ok, off, id, ...)
  local n = l_select('#', ...)
  if ok and off == -1 and n <= 32 and n > 0 and n % 2 == 0 and l_type(id) == 'string' and
     id ~= '' and #id <= ID_MAX then
    local h
    if n <= 8 then h = fields4(n, ...) elseif strings(n, ...) then h = handler_of(...) end
    if h and h ~= '' then
      local k = #idx
      idx[k + 1], idx[k + 2] = id, l_call('XADD', ready, '*', 'id', id, ...)
      return
    end
  end
  local items, m = decode_member(packed) -- the slow path says what is wrong
  if items then
    local k = #idx
    idx[k + 1], idx[k + 2] = items[3], redis.call('XADD', ready, '*', 'id', unpack(items, 3, m))
  else
    bad[#bad + 1] = {packed, m}
  end
end

-- Decode a bucket item (see The time wheel) of the bucket starting at
-- `start`. Returns id, due (us), flat (fields without the id); or
-- false for a tombstone; or nil and what is wrong. Never raises.
local function wheel_decode(item, start)
  local most = 5 + 2 * FIELDS_MAX
  local n, r = collect(l_pcall(l_unpack_limit, item, most, 0))
  if not r[1] then
    return nil, 'not a msgpack sequence (' .. string.gsub(tostring(r[2]), '^.-: ', '') .. ')'
  end
  if n - 2 >= most and r[2] ~= -1 then return nil, 'more than ' .. FIELDS_MAX .. ' fields' end
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
  local flat, h = {}, nil
  for i = 7, n do
    if l_type(r[i]) ~= 'string' then return nil, 'item ' .. (i - 2) .. ' is a ' .. l_type(r[i]) .. ', not a string' end
    flat[#flat + 1] = r[i]
  end
  if #flat % 2 ~= 0 then return nil, 'an odd number of field/value items' end
  for i = 1, #flat, 2 do
    if flat[i] == 'h' then h = flat[i + 1]; break end
  end
  if not h or h == '' then return nil, 'no handler (field h)' end
  local us = start * 1000 + off
  local ms = math.floor(us / 1000)
  if E >= 0 then
    flat[#flat + 1] = 'e'
    flat[#flat + 1] = ms_int(ms - E)
    flat[#flat + 1] = 'd'
    flat[#flat + 1] = ms_int(math.ceil(us / 1000))
  end
  if sid == '' then sid = 'd' .. ms_int(ms) .. '-' .. ms_int(seq) end
  return sid, us, flat
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
        flat[nf + 1], flat[nf + 2], flat[nf + 3], flat[nf + 4] = 'e', ms_memo(ms - E), 'd', ms_memo(math.ceil(us / 1000))
      end
      if sid == '' then sid = 'd' .. ms_memo(ms) .. '-' .. ms_int(seq) end
      return sid, us, flat
    end
  end
  return wheel_decode(item, start)
end

-- The fast path of a bucket wholly due (issue 10): XADD one item straight
-- from cmsgpack's values, for the usual item of at most 4 string pairs and
-- a handler: no table, no unpack, e / d / id strings memoised per ms.
-- Returns the job id and its entry id, or nil (nothing written) for any
-- other item: the caller takes wheel_decode_fast's path, which also says
-- what is wrong. ok, off, ... are pcall(unpack_limit)'s values.
local function wheel_xadd_fast(ready, start, ok, off, seq, o, sid, E, ...)
  local nf = l_select('#', ...)
  if not (ok and off == -1 and nf > 0 and nf <= 8 and nf % 2 == 0 and l_type(seq) == 'number' and
          l_type(o) == 'number' and l_type(sid) == 'string' and l_type(E) == 'number' and o >= 0 and
          o < WHEEL_MS * 1000 and o == l_floor(o) and seq == l_floor(seq) and #sid <= ID_MAX) then
    return nil
  end
  local h = fields4(nf, ...)
  if not h or h == '' then return nil end
  local us = start * 1000 + o
  local ms = l_floor(us / 1000)
  local es, ds
  if E >= 0 then es, ds = ms_memo(ms - E), ms_memo(math.ceil(us / 1000)) end
  if sid == '' then sid = 'd' .. ms_memo(ms) .. '-' .. ms_int(seq) end
  return sid, xadd_job(ready, sid, es, ds, nf, ...)
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
local function wheel_due_buckets(fn, q, now)
  local wheel, counter = wheel_key(q), wheel_count_key(q)
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
local function wheel_repair(q, fix, dead, dead_max)
  local wheel, counter = wheel_key(q), wheel_count_key(q)
  for _, m in ipairs(fix.members) do
    xadd_dead(dead, dead_max, {'err', 'time wheel index ' .. wheel .. ' member: ' .. m[2], 'why', 'invalid', 'raw', m[1]})
    redis.call('ZREM', wheel, m[1])
  end
  for _, m in ipairs(fix.rescore) do
    xadd_dead(dead, dead_max, {'err', 'time wheel index ' .. wheel .. ' member ' .. m[1] .. ' had the score ' .. m[2] ..
                               ', not its start: set to its start', 'why', 'invalid', 'raw', m[1]})
    redis.call('ZADD', wheel, 'XX', m[1], m[1])
  end
  if fix.counter then
    local n = 0
    for _, b in ipairs(redis.call('ZRANGE', wheel, 0, -1)) do
      if string.find(b, '^%d+$') and #b <= 15 and redis.call('TYPE', bucket_key(q, tonumber(b)))['ok'] == 'list' then
        n = n + redis.call('LLEN', bucket_key(q, tonumber(b)))
      end
    end
    xadd_dead(dead, dead_max, {'err', 'time wheel counter ' .. counter .. ' was a ' .. fix.counter ..
                               ' that is not a count: set to ' .. n, 'why', 'invalid', 'raw', ''})
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
local function wheel_promote(q, starts, room, now, ready, delayed, idx, bad, direct)
  local taken, moved, live, cascaded = 0, 0, 0, 0
  for _, b in ipairs(starts) do
    if taken >= room then break end
    local start = tonumber(b)
    if (start + WHEEL_MS <= now) == direct then
      local bk = bucket_key(q, start)
      local items = redis.call('LPOP', bk, room - taken) or {}
      taken = taken + #items
      local k = #idx
      for _, item in ipairs(items) do
        local id, us, flat
        if direct then
          id, us = wheel_xadd_fast(ready, start, l_pcall(l_unpack_limit, item, 5 + 2 * FIELDS_MAX, 0))
          if id then
            live = live + 1
            idx[k + 1], idx[k + 2], k = id, us, k + 2
          end
        end
        if not id then
          id, us, flat = wheel_decode_fast(item, start, l_pcall(l_unpack_limit, item, 5 + 2 * FIELDS_MAX, 0))
        end
        if flat then
          live = live + 1
          if direct or us / 1000 <= now then
            idx[k + 1], idx[k + 2], k = id, redis.call('XADD', ready, '*', 'id', id, unpack(flat)), k + 2
          else
            redis.call('ZADD', delayed, ms_str(us / 1000), cmsgpack.pack(id, unpack(flat)))
            cascaded = cascaded + 1
          end
        elseif id == nil then -- not written by wheel_add, so not counted
          bad[#bad + 1] = {item, 'in bucket ' .. bk .. ': ' .. us}
          moved = moved + 1
        end
      end
      if redis.call('EXISTS', bk) == 0 then redis.call('ZREM', wheel_key(q), b) end
    end
  end
  if live > 0 then redis.call('DECRBY', wheel_count_key(q), live) end
  return taken, moved + live, cascaded
end

--[[
jr_promote
  KEYS: ready delayed wake [dead]   (dead = jr:{Q}:dead; implied if left out)
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
  local q, err = queue_of(fn, keys, {'ready', 'delayed', 'wake'}, true)
  if not q then return err end
  local dead = 'jr:{' .. q .. '}:dead'
  if #keys > 4 or (keys[4] and keys[4] ~= dead) then
    return refuse(fn, 'key 4 must be ' .. shown(dead) .. ' or left out')
  end
  local ready, delayed, wake = keys[1], keys[2], keys[3]
  local limit, dead_max = int_arg(args[1]), args[2] and count_arg(args[2])
  if not limit or limit < 1 or limit > PROMOTE_MAX or #args > 2 or (args[2] and not dead_max) then
    return refuse(fn, 'arguments: LIMIT (1..' .. PROMOTE_MAX .. ') [DEAD_MAX], got ' .. shown(table.concat(args, ' ')))
  end
  local ids = aux(index_key(q), 'hash') -- garbage there costs the lookups only (revision 15)
  err = check_types(fn, {{ready, 'stream'}, {delayed, 'zset'}, {wake, 'stream'}, {dead, 'stream'}})
  if err then return err end
  local now = now_ms()
  local starts, later, fix = wheel_due_buckets(fn, q, now)
  if not starts then return later end
  local envs = redis.call('ZRANGE', delayed, '-inf', ms_str(now), 'BYSCORE', 'LIMIT', 0, limit)
  if #starts > 0 or #envs > 0 or fix then
    err = check_room(fn, ready) or check_room(fn, dead)
    if err then return err end
    ensure_group(ready)
  end
  if fix then wheel_repair(q, fix, dead, dead_max) end
  if not l_type then
    l_type, l_select, l_pcall, l_unpack_limit = type, select, pcall, cmsgpack.unpack_limit
  end
  if not l_call then l_call, l_floor = redis.call, math.floor end
  fmt_memo = {}
  local bad, idx, moved, cascaded = {}, {}, #envs, 0
  -- 1. the due members, removed by rank (the lowest-scored ones) before a
  -- cascade adds any
  for _, packed in ipairs(envs) do
    promote_one(ready, idx, bad, packed, l_pcall(l_unpack_limit, packed, 2 + 2 * FIELDS_MAX, 0))
  end
  if #envs > 0 then redis.call('ZREMRANGEBYRANK', delayed, 0, #envs - 1) end
  local taken = #envs
  if #starts > 0 then
    -- 2. the buckets wholly due; 3. the cascades, with the room left
    local t, m, c = wheel_promote(q, starts, limit - taken, now, ready, delayed, idx, bad, true)
    taken, moved = taken + t, moved + m
    if not due_only and taken < limit then
      t, m, c = wheel_promote(q, starts, limit - taken, now, ready, delayed, idx, bad, false)
      taken, moved, cascaded = taken + t, moved + m, c
    end
  end
  -- every promoted job has a new entry: into the job index, 1,000 per HSET
  for i = 1, ids and #idx or 0, 2000 do
    redis.call('HSET', ids, unpack(idx, i, math.min(i + 1999, #idx)))
  end
  for _, b in ipairs(bad) do
    xadd_dead(dead, dead_max, {'err', 'delayed member: ' .. b[2], 'why', 'invalid', 'raw', b[1]})
  end
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
local function promote(keys, args) return promote_impl('jr_promote', keys, args, false) end
local function promote_due(keys, args) return promote_impl('jr_promote_due', keys, args, true) end

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

-- The highest of entries (ids as check_ids let them through), as numbers;
-- nil if one is too long. Ids of one length with the '-' at one place
-- (Redis's own, from one period) compare as strings like as numbers: one
-- string comparison per entry, the numbers parsed once.
local function highest(entries)
  local top = entries[1]
  local len, d = #top, string.find(top, '-', 1, true)
  local byte = string.byte
  for i = 2, #entries do
    local e = entries[i]
    if #e ~= len or byte(e, d) ~= 45 then -- another shape: numbers
      local hm, hs = id_parts(top)
      if not hm then return nil end
      for j = i, #entries do
        local m, sq = id_parts(entries[j])
        if not m then return nil end
        if m > hm or (m == hm and sq > hs) then hm, hs = m, sq end
      end
      return hm, hs
    end
    if e > top then top = e end
  end
  return id_parts(top)
end

local function trim_point(ready, entries)
  local hm, hs = highest(entries)
  if not hm then return nil end
  local p = redis.call('XPENDING', ready, GROUP, '-', '+', 1)
  local pm, ps
  if #p > 0 then
    pm, ps = id_parts(p[1][1])
    if not pm then return nil end
  end
  if not pm or pm > hm or (pm == hm and ps > hs) then
    return string.format('%d-%d', hm, hs + 1), nil
  end
  local rest = {}
  for i = 1, #entries do
    local m, sq = id_parts(entries[i])
    if m > pm or (m == pm and sq > ps) then rest[#rest + 1] = entries[i] end
  end
  if #rest == #entries then return nil end -- none below P: no trim to make
  return p[1][1], rest
end

--[[
jr_ack
  KEYS: ready                ARGV: stream entry ids
  KEYS: ready ids            ARGV: entry jobid [entry jobid ...]
  KEYS: ready [ids] cancelled  (either form, jr:{Q}:cancelled last)
  Acknowledges the entries and deletes them from the stream, atomically,
  and forgets their cancel flags (jr:{Q}:cancelled). With the ids key, each
  entry comes with its job id ("" when the job id is the entry id): the job
  index entry that points at that entry is removed too. The 1-key form
  leaves index entries behind, which readers treat as stale. The entries
  leave by one XTRIM, but for those past the oldest pending entry (see trim_point).
  Returns how many were acknowledged; with the cancelled key last,
  {how many, {the entries among them that were flagged cancelled}}: the
  check and the acknowledgement are one step, so a job cancelled before
  its acknowledgement arrives is reported as cancelled (revision 15).
  Runs while Redis is out of memory.
]]
local function ack(keys, args)
  local fn = 'jr_ack'
  local q, err = queue_of(fn, keys, {'ready'}, true)
  if not q then return err end
  local ready, ids, cancelled = keys[1], aux(index_key(q), 'hash'), aux(cancelled_key(q), 'hash')
  local entries, jobids = args, nil
  local report = #keys >= 2 and keys[#keys] == cancelled_key(q)
  if report then keys = {unpack(keys, 1, #keys - 1)} end
  if #keys == 2 then
    if keys[2] ~= index_key(q) then return refuse(fn, 'key 2 must be ' .. shown(index_key(q)) .. ' or left out') end
    if #args % 2 ~= 0 then return refuse(fn, 'with the ids key, arguments come in pairs: ENTRY JOBID ...') end
    entries, jobids = {}, {}
    for i = 1, #args, 2 do
      entries[#entries + 1] = args[i]
      if #args[i + 1] > ID_MAX then
        return refuse(fn, 'argument ' .. (i + 1) .. ': job id longer than ' .. ID_MAX .. ' bytes')
      end
      jobids[#jobids + 1] = args[i + 1]
    end
  elseif #keys > 2 then
    return refuse(fn, 'takes the keys jr:{Q}:ready [jr:{Q}:ids] [jr:{Q}:cancelled], got ' .. #keys .. ' keys')
  end
  err = check_ids(fn, entries, 1) or check_types(fn, {{ready, 'stream'}})
  if err then return err end
  if #entries == 0 or not grouped(ready) then return report and {0, {}} or 0 end
  local n = 0
  for i = 1, #entries, 1000 do
    n = n + redis.call('XACK', ready, GROUP, unpack(entries, i, math.min(i + 999, #entries)))
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
  local flagged = {}
  for i = 1, flags and #entries or 0, 1000 do
    local part = {unpack(entries, i, math.min(i + 999, #entries))}
    if report then
      local v = redis.call('HMGET', cancelled, unpack(part))
      for j = 1, #part do
        if v[j] then flagged[#flagged + 1] = part[j] end
      end
    end
    redis.call('HDEL', cancelled, unpack(part))
  end
  for i, id in ipairs(jobids or {}) do
    if id ~= '' then index_forget(ids, id, entries[i]) end
  end
  if n > 0 then count(q, 'processed', n) end
  if report then return {n, flagged} end
  return n
end

--[[
jr_ack_follow: acknowledge an entry together with the follow-up jobs its
handler enqueued (plugin api->enqueue), atomically.
  KEYS: ready (jr:{Q}:ready, the job's queue), then for each of NQ target
        queues T: jr:{T}:ready jr:{T}:delayed jr:{T}:wake jr:{T}:seq, then
        the uniq key jr:{T}:uniq:ID of each follow-up with an id, in order
  ARGV: entry nq uniq_ms, then per follow-up: qi when id npairs field value
        ... (qi: 1..nq, its target queue; the rest as in jr_enqueue_many)
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
local function ack_follow(keys, args)
  local fn = 'jr_ack_follow'
  local q, err = queue_of(fn, {keys[1] or ''}, {'ready'})
  if not q then return err end
  local entry, nq = args[1], int_arg(args[2])
  if entry and stream_id_ok(entry) and not string.find(entry, '-', 1, true) then entry = entry .. '-0' end -- see check_ids
  if #args < 3 or not stream_id_ok(entry) or not nq or nq < 1 or nq > 1000 or #keys < 1 + 4 * nq then
    return refuse(fn, 'arguments: ENTRY NQ (1..1000) UNIQ_MS, then per follow-up QI WHEN ID NPAIRS field value ...; ' ..
                  'keys: jr:{Q}:ready, then 4 keys per target queue, then the uniq keys; got ' .. #keys ..
                  ' keys and ' .. shown(table.concat(args, ' ', 1, math.min(#args, 3))))
  end
  local window, werr = window_arg(fn, args[3])
  if not window then return werr end
  local targets, seen = {}, {}
  for t = 1, nq do
    local b = 1 + 4 * (t - 1)
    local tq, terr = queue_of(fn .. ': target queue ' .. t, {keys[b + 1], keys[b + 2], keys[b + 3], keys[b + 4]},
                              {'ready', 'delayed', 'wake', 'seq'})
    if not tq then return terr end
    if seen[tq] then return refuse(fn, 'target queue ' .. shown(tq) .. ' is given twice') end
    seen[tq] = true
    targets[t] = {name = tq, ready = keys[b + 1], delayed = keys[b + 2], wake = keys[b + 3], seq = keys[b + 4],
                  now = false, later = false, gen = 0, far = {}}
  end
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
      uniq = 'jr:{' .. tg.name .. '}:uniq:' .. id
      if keys[1 + 4 * nq + nuniq] ~= uniq then
        return refuse(fn, 'key ' .. (1 + 4 * nq + nuniq) .. ' must be ' .. shown(uniq) .. ', the uniq key of follow-up ' .. nj)
      end
    end
    if due <= now then tg.now = true else tg.later = true end
    if due > now and id == '' then tg.gen = tg.gen + 1 end
    if to_wheel(due, now) then tg.far[#tg.far + 1] = due end
    jobs[nj] = {tg, id, due, first, last, uniq}
    i = last + 1
  end
  if #jobs == 0 then return refuse(fn, 'no follow-up given (use jr_ack)') end
  if #keys ~= 1 + 4 * nq + nuniq then
    return refuse(fn, 'takes 1 + 4 x NQ keys plus one uniq key per follow-up with an id: ' ..
                  (1 + 4 * nq + nuniq) .. ', got ' .. #keys)
  end
  err = check_types(fn, {{keys[1], 'stream'}})
  for _, tg in ipairs(targets) do
    err = err or queue_types(fn, {tg.ready, tg.delayed, tg.wake, tg.seq}, tg.name) or check_seq(fn, tg.seq, tg.gen) or
          (tg.now and check_room(fn, tg.ready)) or (tg.later and check_room(fn, tg.wake)) or
          (#tg.far > 0 and wheel_check(fn, tg.name, tg.far))
  end
  if err then return err end
  if not grouped(keys[1]) then return 0 end
  local e = redis.call('XRANGE', keys[1], entry, entry)
  if redis.call('XACK', keys[1], GROUP, entry) == 0 then return 0 end
  redis.call('XDEL', keys[1], entry)
  local was_cancelled = flag_take(aux(cancelled_key(q), 'hash'), entry)
  local flat = e[1] and e[1][2] or {}
  for f = 1, #flat - 1, 2 do -- its job id (absent: the entry id, never in the index)
    if flat[f] == 'id' then
      index_forget(aux(index_key(q), 'hash'), flat[f + 1], entry)
      break
    end
  end
  count(q, 'processed', 1)
  if was_cancelled then return 2 end
  for _, tg in ipairs(targets) do
    if tg.now then ensure_group(tg.ready) end
  end
  for _, j in ipairs(jobs) do
    local tg = j[1]
    put({q = tg.name, ready = tg.ready, delayed = tg.delayed, wake = tg.wake, seq = tg.seq, uniq = j[6],
         ids = index_key(tg.name)},
        j[2], j[3], window, args, j[4], j[5], now)
  end
  return 1
end

--[[
jr_register
  KEYS: jr:{queues} jr:{queues}:wake
  ARGV: queue names (each 1-128 characters of A-Z a-z 0-9 _ . : -)
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

local function register(keys, args)
  local fn = 'jr_register'
  local err = registry_keys(fn, keys)
  if err then return err end
  if #args == 0 then return refuse(fn, 'name at least one queue') end
  for i = 1, #args do
    if not queue_ok(args[i]) then
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

local function queues(keys)
  local err = registry_keys('jr_queues', keys)
  if err then return err end
  local r = {last_wake(keys[2])}
  for _, q in ipairs(redis.call('SMEMBERS', keys[1])) do r[#r + 1] = q end
  return r
end

-- Field names in canonical order (docs/redis-contract.md).
local ORDER = {'h', 'p', 'a', 'm', 't', 'b', 'e', 'd', 'err'}
local KNOWN = {id = true, h = true, p = true, a = true, m = true, t = true, b = true, e = true,
               d = true, err = true}

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

-- Put a stream entry (id `entry`, fields `flat`) into the dead stream with
-- err and why: id, its envelope fields in canonical order (err replaced),
-- why, then every other field. An entry too large to copy field by field
-- goes in whole: id, h, err (saying so), why, and raw = all its fields as one
-- msgpack array. Cannot raise.
local function bury(dead, dead_max, entry, flat, err, why)
  local m, rest = to_map(flat)
  local id = m.id or entry
  if too_large(flat) then
    local f = {'id', id}
    if m.h then f[3], f[4] = 'h', m.h end
    f[#f + 1] = 'err'
    f[#f + 1] = err .. ' (the entry has ' .. (#flat / 2) .. ' fields, more than ' .. FIELDS_MAX ..
                ': all of them are in raw, a msgpack array field, value, ...)'
    f[#f + 1] = 'why'
    f[#f + 1] = why
    f[#f + 1] = 'raw'
    f[#f + 1] = cmsgpack.pack(flat)
    xadd_dead(dead, dead_max, f)
    return
  end
  m.id = nil
  if m.e == nil then m.e = id_ms(entry) end
  m.err = err
  local f = {'id', id}
  for _, x in ipairs(to_flat(m, rest, {'why', why})) do f[#f + 1] = x end
  xadd_dead(dead, dead_max, f)
end

--[[
jr_fail: an attempt failed (or the entry cannot be run): retry or bury it.
  KEYS: ready delayed wake dead
  ARGV: entry consumer action delay_ms error why dead_max
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
local function fail(keys, args)
  local fn = 'jr_fail'
  local q, err = queue_of(fn, keys, {'ready', 'delayed', 'wake', 'dead'})
  if not q then return err end
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
  local ids, cancelled = aux(index_key(q), 'hash'), aux(cancelled_key(q), 'hash')
  err = check_types(fn, {{ready, 'stream'}, {delayed, 'zset'}, {wake, 'stream'}, {dead, 'stream'}}) or
        check_room(fn, dead) or (action ~= 'dead' and check_room(fn, (action == 'retry' and delay == 0) and ready or wake))
  -- a retry due NEAR_MS or later waits in the time wheel (the due time
  -- checked here is a lower bound: the buckets it may reach are checked)
  local now = now_ms()
  if not err and action ~= 'dead' and to_wheel(tonumber(ms_str(now + delay)), now) then
    err = wheel_check(fn, q, {tonumber(ms_str(now + delay))})
  end
  if err then return err end
  if not grouped(ready) or owner(ready, entry) ~= consumer then return 0 end
  local e = redis.call('XRANGE', ready, entry, entry)
  local was_cancelled = flag_take(cancelled, entry)
  if e[1] then
    local flat = e[1][2]
    local m, rest = to_map(flat)
    local id = m.id or entry
    if action ~= 'defer' and not was_cancelled then count(q, 'failed', 1) end
    if was_cancelled then
      index_forget(ids, id, entry)
    elseif action == 'dead' or too_large(flat) then
      index_forget(ids, id, entry)
      bury(dead, dead_max, entry, flat, errtext, action == 'dead' and why or 'invalid')
    else
      m.id = nil
      if m.e == nil then m.e = id_ms(entry) end
      m.err = errtext
      if action == 'retry' then
        m.a = tostring((tonumber(m.a) or 1) + 1)
      elseif m.d == nil then
        m.d = m.e -- defer: the same attempt, and d keeps the time it first fell due
      end
      if delay == 0 and action == 'retry' then
        m.d = nil
        index_set(ids, id, redis.call('XADD', ready, '*', 'id', id, unpack(to_flat(m, rest))))
      else
        local due = tonumber(ms_str(now + delay))
        if action == 'retry' then m.d = tostring(math.ceil(due)) end
        if to_wheel(due, now) then
          wheel_add({q = q, wake = wake, ids = ids}, id, due, to_flat(m, rest))
        else
          schedule(delayed, wake, due, cmsgpack.pack(id, unpack(to_flat(m, rest))))
          index_set(ids, id, '@' .. ms_str(due))
        end
      end
    end
  end
  redis.call('XACK', ready, GROUP, entry)
  redis.call('XDEL', ready, entry)
  if not e[1] then return 0 end
  return was_cancelled and 2 or 1
end

--[[
jr_reclaim: take over entries whose worker stopped heartbeating.
  KEYS: ready dead
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
local function reclaim(keys, args)
  local fn = 'jr_reclaim'
  local q, err = queue_of(fn, keys, {'ready', 'dead'})
  if not q then return err end
  local ready, dead = keys[1], keys[2]
  local consumer, cursor = args[1], args[3]
  local min_idle, count = count_arg(args[2]), int_arg(args[4])
  local max_deliveries, dead_max = int_arg(args[5]), count_arg(args[6])
  if #args ~= 6 or consumer == '' or not min_idle or not stream_id_ok(cursor) or not count or
     count < 1 or count > PROMOTE_MAX or not max_deliveries or not dead_max then
    return refuse(fn, 'arguments: CONSUMER MIN_IDLE_MS CURSOR COUNT (1..' .. PROMOTE_MAX ..
                  ') MAX_DELIVERIES DEAD_MAX, got ' .. shown(table.concat(args, ' ')))
  end
  local ids, cancelled = aux(index_key(q), 'hash'), aux(cancelled_key(q), 'hash')
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
        index_forget(ids, m.id or en[1], en[1])
        if not was_cancelled then
          bury(dead, dead_max, en[1], en[2],
               'delivered ' .. delivered .. ' times: its worker died while running it each time', 'poison')
        end
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
  KEYS: ready [cancelled]
  ARGV: consumer entry ...
  Resets the idle time of each entry this consumer still holds (XCLAIM
  JUSTID: no delivery counted). Returns the entries it no longer holds;
  with the 2nd key jr:{Q}:cancelled, {lost entries, entries of those held
  that were cancelled}, and a third element when the queue's job index,
  cancel flags or stats hold another type (see aux): a text naming them.
  Runs while Redis is out of memory.
]]
local function heartbeat(keys, args)
  local fn = 'jr_heartbeat'
  local q, err = queue_of(fn, keys, {'ready'}, true)
  if not q then return err end
  local ready, consumer = keys[1], args[1]
  if #keys > 2 or (keys[2] and keys[2] ~= cancelled_key(q)) then
    return refuse(fn, 'key 2 must be ' .. shown(cancelled_key(q)) .. ' or left out')
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
    local note = aux_note(q)
    if note ~= '' then return {lost, cancel, note} end
    return {lost, cancel}
  end
  return lost
end

--[[
jr_handback: give back entries fetched but never started (shutdown).
  KEYS: ready
  ARGV: consumer entry ...
  Each entry this consumer holds is added again as a new entry (so a
  blocked worker gets it at once) and the old one acknowledged and deleted.
  An entry too large to copy (more than FIELDS_MAX fields) stays pending
  as it is, for a reclaim to take over. A cancelled entry (jr:{Q}:cancelled)
  is acknowledged and deleted instead: it never started. Keeps the job
  index true. Returns how many were handed back.
  Runs while Redis is out of memory.
]]
local function handback(keys, args)
  local fn = 'jr_handback'
  local q, err = queue_of(fn, keys, {'ready'})
  if not q then return err end
  local ready, consumer, n = keys[1], args[1], 0
  if not consumer or consumer == '' then return refuse(fn, 'arguments: CONSUMER ENTRY ...') end
  local ids, cancelled = aux(index_key(q), 'hash'), aux(cancelled_key(q), 'hash')
  err = check_ids(fn, args, 2) or check_types(fn, {{ready, 'stream'}}) or check_room(fn, ready)
  if err then return err end
  if not grouped(ready) then return 0 end
  for i = 2, #args do
    if owner(ready, args[i]) == consumer then
      local e = redis.call('XRANGE', ready, args[i], args[i])
      if not (e[1] and too_large(e[1][2])) then
        local was_cancelled = flag_take(cancelled, args[i])
        if e[1] then
          local m, rest = to_map(e[1][2])
          local id = m.id or args[i]
          if was_cancelled then
            index_forget(ids, id, args[i])
          else
            m.id = nil
            if m.e == nil then m.e = id_ms(args[i]) end
            index_set(ids, id, redis.call('XADD', ready, '*', 'id', id, unpack(to_flat(m, rest))))
            n = n + 1
          end
        end
        redis.call('XACK', ready, GROUP, args[i])
        redis.call('XDEL', ready, args[i])
      end
    end
  end
  return n
end

--[[
jr_dead_retry: run dead jobs again, attempts reset.
  KEYS: dead ready
  ARGV: dead entry ids
  Re-enqueues each dead entry that can run; one without a handler, or
  buried whole (a raw field: garbage, or too large to copy), stays in the
  dead stream. Returns how many were re-enqueued.
]]
local function dead_retry(keys, args)
  local fn = 'jr_dead_retry'
  local q, err = queue_of(fn, keys, {'dead', 'ready'})
  if not q then return err end
  local dead, ready, n = keys[1], keys[2], 0
  local ids = index_key(q)
  err = check_ids(fn, args, 1) or check_types(fn, {{dead, 'stream'}, {ready, 'stream'}, {ids, 'hash'}}) or
        check_room(fn, ready)
  if err then return err end
  for _, entry in ipairs(args) do
    local e = redis.call('XRANGE', dead, entry, entry)
    if e[1] and not too_large(e[1][2], 4) then
      local m, rest = to_map(e[1][2])
      local runnable = m.h and m.h ~= ''
      for i = 1, #rest, 2 do
        if rest[i] == 'raw' then runnable = false end
      end
      if runnable then
        -- the first `why` is the one bury added
        for i = 1, #rest, 2 do
          if rest[i] == 'why' then table.remove(rest, i); table.remove(rest, i); break end
        end
        local id = m.id or entry
        m.id, m.a, m.err, m.d = nil, nil, nil, nil
        ensure_group(ready)
        index_set(ids, id, redis.call('XADD', ready, '*', 'id', id, unpack(to_flat(m, rest))))
        redis.call('XDEL', dead, entry)
        n = n + 1
      end
    end
  end
  return n
end

-- The contract version of this library (docs/redis-contract.md).
local function version()
  return '1'
end

-- Functions that finish or free work run while Redis is out of memory
-- (maxmemory reached); the ones that add work are refused with Redis's OOM
-- error: that is the producer's backpressure.
local function allow_oom(name, f)
  redis.register_function{function_name = name, callback = f, flags = {'allow-oom'}}
end

--[[
Periodic schedules (one slot, {cron}):
  jr:{cron}       hash: schedule name -> definition (JSON object: handler,
                  queue, payload?, cron | every_ms, timezone, missed, enabled)
  jr:{cron}:last  hash: schedule name -> "<tick Unix ms> <job id>" of the
                  latest tick fired
  jr:{cron}:wake  stream of length 1, poked on every change: schedulers
                  XREAD it to learn of added and removed schedules at once

jr_cron_set
  KEYS: jr:{cron} jr:{cron}:wake
  ARGV: name definition
  Adds or replaces a schedule; pokes the wake stream when it changed.
  Returns 1 if added or changed, 0 if it was already so.
jr_cron_del
  KEYS: jr:{cron} jr:{cron}:last jr:{cron}:wake
  ARGV: name
  Returns 1 if removed (wake poked), 0 if there was no such schedule.
jr_cron_fired
  KEYS: jr:{cron} jr:{cron}:last
  ARGV: name tick_ms job_id
  Records the tick as the latest fired, unless a later one is recorded or
  the schedule is gone. Returns 1 if recorded, 0 if not.
jr_cron_list (no writes)
  KEYS: jr:{cron} jr:{cron}:last jr:{cron}:wake
  Returns {last wake id, name, definition, last fired or "", ...}.
]]
local CRON_KEYS = {'jr:{cron}', 'jr:{cron}:last', 'jr:{cron}:wake'}

local function cron_keys(fn, keys, want)
  local ok = #keys == #want
  for i = 1, #want do ok = ok and keys[i] == CRON_KEYS[want[i]] end
  if not ok then
    local names = {}
    for i = 1, #want do names[i] = CRON_KEYS[want[i]] end
    return refuse(fn, 'takes the keys ' .. table.concat(names, ' '))
  end
  return check_types(fn, {{CRON_KEYS[1], 'hash'}, {CRON_KEYS[2], 'hash'}, {CRON_KEYS[3], 'stream'}})
end

local function cron_set(keys, args)
  local fn = 'jr_cron_set'
  local err = cron_keys(fn, keys, {1, 3})
  if err then return err end
  if #args ~= 2 then return refuse(fn, 'arguments: NAME DEFINITION') end
  local name, def = args[1], args[2]
  if not cron_name_ok(name) then
    return refuse(fn, 'schedule name ' .. shown(name) .. ' is not valid (' .. CRON_NAME_RULE .. ')')
  end
  local ok, d = pcall(cjson.decode, def)
  if not ok or type(d) ~= 'table' then return refuse(fn, 'the definition is not a JSON object') end
  if type(d.handler) ~= 'string' or d.handler == '' then return refuse(fn, 'definition: handler must be a non-empty string') end
  local hwhy = handler_why(d.handler)
  if hwhy then return refuse(fn, 'definition: handler name ' .. shown(d.handler) .. ' ' .. hwhy) end
  if not queue_ok(d.queue) then return refuse(fn, 'definition: queue ' .. shown(d.queue) .. ' is not valid (' .. QUEUE_RULE .. ')') end
  if type(d.timezone) ~= 'string' then return refuse(fn, 'definition: timezone must be a string') end
  if (type(d.cron) == 'string') == (type(d.every_ms) == 'number') then
    return refuse(fn, 'definition: give exactly one of cron (a string) and every_ms (a number)')
  end
  if d.every_ms ~= nil and (type(d.every_ms) ~= 'number' or d.every_ms < 1000) then
    return refuse(fn, 'definition: every_ms must be a number of at least 1000')
  end
  err = check_room(fn, keys[2])
  if err then return err end
  if redis.call('HGET', keys[1], name) == def then return 0 end
  redis.call('HSET', keys[1], name, def)
  poke(keys[2])
  return 1
end

local function cron_del(keys, args)
  local fn = 'jr_cron_del'
  local err = cron_keys(fn, keys, {1, 2, 3})
  if err then return err end
  if #args ~= 1 then return refuse(fn, 'arguments: NAME') end
  err = check_room(fn, keys[3])
  if err then return err end
  if redis.call('HDEL', keys[1], args[1]) == 0 then return 0 end
  redis.call('HDEL', keys[2], args[1])
  poke(keys[3])
  return 1
end

local function cron_fired(keys, args)
  local fn = 'jr_cron_fired'
  local err = cron_keys(fn, keys, {1, 2})
  if err then return err end
  if #args ~= 3 or not int_arg(args[2]) or #args[2] > 15 or args[3] == '' then
    return refuse(fn, 'arguments: NAME TICK_MS JOB_ID')
  end
  if redis.call('HEXISTS', keys[1], args[1]) == 0 then return 0 end
  local cur = redis.call('HGET', keys[2], args[1])
  local t = cur and tonumber(string.match(cur, '^(%d+) '))
  if t and t >= tonumber(args[2]) then return 0 end
  redis.call('HSET', keys[2], args[1], args[2] .. ' ' .. args[3])
  return 1
end

local function cron_list(keys)
  local err = cron_keys('jr_cron_list', keys, {1, 2, 3})
  if err then return err end
  local r = {last_wake(keys[3])}
  local all = redis.call('HGETALL', keys[1])
  for i = 1, #all, 2 do
    r[#r + 1] = all[i]
    r[#r + 1] = all[i + 1]
    r[#r + 1] = redis.call('HGET', keys[2], all[i]) or ''
  end
  return r
end

redis.register_function('jr_cron_set', cron_set)
redis.register_function('jr_cron_del', cron_del)
allow_oom('jr_cron_fired', cron_fired)
redis.register_function{function_name = 'jr_cron_list', callback = cron_list, flags = {'no-writes'}}

redis.register_function('jr_enqueue', enqueue)
redis.register_function('jr_enqueue_many', enqueue_many)
redis.register_function('jr_ready_prepare', ready_prepare)
redis.register_function('jr_promote', promote)
allow_oom('jr_promote_due', promote_due)
allow_oom('jr_ack', ack)
redis.register_function('jr_register', register)
redis.register_function('jr_ack_follow', ack_follow)
allow_oom('jr_fail', fail)
allow_oom('jr_reclaim', reclaim)
allow_oom('jr_heartbeat', heartbeat)
allow_oom('jr_handback', handback)
redis.register_function('jr_dead_retry', dead_retry)
redis.register_function{function_name = 'jr_queues', callback = queues, flags = {'no-writes'}}
redis.register_function{function_name = 'jr_version', callback = version, flags = {'no-writes'}}

--[[
Finding and controlling one job by its id. A lookup never scans a queue:
  1. the index jr:{Q}:ids (explicit ids, retried, promoted, run-now and
     dead-retried jobs): "@<score>" -> ZRANGE BYSCORE score score, or
     "<entry id>" -> XRANGE entry entry; a stale entry counts as not there;
  2. an id "<ms>-<n>" (enqueued now without an id) is its own stream entry;
  3. an id "d<due ms>-<n>" (enqueued for later without an id) is in the
     delayed set between due and due + 1 ms;
  4. only jr_locate and jr_delete then look in the dead stream, which is
     capped (dead.max): bounded, not a queue scan.
The cost is one or two hash/stream/sorted-set reads, plus the members due
in that one millisecond (or at that exact score): independent of how many
jobs wait.
]]
local function init_upvalues()
  if not l_type then
    l_type, l_select, l_pcall, l_unpack_limit = type, select, pcall, cmsgpack.unpack_limit
  end
end

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
        return {state = (tonumber(m.a) or 1) > 1 and 'retrying' or 'delayed', member = packed,
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
  return {state = (tonumber(m.a) or 1) > 1 and 'retrying' or 'delayed', bucket = bk, pos = lo, n = n,
          score = ms_str(us / 1000), flat = flat}
end

-- The ready-stream entry `entry` if it is job `id`, or nil; running (with
-- its consumer, idle ms and delivery count) when the group holds it.
local function in_stream(k, id, entry)
  local e = redis.call('XRANGE', k.ready, entry, entry)[1]
  if not e then return nil end
  local m = to_map(e[2])
  if (m.id or entry) ~= id then return nil end
  local r = {state = 'ready', entry = entry, flat = e[2]}
  if grouped(k.ready) then
    local p = redis.call('XPENDING', k.ready, GROUP, entry, entry, 1)[1]
    if p then r.state, r.consumer, r.idle, r.deliveries = 'running', p[2], p[3], p[4] end
  end
  return r
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
      if m.id == id or (m.id == nil and e[1] == id) then return {state = 'dead', entry = e[1], flat = e[2]} end
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
    r = (#dn <= 15 and in_wheel(k, id, tonumber(dn), bucket_of(tonumber(due) * 1000))) or
        in_delayed(k, id, due, '(' .. string.format('%d', tonumber(due) + 1))
    if r then return r end
  end
  if k.dead then return in_dead(k, id) end
  return nil
end

-- Check the keys (jr:{Q}:<names>, then jr:{Q}:uniq:ID if `uniq`) and the
-- one argument ID of a job function. Returns k (keys by name) and id, or
-- nil and an error reply.
local JOB_KEY_TYPES = {ready = 'stream', delayed = 'zset', ids = 'hash', cancelled = 'hash', dead = 'stream'}
local function job_call(fn, keys, args, names, uniq)
  local q, err = queue_of(fn, keys, names, uniq)
  if not q then return nil, err end
  local id = args[1]
  if #args ~= 1 or id == '' or #id > ID_MAX then
    return nil, refuse(fn, 'argument: ID (1..' .. ID_MAX .. ' bytes), got ' .. #args .. ' arguments')
  end
  local k, spec = {q = q}, {{wheel_key(q), 'zset'}}
  for i, n in ipairs(names) do
    k[n] = keys[i]
    spec[#spec + 1] = {keys[i], JOB_KEY_TYPES[n]}
  end
  -- a job index holding garbage is not used (revision 15): the job is
  -- found by its id's form alone, as a job written before the index
  if k.ids and not aux(k.ids, 'hash') then
    k.ids = nil
    for i = #spec, 1, -1 do
      if spec[i][2] == 'hash' and spec[i][1] == index_key(q) then table.remove(spec, i) end
    end
  end
  if uniq then
    local want = 'jr:{' .. q .. '}:uniq:' .. id
    if #keys ~= #names + 1 or keys[#names + 1] ~= want then
      return nil, refuse(fn, 'key ' .. (#names + 1) .. ' must be ' .. shown(want) .. ' (and no more keys)')
    end
    k.uniq = want
  end
  err = check_types(fn, spec) or check_seq(fn, wheel_count_key(q), 1)
  if err then return nil, err end
  return k, id
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
  redis.call('DECR', wheel_count_key(k.q))
  while is_tombstone(redis.call('LINDEX', r.bucket, 0)) do redis.call('LPOP', r.bucket) end
  while is_tombstone(redis.call('LINDEX', r.bucket, -1)) do redis.call('RPOP', r.bucket) end
  if redis.call('EXISTS', r.bucket) == 0 then
    redis.call('ZREM', wheel_key(k.q), string.match(r.bucket, ':(%d+)$'))
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
  KEYS: ready delayed ids dead
  ARGV: id
  Returns {state, id, entry, due, consumer, idle_ms, deliveries, fields}:
  state delayed | retrying | ready | running | dead | not found; entry the
  stream entry id (ready, running, dead; else ""); due the delayed score
  (Unix ms, 3 decimals; else ""); consumer, idle_ms, deliveries of a running
  job ("", 0, 0 otherwise); fields the job's field/value list (a stream or
  dead entry as stored; a delayed member without its leading id).
]]
local function job_locate(keys, args)
  local k, id = job_call('jr_locate', keys, args, {'ready', 'delayed', 'ids', 'dead'})
  if not k then return id end
  local r = locate(k, id)
  if not r then return {'not found', id, '', '', '', 0, 0, {}} end
  return {r.state, id, r.entry or '', r.score or '', r.consumer or '', r.idle or 0, r.deliveries or 0, r.flat}
end

--[[
jr_cancel: cancel one job.
  KEYS: ready delayed ids cancelled uniq   (uniq = jr:{Q}:uniq:ID)
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
local function job_cancel(keys, args)
  local k, id = job_call('jr_cancel', keys, args, {'ready', 'delayed', 'ids', 'cancelled'}, true)
  if not k then return id end
  local r = locate(k, id)
  if not r then return 'not found' end
  if r.state == 'running' then
    redis.call('HSET', k.cancelled, r.entry, string.format('%d', math.floor(now_ms())))
    return 'running'
  end
  remove_waiting(k, id, r, 'cancelled')
  return 'cancelled'
end

--[[
jr_run_now: make a delayed or retrying job ready now.
  KEYS: ready delayed ids
  ARGV: id
  Returns {state before, entry id}: for delayed and retrying, the new
  stream entry (the job keeps its id, attempt and fields); for ready and
  running, its entry, unchanged; {"not found", ""} otherwise.
]]
local function job_run_now(keys, args)
  local fn = 'jr_run_now'
  local k, id = job_call(fn, keys, args, {'ready', 'delayed', 'ids'})
  if not k then return id end
  local r = locate(k, id)
  if not r then return {'not found', ''} end
  if not r.member and not r.bucket then return {r.state, r.entry} end
  local err = check_room(fn, k.ready)
  if err then return err end
  ensure_group(k.ready)
  local e = redis.call('XADD', k.ready, '*', 'id', id, unpack(r.flat))
  if r.member then redis.call('ZREM', k.delayed, r.member) else wheel_forget(k, r) end
  index_set(k.ids, id, e)
  return {r.state, e}
end

--[[
jr_delete: delete one job that is not running.
  KEYS: ready delayed ids dead uniq   (uniq = jr:{Q}:uniq:ID)
  ARGV: id
  Removes a delayed, retrying or ready job (with its index entry) or its
  newest dead entry; its idempotency key stays until its window ends, as a
  tombstone "deleted" (see tombstone). A running job is left alone
  (use jr_cancel). Returns {state, 1 if deleted else 0}.
]]
local function job_delete(keys, args)
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
  end
  return {r.state, 1}
end

redis.register_function{function_name = 'jr_locate', callback = job_locate, flags = {'no-writes'}}
allow_oom('jr_cancel', job_cancel)
redis.register_function('jr_run_now', job_run_now)
allow_oom('jr_delete', job_delete)

--[[
jr_delayed_page: a page of a queue's delayed jobs, both tiers (flag
no-writes), for `jobrunner jobs --state delayed`.
  KEYS: delayed (jr:{Q}:delayed)
  ARGV: cursor count   cursor "" (first page) or the one a page returned;
        count 1..10000
  Returns {next cursor or "" at the end, member, score, member, score, ...}:
  members as in the sorted set (msgpack id, field, value, ...), scores
  the due time. The sorted set comes first, by due time (cursor
  "<score>/<skip>"), then the time wheel bucket by bucket (cursor
  "w<start>/<position>"), each bucket in enqueue order (by n). A bucket
  item that is not a job is returned as stored, scored at its bucket's start.
]]
local function delayed_page(keys, args)
  local fn = 'jr_delayed_page'
  local q, err = queue_of(fn, keys, {'delayed'})
  if not q then return err end
  local cursor, limit = args[1], int_arg(args[2])
  if #args ~= 2 or not limit or limit < 1 or limit > 10000 then
    return refuse(fn, 'arguments: CURSOR ("" or one a page returned) COUNT (1..10000)')
  end
  local wheel = wheel_key(q)
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
redis.register_function{function_name = 'jr_delayed_page', callback = delayed_page, flags = {'no-writes'}}


-- Remove the consumers of stopped processes from a queue's group: each one
-- that holds no pending entry, has been idle at least min_idle ms, and is
-- not among the live names given. Check and XGROUP DELCONSUMER happen in
-- this one atomic call, because DELCONSUMER drops a consumer's pending
-- entries and a consumer could get one between a separate check and the
-- delete. KEYS: ready stream. ARGV: min_idle_ms, live consumer names...
-- Returns how many consumers were removed (0 without stream or group).
local function prune_consumers(keys, args)
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

allow_oom('jr_prune_consumers', prune_consumers)

-- Forget, from the index of live processes (KEYS[1], jr:{procs}), each name
-- given whose entry jr:{procs}:<name> is gone (expired or deleted). The
-- check and the ZREM are one atomic step: a process that announces itself
-- again between a reader's look and its removal stays listed (its later
-- refreshes only renew the entry's time to live, not the index).
-- ARGV: names. Returns how many were forgotten.
local function procs_forget(keys, args)
  local n = 0
  for _, name in ipairs(args) do
    if redis.call('EXISTS', keys[1] .. ':' .. name) == 0 then
      n = n + redis.call('ZREM', keys[1], name)
    end
  end
  return n
end

allow_oom('jr_procs_forget', procs_forget)
