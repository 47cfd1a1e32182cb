--[[
50-cron.lua: the periodic schedules. The names of this part are local to
its do-block (the joined chunk may hold at most 200 locals at once), but
for the functions it gives the registration list.
]]
local cron_set, cron_del, cron_fired, cron_list
do -- 50-cron.lua

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
  -- the types of the keys the call names, which are all it reaches (revision 18)
  local types, spec = {'hash', 'hash', 'stream'}, {}
  for i = 1, #want do spec[i] = {CRON_KEYS[want[i]], types[want[i]]} end
  return check_types(fn, spec)
end

function cron_set(keys, args)
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

function cron_del(keys, args)
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

function cron_fired(keys, args)
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

function cron_list(keys)
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

end -- 50-cron.lua
