--[[
45-partitions.lua: the number of partitions of a queue (revision 19;
docs/redis-contract.md "Partitions").

jr_partitions_set
  KEYS: jr:{queues}:partitions, then for each internal queue to check (the
        unpartitioned queue Q and every partition Q#J of the current and of
        the new count, each once): jr:{X}:ready jr:{X}:delayed jr:{X}:wheel:n
        jr:{X}:dead. Or jr:{queues}:partitions alone: the caller checked
        that the queues hold no job (on a Redis Cluster, where those keys
        span slots: see docs/redis-contract.md "Partitions").
  ARGV: Q, N (1..1024), the count the caller read (1 when absent)
  Sets the partitions of queue Q to N (N = 1 removes Q's field). Refuses,
  writing nothing, unless the hash holds the count the caller read (it
  changed meanwhile: read and try again), and while any queue checked holds
  a job: ready or running (the ready stream's length), delayed or retrying
  (the delayed set), in the time wheel (wheel:n) or dead.
  Returns {"unchanged", N} or {"changed", previous count}.
  On a Redis Cluster the keys span slots: see docs/redis-contract.md.
]]
local partitions_set
do -- 45-partitions.lua

function partitions_set(keys, args)
  local fn = 'jr_partitions_set'
  local q, n, seen = args[1], int_arg(args[2]), int_arg(args[3])
  if not queue_ok(q) then return refuse(fn, 'queue name ' .. shown(q) .. ' is not valid (' .. QUEUE_RULE .. ')') end
  if not n or n < 1 or n > 1024 then return refuse(fn, 'partitions ' .. shown(args[2]) .. ' must be 1..1024') end
  if not seen or seen < 1 then return refuse(fn, 'the count read ' .. shown(args[3]) .. ' must be 1..1024') end
  if keys[1] ~= 'jr:{queues}:partitions' or (#keys - 1) % 4 ~= 0 then
    return refuse(fn, 'takes the keys jr:{queues}:partitions and 4 keys per queue checked, got ' .. #keys .. ' keys')
  end
  local err = check_types(fn, {{keys[1], 'hash'}})
  if err then return err end
  local cur = redis.call('HGET', keys[1], q)
  local now = cur and int_arg(cur) or 1
  if cur and not int_arg(cur) then now = -1 end
  if now ~= seen then
    return refuse(fn, 'the partitions of queue ' .. shown(q) .. ' changed meanwhile (now ' .. shown(cur or '1') ..
                  ', read ' .. seen .. '): read them again')
  end
  if now == n then return {'unchanged', n} end
  local held = {ready = 0, delayed = 0, wheel = 0, dead = 0}
  local suffixes = {K_READY, K_DELAYED, K_WHEEL_N, K_DEAD}
  for g = 2, #keys, 4 do
    local x = string.match(keys[g], '^jr:{(.*)}:' .. K_READY .. '$')
    local base = x and (string.match(x, '^(.*)#%d+$') or x)
    if base ~= q or not key_queue_ok(x) then
      return refuse(fn, 'key ' .. g .. ' must be jr:{' .. q .. '}:ready or jr:{' .. q .. '#<J>}:ready, got ' .. shown(keys[g]))
    end
    for k = 2, 4 do
      if keys[g + k - 1] ~= qkey(x, suffixes[k]) then
        return refuse(fn, 'key ' .. (g + k - 1) .. ' must be ' .. shown(qkey(x, suffixes[k])) .. ', got ' .. shown(keys[g + k - 1]))
      end
    end
    err = check_types(fn, {{keys[g], 'stream'}, {keys[g + 1], 'zset'}, {keys[g + 2], 'string'}, {keys[g + 3], 'stream'}})
    if err then return err end
    held.ready = held.ready + redis.call('XLEN', keys[g])
    held.delayed = held.delayed + redis.call('ZCARD', keys[g + 1])
    held.wheel = held.wheel + (tonumber(redis.call('GET', keys[g + 2]) or '0') or 0)
    held.dead = held.dead + redis.call('XLEN', keys[g + 3])
  end
  if held.ready + held.delayed + held.wheel + held.dead > 0 then
    return refuse(fn, 'queue ' .. shown(q) .. ' has ' .. now .. ' partition(s) and holds jobs (' .. held.ready ..
                  ' ready or running, ' .. held.delayed .. ' delayed or retrying, ' .. held.wheel .. ' in the time wheel, ' ..
                  held.dead .. ' dead): its partitions cannot change to ' .. n ..
                  ' until it is empty (let the workers drain it; dead purge)')
  end
  if n == 1 then redis.call('HDEL', keys[1], q) else redis.call('HSET', keys[1], q, n) end
  return {'changed', now}
end

end -- 45-partitions.lua
